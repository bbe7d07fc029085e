/* siamese_cnn.h - a CNN speaker encoder in the siamese set-up of the siamese
 * LSTM (the VoxCeleb paper's baseline is a CNN on spectrograms):
 *
 *   crop a [T, I] = image [1, T, I] --\                                   /-- emb_a [D] --\
 *                                      > shared CNN: conv, batchnorm, relu,                 > d = ||emb_a - emb_b|| -> contrastive loss
 *   crop b [T, I] = image [1, T, I] --/  maxpool, ..., mean over time, dense \-- emb_b [D] --/
 *
 * The log-mel crop of one utterance, x[T, I] (frames x mel bands, row-major),
 * is exactly an image with one channel, height T (time) and width I
 * (frequency); no copy or transpose is needed. The tower is a sequential CNN
 * built from a spec (models/seq_cnn.h) as an encoder; the default
 *
 *   conv16k3p1,batchnorm,relu,maxpool2,conv32k3p1,batchnorm,relu,maxpool2,
 *   conv64k3p1,batchnorm,relu,gaph,dense64
 *
 * is a small VGG-style stack: 3x3 convolutions that keep the size, batchnorm,
 * relu and 2x2 max pooling (1x100x40 -> 16x50x20 -> 32x25x10 -> 64x25x10),
 * then `gaph`, the mean over time (H) that keeps the frequency axis (64 maps x 10
 * bands = 640 values), and a dense layer to the D = 64 embedding. The spec's
 * last layer must be flat; its size is the embedding size.
 *
 * The head is the siamese LSTM's, with the same layer functions: Euclidean
 * distance (layers/pair.h, epsilon CT_KERAS_EPSILON) and the contrastive loss
 * (layers/loss.h) with margin m; a pair is predicted "same" when d < threshold.
 *
 * Both towers run as ONE batch of 2B images: rows [0, B) are the a-crops,
 * rows [B, 2B) the b-crops of the same pairs. So in training the batchnorm
 * statistics are the mean and variance over all 2B utterances of the batch
 * (both sides of every pair), per channel over time and frequency, and the
 * running statistics are updated once per batch from them. In evaluation
 * (train = 0: validation passes and embedding) batchnorm uses the running
 * statistics, so an utterance's embedding does not depend on its batch.
 *
 * Utterances shorter than T frames are zero-padded by the data pipeline and the
 * zeros are part of the image (there is no masking, unlike the LSTM).
 * Embedding whole utterances (evaluation, train/verify.h): windows of T frames
 * with hop T/2, the last window aligned to the utterance's end, each embedded
 * alone in evaluation mode; the utterance's embedding is the mean of its
 * windows' embeddings. An utterance shorter than T is one zero-padded window,
 * as in training.
 */
#ifndef CT_SIAMESE_CNN_H
#define CT_SIAMESE_CNN_H
#include "core/arena.h"
#include "core/params.h"
#include "core/rng.h"
#include "models/seq_cnn.h"
#include "models/siamese_head.h"

#define SIAMESE_CNN_DEFAULT_BODY "conv16k3p1,batchnorm,relu,maxpool2,conv32k3p1,batchnorm,relu,maxpool2,conv64k3p1,batchnorm,relu,gaph"
#define SIAMESE_CNN_DEFAULT_SPEC SIAMESE_CNN_DEFAULT_BODY ",dense64"

typedef struct {
    int n_mels;          /* I: features per frame = image width */
    int frames;          /* T: frames per crop = image height */
    int embed;           /* D: embedding size; must equal the spec's output size (0: take it from the spec) */
    float margin;        /* contrastive margin */
    float threshold;     /* distance below which a pair is called "same" */
    char spec[1024];     /* the tower (models/seq_cnn.h grammar) */
} siamese_cnn_config;

typedef struct siamese_cnn {
    siamese_cnn_config cfg;        /* cfg.embed is the spec's output size after build */
    seq_cnn enc;                   /* the shared tower: enc.params (weights), enc.buffers (batchnorm running statistics) */
    int max_pairs;                 /* batch size the activations were planned for */
    ct_arena arena;
    siamese_head head;             /* distance and contrastive loss, on the device, planned for max_pairs pairs */
    float *embed_x;                /* [enc.max_batch, T, I] embedding input on the device (unused on the CPU) */
} siamese_cnn;

/* Defaults: 40 mels x 100 frames, the default spec (D = 64), margin 1, threshold 0.5. */
siamese_cnn_config ct_siamese_cnn_defaults(void);
/* Parses the spec for images [1, frames, n_mels], registers and allocates the
 * parameters (zero: call ct_siamese_cnn_init_weights). Errors name the spec layer
 * at fault, or the --embed that disagrees with the spec's output. The model is
 * on the CPU (the tower's device: seq_cnn.h). */
ct_status ct_siamese_cnn_build(siamese_cnn *m, const siamese_cnn_config *cfg);
void      ct_siamese_cnn_init_weights(siamese_cnn *m, ct_rng *r);
/* Moves the model to the device of `be` (before planning). */
ct_status ct_siamese_cnn_set_device(siamese_cnn *m, const ct_backend *be);
/* Plans the activation memory on the model's device for up to max_pairs pairs (2 max_pairs images). */
ct_status ct_siamese_cnn_plan(siamese_cnn *m, int max_pairs);
void      ct_siamese_cnn_free(siamese_cnn *m);

/* On the device: x [2B, T, I] (a-crops then b-crops), y [B]. train as in ct_seq_cnn_forward_stack.
 * Returns the mean contrastive loss; *correct (may be NULL) = pairs classified right. */
float ct_siamese_cnn_forward(siamese_cnn *m, const float *x, const float *y, int B, int train, ct_rng *dropout_rng, int *correct);
/* After a training forward with the same arguments: accumulates d(mean loss)/d(params) into m->enc.params.grad. */
void  ct_siamese_cnn_backward(siamese_cnn *m, const float *x, const float *y, int B);

/* Makes room to embed up to max_seqs crops at once (grows the plan if needed; training still fits). */
ct_status ct_siamese_cnn_plan_embed(siamese_cnn *m, int max_seqs);
/* One tower in evaluation mode, HOST arrays: x [S, T, I] crops of exactly T = cfg.frames
 * frames (zero-padded) -> emb [S, D]. */
void ct_siamese_cnn_embed(siamese_cnn *m, float *emb, const float *x, int S);

/* FLOPs of one training step (forward + backward) on B pairs: the tower's gemms
 * on 2B images (ct_seq_cnn_step_flops); the head is not counted. */
double ct_siamese_cnn_step_flops(const siamese_cnn *m, int B);

#endif
