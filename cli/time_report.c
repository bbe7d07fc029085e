/* time_report.c - the results of `ctrain time` that travel: the JSON file of
 * one device's run, the SVG picture, and `ctrain time --compare`, which reads
 * JSON files back and prints the runs side by side (a desktop next to a cloud
 * instance, last month's build next to this one).
 *
 * JSON schema "ctrain-time/1" (one object; numbers that are not finite are null):
 *   schema, framework ("ctrain 0.1.0"; bench/torch_timing.py writes "pytorch ..."), ctrain_version,
 *   date (UTC, ISO 8601), command
 *   host: { hostname, os, cpu, cpu_features, logical_cores, blas, blas_core, kernels, hdf5, gpu }
 *                                            blas_core: the kernels OpenBLAS ran and who chose them;
 *                                            kernels: ctrain's own (AVX-512, AVX2 or none; absent in
 *                                            files written before they were recorded)
 *   model, model_desc, protocol, data, data_desc, device, device_desc
 *   threads, batch, seed, n_train, n_val     samples per epoch (pairs or images)
 *   ranks                                    data-parallel ranks (mpirun -np N), each with `threads`
 *                                            threads; the throughput and the peaks are the whole job's
 *                                            (a file without it: 1)
 *   warmup_epochs                            leading epochs left out of the statistics
 *   flops_per_sample, flops_counted          FLOPs of one training step per sample, and what they count
 *   epochs: [ { epoch, seconds, train_seconds, val_seconds, loss, accuracy, val_loss, val_accuracy } ]
 *   epoch_seconds: { median, min, max }      over the epochs after the warm-up
 *   train_samples_per_s, gflops              training part of those epochs
 *   fma_peak_gflops, fma_peak_best_gflops, fma_peak_what, fraction_of_fma_peak
 *                                            the FP32 FMA peak with the same threads (core/peak.h): "of peak"
 *   peak_gflops, peak_best_gflops, peak_what, fraction_of_peak
 *                                            the sgemm peak (these names predate the FMA peak; files
 *                                            without the fma_ fields read as n/a in --compare)
 *   layers (with --layers): [ { name, forward_ms, backward_ms, share, gflops } ], profiled_batches
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <hdf5.h>
#include "cli/cli.h"
#include "cli/time.h"
#include "core/blas_select.h"
#include "layers/gemm_packed.h"
#include "core/threads.h"
#include "cuda/device.h"
#include "io/json.h"
#include "io/svg.h"

/* ---- writing ---- */
static void write_host(ct_json_writer *w)
{
    char host[256] = "unknown", os[512] = "unknown", cpu[256], features[256];
    ct_cpu_features f;
    ct_cpu_detect(&f);
    ct_cpu_describe(&f, features, sizeof features);
    struct utsname u;
    unsigned maj, min, rel;
    char hdf5[64];
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
    if (uname(&u) == 0) snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    cli_cpu_model(cpu, sizeof cpu);
    H5get_libversion(&maj, &min, &rel);
    snprintf(hdf5, sizeof hdf5, "%u.%u.%u", maj, min, rel);
    ct_json_object_begin(w, "host");
    ct_json_str(w, "hostname", host);
    ct_json_str(w, "os", os);
    ct_json_str(w, "cpu", cpu);
    ct_json_str(w, "cpu_features", features);
    ct_json_int(w, "logical_cores", ct_cpu_count());
    ct_json_str(w, "blas", ct_blas_config());
    ct_json_str(w, "blas_core", ct_blas_select_note());
    ct_json_str(w, "kernels", ct_kernels_name(ct_kernels_get()));
    ct_json_str(w, "hdf5", hdf5);
    ct_json_str(w, "gpu", ct_gpu_compiled() ? "CUDA backend compiled in" : "not compiled in (CPU-only build)");
    ct_json_object_end(w);
}

static void write_epochs(ct_json_writer *w, const time_run *r)
{
    ct_json_array_begin(w, "epochs");
    for (int e = 0; e < r->n_epochs; e++) {
        const ct_epoch_log *l = &r->hist[e];
        ct_json_object_begin(w, NULL);
        ct_json_int(w, "epoch", e + 1);
        ct_json_num(w, "seconds", l->seconds);
        ct_json_num(w, "train_seconds", l->train_seconds);
        ct_json_num(w, "val_seconds", l->val_seconds);
        ct_json_num(w, "loss", l->loss);
        ct_json_num(w, "accuracy", l->accuracy);
        ct_json_num(w, "val_loss", l->val_loss);
        ct_json_num(w, "val_accuracy", l->val_accuracy);
        ct_json_object_end(w);
    }
    ct_json_array_end(w);
}

