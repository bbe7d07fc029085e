/* train_opts.h - the options every `ctrain train MODEL` shares (optimizer,
 * schedule, epochs, batch, seed, device, checkpoints and callbacks, run
 * directory, data-parallel settings), declared once in ct_train_opt_table
 * (catalog/options.h): the command line parses them and prints their help from
 * it, a run's config.yaml and a checkpoint's /training attributes are written
 * and read back from it.
 *
 * A checkpoint records what ran, not what was typed: ct_train_opts_fit puts
 * the optimizer, learning rate and weight decay the run uses back into the
 * options, so /training says optimizer = rmsprop, lr = 0.003 where the command
 * line said nothing. /training also records the optimizer's own constants
 * (momentum, nesterov, rho, beta1, beta2, eps) and the schedule's t_max and
 * eta_min, for the record; they are not options and are not read back. */
#ifndef CT_TRAIN_OPTS_H
#define CT_TRAIN_OPTS_H
#include "catalog/model_table.h"
#include "catalog/options.h"

typedef struct {
    const char *data, *out, *device, *optimizer;
    int schedule;                        /* ct_sched_kind */
    int tf32, deterministic;             /* GPU precision and algorithm choice (cuda/device.h) */
    int ckpt_tf32, ckpt_deterministic;   /* the same, recorded in a --resume checkpoint: taken on a GPU */
    int precision;                       /* ct_dtype of the matrix products: CT_F32 or CT_BF16 (mixed precision) */
    const ct_backend *be;                /* the device opened by cli_finish_train_opts (cli/common.h) */
    int epochs, batch, threads, progress;   /* progress: 1 on, 0 off, -1 when stderr is a terminal */
    long seed;
    float lr, clip_norm, weight_decay;   /* lr 0: the optimizer's own default */
    int step_size; float gamma;
    /* checkpoints and callbacks (train/train.h) */
    const char *checkpoint, *resume, *save_best, *monitor, *csv, *on_nan;
    long checkpoint_every, stop_after_steps;
    int early_stopping;
    /* watching and repeating runs (cli/config.h, train/run_dir.h) */
    const char *config;                  /* --config FILE: applied before the command line */
    const char *run_dir, *logdir;        /* the run directory; TensorBoard's root */
    int no_run_dir;
    /* data-parallel training under mpirun (train/dist.h) */
    float dist_timeout;                  /* seconds a collective waits for the other ranks */
    long dist_check_every;               /* parameter hash compared across ranks every N steps; 0: never */
    int sync_batchnorm;                  /* batchnorm statistics over the whole batch, across the ranks */
    /* speaker models' pairs (train/speaker_task.h) */
    int fixed_pairs;                     /* --fixed-pairs: drawn once per run and reshuffled, not drawn every epoch */
} ct_train_opts;

/* Every shared option, with the headings and paragraphs of `ctrain train MODEL --help`. */
extern const ct_opt ct_train_opt_table[];
/* The learning-rate schedules by name: constant, step, cosine (ct_sched_kind values). */
extern const ct_opt_choice ct_sched_choices[];
/* The precisions by name: fp32, bf16 (ct_dtype values). */
extern const ct_opt_choice ct_precision_choices[];

/* `ctrain train`'s values for model d: the table's defaults, then the model's epochs, batch,
 * data and schedule; `threads` CPU threads. */
void      ct_train_opts_defaults(ct_train_opts *o, const ct_model_descriptor *d, int threads);
/* The training loop's configuration from the options (optimizer, schedule, callbacks); the
 * optimizer, learning rate, weight decay, monitor and on-nan the run uses are written back
 * into o, as files record them. A bad name is CT_EINVAL naming the option. */
ct_status ct_train_opts_fit(ct_train_opts *o, ct_fit_config *fit, ct_optim_kind default_opt);
/* The options as a checkpoint's /training attributes, and back (--resume's defaults: a
 * recorded tf32 and deterministic go to ckpt_tf32 and ckpt_deterministic). `path` names
 * the checkpoint in messages. */
void      ct_train_opts_to_kv(ct_kv *kv, const ct_train_opts *o, const ct_fit_config *fit);
ct_status ct_train_opts_from_kv(const ct_kv *kv, ct_train_opts *o, const char *path);

#endif
