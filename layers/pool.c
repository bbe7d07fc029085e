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
#include <limits.h>
#include <string.h>
#include "core/hot.h"
#include "core/threads.h"
#include "layers/gemm_packed.h"   /* ct_kernels_get: the widest instruction set in use */
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

/* ---- 2x2 windows of stride 2 with AVX-512: 16 windows a vector ----
 * Two rows of 32 inputs are split into their even and odd columns (a, b in the upper row,
 * c, d in the lower), and each lane keeps the first maximum of a, b, c, d in the scalar
 * loop's order with its comparison (greater, false on NaN), so the values and indices are
 * the loop's. Backward, each input of a window gets the window's gradient where it is the
 * argmax and 0 elsewhere; with stride 2 the windows do not overlap, so that is the scatter
 * into a zeroed plane, 0 + g included (which turns -0 into +0, as the scatter does). Columns
 * and rows no window covers (odd sizes) get 0. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define POOL_AVX512 __attribute__((target("avx512f")))

POOL_AVX512 static inline __mmask16 first_lanes(int n) { return n <= 0 ? 0 : n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1); }

POOL_AVX512
static void pool2_plane_avx512(float *outp, int *amp, const float *inp, int base, int W, int OH, int OW, int relu)
{
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1)), one = _mm512_set1_epi32(1), w = _mm512_set1_epi32(W);
    for (int oy = 0; oy < OH; oy++) {
        const float *r0 = inp + (size_t)2 * oy * W, *r1 = r0 + W;
        for (int ox = 0; ox < OW; ox += 16) {
            const int m = OW - ox < 16 ? OW - ox : 16;
            const __mmask16 k = first_lanes(m), klo = first_lanes(2 * m), khi = first_lanes(2 * m - 16);
            const __m512 u0 = _mm512_maskz_loadu_ps(klo, r0 + 2 * ox), u1 = _mm512_maskz_loadu_ps(khi, r0 + 2 * ox + 16);
            const __m512 l0 = _mm512_maskz_loadu_ps(klo, r1 + 2 * ox), l1 = _mm512_maskz_loadu_ps(khi, r1 + 2 * ox + 16);
            const __m512 a = _mm512_permutex2var_ps(u0, even, u1), b = _mm512_permutex2var_ps(u0, odd, u1);
            const __m512 c = _mm512_permutex2var_ps(l0, even, l1), dd = _mm512_permutex2var_ps(l0, odd, l1);
            const __m512i ia = _mm512_add_epi32(_mm512_set1_epi32(base + 2 * oy * W + 2 * ox), even);   /* a's flat index */
            __m512 best = a;
            __m512i bi = ia;
            __mmask16 gt = _mm512_cmp_ps_mask(b, best, _CMP_GT_OQ);
            best = _mm512_mask_blend_ps(gt, best, b);
            bi = _mm512_mask_blend_epi32(gt, bi, _mm512_add_epi32(ia, one));
            gt = _mm512_cmp_ps_mask(c, best, _CMP_GT_OQ);
            best = _mm512_mask_blend_ps(gt, best, c);
            bi = _mm512_mask_blend_epi32(gt, bi, _mm512_add_epi32(ia, w));
            gt = _mm512_cmp_ps_mask(dd, best, _CMP_GT_OQ);
            best = _mm512_mask_blend_ps(gt, best, dd);
            bi = _mm512_mask_blend_epi32(gt, bi, _mm512_add_epi32(_mm512_add_epi32(ia, w), one));
            if (relu) {                                    /* relu(max): 0 and no argmax where max > 0 fails */
                const __mmask16 pos = _mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ);
                best = _mm512_maskz_mov_ps(pos, best);
                bi = _mm512_mask_blend_epi32(pos, _mm512_set1_epi32(-1), bi);
            }
            _mm512_mask_storeu_ps(outp + (size_t)oy * OW + ox, k, best);
            _mm512_mask_storeu_epi32(amp + (size_t)oy * OW + ox, k, bi);
        }
    }
}

