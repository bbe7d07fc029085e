/* siamese_lstm.c - the siamese LSTM speaker model: explicit layer calls, forward
 * then backward written out in reverse (see siamese_lstm.h for the picture). */
#include <string.h>
#include "models/siamese_lstm.h"
#include "layers/loss.h"
#include "layers/pair.h"
#include "models/train.h"   /* ct_now, for profiling */

siamese_lstm_config siamese_lstm_defaults(void)
{
    return (siamese_lstm_config){ .n_mels = 40, .frames = 100, .hidden = 128, .layers = 1, .embed = 64,
                                  .margin = 1.0f, .threshold = 0.5f, .recurrent = LSTM_SIGMOID, .pool = LSTM_RETURN_LAST };
}

ct_status siamese_lstm_build(siamese_lstm *m, const siamese_lstm_config *cfg)
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
    CT_TRY(lstm_params_add(&m->lstm, &m->params, "lstm_1", cfg->n_mels, cfg->hidden, cfg->layers));
    CT_TRY(dense_params_add(&m->dense, &m->params, "dense_1", cfg->hidden, cfg->embed, 1));
    return ct_params_alloc(&m->params);
}

void siamese_lstm_init_weights(siamese_lstm *m, ct_rng *r) { ct_params_initialize(&m->params, r); }

static lstm_dims tower_dims(const siamese_lstm *m, int B)
{
    return (lstm_dims){ .B = 2 * B, .T = m->cfg.frames, .I = m->cfg.n_mels, .H = m->cfg.hidden,
                        .L = m->cfg.layers, .ret = m->cfg.pool, .recur = m->cfg.recurrent };
}

ct_status siamese_lstm_plan(siamese_lstm *m, int max_pairs)
{
    if (max_pairs < 1) return ct_fail(CT_EINVAL, "siamese-lstm: batch must hold at least one pair");
    ct_arena_free(&m->arena);
    ct_arena_init(&m->arena);
    m->max_pairs = max_pairs;
    size_t S = 2 * (size_t)max_pairs, H = m->cfg.hidden, D = m->cfg.embed;
    lstm_dims ld = tower_dims(m, max_pairs);
    ct_arena_floats(&m->arena, &m->act.h, S * H);
    ct_arena_floats(&m->arena, &m->act.emb, S * D);
    ct_arena_floats(&m->arena, &m->act.dist, (size_t)max_pairs);
    ct_arena_floats(&m->arena, &m->act.lstm_cache, lstm_cache_floats(&ld));
    ct_arena_floats(&m->arena, &m->act.lstm_ws, lstm_workspace_floats(&ld));
    ct_arena_floats(&m->arena, &m->act.ddist, (size_t)max_pairs);
    ct_arena_floats(&m->arena, &m->act.demb, S * D);
    ct_arena_floats(&m->arena, &m->act.dh, S * H);
    return ct_arena_alloc(&m->arena);
}

ct_status siamese_lstm_plan_embed(siamese_lstm *m, int max_seqs, int max_frames)
{
    if (max_seqs < 1 || max_frames < 1) return ct_fail(CT_EINVAL, "siamese-lstm: embedding needs >= 1 sequence of >= 1 frame");
    ct_arena_free(&m->embed_arena);
    ct_arena_init(&m->embed_arena);
    m->embed_max_seqs = max_seqs;
    m->embed_max_frames = max_frames;
    lstm_dims ld = { .B = max_seqs, .T = max_frames, .I = m->cfg.n_mels, .H = m->cfg.hidden,
                     .L = m->cfg.layers, .ret = m->cfg.pool, .recur = m->cfg.recurrent };
    ct_arena_floats(&m->embed_arena, &m->emb.h, (size_t)max_seqs * m->cfg.hidden);
    ct_arena_floats(&m->embed_arena, &m->emb.lstm_cache, lstm_cache_floats(&ld));
    return ct_arena_alloc(&m->embed_arena);
}

void siamese_lstm_embed(siamese_lstm *m, float *emb, const float *x, const int *len, int S, int T)
{
    CT_ASSERT(S >= 1 && S <= m->embed_max_seqs && T >= 1 && T <= m->embed_max_frames);
    const siamese_lstm_config *c = &m->cfg;
    lstm_weights lw[LSTM_MAX_LAYERS];
    lstm_params_view(lw, NULL, &m->params, &m->lstm);
    lstm_dims ld = { .B = S, .T = T, .I = c->n_mels, .H = c->hidden, .L = c->layers,
                     .ret = c->pool, .recur = c->recurrent };
    lstm_forward(m->emb.h, m->emb.lstm_cache, x, len, lw, &ld);                          /* [S, H] */
    dense_forward(emb, m->emb.h, ct_params_data(&m->params, m->dense.w), ct_params_data(&m->params, m->dense.b),
                  S, c->hidden, c->embed);                                               /* [S, D] */
}

