/* lstm.cu - stacked LSTM on cuDNN 9 (see cuda/lstm.h; the math and BPTT are written
 * out in layers/lstm.c, which this must match).
 *
 * Plan: RNN descriptor (cudnnSetRNNDescriptor_v8: CUDNN_LSTM, DOUBLE_BIAS,
 * LINEAR_INPUT, UNIDIRECTIONAL, FP32 data and math, CUDNN_FMA_MATH unless TF32 is
 * allowed, padded I/O for the unpacked batch-major layout), then the weight-space
 * check: cudnnGetRNNWeightParams for every (layer, linLayerID) gives where cuDNN
 * expects each gate's matrix and bias; ct_lstm_wspace_map_make compares that with the
 * flat buffer's views. Direct: cuDNN reads params + base and ADDs its gradients into
 * grads + base. Otherwise: pack before forward, unpack-add after backward.
 *
 * Per call: the RNN data descriptors get this batch's size and lengths (host work,
 * no device sync); the device lengths came with the batch upload.
 *
 * The algorithm, chosen per batch: cuDNN's persistent kernel for small hidden sizes
 * (CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H) for a batch whose sequences all have the call's
 * length T, where cuDNN runs this configuration; else CUDNN_RNN_ALGO_STANDARD. The
 * standard algorithm launches a matrix product and a pointwise kernel per time step and
 * layer, so at the seed's sizes (256 sequences, 100 steps, H = 128) a step costs
 * launches, not arithmetic; the persistent kernel keeps
 * the recurrent weights on chip and runs all steps of a layer in one launch: on an H100
 * the seed model's LSTM forward fell from 1.75 to 0.65 ms and its backward from 2.27 to
 * 0.86 ms, the losses of 4 epochs the same to 1e-6. The plan tries a forward and both
 * backward passes at its largest shape, and checks that both algorithms see the same
 * weight space; cuDNN answers NOT_SUPPORTED for what it cannot run (it does for batches of
 * different lengths). A batch's algorithm depends only on its own shape and lengths, never
 * on the batches before it, so a resumed run computes what an uninterrupted one does; its
 * backward uses its forward's. CTRAIN_LSTM_ALGO=standard forces the standard algorithm
 * (for comparisons).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_bf16.h>
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/lstm.h"

/* ---- helper kernels ---- */

/* fallback copies: pack (dst = wspace <- flat) or unpack-add (flat += wspace); one block row per segment */
__global__ static void segs_kernel(float *flat, float *wspace, const lstm_wspace_seg *segs, int unpack)
{
    const lstm_wspace_seg s = segs[blockIdx.y];
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < s.n; i += (size_t)gridDim.x * blockDim.x) {
        if (unpack) flat[s.flat + i] += wspace[s.wspace + i];
        else wspace[s.wspace + i] = flat[s.flat + i];
    }
}

/* bf16 plans: pack with rounding (wspace = bf16(flat)) or unpack-add (flat += float(wspace)) */
__global__ static void segs_bf16_kernel(float *flat, __nv_bfloat16 *wspace, const lstm_wspace_seg *segs, int unpack)
{
    const lstm_wspace_seg s = segs[blockIdx.y];
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < s.n; i += (size_t)gridDim.x * blockDim.x) {
        if (unpack) flat[s.flat + i] += __bfloat162float(wspace[s.wspace + i]);
        else wspace[s.wspace + i] = __float2bfloat16_rn(flat[s.flat + i]);
    }
}

/* RETURN_MEAN forward: out[b, h] = sum_{t < len_b} y[b, t, h] / len_b (in order) */
__global__ static void seq_mean_kernel(float *out, const float *y, const int *len, int B, int T, int H)
{
    size_t n = (size_t)B * H;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int b = (int)(i / H), h = (int)(i % H), L = len[b];
        float s = 0.0f;
        for (int t = 0; t < L; t++) s += y[((size_t)b * T + t) * H + h];
        out[i] = s / (float)L;
    }
}

/* RETURN_MEAN backward: dy[b, t, h] = dout[b, h] / len_b for t < len_b, else 0 */
__global__ static void seq_mean_bwd_kernel(float *dy, const float *dout, const int *len, int B, int T, int H)
{
    size_t n = (size_t)B * T * H;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int h = (int)(i % H), t = (int)(i / H % T), b = (int)(i / ((size_t)H * T));
        dy[i] = t < len[b] ? dout[(size_t)b * H + h] / (float)len[b] : 0.0f;
    }
}

/* ---- plan ---- */

/* (Re)sets the RNN descriptor for algorithm `algo` (the rest is the plan's fixed choice). */
static ct_status set_rnn(lstm_gpu *p, int algo)
{
    CT_CUDNN_TRY(cudnnSetRNNDescriptor_v8(p->rnn, (cudnnRNNAlgo_t)algo, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
                                          CUDNN_LINEAR_INPUT, p->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                                          p->bf16 ? CUDNN_TENSOR_OP_MATH : p->math.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH,
                                          p->d.I, p->d.H, p->d.H, p->d.L, p->drop, CUDNN_RNN_PADDED_IO_ENABLED));
    p->algo = algo;
    return CT_OK;
}

/* Sets the data descriptors for a batch of B sequences of up to T steps (lengths len_host,
 * or all T), and checks cuDNN's temp sizes for it, growing the work and reserve spaces when
 * this batch needs more (allowed only where no reserve space is in use: grow = 1 in
 * forward). The sizes depend on the lengths too (the descriptor holds them), so the
 * descriptors and sizes are kept for the last shape and lengths only: a call with the same
 * B, T and lengths (every training step of fixed-length data, and a backward after its
 * forward) reuses them without asking cuDNN, whose questions are host time the GPU waits for. */
