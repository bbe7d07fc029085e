/* conv2d.cu - convolution on cuDNN (see cuda/conv2d.h; the math is layers/conv2d.h).
 *
 *   forward:  out = conv(in, w) (beta 0), then out += b broadcast over N, H, W (cudnnAddTensor)
 *   backward: dw += conv_filter_grad(in, dout) (beta 1: accumulate)
 *             db += sum over N, OH, OW of dout  (cudnnConvolutionBackwardBias, beta 1)
 *             din = conv_data_grad(w, dout)     (beta 0: overwrite)
 *
 * bf16 plans (see cuda/conv2d.h): the same with bf16 copies of in, w and dout made on the
 * device (ct_bf16_from_float_gpu: to nearest even) in the plan's buffers, cuDNN's
 * pseudo-bf16 descriptors, and the results converted back:
 *   forward:  yh = conv(xh, wh) (beta 0), out = float(yh), then out += b in FP32
 *   backward: dwh = conv_filter_grad(xh, dyh) (beta 0), dw += float(dwh)
 *             db += sum of dout in FP32 (as above)
 *             xh = conv_data_grad(wh, dyh) (beta 0: xh is free again), din = float(xh)
 */
#include <string.h>
#include "cuda/check.h"
#include "cuda/conv2d.h"
#include "cuda/kernels.h"

/* The first heuristic result usable under the context's rules within `limit` bytes.
 * bf16: any math type but ALLOW_CONVERSION (the data are bf16 already; tensor-op math is the point). */
