/* ops_cpu.c - the CPU's table of operations (layers/ops.h): the functions of
 * layers/ themselves, plus the small adapters that give the LSTM and conv2d the
 * table's plan-based form, the losses their stats form, and host memory the
 * device-memory entries. Nothing here computes anything the layers do not:
 * a model run through this table gives bit for bit what the layer calls gave. */
#include <stdlib.h>
#include <string.h>
#include "layers/ops.h"
#include "layers/activation.h"
#include "layers/add.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/loss.h"
#include "layers/pair.h"

/* ---- memory: the host's ---- */

static ct_status cpu_copy_in(void *dst, const void *src, size_t bytes) { if (bytes) memcpy(dst, src, bytes); return CT_OK; }
static void      cpu_copy(void *dst, const void *src, size_t bytes) { if (bytes && dst != src) memmove(dst, src, bytes); }
static void      cpu_zero(void *dst, size_t bytes) { if (bytes) memset(dst, 0, bytes); }
static ct_status cpu_sync(void) { return CT_OK; }

static ct_status cpu_ring_create(void **ring, size_t bytes) { (void)bytes; *ring = NULL; return CT_OK; }
static void      cpu_ring_free(void *ring) { (void)ring; }
static const void *cpu_ring_put(void *ring, const void *host, size_t bytes) { (void)ring; (void)bytes; return host; }
static void      cpu_ring_wait(void *ring, const void *host) { (void)ring; (void)host; }
static ct_status cpu_host_alloc(void **ptr, size_t bytes, const char *what)
{
    *ptr = ct_alloc_aligned(bytes, what);
    return *ptr ? CT_OK : CT_ENOMEM;
}

/* ---- LSTM: the plan holds the forward cache and backward scratch, and where
 * each layer's weights lie in the flat buffer ---- */
typedef struct {
    lstm_dims d;                      /* as planned: the largest batch and sequence */
    size_t w_ih[LSTM_MAX_LAYERS], w_hh[LSTM_MAX_LAYERS], b_ih[LSTM_MAX_LAYERS], b_hh[LSTM_MAX_LAYERS];   /* offsets */
    float *cache;                     /* [ct_lstm_cache_floats(d)] */
    float *ws;                        /* [ct_lstm_workspace_floats(d)] */
    size_t cache_floats, ws_floats;   /* as planned (the workspace grows with the thread count) */
} lstm_cpu_plan;

static ct_status cpu_lstm_plan(void **plan, const lstm_dims *d, const ct_params *ps, const lstm_ids *ids, const float *params)
{
    (void)params;
    *plan = NULL;
    lstm_cpu_plan *p = ct_calloc(1, sizeof *p, "LSTM plan");
    if (!p) return CT_ENOMEM;
    p->d = *d;
    for (int l = 0; l < ids->L; l++) {
        p->w_ih[l] = ps->p[ids->w_ih[l]].offset;
        p->w_hh[l] = ps->p[ids->w_hh[l]].offset;
        p->b_ih[l] = ps->p[ids->b_ih[l]].offset;
        p->b_hh[l] = ps->p[ids->b_hh[l]].offset;
    }
    p->cache_floats = ct_lstm_cache_floats(d);
    p->ws_floats = ct_lstm_workspace_floats(d);
    p->cache = ct_alloc_aligned(p->cache_floats * sizeof(float), "LSTM forward state");
    p->ws = p->cache ? ct_alloc_aligned(p->ws_floats * sizeof(float), "LSTM backward scratch") : NULL;
    if (!p->ws) { free(p->cache); free(p); return CT_ENOMEM; }
    *plan = p;
    return CT_OK;
}

static void cpu_lstm_plan_free(void *plan)
{
    lstm_cpu_plan *p = plan;
    if (!p) return;
    free(p->cache);
    free(p->ws);
    free(p);
}

static void lstm_check_call(const lstm_cpu_plan *p, const lstm_dims *d)
{
    CT_ASSERT(d->B >= 1 && d->B <= p->d.B && d->T >= 1 && d->T <= p->d.T && d->I == p->d.I && d->H == p->d.H && d->L == p->d.L);
    /* the thread count must not have been raised since planning (per-worker scratch) */
    CT_ASSERT(ct_lstm_cache_floats(d) <= p->cache_floats && ct_lstm_workspace_floats(d) <= p->ws_floats);
}

