/* bf16.h - bfloat16 ("brain float", bf16) to and from float32: the operand format
 * of the mixed-precision matrix products (layers/gemm_bf16.h), beside IEEE half in
 * core/half.h.
 *
 *   float32:  1 sign bit, 8 exponent bits (bias 127), 23 fraction bits
 *   bfloat16: 1 sign bit, 8 exponent bits (bias 127),  7 fraction bits
 *
 * A bf16 is the top 16 bits of a float32: the same sign, the same exponent, the
 * first 7 of the 23 fraction bits. So
 *   - widening is exact: the 16 bits go on top, 16 zero bits below;
 *   - narrowing drops the low 16 bits, rounding to nearest with ties to even. On
 *     the bits x of the float (for anything but NaN) that is one integer addition:
 *         bf16 = (x + 0x7FFF + ((x >> 16) & 1)) >> 16
 *     The low half L = x & 0xFFFF is what is dropped. Adding 0x7FFF carries into
 *     the upper half exactly when L > 0x7FFF (above halfway: round up); the extra
 *     1, the kept half's last bit, makes the halfway case L = 0x8000 carry when
 *     that bit is odd (ties to even). A carry out of the fraction moves the
 *     exponent up, as rounding 1.1111111|1... up to 10.0000000 must, and from the
 *     largest finite exponent it gives 0x7F80, infinity: values at or above
 *     0x7F7F8000 (= 3.3961e38, halfway between bf16's largest 3.3895e38 and the
 *     next power of two) overflow to infinity, as in IEEE arithmetic.
 *     Subnormal floats need no separate case: their bits round the same way (a
 *     subnormal bf16 keeps the top 7 bits of the 23).
 *   - a NaN stays a NaN: the addition could carry a NaN's fraction into the
 *     exponent (a NaN turned infinity), so NaNs are cut instead, keeping the
 *     sign and the top fraction bits, with the quiet bit (0x0040) set: a
 *     signalling NaN whose payload sat in the low bits would otherwise become
 *     infinity.
 * The relative error of narrowing a normal value is at most 2^-8: bf16 keeps 8
 * significant bits (the implicit 1 and 7 stored), so a unit in the last place is
 * 2^-7 of the value's power of two 2^e, and rounding to nearest errs by at most half
 * of that, 2^-8 2^e <= 2^-8 |x|. So |bf16(x) - x| <= 2^-8 |x| for 2^-126 <= |x| below
 * the overflow threshold (the unit roundoff of a p-bit significand is 2^-p; float32's
 * is 2^-24). Reached, nearly, at x = 1 + 2^-8, a tie that goes down to 1.
 *
 * The n-at-a-time versions use AVX2 where the CPU has it (8 values per step, the
 * same integer formula, so the same bits), and the scalar code elsewhere. Narrowing
 * uses AVX512-BF16's VCVTNE2PS2BF16 (32 values per instruction) where the CPU has it:
 * it gives the formula's bits except on subnormal inputs, which it flushes to zero, so
 * 32 values holding a subnormal go through the AVX2 code. */
#ifndef CT_BF16_H
#define CT_BF16_H
#include <stddef.h>
#include <stdint.h>

uint16_t ct_bf16_from_float(float f);
float    ct_float_from_bf16(uint16_t b);
/* n values at a time: dst[i] = conversion of src[i]. */
void     ct_bf16s_from_floats(uint16_t *dst, const float *src, size_t n);
void     ct_floats_from_bf16s(float *dst, const uint16_t *src, size_t n);
/* What the n-at-a-time conversions run on this CPU: 0 the scalar code, 1 AVX2, 2 AVX2 and,
 * for narrowing, the AVX512-BF16 conversion instruction (the same bits: bf16.c). */
int      ct_bf16_vectorised(void);

#endif
