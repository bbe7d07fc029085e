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
 *
 * The packed variant (d->packed, CPUs with AVX-512) runs the same three products on
 * the 6x64 register-blocked kernel of gemm_packed.h, which wants its right-hand
 * operand cut into panels of 64 columns ([ceil(cols/64)][rows][64]):
 *   forward:  out_n [OC, P]   = W [OC, K] x col [K, P]        col written by im2col straight
 *                                                              into panels of 64 positions, or
 *                                                              not built at all (wide positions,
 *                                                              below)
 *   dW^T:     dWT [K, OC]    += col [K, P] x dout_n^T [P, OC]  dout_n transposed into panels
 *                                                              of 64 output channels
 *   dcol:     dcol [K, P]     = W^T [K, OC] x dout_n [OC, P]   dout_n cut into panels of 64
 *                                                              positions
 * dW is summed transposed (64 output channels fill a panel exactly in the mnist_cnn,
 * where K = 288 would leave a half-empty one) and added to dw at the end.
 *
 * A layer with one input channel and stride 1 on an AVX-512 CPU (d->direct1: the first
 * layer on a spectrogram or a grey image) is neither lowered nor transformed: conv2d_c1.c
 * computes it directly, its image in L1, in float32 and in bf16. It can apply the relu after
 * it as it stores its output (ct_conv2d_forward_relu), and take its weight gradient from
 * dout's planes made one at a time by the layer after it (ct_conv2d_backward_planes).
 *
 * A layer on the packed path whose output only a max pooling reads can pool each image's
 * output from the worker's scratch, where the product leaves it, and make its dout from the
 * pool's gradient image by image (ct_conv2d_forward_pool, ct_conv2d_backward_pool): the map
 * between the two layers is never in memory.
 *
 * The bf16 variant (ct_conv2d_forward_bf16, ct_conv2d_backward_bf16; at the end of this
 * file) runs the plain im2col path's products on layers/gemm_bf16.h: bf16 operands,
 * float32 sums, the same workers and the same order of the partial dW sums. Stride-1
 * layers whose input channels are a multiple of 16 run instead, on the AMX tiles (and
 * their C model), conv2d_direct_bf16.c: no column matrix and no col2im at all.
 */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "core/hot.h"
#include "core/threads.h"
#include "core/bf16.h"
#include "layers/batchnorm.h"   /* ct_batchnorm_planes_stats: the output planes' statistics */
#include "layers/conv2d.h"
#include "layers/conv2d_c1.h"
#include "layers/conv2d_direct_bf16.h"
#include "layers/conv2d_winograd.h"
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"
#include "layers/pool.h"        /* ct_maxpool2d_plane: a maxpool after the layer, image by image */

static size_t round16(size_t f) { return (f + 15) / 16 * 16; }

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
    d->direct1 = ct_kernels_get() == CT_KERNELS_AVX512 && ct_conv2d_c1_fits(d);
    d->packed = !d->direct1 && ct_kernels_get() == CT_KERNELS_AVX512 && C * KH * KW >= CONV2D_PACKED_MIN_K;   /* AVX2 CPUs: Winograd, below */
    d->winograd = !d->packed && ct_conv2d_winograd_ok(d) && C >= CONV2D_WINOGRAD_MIN_C;
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

static size_t packed_worker_floats(const conv2d_dims *d);

static size_t c1_workspace_floats(const conv2d_dims *d);

