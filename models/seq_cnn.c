/* seq_cnn.c - the sequential CNN as a table of layer kinds (see seq_cnn.h).
 *
 * Each kind has one section below with its functions: parse (the options after its
 * spec word), shape (its output from its input), params (what it registers), plan
 * (its memory beyond its output), forward and backward (through the device's table of
 * operations, layers/ops.h), flops, and its row in ct_seq_kinds, which also describes
 * its weights in Keras's and PyTorch's files. The model itself is the generic part
 * after the table: building from the parsed spec (models/seq_cnn_spec.c), the
 * activation plan, and forward and backward as one loop over the layer list; the
 * classifier is that stack followed by softmax cross-entropy.
 *
 * Gradients in backward: `cur` holds d loss / d (output of layer i); a layer that
 * cannot work in place writes d loss / d (its input) into the other of the two
 * ping-pong buffers. A residual block's add keeps its output gradient in the skip
 * buffer of its nesting level; its save, reached later, adds it to what came back
 * through the block (d x = d main + d skip).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "models/seq_cnn.h"
#include "models/seq_cnn_spec.h"
#include "layers/pool.h"

size_t ct_seq_layer_out_size(const seq_layer *l)
{
    return (size_t)l->out_c * l->out_h * l->out_w;
}

size_t ct_seq_layer_in_size(const seq_layer *l)
{
    return (size_t)l->in_c * l->in_h * l->in_w;
}

/* values of layer i's output for N samples */
static size_t n_out(const seq_cnn *m, int i, int N)
{
    return (size_t)N * ct_seq_layer_out_size(&m->layer[i]);
}

/* ---- conv: 2-D convolution, square kernel, zero padding (layers/conv2d.h) ---- */

static ct_status conv_parse(seq_layer *l, const char *s, int pos)
{
    static const char *form = "convFkK[sS][pP], e.g. conv32k3 or conv64k3s2p1";
    const char *t = l->text;
    CT_TRY(ct_seq_spec_uint(&s, &l->filters, 1, 65536, pos, t, "number of filters", "conv32k3"));
    if (*s != 'k') return ct_fail(CT_EINVAL, "spec layer %d \"%s\": missing the kernel size 'k' (the form is %s)", pos, t, form);
    s++;
    CT_TRY(ct_seq_spec_uint(&s, &l->kernel, 1, 1024, pos, t, "kernel size", "conv32k3"));
    l->stride = 1; l->pad = 0;
    if (*s == 's') { s++; CT_TRY(ct_seq_spec_uint(&s, &l->stride, 1, 1024, pos, t, "stride", "conv32k3s2")); }
    if (*s == 'p') { s++; CT_TRY(ct_seq_spec_uint(&s, &l->pad, 0, 1024, pos, t, "padding", "conv32k3p1")); }
    return ct_seq_spec_end(s, pos, t, form);
}

static ct_status conv_shape(const seq_cnn *m, seq_layer *l, int pos)
{
    CT_TRY(ct_seq_spec_need_maps(l, pos, "it"));
    conv2d_dims cd;
    if (l->kernel > l->in_h + 2 * l->pad || l->kernel > l->in_w + 2 * l->pad)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": kernel %dx%d is larger than its input %dx%d (padding %d); "
                       "use a smaller kernel, padding, or fewer pooling layers before it",
                       pos, l->text, l->kernel, l->kernel, l->in_h, l->in_w, l->pad);
    if (ct_conv2d_dims_make(&cd, 1, l->in_c, l->in_h, l->in_w, l->filters, l->kernel, l->kernel, l->stride, l->pad) != CT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": %s", pos, l->text, msg);
    }
    l->out_c = l->filters; l->out_h = cd.OH; l->out_w = cd.OW;
    return CT_OK;
}

/* the layer's dims for a batch of N */
static conv2d_dims conv_dims(const seq_layer *l, int N)
{
    conv2d_dims cd;
    ct_status st = ct_conv2d_dims_make(&cd, N, l->in_c, l->in_h, l->in_w, l->filters, l->kernel, l->kernel, l->stride, l->pad);
    CT_ASSERT(st == CT_OK);
    return cd;
}

static ct_status conv_params(seq_cnn *m, seq_layer *l)
{
    conv2d_dims cd = conv_dims(l, 1);
    return ct_conv2d_params_add(&l->conv, &m->params, l->name, &cd, 1);   /* w [F, C, K, K], b [F] */
}

static ct_status conv_plan(seq_cnn *m, seq_layer *l, ct_arena *a, int N, size_t *ws)
{
    conv2d_dims cd = conv_dims(l, N);
    const int i = (int)(l - m->layer);
    if (i + 1 < m->n && m->layer[i + 1].kind == SEQ_BATCHNORM && m->be->ops->conv2d_forward_stats)
        ct_arena_plan(a, (void **)&l->plane_stats, (size_t)N * l->out_c * 2 * sizeof(double));   /* [N, OC, 2] */
    CT_TRY(m->be->ops->conv2d_plan(m->be, &l->conv_plan, &cd, 1));
    *ws = m->be->ops->conv2d_workspace_floats(m->be, l->conv_plan);
    return CT_OK;
}

static void conv_unplan(seq_cnn *m, seq_layer *l)
{
    if (l->conv_plan) m->be->ops->conv2d_plan_free(m->be, l->conv_plan);
    l->conv_plan = NULL;
}

/* Whether conv layer i makes its output planes' statistics in this pass, for the batchnorm
 * right after it: in training, where that batchnorm takes the batch's own statistics (not
 * synchronised over replicas) and the backend can (ops->conv2d_forward_stats). The
 * batchnorm's statistics are the same either way, to the last bit where the convolution
 * took each plane whole, to within batchnorm.c's bound where it took a plane's blocks of
 * rows (layers/batchnorm.h, plane_stats). */
static int conv_feeds_stats(const seq_cnn *m, int i, int train)
{
    return train && !m->bn_own_stats && m->layer[i].plane_stats && !(m->bn_sync.sum && m->part_rows > 0);
}

static maxpool2d_dims pool_dims(const seq_layer *l, int N);

/* The maxpool right after conv layer i (maybe through a relu it runs after the pool), which
 * the convolution's forward can run itself (ops->conv2d_forward_pool): its index, or 0. */
static int conv_pool_of(const seq_cnn *m, int i)
{
    int q = i + 1;
    if (m->unfused || q >= m->n) return 0;
    if (m->layer[q].kind == SEQ_RELU && m->layer[q].relu_after_pool) q++;
    return q < m->n && m->layer[q].kind == SEQ_MAXPOOL && !m->layer[q].bn_of_pool ? q : 0;
}

/* The maxpool i ran in the convolution before it in the last forward pass (pool_in_conv), and
 * that convolution's backward takes the pool's gradient (ops->conv2d_backward_pool): the
 * pool's din is then never made. */
static int pool_backward_in_conv(const seq_cnn *m, int i)
{
    return m->layer[i].pool_in_conv && m->be->ops->conv2d_backward_pool;
}

/* The relu right after conv layer i, which the convolution's forward can run itself
 * (ops->conv2d_forward_relu): its index, or 0. Not a relu that runs after a pool or in a
 * batchnorm's chain, nor where the convolution feeds a batchnorm its statistics. */
