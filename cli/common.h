/* common.h - the options every `ctrain train MODEL` shares: parsing, help,
 * turning them into a ct_fit_config, recording them in checkpoints, and taking
 * them back from a checkpoint for --resume. Each model adds its own options
 * (sizes, data) and checks --data itself. */
#ifndef CT_CLI_COMMON_H
#define CT_CLI_COMMON_H
#include "cli/args.h"
#include "cli/cli.h"
#include "train/checkpoint.h"
#include "train/train.h"

typedef struct {
    const char *data, *out, *device, *optimizer, *schedule;
    int tf32, deterministic;             /* GPU precision and algorithm choice (cuda/device.h) */
    const ct_ops *ops;                   /* the device opened by cli_finish_train_opts */
    int epochs, batch, threads, progress;
    long seed;
    float lr, clip_norm, weight_decay;
    int step_size; float gamma;
    /* checkpoints and callbacks (train/train.h) */
    const char *checkpoint, *resume, *save_best, *monitor, *csv, *on_nan;
    long checkpoint_every, stop_after_steps;
    int early_stopping;
} cli_train_opts;

/* If argv[a->i] is one of the shared options, consumes it (and its value) and returns 1. */
int       cli_parse_train_opt(ct_args *a, cli_train_opts *o, ct_status *st);
/* Help for the shared options: a printf format taking the model's default
 * epochs (int), batch (int), optimizer name (string), learning rate (double)
 * and schedule (string). */
extern const char *CLI_TRAIN_HELP;
/* Opens the device (o->ops), builds fit (optimizer, schedule, callbacks), sets the threads. */
ct_status cli_finish_train_opts(cli_train_opts *o, ct_fit_config *fit, ct_optim_kind default_opt);
/* The shared options as checkpoint attributes, and back (--resume's defaults). */
void      cli_train_to_meta(ct_kv *kv, const cli_train_opts *o, const ct_fit_config *fit);
void      cli_train_from_meta(const ct_kv *kv, cli_train_opts *o);
/* With --resume FILE anywhere in argv: reads FILE's configuration into meta
 * (*found = 1); a checkpoint of another model is an error naming both. */
ct_status cli_resume_meta(int argc, char **argv, const char *model, ct_ckpt_meta *meta, int *found);

#endif
