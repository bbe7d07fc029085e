/* conv2d.cu - convolution on cuDNN (see cuda/conv2d.h; the math is layers/conv2d.h).
 *
 *   forward:  out = conv(in, w) (beta 0), then out += b broadcast over N, H, W (cudnnAddTensor)
 *   backward: dw += conv_filter_grad(in, dout) (beta 1: accumulate)
 *             db += sum over N, OH, OW of dout  (cudnnConvolutionBackwardBias, beta 1)
 *             din = conv_data_grad(w, dout)     (beta 0: overwrite)
 */
#include <string.h>
#include "cuda/check.h"
#include "cuda/conv2d.h"

/* Picks the first heuristic result that is usable under the context's rules. */
template <typename Perf>
static int conv_pick(const Perf *perf, int n, int tf32, int deterministic, size_t *bytes)
{
    for (int i = 0; i < n; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (perf[i].memory > CONV2D_GPU_WORKSPACE_LIMIT) continue;
        if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
        if (!tf32 && perf[i].mathType != CUDNN_FMA_MATH) continue;
        *bytes = perf[i].memory;
        return (int)perf[i].algo;
    }
    return -1;
}

extern "C" ct_status conv2d_plan_gpu(conv2d_gpu_plan *p, const conv2d_dims *d, int bias)
{
    ct_gpu *g = ct_gpu_ctx();
    memset(p, 0, sizeof *p);
    p->d = *d;
    p->bias = bias;
    p->fwd_algo = p->bwd_data_algo = p->bwd_filter_algo = -1;
    if (d->N < 1 || d->C < 1 || d->OC < 1 || d->OH < 1 || d->OW < 1)
        return ct_fail(CT_EINVAL, "GPU conv2d: make the dims with conv2d_dims_make first (N %d, C %d, OC %d, output %dx%d)",
                       d->N, d->C, d->OC, d->OH, d->OW);
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t cv;
    CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&x)); p->x_desc = x;
    CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&y)); p->y_desc = y;
    CT_CUDNN_TRY(cudnnCreateTensorDescriptor(&b)); p->b_desc = b;
    CT_CUDNN_TRY(cudnnCreateFilterDescriptor(&w)); p->w_desc = w;
    CT_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&cv)); p->conv_desc = cv;
    CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->N, d->C, d->H, d->W));
    CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->N, d->OC, d->OH, d->OW));
    CT_CUDNN_TRY(cudnnSetTensor4dDescriptor(b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, d->OC, 1, 1));
    CT_CUDNN_TRY(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d->OC, d->C, d->KH, d->KW));
    CT_CUDNN_TRY(cudnnSetConvolution2dDescriptor(cv, d->pad, d->pad, d->stride, d->stride, 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CT_CUDNN_TRY(cudnnSetConvolutionMathType(cv, g->opt.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    int n, c, h, wd;
    CT_CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(cv, x, w, &n, &c, &h, &wd));
    if (n != d->N || c != d->OC || h != d->OH || wd != d->OW)
        return ct_fail(CT_EINVAL, "GPU conv2d: cuDNN computes a %dx%dx%dx%d output, ctrain %dx%dx%dx%d", n, c, h, wd,
                       d->N, d->OC, d->OH, d->OW);
    const int tf32 = g->opt.tf32, det = g->opt.deterministic;
    size_t need, most = 0;
    int got;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CT_CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(g->cudnn, x, w, cv, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fp));
    if ((p->fwd_algo = conv_pick(fp, got, tf32, det, &need)) < 0) goto none;
    most = need > most ? need : most;
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CT_CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(g->cudnn, w, y, cv, x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dp));
    if ((p->bwd_data_algo = conv_pick(dp, got, tf32, det, &need)) < 0) goto none;
    most = need > most ? need : most;
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CT_CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g->cudnn, x, y, cv, w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, wp));
    if ((p->bwd_filter_algo = conv_pick(wp, got, tf32, det, &need)) < 0) goto none;
    most = need > most ? need : most;
    p->ws_bytes = most;
    return CT_OK;
none:
    return ct_fail(CT_ENODEV, "GPU conv2d %dx%dx%dx%d -> %d filters %dx%d, stride %d, pad %d: cuDNN offers no %s%salgorithm%s "
                   "within %zu MiB of workspace; try without --deterministic, with --tf32, or --device cpu",
                   d->N, d->C, d->H, d->W, d->OC, d->KH, d->KW, d->stride, d->pad, det ? "deterministic " : "",
                   tf32 ? "" : "FP32 ", p->fwd_algo < 0 ? " (forward)" : p->bwd_data_algo < 0 ? " (backward data)" : " (backward filter)",
                   CONV2D_GPU_WORKSPACE_LIMIT >> 20);
}

extern "C" void conv2d_plan_free_gpu(conv2d_gpu_plan *p)
{
    if (p->x_desc) cudnnDestroyTensorDescriptor(p->x_desc);
    if (p->y_desc) cudnnDestroyTensorDescriptor(p->y_desc);
    if (p->b_desc) cudnnDestroyTensorDescriptor(p->b_desc);
    if (p->w_desc) cudnnDestroyFilterDescriptor(p->w_desc);
    if (p->conv_desc) cudnnDestroyConvolutionDescriptor(p->conv_desc);
    memset(p, 0, sizeof *p);
}

extern "C" size_t conv2d_workspace_floats_gpu(const conv2d_gpu_plan *p) { return (p->ws_bytes + sizeof(float) - 1) / sizeof(float); }

extern "C" void conv2d_forward_gpu(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_gpu_plan *p)
{
    ct_gpu *g = ct_gpu_ctx();
    const float one = 1.0f, zero = 0.0f;
    CT_CUDNN_CHECK(cudnnConvolutionForward(g->cudnn, &one, p->x_desc, in, p->w_desc, w, p->conv_desc,
                                           (cudnnConvolutionFwdAlgo_t)p->fwd_algo, ws, p->ws_bytes, &zero, p->y_desc, out));
    if (b) CT_CUDNN_CHECK(cudnnAddTensor(g->cudnn, &one, p->b_desc, b, &one, p->y_desc, out));
}

extern "C" void conv2d_backward_gpu(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                                    const float *w, const conv2d_gpu_plan *p)
{
    ct_gpu *g = ct_gpu_ctx();
    const float one = 1.0f, zero = 0.0f;
    CT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(g->cudnn, &one, p->x_desc, in, p->y_desc, dout, p->conv_desc,
                                                  (cudnnConvolutionBwdFilterAlgo_t)p->bwd_filter_algo, ws, p->ws_bytes,
                                                  &one, p->w_desc, dw));
    if (db) CT_CUDNN_CHECK(cudnnConvolutionBackwardBias(g->cudnn, &one, p->y_desc, dout, &one, p->b_desc, db));
    if (din)
        CT_CUDNN_CHECK(cudnnConvolutionBackwardData(g->cudnn, &one, p->w_desc, w, p->y_desc, dout, p->conv_desc,
                                                    (cudnnConvolutionBwdDataAlgo_t)p->bwd_data_algo, ws, p->ws_bytes,
                                                    &zero, p->x_desc, din));
}