static int conv_relu_of(const seq_cnn *m, int i)
{
    const int q = i + 1;
    if (m->unfused || q >= m->n || m->layer[i].stats_ran) return 0;
    const seq_layer *r = &m->layer[q];
    return r->kind == SEQ_RELU && !r->relu_after_pool && !r->relu_in_bn_pool ? q : 0;
}

/* The convolution's backward runs the relu's too (conv2d_backward_relu): the relu after it
 * ran in its forward, and its din is not wanted (the first layer with parameters). */
static int conv_backward_by_relu(const seq_cnn *m, int i)
{
    return i == m->first_param && i + 1 < m->n && m->layer[i + 1].kind == SEQ_RELU && m->layer[i + 1].relu_in_conv;
}

/* out [N, F, OH, OW] = conv(in [N, C, H, W], w) + b; or, where the maxpool after it runs here
 * (conv_pool_of and the backend can), that pool's out and argmax, and out is not written;
 * or, where the relu after it runs here (conv_relu_of), the relu's out, and out is not written */
static void conv_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    seq_layer *l = &m->layer[i];
    const ct_dparams *P = &m->dev;
    const ct_ops *ops = m->be->ops;
    const float *w = ct_dparams_data(P, l->conv.w), *b = ct_dparams_data(P, l->conv.b);
    l->stats_ran = conv_feeds_stats(m, i, train);
    l->conv_in = in;
    l->dw_by_pool = 0;
    if (i + 1 < m->n && m->layer[i + 1].kind == SEQ_RELU) m->layer[i + 1].relu_in_conv = 0;   /* set below if it runs here */
    const int q = conv_pool_of(m, i);
    if (q) {
        seq_layer *pool = &m->layer[q];
        maxpool2d_dims pd = pool_dims(pool, N);
        pool->pool_in_conv = !l->stats_ran && ops->conv2d_pool_fits && ops->conv2d_pool_fits(m->be, l->conv_plan, &pd);
        if (pool->pool_in_conv) {   /* the pool's time is the convolution's */
            ops->conv2d_forward_pool(m->be, pool->out, pool->argmax, l->ws, in, w, b, l->conv_plan, N, &pd, pool->relu_after_pool);
            return;
        }
    }
    const int r = conv_relu_of(m, i);
    if (r) {
        seq_layer *relu = &m->layer[r];
        relu->relu_in_conv = ops->conv2d_relu_fits && ops->conv2d_relu_fits(m->be, l->conv_plan);
        if (relu->relu_in_conv) {   /* the relu's time is the convolution's */
            ops->conv2d_forward_relu(m->be, relu->in_place ? l->out : relu->out, l->ws, in, w, b, l->conv_plan, N);   /* in place: over ours */
            return;
        }
    }
    if (l->stats_ran) ops->conv2d_forward_stats(m->be, l->out, l->ws, in, w, b, l->conv_plan, N, l->plane_stats);
    else              ops->conv2d_forward(m->be, l->out, l->ws, in, w, b, l->conv_plan, N);
}

static float *conv_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    seq_layer *l = &m->layer[i];
    const ct_dparams *P = &m->dev;
    if (l->dw_by_pool) return NULL;   /* done by the pool after the batchnorm (maxpool_backward) */
    const int q = conv_pool_of(m, i);
    if (q && pool_backward_in_conv(m, q)) {   /* dout is the pool's gradient (maxpool_backward left it there) */
        const seq_layer *pool = &m->layer[q];
        maxpool2d_dims pd = pool_dims(pool, N);
        m->be->ops->conv2d_backward_pool(m->be, din, ct_dparams_grad(P, l->conv.w), ct_dparams_grad(P, l->conv.b), l->ws, dout,
                                         pool->argmax, &pd, in, ct_dparams_data(P, l->conv.w), l->conv_plan, N);
        return din;
    }
    if (conv_backward_by_relu(m, i)) {   /* dout is the relu's (relu_backward left it), din is not wanted */
        m->be->ops->conv2d_backward_relu(m->be, ct_dparams_grad(P, l->conv.w), ct_dparams_grad(P, l->conv.b), l->ws, in,
                                         l->conv_plan, N, dout, m->layer[i + 1].out);
        return NULL;
    }
    m->be->ops->conv2d_backward(m->be, din, ct_dparams_grad(P, l->conv.w), ct_dparams_grad(P, l->conv.b), l->ws, dout, in,
                            ct_dparams_data(P, l->conv.w), l->conv_plan, N);
    return din;
}

static double conv_flops(const seq_layer *l, int N)
{
    return 2.0 * N * l->out_c * l->out_h * l->out_w * (double)l->in_c * l->kernel * l->kernel;
}

/* ---- dense: fully connected, on a flat input (layers/dense.h) ---- */

static ct_status dense_parse(seq_layer *l, const char *s, int pos)
{
    CT_TRY(ct_seq_spec_uint(&s, &l->units, 1, 1 << 20, pos, l->text, "number of units", "dense128"));
    return ct_seq_spec_end(s, pos, l->text, "denseU, e.g. dense128");
}

static ct_status dense_shape(const seq_cnn *m, seq_layer *l, int pos)
{
    char sh[64];
    if (!l->flat_in)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": dense needs a flat input but gets %s; put flatten (or gap) before it",
                       pos, l->text, ct_seq_shape_text(sh, sizeof sh, l->in_c, l->in_h, l->in_w, 0));
    if ((long)l->in_c * l->units > (1L << 30))
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": %d x %d weights are too many", pos, l->text, l->units, l->in_c);
    l->out_c = l->units;
    return CT_OK;
}

static ct_status dense_params(seq_cnn *m, seq_layer *l)
{
    return ct_dense_params_add(&l->dense, &m->params, l->name, l->in_c, l->units, 1);   /* w [U, in], b [U] */
}

/* out [N, U] = in [N, in] w^T + b */
static void dense_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    seq_layer *l = &m->layer[i];
    const ct_dparams *P = &m->dev;
    m->be->ops->dense_forward(m->be, l->out, in, ct_dparams_data(P, l->dense.w), ct_dparams_data(P, l->dense.b), N, l->in_c, l->units);
}

static float *dense_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    seq_layer *l = &m->layer[i];
    const ct_dparams *P = &m->dev;
    m->be->ops->dense_backward(m->be, din, ct_dparams_grad(P, l->dense.w), ct_dparams_grad(P, l->dense.b), dout, in,
                           ct_dparams_data(P, l->dense.w), N, l->in_c, l->units);
    return din;
}

static double dense_flops(const seq_layer *l, int N)
{
    return 2.0 * N * (double)l->in_c * l->units;
}

/* ---- maxpool (layers/pool.h) ----
 * A relu written right before a maxpool runs after it, on the pooled map (see
 * plan_in_place): relu_after_pool is set on both, and the pool runs the relu. */

static batchnorm_dims bn_dims(const seq_cnn *m, const seq_layer *l, int N, int train);

static ct_status maxpool_parse(seq_layer *l, const char *s, int pos)
{
    CT_TRY(ct_seq_spec_uint(&s, &l->kernel, 1, 1024, pos, l->text, "window size", "maxpool2"));
    l->stride = l->kernel;
    if (*s == 's') { s++; CT_TRY(ct_seq_spec_uint(&s, &l->stride, 1, 1024, pos, l->text, "stride", "maxpool3s2")); }
    return ct_seq_spec_end(s, pos, l->text, "maxpoolK[sS], e.g. maxpool2 or maxpool3s2");
}

