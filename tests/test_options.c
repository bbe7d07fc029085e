/* test_options.c - every option declared once (catalog/options.h): each row of
 * every table (each model's options and eval flags, the shared training
 * options of catalog/train_opts.h and `ctrain time`'s, cli/time_opts.c) is given
 * a value other than its default and round-trips
 *   argv          -> the configuration (cli_opt_parse, the command line's parser)
 *   config.yaml   -> a fresh configuration (ct_opts_put, written and read back as
 *                    YAML, each key found with ct_opts_find_key as --config does;
 *                    `time` records nothing, but its --config takes every option)
 *   attributes    -> a fresh configuration (ct_opts_to_kv, an HDF5 file's attributes
 *                    as a checkpoint or weights file holds them, ct_opts_from_kv)
 * keys are unique, a flag's own spelling finds its row, a recorded setting that a flag
 * contradicts is refused, and files that ctrain 0.1.0 wrote with the old spellings
 * (clip-norm, mels, fixed-pairs in config.yaml) still load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>
#include "tests/test.h"
#include "cli/args.h"
#include "cli/time.h"
#include "io/yamlmap.h"
#include "catalog/train_opts.h"

/* One table and the configuration it sets. */
typedef struct {
    char name[64];
    const ct_opt *opts;
    size_t size;
    const ct_model_descriptor *d;   /* its defaults; NULL: a zeroed block (eval flags) */
    int shared;                     /* the shared training options */
    int every_flag;                 /* `time`: its --config file takes every option, none is recorded */
} table;

static void *fresh(const table *t)
{
    void *cfg = calloc(1, t->size + 1);
    if (t->shared) ct_train_opts_defaults(cfg, ct_models[0], 2);
    else if (t->d) t->d->defaults(cfg);
    return cfg;
}

/* A value for row o that its field in cfg does not hold, as the command line gives it. */
static void other_value(const ct_opt *o, const void *cfg, char *buf, size_t cap)
{
    char now[1200] = "";
    int has = ct_opt_format(o, cfg, now, sizeof now);
    switch (o->type) {
    case CT_OPT_INT: case CT_OPT_LONG: case CT_OPT_SQUARE: {
        long lo = (long)o->lo, v = lo + ((long)o->hi - lo) / 3;
        if (has && atol(now) == v) v++;
        snprintf(buf, cap, "%ld", v);
        break;
    }
    case CT_OPT_FLOAT: {
        float v = (float)(o->lo + (o->hi - o->lo) * 0.375);
        char text[64];
        snprintf(text, sizeof text, "%.9g", v);
        if (has && !strcmp(text, now)) v = (float)o->lo;
        snprintf(buf, cap, "%.9g", v);
        break;
    }
    case CT_OPT_STR: snprintf(buf, cap, "value-of-%s", o->flag ? o->flag + 2 : o->key); break;
    case CT_OPT_CHOICE:
        for (const ct_opt_choice *c = o->choices; c->name; c++)
            if (strcmp(c->name, now) != 0) { snprintf(buf, cap, "%s", c->name); break; }
        break;
    case CT_OPT_BOOL: snprintf(buf, cap, "%s", has && !strcmp(now, "true") && o->off_flag ? "false" : "true"); break;
    default: buf[0] = '\0';
    }
}

/* Whether a file holds row o: the rows recorded `where` (CT_IN_*), or with `where` 0 every row a
 * flag sets but --config (`time`'s configuration file; a configuration file names no other). */
static int in_file(const ct_opt *o, unsigned where)
{
    if (!ct_opt_is_value(o)) return 0;
    if (!where) return o->flag && strcmp(o->flag, "--config") != 0;
    return (o->store & where) != 0;
}

/* Whether the rows in_file names of two configurations hold the same values (the first that differs in *bad). */
static int same_rows(const ct_opt *opts, unsigned where, const void *a, const void *b, const ct_opt **bad)
{
    char x[1200], y[1200];
    for (int i = 0; opts[i].type != CT_OPT_END; i++) {
        if (!in_file(&opts[i], where)) continue;
        int hx = ct_opt_format(&opts[i], a, x, sizeof x), hy = ct_opt_format(&opts[i], b, y, sizeof y);
        if (hx != hy || (hx && strcmp(x, y) != 0)) { *bad = &opts[i]; return 0; }
    }
    return 1;
}

