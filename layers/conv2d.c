/* conv2d.c - 2-D convolution (cross-correlation), NCHW, on OpenBLAS: im2col +
 * one cblas_sgemm per image (see conv2d.h for the formula and conventions), or,
 * for 3x3 stride-1 layers, the Winograd path of conv2d_winograd.c.
 *
 * Notation, per image n:
 *   K   = C*KH*KW          rows of the column matrix (one per filter tap)
 *   P   = OH*OW            columns (one per output position)
 *   col [K, P]             col[(c*KH + ky)*KW + kx, oy*OW + ox] = in[n, c, oy*s + ky - p, ox*s + kx - p]
 *                          (0 where that position falls into the padding)
 *   W   [OC, K]            the filters, which is exactly w [OC, C, KH, KW] read row-major
 *
 * forward:   out_n [OC, P] = W x col (+ b[o] on row o)
 * backward:  dW [OC, K]   += dout_n [OC, P] x col^T [P, K]
 *            db[o]        += sum_P dout_n[o, :]
 *            dcol [K, P]   = W^T x dout_n
 *            din_n         = col2im(dcol): each col entry is added back to the input
 *                            pixel it was copied from (pixels that sit under several
 *                            windows collect several contributions; padding drops out)
 *
 * 1x1 kernels with stride 1 and no padding skip im2col altogether: col is then the
 * image itself ([C, H*W]) and dcol is din_n, so the gemms read and write in/din directly.
 */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "core/hot.h"
#include "core/threads.h"
#include "layers/conv2d.h"
#include "layers/conv2d_winograd.h"

ct_status ct_conv2d_dims_make(conv2d_dims *d, int N, int C, int H, int W, int OC, int KH, int KW, int stride, int pad)
{
    if (N < 1 || C < 1 || H < 1 || W < 1 || OC < 1)
        return ct_fail(CT_EINVAL, "conv2d: sizes must be positive, got batch %d, input channels %d, input %dx%d, "
                       "output channels %d", N, C, H, W, OC);
    if (KH < 1 || KW < 1)
        return ct_fail(CT_EINVAL, "conv2d: kernel %dx%d must be at least 1x1", KH, KW);
    if (stride < 1)
        return ct_fail(CT_EINVAL, "conv2d: stride %d must be at least 1", stride);
    if (pad < 0)
        return ct_fail(CT_EINVAL, "conv2d: padding %d must be 0 or more", pad);
    if (KH > H + 2 * pad || KW > W + 2 * pad)
        return ct_fail(CT_EINVAL, "conv2d: kernel %dx%d is larger than the padded input %dx%d (input %dx%d, padding %d); "
                       "use a smaller kernel, more padding, or a larger input (fewer pooling steps before this layer)",
                       KH, KW, H + 2 * pad, W + 2 * pad, H, W, pad);
    int OH = (H + 2 * pad - KH) / stride + 1, OW = (W + 2 * pad - KW) / stride + 1;
    /* gemm sizes are ints: K*P and OC*P per image and N*C*H*W overall must fit */
    if ((int64_t)C * KH * KW * OH * OW > INT32_MAX || (int64_t)OC * OH * OW > INT32_MAX ||
        (int64_t)N * C * H * W > INT32_MAX || (int64_t)N * OC * OH * OW > INT32_MAX)
        return ct_fail(CT_EINVAL, "conv2d: layer too large (batch %d, %d->%d channels, input %dx%d, kernel %dx%d): "
                       "more than 2^31 elements in one buffer; use a smaller batch or input", N, C, OC, H, W, KH, KW);
    *d = (conv2d_dims){ .N = N, .C = C, .H = H, .W = W, .OC = OC, .KH = KH, .KW = KW,
                        .stride = stride, .pad = pad, .OH = OH, .OW = OW };
    d->winograd = ct_conv2d_winograd_ok(d) && C >= CONV2D_WINOGRAD_MIN_C;
    d->workers = ct_threads_get() < CT_MAX_WORKERS ? ct_threads_get() : CT_MAX_WORKERS;
    if (d->workers > N) d->workers = N;
    return CT_OK;
}

ct_status ct_conv2d_params_add(conv2d_ids *ids, ct_params *ps, const char *prefix, const conv2d_dims *d, int bias)
{
    char name[CT_NAME_MAX + 8];
    int wshape[4] = { d->OC, d->C, d->KH, d->KW };
    snprintf(name, sizeof name, "%s/w", prefix);
    ids->w = ct_params_add(ps, name, 4, wshape, ct_init_glorot(d->C * d->KH * d->KW, d->OC * d->KH * d->KW));
    if (ids->w < 0) return CT_EINVAL;
    ids->b = -1;
    if (bias) {
        snprintf(name, sizeof name, "%s/b", prefix);
        ids->b = ct_params_add(ps, name, 1, &d->OC, ct_init_zeros());
        if (ids->b < 0) return CT_EINVAL;
    }
    return CT_OK;
}

