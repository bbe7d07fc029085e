/* dense.cu - affine layer on cuBLAS (see cuda/dense.h and layers/dense.h).
 *
 * Row-major X [r, c] is, to column-major cuBLAS, the matrix X^T [c, r] with leading
 * dimension c. So, with every buffer in ctrain's row-major layout:
 *   out = in W^T        [B, O]:  out^T = W^T' in^T   ->  sgemm(T, N, O, B, I, w, I, in, I, out, O)
 *   dW += dout^T in     [O, I]:  dW^T += in^T dout   ->  sgemm(N, T, I, O, B, in, I, dout, O, dw, I), beta 1
 *   din = dout W        [B, I]:  din^T = W^T dout^T  ->  sgemm(N, N, I, B, O, w, I, dout, O, din, I)
 *   db += sum_b dout[b, :]       own kernel, one thread per output, rows in order
 */
#include "cuda/check.h"
#include "cuda/dense.h"

__global__ static void bias_add_kernel(float *out, const float *b, int B, int O)
{
    size_t n = (size_t)B * O;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] += b[i % O];
}

__global__ static void bias_grad_kernel(float *db, const float *dout, int B, int O)
{
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < O; o += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += dout[(size_t)b * O + o];
        db[o] += s;
    }
}

extern "C" void ct_dense_forward_gpu(const ct_backend *be, float *out, const float *in, const float *w, const float *b,
                                     int B, int in_dim, int out_dim)
{
    ct_gpu *g = ct_gpu_of(be);
    const float one = 1.0f, zero = 0.0f;
    CT_CUBLAS_CHECK(cublasSgemm(g->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, B, in_dim,
                                &one, w, in_dim, in, in_dim, &zero, out, out_dim));
    if (b) {
        bias_add_kernel<<<ct_gpu_blocks((size_t)B * out_dim, CT_THREADS), CT_THREADS, 0, g->stream>>>(out, b, B, out_dim);
        CT_LAUNCH_CHECK();
    }
}

extern "C" void ct_dense_backward_gpu(const ct_backend *be, float *din, float *dw, float *db, const float *dout,
                                      const float *in, const float *w, int B, int in_dim, int out_dim)
{
    ct_gpu *g = ct_gpu_of(be);
    const float one = 1.0f, zero = 0.0f;
    if (dw)
        CT_CUBLAS_CHECK(cublasSgemm(g->cublas, CUBLAS_OP_N, CUBLAS_OP_T, in_dim, out_dim, B,
                                    &one, in, in_dim, dout, out_dim, &one, dw, in_dim));
    if (db) {
        bias_grad_kernel<<<ct_gpu_blocks((size_t)out_dim, 128), 128, 0, g->stream>>>(db, dout, B, out_dim);
        CT_LAUNCH_CHECK();
    }
    if (din)
        CT_CUBLAS_CHECK(cublasSgemm(g->cublas, CUBLAS_OP_N, CUBLAS_OP_N, in_dim, B, out_dim,
                                    &one, w, in_dim, dout, out_dim, &zero, din, in_dim));
}