static ct_status maxpool_shape(const seq_cnn *m, seq_layer *l, int pos)
{
    CT_TRY(ct_seq_spec_need_maps(l, pos, "it"));
    if (l->kernel > l->in_h || l->kernel > l->in_w)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": pooling window %dx%d is larger than its input %dx%d; "
                       "use a smaller window or fewer pooling layers", pos, l->text, l->kernel, l->kernel, l->in_h, l->in_w);
    l->out_h = (l->in_h - l->kernel) / l->stride + 1;
    l->out_w = (l->in_w - l->kernel) / l->stride + 1;
    return CT_OK;
}

static maxpool2d_dims pool_dims(const seq_layer *l, int N)
{
    maxpool2d_dims pd;
    ct_status st = ct_maxpool2d_dims_make(&pd, N, l->in_c, l->in_h, l->in_w, l->kernel, l->stride);
    CT_ASSERT(st == CT_OK);
    return pd;
}

static ct_status maxpool_plan(seq_cnn *m, seq_layer *l, ct_arena *a, int N, size_t *ws)
{
    ct_arena_ints(a, &l->argmax, (size_t)N * ct_seq_layer_out_size(l));   /* [N, out] */
    return CT_OK;
}

static void maxpool_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    seq_layer *l = &m->layer[i];
    ct_prof *p = &m->prof;
    maxpool2d_dims pd = pool_dims(l, N);
    seq_layer *bn = l->bn_of_pool ? &m->layer[l->bn_of_pool - 1] : NULL;
    if (l->pool_in_conv) return;   /* the convolution before it ran it (and its relu): conv_forward */
    if (bn && bn->bn_pool_ran) {   /* the batchnorm before it, this pool and its relu as one; the time is the batchnorm's */
        const ct_dparams *P = &m->dev, *S = &m->dev_buffers;
        batchnorm_dims bd = bn_dims(m, bn, N, train);
        m->be->ops->batchnorm_maxpool_forward(m->be, l->out, l->argmax, bn->mean, bn->invstd,
                                              ct_dparams_data(S, bn->bn.running_mean), ct_dparams_data(S, bn->bn.running_var),
                                              bn->bn_pool_in, ct_dparams_data(P, bn->bn.gamma), ct_dparams_data(P, bn->bn.beta),
                                              &bd, &pd, l->relu_after_pool, train);
        ct_prof_lap(p, m->be, &p->fwd[l->bn_of_pool - 1]);
        return;
    }
    m->be->ops->maxpool2d_forward(m->be, l->out, l->argmax, in, &pd);
    if (l->relu_after_pool) {   /* the relu written before this pool (layer i - 1), on the pooled map */
        ct_prof_lap(p, m->be, &p->fwd[i]);
        m->be->ops->relu_forward(m->be, l->out, l->out, n_out(m, i, N));
        ct_prof_lap(p, m->be, &p->fwd[i - 1]);
    }
}

int ct_seq_cnn_conv_dw_by_pool(const seq_cnn *m, int i)
{
    const seq_layer *conv = &m->layer[i];
    return conv->kind == SEQ_CONV && i == m->first_param && i + 1 < m->n && m->layer[i + 1].kind == SEQ_BATCHNORM &&
           m->layer[i + 1].pool_of_bn && m->layer[m->layer[i + 1].pool_of_bn].kind == SEQ_MAXPOOL &&
           m->be->ops->conv2d_bn_pool_fits && m->be->ops->conv2d_bn_pool_fits(m->be, conv->conv_plan);
}

static float *maxpool_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    seq_layer *l = &m->layer[i];
    ct_prof *p = &m->prof;
    maxpool2d_dims pd = pool_dims(l, N);
    const int b = l->bn_of_pool - 1;
    if (b >= 0 && m->layer[b].bn_pool_ran) {   /* down to the batchnorm's input (the relu's too); its time is the batchnorm's */
        const seq_layer *bn = &m->layer[b];
        const ct_dparams *P = &m->dev;
        batchnorm_dims bd = bn_dims(m, bn, N, 1);
        float *dx = b > m->first_param ? din : NULL;   /* as backward_layers gives the batchnorm */
        const int conv_too = b > 0 && ct_seq_cnn_conv_dw_by_pool(m, b - 1);
        m->be->ops->batchnorm_maxpool_backward(m->be, conv_too ? NULL : dx, ct_dparams_grad(P, bn->bn.gamma),
                                               ct_dparams_grad(P, bn->bn.beta), bn->bn_sums, dout,
                                               l->argmax, bn->bn_pool_in, bn->mean, bn->invstd,
                                               ct_dparams_data(P, bn->bn.gamma), &bd, &pd);
        ct_prof_lap(p, m->be, &p->bwd[b]);
        if (!conv_too) return dx;
        /* the convolution's dW and db from the batchnorm's din made plane by plane; the time is the convolution's */
        seq_layer *conv = &m->layer[b - 1];
        const ct_bn_pool_din src = { .dpooled = dout, .argmax = l->argmax, .in = bn->bn_pool_in, .mean = bn->mean,
                                     .invstd = bn->invstd, .gamma = ct_dparams_data(P, bn->bn.gamma),
                                     .sums = bn->bn_sums, .d = &bd, .pd = &pd };
        m->be->ops->conv2d_backward_bn_pool(m->be, ct_dparams_grad(P, conv->conv.w), ct_dparams_grad(P, conv->conv.b),
                                            conv->ws, conv->conv_in, conv->conv_plan, N, &src);
        conv->dw_by_pool = 1;
        ct_prof_lap(p, m->be, &p->bwd[b - 1]);
        return NULL;
    }
    if (pool_backward_in_conv(m, i)) return dout;   /* the convolution before it makes din from it (conv_backward); the
                                                     * relu's gradient is in the argmax it made: -1 where it zeroed */
    if (l->relu_after_pool) {   /* the relu it ran after pooling: its gradient first, on the pooled map */
        m->be->ops->relu_backward(m->be, dout, dout, l->out, n_out(m, i, N));
        ct_prof_lap(p, m->be, &p->bwd[i - 1]);
    }
    m->be->ops->maxpool2d_backward(m->be, din, dout, l->argmax, &pd);
    return din;
}

/* ---- gap: global average pooling [C, H, W] -> [C] ---- */

static ct_status gap_shape(const seq_cnn *m, seq_layer *l, int pos)
{
    CT_TRY(ct_seq_spec_need_maps(l, pos, "it"));
    l->out_h = l->out_w = 1; l->flat_out = 1;
    return CT_OK;
}

static int bn_avg_forward(seq_cnn *m, int i, int N, int train);
static int bn_avg_backward(seq_cnn *m, int i, float *dout, float *din, int N, float **dx);

static void gap_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    seq_layer *l = &m->layer[i];
    if (bn_avg_forward(m, i, N, train)) return;   /* with the batchnorm before it, as one */
    m->be->ops->global_avgpool_forward(m->be, l->out, in, N, l->in_c, l->in_h * l->in_w);
}

static float *gap_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    seq_layer *l = &m->layer[i];
    float *dx;
    if (bn_avg_backward(m, i, dout, din, N, &dx)) return dx;   /* down to the batchnorm's input */
    m->be->ops->global_avgpool_backward(m->be, din, dout, N, l->in_c, l->in_h * l->in_w);
    return din;
}

