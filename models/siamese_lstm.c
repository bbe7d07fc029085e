/* siamese_lstm.c - the siamese LSTM speaker model: explicit layer calls through
 * the device's table (layers/ops.h), forward then backward written out in
 * reverse (see siamese_lstm.h for the picture). */
#include <string.h>
#include "models/siamese_lstm.h"

siamese_lstm_config ct_siamese_lstm_defaults(void)
{
    return (siamese_lstm_config){ .n_mels = 40, .frames = 100, .hidden = 128, .layers = 1, .embed = 64,
                                  .margin = 1.0f, .threshold = 0.5f, .recurrent = LSTM_SIGMOID, .pool = LSTM_RETURN_LAST };
}

ct_status ct_siamese_lstm_build(siamese_lstm *m, const siamese_lstm_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (cfg->n_mels < 1 || cfg->frames < 1 || cfg->hidden < 1 || cfg->embed < 1 || cfg->layers < 1)
        return ct_fail(CT_EINVAL, "siamese-lstm: sizes must be positive (mels %d, frames %d, hidden %d, layers %d, embed %d)",
                       cfg->n_mels, cfg->frames, cfg->hidden, cfg->layers, cfg->embed);
    if (cfg->pool != LSTM_RETURN_LAST && cfg->pool != LSTM_RETURN_MEAN)
        return ct_fail(CT_EINVAL, "siamese-lstm: the embedding pools the last hidden state or the mean over time");
    if (!(cfg->margin > 0)) return ct_fail(CT_EINVAL, "siamese-lstm: --margin must be positive (got %g)", cfg->margin);
    ct_params_init(&m->params);
    ct_arena_init(&m->arena);
    ct_arena_init(&m->embed_arena);
    CT_TRY(ct_lstm_params_add(&m->lstm, &m->params, "lstm_1", cfg->n_mels, cfg->hidden, cfg->layers));
    CT_TRY(ct_dense_params_add(&m->dense, &m->params, "dense_1", cfg->hidden, cfg->embed, 1));
    CT_TRY(ct_params_alloc(&m->params));
    m->be = &ct_cpu_backend;
    return ct_dparams_make(&m->dev, m->be, &m->params, 1);   /* on the CPU: the host buffers themselves */
}

void ct_siamese_lstm_init_weights(siamese_lstm *m, ct_rng *r) { ct_params_initialize(&m->params, r); }

/* The LSTM over S sequences of T frames. */
static lstm_dims lstm_dims_of(const siamese_lstm *m, int S, int T)
{
    return (lstm_dims){ .B = S, .T = T, .I = m->cfg.n_mels, .H = m->cfg.hidden, .L = m->cfg.layers,
                        .ret = m->cfg.pool, .recur = m->cfg.recurrent };
}

static void free_device_state(siamese_lstm *m)
{
    if (m->lstm_plan) m->be->ops->lstm_plan_free(m->be, m->lstm_plan);
    if (m->embed_plan) m->be->ops->lstm_plan_free(m->be, m->embed_plan);
    m->lstm_plan = m->embed_plan = NULL;
    ct_arena_free(&m->arena);
    ct_arena_free(&m->embed_arena);
    m->max_pairs = m->embed_max_seqs = m->embed_max_frames = 0;
}

ct_status ct_siamese_lstm_set_device(siamese_lstm *m, const ct_backend *be)
{
    free_device_state(m);
    ct_dparams_free(&m->dev);
    m->be = be;
    return ct_dparams_make(&m->dev, be, &m->params, 1);
}

ct_status ct_siamese_lstm_to_device(siamese_lstm *m) { return ct_dparams_to_device(&m->dev); }
ct_status ct_siamese_lstm_to_host(siamese_lstm *m) { return ct_dparams_to_host(&m->dev); }

