/* ops_cpu.c - the CPU backend (layers/ops.h): its table of operations, each entry
 * the function of layers/ itself behind the backend argument every entry takes
 * (the CPU needs nothing from it but the data type its plans compute in), the
 * small adapters that give the LSTM and conv2d the table's plan-based form, the
 * losses their stats form, and host memory the device-memory entries; opening
 * and closing backends; parameter stores on a backend's device. Nothing here
 * computes anything the layers do not: a model run through this table gives bit
 * for bit what the layer calls gave. */
#include <stdlib.h>
#include <string.h>
#include "layers/ops.h"
#include "layers/activation.h"
#include "layers/add.h"
#include "layers/conv2d_direct_bf16.h"   /* a convolution with the maxpool after it */
#include "layers/dense.h"
#include "layers/gemm_bf16.h"
#include "layers/dropout.h"
#include "layers/loss.h"
#include "layers/pair.h"

/* ---- the backend: the CPU has no device context ---- */
/* The CPU backend's own context (be->dev) when it computes in bf16: a scratch block for
 * the products that have no plan (dense), grown to the largest call and kept until close. */
typedef struct {
    uint16_t *scratch;
    size_t elems;
} cpu_dev;

static void cpu_close(ct_backend *be)
{
    cpu_dev *c = be->dev;
    if (c) free(c->scratch);
    free(c);
    be->dev = NULL;
}

static uint16_t *cpu_scratch(const ct_backend *be, size_t elems)
{
    cpu_dev *c = be->dev;
    CT_ASSERT(c);   /* opened by ct_backend_open_cpu with math.dtype = CT_BF16 */
    if (elems > c->elems) {
        free(c->scratch);
        c->scratch = ct_alloc_aligned(elems * sizeof *c->scratch, "bf16 product scratch");
        if (!c->scratch) ct_device_fatal("%s", ct_last_error());   /* out of host memory inside a step */
        c->elems = elems;
    }
    return c->scratch;
}

/* ---- memory: the host's ---- */

static ct_status cpu_mem_alloc(const ct_backend *be, void **ptr, size_t bytes, const char *what)
{
    (void)be;
    return ct_host_alloc(ptr, bytes, what);
}
static void      cpu_mem_free(const ct_backend *be, void *ptr) { (void)be; free(ptr); }
static ct_status cpu_copy_in(const ct_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes) memcpy(dst, src, bytes);
    return CT_OK;
}
static void cpu_copy(const ct_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes && dst != src) memmove(dst, src, bytes);
}
static void      cpu_zero(const ct_backend *be, void *dst, size_t bytes) { (void)be; if (bytes) memset(dst, 0, bytes); }
static ct_status cpu_sync(const ct_backend *be) { (void)be; return CT_OK; }

static ct_status cpu_ring_create(const ct_backend *be, void **ring, size_t bytes) { (void)be; (void)bytes; *ring = NULL; return CT_OK; }
static void      cpu_ring_free(const ct_backend *be, void *ring) { (void)be; (void)ring; }
static const void *cpu_ring_put(const ct_backend *be, void *ring, const void *host, size_t bytes)
{
    (void)be; (void)ring; (void)bytes;
    return host;
}
static void      cpu_ring_wait(const ct_backend *be, void *ring, const void *host) { (void)be; (void)ring; (void)host; }
static ct_status cpu_host_alloc(const ct_backend *be, void **ptr, size_t bytes, const char *what)
{
    (void)be;
    *ptr = ct_alloc_aligned(bytes, what);
    return *ptr ? CT_OK : CT_ENOMEM;
}
static void cpu_host_free(const ct_backend *be, void *ptr) { (void)be; free(ptr); }

/* ---- LSTM: the plan holds the forward cache and backward scratch, and where
 * each layer's weights lie in the flat buffer ---- */
typedef struct {
    lstm_dims d;                      /* as planned: the largest batch and sequence */
    ct_dtype dtype;                   /* the data type it computes in (the backend's when planned) */
    size_t w_ih[LSTM_MAX_LAYERS], w_hh[LSTM_MAX_LAYERS], b_ih[LSTM_MAX_LAYERS], b_hh[LSTM_MAX_LAYERS];   /* offsets */
    float *cache;                     /* [ct_lstm_cache_floats(d)] */
    float *ws;                        /* [ct_lstm_workspace_floats(d)] */
    size_t cache_floats, ws_floats;   /* as planned (the workspace grows with the thread count) */
} lstm_cpu_plan;

