/* bf16.c - float32 <-> bfloat16 conversions (see bf16.h): the scalar formulas on
 * the bits, and the same formulas 8 lanes at a time with AVX2. */
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

int ct_bf16_vectorised(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
#else
int ct_bf16_vectorised(void) { return 0; }
#endif

void ct_bf16s_from_floats(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (ct_bf16_vectorised()) {
        i = n & ~(size_t)7;
        narrow_avx2(dst, src, i);
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
