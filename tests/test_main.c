/* test_main.c - the test runner: runs every suite (or those whose name contains
 * one of the command-line arguments), prints a line per case, and ends with
 * "N passed, N failed" (", N skipped" when some cases cannot run here, such as
 * GPU cases without a GPU). Exit status is non-zero if any case failed. Each
 * suite's wall time follows its cases, and the slowest suites are listed before
 * the closing line: where a long run's time goes.
 *
 *   build/ctrain_tests            run everything
 *   build/ctrain_tests lstm dense run suites whose names contain "lstm" or "dense"
 *   CT_REQUIRE_GPU=1 build/ctrain_tests gpu   a GPU case that would SKIP FAILS instead
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "core/blas_select.h"
#include "core/clock.h"
#include "tests/test.h"
#include "core/threads.h"
#include "io/h5.h"

/* Every suite, in running order. A suite that is not linked in counts as a
 * failed case, so a test file cannot silently drop out of the build. */
#define SUITES(X) \
    X(core) X(blas) X(h5) X(dense) X(activation) X(add) X(dropout) X(flatten) X(pair) X(loss) \
    X(gemm_packed) X(bf16) X(lstm) X(lstm_bf16) X(lstm_rec) X(conv2d) X(conv_bf16) X(pool) X(batchnorm) X(optim) X(backend) X(smoke) X(speaker) \
    X(audio) X(fbank) X(featstore) X(stream) X(prep) X(m4a) X(metrics) X(trials) X(eval) X(model_desc) X(verify_report) X(corpusgen) \
    X(time) X(hwreport) \
    X(siamese_cnn) \
    X(idx) X(arch) X(cnn) X(cli) X(options) X(checkpoint) X(tfevents) X(rundir) X(mpi) X(fuzz) X(lock) X(memory) X(gpu) \
    X(install) \
    X(harness)
#define DECLARE(s) void suite_##s(void) __attribute__((weak));
SUITES(DECLARE)

static int n_pass, n_fail, n_skip;
static char cur_name[256];
static int cur_open, cur_failed;
static double cur_err;   /* largest error seen in the current case */

static void case_close(void)
{
    if (!cur_open) return;
    if (cur_failed) n_fail++; else n_pass++;
    if (cur_err >= 0) printf("%s %-44s max err %.2e\n", cur_failed ? "FAIL" : "PASS", cur_name, cur_err);
    else              printf("%s %s\n", cur_failed ? "FAIL" : "PASS", cur_name);
    fflush(stdout);
    cur_open = 0;
}

void t_case(const char *fmt, ...)
{
    case_close();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cur_name, sizeof cur_name, fmt, ap);
    va_end(ap);
    cur_open = 1; cur_failed = 0; cur_err = -1;
}

/* CT_REQUIRE_GPU=1 (any value but empty or 0): a case that would SKIP is a
 * failure, so that a build without CUDA or a machine without a working GPU
 * cannot look green where the GPU is what is being tested. */
static int require_gpu(void)
{
    const char *v = getenv("CT_REQUIRE_GPU");
    return v && *v && strcmp(v, "0") != 0;
}

void t_skip(const char *fmt, ...)
{
    case_close();
    va_list ap;
    va_start(ap, fmt);
    int fail = require_gpu();
    printf(fail ? "FAIL " : "SKIP ");
    vprintf(fmt, ap);
    if (fail) printf(" [CT_REQUIRE_GPU=1: a case that cannot run is a failure]");
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (fail) n_fail++; else n_skip++;
}

static void note_fail(void)
{
    if (!cur_open) t_case("(checks outside any case)");
    cur_failed = 1;
}

int t_check(int cond, const char *fmt, ...)
{
    if (cond) return 1;
    note_fail();
    va_list ap;
    va_start(ap, fmt);
    printf("  check failed in %s: ", cur_name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    return 0;
}

static double close_impl(const char *what, const float *got, const float *ref_f, const double *ref_d, size_t n, double tol)
{
    double maxref = 0, maxdiff = 0;
    size_t worst = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double r = ref_f ? ref_f[i] : ref_d[i], g = got[i];
        if (!isfinite(g) || !isfinite(r)) { bad = 1; worst = i; break; }
        if (fabs(r) > maxref) maxref = fabs(r);
        if (fabs(g - r) > maxdiff) { maxdiff = fabs(g - r); worst = i; }
    }
    double err = bad ? INFINITY : maxdiff / (maxref > 1e-6 ? maxref : 1e-6);
    if (!cur_open) t_case("(checks outside any case)");
    if (err > cur_err) cur_err = err;
    if (!(err <= tol)) {
        note_fail();
        double r = ref_f ? ref_f[worst] : ref_d[worst];
        printf("  %s: %s error %.3e > tol %.1e (worst at [%zu]: got %.9g, want %.9g, %zu values)\n",
               cur_name, what, err, tol, worst, got[worst], r, n);
    }
    return err;
}