ct_status ct_siamese_lstm_plan(siamese_lstm *m, int max_pairs)
{
    if (max_pairs < 1) return ct_fail(CT_EINVAL, "siamese-lstm: batch must hold at least one pair");
    if (m->lstm_plan) m->be->ops->lstm_plan_free(m->be, m->lstm_plan);
    m->lstm_plan = NULL;
    ct_arena_free(&m->arena);
    ct_arena_init(&m->arena);
    m->max_pairs = max_pairs;
    size_t S = 2 * (size_t)max_pairs, H = m->cfg.hidden, D = m->cfg.embed;
    lstm_dims ld = lstm_dims_of(m, (int)S, m->cfg.frames);
    CT_TRY(m->be->ops->lstm_plan(m->be, &m->lstm_plan, &ld, &m->params, &m->lstm, m->dev.data));
    ct_arena_floats(&m->arena, &m->act.h, S * H);
    ct_arena_floats(&m->arena, &m->act.emb, S * D);
    ct_arena_floats(&m->arena, &m->act.dh, S * H);
    ct_siamese_head_plan(&m->head, &m->arena, max_pairs, m->cfg.embed, m->cfg.margin, m->cfg.threshold);
    return ct_arena_alloc_on(&m->arena, ct_backend_mem(m->be), "siamese-lstm activations");
}

ct_status ct_siamese_lstm_plan_embed(siamese_lstm *m, int max_seqs, int max_frames)
{
    if (max_seqs < 1 || max_frames < 1) return ct_fail(CT_EINVAL, "siamese-lstm: embedding needs >= 1 sequence of >= 1 frame");
    if (m->embed_plan) m->be->ops->lstm_plan_free(m->be, m->embed_plan);
    m->embed_plan = NULL;
    ct_arena_free(&m->embed_arena);
    ct_arena_init(&m->embed_arena);
    m->embed_max_seqs = max_seqs;
    m->embed_max_frames = max_frames;
    lstm_dims ld = lstm_dims_of(m, max_seqs, max_frames);
    CT_TRY(m->be->ops->lstm_plan(m->be, &m->embed_plan, &ld, &m->params, &m->lstm, m->dev.data));
    size_t S = (size_t)max_seqs;
    if (!m->be->host_memory) {   /* the utterances come from the host */
        ct_arena_floats(&m->embed_arena, &m->emb.x, S * (size_t)max_frames * (size_t)m->cfg.n_mels);
        ct_arena_ints(&m->embed_arena, &m->emb.len, S);
    }
    ct_arena_floats(&m->embed_arena, &m->emb.h, S * (size_t)m->cfg.hidden);
    ct_arena_floats(&m->embed_arena, &m->emb.emb, S * (size_t)m->cfg.embed);
    return ct_arena_alloc_on(&m->embed_arena, ct_backend_mem(m->be), "siamese-lstm embedding memory");
}

void ct_siamese_lstm_embed(siamese_lstm *m, float *emb, const float *x_host, const int *len_host, int S, int T)
{
    CT_ASSERT(S >= 1 && S <= m->embed_max_seqs && T >= 1 && T <= m->embed_max_frames);
    const siamese_lstm_config *c = &m->cfg;
    const ct_backend *be = m->be;
    lstm_dims ld = lstm_dims_of(m, S, T);
    ld.forward_only = 1;
    const float *x = ct_ops_stage(be, m->emb.x, x_host, (size_t)S * T * c->n_mels * sizeof *x);   /* [S, T, I] */
    const int *len = ct_ops_stage(be, m->emb.len, len_host, (size_t)S * sizeof *len);              /* [S] */
    be->ops->lstm_forward(be, m->emb.h, m->embed_plan, x, len, len_host, m->dev.data, &ld);                 /* [S, H] */
    be->ops->dense_forward(be, m->emb.emb, m->emb.h, ct_dparams_data(&m->dev, m->dense.w), ct_dparams_data(&m->dev, m->dense.b),
                       S, c->hidden, c->embed);                                                      /* [S, D] */
    if (be->ops->download(be, emb, m->emb.emb, (size_t)S * c->embed * sizeof *emb) != CT_OK) ct_device_fatal("%s", ct_last_error());
}

void ct_siamese_lstm_free(siamese_lstm *m)
{
    if (m->be) free_device_state(m);
    ct_dparams_free(&m->dev);
    ct_params_free(&m->params);
}