static ct_status cpu_lstm_plan(const ct_backend *be, void **plan, const lstm_dims *d, const ct_params *ps,
                               const lstm_ids *ids, const float *params)
{
    (void)params;
    *plan = NULL;
    CT_TRY(ct_backend_check_dtype(be, "LSTM plan"));
    lstm_cpu_plan *p = ct_calloc(1, sizeof *p, "LSTM plan");
    if (!p) return CT_ENOMEM;
    p->d = *d;
    p->d.dtype = p->dtype = be->math.dtype;
    for (int l = 0; l < ids->L; l++) {
        p->w_ih[l] = ps->p[ids->w_ih[l]].offset;
        p->w_hh[l] = ps->p[ids->w_hh[l]].offset;
        p->b_ih[l] = ps->p[ids->b_ih[l]].offset;
        p->b_hh[l] = ps->p[ids->b_hh[l]].offset;
    }
    p->cache_floats = ct_lstm_cache_floats(&p->d);
    p->ws_floats = ct_lstm_workspace_floats(&p->d);
    p->cache = ct_alloc_aligned(p->cache_floats * sizeof(float), "LSTM forward state");
    p->ws = p->cache ? ct_alloc_aligned(p->ws_floats * sizeof(float), "LSTM backward scratch") : NULL;
    if (!p->ws) { free(p->cache); free(p); return CT_ENOMEM; }
    *plan = p;
    return CT_OK;
}

static void cpu_lstm_plan_free(const ct_backend *be, void *plan)
{
    (void)be;
    lstm_cpu_plan *p = plan;
    if (!p) return;
    free(p->cache);
    free(p->ws);
    free(p);
}

/* A call's dims (its B <= planned, T <= planned) in the plan's data type. */
static lstm_dims lstm_call_dims(const lstm_cpu_plan *p, const lstm_dims *in)
{
    lstm_dims d = *in;
    d.dtype = p->dtype;
    const lstm_dims *dp = &d;
    CT_ASSERT(dp->B >= 1 && dp->B <= p->d.B && dp->T >= 1 && dp->T <= p->d.T && dp->I == p->d.I && dp->H == p->d.H &&
              dp->L == p->d.L);
    /* the thread count must not have been raised since planning (per-worker scratch) */
    CT_ASSERT(ct_lstm_cache_floats(dp) <= p->cache_floats && ct_lstm_workspace_floats(dp) <= p->ws_floats);
    return d;
}

static void cpu_lstm_forward(const ct_backend *be, float *out, void *plan, const float *x, const int *len,
                             const int *len_host, const float *params, const lstm_dims *d)
{
    (void)be;
    lstm_cpu_plan *p = plan;
    (void)len_host;   /* the same host lengths as len */
    const lstm_dims cd = lstm_call_dims(p, d);
    lstm_weights w[LSTM_MAX_LAYERS];
    for (int l = 0; l < d->L; l++)
        w[l] = (lstm_weights){ params + p->w_ih[l], params + p->w_hh[l], params + p->b_ih[l], params + p->b_hh[l] };
    ct_lstm_forward(out, p->cache, x, len, w, &cd);
}

static void cpu_lstm_backward(const ct_backend *be, float *dx, float *grads, void *plan, const float *dout, const float *x,
                              const int *len, const int *len_host, const float *params, const lstm_dims *d)
{
    (void)be;
    lstm_cpu_plan *p = plan;
    (void)len_host;
    const lstm_dims cd = lstm_call_dims(p, d);
    lstm_weights w[LSTM_MAX_LAYERS];
    lstm_grads g[LSTM_MAX_LAYERS];
    for (int l = 0; l < d->L; l++) {
        w[l] = (lstm_weights){ params + p->w_ih[l], params + p->w_hh[l], params + p->b_ih[l], params + p->b_hh[l] };
        g[l] = (lstm_grads){ grads + p->w_ih[l], grads + p->w_hh[l], grads + p->b_ih[l], grads + p->b_hh[l] };
    }
    ct_lstm_backward(dx, g, p->ws, dout, p->cache, x, len, w, &cd);
}

