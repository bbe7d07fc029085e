/* cuda/activation.h - the GPU twin of layers/activation.h: relu, tanh, sigmoid and
 * their backward passes (written with the forward output, so in-place use works as on
 * the CPU). Own elementwise kernels rather than cudnnActivation*: the CPU contract
 * (backward from the output only, no tensor descriptors) is kept exactly. */
#ifndef CT_CUDA_ACTIVATION_H
#define CT_CUDA_ACTIVATION_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/ops.h"

void ct_relu_forward_gpu(const ct_backend *be, float *out, const float *in, size_t n);
void ct_relu_backward_gpu(const ct_backend *be, float *din, const float *dout, const float *out, size_t n);
void ct_tanh_forward_gpu(const ct_backend *be, float *out, const float *in, size_t n);
void ct_tanh_backward_gpu(const ct_backend *be, float *din, const float *dout, const float *out, size_t n);
void ct_sigmoid_forward_gpu(const ct_backend *be, float *out, const float *in, size_t n);
void ct_sigmoid_backward_gpu(const ct_backend *be, float *din, const float *dout, const float *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