float ct_siamese_lstm_forward(siamese_lstm *m, const float *x, const int *len, const int *len_host, const float *y, int B,
                              int train, int *correct)
{
    CT_ASSERT(B >= 1 && B <= m->max_pairs && (len == NULL) == (len_host == NULL));
    const siamese_lstm_config *c = &m->cfg;
    const ct_backend *be = m->be;
    lstm_dims ld = lstm_dims_of(m, 2 * B, c->frames);
    ld.forward_only = !train;
    const float *dw = ct_dparams_data(&m->dev, m->dense.w), *db = ct_dparams_data(&m->dev, m->dense.b);
    ct_prof *p = &m->prof;
    ct_prof_start(p, be);

    be->ops->lstm_forward(be, m->act.h, m->lstm_plan, x, len, len_host, m->dev.data, &ld);           /* [2B, H] */
    ct_prof_lap(p, be, &p->fwd[SIAMESE_PART_LSTM]);
    be->ops->dense_forward(be, m->act.emb, m->act.h, dw, db, 2 * B, c->hidden, c->embed);            /* [2B, D] */
    ct_prof_lap(p, be, &p->fwd[SIAMESE_PART_DENSE]);
    return ct_siamese_head_forward(&m->head, be, m->act.emb, y, B, correct, p,                 /* distance, loss */
                                &p->fwd[SIAMESE_PART_DISTANCE], &p->fwd[SIAMESE_PART_LOSS]);
}

void ct_siamese_lstm_backward(siamese_lstm *m, const float *x, const int *len, const int *len_host, const float *y, int B)
{
    const siamese_lstm_config *c = &m->cfg;
    const ct_backend *be = m->be;
    lstm_dims ld = lstm_dims_of(m, 2 * B, c->frames);
    const float *dw = ct_dparams_data(&m->dev, m->dense.w);
    float *gdw = ct_dparams_grad(&m->dev, m->dense.w), *gdb = ct_dparams_grad(&m->dev, m->dense.b);
    ct_prof *p = &m->prof;
    ct_prof_start(p, be);

    ct_siamese_head_backward(&m->head, be, m->act.emb, y, B, p,                                  /* dL/demb [2B, D] */
                          &p->bwd[SIAMESE_PART_DISTANCE], &p->bwd[SIAMESE_PART_LOSS]);
    be->ops->dense_backward(be, m->act.dh, gdw, gdb, m->head.demb, m->act.h, dw, 2 * B, c->hidden, c->embed);  /* dL/dh [2B, H] */
    ct_prof_lap(p, be, &p->bwd[SIAMESE_PART_DENSE]);
    be->ops->lstm_backward(be, NULL, m->dev.grad, m->lstm_plan, m->act.dh, x, len, len_host, m->dev.data, &ld);   /* into the weights */
    ct_prof_lap(p, be, &p->bwd[SIAMESE_PART_LSTM]);
}

double ct_siamese_lstm_part_flops(const siamese_lstm_config *c, siamese_lstm_part part, int B)
{
    /* forward gemms: per layer 2 * S*T * 4H * (I_l + H), dense 2 * S * H * D (S = 2B sequences);
     * backward does two gemms for every forward one (input and weight gradients): x2,
     * except the first layer's input gradient dx = dz W_ih, which training does not compute */
    double S = 2.0 * B, T = c->frames, H = c->hidden, flops = 0;
    if (part == SIAMESE_PART_LSTM) {
        for (int l = 0; l < c->layers; l++) flops += 3.0 * 2.0 * S * T * 4.0 * H * ((l ? H : c->n_mels) + H);
        flops -= 2.0 * S * T * 4.0 * H * c->n_mels;
    }
    if (part == SIAMESE_PART_DENSE) flops = 3.0 * 2.0 * S * H * c->embed;
    return flops;
}

double ct_siamese_lstm_step_flops(const siamese_lstm_config *c, int B)
{
    double f = 0;
    for (int p = 0; p < SIAMESE_LSTM_PARTS; p++) f += ct_siamese_lstm_part_flops(c, (siamese_lstm_part)p, B);
    return f;
}

const char *ct_siamese_lstm_part_name(siamese_lstm_part part)
{
    static const char *names[SIAMESE_LSTM_PARTS] = { "lstm_1", "dense_1", "euclidean", "contrastive" };
    return (int)part >= 0 && part < SIAMESE_LSTM_PARTS ? names[part] : "?";
}