static void write_layers(ct_json_writer *w, const time_run *r)
{
    double nb = (double)r->prof_batches, step = nb > 0 ? r->prof_train_seconds / nb : 0;
    ct_json_int(w, "profiled_batches", r->prof_batches);
    ct_json_array_begin(w, "layers");
    for (int i = 0; nb > 0 && i < r->n_layers; i++) {
        const time_layer *l = &r->layer[i];
        double t = l->fwd_s + l->bwd_s;
        ct_json_object_begin(w, NULL);
        ct_json_str(w, "name", l->name);
        ct_json_num(w, "forward_ms", 1e3 * l->fwd_s / nb);
        ct_json_num(w, "backward_ms", 1e3 * l->bwd_s / nb);
        ct_json_num(w, "share", step > 0 ? t / nb / step : NAN);
        ct_json_num(w, "gflops", l->flops_per_sample > 0 && t > 0 ? l->flops_per_sample * (double)r->prof_samples / t / 1e9 : NAN);
        ct_json_object_end(w);
    }
    ct_json_array_end(w);
}

ct_status time_write_json(const char *path, const time_setup *s, const time_run *r)
{
    FILE *f = fopen(path, "w");
    if (!f) return ct_fail(CT_EIO, "--json %s: cannot write the file (directory missing or not writable?)", path);
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    ct_json_writer w;
    ct_json_writer_init(&w, f);
    ct_json_object_begin(&w, NULL);
    ct_json_str(&w, "schema", TIME_SCHEMA);
    ct_json_str(&w, "framework", "ctrain " CTRAIN_VERSION);
    ct_json_str(&w, "ctrain_version", CTRAIN_VERSION);
    ct_json_str(&w, "date", date);
    ct_json_str(&w, "command", s->command);
    write_host(&w);
    ct_json_str(&w, "model", s->model);
    ct_json_str(&w, "model_desc", s->model_desc);
    ct_json_str(&w, "protocol", s->protocol);
    ct_json_str(&w, "data", s->data);
    ct_json_str(&w, "data_desc", s->data_desc);
    ct_json_str(&w, "device", r->device);
    ct_json_str(&w, "device_desc", r->device_desc);
    ct_json_int(&w, "threads", s->threads);
    ct_json_int(&w, "ranks", s->ranks > 0 ? s->ranks : 1);
    ct_json_int(&w, "batch", s->batch);
    ct_json_int(&w, "seed", s->seed);
    ct_json_int(&w, "n_train", s->n_train);
    ct_json_int(&w, "n_val", s->n_val);
    ct_json_int(&w, "warmup_epochs", s->warmup);
    ct_json_num(&w, "flops_per_sample", s->flops_per_sample);
    ct_json_str(&w, "flops_counted", s->flops_counted);
    write_epochs(&w, r);
    ct_json_object_begin(&w, "epoch_seconds");
    ct_json_num(&w, "median", r->sec_median);
    ct_json_num(&w, "min", r->sec_min);
    ct_json_num(&w, "max", r->sec_max);
    ct_json_object_end(&w);
    ct_json_num(&w, "train_samples_per_s", r->samples_per_s);
    ct_json_num(&w, "gflops", r->gflops);
    ct_json_num(&w, "fma_peak_gflops", r->fma_peak > 0 ? r->fma_peak : NAN);
    ct_json_num(&w, "fma_peak_best_gflops", r->fma_peak_best > 0 ? r->fma_peak_best : NAN);
    ct_json_str(&w, "fma_peak_what", r->fma_peak_what);
    ct_json_num(&w, "fraction_of_fma_peak", r->fma_peak > 0 ? r->gflops / r->fma_peak : NAN);
    ct_json_num(&w, "peak_gflops", r->peak > 0 ? r->peak : NAN);
    ct_json_num(&w, "peak_best_gflops", r->peak_best > 0 ? r->peak_best : NAN);
    ct_json_str(&w, "peak_what", r->peak_what);
    ct_json_num(&w, "fraction_of_peak", r->peak > 0 ? r->gflops / r->peak : NAN);
    if (r->n_layers) write_layers(&w, r);
    ct_json_object_end(&w);
    ct_status st = ct_json_writer_finish(&w);
    if (fclose(f) != 0 && st == CT_OK) st = CT_EIO;
    if (st != CT_OK) return ct_fail(st, "--json %s: writing failed (disk full?)", path);
    return CT_OK;
}

