/* add.cu - the element-wise sum on the GPU (see layers/add.h for the formulas):
 * forward out = a + b, backward da += dout and db += dout. One kernel serves both,
 * y[i] = a[i] + b[i], with y = a for an accumulation. */
#include "cuda/add.h"
#include "cuda/check.h"

/* y, a, b [n]: y = a + b (y may be a or b) */
__global__ static void add_kernel(float *y, const float *a, const float *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = a[i] + b[i];
}

static void launch(const ct_backend *be, float *y, const float *a, const float *b, size_t n)
{
    if (n == 0) return;
    add_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(y, a, b, n);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_add_forward_gpu(const ct_backend *be, float *out, const float *a, const float *b, size_t n)
{
    launch(be, out, a, b, n);
}

extern "C" void ct_add_backward_gpu(const ct_backend *be, float *da, float *db, const float *dout, size_t n)
{
    if (da) launch(be, da, da, dout, n);
    if (db) launch(be, db, db, dout, n);
}