/* ---- conv2d: the plan is the dims of the largest batch (and the data type); a
 * call's dims are the same with its N (float32: im2col or Winograd as ct_conv2d_dims_make
 * chose; bf16: im2col on the bf16 products, ct_conv2d_forward_bf16) ---- */
typedef struct {
    conv2d_dims d;     /* as planned: the largest batch */
    ct_dtype dtype;    /* the data type it computes in (the backend's when planned) */
} conv2d_cpu_plan;

static ct_status cpu_conv2d_plan(const ct_backend *be, void **plan, const conv2d_dims *d, int bias)
{
    (void)bias;
    *plan = NULL;
    CT_TRY(ct_backend_check_dtype(be, "conv2d plan"));
    conv2d_cpu_plan *p = ct_malloc(sizeof *p, "conv2d plan");
    if (!p) return CT_ENOMEM;
    p->d = *d;
    p->dtype = be->math.dtype;
    *plan = p;
    return CT_OK;
}

static void cpu_conv2d_plan_free(const ct_backend *be, void *plan) { (void)be; free(plan); }

static size_t conv_ws_floats(const conv2d_dims *d, ct_dtype dtype)
{
    return dtype == CT_BF16 ? ct_conv2d_bf16_workspace_floats(d) : ct_conv2d_workspace_floats(d);
}

static size_t cpu_conv2d_workspace_floats(const ct_backend *be, const void *plan)
{
    (void)be;
    return conv_ws_floats(&((const conv2d_cpu_plan *)plan)->d, ((const conv2d_cpu_plan *)plan)->dtype);
}

static conv2d_dims conv_call_dims(const conv2d_cpu_plan *p, int N)
{
    CT_ASSERT(N >= 1 && N <= p->d.N);
    conv2d_dims d = p->d;
    d.N = N;
    /* the workspace was sized with the planned thread count: it must not have been raised since */
    CT_ASSERT(conv_ws_floats(&d, p->dtype) <= conv_ws_floats(&p->d, p->dtype));
    return d;
}

static void cpu_conv2d_forward_stats(const ct_backend *be, float *out, float *ws, const float *in, const float *w,
                                     const float *b, void *plan, int N, double *stats)
{
    (void)be;
    const conv2d_cpu_plan *p = plan;
    conv2d_dims d = conv_call_dims(p, N);
    if (p->dtype == CT_BF16) ct_conv2d_forward_bf16(out, ws, in, w, b, &d, stats);
    else                     ct_conv2d_forward(out, ws, in, w, b, &d, stats);
}

static void cpu_conv2d_forward(const ct_backend *be, float *out, float *ws, const float *in, const float *w, const float *b,
                               void *plan, int N)
{
    cpu_conv2d_forward_stats(be, out, ws, in, w, b, plan, N, NULL);
}

static void cpu_conv2d_backward(const ct_backend *be, float *din, float *dw, float *db, float *ws, const float *dout,
                                const float *in, const float *w, void *plan, int N)
{
    (void)be;
    const conv2d_cpu_plan *p = plan;
    conv2d_dims d = conv_call_dims(p, N);
    if (p->dtype == CT_BF16) ct_conv2d_backward_bf16(din, dw, db, ws, dout, in, w, &d);
    else                     ct_conv2d_backward(din, dw, db, ws, dout, in, w, &d);
}

static int cpu_conv2d_pool_fits(const ct_backend *be, const void *plan, const maxpool2d_dims *pd)
{
    (void)be;
    const conv2d_cpu_plan *p = plan;
    if (pd->N < 1 || pd->N > p->d.N) return 0;
    conv2d_dims d = conv_call_dims(p, pd->N);
    return p->dtype == CT_BF16 ? ct_conv2d_direct_bf16_pool_fits(&d, pd) : ct_conv2d_pool_fits(&d, pd);
}

static void cpu_conv2d_forward_pool(const ct_backend *be, float *pooled, int *argmax, float *ws, const float *in,
                                    const float *w, const float *b, void *plan, int N, const maxpool2d_dims *pd, int relu)
{
    (void)be;
    const conv2d_cpu_plan *p = plan;
    conv2d_dims d = conv_call_dims(p, N);
    if (p->dtype == CT_BF16) ct_conv2d_direct_bf16_forward_pool(pooled, argmax, ws, in, w, b, &d, pd, relu);
    else                     ct_conv2d_forward_pool(pooled, argmax, ws, in, w, b, &d, pd, relu);
}

