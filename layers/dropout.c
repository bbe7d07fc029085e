/* dropout.c - inverted dropout (see dropout.h).
 *
 * Forward draws one uniform number per element from the dropout RNG stream, in
 * element order, so a given stream state always gives the same mask; the mask
 * holds the scale itself (0 or 1/(1-p)), so forward and backward are the same
 * elementwise product.
 */
#include <string.h>
#include "core/error.h"
#include "layers/dropout.h"

/* out, mask, in [n] */
void ct_dropout_forward(float *out, float *mask, const float *in, size_t n, float p, int train, ct_rng *rng)
{
    CT_ASSERT(p >= 0.0f && p < 1.0f);
    if (!train || p == 0.0f) {   /* identity: no mask, no random draws */
        if (out != in) memcpy(out, in, n * sizeof *out);
        return;
    }
    const float scale = 1.0f / (1.0f - p);
    ct_rng_uniform_fill(rng, mask, n);   /* one uniform per element, then keep it when >= p */
    for (size_t i = 0; i < n; i++) mask[i] = mask[i] >= p ? scale : 0.0f;
    ct_dropout_apply(out, mask, in, n);
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
    for (size_t i = 0; i < n; i++) out[i] = in[i] * mask[i];
}

/* out = in * mask is linear in `in` with diagonal Jacobian mask, so
 *   din = dout * mask */
void ct_dropout_backward(float *din, const float *dout, const float *mask, size_t n)
{
    for (size_t i = 0; i < n; i++) din[i] = dout[i] * mask[i];
}
