/* ops.h - one table of operations per device, so that every model is written
 * ONCE and runs on the CPU or the GPU through the same code.
 *
 * A model (models/) never calls a layer function directly. It calls
 * `m->ops->dense_forward(...)`, where `ops` is the table of the device it was
 * planned on:
 *
 *   ct_ops_cpu   (layers/ops_cpu.c)   the functions of layers/, on OpenBLAS
 *   ct_ops_gpu() (cuda/ops_gpu.c)     their twins of cuda/, on cuBLAS and cuDNN
 *
 * Each entry keeps the layer's own contract (outputs first, `d` prefix for
 * gradients, input gradients OVERWRITTEN, parameter gradients ACCUMULATED; the
 * formulas and shapes are in the layer headers). Every float and int pointer an
 * entry takes lives on the table's device, except those called `_host`.
 * GPU entries are asynchronous (queued in order on one stream); the entries that
 * return a host value (download, clip_grad_norm, sync) wait for the queued work.
 *
 * Two layers need state that depends on the device, made once when the model
 * plans its memory:
 *   - the LSTM (lstm_plan): on the CPU its forward cache and backward scratch; on
 *     the GPU cuDNN's descriptors and work/reserve spaces (cuda/lstm.h). The
 *     weights are passed as the flat parameter buffer; the plan knows where the
 *     LSTM lies in it.
 *   - conv2d (conv2d_plan): on the CPU the dims (im2col or Winograd); on the
 *     GPU cuDNN's descriptors and algorithms (cuda/conv2d.h). Its workspace comes
 *     from the model's arena, sized by ct_conv2d_workspace_floats for the largest
 *     batch; each call gives its batch size N <= the planned one.
 *
 * Memory: `mem` allocates zeroed device memory (it is what the models' arenas
 * use, core/arena.h); upload/download are synchronous copies between the host
 * and the device; copy and zero are queued like the layers. On the CPU the
 * "device" is host memory (host_memory = 1) and models use their host buffers
 * directly: no copy is ever made there.
 *
 * Batches reach the device through a ring (ring_create / ring_put): one copy
 * per batch into one of two device slots, from pinned memory, overlapping the
 * compute of the previous batch. On the CPU ring_put returns the host block.
 * A batch built in a block from host_alloc (pinned on the GPU) is copied from
 * where it lies; any other host memory goes through the ring's own pinned block
 * first (one more host copy of the batch).
 */
#ifndef CT_OPS_H
#define CT_OPS_H
#include <stddef.h>
#include "core/arena.h"
#include "core/params.h"
#include "core/rng.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/lstm.h"
#include "layers/optim.h"
#include "layers/pool.h"

