/* batchnorm.c - batch normalisation over [N, C, HW], PyTorch's semantics (see
 * batchnorm.h). Channel c of sample n is the contiguous run x[n, c, 0..HW).
 *
 * Per-channel statistics are accumulated in double, plane by plane: each plane's mean and
 * the squared deviations about it (two passes over a run that stays in the cache),
 * merged over the batch (channel_stats's comment bounds the error), so large M = N*HW or a
 * large mean do not cost digits, and a convolution just before can hand over the planes'
 * statistics it took while its output was in the cache; 32 accumulators per run keep the
 * sums vectorised. The element-wise passes stream their outputs past the
 * caches. Channels are independent and are shared by ctrain's workers
 * (core/threads.h: ct_parallel).
 *
 * Backward (train mode). With M = N*HW, xhat = (x - mu) invstd, out = gamma xhat + beta,
 * and g = dout * gamma = dL/dxhat:
 *   dbeta  += sum dout,       dgamma += sum dout xhat
 *   dL/dx   = invstd g  +  dL/dmu dmu/dx  +  dL/dvar dvar/dx, where
 *     dL/dvar = sum g (x - mu) (-1/2) invstd^3,   dvar/dx = 2 (x - mu) / M
 *     dL/dmu  = -invstd sum g  (the dvar/dmu term is 0: sum (x - mu) = 0),  dmu/dx = 1/M
 *   => din = invstd / M (M g - sum g - xhat sum g xhat)
 * and since gamma is constant per channel, sum g = gamma sum dout, sum g xhat = gamma sum dout xhat:
 *   din = gamma invstd / M (M dout - sum dout - xhat sum dout xhat)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include "core/hot.h"
#include "core/threads.h"
#include "layers/batchnorm.h"
#include "layers/gemm_packed.h"   /* ct_kernels_get: the widest instruction set in use */

ct_status ct_batchnorm_params_add(batchnorm_ids *ids, ct_params *ps, ct_params *buffers, const char *prefix, int C)
{
    char name[CT_NAME_MAX + 24];
    snprintf(name, sizeof name, "%s/gamma", prefix);
    if ((ids->gamma = ct_params_add(ps, name, 1, &C, ct_init_const(1.0f))) < 0) return CT_EINVAL;
    snprintf(name, sizeof name, "%s/beta", prefix);
    if ((ids->beta = ct_params_add(ps, name, 1, &C, ct_init_zeros())) < 0) return CT_EINVAL;
    snprintf(name, sizeof name, "%s/running_mean", prefix);
    if ((ids->running_mean = ct_params_add(buffers, name, 1, &C, ct_init_zeros())) < 0) return CT_EINVAL;
    snprintf(name, sizeof name, "%s/running_var", prefix);
    if ((ids->running_var = ct_params_add(buffers, name, 1, &C, ct_init_const(1.0f))) < 0) return CT_EINVAL;
    return CT_OK;
}

/* ---- sums over a contiguous run, in double ----
 * 32 independent accumulators in a fixed order: the compiler turns them into SIMD
 * lanes, four registers of eight doubles with AVX-512, so that four chains of adds
 * run side by side (with one register of eight the pass waited on each add: 2x slower
 * for the statistics of a map larger than the caches). The tail goes into the first
 * lanes, and the lanes are added as a tree (lane k + lane k+16, then k + k+8, ...), so a
 * short run (a convolution's block of rows, 320 values) does not wait on 32 additions one
 * after another. The order is the C code's, so the result is the same on every
 * instruction set and thread count. */
#define BN_LANES 32

static inline double lanes_total(double *acc)
{
    for (int w = BN_LANES / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) acc[k] += acc[k + w];
    return acc[0];
}

CT_HOT
static double run_sum_plain(const float *x, int n)
{
    double acc[BN_LANES] = { 0 };
    int i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int k = 0; k < BN_LANES; k++) acc[k] += x[i + k];
    for (int k = 0; i + k < n; k++) acc[k] += x[i + k];
    return lanes_total(acc);
}

/* sum of (x - m)^2 */
CT_HOT
static double run_sumsq_dev_plain(const float *x, int n, double m)
{
    double acc[BN_LANES] = { 0 };
    int i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int k = 0; k < BN_LANES; k++) { double t = x[i + k] - m; acc[k] += t * t; }
    for (int k = 0; i + k < n; k++) { double t = x[i + k] - m; acc[k] += t * t; }
    return lanes_total(acc);
}

/* The same sums with AVX-512, operation for operation: lanes 0-31 are four registers
 * of eight doubles, the tail is added into the first lanes under a mask, and the tree adds
 * the same pairs (16 apart, 8, 4, 2, 1); products and sums are separate roundings as in the
 * C code (ISO C contracts nothing). So the bits are the plain loops', at twice the width
 * the compiler picks for them (a convolution's output blocks are summed this way while in
 * L1, where the width is what counts). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BN_AVX512 __attribute__((target("avx512f")))
#define BN_AVX512_SUMS 1

BN_AVX512 static inline __m512d widen_lo(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
BN_AVX512 static inline __m512d widen_hi(__m512 v) { return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))); }

/* lanes_total on a0 = lanes 0-7, a1 = 8-15, a2 = 16-23, a3 = 24-31 */
BN_AVX512 static inline double lanes_total_avx512(__m512d a0, __m512d a1, __m512d a2, __m512d a3)
{
    a0 = _mm512_add_pd(a0, a2);                       /* k += k + 16 */
    a1 = _mm512_add_pd(a1, a3);
    a0 = _mm512_add_pd(a0, a1);                       /* k += k + 8 */
    __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(a0), _mm512_extractf64x4_pd(a0, 1));   /* k += k + 4 */
    __m128d q = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));          /* k += k + 2 */
    return _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)));                              /* k += k + 1 */
}

/* the tail's r < 32 values as two vectors of 16 (zero past r) and the four lane masks */
BN_AVX512 static inline void tail_of(const float *x, int r, __m512 *v0, __m512 *v1, __mmask8 mk[4])
{
    const __mmask16 k0 = r >= 16 ? 0xFFFF : (__mmask16)((1u << r) - 1);
    const __mmask16 k1 = r <= 16 ? 0 : (__mmask16)((1u << (r - 16)) - 1);
    *v0 = _mm512_maskz_loadu_ps(k0, x);
    *v1 = _mm512_maskz_loadu_ps(k1, x + 16);
    mk[0] = (__mmask8)k0; mk[1] = (__mmask8)(k0 >> 8); mk[2] = (__mmask8)k1; mk[3] = (__mmask8)(k1 >> 8);
}

