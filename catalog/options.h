/* options.h - options declared as data: one table per model (catalog/model_table.h),
 * one of the options every `ctrain train MODEL` shares (catalog/train_opts.h), and
 * ctrain time's own (cli/time_opts.c).
 * A row is the whole declaration of an option: its flag, the type and range of
 * its value, the field of the configuration it sets, the commands that take it,
 * its help line, its name in files and where files record it.
 *
 *   { CT_OPT_INT, "--hidden", "N", offsetof(lstm_cfg, m.hidden), 0, 1, 65536, NULL, CT_CMD_TRAIN, "LSTM units",
 *     .store = CT_IN_CONFIG | CT_IN_MODEL }
 *
 * Everything else is walked from the table: the command line parses argv
 * (cli/args.c) and prints --help (cli/common.c) from it; a configuration file's keys are its
 * rows' keys (cli/config.c); the effective configuration of a run, a
 * checkpoint's attributes and a weights file's description are written and
 * read back by ct_opts_put, ct_opts_to_kv and ct_opts_from_kv below; `ctrain
 * eval` checks its flags against a weights file with ct_opts_from_file. Adding
 * an option is one row (and the field it sets, and its use).
 *
 * One spelling: an option's key in every file (YAML, checkpoint and weights
 * attributes) is its flag without the dashes, '-' written '_' ("--clip-norm":
 * clip_norm), unless the row names another (`key`: "--mels" is n_mels, as
 * weights files have always said). A configuration file may still spell a key
 * as the flag is spelled (clip-norm: 1, mels: 40), as older ones did.
 *
 * A help line without "(default" gets the configuration's default appended
 * ("LSTM units (default 128)"); a "\n" in it starts a continuation line. A
 * number outside its row's range (--mels 0, --early-stopping 0) means "not
 * given" and is left out of files. */
#ifndef CT_OPTIONS_H
#define CT_OPTIONS_H
#include <stddef.h>
#include "core/error.h"
#include "io/kv.h"

typedef enum {
    CT_OPT_END = 0,      /* the end of a table */
    CT_OPT_HEADING,      /* not an option: a heading of --help ("model:") in `flag`, or a paragraph */
    CT_OPT_NOTE,         /* an option the command itself parses (--data), listed here for its help line */
    CT_OPT_INT,          /* int in [lo, hi] */
    CT_OPT_LONG,         /* long in [lo, hi] */
    CT_OPT_FLOAT,        /* float in [lo, hi] */
    CT_OPT_STR,          /* const char *, pointing into argv (or a configuration file's text) */
    CT_OPT_CHOICE,       /* one of `choices`: the int value of the name given */
    CT_OPT_SQUARE,       /* an image size: int in [lo, hi] written to `off` and `off2` (height and width) */
    CT_OPT_BOOL          /* int 0 or 1: the flag alone sets 1, `off_flag` (if any) 0; true or false in files */
} ct_opt_type;

/* The commands that take an option (ct_opt.cmds). */
enum { CT_CMD_TRAIN = 1, CT_CMD_TIME = 2, CT_CMD_EXPORT = 4, CT_CMD_IMPORT = 8, CT_CMD_EVAL = 16 };

/* Where an option's value is recorded (ct_opt.store). */
enum {
    CT_IN_NONE = 0,      /* nowhere: where outputs go (--out), how the machine runs it (--progress) */
    CT_IN_CONFIG = 1,    /* the effective configuration of a run (config.yaml; `--config` reads it back) */
    CT_IN_TRAINING = 2,  /* a checkpoint's /training attributes (--resume's defaults) */
    CT_IN_MODEL = 4      /* the model's description: a checkpoint's and a weights file's root attributes */
};

typedef struct { const char *name; int value; } ct_opt_choice;   /* tables end with { NULL, 0 } */

