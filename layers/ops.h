/* ops.h - backends: one table of operations per device kind, and the backend
 * that every operation receives, so that every model is written ONCE and runs
 * on the CPU or the GPU through the same code.
 *
 * A backend (ct_backend) is one opened device and how it computes:
 *
 *   ops    its device kind's table of functions (const, one per kind, functions only):
 *            ct_ops_cpu   (layers/ops_cpu.c)  the functions of layers/, on OpenBLAS
 *            ct_ops_gpu() (cuda/ops_gpu.c)    their twins of cuda/, on cuBLAS and cuDNN
 *   math   the math settings (ct_math): TF32 allowed, deterministic algorithms only,
 *          and the data type the plans compute in (core/dtype.h: float32, or bf16
 *          where the backend's check_dtype accepts it)
 *   dev    the device's own context: NULL on the CPU; on the GPU its ct_gpu
 *          (cuda/device.h: the device, its streams, cuBLAS and cuDNN handles, scratch)
 *
 * As in ggml's backend interface, every entry of the table takes its backend as
 * its first argument, so nothing about the device or the precision is kept
 * process-wide. A model (models/) never calls a layer function directly: it holds
 * `const ct_backend *be` and calls
 *
 *   m->be->ops->dense_forward(m->be, out, in, w, b, B, in_dim, out_dim);
 *
 * Backends are opened and closed explicitly: ct_backend_open_cpu here,
 * ct_backend_open_gpu in cuda/ops_gpu.h, ct_backend_close for either. A backend is
 * opened in place and must not be moved while open (models, plans and arenas keep
 * its address). ct_cpu_backend is a constant CPU backend with the default math:
 * what a model computes on until it is put on another.
 *
 * Each layer entry keeps the layer's own contract after the backend (outputs
 * first, `d` prefix for gradients, input gradients OVERWRITTEN, parameter
 * gradients ACCUMULATED; the formulas and shapes are in the layer headers). Every
 * float and int pointer an entry takes lives on the backend's device, except those
 * called `_host`. GPU entries are asynchronous (queued in order on the backend's
 * compute stream); the entries that return a host value (download, clip_grad_norm,
 * sync) wait for the queued work.
 *
 * Two layers need state that depends on the device, made once when the model
 * plans its memory:
 *   - the LSTM (lstm_plan): on the CPU its forward cache and backward scratch; on
 *     the GPU cuDNN's descriptors and work/reserve spaces (cuda/lstm.h). The
 *     weights are passed as the flat parameter buffer; the plan knows where the
 *     LSTM lies in it.
 *   - conv2d (conv2d_plan): on the CPU the dims (im2col or Winograd; in bf16 always
 *     im2col, on the bf16 products: ct_conv2d_forward_bf16); on the
 *     GPU cuDNN's descriptors and algorithms (cuda/conv2d.h). Its workspace comes
 *     from the model's arena, sized by conv2d_workspace_floats for the largest
 *     batch; each call gives its batch size N <= the planned one.
 * A plan takes its data type (and on the GPU TF32 and determinism) from the
 * backend's math when it is made, and keeps it; a data type the backend cannot
 * compute is refused with one line (ct_backend_check_dtype, which asks the
 * backend's check_dtype entry: the CPU answers from its bf16 products, the GPU from
 * its compute capability and cuDNN version). A plan is used with the backend that
 * made it.
 *
 * Memory: mem_alloc allocates zeroed device memory (ct_backend_mem gives it as the
 * allocator the models' arenas use, core/arena.h); upload/download are synchronous
 * copies between the host and the device; copy and zero are queued like the
 * layers. On the CPU the "device" is host memory (host_memory = 1) and models use
 * their host buffers directly: no copy is ever made there.
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
#include "core/dtype.h"
#include "core/params.h"
#include "core/rng.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/lstm.h"
#include "layers/optim.h"
#include "layers/pool.h"

typedef struct ct_backend ct_backend;

/* How a backend computes. A zeroed ct_math is the default: float32, no TF32, the
 * fastest algorithms. */
typedef struct ct_math {
    int tf32;            /* GPU: allow TensorFloat-32 tensor cores in products, convolutions and the LSTM */
    int deterministic;   /* GPU: deterministic cuDNN algorithms only (the CPU always is) */
    ct_dtype dtype;      /* the data type the plans compute in (core/dtype.h: CT_F32, or CT_BF16 where check_dtype allows) */
    int lstm_own;        /* GPU: the LSTM on ctrain's own kernels (cuda/lstm_rec.h) where they run, not cuDNN's; opening
                            a GPU backend sets it when CTRAIN_LSTM_ALGO=ctrain */
} ct_math;

