/* cuda/dense.h - the GPU twin of layers/dense.h (same formulas and layouts; device
 * pointers; conventions in cuda/device.h). Matrix products are cuBLAS sgemm on the
 * row-major buffers (read by cuBLAS as their column-major transposes); FP32 unless
 * the context allows TF32; in bf16 (mixed precision) cublasGemmEx with bf16 operands and
 * FP32 accumulation and output (cuda/dense.cu). Bias sums run in a fixed order
 * (deterministic), in FP32 in either precision. */
#ifndef CT_CUDA_DENSE_H
#define CT_CUDA_DENSE_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/ops.h"

/* out [B, out_dim]; in [B, in_dim]; w [out_dim, in_dim]; b [out_dim] or NULL. */
void ct_dense_forward_gpu(const ct_backend *be, float *out, const float *in, const float *w, const float *b, int B,
                          int in_dim, int out_dim);
/* din [B, in_dim] overwritten (NULL: not computed); dw (NULL: not computed) and db (NULL if
 * no bias) accumulated, as on the CPU. */
void ct_dense_backward_gpu(const ct_backend *be, float *din, float *dw, float *db, const float *dout, const float *in,
                           const float *w, int B, int in_dim, int out_dim);

#ifdef __cplusplus
}
#endif
#endif
