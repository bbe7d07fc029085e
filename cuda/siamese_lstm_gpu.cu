/* siamese_lstm_gpu.cu - the siamese LSTM on the GPU: the same explicit layer calls as
 * models/siamese_lstm.c, with their _gpu twins, on device-resident buffers (see
 * siamese_lstm_gpu.h for the data movement). */
#include <string.h>
#include "cuda/check.h"
#include "cuda/dense.h"
#include "cuda/siamese_lstm_gpu.h"
#include "layers/pair.h"

static lstm_dims tower_dims(const siamese_lstm *m, int B)
{
    lstm_dims d;
    memset(&d, 0, sizeof d);
    d.B = 2 * B; d.T = m->cfg.frames; d.I = m->cfg.n_mels; d.H = m->cfg.hidden; d.L = m->cfg.layers;
    d.ret = m->cfg.pool; d.recur = m->cfg.recurrent;   /* last hidden state or mean over time, as on the CPU */
    return d;
}

extern "C" ct_status siamese_lstm_gpu_create(siamese_lstm_gpu *g, siamese_lstm *m, int max_pairs, const ct_optim_config *opt)
{
    memset(g, 0, sizeof *g);
    g->m = m;
    g->max_pairs = max_pairs;
    g->cur = 1;   /* the first upload goes to slot 0 */
    if (max_pairs < 1) return ct_fail(CT_EINVAL, "siamese-lstm on the GPU: batch must hold at least one pair");
    lstm_dims ld = tower_dims(m, max_pairs);
    CT_TRY(lstm_gpu_dims_check(&ld));
    const size_t n = m->params.numel, S = 2 * (size_t)max_pairs, H = m->cfg.hidden, D = m->cfg.embed;
    CT_TRY(ct_gpu_malloc((void **)&g->params, n * sizeof(float), "parameters"));
    CT_TRY(ct_gpu_malloc((void **)&g->grad, n * sizeof(float), "gradients"));
    CT_TRY(siamese_lstm_gpu_upload_params(g));
    if (opt) {
        CT_TRY(ct_optim_init_gpu(&g->opt, opt, n));
        g->training = 1;
    }
    CT_TRY(lstm_plan_gpu(&g->lstm, &ld, &m->params, &m->lstm, g->params));
    CT_TRY(ct_gpu_malloc((void **)&g->act.h, S * H * sizeof(float), "LSTM outputs"));
    CT_TRY(ct_gpu_malloc((void **)&g->act.emb, S * D * sizeof(float), "embeddings"));
    CT_TRY(ct_gpu_malloc((void **)&g->act.dist, (size_t)max_pairs * sizeof(float), "distances"));
    CT_TRY(ct_gpu_malloc((void **)&g->act.ddist, (size_t)max_pairs * sizeof(float), "distance gradients"));
    CT_TRY(ct_gpu_malloc((void **)&g->act.demb, S * D * sizeof(float), "embedding gradients"));
    CT_TRY(ct_gpu_malloc((void **)&g->act.dh, S * H * sizeof(float), "LSTM output gradients"));
    CT_TRY(ct_gpu_malloc((void **)&g->act.stats, 2 * sizeof(float), "loss"));
    CT_TRY(ct_gpu_host_alloc((void **)&g->stats_host, 2 * sizeof(float), "loss"));
    CT_CUDA_TRY(cudaEventCreateWithFlags(&g->stats_ready, cudaEventDisableTiming));
    /* the batch slots: x | y | len, each region 16-float aligned */
    g->x_floats = S * (size_t)m->cfg.frames * (size_t)m->cfg.n_mels;
    g->y_off = (g->x_floats + 15) / 16 * 16;
    g->len_off = g->y_off + ((size_t)max_pairs + 15) / 16 * 16;
    g->slot_bytes = (g->len_off + S) * sizeof(float);
    for (int s = 0; s < 2; s++) {
        CT_TRY(ct_gpu_host_alloc((void **)&g->slot[s].host, g->slot_bytes, "batch staging"));
        CT_TRY(ct_gpu_malloc((void **)&g->slot[s].dev, g->slot_bytes, "batch"));
        CT_CUDA_TRY(cudaEventCreateWithFlags(&g->slot[s].copied, cudaEventDisableTiming));
        CT_CUDA_TRY(cudaEventCreateWithFlags(&g->slot[s].consumed, cudaEventDisableTiming));
    }
    return ct_gpu_sync();
}