typedef struct ct_ops {
    /* ---- the backend itself ---- */
    void      (*close)(ct_backend *be);   /* releases be->dev (ct_backend_close calls it) */
    /* CT_OK when this backend computes in data type t on its device; else CT_ENODEV (the
     * device lacks what t needs) or CT_EINVAL (a type it never computes), with one line
     * left by ct_fail saying why. ct_backend_check_dtype asks it; it reads be->dev only. */
    ct_status (*check_dtype)(const ct_backend *be, ct_dtype t);

    /* ---- memory ---- */
    ct_status (*mem_alloc)(const ct_backend *be, void **ptr, size_t bytes, const char *what);   /* zeroed device memory */
    void      (*mem_free)(const ct_backend *be, void *ptr);
    ct_status (*upload)(const ct_backend *be, void *dst, const void *src_host, size_t bytes);   /* host -> device, waits */
    ct_status (*download)(const ct_backend *be, void *dst_host, const void *src, size_t bytes); /* device -> host, waits */
    void      (*copy)(const ct_backend *be, void *dst, const void *src, size_t bytes);          /* device -> device, queued */
    void      (*zero)(const ct_backend *be, void *dst, size_t bytes);                           /* queued */
    ct_status (*sync)(const ct_backend *be);   /* waits for everything queued; reports a failure of queued work */

    /* ---- batches: a ring of two device slots of `bytes` each ---- */
    ct_status   (*ring_create)(const ct_backend *be, void **ring, size_t bytes);
    void        (*ring_free)(const ct_backend *be, void *ring);
    /* Copies `bytes` (<= the ring's) of host memory into the next slot and returns its
     * device address; the copy overlaps work queued before and is ordered before work
     * queued after. A slot is reused two puts later, once the work queued before the
     * intervening put is done. A `host` block from host_alloc is read by the queued
     * copy itself: it must not be written again before ring_wait(be, ring, host). */
    const void *(*ring_put)(const ct_backend *be, void *ring, const void *host, size_t bytes);
    void        (*ring_wait)(const ct_backend *be, void *ring, const void *host);   /* no queued copy reads `host` any more */
    /* host memory for batches (64-byte aligned, zeroed): pinned on the GPU, so ring_put copies from it directly */
    ct_status   (*host_alloc)(const ct_backend *be, void **ptr, size_t bytes, const char *what);
    void        (*host_free)(const ct_backend *be, void *ptr);

    /* ---- layers (layers/dense.h) ---- */
    void (*dense_forward)(const ct_backend *be, float *out, const float *in, const float *w, const float *b, int B,
                          int in_dim, int out_dim);
    void (*dense_backward)(const ct_backend *be, float *din, float *dw, float *db, const float *dout, const float *in,
                           const float *w, int B, int in_dim, int out_dim);

    /* (layers/lstm.h) d: the largest batch and the longest sequence; ps, ids: the host
     * parameter store (for the layout: where the LSTM lies in the flat buffer); params: the
     * device copy of ps->data. Calls give d->B <= planned and d->T <= planned; len [B] on
     * the device and len_host [B] on the host are the same lengths (both NULL: all T).
     * The plan computes in be->math.dtype (CT_EINVAL where the backend cannot). */
    ct_status (*lstm_plan)(const ct_backend *be, void **plan, const lstm_dims *d, const ct_params *ps, const lstm_ids *ids,
                           const float *params);
    void      (*lstm_plan_free)(const ct_backend *be, void *plan);
    /* d->forward_only: no lstm_backward follows (the CPU then keeps no gates where its fused
     * steps run; the GPU's kernels keep what they always keep) */
    void (*lstm_forward)(const ct_backend *be, float *out, void *plan, const float *x, const int *len, const int *len_host,
                         const float *params, const lstm_dims *d);
    /* dx overwritten (NULL: not computed); grads: the flat gradient buffer (accumulated). */
    void (*lstm_backward)(const ct_backend *be, float *dx, float *grads, void *plan, const float *dout, const float *x,
                          const int *len, const int *len_host, const float *params, const lstm_dims *d);

    /* (layers/conv2d.h) d: made by ct_conv2d_dims_make for the largest batch. The plan
     * computes in be->math.dtype (CT_EINVAL where the backend cannot). */
    ct_status (*conv2d_plan)(const ct_backend *be, void **plan, const conv2d_dims *d, int bias);
    void      (*conv2d_plan_free)(const ct_backend *be, void *plan);
    size_t    (*conv2d_workspace_floats)(const ct_backend *be, const void *plan);
    void (*conv2d_forward)(const ct_backend *be, float *out, float *ws, const float *in, const float *w, const float *b,
                           void *plan, int N);
    /* The same, and each output plane's statistics for a batchnorm right after: stats
     * [N, OC, 2] as ct_batchnorm_plane_stats gives them (layers/batchnorm.h, for
     * batchnorm_dims.plane_stats), taken while the output is in the cache. NULL where the
     * backend has no such kernel. */
    void (*conv2d_forward_stats)(const ct_backend *be, float *out, float *ws, const float *in, const float *w,
                                 const float *b, void *plan, int N, double *stats);
    void (*conv2d_backward)(const ct_backend *be, float *din, float *dw, float *db, float *ws, const float *dout,
                            const float *in, const float *w, void *plan, int N);
    /* The convolution, then a max pooling over its output (relu = 1: and a relu after the
     * pool), without writing that output: pooled and argmax as maxpool2d_forward (and
     * relu_forward) give them on it, bit for bit (ct_conv2d_forward_pool; bf16:
     * ct_conv2d_direct_bf16_forward_pool). Its backward from the pool's gradient dpooled (the
     * relu's already applied) and argmax, dout made image by image and never written:
     * conv2d_backward's bits on what maxpool2d_backward gives (ct_conv2d_backward_pool, _bf16's
     * likewise). NULL where the backend has no such kernel; conv2d_pool_fits says whether a
     * plan can take them. */
    int  (*conv2d_pool_fits)(const ct_backend *be, const void *plan, const maxpool2d_dims *pd);
    void (*conv2d_forward_pool)(const ct_backend *be, float *pooled, int *argmax, float *ws, const float *in, const float *w,
                                const float *b, void *plan, int N, const maxpool2d_dims *pd, int relu);
    void (*conv2d_backward_pool)(const ct_backend *be, float *din, float *dw, float *db, float *ws, const float *dpooled,
                                 const int *argmax, const maxpool2d_dims *pd, const float *in, const float *w, void *plan,
                                 int N);
    /* The convolution and a relu after it, the relu's output written and the convolution's
     * not (ct_conv2d_forward_relu: relu_forward's bits on conv2d_forward's); and, where the
     * convolution's din is not wanted (a model's first layer), the pair's backward from the
     * relu's dout and out, the relu's din made plane by plane and taken at once into dw and
     * db, never written (ct_conv2d_backward_planes, ct_relu_din_plane: conv2d_backward's bits
     * on relu_backward's). NULL where the backend has no such kernel; conv2d_relu_fits says
     * whether a plan can take them. */
    int  (*conv2d_relu_fits)(const ct_backend *be, const void *plan);
    void (*conv2d_forward_relu)(const ct_backend *be, float *out, float *ws, const float *in, const float *w, const float *b,
                                void *plan, int N);
    void (*conv2d_backward_relu)(const ct_backend *be, float *dw, float *db, float *ws, const float *in, void *plan, int N,
                                 const float *dout, const float *out);

    /* (layers/pool.h) */
    void (*maxpool2d_forward)(const ct_backend *be, float *out, int *argmax, const float *in, const maxpool2d_dims *d);
    void (*maxpool2d_backward)(const ct_backend *be, float *din, const float *dout, const int *argmax, const maxpool2d_dims *d);
    void (*global_avgpool_forward)(const ct_backend *be, float *out, const float *in, int N, int C, int HW);
    void (*global_avgpool_backward)(const ct_backend *be, float *din, const float *dout, int N, int C, int HW);
    void (*avgpool_h_forward)(const ct_backend *be, float *out, const float *in, int N, int C, int H, int W);
    void (*avgpool_h_backward)(const ct_backend *be, float *din, const float *dout, int N, int C, int H, int W);

    /* (layers/batchnorm.h) */
    void (*batchnorm_forward)(const ct_backend *be, float *out, float *xhat, float *mean, float *invstd, float *running_mean,
                              float *running_var, const float *in, const float *gamma, const float *beta,
                              const batchnorm_dims *d, int train);
    void (*batchnorm_backward)(const ct_backend *be, float *din, float *dgamma, float *dbeta, const float *dout,
                               const float *xhat, const float *invstd, const float *gamma, const batchnorm_dims *d);
    /* Batchnorm, then max pooling over its output (relu = 1: and a relu after the pool),
     * without writing that output or xhat (ct_batchnorm_maxpool_forward/_backward: the
     * layers' results bit for bit; backward reads the forward pass's input again). NULL where
     * the backend has no such kernel; batchnorm_maxpool_fits says whether a pair can take it. */
    int  (*batchnorm_maxpool_fits)(const ct_backend *be, const batchnorm_dims *d, const maxpool2d_dims *pd);
    void (*batchnorm_maxpool_forward)(const ct_backend *be, float *pooled, int *argmax, float *mean, float *invstd,
                                      float *running_mean, float *running_var, const float *in, const float *gamma,
                                      const float *beta, const batchnorm_dims *d, const maxpool2d_dims *pd, int relu,
                                      int train);
    /* sums: host memory of ct_batchnorm_chain_sums_doubles(d), a workspace that keeps each
     * channel's sums for conv2d_backward_bn_pool below (both chains' backward take one) */
    void (*batchnorm_maxpool_backward)(const ct_backend *be, float *din, float *dgamma, float *dbeta, double *sums,
                                       const float *dpooled, const int *argmax, const float *in, const float *mean,
                                       const float *invstd, const float *gamma, const batchnorm_dims *d,
                                       const maxpool2d_dims *pd);
    /* The backward of a convolution whose din is not wanted (a model's first layer) before
     * such a pair: dout, the pair's din, is made plane by plane from src (the pair's backward
     * above, run with din NULL, kept its sums) and taken at once into dw and db, never
     * written (ct_conv2d_backward_planes, ct_batchnorm_maxpool_din_plane: conv2d_backward's
     * bits from the pair's din). NULL where the backend has no such kernel;
     * conv2d_bn_pool_fits says whether a plan can take it. */
    int  (*conv2d_bn_pool_fits)(const ct_backend *be, const void *plan);
    void (*conv2d_backward_bn_pool)(const ct_backend *be, float *dw, float *db, float *ws, const float *in, void *plan,
                                    int N, const ct_bn_pool_din *src);
    /* Batchnorm, then (relu = 1: a relu, then) the mean over H, or the global mean with H = HW
     * and W = 1 (ct_batchnorm_avgpool_h_forward/_backward: the layers' results bit for bit,
     * none of their maps written; backward reads the forward pass's input again). NULL where
     * the backend has no such kernel; batchnorm_avgpool_h_fits says whether a chain can take it. */
    int  (*batchnorm_avgpool_h_fits)(const ct_backend *be, const batchnorm_dims *d, int H, int W);
    void (*batchnorm_avgpool_h_forward)(const ct_backend *be, float *pooled, float *mean, float *invstd,
                                        float *running_mean, float *running_var, const float *in, const float *gamma,
                                        const float *beta, const batchnorm_dims *d, int H, int W, int relu, int train);
    void (*batchnorm_avgpool_h_backward)(const ct_backend *be, float *din, float *dgamma, float *dbeta, double *sums,
                                         const float *dpooled, const float *in, const float *mean, const float *invstd,
                                         const float *gamma, const float *beta, const batchnorm_dims *d, int H, int W,
                                         int relu);

    /* (layers/activation.h) backward from the forward output, so in place works */
    void (*relu_forward)(const ct_backend *be, float *out, const float *in, size_t n);
    void (*relu_backward)(const ct_backend *be, float *din, const float *dout, const float *out, size_t n);
    void (*tanh_forward)(const ct_backend *be, float *out, const float *in, size_t n);
    void (*tanh_backward)(const ct_backend *be, float *din, const float *dout, const float *out, size_t n);
    void (*sigmoid_forward)(const ct_backend *be, float *out, const float *in, size_t n);
    void (*sigmoid_backward)(const ct_backend *be, float *din, const float *dout, const float *out, size_t n);

    /* (layers/add.h) out = a + b; backward da += dout, db += dout (ACCUMULATED; NULL: not wanted) */
    void (*add_forward)(const ct_backend *be, float *out, const float *a, const float *b, size_t n);
    void (*add_backward)(const ct_backend *be, float *da, float *db, const float *dout, size_t n);

    /* (layers/dropout.h) rng: the HOST dropout stream. The CPU draws every element from
     * it; the GPU draws one 64-bit seed per call and derives each element's number from
     * (seed, index) (cuda/counter_rng.h): the masks differ, the distribution does not. */
    void (*dropout_forward)(const ct_backend *be, float *out, float *mask, const float *in, size_t n, float p, int train,
                            ct_rng *rng);
    /* Training dropout of a part of a larger batch (data-parallel training: see
     * ct_dropout_forward_part): every element gets the mask value the whole batch's
     * dropout_forward gives it on the same device, so N ranks draw what one process draws. */
    void (*dropout_forward_part)(const ct_backend *be, float *out, float *mask, const float *in, size_t per, int S, int n,
                                 int first, int rows, float p, ct_rng *rng);
    void (*dropout_apply)(const ct_backend *be, float *out, const float *mask, const float *in, size_t n);
    void (*dropout_backward)(const ct_backend *be, float *din, const float *dout, const float *mask, size_t n);

    /* (layers/pair.h, layers/loss.h) The training step's loss comes as stats [2] on the
     * device: stats[0] = the mean loss, stats[1] = the number of right predictions; the
     * model reads both with ONE download per step. */
    void (*euclidean_forward)(const ct_backend *be, float *d, const float *a, const float *b, int B, int D, float eps);
    void (*euclidean_backward)(const ct_backend *be, float *da, float *db, const float *dd, const float *d, const float *a,
                               const float *b, int B, int D, float eps);
    void (*contrastive_stats)(const ct_backend *be, float *stats, const float *d, const float *y, int B, float margin,
                              float threshold);
    void (*contrastive_backward)(const ct_backend *be, float *dd, const float *d, const float *y, int B, float margin);
    void (*softmax_ce_stats)(const ct_backend *be, float *stats, float *prob, const float *logits, const int *labels, int B,
                             int C);
    void (*softmax_ce_backward)(const ct_backend *be, float *dlogits, const float *prob, const int *labels, int B, int C);

    /* (layers/optim.h) o->m, o->v live on the device. */
    ct_status (*optim_init)(const ct_backend *be, ct_optim *o, const ct_optim_config *cfg, size_t n);
    void      (*optim_free)(const ct_backend *be, ct_optim *o);
    void      (*optim_step)(const ct_backend *be, ct_optim *o, float *param, float *grad, float lr);
    float     (*clip_grad_norm)(const ct_backend *be, float *grad, size_t n, float max_norm);   /* waits: returns the norm */
} ct_ops;