POOL_AVX512
static void pool2_plane_backward_avx512(float *dinp, const float *doutp, const int *amp, int base, int H, int W, int OH, int OW)
{
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i one = _mm512_set1_epi32(1), w = _mm512_set1_epi32(W);
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);   /* x0 y0 x1 y1 ... x7 y7 */
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));                                 /* x8 y8 ... x15 y15 */
    const __m512 zero = _mm512_setzero_ps();
    for (int oy = 0; oy < OH; oy++) {
        float *g0 = dinp + (size_t)2 * oy * W, *g1 = g0 + W;
        for (int ox = 0; ox < OW; ox += 16) {
            const int m = OW - ox < 16 ? OW - ox : 16;
            const __mmask16 k = first_lanes(m), klo = first_lanes(2 * m), khi = first_lanes(2 * m - 16);
            const __m512 g = _mm512_maskz_loadu_ps(k, doutp + (size_t)oy * OW + ox);
            const __m512i am = _mm512_maskz_loadu_epi32(k, amp + (size_t)oy * OW + ox);
            const __m512i ia = _mm512_add_epi32(_mm512_set1_epi32(base + 2 * oy * W + 2 * ox), even);
            const __m512i ic = _mm512_add_epi32(ia, w);
            const __m512 a = _mm512_add_ps(zero, _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(am, ia), g));
            const __m512 b = _mm512_add_ps(zero, _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(am, _mm512_add_epi32(ia, one)), g));
            const __m512 c = _mm512_add_ps(zero, _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(am, ic), g));
            const __m512 dd = _mm512_add_ps(zero, _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(am, _mm512_add_epi32(ic, one)), g));
            _mm512_mask_storeu_ps(g0 + 2 * ox, klo, _mm512_permutex2var_ps(a, lo, b));
            _mm512_mask_storeu_ps(g0 + 2 * ox + 16, khi, _mm512_permutex2var_ps(a, hi, b));
            _mm512_mask_storeu_ps(g1 + 2 * ox, klo, _mm512_permutex2var_ps(c, lo, dd));
            _mm512_mask_storeu_ps(g1 + 2 * ox + 16, khi, _mm512_permutex2var_ps(c, hi, dd));
        }
        for (int x = 2 * OW; x < W; x++) g0[x] = g1[x] = 0.0f;   /* a column no window covers */
    }
    if (2 * OH < H) memset(dinp + (size_t)2 * OH * W, 0, (size_t)(H - 2 * OH) * W * sizeof *dinp);
}
#endif

CT_HOT
void ct_maxpool2d_plane(float *outp, int *amp, const float *inp, int base, const maxpool2d_dims *d, int relu)
{
    const int W = d->W, K = d->K, s = d->stride, OH = d->OH, OW = d->OW;
#if defined(__x86_64__) && defined(__GNUC__)
    if (K == 2 && s == 2 && ct_kernels_get() == CT_KERNELS_AVX512) { pool2_plane_avx512(outp, amp, inp, base, W, OH, OW, relu); return; }
#endif
    for (int oy = 0; oy < OH; oy++) {
        for (int ox = 0; ox < OW; ox++) {
            int best = (oy * s) * W + ox * s;          /* window's top-left corner */
            if (K == 2 && s == 2) {                    /* the common 2x2 window, unrolled (same order and ties) */
                const int c[3] = { best + 1, best + W, best + W + 1 };
                for (int k = 0; k < 3; k++) if (inp[c[k]] > inp[best]) best = c[k];
            } else {
                for (int ky = 0; ky < K; ky++) {
                    const int row = (oy * s + ky) * W + ox * s;
                    for (int kx = 0; kx < K; kx++)
                        if (inp[row + kx] > inp[best]) best = row + kx;
                }
            }
            const float m = inp[best];
            const int keep = !relu || m > 0.0f;        /* relu(max): 0 and no argmax where max > 0 fails */
            outp[oy * OW + ox] = keep ? m : 0.0f;
            amp[oy * OW + ox] = keep ? base + best : -1;
        }
    }
}