extern "C" void siamese_lstm_gpu_free(siamese_lstm_gpu *g)
{
    if (ct_gpu_current()) cudaDeviceSynchronize();
    lstm_plan_free_gpu(&g->lstm);
    if (g->training) ct_optim_free_gpu(&g->opt);
    float *dev[] = { g->params, g->grad, g->act.h, g->act.emb, g->act.dist, g->act.ddist, g->act.demb, g->act.dh,
                     g->act.stats, g->slot[0].dev, g->slot[1].dev };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) ct_gpu_free(dev[i]);
    ct_gpu_host_free(g->stats_host);
    for (int s = 0; s < 2; s++) {
        ct_gpu_host_free(g->slot[s].host);
        if (g->slot[s].copied) cudaEventDestroy(g->slot[s].copied);
        if (g->slot[s].consumed) cudaEventDestroy(g->slot[s].consumed);
    }
    if (g->stats_ready) cudaEventDestroy(g->stats_ready);
    memset(g, 0, sizeof *g);
}

extern "C" ct_status siamese_lstm_gpu_upload_params(siamese_lstm_gpu *g)
{
    return ct_gpu_upload(g->params, g->m->params.data, g->m->params.numel * sizeof(float));
}

extern "C" ct_status siamese_lstm_gpu_download_params(siamese_lstm_gpu *g)
{
    return ct_gpu_download(g->m->params.data, g->params, g->m->params.numel * sizeof(float));
}

extern "C" ct_status siamese_lstm_gpu_download_grad(siamese_lstm_gpu *g)
{
    return ct_gpu_download(g->m->params.grad, g->grad, g->m->params.numel * sizeof(float));
}

extern "C" void siamese_lstm_upload_gpu(siamese_lstm_gpu *g, const float *x, const int *len, const float *y, int B)
{
    CT_ASSERT(B >= 1 && B <= g->max_pairs);
    ct_gpu *ctx = ct_gpu_ctx();
    const int s = 1 - g->cur;
    siamese_lstm_gpu_slot *sl = &g->slot[s];
    const size_t S = 2 * (size_t)B, xn = S * (size_t)g->m->cfg.frames * (size_t)g->m->cfg.n_mels;
    CT_CUDA_CHECK(cudaEventSynchronize(sl->copied));          /* the pinned block is free again */
    memcpy(sl->host, x, xn * sizeof(float));
    memcpy(sl->host + g->y_off, y, (size_t)B * sizeof(float));
    if (len) memcpy(sl->host + g->len_off, len, S * sizeof(int));
    CT_CUDA_CHECK(cudaStreamWaitEvent(ctx->copy_stream, sl->consumed, 0));   /* compute is done with the device block */
    CT_CUDA_CHECK(cudaMemcpyAsync(sl->dev, sl->host, g->slot_bytes, cudaMemcpyHostToDevice, ctx->copy_stream));
    CT_CUDA_CHECK(cudaEventRecord(sl->copied, ctx->copy_stream));
    g->cur = s;
    g->cur_B = B;
    g->cur_has_len = len != NULL;
}

/* the current batch's device and host views */
static void batch_views(siamese_lstm_gpu *g, const float **x, const float **y, const int **len, const int **len_host)
{
    siamese_lstm_gpu_slot *sl = &g->slot[g->cur];
    *x = sl->dev;
    *y = sl->dev + g->y_off;
    *len = g->cur_has_len ? (const int *)(sl->dev + g->len_off) : NULL;
    *len_host = g->cur_has_len ? (const int *)(sl->host + g->len_off) : NULL;
}