static void cpu_conv2d_backward_pool(const ct_backend *be, float *din, float *dw, float *db, float *ws, const float *dpooled,
                                     const int *argmax, const maxpool2d_dims *pd, const float *in, const float *w, void *plan,
                                     int N)
{
    (void)be;
    const conv2d_cpu_plan *p = plan;
    conv2d_dims d = conv_call_dims(p, N);
    if (p->dtype == CT_BF16) ct_conv2d_direct_bf16_backward_pool(din, dw, db, ws, dpooled, argmax, pd, in, w, &d);
    else                     ct_conv2d_backward_pool(din, dw, db, ws, dpooled, argmax, pd, in, w, &d);
}

static void cpu_conv2d_forward_relu(const ct_backend *be, float *out, float *ws, const float *in, const float *w, const float *b,
                                    void *plan, int N)
{
    (void)be;
    const conv2d_cpu_plan *p = plan;
    conv2d_dims d = conv_call_dims(p, N);
    ct_conv2d_forward_relu(out, ws, in, w, b, &d, p->dtype == CT_BF16);
}

static void cpu_conv2d_backward_relu(const ct_backend *be, float *dw, float *db, float *ws, const float *in, void *plan, int N,
                                     const float *dout, const float *out)
{
    (void)be;
    const conv2d_cpu_plan *p = plan;
    conv2d_dims d = conv_call_dims(p, N);
    const ct_relu_din src = { .dout = dout, .out = out, .plane = (size_t)d.OH * d.OW, .C = d.OC };
    ct_conv2d_backward_planes(dw, db, ws, ct_relu_din_plane, &src, in, &d, p->dtype == CT_BF16);
}

/* Both the relu's and the batchnorm chain's planes: the one-channel path (ct_conv2d_backward_planes) */
static int cpu_conv2d_planes_fits(const ct_backend *be, const void *plan)
{
    (void)be;
    return ct_conv2d_backward_planes_fits(&((const conv2d_cpu_plan *)plan)->d);
}

static void cpu_conv2d_backward_bn_pool(const ct_backend *be, float *dw, float *db, float *ws, const float *in, void *plan,
                                        int N, const ct_bn_pool_din *src)
{
    (void)be;
    const conv2d_cpu_plan *p = plan;
    conv2d_dims d = conv_call_dims(p, N);
    ct_conv2d_backward_planes(dw, db, ws, ct_batchnorm_maxpool_din_plane, src, in, &d, p->dtype == CT_BF16);
}

/* ---- losses in their stats form: the numbers the models computed before ---- */
static void cpu_contrastive_stats(const ct_backend *be, float *stats, const float *d, const float *y, int B, float margin,
                                  float threshold)
{
    (void)be;
    stats[1] = (float)(int)(ct_contrastive_accuracy(d, y, B, threshold) * (float)B + 0.5f);
    stats[0] = ct_contrastive_forward(d, y, B, margin);
}

static void cpu_softmax_ce_stats(const ct_backend *be, float *stats, float *prob, const float *logits, const int *labels,
                                 int B, int C)
{
    (void)be;
    stats[1] = (float)(int)(ct_softmax_ce_accuracy(logits, labels, B, C) * (float)B + 0.5f);
    stats[0] = ct_softmax_ce_forward(prob, logits, labels, B, C);
}

/* ---- the layers: each the function of layers/ itself ---- */

static void cpu_dense_forward(const ct_backend *be, float *out, const float *in, const float *w, const float *b, int B,
                              int in_dim, int out_dim)
{
    if (be->math.dtype == CT_BF16)
        ct_dense_forward_bf16(out, in, w, b, B, in_dim, out_dim, cpu_scratch(be, ct_dense_bf16_scratch_elems(B, in_dim, out_dim)));
    else
        ct_dense_forward(out, in, w, b, B, in_dim, out_dim);
}

static void cpu_dense_backward(const ct_backend *be, float *din, float *dw, float *db, const float *dout, const float *in,
                               const float *w, int B, int in_dim, int out_dim)
{
    if (be->math.dtype == CT_BF16)
        ct_dense_backward_bf16(din, dw, db, dout, in, w, B, in_dim, out_dim,
                               cpu_scratch(be, ct_dense_bf16_scratch_elems(B, in_dim, out_dim)));
    else
        ct_dense_backward(din, dw, db, dout, in, w, B, in_dim, out_dim);
}

