/* small_cnn.c - the small CNN classifier: explicit layer calls, forward then
 * backward in reverse order (see small_cnn.h). */
#include <string.h>
#include "models/small_cnn.h"
#include "layers/activation.h"
#include "layers/dropout.h"
#include "layers/loss.h"

small_cnn_config small_cnn_defaults(void)
{
    return (small_cnn_config){ .channels = 1, .height = 12, .width = 12, .filters = 8, .kernel = 3,
                               .classes = 4, .dropout = 0.25f };
}

static ct_status dims(const small_cnn *m, int N, conv2d_dims *cd, maxpool2d_dims *pd)
{
    const small_cnn_config *c = &m->cfg;
    CT_TRY(conv2d_dims_make(cd, N, c->channels, c->height, c->width, c->filters, c->kernel, c->kernel, 1, c->kernel / 2));
    return maxpool2d_dims_make(pd, N, c->filters, cd->OH, cd->OW, 2, 2);
}

ct_status small_cnn_build(small_cnn *m, const small_cnn_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (cfg->kernel % 2 == 0) return ct_fail(CT_EINVAL, "small-cnn: kernel %d must be odd for 'same' padding", cfg->kernel);
    if (cfg->classes < 2) return ct_fail(CT_EINVAL, "small-cnn: need at least 2 classes (got %d)", cfg->classes);
    if (!(cfg->dropout >= 0 && cfg->dropout < 1)) return ct_fail(CT_EINVAL, "small-cnn: dropout must be in [0, 1) (got %g)", cfg->dropout);
    ct_params_init(&m->params);
    ct_params_init(&m->buffers);
    ct_arena_init(&m->arena);
    conv2d_dims cd;
    maxpool2d_dims pd;
    CT_TRY(dims(m, 1, &cd, &pd));
    m->flat = cfg->filters * pd.OH * pd.OW;
    CT_TRY(conv2d_params_add(&m->conv, &m->params, "conv2d_1", &cd, 1));
    CT_TRY(batchnorm_params_add(&m->bn, &m->params, &m->buffers, "batchnorm_1", cfg->filters));
    CT_TRY(dense_params_add(&m->fc, &m->params, "dense_1", m->flat, cfg->classes, 1));
    CT_TRY(ct_params_alloc(&m->params));
    return ct_params_alloc(&m->buffers);
}

void small_cnn_init_weights(small_cnn *m, ct_rng *r)
{
    ct_params_initialize(&m->params, r);
    ct_params_initialize(&m->buffers, r);
}

ct_status small_cnn_plan(small_cnn *m, int N)
{
    conv2d_dims cd;
    maxpool2d_dims pd;
    CT_TRY(dims(m, N, &cd, &pd));
    ct_arena_free(&m->arena);
    ct_arena_init(&m->arena);
    m->max_batch = N;
    size_t conv_n = (size_t)N * m->cfg.filters * cd.OH * cd.OW, pool_n = (size_t)N * m->flat;
    size_t logit_n = (size_t)N * m->cfg.classes, F = (size_t)m->cfg.filters;
    ct_arena *a = &m->arena;
    m->conv_ws_floats = conv2d_workspace_floats(&cd);
    ct_arena_floats(a, &m->act.conv_ws, m->conv_ws_floats);
    ct_arena_floats(a, &m->act.conv, conv_n);
    ct_arena_floats(a, &m->act.bn, conv_n);
    ct_arena_floats(a, &m->act.xhat, conv_n);
    ct_arena_floats(a, &m->act.bn_mean, F);
    ct_arena_floats(a, &m->act.bn_invstd, F);
    ct_arena_floats(a, &m->act.pool, pool_n);
    ct_arena_ints(a, &m->act.argmax, pool_n);
    ct_arena_floats(a, &m->act.drop, pool_n);
    ct_arena_floats(a, &m->act.mask, pool_n);
    ct_arena_floats(a, &m->act.logits, logit_n);
    ct_arena_floats(a, &m->act.prob, logit_n);
    ct_arena_floats(a, &m->act.dlogits, logit_n);
    ct_arena_floats(a, &m->act.ddrop, pool_n);
    ct_arena_floats(a, &m->act.dpool, pool_n);
    ct_arena_floats(a, &m->act.dbn, conv_n);
    ct_arena_floats(a, &m->act.dconv, conv_n);
    return ct_arena_alloc(a);
}

void small_cnn_free(small_cnn *m)
{
    ct_arena_free(&m->arena);
    ct_params_free(&m->params);
    ct_params_free(&m->buffers);
}

