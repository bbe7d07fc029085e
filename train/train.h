/* train.h - the training loop shared by every model: epochs of shuffled
 * batches, forward / backward / optimizer step on the flat buffers, validation
 * at each epoch's end, and Keras's verbose=2 log:
 *
 *   Train on 300000 samples, validate on 120000 samples
 *   Epoch 1/20
 *    - 54s - 23ms/step - loss: 0.2104 - accuracy: 0.6624 - val_loss: 0.1836 - val_accuracy: 0.7135
 *
 * Training metrics are the running mean over the epoch (weighted by batch
 * size); validation metrics are computed at the epoch's end; the seconds are the
 * wall time of the whole epoch, validation included. When stderr is a terminal a
 * live progress bar with samples/s and ETA is drawn there (none in a log file).
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
 *   logdir                          TensorBoard: an event file (io/tfevents.h) in this directory
 *                                   with every epoch's numbers, flushed after each epoch
 *   on_epoch                        the caller's own callback after each epoch (the run
 *                                   directory redraws its curves there)
 *   on_nan                          stop (naming the last good checkpoint) or skip the batch
 * For a resumed run to see the same data, the task saves its data state (RNG
 * streams, sample order) through save_state / load_state.
 *
 * SIGINT and SIGTERM (core/interrupt.h, when the command installed the handler):
 * the run stops after the training step in progress. The checkpoint of that
 * position is written (to `checkpoint`, else `interrupt_checkpoint`), one line
 * says where and how to resume (`command --resume FILE`), and ct_fit returns
 * CT_EINTR. A signal during an epoch's validation abandons it: the checkpoint is
 * "after the epoch's last batch", and the resumed run validates the epoch again,
 * so its log and weights are those of a run never interrupted. A signal before
 * the first batch (while the data loaded) writes nothing: nothing was trained.
 *
 * The progress bar is drawn on stderr, only when stderr is a terminal (unless
 * forced); the epoch line ends the epoch on `out`:
 *    - 0.8s - 12ms/step - loss: ...      seconds with one decimal below 10 s, whole above;
 *                                         the training time per batch (us below 1 ms)
 */
#ifndef CT_TRAIN_H
#define CT_TRAIN_H
#include <stdio.h>
#include "core/clock.h"
#include "core/rng.h"
#include "layers/optim.h"
#include "train/task.h"

struct ct_ckpt_meta;   /* train/checkpoint.h */

/* What ct_fit tells its on_epoch callback after every epoch. */
typedef struct {
    int epoch;                           /* 0-based */
    const ct_epoch_log *hist;            /* [epoch + 1]: every epoch so far (a resumed run's earlier ones too) */
    double lr;                           /* the learning rate the epoch trained with */
    double samples_per_s;                /* training samples per second in the epoch's training part */
} ct_epoch_report;

/* The scalars of an epoch as TensorBoard shows them (tags in CT_EPOCH_TAGS order): the
 * Keras log's loss, accuracy, val_loss, val_accuracy, val_eer (only the ones the run
 * computes), then learning_rate, epoch_seconds and samples_per_second. Returns the count. */
#define CT_EPOCH_TAGS_MAX 8
#define CT_EPOCH_EXTRA_MAX 16   /* the caller's own scalars of an epoch (ct_fit_config.epoch_scalars) */
int ct_epoch_scalars(const ct_epoch_report *r, int has_val, const char **tags, float *values);

typedef struct {
    int epochs, batch;
    ct_optim_config optim;
    ct_sched sched;                      /* learning rate per epoch */
    int progress;                        /* 1 = draw the bar on stderr, 0 = never, -1 = when stderr is a terminal */
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
    /* ---- SIGINT / SIGTERM (core/interrupt.h) ---- */
    const char *interrupt_checkpoint;    /* where the interrupt's checkpoint goes when `checkpoint` is NULL (NULL: none) */
    const char *command;                 /* this run's command line, quoted for a shell: the line that says how to
                                            resume is `command --resume FILE` (NULL: no such line) */
    const char *logdir;                  /* TensorBoard event files written here (created if missing) */
    ct_status (*on_epoch)(void *ctx, const ct_epoch_report *r);   /* after every epoch; an error stops training */
    /* after every epoch, before TensorBoard's event (whether or not there is one): the caller's
     * own scalars of the epoch, at most CT_EPOCH_EXTRA_MAX, added to the event (`ctrain time`'s
     * power and temperature); returns their count */
    int (*epoch_scalars)(void *ctx, const ct_epoch_report *r, const char **tags, float *values, int max);
    void *epoch_scalars_ctx;
    void *on_epoch_ctx;
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