static void cpu_maxpool2d_forward(const ct_backend *be, float *out, int *argmax, const float *in, const maxpool2d_dims *d)
{
    (void)be;
    ct_maxpool2d_forward(out, argmax, in, d);
}

static void cpu_maxpool2d_backward(const ct_backend *be, float *din, const float *dout, const int *argmax,
                                   const maxpool2d_dims *d)
{
    (void)be;
    ct_maxpool2d_backward(din, dout, argmax, d);
}

static void cpu_global_avgpool_forward(const ct_backend *be, float *out, const float *in, int N, int C, int HW)
{
    (void)be;
    ct_global_avgpool_forward(out, in, N, C, HW);
}

static void cpu_global_avgpool_backward(const ct_backend *be, float *din, const float *dout, int N, int C, int HW)
{
    (void)be;
    ct_global_avgpool_backward(din, dout, N, C, HW);
}

static void cpu_avgpool_h_forward(const ct_backend *be, float *out, const float *in, int N, int C, int H, int W)
{
    (void)be;
    ct_avgpool_h_forward(out, in, N, C, H, W);
}

static void cpu_avgpool_h_backward(const ct_backend *be, float *din, const float *dout, int N, int C, int H, int W)
{
    (void)be;
    ct_avgpool_h_backward(din, dout, N, C, H, W);
}

static void cpu_batchnorm_forward(const ct_backend *be, float *out, float *xhat, float *mean, float *invstd,
                                  float *running_mean, float *running_var, const float *in, const float *gamma,
                                  const float *beta, const batchnorm_dims *d, int train)
{
    (void)be;
    ct_batchnorm_forward(out, xhat, mean, invstd, running_mean, running_var, in, gamma, beta, d, train);
}

static void cpu_batchnorm_backward(const ct_backend *be, float *din, float *dgamma, float *dbeta, const float *dout,
                                   const float *xhat, const float *invstd, const float *gamma, const batchnorm_dims *d)
{
    (void)be;
    ct_batchnorm_backward(din, dgamma, dbeta, dout, xhat, invstd, gamma, d);
}

static int cpu_batchnorm_maxpool_fits(const ct_backend *be, const batchnorm_dims *d, const maxpool2d_dims *pd)
{
    (void)be;
    return ct_batchnorm_maxpool_fits(d, pd);
}

static void cpu_batchnorm_maxpool_forward(const ct_backend *be, float *pooled, int *argmax, float *mean, float *invstd,
                                          float *running_mean, float *running_var, const float *in, const float *gamma,
                                          const float *beta, const batchnorm_dims *d, const maxpool2d_dims *pd, int relu,
                                          int train)
{
    (void)be;
    ct_batchnorm_maxpool_forward(pooled, argmax, mean, invstd, running_mean, running_var, in, gamma, beta, d, pd, relu, train);
}

static void cpu_batchnorm_maxpool_backward(const ct_backend *be, float *din, float *dgamma, float *dbeta, double *sums,
                                           const float *dpooled, const int *argmax, const float *in, const float *mean,
                                           const float *invstd, const float *gamma, const batchnorm_dims *d,
                                           const maxpool2d_dims *pd)
{
    (void)be;
    ct_batchnorm_maxpool_backward(din, dgamma, dbeta, sums, dpooled, argmax, in, mean, invstd, gamma, d, pd);
}

static int cpu_batchnorm_avgpool_h_fits(const ct_backend *be, const batchnorm_dims *d, int H, int W)
{
    (void)be;
    return ct_batchnorm_avgpool_h_fits(d, H, W);
}

static void cpu_batchnorm_avgpool_h_forward(const ct_backend *be, float *pooled, float *mean, float *invstd,
                                            float *running_mean, float *running_var, const float *in, const float *gamma,
                                            const float *beta, const batchnorm_dims *d, int H, int W, int relu, int train)
{
    (void)be;
    ct_batchnorm_avgpool_h_forward(pooled, mean, invstd, running_mean, running_var, in, gamma, beta, d, H, W, relu, train);
}

