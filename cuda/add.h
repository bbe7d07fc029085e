/* cuda/add.h - the GPU twin of layers/add.h: out = a + b, and its backward pass
 * da += dout, db += dout (each skipped when NULL), the join of a residual block. */
#ifndef CT_CUDA_ADD_H
#define CT_CUDA_ADD_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/ops.h"

void ct_add_forward_gpu(const ct_backend *be, float *out, const float *a, const float *b, size_t n);
void ct_add_backward_gpu(const ct_backend *be, float *da, float *db, const float *dout, size_t n);

#ifdef __cplusplus
}
#endif
#endif