/* len_full_* hold "all T" for this T (refilled when T changes) */
static ct_status full_lengths(lstm_gpu *p, int T)
{
    if (T == p->full_T) return CT_OK;
    for (int b = 0; b < p->d.B; b++) p->len_full_host[b] = T;
    CT_TRY(ct_gpu_upload(p->gpu, p->len_full_dev, p->len_full_host, (size_t)p->d.B * sizeof(int)));
    p->full_T = T;
    return CT_OK;
}

static ct_status set_shape(lstm_gpu *p, int B, int T, const int *len_host, int grow)
{
    const lstm_dims *d = &p->d;
    float fill = 0.0f;
    if (!len_host) CT_TRY(full_lengths(p, T));
    const int *lens = len_host ? len_host : p->len_full_host;
    if (B == p->shape_B && T == p->shape_T && !memcmp(lens, p->shape_len, (size_t)B * sizeof(int))) return CT_OK;
    p->shape_B = 0;   /* set again below; none valid if that fails */
    /* the padding fill is read in the data's type: a bf16 zero for bf16 plans */
    const uint16_t fill_bf16 = 0;
    const cudnnDataType_t dt = p->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    const void *fillp = p->bf16 ? (const void *)&fill_bf16 : (const void *)&fill;
    CT_CUDNN_TRY(cudnnSetRNNDataDescriptor(p->x_desc, dt, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                           T, B, d->I, lens, (void *)fillp));
    CT_CUDNN_TRY(cudnnSetRNNDataDescriptor(p->y_desc, dt, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                           T, B, d->H, lens, (void *)fillp));
    int dims[3] = { d->L, B, d->H }, strides[3] = { B * d->H, d->H, 1 };
    CT_CUDNN_TRY(cudnnSetTensorNdDescriptor(p->h_desc, dt, 3, dims, strides));
    CT_CUDNN_TRY(cudnnSetTensorNdDescriptor(p->c_desc, dt, 3, dims, strides));
    size_t work, reserve;
    CT_CUDNN_TRY(cudnnGetRNNTempSpaceSizes(p->gpu->cudnn, p->rnn, CUDNN_FWD_MODE_TRAINING, p->x_desc, &work, &reserve));
    if (work > p->work_bytes || reserve > p->reserve_bytes) {
        if (!grow)
            return ct_fail(CT_ENODEV, "GPU LSTM: backward for batch %d x %d steps needs more cuDNN work/reserve space than "
                           "its forward had (a backward without the forward of the same batch)", B, T);
        if (work > p->work_bytes) {
            ct_gpu_free(p->work);
            p->work = NULL;
            p->work_bytes = 0;
            CT_TRY(ct_gpu_malloc(p->gpu, &p->work, work, "cuDNN LSTM workspace"));
            p->work_bytes = work;
        }
        if (reserve > p->reserve_bytes) {
            ct_gpu_free(p->reserve);
            p->reserve = NULL;
            p->reserve_bytes = 0;
            CT_TRY(ct_gpu_malloc(p->gpu, &p->reserve, reserve, "cuDNN LSTM reserve space"));
            p->reserve_bytes = reserve;
        }
    }
    memcpy(p->shape_len, lens, (size_t)B * sizeof(int));
    p->shape_B = B;
    p->shape_T = T;
    return CT_OK;
}

static long long tensor_numel(cudnnTensorDescriptor_t t)
{
    cudnnDataType_t dt;
    int nb = 0, dims[8], strides[8];
    if (cudnnGetTensorNdDescriptor(t, 8, &dt, &nb, dims, strides) != CUDNN_STATUS_SUCCESS) return -1;
    long long n = 1;
    for (int i = 0; i < nb; i++) n *= dims[i];
    return n;
}

/* Offsets and sizes in elements of the weight space's type (float, or bf16 in bf16 plans). */
static ct_status weight_locations(lstm_gpu *p, lstm_wspace_loc *loc, const void *base)
{
    cudnnHandle_t h = p->gpu->cudnn;
    const long long es = p->bf16 ? (long long)sizeof(uint16_t) : (long long)sizeof(float);
    cudnnTensorDescriptor_t md, bd;
    CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&md));
    if (cudnnCreateTensorDescriptor(&bd) != CUDNN_STATUS_SUCCESS) { cudnnDestroyTensorDescriptor(md); return ct_fail(CT_ENODEV, "cuDNN: cannot create a tensor descriptor"); }
    ct_status st = CT_OK;
    for (int l = 0; l < p->d.L && st == CT_OK; l++)
        for (int k = 0; k < 8 && st == CT_OK; k++) {
            void *ma = NULL, *ba = NULL;
            cudnnStatus_t e = cudnnGetRNNWeightParams(h, p->rnn, l, p->wspace_bytes, base, k, md, &ma, bd, &ba);
            if (e != CUDNN_STATUS_SUCCESS || !ma || !ba) {
                st = ct_fail(CT_ENODEV, "%s:%d: cudnnGetRNNWeightParams(layer %d, linLayerID %d): %s", __FILE__, __LINE__, l, k,
                             e != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(e) : "no matrix or bias returned");
                break;
            }
            lstm_wspace_loc *c = &loc[l * 8 + k];
            c->m_off = ((const char *)ma - (const char *)base) / es;
            c->b_off = ((const char *)ba - (const char *)base) / es;
            c->m_n = tensor_numel(md);
            c->b_n = tensor_numel(bd);
        }
    cudnnDestroyTensorDescriptor(md);
    cudnnDestroyTensorDescriptor(bd);
    return st;
}

static const char *algo_name(int algo)
{
    return algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H ? "persistent (small hidden size)" : "standard";
}

static void say_layout(const lstm_gpu *p)
{
    if (!p->map.direct && !p->bf16)   /* bf16 plans always pack (with conversion): nothing to say */
        fprintf(stderr, "ctrain: note: cuDNN's LSTM weight layout differs from ctrain's (%s); "
                "the weights are packed into cuDNN's layout once per step\n", p->map.why);
}

