/* common.h - what the commands share: opening the device of a training run,
 * --resume's checkpoint, the command line as it was given, and options parsed
 * and listed from their tables (catalog/options.h): each model's, and the options
 * every `ctrain train MODEL` shares (catalog/train_opts.h). */
#ifndef CT_CLI_COMMON_H
#define CT_CLI_COMMON_H
#include "cli/args.h"
#include "cli/cli.h"
#include "train/checkpoint.h"
#include "catalog/model_table.h"
#include "train/train.h"
#include "catalog/train_opts.h"

/* The shared options of `ctrain train MODEL`, declared in catalog/train_opts.h: parsed with
 * cli_opt_parse(a, ct_train_opt_table, CT_CMD_TRAIN, ...), listed by cli_opt_help. */
typedef ct_train_opts cli_train_opts;

/* Opens the device (o->be), builds fit (optimizer, schedule, callbacks: ct_train_opts_fit),
 * sets the threads. */
ct_status cli_finish_train_opts(cli_train_opts *o, ct_fit_config *fit, ct_optim_kind default_opt);
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

/* ---- options, from their tables (cli_opt_parse, in cli/args.h, parses them) ---- */
/* The --help lines of those options (and the table's headings), with the defaults of `dflt`
 * (a configuration; NULL: none). */
void      cli_opt_help(FILE *out, const ct_opt *opts, unsigned cmd, const void *dflt);
/* "  --device DEV          text": one help line, continuation lines ("\n" in text) indented. */
void      cli_help_line(FILE *out, const char *left, const char *text);

#endif