static const char *row_name(const ct_opt *o, char *buf, size_t cap) { return o->flag ? o->flag : ct_opt_key(o, buf, cap); }

/* Every row through argv: cfg ends with every row at its other value. */
static void through_argv(const table *t, void *cfg)
{
    t_case("options/%s: every option through argv (cli_opt_parse)", t->name);
    int n = 0;
    for (int i = 0; t->opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &t->opts[i];
        char value[1200], got[1200], key[64];
        if (!ct_opt_is_value(o)) continue;
        other_value(o, cfg, value, sizeof value);
        if (!o->flag) {   /* recorded in files, set by no flag: straight into the configuration */
            t_check(ct_opt_set(o, cfg, value, ct_opt_key(o, key, sizeof key)) == CT_OK, "%s %s: %s", key, value, ct_last_error());
            continue;
        }
        static char words[128][2][1200];   /* argv outlives the configuration: string options point into it */
        char *w0 = words[i % 128][0], *w1 = words[i % 128][1];
        snprintf(w0, 1200, "%s", o->type == CT_OPT_BOOL && !strcmp(value, "false") ? o->off_flag : o->flag);
        snprintf(w1, 1200, "%s", value);
        char *argv[2] = { w0, w1 };
        ct_args a = { .argc = o->type == CT_OPT_BOOL ? 1 : 2, .argv = argv };
        unsigned long long given = 0;
        ct_status st = CT_OK;
        int hit = cli_opt_parse(&a, t->opts, 0, cfg, &given, &st);
        t_check(hit && st == CT_OK && a.i == a.argc, "%s %s: taken %d, status %d, at word %d: %s", w0, w1, hit, st, a.i,
                st == CT_OK ? "" : ct_last_error());
        t_check(i >= 64 || given == 1ULL << i, "%s: given bits %llx, row %d", o->flag, given, i);
        t_check(ct_opt_format(o, cfg, got, sizeof got) && !strcmp(got, value), "%s %s: the configuration holds '%s'", o->flag, value, got);
        n++;
    }
    printf("  %d options parsed\n", n);
}

typedef struct { ct_yaml_entry e[128]; char key[128][64], value[128][1200]; int n; } yaml_list;

static void put(void *ctx, const char *key, const char *value)
{
    yaml_list *l = ctx;
    if (l->n >= 128) return;
    snprintf(l->key[l->n], sizeof l->key[l->n], "%s", key);
    snprintf(l->value[l->n], sizeof l->value[l->n], "%s", value);
    l->e[l->n] = (ct_yaml_entry){ .key = l->key[l->n], .value = l->value[l->n] };
    l->n++;
}

/* The configuration file of cfg, read back into a fresh configuration. */
static void through_yaml(const table *t, const void *cfg)
{
    t_case("options/%s: the configuration file (config.yaml) and back", t->name);
    static yaml_list l;
    char path[512], key[64];
    l.n = 0;
    if (!t->every_flag) ct_opts_put(t->opts, CT_IN_CONFIG, cfg, put, &l);
    else   /* what `ctrain time --config FILE` takes: every option by its key */
        for (int i = 0; t->opts[i].type != CT_OPT_END; i++) {
            char value[1200];
            if (in_file(&t->opts[i], 0) && ct_opt_format(&t->opts[i], cfg, value, sizeof value))
                put(&l, ct_opt_key(&t->opts[i], key, sizeof key), value);
        }
    snprintf(path, sizeof path, "%s/options-%s.yaml", t_scratch_dir(), t->d ? t->d->name : t->shared ? "training" : t->name);
    t_check(ct_yaml_map_write(path, "test", l.e, l.n) == CT_OK, "writing %s: %s", path, ct_last_error());
    ct_yaml_map m = { 0 };
    t_check(ct_yaml_map_read(path, &m) == CT_OK && m.n == l.n, "reading %s back: %d entries of %d: %s", path, m.n, l.n, ct_last_error());
    void *back = fresh(t);
    for (int k = 0; k < m.n; k++) {
        const ct_opt *o = ct_opts_find_key(t->opts, m.e[k].key);
        t_check(o && !strcmp(ct_opt_key(o, key, sizeof key), m.e[k].key), "key %s names no row, or not by its key", m.e[k].key);
        if (o) t_check(ct_opt_set(o, back, m.e[k].value, m.e[k].key) == CT_OK, "%s: %s: %s", m.e[k].key, m.e[k].value, ct_last_error());
    }
    const ct_opt *bad = NULL;
    char name[64];
    int same = same_rows(t->opts, t->every_flag ? 0 : CT_IN_CONFIG, cfg, back, &bad);
    t_check(same, "%s did not come back", bad ? row_name(bad, name, sizeof name) : "");
    printf("  %d keys\n", l.n);
    ct_yaml_map_free(&m);
    free(back);
}

