/* speaker_model.c - the speaker_model tables (speaker_model.h) of the siamese
 * LSTM and the siamese CNN: each function forwards to the model's own. */
#include "models/speaker_model.h"

/* ---- siamese LSTM ---- */

static float lstm_adapter_forward(void *ctx, const float *x, const int *len, const int *len_host, const float *y, int B,
                                  int train, ct_rng *dropout_rng, int *correct)
{
    (void)dropout_rng;   /* no dropout or batchnorm: training and evaluation forward give the same loss */
    return ct_siamese_lstm_forward(ctx, x, len, len_host, y, B, train, correct);
}

static void lstm_adapter_backward(void *ctx, const float *x, const int *len, const int *len_host, const float *y, int B)
{
    ct_siamese_lstm_backward(ctx, x, len, len_host, y, B);
}

static ct_status lstm_adapter_plan_embed(void *ctx, int max_seqs, int max_frames)
{
    return ct_siamese_lstm_plan_embed(ctx, max_seqs, max_frames);
}

static void lstm_adapter_embed(void *ctx, float *emb, const float *x, const int *len, int S, int T)
{
    ct_siamese_lstm_embed(ctx, emb, x, len, S, T);
}

/* the LSTM keeps its forward state for every frame, plus the pooled hidden state [H] */
static size_t lstm_adapter_embed_floats(void *ctx, int T)
{
    const siamese_lstm_config *c = &((siamese_lstm *)ctx)->cfg;
    lstm_dims one = { .B = 1, .T = T, .I = c->n_mels, .H = c->hidden, .L = c->layers,
                      .ret = LSTM_RETURN_LAST, .recur = c->recurrent };
    return ct_lstm_cache_floats(&one) + (size_t)c->hidden;
}

speaker_model ct_speaker_model_lstm(siamese_lstm *m)
{
    return (speaker_model){ .name = "siamese-lstm", .ctx = m, .frames = m->cfg.frames, .n_mels = m->cfg.n_mels,
                            .embed_dim = m->cfg.embed, .be = m->be, .params = &m->dev, .buffers = NULL, .prof = &m->prof,
                            .whole_utterances = 1,
                            .forward = lstm_adapter_forward, .backward = lstm_adapter_backward, .plan_embed = lstm_adapter_plan_embed,
                            .embed = lstm_adapter_embed, .embed_floats = lstm_adapter_embed_floats };
}

/* ---- siamese CNN ---- */

static float cnn_adapter_forward(void *ctx, const float *x, const int *len, const int *len_host, const float *y, int B,
                                 int train, ct_rng *dropout_rng, int *correct)
{
    (void)len; (void)len_host;   /* zero padding is part of the image, as in training */
    return ct_siamese_cnn_forward(ctx, x, y, B, train, dropout_rng, correct);
}

static void cnn_adapter_backward(void *ctx, const float *x, const int *len, const int *len_host, const float *y, int B)
{
    (void)len; (void)len_host;
    ct_siamese_cnn_backward(ctx, x, y, B);
}

static ct_status cnn_adapter_plan_embed(void *ctx, int max_seqs, int max_frames)
{
    siamese_cnn *m = ctx;
    if (max_frames != m->cfg.frames)
        return ct_fail(CT_EINVAL, "siamese-cnn: embeds windows of exactly %d frames, not %d", m->cfg.frames, max_frames);
    return ct_siamese_cnn_plan_embed(m, max_seqs);
}

static void cnn_adapter_embed(void *ctx, float *emb, const float *x, const int *len, int S, int T)
{
    siamese_cnn *m = ctx;
    (void)len;
    CT_ASSERT(T == m->cfg.frames);
    ct_siamese_cnn_embed(m, emb, x, S);
}

/* every layer's output per image, plus the im2col workspace of the largest convolution */
static size_t cnn_adapter_embed_floats(void *ctx, int T)
{
    const seq_cnn *e = &((siamese_cnn *)ctx)->enc;
    size_t n = 0, ws = 0;
    (void)T;   /* always cfg.frames */
    for (int i = 0; i < e->n; i++) {
        const seq_layer *l = &e->layer[i];
        n += 2 * ct_seq_layer_out_size(l);   /* output, and batchnorm's xhat or maxpool's argmax at most as large */
        if (l->kind == SEQ_CONV) {
            size_t k = (size_t)l->in_c * l->kernel * l->kernel * l->out_h * l->out_w;
            if (k > ws) ws = k;
        }
    }
    return n + ws;
}

/* Both towers run as one stack of 2B crops: the part is a run of rows in each half. */
static void cnn_adapter_set_part(void *ctx, int first, int rows)
{
    siamese_cnn *m = ctx;
    ct_seq_cnn_set_part(&m->enc, first, rows, 2);
}

static void cnn_adapter_sync_batchnorm(void *ctx, int (*sum)(void *sum_ctx, double *buf, int n), void *sum_ctx)
{
    siamese_cnn *m = ctx;
    ct_seq_cnn_sync_batchnorm(&m->enc, sum, sum_ctx);
}

speaker_model ct_speaker_model_cnn(siamese_cnn *m)
{
    return (speaker_model){ .name = "siamese-cnn", .ctx = m, .frames = m->cfg.frames, .n_mels = m->cfg.n_mels,
                            .embed_dim = m->cfg.embed, .be = m->enc.be, .params = &m->enc.dev,
                            .buffers = &m->enc.dev_buffers, .prof = &m->enc.prof,
                            .whole_utterances = 0, .forward = cnn_adapter_forward, .backward = cnn_adapter_backward,
                            .plan_embed = cnn_adapter_plan_embed, .embed = cnn_adapter_embed, .embed_floats = cnn_adapter_embed_floats,
                            .set_part = cnn_adapter_set_part, .sync_batchnorm = cnn_adapter_sync_batchnorm };
}
