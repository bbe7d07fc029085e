/* dropout.c - inverted dropout (see dropout.h).
 *
 * Forward draws one uniform number per element from the dropout RNG stream, in
 * element order, so a given stream state always gives the same mask; the mask
 * holds the scale itself (0 or 1/(1-p)), so forward and backward are the same
 * elementwise product.
 *
 * Threads: element i's mask is draw i of the stream, so the elements can be cut
 * into one contiguous range per worker (core/threads.h: ct_parallel_range); the
 * worker of [lo, hi) starts from a copy of the stream moved lo draws ahead
 * (ct_rng_advance, O(log lo)), and the caller's stream is moved n draws ahead
 * at the end. The mask is therefore the same, bit for bit, on any number of
 * threads as the one-thread loop gives, and the stream ends in the same state.
 */
#include <string.h>
#include "core/error.h"
#include "core/threads.h"
#include "layers/dropout.h"
#include "layers/gemm_packed.h"   /* ct_kernels_get: the AVX-512 draws */

typedef struct {
    float *out, *mask;
    const float *in;
    float p, scale;
    ct_rng start;   /* the stream at draw 0 of this call */
    int vector;     /* the AVX-512 draws run (keep_vector, asked once by the caller, not by each worker) */
} dropout_job;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CT_DROPOUT_AVX512 __attribute__((target("avx512f,avx512dq")))

/* The same n elements (n a multiple of 16) with AVX-512: 16 draws side by side, lane k
 * making draws k, k + 16, ... (ct_rng_lanes). Each lane's state is two 64-bit words of a
 * register pair (s0: lanes 0-7, s1: lanes 8-15); ct_rng_u32's output permutation is done on
 * them, the low 32 bits of the 16 lanes gathered into one register in lane order, rotated
 * (VPRORVD), and made a float as ct_rng_uniform does: (x >> 8) 2^-24, exact. Then the mask and
 * the output as the plain loop makes them. lane[] is left at the states of the next 16 draws. */
static CT_DROPOUT_AVX512 __attribute__((noinline))
void keep_avx512(float *out, float *mask, const float *in, size_t n, uint64_t lane[16], uint64_t mult, uint64_t add,
                 float p, float scale)
{
    __m512i s0 = _mm512_loadu_si512(lane), s1 = _mm512_loadu_si512(lane + 8);
    const __m512i m = _mm512_set1_epi64((long long)mult), a = _mm512_set1_epi64((long long)add);
    const __m512i low = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);   /* the low words of s0, then s1 */
    const __m512 vp = _mm512_set1_ps(p), vs = _mm512_set1_ps(scale), unit = _mm512_set1_ps(1.0f / 16777216.0f);
    for (size_t i = 0; i < n; i += 16) {
        const __m512i x0 = _mm512_srli_epi64(_mm512_xor_si512(_mm512_srli_epi64(s0, 18), s0), 27);   /* xorshifted, in the low word */
        const __m512i x1 = _mm512_srli_epi64(_mm512_xor_si512(_mm512_srli_epi64(s1, 18), s1), 27);
        const __m512i x = _mm512_permutex2var_epi32(x0, low, x1);
        const __m512i rot = _mm512_permutex2var_epi32(_mm512_srli_epi64(s0, 59), low, _mm512_srli_epi64(s1, 59));
        const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(_mm512_rorv_epi32(x, rot), 8)), unit);
        const __m512 k = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(u, vp, _CMP_GE_OQ), vs);   /* u >= p ? scale : 0 */
        _mm512_storeu_ps(mask + i, k);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(in + i), k));
        s0 = _mm512_add_epi64(_mm512_mullo_epi64(s0, m), a);
        s1 = _mm512_add_epi64(_mm512_mullo_epi64(s1, m), a);
    }
    _mm512_storeu_si512(lane, s0);
    _mm512_storeu_si512(lane + 8, s1);
}
#endif

/* AVX-512 in use (ct_kernels_get) and its 64-bit products (AVX512DQ, every AVX-512 CPU but
 * the Xeon Phi) */
