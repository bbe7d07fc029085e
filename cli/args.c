/* args.c - strict option parsing (see args.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"

int ct_args_flag(ct_args *a, const char *name)
{
    if (a->i < a->argc && strcmp(a->argv[a->i], name) == 0) { a->i++; return 1; }
    return 0;
}

int ct_args_str(ct_args *a, const char *name, const char **v, ct_status *st)
{
    if (a->i >= a->argc || strcmp(a->argv[a->i], name) != 0) return 0;
    if (a->i + 1 >= a->argc) { *st = ct_fail(CT_EINVAL, "option %s needs a value", name); a->i++; return 1; }
    *v = a->argv[a->i + 1];
    a->i += 2;
    return 1;
}

int ct_args_long(ct_args *a, const char *name, long *v, long lo, long hi, ct_status *st)
{
    const char *s = NULL;
    if (!ct_args_str(a, name, &s, st)) return 0;
    if (*st != CT_OK) return 1;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || *s == '\0' || *end != '\0' || x < lo || x > hi)
        *st = ct_fail(CT_EINVAL, "option %s: '%s' is not an integer in [%ld, %ld]", name, s, lo, hi);
    else *v = x;
    return 1;
}

int ct_args_int(ct_args *a, const char *name, int *v, int lo, int hi, ct_status *st)
{
    long x = *v;
    int r = ct_args_long(a, name, &x, lo, hi, st);
    if (r && *st == CT_OK) *v = (int)x;
    return r;
}

int ct_args_float(ct_args *a, const char *name, float *v, float lo, float hi, ct_status *st)
{
    const char *s = NULL;
    if (!ct_args_str(a, name, &s, st)) return 0;
    if (*st != CT_OK) return 1;
    char *end;
    errno = 0;
    float x = strtof(s, &end);
    if (errno || *s == '\0' || *end != '\0' || !isfinite(x) || x < lo || x > hi)
        *st = ct_fail(CT_EINVAL, "option %s: '%s' is not a number in [%g, %g]", name, s, lo, hi);
    else *v = x;
    return 1;
}