static void cpu_lstm_forward(float *out, void *plan, const float *x, const int *len, const int *len_host,
                             const float *params, const lstm_dims *d)
{
    lstm_cpu_plan *p = plan;
    (void)len_host;   /* the same host lengths as len */
    lstm_check_call(p, d);
    lstm_weights w[LSTM_MAX_LAYERS];
    for (int l = 0; l < d->L; l++)
        w[l] = (lstm_weights){ params + p->w_ih[l], params + p->w_hh[l], params + p->b_ih[l], params + p->b_hh[l] };
    ct_lstm_forward(out, p->cache, x, len, w, d);
}

static void cpu_lstm_backward(float *dx, float *grads, void *plan, const float *dout, const float *x, const int *len,
                              const int *len_host, const float *params, const lstm_dims *d)
{
    lstm_cpu_plan *p = plan;
    (void)len_host;
    lstm_check_call(p, d);
    lstm_weights w[LSTM_MAX_LAYERS];
    lstm_grads g[LSTM_MAX_LAYERS];
    for (int l = 0; l < d->L; l++) {
        w[l] = (lstm_weights){ params + p->w_ih[l], params + p->w_hh[l], params + p->b_ih[l], params + p->b_hh[l] };
        g[l] = (lstm_grads){ grads + p->w_ih[l], grads + p->w_hh[l], grads + p->b_ih[l], grads + p->b_hh[l] };
    }
    ct_lstm_backward(dx, g, p->ws, dout, p->cache, x, len, w, d);
}

/* ---- conv2d: the plan is the dims of the largest batch; a call's dims are the
 * same with its N (im2col or Winograd as ct_conv2d_dims_make chose) ---- */
static ct_status cpu_conv2d_plan(void **plan, const conv2d_dims *d, int bias)
{
    (void)bias;
    conv2d_dims *p = ct_malloc(sizeof *p, "conv2d plan");
    if (!p) { *plan = NULL; return CT_ENOMEM; }
    *p = *d;
    *plan = p;
    return CT_OK;
}

static void   cpu_conv2d_plan_free(void *plan) { free(plan); }
static size_t cpu_conv2d_workspace_floats(const void *plan) { return ct_conv2d_workspace_floats(plan); }

static conv2d_dims conv_call_dims(const conv2d_dims *p, int N)
{
    CT_ASSERT(N >= 1 && N <= p->N);
    conv2d_dims d = *p;
    d.N = N;
    /* the workspace was sized with the planned thread count: it must not have been raised since */
    CT_ASSERT(ct_conv2d_workspace_floats(&d) <= ct_conv2d_workspace_floats(p));
    return d;
}

static void cpu_conv2d_forward(float *out, float *ws, const float *in, const float *w, const float *b, void *plan, int N)
{
    conv2d_dims d = conv_call_dims(plan, N);
    ct_conv2d_forward(out, ws, in, w, b, &d);
}

static void cpu_conv2d_backward(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                                const float *w, void *plan, int N)
{
    conv2d_dims d = conv_call_dims(plan, N);
    ct_conv2d_backward(din, dw, db, ws, dout, in, w, &d);
}

/* ---- losses in their stats form: the numbers the models computed before ---- */
static void cpu_contrastive_stats(float *stats, const float *d, const float *y, int B, float margin, float threshold)
{
    stats[1] = (float)(int)(ct_contrastive_accuracy(d, y, B, threshold) * (float)B + 0.5f);
    stats[0] = ct_contrastive_forward(d, y, B, margin);
}

static void cpu_softmax_ce_stats(float *stats, float *prob, const float *logits, const int *labels, int B, int C)
{
    stats[1] = (float)(int)(ct_softmax_ce_accuracy(logits, labels, B, C) * (float)B + 0.5f);
    stats[0] = ct_softmax_ce_forward(prob, logits, labels, B, C);
}

