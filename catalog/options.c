/* options.c - walking the option tables (see options.h): a value from text and
 * back, a row's key in files, and the rows as attributes, configuration entries
 * and a trained model's recorded settings. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "catalog/options.h"

int ct_opt_is_value(const ct_opt *o)
{
    return o->type != CT_OPT_END && o->type != CT_OPT_HEADING && o->type != CT_OPT_NOTE;
}

int ct_opt_given(const ct_opt *opts, unsigned long long given, const char *flag)
{
    for (int i = 0; opts && opts[i].type != CT_OPT_END && i < 64; i++)
        if (opts[i].flag && !strcmp(opts[i].flag, flag)) return (int)((given >> i) & 1);
    return 0;
}

const char *ct_opt_choice_name(const ct_opt_choice *c, int value)
{
    for (; c && c->name; c++) if (c->value == value) return c->name;
    return NULL;
}

int ct_opt_choice_value(const ct_opt_choice *c, const char *name, int *value)
{
    for (; c && c->name && name; c++)
        if (!strcmp(c->name, name)) { *value = c->value; return 1; }
    return 0;
}

void ct_opt_choice_list(const ct_opt_choice *c, char *buf, size_t cap)
{
    int n = 0;
    while (c[n].name) n++;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", c[i].name);
    }
}

/* ---- one value ---- */

const char *ct_opt_key(const ct_opt *o, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", o->key ? o->key : o->flag ? o->flag + 2 : "");
    if (!o->key) for (char *p = buf; *p; p++) if (*p == '-') *p = '_';
    return buf;
}

const ct_opt *ct_opts_find_key(const ct_opt *opts, const char *key)
{
    char k[64];
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &opts[i];
        if (!ct_opt_is_value(o)) continue;
        if (!strcmp(ct_opt_key(o, k, sizeof k), key)) return o;
        if (o->flag && !strcmp(o->flag + 2, key)) return o;   /* the flag's spelling: older configuration files */
    }
    return NULL;
}

static int *int_at(void *cfg, size_t off) { return (int *)((char *)cfg + off); }
static const void *field_at(const void *cfg, size_t off) { return (const char *)cfg + off; }

ct_status ct_opt_set(const ct_opt *o, void *cfg, const char *text, const char *name)
{
    char *field = (char *)cfg + o->off, *end;
    char list[256];
    errno = 0;
    switch (o->type) {
    case CT_OPT_INT: case CT_OPT_LONG: case CT_OPT_SQUARE: {
        long x = strtol(text, &end, 10);
        if (errno || *text == '\0' || *end != '\0' || x < (long)o->lo || x > (long)o->hi)
            return ct_fail(CT_EINVAL, "option %s: '%s' is not an integer in [%ld, %ld]", name, text, (long)o->lo, (long)o->hi);
        if (o->type == CT_OPT_LONG) *(long *)field = x;
        else *(int *)field = (int)x;
        if (o->type == CT_OPT_SQUARE) *int_at(cfg, o->off2) = (int)x;
        return CT_OK;
    }
    case CT_OPT_FLOAT: {
        float x = strtof(text, &end);
        if (errno || *text == '\0' || *end != '\0' || !isfinite(x) || x < (float)o->lo || x > (float)o->hi)
            return ct_fail(CT_EINVAL, "option %s: '%s' is not a number in [%g, %g]", name, text, (double)(float)o->lo, (double)(float)o->hi);
        *(float *)field = x;
        return CT_OK;
    }
    case CT_OPT_STR: *(const char **)field = text; return CT_OK;
    case CT_OPT_CHOICE:
        if (ct_opt_choice_value(o->choices, text, (int *)field)) return CT_OK;
        ct_opt_choice_list(o->choices, list, sizeof list);
        return ct_fail(CT_EINVAL, "%s %s: use %s", name, text, list);
    case CT_OPT_BOOL:
        if (!strcmp(text, "true") || !strcmp(text, "false")) { *(int *)field = !strcmp(text, "true"); return CT_OK; }
        return ct_fail(CT_EINVAL, "%s: '%s' is not true or false", name, text);
    default: return ct_fail(CT_EINVAL, "%s takes no value", name);
    }
}