/* Every plan's start: the checks, the backend's GPU and math, the dims. */
static ct_status plan_begin(const ct_backend *be, lstm_gpu *p, const lstm_dims *d)
{
    memset(p, 0, sizeof *p);
    CT_TRY(ct_backend_check_dtype(be, "GPU LSTM plan"));
    CT_TRY(ct_lstm_gpu_dims_check(d));
    p->gpu = ct_gpu_of(be);
    p->math = be->math;
    p->bf16 = be->math.dtype == CT_BF16;
    p->d = *d;
    return CT_OK;
}

static ct_status plan_with(const ct_backend *be, lstm_gpu *p, const lstm_dims *d, const ct_params *ps, const lstm_ids *ids,
                           const float *params_dev, int algo);

/* A training step's three cuDNN calls at the planned shape (all sequences T long, zero
 * inputs, the weight gradients into a scratch weight space) to learn whether cuDNN runs the
 * plan's algorithm: 1 yes, 0 NOT_SUPPORTED, -1 another failure (left by ct_fail). */
static int step_runs(lstm_gpu *p, const float *params_dev)
{
    ct_gpu *g = p->gpu;
    const float *w = p->map.direct ? params_dev + p->map.base : p->wpack;
    const size_t BT = (size_t)p->d.B * p->d.T;
    void *dw = NULL;
    if (ct_gpu_malloc(p->gpu, &dw, p->wspace_bytes, "LSTM trial weight gradients") != CT_OK) return -1;
    int r = 1;
    if (cudaMemsetAsync(p->dx, 0, BT * p->d.I * sizeof(float), g->stream) != cudaSuccess ||
        cudaMemsetAsync(p->dy, 0, BT * p->d.H * sizeof(float), g->stream) != cudaSuccess ||
        (!p->map.direct && cudaMemsetAsync(p->wpack, 0, p->wspace_bytes, g->stream) != cudaSuccess)) {
        ct_fail(CT_ENODEV, "GPU LSTM plan: cudaMemsetAsync failed: %s", cudaGetErrorString(cudaGetLastError()));
        r = -1;
    }
    const char *call = "cudnnRNNForward";
    cudnnStatus_t e = CUDNN_STATUS_SUCCESS;
    if (r == 1)
        e = cudnnRNNForward(g->cudnn, p->rnn, CUDNN_FWD_MODE_TRAINING, p->len_full_dev, p->x_desc, p->dx, p->y_desc, p->y,
                            p->h_desc, NULL, p->hy, p->c_desc, NULL, NULL, p->wspace_bytes, w,
                            p->work_bytes, p->work, p->reserve_bytes, p->reserve);
    if (r == 1 && e == CUDNN_STATUS_SUCCESS) {
        call = "cudnnRNNBackwardData_v8";
        e = cudnnRNNBackwardData_v8(g->cudnn, p->rnn, p->len_full_dev, p->y_desc, p->y, p->dy, p->x_desc, p->dx,
                                    p->h_desc, NULL, NULL, NULL, p->c_desc, NULL, NULL, NULL,
                                    p->wspace_bytes, w, p->work_bytes, p->work, p->reserve_bytes, p->reserve);
    }
    if (r == 1 && e == CUDNN_STATUS_SUCCESS) {
        call = "cudnnRNNBackwardWeights_v8";
        e = cudnnRNNBackwardWeights_v8(g->cudnn, p->rnn, CUDNN_WGRAD_MODE_ADD, p->len_full_dev, p->x_desc, p->dx,
                                       p->h_desc, NULL, p->y_desc, p->y, p->wspace_bytes, dw,
                                       p->work_bytes, p->work, p->reserve_bytes, p->reserve);
    }
    if (r == 1 && e == CUDNN_STATUS_NOT_SUPPORTED) r = 0;
    else if (r == 1 && e != CUDNN_STATUS_SUCCESS) {
        ct_fail(CT_ENODEV, "%s:%d: %s (%s algorithm, planned shape): %s", __FILE__, __LINE__, call, algo_name(p->algo),
                cudnnGetErrorString(e));
        r = -1;
    }
    if (r == 1 && cudaStreamSynchronize(g->stream) != cudaSuccess) {
        ct_fail(CT_ENODEV, "GPU LSTM plan: the trial step failed: %s", cudaGetErrorString(cudaGetLastError()));
        r = -1;
    }
    ct_gpu_free(dw);
    return r;
}

/* 1 when the standard algorithm sees the same weight space as the plan's persistent one (a
 * batch may run either); the descriptor is left on the persistent algorithm. */
static int same_weight_space(lstm_gpu *p, const float *params_dev)
{
    lstm_wspace_loc a[LSTM_MAX_LAYERS * 8], b[LSTM_MAX_LAYERS * 8];
    size_t bytes = 0;
    const int persistent = p->algo;
    int same = weight_locations(p, a, params_dev) == CT_OK && set_rnn(p, CUDNN_RNN_ALGO_STANDARD) == CT_OK &&
               cudnnGetRNNWeightSpaceSize(p->gpu->cudnn, p->rnn, &bytes) == CUDNN_STATUS_SUCCESS &&
               bytes == p->wspace_bytes && weight_locations(p, b, params_dev) == CT_OK &&
               !memcmp(a, b, (size_t)p->d.L * 8 * sizeof a[0]);
    if (set_rnn(p, persistent) != CT_OK) same = 0;
    p->shape_B = 0;   /* the descriptor was changed and changed back: the sizes are asked again */
    return same;
}

/* ---- plans on ctrain's own kernels (cuda/lstm_rec.h), float32 and bf16 ---- */