extern "C" float siamese_lstm_forward_gpu(siamese_lstm_gpu *g, int B, int *correct)
{
    CT_ASSERT(B == g->cur_B);
    ct_gpu *ctx = ct_gpu_ctx();
    const siamese_lstm_config *c = &g->m->cfg;
    const ct_params *ps = &g->m->params;
    const float *x, *y;
    const int *len, *len_host;
    batch_views(g, &x, &y, &len, &len_host);
    lstm_dims ld = tower_dims(g->m, B);
    const float *dw = g->params + ps->p[g->m->dense.w].offset, *db = g->params + ps->p[g->m->dense.b].offset;
    float *emb_a = g->act.emb, *emb_b = g->act.emb + (size_t)B * c->embed;

    CT_CUDA_CHECK(cudaStreamWaitEvent(ctx->stream, g->slot[g->cur].copied, 0));
    lstm_forward_gpu(g->act.h, &g->lstm, x, len, len_host, g->params, &ld);                 /* [2B, H] */
    dense_forward_gpu(g->act.emb, g->act.h, dw, db, 2 * B, c->hidden, c->embed);            /* [2B, D] */
    euclidean_forward_gpu(g->act.dist, emb_a, emb_b, B, c->embed, CT_KERAS_EPSILON);        /* [B] */
    contrastive_stats_gpu(g->act.stats, g->act.dist, y, B, c->margin, c->threshold);
    CT_CUDA_CHECK(cudaEventRecord(g->slot[g->cur].consumed, ctx->stream));
    CT_CUDA_CHECK(cudaMemcpyAsync(g->stats_host, g->act.stats, 2 * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
    CT_CUDA_CHECK(cudaEventRecord(g->stats_ready, ctx->stream));
    CT_CUDA_CHECK(cudaEventSynchronize(g->stats_ready));
    if (correct) *correct = (int)(g->stats_host[1] + 0.5f);
    return g->stats_host[0];
}

extern "C" void siamese_lstm_backward_gpu(siamese_lstm_gpu *g, int B)
{
    CT_ASSERT(B == g->cur_B);
    ct_gpu *ctx = ct_gpu_ctx();
    const siamese_lstm_config *c = &g->m->cfg;
    const ct_params *ps = &g->m->params;
    const float *x, *y;
    const int *len, *len_host;
    batch_views(g, &x, &y, &len, &len_host);
    lstm_dims ld = tower_dims(g->m, B);
    const float *dw = g->params + ps->p[g->m->dense.w].offset;
    float *gdw = g->grad + ps->p[g->m->dense.w].offset, *gdb = g->grad + ps->p[g->m->dense.b].offset;
    size_t half_n = (size_t)B * c->embed;   /* rows [B, 2B): the b-utterances */

    contrastive_backward_gpu(g->act.ddist, g->act.dist, y, B, c->margin);                           /* dL/dd   [B] */
    euclidean_backward_gpu(g->act.demb, g->act.demb + half_n, g->act.ddist, g->act.dist,
                           g->act.emb, g->act.emb + half_n, B, c->embed, CT_KERAS_EPSILON);           /* dL/demb [2B, D] */
    dense_backward_gpu(g->act.dh, gdw, gdb, g->act.demb, g->act.h, dw, 2 * B, c->hidden, c->embed); /* dL/dh   [2B, H] */
    lstm_backward_gpu(NULL, g->grad, &g->lstm, g->act.dh, x, len, len_host, g->params, &ld);        /* into the weights */
    CT_CUDA_CHECK(cudaEventRecord(g->slot[g->cur].consumed, ctx->stream));
}

extern "C" void siamese_lstm_step_gpu(siamese_lstm_gpu *g, float lr)
{
    CT_ASSERT(g->training);
    ct_optim_step_gpu(&g->opt, g->params, g->grad, lr);
    CT_CUDA_CHECK(cudaMemsetAsync(g->grad, 0, g->m->params.numel * sizeof(float), ct_gpu_stream()));
}
