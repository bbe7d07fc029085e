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
 *   checkpoint / checkpoint_every   write a checkpoint (train/checkpoint.h) after every epoch
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
#include "core/clock.h"
#include "core/rng.h"
#include "layers/optim.h"
#include "train/task.h"

struct ct_ckpt_meta;   /* train/checkpoint.h */

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



/* Trains for cfg->epochs (from the checkpoint's position with cfg->resume),
 * printing the log to `out`; hist [epochs] receives each epoch's numbers (may be
 * NULL). With on_nan = stop (the default) it stops with CT_ENUMERIC, naming the
 * epoch, the batch and the last good checkpoint, if the loss becomes NaN or
 * infinite; with skip-batch such a batch (or one with a non-finite gradient) is
 * not applied, and the epoch's count of skipped batches is printed. */
ct_status ct_fit(const ct_task *task, const ct_fit_config *cfg, ct_epoch_log *hist, FILE *out);

/* Evaluate the whole of a split: mean loss and accuracy (over every rank's rows with
 * task->dist; fails only when the ranks stop answering). */
ct_status ct_evaluate(const ct_task *task, int split, int batch, double *loss, double *accuracy);


#endif
