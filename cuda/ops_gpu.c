/* ops_gpu.c - the GPU backend (layers/ops.h, cuda/ops_gpu.h): opening a GPU as a
 * backend, and its table of operations: the cuda/ functions (each takes the
 * backend first, as the table does), the small adapters that give the LSTM and
 * conv2d the table's plan objects, device memory on the backend's compute stream,
 * and the batch ring.
 *
 * The ring: two pinned host blocks and two device slots. ring_put k copies the
 * host block into pinned block s = k % 2 (after waiting until that block's
 * previous copy has left it), queues the copy to device slot s on the copy
 * stream, and makes the compute stream wait for it, so the copy overlaps the
 * compute already queued and precedes the compute queued next. A host block that
 * is pinned itself (host_alloc) skips the staging copy: the queued copy reads it,
 * and ring_wait tells its owner when that copy has left it (a seed-model batch is
 * 4.1 MB: one host copy less per step). Device slot s
 * was last read by batch k-2; the copy stream waits for an event recorded on the
 * compute stream at put k-1, when everything batch k-2 queued was already queued.
 *
 * Compiled in every build; without CUDA it only says that the GPU is absent.
 */
#include <stdlib.h>
#include <string.h>
#include "cuda/ops_gpu.h"
#include "cuda/device.h"

struct CUstream_st *ct_backend_gpu_stream(const ct_backend *be)
{
    if (!be || !be->dev || !ct_ops_gpu() || be->ops != ct_ops_gpu()) return NULL;
    return ((const ct_gpu *)be->dev)->stream;
}

#ifndef CT_HAVE_CUDA

const ct_ops *ct_ops_gpu(void) { return NULL; }

ct_status ct_backend_open_gpu(ct_backend *be, int index, const ct_math *math)
{
    memset(be, 0, sizeof *be);
    ct_gpu *g = NULL;
    return ct_gpu_open(&g, index, math);   /* says that CUDA is not compiled in */
}

#else

#include <cuda_runtime_api.h>
#include "cuda/activation.h"
#include "cuda/add.h"
#include "cuda/batchnorm.h"
#include "cuda/conv2d.h"
#include "cuda/dense.h"
#include "cuda/kernels.h"
#include "cuda/lstm.h"
#include "cuda/pool.h"

#define CUDA_OR_DIE(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) \
    ct_gpu_fatal(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); } while (0)

static ct_gpu *gpu_of(const ct_backend *be)
{
    CT_ASSERT(be != NULL && be->dev != NULL);   /* a GPU entry given a closed backend is a programmer error */
    return be->dev;
}

/* ---- the backend ---- */

static void gpu_close(ct_backend *be) { ct_gpu_close(be->dev); }

/* bf16 (mixed precision, cuda/device.h) needs bf16 tensor cores - compute capability 8.0
 * (Ampere) and later - for the products and convolutions, and cuDNN 9.13 or later for the
 * LSTM's bf16 RNN data (cudnnGetVersion: 10000 major + 100 minor + patch). */
#define GPU_BF16_MIN_CC 8
#define GPU_BF16_MIN_CUDNN 91300

static ct_status gpu_check_dtype(const ct_backend *be, ct_dtype t)
{
    if (t == CT_F32) return CT_OK;
    if (t != CT_BF16)
        return ct_fail(CT_EINVAL, "this backend computes in %s and %s only", ct_dtype_name(CT_F32), ct_dtype_name(CT_BF16));
    const ct_gpu *g = gpu_of(be);
    if (g->cc_major >= GPU_BF16_MIN_CC && g->cudnn_version >= GPU_BF16_MIN_CUDNN) return CT_OK;
    return ct_fail(CT_ENODEV, "GPU %d (%s) has compute capability %d.%d and cuDNN %zu.%zu.%zu; bf16 needs compute capability "
                   "%d.0 or later (bf16 tensor cores) and cuDNN %d.%d or later (bf16 RNN data): use --precision fp32",
                   g->index, g->name, g->cc_major, g->cc_minor, g->cudnn_version / 10000, g->cudnn_version / 100 % 100,
                   g->cudnn_version % 100, GPU_BF16_MIN_CC, GPU_BF16_MIN_CUDNN / 10000, GPU_BF16_MIN_CUDNN / 100 % 100);
}

/* ---- memory on the backend's GPU ---- */

