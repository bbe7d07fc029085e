/* device.h - a GPU's context: the device, its streams, cuBLAS and cuDNN handles
 * and scratch memory, which every cuda/ function receives explicitly.
 *
 * There is no current GPU in ctrain: ct_gpu_open(&g, index, math) selects device
 * `index`, creates a compute stream, a copy stream (batch uploads, the ring of
 * cuda/ops_gpu.c), a cuBLAS handle and a cuDNN handle bound to the compute stream,
 * and returns them in a ct_gpu that belongs to the caller until ct_gpu_close(g).
 * The GPU backend (cuda/ops_gpu.h: ct_backend_open_gpu) keeps it as be->dev, and
 * the cuda/ layer functions take the backend as their first argument: its ct_gpu
 * for the streams and handles (ct_gpu_of in cuda/check.h), its math for TF32,
 * determinism and the data type. The helpers below (memory, copies, sync, the
 * header line) take the ct_gpu itself.
 *
 * Naming convention of cuda/: the GPU twin of a CPU function `foo` in layers/
 * is `foo_gpu`, with the backend first and then the same argument order
 * (outputs first, `d` prefix for gradients, input gradients overwritten,
 * parameter gradients accumulated); every float and int pointer it takes is a
 * DEVICE pointer unless its comment says "host". Functions are asynchronous on
 * the compute stream unless they return a host value (a loss, a norm), which
 * synchronises.
 *
 * ctrain drives one GPU per process: ct_gpu_open makes its device the CUDA
 * runtime's current device of the calling thread (cudaSetDevice), and the calls
 * on a ct_gpu are made from that thread.
 *
 * Errors:
 *   - a CPU-only build (no CT_HAVE_CUDA): ct_gpu_open fails with CT_ENODEV,
 *     "this ctrain was built without CUDA (CPU only); use --device cpu";
 *   - a CUDA build on a machine without a usable GPU or driver: CT_ENODEV,
 *     "no NVIDIA GPU found (cudaGetDeviceCount: <the runtime's reason>); use --device cpu";
 *   - an index out of range: CT_ENODEV naming how many GPUs there are.
 * None of these crash or abort.
 *
 * Precision (the backend's ct_math, layers/ops.h): by default every matrix product
 * and convolution is plain FP32 (cuBLAS CUBLAS_DEFAULT_MATH, cuDNN CUDNN_FMA_MATH),
 * so results match the CPU to float rounding. math.tf32 = 1 allows TensorFloat-32
 * tensor cores (faster on Ampere and later, ~1e-3 relative error per product): the
 * cuBLAS handle is set up for it when the GPU is opened, and the LSTM and conv2d
 * plans read it when they are made. math.deterministic = 1 makes cuDNN convolution
 * plans pick only deterministic algorithms (ctrain's own kernels are always
 * deterministic: fixed reduction orders, no float atomics).
 * math.dtype = CT_BF16 is mixed precision as PyTorch's autocast does it (docs/precision.md):
 * the operands of the dense products (cublasGemmEx, bf16 in, FP32 out, CUBLAS_COMPUTE_32F),
 * of the convolutions (cuDNN's pseudo-bf16 configuration) and of the LSTM (cuDNN RNN with
 * bf16 data and FP32 math) are rounded to bf16 (to nearest even) on the device, every sum
 * is FP32, and the parameters, gradients, optimizer state and every other layer stay FP32.
 * The GPU computes it where it has bf16 tensor cores (compute capability 8.0 and later)
 * and cuDNN 9.13 or later (bf16 RNN data); elsewhere ct_backend_open_gpu refuses it with
 * one line (CT_ENODEV). The bf16 copies of the operands live in the plans (LSTM, conv2d:
 * allocated when planned) or, for dense (no plan), in the context's bf16 scratch below.
 */
#ifndef CT_CUDA_DEVICE_H
#define CT_CUDA_DEVICE_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/error.h"
#include "layers/ops.h"

/* The runtime's handle types, declared here so that C files need no CUDA headers. */
struct CUstream_st;
struct CUevent_st;
struct cublasContext;
struct cudnnContext;

