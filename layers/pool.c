/* pool.c - max pooling (K x K window, stride s, no padding, floor mode) and global
 * average pooling, NCHW (see pool.h).
 *
 * maxpool2d
 *   forward:  out[n, c, oy, ox] = max_{0 <= ky, kx < K} in[n, c, oy*s + ky, ox*s + kx]
 *             argmax[n, c, oy, ox] = flat index into in [N, C, H, W] of the first maximum
 *             (row-major scan of the window, strict >, so ties keep the earliest, as PyTorch)
 *   backward: the max is locally the identity on the chosen input and constant in the others, so
 *             din[i] = sum over outputs j with argmax[j] == i of dout[j]
 *             (with stride < K windows overlap and one input can win several of them: scatter-ADD
 *             into a zeroed din).
 *
 * global average pooling
 *   forward:  out[n, c] = (1/HW) sum_i in[n, c, i]
 *   backward: din[n, c, i] = dout[n, c] / HW
 *
 * average pooling over H (time, for a log-mel image [C, T, I])
 *   forward:  out[n, c, w] = (1/H) sum_h in[n, c, h, w]
 *   backward: every in[n, c, h, w] enters out[n, c, w] with weight 1/H and no other output, so
 *             din[n, c, h, w] = dout[n, c, w] / H
 */
#include <string.h>
#include "core/hot.h"
#include "core/threads.h"
#include "layers/pool.h"

ct_status ct_maxpool2d_dims_make(maxpool2d_dims *d, int N, int C, int H, int W, int K, int stride)
{
    if (N < 1 || C < 1 || H < 1 || W < 1)
        return ct_fail(CT_EINVAL, "maxpool2d: sizes must be positive, got batch %d, channels %d, input %dx%d", N, C, H, W);
    if (K < 1)
        return ct_fail(CT_EINVAL, "maxpool2d: window %d must be at least 1", K);
    if (stride < 1)
        return ct_fail(CT_EINVAL, "maxpool2d: stride %d must be at least 1", stride);
    if (K > H || K > W)
        return ct_fail(CT_EINVAL, "maxpool2d: window %dx%d is larger than the input %dx%d (no padding); "
                       "use a smaller window or a larger input (fewer pooling steps before this layer)", K, K, H, W);
    *d = (maxpool2d_dims){ .N = N, .C = C, .H = H, .W = W, .K = K, .stride = stride,
                           .OH = (H - K) / stride + 1, .OW = (W - K) / stride + 1 };
    return CT_OK;
}

/* Max pooling runs plane by plane ([n, c] images), and the planes are shared by
 * the workers (core/threads.h: ct_parallel_range over plane indices). */
typedef struct {
    float *out, *din;
    int *argmax;
    const float *in, *dout;
    const int *argmax_in;
    const maxpool2d_dims *d;
} maxpool_job;

CT_HOT
static void maxpool_forward_planes(void *ctx, size_t lo, size_t hi)
{
    const maxpool_job *j = ctx;
    const maxpool2d_dims *d = j->d;
    const int H = d->H, W = d->W, K = d->K, s = d->stride, OH = d->OH, OW = d->OW;
    for (int pl = (int)lo; pl < (int)hi; pl++) {
        const int base = pl * H * W;                       /* flat index of in[n, c, 0, 0] */
        const float *inp = j->in + base;                   /* [H, W] */
        float *outp = j->out + (size_t)pl * OH * OW;       /* [OH, OW] */
        int *amp = j->argmax + (size_t)pl * OH * OW;       /* [OH, OW] */
        if (K == 2 && s == 2) {                            /* the common 2x2 window, unrolled (same order and ties) */
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    const int i0 = 2 * oy * W + 2 * ox, c[4] = { i0, i0 + 1, i0 + W, i0 + W + 1 };
                    int best = i0;
                    for (int k = 1; k < 4; k++) if (inp[c[k]] > inp[best]) best = c[k];
                    outp[oy * OW + ox] = inp[best];
                    amp[oy * OW + ox] = base + best;
                }
            continue;
        }
        for (int oy = 0; oy < OH; oy++) {
            for (int ox = 0; ox < OW; ox++) {
                int best = (oy * s) * W + ox * s;          /* window's top-left corner */
                float m = inp[best];
                for (int ky = 0; ky < K; ky++) {
                    const int row = (oy * s + ky) * W + ox * s;
                    for (int kx = 0; kx < K; kx++)
                        if (inp[row + kx] > m) { m = inp[row + kx]; best = row + kx; }
                }
                outp[oy * OW + ox] = m;
                amp[oy * OW + ox] = base + best;
            }
        }
    }
}

