/* time_compare.c - `ctrain time --compare A.json B.json ...`: the JSON files
 * that `ctrain time --json` wrote (schema in cli/time_report.c), read back and
 * printed side by side (a desktop next to a cloud instance, last month's build
 * next to this one); and --baseline, the scaling efficiency of a run against
 * one of the same workload. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/time.h"
#include "io/json.h"

typedef struct {
    const char *path;
    json_t *root;
    const char *hostname, *cpu, *device, *model, *protocol, *version, *date;
    char framework[96];                    /* "framework" when present, else "ctrain VERSION" */
    double threads, ranks, batch, n_train, n_val;
    double sec_median, sec_min, sec_max, samples_per_s, gflops, peak, fma_peak;
    const char *blas;                      /* host.blas_core (else host.blas), "" when absent */
    const char *kernels;                   /* host.kernels, "" when absent (older files, PyTorch's) */
    const char *precision;                 /* "fp32" or "bf16"; "fp32" when absent (files before --precision) */
    int n_epochs;
    double loss, val_loss, val_accuracy;   /* of the last epoch */
    time_figures fig;                      /* the counters and the money (schema /2; n/a in a /1 file) */
    char label[48];                        /* the device, then " bf16" in bf16 */
} result_file;

/* The kind of value a field must hold. */
typedef enum { NEED_OBJECT, NEED_ARRAY, NEED_STRING, NEED_NUMBER } need_kind;

static int is_kind(const json_t *v, need_kind k)
{
    return k == NEED_OBJECT ? json_is_object(v) : k == NEED_ARRAY ? json_is_array(v) : k == NEED_STRING ? json_is_string(v)
                                                                                                          : json_is_number(v);
}

/* obj[key], which must exist and have the given kind (or be null when nullable). */
static ct_status need(const result_file *rf, const json_t *obj, const char *where, const char *key, need_kind kind,
                      int nullable, const json_t **out)
{
    static const char *names[] = { "object", "array", "string", "number" };
    const json_t *v = json_object_get(obj, key);
    if (!v) return ct_fail(CT_EFORMAT, "%s: %s\"%s\" is missing (is this a file written by `ctrain time --json`?)", rf->path, where, key);
    if (!is_kind(v, kind) && !(nullable && json_is_null(v)))
        return ct_fail(CT_EFORMAT, "%s: %s\"%s\" should be a %s, but it is a %s", rf->path, where, key, names[kind], ct_json_kind(v));
    *out = v;
    return CT_OK;
}

static ct_status need_str(const result_file *rf, const json_t *obj, const char *where, const char *key, const char **s)
{
    const json_t *v = NULL;
    CT_TRY(need(rf, obj, where, key, NEED_STRING, 0, &v));
    *s = json_string_value(v);
    return CT_OK;
}

/* A number; null (a value that was not finite, or unknown) reads as NaN. */
static ct_status need_num(const result_file *rf, const json_t *obj, const char *where, const char *key, double *x)
{
    const json_t *v = NULL;
    CT_TRY(need(rf, obj, where, key, NEED_NUMBER, 1, &v));
    *x = json_is_number(v) ? json_number_value(v) : NAN;
    return CT_OK;
}

/* The epochs: every field of an epoch's log (train/task.h), those that may be missing (val_eer,
 * which files before it left out) excepted; the result keeps the last epoch's. */
static ct_status read_epochs(result_file *rf, const json_t *epochs)
{
    ct_epoch_log last = { 0 };
    size_t n = json_array_size(epochs);
    if (n < 1) return ct_fail(CT_EFORMAT, "%s: \"epochs\" is empty: the run recorded no epoch", rf->path);
    for (size_t e = 0; e < n; e++) {
        const json_t *ep = json_array_get(epochs, e);
        char where[48];
        snprintf(where, sizeof where, "epochs[%zu].", e);
        if (!json_is_object(ep))
            return ct_fail(CT_EFORMAT, "%s: epochs[%zu] should be an object, but it is a %s", rf->path, e, ct_json_kind(ep));
        for (int k = 0; k < CT_EPOCH_FIELDS; k++) {
            const ct_epoch_field *f = &ct_epoch_fields[k];
            if ((f->flags & CT_EPOCH_OPTIONAL) && !json_object_get(ep, f->name)) *ct_epoch_at(&last, f) = NAN;
            else CT_TRY(need_num(rf, ep, where, f->name, ct_epoch_at(&last, f)));
        }
    }
    rf->n_epochs = (int)n;
    rf->loss = last.loss;
    rf->val_loss = last.val_loss;
    rf->val_accuracy = last.val_accuracy;
    return CT_OK;
}