/* An opened device and how it computes (see the top of this file). */
struct ct_backend {
    const ct_ops *ops;      /* the device kind's table */
    const char *name;       /* "cpu" or "gpu" */
    int host_memory;        /* 1: device pointers are host pointers (the CPU) */
    ct_math math;
    void *dev;              /* the device's context: NULL on the CPU, the ct_gpu on the GPU (cuda/device.h) */
};

/* The CPU's table. */
extern const ct_ops ct_ops_cpu;
/* The CPU with the default math (a zeroed ct_math): what a model computes on until
 * it is moved to another backend. Constant: it holds no state. */
extern const ct_backend ct_cpu_backend;

/* Opens the CPU as a backend computing with `math` (NULL: the default). Never fails
 * for the CPU itself; a data type it cannot compute is refused when a plan is made. */
ct_status ct_backend_open_cpu(ct_backend *be, const ct_math *math);
/* Closes a backend opened by ct_backend_open_cpu or ct_backend_open_gpu (waits for its
 * queued work, releases its device context) and zeroes it; a zeroed one is left alone. */
void      ct_backend_close(ct_backend *be);
/* CT_OK when be computes in its math's data type (float32 always; another type when the
 * backend's check_dtype entry accepts it); else that entry's status (CT_ENODEV: the device
 * lacks it; CT_EINVAL: never computed) with one line naming `what`, the backend, the type
 * and the entry's reason. The plans and the backends' open functions call it. */