double t_close(const char *what, const float *got, const float *ref, size_t n, double tol)
{ return close_impl(what, got, ref, NULL, n, tol); }
double t_close_d(const char *what, const float *got, const double *ref, size_t n, double tol)
{ return close_impl(what, got, NULL, ref, n, tol); }

hid_t t_golden_open(const char *file)
{
    const char *dir = getenv("CTRAIN_GOLDEN_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/golden", file);
    hid_t f;
    if (ct_h5_open(&f, path) != CT_OK) {
        t_check(0, "golden file %s: %s (regenerate with `make golden`)", path, ct_last_error());
        return -1;
    }
    return f;
}

float *t_golden(hid_t f, const char *name, size_t n)
{
    float *x = t_alloc(n);
    if (f < 0) { note_fail(); return x; }
    if (ct_h5_read_f32(f, name, x, n) != CT_OK) {
        t_check(0, "golden %s: %s", name, ct_last_error());
        memset(x, 0, (n ? n : 1) * sizeof *x);
    }
    return x;
}

int *t_golden_i32(hid_t f, const char *name, size_t n)
{
    int *x = calloc(n ? n : 1, sizeof *x);
    if (!x) { fprintf(stderr, "out of memory\n"); exit(2); }
    if (f < 0) { note_fail(); return x; }
    if (ct_h5_read_i32(f, name, x, n) != CT_OK) {
        t_check(0, "golden %s: %s", name, ct_last_error());
        memset(x, 0, (n ? n : 1) * sizeof *x);
    }
    return x;
}

double t_golden_attr(hid_t f, const char *name)
{
    double v = 0;
    if (f < 0) { note_fail(); return 0; }
    if (ct_h5_attr_read_double(f, "/", name, &v) != CT_OK) t_check(0, "golden attribute %s: %s", name, ct_last_error());
    return v;
}

/* The command-line cases run ctrain in a scratch directory of their own, so that what a
 * run leaves in its working directory (runs/MODEL-DATE-TIME) never lands in the source
 * tree; it is removed when the runner ends. The binary's path is made absolute first. */
static char scratch[64], ctrain_abs[4096];

const char *t_scratch_dir(void)
{
    if (!scratch[0]) {
        snprintf(scratch, sizeof scratch, "/tmp/ctrain_tests_XXXXXX");
        if (!mkdtemp(scratch)) { fprintf(stderr, "cannot create a scratch directory under /tmp\n"); exit(2); }
        chmod(scratch, 01777);   /* the cases that run ctrain as user nobody work here too */
    }
    return scratch;
}

int t_epoch_losses(const char *log, double *loss, double *val, int max)
{
    int n = 0;
    for (const char *p = strstr(log, " - loss: "); p && n < max; p = strstr(p + 1, " - loss: ")) {
        const char *v = strstr(p, "val_loss: ");
        loss[n] = atof(p + 9);
        val[n] = v ? atof(v + 10) : NAN;
        n++;
    }
    return n;
}

const char *t_ctrain_bin(void)
{
    if (!ctrain_abs[0]) {
        const char *bin = getenv("CTRAIN_BIN");
        char path[4096];
        if (!bin) bin = "bin/ctrain";
        if (!realpath(bin, path)) {   /* already a shell word (the tarball's launcher quotes it), or missing: the shell says so */
            snprintf(ctrain_abs, sizeof ctrain_abs, "%s", bin);
            return ctrain_abs;
        }
        size_t k = 0;
        ctrain_abs[k++] = '\'';                    /* 'path', each ' written as '\'' */
        for (const char *c = path; *c && k + 6 < sizeof ctrain_abs; c++) {
            if (*c == '\'') { memcpy(ctrain_abs + k, "'\\''", 4); k += 4; }
            else ctrain_abs[k++] = *c;
        }
        ctrain_abs[k++] = '\'';
        ctrain_abs[k] = '\0';
    }
    return ctrain_abs;
}

int t_run_ctrain(const char *args, char *out, size_t n)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s %s 2>&1", t_scratch_dir(), t_ctrain_bin(), args);
    FILE *p = popen(cmd, "r");
    if (!p) { out[0] = '\0'; return -1; }
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

float *t_alloc(size_t n)
{
    float *x = calloc(n ? n : 1, sizeof *x);
    if (!x) { fprintf(stderr, "out of memory\n"); exit(2); }
    return x;
}

void t_fill_uniform(float *x, size_t n, float lo, float hi, ct_rng *r)
{
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * ct_rng_uniform(r);
}

double t_dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

