/* speaker_task.h - the training data of a siamese speaker model (any
 * speaker_model: the siamese LSTM or the siamese CNN, models/speaker_model.h),
 * wired into the shared training loop (train/train.h): pairs of utterances
 * from a corpus, a random crop of T frames of each drawn again every epoch,
 * batches prepared on a background thread while the previous batch trains
 * (from a feature store streamed from its file, read by cfg.readers threads at
 * once: ct_pairs_batch_pool, the same crops whatever their number).
 * Training batches run the model in training mode (dropout, batchnorm batch
 * statistics), validation batches in evaluation mode. Each batch (crops,
 * labels, lengths) is one block in host memory and reaches the model's device
 * with one copy (be->ops->ring_put; nothing is copied on the CPU).
 *
 * Validation, by default, uses speakers the model never trains on (open-set
 * verification: the honest measure). With CT_VAL_VIDEOS it instead uses one
 * held-out video (session) of each training speaker.
 *
 * Training pairs: by default each epoch draws its own, from a stream of their
 * own seeded by the run's seed and the epoch alone (never by the state an
 * earlier epoch left), so epoch e's pairs are the same however the run got
 * there (resumed or not), and over the epochs the model sees far more
 * utterances and negatives than one draw holds. The speakers' utterances are
 * grouped once (ct_pair_sampler), so a draw costs O(pairs). With fixed_pairs
 * (--fixed-pairs) the pairs are drawn once from the data stream and reshuffled
 * every epoch (the seed experiment's protocol). Validation pairs are drawn
 * once in both modes, so validation numbers compare across epochs.
 *
 * Determinism: the pairs, their order and every crop come from the data RNG
 * stream, the epochs' pair streams and a crop stream derived from the seed,
 * drawn in batch order, so a run is reproducible bit for bit with the same
 * seed and thread count. With
 * several ranks (cfg.dist, train/dist.h) each rank loads only its pairs of each
 * batch but draws every pair's crops, so together the ranks train on exactly
 * the batches, crops and dropout masks of one process.
 *
 * Exact resume (ct_task.save_state / load_state): /rng/data, /rng/crop,
 * /rng/val_crop, /rng/dropout (the model's dropout stream), /data/order (this epoch's order) and /data/pairs,
 * /data/val_pairs ([n, 2] utterance indices, checked on resume against the pairs
 * drawn from the same data and seed), and /train_speakers (the training speakers' names,
 * when the corpus has names; ct_h5_write_names). With pairs drawn every epoch, /data/pairs
 * are the pairs of epoch /data/pairs_epoch ([1]), drawn again from the seed and
 * that epoch on resume and checked the same way; a checkpoint without
 * /data/pairs_epoch was made with fixed pairs (--fixed-pairs, or a ctrain that
 * had no other kind) and resumes only so. Because the loader prepares the next batch
 * ahead, the crop stream saved is the one from before that batch was prepared.
 */
#ifndef CT_SPEAKER_TASK_H
#define CT_SPEAKER_TASK_H
#include <stdio.h>
#include "io/corpus.h"
#include "io/prefetch.h"
#include "io/trials.h"
#include "models/speaker_model.h"
#include "train/train.h"

typedef enum { CT_VAL_SPEAKERS, CT_VAL_VIDEOS } ct_val_split;

typedef struct {
    long pairs, val_pairs;      /* per epoch; half same-speaker */
    int fixed_pairs;            /* 1: training pairs drawn once and reshuffled every epoch; 0: drawn anew every epoch */
    int batch;                  /* pairs per batch */
    ct_val_split val_split;
    double val_fraction;        /* speakers held out for validation (CT_VAL_SPEAKERS) */
    const int *val_speakers;    /* if not NULL: exactly these speakers are held out for validation */
    int n_val_speakers;         /*   (e.g. the speakers of a trial list, so no trial speaker is trained on) */
    const unsigned char *excluded;   /* [corpus speakers] 1: neither trained nor validated on (a test list's); NULL: none */
    uint64_t seed;
    /* Optional trial list over the corpus (io/trials.h): val_eer is computed on it at
     * every epoch's end (whole utterances, train/verify.h). Its speakers should be the
     * validation speakers (val_speakers above), so no trial speaker is trained on. */
    const ct_trial *trials;
    int n_trials;
    int trial_batch, trial_max_frames;   /* utterances (LSTM) or windows (CNN) per embedding batch; frames kept per utterance */
    struct ct_dist *dist;       /* data-parallel: this rank loads its pairs of each batch (train/dist.h); NULL: all */
    int readers;                /* threads reading each batch's crops from a streamed store (at most the cores); 0, 1: the loader alone */
} speaker_task_config;

typedef struct {
    speaker_task_config cfg;
    speaker_model m;                /* the model's table; the model is not owned */
    const ct_corpus *c;             /* not owned */
    ct_pair *pairs[2];              /* [pairs], [val_pairs] */
    ct_pair_sampler sampler;        /* the training speakers' utterances, grouped once */
    int pairs_epoch;                /* pairs drawn every epoch: the epoch pairs[0] belongs to */
    int *order;                     /* [pairs] this epoch's order */
    ct_pair *batch_pairs[2];        /* [batch] per slot */
    float *block[2];                /* per slot: one host block x | y | len, block_bytes each */
    float *x[2], *y[2];             /* per slot, views of the block: [2B, T, I], [B] */
    int *len[2];                    /* per slot: [2B] */
    size_t y_off, len_off, block_bytes;   /* the block's layout (offsets in floats) */
    int cur;                        /* slot of the batch being trained, -1 none */
    int part_first[2], part_rows[2];  /* per slot: its first pair within the whole batch of part_rows pairs */
    ct_status fill_status[2];       /* per slot: how reading its frames went */
    char fill_error[2][512];        /*   and the loader thread's message when it failed */
    void *ring;                     /* the device's batch slots (be->ops->ring_create) */
    const float *dev_x, *dev_y;     /* the current batch on the device */
    const int *dev_len;
    ct_train_state state;           /* the model's weights and optimizer, for ct_fit */
    ct_rng data, crop, val_crop, dropout;
    ct_rng crop_before[2];          /* per slot: the crop stream before that slot's training batch drew
                                       from it (the state "as of the batch boundary" a checkpoint saves) */
    ct_prefetch pf;
    ct_workers *readers;            /* the loader's helpers reading a batch from a streamed store, or NULL */
    int n_readers;                  /* threads reading each batch (1: the loader thread alone) */
    int n_train_speakers, n_val_speakers;
    const char **train_names;       /* [n_train_speakers] the training speakers' names (the corpus's
                                       strings), recorded in checkpoints and weights; NULL: no names */
} speaker_task;

/* Splits the corpus, draws the pairs (warnings about unusable speakers go to
 * `warn`), allocates the batch buffers and starts the loader thread. The data
 * stream starts from rngs->data, the model's dropout stream from rngs->dropout. */
ct_status ct_speaker_task_init(speaker_task *s, const speaker_task_config *cfg, const ct_corpus *c, const speaker_model *m,
                            const ct_rngs *rngs, FILE *warn);
ct_task   ct_speaker_task_ops(speaker_task *s);
void      ct_speaker_task_free(speaker_task *s);

#endif