/* The attributes a checkpoint and a weights file record of cfg, through an HDF5 file. */
static void through_attributes(const table *t, const void *cfg)
{
    const unsigned where = CT_IN_TRAINING | CT_IN_MODEL;
    t_case("options/%s: a checkpoint's and a weights file's attributes and back", t->name);
    static ct_kv kv, read;
    char path[512], name[64];
    memset(&kv, 0, sizeof kv);
    ct_opts_to_kv(t->opts, where, cfg, &kv);
    snprintf(path, sizeof path, "%s/options-%s.h5", t_scratch_dir(), t->d ? t->d->name : t->shared ? "training" : t->name);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    t_check(f >= 0 && ct_kv_write_h5(f, "/", &kv) == CT_OK, "writing %s: %s", path, ct_last_error());
    if (f >= 0) H5Fclose(f);
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    t_check(f >= 0 && ct_kv_read_h5(f, "/", &read) == CT_OK && read.n == kv.n, "reading %s: %d of %d attributes", path, read.n, kv.n);
    if (f >= 0) H5Fclose(f);
    void *back = fresh(t);
    t_check(ct_opts_from_kv(t->opts, where, back, &read, path) == CT_OK, "from the attributes: %s", ct_last_error());
    const ct_opt *bad = NULL;
    int same = same_rows(t->opts, where, cfg, back, &bad);
    t_check(same, "%s did not come back", bad ? row_name(bad, name, sizeof name) : "");
    printf("  %d attributes\n", kv.n);
    free(back);
}

/* Keys are unique in each table and do not collide with the shared options' (a config file
 * holds both); a flag's own spelling without the dashes finds its row. */
static void keys(const table *t)
{
    t_case("options/%s: one key per option, none the shared options'; the flag's spelling finds it", t->name);
    char a[64], b[64];
    for (int i = 0; t->opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &t->opts[i];
        if (!ct_opt_is_value(o)) continue;
        ct_opt_key(o, a, sizeof a);
        t_check(a[0] != '\0', "row %d has no key", i);
        for (int k = i + 1; t->opts[k].type != CT_OPT_END; k++)   /* two rows of one command, or of one file */
            if (ct_opt_is_value(&t->opts[k]) && ((t->opts[k].cmds & o->cmds) || (t->opts[k].store & o->store)))
                t_check(strcmp(a, ct_opt_key(&t->opts[k], b, sizeof b)) != 0, "rows %d and %d are both %s", i, k, a);
        if (!t->shared && (o->store & CT_IN_CONFIG)) {
            const ct_opt *s = ct_opts_find_key(ct_train_opt_table, a);
            t_check(!s, "%s is a key of the shared options too", a);
        }
        if (o->flag) t_check(ct_opts_find_key(t->opts, o->flag + 2) == o, "%s does not find its row", o->flag + 2);
    }
}

static void walk(const table *t)
{
    void *cfg = fresh(t);
    keys(t);
    through_argv(t, cfg);
    through_yaml(t, cfg);
    through_attributes(t, cfg);
    free(cfg);
}