BN_AVX512 static double run_sum_avx512(const float *x, int n)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES) {
        const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
        a0 = _mm512_add_pd(a0, widen_lo(v0)); a1 = _mm512_add_pd(a1, widen_hi(v0));
        a2 = _mm512_add_pd(a2, widen_lo(v1)); a3 = _mm512_add_pd(a3, widen_hi(v1));
    }
    if (i < n) {
        __m512 v0, v1;
        __mmask8 mk[4];
        tail_of(x + i, n - i, &v0, &v1, mk);
        a0 = _mm512_mask_add_pd(a0, mk[0], a0, widen_lo(v0)); a1 = _mm512_mask_add_pd(a1, mk[1], a1, widen_hi(v0));
        a2 = _mm512_mask_add_pd(a2, mk[2], a2, widen_lo(v1)); a3 = _mm512_mask_add_pd(a3, mk[3], a3, widen_hi(v1));
    }
    return lanes_total_avx512(a0, a1, a2, a3);
}

BN_AVX512 static inline __m512d sq_dev(__m512d a, __m512d x, __m512d m)
{
    const __m512d t = _mm512_sub_pd(x, m);
    return _mm512_add_pd(a, _mm512_mul_pd(t, t));
}

BN_AVX512 static inline __m512d sq_dev_masked(__m512d a, __mmask8 k, __m512d x, __m512d m)
{
    const __m512d t = _mm512_sub_pd(x, m);
    return _mm512_mask_add_pd(a, k, a, _mm512_mul_pd(t, t));
}

BN_AVX512 static double run_sumsq_dev_avx512(const float *x, int n, double m)
{
    const __m512d vm = _mm512_set1_pd(m);
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES) {
        const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
        a0 = sq_dev(a0, widen_lo(v0), vm); a1 = sq_dev(a1, widen_hi(v0), vm);
        a2 = sq_dev(a2, widen_lo(v1), vm); a3 = sq_dev(a3, widen_hi(v1), vm);
    }
    if (i < n) {
        __m512 v0, v1;
        __mmask8 mk[4];
        tail_of(x + i, n - i, &v0, &v1, mk);
        a0 = sq_dev_masked(a0, mk[0], widen_lo(v0), vm); a1 = sq_dev_masked(a1, mk[1], widen_hi(v0), vm);
        a2 = sq_dev_masked(a2, mk[2], widen_lo(v1), vm); a3 = sq_dev_masked(a3, mk[3], widen_hi(v1), vm);
    }
    return lanes_total_avx512(a0, a1, a2, a3);
}
#endif

static double run_sum(const float *x, int n)
{
#ifdef BN_AVX512_SUMS
    if (ct_kernels_get() == CT_KERNELS_AVX512) return run_sum_avx512(x, n);
#endif
    return run_sum_plain(x, n);
}

static double run_sumsq_dev(const float *x, int n, double m)
{
#ifdef BN_AVX512_SUMS
    if (ct_kernels_get() == CT_KERNELS_AVX512) return run_sumsq_dev_avx512(x, n, m);
#endif
    return run_sumsq_dev_plain(x, n, m);
}

/* *sg += sum g, *sgx += sum g xh */
CT_HOT
static void run_sums2_plain(const float *g, const float *xh, int n, double *sg, double *sgx)
{
    double a[BN_LANES] = { 0 }, b[BN_LANES] = { 0 };
    int i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int k = 0; k < BN_LANES; k++) { a[k] += g[i + k]; b[k] += (double)g[i + k] * xh[i + k]; }
    for (int k = 0; i + k < n; k++) { a[k] += g[i + k]; b[k] += (double)g[i + k] * xh[i + k]; }
    *sg += lanes_total(a);
    *sgx += lanes_total(b);
}

#ifdef BN_AVX512_SUMS
/* run_sums2_plain with AVX-512, operation for operation as run_sum_avx512 is run_sum's */
BN_AVX512 static inline void sums2_step(__m512d *a, __m512d *b, __m512d g, __m512d h)
{
    *a = _mm512_add_pd(*a, g);
    *b = _mm512_add_pd(*b, _mm512_mul_pd(g, h));
}

BN_AVX512 static inline void sums2_step_masked(__m512d *a, __m512d *b, __mmask8 k, __m512d g, __m512d h)
{
    *a = _mm512_mask_add_pd(*a, k, *a, g);
    *b = _mm512_mask_add_pd(*b, k, *b, _mm512_mul_pd(g, h));
}

BN_AVX512 static void run_sums2_avx512(const float *g, const float *xh, int n, double *sg, double *sgx)
{
    __m512d a[4], b[4];
    for (int q = 0; q < 4; q++) a[q] = b[q] = _mm512_setzero_pd();
    int i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES) {
        const __m512 g0 = _mm512_loadu_ps(g + i), g1 = _mm512_loadu_ps(g + i + 16);
        const __m512 h0 = _mm512_loadu_ps(xh + i), h1 = _mm512_loadu_ps(xh + i + 16);
        sums2_step(&a[0], &b[0], widen_lo(g0), widen_lo(h0)); sums2_step(&a[1], &b[1], widen_hi(g0), widen_hi(h0));
        sums2_step(&a[2], &b[2], widen_lo(g1), widen_lo(h1)); sums2_step(&a[3], &b[3], widen_hi(g1), widen_hi(h1));
    }
    if (i < n) {
        __m512 g0, g1, h0, h1;
        __mmask8 mk[4];
        tail_of(g + i, n - i, &g0, &g1, mk);
        tail_of(xh + i, n - i, &h0, &h1, mk);
        sums2_step_masked(&a[0], &b[0], mk[0], widen_lo(g0), widen_lo(h0));
        sums2_step_masked(&a[1], &b[1], mk[1], widen_hi(g0), widen_hi(h0));
        sums2_step_masked(&a[2], &b[2], mk[2], widen_lo(g1), widen_lo(h1));
        sums2_step_masked(&a[3], &b[3], mk[3], widen_hi(g1), widen_hi(h1));
    }
    *sg += lanes_total_avx512(a[0], a[1], a[2], a[3]);
    *sgx += lanes_total_avx512(b[0], b[1], b[2], b[3]);
}
#endif