static void cpu_batchnorm_avgpool_h_backward(const ct_backend *be, float *din, float *dgamma, float *dbeta, double *sums,
                                             const float *dpooled, const float *in, const float *mean, const float *invstd,
                                             const float *gamma, const float *beta, const batchnorm_dims *d, int H, int W,
                                             int relu)
{
    (void)be;
    ct_batchnorm_avgpool_h_backward(din, dgamma, dbeta, sums, dpooled, in, mean, invstd, gamma, beta, d, H, W, relu);
}

static void cpu_relu_forward(const ct_backend *be, float *out, const float *in, size_t n)
{
    (void)be;
    ct_relu_forward(out, in, n);
}

static void cpu_relu_backward(const ct_backend *be, float *din, const float *dout, const float *out, size_t n)
{
    (void)be;
    ct_relu_backward(din, dout, out, n);
}

static void cpu_tanh_forward(const ct_backend *be, float *out, const float *in, size_t n)
{
    (void)be;
    ct_tanh_forward(out, in, n);
}

static void cpu_tanh_backward(const ct_backend *be, float *din, const float *dout, const float *out, size_t n)
{
    (void)be;
    ct_tanh_backward(din, dout, out, n);
}

static void cpu_sigmoid_forward(const ct_backend *be, float *out, const float *in, size_t n)
{
    (void)be;
    ct_sigmoid_forward(out, in, n);
}

static void cpu_sigmoid_backward(const ct_backend *be, float *din, const float *dout, const float *out, size_t n)
{
    (void)be;
    ct_sigmoid_backward(din, dout, out, n);
}

static void cpu_add_forward(const ct_backend *be, float *out, const float *a, const float *b, size_t n)
{
    (void)be;
    ct_add_forward(out, a, b, n);
}

static void cpu_add_backward(const ct_backend *be, float *da, float *db, const float *dout, size_t n)
{
    (void)be;
    ct_add_backward(da, db, dout, n);
}

static void cpu_dropout_forward(const ct_backend *be, float *out, float *mask, const float *in, size_t n, float p,
                                int train, ct_rng *rng)
{
    (void)be;
    ct_dropout_forward(out, mask, in, n, p, train, rng);
}

static void cpu_dropout_forward_part(const ct_backend *be, float *out, float *mask, const float *in, size_t per, int S,
                                     int n, int first, int rows, float p, ct_rng *rng)
{
    (void)be;
    ct_dropout_forward_part(out, mask, in, per, S, n, first, rows, p, rng);
}

static void cpu_dropout_apply(const ct_backend *be, float *out, const float *mask, const float *in, size_t n)
{
    (void)be;
    ct_dropout_apply(out, mask, in, n);
}

static void cpu_dropout_backward(const ct_backend *be, float *din, const float *dout, const float *mask, size_t n)
{
    (void)be;
    ct_dropout_backward(din, dout, mask, n);
}

static void cpu_euclidean_forward(const ct_backend *be, float *d, const float *a, const float *b, int B, int D, float eps)
{
    (void)be;
    ct_euclidean_forward(d, a, b, B, D, eps);
}

static void cpu_euclidean_backward(const ct_backend *be, float *da, float *db, const float *dd, const float *d,
                                   const float *a, const float *b, int B, int D, float eps)
{
    (void)be;
    ct_euclidean_backward(da, db, dd, d, a, b, B, D, eps);
}

static void cpu_contrastive_backward(const ct_backend *be, float *dd, const float *d, const float *y, int B, float margin)
{
    (void)be;
    ct_contrastive_backward(dd, d, y, B, margin);
}

static void cpu_softmax_ce_backward(const ct_backend *be, float *dlogits, const float *prob, const int *labels, int B,
                                    int C)
{
    (void)be;
    ct_softmax_ce_backward(dlogits, prob, labels, B, C);
}

static ct_status cpu_optim_init(const ct_backend *be, ct_optim *o, const ct_optim_config *cfg, size_t n)
{
    (void)be;
    return ct_optim_init(o, cfg, n);
}

static void cpu_optim_free(const ct_backend *be, ct_optim *o)
{
    (void)be;
    ct_optim_free(o);
}

static void cpu_optim_step(const ct_backend *be, ct_optim *o, float *param, float *grad, float lr)
{
    (void)be;
    ct_optim_step(o, param, grad, lr);
}

static float cpu_clip_grad_norm(const ct_backend *be, float *grad, size_t n, float max_norm)
{
    (void)be;
    return ct_clip_grad_norm(grad, n, max_norm);
}

