/* half.c - float16 <-> float32 conversions (see half.h), in portable C: the
 * bits of the float32 are split into sign, exponent and significand and put
 * back together in the other format. */
#include <string.h>
#include "core/half.h"

uint16_t ct_half_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;                    /* |f| */
    if (a >= 0x7f800000u)                             /* inf stays inf; NaN stays NaN (quiet, top fraction bits kept) */
        return (uint16_t)(sign | (a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* >= 65520 = 65504 + half an ulp: rounds to inf */
    int e = (int)(a >> 23) - 127;                     /* |f| = 1.m * 2^e (for a normal float32) */
    uint32_t q, rem, halfway;
    if (e >= -14) {                                   /* a normal half: keep 10 of the 23 fraction bits */
        q = ((uint32_t)(e + 15) << 10) | ((a & 0x7fffffu) >> 13);
        rem = a & 0x1fffu;
        halfway = 0x1000u;
    } else {                                          /* a subnormal half (or zero): count units of 2^-24 */
        if (e < -25) return sign;                     /* below 2^-25, half the smallest subnormal: zero */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;     /* the 24-bit significand: |f| = m * 2^(e-23) */
        int shift = -(e + 1);                         /* |f| / 2^-24 = m / 2^shift, shift in 14..24 */
        q = m >> shift;
        rem = m & ((1u << shift) - 1);
        halfway = 1u << (shift - 1);
    }
    if (rem > halfway || (rem == halfway && (q & 1u))) q++;   /* to nearest, ties to even; a carry moves up the exponent */
    return (uint16_t)(sign | q);
}

float ct_float_from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {                                     /* zero or subnormal: m * 2^-24, exact in float32 */
        float v = (float)m * 5.9604644775390625e-8f;
        memcpy(&x, &v, sizeof x);
        x |= sign;
    } else if (e == 31) {
        x = sign | 0x7f800000u | (m << 13);          /* inf, or NaN with its fraction */
    } else {
        x = sign | ((e - 15 + 127) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

void ct_halves_from_floats(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = ct_half_from_float(src[i]);
}

void ct_floats_from_halves(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = ct_float_from_half(src[i]);
}