void ct_maxpool2d_forward(float *out, int *argmax, const float *in, const maxpool2d_dims *d)
{
    maxpool_job j = { .out = out, .argmax = argmax, .in = in, .d = d };
    const size_t planes = (size_t)d->N * d->C;
    ct_parallel_range(planes, planes * d->H * d->W, maxpool_forward_planes, &j);
}

/* Each window's gradient goes to its argmax, which lies in the window's own plane. */
CT_HOT
static void maxpool_backward_planes(void *ctx, size_t lo, size_t hi)
{
    const maxpool_job *j = ctx;
    const maxpool2d_dims *d = j->d;
    const size_t in_plane = (size_t)d->H * d->W, out_plane = (size_t)d->OH * d->OW;
    float *din = j->din;
    const float *dout = j->dout;
    const int *argmax = j->argmax_in;
    for (size_t pl = lo; pl < hi; pl++) {   /* plane by plane: each plane zeroed while in the cache, then added into */
        memset(din + pl * in_plane, 0, in_plane * sizeof *din);
        for (size_t k = pl * out_plane; k < (pl + 1) * out_plane; k++) din[argmax[k]] += dout[k];
    }
}

void ct_maxpool2d_backward(float *din, const float *dout, const int *argmax, const maxpool2d_dims *d)
{
    maxpool_job j = { .din = din, .dout = dout, .argmax_in = argmax, .d = d };
    const size_t planes = (size_t)d->N * d->C;
    ct_parallel_range(planes, planes * d->H * d->W, maxpool_backward_planes, &j);
}

void ct_global_avgpool_forward(float *out, const float *in, int N, int C, int HW)
{
    const float inv = 1.0f / (float)HW;
    for (int nc = 0; nc < N * C; nc++) {
        const float *x = in + (size_t)nc * HW;             /* [HW] */
        float s = 0.0f;
        for (int i = 0; i < HW; i++) s += x[i];
        out[nc] = s * inv;
    }
}

void ct_global_avgpool_backward(float *din, const float *dout, int N, int C, int HW)
{
    const float inv = 1.0f / (float)HW;
    for (int nc = 0; nc < N * C; nc++) {
        float *dx = din + (size_t)nc * HW;                 /* [HW] */
        const float g = dout[nc] * inv;
        for (int i = 0; i < HW; i++) dx[i] = g;
    }
}

void ct_avgpool_h_forward(float *out, const float *in, int N, int C, int H, int W)
{
    const float inv = 1.0f / (float)H;
    for (int nc = 0; nc < N * C; nc++) {
        const float *x = in + (size_t)nc * H * W;          /* [H, W] */
        float *o = out + (size_t)nc * W;                   /* [W] */
        for (int w = 0; w < W; w++) o[w] = 0.0f;
        for (int h = 0; h < H; h++)                        /* row by row: contiguous reads */
            for (int w = 0; w < W; w++) o[w] += x[(size_t)h * W + w];
        for (int w = 0; w < W; w++) o[w] *= inv;
    }
}

void ct_avgpool_h_backward(float *din, const float *dout, int N, int C, int H, int W)
{
    const float inv = 1.0f / (float)H;
    for (int nc = 0; nc < N * C; nc++) {
        float *dx = din + (size_t)nc * H * W;              /* [H, W] */
        const float *g = dout + (size_t)nc * W;            /* [W] */
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) dx[(size_t)h * W + w] = g[w] * inv;
    }
}
