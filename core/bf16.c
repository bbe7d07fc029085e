/* bf16.c - float32 <-> bfloat16 conversions (see bf16.h): the scalar formulas on
 * the bits, the same formulas 8 lanes at a time with AVX2, and the CPU's own
 * conversion instruction 32 at a time where it has AVX512-BF16. */
#include <string.h>
#include "core/bf16.h"

uint16_t ct_bf16_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)                 /* NaN: cut, quiet bit set (sign and top payload kept) */
        return (uint16_t)((x >> 16) | 0x0040u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);   /* to nearest, ties to even (bf16.h) */
}

float ct_float_from_bf16(uint16_t b)
{
    const uint32_t x = (uint32_t)b << 16;                /* the 16 bits on top, zeros below: exact */
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CT_AVX2 __attribute__((target("avx2")))

/* 8 floats [8] -> 8 bf16 [8]: the scalar formula on each 32-bit lane. */
static CT_AVX2 void narrow_avx2(uint16_t *dst, const float *src, size_t n8)
{
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000), quiet = _mm256_set1_epi32(0x0040);
    for (size_t i = 0; i < n8; i += 8) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(src + i));
        const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias),
                                                                   _mm256_and_si256(_mm256_srli_epi32(x, 16), one)), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absmask), inf);   /* signed compare: |x| < 2^31 */
        const __m256i cut = _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet);
        const __m256i r = _mm256_blendv_epi8(rounded, cut, nan);                    /* each lane now 0 .. 0xFFFF */
        /* 32 -> 16 bits: packus works within 128-bit halves ([r0..r3 r0..r3 | r4..r7 r4..r7]),
         * the permute brings the two halves' results together */
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(packed));
    }
}

/* 8 bf16 [8] -> 8 floats [8]: zero-extended to 32 bits, shifted to the top. */
static CT_AVX2 void widen_avx2(float *dst, const uint16_t *src, size_t n8)
{
    for (size_t i = 0; i < n8; i += 8) {
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(h, 16));
    }
}

/* 32 floats [32] -> 32 bf16 [32] with VCVTNE2PS2BF16, which rounds to nearest, ties to even,
 * and cuts a NaN keeping its sign and top payload with the quiet bit set: the formula's bits.
 * It differs only on subnormal inputs, which it takes as zero (Intel SDM, "DAZ"); a group of
 * 32 holding one goes through the AVX2 code instead, so every result is the formula's. */
#define CT_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512bf16,avx2")))
static CT_AVX512BF16 void narrow_avx512bf16(uint16_t *dst, const float *src, size_t n32)
{
    const __m512i expo = _mm512_set1_epi32(0x7f800000), frac = _mm512_set1_epi32(0x007fffff);
    for (size_t i = 0; i < n32; i += 32) {
        const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
        const __m512i a = _mm512_castps_si512(lo), b = _mm512_castps_si512(hi);
        /* subnormal: exponent bits 0, fraction bits not */
        const __mmask16 sa = _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(a, expo), a, frac);
        const __mmask16 sb = _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(b, expo), b, frac);
        if (__builtin_expect((sa | sb) != 0, 0)) { narrow_avx2(dst + i, src + i, 32); continue; }
        _mm512_storeu_si512((void *)(dst + i), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));   /* lo in the low half */
    }
}

/* What the n-at-a-time conversions run: 0 scalar, 1 AVX2, 2 AVX512-BF16 (decided once). */
static int narrow_kind(void)
{
    static int kind = -1;   /* every thread computes the same value: a relaxed store is enough */
    int k = __atomic_load_n(&kind, __ATOMIC_RELAXED);
    if (k < 0) {
        __builtin_cpu_init();
        k = !__builtin_cpu_supports("avx2") ? 0
          : __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") ? 2 : 1;
        __atomic_store_n(&kind, k, __ATOMIC_RELAXED);
    }
    return k;
}

int ct_bf16_vectorised(void) { return narrow_kind(); }
#else
int ct_bf16_vectorised(void) { return 0; }
#endif

void ct_bf16s_from_floats(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    const int k = narrow_kind();
    if (k == 2) {
        i = n & ~(size_t)31;
        narrow_avx512bf16(dst, src, i);
    }
    if (k >= 1) {
        const size_t e = n & ~(size_t)7;
        narrow_avx2(dst + i, src + i, e - i);
        i = e;
    }
#endif
    for (; i < n; i++) dst[i] = ct_bf16_from_float(src[i]);
}

void ct_floats_from_bf16s(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (ct_bf16_vectorised()) {
        i = n & ~(size_t)7;
        widen_avx2(dst, src, i);
    }
#endif
    for (; i < n; i++) dst[i] = ct_float_from_bf16(src[i]);
}
