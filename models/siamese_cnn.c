/* siamese_cnn.c - the siamese CNN speaker model: a seq_cnn encoder as the
 * shared tower, then the siamese LSTM's head (Euclidean distance, contrastive
 * loss); forward, then backward written out in reverse (see siamese_cnn.h). */
#include <stdio.h>
#include <string.h>
#include "models/siamese_cnn.h"

siamese_cnn_config ct_siamese_cnn_defaults(void)
{
    siamese_cnn_config c = { .n_mels = 40, .frames = 100, .embed = 64, .margin = 1.0f, .threshold = 0.5f };
    snprintf(c.spec, sizeof c.spec, "%s", SIAMESE_CNN_DEFAULT_SPEC);
    return c;
}

ct_status ct_siamese_cnn_build(siamese_cnn *m, const siamese_cnn_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    ct_arena_init(&m->arena);
    if (cfg->n_mels < 1 || cfg->frames < 1 || cfg->embed < 0)
        return ct_fail(CT_EINVAL, "siamese-cnn: sizes must be positive (mels %d, frames %d, embed %d)",
                       cfg->n_mels, cfg->frames, cfg->embed);
    if (!(cfg->margin > 0)) return ct_fail(CT_EINVAL, "siamese-cnn: --margin must be positive (got %g)", cfg->margin);
    /* one utterance crop x [T, I] is the image [1, T, I]: time is the height */
    ct_status st = ct_seq_cnn_build_encoder(&m->enc, cfg->spec, 1, cfg->frames, cfg->n_mels);
    if (st != CT_OK) return ct_fail(st, "siamese-cnn --arch: %s", ct_last_error());
    if (cfg->embed > 0 && m->enc.out_size != cfg->embed) {
        st = ct_fail(CT_EINVAL, "siamese-cnn: --embed %d, but the spec's last layer \"%s\" outputs %d values; "
                     "end the spec with dense%d or leave --embed out", cfg->embed, m->enc.layer[m->enc.n - 1].text,
                     m->enc.out_size, cfg->embed);
        ct_seq_cnn_free(&m->enc);
        return st;
    }
    m->cfg.embed = m->enc.out_size;
    return CT_OK;
}

void ct_siamese_cnn_init_weights(siamese_cnn *m, ct_rng *r) { ct_seq_cnn_init_weights(&m->enc, r); }

/* The embedding input buffer is sized by the tower's plan: it goes when the plan changes. */
static void free_embed_x(siamese_cnn *m)
{
    if (m->embed_x) m->enc.be->ops->mem_free(m->enc.be, m->embed_x);
    m->embed_x = NULL;
}

ct_status ct_siamese_cnn_set_device(siamese_cnn *m, const ct_backend *be)
{
    free_embed_x(m);
    ct_arena_free(&m->arena);
    m->max_pairs = 0;
    return ct_seq_cnn_set_device(&m->enc, be);
}

ct_status ct_siamese_cnn_plan(siamese_cnn *m, int max_pairs)
{
    if (max_pairs < 1) return ct_fail(CT_EINVAL, "siamese-cnn: batch must hold at least one pair");
    free_embed_x(m);
    CT_TRY(ct_seq_cnn_plan(&m->enc, 2 * max_pairs));   /* both towers: 2B images */
    ct_arena_free(&m->arena);
    ct_arena_init(&m->arena);
    m->max_pairs = max_pairs;
    ct_siamese_head_plan(&m->head, &m->arena, max_pairs, m->cfg.embed, m->cfg.margin, m->cfg.threshold);
    return ct_arena_alloc_on(&m->arena, ct_backend_mem(m->enc.be), "siamese-cnn activations");
}

void ct_siamese_cnn_free(siamese_cnn *m)
{
    ct_arena_free(&m->arena);
    free_embed_x(m);
    ct_seq_cnn_free(&m->enc);
}

float ct_siamese_cnn_forward(siamese_cnn *m, const float *x, const float *y, int B, int train, ct_rng *dropout_rng, int *correct)
{
    CT_ASSERT(B >= 1 && B <= m->max_pairs);
    const float *emb = ct_seq_cnn_forward_stack(&m->enc, x, 2 * B, train, dropout_rng);          /* [2B, D] */
    return ct_siamese_head_forward(&m->head, m->enc.be, emb, y, B, correct, NULL, NULL, NULL);   /* distance, loss */
}

void ct_siamese_cnn_backward(siamese_cnn *m, const float *x, const float *y, int B)
{
    const float *emb = m->enc.logits;                                                           /* [2B, D] from the forward */
    ct_siamese_head_backward(&m->head, m->enc.be, emb, y, B, NULL, NULL, NULL);                   /* dL/demb [2B, D] */
    ct_seq_cnn_backward_stack(&m->enc, x, m->head.demb, 2 * B);                                    /* into the weights */
}

ct_status ct_siamese_cnn_plan_embed(siamese_cnn *m, int max_seqs)
{
    if (max_seqs < 1) return ct_fail(CT_EINVAL, "siamese-cnn: embedding needs at least 1 window per batch");
    if (max_seqs > m->enc.max_batch) {   /* else the training plan is large enough */
        free_embed_x(m);
        CT_TRY(ct_seq_cnn_plan(&m->enc, max_seqs));
    }
    if (m->enc.be->host_memory || m->embed_x) return CT_OK;
    size_t n = (size_t)m->enc.max_batch * m->cfg.frames * m->cfg.n_mels;
    return m->enc.be->ops->mem_alloc(m->enc.be, (void **)&m->embed_x, n * sizeof(float), "siamese-cnn embedding input");
}

void ct_siamese_cnn_embed(siamese_cnn *m, float *emb, const float *x_host, int S)
{
    CT_ASSERT(S >= 1 && S <= m->enc.max_batch);
    const ct_backend *be = m->enc.be;
    const float *x = ct_ops_stage(be, m->embed_x, x_host, (size_t)S * m->cfg.frames * m->cfg.n_mels * sizeof *x);
    const float *out = ct_seq_cnn_forward_stack(&m->enc, x, S, 0, NULL);   /* [S, D], running statistics */
    if (be->ops->download(be, emb, out, (size_t)S * m->cfg.embed * sizeof *emb) != CT_OK) ct_device_fatal("%s", ct_last_error());
}

double ct_siamese_cnn_step_flops(const siamese_cnn *m, int B)
{
    return ct_seq_cnn_step_flops(&m->enc, 2 * B);
}
