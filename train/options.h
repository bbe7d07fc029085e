/* options.h - a model's command-line options declared as data: one table per
 * model (train/model_table.h), each entry naming the flag, the type and range
 * of its value, the field of the model's configuration it sets, the commands
 * that take it and its help line. The command line (cli/opts.c) parses argv
 * and prints --help from the table alone, so an option is declared once and
 * every command that takes it parses it the same way.
 *
 *   { CT_OPT_INT, "--hidden", "N", offsetof(lstm_cfg, m.hidden), 1, 65536, NULL, CT_CMD_TRAIN, "LSTM units" }
 *
 * A help line without "(default" gets the configuration's default appended
 * ("LSTM units (default 128)"); a "\n" in it starts a continuation line. */
#ifndef CT_OPTIONS_H
#define CT_OPTIONS_H
#include <stddef.h>

typedef enum {
    CT_OPT_END = 0,      /* the end of a table */
    CT_OPT_HEADING,      /* not an option: a heading of --help ("model:") in `flag` */
    CT_OPT_NOTE,         /* an option the command itself parses (--data), listed here for its help line */
    CT_OPT_INT,          /* int in [lo, hi] */
    CT_OPT_LONG,         /* long in [lo, hi] */
    CT_OPT_FLOAT,        /* float in [lo, hi] */
    CT_OPT_STR,          /* const char *, pointing into argv */
    CT_OPT_CHOICE,       /* one of `choices`: the int value of the name given */
    CT_OPT_SQUARE        /* an image size: int in [lo, hi] written to `off` and `off2` (height and width) */
} ct_opt_type;

/* The commands that take an option (ct_opt.cmds). */
enum { CT_CMD_TRAIN = 1, CT_CMD_TIME = 2, CT_CMD_EXPORT = 4, CT_CMD_IMPORT = 8 };

typedef struct { const char *name; int value; } ct_opt_choice;   /* tables end with { NULL, 0 } */

typedef struct {
    ct_opt_type type;
    const char *flag;                /* "--hidden"; the heading's text for CT_OPT_HEADING */
    const char *arg;                 /* the value's name in --help: "N", "X", "NAME", "SPEC" */
    size_t off, off2;                /* the field(s) of the configuration it sets (off2: CT_OPT_SQUARE) */
    double lo, hi;                   /* numbers: the range accepted */
    const ct_opt_choice *choices;    /* CT_OPT_CHOICE */
    unsigned cmds;                   /* CT_CMD_* */
    const char *help;
} ct_opt;

/* Whether option `flag` of the table was given: bit i of `given` is set when opts[i] was. */
int         ct_opt_given(const ct_opt *opts, unsigned long long given, const char *flag);
/* The name of `value` in a choice table (NULL when it has none). */
const char *ct_opt_choice_name(const ct_opt_choice *c, int value);
/* The value named `name` (*value unchanged and 0 returned when none is). */
int         ct_opt_choice_value(const ct_opt_choice *c, const char *name, int *value);
/* "a, b or c": the names of a choice table, for messages. */
void        ct_opt_choice_list(const ct_opt_choice *c, char *buf, size_t cap);

#endif