static ct_status gpu_mem_alloc(const ct_backend *be, void **ptr, size_t bytes, const char *what)
{
    return ct_gpu_malloc(gpu_of(be), ptr, bytes, what);
}
static void      gpu_mem_free(const ct_backend *be, void *ptr) { (void)be; ct_gpu_free(ptr); }
static ct_status gpu_upload(const ct_backend *be, void *dst, const void *src, size_t bytes)
{
    return ct_gpu_upload(gpu_of(be), dst, src, bytes);
}
static ct_status gpu_download(const ct_backend *be, void *dst, const void *src, size_t bytes)
{
    return ct_gpu_download(gpu_of(be), dst, src, bytes);
}
static ct_status gpu_sync(const ct_backend *be) { return ct_gpu_sync(gpu_of(be)); }

static void gpu_copy(const ct_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src) CUDA_OR_DIE(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, gpu_of(be)->stream));
}

static void gpu_zero(const ct_backend *be, void *dst, size_t bytes)
{
    if (bytes) CUDA_OR_DIE(cudaMemsetAsync(dst, 0, bytes, gpu_of(be)->stream));
}

static ct_status gpu_host_alloc(const ct_backend *be, void **ptr, size_t bytes, const char *what)
{
    (void)be;
    return ct_gpu_host_alloc(ptr, bytes, what);
}
static void gpu_host_free(const ct_backend *be, void *ptr) { (void)be; ct_gpu_host_free(ptr); }

/* ---- the batch ring ---- */
typedef struct {
    size_t bytes;
    void *host[2], *dev[2];
    cudaEvent_t copied[2];      /* copy stream: slot's copy done (its pinned block is free again) */
    cudaEvent_t consumed[2];    /* compute stream: the work that reads the slot has been queued before this */
    const void *src[2];         /* the caller's pinned block the slot's last copy read (NULL: the ring's own) */
    int next;                   /* slot of the next put */
    int puts;                   /* puts so far (the first two slots have no earlier reader) */
} gpu_ring;

static void gpu_ring_free(const ct_backend *be, void *ring)
{
    gpu_ring *r = ring;
    if (!r) return;
    cudaStreamSynchronize(gpu_of(be)->copy_stream);
    for (int s = 0; s < 2; s++) {
        ct_gpu_host_free(r->host[s]);
        ct_gpu_free(r->dev[s]);
        if (r->copied[s]) cudaEventDestroy(r->copied[s]);
        if (r->consumed[s]) cudaEventDestroy(r->consumed[s]);
    }
    free(r);
}

static ct_status gpu_ring_create(const ct_backend *be, void **ring, size_t bytes)
{
    *ring = NULL;
    gpu_ring *r = ct_calloc(1, sizeof *r, "batch ring");
    if (!r) return CT_ENOMEM;
    r->bytes = bytes;
    ct_status st = CT_OK;
    for (int s = 0; s < 2 && st == CT_OK; s++) {
        st = ct_gpu_host_alloc(&r->host[s], bytes, "batch staging (pinned)");
        if (st == CT_OK) st = ct_gpu_malloc(gpu_of(be), &r->dev[s], bytes, "batch");
        if (st == CT_OK && (cudaEventCreateWithFlags(&r->copied[s], cudaEventDisableTiming) != cudaSuccess
                            || cudaEventCreateWithFlags(&r->consumed[s], cudaEventDisableTiming) != cudaSuccess))
            st = ct_fail(CT_ENODEV, "GPU: cannot create the batch ring's events");
    }
    if (st != CT_OK) { gpu_ring_free(be, r); return st; }
    *ring = r;
    return CT_OK;
}

