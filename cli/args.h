/* args.h - small, strict command-line option parsing for the ctrain CLI:
 * every value is validated (a number that is not one, or out of range, is an
 * error naming the option), and unknown options are errors, not ignored. */
#ifndef CT_ARGS_H
#define CT_ARGS_H
#include "core/error.h"

typedef struct {
    int argc, i;
    char **argv;
} ct_args;

/* True if argv[i] is `name` (then advances past it). */
int       ct_args_flag(ct_args *a, const char *name);
/* If argv[i] is `name`, parses the next word into *v within [lo, hi] and returns 1;
 * on a bad value sets *st and returns 1. Returns 0 if argv[i] is another option. */
int       ct_args_int(ct_args *a, const char *name, int *v, int lo, int hi, ct_status *st);
int       ct_args_long(ct_args *a, const char *name, long *v, long lo, long hi, ct_status *st);
int       ct_args_float(ct_args *a, const char *name, float *v, float lo, float hi, ct_status *st);
int       ct_args_str(ct_args *a, const char *name, const char **v, ct_status *st);

#endif