template <typename Perf>
static int conv_pick(const Perf *perf, int n, int tf32, int bf16, int deterministic, size_t limit, size_t *bytes,
                     cudnnMathType_t *math)
{
    for (int i = 0; i < n; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (perf[i].memory > limit) continue;
        if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
        if (bf16) {
            if (perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
        } else if (!tf32 && perf[i].mathType != CUDNN_FMA_MATH) continue;
        *bytes = perf[i].memory;
        *math = perf[i].mathType;
        return (int)perf[i].algo;
    }
    return -1;
}

static void shape_free(conv2d_gpu_shape *s)
{
    if (s->x_desc) cudnnDestroyTensorDescriptor(s->x_desc);
    if (s->y_desc) cudnnDestroyTensorDescriptor(s->y_desc);
    if (s->xh_desc) cudnnDestroyTensorDescriptor(s->xh_desc);
    if (s->yh_desc) cudnnDestroyTensorDescriptor(s->yh_desc);
    for (int k = 0; k < 3; k++) if (s->conv_desc[k]) cudnnDestroyConvolutionDescriptor(s->conv_desc[k]);
    memset(s, 0, sizeof *s);
}

static const char *const DIRECTION[3] = { "forward", "backward data", "backward filter" };

/* Descriptors and algorithms for batch size N, each algorithm within `limit` bytes of workspace. */
static ct_status shape_make(conv2d_gpu_shape *s, const conv2d_gpu_plan *p, int N, size_t limit)
{
    ct_gpu *g = p->gpu;
    const conv2d_dims *d = &p->d;
    memset(s, 0, sizeof *s);
    cudnnTensorDescriptor_t x, y;
    CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&x)); s->x_desc = x;
    CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&y)); s->y_desc = y;
    CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, d->C, d->H, d->W));
    CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, d->OC, d->OH, d->OW));
    const int tf32 = p->math.tf32, det = p->math.deterministic, bf16 = p->math.dtype == CT_BF16;
    /* the descriptors the convolutions run on: FP32, or bf16 (cuDNN's pseudo-bf16 configuration) */
    cudnnTensorDescriptor_t cx = x, cy = y;
    cudnnFilterDescriptor_t cw = p->w_desc;
    if (bf16) {
        CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&cx)); s->xh_desc = cx;
        CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&cy)); s->yh_desc = cy;
        CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(cx, CUDNN_TENSOR_NCHW, CUDNN_DATA_BFLOAT16, N, d->C, d->H, d->W));
        CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(cy, CUDNN_TENSOR_NCHW, CUDNN_DATA_BFLOAT16, N, d->OC, d->OH, d->OW));
        cw = p->wh_desc;
    }
    for (int k = 0; k < 3; k++) {
        cudnnConvolutionDescriptor_t cv;
        CT_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&cv));
        s->conv_desc[k] = cv;
        CT_CUDNN_TRY(cudnnSetConvolution2dDescriptor(cv, d->pad, d->pad, d->stride, d->stride, 1, 1,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        /* the heuristics see what is allowed; the chosen algorithm's own math type is set after */
        CT_CUDNN_TRY(cudnnSetConvolutionMathType(cv, bf16 ? CUDNN_TENSOR_OP_MATH : tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
        int got = 0;
        cudnnMathType_t math = CUDNN_FMA_MATH;
        s->algo[k] = -1;
        if (k == CONV2D_GPU_FWD) {
            if (N == d->N) {   /* the planned shape: cuDNN's output size must be ctrain's */
                int n, c, h, wd;
                CT_CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(cv, x, p->w_desc, &n, &c, &h, &wd));
                if (n != N || c != d->OC || h != d->OH || wd != d->OW)
                    return ct_fail(CT_EINVAL, "GPU conv2d: cuDNN computes a %dx%dx%dx%d output, ctrain %dx%dx%dx%d", n, c, h, wd,
                                   N, d->OC, d->OH, d->OW);
            }
            cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
            CT_CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(g->cudnn, cx, cw, cv, cy, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                                &got, perf));
            s->algo[k] = conv_pick(perf, got, tf32, bf16, det, limit, &s->bytes[k], &math);
        } else if (k == CONV2D_GPU_BWD_DATA) {
            cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
            CT_CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(g->cudnn, cw, cy, cv, cx,
                                                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
            s->algo[k] = conv_pick(perf, got, tf32, bf16, det, limit, &s->bytes[k], &math);
        } else {
            cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
            CT_CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g->cudnn, cx, cy, cv, cw,
                                                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
            s->algo[k] = conv_pick(perf, got, tf32, bf16, det, limit, &s->bytes[k], &math);
        }
        if (s->algo[k] < 0)
            return ct_fail(CT_ENODEV, "GPU conv2d %dx%dx%dx%d -> %d filters %dx%d, stride %d, pad %d: cuDNN offers no %s%s%s "
                           "algorithm within %zu MiB of workspace; try without --deterministic, with --tf32, or --device cpu",
                           N, d->C, d->H, d->W, d->OC, d->KH, d->KW, d->stride, d->pad, det ? "deterministic " : "",
                           bf16 ? "bf16 " : tf32 ? "" : "FP32 ", DIRECTION[k], limit >> 20);
        CT_CUDNN_TRY(cudnnSetConvolutionMathType(cv, math));
    }
    s->N = N;
    return CT_OK;
}

extern "C" ct_status ct_conv2d_plan_gpu(const ct_backend *be, conv2d_gpu_plan *p, const conv2d_dims *d, int bias)
{
    memset(p, 0, sizeof *p);
    CT_TRY(ct_backend_check_dtype(be, "GPU conv2d plan"));
    p->d = *d;
    p->bias = bias;
    p->gpu = ct_gpu_of(be);
    p->math = be->math;
    if (d->N < 1 || d->C < 1 || d->OC < 1 || d->OH < 1 || d->OW < 1)
        return ct_fail(CT_EINVAL, "GPU conv2d: make the dims with ct_conv2d_dims_make first (N %d, C %d, OC %d, output %dx%d)",
                       d->N, d->C, d->OC, d->OH, d->OW);
    cudnnTensorDescriptor_t b;
    cudnnFilterDescriptor_t w;
    CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&b)); p->b_desc = b;
    CT_CUDNN_TRY(cudnnCreateFilterDescriptor(&w)); p->w_desc = w;
    CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, d->OC, 1, 1));
    CT_CUDNN_TRY(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d->OC, d->C, d->KH, d->KW));
    if (p->math.dtype == CT_BF16) {   /* the bf16 filter descriptor and the bf16 copies, for the largest batch */
        cudnnFilterDescriptor_t wh;
        CT_CUDNN_TRY(cudnnCreateFilterDescriptor(&wh)); p->wh_desc = wh;
        CT_CUDNN_TRY(cudnnSetFilter4dDescriptor(wh, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NCHW, d->OC, d->C, d->KH, d->KW));
        const size_t nin = (size_t)d->N * d->C * d->H * d->W, nout = (size_t)d->N * d->OC * d->OH * d->OW,
                     nw = (size_t)d->OC * d->C * d->KH * d->KW;
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->xh, nin * sizeof(uint16_t), "conv2d bf16 inputs"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->yh, nout * sizeof(uint16_t), "conv2d bf16 outputs"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->wh, nw * sizeof(uint16_t), "conv2d bf16 filters"));
        CT_TRY(ct_gpu_malloc(p->gpu, (void **)&p->dwh, nw * sizeof(uint16_t), "conv2d bf16 filter gradients"));
    }
    conv2d_gpu_shape *s = &p->shape[0];
    CT_TRY(shape_make(s, p, d->N, CONV2D_GPU_WORKSPACE_LIMIT));
    for (int k = 0; k < 3; k++) if (s->bytes[k] > p->ws_bytes) p->ws_bytes = s->bytes[k];
    return CT_OK;
}

