/* dense.cu - affine layer on cuBLAS (see cuda/dense.h and layers/dense.h).
 *
 * Row-major X [r, c] is, to column-major cuBLAS, the matrix X^T [c, r] with leading
 * dimension c. So, with every buffer in ctrain's row-major layout:
 *   out = in W^T        [B, O]:  out^T = W^T' in^T   ->  sgemm(T, N, O, B, I, w, I, in, I, out, O)
 *   dW += dout^T in     [O, I]:  dW^T += in^T dout   ->  sgemm(N, T, I, O, B, in, I, dout, O, dw, I), beta 1
 *   din = dout W        [B, I]:  din^T = W^T dout^T  ->  sgemm(N, N, I, B, O, w, I, dout, O, din, I)
 *   db += sum_b dout[b, :]       own kernel, one thread per output, rows in order
 *
 * bf16 (be->math.dtype == CT_BF16, mixed precision): the same three products with
 * cublasGemmEx, A and B in CUDA_R_16BF, C in CUDA_R_32F, CUBLAS_COMPUTE_32F (FP32
 * accumulation on the bf16 tensor cores), CUBLAS_GEMM_DEFAULT. The bf16 operands are
 * copies made on the device just before each product (ct_bf16_from_float_gpu: to
 * nearest even) in the context's bf16 scratch (ct_gpu_bf16_scratch: one block, grown to
 * the largest layer and kept), laid out [in (B, I) | w (O, I) | dout (B, O)], each part
 * starting on a 256-byte boundary. dW accumulates straight into the FP32 dw (beta 1 with
 * an FP32 C, which GemmEx allows for 16BF A and B); out and din are written in FP32
 * (beta 0). The bias and db stay FP32 (the kernels below).
 */
#include "cuda/check.h"
#include "cuda/dense.h"
#include "cuda/kernels.h"

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

/* ---- bf16: the operands' copies in the context's scratch ---- */
typedef struct { uint16_t *in, *w, *dout; } dense_bf16_ops;

static size_t round256(size_t elems) { return (elems + 127) / 128 * 128; }   /* bf16 elements to 256 bytes */

static dense_bf16_ops dense_bf16_scratch(ct_gpu *g, int B, int in_dim, int out_dim)
{
    const size_t n_in = round256((size_t)B * in_dim), n_w = round256((size_t)out_dim * in_dim),
                 n_dout = round256((size_t)B * out_dim);
    uint16_t *s = (uint16_t *)ct_gpu_bf16_scratch(g, (n_in + n_w + n_dout) * sizeof(uint16_t));
    return (dense_bf16_ops){ s, s + n_in, s + n_in + n_w };
}

/* C (FP32, column-major m x n, ldc) = alpha op(A) op(B) + beta C with A, B bf16 */
static void gemm_bf16(ct_gpu *g, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const uint16_t *A, int lda,
                      const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    const float one = 1.0f;
    CT_CUBLAS_CHECK(cublasGemmEx(g->cublas, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, C,
                                 CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void dense_forward_bf16(const ct_backend *be, float *out, const float *in, const float *w, int B, int in_dim,
                               int out_dim)
{
    ct_gpu *g = ct_gpu_of(be);
    const dense_bf16_ops h = dense_bf16_scratch(g, B, in_dim, out_dim);
    ct_bf16_from_float_gpu(be, h.in, in, (size_t)B * in_dim);
    ct_bf16_from_float_gpu(be, h.w, w, (size_t)out_dim * in_dim);
    gemm_bf16(g, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, B, in_dim, h.w, in_dim, h.in, in_dim, 0.0f, out, out_dim);
}

static void dense_backward_bf16(const ct_backend *be, float *din, float *dw, const float *dout, const float *in,
                                const float *w, int B, int in_dim, int out_dim)
{
    ct_gpu *g = ct_gpu_of(be);
    const dense_bf16_ops h = dense_bf16_scratch(g, B, in_dim, out_dim);
    ct_bf16_from_float_gpu(be, h.dout, dout, (size_t)B * out_dim);
    if (dw) {
        ct_bf16_from_float_gpu(be, h.in, in, (size_t)B * in_dim);
        gemm_bf16(g, CUBLAS_OP_N, CUBLAS_OP_T, in_dim, out_dim, B, h.in, in_dim, h.dout, out_dim, 1.0f, dw, in_dim);
    }
    if (din) {
        ct_bf16_from_float_gpu(be, h.w, w, (size_t)out_dim * in_dim);
        gemm_bf16(g, CUBLAS_OP_N, CUBLAS_OP_N, in_dim, B, out_dim, h.w, in_dim, h.dout, out_dim, 0.0f, din, in_dim);
    }
}

extern "C" void ct_dense_forward_gpu(const ct_backend *be, float *out, const float *in, const float *w, const float *b,
                                     int B, int in_dim, int out_dim)
{
    ct_gpu *g = ct_gpu_of(be);
    const float one = 1.0f, zero = 0.0f;
    if (be->math.dtype == CT_BF16)
        dense_forward_bf16(be, out, in, w, B, in_dim, out_dim);
    else
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
    if (be->math.dtype == CT_BF16) {   /* the products in bf16; db below in FP32 as always */
        if (db) {
            bias_grad_kernel<<<ct_gpu_blocks((size_t)out_dim, 128), 128, 0, g->stream>>>(db, dout, B, out_dim);
            CT_LAUNCH_CHECK();
        }
        dense_backward_bf16(be, din, dw, dout, in, w, B, in_dim, out_dim);
        return;
    }
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