static void run_sums2(const float *g, const float *xh, int n, double *sg, double *sgx)
{
#ifdef BN_AVX512_SUMS
    if (ct_kernels_get() == CT_KERNELS_AVX512) { run_sums2_avx512(g, xh, n, sg, sgx); return; }
#endif
    run_sums2_plain(g, xh, n, sg, sgx);
}

/* One call's arguments, shared by the workers; each task is one channel. */
typedef struct {
    float *out, *xhat_out, *mean, *invstd_out, *running_mean, *running_var, *din, *dgamma, *dbeta;
    const float *in, *gamma, *beta, *dout, *xhat, *invstd;   /* xhat, invstd: what backward reads */
    const batchnorm_dims *d;
    int train;
    double *sums;          /* chains' backward: [N + 1, C, 2] each plane's sums of g and g xhat, then each
                            * channel's (ct_batchnorm_chain_sums_doubles) */
} bn_job;

/* Chan, Golub and LeVeque's update: (count, mean, ss) of the values so far, with k values
 * of mean mk and squared deviations qk about it merged in:
 *   t = count + k,  delta = mk - mean,  mean += delta k / t,  ss += qk + delta^2 count k / t
 * (exact algebra; channel_stats bounds its error in double). */
static inline void stats_merge(ct_bn_stats *a, double k, double mk, double qk)
{
    const double t = a->count + k, delta = mk - a->mean;
    a->mean += delta * (k / t);
    a->ss += qk + delta * delta * (a->count * k / t);
    a->count = t;
}

/* A run's mean, then its squared deviations about it: the run is read a second time from
 * the cache. */
void ct_bn_stats_add(ct_bn_stats *a, const float *x, int n)
{
    if (n <= 0) return;
    const double mk = run_sum(x, n) / (double)n;
    stats_merge(a, (double)n, mk, run_sumsq_dev(x, n, mk));
}

void ct_batchnorm_plane_stats(double *st, const float *x, int HW)
{
    ct_bn_stats a = { 0 };
    ct_bn_stats_add(&a, x, HW);
    st[0] = a.mean;
    st[1] = a.ss;
}

void ct_batchnorm_planes_stats(double *st, const float *x, int planes, int HW)
{
    for (int p = 0; p < planes; p++) ct_batchnorm_plane_stats(st + 2 * p, x + (size_t)p * HW, HW);
}

/* ---- the element-wise passes, their outputs streamed past the caches ----
 * A batch's maps are larger than the caches, so what a pass writes is read back from
 * memory by the next layer anyway; streamed (non-temporal) stores save reading each
 * written line first. With AVX-512 16 values a store, else 4 (SSE, every x86-64 CPU);
 * a head up to the store's alignment and the tail are plain stores. The arithmetic is
 * the plain loop's, operation by operation (ISO C contracts nothing into a fused
 * multiply-add), so every path gives the same bits (other CPUs run the plain loop). The
 * caller ends its task with stream_fence(), which orders the streamed stores before what
 * follows. */

/* xh = (x - mu) is, y = g xh + b */
static inline void normalise_plain(float *xh, float *y, const float *x, int n, float mu, float is, float g, float b)
{
    for (int i = 0; i < n; i++) {
        const float h = (x[i] - mu) * is;
        xh[i] = h;
        y[i] = g * h + b;
    }
}

/* dx = k (dout - md - xh mdx) */
static inline void din_plain(float *dx, const float *g, const float *xh, int n, float k, float md, float mdx)
{
    for (int i = 0; i < n; i++) dx[i] = k * (g[i] - md - xh[i] * mdx);
}

/* the first index from which p + i is `align`-byte aligned (n if none within n) */
static inline int aligned_from(const float *p, size_t align, int n)
{
    const int i = (int)(((align - ((uintptr_t)p & (align - 1))) & (align - 1)) / sizeof(float));
    return ((uintptr_t)p & 3) || i > n ? n : i;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BN_STREAMS 1

__attribute__((target("avx512f")))
static void normalise_avx512(float *xh, float *y, const float *x, int n, float mu, float is, float g, float b)
{
    int i = aligned_from(xh, 64, n);
    normalise_plain(xh, y, x, i, mu, is, g, b);
    if (((uintptr_t)(y + i) & 63) == 0) {
        const __m512 vmu = _mm512_set1_ps(mu), vis = _mm512_set1_ps(is), vg = _mm512_set1_ps(g), vb = _mm512_set1_ps(b);
        for (; i + 16 <= n; i += 16) {
            const __m512 h = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmu), vis);
            _mm512_stream_ps(xh + i, h);
            _mm512_stream_ps(y + i, _mm512_add_ps(_mm512_mul_ps(vg, h), vb));
        }
    }
    normalise_plain(xh + i, y + i, x + i, n - i, mu, is, g, b);
}

__attribute__((target("avx512f")))
static void din_avx512(float *dx, const float *g, const float *xh, int n, float k, float md, float mdx)
{
    int i = aligned_from(dx, 64, n);
    din_plain(dx, g, xh, i, k, md, mdx);
    const __m512 vk = _mm512_set1_ps(k), vmd = _mm512_set1_ps(md), vmdx = _mm512_set1_ps(mdx);
    for (; i + 16 <= n; i += 16) {
        const __m512 t = _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(g + i), vmd), _mm512_mul_ps(_mm512_loadu_ps(xh + i), vmdx));
        _mm512_stream_ps(dx + i, _mm512_mul_ps(vk, t));
    }
    din_plain(dx + i, g + i, xh + i, n - i, k, md, mdx);
}

