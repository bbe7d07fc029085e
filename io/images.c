/* images.c - in-memory labelled images and the synthetic generator (see images.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "io/images.h"
#include "core/rng.h"

void ct_images_free(ct_images *im)
{
    free(im->x);
    free(im->labels);
    memset(im, 0, sizeof *im);
}

/* Class k draws a bright bar through the image centre (shifted by up to two
 * pixels) at angle pi k / classes, of half-width ~1 pixel, on uniform noise. */
ct_status ct_images_synthetic(ct_images *im, int n, int classes, int h, int w, float noise, uint64_t seed)
{
    memset(im, 0, sizeof *im);
    if (n < 1 || classes < 2 || h < 4 || w < 4) return ct_fail(CT_EINVAL, "synthetic images: need n >= 1, >= 2 classes, at least 4x4 pixels");
    im->n = n; im->c = 1; im->h = h; im->w = w; im->classes = classes;
    im->x = ct_malloc((size_t)n * h * w * sizeof *im->x, "synthetic images");
    im->labels = ct_malloc((size_t)n * sizeof *im->labels, "synthetic images");
    if (!im->x || !im->labels) { ct_images_free(im); return CT_ENOMEM; }
    ct_rng r;
    ct_rng_seed(&r, seed, 0x1a6eULL);
    for (int i = 0; i < n; i++) {
        int k = (int)ct_rng_below(&r, (uint32_t)classes);
        float ang = 3.14159265f * k / classes, ca = cosf(ang), sa = sinf(ang);
        float cy = h / 2.0f + 4.0f * ct_rng_uniform(&r) - 2.0f, cx = w / 2.0f + 4.0f * ct_rng_uniform(&r) - 2.0f;
        float *img = im->x + (size_t)i * h * w;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                float dist = fabsf(-(y - cy) * ca + (x - cx) * sa);   /* distance to the bar's axis */
                float v = expf(-dist * dist) + noise * ct_rng_uniform(&r);
                img[y * w + x] = v > 1.0f ? 1.0f : v;
            }
        im->labels[i] = k;
    }
    return CT_OK;
}

void ct_images_gather(float *x, int *labels, const ct_images *im, const int *order, long first, int n)
{
    size_t px = (size_t)im->c * im->h * im->w;
    for (int k = 0; k < n; k++) {
        long i = order ? order[first + k] : first + k;
        memcpy(x + k * px, im->x + (size_t)i * px, px * sizeof *x);
        labels[k] = im->labels[i];
    }
}
