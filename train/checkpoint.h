/* checkpoint.h - one HDF5 file per run holding everything needed to continue
 * training exactly where it stopped: the weights, the optimizer state, where
 * training stands (epoch, batch within the epoch, running metrics of a partial
 * epoch, the early-stopping counters), the history of every finished epoch, the
 * state of every random stream and the task's data order.
 *
 * Layout (format "ctrain-checkpoint", format_version 1; see docs/checkpoints.md):
 *
 *   /                     attributes: format, format_version, model, and every field of the
 *                         model's configuration (hidden, embed, frames, ...)
 *   /training             attributes: optimizer and its hyper-parameters, schedule, batch,
 *                         epochs, seed and the data options of the run
 *   /model/<param>        float32, one dataset per parameter (the same names and shapes as
 *                         io/weights.h, e.g. /model/lstm_1/w_ih_l0 [4H, I])
 *   /state/<buffer>       float32, non-trainable state (batchnorm running statistics)
 *   /optimizer/m, /v      float32 [numel] flat, in the parameter buffer's layout (padding
 *                         included); attributes kind, step
 *   /progress             attributes: epoch (finished epochs), step (batches done in the
 *                         next epoch), lr, schedule_t, sum_loss, sum_correct, seen, skipped,
 *                         monitor, best, best_epoch, wait
 *   /history/<field>      float64 [epoch]: one per field of an epoch's log (ct_epoch_fields,
 *                         train/task.h): loss, accuracy, val_loss, val_accuracy, val_eer,
 *                         seconds, train_seconds, val_seconds (a field the file lacks reads
 *                         as NaN, or -1 for val_eer: not computed)
 *   /rng/<stream>         uint64 [2] = (state, inc) of each PCG32 stream: init, dropout, data,
 *                         and the task's own (crop, val_crop)
 *   /data/...             the task's data state (e.g. /data/order, the epoch's sample order)
 *   /best/model, /best/state   weights of the best epoch (only with early stopping)
 *
 * Integrity: every dataset is written with HDF5's Fletcher-32 checksum filter and
 * the file uses checksummed metadata (HDF5 1.8+ object headers), so flipped bytes
 * are reported on reading instead of being loaded. The file is written to
 * "<path>.tmp-<pid>" in the same directory, closed, fsync'ed and renamed over
 * `path`, then the directory is fsync'ed: a crash at any moment leaves the old
 * checkpoint or the new one, never a mixture. Temporary files left by killed
 * processes are removed by the next save.
 *
 * Loading reads and checks everything into temporaries first, and only then
 * replaces the model's weights, the optimizer state and the task's state, so a
 * failed load changes nothing.
 */
#ifndef CT_CHECKPOINT_H
#define CT_CHECKPOINT_H
#include <hdf5.h>
#include "core/params.h"
#include "core/rng.h"
#include "io/kv.h"
#include "layers/optim.h"
#include "train/task.h"

#define CT_CKPT_FORMAT "ctrain-checkpoint"
#define CT_CKPT_VERSION 1

/* What the run is: written into every checkpoint, read back before resuming. */
typedef struct ct_ckpt_meta {
    char model[64];      /* "siamese-lstm", "small-cnn", ... */
    ct_kv model_cfg;     /* root attributes: enough to rebuild the model */
    ct_kv train_cfg;     /* /training attributes */
} ct_ckpt_meta;

/* Where training stands. */
typedef struct {
    int epoch;            /* epochs finished */
    long step;            /* batches of the next epoch already trained (0 at an epoch boundary) */
    double lr;            /* learning rate of that epoch */
    double sum_loss, sum_correct;   /* running training metrics of the partial epoch */
    long seen, skipped;   /* samples counted / batches skipped (non-finite) in the partial epoch */
    int monitor;          /* ct_monitor of the run */
    double best;          /* best monitored value so far (NaN: none yet) */
    int best_epoch;       /* 0-based, -1: none */
    int wait;             /* epochs since the last improvement */
} ct_ckpt_progress;

typedef struct {
    const ct_ckpt_meta *meta;
    ct_params *params, *state;        /* state may be NULL */
    ct_optim *opt;
    ct_ckpt_progress prog;
    ct_epoch_log *hist;               /* [prog.epoch]; on load: room for hist_cap entries */
    int hist_cap;
    float *best_params, *best_state;  /* weights of the best epoch, [params->numel] / [state->numel], or NULL */
    const ct_task *task;              /* its save_state / load_state write /rng and /data (may be NULL) */
    const ct_rngs *rngs;              /* the caller's streams: /rng/init, /rng/dropout unless the task wrote them */
} ct_ckpt;

/* Write `c` to `path` atomically. On failure the previous file at `path` is untouched. */
ct_status ct_ckpt_save(const char *path, const ct_ckpt *c);
/* Read `path` into c->params, c->state, c->opt (m, v, step), c->prog, c->hist, the
 * best copies (when both the file and c have them) and the task's state. Checks the
 * format, its version, the model name (c->meta->model) and every parameter's shape;
 * on any error nothing is changed. */
ct_status ct_ckpt_load(const char *path, ct_ckpt *c);
/* Read only the model name and the two configuration tables (checks format and version). */
ct_status ct_ckpt_read_meta(const char *path, ct_ckpt_meta *meta);
/* Open `path` and read every dataset in it (verifying checksums) and the format
 * attributes: CT_OK if the file is a whole, readable checkpoint. *epoch and *step
 * (may be NULL) receive its progress. */
ct_status ct_ckpt_verify(const char *path, int *epoch, long *step);

/* ---- helpers for ct_task.save_state / load_state ---- */
ct_status ct_ckpt_write_rng(hid_t f, const char *stream, const ct_rng *r);   /* /rng/<stream> */
ct_status ct_ckpt_read_rng(hid_t f, const char *stream, ct_rng *r);
/* Checksummed datasets at any path ("data/order"); read requires exactly n elements. */
ct_status ct_ckpt_write_i32(hid_t f, const char *name, const int *src, int ndim, const size_t *dims);
ct_status ct_ckpt_read_i32(hid_t f, const char *name, int *dst, size_t n);
ct_status ct_ckpt_write_f32(hid_t f, const char *name, const float *src, int ndim, const size_t *dims);
ct_status ct_ckpt_read_f32(hid_t f, const char *name, float *dst, size_t n);


#endif
