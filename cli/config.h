/* config.h - `--config FILE` (train and time) and the effective configuration
 * a run directory keeps (train/run_dir.h).
 *
 * A configuration file is flat YAML (io/yamlmap.h) whose keys are the options'
 * keys (catalog/options.h): the long option without its dashes, '_' for '-', or
 * the key its table row names (n_mels for --mels: the name in weights files
 * and checkpoints too). The flag's own spelling (clip-norm, mels) is read as
 * well, as older files wrote it:
 *
 *   model: siamese-lstm        # optional: refused with another model's command
 *   epochs: 6
 *   clip_norm: 1
 *   pool: mean
 *   tf32: true                 # an on/off option: true or false
 *
 * Each key goes through the command's own option parser, exactly as
 * "--clip-norm 1" would, so a key is checked as its option is; an unknown key
 * or a bad value is refused with FILE:LINE:COLUMN and the key. The file is
 * applied before the command line, so every option given on the command line
 * wins. */
#ifndef CT_CLI_CONFIG_H
#define CT_CLI_CONFIG_H
#include "cli/common.h"

/* One option parser: if argv[a->i] is one of its options, consumes it (and its value)
 * into ctx and returns 1 (*st set on a bad value), as cli_parse_train_opt does. */
typedef int (*cli_parse_fn)(ct_args *a, void *ctx, ct_status *st);
/* --config FILE (or --config=FILE) anywhere in argv: *path = FILE, or NULL when there is none. */
ct_status cli_config_find(int argc, char **argv, const char **path);
/* Applies every key of FILE through parse (`command`: "train" or "time", `model`: the
 * command's model, both for messages and the model key). `tables` (NULL-terminated) are the
 * command's option tables: a key names a row, and a switch takes true or false. */
ct_status cli_config_apply(const char *path, const char *command, const char *model, cli_parse_fn parse, void *ctx,
                           const ct_opt *const *tables);
/* The effective configuration of a `ctrain train` run: the rows recorded CT_IN_CONFIG of the
 * shared options (o, after cli_finish_train_opts: the optimizer, learning rate and weight
 * decay that run) and of model d's table (cfg), as a file --config reads back to the same
 * run. Where outputs go (--out, --checkpoint, --csv, --save-best, --logdir, --run-dir) is
 * not part of it. `comment` heads the file. */
ct_status cli_train_config_write(const char *path, const char *comment, const cli_train_opts *o, const ct_model_descriptor *d,
                                 const void *cfg);

#endif
