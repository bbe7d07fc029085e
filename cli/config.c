/* config.c - configuration files as options (see config.h): each key of the
 * YAML file becomes the words of its option ({"--clip-norm", "1"}) and goes
 * through the command's parser; and the effective configuration of a training
 * run, written from the option tables so that --config reproduces the run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/config.h"
#include "io/yamlmap.h"

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

/* The command-line words of one entry: the flag of the row of `tables` its key names (by its
 * key or, as older files spell it, its flag's name) and the value; a switch's true is the flag
 * alone, its false the off flag (none: the default, no word at all). A key no row names is
 * "--KEY" ('_' read as '-'), which the parser refuses as unknown. */
static ct_status entry_words(const char *path, const ct_yaml_entry *e, const ct_opt *const *tables, char *flag, size_t cap, int *argc)
{
    const ct_opt *row = NULL;
    for (int t = 0; tables && tables[t] && !row; t++) row = ct_opts_find_key(tables[t], e->key);
    *argc = 2;
    if (!row || !row->flag) {
        snprintf(flag, cap, "--%s", e->key);
        for (char *p = flag + 2; *p; p++) if (*p == '_') *p = '-';
        return CT_OK;
    }
    snprintf(flag, cap, "%s", row->flag);
    if (row->type != CT_OPT_BOOL) return CT_OK;
    int yes = !strcmp(e->value, "true"), no = !strcmp(e->value, "false");
    if (!yes && !no)
        return ct_fail(CT_EINVAL, "%s:%d:%d: %s: '%s' is not true or false", path, e->value_line, e->value_column, e->key, e->value);
    *argc = no && !row->off_flag ? 0 : 1;   /* off is the default */
    if (no && row->off_flag) snprintf(flag, cap, "%s", row->off_flag);
    return CT_OK;
}

/* One key: its words through parse; the messages name FILE:LINE:COLUMN and the key. */
static ct_status apply_entry(const char *path, const char *command, const char *model, const ct_yaml_entry *e,
                             cli_parse_fn parse, void *ctx, const ct_opt *const *tables)
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
    int argc;
    CT_TRY(entry_words(path, e, tables, flag, sizeof flag, &argc));
    if (argc == 0) return CT_OK;
    char *argv[2] = { flag, e->value };
    ct_args a = { .argc = argc, .argv = argv };
    ct_status st = CT_OK;
    if (!parse(&a, ctx, &st) || (st == CT_OK && a.i != argc))
        return ct_fail(CT_EINVAL, "%s:%d:%d: unknown key '%s': keys are the long options of `ctrain %s %s --help` without their "
                       "dashes and '_' for '-'", path, e->key_line, e->key_column, e->key, command, model);
    if (st != CT_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", ct_last_error());
        return ct_fail(st, "%s:%d:%d: %s: %s", path, e->value_line, e->value_column, e->key, why);
    }
    return CT_OK;
}

ct_status cli_config_apply(const char *path, const char *command, const char *model, cli_parse_fn parse, void *ctx,
                           const ct_opt *const *tables)
{
    /* The parsers keep pointers to string values (--data FILE), as they do into argv: the
     * file's values live as long as the program, like argv. */
    static ct_yaml_map m;
    ct_yaml_map_free(&m);
    ct_status st = ct_yaml_map_read(path, &m);
    for (int i = 0; st == CT_OK && i < m.n; i++) st = apply_entry(path, command, model, &m.e[i], parse, ctx, tables);
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

/* One entry (a ct_opt_put_fn). */
static void put(void *ctx, const char *key, const char *value)
{
    entries *s = ctx;
    CT_ASSERT(s->n < MAX_KEYS);   /* sized for every shared option and the largest model table */
    char *v = strdup(value);
    if (!v) { s->failed = 1; return; }
    snprintf(s->key[s->n], sizeof s->key[s->n], "%s", key);
    s->value[s->n] = v;
    s->e[s->n] = (ct_yaml_entry){ .key = s->key[s->n], .value = v };
    s->n++;
}

ct_status cli_train_config_write(const char *path, const char *comment, const cli_train_opts *o, const ct_model_descriptor *d,
                                 const void *cfg)
{
    static entries s;
    s.n = s.failed = 0;
    put(&s, "model", d->name);
    ct_opts_put(ct_train_opt_table, CT_IN_CONFIG, o, put, &s);
    ct_opts_put(d->opts, CT_IN_CONFIG, cfg, put, &s);
    ct_status st = s.failed ? ct_fail(CT_ENOMEM, "out of memory writing %s", path) : ct_yaml_map_write(path, comment, s.e, s.n);
    for (int i = 0; i < s.n; i++) free(s.value[i]);
    return st;
}
