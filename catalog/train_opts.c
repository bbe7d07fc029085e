/* train_opts.c - the shared training options, declared once (see train_opts.h):
 * the table, their defaults, the training loop's configuration made from them,
 * and a checkpoint's /training attributes. */
#include <string.h>
#include "catalog/train_opts.h"
#include "train/dist.h"

const ct_opt_choice ct_sched_choices[] = {
    { "constant", SCHED_CONSTANT }, { "step", SCHED_STEP }, { "cosine", SCHED_COSINE }, { NULL, 0 }
};

const ct_opt_choice ct_precision_choices[] = { { "fp32", CT_F32 }, { "bf16", CT_BF16 }, { NULL, 0 } };

#define T(field) offsetof(ct_train_opts, field)
#define CONFIG CT_IN_CONFIG
#define RECORDED (CT_IN_CONFIG | CT_IN_TRAINING)   /* the run's configuration and its checkpoints */
#define TRAIN CT_CMD_TRAIN
#define DEVICE_CMDS (CT_CMD_TRAIN | CT_CMD_EVAL)   /* ctrain time has its own --device LIST (time_opt_table) */

const ct_opt ct_train_opt_table[] = {
    { CT_OPT_INT, "--epochs", "N", T(epochs), 0, 1, 100000, NULL, TRAIN, "epochs", .store = RECORDED },
    { CT_OPT_INT, "--batch", "N", T(batch), 0, 1, 1 << 20, NULL, TRAIN, "batch size", .store = RECORDED },
    { CT_OPT_STR, "--optimizer", "NAME", T(optimizer), 0, 0, 0, NULL, TRAIN, "sgd, rmsprop, adam or adamw", .store = RECORDED },
    { CT_OPT_FLOAT, "--lr", "X", T(lr), 0, 1e-12, 1e3, NULL, TRAIN, "learning rate", .store = RECORDED },
    { CT_OPT_CHOICE, "--schedule", "NAME", T(schedule), 0, 0, 0, ct_sched_choices, TRAIN,
      "constant, step or cosine learning rate over epochs", .store = RECORDED },
    { CT_OPT_INT, "--step-size", "N", T(step_size), 0, 1, 1000000, NULL, TRAIN, "step schedule: lr * gamma^(epoch / N)",
      .store = RECORDED, .dflt = "10" },
    { CT_OPT_FLOAT, "--gamma", "X", T(gamma), 0, 0, 1, NULL, TRAIN, "step schedule's factor", .store = RECORDED, .dflt = "0.1" },
    { CT_OPT_FLOAT, "--weight-decay", "X", T(weight_decay), 0, 0, 1e3, NULL, TRAIN, "L2 penalty (decoupled for adamw)",
      .store = RECORDED },
    { CT_OPT_FLOAT, "--clip-norm", "X", T(clip_norm), 0, 0, 1e9, NULL, TRAIN, "clip the global gradient norm to X (default 0 = off)",
      .store = RECORDED },
    { CT_OPT_INT, "--threads", "N", T(threads), 0, 1, 1024, NULL, TRAIN,
      "CPU threads for OpenBLAS (default: all cores; under mpirun, the cores over the\nranks on the machine)", .store = CONFIG },
    { CT_OPT_LONG, "--seed", "S", T(seed), 0, 0, 0x7fffffffL, NULL, TRAIN, "seed of every random stream", .store = RECORDED, .dflt = "1" },
    { CT_OPT_STR, "--device", "DEV", T(device), 0, 0, 0, NULL, DEVICE_CMDS, "cpu, gpu or gpu:N: the device to run on",
      .store = CONFIG, .dflt = "cpu" },
    { CT_OPT_BOOL, "--tf32", "", T(tf32), 0, 0, 0, NULL, DEVICE_CMDS,
      "GPU: allow TensorFloat-32 matrix products and convolutions (Ampere and newer;\nfaster, about 1e-3 relative error per product; "
      "default: pure FP32)", .store = RECORDED },
    { CT_OPT_BOOL, "--deterministic", "", T(deterministic), 0, 0, 0, NULL, DEVICE_CMDS, "GPU: deterministic cuDNN convolution algorithms only",
      .store = RECORDED },
    { CT_OPT_CHOICE, "--precision", "P", T(precision), 0, 0, 0, ct_precision_choices, DEVICE_CMDS,
      "fp32 (default) or bf16: mixed precision, the matrix products of the LSTM, the\nconvolutions and dense layers on bfloat16 operands "
      "with float32 sums; weights,\noptimizer and everything else float32 (CPU: AMX-BF16, or AVX512-BF16 where it\npays; `ctrain info` "
      "says what this machine has)", .store = RECORDED, .dflt = "fp32" },
    { CT_OPT_STR, "--out", "FILE.h5", T(out), 0, 0, 0, NULL, TRAIN, "write the trained weights (HDF5, replaced atomically)", .store = CT_IN_NONE },
    { CT_OPT_BOOL, "--fixed-pairs", "", T(fixed_pairs), 0, 0, 0, NULL, TRAIN,
      "speaker models: draw the training pairs once and reshuffle them every epoch\n(the seed experiment's protocol); default: new "
      "pairs every epoch, a function\nof --seed and the epoch", .store = RECORDED },
    { CT_OPT_BOOL, "--progress", "", T(progress), 0, 0, 0, NULL, TRAIN,
      "force the live progress bar (on stderr) on or off (default: when stderr\nis a terminal)", .off_flag = "--no-progress" },
    /* listed in --help by the model's table (its data: a feature store, an IDX directory or synthetic) */
    { CT_OPT_STR, "--data", "SOURCE", T(data), 0, 0, 0, NULL, TRAIN, NULL, .store = RECORDED },

    { CT_OPT_HEADING, "checkpoints and callbacks:", 0, 0, 0, 0, 0, NULL, TRAIN, NULL, .store = CT_IN_NONE },
    { CT_OPT_STR, "--checkpoint", "FILE.h5", T(checkpoint), 0, 0, 0, NULL, TRAIN,
      "write a checkpoint (weights, optimizer, RNG and data state) after every epoch", .store = CT_IN_NONE },
    { CT_OPT_LONG, "--checkpoint-every", "N", T(checkpoint_every), 0, 1, 0x7fffffffL, NULL, TRAIN, "... and after every N batches",
      .store = CONFIG },
    { CT_OPT_STR, "--resume", "FILE.h5", T(resume), 0, 0, 0, NULL, TRAIN,
      "continue a run exactly where its checkpoint stopped; the model and training\nsettings come from the file (flags given override "
      "them, e.g. --epochs);\nresumed on a GPU, its --tf32 and --deterministic too", .store = CT_IN_NONE },
    { CT_OPT_STR, "--save-best", "FILE.h5", T(save_best), 0, 0, 0, NULL, TRAIN, "checkpoint of the best epoch so far by --monitor", .store = CT_IN_NONE },
    { CT_OPT_STR, "--monitor", "NAME", T(monitor), 0, 0, 0, NULL, TRAIN, "val_loss (default), val_accuracy, val_eer, loss or accuracy",
      .store = CONFIG },
    { CT_OPT_INT, "--early-stopping", "N", T(early_stopping), 0, 1, 1000000, NULL, TRAIN,
      "stop after N epochs without improvement of --monitor; the best weights\nare restored at the end", .store = CONFIG },
    { CT_OPT_STR, "--csv", "FILE.csv", T(csv), 0, 0, 0, NULL, TRAIN, "one CSV row per epoch (appended on --resume)", .store = CT_IN_NONE },
    { CT_OPT_STR, "--on-nan", "WHAT", T(on_nan), 0, 0, 0, NULL, TRAIN,
      "stop (default) or skip-batch: what a non-finite loss or gradient does", .store = CONFIG },
    { CT_OPT_LONG, "--stop-after-steps", "N", T(stop_after_steps), 0, 1, 0x7fffffffL, NULL, TRAIN,
      "stop after N batches in total, writing the checkpoint (resume it later)", .store = CONFIG },
    { CT_OPT_HEADING,
      "SIGINT (Ctrl-C) or SIGTERM stops after the batch in progress: the checkpoint goes to --checkpoint (the run\n"
      "directory's checkpoint.h5 by default), else beside --out (OUT-interrupted.h5), else to\n"
      "ctrain-MODEL-interrupted.h5; one line gives the command that\n"
      "resumes it; exit 130 or 143, --out not written. A second signal exits at once, writing nothing.",
      0, 0, 0, 0, 0, NULL, TRAIN, NULL, .store = CT_IN_NONE },

    { CT_OPT_HEADING, "watching and repeating runs (docs/training.md, \"Watching and repeating runs\"):", 0, 0, 0, 0, 0, NULL, TRAIN, NULL, .store = CT_IN_NONE },
    { CT_OPT_STR, "--config", "FILE.yaml", T(config), 0, 0, 0, NULL, TRAIN,
      "options from a YAML file, one `key: value` per line, keys named after the long\noptions with '_' for '-' (epochs: 6, "
      "clip_norm: 1, tf32: true); options on\nthe command line win", .store = CT_IN_NONE },
    { CT_OPT_STR, "--run-dir", "DIR", T(run_dir), 0, 0, 0, NULL, TRAIN,
      "the run's directory (default runs/MODEL-YYYYMMDD-HHMMSS): config.yaml (the\neffective configuration: `--config "
      "DIR/config.yaml` repeats the run),\ncommand.txt, version.txt, header.txt, log.csv, checkpoint.h5, weights.h5,\n"
      "tensorboard/ and curves.svg (redrawn after every epoch). --out, --csv,\n--checkpoint and --logdir given explicitly write where "
      "they say instead.\n--resume of a checkpoint in a run directory continues in that directory", .store = CT_IN_NONE },
    { CT_OPT_BOOL, "--no-run-dir", "", T(no_run_dir), 0, 0, 0, NULL, TRAIN,
      "no run directory: only the files --out, --csv, --checkpoint, --logdir name", .store = CT_IN_NONE },
    { CT_OPT_STR, "--logdir", "DIR", T(logdir), 0, 0, 0, NULL, TRAIN,
      "TensorBoard event files in DIR/cpu (DIR/gpu on a GPU), flushed after every\nepoch: loss, accuracy, val_loss, val_accuracy, "
      "val_eer, learning_rate,\nepoch_seconds, samples_per_second (default: the run directory's tensorboard/)", .store = CT_IN_NONE },

    { CT_OPT_HEADING,
      "data-parallel training (mpirun -np N ctrain train MODEL ...; docs/distributed.md):\n"
      "                        --batch is the global batch, split evenly over the N ranks (it must divide);\n"
      "                        one all-reduce of the gradients per step; only rank 0 prints and writes files.\n"
      "                        Batchnorm normalises with each rank's own rows' statistics, as PyTorch's\n"
      "                        DistributedDataParallel does, and keeps rank 0's running statistics",
      0, 0, 0, 0, 0, NULL, TRAIN, NULL, .store = CT_IN_NONE },
    { CT_OPT_BOOL, "--sync-batchnorm", "", T(sync_batchnorm), 0, 0, 0, NULL, TRAIN,
      "batchnorm statistics over the whole batch, summed across the ranks (as\nPyTorch's SyncBatchNorm): the single-process run's", .store = CT_IN_NONE },
    { CT_OPT_FLOAT, "--dist-timeout", "S", T(dist_timeout), 0, 1, 1e6, NULL, TRAIN, "seconds a rank waits for the others before ending the job", .store = CT_IN_NONE },
    { CT_OPT_LONG, "--dist-check-every", "N", T(dist_check_every), 0, 0, 0x7fffffffL, NULL, TRAIN,
      "compare a hash of the parameters across ranks every N steps (0: never)", .dflt = "1" },
    { CT_OPT_END, 0, 0, 0, 0, 0, 0, NULL, 0, NULL, .store = CT_IN_NONE }
};