extern "C" void ct_conv2d_plan_free_gpu(conv2d_gpu_plan *p)
{
    for (int i = 0; i < CONV2D_GPU_SHAPES; i++) shape_free(&p->shape[i]);
    if (p->b_desc) cudnnDestroyTensorDescriptor(p->b_desc);
    if (p->w_desc) cudnnDestroyFilterDescriptor(p->w_desc);
    if (p->wh_desc) cudnnDestroyFilterDescriptor(p->wh_desc);
    ct_gpu_free(p->xh);
    ct_gpu_free(p->yh);
    ct_gpu_free(p->wh);
    ct_gpu_free(p->dwh);
    memset(p, 0, sizeof *p);
}

extern "C" size_t ct_conv2d_workspace_floats_gpu(const conv2d_gpu_plan *p) { return (p->ws_bytes + sizeof(float) - 1) / sizeof(float); }

extern "C" const conv2d_gpu_shape *ct_conv2d_shape_gpu(conv2d_gpu_plan *p, int N)
{
    CT_ASSERT(N >= 1 && N <= p->d.N);
    p->clock++;
    for (int i = 0; i < CONV2D_GPU_SHAPES; i++)
        if (p->shape[i].N == N) { p->shape[i].used = p->clock; return &p->shape[i]; }
    /* a free slot, else the least recently used one; slot 0 holds the planned batch and stays */
    conv2d_gpu_shape *lru = &p->shape[1];
    for (int i = 1; i < CONV2D_GPU_SHAPES; i++) {
        if (!p->shape[i].N) { lru = &p->shape[i]; break; }
        if (p->shape[i].used < lru->used) lru = &p->shape[i];
    }
    shape_free(lru);
    if (shape_make(lru, p, N, p->ws_bytes) != CT_OK) { shape_free(lru); return NULL; }
    lru->used = p->clock;
    return lru;
}

static const conv2d_gpu_shape *need_shape(conv2d_gpu_plan *p, int N)
{
    const conv2d_gpu_shape *s = ct_conv2d_shape_gpu(p, N);
    if (!s) ct_gpu_fatal(__FILE__, __LINE__, "ct_conv2d_shape_gpu", ct_last_error());
    return s;
}

/* ---- bf16 plans ---- */

static void conv_forward_bf16(const ct_backend *be, float *out, float *ws, const float *in, const float *w, const float *b,
                              conv2d_gpu_plan *p, const conv2d_gpu_shape *s, int N)
{
    ct_gpu *g = ct_gpu_of(be);
    const conv2d_dims *d = &p->d;
    const float one = 1.0f, zero = 0.0f;
    ct_bf16_from_float_gpu(be, p->xh, in, (size_t)N * d->C * d->H * d->W);
    ct_bf16_from_float_gpu(be, p->wh, w, (size_t)d->OC * d->C * d->KH * d->KW);
    CT_CUDNN_CHECK(cudnnConvolutionForward(g->cudnn, &one, s->xh_desc, p->xh, p->wh_desc, p->wh, s->conv_desc[CONV2D_GPU_FWD],
                                           (cudnnConvolutionFwdAlgo_t)s->algo[CONV2D_GPU_FWD], ws, p->ws_bytes, &zero,
                                           s->yh_desc, p->yh));
    ct_float_from_bf16_gpu(be, out, p->yh, (size_t)N * d->OC * d->OH * d->OW);
    if (b) CT_CUDNN_CHECK(cudnnAddTensor(g->cudnn, &one, p->b_desc, b, &one, s->y_desc, out));
}