static ct_status plan_own(const ct_backend *be, lstm_gpu *p, const lstm_dims *d, const ct_params *ps, const lstm_ids *ids)
{
    CT_TRY(plan_begin(be, p, d));
    ct_gpu *g = p->gpu;
    p->own = 1;
    for (int l = 0; l < d->L; l++) {
        const int h[4] = { ids->w_ih[l], ids->w_hh[l], ids->b_ih[l], ids->b_hh[l] };
        for (int k = 0; k < 4; k++) p->off[l][k] = ps->p[h[k]].offset;
    }
    int sms = 0, smem = 0;
    CT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g->index));
    CT_CUDA_TRY(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, g->index));
    const int S = ct_lstm_rec_seqs(d->B, sms);
    const size_t need = ct_lstm_rec_gpu_smem(p->bf16, ct_lstm_rec_hp(d->H), S);
    if (need > (size_t)smem)
        return ct_fail(CT_ENODEV, "ctrain's %s LSTM kernels for %d units need %zu KiB of shared memory per block; this GPU allows %d KiB",
                       p->bf16 ? "bf16" : "float32", d->H, need / 1024, smem / 1024);
    p->rec_eng = ct_lstm_rec_gpu;
    p->rec_eng.ctx = (void *)be;
    lstm_dims dr = *d;
    dr.dtype = p->bf16 ? CT_BF16 : CT_F32;   /* the backend's precision, whatever the caller's dims say */
    CT_TRY(ct_lstm_rec_plan_make(&p->rec, &p->rec_eng, &dr, S));
    p->len_full_host = (int *)ct_malloc((size_t)d->B * sizeof(int), "LSTM sequence lengths");
    if (!p->len_full_host) return CT_ENOMEM;
    for (int b = 0; b < d->B; b++) p->len_full_host[b] = d->T;
    p->full_T = d->T;
    CT_TRY(ct_gpu_malloc(g, (void **)&p->len_full_dev, (size_t)d->B * sizeof(int), "LSTM sequence lengths"));
    CT_TRY(ct_gpu_upload(g, p->len_full_dev, p->len_full_host, (size_t)d->B * sizeof(int)));
    CT_TRY(ct_gpu_malloc(g, (void **)&p->dy, (size_t)d->B * d->T * d->H * sizeof(float), "LSTM output gradients"));
    static int said;
    if (!said) fprintf(stderr, "ctrain: note: the LSTM runs on ctrain's own kernels (cuda/lstm_rec.h), not cuDNN's\n");
    said = 1;
    return CT_OK;
}

static void views_own(const lstm_gpu *p, float *flat, lstm_weights *w, lstm_grads *g)
{
    for (int l = 0; l < p->d.L; l++) {
        if (w) w[l] = (lstm_weights){ flat + p->off[l][0], flat + p->off[l][1], flat + p->off[l][2], flat + p->off[l][3] };
        if (g) g[l] = (lstm_grads){ flat + p->off[l][0], flat + p->off[l][1], flat + p->off[l][2], flat + p->off[l][3] };
    }
}

static void lstm_forward_own(const ct_backend *be, float *out, lstm_gpu *p, const float *x, const int *len, const float *params,
                             const lstm_dims *d)
{
    ct_gpu *g = p->gpu;
    const int B = d->B, T = d->T, H = d->H;
    if (!len && full_lengths(p, T) != CT_OK) ct_gpu_fatal(__FILE__, __LINE__, "full_lengths", ct_last_error());
    const int *dev_len = len ? len : p->len_full_dev;
    lstm_weights w[LSTM_MAX_LAYERS];
    views_own(p, (float *)params, w, NULL);
    p->rec_eng.ctx = (void *)be;
    ct_lstm_rec_forward(&p->rec, x, len, w, d);
    const float *y = p->rec.y[d->L - 1];
    switch (d->ret) {
    case LSTM_RETURN_LAST:
        CT_CUDA_CHECK(cudaMemcpyAsync(out, p->rec.hy, (size_t)B * H * sizeof(float), cudaMemcpyDeviceToDevice, g->stream));
        break;
    case LSTM_RETURN_SEQUENCE:
        CT_CUDA_CHECK(cudaMemcpyAsync(out, y, (size_t)B * T * H * sizeof(float), cudaMemcpyDeviceToDevice, g->stream));
        break;
    case LSTM_RETURN_MEAN:
        seq_mean_kernel<<<ct_gpu_blocks((size_t)B * H, CT_THREADS), CT_THREADS, 0, g->stream>>>(out, y, dev_len, B, T, H);
        CT_LAUNCH_CHECK();
        break;
    }
}

static void lstm_backward_own(const ct_backend *be, float *dx, float *grads, lstm_gpu *p, const float *dout, const int *len,
                              const float *params, const lstm_dims *d)
{
    ct_gpu *g = p->gpu;
    const int B = d->B, T = d->T, H = d->H;
    if (!len && full_lengths(p, T) != CT_OK) ct_gpu_fatal(__FILE__, __LINE__, "full_lengths", ct_last_error());
    const int *dev_len = len ? len : p->len_full_dev;
    const float *dy = NULL, *dhy = NULL;
    switch (d->ret) {
    case LSTM_RETURN_LAST: dhy = dout; break;   /* the gradient enters through the last layer's final h */
    case LSTM_RETURN_SEQUENCE: dy = dout; break;
    case LSTM_RETURN_MEAN:
        seq_mean_bwd_kernel<<<ct_gpu_blocks((size_t)B * T * H, CT_THREADS), CT_THREADS, 0, g->stream>>>(p->dy, dout, dev_len, B, T, H);
        CT_LAUNCH_CHECK();
        dy = p->dy;
        break;
    }
    lstm_weights w[LSTM_MAX_LAYERS];
    lstm_grads gr[LSTM_MAX_LAYERS];
    views_own(p, (float *)params, w, NULL);
    views_own(p, grads, NULL, gr);
    p->rec_eng.ctx = (void *)be;
    ct_lstm_rec_backward(&p->rec, dx, gr, dy, dhy, len, w, d);
}

