/* device.c - device selection, opening and closing a GPU's context, and its
 * header line (see device.h).
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

ct_status ct_gpu_open(ct_gpu **g, int index, const ct_math *math)
{
    (void)math;
    *g = NULL;
    return ct_fail(CT_ENODEV, "--device gpu:%d: %s", index, no_cuda);
}
void ct_gpu_close(ct_gpu *g) { (void)g; }
void ct_gpu_describe(const ct_gpu *g, const ct_math *math, char *buf, size_t n)
{
    (void)g; (void)math;
    snprintf(buf, n, "GPU: not compiled in (CPU-only build)");
}
ct_status ct_gpu_sync(const ct_gpu *g) { (void)g; return ct_fail(CT_ENODEV, "%s", no_cuda); }
ct_status ct_gpu_malloc(const ct_gpu *g, void **ptr, size_t bytes, const char *what)
{
    (void)g; (void)bytes; (void)what;
    *ptr = NULL;
    return ct_fail(CT_ENODEV, "%s", no_cuda);
}
void ct_gpu_free(void *ptr) { (void)ptr; }
ct_status ct_gpu_host_alloc(void **ptr, size_t bytes, const char *what) { (void)bytes; (void)what; *ptr = NULL; return ct_fail(CT_ENODEV, "%s", no_cuda); }
void ct_gpu_host_free(void *ptr) { (void)ptr; }
ct_status ct_gpu_upload(const ct_gpu *g, void *d, const void *s, size_t b) { (void)g; (void)d; (void)s; (void)b; return ct_fail(CT_ENODEV, "%s", no_cuda); }
ct_status ct_gpu_download(const ct_gpu *g, void *d, const void *s, size_t b) { (void)g; (void)d; (void)s; (void)b; return ct_fail(CT_ENODEV, "%s", no_cuda); }

#else /* CT_HAVE_CUDA */

#define CUDA_TRY_OPEN(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        gpu_release(g); \
        return ct_fail(CT_ENODEV, "GPU %d: %s failed at %s:%d: %s", index, #call, __FILE__, __LINE__, cudaGetErrorString(e_)); } } while (0)

/* Releases whatever a (possibly half-made) context holds, and the context. */
static void gpu_release(ct_gpu *g)
{
    if (g->scratch) cudaFree(g->scratch);
    if (g->host_scratch) cudaFreeHost(g->host_scratch);
    if (g->bn_sync) cudaFree(g->bn_sync);
    if (g->host_bn_sync) cudaFreeHost(g->host_bn_sync);
    if (g->bf16_scratch) cudaFree(g->bf16_scratch);
    if (g->cudnn) cudnnDestroy(g->cudnn);
    if (g->cublas) cublasDestroy(g->cublas);
    if (g->copy_stream) cudaStreamDestroy(g->copy_stream);
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g);
}

void ct_gpu_close(ct_gpu *g)
{
    if (!g) return;
    cudaStreamSynchronize(g->copy_stream);
    cudaStreamSynchronize(g->stream);
    gpu_release(g);
}