typedef struct ct_ops {
    const char *name;              /* "cpu" or "gpu" */
    int host_memory;               /* 1: device pointers are host pointers (the CPU) */

    /* ---- memory ---- */
    ct_allocator mem;                                                            /* zeroed device memory */
    ct_status (*upload)(void *dst, const void *src_host, size_t bytes);          /* host -> device, waits */
    ct_status (*download)(void *dst_host, const void *src, size_t bytes);        /* device -> host, waits */
    void      (*copy)(void *dst, const void *src, size_t bytes);                 /* device -> device, queued */
    void      (*zero)(void *dst, size_t bytes);                                  /* queued */
    ct_status (*sync)(void);        /* wait for everything queued; reports a failure of queued work */

    /* ---- batches: a ring of two device slots of `bytes` each ---- */
    ct_status   (*ring_create)(void **ring, size_t bytes);
    void        (*ring_free)(void *ring);
    /* Copies `bytes` (<= the ring's) of host memory into the next slot and returns its
     * device address; the copy overlaps work queued before and is ordered before work
     * queued after. A slot is reused two puts later, once the work queued before the
     * intervening put is done. A `host` block from host_alloc is read by the queued
     * copy itself: it must not be written again before ring_wait(ring, host). */
    const void *(*ring_put)(void *ring, const void *host, size_t bytes);
    void        (*ring_wait)(void *ring, const void *host);   /* no queued copy reads `host` any more */
    /* host memory for batches (64-byte aligned, zeroed): pinned on the GPU, so ring_put copies from it directly */
    ct_status   (*host_alloc)(void **ptr, size_t bytes, const char *what);
    void        (*host_free)(void *ptr);

    /* ---- layers (layers/dense.h) ---- */
    void (*dense_forward)(float *out, const float *in, const float *w, const float *b, int B, int in_dim, int out_dim);
    void (*dense_backward)(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                           int B, int in_dim, int out_dim);

    /* (layers/lstm.h) d: the largest batch and the longest sequence; ps, ids: the host
     * parameter store (for the layout: where the LSTM lies in the flat buffer); params: the
     * device copy of ps->data. Calls give d->B <= planned and d->T <= planned; len [B] on
     * the device and len_host [B] on the host are the same lengths (both NULL: all T). */
    ct_status (*lstm_plan)(void **plan, const lstm_dims *d, const ct_params *ps, const lstm_ids *ids, const float *params);
    void      (*lstm_plan_free)(void *plan);
    void (*lstm_forward)(float *out, void *plan, const float *x, const int *len, const int *len_host,
                         const float *params, const lstm_dims *d);
    /* dx overwritten (NULL: not computed); grads: the flat gradient buffer (accumulated). */
    void (*lstm_backward)(float *dx, float *grads, void *plan, const float *dout, const float *x, const int *len,
                          const int *len_host, const float *params, const lstm_dims *d);

    /* (layers/conv2d.h) d: made by ct_conv2d_dims_make for the largest batch. */
    ct_status (*conv2d_plan)(void **plan, const conv2d_dims *d, int bias);
    void      (*conv2d_plan_free)(void *plan);
    size_t    (*conv2d_workspace_floats)(const void *plan);
    void (*conv2d_forward)(float *out, float *ws, const float *in, const float *w, const float *b, void *plan, int N);
    void (*conv2d_backward)(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                            const float *w, void *plan, int N);

    /* (layers/pool.h) */
    void (*maxpool2d_forward)(float *out, int *argmax, const float *in, const maxpool2d_dims *d);
    void (*maxpool2d_backward)(float *din, const float *dout, const int *argmax, const maxpool2d_dims *d);
    void (*global_avgpool_forward)(float *out, const float *in, int N, int C, int HW);
    void (*global_avgpool_backward)(float *din, const float *dout, int N, int C, int HW);
    void (*avgpool_h_forward)(float *out, const float *in, int N, int C, int H, int W);
    void (*avgpool_h_backward)(float *din, const float *dout, int N, int C, int H, int W);

    /* (layers/batchnorm.h) */
    void (*batchnorm_forward)(float *out, float *xhat, float *mean, float *invstd, float *running_mean, float *running_var,
                              const float *in, const float *gamma, const float *beta, const batchnorm_dims *d, int train);
    void (*batchnorm_backward)(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                               const float *invstd, const float *gamma, const batchnorm_dims *d);

    /* (layers/activation.h) backward from the forward output, so in place works */
    void (*relu_forward)(float *out, const float *in, size_t n);
    void (*relu_backward)(float *din, const float *dout, const float *out, size_t n);
    void (*tanh_forward)(float *out, const float *in, size_t n);
    void (*tanh_backward)(float *din, const float *dout, const float *out, size_t n);
    void (*sigmoid_forward)(float *out, const float *in, size_t n);
    void (*sigmoid_backward)(float *din, const float *dout, const float *out, size_t n);

    /* (layers/add.h) out = a + b; backward da += dout, db += dout (ACCUMULATED; NULL: not wanted) */
    void (*add_forward)(float *out, const float *a, const float *b, size_t n);
    void (*add_backward)(float *da, float *db, const float *dout, size_t n);

    /* (layers/dropout.h) rng: the HOST dropout stream. The CPU draws every element from
     * it; the GPU draws one 64-bit seed per call and derives each element's number from
     * (seed, index) (cuda/counter_rng.h): the masks differ, the distribution does not. */
    void (*dropout_forward)(float *out, float *mask, const float *in, size_t n, float p, int train, ct_rng *rng);
    /* Training dropout of a part of a larger batch (data-parallel training: see
     * ct_dropout_forward_part): every element gets the mask value the whole batch's
     * dropout_forward gives it on the same device, so N ranks draw what one process draws. */
    void (*dropout_forward_part)(float *out, float *mask, const float *in, size_t per, int S, int n, int first, int rows,
                                 float p, ct_rng *rng);
    void (*dropout_apply)(float *out, const float *mask, const float *in, size_t n);
    void (*dropout_backward)(float *din, const float *dout, const float *mask, size_t n);

    /* (layers/pair.h, layers/loss.h) The training step's loss comes as stats [2] on the
     * device: stats[0] = the mean loss, stats[1] = the number of right predictions; the
     * model reads both with ONE download per step. */
    void (*euclidean_forward)(float *d, const float *a, const float *b, int B, int D, float eps);
    void (*euclidean_backward)(float *da, float *db, const float *dd, const float *d, const float *a, const float *b,
                               int B, int D, float eps);
    void (*contrastive_stats)(float *stats, const float *d, const float *y, int B, float margin, float threshold);
    void (*contrastive_backward)(float *dd, const float *d, const float *y, int B, float margin);
    void (*softmax_ce_stats)(float *stats, float *prob, const float *logits, const int *labels, int B, int C);
    void (*softmax_ce_backward)(float *dlogits, const float *prob, const int *labels, int B, int C);

    /* (layers/optim.h) o->m, o->v live on the device. */
    ct_status (*optim_init)(ct_optim *o, const ct_optim_config *cfg, size_t n);
    void      (*optim_free)(ct_optim *o);
    void      (*optim_step)(ct_optim *o, float *param, float *grad, float lr);
    float     (*clip_grad_norm)(float *grad, size_t n, float max_norm);      /* waits: returns the norm */
} ct_ops;

extern const ct_ops ct_ops_cpu;

/* ---- a parameter store on a device ----
 * The host ct_params keeps the names, shapes and layout, and the host copy of the
 * values (what initialisation, weights files and checkpoints read and write). Its
 * device copy has the same layout; on the CPU it IS the host store (no copy). */
typedef struct {
    const ct_ops *ops;
    ct_params *host;
    float *data, *grad;    /* [host->numel] on the device; grad NULL when not asked for */
} ct_dparams;

/* Makes the device copy (with gradients if `grads`) and uploads the host values. */
ct_status ct_dparams_make(ct_dparams *d, const ct_ops *ops, ct_params *host, int grads);
void      ct_dparams_free(ct_dparams *d);
ct_status ct_dparams_to_device(const ct_dparams *d);   /* host values -> device */
ct_status ct_dparams_to_host(const ct_dparams *d);     /* device values -> host */
/* The named view h (a handle of host) on the device. */
float    *ct_dparams_data(const ct_dparams *d, int h);
float    *ct_dparams_grad(const ct_dparams *d, int h);

/* A host block where the model needs it on the device: the block itself on the CPU,
 * else a synchronous copy into dev (which must hold bytes). */
const void *ct_ops_stage(const ct_ops *ops, void *dev, const void *host, size_t bytes);

#endif
