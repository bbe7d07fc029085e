/* train.h - the training loop shared by every model: epochs of shuffled
 * batches, forward / backward / optimizer step on the flat buffers, validation
 * at each epoch's end, and Keras's verbose=2 log:
 *
 *   Train on 300000 samples, validate on 120000 samples
 *   Epoch 1/20
 *    - 54s - loss: 0.2104 - accuracy: 0.6624 - val_loss: 0.1836 - val_accuracy: 0.7135
 *
 * Training metrics are the running mean over the epoch (weighted by batch
 * size); validation metrics are computed at the epoch's end; the seconds are the
 * wall time of the whole epoch, validation included. On a terminal a live
 * progress bar with samples/s and ETA is drawn (none when output is a file).
 *
 * A model plugs in through ct_task: a few callbacks over its own context, and
 * its training state (ct_train_state): the parameters and gradients on the
 * model's device, the optimizer there, and the host copies that checkpoints,
 * best-weight snapshots and exports read. The loop never touches a buffer
 * itself: it asks the state to zero the gradients, measure their norm, step,
 * and bring everything to the host (or back), so it runs unchanged whichever
 * device holds the model (layers/ops.h).
 *
 * Checkpoints and Keras-style callbacks (all optional, see ct_fit_config):
 *   checkpoint / checkpoint_every   write a checkpoint (io/checkpoint.h) after every epoch
 *                                   and every N batches; resume continues bit for bit
 *   save_best + monitor             ModelCheckpoint(save_best_only=True): min for losses and
 *                                   EER, max for accuracies; strict improvement
 *   early_stopping                  EarlyStopping(patience): stop after `patience` epochs
 *                                   without improvement, then ALWAYS restore the best weights
 *   csv                             CSVLogger: a header, then one row per epoch
 *   on_nan                          stop (naming the last good checkpoint) or skip the batch
 * For a resumed run to see the same data, the task saves its data state (RNG
 * streams, sample order) through save_state / load_state.
 */
#ifndef CT_TRAIN_H
#define CT_TRAIN_H
#include <stdio.h>
#include <hdf5.h>
#include "core/params.h"
#include "core/rng.h"
#include "layers/ops.h"
#include "layers/optim.h"

enum { CT_SPLIT_TRAIN = 0, CT_SPLIT_VAL = 1 };

typedef struct {
    double seconds, train_seconds, val_seconds;   /* wall time: whole epoch, training part, validation part */
    double loss, accuracy, val_loss, val_accuracy;
    double val_eer;                               /* equal error rate on a trial list; < 0 when not computed */
} ct_epoch_log;

/* The device side of training: what ct_fit asks of a model's weights. */
typedef struct {
    const ct_ops *ops;                   /* the model's device */
    ct_dparams *params;                  /* trainable: values and gradients on the device, host copy */
    ct_dparams *buffers;                 /* non-trainable state saved with them (batchnorm statistics); may be NULL */
    ct_optim opt;                        /* the optimizer, its state on the device */
    ct_optim host_opt;                   /* the host copy of that state, for checkpoints (not used on the CPU,
                                            where opt is in host memory) */
    int has_opt;
} ct_train_state;

/* A state for a model's device buffers (params with gradients; buffers may be NULL). */
ct_train_state ct_train_state_of(ct_dparams *params, ct_dparams *buffers);
ct_status ct_train_state_begin(ct_train_state *s, const ct_optim_config *cfg);   /* the optimizer, state zeroed */
void      ct_train_state_end(ct_train_state *s);
void      ct_train_state_zero_grad(ct_train_state *s);
float     ct_train_state_grad_norm(ct_train_state *s);      /* global L2 norm (waits for the device) */
void      ct_train_state_step(ct_train_state *s, float lr);  /* clipping (cfg.clip_norm) and the update */
/* Parameters, buffers and optimizer state: device -> host copies (before a checkpoint,
 * a snapshot or an export), and host -> device (after a resume or a restore). */
ct_status ct_train_state_to_host(ct_train_state *s);
ct_status ct_train_state_to_device(ct_train_state *s);
ct_optim *ct_train_state_host_optim(ct_train_state *s);      /* valid after to_host */