/* float32 always; bf16 where this CPU has bf16 products (layers/gemm_bf16.h: ct_bf16_check) */
static ct_status cpu_check_dtype(const ct_backend *be, ct_dtype t)
{
    (void)be;
    if (t == CT_F32) return CT_OK;
    if (t == CT_BF16) return ct_bf16_check();
    return ct_fail(CT_EINVAL, "this backend computes in %s and %s only", ct_dtype_name(CT_F32), ct_dtype_name(CT_BF16));
}

const ct_ops ct_ops_cpu = {
    .close = cpu_close,
    .check_dtype = cpu_check_dtype,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .upload = cpu_copy_in,
    .download = cpu_copy_in,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .ring_create = cpu_ring_create,
    .ring_free = cpu_ring_free,
    .ring_put = cpu_ring_put,
    .ring_wait = cpu_ring_wait,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .dense_forward = cpu_dense_forward,
    .dense_backward = cpu_dense_backward,
    .lstm_plan = cpu_lstm_plan,
    .lstm_plan_free = cpu_lstm_plan_free,
    .lstm_forward = cpu_lstm_forward,
    .lstm_backward = cpu_lstm_backward,
    .conv2d_plan = cpu_conv2d_plan,
    .conv2d_plan_free = cpu_conv2d_plan_free,
    .conv2d_workspace_floats = cpu_conv2d_workspace_floats,
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_forward_stats = cpu_conv2d_forward_stats,
    .conv2d_backward = cpu_conv2d_backward,
    .conv2d_pool_fits = cpu_conv2d_pool_fits,
    .conv2d_forward_pool = cpu_conv2d_forward_pool,
    .conv2d_backward_pool = cpu_conv2d_backward_pool,
    .conv2d_relu_fits = cpu_conv2d_planes_fits,
    .conv2d_forward_relu = cpu_conv2d_forward_relu,
    .conv2d_backward_relu = cpu_conv2d_backward_relu,
    .conv2d_bn_pool_fits = cpu_conv2d_planes_fits,
    .conv2d_backward_bn_pool = cpu_conv2d_backward_bn_pool,
    .maxpool2d_forward = cpu_maxpool2d_forward,
    .maxpool2d_backward = cpu_maxpool2d_backward,
    .global_avgpool_forward = cpu_global_avgpool_forward,
    .global_avgpool_backward = cpu_global_avgpool_backward,
    .avgpool_h_forward = cpu_avgpool_h_forward,
    .avgpool_h_backward = cpu_avgpool_h_backward,
    .batchnorm_forward = cpu_batchnorm_forward,
    .batchnorm_backward = cpu_batchnorm_backward,
    .batchnorm_maxpool_fits = cpu_batchnorm_maxpool_fits,
    .batchnorm_maxpool_forward = cpu_batchnorm_maxpool_forward,
    .batchnorm_maxpool_backward = cpu_batchnorm_maxpool_backward,
    .batchnorm_avgpool_h_fits = cpu_batchnorm_avgpool_h_fits,
    .batchnorm_avgpool_h_forward = cpu_batchnorm_avgpool_h_forward,
    .batchnorm_avgpool_h_backward = cpu_batchnorm_avgpool_h_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .tanh_forward = cpu_tanh_forward,
    .tanh_backward = cpu_tanh_backward,
    .sigmoid_forward = cpu_sigmoid_forward,
    .sigmoid_backward = cpu_sigmoid_backward,
    .add_forward = cpu_add_forward,
    .add_backward = cpu_add_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_forward_part = cpu_dropout_forward_part,
    .dropout_apply = cpu_dropout_apply,
    .dropout_backward = cpu_dropout_backward,
    .euclidean_forward = cpu_euclidean_forward,
    .euclidean_backward = cpu_euclidean_backward,
    .contrastive_stats = cpu_contrastive_stats,
    .contrastive_backward = cpu_contrastive_backward,
    .softmax_ce_stats = cpu_softmax_ce_stats,
    .softmax_ce_backward = cpu_softmax_ce_backward,
    .optim_init = cpu_optim_init,
    .optim_free = cpu_optim_free,
    .optim_step = cpu_optim_step,
    .clip_grad_norm = cpu_clip_grad_norm,
};

/* ---- backends ---- */

