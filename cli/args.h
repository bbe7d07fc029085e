/* args.h - small, strict command-line option parsing for the ctrain CLI:
 * every value is validated (a number that is not one, or out of range, is an
 * error naming the option), and unknown options are errors, not ignored.
 *
 * One grammar for every command:
 *   --name VALUE  and  --name=VALUE      the same option (VALUE may begin with '-' in the second form)
 *   --flag                               a switch; --flag=VALUE is an error ("takes no value")
 *   --                                   the end of the options: every word after it is an operand
 *                                        (a file name, even one that begins with '-')
 * A renamed option keeps its old spelling for a while: ct_args_renamed() lets the
 * old word through as the new one and prints a one-line note saying so. */
#ifndef CT_ARGS_H
#define CT_ARGS_H
#include "core/error.h"
#include "catalog/options.h"

typedef struct {
    int argc, i;
    char **argv;
    int operands;                /* "--" was seen: no word is an option any more */
    int renamed_at;              /* argv[renamed_at] is an old spelling of renamed_to (+1: 0 = none) */
    const char *renamed_from, *renamed_to;
    const char *flag_with_value; /* the switch that was given "=VALUE" at argv[i] (for the error) */
} ct_args;

/* True if argv[i] is `name` (then advances past it). */
int       ct_args_flag(ct_args *a, const char *name);
/* If argv[i] is `name`, parses the next word into *v within [lo, hi] and returns 1;
 * on a bad value sets *st and returns 1. Returns 0 if argv[i] is another option. */
int       ct_args_int(ct_args *a, const char *name, int *v, int lo, int hi, ct_status *st);
int       ct_args_long(ct_args *a, const char *name, long *v, long lo, long hi, ct_status *st);
int       ct_args_float(ct_args *a, const char *name, float *v, float lo, float hi, ct_status *st);
int       ct_args_str(ct_args *a, const char *name, const char **v, ct_status *st);

/* True if argv[i] is "--" (the first one; then advances past it and every later word is an operand). */
int       ct_args_end(ct_args *a);
/* True if argv[i] is an operand: a word after "--", or one that does not begin with '-'
 * ("-" alone is one too); *v = the word, and advances past it. */
int       ct_args_operand(ct_args *a, const char **v);
/* If argv[i] is `old` (or old=VALUE), a deprecated spelling of `now`: prints
 * "ctrain CMD: note: OLD is now spelled NOW (OLD will go away)" on stderr and lets the
 * matchers above take the word as `now`. Returns 1 when it did. */
int       ct_args_renamed(ct_args *a, const char *cmd, const char *old, const char *now);
/* The error for argv[i], which nothing took: an unknown option, a switch given a value,
 * or an unexpected operand; `see` is the help to read ("ctrain train cnn --help"). */
ct_status ct_args_unknown(const ct_args *a, const char *see);
/* The note of a deprecated form other than an option's name (cmd "export"): one line on stderr. */
void      ct_args_note(const char *cmd, const char *text);

/* If argv[a->i] is an option of table `opts` (catalog/options.h) that command `cmd` takes
 * (CT_CMD_*; 0: any), parses its value into the configuration cfg with ct_opt_set (a
 * switch: its flag is true, its off flag false), sets its bit in *given (may be NULL) and
 * returns 1 (with *st set on a bad value). */
int       cli_opt_parse(ct_args *a, const ct_opt *opts, unsigned cmd, void *cfg, unsigned long long *given, ct_status *st);

#endif