extern "C" ct_status ct_lstm_plan_gpu(const ct_backend *be, lstm_gpu *p, const lstm_dims *d, const ct_params *ps,
                                      const lstm_ids *ids, const float *params_dev)
{
    const char *force = getenv("CTRAIN_LSTM_ALGO");
    const int bf16 = be->math.dtype == CT_BF16;   /* the standard algorithm only (see the top of this file) */
    if (be->math.lstm_own && ct_lstm_rec_fits(d)) {
        ct_status st = plan_own(be, p, d, ps, ids);
        if (st == CT_OK) return CT_OK;
        ct_lstm_plan_free_gpu(p);
        if (st != CT_ENODEV) return st;
        /* the GPU cannot run them (its shared memory): cuDNN's kernels, as without CTRAIN_LSTM_ALGO=ctrain */
        fprintf(stderr, "ctrain: note: %s; the LSTM runs on cuDNN's kernels\n", ct_last_error());
    }
    if (!bf16 && !(force && !strcmp(force, "standard"))) {
        ct_status st = plan_with(be, p, d, ps, ids, params_dev, CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H);
        int runs = st == CT_OK ? step_runs(p, params_dev) : 0;
        if (runs == 1 && same_weight_space(p, params_dev)) {
            p->persistent_ok = 1;
            say_layout(p);
            return CT_OK;
        }
        ct_lstm_plan_free_gpu(p);
        if (runs < 0) return CT_ENODEV;
        /* a plan cuDNN refused (at set-up or in the trial step) is made with the standard algorithm */
    }
    ct_status st = plan_with(be, p, d, ps, ids, params_dev, CUDNN_RNN_ALGO_STANDARD);
    if (st != CT_OK) ct_lstm_plan_free_gpu(p);
    else say_layout(p);
    return st;
}

extern "C" const char *ct_lstm_gpu_algo(const lstm_gpu *p)
{
    return p->own ? (p->bf16 ? "ctrain's own (bf16, all steps in one launch)" : "ctrain's own (float32, all steps in one launch)")
                  : algo_name(p->algo);
}

/* This batch's algorithm: the persistent kernel when the plan has it, every sequence is T long
 * and cuDNN has not refused this shape; the descriptor is set to it (the sizes asked again
 * when it changes). Depends on the batch alone. */
static void choose_algo(lstm_gpu *p, const lstm_dims *d, const int *len_host)
{
    int full = 1;
    for (int b = 0; len_host && b < d->B && full; b++) full = len_host[b] == d->T;
    const int refused = d->B == p->refused_B && d->T == p->refused_T;
    const int want = p->persistent_ok && full && !refused ? CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H : CUDNN_RNN_ALGO_STANDARD;
    if (want == p->algo) return;
    if (set_rnn(p, want) != CT_OK) ct_gpu_fatal(__FILE__, __LINE__, "cudnnSetRNNDescriptor_v8", ct_last_error());
    p->shape_B = 0;
}

static ct_status plan_with(const ct_backend *be, lstm_gpu *p, const lstm_dims *d, const ct_params *ps, const lstm_ids *ids,
                           const float *params_dev, int algo)
{
    CT_TRY(plan_begin(be, p, d));
    ct_gpu *g = p->gpu;
    cudnnRNNDescriptor_t rnn;
    cudnnRNNDataDescriptor_t xd, yd;
    cudnnTensorDescriptor_t hd, cd;
    cudnnDropoutDescriptor_t drop;
    CT_CUDNN_TRY(cudnnCreateRNNDescriptor(&rnn)); p->rnn = rnn;
    CT_CUDNN_TRY(cudnnCreateRNNDataDescriptor(&xd)); p->x_desc = xd;
    CT_CUDNN_TRY(cudnnCreateRNNDataDescriptor(&yd)); p->y_desc = yd;
    CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&hd)); p->h_desc = hd;
    CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&cd)); p->c_desc = cd;
    CT_CUDNN_TRY(cudnnCreateDropoutDescriptor(&drop)); p->drop = drop;
    CT_CUDNN_TRY(cudnnSetDropoutDescriptor(drop, g->cudnn, 0.0f, NULL, 0, 0));
    CT_TRY(set_rnn(p, algo));
    /* host and device lengths "all T" for len == NULL */
    p->len_full_host = (int *)ct_malloc((size_t)d->B * sizeof(int), "LSTM sequence lengths");
    p->shape_len = (int *)ct_malloc((size_t)d->B * sizeof(int), "LSTM sequence lengths");
    if (!p->len_full_host || !p->shape_len) return CT_ENOMEM;
    for (int b = 0; b < d->B; b++) p->len_full_host[b] = d->T;
    p->full_T = d->T;
    CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->len_full_dev, (size_t)d->B * sizeof(int), "LSTM sequence lengths"));
    CT_TRY(ct_gpu_upload(p->gpu, p->len_full_dev, p->len_full_host, (size_t)d->B * sizeof(int)));
    /* sizes for the largest batch: set_shape allocates the work and reserve spaces it needs */
    CT_CUDNN_TRY(cudnnGetRNNWeightSpaceSize(g->cudnn, rnn, &p->wspace_bytes));
    CT_TRY(set_shape(p, d->B, d->T, NULL, 1));
    /* the weight-space check */
    lstm_wspace_loc loc[LSTM_MAX_LAYERS * 8];
    size_t BT = (size_t)d->B * d->T, LBH = (size_t)d->L * d->B * d->H;
    if (p->bf16) {   /* cuDNN's own bf16 weight space, packed from the flat buffer every step */
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->wh, p->wspace_bytes, "LSTM bf16 weights"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dwh, p->wspace_bytes, "LSTM bf16 weight gradients"));
        CT_TRY(weight_locations(p, loc, p->wh));
        CT_TRY(ct_lstm_wspace_map_make_packed(&p->map, loc, p->wspace_bytes / sizeof(uint16_t), ps, ids, d->I, d->H, d->L));
        CT_TRY(ct_gpu_malloc(p->gpu, &p->segs, (size_t)p->map.nseg * sizeof(lstm_wspace_seg), "LSTM weight segments"));
        CT_TRY(ct_gpu_upload(p->gpu, p->segs, p->map.seg, (size_t)p->map.nseg * sizeof(lstm_wspace_seg)));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->xh, BT * d->I * sizeof(uint16_t), "LSTM bf16 inputs"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dxh, BT * d->I * sizeof(uint16_t), "LSTM bf16 input gradients"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->yh, BT * d->H * sizeof(uint16_t), "LSTM bf16 outputs"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dyh, BT * d->H * sizeof(uint16_t), "LSTM bf16 output gradients"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->hyh, LBH * sizeof(uint16_t), "LSTM bf16 final states"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dhyh, LBH * sizeof(uint16_t), "LSTM bf16 final-state gradients"));
        /* FP32: the mean's sequence and its gradient */
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->y, BT * d->H * sizeof(float), "LSTM outputs"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dy, BT * d->H * sizeof(float), "LSTM output gradients"));
        return CT_OK;
    }
    CT_TRY(weight_locations(p, loc, params_dev));
    CT_TRY(ct_lstm_wspace_map_make(&p->map, loc, p->wspace_bytes / sizeof(float), ps, ids, d->I, d->H, d->L));
    if (!p->map.direct) {
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->wpack, p->wspace_bytes, "LSTM packed weights"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dwpack, p->wspace_bytes, "LSTM packed weight gradients"));
        CT_TRY(ct_gpu_malloc(p->gpu, &p->segs, (size_t)p->map.nseg * sizeof(lstm_wspace_seg), "LSTM weight segments"));
        CT_TRY(ct_gpu_upload(p->gpu, p->segs, p->map.seg, (size_t)p->map.nseg * sizeof(lstm_wspace_seg)));
    }
    /* buffers */
    CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->y, BT * d->H * sizeof(float), "LSTM outputs"));
    CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dy, BT * d->H * sizeof(float), "LSTM output gradients"));
    CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->hy, LBH * sizeof(float), "LSTM final states"));
    CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dhy, LBH * sizeof(float), "LSTM final-state gradients"));
    CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dx, BT * d->I * sizeof(float), "LSTM input gradients"));
    return CT_OK;
}