static void normalise_sse(float *xh, float *y, const float *x, int n, float mu, float is, float g, float b)
{
    int i = aligned_from(xh, 16, n);
    normalise_plain(xh, y, x, i, mu, is, g, b);
    if (((uintptr_t)(y + i) & 15) == 0) {
        const __m128 vmu = _mm_set1_ps(mu), vis = _mm_set1_ps(is), vg = _mm_set1_ps(g), vb = _mm_set1_ps(b);
        for (; i + 4 <= n; i += 4) {
            const __m128 h = _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(x + i), vmu), vis);
            _mm_stream_ps(xh + i, h);
            _mm_stream_ps(y + i, _mm_add_ps(_mm_mul_ps(vg, h), vb));
        }
    }
    normalise_plain(xh + i, y + i, x + i, n - i, mu, is, g, b);
}

static void din_sse(float *dx, const float *g, const float *xh, int n, float k, float md, float mdx)
{
    int i = aligned_from(dx, 16, n);
    din_plain(dx, g, xh, i, k, md, mdx);
    const __m128 vk = _mm_set1_ps(k), vmd = _mm_set1_ps(md), vmdx = _mm_set1_ps(mdx);
    for (; i + 4 <= n; i += 4) {
        const __m128 t = _mm_sub_ps(_mm_sub_ps(_mm_loadu_ps(g + i), vmd), _mm_mul_ps(_mm_loadu_ps(xh + i), vmdx));
        _mm_stream_ps(dx + i, _mm_mul_ps(vk, t));
    }
    din_plain(dx + i, g + i, xh + i, n - i, k, md, mdx);
}

#endif

static void normalise_run(float *xh, float *y, const float *x, int n, float mu, float is, float g, float b)
{
#ifdef BN_STREAMS
    if (ct_kernels_get() == CT_KERNELS_AVX512) normalise_avx512(xh, y, x, n, mu, is, g, b);
    else normalise_sse(xh, y, x, n, mu, is, g, b);
#else
    normalise_plain(xh, y, x, n, mu, is, g, b);
#endif
}

static void din_run(float *dx, const float *g, const float *xh, int n, float k, float md, float mdx)
{
#ifdef BN_STREAMS
    if (ct_kernels_get() == CT_KERNELS_AVX512) din_avx512(dx, g, xh, n, k, md, mdx);
    else din_sse(dx, g, xh, n, k, md, mdx);
#else
    din_plain(dx, g, xh, n, k, md, mdx);
#endif
}

/* orders the streamed stores before whatever follows (the end of a worker's task) */
static void stream_fence(void)
{
#ifdef BN_STREAMS
    _mm_sfence();
#endif
}

/* The statistics of channel c, plane by plane: each plane's mean and squared deviations
 * about it (ct_batchnorm_plane_stats), merged over n by stats_merge. In double (u = 2^-53):
 * a plane's sums are off by at most HW u times their terms' sizes; each merge adds about
 * 3u (|mean| + |delta|) to the running mean's error e, so e <= (HW + 3N) u (|mean| + D), D
 * the largest distance of a plane's mean from the batch's; e enters ss through 2 delta e
 * count k / t, over all n at most 2 e sqrt(M ss) (Cauchy-Schwarz on the delta terms, whose
 * sum is at most ss). So the variance's relative error is at most about (HW + N + 4) u +
 * 2 (HW + 3N) u (|mean| + D) / sd: for planes of 8,192 values, N = 1,024 and |mean| + D =
 * 1,000 sd, 2.5e-9, a twentieth of float's rounding (2^-24 = 6.0e-8), so the float mean and
 * inverse deviation are those of an exact two-pass computation to within their last bit
 * (tests/test_batchnorm.c). A plane made of B blocks (ct_bn_stats_add per block) counts
 * as B planes in the bound (N becomes N B). The planes' statistics come from
 * d->plane_stats where a convolution took them, else from the input here. *mu and *is as
 * the normalisation uses them; in train mode the running statistics are updated. */
static void channel_stats(const bn_job *j, int c, float *mu, float *is)
{
    const batchnorm_dims *d = j->d;
    const int N = d->N, HW = d->HW;
    const size_t M = (size_t)N * HW, cstride = (size_t)d->C * HW;   /* step from x[n, c] to x[n+1, c] */
    const float *xc = j->in + (size_t)c * HW;          /* x[0, c, :]; sample n at + n*cstride */
    if (j->train) {
        ct_bn_stats a = { 0 };
        for (int n = 0; n < N; n++) {
            double own[2];
            const double *st = d->plane_stats ? d->plane_stats + 2 * ((size_t)n * d->C + c) : own;
            if (!d->plane_stats) ct_batchnorm_plane_stats(own, xc + n * cstride, HW);
            stats_merge(&a, (double)HW, st[0], st[1]);
        }
        const double m = a.mean;
        double ss = a.ss;
        if (ss < 0.0) ss = 0.0;
        const double var = ss / (double)M;             /* biased: what normalises */
        /* the running variance is the unbiased estimate; with M = 1 there is none
         * (PyTorch refuses to train then), so the biased one (0) is used */
        const double var_unb = M > 1 ? ss / (double)(M - 1) : var;
        *mu = (float)m;
        *is = (float)(1.0 / sqrt(var + (double)d->eps));
        j->running_mean[c] = (1.0f - d->momentum) * j->running_mean[c] + d->momentum * (float)m;
        j->running_var[c]  = (1.0f - d->momentum) * j->running_var[c]  + d->momentum * (float)var_unb;
    } else {
        *mu = j->running_mean[c];
        *is = (float)(1.0 / sqrt((double)j->running_var[c] + (double)d->eps));
    }
    j->mean[c] = *mu;
    j->invstd_out[c] = *is;
}

static void forward_channel(void *ctx, int c, int worker)
{
    const bn_job *j = ctx;
    const batchnorm_dims *d = j->d;
    const size_t cstride = (size_t)d->C * d->HW;
    float mu, is;
    (void)worker;
    channel_stats(j, c, &mu, &is);
    for (int n = 0; n < d->N; n++) {
        const size_t off = (size_t)c * d->HW + n * cstride;
        normalise_run(j->xhat_out + off, j->out + off, j->in + off, d->HW, mu, is, j->gamma[c], j->beta[c]);
    }
    stream_fence();
}

/* workers for `tasks` tasks (channels, or the chains' images): no more than there are */
static int workers_for(int tasks)
{
    int w = ct_threads_get() < CT_MAX_WORKERS ? ct_threads_get() : CT_MAX_WORKERS;
    return w < tasks ? w : tasks;
}

