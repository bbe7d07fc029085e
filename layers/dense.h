/* dense.h - fully connected (affine) layer.
 *
 *   out[b, o] = sum_i in[b, i] * w[o, i] + bias[o]        (out = in W^T + b)
 *
 * w has PyTorch's Linear layout [out_dim, in_dim]; Keras's kernel is its transpose.
 * Init: Glorot-uniform weights (fan_in = in_dim, fan_out = out_dim), zero bias.
 *
 * Gradient convention (all layers): input gradients are OVERWRITTEN, parameter
 * gradients ACCUMULATE (+=), so one gradient buffer can collect a whole batch.
 */
#ifndef CT_DENSE_H
#define CT_DENSE_H
#include <stdint.h>
#include "core/params.h"

typedef struct { int w, b; } dense_ids;   /* handles into a ct_params */

/* Registers "<prefix>/w" [out_dim, in_dim] (Glorot) and, if bias, "<prefix>/b" [out_dim] (zeros; else ids->b = -1). */
ct_status ct_dense_params_add(dense_ids *ids, ct_params *ps, const char *prefix, int in_dim, int out_dim, int bias);

/* out [B, out_dim]; in [B, in_dim]; w [out_dim, in_dim]; b [out_dim] or NULL. */
void ct_dense_forward(float *out, const float *in, const float *w, const float *b, int B, int in_dim, int out_dim);

/* din [B, in_dim] overwritten (NULL: not computed); dw [out_dim, in_dim] and
 * db [out_dim] (NULL if no bias) accumulated; dout [B, out_dim]. */
/* Mixed precision: the same three products with bf16 operands and float32 sums
 * (layers/gemm_bf16.h: its bound (2) holds per element, K = in_dim forward, out_dim for
 * din, B for dw); the bias and db stay float32. scratch: ct_dense_bf16_scratch_elems
 * bf16 elements of work space. The caller checks ct_bf16_check() first. */
size_t ct_dense_bf16_scratch_elems(int B, int in_dim, int out_dim);
void   ct_dense_forward_bf16(float *out, const float *in, const float *w, const float *b, int B, int in_dim, int out_dim,
                             uint16_t *scratch);
void   ct_dense_backward_bf16(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                              int B, int in_dim, int out_dim, uint16_t *scratch);
void ct_dense_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                    int B, int in_dim, int out_dim);

#endif