static const void *gpu_ring_put(const ct_backend *be, void *ring, const void *host, size_t bytes)
{
    gpu_ring *r = ring;
    const ct_gpu *g = gpu_of(be);
    CT_ASSERT(r && bytes <= r->bytes);
    const int s = r->next;
    /* everything queued so far is all the work the slot 1 - s batch (the previous put) will queue
     * before the next put: mark it, so that put can reuse slot 1 - s after it */
    CUDA_OR_DIE(cudaEventRecord(r->consumed[1 - s], g->stream));
    struct cudaPointerAttributes at;
    const cudaError_t asked = cudaPointerGetAttributes(&at, host);
    if (asked != cudaSuccess) (void)cudaGetLastError();   /* an unanswered question must leave no error behind */
    const int pinned = asked == cudaSuccess && at.type == cudaMemoryTypeHost;
    const void *src = host;
    if (!pinned) {
        CUDA_OR_DIE(cudaEventSynchronize(r->copied[s]));             /* pinned block s: its last copy is done */
        memcpy(r->host[s], host, bytes);
        src = r->host[s];
    }
    if (r->puts >= 2) CUDA_OR_DIE(cudaStreamWaitEvent(g->copy_stream, r->consumed[s], 0));   /* batch k-2 no longer reads slot s */
    CUDA_OR_DIE(cudaMemcpyAsync(r->dev[s], src, bytes, cudaMemcpyHostToDevice, g->copy_stream));
    CUDA_OR_DIE(cudaEventRecord(r->copied[s], g->copy_stream));
    r->src[s] = pinned ? host : NULL;
    CUDA_OR_DIE(cudaStreamWaitEvent(g->stream, r->copied[s], 0));    /* compute queued from now on sees the batch */
    r->next = 1 - s;
    r->puts++;
    return r->dev[s];
}

/* The copy stream runs its copies in order: a block no slot names any more was read by a
 * copy older than the last one, so waiting for the last one covers it. */
static void gpu_ring_wait(const ct_backend *be, void *ring, const void *host)
{
    (void)be;
    gpu_ring *r = ring;
    if (!r || !r->puts) return;
    int s = r->src[0] == host ? 0 : r->src[1] == host ? 1 : 1 - r->next;
    CUDA_OR_DIE(cudaEventSynchronize(r->copied[s]));
}

/* ---- the LSTM and conv2d: their plans as the table's opaque plans ---- */

static ct_status gpu_lstm_plan(const ct_backend *be, void **plan, const lstm_dims *d, const ct_params *ps, const lstm_ids *ids,
                               const float *params)
{
    *plan = NULL;
    lstm_gpu *p = ct_calloc(1, sizeof *p, "GPU LSTM plan");
    if (!p) return CT_ENOMEM;
    ct_status st = ct_lstm_plan_gpu(be, p, d, ps, ids, params);
    if (st != CT_OK) { ct_lstm_plan_free_gpu(p); free(p); return st; }
    *plan = p;
    return CT_OK;
}

static void gpu_lstm_plan_free(const ct_backend *be, void *plan)
{
    (void)be;
    if (!plan) return;
    ct_lstm_plan_free_gpu(plan);
    free(plan);
}

static void gpu_lstm_forward(const ct_backend *be, float *out, void *plan, const float *x, const int *len,
                             const int *len_host, const float *params, const lstm_dims *d)
{
    ct_lstm_forward_gpu(be, out, plan, x, len, len_host, params, d);
}

static void gpu_lstm_backward(const ct_backend *be, float *dx, float *grads, void *plan, const float *dout, const float *x,
                              const int *len, const int *len_host, const float *params, const lstm_dims *d)
{
    ct_lstm_backward_gpu(be, dx, grads, plan, dout, x, len, len_host, params, d);
}

static ct_status gpu_conv2d_plan(const ct_backend *be, void **plan, const conv2d_dims *d, int bias)
{
    *plan = NULL;
    conv2d_gpu_plan *p = ct_calloc(1, sizeof *p, "GPU conv2d plan");
    if (!p) return CT_ENOMEM;
    ct_status st = ct_conv2d_plan_gpu(be, p, d, bias);
    if (st != CT_OK) { ct_conv2d_plan_free_gpu(p); free(p); return st; }
    *plan = p;
    return CT_OK;
}

static void gpu_conv2d_plan_free(const ct_backend *be, void *plan)
{
    (void)be;
    if (!plan) return;
    ct_conv2d_plan_free_gpu(plan);
    free(plan);
}

static size_t gpu_conv2d_workspace_floats(const ct_backend *be, const void *plan)
{
    (void)be;
    return ct_conv2d_workspace_floats_gpu(plan);
}

static void gpu_conv2d_forward(const ct_backend *be, float *out, float *ws, const float *in, const float *w, const float *b,
                               void *plan, int N)
{
    ct_conv2d_forward_gpu(be, out, ws, in, w, b, plan, N);
}

static void gpu_conv2d_backward(const ct_backend *be, float *din, float *dw, float *db, float *ws, const float *dout,
                                const float *in, const float *w, void *plan, int N)
{
    ct_conv2d_backward_gpu(be, din, dw, db, ws, dout, in, w, plan, N);
}