static int bn_workers(const batchnorm_dims *d) { return workers_for(d->C); }

/* ---- synchronised statistics (batchnorm.h: ct_replica_sum) ----
 * Two passes, with a sum over the replicas after each (one batch's single pass would
 * need its shift agreed on by every replica first, one more exchange): first the
 * channels' sums (-> the mean), then their squared deviations from that mean (-> the
 * variance); then every element is normalised with the whole batch's statistics. The
 * per-channel sums go through a fixed buffer, BN_SYNC_CHUNK channels at a time (every
 * replica has the same channels, so every replica makes the same sums in the same order). */
#define BN_SYNC_CHUNK 1024

typedef struct {
    const bn_job *j;
    int c0;         /* the chunk's first channel: worker index c is channel c0 + c */
    double *acc;    /* [chunk] per channel: the pass's sum */
    double *mean;   /* [chunk] the whole batch's means, for the second pass */
    int pass;       /* 0: sum x; 1: sum (x - mean)^2 */
} bn_sync_job;

static void sync_pass_channel(void *ctx, int c, int worker)
{
    const bn_sync_job *s = ctx;
    const batchnorm_dims *d = s->j->d;
    const size_t cstride = (size_t)d->C * d->HW;
    const float *xc = s->j->in + (size_t)(s->c0 + c) * d->HW;
    double acc = 0.0;
    (void)worker;
    for (int n = 0; n < d->N; n++)
        acc += s->pass == 0 ? run_sum(xc + n * cstride, d->HW) : run_sumsq_dev(xc + n * cstride, d->HW, s->mean[c]);
    s->acc[c] = acc;
}

static void normalise_channel(void *ctx, int c, int worker)
{
    const bn_job *j = ctx;
    const batchnorm_dims *d = j->d;
    const size_t cstride = (size_t)d->C * d->HW;
    (void)worker;
    for (int n = 0; n < d->N; n++) {
        const size_t off = (size_t)c * d->HW + n * cstride;
        normalise_run(j->xhat_out + off, j->out + off, j->in + off, d->HW, j->mean[c], j->invstd_out[c], j->gamma[c], j->beta[c]);
    }
    stream_fence();
}

static void forward_synced(bn_job *j)
{
    const batchnorm_dims *d = j->d;
    const ct_replica_sum *r = d->sync;
    const size_t M = (size_t)r->total_N * d->HW;   /* the whole batch's values per channel */
    double buf[2 * BN_SYNC_CHUNK];
    for (int c0 = 0; c0 < d->C; c0 += BN_SYNC_CHUNK) {
        const int n = d->C - c0 < BN_SYNC_CHUNK ? d->C - c0 : BN_SYNC_CHUNK;
        bn_sync_job s = { .j = j, .c0 = c0, .acc = buf, .mean = buf + n, .pass = 0 };
        ct_parallel(n, bn_workers(d), sync_pass_channel, &s);
        r->sum(r->ctx, buf, n);
        for (int c = 0; c < n; c++) {
            s.mean[c] = buf[c] / (double)M;
            j->mean[c0 + c] = (float)s.mean[c];
        }
        s.pass = 1;
        ct_parallel(n, bn_workers(d), sync_pass_channel, &s);
        r->sum(r->ctx, buf, n);
        for (int c = 0; c < n; c++) {
            const double var = buf[c] / (double)M, var_unb = M > 1 ? buf[c] / (double)(M - 1) : var;
            const int g = c0 + c;
            j->invstd_out[g] = (float)(1.0 / sqrt(var + (double)d->eps));
            j->running_mean[g] = (1.0f - d->momentum) * j->running_mean[g] + d->momentum * j->mean[g];
            j->running_var[g]  = (1.0f - d->momentum) * j->running_var[g]  + d->momentum * (float)var_unb;
        }
    }
    ct_parallel(d->C, bn_workers(d), normalise_channel, j);
}

/* Channels are independent: they are shared by the workers (core/threads.h). */
void ct_batchnorm_forward(float *out, float *xhat, float *mean, float *invstd, float *running_mean, float *running_var,
                       const float *in, const float *gamma, const float *beta, const batchnorm_dims *d, int train)
{
    bn_job j = { .out = out, .xhat_out = xhat, .mean = mean, .invstd_out = invstd, .running_mean = running_mean,
                 .running_var = running_var, .in = in, .gamma = gamma, .beta = beta, .d = d, .train = train };
    if (train && d->sync) forward_synced(&j);
    else ct_parallel(d->C, bn_workers(d), forward_channel, &j);
}

CT_HOT
static void backward_channel(void *ctx, int c, int worker)
{
    const bn_job *j = ctx;
    const batchnorm_dims *d = j->d;
    const int N = d->N, HW = d->HW;
    const size_t M = (size_t)N * HW, cstride = (size_t)d->C * HW, off = (size_t)c * HW;
    (void)worker;
    /* sd = sum dout, sdx = sum dout xhat over (n, hw) of channel c */
    double sd = 0.0, sdx = 0.0;
    for (int n = 0; n < N; n++) run_sums2(j->dout + off + n * cstride, j->xhat + off + n * cstride, HW, &sd, &sdx);
    j->dbeta[c] += (float)sd;
    j->dgamma[c] += (float)sdx;
    if (!j->din) return;
    /* din = gamma invstd / M (M dout - sd - xhat sdx) = k (dout - mean_d - xhat mean_dx) */
    const float k = j->gamma[c] * j->invstd[c];
    const float mean_d = (float)(sd / (double)M), mean_dx = (float)(sdx / (double)M);
    for (int n = 0; n < N; n++)
        din_run(j->din + off + n * cstride, j->dout + off + n * cstride, j->xhat + off + n * cstride, HW, k, mean_d, mean_dx);
    stream_fence();
}

/* Synchronised backward, a chunk of channels at a time: each channel's own sums first
 * (dgamma, dbeta take them), then the replicas' weighted sums, then din with the whole
 * batch's means. */
typedef struct {
    const bn_job *j;
    int c0;             /* the chunk's first channel */
    double *sd, *sdx;   /* [chunk] */
} bn_sync_bwd;

