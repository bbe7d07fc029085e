/* dropout.h - inverted dropout.
 *
 * Training: each element is kept with probability 1 - p and scaled by 1/(1-p),
 * so the expected output equals the input and evaluation needs no rescaling:
 *   mask[i] = (u_i >= p) ? 1/(1-p) : 0,  u_i ~ U[0,1) from the dropout RNG stream
 *   out[i]  = in[i] * mask[i]
 * Evaluation (train == 0) or p == 0: out = in, the mask is not touched and no
 * random numbers are drawn.
 */
#ifndef CT_DROPOUT_H
#define CT_DROPOUT_H
#include <stddef.h>
#include "core/rng.h"

/* out [n], mask [n] (kept for backward), in [n]; 0 <= p < 1. out may equal in. */
void ct_dropout_forward(float *out, float *mask, const float *in, size_t n, float p, int train, ct_rng *rng);
/* out = in * mask with a given mask (what forward does after drawing it). */
void ct_dropout_apply(float *out, const float *mask, const float *in, size_t n);
/* din = dout * mask (overwritten; din may equal dout). In eval mode use din = dout. */
void ct_dropout_backward(float *din, const float *dout, const float *mask, size_t n);

#endif
