/* peak.cu - the GPU's practical matrix-product peak (core/peak.h: ct_peak_sgemm_gpu,
 * ct_sgemm_rate_gpu, ct_gemm_rate_gpu_bf16): a cuBLAS product of n^3 on the given GPU's
 * compute stream, timed with CUDA events, one warm-up then `repeats` repeats.
 * ct_peak_sgemm_gpu runs sgemm of CT_PEAK_N^3 in the cuBLAS handle's math mode (plain
 * FP32 unless the GPU was opened with tf32); ct_sgemm_rate_gpu chooses the size and FP32
 * or TF32 itself and puts the handle's math mode back afterwards; ct_gemm_rate_gpu_bf16
 * times the product the bf16 layers run (cublasGemmEx, bf16 A and B, float32 C and
 * accumulation: cuda/dense.cu). */
#include <stdlib.h>
#include <cuda_bf16.h>
#include "cuda/check.h"
extern "C" {
#include "core/peak.h"
}

__global__ static void fill_kernel(float *x, size_t n, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = scale * (float)((i * 2654435761u) % 1000u) / 1000.0f - 0.5f * scale;
}

/* The same values, rounded to bf16 (to nearest even). */
__global__ static void fill_bf16_kernel(__nv_bfloat16 *x, size_t n, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16_rn(scale * (float)((i * 2654435761u) % 1000u) / 1000.0f - 0.5f * scale);
}

/* Times the products into ms[repeats] (bf16: A and B hold bf16); everything it allocates is
 * freed by the caller's cleanup. */
static ct_status time_sgemms(ct_gpu *g, double *ms, int repeats, float *A, float *B, float *C, int n, cudaEvent_t e0,
                             cudaEvent_t e1, int bf16)
{
    const float one = 1.0f, zero = 0.0f;
    for (int rep = -1; rep < repeats; rep++) {   /* rep -1 is the warm-up */
        CT_CUDA_TRY(cudaEventRecord(e0, g->stream));
        if (bf16)
            CT_CUBLAS_TRY(cublasGemmEx(g->cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n,
                                       &zero, C, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        else
            CT_CUBLAS_TRY(cublasSgemm(g->cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, n, B, n, &zero, C, n));
        CT_CUDA_TRY(cudaEventRecord(e1, g->stream));
        CT_CUDA_TRY(cudaEventSynchronize(e1));
        float t = 0;
        CT_CUDA_TRY(cudaEventElapsedTime(&t, e0, e1));
        if (rep >= 0) ms[rep] = t;
    }
    return CT_OK;
}

/* math: -1 the handle's mode, 0 plain FP32, 1 TF32 tensor cores, 2 bf16 operands (GemmEx). */
enum { MATH_BF16 = 2 };
static ct_status peak_gpu(ct_gpu *g, ct_sgemm_rate *r, int n, int repeats, int math)
{
    if (!g) return ct_fail(CT_ENODEV, "no GPU is open (ct_gpu_open first)");
    if (n < 1 || repeats < 1 || repeats > CT_PEAK_MAX_REPEATS)
        return ct_fail(CT_EINVAL, "GPU sgemm: n = %d and repeats = %d must be >= 1 (repeats <= %d)", n, repeats, CT_PEAK_MAX_REPEATS);
    const int R = repeats;
    size_t nn = (size_t)n * n;
    float *A = NULL, *B = NULL, *C = NULL;   /* [n, n] each */
    cudaEvent_t e0 = NULL, e1 = NULL;
    double ms[CT_PEAK_MAX_REPEATS];
    cublasMath_t saved = CUBLAS_DEFAULT_MATH;
    int restore = 0;
    ct_status st = ct_gpu_malloc(g, (void **)&A, nn * sizeof(float), "sgemm A");
    if (st == CT_OK) st = ct_gpu_malloc(g, (void **)&B, nn * sizeof(float), "sgemm B");
    if (st == CT_OK) st = ct_gpu_malloc(g, (void **)&C, nn * sizeof(float), "sgemm C");
    if (st == CT_OK && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess))
        st = ct_fail(CT_ENODEV, "cudaEventCreate failed");
    if (st == CT_OK && math >= 0 && math != MATH_BF16) {
        if (cublasGetMathMode(g->cublas, &saved) != CUBLAS_STATUS_SUCCESS
            || cublasSetMathMode(g->cublas, math ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS)
            st = ct_fail(CT_ENODEV, "cublasSetMathMode failed");
        else restore = 1;
    }
    if (st == CT_OK && math == MATH_BF16) {   /* A and B hold n x n bf16 (half of their bytes) */
        fill_bf16_kernel<<<ct_gpu_blocks(nn, CT_THREADS), CT_THREADS, 0, g->stream>>>((__nv_bfloat16 *)A, nn, 1.0f);
        fill_bf16_kernel<<<ct_gpu_blocks(nn, CT_THREADS), CT_THREADS, 0, g->stream>>>((__nv_bfloat16 *)B, nn, 0.5f);
    } else if (st == CT_OK) {
        fill_kernel<<<ct_gpu_blocks(nn, CT_THREADS), CT_THREADS, 0, g->stream>>>(A, nn, 1.0f);
        fill_kernel<<<ct_gpu_blocks(nn, CT_THREADS), CT_THREADS, 0, g->stream>>>(B, nn, 0.5f);
    }
    if (st == CT_OK) {   /* the fills' launches (a bad configuration is reported only here) */
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            st = ct_fail(CT_ENODEV, "%s:%d: filling the product's operands: %s", __FILE__, __LINE__, cudaGetErrorString(e));
    }
    if (st == CT_OK) st = time_sgemms(g, ms, R, A, B, C, n, e0, e1, math == MATH_BF16);
    if (restore) cublasSetMathMode(g->cublas, saved);
    if (st == CT_OK) {
        double flop = 2.0 * n * n * (double)n;
        r->median = flop / (ct_sort_median(ms, R) * 1e-3) / 1e9;   /* sorts ms: fastest first */
        r->best = flop / (ms[0] * 1e-3) / 1e9;
        r->worst = flop / (ms[R - 1] * 1e-3) / 1e9;
        r->repeats = R;
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    ct_gpu_free(A); ct_gpu_free(B); ct_gpu_free(C);
    return st;
}

extern "C" ct_status ct_peak_sgemm_gpu(struct ct_gpu *g, ct_sgemm_rate *r)
{
    return peak_gpu(g, r, CT_PEAK_N, CT_PEAK_REPEATS, -1);
}

extern "C" ct_status ct_sgemm_rate_gpu(struct ct_gpu *g, ct_sgemm_rate *r, int n, int tf32, int repeats)
{
    return peak_gpu(g, r, n, repeats, tf32 ? 1 : 0);
}

extern "C" ct_status ct_gemm_rate_gpu_bf16(struct ct_gpu *g, ct_sgemm_rate *r, int n, int repeats)
{
    return peak_gpu(g, r, n, repeats, MATH_BF16);
}
