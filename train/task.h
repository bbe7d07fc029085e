/* task.h - the types the training loop (train/train.h) and checkpoints
 * (train/checkpoint.h) share, and nothing else: how a model plugs into the loop
 * (ct_task: a few callbacks over its own context), its training state on its
 * device (ct_train_state), one epoch's numbers (ct_epoch_log) and what the
 * callbacks monitor (ct_monitor, ct_on_nan). train/task.c defines the names and
 * fields, train/train_state.c the training state's functions. */
#ifndef CT_TASK_H
#define CT_TASK_H
#include <hdf5.h>
#include "core/error.h"
#include "layers/ops.h"
#include "layers/optim.h"

enum { CT_SPLIT_TRAIN = 0, CT_SPLIT_VAL = 1 };

typedef struct {
    double seconds, train_seconds, val_seconds;   /* wall time: whole epoch, training part, validation part */
    double loss, accuracy, val_loss, val_accuracy;
    double val_eer;                               /* equal error rate on a trial list; < 0 when not computed */
    double data_seconds;                          /* of train_seconds, the time the loop waited in the task's
                                                     load() for its batches; not one of ct_epoch_fields (the
                                                     CSV, checkpoints and TensorBoard keep their columns):
                                                     `ctrain time` reports it as the share spent waiting for data */
} ct_epoch_log;

/* The fields of ct_epoch_log, declared once (train/task.c) and walked by every file that logs
 * epochs: the CSV log's columns (in this order), a checkpoint's /history/<name> datasets,
 * TensorBoard's scalars and `ctrain time`'s JSON "epochs". A new field is one row here and
 * its member above (data_seconds alone is a member without a row). */
enum {
    CT_EPOCH_VAL = 1,        /* a validation number: TensorBoard leaves it out when nothing is validated */
    CT_EPOCH_OPTIONAL = 2,   /* < 0 when not computed: an empty CSV cell, no TensorBoard scalar, null in JSON */
    CT_EPOCH_TIME = 4        /* a wall time: 3 decimals in the CSV; TensorBoard gets it after the learning rate */
};
typedef struct {
    const char *name;        /* "loss": the CSV column, the /history dataset, the JSON key */
    size_t off;              /* offsetof(ct_epoch_log, member) */
    const char *tag;         /* TensorBoard's tag; NULL: not written there */
    unsigned flags;          /* CT_EPOCH_* */
} ct_epoch_field;
#define CT_EPOCH_FIELDS 8
extern const ct_epoch_field ct_epoch_fields[CT_EPOCH_FIELDS];
/* The value of field f in l, and a pointer to it. */
static inline double *ct_epoch_at(ct_epoch_log *l, const ct_epoch_field *f) { return (double *)((char *)l + f->off); }
static inline double  ct_epoch_get(const ct_epoch_log *l, const ct_epoch_field *f) { return *(const double *)((const char *)l + f->off); }

/* The device side of training: what ct_fit asks of a model's weights. */
typedef struct {
    const ct_backend *be;                /* the model's device */
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

struct ct_dist;   /* train/dist.h */

typedef struct {
    void *ctx;
    ct_train_state *state;               /* the model's weights, gradients and optimizer (see above) */
    long n_train, n_val;                 /* samples per split */
    /* Data-parallel training (train/dist.h): this process is one rank of several, and
     * load() prepares only its rows of each batch (ct_dist_part). NULL: one process. */
    struct ct_dist *dist;
    /* Called at the start of each epoch (0-based), e.g. to reshuffle. May be NULL. */
    void  (*begin_epoch)(void *ctx, int epoch);
    /* Prepare samples [first, first + n) of `split` as the next batch: with `dist`, only
     * this rank's rows [first + lo, first + hi) of it (ct_dist_part(dist, n, &lo, &hi)),
     * while every random number of the whole batch is drawn, so the streams stay the same
     * on every rank. An error (a feature store that cannot be read) stops training with
     * its message; the ranks agree on it before any of them steps. */
    ct_status (*load)(void *ctx, int split, long first, int n);
    /* Forward pass on the loaded rows (n of them: hi - lo with dist); returns their mean
     * loss, *correct = right predictions among them. */
    float (*forward)(void *ctx, int n, int train, int *correct);
    /* Backward pass on those n rows: accumulate d(their mean loss)/d(params) into the state's gradients. */
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

typedef enum { CT_MONITOR_VAL_LOSS, CT_MONITOR_VAL_ACCURACY, CT_MONITOR_VAL_EER, CT_MONITOR_LOSS, CT_MONITOR_ACCURACY } ct_monitor;
typedef enum { CT_NAN_STOP, CT_NAN_SKIP_BATCH } ct_on_nan;

/* Parse "val_loss", "val_accuracy", "val_eer", "loss", "accuracy" / "stop", "skip-batch". */
ct_status   ct_monitor_parse(ct_monitor *m, const char *name);
const char *ct_monitor_name(ct_monitor m);
ct_status   ct_on_nan_parse(ct_on_nan *m, const char *name);

#endif
