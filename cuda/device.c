/* device.c - device selection, the GPU context and its header line (see device.h).
 *
 * Compiled by the C compiler in every build: with CT_HAVE_CUDA it talks to the CUDA
 * runtime, cuBLAS and cuDNN through their C APIs; without it every entry point
 * says that the GPU is not compiled in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/device.h"

#ifdef CT_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <cudnn.h>
#endif

int ct_gpu_compiled(void)
{
#ifdef CT_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int ct_gpu_visible(void)
{
#ifdef CT_HAVE_CUDA
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
#else
    return 0;
#endif
}

ct_status ct_gpu_parse_device(const char *spec, int *index)
{
    static const char forms[] = "expected cpu, gpu, gpu:N or cuda:N (N = 0, 1, ... as nvidia-smi numbers the GPUs)";
    if (!spec || !*spec) return ct_fail(CT_EINVAL, "--device: empty value; %s", forms);
    if (!strcmp(spec, "cpu")) { *index = -1; return CT_OK; }
    const char *rest = NULL;
    if (!strncmp(spec, "gpu", 3)) rest = spec + 3;
    else if (!strncmp(spec, "cuda", 4)) rest = spec + 4;
    if (!rest) return ct_fail(CT_EINVAL, "--device %s: unknown device; %s", spec, forms);
    if (!*rest) { *index = 0; return CT_OK; }
    if (*rest != ':' || rest[1] < '0' || rest[1] > '9')
        return ct_fail(CT_EINVAL, "--device %s: unknown device; %s", spec, forms);
    char *end;
    errno = 0;
    long v = strtol(rest + 1, &end, 10);
    if (*end || errno || v > 1023)
        return ct_fail(CT_EINVAL, "--device %s: '%s' is not a GPU number; %s", spec, rest + 1, forms);
    *index = (int)v;
    return CT_OK;
}

_Noreturn void ct_gpu_fatal(const char *file, int line, const char *call, const char *msg)
{
    fflush(stdout);
    fprintf(stderr, "ctrain: GPU error at %s:%d: %s: %s\n", file, line, call, msg);
    exit(1);
}

#ifndef CT_HAVE_CUDA

static const char no_cuda[] = "this ctrain was built without CUDA (CPU only); use --device cpu, "
                              "or rebuild with the CUDA toolkit and cuDNN installed (make detect shows what was found)";

ct_status ct_gpu_open(int index, const ct_gpu_options *opt)
{
    (void)opt;
    return ct_fail(CT_ENODEV, "--device gpu:%d: %s", index, no_cuda);
}
void ct_gpu_close(void) {}
ct_gpu *ct_gpu_current(void) { return NULL; }
void ct_gpu_describe(char *buf, size_t n) { snprintf(buf, n, "GPU: not compiled in (CPU-only build)"); }
ct_status ct_gpu_sync(void) { return ct_fail(CT_ENODEV, "%s", no_cuda); }
ct_status ct_gpu_malloc(void **ptr, size_t bytes, const char *what) { (void)bytes; (void)what; *ptr = NULL; return ct_fail(CT_ENODEV, "%s", no_cuda); }
void ct_gpu_free(void *ptr) { (void)ptr; }
ct_status ct_gpu_host_alloc(void **ptr, size_t bytes, const char *what) { (void)bytes; (void)what; *ptr = NULL; return ct_fail(CT_ENODEV, "%s", no_cuda); }
void ct_gpu_host_free(void *ptr) { (void)ptr; }
ct_status ct_gpu_upload(void *d, const void *s, size_t b) { (void)d; (void)s; (void)b; return ct_fail(CT_ENODEV, "%s", no_cuda); }
ct_status ct_gpu_download(void *d, const void *s, size_t b) { (void)d; (void)s; (void)b; return ct_fail(CT_ENODEV, "%s", no_cuda); }

#else /* CT_HAVE_CUDA */

static ct_gpu gpu_ctx;
static int gpu_is_open;

ct_gpu *ct_gpu_current(void) { return gpu_is_open ? &gpu_ctx : NULL; }