static void sync_sums_channel(void *ctx, int c, int worker)
{
    const bn_sync_bwd *s = ctx;
    const batchnorm_dims *d = s->j->d;
    const int g = s->c0 + c;
    const size_t cstride = (size_t)d->C * d->HW, off = (size_t)g * d->HW;
    double sd = 0.0, sdx = 0.0;
    (void)worker;
    for (int n = 0; n < d->N; n++) run_sums2(s->j->dout + off + n * cstride, s->j->xhat + off + n * cstride, d->HW, &sd, &sdx);
    s->j->dbeta[g] += (float)sd;
    s->j->dgamma[g] += (float)sdx;
    s->sd[c] = sd;
    s->sdx[c] = sdx;
}

static void sync_din_channel(void *ctx, int c, int worker)
{
    const bn_sync_bwd *s = ctx;
    const batchnorm_dims *d = s->j->d;
    const int g = s->c0 + c;
    const size_t cstride = (size_t)d->C * d->HW, off = (size_t)g * d->HW;
    (void)worker;
    const float k = s->j->gamma[g] * s->j->invstd[g];
    const float mean_d = (float)s->sd[c], mean_dx = (float)s->sdx[c];   /* already divided (backward_synced) */
    for (int n = 0; n < d->N; n++)
        din_run(s->j->din + off + n * cstride, s->j->dout + off + n * cstride, s->j->xhat + off + n * cstride, d->HW, k, mean_d, mean_dx);
    stream_fence();
}

static void backward_synced(bn_job *j)
{
    const batchnorm_dims *d = j->d;
    const ct_replica_sum *r = d->sync;
    const double M = (double)r->total_N * d->HW;
    double buf[2 * BN_SYNC_CHUNK];
    for (int c0 = 0; c0 < d->C; c0 += BN_SYNC_CHUNK) {
        const int n = d->C - c0 < BN_SYNC_CHUNK ? d->C - c0 : BN_SYNC_CHUNK;
        bn_sync_bwd s = { .j = j, .c0 = c0, .sd = buf, .sdx = buf + n };
        ct_parallel(n, bn_workers(d), sync_sums_channel, &s);
        if (!j->din) continue;
        for (int i = 0; i < 2 * n; i++) buf[i] *= r->share;   /* each replica's weight in the whole batch's loss */
        r->sum(r->ctx, buf, 2 * n);
        for (int i = 0; i < 2 * n; i++) buf[i] /= M * r->share;   /* S / (M share): the means this replica's dout needs */
        ct_parallel(n, bn_workers(d), sync_din_channel, &s);
    }
}

void ct_batchnorm_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                        const float *invstd, const float *gamma, const batchnorm_dims *d)
{
    bn_job j = { .din = din, .dgamma = dgamma, .dbeta = dbeta, .dout = dout, .xhat = xhat,
                 .invstd = invstd, .gamma = gamma, .d = d };
    if (d->sync) backward_synced(&j);
    else ct_parallel(d->C, bn_workers(d), backward_channel, &j);
}

/* ---- batchnorm, then a pool: the chains without the maps between them ----
 * Batchnorm followed by a max pooling (maybe through a relu) or by the mean over H or over
 * the plane (maybe through a relu) runs as one kernel. The forward pass normalises each
 * plane [n, c] into a buffer on the worker's stack and pools the buffer while it is in the
 * cache: neither the batchnorm's output nor xhat reaches memory, and the pool does not read
 * a map back. The backward pass remakes each plane's xhat from the batchnorm's input (the
 * same expression, so the same bits as the stored one) and its gradient at the batchnorm's
 * output (the pool's scatter, or its mean spread back) in two such buffers, once for the
 * channel's sums and once for din, instead of writing that gradient map and reading it and
 * xhat twice.
 *
 * Every pass goes through the batch an image at a time, each image's channels in order
 * (worker w: images w, w + workers, ...): an image's planes lie one after another in
 * memory, where one channel's planes lie a whole image apart, and the hardware's
 * prefetchers, which stop at every 4 KB page, follow the first order and not the second
 * (the siamese-cnn's chains' forward: 6.0 -> 5.0, 3.3 -> 2.4 and 2.4 -> 1.7 ms per batch);
 * asking for the next plane ahead, which the channel order needed, slows this order down
 * (backward 6.6 -> 6.1 ms without it) and is not done. The statistics come
 * first, channel by channel (channel_stats, from the planes' statistics); the backward's
 * sums are each plane's own (run_sums2 from zero, as the channel's running sum takes it)
 * kept in a workspace [N, C, 2] and added over n in order afterwards, which is the running
 * sum's order. Every value is computed by the same expressions in the same order as the
 * layers' own passes, so the results are theirs bit for bit. */
#define BN_POOL_MAX_PLANE 8192    /* the largest plane (H*W floats): two such buffers, 64 KB, on a worker's stack */

size_t ct_batchnorm_chain_sums_doubles(const batchnorm_dims *d)
{
    return ((size_t)d->N + 1) * d->C * 2;
}

int ct_batchnorm_maxpool_fits(const batchnorm_dims *d, const maxpool2d_dims *pd)
{
    return !d->sync && pd->N == d->N && pd->C == d->C && pd->H * pd->W == d->HW && d->HW <= BN_POOL_MAX_PLANE;
}

static void stats_channel(void *ctx, int c, int worker)
{
    float mu, is;
    (void)worker;
    channel_stats(ctx, c, &mu, &is);
}

/* y = g ((x - mu) is) + b over one plane: normalise_plain's arithmetic, without xhat */
static void output_plane(float *y, const float *x, int n, float mu, float is, float g, float b)
{
    for (int i = 0; i < n; i++) {
        const float h = (x[i] - mu) * is;
        y[i] = g * h + b;
    }
}

/* xh = (x - mu) is over one plane: what the forward pass computed */
static void xhat_plane(float *xh, const float *x, int n, float mu, float is)
{
    for (int i = 0; i < n; i++) xh[i] = (x[i] - mu) * is;
}

/* A chain's forward: each plane's batchnorm output y made in a buffer and handed to
 * pool(ctx, y, pl, c) */
typedef void (*bn_plane_pool)(const void *ctx, float *y, size_t pl, int c);
typedef struct { const bn_job *bn; bn_plane_pool pool; const void *ctx; } chain_job;

