/* pool.cu - max pooling (argmax), global average pooling and the mean over H
 * (gaph) on the GPU (see cuda/pool.h; formulas in layers/pool.h).
 *
 * maxpool backward, as a gather: input (y, x) of plane p lies in the windows with
 *   oy in [ceil((y - K + 1) / s), floor(y / s)] ∩ [0, OH)  (likewise ox),
 * and receives the sum, in (oy, ox) order, of dout over those whose argmax is it. */
#include "cuda/check.h"
#include "cuda/pool.h"

__global__ static void maxpool_fwd_kernel(float *out, int *argmax, const float *in, maxpool2d_dims d)
{
    size_t n = (size_t)d.N * d.C * d.OH * d.OW;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n; idx += (size_t)gridDim.x * blockDim.x) {
        int ox = (int)(idx % d.OW), oy = (int)(idx / d.OW % d.OH);
        size_t pl = idx / ((size_t)d.OW * d.OH);
        int base = (int)(pl * d.H * d.W);
        const float *inp = in + base;
        int best = (oy * d.stride) * d.W + ox * d.stride;
        float m = inp[best];
        for (int ky = 0; ky < d.K; ky++) {
            int row = (oy * d.stride + ky) * d.W + ox * d.stride;
            for (int kx = 0; kx < d.K; kx++)
                if (inp[row + kx] > m) { m = inp[row + kx]; best = row + kx; }
        }
        out[idx] = m;
        argmax[idx] = base + best;
    }
}

__global__ static void maxpool_bwd_kernel(float *din, const float *dout, const int *argmax, maxpool2d_dims d)
{
    size_t n = (size_t)d.N * d.C * d.H * d.W;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n; idx += (size_t)gridDim.x * blockDim.x) {
        int x = (int)(idx % d.W), y = (int)(idx / d.W % d.H);
        size_t pl = idx / ((size_t)d.W * d.H);
        int oy0 = y - d.K + 1 > 0 ? (y - d.K + 1 + d.stride - 1) / d.stride : 0, oy1 = y / d.stride;
        int ox0 = x - d.K + 1 > 0 ? (x - d.K + 1 + d.stride - 1) / d.stride : 0, ox1 = x / d.stride;
        if (oy1 > d.OH - 1) oy1 = d.OH - 1;
        if (ox1 > d.OW - 1) ox1 = d.OW - 1;
        float s = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                size_t o = (pl * d.OH + oy) * d.OW + ox;
                if (argmax[o] == (int)idx) s += dout[o];
            }
        din[idx] = s;
    }
}

__global__ static void gap_fwd_kernel(float *out, const float *in, int NC, int HW)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < NC; r += gridDim.x * blockDim.x) {
        double s = 0.0;
        for (int i = 0; i < HW; i++) s += in[(size_t)r * HW + i];
        out[r] = (float)(s / HW);
    }
}

__global__ static void gap_bwd_kernel(float *din, const float *dout, int NC, int HW)
{
    size_t n = (size_t)NC * HW;
    const float inv = 1.0f / (float)HW;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        din[i] = dout[i / HW] * inv;
}

/* mean over H: one thread per (plane, w), summing the H rows in order in float, as the CPU */
__global__ static void gaph_fwd_kernel(float *out, const float *in, int NC, int H, int W)
{
    size_t n = (size_t)NC * W;
    const float inv = 1.0f / (float)H;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t pl = i / W, w = i % W;
        const float *x = in + pl * H * W + w;
        float s = 0.0f;
        for (int h = 0; h < H; h++) s += x[(size_t)h * W];
        out[i] = s * inv;
    }
}

__global__ static void gaph_bwd_kernel(float *din, const float *dout, int NC, int H, int W)
{
    size_t n = (size_t)NC * H * W;
    const float inv = 1.0f / (float)H;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t pl = i / ((size_t)H * W), w = i % W;
        din[i] = dout[pl * W + w] * inv;
    }
}

extern "C" void ct_avgpool_h_forward_gpu(const ct_backend *be, float *out, const float *in, int N, int C, int H, int W)
{
    gaph_fwd_kernel<<<ct_gpu_blocks((size_t)N * C * W, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(out, in, N * C, H, W);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_avgpool_h_backward_gpu(const ct_backend *be, float *din, const float *dout, int N, int C, int H, int W)
{
    gaph_bwd_kernel<<<ct_gpu_blocks((size_t)N * C * H * W, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(din, dout, N * C, H, W);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_maxpool2d_forward_gpu(const ct_backend *be, float *out, int *argmax, const float *in,
                                         const maxpool2d_dims *d)
{
    size_t n = (size_t)d->N * d->C * d->OH * d->OW;
    maxpool_fwd_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(out, argmax, in, *d);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_maxpool2d_backward_gpu(const ct_backend *be, float *din, const float *dout, const int *argmax,
                                          const maxpool2d_dims *d)
{
    size_t n = (size_t)d->N * d->C * d->H * d->W;
    maxpool_bwd_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(din, dout, argmax, *d);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_global_avgpool_forward_gpu(const ct_backend *be, float *out, const float *in, int N, int C, int HW)
{
    gap_fwd_kernel<<<ct_gpu_blocks((size_t)N * C, 128), 128, 0, ct_gpu_stream(be)>>>(out, in, N * C, HW);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_global_avgpool_backward_gpu(const ct_backend *be, float *din, const float *dout, int N, int C, int HW)
{
    gap_bwd_kernel<<<ct_gpu_blocks((size_t)N * C * HW, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(din, dout, N * C, HW);
    CT_LAUNCH_CHECK();
}