static void maxpool_forward_planes(void *ctx, size_t lo, size_t hi)
{
    const maxpool_job *j = ctx;
    const maxpool2d_dims *d = j->d;
    const size_t in_plane = (size_t)d->H * d->W, out_plane = (size_t)d->OH * d->OW;
    for (size_t pl = lo; pl < hi; pl++)
        ct_maxpool2d_plane(j->out + pl * out_plane, j->argmax + pl * out_plane, j->in + pl * in_plane, (int)(pl * in_plane), d, 0);
}

void ct_maxpool2d_forward(float *out, int *argmax, const float *in, const maxpool2d_dims *d)
{
    maxpool_job j = { .out = out, .argmax = argmax, .in = in, .d = d };
    const size_t planes = (size_t)d->N * d->C;
    ct_parallel_range(planes, planes * d->H * d->W, maxpool_forward_planes, &j);
}

/* Each window's gradient goes to its argmax, which lies in the window's own plane. */
CT_HOT
void ct_maxpool2d_plane_backward(float *dinp, const float *doutp, const int *amp, int base, const maxpool2d_dims *d)
{
    const int in_plane = d->H * d->W, out_plane = d->OH * d->OW;
#if defined(__x86_64__) && defined(__GNUC__)
    if (d->K == 2 && d->stride == 2 && ct_kernels_get() == CT_KERNELS_AVX512) {
        pool2_plane_backward_avx512(dinp, doutp, amp, base, d->H, d->W, d->OH, d->OW);
        return;
    }
#endif
    memset(dinp, 0, (size_t)in_plane * sizeof *dinp);
    for (int k = 0; k < out_plane; k++)
        if (amp[k] >= 0) dinp[amp[k] - base] += doutp[k];   /* -1: a window the relu zeroed (ct_maxpool2d_plane) */
}

int ct_maxpool2d_image_fits(const maxpool2d_dims *d, int N, int C, int H, int W)
{
    return d->N == N && d->C == C && d->H == H && d->W == W && (size_t)N * C * H * W <= (size_t)INT_MAX;
}

void ct_maxpool2d_image(float *pooled, int *argmax, const float *in_n, int n, const maxpool2d_dims *d, int relu)
{
    const size_t in_plane = (size_t)d->H * d->W, out_plane = (size_t)d->OH * d->OW;
    for (int c = 0; c < d->C; c++) {
        const size_t pl = (size_t)n * d->C + (size_t)c;
        ct_maxpool2d_plane(pooled + pl * out_plane, argmax + pl * out_plane, in_n + (size_t)c * in_plane, (int)(pl * in_plane),
                           d, relu);
    }
}

void ct_maxpool2d_image_backward(float *din_n, const float *dout, const int *argmax, int n, const maxpool2d_dims *d)
{
    const size_t in_plane = (size_t)d->H * d->W, out_plane = (size_t)d->OH * d->OW;
    for (int c = 0; c < d->C; c++) {
        const size_t pl = (size_t)n * d->C + (size_t)c;
        ct_maxpool2d_plane_backward(din_n + (size_t)c * in_plane, dout + pl * out_plane, argmax + pl * out_plane,
                                    (int)(pl * in_plane), d);
    }
}

static void maxpool_backward_planes(void *ctx, size_t lo, size_t hi)
{
    const maxpool_job *j = ctx;
    const maxpool2d_dims *d = j->d;
    const size_t in_plane = (size_t)d->H * d->W, out_plane = (size_t)d->OH * d->OW;
    for (size_t pl = lo; pl < hi; pl++)   /* plane by plane: each plane zeroed while in the cache, then added into */
        ct_maxpool2d_plane_backward(j->din + pl * in_plane, j->dout + pl * out_plane, j->argmax_in + pl * out_plane,
                                    (int)(pl * in_plane), d);
}