/* The layer shapes of one step on N images (validated when the model was planned). */
static void step_dims(const small_cnn *m, int N, conv2d_dims *cd, maxpool2d_dims *pd, batchnorm_dims *bd)
{
    ct_status st = dims(m, N, cd, pd);
    CT_ASSERT(st == CT_OK);
    *bd = (batchnorm_dims){ .N = N, .C = m->cfg.filters, .HW = cd->OH * cd->OW, .eps = 1e-5f, .momentum = 0.1f };
}

float small_cnn_forward(small_cnn *m, const float *x, const int *labels, int N, int train, ct_rng *dropout_rng, int *correct)
{
    CT_ASSERT(N >= 1 && N <= m->max_batch);
    const small_cnn_config *c = &m->cfg;
    conv2d_dims cd;
    maxpool2d_dims pd;
    batchnorm_dims bd;
    step_dims(m, N, &cd, &pd, &bd);
    CT_ASSERT(conv2d_workspace_floats(&cd) <= m->conv_ws_floats);   /* threads not raised since planning */
    const ct_params *P = &m->params;
    size_t conv_n = (size_t)N * c->filters * cd.OH * cd.OW, flat_n = (size_t)N * m->flat;

    conv2d_forward(m->act.conv, m->act.conv_ws, x, ct_params_data(P, m->conv.w), ct_params_data(P, m->conv.b), &cd);
    batchnorm_forward(m->act.bn, m->act.xhat, m->act.bn_mean, m->act.bn_invstd,
                      ct_params_data(&m->buffers, m->bn.running_mean), ct_params_data(&m->buffers, m->bn.running_var),
                      m->act.conv, ct_params_data(P, m->bn.gamma), ct_params_data(P, m->bn.beta), &bd, train);
    relu_forward(m->act.bn, m->act.bn, conv_n);                      /* in place */
    maxpool2d_forward(m->act.pool, m->act.argmax, m->act.bn, &pd);   /* [N, F, PH, PW] = flat [N, flat] */
    const float *feat = m->act.pool;                                /* flatten: same memory */
    if (train && c->dropout > 0) {
        dropout_forward(m->act.drop, m->act.mask, m->act.pool, flat_n, c->dropout, train, dropout_rng);
        feat = m->act.drop;
    }
    dense_forward(m->act.logits, feat, ct_params_data(P, m->fc.w), ct_params_data(P, m->fc.b), N, m->flat, c->classes);
    if (correct) *correct = (int)(softmax_ce_accuracy(m->act.logits, labels, N, c->classes) * (float)N + 0.5f);
    return softmax_ce_forward(m->act.prob, m->act.logits, labels, N, c->classes);
}

void small_cnn_backward(small_cnn *m, const float *x, const int *labels, int N)
{
    const small_cnn_config *c = &m->cfg;
    conv2d_dims cd;
    maxpool2d_dims pd;
    batchnorm_dims bd;
    step_dims(m, N, &cd, &pd, &bd);
    CT_ASSERT(conv2d_workspace_floats(&cd) <= m->conv_ws_floats);   /* threads not raised since planning */
    const ct_params *P = &m->params;
    size_t conv_n = (size_t)N * c->filters * cd.OH * cd.OW, flat_n = (size_t)N * m->flat;

    softmax_ce_backward(m->act.dlogits, m->act.prob, labels, N, c->classes);
    int dropped = c->dropout > 0;                                    /* backward follows a training forward */
    dense_backward(dropped ? m->act.ddrop : m->act.dpool, ct_params_grad(P, m->fc.w), ct_params_grad(P, m->fc.b),
                   m->act.dlogits, dropped ? m->act.drop : m->act.pool, ct_params_data(P, m->fc.w), N, m->flat, c->classes);
    if (dropped) dropout_backward(m->act.dpool, m->act.ddrop, m->act.mask, flat_n);
    maxpool2d_backward(m->act.dbn, m->act.dpool, m->act.argmax, &pd);
    relu_backward(m->act.dbn, m->act.dbn, m->act.bn, conv_n);        /* m->act.bn holds relu's output */
    batchnorm_backward(m->act.dconv, ct_params_grad(P, m->bn.gamma), ct_params_grad(P, m->bn.beta), m->act.dbn,
                       m->act.xhat, m->act.bn_invstd, ct_params_data(P, m->bn.gamma), &bd);
    conv2d_backward(NULL, ct_params_grad(P, m->conv.w), ct_params_grad(P, m->conv.b), m->act.conv_ws, m->act.dconv,
                    x, ct_params_data(P, m->conv.w), &cd);
}