static void conv_backward_bf16(const ct_backend *be, float *din, float *dw, float *db, float *ws, const float *dout,
                               const float *in, const float *w, conv2d_gpu_plan *p, const conv2d_gpu_shape *s, int N)
{
    ct_gpu *g = ct_gpu_of(be);
    const conv2d_dims *d = &p->d;
    const float one = 1.0f, zero = 0.0f;
    const size_t nin = (size_t)N * d->C * d->H * d->W, nw = (size_t)d->OC * d->C * d->KH * d->KW;
    ct_bf16_from_float_gpu(be, p->yh, dout, (size_t)N * d->OC * d->OH * d->OW);   /* yh holds dout from here */
    if (dw) {
        ct_bf16_from_float_gpu(be, p->xh, in, nin);
        CT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(g->cudnn, &one, s->xh_desc, p->xh, s->yh_desc, p->yh,
                                                      s->conv_desc[CONV2D_GPU_BWD_FILTER],
                                                      (cudnnConvolutionBwdFilterAlgo_t)s->algo[CONV2D_GPU_BWD_FILTER], ws,
                                                      p->ws_bytes, &zero, p->wh_desc, p->dwh));
        ct_float_add_bf16_gpu(be, dw, p->dwh, nw);
    }
    if (db) CT_CUDNN_CHECK(cudnnConvolutionBackwardBias(g->cudnn, &one, s->y_desc, dout, &one, p->b_desc, db));
    if (din) {
        ct_bf16_from_float_gpu(be, p->wh, w, nw);
        CT_CUDNN_CHECK(cudnnConvolutionBackwardData(g->cudnn, &one, p->wh_desc, p->wh, s->yh_desc, p->yh,
                                                    s->conv_desc[CONV2D_GPU_BWD_DATA],
                                                    (cudnnConvolutionBwdDataAlgo_t)s->algo[CONV2D_GPU_BWD_DATA], ws,
                                                    p->ws_bytes, &zero, s->xh_desc, p->xh));   /* the filter gradient is done with xh */
        ct_float_from_bf16_gpu(be, din, p->xh, nin);
    }
}

extern "C" void ct_conv2d_forward_gpu(const ct_backend *be, float *out, float *ws, const float *in, const float *w,
                                      const float *b, conv2d_gpu_plan *p, int N)
{
    ct_gpu *g = ct_gpu_of(be);
    CT_ASSERT(g == p->gpu);   /* a plan runs on the backend that made it */
    const conv2d_gpu_shape *s = need_shape(p, N);
    const float one = 1.0f, zero = 0.0f;
    if (p->math.dtype == CT_BF16) {
        conv_forward_bf16(be, out, ws, in, w, b, p, s, N);
        return;
    }
    CT_CUDNN_CHECK(cudnnConvolutionForward(g->cudnn, &one, s->x_desc, in, p->w_desc, w, s->conv_desc[CONV2D_GPU_FWD],
                                           (cudnnConvolutionFwdAlgo_t)s->algo[CONV2D_GPU_FWD], ws, p->ws_bytes, &zero,
                                           s->y_desc, out));
    if (b) CT_CUDNN_CHECK(cudnnAddTensor(g->cudnn, &one, p->b_desc, b, &one, s->y_desc, out));
}

extern "C" void ct_conv2d_backward_gpu(const ct_backend *be, float *din, float *dw, float *db, float *ws, const float *dout,
                                       const float *in, const float *w, conv2d_gpu_plan *p, int N)
{
    ct_gpu *g = ct_gpu_of(be);
    CT_ASSERT(g == p->gpu);   /* a plan runs on the backend that made it */
    const conv2d_gpu_shape *s = need_shape(p, N);
    const float one = 1.0f, zero = 0.0f;
    if (p->math.dtype == CT_BF16) {
        conv_backward_bf16(be, din, dw, db, ws, dout, in, w, p, s, N);
        return;
    }
    if (dw)
        CT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(g->cudnn, &one, s->x_desc, in, s->y_desc, dout,
                                                      s->conv_desc[CONV2D_GPU_BWD_FILTER],
                                                      (cudnnConvolutionBwdFilterAlgo_t)s->algo[CONV2D_GPU_BWD_FILTER], ws,
                                                      p->ws_bytes, &one, p->w_desc, dw));
    if (db) CT_CUDNN_CHECK(cudnnConvolutionBackwardBias(g->cudnn, &one, s->y_desc, dout, &one, p->b_desc, db));
    if (din)
        CT_CUDNN_CHECK(cudnnConvolutionBackwardData(g->cudnn, &one, p->w_desc, w, s->y_desc, dout,
                                                    s->conv_desc[CONV2D_GPU_BWD_DATA],
                                                    (cudnnConvolutionBwdDataAlgo_t)s->algo[CONV2D_GPU_BWD_DATA], ws,
                                                    p->ws_bytes, &zero, s->x_desc, din));
}