int ct_opt_format(const ct_opt *o, const void *cfg, char *buf, size_t cap)
{
    const void *field = field_at(cfg, o->off);
    const char *s;
    double x;
    switch (o->type) {
    case CT_OPT_INT: case CT_OPT_SQUARE:
        x = *(const int *)field;
        return x >= o->lo && x <= o->hi && snprintf(buf, cap, "%d", *(const int *)field) > 0;
    case CT_OPT_LONG:
        x = (double)*(const long *)field;
        return x >= o->lo && x <= o->hi && snprintf(buf, cap, "%ld", *(const long *)field) > 0;
    case CT_OPT_FLOAT:
        x = *(const float *)field;
        return x >= (float)o->lo && x <= (float)o->hi && snprintf(buf, cap, "%.9g", x) > 0;
    case CT_OPT_STR:
        s = *(const char *const *)field;
        return s && snprintf(buf, cap, "%s", s) >= 0;
    case CT_OPT_CHOICE:
        s = ct_opt_choice_name(o->choices, *(const int *)field);
        return s && snprintf(buf, cap, "%s", s) > 0;
    case CT_OPT_BOOL:   /* 0 or 1; another value (progress's -1: decided later) has no text */
        x = *(const int *)field;
        return (x == 0 || x == 1) && snprintf(buf, cap, "%s", x ? "true" : "false") > 0;
    default: return 0;
    }
}

void ct_opt_copy(const ct_opt *o, void *dst, const void *src)
{
    size_t size = o->type == CT_OPT_LONG ? sizeof(long) : o->type == CT_OPT_FLOAT ? sizeof(float)
                : o->type == CT_OPT_STR ? sizeof(const char *) : sizeof(int);
    memcpy((char *)dst + o->off, field_at(src, o->off), size);
    if (o->type == CT_OPT_SQUARE) memcpy((char *)dst + o->off2, field_at(src, o->off2), sizeof(int));
}

/* ---- a table ---- */

void ct_opts_defaults(const ct_opt *opts, void *cfg)
{
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++)
        if (ct_opt_is_value(&opts[i]) && opts[i].dflt)
            CT_ASSERT(ct_opt_set(&opts[i], cfg, opts[i].dflt, opts[i].flag) == CT_OK);   /* a table's own default is valid */
}

void ct_opts_put(const ct_opt *opts, unsigned where, const void *cfg, ct_opt_put_fn put, void *ctx)
{
    char key[64], value[1200];
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++)
        if (ct_opt_is_value(&opts[i]) && (opts[i].store & where) && ct_opt_format(&opts[i], cfg, value, sizeof value))
            put(ctx, ct_opt_key(&opts[i], key, sizeof key), value);
}

void ct_opts_to_kv(const ct_opt *opts, unsigned where, const void *cfg, ct_kv *kv)
{
    char key[64], value[1200];
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &opts[i];
        if (!ct_opt_is_value(o) || !(o->store & where) || !ct_opt_format(o, cfg, value, sizeof value)) continue;
        const void *field = field_at(cfg, o->off);
        ct_opt_key(o, key, sizeof key);
        switch (o->type) {
        case CT_OPT_INT: case CT_OPT_SQUARE: case CT_OPT_BOOL: ct_kv_set_int(kv, key, *(const int *)field); break;
        case CT_OPT_LONG:  ct_kv_set_int(kv, key, *(const long *)field); break;
        case CT_OPT_FLOAT: ct_kv_set_num(kv, key, *(const float *)field); break;
        default:           ct_kv_set_str(kv, key, value); break;
        }
    }
}

/* An attribute as the text ct_opt_set reads: an integer (an integral float, or a decimal
 * string as older siamese-cnn files wrote frames), a float, a name. 0: not of the row's kind. */