void ct_train_opts_defaults(ct_train_opts *o, const ct_model_descriptor *d, int threads)
{
    memset(o, 0, sizeof *o);
    ct_opts_defaults(ct_train_opt_table, o);
    o->data = d->train.data;
    o->epochs = d->train.epochs;
    o->batch = d->train.batch;
    CT_ASSERT(ct_opt_choice_value(ct_sched_choices, d->train.schedule, &o->schedule));   /* a descriptor names a schedule there is */
    o->threads = threads;
    o->progress = -1;
    o->dist_timeout = (float)CT_DIST_TIMEOUT_DEFAULT;
}

ct_status ct_train_opts_fit(ct_train_opts *o, ct_fit_config *fit, ct_optim_kind default_opt)
{
    ct_optim_kind kind = default_opt;
    if (o->optimizer) CT_TRY(ct_optim_parse(&kind, o->optimizer));
    fit->optim = ct_optim_defaults(kind);
    if (o->lr > 0) fit->optim.lr = o->lr;
    fit->optim.clip_norm = o->clip_norm;
    if (o->weight_decay > 0 || kind != OPT_ADAMW) fit->optim.weight_decay = o->weight_decay;
    fit->sched = (ct_sched){ .kind = (ct_sched_kind)o->schedule, .base_lr = fit->optim.lr, .step_size = o->step_size,
                             .gamma = o->gamma, .t_max = o->epochs, .eta_min = 0 };
    fit->epochs = o->epochs;
    fit->batch = o->batch;
    fit->progress = o->progress;
    fit->checkpoint = o->checkpoint;
    fit->checkpoint_every = o->checkpoint_every;
    fit->resume = o->resume;
    fit->save_best = o->save_best;
    fit->early_stopping = o->early_stopping;
    fit->csv = o->csv;
    fit->stop_after_steps = o->stop_after_steps;
    if (o->monitor) CT_TRY(ct_monitor_parse(&fit->monitor, o->monitor));
    if (o->on_nan) CT_TRY(ct_on_nan_parse(&fit->on_nan, o->on_nan));
    if (o->checkpoint_every && !o->checkpoint) return ct_fail(CT_EINVAL, "--checkpoint-every needs --checkpoint FILE.h5");
    /* what runs, as the files record it */
    o->optimizer = ct_optim_name(kind);
    o->lr = fit->optim.lr;
    o->weight_decay = fit->optim.weight_decay;
    o->monitor = ct_monitor_name(fit->monitor);
    o->on_nan = fit->on_nan == CT_NAN_SKIP_BATCH ? "skip-batch" : "stop";
    return CT_OK;
}

