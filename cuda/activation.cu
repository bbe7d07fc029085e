/* activation.cu - relu, tanh, sigmoid on the GPU (see cuda/activation.h for the
 * formulas' home, layers/activation.h). sigmoid uses the CPU's overflow-free form. */
#include <math.h>
#include "cuda/activation.h"
#include "cuda/check.h"

/* o[i] = expr of x = a[i] (forward) or of x = dout[i], y = out[i] (backward) */
#define UNARY(name, expr)                                                                         \
    __global__ static void name##_kernel(float *o, const float *a, size_t n)                     \
    {                                                                                             \
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) { \
            float x = a[i];                                                                       \
            o[i] = (expr);                                                                        \
        }                                                                                         \
    }
#define BINARY(name, expr)                                                                        \
    __global__ static void name##_kernel(float *o, const float *a, const float *b, size_t n)     \
    {                                                                                             \
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) { \
            float x = a[i], y = b[i];                                                             \
            o[i] = (expr);                                                                        \
        }                                                                                         \
    }

__device__ static float sigmoid_dev(float x)
{
    float e = expf(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    return x >= 0.0f ? r : e * r;
}

UNARY(relu_fwd, x > 0.0f ? x : 0.0f)
BINARY(relu_bwd, y > 0.0f ? x : 0.0f)
UNARY(tanh_fwd, tanhf(x))
BINARY(tanh_bwd, x * (1.0f - y * y))
UNARY(sigmoid_fwd, sigmoid_dev(x))
BINARY(sigmoid_bwd, x * y * (1.0f - y))

#define LAUNCH(name, ...) do { \
    name##_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(__VA_ARGS__, n); CT_LAUNCH_CHECK(); } while (0)

extern "C" void ct_relu_forward_gpu(const ct_backend *be, float *out, const float *in, size_t n)
{
    LAUNCH(relu_fwd, out, in);
}
extern "C" void ct_relu_backward_gpu(const ct_backend *be, float *din, const float *dout, const float *out, size_t n)
{
    LAUNCH(relu_bwd, din, dout, out);
}
extern "C" void ct_tanh_forward_gpu(const ct_backend *be, float *out, const float *in, size_t n)
{
    LAUNCH(tanh_fwd, out, in);
}
extern "C" void ct_tanh_backward_gpu(const ct_backend *be, float *din, const float *dout, const float *out, size_t n)
{
    LAUNCH(tanh_bwd, din, dout, out);
}
extern "C" void ct_sigmoid_forward_gpu(const ct_backend *be, float *out, const float *in, size_t n)
{
    LAUNCH(sigmoid_fwd, out, in);
}
extern "C" void ct_sigmoid_backward_gpu(const ct_backend *be, float *din, const float *dout, const float *out, size_t n)
{
    LAUNCH(sigmoid_bwd, din, dout, out);
}