void ct_maxpool2d_backward(float *din, const float *dout, const int *argmax, const maxpool2d_dims *d)
{
    maxpool_job j = { .din = din, .dout = dout, .argmax_in = argmax, .d = d };
    const size_t planes = (size_t)d->N * d->C;
    ct_parallel_range(planes, planes * d->H * d->W, maxpool_backward_planes, &j);
}

/* The average poolings run plane by plane too, the planes shared by the workers; each
 * plane's sums are taken in one fixed order, so any number of workers gives the same bits. */
typedef struct {
    float *out;
    const float *in;
    int H, W;   /* a plane: [H, W]; global pooling: H = 1, W = HW */
} avgpool_job;

/* One plane: o [W] = the mean over the H rows of x [H, W], the rows added in order into
 * o (one running sum per column), then scaled by 1/H. The global mean is the same with the
 * plane read as [HW, 1]: one sum in order. */
CT_HOT
void ct_avgpool_h_plane(float *o, const float *x, int H, int W)
{
    const float inv = 1.0f / (float)H;
    for (int w = 0; w < W; w++) o[w] = 0.0f;
    for (int h = 0; h < H; h++)                            /* row by row: contiguous reads */
        for (int w = 0; w < W; w++) o[w] += x[(size_t)h * W + w];
    for (int w = 0; w < W; w++) o[w] *= inv;
}

/* dx [H, W] = g [W] / H on every row */
CT_HOT
void ct_avgpool_h_plane_backward(float *dx, const float *g, int H, int W)
{
    const float inv = 1.0f / (float)H;
    for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) dx[(size_t)h * W + w] = g[w] * inv;
}

/* fn over the N*C planes of [H, W] values, shared by the workers */
static void avgpool_run(void (*fn)(void *ctx, size_t lo, size_t hi), float *out, const float *in, int N, int C, int H, int W)
{
    avgpool_job j = { .out = out, .in = in, .H = H, .W = W };
    ct_parallel_range((size_t)N * C, (size_t)N * C * H * W, fn, &j);
}

static void global_avgpool_forward_planes(void *ctx, size_t lo, size_t hi)
{
    const avgpool_job *j = ctx;
    for (size_t nc = lo; nc < hi; nc++) ct_avgpool_h_plane(j->out + nc, j->in + nc * j->W, j->W, 1);   /* [HW] as [HW, 1] */
}

void ct_global_avgpool_forward(float *out, const float *in, int N, int C, int HW)
{
    avgpool_run(global_avgpool_forward_planes, out, in, N, C, 1, HW);
}

static void global_avgpool_backward_planes(void *ctx, size_t lo, size_t hi)
{
    const avgpool_job *j = ctx;
    for (size_t nc = lo; nc < hi; nc++) ct_avgpool_h_plane_backward(j->out + nc * j->W, j->in + nc, j->W, 1);
}

void ct_global_avgpool_backward(float *din, const float *dout, int N, int C, int HW)
{
    avgpool_run(global_avgpool_backward_planes, din, dout, N, C, 1, HW);
}

static void avgpool_h_forward_planes(void *ctx, size_t lo, size_t hi)
{
    const avgpool_job *j = ctx;
    for (size_t nc = lo; nc < hi; nc++) ct_avgpool_h_plane(j->out + nc * j->W, j->in + nc * j->H * j->W, j->H, j->W);
}

void ct_avgpool_h_forward(float *out, const float *in, int N, int C, int H, int W)
{
    avgpool_run(avgpool_h_forward_planes, out, in, N, C, H, W);
}

static void avgpool_h_backward_planes(void *ctx, size_t lo, size_t hi)
{
    const avgpool_job *j = ctx;
    for (size_t nc = lo; nc < hi; nc++) ct_avgpool_h_plane_backward(j->out + nc * j->H * j->W, j->in + nc * j->W, j->H, j->W);
}

void ct_avgpool_h_backward(float *din, const float *dout, int N, int C, int H, int W)
{
    avgpool_run(avgpool_h_backward_planes, din, dout, N, C, H, W);
}