extern "C" void ct_lstm_plan_free_gpu(lstm_gpu *p)
{
    if (p->own) ct_lstm_rec_plan_free(&p->rec);
    if (p->rnn) cudnnDestroyRNNDescriptor(p->rnn);
    if (p->x_desc) cudnnDestroyRNNDataDescriptor(p->x_desc);
    if (p->y_desc) cudnnDestroyRNNDataDescriptor(p->y_desc);
    if (p->h_desc) cudnnDestroyTensorDescriptor(p->h_desc);
    if (p->c_desc) cudnnDestroyTensorDescriptor(p->c_desc);
    if (p->drop) cudnnDestroyDropoutDescriptor(p->drop);
    void *dev[] = { p->work, p->reserve, p->y, p->dy, p->hy, p->dhy, p->dx, p->wpack, p->dwpack, p->segs, p->len_full_dev,
                    p->wh, p->dwh, p->xh, p->dxh, p->yh, p->dyh, p->hyh, p->dhyh };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) ct_gpu_free(dev[i]);
    free(p->len_full_host);
    free(p->shape_len);
    memset(p, 0, sizeof *p);
}

static void run_segs(lstm_gpu *p, float *flat, float *wspace, int unpack)
{
    size_t longest = 0;
    for (int s = 0; s < p->map.nseg; s++) longest = p->map.seg[s].n > longest ? p->map.seg[s].n : longest;
    dim3 grid(ct_gpu_blocks(longest, CT_THREADS) > 64 ? 64 : ct_gpu_blocks(longest, CT_THREADS), (unsigned)p->map.nseg);
    segs_kernel<<<grid, CT_THREADS, 0, p->gpu->stream>>>(flat, wspace, (const lstm_wspace_seg *)p->segs, unpack);
    CT_LAUNCH_CHECK();
}

/* the weight space cuDNN reads: the flat buffer itself, or the packed copy made now */
static const float *weights_for(lstm_gpu *p, const float *params)
{
    if (p->map.direct) return params + p->map.base;
    run_segs(p, (float *)params, p->wpack, 0);   /* reads params only */
    return p->wpack;
}

/* cuDNN refused its persistent kernel for this full-length shape, which the plan's trial
 * step did not cover (a smaller batch): this shape runs the standard algorithm from now on,
 * as it would have from the start (the shape alone decides), said once per plan. */
static void refuse_shape(lstm_gpu *p, const lstm_dims *d, const int *len_host)
{
    if (!p->said_refused)
        fprintf(stderr, "ctrain: note: cuDNN does not run its persistent LSTM kernel for a batch of %d x %d steps; "
                "batches of that shape run the standard algorithm\n", d->B, d->T);
    p->said_refused = 1;
    p->refused_B = d->B;
    p->refused_T = d->T;
    choose_algo(p, d, len_host);
    if (set_shape(p, d->B, d->T, len_host, 1) != CT_OK) ct_gpu_fatal(__FILE__, __LINE__, "set_shape", ct_last_error());
}

static void check_call(lstm_gpu *p, const lstm_dims *d, const int *len, const int *len_host, int forward)
{
    CT_ASSERT(d->B >= 1 && d->B <= p->d.B && d->T >= 1 && d->T <= p->d.T && d->I == p->d.I && d->H == p->d.H && d->L == p->d.L);
    CT_ASSERT(d->ret == p->d.ret && (len == NULL) == (len_host == NULL));
    if (set_shape(p, d->B, d->T, len_host, forward) != CT_OK) ct_gpu_fatal(__FILE__, __LINE__, "set_shape", ct_last_error());
}

/* ---- bf16 plans ---- */