/* ---- gaph: the mean over H [C, H, W] -> [C*W], read flat ---- */

static ct_status gaph_shape(const seq_cnn *m, seq_layer *l, int pos)
{
    CT_TRY(ct_seq_spec_need_maps(l, pos, "it"));
    l->out_c = l->in_c * l->in_w; l->out_h = l->out_w = 1; l->flat_out = 1;
    return CT_OK;
}

static void gaph_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    seq_layer *l = &m->layer[i];
    if (bn_avg_forward(m, i, N, train)) return;   /* with the batchnorm before it, as one */
    m->be->ops->avgpool_h_forward(m->be, l->out, in, N, l->in_c, l->in_h, l->in_w);
}

static float *gaph_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    seq_layer *l = &m->layer[i];
    float *dx;
    if (bn_avg_backward(m, i, dout, din, N, &dx)) return dx;   /* down to the batchnorm's input */
    m->be->ops->avgpool_h_backward(m->be, din, dout, N, l->in_c, l->in_h, l->in_w);
    return din;
}

/* ---- flatten: [C, H, W] -> [C*H*W], the same memory in the same order ---- */

static ct_status flatten_shape(const seq_cnn *m, seq_layer *l, int pos)
{
    char sh[64];
    CT_TRY(ct_seq_spec_need_maps(l, pos, "a single flatten"));
    if ((long)l->in_c * l->in_h * l->in_w > (1L << 28))
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": %s are too many features", pos, l->text,
                       ct_seq_shape_text(sh, sizeof sh, l->in_c, l->in_h, l->in_w, 0));
    l->out_c = l->in_c * l->in_h * l->in_w; l->out_h = l->out_w = 1; l->flat_out = 1;
    return CT_OK;
}

/* nothing to compute: its output is its input's memory (SEQ_ALIAS) */
static void flatten_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng) { }

static float *flatten_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    return dout;   /* same memory, same order */
}

/* ---- dropout: inverted dropout (layers/dropout.h) ---- */

static ct_status dropout_parse(seq_layer *l, const char *s, int pos)
{
    if (!*s)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": missing the drop probability (write e.g. dropout0.25)", pos, l->text);
    char *end;
    double p = strtod(s, &end);
    if (end == s || *end || !(p >= 0 && p < 1))
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": the drop probability must be a number in [0, 1) (write e.g. dropout0.25)",
                       pos, l->text);
    l->p = (float)p;
    return CT_OK;
}

static ct_status dropout_plan(seq_cnn *m, seq_layer *l, ct_arena *a, int N, size_t *ws)
{
    ct_arena_floats(a, &l->mask, (size_t)N * ct_seq_layer_out_size(l));   /* [N, out] */
    return CT_OK;
}

/* Training dropout of the N rows of layer l. A part of a larger batch draws, on either
 * device, what the whole batch would draw for its rows (be->ops->dropout_forward_part). */
static void dropout_rows(seq_cnn *m, seq_layer *l, const float *in, int N, ct_rng *rng)
{
    size_t per = ct_seq_layer_out_size(l);   /* values per row */
    if (m->part_rows == 0) { m->be->ops->dropout_forward(m->be, l->out, l->mask, in, (size_t)N * per, l->p, 1, rng); return; }
    int S = m->part_segments, n = N / S;
    CT_ASSERT(n * S == N && m->part_first >= 0 && m->part_first + n <= m->part_rows);
    m->be->ops->dropout_forward_part(m->be, l->out, l->mask, in, per, S, n, m->part_first, m->part_rows, l->p, rng);
}

static void dropout_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    seq_layer *l = &m->layer[i];
    if (train && l->p > 0) {
        if (m->given_masks) m->be->ops->dropout_apply(m->be, l->out, l->mask, in, n_out(m, i, N));
        else dropout_rows(m, l, in, N, rng);
    } else if (l->out != in) {
        m->be->ops->copy(m->be, l->out, in, n_out(m, i, N) * sizeof *l->out);
    }
}

static float *dropout_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    seq_layer *l = &m->layer[i];
    if (l->p > 0) m->be->ops->dropout_backward(m->be, dout, dout, l->mask, n_out(m, i, N));
    return dout;
}

/* ---- batchnorm: per channel on maps, per feature on flat input (layers/batchnorm.h) ---- */

static ct_status batchnorm_params(seq_cnn *m, seq_layer *l)
{
    return ct_batchnorm_params_add(&l->bn, &m->params, &m->buffers, l->name, l->in_c);   /* gamma, beta [C]; buffers */
}

/* Training-mode dims: with synchronised batchnorm and a part set, the whole batch's
 * statistics; after a convolution that made its planes' statistics in this pass, those. */
static batchnorm_dims bn_dims(const seq_cnn *m, const seq_layer *l, int N, int train)
{
    batchnorm_dims d = { .N = N, .C = l->in_c, .HW = l->in_h * l->in_w, .eps = 1e-5f, .momentum = 0.1f };
    if (train && m->bn_sync.sum && m->part_rows > 0) d.sync = &m->bn_sync;
    const seq_layer *prev = l > m->layer ? l - 1 : NULL;
    if (train && !d.sync && prev && prev->kind == SEQ_CONV && prev->stats_ran) d.plane_stats = prev->plane_stats;
    return d;
}

static ct_status batchnorm_plan(seq_cnn *m, seq_layer *l, ct_arena *a, int N, size_t *ws)
{
    ct_arena_floats(a, &l->xhat, (size_t)N * ct_seq_layer_out_size(l));   /* [N, out] */
    ct_arena_floats(a, &l->mean, (size_t)l->in_c);                         /* [C] */
    ct_arena_floats(a, &l->invstd, (size_t)l->in_c);                       /* [C] */
    if (l->pool_of_bn && (m->be->ops->batchnorm_maxpool_backward || m->be->ops->batchnorm_avgpool_h_backward)) {
        batchnorm_dims bd = bn_dims(m, l, N, 0);
        ct_arena_plan(a, (void **)&l->bn_sums, ct_batchnorm_chain_sums_doubles(&bd) * sizeof(double));   /* [N + 1, C, 2] */
    }
    return CT_OK;
}

/* The mean over H that gaph or gap layer l takes of each plane: [H, W], or [HW, 1] for gap */
static void avg_plane(const seq_layer *l, int *H, int *W)
{
    *H = l->kind == SEQ_GAP ? l->in_h * l->in_w : l->in_h;
    *W = l->kind == SEQ_GAP ? 1 : l->in_w;
}

/* Whether batchnorm layer i and its pool run as one in this pass. */
static int bn_pool_fused(const seq_cnn *m, int i, int N, int train)
{
    const seq_layer *l = &m->layer[i];
    if (!l->pool_of_bn || !l->bn_sums || m->unfused) return 0;
    const seq_layer *pool = &m->layer[l->pool_of_bn];
    batchnorm_dims bd = bn_dims(m, l, N, train);
    if (pool->kind == SEQ_MAXPOOL) {
        if (!m->be->ops->batchnorm_maxpool_fits) return 0;
        if (l->pool_of_bn == i + 2 && !m->layer[i + 1].relu_after_pool) return 0;   /* the relu between must run after the pool */
        maxpool2d_dims pd = pool_dims(pool, N);
        return m->be->ops->batchnorm_maxpool_fits(m->be, &bd, &pd);
    }
    if (!m->be->ops->batchnorm_avgpool_h_fits) return 0;
    int H, W;
    avg_plane(pool, &H, &W);
    return m->be->ops->batchnorm_avgpool_h_fits(m->be, &bd, H, W);
}