size_t ct_conv2d_workspace_floats(const conv2d_dims *d)
{
    if (d->direct1) return c1_workspace_floats(d);
    if (d->winograd) return ct_conv2d_winograd_workspace_floats(d);
    if (d->packed) return (size_t)d->workers * packed_worker_floats(d) + (size_t)d->N * d->OC;
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

/* The gather below works on elements of es bytes: float32 columns (4) and, for the bf16
 * path, bf16 ones (2) gathered from the image rounded once. Both are inlined with es a
 * constant, so that every memcpy of one element is a plain move. */
#define CT_INLINE static inline __attribute__((always_inline))

/* dst [n] <- outputs ox0 .. ox0+n-1 of one tap on one output row: the input row
 * `src` (NULL: a row of padding) read from its column ix0 at output xlo with stride
 * s, zero outside the valid outputs [xlo, xhi). */
CT_INLINE void tap_row(char *dst, int ox0, int n, const char *src, int xlo, int xhi, int s, size_t es)
{
    const int end = ox0 + n;
    if (!src) { memset(dst, 0, (size_t)n * es); return; }
    int lo = xlo > ox0 ? xlo : ox0, hi = xhi < end ? xhi : end;
    if (hi < lo) hi = lo;
    const int zl = (lo < end ? lo : end) - ox0, zr = hi > ox0 ? hi : ox0;   /* zeros: [ox0, ox0+zl) and [zr, end) */
    if (zl > 0) memset(dst, 0, (size_t)zl * es);
    if (s == 1) memcpy(dst + (size_t)(lo - ox0) * es, src + (size_t)(lo - xlo) * es, (size_t)(hi - lo) * es);
    else for (int ox = lo; ox < hi; ox++) memcpy(dst + (size_t)(ox - ox0) * es, src + (size_t)(ox - xlo) * s * es, es);
    if (zr < end) memset(dst + (size_t)(zr - ox0) * es, 0, (size_t)(end - zr) * es);
}

/* Row k of the column matrix, tap (c, ky, kx) with k = (c KH + ky) KW + kx, gathered from
 * one image im [C, H, W]: position pos = oy OW + ox goes to row[(pos / width) panel + pos %
 * width] (row: where position 0 goes; panel in elements). width = P, one panel: a plain row
 * of P. */
CT_INLINE void im2col_tap_es(char *row, int width, size_t panel, const char *im, const conv2d_dims *d, int k, size_t es)
{
    const int H = d->H, W = d->W, KH = d->KH, KW = d->KW, s = d->stride, p = d->pad, OH = d->OH, OW = d->OW;
    const int c = k / (KH * KW), ky = k / KW % KH, kx = k % KW;
    const char *imc = im + (size_t)c * H * W * es;                      /* [H, W] */
    int xlo, xhi;
    conv2d_valid_range(&xlo, &xhi, kx, s, p, W, OW);
    const int ix0 = xlo * s + kx - p;                                   /* input column of ox = xlo */
    for (int oy = 0; oy < OH; oy++) {
        const int iy = oy * s + ky - p;
        const char *src = iy < 0 || iy >= H ? NULL : imc + ((size_t)iy * W + ix0) * es;
        if (width >= OH * OW) { tap_row(row + (size_t)oy * OW * es, 0, OW, src, xlo, xhi, s, es); continue; }   /* one panel */
        for (int ox = 0; ox < OW;) {                                    /* the row, cut at panel edges */
            const int pos = oy * OW + ox, q = pos % width, n = width - q < OW - ox ? width - q : OW - ox;
            tap_row(row + ((size_t)(pos / width) * panel + q) * es, ox, n, src, xlo, xhi, s, es);
            ox += n;
        }
    }
}

static void im2col_tap(float *row, int width, size_t panel, const float *im, const conv2d_dims *d, int k)
{
    im2col_tap_es((char *)row, width, panel, (const char *)im, d, k, sizeof *row);
}

/* row [P] <- row k of the column matrix in bf16, from the image rounded to bf16, imb [C, H, W] */
static void im2col_tap_bf16(uint16_t *row, const uint16_t *imb, const conv2d_dims *d, int k)
{
    im2col_tap_es((char *)row, d->OH * d->OW, 0, (const char *)imb, d, k, sizeof *row);
}

/* col <- receptive fields of one image im [C, H, W]: the matrix [K, P] (K = C*KH*KW,
 * P = OH*OW) cut into panels of `width` columns, [ceil(P/width)][K][width], element
 * (k, p) at (p / width) K width + k width + p % width. width = P is the plain
 * row-major [K, P]; width = CT_GEMM_NR is gemm_packed's panel layout (the columns
 * of the last panel past P are zeroed). */
CT_HOT
static void im2col(float *col, int width, const float *im, const conv2d_dims *d)
{
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW;
    const size_t panel = (size_t)K * width;
    for (int k = 0; k < K; k++) im2col_tap(col + (size_t)k * width, width, panel, im, d, k);
    if (P % width)   /* the last panel's columns past P */
        for (int k = 0; k < K; k++)
            memset(col + (size_t)(P / width) * panel + (size_t)k * width + P % width, 0,
                   (size_t)(width - P % width) * sizeof *col);
}

/* im [C, H, W] += row k of a column matrix, row [P], added back to the pixels tap k copied
 * them from (padding entries are dropped). */
CT_HOT
static void col2im_tap_add(float *im, const float *row, const conv2d_dims *d, int k)
{
    const int H = d->H, W = d->W, KH = d->KH, KW = d->KW, s = d->stride, p = d->pad, OH = d->OH, OW = d->OW;
    const int c = k / (KH * KW), ky = k / KW % KH, kx = k % KW;
    float *imc = im + (size_t)c * H * W;
    int xlo, xhi;
    conv2d_valid_range(&xlo, &xhi, kx, s, p, W, OW);
    const int ix0 = xlo * s + kx - p, n = xhi - xlo;
    for (int oy = 0; oy < OH; oy++, row += OW) {
        const int iy = oy * s + ky - p;
        if (iy < 0 || iy >= H) continue;
        float *dst = imc + (size_t)iy * W + ix0;
        const float *sx = row + xlo;
        if (s == 1) for (int j = 0; j < n; j++) dst[j] += sx[j];
        else        for (int j = 0; j < n; j++) dst[(size_t)j * s] += sx[j];
    }
}

/* im [C, H, W] += col2im(col): the adjoint of im2col, tap after tap. */
static void col2im_add(float *im, const float *col, const conv2d_dims *d)
{
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW;
    for (int k = 0; k < K; k++) col2im_tap_add(im, col + (size_t)k * P, d, k);
}

/* ---- the im2col path: one image per task, shared by d->workers threads ----
 * Workspace: one column matrix [K, P] per worker, then, with several workers,
 * a partial dW [OC, K] for each worker but the first (added in worker order). */
typedef struct {
    const conv2d_dims *d;
    float *ws, *out, *din, *dw;
    const float *in, *w, *b, *dout;
    int round;      /* the one-channel path: 1 in bf16 */
    int relu;       /* the one-channel path's forward: a relu over the output (ct_conv2d_forward_relu); with pooled,
                     * a relu after the pool */
    float *pooled;  /* the packed path's forward: NULL, or out is not written but max-pooled (pd) into pooled, argmax */
    int *argmax;
    const maxpool2d_dims *pd;
    const float *dpooled;   /* the packed path's backward: NULL, or dout is made image by image from the pool's */
    const int *dargmax;     /* gradient and argmax (pd), never read from memory */
    float *bsum;    /* the one-channel path: db's share of each image [N, OC], or NULL */
    double *stats;  /* forward: the output planes' statistics [N, OC, 2], or NULL */
    ct_conv2d_plane_fn plane;   /* the one-channel path's backward: dout made plane by plane (NULL: j->dout) */
    const void *plane_ctx;
} conv_job;

/* stats [n, :, :] from out_n [OC, P], just written and still in the cache */
static void image_stats(const conv_job *j, int n)
{
    const conv2d_dims *d = j->d;
    const int P = d->OH * d->OW;
    if (j->stats) ct_batchnorm_planes_stats(j->stats + (size_t)2 * n * d->OC, j->out + (size_t)n * d->OC * P, d->OC, P);
}

/* For a path that does not work image by image (Winograd's chunks): the statistics in a
 * pass of their own over out, image by image on the workers. */
static void stats_image(void *ctx, int n, int worker)
{
    (void)worker;
    image_stats(ctx, n);
}

static size_t col_floats(const conv2d_dims *d) { return (size_t)d->C * d->KH * d->KW * d->OH * d->OW; }

/* out_n [OC, P] += b [OC], broadcast over the P output positions */
static void add_bias(float *out_n, const float *b, int OC, int P)
{
    for (int o = 0; o < OC; o++) {
        float *row = out_n + (size_t)o * P, bo = b[o];
        for (int i = 0; i < P; i++) row[i] += bo;
    }
}

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
        im2col(ws, P, in_n, d);
        col = ws;
    }
    /* out_n [OC, P] = W [OC, K] x col [K, P] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, P, K, 1.0f, j->w, K, col, P, 0.0f, out_n, P);
    if (j->b) add_bias(out_n, j->b, OC, P);
    image_stats(j, n);
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
    if (!conv2d_is_pointwise(d)) { im2col(ws, P, in_n, d); col = ws; }
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

/* ---- the packed path (d->packed): the same products on gemm_packed's kernel ----
 *
 * Wide positions. With stride 1, tap (c, ky, kx) reads in[c, oy + ky - p, ox + kx - p]
 * = inp_c[p' + ky Wp + kx] at p' = oy Wp + ox, where inp is the image with its padding
 * (the image itself when p = 0, else a copy of it into [C, H + 2p, Wp = W + 2p] with
 * zeros around): numbered along the padded rows, each row of col is ONE contiguous run
 * of inp, and col is never built: the kernel reads row k straight from inp, at the
 * run's offset, as B in forward (ct_gemm_rowoffsets) and as A in the weight gradient
 * (ct_gemm_packed_arows). Measured on the mnist_cnn's conv64k3 (Zen 4, per batch of 128):
 * forward 15.9-16.3 -> 14.6-14.8 ms, backward 31.2-32.0 -> 30.4-30.9 ms against building
 * col from the runs. The products run over the Pw = (OH-1) Wp + OW wide positions; the
 * Wp - OW columns ox >= OW at the end of each row (but the last) are computed and
 * dropped by forward, and carry a zero output gradient in dW. (The last run ends at
 * inp_c[(H+2p-1) Wp + Wp - 1]: nothing is read past inp.) Other strides use im2col's
 * positions p = oy OW + ox (Pw = P), and din is always dcol on those positions + col2im.
 *
 * Workspace, per worker: a partial dW^T [K, OC], then either forward's column
 * matrix in panels ([ceil(Pw/64)][K][64]; on wide positions only the runs' offsets
 * [K] at its start) and its output on the wide positions [OC, Pw], or backward's
 * col [K, Pw] (the runs' offsets, or dcol [K, P]), dout_n^T in panels ([ceil(OC/64)][Pw][64])
 * and dout_n in panels ([ceil(P/64)][OC][64]); then, with padding, inp. */