ct_status ct_backend_check_dtype(const ct_backend *be, const char *what);
/* be's device memory as an arena's allocator (core/arena.h); it keeps the address of be. */
ct_allocator ct_backend_mem(const ct_backend *be);

/* ---- a parameter store on a device ----
 * The host ct_params keeps the names, shapes and layout, and the host copy of the
 * values (what initialisation, weights files and checkpoints read and write). Its
 * device copy has the same layout; on the CPU it IS the host store (no copy). */
typedef struct {
    const ct_backend *be;
    ct_params *host;
    float *data, *grad;    /* [host->numel] on the device; grad NULL when not asked for */
} ct_dparams;

/* Makes the device copy (with gradients if `grads`) and uploads the host values. */
ct_status ct_dparams_make(ct_dparams *d, const ct_backend *be, ct_params *host, int grads);
void      ct_dparams_free(ct_dparams *d);
ct_status ct_dparams_to_device(const ct_dparams *d);   /* host values -> device */
ct_status ct_dparams_to_host(const ct_dparams *d);     /* device values -> host */
/* The named view h (a handle of host) on the device. */
float    *ct_dparams_data(const ct_dparams *d, int h);
float    *ct_dparams_grad(const ct_dparams *d, int h);

/* A host block where the model needs it on the device: the block itself on the CPU,
 * else a synchronous copy into dev (which must hold bytes). */
const void *ct_ops_stage(const ct_backend *be, void *dev, const void *host, size_t bytes);

#endif
