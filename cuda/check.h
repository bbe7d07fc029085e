/* check.h - CHECK-style macros for CUDA runtime, cuBLAS and cuDNN calls, and the
 * launch helpers shared by the .cu files. Include from .cu files only.
 *
 *   CT_CUDA_TRY(call)    in functions returning ct_status: on failure, returns
 *   CT_CUDNN_TRY(call)   CT_ENODEV with "file:line: call: message" left by ct_fail
 *   CT_CUBLAS_TRY(call)  (plans, allocations, set-up: everything user sizes can make fail)
 *
 *   CT_CUDA_CHECK(call)  in the void functions of a training step (their twins in
 *   CT_CUDNN_CHECK(call) layers/ return nothing and all memory was planned before):
 *   CT_CUBLAS_CHECK(call) a failure there is the device or driver failing, so it
 *                         is reported with file and line by ct_gpu_fatal (exit 1).
 *   CT_LAUNCH_CHECK()    after a kernel launch: catches bad launch configurations.
 */
#ifndef CT_CUDA_CHECK_H
#define CT_CUDA_CHECK_H
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include "cuda/device.h"

#define CT_CUDA_TRY(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) \
    return ct_fail(CT_ENODEV, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); } while (0)
#define CT_CUDNN_TRY(call) do { cudnnStatus_t e_ = (call); if (e_ != CUDNN_STATUS_SUCCESS) \
    return ct_fail(CT_ENODEV, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudnnGetErrorString(e_)); } while (0)
#define CT_CUBLAS_TRY(call) do { cublasStatus_t e_ = (call); if (e_ != CUBLAS_STATUS_SUCCESS) \
    return ct_fail(CT_ENODEV, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cublasGetStatusString(e_)); } while (0)

#define CT_CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) \
    ct_gpu_fatal(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); } while (0)
#define CT_CUDNN_CHECK(call) do { cudnnStatus_t e_ = (call); if (e_ != CUDNN_STATUS_SUCCESS) \
    ct_gpu_fatal(__FILE__, __LINE__, #call, cudnnGetErrorString(e_)); } while (0)
#define CT_CUBLAS_CHECK(call) do { cublasStatus_t e_ = (call); if (e_ != CUBLAS_STATUS_SUCCESS) \
    ct_gpu_fatal(__FILE__, __LINE__, #call, cublasGetStatusString(e_)); } while (0)
#define CT_LAUNCH_CHECK() CT_CUDA_CHECK(cudaGetLastError())

/* The GPU context of a backend (cuda/ops_gpu.h: ct_backend_open_gpu); a cuda/ function
 * given a backend without one (the CPU's, or a closed one) is a programmer error. */
static inline ct_gpu *ct_gpu_of(const ct_backend *be)
{
    CT_ASSERT(be != NULL && be->dev != NULL);
    return (ct_gpu *)be->dev;
}
static inline cudaStream_t ct_gpu_stream(const ct_backend *be) { return ct_gpu_of(be)->stream; }

/* Grid size for a grid-stride loop over n elements with `threads` per block. */
static inline unsigned ct_gpu_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned)(b > 65535u * 8u ? 65535u * 8u : b);
}

#define CT_THREADS 256

#endif
