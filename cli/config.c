/* config.c - configuration files as options (see config.h): each key of the
 * YAML file becomes the argv pair {"--key", "value"} and goes through the
 * command's parser; and the effective configuration of a training run, written
 * from the parsed options so that --config reproduces the run. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/config.h"
#include "io/yamlmap.h"

const cli_bool_key CLI_TRAIN_BOOLS[] = {
    { "tf32", "--tf32", NULL },
    { "deterministic", "--deterministic", NULL },
    { "progress", "--progress", "--no-progress" },
    { "fixed-pairs", "--fixed-pairs", NULL },
    { NULL, NULL, NULL }
};

ct_status cli_config_find(int argc, char **argv, const char **path)
{
    *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "--config=", 9)) { *path = argv[i] + 9; continue; }   /* the --opt=value spelling */
        if (strcmp(argv[i], "--config") != 0) continue;
        if (i + 1 >= argc || !*argv[i + 1]) return ct_fail(CT_EINVAL, "option --config needs a value (a YAML file)");
        *path = argv[++i];
    }
    return CT_OK;
}

/* One key: its argv through parse; the messages name FILE:LINE:COLUMN and the key. */
static ct_status apply_entry(const char *path, const char *command, const char *model, const ct_yaml_entry *e,
                             cli_parse_fn parse, void *ctx, const cli_bool_key *bools)
{
    char flag[128];
    if (!strcmp(e->key, "model")) {
        if (strcmp(e->value, model) != 0)
            return ct_fail(CT_EINVAL, "%s:%d:%d: this configuration is for model %s, not %s: run `ctrain %s %s --config %s`", path,
                           e->value_line, e->value_column, e->value, model, command, e->value, path);
        return CT_OK;
    }
    if (!strcmp(e->key, "config") || !strcmp(e->key, "resume") || !strcmp(e->key, "help"))
        return ct_fail(CT_EINVAL, "%s:%d:%d: '%s' cannot be set in a configuration file: give --%s on the command line", path,
                       e->key_line, e->key_column, e->key, e->key);
    if (!e->key[0] || e->key[0] == '-' || strlen(e->key) > 100)
        return ct_fail(CT_EINVAL, "%s:%d:%d: '%s' is not a key: keys are the long options of `ctrain %s %s --help` without their "
                       "dashes (epochs: 6)", path, e->key_line, e->key_column, e->key, command, model);
    if (!e->value[0])
        return ct_fail(CT_EINVAL, "%s:%d:%d: '%s' has no value", path, e->key_line, e->key_column, e->key);
    snprintf(flag, sizeof flag, "--%s", e->key);
    char *argv[2] = { flag, e->value };
    int argc = 2;
    for (int i = 0; bools && bools[i].key; i++) {
        if (strcmp(bools[i].key, e->key) != 0) continue;
        int on = !strcmp(e->value, "true"), off = !strcmp(e->value, "false");
        if (!on && !off)
            return ct_fail(CT_EINVAL, "%s:%d:%d: %s: '%s' is not true or false", path, e->value_line, e->value_column, e->key, e->value);
        if (off && !bools[i].off) return CT_OK;   /* off is the default */
        snprintf(flag, sizeof flag, "%s", on ? bools[i].on : bools[i].off);
        argc = 1;
    }
    ct_args a = { .argc = argc, .argv = argv };
    ct_status st = CT_OK;
    if (!parse(&a, ctx, &st) || (st == CT_OK && a.i != argc))
        return ct_fail(CT_EINVAL, "%s:%d:%d: unknown key '%s': keys are the long options of `ctrain %s %s --help` without their "
                       "dashes", path, e->key_line, e->key_column, e->key, command, model);
    if (st != CT_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", ct_last_error());
        return ct_fail(st, "%s:%d:%d: %s: %s", path, e->value_line, e->value_column, e->key, why);
    }
    return CT_OK;
}

ct_status cli_config_apply(const char *path, const char *command, const char *model, cli_parse_fn parse, void *ctx,
                           const cli_bool_key *bools)
{
    /* The parsers keep pointers to string values (--data FILE), as they do into argv: the
     * file's values live as long as the program, like argv. */
    static ct_yaml_map m;
    ct_yaml_map_free(&m);
    ct_status st = ct_yaml_map_read(path, &m);
    for (int i = 0; st == CT_OK && i < m.n; i++) st = apply_entry(path, command, model, &m.e[i], parse, ctx, bools);
    return st;
}