/* gaph or gap layer i: with the batchnorm before it (and the relu between) as one, its
 * forward and backward; 0 where they do not run as one in this pass. The time is the
 * batchnorm's. */
static int bn_avg_forward(seq_cnn *m, int i, int N, int train)
{
    seq_layer *l = &m->layer[i];
    const int b = l->bn_of_pool - 1;
    if (b < 0 || !m->layer[b].bn_pool_ran) return 0;
    const seq_layer *bn = &m->layer[b];
    const ct_dparams *P = &m->dev, *S = &m->dev_buffers;
    batchnorm_dims bd = bn_dims(m, bn, N, train);
    int H, W;
    avg_plane(l, &H, &W);
    m->be->ops->batchnorm_avgpool_h_forward(m->be, l->out, bn->mean, bn->invstd, ct_dparams_data(S, bn->bn.running_mean),
                                            ct_dparams_data(S, bn->bn.running_var), bn->bn_pool_in,
                                            ct_dparams_data(P, bn->bn.gamma), ct_dparams_data(P, bn->bn.beta), &bd, H, W,
                                            m->layer[b + 1].relu_in_bn_pool, train);
    ct_prof_lap(&m->prof, m->be, &m->prof.fwd[b]);
    return 1;
}

static int bn_avg_backward(seq_cnn *m, int i, float *dout, float *din, int N, float **dx)
{
    seq_layer *l = &m->layer[i];
    const int b = l->bn_of_pool - 1;
    if (b < 0 || !m->layer[b].bn_pool_ran) return 0;
    const seq_layer *bn = &m->layer[b];
    const ct_dparams *P = &m->dev;
    batchnorm_dims bd = bn_dims(m, bn, N, 1);
    int H, W;
    avg_plane(l, &H, &W);
    *dx = b > m->first_param ? din : NULL;   /* as backward_layers gives the batchnorm */
    m->be->ops->batchnorm_avgpool_h_backward(m->be, *dx, ct_dparams_grad(P, bn->bn.gamma), ct_dparams_grad(P, bn->bn.beta),
                                             bn->bn_sums, dout, bn->bn_pool_in, bn->mean, bn->invstd, ct_dparams_data(P, bn->bn.gamma),
                                             ct_dparams_data(P, bn->bn.beta), &bd, H, W, m->layer[b + 1].relu_in_bn_pool);
    ct_prof_lap(&m->prof, m->be, &m->prof.bwd[b]);
    return 1;
}

static void batchnorm_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    seq_layer *l = &m->layer[i];
    const ct_dparams *P = &m->dev, *S = &m->dev_buffers;
    l->bn_pool_ran = bn_pool_fused(m, i, N, train);
    l->bn_pool_in = in;
    if (l->bn_pool_ran) return;   /* its pool runs the two (maxpool_forward) */
    batchnorm_dims bd = bn_dims(m, l, N, train);
    m->be->ops->batchnorm_forward(m->be, l->out, l->xhat, l->mean, l->invstd, ct_dparams_data(S, l->bn.running_mean),
                              ct_dparams_data(S, l->bn.running_var), in, ct_dparams_data(P, l->bn.gamma),
                              ct_dparams_data(P, l->bn.beta), &bd, train);
}

static float *batchnorm_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    seq_layer *l = &m->layer[i];
    if (l->bn_pool_ran) return dout;   /* its pool's backward gave the gradient at its input */
    const ct_dparams *P = &m->dev;
    batchnorm_dims bd = bn_dims(m, l, N, 1);
    m->be->ops->batchnorm_backward(m->be, din, ct_dparams_grad(P, l->bn.gamma), ct_dparams_grad(P, l->bn.beta), dout, l->xhat,
                               l->invstd, ct_dparams_data(P, l->bn.gamma), &bd);
    return din;
}

/* ---- relu, tanh, sigmoid (layers/activation.h): backward from the output, in place ---- */

/* A relu that a pool runs: after a maxpool (relu_after_pool), or inside a batchnorm's chain
 * with the average pooling after it when that chain runs as one in this pass. */
static int relu_run_by_pool(const seq_cnn *m, int i)
{
    const seq_layer *l = &m->layer[i];
    return l->relu_after_pool || (l->relu_in_bn_pool && m->layer[i - 1].bn_pool_ran);
}

static void relu_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    seq_layer *l = &m->layer[i];
    if (relu_run_by_pool(m, i) || l->relu_in_conv) return;   /* the pool or the convolution before it ran it */
    m->be->ops->relu_forward(m->be, l->out, in, n_out(m, i, N));
}

static float *relu_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    seq_layer *l = &m->layer[i];
    if (relu_run_by_pool(m, i) || conv_backward_by_relu(m, i - 1)) return dout;   /* done by the pool, or by the convolution */
    m->be->ops->relu_backward(m->be, dout, dout, l->out, n_out(m, i, N));
    return dout;
}

static void tanh_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    m->be->ops->tanh_forward(m->be, m->layer[i].out, in, n_out(m, i, N));
}

static float *tanh_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    m->be->ops->tanh_backward(m->be, dout, dout, m->layer[i].out, n_out(m, i, N));
    return dout;
}

static void sigmoid_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    m->be->ops->sigmoid_forward(m->be, m->layer[i].out, in, n_out(m, i, N));
}

static float *sigmoid_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    m->be->ops->sigmoid_backward(m->be, dout, dout, m->layer[i].out, n_out(m, i, N));
    return dout;
}

/* ---- save: opens a residual block. Its output is its input x, kept unchanged (the
 * layer after it may not write over it) for the add that closes the block. ---- */

/* nothing to compute: its output is its input's memory (SEQ_ALIAS), which the add reads */
static void save_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng) { }

/* x went two ways, through the block and around it to the add:
 *   d x = d (block input) + d (add's second input) = dout + skip_grad  */
static float *save_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    m->be->ops->add_backward(m->be, NULL, dout, m->skip_grad[m->layer[i].depth], n_out(m, i, N));
    return dout;
}

/* ---- add: closes the innermost open block, out = in + x (x: what its save kept) ---- */

static ct_status add_shape(const seq_cnn *m, seq_layer *l, int pos)
{
    const seq_layer *s = &m->layer[l->save];
    char a[64], b[64];
    if (s->in_c != l->in_c || s->in_h != l->in_h || s->in_w != l->in_w || s->flat_in != l->flat_in)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": the block from layer %d \"%s\" turns %s into %s, but an add needs "
                       "the two the same shape; keep the channels and size inside a residual block", pos, l->text,
                       l->save + 1, s->text, ct_seq_shape_text(a, sizeof a, s->in_c, s->in_h, s->in_w, s->flat_in),
                       ct_seq_shape_text(b, sizeof b, l->in_c, l->in_h, l->in_w, l->flat_in));
    return CT_OK;
}

static void add_forward(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng)
{
    seq_layer *l = &m->layer[i];
    m->be->ops->add_forward(m->be, l->out, in, m->layer[l->save].out, n_out(m, i, N));
}