static int entry_text(const ct_opt *o, const ct_kv_entry *e, char *buf, size_t cap)
{
    switch (o->type) {
    case CT_OPT_INT: case CT_OPT_LONG: case CT_OPT_SQUARE: case CT_OPT_BOOL:
        if (e->type == CT_KV_NUM && e->num != floor(e->num)) return 0;
        if (e->type == CT_KV_STR) { snprintf(buf, cap, "%s", e->str); break; }
        long long v = e->type == CT_KV_INT ? e->i : (long long)e->num;
        if (o->type == CT_OPT_BOOL) snprintf(buf, cap, "%s", v == 1 ? "true" : v == 0 ? "false" : "?");
        else snprintf(buf, cap, "%lld", v);
        break;
    case CT_OPT_FLOAT:
        if (e->type == CT_KV_STR) return 0;
        snprintf(buf, cap, "%.9g", e->type == CT_KV_INT ? (double)e->i : e->num);
        break;
    default:
        if (e->type != CT_KV_STR) return 0;
        snprintf(buf, cap, "%s", e->str);
    }
    return 1;
}

/* Row o from its attribute e into cfg; a damaged value is CT_EFORMAT naming path and key. */
static ct_status set_from_entry(const ct_opt *o, void *cfg, const ct_kv_entry *e, const char *path, const char *key)
{
    char text[200];
    if (o->type == CT_OPT_STR && e->type == CT_KV_STR) {   /* points into kv, as the command line's strings point into argv */
        *(const char **)((char *)cfg + o->off) = e->str;
        return CT_OK;
    }
    if (entry_text(o, e, text, sizeof text) && ct_opt_set(o, cfg, text, key) == CT_OK) return CT_OK;
    char why[256], list[200];
    if (o->type == CT_OPT_CHOICE) {
        ct_opt_choice_list(o->choices, list, sizeof list);
        snprintf(why, sizeof why, "not %s", list);
    } else if (o->type == CT_OPT_BOOL) snprintf(why, sizeof why, "not 0 or 1");
    else if (o->type == CT_OPT_STR) snprintf(why, sizeof why, "not a string");
    else snprintf(why, sizeof why, "not a%s in [%g, %g]", o->type == CT_OPT_FLOAT ? " number" : "n integer", o->lo, o->hi);
    return ct_fail(CT_EFORMAT, "%s: attribute %s is %s; the file is damaged: pass a file written by `ctrain train`", path, key, why);
}

ct_status ct_opts_from_kv(const ct_opt *opts, unsigned where, void *cfg, const ct_kv *kv, const char *path)
{
    char key[64];
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &opts[i];
        if (!ct_opt_is_value(o) || !(o->store & where)) continue;
        const ct_kv_entry *e = ct_kv_get(kv, ct_opt_key(o, key, sizeof key));
        if (e) CT_TRY(set_from_entry(o, cfg, e, path, key));
    }
    return CT_OK;
}

/* Appends `what` to the ", "-separated list, once. */
static void add_missing(char *missing, size_t cap, const char *what)
{
    size_t n = strlen(what), used = strlen(missing);
    for (const char *p = missing; (p = strstr(p, what)) != NULL; p += n)
        if ((p == missing || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return;
    snprintf(missing + used, cap - used, "%s%s", used ? ", " : "", what);
}

ct_status ct_opts_from_file(const ct_opt *opts, unsigned where, unsigned cmd, void *cfg, unsigned long long given,
                            const ct_kv *kv, const char *path, char *missing, size_t cap)
{
    char key[64], flag_value[1200], file_value[1200];
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &opts[i];
        if (!ct_opt_is_value(o) || !(o->store & where)) continue;
        const ct_kv_entry *e = ct_kv_get(kv, ct_opt_key(o, key, sizeof key));
        int flag_given = i < 64 && ((given >> i) & 1) && (o->cmds & cmd);
        if (!e) {
            if (o->flag && (o->cmds & cmd)) add_missing(missing, cap, key);
            continue;
        }
        if (flag_given && !ct_opt_format(o, cfg, flag_value, sizeof flag_value)) flag_value[0] = '\0';
        CT_TRY(set_from_entry(o, cfg, e, path, key));
        ct_opt_format(o, cfg, file_value, sizeof file_value);
        if (flag_given && strcmp(flag_value, file_value) != 0)
            return ct_fail(CT_EINVAL, "%s %s contradicts %s, which records %s = %s (the model was trained so): leave %s out",
                           o->flag, flag_value, path, key, file_value, o->flag);
    }
    return CT_OK;
}