/* ---- the effective configuration ---- */
enum { MAX_KEYS = 96 };
typedef struct {
    ct_yaml_entry e[MAX_KEYS];
    char key[MAX_KEYS][64];
    char *value[MAX_KEYS];
    int n, failed;                   /* failed: a value could not be allocated */
} entries;

static void put(entries *s, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(entries *s, const char *key, const char *fmt, ...)
{
    CT_ASSERT(s->n < MAX_KEYS);   /* sized for every shared option and the largest model table */
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    char *v = malloc((size_t)len + 1);
    if (v) vsnprintf(v, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
    va_end(ap);
    if (!v) { s->failed = 1; return; }
    snprintf(s->key[s->n], sizeof s->key[s->n], "%s", key);
    s->value[s->n] = v;
    s->e[s->n] = (ct_yaml_entry){ .key = s->key[s->n], .value = v };
    s->n++;
}

/* Model options: each one `ctrain train` takes, with its value in cfg. A number outside its
 * option's range is a "not given" sentinel (--mels 0: the data's) and is left out. */
static void put_model_opts(entries *s, const ct_opt *opts, const void *cfg)
{
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &opts[i];
        if (!(o->cmds & CT_CMD_TRAIN)) continue;
        const char *field = (const char *)cfg + o->off, *key = o->flag + 2;
        double x;
        switch (o->type) {
        case CT_OPT_INT: case CT_OPT_SQUARE:
            x = *(const int *)field;
            if (x >= o->lo && x <= o->hi) put(s, key, "%d", *(const int *)field);
            break;
        case CT_OPT_LONG:
            x = (double)*(const long *)field;
            if (x >= o->lo && x <= o->hi) put(s, key, "%ld", *(const long *)field);
            break;
        case CT_OPT_FLOAT:
            x = *(const float *)field;
            if (x >= (float)o->lo && x <= (float)o->hi) put(s, key, "%.9g", (double)*(const float *)field);
            break;
        case CT_OPT_STR:
            if (*(const char *const *)field) put(s, key, "%s", *(const char *const *)field);
            break;
        case CT_OPT_CHOICE: {
            const char *name = ct_opt_choice_name(o->choices, *(const int *)field);
            if (name) put(s, key, "%s", name);
            break;
        }
        default: break;
        }
    }
}

ct_status cli_train_config_write(const char *path, const char *comment, const cli_train_opts *o, const ct_fit_config *fit,
                                 const ct_model_descriptor *d, const void *cfg)
{
    static entries s;
    static const char *SCHED[] = { "constant", "step", "cosine" };
    const ct_optim_config *c = &fit->optim;
    s.n = s.failed = 0;
    put(&s, "model", "%s", d->name);
    if (o->data) put(&s, "data", "%s", o->data);
    put(&s, "device", "%s", o->device);
    if (o->tf32) put(&s, "tf32", "true");
    if (o->deterministic) put(&s, "deterministic", "true");
    if (o->fixed_pairs) put(&s, "fixed-pairs", "true");
    put(&s, "threads", "%d", o->threads);
    put(&s, "seed", "%ld", o->seed);
    put(&s, "epochs", "%d", o->epochs);
    put(&s, "batch", "%d", o->batch);
    put(&s, "optimizer", "%s", ct_optim_name(c->kind));
    put(&s, "lr", "%.9g", (double)c->lr);
    put(&s, "schedule", "%s", SCHED[fit->sched.kind]);
    put(&s, "step-size", "%d", o->step_size);
    put(&s, "gamma", "%.9g", (double)o->gamma);
    put(&s, "weight-decay", "%.9g", (double)c->weight_decay);
    put(&s, "clip-norm", "%.9g", (double)c->clip_norm);
    put(&s, "monitor", "%s", ct_monitor_name(fit->monitor));
    if (o->early_stopping) put(&s, "early-stopping", "%d", o->early_stopping);
    put(&s, "on-nan", "%s", fit->on_nan == CT_NAN_SKIP_BATCH ? "skip-batch" : "stop");
    if (o->checkpoint_every) put(&s, "checkpoint-every", "%ld", o->checkpoint_every);
    if (o->stop_after_steps) put(&s, "stop-after-steps", "%ld", o->stop_after_steps);
    put_model_opts(&s, d->opts, cfg);
    ct_status st = s.failed ? ct_fail(CT_ENOMEM, "out of memory writing %s", path) : ct_yaml_map_write(path, comment, s.e, s.n);
    for (int i = 0; i < s.n; i++) free(s.value[i]);
    return st;
}
