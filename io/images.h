/* images.h - a labelled image set in memory, NCHW floats in [0, 1], and a
 * synthetic generator for tests and demos (each class is a bar of its own
 * orientation and position, drawn with jitter and noise).
 */
#ifndef CT_IMAGES_H
#define CT_IMAGES_H
#include <stdint.h>
#include "core/error.h"

typedef struct {
    int n, c, h, w, classes;
    float *x;      /* [n, c, h, w] */
    int *labels;   /* [n], each in [0, classes) */
} ct_images;

ct_status ct_images_synthetic(ct_images *im, int n, int classes, int h, int w, float noise, uint64_t seed);
void      ct_images_free(ct_images *im);
/* Copy n images and their labels into a batch: x [n, c, h, w], labels [n]. The
 * images taken are order[first .. first+n) when order is not NULL, else
 * first .. first+n. */
void      ct_images_gather(float *x, int *labels, const ct_images *im, const int *order, long first, int n);

#endif
