/* siamese_lstm.h - the speaker-verification model of the seed experiment:
 *
 *   utterance a [T, I] --\                                    /-- emb_a [D] --\
 *                         > shared LSTM(H) -> last h -> dense(D)                > d = ||emb_a - emb_b|| -> contrastive loss
 *   utterance b [T, I] --/                                    \-- emb_b [D] --/
 *
 * Both towers share every weight, so they run as ONE batch of 2B sequences:
 * rows [0, B) of the input are the a-utterances, rows [B, 2B) the b-utterances
 * of the same pairs. Label y = 1 means "same speaker"; a pair is predicted
 * "same" when d < 0.5 (the seed's accuracy).
 *
 * Reference sizes (the seed): I = 40 log-mel bands, T = 100 frames, H = 128,
 * D = 64, margin 1, RMSprop lr 1e-3, batch 128 pairs.
 *
 * The model is written once for every device: it calls its layers through the
 * table of the device it was planned on (layers/ops.h). The host store `params`
 * holds the names, shapes and the host copy of the weights (initialisation,
 * weights files, checkpoints); `dev` is their copy on the device (on the CPU the
 * host store itself). The step's buffers - activations, the LSTM's state - are
 * planned once on that device, and forward/backward take the batch where the
 * device has it.
 */
#ifndef CT_SIAMESE_LSTM_H
#define CT_SIAMESE_LSTM_H
#include "core/arena.h"
#include "core/params.h"
#include "layers/dense.h"
#include "layers/lstm.h"
#include "layers/ops.h"
#include "models/profile.h"
#include "models/siamese_head.h"

/* The parts of a training step, for profiling (siamese_lstm.prof). */
typedef enum {
    SIAMESE_PART_LSTM,        /* the shared LSTM over both towers */
    SIAMESE_PART_DENSE,       /* the embedding layer */
    SIAMESE_PART_DISTANCE,    /* Euclidean distance of each pair's embeddings */
    SIAMESE_PART_LOSS,        /* contrastive loss (and, forward, the accuracy) */
    SIAMESE_LSTM_PARTS
} siamese_lstm_part;

typedef struct {
    int n_mels;        /* I: features per frame */
    int frames;        /* T: frames per utterance crop */
    int hidden;        /* H: LSTM units */
    int layers;        /* L: stacked LSTM layers */
    int embed;         /* D: embedding size */
    float margin;      /* contrastive margin */
    float threshold;   /* distance below which a pair is called "same" */
    lstm_recurrent recurrent;
    lstm_return pool;  /* embedding input: the LSTM's last hidden state (the seed's) or its mean over time */
} siamese_lstm_config;

typedef struct {
    siamese_lstm_config cfg;
    ct_params params;              /* host: every weight, one buffer */
    lstm_ids lstm;
    dense_ids dense;
    /* ---- on the device (the CPU after build; ct_siamese_lstm_set_device moves it) ---- */
    const ct_backend *be;          /* the device the model is on and how it computes */
    ct_dparams dev;                /* the weights and their gradients there */
    int max_pairs;                 /* batch size the step was planned for */
    void *lstm_plan;               /* the LSTM's state for 2 max_pairs sequences of T frames */
    ct_arena arena;
    struct {                       /* activations, planned for max_pairs pairs */
        float *h;                  /* [2B, H] the LSTM's output (last hidden state or mean over time) */
        float *emb;                /* [2B, D] embeddings: a rows, then b rows */
        float *dh;                 /* [2B, H] */
    } act;
    siamese_head head;             /* distance and contrastive loss (models/siamese_head.h) */
    /* embedding of whole utterances (evaluation), planned separately: */
    void *embed_plan;              /* the LSTM's state for embed_max_seqs sequences of embed_max_frames */
    ct_arena embed_arena;
    int embed_max_seqs, embed_max_frames;
    struct {
        float *x;                  /* [S, T, I] the utterances on the device (unused on the CPU) */
        int *len;                  /* [S] */
        float *h;                  /* [S, H] */
        float *emb;                /* [S, D] */
    } emb;
    /* Profiling: with prof.on, forward and backward add each part's seconds to
     * prof.fwd[p] / prof.bwd[p] (p a siamese_lstm_part). The numbers computed are
     * the same either way. */
    ct_prof prof;
} siamese_lstm;

