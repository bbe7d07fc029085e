/* siamese_head.c - distance and contrastive loss over the two towers' embeddings (see siamese_head.h). */
#include "models/siamese_head.h"
#include "layers/pair.h"

void ct_siamese_head_plan(siamese_head *h, ct_arena *a, int max_pairs, int embed, float margin, float threshold)
{
    size_t B = (size_t)max_pairs, D = (size_t)embed;
    h->embed = embed;
    h->margin = margin;
    h->threshold = threshold;
    ct_arena_floats(a, &h->dist, B);
    ct_arena_floats(a, &h->ddist, B);
    ct_arena_floats(a, &h->demb, 2 * B * D);
    ct_arena_floats(a, &h->stats, 2);
}

float ct_siamese_head_forward(siamese_head *h, const ct_backend *be, const float *emb, const float *y, int B, int *correct,
                           ct_prof *p, double *t_dist, double *t_loss)
{
    const int D = h->embed;
    const float *emb_a = emb, *emb_b = emb + (size_t)B * D;                            /* [B, D] each */
    be->ops->euclidean_forward(be, h->dist, emb_a, emb_b, B, D, CT_KERAS_EPSILON);             /* [B] */
    ct_prof_lap(p, be, t_dist);
    be->ops->contrastive_stats(be, h->stats, h->dist, y, B, h->margin, h->threshold);          /* [2] */
    float stats[2];                                                                    /* the step's one read */
    if (be->ops->download(be, stats, h->stats, sizeof stats) != CT_OK) ct_device_fatal("%s", ct_last_error());
    ct_prof_lap(p, be, t_loss);
    if (correct) *correct = (int)(stats[1] + 0.5f);
    return stats[0];
}

void ct_siamese_head_backward(siamese_head *h, const ct_backend *be, const float *emb, const float *y, int B,
                           ct_prof *p, double *t_dist, double *t_loss)
{
    const int D = h->embed;
    const size_t half = (size_t)B * D;
    be->ops->contrastive_backward(be, h->ddist, h->dist, y, B, h->margin);                      /* dL/dd   [B] */
    ct_prof_lap(p, be, t_loss);
    be->ops->euclidean_backward(be, h->demb, h->demb + half, h->ddist, h->dist, emb, emb + half, B, D,
                            CT_KERAS_EPSILON);                                          /* dL/demb [2B, D] */
    ct_prof_lap(p, be, t_dist);
}
