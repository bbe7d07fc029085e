/* pair.h - siamese pair heads: turn two embeddings into one score per pair.
 *
 * In ctrain both towers run as one batch of 2B sequences, so the embeddings of
 * pair k are rows k (a) and B + k (b) of one [2B, D] matrix: a = emb, b = emb + B*D.
 *
 * 1. Euclidean distance exactly as Keras's siamese example computes it:
 *      s_k = sum_j (a_kj - b_kj)^2,   d_k = sqrt(max(s_k, eps))     (eps = 1e-7, K.epsilon())
 *    backward: dd/da_kj = (a_kj - b_kj) / d_k if s_k > eps, else 0 (the max picked eps);
 *              dd/db_kj = -dd/da_kj.
 * 2. Absolute difference, the input of the learned head |a - b| -> dense -> sigmoid:
 *      out = |a - b|,  d/da = sign(a - b) (0 at a == b, as PyTorch), d/db = -d/da.
 *    The dense layer is layers/dense.h with out_dim 1, and the sigmoid is folded
 *    into binary cross-entropy with logits (layers/loss.h) for stability.
 */
#ifndef CT_PAIR_H
#define CT_PAIR_H
#include <stddef.h>

#define CT_KERAS_EPSILON 1e-7f

/* d [B]; a, b [B, D]. */
void ct_euclidean_forward(float *d, const float *a, const float *b, int B, int D, float eps);
/* da, db [B, D] overwritten; dd [B]; d [B] is the forward output. */
void ct_euclidean_backward(float *da, float *db, const float *dd, const float *d, const float *a, const float *b,
                        int B, int D, float eps);

/* out, a, b [n]. */
void ct_absdiff_forward(float *out, const float *a, const float *b, size_t n);
/* da, db [n] overwritten. */
void ct_absdiff_backward(float *da, float *db, const float *dout, const float *a, const float *b, size_t n);

#endif