static int conv2d_is_wide(const conv2d_dims *d) { return d->stride == 1; }
static int wide_row(const conv2d_dims *d) { return d->W + 2 * d->pad; }     /* Wp: a row of inp */
static int wide_positions(const conv2d_dims *d) { return conv2d_is_wide(d) ? (d->OH - 1) * wide_row(d) + d->OW : d->OH * d->OW; }
static size_t wide_image_floats(const conv2d_dims *d)   /* inp, when it is a copy */
{
    return conv2d_is_wide(d) && d->pad > 0 ? (size_t)d->C * (d->H + 2 * d->pad) * wide_row(d) : 0;
}

static size_t packed_stage_floats(const conv2d_dims *d) { return round16((size_t)d->OC * d->OH * d->OW); }

static size_t packed_worker_floats(const conv2d_dims *d)
{
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC, Pw = wide_positions(d);
    const size_t fwd = ct_gemm_pack_floats(K, Pw) + (size_t)OC * Pw;
    const size_t bwd = (size_t)K * (Pw > P ? Pw : P) + ct_gemm_pack_floats(Pw, OC) + ct_gemm_pack_floats(OC, P);
    return (size_t)K * OC + (fwd > bwd ? fwd : bwd) + packed_stage_floats(d) + wide_image_floats(d);
}

/* A worker's stage [OC, P]: an image's dout made from the pool's gradient (ct_conv2d_backward_pool). */
static float *packed_stage(const conv_job *j, int worker)
{
    const conv2d_dims *d = j->d;
    return j->ws + (size_t)(worker + 1) * packed_worker_floats(d) - wide_image_floats(d) - packed_stage_floats(d);
}

/* The bias-gradient sums of each image [N, OC] (ct_conv2d_backward_pool), after the workers' regions. */
static float *packed_bias_sums(const conv_job *j) { return j->ws + (size_t)j->d->workers * packed_worker_floats(j->d); }

/* The column matrix of image in_n on the wide positions, as the products read it in place
 * (ct_gemm_rowoffsets, ct_gemm_packed_arows): returns inp (in_n itself without padding, else
 * its padded copy, made in the last wide_image_floats of the worker's workspace region
 * `region`) and fills run [K] with where row k = (c*KH + ky)*KW + kx starts in it:
 * c (H + 2p) Wp + ky Wp + kx, Pw floats long. col itself is never built. */
static const float *wide_operand(int *run, const conv2d_dims *d, const float *in_n, float *region)
{
    const int K = d->C * d->KH * d->KW, p = d->pad, Hp = d->H + 2 * p, Wp = wide_row(d);
    for (int k = 0; k < K; k++)
        run[k] = (k / (d->KH * d->KW)) * Hp * Wp + (k / d->KW % d->KH) * Wp + k % d->KW;
    if (p == 0) return in_n;
    float *inp = region + packed_worker_floats(d) - wide_image_floats(d);
    memset(inp, 0, wide_image_floats(d) * sizeof *inp);
    for (int c = 0; c < d->C; c++)
        for (int y = 0; y < d->H; y++)
            memcpy(inp + ((size_t)c * Hp + y + p) * Wp + p, in_n + ((size_t)c * d->H + y) * d->W, (size_t)d->W * sizeof *inp);
    return inp;
}

/* dst <- dout_n^T [Pw, OC] in panels of 64 channels ([ceil(OC/64)][Pw][64]), on the
 * positions of the products: row p' holds dout_n[:, oy, ox], zero for the wide
 * columns ox >= OW and for the channels past OC. */
static void pack_dout_transposed(float *dst, const float *dout_n, const conv2d_dims *d)
{
    const int OC = d->OC, P = d->OH * d->OW, Pw = wide_positions(d), rw = conv2d_is_wide(d) ? wide_row(d) : d->OW;
    const int panels = (OC + CT_GEMM_NR - 1) / CT_GEMM_NR;
    for (int pn = 0; pn < panels; pn++) {
        float *dp = dst + (size_t)pn * Pw * CT_GEMM_NR;             /* [Pw][64] */
        const int o0 = pn * CT_GEMM_NR, no = OC - o0 < CT_GEMM_NR ? OC - o0 : CT_GEMM_NR;
        for (int pw = 0; pw < Pw; pw++) {
            float *row = dp + (size_t)pw * CT_GEMM_NR;
            const int oy = pw / rw, ox = pw % rw;
            if (ox >= d->OW) { memset(row, 0, CT_GEMM_NR * sizeof *row); continue; }
            const float *src = dout_n + (size_t)o0 * P + (size_t)oy * d->OW + ox;   /* dout_n[o0, oy, ox] */
            for (int o = 0; o < no; o++) row[o] = src[(size_t)o * P];
            for (int o = no; o < CT_GEMM_NR; o++) row[o] = 0.0f;
        }
    }
}