typedef struct {
    void *ctx;
    ct_train_state *state;               /* the model's weights, gradients and optimizer (see above) */
    long n_train, n_val;                 /* samples per split */
    /* Called at the start of each epoch (0-based), e.g. to reshuffle. May be NULL. */
    void  (*begin_epoch)(void *ctx, int epoch);
    /* Prepare samples [first, first + n) of `split` as the next batch. */
    void  (*load)(void *ctx, int split, long first, int n);
    /* Forward pass on the loaded batch; returns the mean loss, *correct = right predictions. */
    float (*forward)(void *ctx, int n, int train, int *correct);
    /* Backward pass: accumulate d(mean loss)/d(params) into the state's gradients. */
    void  (*backward)(void *ctx, int n);
    /* Called after validation with the epoch's numbers; may add metrics such as
     * val_eer (set log->val_eer >= 0 to have it printed). May be NULL. */
    void  (*end_epoch)(void *ctx, int epoch, ct_epoch_log *log);
    /* Exact resume: write / read the task's data state (its RNG streams with
     * ct_ckpt_write_rng under /rng, its sample order and the like under /data) into
     * the open checkpoint file `f`. save_state is called between batches and must
     * describe the state as of that batch boundary (a loader that already prepared
     * the next batch saves the state from before it did). load_state must check
     * everything before changing anything (return an error naming what differs).
     * NULL: the task cannot be checkpointed. */
    ct_status (*save_state)(void *ctx, hid_t f);
    ct_status (*load_state)(void *ctx, hid_t f);
} ct_task;

struct ct_ckpt_meta;   /* io/checkpoint.h */
typedef enum { CT_MONITOR_VAL_LOSS, CT_MONITOR_VAL_ACCURACY, CT_MONITOR_VAL_EER, CT_MONITOR_LOSS, CT_MONITOR_ACCURACY } ct_monitor;
typedef enum { CT_NAN_STOP, CT_NAN_SKIP_BATCH } ct_on_nan;

typedef struct {
    int epochs, batch;
    ct_optim_config optim;
    ct_sched sched;                      /* learning rate per epoch */
    int progress;                        /* 1 = draw the bar, 0 = never, -1 = when stdout is a terminal */
    /* ---- checkpoints and callbacks: a zero value switches each off ---- */
    const struct ct_ckpt_meta *meta;     /* model name and configuration written into every file below */
    const ct_rngs *rngs;                 /* the caller's streams (init, dropout), saved in checkpoints */
    const char *checkpoint;              /* write a checkpoint here after every epoch */
    long checkpoint_every;               /* ... and after every N batches (counted over the run) */
    const char *resume;                  /* continue from this checkpoint */
    const char *save_best;               /* write a checkpoint here whenever `monitor` improves */
    ct_monitor monitor;
    int early_stopping;                  /* patience in epochs; the best weights are restored at the end */
    const char *csv;                     /* per-epoch CSV log */
    ct_on_nan on_nan;
    long stop_after_steps;               /* stop after N batches in total (checkpoint written): a resumable stop */
} ct_fit_config;

/* Parse "val_loss", "val_accuracy", "val_eer", "loss", "accuracy" / "stop", "skip-batch". */
ct_status   ct_monitor_parse(ct_monitor *m, const char *name);
const char *ct_monitor_name(ct_monitor m);
ct_status   ct_on_nan_parse(ct_on_nan *m, const char *name);


/* Trains for cfg->epochs (from the checkpoint's position with cfg->resume),
 * printing the log to `out`; hist [epochs] receives each epoch's numbers (may be
 * NULL). With on_nan = stop (the default) it stops with CT_ENUMERIC, naming the
 * epoch, the batch and the last good checkpoint, if the loss becomes NaN or
 * infinite; with skip-batch such a batch (or one with a non-finite gradient) is
 * not applied, and the epoch's count of skipped batches is printed. */
ct_status ct_fit(const ct_task *task, const ct_fit_config *cfg, ct_epoch_log *hist, FILE *out);

/* Evaluate the whole of a split: mean loss and accuracy. */
void ct_evaluate(const ct_task *task, int split, int batch, double *loss, double *accuracy);

double ct_now(void);   /* monotonic seconds */

#endif