/* The value of option `key` of a table in cfg, as text ("" when none). */
static const char *value_of(const ct_opt *opts, const void *cfg, const char *key)
{
    static char buf[1200];
    const ct_opt *o = ct_opts_find_key(opts, key);
    if (!o || !ct_opt_format(o, cfg, buf, sizeof buf)) buf[0] = '\0';
    return buf;
}

/* A run directory's config.yaml and checkpoint.h5 written by ctrain 0.1.0 (tests/fixtures):
 * `ctrain train siamese-lstm --mels 8 --frames 10 --hidden 4 --embed 3 --pool last
 * --recurrent hard_sigmoid --pairs 32 --val-pairs 16 --speakers 4 --utts 3 --val-fraction 0.5
 * --optimizer adam --weight-decay 0.001 --clip-norm 0.25 --schedule step --step-size 3
 * --gamma 0.5 --fixed-pairs --seed 5 --batch 16 --epochs 1`. */
static void old_files(void)
{
    const ct_model_descriptor *d = ct_model_find("siamese-lstm");
    table t = { .opts = d->opts, .size = d->cfg_size, .d = d };
    const char *want[][2] = { { "n_mels", "8" }, { "frames", "10" }, { "hidden", "4" }, { "embed", "3" }, { "pool", "last" },
                              { "recurrent", "hard_sigmoid" }, { "pairs", "32" }, { "val_pairs", "16" }, { "val_fraction", "0.5" } };

    t_case("options/a config.yaml of ctrain 0.1.0 (clip-norm, mels, fixed-pairs: the flags' spellings) loads");
    ct_yaml_map m = { 0 };
    ct_train_opts o;
    ct_train_opts_defaults(&o, d, 2);
    void *cfg = fresh(&t);
    t_check(ct_yaml_map_read("tests/fixtures/options-0.1.0-config.yaml", &m) == CT_OK, "%s", ct_last_error());
    for (int k = 0; k < m.n; k++) {
        const ct_opt *s = ct_opts_find_key(ct_train_opt_table, m.e[k].key), *r = s ? NULL : ct_opts_find_key(d->opts, m.e[k].key);
        if (!strcmp(m.e[k].key, "model")) continue;
        t_check(s || r, "key %s of ctrain 0.1.0 names no option", m.e[k].key);
        if (s || r) t_check(ct_opt_set(s ? s : r, s ? (void *)&o : cfg, m.e[k].value, m.e[k].key) == CT_OK, "%s", ct_last_error());
    }
    t_check(o.clip_norm == 0.25f && o.step_size == 3 && o.gamma == 0.5f && o.schedule == SCHED_STEP && o.fixed_pairs == 1
            && o.weight_decay == 0.001f && o.seed == 5 && !strcmp(o.optimizer, "adam"),
            "clip_norm %g step_size %d gamma %g schedule %d fixed_pairs %d weight_decay %g seed %ld optimizer %s", (double)o.clip_norm,
            o.step_size, (double)o.gamma, o.schedule, o.fixed_pairs, (double)o.weight_decay, o.seed, o.optimizer);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        t_check(!strcmp(value_of(d->opts, cfg, want[k][0]), want[k][1]), "%s: %s, not %s", want[k][0], value_of(d->opts, cfg, want[k][0]),
                want[k][1]);
    free(cfg);
    ct_yaml_map_free(&m);   /* o.optimizer pointed into it */

    t_case("options/a checkpoint of ctrain 0.1.0: --resume's settings (/training and the model's attributes)");
    static ct_ckpt_meta meta;
    const char *path = "tests/fixtures/options-0.1.0-checkpoint.h5";
    ct_train_opts_defaults(&o, d, 2);
    cfg = fresh(&t);
    ct_status st = ct_ckpt_read_meta(path, &meta);
    if (st == CT_OK) st = ct_train_opts_from_kv(&meta.train_cfg, &o, path);
    if (st == CT_OK) st = d->from_meta(cfg, &meta, path);
    t_check(st == CT_OK, "%s: %s", path, ct_last_error());
    t_check(o.clip_norm == 0.25f && o.step_size == 3 && o.gamma == 0.5f && o.schedule == SCHED_STEP && o.fixed_pairs == 1
            && o.seed == 5 && o.batch == 16 && o.epochs == 1 && o.optimizer && !strcmp(o.optimizer, "adam") && o.data
            && !strcmp(o.data, "synthetic") && o.ckpt_tf32 == 0 && o.tf32 == 0,
            "clip_norm %g step_size %d gamma %g schedule %d fixed_pairs %d seed %ld batch %d epochs %d", (double)o.clip_norm, o.step_size,
            (double)o.gamma, o.schedule, o.fixed_pairs, o.seed, o.batch, o.epochs);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        t_check(!strcmp(value_of(d->opts, cfg, want[k][0]), want[k][1]), "%s: %s, not %s", want[k][0], value_of(d->opts, cfg, want[k][0]),
                want[k][1]);
    free(cfg);
}