CT_HOT
static void chain_forward_image(void *ctx, int n, int worker)
{
    const chain_job *cj = ctx;
    const bn_job *bn = cj->bn;
    const batchnorm_dims *d = bn->d;
    float y[BN_POOL_MAX_PLANE];                          /* one plane of the batchnorm's output, [H, W] */
    (void)worker;
    for (int c = 0; c < d->C; c++) {
        const size_t pl = (size_t)n * d->C + c;
        output_plane(y, bn->in + pl * d->HW, d->HW, bn->mean[c], bn->invstd_out[c], bn->gamma[c], bn->beta[c]);
        cj->pool(cj->ctx, y, pl, c);
    }
}

static void chain_forward(const bn_job *bn, bn_plane_pool pool, const void *ctx)
{
    chain_job cj = { .bn = bn, .pool = pool, .ctx = ctx };
    ct_parallel(bn->d->C, bn_workers(bn->d), stats_channel, (void *)bn);
    ct_parallel(bn->d->N, workers_for(bn->d->N), chain_forward_image, &cj);
}

/* A chain's backward: grad(ctx, g, xh, pl, c, mu, is) makes plane pl's gradient at the
 * batchnorm's output and its xhat; over them the two passes of ct_batchnorm_backward (the
 * sums, then din), with its arithmetic. */
typedef void (*bn_plane_grad)(const void *ctx, float *g, float *xh, size_t pl, int c, float mu, float is);
typedef struct { const bn_job *bn; bn_plane_grad grad; const void *ctx; } chain_bwd_job;

/* the sums of plane [n, c] for every c, from zero, into bn->sums [n, c, 2] */
CT_HOT
static void chain_sums_image(void *ctx, int n, int worker)
{
    const chain_bwd_job *cj = ctx;
    const bn_job *bn = cj->bn;
    const batchnorm_dims *d = bn->d;
    float g[BN_POOL_MAX_PLANE], xh[BN_POOL_MAX_PLANE];   /* one plane of the gradient at the batchnorm's output, of xhat */
    (void)worker;
    for (int c = 0; c < d->C; c++) {
        const size_t pl = (size_t)n * d->C + c;
        double *st = bn->sums + 2 * pl;
        st[0] = st[1] = 0.0;
        cj->grad(cj->ctx, g, xh, pl, c, bn->mean[c], bn->invstd[c]);
        run_sums2(g, xh, d->HW, &st[0], &st[1]);
    }
}

/* channel c's sums over n, in order, into bn->sums' last [C, 2]; dgamma, dbeta */
static void chain_sums_channel(void *ctx, int c, int worker)
{
    const bn_job *bn = ctx;
    const batchnorm_dims *d = bn->d;
    double sd = 0.0, sdx = 0.0;
    (void)worker;
    for (int n = 0; n < d->N; n++) {
        const double *st = bn->sums + 2 * ((size_t)n * d->C + c);
        sd += st[0];
        sdx += st[1];
    }
    bn->dbeta[c] += (float)sd;
    bn->dgamma[c] += (float)sdx;
    double *ch = bn->sums + 2 * ((size_t)d->N * d->C + c);
    ch[0] = sd;
    ch[1] = sdx;
}

/* din = k (g - mean g - xhat mean(g xhat)) for plane [n, c]: the scale and the two means */
static void din_coefs(const batchnorm_dims *d, const double *sums, const float *gamma, float is, int c, float *k, float *md,
                      float *mdx)
{
    const size_t M = (size_t)d->N * d->HW;
    const double *ch = sums + 2 * ((size_t)d->N * d->C + c);
    *k = gamma[c] * is;
    *md = (float)(ch[0] / (double)M);
    *mdx = (float)(ch[1] / (double)M);
}

CT_HOT
static void chain_din_image(void *ctx, int n, int worker)
{
    const chain_bwd_job *cj = ctx;
    const bn_job *bn = cj->bn;
    const batchnorm_dims *d = bn->d;
    float g[BN_POOL_MAX_PLANE], xh[BN_POOL_MAX_PLANE];
    (void)worker;
    for (int c = 0; c < d->C; c++) {
        const size_t pl = (size_t)n * d->C + c;
        float k, md, mdx;
        din_coefs(d, bn->sums, bn->gamma, bn->invstd[c], c, &k, &md, &mdx);
        cj->grad(cj->ctx, g, xh, pl, c, bn->mean[c], bn->invstd[c]);
        din_run(bn->din + pl * d->HW, g, xh, d->HW, k, md, mdx);
    }
    stream_fence();
}

static void chain_backward(const bn_job *bn, bn_plane_grad grad, const void *ctx)
{
    chain_bwd_job cj = { .bn = bn, .grad = grad, .ctx = ctx };
    CT_ASSERT(bn->sums);   /* the workspace of ct_batchnorm_chain_sums_doubles */
    ct_parallel(bn->d->N, workers_for(bn->d->N), chain_sums_image, &cj);
    ct_parallel(bn->d->C, bn_workers(bn->d), chain_sums_channel, (void *)bn);
    if (bn->din) ct_parallel(bn->d->N, workers_for(bn->d->N), chain_din_image, &cj);
}

/* ---- the maxpool chain ---- */
typedef struct {
    bn_job bn;
    float *pooled;
    int *argmax;
    const float *dpooled;
    const int *argmax_in;
    const maxpool2d_dims *pd;
    int relu;         /* forward: a relu after the pool */
} bn_pool_job;

static void maxpool_plane(const void *ctx, float *y, size_t pl, int c)
{
    const bn_pool_job *j = ctx;
    const int out_plane = j->pd->OH * j->pd->OW;
    (void)c;
    ct_maxpool2d_plane(j->pooled + pl * out_plane, j->argmax + pl * out_plane, y, (int)(pl * j->bn.d->HW), j->pd, j->relu);
}

void ct_batchnorm_maxpool_forward(float *pooled, int *argmax, float *mean, float *invstd, float *running_mean,
                                  float *running_var, const float *in, const float *gamma, const float *beta,
                                  const batchnorm_dims *d, const maxpool2d_dims *pd, int relu, int train)
{
    CT_ASSERT(ct_batchnorm_maxpool_fits(d, pd));
    bn_pool_job j = { .bn = { .mean = mean, .invstd_out = invstd, .running_mean = running_mean, .running_var = running_var,
                              .in = in, .gamma = gamma, .beta = beta, .d = d, .train = train },
                      .pooled = pooled, .argmax = argmax, .pd = pd, .relu = relu };
    chain_forward(&j.bn, maxpool_plane, &j);
}