const ct_ops ct_ops_cpu = {
    .name = "cpu",
    .host_memory = 1,
    .mem = { .alloc = ct_host_alloc, .free = free },
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
    .host_free = free,
    .dense_forward = ct_dense_forward,
    .dense_backward = ct_dense_backward,
    .lstm_plan = cpu_lstm_plan,
    .lstm_plan_free = cpu_lstm_plan_free,
    .lstm_forward = cpu_lstm_forward,
    .lstm_backward = cpu_lstm_backward,
    .conv2d_plan = cpu_conv2d_plan,
    .conv2d_plan_free = cpu_conv2d_plan_free,
    .conv2d_workspace_floats = cpu_conv2d_workspace_floats,
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward = cpu_conv2d_backward,
    .maxpool2d_forward = ct_maxpool2d_forward,
    .maxpool2d_backward = ct_maxpool2d_backward,
    .global_avgpool_forward = ct_global_avgpool_forward,
    .global_avgpool_backward = ct_global_avgpool_backward,
    .avgpool_h_forward = ct_avgpool_h_forward,
    .avgpool_h_backward = ct_avgpool_h_backward,
    .batchnorm_forward = ct_batchnorm_forward,
    .batchnorm_backward = ct_batchnorm_backward,
    .relu_forward = ct_relu_forward,
    .relu_backward = ct_relu_backward,
    .tanh_forward = ct_tanh_forward,
    .tanh_backward = ct_tanh_backward,
    .sigmoid_forward = ct_sigmoid_forward,
    .sigmoid_backward = ct_sigmoid_backward,
    .add_forward = ct_add_forward,
    .add_backward = ct_add_backward,
    .dropout_forward = ct_dropout_forward,
    .dropout_forward_part = ct_dropout_forward_part,
    .dropout_apply = ct_dropout_apply,
    .dropout_backward = ct_dropout_backward,
    .euclidean_forward = ct_euclidean_forward,
    .euclidean_backward = ct_euclidean_backward,
    .contrastive_stats = cpu_contrastive_stats,
    .contrastive_backward = ct_contrastive_backward,
    .softmax_ce_stats = cpu_softmax_ce_stats,
    .softmax_ce_backward = ct_softmax_ce_backward,
    .optim_init = ct_optim_init,
    .optim_free = ct_optim_free,
    .optim_step = ct_optim_step,
    .clip_grad_norm = ct_clip_grad_norm,
};

/* ---- parameter stores on a device ---- */

ct_status ct_dparams_make(ct_dparams *d, const ct_ops *ops, ct_params *host, int grads)
{
    memset(d, 0, sizeof *d);
    d->ops = ops;
    d->host = host;
    if (ops->host_memory) {
        d->data = host->data;
        d->grad = grads ? host->grad : NULL;
        return CT_OK;
    }
    size_t bytes = (host->numel ? host->numel : 1) * sizeof(float);
    ct_status st = ops->mem.alloc((void **)&d->data, bytes, "parameters");
    if (st == CT_OK && grads) st = ops->mem.alloc((void **)&d->grad, bytes, "gradients");
    if (st == CT_OK) st = ct_dparams_to_device(d);
    if (st != CT_OK) ct_dparams_free(d);
    return st;
}

void ct_dparams_free(ct_dparams *d)
{
    if (d->ops && !d->ops->host_memory) {
        if (d->data) d->ops->mem.free(d->data);
        if (d->grad) d->ops->mem.free(d->grad);
    }
    memset(d, 0, sizeof *d);
}

ct_status ct_dparams_to_device(const ct_dparams *d)
{
    if (d->ops->host_memory || !d->host->numel) return CT_OK;
    return d->ops->upload(d->data, d->host->data, d->host->numel * sizeof(float));
}

ct_status ct_dparams_to_host(const ct_dparams *d)
{
    if (d->ops->host_memory || !d->host->numel) return CT_OK;
    return d->ops->download(d->host->data, d->data, d->host->numel * sizeof(float));
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

const void *ct_ops_stage(const ct_ops *ops, void *dev, const void *host, size_t bytes)
{
    if (ops->host_memory) return host;
    if (ops->upload(dev, host, bytes) != CT_OK) ct_device_fatal("%s", ct_last_error());   /* planned memory: the device failed */
    return dev;
}