void ct_train_opts_to_kv(ct_kv *kv, const ct_train_opts *o, const ct_fit_config *fit)
{
    const ct_optim_config *c = &fit->optim;
    ct_opts_to_kv(ct_train_opt_table, CT_IN_TRAINING, o, kv);
    ct_kv_set_num(kv, "momentum", c->momentum);
    ct_kv_set_int(kv, "nesterov", c->nesterov);
    ct_kv_set_num(kv, "rho", c->rho);
    ct_kv_set_num(kv, "beta1", c->beta1);
    ct_kv_set_num(kv, "beta2", c->beta2);
    ct_kv_set_num(kv, "eps", c->eps);
    ct_kv_set_int(kv, "t_max", fit->sched.t_max);
    ct_kv_set_num(kv, "eta_min", fit->sched.eta_min);
}

ct_status ct_train_opts_from_kv(const ct_kv *kv, ct_train_opts *o, const char *path)
{
    int tf32 = o->tf32, deterministic = o->deterministic;
    o->tf32 = o->deterministic = 0;   /* older checkpoints record neither: 0 */
    ct_status st = ct_opts_from_kv(ct_train_opt_table, CT_IN_TRAINING, o, kv, path);
    /* a checkpoint's precision and algorithm choice apply on a GPU only (cli_finish_train_opts) */
    o->ckpt_tf32 = o->tf32;
    o->ckpt_deterministic = o->deterministic;
    o->tf32 = tf32;
    o->deterministic = deterministic;
    /* a speaker model's checkpoint (it records pairs) without fixed_pairs predates pairs drawn every epoch */
    if (!ct_kv_get(kv, "fixed_pairs") && ct_kv_get(kv, "pairs")) o->fixed_pairs = 1;
    return st;
}
