/* siamese_cnn.c - the siamese CNN speaker model: a seq_cnn encoder as the
 * shared tower, then the siamese LSTM's head (Euclidean distance, contrastive
 * loss); forward, then backward written out in reverse (see siamese_cnn.h). */
#include <stdio.h>
#include <string.h>
#include "models/siamese_cnn.h"
#include "layers/loss.h"
#include "layers/pair.h"

siamese_cnn_config siamese_cnn_defaults(void)
{
    siamese_cnn_config c = { .n_mels = 40, .frames = 100, .embed = 64, .margin = 1.0f, .threshold = 0.5f };
    snprintf(c.spec, sizeof c.spec, "%s", SIAMESE_CNN_DEFAULT_SPEC);
    return c;
}

ct_status siamese_cnn_build(siamese_cnn *m, const siamese_cnn_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    ct_arena_init(&m->arena);
    if (cfg->n_mels < 1 || cfg->frames < 1 || cfg->embed < 0)
        return ct_fail(CT_EINVAL, "siamese-cnn: sizes must be positive (mels %d, frames %d, embed %d)",
                       cfg->n_mels, cfg->frames, cfg->embed);
    if (!(cfg->margin > 0)) return ct_fail(CT_EINVAL, "siamese-cnn: --margin must be positive (got %g)", cfg->margin);
    /* one utterance crop x [T, I] is the image [1, T, I]: time is the height */
    ct_status st = seq_cnn_build_encoder(&m->enc, cfg->spec, 1, cfg->frames, cfg->n_mels);
    if (st != CT_OK) return ct_fail(st, "siamese-cnn --arch: %s", ct_last_error());
    if (cfg->embed > 0 && m->enc.out_size != cfg->embed) {
        st = ct_fail(CT_EINVAL, "siamese-cnn: --embed %d, but the spec's last layer \"%s\" outputs %d values; "
                     "end the spec with dense%d or leave --embed out", cfg->embed, m->enc.layer[m->enc.n - 1].text,
                     m->enc.out_size, cfg->embed);
        seq_cnn_free(&m->enc);
        return st;
    }
    m->cfg.embed = m->enc.out_size;
    return CT_OK;
}

void siamese_cnn_init_weights(siamese_cnn *m, ct_rng *r) { seq_cnn_init_weights(&m->enc, r); }

ct_status siamese_cnn_plan(siamese_cnn *m, int max_pairs)
{
    if (max_pairs < 1) return ct_fail(CT_EINVAL, "siamese-cnn: batch must hold at least one pair");
    CT_TRY(seq_cnn_plan(&m->enc, 2 * max_pairs));   /* both towers: 2B images */
    ct_arena_free(&m->arena);
    ct_arena_init(&m->arena);
    m->max_pairs = max_pairs;
    size_t B = (size_t)max_pairs, D = (size_t)m->cfg.embed;
    ct_arena_floats(&m->arena, &m->act.dist, B);
    ct_arena_floats(&m->arena, &m->act.ddist, B);
    ct_arena_floats(&m->arena, &m->act.demb, 2 * B * D);
    return ct_arena_alloc(&m->arena);
}

void siamese_cnn_free(siamese_cnn *m)
{
    ct_arena_free(&m->arena);
    seq_cnn_free(&m->enc);
}

float siamese_cnn_forward(siamese_cnn *m, const float *x, const float *y, int B, int train, ct_rng *dropout_rng, int *correct)
{
    CT_ASSERT(B >= 1 && B <= m->max_pairs);
    const siamese_cnn_config *c = &m->cfg;
    const float *emb = seq_cnn_forward_stack(&m->enc, x, 2 * B, train, dropout_rng);   /* [2B, D] */
    const float *emb_a = emb, *emb_b = emb + (size_t)B * c->embed;                     /* [B, D] each */
    euclidean_forward(m->act.dist, emb_a, emb_b, B, c->embed, CT_KERAS_EPSILON);       /* [B] */
    if (correct) *correct = (int)(contrastive_accuracy(m->act.dist, y, B, c->threshold) * (float)B + 0.5f);
    return contrastive_forward(m->act.dist, y, B, c->margin);
}

void siamese_cnn_backward(siamese_cnn *m, const float *x, const float *y, int B)
{
    const siamese_cnn_config *c = &m->cfg;
    const float *emb = m->enc.logits;                         /* [2B, D] from the forward */
    size_t half = (size_t)B * c->embed;
    contrastive_backward(m->act.ddist, m->act.dist, y, B, c->margin);                        /* dL/dd   [B] */
    euclidean_backward(m->act.demb, m->act.demb + half, m->act.ddist, m->act.dist,
                       emb, emb + half, B, c->embed, CT_KERAS_EPSILON);                       /* dL/demb [2B, D] */
    seq_cnn_backward_stack(&m->enc, x, m->act.demb, 2 * B);                                   /* into the weights */
}

ct_status siamese_cnn_plan_embed(siamese_cnn *m, int max_seqs)
{
    if (max_seqs < 1) return ct_fail(CT_EINVAL, "siamese-cnn: embedding needs at least 1 window per batch");
    if (max_seqs <= m->enc.max_batch) return CT_OK;   /* the training plan is large enough */
    return seq_cnn_plan(&m->enc, max_seqs);
}

void siamese_cnn_embed(siamese_cnn *m, float *emb, const float *x, int S)
{
    CT_ASSERT(S >= 1 && S <= m->enc.max_batch);
    const float *out = seq_cnn_forward_stack(&m->enc, x, S, 0, NULL);   /* [S, D], running statistics */
    memcpy(emb, out, (size_t)S * m->cfg.embed * sizeof *emb);
}

double siamese_cnn_step_flops(const siamese_cnn *m, int B)
{
    return seq_cnn_step_flops(&m->enc, 2 * B);
}
