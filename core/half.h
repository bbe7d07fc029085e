/* half.h - IEEE 754 binary16 ("half", float16) to and from float32, exactly as
 * the standard defines the conversions: widening is exact; narrowing rounds to
 * nearest, ties to even, with overflow to infinity, gradual underflow through
 * the subnormals, and NaN kept a (quiet) NaN. Feature stores written with
 * `prep --dtype float16` hold their features in this format (io/featstore.h).
 *
 *   binary16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits
 *     normal     (-1)^s * 2^(e-15) * 1.f      e = 1..30   (6.1e-5 .. 65504)
 *     subnormal  (-1)^s * 2^-14 * 0.f         e = 0       (down to 2^-24 = 6.0e-8)
 *     inf / NaN  e = 31
 * A float32 feature normalised to zero mean and unit variance keeps 11
 * significant bits: a relative error of at most 2^-11 = 4.9e-4 per value. */
#ifndef CT_HALF_H
#define CT_HALF_H
#include <stddef.h>
#include <stdint.h>

uint16_t ct_half_from_float(float f);
float    ct_float_from_half(uint16_t h);
/* n values at a time: dst[i] = conversion of src[i]. */
void     ct_halves_from_floats(uint16_t *dst, const float *src, size_t n);
void     ct_floats_from_halves(float *dst, const uint16_t *src, size_t n);

#endif