/* d in = dout: the gradient stays where it is. d x = dout too, but x's gradient is only
 * complete at the save, once the gradient through the block has come back: keep dout
 * in the skip buffer of this block's level until then. */
static float *add_backward(seq_cnn *m, int i, float *dout, float *din, const float *in, int N)
{
    m->be->ops->copy(m->be, m->skip_grad[m->layer[i].depth], dout, n_out(m, i, N) * sizeof *dout);
    return dout;
}

/* ---- the table: one row per kind ---- */

#define NO_EXPORT { NULL, NULL, { { NULL, NULL, NULL, SEQ_EXPORT_COPY, 0 } }, SEQ_VIEW_KEEP, 0 }

const seq_kind_row ct_seq_kinds[SEQ_KINDS] = {
    [SEQ_CONV] = { "conv", "convFkK[sS][pP]", "conv2d", 0, conv_parse, conv_shape, conv_params, conv_plan, conv_unplan,
                   conv_forward, conv_backward, conv_flops,
                   { "Conv2D", "conv2d", { { "kernel:0", "weight", "w", SEQ_EXPORT_CONV, 0 },
                                           { "bias:0", "bias", "b", SEQ_EXPORT_COPY, 0 } }, SEQ_VIEW_KEEP, 0 } },
    [SEQ_DENSE] = { "dense", "denseU", "dense", 0, dense_parse, dense_shape, dense_params, NULL, NULL,
                    dense_forward, dense_backward, dense_flops,
                    { "Dense", "dense", { { "kernel:0", "weight", "w", SEQ_EXPORT_DENSE, 0 },
                                          { "bias:0", "bias", "b", SEQ_EXPORT_COPY, 0 } }, SEQ_VIEW_END, 0 } },
    [SEQ_MAXPOOL] = { "maxpool", "maxpoolK[sS]", NULL, 0, maxpool_parse, maxpool_shape, NULL, maxpool_plan, NULL,
                      maxpool_forward, maxpool_backward, NULL, NO_EXPORT },
    [SEQ_GAP] = { "gap", "gap", NULL, 0, NULL, gap_shape, NULL, NULL, NULL, gap_forward, gap_backward, NULL,
                  { NULL, NULL, { { NULL, NULL, NULL, SEQ_EXPORT_COPY, 0 } }, SEQ_VIEW_END, 0 } },
    [SEQ_FLATTEN] = { "flatten", "flatten", NULL, SEQ_ALIAS, NULL, flatten_shape, NULL, NULL, NULL,
                      flatten_forward, flatten_backward, NULL,
                      { NULL, NULL, { { NULL, NULL, NULL, SEQ_EXPORT_COPY, 0 } }, SEQ_VIEW_FLATTEN, 0 } },
    [SEQ_DROPOUT] = { "dropout", "dropoutP", NULL, SEQ_ELEMENTWISE | SEQ_KEEP_OUT, dropout_parse, NULL, NULL, dropout_plan,
                      NULL, dropout_forward, dropout_backward, NULL, NO_EXPORT },
    [SEQ_BATCHNORM] = { "batchnorm", "batchnorm", "batchnorm", 0, NULL, NULL, batchnorm_params, batchnorm_plan, NULL,
                        batchnorm_forward, batchnorm_backward, NULL,
                        { "BatchNormalization", "batch_normalization",
                          { { "gamma:0", "weight", "gamma", SEQ_EXPORT_FEATURE, 0 },
                            { "beta:0", "bias", "beta", SEQ_EXPORT_FEATURE, 0 },
                            { "moving_mean:0", "running_mean", "running_mean", SEQ_EXPORT_FEATURE, 1 },
                            { "moving_variance:0", "running_var", "running_var", SEQ_EXPORT_FEATURE, 1 },
                            { NULL, "num_batches_tracked", NULL, SEQ_EXPORT_COUNTER, 0 } }, SEQ_VIEW_KEEP, 0 } },
    [SEQ_RELU] = { "relu", "relu", NULL, SEQ_ELEMENTWISE | SEQ_KEEP_OUT, NULL, NULL, NULL, NULL, NULL,
                   relu_forward, relu_backward, NULL, NO_EXPORT },
    [SEQ_TANH] = { "tanh", "tanh", NULL, SEQ_ELEMENTWISE | SEQ_KEEP_OUT, NULL, NULL, NULL, NULL, NULL,
                   tanh_forward, tanh_backward, NULL, NO_EXPORT },
    [SEQ_SIGMOID] = { "sigmoid", "sigmoid", NULL, SEQ_ELEMENTWISE | SEQ_KEEP_OUT, NULL, NULL, NULL, NULL, NULL,
                      sigmoid_forward, sigmoid_backward, NULL, NO_EXPORT },
    [SEQ_GAPH] = { "gaph", "gaph", NULL, 0, NULL, gaph_shape, NULL, NULL, NULL, gaph_forward, gaph_backward, NULL,
                   { NULL, NULL, { { NULL, NULL, NULL, SEQ_EXPORT_COPY, 0 } }, SEQ_VIEW_FLATTEN_W, 0 } },
    [SEQ_SAVE] = { "save", "save", NULL, SEQ_ALIAS | SEQ_KEEP_OUT | SEQ_OPENS, NULL, NULL, NULL, NULL, NULL,
                   save_forward, save_backward, NULL,
                   { NULL, NULL, { { NULL, NULL, NULL, SEQ_EXPORT_COPY, 0 } }, SEQ_VIEW_KEEP, 1 } },
    [SEQ_ADD] = { "add", "add", NULL, SEQ_CLOSES, NULL, add_shape, NULL, NULL, NULL, add_forward, add_backward, NULL,
                  NO_EXPORT },
};

/* ---- building ---- */

static void model_reset(seq_cnn *m)
{
    memset(m, 0, sizeof *m);
    ct_params_init(&m->params);
    ct_params_init(&m->buffers);
    ct_arena_init(&m->arena);
}

/* Names the layers with parameters ("conv2d_1", numbered per kind) and registers them. */
static ct_status add_params(seq_cnn *m)
{
    int count[SEQ_KINDS] = { 0 };
    m->first_param = -1;
    for (int i = 0; i < m->n; i++) {
        seq_layer *l = &m->layer[i];
        const seq_kind_row *row = &ct_seq_kinds[l->kind];
        if (!row->param_name) continue;
        l->number = ++count[l->kind];
        snprintf(l->name, sizeof l->name, "%s_%d", row->param_name, l->number);
        CT_TRY(row->params(m, l));
        if (m->first_param < 0) m->first_param = i;
    }
    return CT_OK;
}