typedef struct {
    ct_opt_type type;
    const char *flag;                /* "--hidden"; the heading's text for CT_OPT_HEADING; NULL: a value
                                        recorded in files that no flag sets (threshold) */
    const char *arg;                 /* the value's name in --help: "N", "X", "NAME", "SPEC" */
    size_t off, off2;                /* the field(s) of the configuration it sets (off2: CT_OPT_SQUARE) */
    double lo, hi;                   /* numbers: the range accepted */
    const ct_opt_choice *choices;    /* CT_OPT_CHOICE */
    unsigned cmds;                   /* CT_CMD_* */
    const char *help;                /* NULL: not listed in --help (another table lists the option) */
    /* ---- after the positional members, by name: every row says .store (CT_IN_NONE too; a row
     * that names none of these is a -Wmissing-field-initializers warning), .key and the rest
     * where it needs them ---- */
    const char *key;                 /* its name in files; NULL: the flag's (see above) */
    unsigned store;                  /* CT_IN_*: the files that record it */
    const char *off_flag;            /* CT_OPT_BOOL: the flag that turns it off ("--no-progress"), or NULL */
    const char *dflt;                /* the default as text, applied by ct_opts_defaults; NULL: the
                                        configuration's own defaults function sets it */
} ct_opt;

/* Whether a row declares a value (not a heading, a note or the end). */
int         ct_opt_is_value(const ct_opt *o);
/* Whether option `flag` of the table was given: bit i of `given` is set when opts[i] was. */
int         ct_opt_given(const ct_opt *opts, unsigned long long given, const char *flag);
/* The name of `value` in a choice table (NULL when it has none). */
const char *ct_opt_choice_name(const ct_opt_choice *c, int value);
/* The value named `name` (*value unchanged and 0 returned when none is). */
int         ct_opt_choice_value(const ct_opt_choice *c, const char *name, int *value);
/* "a, b or c": the names of a choice table, for messages. */
void        ct_opt_choice_list(const ct_opt_choice *c, char *buf, size_t cap);

/* The option's key in files ("clip_norm", "n_mels"), written into buf (at least 64 bytes). */
const char *ct_opt_key(const ct_opt *o, char *buf, size_t cap);
/* The row that file key `key` names: its key, or its flag's name without the dashes (an
 * older configuration file's spelling, "clip-norm"). NULL when none does. */
const ct_opt *ct_opts_find_key(const ct_opt *opts, const char *key);
/* Sets the row's field(s) in cfg from text, as the command line and files give it: a
 * number in the row's range, a choice's name, "true" or "false" for CT_OPT_BOOL. A string
 * option keeps the pointer (the text must outlive cfg). A bad value is CT_EINVAL with a
 * message naming `name` (the flag or the file key) and what it takes. */
ct_status   ct_opt_set(const ct_opt *o, void *cfg, const char *text, const char *name);
/* The row's value in cfg as text (numbers exactly: floats with 9 digits), as ct_opt_set
 * reads it back. 0 when it has none to write (a NULL string, a number out of range). */
int         ct_opt_format(const ct_opt *o, const void *cfg, char *buf, size_t cap);
/* Copies the row's field(s) from one configuration to another. */
void        ct_opt_copy(const ct_opt *o, void *dst, const void *src);

/* Every row with a default text (ct_opt.dflt) set to it. */
void        ct_opts_defaults(const ct_opt *opts, void *cfg);
/* Calls put(ctx, key, value text) for each row recorded `where` (CT_IN_*) that has a value. */
typedef void (*ct_opt_put_fn)(void *ctx, const char *key, const char *value);
void        ct_opts_put(const ct_opt *opts, unsigned where, const void *cfg, ct_opt_put_fn put, void *ctx);
/* The rows recorded `where` as attributes: numbers as numbers (bools as 0 or 1), the rest as strings. */
void        ct_opts_to_kv(const ct_opt *opts, unsigned where, const void *cfg, ct_kv *kv);
/* And back: each row recorded `where` whose key kv holds is set from it (a string option then
 * points into kv, which must outlive cfg); the others are left as they are. A value out of range or of the wrong kind is CT_EFORMAT naming `path` and the key. */
ct_status   ct_opts_from_kv(const ct_opt *opts, unsigned where, void *cfg, const ct_kv *kv, const char *path);
/* A trained model's settings (rows recorded `where`) from the file `path` that records them in
 * kv, with the command's flags: a row the file records takes the file's value, and a flag given
 * (bit i of `given`: opts[i]) that says otherwise is refused (CT_EINVAL: the flag, the file's
 * value, the fix); a row it does not record keeps cfg's value (the flag's or the default) and,
 * if command `cmd` takes it, is added to `missing` (", "-separated) for a note. */
ct_status   ct_opts_from_file(const ct_opt *opts, unsigned where, unsigned cmd, void *cfg, unsigned long long given,
                              const ct_kv *kv, const char *path, char *missing, size_t cap);

#endif