ct_status ct_gpu_open(ct_gpu **out, int index, const ct_math *math)
{
    *out = NULL;
    const int tf32 = math && math->tf32;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return ct_fail(CT_ENODEV, "no NVIDIA GPU found (cudaGetDeviceCount: %s); use --device cpu", cudaGetErrorString(e));
    if (count < 1)
        return ct_fail(CT_ENODEV, "no NVIDIA GPU found (cudaGetDeviceCount: 0 devices); use --device cpu");
    if (index < 0 || index >= count)
        return ct_fail(CT_ENODEV, "--device gpu:%d: this machine has %d GPU%s (gpu:0%s); choose one of them or use --device cpu",
                       index, count, count == 1 ? "" : "s", count == 1 ? "" : " ..");
    ct_gpu *g = ct_calloc(1, sizeof *g, "GPU context");
    if (!g) return CT_ENOMEM;
    g->index = index;
    CUDA_TRY_OPEN(cudaSetDevice(index));
    struct cudaDeviceProp prop;
    CUDA_TRY_OPEN(cudaGetDeviceProperties(&prop, index));
    snprintf(g->name, sizeof g->name, "%s", prop.name);
    g->total_mem = prop.totalGlobalMem;
    g->cc_major = prop.major;
    g->cc_minor = prop.minor;
    CUDA_TRY_OPEN(cudaDriverGetVersion(&g->driver_version));
    CUDA_TRY_OPEN(cudaRuntimeGetVersion(&g->runtime_version));
    CUDA_TRY_OPEN(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    CUDA_TRY_OPEN(cudaStreamCreateWithFlags(&g->copy_stream, cudaStreamNonBlocking));
    cublasStatus_t cb = cublasCreate(&g->cublas);
    if (cb == CUBLAS_STATUS_SUCCESS) cb = cublasSetStream(g->cublas, g->stream);
    if (cb == CUBLAS_STATUS_SUCCESS) cb = cublasSetMathMode(g->cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (cb != CUBLAS_STATUS_SUCCESS) {
        gpu_release(g);
        return ct_fail(CT_ENODEV, "GPU %d: cuBLAS could not start (%s); check the CUDA installation or use --device cpu",
                       index, cublasGetStatusString(cb));
    }
    int cublas_v = 0;
    cublasGetVersion(g->cublas, &cublas_v);
    g->cublas_version = (size_t)cublas_v;
    cudnnStatus_t cd = cudnnCreate(&g->cudnn);
    if (cd == CUDNN_STATUS_SUCCESS) cd = cudnnSetStream(g->cudnn, g->stream);
    if (cd != CUDNN_STATUS_SUCCESS) {
        gpu_release(g);
        return ct_fail(CT_ENODEV, "GPU %d: cuDNN could not start (%s); check that cuDNN 9 is installed or use --device cpu",
                       index, cudnnGetErrorString(cd));
    }
    g->cudnn_version = cudnnGetVersion();
    CUDA_TRY_OPEN(cudaMalloc((void **)&g->scratch, CT_GPU_SCRATCH * sizeof(double)));
    CUDA_TRY_OPEN(cudaMallocHost((void **)&g->host_scratch, CT_GPU_SCRATCH * sizeof(double)));
    CUDA_TRY_OPEN(cudaMalloc((void **)&g->bn_sync, CT_GPU_BN_SYNC * sizeof(double)));
    CUDA_TRY_OPEN(cudaMallocHost((void **)&g->host_bn_sync, CT_GPU_BN_SYNC * sizeof(double)));
    *out = g;
    return CT_OK;
}

void ct_gpu_describe(const ct_gpu *g, const ct_math *math, char *buf, size_t n)
{
    const ct_math fp32 = { 0 };
    if (!math) math = &fp32;
    if (!g) { snprintf(buf, n, "GPU: none open (CUDA build; cuDNN %zu.%zu.%zu)", cudnnGetVersion() / 10000,
                                 cudnnGetVersion() / 100 % 100, cudnnGetVersion() % 100); return; }
    snprintf(buf, n, "GPU %d: %s, %.1f GiB, compute %d.%d | driver CUDA %d.%d, runtime %d.%d, cuDNN %zu.%zu.%zu, cuBLAS %zu.%zu.%zu | %s%s%s",
             g->index, g->name, (double)g->total_mem / (1024.0 * 1024.0 * 1024.0), g->cc_major, g->cc_minor,
             g->driver_version / 1000, g->driver_version % 1000 / 10, g->runtime_version / 1000, g->runtime_version % 1000 / 10,
             g->cudnn_version / 10000, g->cudnn_version / 100 % 100, g->cudnn_version % 100,
             g->cublas_version / 10000, g->cublas_version / 100 % 100, g->cublas_version % 100,
             math->dtype == CT_BF16 ? "bf16 mixed precision (bf16 operands, FP32 sums)"
             : math->tf32 ? "TF32 allowed" : "FP32 (no TF32)",
             math->deterministic ? ", deterministic" : "", math->lstm_own ? ", ctrain's own LSTM kernels" : "");
}

ct_status ct_gpu_sync(const ct_gpu *g)
{
    CT_ASSERT(g != NULL);
    cudaError_t e = cudaStreamSynchronize(g->copy_stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) return ct_fail(CT_ENODEV, "GPU %d: queued work failed: %s", g->index, cudaGetErrorString(e));
    return CT_OK;
}

ct_status ct_gpu_malloc(const ct_gpu *g, void **ptr, size_t bytes, const char *what)
{
    CT_ASSERT(g != NULL);
    *ptr = NULL;
    if (!bytes) return CT_OK;
    cudaError_t e = cudaMalloc(ptr, bytes);
    /* zeroed on the compute stream and waited for: the streams are non-blocking, so a
     * cudaMemset on the legacy default stream would not be ordered with their work */
    if (e == cudaSuccess) e = cudaMemsetAsync(*ptr, 0, bytes, g->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
    if (e != cudaSuccess) {
        if (*ptr) cudaFree(*ptr);
        *ptr = NULL;
        cudaGetLastError();   /* clear the (non-sticky) allocation error */
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return ct_fail(CT_ENOMEM, "GPU %d: cannot allocate %.1f MiB for %s (%s; %.1f of %.1f MiB free); use a smaller "
                       "--batch or model, or free the GPU", g->index, bytes / 1048576.0, what, cudaGetErrorString(e),
                       free_b / 1048576.0, total_b / 1048576.0);
    }
    return CT_OK;
}

void ct_gpu_free(void *ptr) { if (ptr) cudaFree(ptr); }

void *ct_gpu_bf16_scratch(ct_gpu *g, size_t bytes)
{
    CT_ASSERT(g != NULL);
    if (bytes <= g->bf16_scratch_bytes) return g->bf16_scratch;
    size_t want = g->bf16_scratch_bytes * 2;   /* doubling: a handful of growths in a whole run */
    if (want < bytes) want = bytes;
    if (want < ((size_t)1 << 20)) want = (size_t)1 << 20;
    cudaError_t e = cudaStreamSynchronize(g->stream);   /* queued products may still read the old block */
    if (e != cudaSuccess) ct_gpu_fatal(__FILE__, __LINE__, "cudaStreamSynchronize", cudaGetErrorString(e));
    if (g->bf16_scratch) cudaFree(g->bf16_scratch);
    g->bf16_scratch = NULL;
    g->bf16_scratch_bytes = 0;
    e = cudaMalloc(&g->bf16_scratch, want);
    if (e != cudaSuccess) {
        g->bf16_scratch = NULL;
        char msg[160];
        snprintf(msg, sizeof msg, "%s (%.1f MiB for the bf16 copies of a dense layer's operands)", cudaGetErrorString(e),
                 want / 1048576.0);
        ct_gpu_fatal(__FILE__, __LINE__, "cudaMalloc", msg);
    }
    g->bf16_scratch_bytes = want;
    return g->bf16_scratch;
}

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

ct_status ct_gpu_upload(const ct_gpu *g, void *dst, const void *src, size_t bytes)
{
    CT_ASSERT(g != NULL);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
    if (e != cudaSuccess) return ct_fail(CT_ENODEV, "copying %zu bytes to the GPU failed: %s", bytes, cudaGetErrorString(e));
    return CT_OK;
}

ct_status ct_gpu_download(const ct_gpu *g, void *dst, const void *src, size_t bytes)
{
    CT_ASSERT(g != NULL);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
    if (e != cudaSuccess) return ct_fail(CT_ENODEV, "copying %zu bytes from the GPU failed: %s", bytes, cudaGetErrorString(e));
    return CT_OK;
}

#endif /* CT_HAVE_CUDA */