static void forward_image_packed(void *ctx, int n, int worker)
{
    const conv_job *j = ctx;
    const conv2d_dims *d = j->d;
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC, Pw = wide_positions(d);
    const float *in_n = j->in + (size_t)n * d->C * d->H * d->W;   /* [C, H, W] */
    float *out_n = j->out + (size_t)n * OC * P;                    /* [OC, P] */
    float *colp = j->ws + (size_t)worker * packed_worker_floats(d) + (size_t)K * OC;   /* [ceil(Pw/64)][K][64] */
    if (!conv2d_is_wide(d)) {
        im2col(colp, CT_GEMM_NR, in_n, d);
        for (int o = 0; j->b && o < OC; o++)                       /* out_n starts as the bias ... */
            for (int i = 0; i < P; i++) out_n[(size_t)o * P + i] = j->b[o];
        /* ... += W [OC, K] x col [K, P] */
        ct_gemm_packed(OC, P, K, j->w, K, 0, colp, out_n, P, j->b != NULL);
        image_stats(j, n);
        return;
    }
    /* wide [OC, Pw] = W [OC, K] x col [K, Pw], col's row k = (c*KH + ky)*KW + kx read in place as
     * the run of inp at c (H + 2p) Wp + ky Wp + kx (not copied); out_n = its columns ox < OW, + b */
    float *wide = colp + ct_gemm_pack_floats(K, Pw);
    int *run = (int *)(void *)colp;   /* [K]: where each row of col starts in inp (colp is not built here) */
    const float *inp = wide_operand(run, d, in_n, j->ws + (size_t)worker * packed_worker_floats(d));
    ct_gemm_rowoffsets(OC, Pw, K, j->w, K, inp, run, wide, Pw, 0);
    if (j->pooled) {   /* out_n [OC, P] (+ b) made over wide in place, then pooled from there; out is not written.
                        * In place: each value moves to an index no larger, and is read before anything is written there */
        for (int o = 0; o < OC; o++) {
            const float bo = j->b ? j->b[o] : 0.0f;
            for (int oy = 0; oy < d->OH; oy++)
                for (int ox = 0; ox < d->OW; ox++)
                    wide[(size_t)o * P + (size_t)oy * d->OW + ox] = wide[(size_t)o * Pw + (size_t)oy * wide_row(d) + ox] + bo;
        }
        ct_maxpool2d_image(j->pooled, j->argmax, wide, n, j->pd, j->relu);
        return;
    }
    for (int o = 0; o < OC; o++) {
        const float bo = j->b ? j->b[o] : 0.0f;
        for (int oy = 0; oy < d->OH; oy++) {
            const float *src = wide + (size_t)o * Pw + (size_t)oy * wide_row(d);
            float *dst = out_n + (size_t)o * P + (size_t)oy * d->OW;
            for (int ox = 0; ox < d->OW; ox++) dst[ox] = src[ox] + bo;
        }
    }
    image_stats(j, n);
}

static void backward_image_packed(void *ctx, int n, int worker)
{
    const conv_job *j = ctx;
    const conv2d_dims *d = j->d;
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC, Pw = wide_positions(d);
    const size_t in_img = (size_t)d->C * d->H * d->W;
    const float *in_n = j->in + (size_t)n * in_img;                /* [C, H, W] */
    const float *dout_n;                                           /* [OC, P] */
    if (!j->dpooled) dout_n = j->dout + (size_t)n * OC * P;
    else {   /* made in the stage from the pool's gradient; db's share taken while it is in the cache */
        float *stage = packed_stage(j, worker);
        ct_maxpool2d_image_backward(stage, j->dpooled, j->dargmax, n, j->pd);
        for (int o = 0; j->bsum && o < OC; o++) j->bsum[(size_t)n * OC + o] = ct_conv2d_bias_sum(stage + (size_t)o * P, P);
        dout_n = stage;
    }
    float *dwt = j->ws + (size_t)worker * packed_worker_floats(d); /* this worker's dW^T [K, OC] */
    float *col = dwt + (size_t)K * OC;                             /* [K, Pw], later dcol [K, P] */
    float *doutT = col + (size_t)K * (Pw > P ? Pw : P);            /* dout_n^T [Pw, OC] in panels of 64 channels */
    float *doutp = doutT + ct_gemm_pack_floats(Pw, OC);            /* dout_n [OC, P] in panels of 64 positions */
    /* dW^T [K, OC] += col [K, Pw] x dout_n^T [Pw, OC]; a worker's first image (n == worker) starts its sum */
    pack_dout_transposed(doutT, dout_n, d);
    if (conv2d_is_wide(d) && !conv2d_is_pointwise(d)) {   /* col's rows read in place: the runs of inp */
        int *run = (int *)(void *)col;   /* [K] (col is not built) */
        const float *inp = wide_operand(run, d, in_n, dwt);
        ct_gemm_packed_arows(K, OC, Pw, inp, run, doutT, dwt, OC, n != worker);
    } else {
        const float *colr = in_n;
        if (!conv2d_is_pointwise(d)) { im2col(col, P, in_n, d); colr = col; }
        ct_gemm_packed(K, OC, Pw, colr, Pw, 0, doutT, dwt, OC, n != worker);
    }
    if (!j->din) return;
    /* dcol [K, P] = W^T [K, OC] x dout_n [OC, P]; for 1x1 kernels dcol is din_n itself */
    float *din_n = j->din + (size_t)n * in_img;
    ct_gemm_pack(doutp, dout_n, P, 0, OC, P);
    ct_gemm_packed(K, P, OC, j->w, K, 1, doutp, conv2d_is_pointwise(d) ? din_n : col, P, 0);
    if (conv2d_is_pointwise(d)) return;
    memset(din_n, 0, in_img * sizeof *din_n);
    col2im_add(din_n, col, d);
}