typedef struct ct_gpu {
    int index;                         /* CUDA device ordinal */
    struct CUstream_st *stream;        /* compute: every kernel, cuBLAS and cuDNN call */
    struct CUstream_st *copy_stream;   /* host-to-device batch uploads */
    struct cublasContext *cublas;
    struct cudnnContext *cudnn;
    /* what ct_gpu_describe prints */
    char name[256];
    size_t total_mem;                  /* bytes */
    int cc_major, cc_minor;            /* compute capability */
    int driver_version, runtime_version; /* CUDA versions as 1000 * major + 10 * minor */
    size_t cudnn_version;              /* cudnnGetVersion(): 10000 * major + 100 * minor + patch */
    size_t cublas_version;
    double *scratch;                   /* [CT_GPU_SCRATCH] device doubles for reductions that return a host value
                                          and their partial sums */
    double *host_scratch;              /* [CT_GPU_SCRATCH] pinned host doubles receiving them */
    double *bn_sync;                   /* [CT_GPU_BN_SYNC] device doubles: synchronised batchnorm's per-channel sums */
    double *host_bn_sync;              /* [CT_GPU_BN_SYNC] pinned host doubles: the same, summed over the replicas */
    void *bf16_scratch;                /* device: the bf16 copies of the dense products' operands (ct_gpu_bf16_scratch) */
    size_t bf16_scratch_bytes;         /* its size; 0 until a bf16 product first asks */
} ct_gpu;

#define CT_GPU_SCRATCH 320          /* doubles: [0, 64) results read back, [64, 320) reduction partial sums */
#define CT_GPU_SCRATCH_PARTIALS 64
#define CT_GPU_BN_SYNC (2 * 1024)   /* doubles: two sums per channel, 1024 channels at a time */

/* 1 when this ctrain was compiled with the GPU backend. */
int ct_gpu_compiled(void);
/* How many GPUs this process sees (CUDA_VISIBLE_DEVICES applied); 0 without any or without CUDA. */
int ct_gpu_visible(void);

/* Parses a --device value: "cpu" -> *index = -1; "gpu", "cuda" -> 0; "gpu:N", "cuda:N" -> N.
 * Anything else is CT_EINVAL with a message naming the accepted forms. Host only: works in
 * every build (whether the GPU can be used is ct_gpu_open's question). */
ct_status ct_gpu_parse_device(const char *spec, int *index);

/* Opens device `index` for computing with `math` (NULL: the defaults, all 0; its tf32
 * sets the cuBLAS handle's math mode) into a new context *g, which the caller closes.
 * Fails with CT_ENODEV and a message as listed above (*g NULL). */
ct_status ct_gpu_open(ct_gpu **g, int index, const ct_math *math);
void      ct_gpu_close(ct_gpu *g);   /* waits for its work, releases everything; NULL is ignored */

/* One header line for the log: the device g and the math it computes with, e.g.
 *   "GPU 0: NVIDIA H100 80GB HBM3, 79.1 GiB, compute 9.0 | driver CUDA 12.8, runtime 13.0, cuDNN 9.19.0, cuBLAS 13.0.0 | FP32 (no TF32), deterministic"
 * In a CPU-only build: "GPU: not compiled in (CPU-only build)". g NULL: "GPU: none open". */
void ct_gpu_describe(const ct_gpu *g, const ct_math *math, char *buf, size_t n);

/* Waits for everything queued on both streams of g; returns CT_ENODEV with the runtime's
 * message (file and line of the first failure) if any asynchronous work failed. */
ct_status ct_gpu_sync(const ct_gpu *g);

/* Device memory helpers reporting failures through ct_fail (CT_ENOMEM naming `what`). */
ct_status ct_gpu_malloc(const ct_gpu *g, void **ptr, size_t bytes, const char *what);   /* zeroed on g's stream */
void      ct_gpu_free(void *ptr);
ct_status ct_gpu_host_alloc(void **ptr, size_t bytes, const char *what);  /* pinned host memory, zeroed */
void      ct_gpu_host_free(void *ptr);
/* Synchronous copies (checkpoints, tests) on g's compute stream: host <-> device, n bytes. */
ct_status ct_gpu_upload(const ct_gpu *g, void *dst_dev, const void *src_host, size_t bytes);
ct_status ct_gpu_download(const ct_gpu *g, void *dst_host, const void *src_dev, size_t bytes);

/* CUDA builds: the context's bf16 scratch, at least `bytes` long, for the operands of the
 * products that have no plan (dense in bf16). It grows to the largest request and is kept
 * until ct_gpu_close; a request that fits returns it at once (every step after the first).
 * Growing waits for the compute stream (the old block may still be read by queued work)
 * before cudaFree, and cudaFree/cudaMalloc synchronise the device themselves: a stall, but
 * only when a larger product than any before comes (the first steps). Inside a step, so
 * running out of memory there is fatal (ct_gpu_fatal). */
void     *ct_gpu_bf16_scratch(ct_gpu *g, size_t bytes);

/* A failure inside a training step (the memory was planned before, so this is the
 * device or the driver failing, not user input): prints "ctrain: GPU error at
 * file:line: call: message" to stderr and exits with status 1. Used by CT_*_CHECK. */
_Noreturn void ct_gpu_fatal(const char *file, int line, const char *call, const char *msg);

#ifdef __cplusplus
}
#endif
#endif