const ct_backend ct_cpu_backend = { .ops = &ct_ops_cpu, .name = "cpu", .host_memory = 1 };

ct_status ct_backend_open_cpu(ct_backend *be, const ct_math *math)
{
    *be = ct_cpu_backend;
    if (math) be->math = *math;
    CT_TRY(ct_backend_check_dtype(be, "opening the backend"));
    if (be->math.dtype == CT_BF16) {
        be->dev = ct_calloc(1, sizeof(cpu_dev), "CPU backend");
        if (!be->dev) return CT_ENOMEM;
    }
    return CT_OK;
}

void ct_backend_close(ct_backend *be)
{
    if (be->ops) be->ops->close(be);
    memset(be, 0, sizeof *be);
}

ct_status ct_backend_check_dtype(const ct_backend *be, const char *what)
{
    if (be->math.dtype == CT_F32) return CT_OK;
    if (be->ops && be->ops->check_dtype) {   /* the backend answers for its device */
        const ct_status st = be->ops->check_dtype(be, be->math.dtype);
        if (st == CT_OK) return CT_OK;
        return ct_fail(st, "%s on the %s in %s: %s", what, be->name, ct_dtype_name(be->math.dtype), ct_last_error());
    }
    return ct_fail(CT_EINVAL, "%s on the %s: this backend computes in %s only, not %s", what, be->name,
                   ct_dtype_name(CT_F32), ct_dtype_name(be->math.dtype));
}

static ct_status backend_mem_alloc(const void *ctx, void **ptr, size_t bytes, const char *what)
{
    const ct_backend *be = ctx;
    return be->ops->mem_alloc(be, ptr, bytes, what);
}

static void backend_mem_free(const void *ctx, void *ptr)
{
    const ct_backend *be = ctx;
    be->ops->mem_free(be, ptr);
}

ct_allocator ct_backend_mem(const ct_backend *be) { return (ct_allocator){ backend_mem_alloc, backend_mem_free, be }; }

/* ---- parameter stores on a device ---- */

ct_status ct_dparams_make(ct_dparams *d, const ct_backend *be, ct_params *host, int grads)
{
    memset(d, 0, sizeof *d);
    d->be = be;
    d->host = host;
    if (be->host_memory) {
        d->data = host->data;
        d->grad = grads ? host->grad : NULL;
        return CT_OK;
    }
    size_t bytes = (host->numel ? host->numel : 1) * sizeof(float);
    ct_status st = be->ops->mem_alloc(be, (void **)&d->data, bytes, "parameters");
    if (st == CT_OK && grads) st = be->ops->mem_alloc(be, (void **)&d->grad, bytes, "gradients");
    if (st == CT_OK) st = ct_dparams_to_device(d);
    if (st != CT_OK) ct_dparams_free(d);
    return st;
}

void ct_dparams_free(ct_dparams *d)
{
    if (d->be && !d->be->host_memory) {
        if (d->data) d->be->ops->mem_free(d->be, d->data);
        if (d->grad) d->be->ops->mem_free(d->be, d->grad);
    }
    memset(d, 0, sizeof *d);
}

ct_status ct_dparams_to_device(const ct_dparams *d)
{
    if (d->be->host_memory || !d->host->numel) return CT_OK;
    return d->be->ops->upload(d->be, d->data, d->host->data, d->host->numel * sizeof(float));
}

ct_status ct_dparams_to_host(const ct_dparams *d)
{
    if (d->be->host_memory || !d->host->numel) return CT_OK;
    return d->be->ops->download(d->be, d->host->data, d->data, d->host->numel * sizeof(float));
}

float *ct_dparams_data(const ct_dparams *d, int h)
{
    CT_ASSERT(h >= 0 && h < d->host->n && d->data);
    return d->data + d->host->p[h].offset;
}

float *ct_dparams_grad(const ct_dparams *d, int h)
{
    CT_ASSERT(h >= 0 && h < d->host->n && d->grad);
    return d->grad + d->host->p[h].offset;
}

const void *ct_ops_stage(const ct_backend *be, void *dev, const void *host, size_t bytes)
{
    if (be->host_memory) return host;
    if (be->ops->upload(be, dev, host, bytes) != CT_OK) ct_device_fatal("%s", ct_last_error());   /* planned memory: the device failed */
    return dev;
}