/* ---- one input channel (d->direct1): conv2d_c1.c's functions, one image per task ----
 * Workspace: per worker, its scratch (the padded image; dout's padded planes for din) and
 * the image's dW_n [OC, K]; then a partial dW [OC, K] for each worker but the first, added
 * in worker order as on the im2col path; then db's share of each image [N, OC], taken
 * while the image's dout is in the cache and added image by image in order (the float32
 * layer's sums: the same bits as bias_grad). Float32 and bf16 (j->round) alike. */
static size_t c1_worker_floats(const conv2d_dims *d)
{
    return ct_conv2d_c1_worker_floats(d, 1) + round16((size_t)d->OC * d->KH * d->KW);
}

static size_t c1_workspace_floats(const conv2d_dims *d)
{
    const size_t OCK = (size_t)d->OC * d->KH * d->KW;
    return (size_t)d->workers * c1_worker_floats(d) + (size_t)(d->workers - 1) * OCK + (size_t)d->N * d->OC;
}

static void forward_image_c1(void *ctx, int n, int worker)
{
    const conv_job *j = ctx;
    const conv2d_dims *d = j->d;
    ct_conv2d_c1_forward_image(j->out + (size_t)n * d->OC * d->OH * d->OW, j->ws + (size_t)worker * c1_worker_floats(d),
                               j->in + (size_t)n * d->H * d->W, j->w, j->b, d, j->round, j->relu,
                               j->stats ? j->stats + (size_t)2 * n * d->OC : NULL);
}

static void backward_image_c1(void *ctx, int n, int worker)
{
    const conv_job *j = ctx;
    const conv2d_dims *d = j->d;
    const int K = d->KH * d->KW, P = d->OH * d->OW, OC = d->OC;
    float *scratch = j->ws + (size_t)worker * c1_worker_floats(d);
    float *dw_n = scratch + ct_conv2d_c1_worker_floats(d, 1);      /* [OC, K] */
    float *bsum_n = j->bsum ? j->bsum + (size_t)n * OC : NULL;    /* [OC] */
    if (j->plane) {   /* dout's planes made here one at a time, each taken while it is in L1 */
        const float *img = ct_conv2d_c1_pad_image(scratch, j->in + (size_t)n * d->H * d->W, d, j->round);
        float *dout_o = ct_conv2d_c1_plane_buffer(scratch, d);     /* [OH, OW] */
        for (int o = 0; o < OC; o++) {
            j->plane(j->plane_ctx, dout_o, n, o);
            ct_conv2d_c1_dw_plane(dw_n + (size_t)o * K, dout_o, img, d, j->round);
            if (bsum_n) bsum_n[o] = ct_conv2d_bias_sum(dout_o, P);
        }
    } else {
        const float *dout_n = j->dout + (size_t)n * OC * P;        /* [OC, P] */
        ct_conv2d_c1_backward_image(dw_n, j->din ? j->din + (size_t)n * d->H * d->W : NULL, scratch, dout_n,
                                    j->in + (size_t)n * d->H * d->W, j->w, d, j->round);
        if (bsum_n)
            for (int o = 0; o < OC; o++) bsum_n[o] = ct_conv2d_bias_sum(dout_n + (size_t)o * P, P);
    }
    /* workers but the first sum into their own partial dW, started (overwritten) at their first image */
    float *dw = worker == 0 ? j->dw : j->ws + (size_t)d->workers * c1_worker_floats(d) + (size_t)(worker - 1) * OC * K;
    if (worker == 0 || n != worker) for (int i = 0; i < OC * K; i++) dw[i] += dw_n[i];
    else                            memcpy(dw, dw_n, (size_t)OC * K * sizeof *dw);
}

static void c1_forward(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d, int round,
                       int relu, double *stats)
{
    conv_job j = { .d = d, .ws = ws, .out = out, .in = in, .w = w, .b = b, .round = round, .relu = relu, .stats = stats };
    ct_parallel(d->N, d->workers, forward_image_c1, &j);
}

static void dw_sum(float *dw, const float *part0, size_t stride, int first, int used, int transposed, const conv2d_dims *d);

/* dout from memory, or (j->plane) made plane by plane */
static void c1_backward_job(conv_job *j, float *db)
{
    const conv2d_dims *d = j->d;
    const size_t OCK = (size_t)d->OC * d->KH * d->KW, parts = (size_t)d->workers * c1_worker_floats(d);
    j->bsum = db ? j->ws + parts + (size_t)(d->workers - 1) * OCK : NULL;
    const int used = ct_parallel(d->N, d->workers, backward_image_c1, j);
    dw_sum(j->dw, j->ws + parts, OCK, 1, used, 0, d);
    if (db)   /* image by image, in order: the float32 layer's additions */
        for (int n = 0; n < d->N; n++)
            for (int o = 0; o < d->OC; o++) db[o] += j->bsum[(size_t)n * d->OC + o];
}

static void c1_backward(float *din, float *dw, float *db, float *ws, const float *dout, const float *in, const float *w,
                        const conv2d_dims *d, int round)
{
    conv_job j = { .d = d, .ws = ws, .din = din, .dw = dw, .in = in, .w = w, .dout = dout, .round = round };
    c1_backward_job(&j, db);
}

int ct_conv2d_backward_planes_fits(const conv2d_dims *d)
{
    return d->direct1;
}

void ct_conv2d_backward_planes(float *dw, float *db, float *ws, ct_conv2d_plane_fn plane, const void *ctx, const float *in,
                               const conv2d_dims *d, int bf16)
{
    CT_ASSERT(ct_conv2d_backward_planes_fits(d));
    conv_job j = { .d = d, .ws = ws, .dw = dw, .in = in, .round = bf16, .plane = plane, .plane_ctx = ctx };
    c1_backward_job(&j, db);
}

void ct_conv2d_forward_relu(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d,
                            int bf16)
{
    CT_ASSERT(ct_conv2d_backward_planes_fits(d));
    c1_forward(out, ws, in, w, b, d, bf16, 1, NULL);
}

void ct_conv2d_forward(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d,
                       double *stats)
{
    if (d->direct1) { c1_forward(out, ws, in, w, b, d, 0, 0, stats); return; }
    conv_job j = { .d = d, .ws = ws, .out = out, .in = in, .w = w, .b = b, .stats = stats };
    if (d->winograd) {
        ct_conv2d_winograd_forward(out, ws, in, w, b, d);
        if (stats) ct_parallel(d->N, d->workers, stats_image, &j);
        return;
    }
    ct_parallel(d->N, d->workers, d->packed ? forward_image_packed : forward_image, &j);
}

