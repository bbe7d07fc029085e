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
/* Training dropout of one process's part of a larger batch (data-parallel training,
 * train/dist.h). The whole batch is S segments of `rows` rows of `per` values each
 * ([S * rows, per]: S = 2 for the two towers of a siamese batch, else 1); this part holds
 * rows [first, first + n) of every segment, packed: out, mask, in [S * n, per]. Each of its
 * elements gets the mask value ct_dropout_forward of the whole batch would give it: the
 * numbers of the other parts' rows are skipped (ct_rng_advance), so the stream ends where
 * the whole batch's call leaves it. first = 0, n = rows: the whole batch. */
void ct_dropout_forward_part(float *out, float *mask, const float *in, size_t per, int S, int n, int first, int rows,
                             float p, ct_rng *rng);
/* out = in * mask with a given mask (what forward does after drawing it). */
void ct_dropout_apply(float *out, const float *mask, const float *in, size_t n);
/* din = dout * mask (overwritten; din may equal dout). In eval mode use din = dout. */
void ct_dropout_backward(float *din, const float *dout, const float *mask, size_t n);

#endif