double t_gradcheck(const char *what, t_objective f, void *ctx, float *x, const float *analytic,
                   size_t n, float h, double tol, int max_coords, int kinks)
{
    /* choose the coordinates: all, or max_coords of them drawn from a fixed seed */
    size_t m = (max_coords <= 0 || (size_t)max_coords >= n) ? n : (size_t)max_coords;
    size_t *idx = malloc((m ? m : 1) * sizeof *idx);
    if (!idx) { fprintf(stderr, "out of memory\n"); exit(2); }
    ct_rng r;
    ct_rng_seed(&r, 12345, 99);
    for (size_t k = 0; k < m; k++) idx[k] = (m == n) ? k : ct_rng_below(&r, (uint32_t)n);

    double f0 = kinks ? f(ctx) : 0, maxnum = 0, maxdiff = 0;
    size_t skipped = 0, worst = 0;
    double worst_num = 0, worst_ana = 0;
    for (size_t k = 0; k < m; k++) {
        size_t i = idx[k];
        float saved = x[i];
        x[i] = saved + h; double fp = f(ctx);
        x[i] = saved - h; double fm = f(ctx);
        x[i] = saved;
        double hp = (double)(saved + h) - saved, hm = saved - (double)(saved - h);  /* the steps float really took */
        double num = (fp - fm) / (hp + hm);
        if (kinks) {
            double sr = (fp - f0) / hp, sl = (f0 - fm) / hm;
            if (fabs(sr - sl) > 10.0 * h * (1.0 + fabs(sr) + fabs(sl))) { skipped++; continue; }
        }
        double d = fabs(num - analytic[i]);
        if (fabs(num) > maxnum) maxnum = fabs(num);
        if (fabs(analytic[i]) > maxnum) maxnum = fabs(analytic[i]);
        if (d > maxdiff || !isfinite(d)) { maxdiff = isfinite(d) ? d : INFINITY; worst = i; worst_num = num; worst_ana = analytic[i]; }
    }
    free(idx);
    double err = maxdiff / (maxnum > 1e-6 ? maxnum : 1e-6);
    if (!cur_open) t_case("(checks outside any case)");
    if (err > cur_err) cur_err = err;
    if (!(err <= tol)) {
        note_fail();
        printf("  %s: gradient of %s: error %.3e > tol %.1e (worst at [%zu]: analytic %.9g, numeric %.9g)\n",
               cur_name, what, err, tol, worst, worst_ana, worst_num);
    }
    if (kinks && skipped * 4 > m) {
        note_fail();
        printf("  %s: gradient of %s: %zu of %zu coordinates sat on kinks; choose inputs away from them\n",
               cur_name, what, skipped, m);
    }
    return err;
}

int main(int argc, char **argv)
{
    ct_blas_select(argv);   /* OpenBLAS on the best kernels it has for this CPU (core/blas_select.h) */
    ct_threads_set(1);   /* deterministic and quiet; the benches measure threads */
    ct_h5_quiet();
    struct { const char *name; void (*fn)(void); } suites[] = {
#define ENTRY(s) { #s, suite_##s },
        SUITES(ENTRY)
    };
    enum { N_SUITES = sizeof suites / sizeof suites[0] };
    double seconds[N_SUITES] = { 0 }, total = 0;
    for (size_t i = 0; i < N_SUITES; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++) if (strstr(suites[i].name, argv[a])) want = 1;
        if (!want) continue;
        printf("== %s\n", suites[i].name);
        fflush(stdout);
        double t0 = ct_now();
        if (!suites[i].fn) {
            t_case("%s/linked", suites[i].name);
            t_check(0, "suite_%s is not linked into the test binary", suites[i].name);
        } else {
            suites[i].fn();
        }
        case_close();
        seconds[i] = ct_now() - t0;
        total += seconds[i];
        printf("== %s: %.1f s\n", suites[i].name, seconds[i]);
    }
    /* the five slowest suites, slowest first (selection over a few dozen entries) */
    printf("slowest suites:");
    for (int k = 0; k < 5; k++) {
        size_t best = N_SUITES;
        for (size_t i = 0; i < N_SUITES; i++)
            if (seconds[i] > 0 && (best == N_SUITES || seconds[i] > seconds[best])) best = i;
        if (best == N_SUITES) break;
        printf("%s %s %.1f s (%.0f%%)", k ? "," : "", suites[best].name, seconds[best], 100.0 * seconds[best] / (total > 0 ? total : 1));
        seconds[best] = -seconds[best];   /* taken */
    }
    printf("; %.1f s in all\n", total);
    if (scratch[0]) {   /* the command-line cases' working directory and what the runs left there */
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
        if (system(cmd) != 0) printf("note: could not remove %s\n", scratch);
    }
    if (n_skip) printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    else printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