/* db [OC] += sum over images and positions of dout [N, OC, P], float32 in every path, for
 * the channels [lo, hi) on each worker (ct_parallel_range): every channel's sum is made by
 * one worker, over the images in order, so the split changes no bit. */
typedef struct { float *db; const float *dout; const conv2d_dims *d; } bias_grad_job;

static void bias_grad_range(void *ctx, size_t lo, size_t hi)
{
    const bias_grad_job *j = ctx;
    const int P = j->d->OH * j->d->OW, OC = j->d->OC;
    for (int n = 0; n < j->d->N; n++) {
        const float *dout_n = j->dout + (size_t)n * OC * P;        /* [OC, P] */
        for (size_t o = lo; o < hi; o++) j->db[o] += ct_conv2d_bias_sum(dout_n + o * P, P);
    }
}

static void bias_grad(float *db, const float *dout, const conv2d_dims *d)
{
    bias_grad_job j = { db, dout, d };
    ct_parallel_range((size_t)d->OC, (size_t)d->N * d->OC * d->OH * d->OW, bias_grad_range, &j);
}

/* dw [OC, K] += the workers' partial filter gradients, added in worker order, for the output
 * channels [lo, hi) on each thread (ct_parallel_range). Partial k (k = first .. used-1) is at
 * part0 + (k - first) stride: dW^T [K, OC] on the packed path, which starts at worker 0;
 * dW [OC, K] on the others, whose worker 0 summed straight into dw. Each value sees the
 * workers in the same order however the channels are split. */
typedef struct {
    float *dw;
    const float *part0;
    size_t stride, K, OC;
    int first, used, transposed;
} dw_sum_job;

static void dw_sum_range(void *ctx, size_t lo, size_t hi)
{
    const dw_sum_job *j = ctx;
    const size_t K = j->K, OC = j->OC;
    for (int k = j->first; k < j->used; k++) {
        const float *part = j->part0 + (size_t)(k - j->first) * j->stride;
        if (j->transposed)
            for (size_t o = lo; o < hi; o++)
                for (size_t i = 0; i < K; i++) j->dw[o * K + i] += part[i * OC + o];
        else
            for (size_t i = lo * K; i < hi * K; i++) j->dw[i] += part[i];
    }
}

static void dw_sum(float *dw, const float *part0, size_t stride, int first, int used, int transposed, const conv2d_dims *d)
{
    dw_sum_job j = { .dw = dw, .part0 = part0, .stride = stride, .K = (size_t)d->C * d->KH * d->KW, .OC = (size_t)d->OC,
                     .first = first, .used = used, .transposed = transposed };
    ct_parallel_range(j.OC, j.OC * j.K * (size_t)used, dw_sum_range, &j);
}

int ct_conv2d_pool_fits(const conv2d_dims *d, const maxpool2d_dims *pd)
{
    return d->packed && conv2d_is_wide(d) && ct_maxpool2d_image_fits(pd, d->N, d->OC, d->OH, d->OW);
}

void ct_conv2d_forward_pool(float *pooled, int *argmax, float *ws, const float *in, const float *w, const float *b,
                            const conv2d_dims *d, const maxpool2d_dims *pd, int relu)
{
    CT_ASSERT(ct_conv2d_pool_fits(d, pd));
    conv_job j = { .d = d, .ws = ws, .in = in, .w = w, .b = b, .pooled = pooled, .argmax = argmax, .pd = pd, .relu = relu };
    ct_parallel(d->N, d->workers, forward_image_packed, &j);
}

void ct_conv2d_backward_pool(float *din, float *dw, float *db, float *ws, const float *dpooled, const int *argmax,
                             const maxpool2d_dims *pd, const float *in, const float *w, const conv2d_dims *d)
{
    CT_ASSERT(ct_conv2d_pool_fits(d, pd));
    conv_job j = { .d = d, .ws = ws, .din = din, .dw = dw, .in = in, .w = w, .dpooled = dpooled, .dargmax = argmax, .pd = pd };
    j.bsum = db ? packed_bias_sums(&j) : NULL;
    const int used = ct_parallel(d->N, d->workers, backward_image_packed, &j);
    dw_sum(dw, ws, packed_worker_floats(d), 0, used, 1, d);
    if (db)   /* image by image, in order: bias_grad's additions */
        for (int n = 0; n < d->N; n++)
            for (int o = 0; o < d->OC; o++) db[o] += j.bsum[(size_t)n * d->OC + o];
}

void ct_conv2d_backward(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                     const float *w, const conv2d_dims *d)
{
    if (d->direct1) { c1_backward(din, dw, db, ws, dout, in, w, d, 0); return; }
    if (db) bias_grad(db, dout, d);
    if (d->winograd) { ct_conv2d_winograd_backward(din, dw, ws, dout, in, w, d); return; }
    conv_job j = { .d = d, .ws = ws, .din = din, .dw = dw, .in = in, .w = w, .dout = dout };
    if (d->packed) {
        /* dw [OC, K] += the workers' dW^T [K, OC], in worker order */
        const int used = ct_parallel(d->N, d->workers, backward_image_packed, &j);
        dw_sum(dw, ws, packed_worker_floats(d), 0, used, 1, d);
        return;
    }
    const int used = ct_parallel(d->N, d->workers, backward_image, &j);
    dw_sum(dw, ws + (size_t)d->workers * col_floats(d), (size_t)d->OC * d->C * d->KH * d->KW, 1, used, 0, d);
}