/* An optional number (NaN when absent or null) and an optional string ("" when absent). */
static double opt_num(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void opt_str(char *buf, size_t cap, const json_t *obj, const char *key, const char *dflt)
{
    const json_t *v = json_object_get(obj, key);
    snprintf(buf, cap, "%s", json_is_string(v) ? json_string_value(v) : dflt);
}

/* The figures of the table and the report page; those a /1 file lacks are n/a with that reason. */
static void read_figures(result_file *rf, const char *schema)
{
    time_figures *f = &rf->fig;
    const json_t *r = rf->root, *money = json_object_get(r, "money");
    memset(f, 0, sizeof *f);
    snprintf(rf->label, sizeof rf->label, "%.31s%s", rf->device, strcmp(rf->precision, "bf16") ? "" : " bf16");
    const char *slash = strrchr(rf->path, '/');
    f->file = slash ? slash + 1 : rf->path;
    f->label = rf->label;
    f->host = rf->hostname;
    f->model = rf->model;
    f->protocol = rf->protocol;
    f->precision = rf->precision;
    f->sec_median = rf->sec_median;
    f->samples_per_s = rf->samples_per_s;
    f->gflops = rf->gflops;
    f->n_train = rf->n_train;
    f->joules_per_epoch = opt_num(r, "joules_per_epoch");
    f->avg_w = opt_num(r, "avg_watts");
    f->peak_w = opt_num(r, "peak_watts");
    f->samples_per_joule = opt_num(r, "samples_per_joule");
    f->max_temp_c = opt_num(r, "max_temp_c");
    f->gpu_busy_pct = opt_num(r, "gpu_busy_pct");
    f->data_wait = opt_num(r, "data_wait_share");
    f->cpu_avg_w = NAN;
    char old[160];
    snprintf(old, sizeof old, "not recorded: a %s file (the counters came with ctrain-time/2)", schema);
    int v1 = !json_object_get(r, "joules_per_epoch");
    opt_str(f->energy_why, sizeof f->energy_why, r, "energy_why", v1 ? old : "");
    opt_str(f->energy_how, sizeof f->energy_how, r, "energy_how", "");
    opt_str(f->temp_why, sizeof f->temp_why, r, "temp_why", v1 ? old : "");
    opt_str(f->busy_why, sizeof f->busy_why, r, "busy_why", v1 ? old : "");
    f->price_per_hour = opt_num(money, "price_per_hour");
    f->electricity_per_kwh = opt_num(money, "electricity_per_kwh");
    f->hardware_cost = opt_num(money, "hardware_cost");
    f->epochs = opt_num(money, "epochs");
    if (!isfinite(f->epochs)) f->epochs = rf->n_epochs;
    time_money(f);
    if (v1 && !isfinite(f->break_even_hours)) snprintf(f->money_why, sizeof f->money_why, "%s", old);
}

static ct_status read_result(result_file *rf)
{
    CT_TRY(ct_json_load(&rf->root, rf->path));
    const json_t *r = rf->root, *host = NULL, *epochs = NULL, *secs = NULL;
    const char *schema;
    if (!json_is_object(r))
        return ct_fail(CT_EFORMAT, "%s: the document is a%s %s, not an object: not a file written by `ctrain time --json`", rf->path,
                       json_is_array(r) ? "n" : "", ct_json_kind(r));
    CT_TRY(need_str(rf, r, "", "schema", &schema));
    if (strncmp(schema, "ctrain-time/", 12) != 0)
        return ct_fail(CT_EFORMAT, "%s: schema \"%s\" is not a ctrain time result (expected \"%s\")", rf->path, schema, TIME_SCHEMA);
    CT_TRY(need(rf, r, "", "host", NEED_OBJECT, 0, &host));
    CT_TRY(need_str(rf, host, "host.", "hostname", &rf->hostname));
    CT_TRY(need_str(rf, host, "host.", "cpu", &rf->cpu));
    CT_TRY(need_str(rf, r, "", "ctrain_version", &rf->version));
    CT_TRY(need_str(rf, r, "", "date", &rf->date));
    const json_t *fw = json_object_get(r, "framework");
    if (json_is_string(fw)) snprintf(rf->framework, sizeof rf->framework, "%s", json_string_value(fw));
    else snprintf(rf->framework, sizeof rf->framework, "ctrain %s", rf->version);
    CT_TRY(need_str(rf, r, "", "device", &rf->device));
    const json_t *prec = json_object_get(r, "precision");
    rf->precision = json_is_string(prec) ? json_string_value(prec) : "fp32";
    CT_TRY(need_str(rf, r, "", "model", &rf->model));
    CT_TRY(need_str(rf, r, "", "protocol", &rf->protocol));
    CT_TRY(need_num(rf, r, "", "threads", &rf->threads));
    const json_t *ranks = json_object_get(r, "ranks");   /* optional: files of one-process runs before MPI have none */
    rf->ranks = json_is_number(ranks) ? json_number_value(ranks) : 1;
    CT_TRY(need_num(rf, r, "", "batch", &rf->batch));
    CT_TRY(need_num(rf, r, "", "n_train", &rf->n_train));
    CT_TRY(need_num(rf, r, "", "n_val", &rf->n_val));
    CT_TRY(need(rf, r, "", "epochs", NEED_ARRAY, 0, &epochs));
    CT_TRY(read_epochs(rf, epochs));
    CT_TRY(need(rf, r, "", "epoch_seconds", NEED_OBJECT, 0, &secs));
    CT_TRY(need_num(rf, secs, "epoch_seconds.", "median", &rf->sec_median));
    CT_TRY(need_num(rf, secs, "epoch_seconds.", "min", &rf->sec_min));
    CT_TRY(need_num(rf, secs, "epoch_seconds.", "max", &rf->sec_max));
    CT_TRY(need_num(rf, r, "", "train_samples_per_s", &rf->samples_per_s));
    CT_TRY(need_num(rf, r, "", "gflops", &rf->gflops));
    /* optional: files written before the FMA peak existed have neither */
    const json_t *fma = json_object_get(r, "fma_peak_gflops"), *blas = json_object_get(host, "blas_core");
    if (!json_is_string(blas)) blas = json_object_get(host, "blas");
    rf->fma_peak = json_is_number(fma) ? json_number_value(fma) : NAN;
    rf->blas = json_is_string(blas) ? json_string_value(blas) : "";
    const json_t *kernels = json_object_get(host, "kernels");
    rf->kernels = json_is_string(kernels) ? json_string_value(kernels) : "";
    CT_TRY(need_num(rf, r, "", "peak_gflops", &rf->peak));
    read_figures(rf, schema);
    return CT_OK;
}

#define COMPARE_LABEL 22
#define COMPARE_COL 26

/* One row: a label, then one cell per file, each cut to the column width. */
static void compare_row(const char *label, char cells[][96], int n)
{
    printf("%-*s", COMPARE_LABEL, label);
    for (int i = 0; i < n; i++) {
        int len = (int)strlen(cells[i]);
        if (len > COMPARE_COL - 2) printf("  %.*s..", COMPARE_COL - 4, cells[i]);
        else printf("  %-*s", COMPARE_COL - 2, cells[i]);
    }
    printf("\n");
}

/* A row of numbers; NaN prints as n/a. */
static void compare_num_row(const char *label, const char *fmt, const double *v, int n, char cells[][96])
{
    for (int i = 0; i < n; i++) {
        if (isfinite(v[i])) snprintf(cells[i], 96, fmt, v[i]);
        else snprintf(cells[i], 96, "n/a");
    }
    compare_row(label, cells, n);
}

ct_status time_read_baseline(const char *path, const time_setup *s, double *samples_per_s, double *ranks, double *threads)
{
    static result_file rf;
    memset(&rf, 0, sizeof rf);
    rf.path = path;
    ct_status st = read_result(&rf);
    if (st == CT_OK && (strcmp(rf.model, s->model) || strcmp(rf.protocol, s->protocol) || rf.batch != s->batch || rf.n_train != s->n_train))
        st = ct_fail(CT_EINVAL, "--baseline %s times %s (%s protocol, batch %.0f, %.0f samples), not this run's %s (%s, batch %d, %ld): "
                     "time the same workload with one rank", path, rf.model, rf.protocol, rf.batch, rf.n_train, s->model, s->protocol,
                     s->batch, s->n_train);
    *samples_per_s = rf.samples_per_s;
    *ranks = rf.ranks;
    *threads = rf.threads;
    json_decref(rf.root);
    return st;
}

#define MAX_COMPARE 16

int time_compare(int n, char **paths, const char *html)
{
    if (n > MAX_COMPARE) { fprintf(stderr, "ctrain time --compare: at most %d files\n", MAX_COMPARE); return 2; }
    static result_file rf[MAX_COMPARE];
    memset(rf, 0, sizeof rf);
    ct_status st = CT_OK;
    for (int i = 0; i < n && st == CT_OK; i++) {
        rf[i].path = paths[i];
        st = read_result(&rf[i]);
    }
    if (st != CT_OK) {
        fprintf(stderr, "ctrain time --compare: %s\n", ct_last_error());
        for (int i = 0; i < n; i++) json_decref(rf[i].root);
        return 1;
    }
    static char cells[MAX_COMPARE][96];
    double v[MAX_COMPARE] = { 0 };
    const char *s[MAX_COMPARE];
#define STR_ROW(label, field) do { for (int i = 0; i < n; i++) snprintf(cells[i], 96, "%s", rf[i].field); compare_row(label, cells, n); } while (0)
#define NUM_ROW(label, fmt, expr) do { for (int i = 0; i < n; i++) v[i] = (expr); compare_num_row(label, fmt, v, n, cells); } while (0)
    for (int i = 0; i < n; i++) {
        const char *slash = strrchr(rf[i].path, '/');
        s[i] = slash ? slash + 1 : rf[i].path;
        snprintf(cells[i], 96, "%s", s[i]);
    }
    compare_row("file", cells, n);
    STR_ROW("host", hostname);
    STR_ROW("cpu", cpu);
    STR_ROW("device", device);
    STR_ROW("precision", precision);
    STR_ROW("model", model);
    STR_ROW("protocol", protocol);
    STR_ROW("software", framework);
    STR_ROW("blas", blas);
    STR_ROW("ctrain's kernels", kernels);
    STR_ROW("date", date);
    NUM_ROW("ranks", "%.0f", rf[i].ranks);
    NUM_ROW("threads (per rank)", "%.0f", rf[i].threads);
    NUM_ROW("batch", "%.0f", rf[i].batch);
    for (int i = 0; i < n; i++) snprintf(cells[i], 96, "%.0f + %.0f", rf[i].n_train, rf[i].n_val);
    compare_row("samples train + val", cells, n);
    NUM_ROW("epochs", "%.0f", (double)rf[i].n_epochs);
    NUM_ROW("s/epoch median", "%.2f", rf[i].sec_median);
    NUM_ROW("s/epoch min", "%.2f", rf[i].sec_min);
    NUM_ROW("s/epoch max", "%.2f", rf[i].sec_max);
    NUM_ROW("train samples/s", "%.1f", rf[i].samples_per_s);
    NUM_ROW("samples/s per rank", "%.1f", rf[i].samples_per_s / rf[i].ranks);
    NUM_ROW("GFLOP/s", "%.1f", rf[i].gflops);
    NUM_ROW("FMA peak GFLOP/s", "%.1f", rf[i].fma_peak);
    NUM_ROW("of FMA peak", "%.0f%%", 100 * rf[i].gflops / rf[i].fma_peak);
    NUM_ROW("sgemm peak GFLOP/s", "%.1f", rf[i].peak);
    NUM_ROW("of sgemm peak", "%.0f%%", 100 * rf[i].gflops / rf[i].peak);
    NUM_ROW("final loss", "%.4f", rf[i].loss);
    NUM_ROW("final val_loss", "%.4f", rf[i].val_loss);
    NUM_ROW("final val_accuracy", "%.4f", rf[i].val_accuracy);
    NUM_ROW("speed vs first", "%.2fx", rf[0].samples_per_s > 0 ? rf[i].samples_per_s / rf[0].samples_per_s : NAN);
    NUM_ROW("joules/epoch", "%.1f", rf[i].fig.joules_per_epoch);
    NUM_ROW("avg W", "%.1f", rf[i].fig.avg_w);
    NUM_ROW("peak W", "%.1f", rf[i].fig.peak_w);
    NUM_ROW("samples/joule", "%.2f", rf[i].fig.samples_per_joule);
    NUM_ROW("max temperature C", "%.0f", rf[i].fig.max_temp_c);
    NUM_ROW("GPU busy", "%.0f%%", rf[i].fig.gpu_busy_pct);
    NUM_ROW("data wait", "%.1f%%", 100 * rf[i].fig.data_wait);
    NUM_ROW("rent/epoch", "%.4g", rf[i].fig.rent_per_epoch);
    NUM_ROW("rent/run", "%.4g", rf[i].fig.rent_per_run);
    NUM_ROW("electricity/run", "%.4g", rf[i].fig.power_per_run);
    NUM_ROW("break-even hours", "%.0f", rf[i].fig.break_even_hours);
#undef STR_ROW
#undef NUM_ROW
    for (int i = 1; i < n; i++)   /* N ranks against one rank on as many cores: data-parallel scaling */
        if (rf[i].ranks != rf[0].ranks && rf[i].ranks * rf[i].threads == rf[0].ranks * rf[0].threads && rf[0].samples_per_s > 0)
            printf("scaling efficiency of %s (%.0f rank%s x %.0f thread%s) against %s (%.0f rank%s x %.0f thread%s), the same %.0f "
                   "cores: %.2f\n", s[i], rf[i].ranks, rf[i].ranks == 1 ? "" : "s", rf[i].threads, rf[i].threads == 1 ? "" : "s",
                   s[0], rf[0].ranks, rf[0].ranks == 1 ? "" : "s", rf[0].threads, rf[0].threads == 1 ? "" : "s",
                   rf[0].ranks * rf[0].threads, rf[i].samples_per_s / rf[0].samples_per_s);
    for (int i = 1; i < n; i++) {
        if (strcmp(rf[i].model, rf[0].model) || strcmp(rf[i].protocol, rf[0].protocol) || rf[i].batch != rf[0].batch
            || rf[i].n_train != rf[0].n_train) {
            printf("note: %s and %s time different workloads (model, protocol, batch or samples differ): compare their "
                   "GFLOP/s rather than their seconds\n", s[0], s[i]);
        }
    }
    static char seen[MAX_COMPARE * 3][256];
    int n_seen = 0;
    for (int i = 0; i < n; i++) {   /* why a column is n/a: each reason once */
        const char *why[3] = { isfinite(rf[i].fig.joules_per_epoch) ? "" : rf[i].fig.energy_why,
                               isfinite(rf[i].fig.max_temp_c) ? "" : rf[i].fig.temp_why, "" };
        for (int k = 0; k < 3; k++) {
            int dup = !*why[k];
            for (int j = 0; j < n_seen && !dup; j++) dup = !strcmp(seen[j], why[k]);
            if (dup) continue;
            snprintf(seen[n_seen++], 256, "%s", why[k]);
            printf("n/a: %s: %s\n", s[i], why[k]);
        }
    }
    int rc = 0;
    if (html) {
        static time_figures f[MAX_COMPARE];
        for (int i = 0; i < n; i++) f[i] = rf[i].fig;
        char title[256];
        snprintf(title, sizeof title, "ctrain time: %d run%s compared", n, n == 1 ? "" : "s");
        if (time_write_html(html, title, f, n) != CT_OK) { fprintf(stderr, "ctrain time --compare: %s\n", ct_last_error()); rc = 1; }
        else printf("report page written to %s\n", html);
    }
    for (int i = 0; i < n; i++) json_decref(rf[i].root);
    return rc;
}

/* --baseline: this run's samples/s over the baseline's (see time.h). */

void time_print_scaling(const time_baseline *b, const time_setup *s, const time_run *runs, int n)
{
    const char *path = b->path;
    double base = b->samples_per_s, ranks = b->ranks, threads = b->threads;
    for (int i = 0; i < n; i++) {
        if (!runs[i].available || !(base > 0)) continue;
        printf("%s: scaling efficiency %.2f: %d rank%s x %d thread%s, %.1f %s/s, against %s's %.0f rank%s x %.0f thread%s, %.1f/s%s\n",
               runs[i].device, runs[i].samples_per_s / base, s->ranks, s->ranks == 1 ? "" : "s", s->threads, s->threads == 1 ? "" : "s",
               runs[i].samples_per_s, s->sample_name, path, ranks, ranks == 1 ? "" : "s", threads, threads == 1 ? "" : "s", base,
               ranks * threads == (double)s->ranks * s->threads ? " (the same cores)" : " (NOT the same number of cores)");
    }
}