/* ---- the picture ---- */
ct_status time_write_svg(const char *path, const time_setup *s, const time_run *runs, int n_runs)
{
    /* per device: seconds per epoch, training loss, validation loss (x = epoch number) */
    ct_svg_series secs[8], loss[16];
    int ns = 0, nl = 0, n = 0;
    for (int i = 0; i < n_runs; i++) if (runs[i].available && runs[i].n_epochs > n) n = runs[i].n_epochs;
    double *buf = ct_malloc(((size_t)n + 1) * (1 + 3 * (size_t)n_runs) * sizeof *buf, "picture");
    if (!buf) return CT_ENOMEM;
    double *x = buf, *y = buf + n;
    char names[16][64];
    for (int e = 0; e < n; e++) x[e] = e + 1;
    for (int i = 0; i < n_runs && ns < 8; i++) {
        const time_run *r = &runs[i];
        if (!r->available) continue;
        double *sy = y, *ly = y + n, *vy = y + 2 * n;
        y += 3 * n;
        for (int e = 0; e < r->n_epochs; e++) {
            sy[e] = r->hist[e].seconds;
            ly[e] = r->hist[e].loss;
            vy[e] = s->n_val > 0 ? r->hist[e].val_loss : NAN;
        }
        secs[ns++] = (ct_svg_series){ r->device, x, sy, r->n_epochs, 0, i };
        snprintf(names[nl], sizeof names[nl], "%s loss", r->device);
        loss[nl] = (ct_svg_series){ names[nl], x, ly, r->n_epochs, 0, i };
        nl++;
        snprintf(names[nl], sizeof names[nl], "%s val_loss", r->device);
        loss[nl] = (ct_svg_series){ names[nl], x, vy, r->n_epochs, 1, i };
        nl++;
    }
    ct_svg_chart charts[2] = {
        { "Seconds per epoch (epoch 1: warm-up)", "epoch", "seconds", secs, ns, 1, 1 },
        { "Loss (solid: training, dashed: validation)", "epoch", "loss", loss, nl, 1, 0 },
    };
    char title[512], host[128] = "unknown";
    gethostname(host, sizeof host - 1);
    snprintf(title, sizeof title, "ctrain time %s, protocol %s, batch %d, %d thread%s, on %s", s->model, s->protocol,
             s->batch, s->threads, s->threads == 1 ? "" : "s", host);
    ct_status st = ct_svg_write(path, title, charts, 2);
    free(buf);
    return st;
}

/* ---- reading back: --compare ---- */
typedef struct {
    const char *path;
    json_t *root;
    const char *hostname, *cpu, *device, *model, *protocol, *version, *date;
    char framework[96];                    /* "framework" when present, else "ctrain VERSION" */
    double threads, ranks, batch, n_train, n_val;
    double sec_median, sec_min, sec_max, samples_per_s, gflops, peak, fma_peak;
    const char *blas;                      /* host.blas_core (else host.blas), "" when absent */
    const char *kernels;                   /* host.kernels, "" when absent (older files, PyTorch's) */
    int n_epochs;
    double loss, val_loss, val_accuracy;   /* of the last epoch */
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

static ct_status read_epochs(result_file *rf, const json_t *epochs)
{
    static const char *fields[] = { "seconds", "train_seconds", "val_seconds", "loss", "accuracy", "val_loss", "val_accuracy" };
    double v[7] = { 0 };
    size_t n = json_array_size(epochs);
    if (n < 1) return ct_fail(CT_EFORMAT, "%s: \"epochs\" is empty: the run recorded no epoch", rf->path);
    for (size_t e = 0; e < n; e++) {
        const json_t *ep = json_array_get(epochs, e);
        char where[48];
        snprintf(where, sizeof where, "epochs[%zu].", e);
        if (!json_is_object(ep))
            return ct_fail(CT_EFORMAT, "%s: epochs[%zu] should be an object, but it is a %s", rf->path, e, ct_json_kind(ep));
        for (int k = 0; k < 7; k++) CT_TRY(need_num(rf, ep, where, fields[k], &v[k]));
    }
    rf->n_epochs = (int)n;
    rf->loss = v[3];
    rf->val_loss = v[5];
    rf->val_accuracy = v[6];
    return CT_OK;
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
    return need_num(rf, r, "", "peak_gflops", &rf->peak);
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

int time_compare(int n, char **paths)
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
    for (int i = 0; i < n; i++) json_decref(rf[i].root);
    return 0;
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