/* ---- bf16 operands (layers/gemm_bf16.h): the im2col path's products on ct_gemm_bf16 ----
 * Once per batch, before the images: W [OC, K] rounded and packed as the forward's A, or
 * W^T [K, OC] as the backward's (ct_gemm_bf16_pack_a), shared by every worker.
 * Per image n on worker w (K = C*KH*KW, P = OH*OW):
 *   forward:  col [K, P] = im2col(in_n), packed as B (rounded once);
 *             out_n [OC, P] = W [OC, K] x col; + b[o] on row o, in float32
 *   backward: col^T [P, K] packed; dout_n [OC, P] rounded once (ct_gemm_bf16_pack_a);
 *             dW [OC, K] += dout_n x col^T;
 *             dout_n repacked as B (ct_gemm_bf16_pack_from_a); dcol [K, P] = W^T [K, OC] x dout_n;
 *             din_n = col2im(dcol) in float32, dcol a block of rows at a time; for 1x1 stride-1 unpadded kernels col is in_n
 *             and dcol is din_n, as in the float32 path.
 * col is never built in float32. Rounding is element by element and im2col only copies, so
 * im2col(bf16(in_n)) = bf16(im2col(in_n)) bit for bit (padding: bf16(0) = 0): each pixel is
 * rounded once (K x P elements of col come from C x H x W pixels: in the mnist_cnn's second
 * layer 166 k from 22 k), then BF16_TAPS rows of col at a time are gathered in bf16 into a
 * small buffer (16 x P, in the core's cache) and moved into their place in the packed operand
 * (ct_gemm_bf16_pack_rows_bf16; for col^T, whose columns they are, ..._cols_bf16: one panel).
 * Whole, in float32, col would be 648 KiB there, written and read back per image. dcol is
 * not built whole either: BF16_DCOL of its rows at a time are computed into a small float32
 * buffer and added into din_n by col2im right away (rows of W^T packed as A are taken 32 at a
 * time, so the blocks are whole tiles, and each row of dcol is the same sum either way).
 * Worker w's region: dcol's rows [BF16_DCOL, P] in float32, the image in bf16 [C, H, W], the
 * gathered rows in bf16 [16, P], the packed operand (the largest of the three
 * products' ct_gemm_bf16_pack_elems), the rounded-operand buffer for dout_n
 * (ct_gemm_bf16_work_elems(OC, P)), each in floats rounded up to 16 (64 bytes). After the
 * regions: a partial dW [OC, K] per worker but the first, started at its first image and
 * added in worker order, as the float32 path does; then the packed W (or W^T). */