/* 1x1, stride 1, no padding: the image already is its column matrix. */
static int conv2d_is_pointwise(const conv2d_dims *d)
{
    return d->KH == 1 && d->KW == 1 && d->stride == 1 && d->pad == 0;
}

size_t ct_conv2d_workspace_floats(const conv2d_dims *d)
{
    if (d->winograd) return ct_conv2d_winograd_workspace_floats(d);
    /* per worker, one image's column matrix [C*KH*KW, OH*OW] (backward reuses it for dcol),
     * and a partial dW [OC, C*KH*KW] for each worker after the first */
    const size_t K = (size_t)d->C * d->KH * d->KW;
    return (size_t)d->workers * K * d->OH * d->OW + (size_t)(d->workers - 1) * d->OC * K;
}

/* The output columns ox whose input column ix = ox*s + kx - p lies inside [0, W):
 * ox in [lo, hi). Everything left of lo and right of hi reads padding. */
static void conv2d_valid_range(int *lo, int *hi, int k, int s, int p, int size, int osize)
{
    /* ox*s + k - p >= 0      <=>  ox >= ceil((p - k) / s)
     * ox*s + k - p <= size-1 <=>  ox <= floor((size - 1 + p - k) / s) */
    int a = p - k, b = size - 1 + p - k;
    int l = a <= 0 ? 0 : (a + s - 1) / s;
    int h = b < 0 ? 0 : b / s + 1;
    if (h > osize) h = osize;
    if (l > h) l = h;
    *lo = l; *hi = h;
}

/* col [C*KH*KW, OH*OW] <- receptive fields of one image im [C, H, W]. */
CT_HOT
static void im2col(float *col, const float *im, const conv2d_dims *d)
{
    const int C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, s = d->stride, p = d->pad;
    const int OH = d->OH, OW = d->OW;
    for (int c = 0; c < C; c++) {
        const float *imc = im + (size_t)c * H * W;                      /* [H, W] */
        for (int ky = 0; ky < KH; ky++) {
            for (int kx = 0; kx < KW; kx++) {
                float *dst = col + ((size_t)(c * KH + ky) * KW + kx) * OH * OW;   /* row of this tap, [OH, OW] */
                int xlo, xhi;
                conv2d_valid_range(&xlo, &xhi, kx, s, p, W, OW);
                const int ix0 = xlo * s + kx - p;                       /* input column of ox = xlo */
                for (int oy = 0; oy < OH; oy++, dst += OW) {
                    const int iy = oy * s + ky - p;
                    if (iy < 0 || iy >= H) { memset(dst, 0, (size_t)OW * sizeof *dst); continue; }
                    const float *src = imc + (size_t)iy * W + ix0;
                    for (int ox = 0; ox < xlo; ox++) dst[ox] = 0.0f;
                    if (s == 1) memcpy(dst + xlo, src, (size_t)(xhi - xlo) * sizeof *dst);
                    else for (int ox = xlo, j = 0; ox < xhi; ox++, j += s) dst[ox] = src[j];
                    for (int ox = xhi; ox < OW; ox++) dst[ox] = 0.0f;
                }
            }
        }
    }
}

/* im [C, H, W] += col2im(col): the adjoint of im2col (padding entries are dropped). */
CT_HOT
static void col2im_add(float *im, const float *col, const conv2d_dims *d)
{
    const int C = d->C, H = d->H, W = d->W, KH = d->KH, KW = d->KW, s = d->stride, p = d->pad;
    const int OH = d->OH, OW = d->OW;
    for (int c = 0; c < C; c++) {
        float *imc = im + (size_t)c * H * W;
        for (int ky = 0; ky < KH; ky++) {
            for (int kx = 0; kx < KW; kx++) {
                const float *src = col + ((size_t)(c * KH + ky) * KW + kx) * OH * OW;
                int xlo, xhi;
                conv2d_valid_range(&xlo, &xhi, kx, s, p, W, OW);
                const int ix0 = xlo * s + kx - p, n = xhi - xlo;
                for (int oy = 0; oy < OH; oy++, src += OW) {
                    const int iy = oy * s + ky - p;
                    if (iy < 0 || iy >= H) continue;
                    float *dst = imc + (size_t)iy * W + ix0;
                    const float *sx = src + xlo;
                    if (s == 1) for (int j = 0; j < n; j++) dst[j] += sx[j];
                    else        for (int j = 0; j < n; j++) dst[(size_t)j * s] += sx[j];
                }
            }
        }
    }
}