static int keep_vector(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return ct_kernels_get() >= CT_KERNELS_AVX512 && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

/* draws lo .. hi-1: mask[i] = scale where draw i >= p, else 0, and out[i] = in[i] mask[i];
 * with AVX-512 16 draws at a time from the stream's lanes (keep_avx512), the rest (or all)
 * drawn into mask first and then compared */
static void dropout_forward_range(void *ctx, size_t lo, size_t hi)
{
    const dropout_job *j = ctx;
    ct_rng r = j->start;
    ct_rng_advance(&r, lo);
    float *mask = j->mask;
#if defined(__x86_64__) && defined(__GNUC__)
    if (hi - lo >= 16 && j->vector) {
        uint64_t lane[16], mult, add;
        const size_t n = (hi - lo) / 16 * 16;
        ct_rng_lanes(&r, 16, lane, &mult, &add);
        keep_avx512(j->out + lo, mask + lo, j->in + lo, n, lane, mult, add, j->p, j->scale);
        r.state = lane[0];   /* the state of draw lo + n */
        lo += n;
    }
#endif
    ct_rng_uniform_fill(&r, mask + lo, hi - lo);   /* one uniform per element, then keep it when >= p */
    for (size_t i = lo; i < hi; i++) mask[i] = mask[i] >= j->p ? j->scale : 0.0f;
    for (size_t i = lo; i < hi; i++) j->out[i] = j->in[i] * mask[i];
}

/* out = in * mask over [lo, hi) (in = dout, out = din for the backward pass) */
typedef struct { float *out; const float *mask, *in; } apply_job;

static void dropout_apply_range(void *ctx, size_t lo, size_t hi)
{
    const apply_job *j = ctx;
    for (size_t i = lo; i < hi; i++) j->out[i] = j->in[i] * j->mask[i];
}

/* out, mask, in [n] */
void ct_dropout_forward(float *out, float *mask, const float *in, size_t n, float p, int train, ct_rng *rng)
{
    CT_ASSERT(p >= 0.0f && p < 1.0f);
    if (!train || p == 0.0f) {   /* identity: no mask, no random draws */
        if (out != in) memcpy(out, in, n * sizeof *out);
        return;
    }
    dropout_job j = { .out = out, .mask = mask, .in = in, .p = p, .scale = 1.0f / (1.0f - p), .start = *rng,
                      .vector = keep_vector() };
    ct_parallel_range(n, n, dropout_forward_range, &j);
    ct_rng_advance(rng, n);   /* where n draws in one loop leave the stream */
}

/* out, mask, in [S * n, per]: the rows [first, first + n) of each of S segments of `rows` rows */
void ct_dropout_forward_part(float *out, float *mask, const float *in, size_t per, int S, int n, int first, int rows,
                             float p, ct_rng *rng)
{
    CT_ASSERT(S >= 1 && n >= 0 && first >= 0 && first + n <= rows);
    if (p == 0.0f) { ct_dropout_forward(out, mask, in, (size_t)S * n * per, p, 1, rng); return; }   /* draws nothing */
    for (int s = 0; s < S; s++) {
        const size_t off = (size_t)s * n * per;
        ct_rng_advance(rng, (uint64_t)first * per);                 /* the rows before this part's */
        ct_dropout_forward(out + off, mask + off, in + off, (size_t)n * per, p, 1, rng);
        ct_rng_advance(rng, (uint64_t)(rows - first - n) * per);    /* and those after them */
    }
}

/* out = in * mask */
void ct_dropout_apply(float *out, const float *mask, const float *in, size_t n)
{
    apply_job j = { .out = out, .mask = mask, .in = in };
    ct_parallel_range(n, n, dropout_apply_range, &j);
}

/* out = in * mask is linear in `in` with diagonal Jacobian mask, so
 *   din = dout * mask */
void ct_dropout_backward(float *din, const float *dout, const float *mask, size_t n)
{
    ct_dropout_apply(din, mask, dout, n);
}