/* Which elementwise layers write over their input. */
static void plan_in_place(seq_cnn *m)
{
    /* allowed when the buffer they would overwrite (that of the layer before, through
     * aliases such as flatten) was written by a layer that does not need it kept: not
     * one whose backward reads its output, nor a save */
    for (int i = 0; i < m->n; i++) {
        seq_layer *l = &m->layer[i];
        if (!(ct_seq_kinds[l->kind].flags & SEQ_ELEMENTWISE)) continue;
        int owner = i - 1;
        while (owner >= 0 && (ct_seq_kinds[m->layer[owner].kind].flags & (SEQ_ALIAS | SEQ_KEEP_OUT)) == SEQ_ALIAS) owner--;
        l->in_place = owner >= 0 && !(ct_seq_kinds[m->layer[owner].kind].flags & SEQ_KEEP_OUT);
    }
    /* relu, then maxpool: max commutes with relu (relu(max x) = max(relu x); the window's
     * first maximum gets the gradient either way, and where the maximum is <= 0 every
     * gradient is 0 either way), so the relu runs after the pool, on a map kH kW times
     * smaller, with the same numbers. Only for an in-place relu: its input is then the
     * pool's input as it was. */
    for (int i = 0; i + 1 < m->n; i++)
        if (m->layer[i].kind == SEQ_RELU && m->layer[i].in_place && m->layer[i + 1].kind == SEQ_MAXPOOL)
            m->layer[i].relu_after_pool = m->layer[i + 1].relu_after_pool = 1;
    /* batchnorm on maps, then maxpool (with at most a relu between, which then runs after the
     * pool), or then an average pooling (gaph, gap; with at most an in-place relu between):
     * nothing else reads the batchnorm's output, so a backend with a kernel for the chain
     * (ops->batchnorm_maxpool_*, ops->batchnorm_avgpool_h_*) runs it without writing it */
    for (int i = 0; i + 1 < m->n; i++) {
        seq_layer *l = &m->layer[i], *next = &m->layer[i + 1];
        l->pool_of_bn = 0;
        if (l->kind != SEQ_BATCHNORM || l->flat_in) continue;
        const int avg_after_relu = next->kind == SEQ_RELU && next->in_place && i + 2 < m->n &&
                                   (m->layer[i + 2].kind == SEQ_GAPH || m->layer[i + 2].kind == SEQ_GAP);
        const int p = next->kind == SEQ_MAXPOOL || next->kind == SEQ_GAPH || next->kind == SEQ_GAP ? i + 1
                    : (next->relu_after_pool || avg_after_relu) && i + 2 < m->n ? i + 2 : 0;
        next->relu_in_bn_pool = avg_after_relu;
        if (p) { l->pool_of_bn = p; m->layer[p].bn_of_pool = i + 1; }
    }
}

/* encoder != 0: no classes and no loss (classes is 0); the last layer must be flat */
static ct_status build_impl(seq_cnn *m, const char *spec, int C, int H, int W, int classes, int encoder)
{
    if (C < 1 || H < 1 || W < 1) return ct_fail(CT_EINVAL, "cnn: input %dx%dx%d must have positive sizes", C, H, W);
    if (!encoder && classes < 2) return ct_fail(CT_EINVAL, "cnn: need at least 2 classes (got %d)", classes);
    CT_TRY(ct_seq_spec_parse(m, spec, C, H, W, classes, encoder));
    CT_TRY(add_params(m));
    plan_in_place(m);
    CT_TRY(ct_params_alloc(&m->params));
    CT_TRY(ct_params_alloc(&m->buffers));
    m->be = &ct_cpu_backend;
    CT_TRY(ct_dparams_make(&m->dev, m->be, &m->params, 1));   /* on the CPU: the host stores themselves */
    return ct_dparams_make(&m->dev_buffers, m->be, &m->buffers, 0);
}

static ct_status build_model(seq_cnn *m, const char *spec, int C, int H, int W, int classes, int encoder)
{
    model_reset(m);
    ct_status st = build_impl(m, spec, C, H, W, classes, encoder);
    if (st != CT_OK) {
        /* keep the message: freeing does not touch it */
        ct_dparams_free(&m->dev);
        ct_dparams_free(&m->dev_buffers);
        ct_params_free(&m->params);
        ct_params_free(&m->buffers);
        model_reset(m);
    }
    return st;
}

ct_status ct_seq_cnn_build(seq_cnn *m, const char *spec, int C, int H, int W, int classes)
{
    return build_model(m, spec, C, H, W, classes, 0);
}

ct_status ct_seq_cnn_build_encoder(seq_cnn *m, const char *spec, int C, int H, int W)
{
    return build_model(m, spec, C, H, W, 0, 1);
}

void ct_seq_cnn_init_weights(seq_cnn *m, ct_rng *r)
{
    ct_params_initialize(&m->params, r);
    ct_params_initialize(&m->buffers, r);
}

/* ---- the device and the activation plan ---- */

/* The device's plans, activations and statistics go; the weights stay. */
static void free_step(seq_cnn *m)
{
    for (int i = 0; i < m->n; i++) {
        const seq_kind_row *row = &ct_seq_kinds[m->layer[i].kind];
        if (row->unplan) row->unplan(m, &m->layer[i]);
    }
    ct_arena_free(&m->arena);
    m->max_batch = 0;
}

ct_status ct_seq_cnn_set_device(seq_cnn *m, const ct_backend *be)
{
    free_step(m);
    ct_dparams_free(&m->dev);
    ct_dparams_free(&m->dev_buffers);
    m->be = be;
    CT_TRY(ct_dparams_make(&m->dev, be, &m->params, 1));
    return ct_dparams_make(&m->dev_buffers, be, &m->buffers, 0);
}

ct_status ct_seq_cnn_to_device(seq_cnn *m)
{
    CT_TRY(ct_dparams_to_device(&m->dev));
    return ct_dparams_to_device(&m->dev_buffers);
}

ct_status ct_seq_cnn_to_host(seq_cnn *m)
{
    CT_TRY(ct_dparams_to_host(&m->dev));
    return ct_dparams_to_host(&m->dev_buffers);
}

ct_status ct_seq_cnn_plan(seq_cnn *m, int N)
{
    if (N < 1) return ct_fail(CT_EINVAL, "cnn: batch %d must be at least 1", N);
    for (int i = 0; i < m->n; i++) {
        const seq_layer *l = &m->layer[i];
        size_t in = ct_seq_layer_in_size(l), out = ct_seq_layer_out_size(l);
        if ((double)N * (double)(in > out ? in : out) > 2147483647.0)
            return ct_fail(CT_EINVAL, "cnn: batch %d is too large for layer %d \"%s\" (more than 2^31 values); use a smaller --batch",
                           N, i + 1, l->text);
    }
    free_step(m);
    ct_arena_init(&m->arena);
    ct_arena *a = &m->arena;
    m->max_batch = N;
    size_t ws = 0, gmax = (size_t)m->classes;
    for (int i = 0; i < m->n; i++) {
        seq_layer *l = &m->layer[i];
        const seq_kind_row *row = &ct_seq_kinds[l->kind];
        size_t nout = (size_t)N * ct_seq_layer_out_size(l), nin = (size_t)N * ct_seq_layer_in_size(l);
        if (nout > gmax) gmax = nout;
        if (nin > gmax) gmax = nin;
        l->out = l->ws = l->xhat = l->mean = l->invstd = l->mask = NULL;
        l->argmax = NULL;
        if (!((row->flags & SEQ_ALIAS) || l->in_place)) ct_arena_floats(a, &l->out, nout);   /* [N, out] */
        if (row->plan) {
            size_t k = 0;
            ct_status st = row->plan(m, l, a, N, &k);
            if (st != CT_OK) { st = ct_fail(st, "layer %d \"%s\": %s", i + 1, l->text, ct_last_error()); free_step(m); return st; }
            if (k > ws) ws = k;
        }
    }
    /* in the model, not a local: freeing the arena clears every pointer it filled */
    ct_arena_floats(a, &m->ws, ws ? ws : 1);
    m->conv_ws_floats = ws;
    if (m->classes) ct_arena_floats(a, &m->prob, (size_t)N * m->classes);
    else m->prob = NULL;
    ct_arena_floats(a, &m->stats, 2);
    ct_arena_floats(a, &m->grad[0], gmax);
    ct_arena_floats(a, &m->grad[1], gmax);
    for (int d = 0; d < SEQ_CNN_MAX_DEPTH; d++) {   /* a third live gradient buffer per level of residual blocks */
        m->skip_grad[d] = NULL;
        if (d < m->depth) ct_arena_floats(a, &m->skip_grad[d], gmax);
    }
    ct_status st = ct_arena_alloc_on(a, ct_backend_mem(m->be), "cnn activations");
    if (st != CT_OK) { free_step(m); return st; }
    for (int i = 0; i < m->n; i++) m->layer[i].ws = m->ws;
    return CT_OK;
}