/* ---- the im2col path: one image per task, shared by d->workers threads ----
 * Workspace: one column matrix [K, P] per worker, then, with several workers,
 * a partial dW [OC, K] for each worker but the first (added in worker order). */
typedef struct {
    const conv2d_dims *d;
    float *ws, *out, *din, *dw;
    const float *in, *w, *b, *dout;
} conv_job;

static size_t col_floats(const conv2d_dims *d) { return (size_t)d->C * d->KH * d->KW * d->OH * d->OW; }

static void forward_image(void *ctx, int n, int worker)
{
    const conv_job *j = ctx;
    const conv2d_dims *d = j->d;
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC;
    const float *in_n = j->in + (size_t)n * d->C * d->H * d->W;   /* [C, H, W] */
    float *out_n = j->out + (size_t)n * OC * P;                    /* [OC, P] */
    const float *col = in_n;                                       /* [K, P] */
    if (!conv2d_is_pointwise(d)) {
        float *ws = j->ws + (size_t)worker * col_floats(d);
        im2col(ws, in_n, d);
        col = ws;
    }
    /* out_n [OC, P] = W [OC, K] x col [K, P] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, P, K, 1.0f, j->w, K, col, P, 0.0f, out_n, P);
    if (j->b) {
        for (int o = 0; o < OC; o++) {
            float *row = out_n + (size_t)o * P, bo = j->b[o];
            for (int i = 0; i < P; i++) row[i] += bo;
        }
    }
}

static void backward_image(void *ctx, int n, int worker)
{
    const conv_job *j = ctx;
    const conv2d_dims *d = j->d;
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC, W = d->workers;
    const size_t in_img = (size_t)d->C * d->H * d->W;
    const float *in_n = j->in + (size_t)n * in_img;                /* [C, H, W] */
    const float *dout_n = j->dout + (size_t)n * OC * P;            /* [OC, P] */
    float *ws = j->ws + (size_t)worker * col_floats(d);
    /* dW [OC, K] += dout_n [OC, P] x col^T [P, K]   (col rebuilt: it is not kept from forward);
     * workers other than the first sum into their own partial dW, started at their first image */
    float *dw = worker == 0 ? j->dw : j->ws + (size_t)W * col_floats(d) + (size_t)(worker - 1) * OC * K;
    const float beta = worker == 0 || n != worker ? 1.0f : 0.0f;
    const float *col = in_n;
    if (!conv2d_is_pointwise(d)) { im2col(ws, in_n, d); col = ws; }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, OC, K, P, 1.0f, dout_n, P, col, P, beta, dw, K);
    if (!j->din) return;
    float *din_n = j->din + (size_t)n * in_img;
    if (conv2d_is_pointwise(d)) {
        /* dcol is din_n itself: din_n [C, H*W] = W^T [C, OC] x dout_n [OC, H*W] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, P, OC, 1.0f, j->w, K, dout_n, P, 0.0f, din_n, P);
        return;
    }
    /* dcol [K, P] = W^T [K, OC] x dout_n [OC, P], into the workspace (col is no longer needed) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, P, OC, 1.0f, j->w, K, dout_n, P, 0.0f, ws, P);
    memset(din_n, 0, in_img * sizeof *din_n);
    col2im_add(din_n, ws, d);
}

void ct_conv2d_forward(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d)
{
    if (d->winograd) { ct_conv2d_winograd_forward(out, ws, in, w, b, d); return; }
    conv_job j = { .d = d, .ws = ws, .out = out, .in = in, .w = w, .b = b };
    ct_parallel(d->N, d->workers, forward_image, &j);
}

void ct_conv2d_backward(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                     const float *w, const conv2d_dims *d)
{
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC;
    /* db[o] += sum over images and positions of dout[n, o, :] */
    for (int n = 0; db && n < d->N; n++) {
        const float *dout_n = dout + (size_t)n * OC * P;           /* [OC, P] */
        for (int o = 0; o < OC; o++) {
            const float *row = dout_n + (size_t)o * P;
            float s = 0.0f;
            for (int i = 0; i < P; i++) s += row[i];
            db[o] += s;
        }
    }
    if (d->winograd) { ct_conv2d_winograd_backward(din, dw, ws, dout, in, w, d); return; }
    conv_job j = { .d = d, .ws = ws, .din = din, .dw = dw, .in = in, .w = w, .dout = dout };
    const int used = ct_parallel(d->N, d->workers, backward_image, &j);
    for (int k = 1; k < used; k++) {
        const float *part = ws + (size_t)d->workers * col_floats(d) + (size_t)(k - 1) * OC * K;
        for (size_t i = 0; i < (size_t)OC * K; i++) dw[i] += part[i];
    }
}