static void run_segs_bf16(lstm_gpu *p, float *flat, uint16_t *wspace, int unpack)
{
    size_t longest = 0;
    for (int s = 0; s < p->map.nseg; s++) longest = p->map.seg[s].n > longest ? p->map.seg[s].n : longest;
    dim3 grid(ct_gpu_blocks(longest, CT_THREADS) > 64 ? 64 : ct_gpu_blocks(longest, CT_THREADS), (unsigned)p->map.nseg);
    segs_bf16_kernel<<<grid, CT_THREADS, 0, p->gpu->stream>>>(flat, (__nv_bfloat16 *)wspace, (const lstm_wspace_seg *)p->segs,
                                                               unpack);
    CT_LAUNCH_CHECK();
}

static void lstm_forward_bf16(const ct_backend *be, float *out, lstm_gpu *p, const float *x, const int *len,
                              const int *len_host, const float *params, const lstm_dims *d)
{
    ct_gpu *g = p->gpu;
    check_call(p, d, len, len_host, 1);   /* the standard algorithm, set when planned */
    const int B = d->B, T = d->T, H = d->H;
    const int *dev_len = len ? len : p->len_full_dev;
    run_segs_bf16(p, (float *)params, p->wh, 0);   /* reads params only */
    ct_bf16_from_float_gpu(be, p->xh, x, (size_t)B * T * d->I);
    CT_CUDNN_CHECK(cudnnRNNForward(g->cudnn, p->rnn, CUDNN_FWD_MODE_TRAINING, dev_len, p->x_desc, p->xh, p->y_desc, p->yh,
                                   p->h_desc, NULL, p->hyh, p->c_desc, NULL, NULL, p->wspace_bytes, p->wh,
                                   p->work_bytes, p->work, p->reserve_bytes, p->reserve));
    switch (d->ret) {
    case LSTM_RETURN_LAST:   /* the last layer's h at each sequence's last valid step = its hy */
        ct_float_from_bf16_gpu(be, out, p->hyh + (size_t)(d->L - 1) * B * H, (size_t)B * H);
        break;
    case LSTM_RETURN_SEQUENCE:
        ct_float_from_bf16_gpu(be, out, p->yh, (size_t)B * T * H);
        break;
    case LSTM_RETURN_MEAN:
        ct_float_from_bf16_gpu(be, p->y, p->yh, (size_t)B * T * H);
        seq_mean_kernel<<<ct_gpu_blocks((size_t)B * H, CT_THREADS), CT_THREADS, 0, g->stream>>>(out, p->y, dev_len, B, T, H);
        CT_LAUNCH_CHECK();
        break;
    }
}

static void lstm_backward_bf16(const ct_backend *be, float *dx, float *grads, lstm_gpu *p, const float *dout, const float *x,
                               const int *len, const int *len_host, const lstm_dims *d)
{
    ct_gpu *g = p->gpu;
    check_call(p, d, len, len_host, 0);
    const int B = d->B, T = d->T, H = d->H;
    const int *dev_len = len ? len : p->len_full_dev;
    const size_t BTH = (size_t)B * T * H, BTI = (size_t)B * T * d->I;
    const uint16_t *dhy = NULL;
    switch (d->ret) {
    case LSTM_RETURN_LAST:   /* gradient enters through the last layer's hy only */
        CT_CUDA_CHECK(cudaMemsetAsync(p->dyh, 0, BTH * sizeof(uint16_t), g->stream));
        CT_CUDA_CHECK(cudaMemsetAsync(p->dhyh, 0, (size_t)d->L * B * H * sizeof(uint16_t), g->stream));
        ct_bf16_from_float_gpu(be, p->dhyh + (size_t)(d->L - 1) * B * H, dout, (size_t)B * H);
        dhy = p->dhyh;
        break;
    case LSTM_RETURN_SEQUENCE:
        ct_bf16_from_float_gpu(be, p->dyh, dout, BTH);
        break;
    case LSTM_RETURN_MEAN:
        seq_mean_bwd_kernel<<<ct_gpu_blocks(BTH, CT_THREADS), CT_THREADS, 0, g->stream>>>(p->dy, dout, dev_len, B, T, H);
        CT_LAUNCH_CHECK();
        ct_bf16_from_float_gpu(be, p->dyh, p->dy, BTH);
        break;
    }
    /* dx at padded steps is 0, as on the CPU (cuDNN documents its padding fill for outputs only) */
    if (dx && len) CT_CUDA_CHECK(cudaMemsetAsync(p->dxh, 0, BTI * sizeof(uint16_t), g->stream));
    CT_CUDNN_CHECK(cudnnRNNBackwardData_v8(g->cudnn, p->rnn, dev_len, p->y_desc, p->yh, p->dyh, p->x_desc, p->dxh,
                                           p->h_desc, NULL, dhy, NULL, p->c_desc, NULL, NULL, NULL,
                                           p->wspace_bytes, p->wh, p->work_bytes, p->work, p->reserve_bytes, p->reserve));
    if (dx) ct_float_from_bf16_gpu(be, dx, p->dxh, BTI);
    /* the weight gradients: into a zeroed bf16 space (cuDNN's only mode adds), then into the FP32 grads */
    (void)x;   /* p->xh holds this batch's x in bf16: its forward converted it (a backward follows its own forward) */
    CT_CUDA_CHECK(cudaMemsetAsync(p->dwh, 0, p->wspace_bytes, g->stream));
    CT_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(g->cudnn, p->rnn, CUDNN_WGRAD_MODE_ADD, dev_len, p->x_desc, p->xh, p->h_desc, NULL,
                                              p->y_desc, p->yh, p->wspace_bytes, p->dwh, p->work_bytes, p->work,
                                              p->reserve_bytes, p->reserve));
    run_segs_bf16(p, grads, p->dwh, 1);
}

