/* common.h - what the commands share: the options every `ctrain train MODEL`
 * takes (parsing, help, turning them into a ct_fit_config, recording them in
 * checkpoints, taking them back for --resume), and the models' own options,
 * parsed and listed from their descriptors' tables (train/options.h). */
#ifndef CT_CLI_COMMON_H
#define CT_CLI_COMMON_H
#include "cli/args.h"
#include "cli/cli.h"
#include "train/checkpoint.h"
#include "train/model_table.h"
#include "train/train.h"

typedef struct {
    const char *data, *out, *device, *optimizer, *schedule;
    int tf32, deterministic;             /* GPU precision and algorithm choice (cuda/device.h) */
    int ckpt_tf32, ckpt_deterministic;   /* the same, recorded in a --resume checkpoint: taken on a GPU */
    const ct_backend *be;                /* the device opened by cli_finish_train_opts */
    int epochs, batch, threads, progress;
    long seed;
    float lr, clip_norm, weight_decay;
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
} cli_train_opts;

/* `ctrain train`'s values of the shared options for model d (its epochs, batch, data, schedule). */
void      cli_train_defaults(cli_train_opts *o, const ct_model_descriptor *d);
/* If argv[a->i] is one of the shared options, consumes it (and its value) and returns 1. */
int       cli_parse_train_opt(ct_args *a, cli_train_opts *o, ct_status *st);
/* Help for the shared options: a printf format taking the model's default
 * epochs (int), batch (int), optimizer name (string), learning rate (double)
 * and schedule (string). */
extern const char *CLI_TRAIN_HELP;
/* Opens the device (o->be), builds fit (optimizer, schedule, callbacks), sets the threads. */
ct_status cli_finish_train_opts(cli_train_opts *o, ct_fit_config *fit, ct_optim_kind default_opt);
/* The shared options as checkpoint attributes, and back (--resume's defaults). */
void      cli_train_to_meta(ct_kv *kv, const cli_train_opts *o, const ct_fit_config *fit);
void      cli_train_from_meta(const ct_kv *kv, cli_train_opts *o);
/* With --resume FILE anywhere in argv: reads FILE's configuration into meta
 * (*path = FILE); a checkpoint of another model is an error naming both. */
ct_status cli_resume_meta(int argc, char **argv, const char *model, ct_ckpt_meta *meta, const char **path);

/* "PROGRAM COMMAND ARGS...", each word quoted for a shell where it needs it, leaving out
 * option `drop` and its value ("--resume FILE" or "--resume=FILE"; NULL: none). */
void      cli_command_line(char *buf, size_t cap, const char *command, int argc, char **argv, const char *drop);
/* Where `ctrain train` writes the checkpoint of a SIGINT/SIGTERM when no --checkpoint was
 * given: beside the weights (OUT.h5 -> OUT-interrupted.h5), else ctrain-MODEL-interrupted.h5
 * in the current directory. */
void      cli_interrupt_checkpoint(char *buf, size_t cap, const char *model, const char *out);

/* ---- a model's options, from its descriptor's table ---- */
/* If argv[a->i] is an option of `opts` that command `cmd` takes (CT_CMD_*; 0: any), parses
 * its value into the configuration cfg, sets its bit in *given and returns 1 (with *st set on
 * a bad value). */
int       cli_opt_parse(ct_args *a, const ct_opt *opts, unsigned cmd, void *cfg, unsigned long long *given, ct_status *st);
/* The --help lines of those options, with the defaults of `dflt` (a configuration; NULL: none). */
void      cli_opt_help(FILE *out, const ct_opt *opts, unsigned cmd, const void *dflt);
/* "  --device DEV          text": one help line, continuation lines ("\n" in text) indented. */
void      cli_help_line(FILE *out, const char *left, const char *text);

#endif