static const ct_ops gpu_ops = {
    .close = gpu_close,
    .check_dtype = gpu_check_dtype,
    .mem_alloc = gpu_mem_alloc,
    .mem_free = gpu_mem_free,
    .upload = gpu_upload,
    .download = gpu_download,
    .copy = gpu_copy,
    .zero = gpu_zero,
    .sync = gpu_sync,
    .ring_create = gpu_ring_create,
    .ring_free = gpu_ring_free,
    .ring_put = gpu_ring_put,
    .ring_wait = gpu_ring_wait,
    .host_alloc = gpu_host_alloc,
    .host_free = gpu_host_free,
    .dense_forward = ct_dense_forward_gpu,
    .dense_backward = ct_dense_backward_gpu,
    .lstm_plan = gpu_lstm_plan,
    .lstm_plan_free = gpu_lstm_plan_free,
    .lstm_forward = gpu_lstm_forward,
    .lstm_backward = gpu_lstm_backward,
    .conv2d_plan = gpu_conv2d_plan,
    .conv2d_plan_free = gpu_conv2d_plan_free,
    .conv2d_workspace_floats = gpu_conv2d_workspace_floats,
    .conv2d_forward = gpu_conv2d_forward,
    .conv2d_backward = gpu_conv2d_backward,
    .maxpool2d_forward = ct_maxpool2d_forward_gpu,
    .maxpool2d_backward = ct_maxpool2d_backward_gpu,
    .global_avgpool_forward = ct_global_avgpool_forward_gpu,
    .global_avgpool_backward = ct_global_avgpool_backward_gpu,
    .avgpool_h_forward = ct_avgpool_h_forward_gpu,
    .avgpool_h_backward = ct_avgpool_h_backward_gpu,
    .batchnorm_forward = ct_batchnorm_forward_gpu,
    .batchnorm_backward = ct_batchnorm_backward_gpu,
    .relu_forward = ct_relu_forward_gpu,
    .relu_backward = ct_relu_backward_gpu,
    .tanh_forward = ct_tanh_forward_gpu,
    .tanh_backward = ct_tanh_backward_gpu,
    .sigmoid_forward = ct_sigmoid_forward_gpu,
    .sigmoid_backward = ct_sigmoid_backward_gpu,
    .add_forward = ct_add_forward_gpu,
    .add_backward = ct_add_backward_gpu,
    .dropout_forward = ct_dropout_forward_gpu,
    .dropout_forward_part = ct_dropout_forward_part_gpu,
    .dropout_apply = ct_dropout_apply_gpu,
    .dropout_backward = ct_dropout_backward_gpu,
    .euclidean_forward = ct_euclidean_forward_gpu,
    .euclidean_backward = ct_euclidean_backward_gpu,
    .contrastive_stats = ct_contrastive_stats_gpu,
    .contrastive_backward = ct_contrastive_backward_gpu,
    .softmax_ce_stats = ct_softmax_ce_stats_gpu,
    .softmax_ce_backward = ct_softmax_ce_backward_gpu,
    .optim_init = ct_optim_init_gpu,
    .optim_free = ct_optim_free_gpu,
    .optim_step = ct_optim_step_gpu,
    .clip_grad_norm = ct_clip_grad_norm_gpu,
};

const ct_ops *ct_ops_gpu(void) { return &gpu_ops; }

ct_status ct_backend_open_gpu(ct_backend *be, int index, const ct_math *math)
{
    memset(be, 0, sizeof *be);
    ct_gpu *g = NULL;
    CT_TRY(ct_gpu_open(&g, index, math));
    *be = (ct_backend){ .ops = &gpu_ops, .name = "gpu", .host_memory = 0, .dev = g };
    if (math) be->math = *math;
    const char *algo = getenv("CTRAIN_LSTM_ALGO");
    if (algo && !strcmp(algo, "ctrain")) be->math.lstm_own = 1;   /* the user's choice, until the own kernels are the default */
    const ct_status st = ct_backend_check_dtype(be, "opening the backend");   /* a data type this GPU cannot compute: refused here */
    if (st != CT_OK) {
        ct_gpu_close(g);
        memset(be, 0, sizeof *be);
        return st;
    }
    return CT_OK;
}

#endif /* CT_HAVE_CUDA */
