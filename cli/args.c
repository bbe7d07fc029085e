/* args.c - strict option parsing (see args.h), and options parsed from their tables. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"

/* Whether argv[i] is option `name`, as "--name" (*inline_value = NULL) or
 * "--name=VALUE" (*inline_value = VALUE). An old spelling let through by
 * ct_args_renamed matches its new name. */
static int match(ct_args *a, const char *name, const char **inline_value)
{
    if (a->operands || a->i >= a->argc) return 0;
    const char *w = a->argv[a->i];
    size_t n = strlen(name);
    if (a->renamed_at == a->i + 1 && !strcmp(name, a->renamed_to)) n = strlen(a->renamed_from);
    else if (strncmp(w, name, n) != 0) return 0;
    if (w[n] == '\0') { *inline_value = NULL; return 1; }
    if (w[n] == '=') { *inline_value = w + n + 1; return 1; }
    return 0;
}

int ct_args_flag(ct_args *a, const char *name)
{
    const char *value;
    if (!match(a, name, &value)) return 0;
    if (value) { a->flag_with_value = name; return 0; }   /* left for ct_args_unknown to explain */
    a->i++;
    return 1;
}

int ct_args_str(ct_args *a, const char *name, const char **v, ct_status *st)
{
    const char *value;
    if (!match(a, name, &value)) return 0;
    if (value) { *v = value; a->i++; return 1; }
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

int ct_args_end(ct_args *a)
{
    if (a->operands || a->i >= a->argc || strcmp(a->argv[a->i], "--") != 0) return 0;
    a->operands = 1;
    a->i++;
    return 1;
}

int ct_args_operand(ct_args *a, const char **v)
{
    if (a->i >= a->argc) return 0;
    const char *w = a->argv[a->i];
    if (!a->operands && w[0] == '-' && w[1] != '\0') return 0;
    *v = w;
    a->i++;
    return 1;
}

void ct_args_note(const char *cmd, const char *text)
{
    fprintf(stderr, "ctrain %s: note: %s\n", cmd, text);
}

int ct_args_renamed(ct_args *a, const char *cmd, const char *old, const char *now)
{
    const char *value;
    if (a->renamed_at == a->i + 1 || !match(a, old, &value)) return 0;
    a->renamed_at = a->i + 1;
    a->renamed_from = old;
    a->renamed_to = now;
    char text[256];
    snprintf(text, sizeof text, "%s is now spelled %s (%s will go away)", old, now, old);
    ct_args_note(cmd, text);
    return 1;
}

ct_status ct_args_unknown(const ct_args *a, const char *see)
{
    const char *w = a->i < a->argc ? a->argv[a->i] : "";
    if (a->flag_with_value && !strncmp(w, a->flag_with_value, strlen(a->flag_with_value)))
        return ct_fail(CT_EINVAL, "%s takes no value: give it alone, not '%s' (see %s)", a->flag_with_value, w, see);
    if (a->operands || w[0] != '-' || w[1] == '\0')
        return ct_fail(CT_EINVAL, "unexpected argument '%s' (see %s)", w, see);
    return ct_fail(CT_EINVAL, "unknown option '%s' (see %s)", w, see);
}

/* ---- options from their tables (catalog/options.h) ---- */

/* Whether command cmd takes row o (cmd 0: any command). */
static int takes(const ct_opt *o, unsigned cmd) { return cmd == 0 || (o->cmds & cmd); }

/* Whether argv[a->i] is row o: its value (or a switch's state) into cfg through ct_opt_set. */
static int parse_row(ct_args *a, const ct_opt *o, void *cfg, ct_status *st)
{
    const char *text = NULL;
    if (o->type == CT_OPT_BOOL) {
        if (ct_args_flag(a, o->flag)) text = "true";
        else if (o->off_flag && ct_args_flag(a, o->off_flag)) text = "false";
        else return 0;
    } else if (!ct_args_str(a, o->flag, &text, st)) return 0;
    if (*st == CT_OK) *st = ct_opt_set(o, cfg, text, o->flag);
    return 1;
}

int cli_opt_parse(ct_args *a, const ct_opt *opts, unsigned cmd, void *cfg, unsigned long long *given, ct_status *st)
{
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &opts[i];
        if (!ct_opt_is_value(o) || !o->flag || !takes(o, cmd) || !parse_row(a, o, cfg, st)) continue;
        if (i < 64 && given) *given |= 1ULL << i;
        return 1;
    }
    return 0;
}
