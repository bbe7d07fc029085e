/* cuda/batchnorm.h - the GPU twin of layers/batchnorm.h (same formulas, PyTorch's
 * momentum and unbiased running variance). One block per channel, sums in double in a
 * fixed order. Own kernels rather than cudnnBatchNormalization*: ctrain's contract
 * keeps xhat and invstd for backward (cuDNN's backward wants the input x instead), and
 * this way the GPU and CPU agree to float rounding, including the M = 1 case. */
#ifndef CT_CUDA_BATCHNORM_H
#define CT_CUDA_BATCHNORM_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/ops.h"
#include "layers/batchnorm.h"
void ct_batchnorm_forward_gpu(const ct_backend *be, float *out, float *xhat, float *mean, float *invstd,
                              float *running_mean, float *running_var, const float *in, const float *gamma,
                              const float *beta, const batchnorm_dims *d, int train);
void ct_batchnorm_backward_gpu(const ct_backend *be, float *din, float *dgamma, float *dbeta, const float *dout,
                               const float *xhat, const float *invstd, const float *gamma, const batchnorm_dims *d);

#ifdef __cplusplus
}
#endif
#endif