#define CUDA_TRY_OPEN(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        ct_gpu_close_partial(); \
        return ct_fail(CT_ENODEV, "GPU %d: %s failed at %s:%d: %s", index, #call, __FILE__, __LINE__, cudaGetErrorString(e_)); } } while (0)

static void ct_gpu_close_partial(void)
{
    if (gpu_ctx.scratch) cudaFree(gpu_ctx.scratch);
    if (gpu_ctx.host_scratch) cudaFreeHost(gpu_ctx.host_scratch);
    if (gpu_ctx.bn_sync) cudaFree(gpu_ctx.bn_sync);
    if (gpu_ctx.host_bn_sync) cudaFreeHost(gpu_ctx.host_bn_sync);
    if (gpu_ctx.cudnn) cudnnDestroy(gpu_ctx.cudnn);
    if (gpu_ctx.cublas) cublasDestroy(gpu_ctx.cublas);
    if (gpu_ctx.copy_stream) cudaStreamDestroy(gpu_ctx.copy_stream);
    if (gpu_ctx.stream) cudaStreamDestroy(gpu_ctx.stream);
    memset(&gpu_ctx, 0, sizeof gpu_ctx);
    gpu_is_open = 0;
}

void ct_gpu_close(void)
{
    if (!gpu_is_open) return;
    cudaDeviceSynchronize();
    ct_gpu_close_partial();
}

ct_status ct_gpu_open(int index, const ct_gpu_options *opt)
{
    ct_gpu_close();
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return ct_fail(CT_ENODEV, "no NVIDIA GPU found (cudaGetDeviceCount: %s); use --device cpu", cudaGetErrorString(e));
    if (count < 1)
        return ct_fail(CT_ENODEV, "no NVIDIA GPU found (cudaGetDeviceCount: 0 devices); use --device cpu");
    if (index < 0 || index >= count)
        return ct_fail(CT_ENODEV, "--device gpu:%d: this machine has %d GPU%s (gpu:0%s); choose one of them or use --device cpu",
                       index, count, count == 1 ? "" : "s", count == 1 ? "" : " ..");
    memset(&gpu_ctx, 0, sizeof gpu_ctx);
    gpu_ctx.index = index;
    if (opt) gpu_ctx.opt = *opt;
    CUDA_TRY_OPEN(cudaSetDevice(index));
    struct cudaDeviceProp prop;
    CUDA_TRY_OPEN(cudaGetDeviceProperties(&prop, index));
    snprintf(gpu_ctx.name, sizeof gpu_ctx.name, "%s", prop.name);
    gpu_ctx.total_mem = prop.totalGlobalMem;
    gpu_ctx.cc_major = prop.major;
    gpu_ctx.cc_minor = prop.minor;
    CUDA_TRY_OPEN(cudaDriverGetVersion(&gpu_ctx.driver_version));
    CUDA_TRY_OPEN(cudaRuntimeGetVersion(&gpu_ctx.runtime_version));
    CUDA_TRY_OPEN(cudaStreamCreateWithFlags(&gpu_ctx.stream, cudaStreamNonBlocking));
    CUDA_TRY_OPEN(cudaStreamCreateWithFlags(&gpu_ctx.copy_stream, cudaStreamNonBlocking));
    cublasStatus_t cb = cublasCreate(&gpu_ctx.cublas);
    if (cb == CUBLAS_STATUS_SUCCESS) cb = cublasSetStream(gpu_ctx.cublas, gpu_ctx.stream);
    if (cb == CUBLAS_STATUS_SUCCESS)
        cb = cublasSetMathMode(gpu_ctx.cublas, gpu_ctx.opt.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (cb != CUBLAS_STATUS_SUCCESS) {
        ct_gpu_close_partial();
        return ct_fail(CT_ENODEV, "GPU %d: cuBLAS could not start (%s); check the CUDA installation or use --device cpu",
                       index, cublasGetStatusString(cb));
    }
    int cublas_v = 0;
    cublasGetVersion(gpu_ctx.cublas, &cublas_v);
    gpu_ctx.cublas_version = (size_t)cublas_v;
    cudnnStatus_t cd = cudnnCreate(&gpu_ctx.cudnn);
    if (cd == CUDNN_STATUS_SUCCESS) cd = cudnnSetStream(gpu_ctx.cudnn, gpu_ctx.stream);
    if (cd != CUDNN_STATUS_SUCCESS) {
        ct_gpu_close_partial();
        return ct_fail(CT_ENODEV, "GPU %d: cuDNN could not start (%s); check that cuDNN 9 is installed or use --device cpu",
                       index, cudnnGetErrorString(cd));
    }
    gpu_ctx.cudnn_version = cudnnGetVersion();
    CUDA_TRY_OPEN(cudaMalloc((void **)&gpu_ctx.scratch, CT_GPU_SCRATCH * sizeof(double)));
    CUDA_TRY_OPEN(cudaMallocHost((void **)&gpu_ctx.host_scratch, CT_GPU_SCRATCH * sizeof(double)));
    CUDA_TRY_OPEN(cudaMalloc((void **)&gpu_ctx.bn_sync, CT_GPU_BN_SYNC * sizeof(double)));
    CUDA_TRY_OPEN(cudaMallocHost((void **)&gpu_ctx.host_bn_sync, CT_GPU_BN_SYNC * sizeof(double)));
    gpu_is_open = 1;
    return CT_OK;
}

void ct_gpu_describe(char *buf, size_t n)
{
    if (!gpu_is_open) { snprintf(buf, n, "GPU: none open (CUDA build; cuDNN %zu.%zu.%zu)", cudnnGetVersion() / 10000,
                                 cudnnGetVersion() / 100 % 100, cudnnGetVersion() % 100); return; }
    const ct_gpu *g = &gpu_ctx;
    snprintf(buf, n, "GPU %d: %s, %.1f GiB, compute %d.%d | driver CUDA %d.%d, runtime %d.%d, cuDNN %zu.%zu.%zu, cuBLAS %zu.%zu.%zu | %s%s",
             g->index, g->name, (double)g->total_mem / (1024.0 * 1024.0 * 1024.0), g->cc_major, g->cc_minor,
             g->driver_version / 1000, g->driver_version % 1000 / 10, g->runtime_version / 1000, g->runtime_version % 1000 / 10,
             g->cudnn_version / 10000, g->cudnn_version / 100 % 100, g->cudnn_version % 100,
             g->cublas_version / 10000, g->cublas_version / 100 % 100, g->cublas_version % 100,
             g->opt.tf32 ? "TF32 allowed" : "FP32 (no TF32)", g->opt.deterministic ? ", deterministic" : "");
}

ct_status ct_gpu_sync(void)
{
    CT_ASSERT(gpu_is_open);
    cudaError_t e = cudaStreamSynchronize(gpu_ctx.copy_stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(gpu_ctx.stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) return ct_fail(CT_ENODEV, "GPU %d: queued work failed: %s", gpu_ctx.index, cudaGetErrorString(e));
    return CT_OK;
}

ct_status ct_gpu_malloc(void **ptr, size_t bytes, const char *what)
{
    *ptr = NULL;
    if (!bytes) return CT_OK;
    cudaError_t e = cudaMalloc(ptr, bytes);
    /* zeroed on the compute stream and waited for: the streams are non-blocking, so a
     * cudaMemset on the legacy default stream would not be ordered with their work */
    if (e == cudaSuccess) e = cudaMemsetAsync(*ptr, 0, bytes, gpu_ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(gpu_ctx.stream);
    if (e != cudaSuccess) {
        if (*ptr) cudaFree(*ptr);
        *ptr = NULL;
        cudaGetLastError();   /* clear the (non-sticky) allocation error */
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return ct_fail(CT_ENOMEM, "GPU %d: cannot allocate %.1f MiB for %s (%s; %.1f of %.1f MiB free); use a smaller "
                       "--batch or model, or free the GPU", gpu_ctx.index, bytes / 1048576.0, what, cudaGetErrorString(e),
                       free_b / 1048576.0, total_b / 1048576.0);
    }
    return CT_OK;
}

void ct_gpu_free(void *ptr) { if (ptr) cudaFree(ptr); }

ct_status ct_gpu_host_alloc(void **ptr, size_t bytes, const char *what)
{
    *ptr = NULL;
    cudaError_t e = cudaMallocHost(ptr, bytes ? bytes : 64);
    if (e != cudaSuccess) {
        *ptr = NULL;
        cudaGetLastError();
        return ct_fail(CT_ENOMEM, "cannot allocate %zu bytes of pinned host memory for %s (%s)", bytes, what, cudaGetErrorString(e));
    }
    memset(*ptr, 0, bytes);
    return CT_OK;
}

void ct_gpu_host_free(void *ptr) { if (ptr) cudaFreeHost(ptr); }

ct_status ct_gpu_upload(void *dst, const void *src, size_t bytes)
{
    CT_ASSERT(gpu_is_open);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, gpu_ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(gpu_ctx.stream);
    if (e != cudaSuccess) return ct_fail(CT_ENODEV, "copying %zu bytes to the GPU failed: %s", bytes, cudaGetErrorString(e));
    return CT_OK;
}

ct_status ct_gpu_download(void *dst, const void *src, size_t bytes)
{
    CT_ASSERT(gpu_is_open);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, gpu_ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(gpu_ctx.stream);
    if (e != cudaSuccess) return ct_fail(CT_ENODEV, "copying %zu bytes from the GPU failed: %s", bytes, cudaGetErrorString(e));
    return CT_OK;
}

#endif /* CT_HAVE_CUDA */