siamese_lstm_config ct_siamese_lstm_defaults(void);
/* Registers the parameters and allocates their host buffers (weights still zero).
 * The model is on the CPU. */
ct_status ct_siamese_lstm_build(siamese_lstm *m, const siamese_lstm_config *cfg);
void      ct_siamese_lstm_init_weights(siamese_lstm *m, ct_rng *r);   /* on the host */
/* Moves the model to the device of `be` (before planning): its weights are copied there
 * from the host. Fails with a message when they do not fit. */
ct_status ct_siamese_lstm_set_device(siamese_lstm *m, const ct_backend *be);
/* Plans the step on the model's device for up to max_pairs pairs per batch: the LSTM's
 * state and the activation memory. Fails with a message when the device cannot run the
 * configuration (hard_sigmoid in cuDNN's LSTM) or the memory does not fit. */
ct_status ct_siamese_lstm_plan(siamese_lstm *m, int max_pairs);
/* The host copy of the weights changed (initialised, loaded, restored): copy it to the
 * device. And the reverse, before the host copy is read. Nothing to do on the CPU. */
ct_status ct_siamese_lstm_to_device(siamese_lstm *m);
ct_status ct_siamese_lstm_to_host(siamese_lstm *m);
void      ct_siamese_lstm_free(siamese_lstm *m);

/* On the device: x [2B, T, I] (a-utterances then b-utterances), len [2B] or NULL, y [B];
 * len_host: the same lengths on the host (NULL with len). Returns the mean contrastive
 * loss; *correct = pairs classified right. train 0: evaluation, no backward follows (the
 * LSTM keeps no gates for one: layers/lstm.h, forward_only); the same loss either way. */
float ct_siamese_lstm_forward(siamese_lstm *m, const float *x, const int *len, const int *len_host, const float *y, int B,
                              int train, int *correct);
/* Accumulates the gradient of the mean loss into m->dev.grad. Call after forward with the same arguments. */
void  ct_siamese_lstm_backward(siamese_lstm *m, const float *x, const int *len, const int *len_host, const float *y, int B);
/* Plans memory for embedding up to max_seqs utterances of up to max_frames frames at once. */
ct_status ct_siamese_lstm_plan_embed(siamese_lstm *m, int max_seqs, int max_frames);
/* One tower, forward only, HOST arrays: x [S, T, I] (T <= max_frames, zero-padded), len [S]
 * valid frames of each, emb [S, D] receives the embeddings. This is how whole utterances of
 * different lengths are scored at evaluation: the distance between two embeddings is the
 * model's verdict on a pair (smaller = more likely the same speaker). */
void ct_siamese_lstm_embed(siamese_lstm *m, float *emb, const float *x, const int *len, int S, int T);
/* FLOPs of one training step (forward + backward) on B pairs, gemms only:
 *   LSTM   forward 2 S T 4H (I_l + H) per layer l (S = 2B sequences, I_0 = I, I_l = H above);
 *          backward twice that (input and weight gradients), less the first layer's
 *          input gradient 2 S T 4H I, which training does not compute
 *   dense  forward 2 S H D, backward twice that
 * Gate nonlinearities, the distance, the loss and the optimizer are not counted.
 * ct_siamese_lstm_part_flops gives one part's share (0 for the distance and the loss). */
double ct_siamese_lstm_step_flops(const siamese_lstm_config *cfg, int B);
double ct_siamese_lstm_part_flops(const siamese_lstm_config *cfg, siamese_lstm_part part, int B);
/* "lstm_1", "dense_1", "euclidean", "contrastive": the part's name in tables. */
const char *ct_siamese_lstm_part_name(siamese_lstm_part part);

#endif
