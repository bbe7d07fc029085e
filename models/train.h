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
 * A model plugs in through ct_task: a few callbacks over its own context.
 */
#ifndef CT_TRAIN_H
#define CT_TRAIN_H
#include <stdio.h>
#include "core/params.h"
#include "layers/optim.h"

enum { CT_SPLIT_TRAIN = 0, CT_SPLIT_VAL = 1 };

typedef struct {
    double seconds, train_seconds, val_seconds;   /* wall time: whole epoch, training part, validation part */
    double loss, accuracy, val_loss, val_accuracy;
    double val_eer;                               /* equal error rate on a trial list; < 0 when not computed */
} ct_epoch_log;

typedef struct {
    void *ctx;
    ct_params *params;
    long n_train, n_val;                 /* samples per split */
    /* Called at the start of each epoch (0-based), e.g. to reshuffle. May be NULL. */
    void  (*begin_epoch)(void *ctx, int epoch);
    /* Prepare samples [first, first + n) of `split` as the next batch. */
    void  (*load)(void *ctx, int split, long first, int n);
    /* Forward pass on the loaded batch; returns the mean loss, *correct = right predictions. */
    float (*forward)(void *ctx, int n, int train, int *correct);
    /* Backward pass: accumulate d(mean loss)/d(params) into params->grad. */
    void  (*backward)(void *ctx, int n);
    /* Called after validation with the epoch's numbers; may add metrics such as
     * val_eer (set log->val_eer >= 0 to have it printed). May be NULL. */
    void  (*end_epoch)(void *ctx, int epoch, ct_epoch_log *log);
} ct_task;

typedef struct {
    int epochs, batch;
    ct_optim_config optim;
    ct_sched sched;                      /* learning rate per epoch */
    int progress;                        /* 1 = draw the bar, 0 = never, -1 = when stdout is a terminal */
} ct_fit_config;


/* Trains for cfg->epochs, printing the log to `out`; hist [epochs] receives
 * each epoch's numbers (may be NULL). Stops with CT_ENUMERIC, naming the epoch
 * and batch, if the loss becomes NaN or infinite. */
ct_status ct_fit(const ct_task *task, const ct_fit_config *cfg, ct_epoch_log *hist, FILE *out);

/* Evaluate the whole of a split: mean loss and accuracy. */
void ct_evaluate(const ct_task *task, int split, int batch, double *loss, double *accuracy);

double ct_now(void);   /* monotonic seconds */

#endif