/* A trained model's recorded settings against the flags given (eval's check). */
static void from_file(void)
{
    t_case("options/a flag that contradicts the recorded setting is refused, one that agrees is taken, a missing one noted");
    const ct_model_descriptor *d = ct_model_find("siamese-lstm");
    table t = { .opts = d->opts, .size = d->cfg_size, .d = d };
    const ct_opt *hidden = ct_opts_find_key(d->opts, "hidden");
    int row = (int)(hidden - d->opts);
    ct_kv kv = { 0 };
    ct_kv_set_int(&kv, "hidden", 16);
    char missing[512] = "";
    void *cfg = fresh(&t);
    t_check(ct_opt_set(hidden, cfg, "8", "--hidden") == CT_OK, "%s", ct_last_error());
    ct_status st = ct_opts_from_file(d->opts, CT_IN_MODEL, CT_CMD_TRAIN, cfg, 1ULL << row, &kv, "w.h5", missing, sizeof missing);
    t_check(st == CT_EINVAL && strstr(ct_last_error(), "--hidden 8 contradicts w.h5, which records hidden = 16"), "status %d: %s", st,
            ct_last_error());
    t_check(ct_opt_set(hidden, cfg, "16", "--hidden") == CT_OK, "%s", ct_last_error());
    missing[0] = '\0';
    st = ct_opts_from_file(d->opts, CT_IN_MODEL, CT_CMD_TRAIN, cfg, 1ULL << row, &kv, "w.h5", missing, sizeof missing);
    t_check(st == CT_OK && !strcmp(value_of(d->opts, cfg, "hidden"), "16"), "status %d: %s", st, ct_last_error());
    t_check(strstr(missing, "embed") && strstr(missing, "pool") && !strstr(missing, "hidden") && !strstr(missing, "threshold"),
            "missing: %s", missing);
    ct_kv_set_str(&kv, "pool", "median");
    st = ct_opts_from_file(d->opts, CT_IN_MODEL, CT_CMD_TRAIN, cfg, 0, &kv, "w.h5", missing, sizeof missing);
    t_check(st == CT_EFORMAT && strstr(ct_last_error(), "attribute pool is not last or mean"), "status %d: %s", st, ct_last_error());
    free(cfg);
}

void suite_options(void)
{
    static table t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "shared training options");
    t.opts = ct_train_opt_table;
    t.size = sizeof(ct_train_opts);
    t.shared = 1;
    walk(&t);
    t = (table){ .name = "time", .opts = time_opt_table, .size = sizeof(time_opts), .every_flag = 1 };
    walk(&t);
    for (int i = 0; ct_models[i]; i++) {
        const ct_model_descriptor *d = ct_models[i];
        t = (table){ .opts = d->opts, .size = d->cfg_size, .d = d };
        snprintf(t.name, sizeof t.name, "%s", d->name);
        walk(&t);
        if (!d->eval_opts) continue;
        t = (table){ .opts = d->eval_opts, .size = d->eval_flags_size };
        snprintf(t.name, sizeof t.name, "%s eval", d->name);
        keys(&t);
        void *flags = fresh(&t);
        through_argv(&t, flags);
        free(flags);
    }
    old_files();
    from_file();
}