/* the maxpool's plane gradient (zero but at the argmax) and xhat */
CT_HOT
static void pool_plane_grad(const void *ctx, float *g, float *xh, size_t pl, int c, float mu, float is)
{
    const bn_pool_job *j = ctx;
    const maxpool2d_dims *pd = j->pd;
    const int HW = j->bn.d->HW, out_plane = pd->OH * pd->OW;
    (void)c;
    ct_maxpool2d_plane_backward(g, j->dpooled + pl * out_plane, j->argmax_in + pl * out_plane, (int)(pl * HW), pd);
    xhat_plane(xh, j->bn.in + pl * HW, HW, mu, is);
}

void ct_batchnorm_maxpool_backward(float *din, float *dgamma, float *dbeta, double *sums, const float *dpooled,
                                   const int *argmax, const float *in, const float *mean, const float *invstd,
                                   const float *gamma, const batchnorm_dims *d, const maxpool2d_dims *pd)
{
    CT_ASSERT(ct_batchnorm_maxpool_fits(d, pd));
    bn_pool_job j = { .bn = { .din = din, .dgamma = dgamma, .dbeta = dbeta, .in = in, .mean = (float *)mean,
                              .invstd = invstd, .gamma = gamma, .d = d, .sums = sums },
                      .dpooled = dpooled, .argmax_in = argmax, .pd = pd };
    chain_backward(&j.bn, pool_plane_grad, &j);
}

/* Plane [n, c] of din as chain_din_image makes it, from the sums the backward kept: the
 * gradient at the batchnorm's output made in din itself, xhat on the stack, then din_plain
 * in place (each value from its own g and xhat; the arithmetic of din_run's every path). */
CT_HOT
void ct_batchnorm_maxpool_din_plane(const void *src, float *din, int n, int c)
{
    const ct_bn_pool_din *s = src;
    const batchnorm_dims *d = s->d;
    const bn_pool_job j = { .bn = { .in = s->in, .d = d }, .dpooled = s->dpooled, .argmax_in = s->argmax, .pd = s->pd };
    float xh[BN_POOL_MAX_PLANE];                          /* xhat of the plane, [H, W] */
    float k, md, mdx;
    din_coefs(d, s->sums, s->gamma, s->invstd[c], c, &k, &md, &mdx);
    pool_plane_grad(&j, din, xh, (size_t)n * d->C + c, c, s->mean[c], s->invstd[c]);
    din_plain(din, din, xh, d->HW, k, md, mdx);
}

/* ---- the chain of the mean over H (or over the plane) ----
 * The same with the mean over H of each plane into its [W] values (the pooling's own plane
 * function), after a relu on the buffer where there is one; the backward's gradient at the
 * batchnorm's output is the pooling's plane gradient, zeroed where y <= 0 (the relu's
 * [y > 0], y remade from xhat). The global mean is the same kernel with the plane read as
 * [HW, 1]. */
int ct_batchnorm_avgpool_h_fits(const batchnorm_dims *d, int H, int W)
{
    return !d->sync && H >= 1 && W >= 1 && (long)H * W == d->HW && d->HW <= BN_POOL_MAX_PLANE;
}

typedef struct {
    bn_job bn;
    float *pooled;            /* [N, C, W] */
    const float *dpooled;     /* [N, C, W] */
    int H, W, relu;
} bn_avg_job;

static void relu_plane(float *y, int n)
{
    for (int i = 0; i < n; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

static void avg_plane(const void *ctx, float *y, size_t pl, int c)
{
    const bn_avg_job *j = ctx;
    (void)c;
    if (j->relu) relu_plane(y, j->bn.d->HW);
    ct_avgpool_h_plane(j->pooled + pl * j->W, y, j->H, j->W);
}

void ct_batchnorm_avgpool_h_forward(float *pooled, float *mean, float *invstd, float *running_mean, float *running_var,
                                    const float *in, const float *gamma, const float *beta, const batchnorm_dims *d,
                                    int H, int W, int relu, int train)
{
    CT_ASSERT(ct_batchnorm_avgpool_h_fits(d, H, W));
    bn_avg_job j = { .bn = { .mean = mean, .invstd_out = invstd, .running_mean = running_mean, .running_var = running_var,
                             .in = in, .gamma = gamma, .beta = beta, .d = d, .train = train },
                     .pooled = pooled, .H = H, .W = W, .relu = relu };
    chain_forward(&j.bn, avg_plane, &j);
}

/* the mean's plane gradient, zeroed where the relu's output was 0, and xhat */
CT_HOT
static void avg_plane_grad(const void *ctx, float *g, float *xh, size_t pl, int c, float mu, float is)
{
    const bn_avg_job *j = ctx;
    const int HW = j->bn.d->HW;
    const float gam = j->bn.gamma[c], bet = j->bn.beta[c];
    ct_avgpool_h_plane_backward(g, j->dpooled + pl * j->W, j->H, j->W);
    xhat_plane(xh, j->bn.in + pl * HW, HW, mu, is);
    if (j->relu)
        for (int i = 0; i < HW; i++) g[i] = gam * xh[i] + bet > 0.0f ? g[i] : 0.0f;   /* y as the forward made it */
}

void ct_batchnorm_avgpool_h_backward(float *din, float *dgamma, float *dbeta, double *sums, const float *dpooled,
                                     const float *in, const float *mean, const float *invstd, const float *gamma,
                                     const float *beta, const batchnorm_dims *d, int H, int W, int relu)
{
    CT_ASSERT(ct_batchnorm_avgpool_h_fits(d, H, W));
    bn_avg_job j = { .bn = { .din = din, .dgamma = dgamma, .dbeta = dbeta, .in = in, .mean = (float *)mean,
                             .invstd = invstd, .gamma = gamma, .beta = beta, .d = d, .sums = sums },
                     .dpooled = dpooled, .H = H, .W = W, .relu = relu };
    chain_backward(&j.bn, avg_plane_grad, &j);
}