void ct_seq_cnn_free(seq_cnn *m)
{
    if (m->be) free_step(m);
    ct_dparams_free(&m->dev);
    ct_dparams_free(&m->dev_buffers);
    ct_params_free(&m->params);
    ct_params_free(&m->buffers);
}

void ct_seq_cnn_set_part(seq_cnn *m, int first, int rows, int segments)
{
    m->part_first = first;
    m->part_rows = rows;
    m->part_segments = segments;
}

void ct_seq_cnn_sync_batchnorm(seq_cnn *m, int (*sum)(void *ctx, double *buf, int n), void *ctx)
{
    m->bn_sync.sum = sum;
    m->bn_sync.ctx = ctx;
}

/* ---- forward and backward: one loop over the layers ---- */

const float *ct_seq_cnn_forward_stack(seq_cnn *m, const float *x, int N, int train, ct_rng *dropout_rng)
{
    CT_ASSERT(N >= 1 && N <= m->max_batch);
    const float *in = x;
    ct_prof *p = &m->prof;
    if (m->part_rows > 0) {   /* a part: the whole batch's rows, and this part's weight in its loss */
        m->bn_sync.total_N = m->part_rows * m->part_segments;
        m->bn_sync.share = (double)N / m->bn_sync.total_N;
    }
    ct_prof_start(p, m->be);
    for (int i = 0; i < m->n; i++) {
        seq_layer *l = &m->layer[i];
        const seq_kind_row *row = &ct_seq_kinds[l->kind];
        if ((row->flags & SEQ_ALIAS) || l->in_place) l->out = (float *)in;   /* same memory as the input */
        row->forward(m, i, in, N, train, dropout_rng);
        in = l->out;
        ct_prof_lap(p, m->be, &p->fwd[i]);
    }
    m->logits = in;
    return in;
}

float ct_seq_cnn_forward(seq_cnn *m, const float *x, const int *labels, int N, int train, ct_rng *dropout_rng, int *correct)
{
    CT_ASSERT(m->classes >= 2);
    const ct_backend *be = m->be;
    const float *logits = ct_seq_cnn_forward_stack(m, x, N, train, dropout_rng);    /* [N, classes] */
    ct_prof *p = &m->prof;
    be->ops->softmax_ce_stats(be, m->stats, m->prob, logits, labels, N, m->classes);     /* [2] */
    float stats[2];                                                              /* the step's one read */
    if (be->ops->download(be, stats, m->stats, sizeof stats) != CT_OK) ct_device_fatal("%s", ct_last_error());
    ct_prof_lap(p, be, &p->fwd[m->n - 1]);
    if (correct) *correct = (int)(stats[1] + 0.5f);
    return stats[0];
}

/* Backward through the layers, from d loss / d (last layer's output) in
 * m->grad[0] down to the first layer with parameters. */
static void backward_layers(seq_cnn *m, const float *x, int N)
{
    float *cur = m->grad[0];                          /* d loss / d (output of layer i) */
    ct_prof *p = &m->prof;
    for (int i = m->n - 1; i >= m->first_param; i--) {
        const float *in = i == 0 ? x : m->layer[i - 1].out;
        float *dst = cur == m->grad[0] ? m->grad[1] : m->grad[0];
        float *din = i > m->first_param ? dst : NULL;  /* the first parameter layer's input gradient is not needed */
        cur = ct_seq_kinds[m->layer[i].kind].backward(m, i, cur, din, in, N);
        ct_prof_lap(p, m->be, &p->bwd[i]);
    }
}

void ct_seq_cnn_backward_stack(seq_cnn *m, const float *x, const float *dout, int N)
{
    CT_ASSERT(N >= 1 && N <= m->max_batch);
    ct_prof_start(&m->prof, m->be);
    if (dout != m->grad[0]) m->be->ops->copy(m->be, m->grad[0], dout, (size_t)N * m->out_size * sizeof *dout);   /* [N, out_size] */
    backward_layers(m, x, N);
}

void ct_seq_cnn_backward(seq_cnn *m, const float *x, const int *labels, int N)
{
    CT_ASSERT(m->classes >= 2);
    ct_prof_start(&m->prof, m->be);
    m->be->ops->softmax_ce_backward(m->be, m->grad[0], m->prob, labels, N, m->classes);   /* d loss / d logits [N, classes] */
    backward_layers(m, x, N);
}

/* ---- counts ---- */

static double layer_forward_flops(const seq_layer *l, int N)
{
    const seq_kind_row *row = &ct_seq_kinds[l->kind];
    return row->flops ? row->flops(l, N) : 0;
}

double ct_seq_layer_step_flops(const seq_cnn *m, int i, int N)
{
    const seq_layer *l = &m->layer[i];
    double f = layer_forward_flops(l, N);
    return f * (i > m->first_param ? 3.0 : 2.0);      /* forward, dW, and din unless first */
}

double ct_seq_cnn_step_flops(const seq_cnn *m, int N)
{
    double f = 0;
    for (int i = 0; i < m->n; i++) f += ct_seq_layer_step_flops(m, i, N);
    return f;
}

double ct_seq_cnn_forward_flops(const seq_cnn *m, int N)
{
    double f = 0;
    for (int i = 0; i < m->n; i++) f += layer_forward_flops(&m->layer[i], N);
    return f;
}

/* trainable numbers of layer l: its parameters are named "<l->name>/..." */
static size_t layer_params(const seq_cnn *m, const seq_layer *l)
{
    size_t n = 0, len = strlen(l->name);
    for (int k = 0; len && k < m->params.n; k++)
        if (!strncmp(m->params.p[k].name, l->name, len) && m->params.p[k].name[len] == '/') n += m->params.p[k].numel;
    return n;
}

void ct_seq_cnn_summary(const seq_cnn *m, char *buf, size_t cap)
{
    size_t k = 0;
    if (cap == 0) return;
    buf[0] = 0;
    for (int i = 0; i < m->n && k < cap; i++) {
        const seq_layer *l = &m->layer[i];
        char sh[64];
        int r = snprintf(buf + k, cap - k, "  %2d %-14s %-13s -> %-22s %8zu params\n", i + 1, l->text,
                         l->name[0] ? l->name : "", ct_seq_shape_text(sh, sizeof sh, l->out_c, l->out_h, l->out_w, l->flat_out),
                         layer_params(m, l));
        if (r < 0) break;
        k += (size_t)r;
    }
}