void siamese_lstm_free(siamese_lstm *m)
{
    ct_arena_free(&m->embed_arena);
    ct_arena_free(&m->arena);
    ct_params_free(&m->params);
}

/* Profiling: adds the seconds since *t to acc[part] and restarts the clock; nothing when not timed. */
static void lap(const siamese_lstm *m, double *acc, siamese_lstm_part part, double *t)
{
    if (!m->timed) return;
    double now = ct_now();
    acc[part] += now - *t;
    *t = now;
}

float siamese_lstm_forward(siamese_lstm *m, const float *x, const int *len, const float *y, int B, int *correct)
{
    CT_ASSERT(B >= 1 && B <= m->max_pairs);
    const siamese_lstm_config *c = &m->cfg;
    lstm_weights lw[LSTM_MAX_LAYERS];
    lstm_params_view(lw, NULL, &m->params, &m->lstm);
    lstm_dims ld = tower_dims(m, B);
    const float *dw = ct_params_data(&m->params, m->dense.w), *db = ct_params_data(&m->params, m->dense.b);
    float *emb_a = m->act.emb, *emb_b = m->act.emb + (size_t)B * c->embed;
    double t = m->timed ? ct_now() : 0, *acc = m->fwd_seconds;

    lstm_forward(m->act.h, m->act.lstm_cache, x, len, lw, &ld);                   /* [2B, H] */
    lap(m, acc, SIAMESE_PART_LSTM, &t);
    dense_forward(m->act.emb, m->act.h, dw, db, 2 * B, c->hidden, c->embed);      /* [2B, D] */
    lap(m, acc, SIAMESE_PART_DENSE, &t);
    euclidean_forward(m->act.dist, emb_a, emb_b, B, c->embed, CT_KERAS_EPSILON);  /* [B] */
    lap(m, acc, SIAMESE_PART_DISTANCE, &t);
    if (correct) *correct = (int)(contrastive_accuracy(m->act.dist, y, B, c->threshold) * (float)B + 0.5f);
    float loss = contrastive_forward(m->act.dist, y, B, c->margin);
    lap(m, acc, SIAMESE_PART_LOSS, &t);
    return loss;
}

void siamese_lstm_backward(siamese_lstm *m, const float *x, const int *len, const float *y, int B)
{
    const siamese_lstm_config *c = &m->cfg;
    lstm_weights lw[LSTM_MAX_LAYERS];
    lstm_grads lg[LSTM_MAX_LAYERS];
    lstm_params_view(lw, lg, &m->params, &m->lstm);
    lstm_dims ld = tower_dims(m, B);
    const float *dw = ct_params_data(&m->params, m->dense.w);
    float *gdw = ct_params_grad(&m->params, m->dense.w), *gdb = ct_params_grad(&m->params, m->dense.b);
    size_t half = (size_t)B * c->embed;
    double t = m->timed ? ct_now() : 0, *acc = m->bwd_seconds;

    contrastive_backward(m->act.ddist, m->act.dist, y, B, c->margin);                       /* dL/dd   [B] */
    lap(m, acc, SIAMESE_PART_LOSS, &t);
    euclidean_backward(m->act.demb, m->act.demb + half, m->act.ddist, m->act.dist,
                       m->act.emb, m->act.emb + half, B, c->embed, CT_KERAS_EPSILON);        /* dL/demb [2B, D] */
    lap(m, acc, SIAMESE_PART_DISTANCE, &t);
    dense_backward(m->act.dh, gdw, gdb, m->act.demb, m->act.h, dw, 2 * B, c->hidden, c->embed); /* dL/dh [2B, H] */
    lap(m, acc, SIAMESE_PART_DENSE, &t);
    lstm_backward(NULL, lg, m->act.lstm_ws, m->act.dh, m->act.lstm_cache, x, len, lw, &ld);  /* into the weights */
    lap(m, acc, SIAMESE_PART_LSTM, &t);
}

double siamese_lstm_part_flops(const siamese_lstm_config *c, siamese_lstm_part part, int B)
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

double siamese_lstm_step_flops(const siamese_lstm_config *c, int B)
{
    double f = 0;
    for (int p = 0; p < SIAMESE_LSTM_PARTS; p++) f += siamese_lstm_part_flops(c, (siamese_lstm_part)p, B);
    return f;
}

const char *siamese_lstm_part_name(siamese_lstm_part part)
{
    static const char *names[SIAMESE_LSTM_PARTS] = { "lstm_1", "dense_1", "euclidean", "contrastive" };
    return (int)part >= 0 && part < SIAMESE_LSTM_PARTS ? names[part] : "?";
}
