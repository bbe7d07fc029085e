/* cuda/pool.h - the GPU twin of layers/pool.h: max pooling with the argmax contract
 * (first maximum on ties, flat input index), global average pooling and the mean
 * over H (gaph). Own kernels:
 * cuDNN's pooling has no argmax output. Backward GATHERS (each input sums the outputs
 * whose argmax it is, in a fixed order) instead of scattering with atomics, so it is
 * deterministic even when windows overlap. */
#ifndef CT_CUDA_POOL_H
#define CT_CUDA_POOL_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/ops.h"
#include "layers/pool.h"
void ct_maxpool2d_forward_gpu(const ct_backend *be, float *out, int *argmax, const float *in, const maxpool2d_dims *d);
void ct_maxpool2d_backward_gpu(const ct_backend *be, float *din, const float *dout, const int *argmax,
                               const maxpool2d_dims *d);
void ct_global_avgpool_forward_gpu(const ct_backend *be, float *out, const float *in, int N, int C, int HW);
void ct_global_avgpool_backward_gpu(const ct_backend *be, float *din, const float *dout, int N, int C, int HW);
void ct_avgpool_h_forward_gpu(const ct_backend *be, float *out, const float *in, int N, int C, int H, int W);
void ct_avgpool_h_backward_gpu(const ct_backend *be, float *din, const float *dout, int N, int C, int H, int W);

#ifdef __cplusplus
}
#endif
#endif
