/* siamese_head.h - the head both siamese speaker models share (models/siamese_lstm.h,
 * models/siamese_cnn.h): from the embeddings of both towers to the loss.
 *
 *   emb [2B, D]: rows [0, B) the a-utterances, rows [B, 2B) the b-utterances of the same pairs
 *   d_k = ||emb_a,k - emb_b,k||          Euclidean distance (layers/pair.h, Keras's epsilon)
 *   L   = contrastive(d, y; margin)       mean over the B pairs (layers/loss.h)
 *   a pair is called "same speaker" when d_k < threshold
 *
 * Backward turns d L / d d into d L / d emb [2B, D], which the model sends into its tower.
 * Every buffer is on the model's device (its table of operations, layers/ops.h); the loss
 * and the number of right pairs are the step's one read back to the host.
 */
#ifndef CT_SIAMESE_HEAD_H
#define CT_SIAMESE_HEAD_H
#include "core/arena.h"
#include "layers/ops.h"
#include "models/profile.h"

typedef struct {
    int embed;                  /* D */
    float margin, threshold;
    float *dist;                /* [B] distances */
    float *ddist;               /* [B] d L / d dist */
    float *demb;                /* [2B, D] d L / d emb */
    float *stats;               /* [2] mean loss, right pairs */
} siamese_head;

/* Plans the head's buffers for up to max_pairs pairs in the model's arena (allocated by the caller). */
void  ct_siamese_head_plan(siamese_head *h, ct_arena *a, int max_pairs, int embed, float margin, float threshold);
/* emb [2B, D], y [B] on the device. Returns the mean contrastive loss; *correct (may be NULL)
 * = pairs classified right. With profiling on, the distance's and the loss's seconds go to
 * *t_dist and *t_loss. */
float ct_siamese_head_forward(siamese_head *h, const ct_backend *be, const float *emb, const float *y, int B, int *correct,
                           ct_prof *p, double *t_dist, double *t_loss);
/* After forward on the same emb and y: h->demb [2B, D] = d L / d emb. */
void  ct_siamese_head_backward(siamese_head *h, const ct_backend *be, const float *emb, const float *y, int B,
                            ct_prof *p, double *t_dist, double *t_loss);

#endif