enum { BF16_TAPS = CT_BF16_NB };   /* rows of col gathered at a time: one panel of col^T */
enum { BF16_DCOL = CT_BF16_MB };   /* rows of dcol computed at a time: two A tiles of W^T */
static size_t bf16_floats(size_t elems) { return round16((elems + 1) / 2); }   /* floats that hold `elems` bf16 */
static size_t max3z(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

static size_t bf16_pack_floats(const conv2d_dims *d)
{
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC;
    return bf16_floats(max3z(ct_gemm_bf16_pack_elems(K, P),       /* forward: col [K, P] */
                             ct_gemm_bf16_pack_elems(P, K),       /* dW: col^T [P, K] */
                             ct_gemm_bf16_pack_elems(OC, P)));    /* dcol: dout_n [OC, P] */
}

static size_t bf16_work_floats(const conv2d_dims *d)
{
    return bf16_floats(ct_gemm_bf16_work_elems(d->OC, d->OH * d->OW));   /* dW: dout_n [OC, P] */
}

/* The packed weights, shared: W [OC, K] (forward) or W^T [K, OC] (backward). */
static size_t bf16_weight_floats(const conv2d_dims *d)
{
    const int K = d->C * d->KH * d->KW, OC = d->OC;
    const size_t f = ct_gemm_bf16_work_elems(OC, K), b = ct_gemm_bf16_work_elems(K, OC);
    return bf16_floats(f > b ? f : b);
}

/* BF16_DCOL rows of dcol, [32, P], in float32; the image rounded, [C, H, W], and BF16_TAPS rows
 * of col gathered from it, [16, P], in bf16. */
static size_t bf16_dcol_floats(const conv2d_dims *d) { return round16((size_t)BF16_DCOL * d->OH * d->OW); }
static size_t bf16_img_floats(const conv2d_dims *d) { return bf16_floats((size_t)d->C * d->H * d->W); }
static size_t bf16_taps_floats(const conv2d_dims *d) { return bf16_floats((size_t)BF16_TAPS * d->OH * d->OW); }

static size_t bf16_worker_floats(const conv2d_dims *d)
{
    return bf16_dcol_floats(d) + bf16_img_floats(d) + bf16_taps_floats(d) + bf16_pack_floats(d) + bf16_work_floats(d);
}

/* Where the packed weights start: after the workers' regions and partial dWs. */
static size_t bf16_weight_offset(const conv2d_dims *d)
{
    const size_t K = (size_t)d->C * d->KH * d->KW;
    return (size_t)d->workers * bf16_worker_floats(d) + round16((size_t)(d->workers - 1) * d->OC * K);
}

/* Either path may run (which one depends on the CPU's bf16 kernel at the call): room for both. */
size_t ct_conv2d_bf16_workspace_floats(const conv2d_dims *d)
{
    if (d->direct1) return c1_workspace_floats(d);
    const size_t im2col = bf16_weight_offset(d) + bf16_weight_floats(d), direct = ct_conv2d_direct_bf16_workspace_floats(d);
    return im2col > direct ? im2col : direct;
}

static uint16_t *bf16_weights(float *ws, const conv2d_dims *d) { return (uint16_t *)(void *)(ws + bf16_weight_offset(d)); }

typedef struct {
    float    *dcol;   /* [BF16_DCOL, P]: rows of dcol */
    uint16_t *img;    /* [C, H, W]: the image rounded */
    uint16_t *taps;   /* [BF16_TAPS, P]: rows of col gathered from img */
    uint16_t *pack;   /* the packed operand B */
    uint16_t *work;   /* op(A) rounded to bf16 */
} bf16_region;

static bf16_region bf16_region_of(float *ws, const conv2d_dims *d, int worker)
{
    float *base = ws + (size_t)worker * bf16_worker_floats(d);
    float *img = base + bf16_dcol_floats(d), *taps = img + bf16_img_floats(d), *pack = taps + bf16_taps_floats(d);
    return (bf16_region){ .dcol = base, .img = (uint16_t *)(void *)img, .taps = (uint16_t *)(void *)taps,
                          .pack = (uint16_t *)(void *)pack, .work = (uint16_t *)(void *)(pack + bf16_pack_floats(d)) };
}

/* r->pack <- the column matrix of in_n [C, H, W] packed as B: col [K, P] (transposed = 0, the
 * forward's), or col^T [P, K] (1, the weight gradient's, whose columns are col's rows: 16 of
 * them, one panel, per gathering). For 1x1 stride-1 unpadded kernels col is in_n itself. */
static void pack_columns_bf16(const bf16_region *r, const float *in_n, const conv2d_dims *d, int transposed)
{
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW;
    if (conv2d_is_pointwise(d)) {
        if (transposed) ct_gemm_bf16_pack(r->pack, in_n, P, 1, P, K);
        else            ct_gemm_bf16_pack(r->pack, in_n, P, 0, K, P);
        return;
    }
    ct_bf16s_from_floats(r->img, in_n, (size_t)d->C * d->H * d->W);   /* each pixel rounded once */
    for (int k0 = 0; k0 < K; k0 += BF16_TAPS) {   /* BF16_TAPS rows of col gathered, then moved into place */
        const int kc = K - k0 < BF16_TAPS ? K - k0 : BF16_TAPS;
        for (int k = k0; k < k0 + kc; k++) im2col_tap_bf16(r->taps + (size_t)(k - k0) * P, r->img, d, k);
        if (transposed) ct_gemm_bf16_pack_cols_bf16(r->pack, r->taps, P, k0, kc, P, K);
        else            ct_gemm_bf16_pack_rows_bf16(r->pack, r->taps, P, k0, kc, K, P);
    }
}

static void forward_image_bf16(void *ctx, int n, int worker)
{
    const conv_job *j = ctx;
    const conv2d_dims *d = j->d;
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC;
    const float *in_n = j->in + (size_t)n * d->C * d->H * d->W;   /* [C, H, W] */
    float *out_n = j->out + (size_t)n * OC * P;                    /* [OC, P] */
    const bf16_region r = bf16_region_of(j->ws, d, worker);
    /* out_n [OC, P] = W [OC, K] x col [K, P] */
    pack_columns_bf16(&r, in_n, d, 0);
    ct_gemm_bf16_packed(OC, P, K, bf16_weights(j->ws, d), r.pack, out_n, P, 0);
    if (j->b) add_bias(out_n, j->b, OC, P);
    image_stats(j, n);
}

static void backward_image_bf16(void *ctx, int n, int worker)
{
    const conv_job *j = ctx;
    const conv2d_dims *d = j->d;
    const int K = d->C * d->KH * d->KW, P = d->OH * d->OW, OC = d->OC, W = d->workers;
    const size_t in_img = (size_t)d->C * d->H * d->W;
    const float *in_n = j->in + (size_t)n * in_img;                /* [C, H, W] */
    const float *dout_n = j->dout + (size_t)n * OC * P;            /* [OC, P] */
    const bf16_region r = bf16_region_of(j->ws, d, worker);
    /* dW [OC, K] += dout_n [OC, P] x col^T [P, K]; workers but the first sum into their own
     * partial dW, started (overwritten) at their first image */
    float *dw = worker == 0 ? j->dw : j->ws + (size_t)W * bf16_worker_floats(d) + (size_t)(worker - 1) * OC * K;
    const int acc = worker == 0 || n != worker;
    pack_columns_bf16(&r, in_n, d, 1);                             /* op(B) = col^T [P, K] */
    ct_gemm_bf16_pack_a(r.work, dout_n, P, 0, OC, P);             /* dout_n rounded once, for both products */
    ct_gemm_bf16_packed(OC, K, P, r.work, r.pack, dw, K, acc);
    if (!j->din) return;
    /* dcol [K, P] = W^T [K, OC] x dout_n [OC, P]: into din_n itself for 1x1 kernels; else
     * BF16_DCOL rows at a time into the small float32 buffer, each row scattered back by col2im
     * at once (the taps in order: the additions into din_n are col2im's, in its order) */
    float *din_n = j->din + (size_t)n * in_img;
    const uint16_t *wt = bf16_weights(j->ws, d);                   /* W^T [K, OC] packed as A: rows of round_up(OC, 32) */
    ct_gemm_bf16_pack_from_a(r.pack, r.work, OC, P);               /* dout_n [OC, P] as B, from its rounding */
    if (conv2d_is_pointwise(d)) { ct_gemm_bf16_packed(K, P, OC, wt, r.pack, din_n, P, 0); return; }
    memset(din_n, 0, in_img * sizeof *din_n);
    const size_t ldw = (size_t)ct_gemm_bf16_work_elems(CT_BF16_MB, OC) / CT_BF16_MB;   /* a packed row of W^T */
    for (int k0 = 0; k0 < K; k0 += BF16_DCOL) {
        const int kc = K - k0 < BF16_DCOL ? K - k0 : BF16_DCOL;
        ct_gemm_bf16_packed(kc, P, OC, wt + (size_t)k0 * ldw, r.pack, r.dcol, P, 0);   /* dcol rows k0 .. k0+kc-1 */
        for (int k = k0; k < k0 + kc; k++) col2im_tap_add(din_n, r.dcol + (size_t)(k - k0) * P, d, k);
    }
}

void ct_conv2d_forward_bf16(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d,
                            double *stats)
{
    if (d->direct1) { c1_forward(out, ws, in, w, b, d, 1, 0, stats); return; }
    if (ct_conv2d_direct_bf16_runs(d)) { ct_conv2d_direct_bf16_forward(out, ws, in, w, b, d, stats); return; }
    const int K = d->C * d->KH * d->KW;
    ct_gemm_bf16_pack_a(bf16_weights(ws, d), w, K, 0, d->OC, K);   /* W [OC, K], once for every image */
    conv_job j = { .d = d, .ws = ws, .out = out, .in = in, .w = w, .b = b, .stats = stats };
    ct_parallel(d->N, d->workers, forward_image_bf16, &j);
}

void ct_conv2d_backward_bf16(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                             const float *w, const conv2d_dims *d)
{
    const int K = d->C * d->KH * d->KW, OC = d->OC;
    if (d->direct1) { c1_backward(din, dw, db, ws, dout, in, w, d, 1); return; }
    if (ct_conv2d_direct_bf16_runs(d)) { ct_conv2d_direct_bf16_backward(din, dw, db, ws, dout, in, w, d); return; }
    if (db) bias_grad(db, dout, d);   /* float32, as the float32 layer: the same bits */
    if (din) ct_gemm_bf16_pack_a(bf16_weights(ws, d), w, K, 1, K, OC);   /* W^T [K, OC], once for every image */
    conv_job j = { .d = d, .ws = ws, .din = din, .dw = dw, .in = in, .w = w, .dout = dout };
    const int used = ct_parallel(d->N, d->workers, backward_image_bf16, &j);
    dw_sum(dw, ws + (size_t)d->workers * bf16_worker_floats(d), (size_t)OC * K, 1, used, 0, d);
}