extern "C" void ct_lstm_forward_gpu(const ct_backend *be, float *out, lstm_gpu *p, const float *x, const int *len,
                                    const int *len_host, const float *params, const lstm_dims *d)
{
    ct_gpu *g = ct_gpu_of(be);
    CT_ASSERT(g == p->gpu);   /* a plan runs on the backend that made it */
    if (p->own) {
        lstm_forward_own(be, out, p, x, len, params, d);
        return;
    }
    if (p->bf16) {
        lstm_forward_bf16(be, out, p, x, len, len_host, params, d);
        return;
    }
    choose_algo(p, d, len_host);   /* backward keeps this batch's choice */
    check_call(p, d, len, len_host, 1);
    const int B = d->B, T = d->T, H = d->H;
    const int *dev_len = len ? len : p->len_full_dev;
    const float *w = weights_for(p, params);
    for (;;) {
        cudnnStatus_t e = cudnnRNNForward(g->cudnn, p->rnn, CUDNN_FWD_MODE_TRAINING, dev_len, p->x_desc, x, p->y_desc, p->y,
                                          p->h_desc, NULL, p->hy, p->c_desc, NULL, NULL, p->wspace_bytes, w,
                                          p->work_bytes, p->work, p->reserve_bytes, p->reserve);
        if (e == CUDNN_STATUS_SUCCESS) break;
        if (e != CUDNN_STATUS_NOT_SUPPORTED || p->algo == CUDNN_RNN_ALGO_STANDARD)
            ct_gpu_fatal(__FILE__, __LINE__, "cudnnRNNForward", cudnnGetErrorString(e));
        refuse_shape(p, d, len_host);
    }
    switch (d->ret) {
    case LSTM_RETURN_LAST:   /* the last layer's h at each sequence's last valid step = its hy */
        CT_CUDA_CHECK(cudaMemcpyAsync(out, p->hy + (size_t)(d->L - 1) * B * H, (size_t)B * H * sizeof(float),
                                      cudaMemcpyDeviceToDevice, g->stream));
        break;
    case LSTM_RETURN_SEQUENCE:
        CT_CUDA_CHECK(cudaMemcpyAsync(out, p->y, (size_t)B * T * H * sizeof(float), cudaMemcpyDeviceToDevice, g->stream));
        break;
    case LSTM_RETURN_MEAN:
        seq_mean_kernel<<<ct_gpu_blocks((size_t)B * H, CT_THREADS), CT_THREADS, 0, g->stream>>>(out, p->y, dev_len, B, T, H);
        CT_LAUNCH_CHECK();
        break;
    }
}

extern "C" void ct_lstm_backward_gpu(const ct_backend *be, float *dx, float *grads, lstm_gpu *p, const float *dout,
                                     const float *x, const int *len, const int *len_host, const float *params,
                                     const lstm_dims *d)
{
    ct_gpu *g = ct_gpu_of(be);
    CT_ASSERT(g == p->gpu);
    if (p->own) {
        lstm_backward_own(be, dx, grads, p, dout, len, params, d);
        return;
    }
    if (p->bf16) {
        lstm_backward_bf16(be, dx, grads, p, dout, x, len, len_host, d);
        return;
    }
    check_call(p, d, len, len_host, 0);
    const int B = d->B, T = d->T, H = d->H;
    const int *dev_len = len ? len : p->len_full_dev;
    const float *w = p->map.direct ? params + p->map.base : p->wpack;   /* packed by this step's forward */
    const float *dy = p->dy, *dhy = NULL;
    switch (d->ret) {
    case LSTM_RETURN_LAST:   /* gradient enters through the last layer's hy only */
        CT_CUDA_CHECK(cudaMemsetAsync(p->dy, 0, (size_t)B * T * H * sizeof(float), g->stream));
        CT_CUDA_CHECK(cudaMemsetAsync(p->dhy, 0, (size_t)d->L * B * H * sizeof(float), g->stream));
        CT_CUDA_CHECK(cudaMemcpyAsync(p->dhy + (size_t)(d->L - 1) * B * H, dout, (size_t)B * H * sizeof(float),
                                      cudaMemcpyDeviceToDevice, g->stream));
        dhy = p->dhy;
        break;
    case LSTM_RETURN_SEQUENCE:
        dy = dout;
        break;
    case LSTM_RETURN_MEAN:
        seq_mean_bwd_kernel<<<ct_gpu_blocks((size_t)B * T * H, CT_THREADS), CT_THREADS, 0, g->stream>>>(p->dy, dout, dev_len, B, T, H);
        CT_LAUNCH_CHECK();
        break;
    }
    /* dx at padded steps is 0, as on the CPU: cuDNN documents its padding fill for outputs
     * only, so it is not left to it */
    if (dx && len) CT_CUDA_CHECK(cudaMemsetAsync(dx, 0, (size_t)B * T * d->I * sizeof(float), g->stream));
    CT_CUDNN_CHECK(cudnnRNNBackwardData_v8(g->cudnn, p->rnn, dev_len, p->y_desc, p->y, dy, p->x_desc, dx ? dx : p->dx,
                                           p->h_desc, NULL, dhy, NULL, p->c_desc, NULL, NULL, NULL,
                                           p->wspace_bytes, w, p->work_bytes, p->work, p->reserve_bytes, p->reserve));
    float *dw = grads + p->map.base;
    if (!p->map.direct) {
        CT_CUDA_CHECK(cudaMemsetAsync(p->dwpack, 0, p->wspace_bytes, g->stream));
        dw = p->dwpack;
    }
    CT_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(g->cudnn, p->rnn, CUDNN_WGRAD_MODE_ADD, dev_len, p->x_desc, x, p->h_desc, NULL,
                                              p->y_desc, p->y, p->wspace_bytes, dw, p->work_bytes, p->work,
                                              p->reserve_bytes, p->reserve));
    if (!p->map.direct) run_segs(p, grads, p->dwpack, 1);
}
