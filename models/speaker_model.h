/* speaker_model.h - what the speaker-verification pipeline needs of a model:
 * a siamese encoder with a distance and a contrastive loss on top, trained on
 * pairs of log-mel crops and evaluated by embedding utterances.
 *
 * The pair pipeline (train/speaker_task.h) and the trial-list evaluation
 * (train/verify.h) work through this small table of function pointers, so the
 * siamese LSTM (models/siamese_lstm.h) and the siamese CNN
 * (models/siamese_cnn.h) share them. An adapter fills the table for a model it
 * does not own; the model must outlive it.
 *
 * Batches follow the siamese convention: x [2B, T, I] holds the a-utterances
 * in rows [0, B) and the b-utterances of the same pairs in rows [B, 2B), with
 * T = frames, I = n_mels; len [2B] are the valid frames of each row (the rest
 * is zero padding); y [B] is 1 for "same speaker". Training batches are on the
 * model's device (`be`), with the lengths also on the host (len_host);
 * embedding takes and returns host arrays.
 */
#ifndef CT_SPEAKER_MODEL_H
#define CT_SPEAKER_MODEL_H
#include <stddef.h>
#include "core/params.h"
#include "core/rng.h"
#include "models/siamese_cnn.h"
#include "models/siamese_lstm.h"

typedef struct {
    const char *name;          /* "siamese-lstm", "siamese-cnn" */
    void *ctx;                 /* the model itself (not owned) */
    int frames, n_mels;        /* T of a training crop, I features per frame */
    int embed_dim;             /* D: embedding size */
    const ct_backend *be;      /* the device the model is on */
    ct_dparams *params;        /* trainable weights and gradients on the device (host copy: params->host) */
    ct_dparams *buffers;       /* non-trainable state saved with them (batchnorm running statistics); NULL if none */
    ct_prof *prof;             /* the model's per-layer timing (models/profile.h) */
    /* How utterances are embedded at evaluation (train/verify.h):
     * 1 = whole utterances of any length in one call, padding masked by len (the LSTM);
     * 0 = fixed windows of `frames` frames, whose embeddings the caller averages (the CNN). */
    int whole_utterances;

    /* On the device: x [2B, T, I], len [2B], y [B]; len_host [2B] the lengths on the host.
     * Returns the mean contrastive loss; *correct (may be NULL) = pairs classified right.
     * train != 0: training mode (dropout draws from dropout_rng, batchnorm uses and
     * updates batch statistics); 0: evaluation. */
    float (*forward)(void *ctx, const float *x, const int *len, const int *len_host, const float *y, int B, int train,
                     ct_rng *dropout_rng, int *correct);
    /* After a training forward with the same arguments: accumulates d(mean loss)/d(params) into params->grad. */
    void (*backward)(void *ctx, const float *x, const int *len, const int *len_host, const float *y, int B);
    /* Plans memory to embed up to max_seqs sequences of up to max_frames frames at once
     * (for whole_utterances = 0, max_frames is `frames`). Training memory is kept. */
    ct_status (*plan_embed)(void *ctx, int max_seqs, int max_frames);
    /* Evaluation-mode forward of one tower, host arrays: x [S, T, I] (zero-padded), len [S] -> emb [S, D]. */
    void (*embed)(void *ctx, float *emb, const float *x, const int *len, int S, int T);
    /* Floats of embedding activations one sequence of T frames needs (to bound a batch's memory). */
    size_t (*embed_floats)(void *ctx, int T);
    /* Data-parallel training: the next training forward's B pairs are pairs [first, first + B)
     * of a batch of `rows` pairs, and dropout draws as in that whole batch. NULL: the model
     * draws no random numbers (the LSTM). */
    void (*set_part)(void *ctx, int first, int rows);
    /* Synchronised batchnorm over the ranks (models/seq_cnn.h: ct_seq_cnn_sync_batchnorm).
     * NULL: the model has no batchnorm to synchronise (the LSTM). */
    void (*sync_batchnorm)(void *ctx, int (*sum)(void *sum_ctx, double *buf, int n), void *sum_ctx);
} speaker_model;

/* Adapters: the table for a built model (its params, sizes, functions). */
speaker_model ct_speaker_model_lstm(siamese_lstm *m);
speaker_model ct_speaker_model_cnn(siamese_cnn *m);

#endif
