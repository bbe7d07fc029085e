/* test_time.c - `ctrain time`, the timing harness, as a user meets it, and the
 * small JSON and SVG writers behind it:
 *   - the JSON writer (io/json.h, on jansson) escapes every string so that jansson
 *     and Python's json read back exactly what was written, and keeps ctrain's
 *     layout; a broken document is refused with jansson's line and column;
 *   - the SVG writer produces well-formed XML (parsed by python3's xml.etree);
 *   - the command on the smoke protocol: the table's header, rows and columns,
 *     the JSON schema, the picture, --per-layer listing every layer (and its old
 *     spelling --layers, with its note), --compare (files of today and a committed
 *     file of an older ctrain),
 *     clear errors for bad options and bad files, and the GPU saying why it is
 *     unavailable.
 * No test looks at how fast anything ran: timings depend on the machine. */
#define _XOPEN_SOURCE 700   /* realpath */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "tests/test.h"
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"
#include "io/json.h"
#include "io/svg.h"
#include "cuda/device.h"
#include "catalog/session.h"

#define PYTHON "/usr/bin/python3"

static char out[1 << 17];

/* Runs a python3 snippet with `file` as sys.argv[1]; returns its exit status (-1: no python3 here). */
static int python_check(const char *code, const char *file)
{
    if (access(PYTHON, X_OK) != 0) return -1;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, PYTHON " -c '%s' %s", code, file);
    int st = system(cmd);
    return st == -1 ? -1 : WEXITSTATUS(st);
}

static void check_python(const char *what, const char *code, const char *file)
{
    int rc = python_check(code, file);
    if (rc == -1) printf("  (%s: %s not found, Python check left out)\n", what, PYTHON);
    else t_check(rc == 0, "%s: python3 check failed (exit %d) on %s", what, rc, file);
}

static void tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "/tmp/ctrain_time_%ld_%s", (long)getpid(), name);
}

/* ---- JSON ---- */
static const char *TRICKY[] = {
    "plain", "quote \" and backslash \\", "new\nline\ttab\rcr", "\b\f and \x01\x1f controls",
    "UTF-8: caf\xc3\xa9 \xe2\x82\xac", "slash / and </script>", "",
};
#define N_TRICKY (int)(sizeof TRICKY / sizeof TRICKY[0])

static void test_json_roundtrip(void)
{
    t_case("time/json writer escapes strings; jansson and python3 read them back");
    char path[256];
    tmp_path(path, sizeof path, "rt.json");
    FILE *f = fopen(path, "w");
    if (!t_check(f != NULL, "cannot write %s", path)) return;
    ct_json_writer w;
    ct_json_writer_init(&w, f);
    ct_json_object_begin(&w, NULL);
    ct_json_array_begin(&w, "strings");
    for (int i = 0; i < N_TRICKY; i++) ct_json_str(&w, NULL, TRICKY[i]);
    ct_json_array_end(&w);
    ct_json_str(&w, "key \"with\" quotes\n", "value");
    ct_json_num(&w, "pi", 3.14159265);
    ct_json_num(&w, "nan", NAN);
    ct_json_int(&w, "big", 1234567890L);
    ct_json_bool(&w, "yes", 1);
    ct_json_null(&w, "nothing");
    ct_json_array_begin(&w, "empty");
    ct_json_array_end(&w);
    ct_json_object_begin(&w, "nested");
    ct_json_num(&w, "neg", -2.5e-7);
    ct_json_object_end(&w);
    ct_json_str(&w, "latin1", "caf\xe9");
    ct_json_object_end(&w);
    t_check(ct_json_writer_finish(&w) == CT_OK, "finish: %s", ct_last_error());
    fclose(f);

    json_t *root = NULL;
    if (!t_check(ct_json_load(&root, path) == CT_OK, "reading it back: %s", ct_last_error())) return;
    const json_t *s = json_object_get(root, "strings");
    t_check(json_is_array(s) && json_array_size(s) == N_TRICKY, "strings array");
    for (size_t i = 0; i < json_array_size(s) && i < N_TRICKY; i++)
        t_check(json_is_string(json_array_get(s, i)) && !strcmp(json_string_value(json_array_get(s, i)), TRICKY[i]),
                "string %zu differs after the round trip", i);
    const json_t *k = json_object_get(root, "key \"with\" quotes\n"), *pi = json_object_get(root, "pi");
    t_check(json_is_string(k) && !strcmp(json_string_value(k), "value"), "escaped member name");
    t_check(json_is_number(pi) && fabs(json_number_value(pi) - 3.14159265) < 1e-12, "number");
    t_check(json_is_null(json_object_get(root, "nan")), "NaN is written as null");
    t_check(json_integer_value(json_object_get(root, "big")) == 1234567890, "integer");
    t_check(json_is_true(json_object_get(root, "yes")), "true");
    t_check(json_is_array(json_object_get(root, "empty")) && json_array_size(json_object_get(root, "empty")) == 0, "empty array");
    t_check(json_number_value(json_object_get(json_object_get(root, "nested"), "neg")) == -2.5e-7, "nested object");
    t_check(!strcmp(json_string_value(json_object_get(root, "latin1")) ? json_string_value(json_object_get(root, "latin1")) : "", "caf?"),
            "a string that is not UTF-8 keeps its ASCII");
    json_decref(root);
    check_python("json writer", "import json,sys; d=json.load(open(sys.argv[1],encoding=\"utf-8\")); s=d[\"strings\"]; "
                 "assert s[1]==\"quote \\\" and backslash \\\\\" and s[2]==\"new\\nline\\ttab\\rcr\", s; "
                 "assert s[3]==\"\\b\\f and \\x01\\x1f controls\" and s[4]==\"UTF-8: caf\\u00e9 \\u20ac\", s; "
                 "assert d[\"nan\"] is None and d[\"key \\\"with\\\" quotes\\n\"]==\"value\" and d[\"nested\"][\"neg\"]==-2.5e-7", path);
    unlink(path);

    t_case("time/json writer keeps ctrain's layout: indent 2, members in order, 10 digits, whole numbers bare");
    static char text[1024];
    f = fopen(path, "w+");
    if (!t_check(f != NULL, "cannot write %s", path)) return;
    ct_json_writer_init(&w, f);
    ct_json_object_begin(&w, NULL);
    ct_json_str(&w, "z", "first");
    ct_json_num(&w, "seconds", 20);
    ct_json_num(&w, "loss", 0.123456789012);
    ct_json_num(&w, "big", 123456789012.0);
    ct_json_int(&w, "n", -3);
    ct_json_array_begin(&w, "e");
    ct_json_array_end(&w);
    ct_json_array_begin(&w, "a");
    ct_json_num(&w, NULL, 1.5);
    ct_json_object_begin(&w, NULL);
    ct_json_null(&w, "x");
    ct_json_object_end(&w);
    ct_json_array_end(&w);
    ct_json_object_end(&w);
    t_check(ct_json_writer_finish(&w) == CT_OK, "finish: %s", ct_last_error());
    rewind(f);
    size_t got = fread(text, 1, sizeof text - 1, f);
    text[got] = '\0';
    fclose(f);
    const char *want = "{\n  \"z\": \"first\",\n  \"seconds\": 20,\n  \"loss\": 0.123456789,\n  \"big\": 1.23456789e11,\n"
                       "  \"n\": -3,\n  \"e\": [],\n  \"a\": [\n    1.5,\n    {\n      \"x\": null\n    }\n  ]\n}\n";
    t_check(!strcmp(text, want), "the text differs:\n%s\nwanted:\n%s", text, want);
    unlink(path);
}

static void test_json_reader(void)
{
    t_case("time/json reader refuses broken documents, naming the line and column");
    static const struct { const char *text, *expect; } bad[] = {
        { "{\"a\": 1,}", "test:1:9: " },
        { "{\"a\" 1}", "test:1:6: " },
        { "[1 2]", "test:1:4: " },
        { "{\n  \"a\": [1,\n  2", "test:3:3: " },
        { "{\"a\": tru}", "test:1:" },
        { "{} {}", "end of file expected" },
        { "", "truncated" },
    };
    json_t *root = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ct_status st = ct_json_parse(&root, bad[i].text, strlen(bad[i].text), "test");
        t_check(st == CT_EFORMAT && !root && strstr(ct_last_error(), bad[i].expect), "\"%s\": status %d, message \"%s\" lacks \"%s\"",
                bad[i].text, (int)st, ct_last_error(), bad[i].expect);
        json_decref(root);
    }
    t_check(ct_json_load(&root, "/nonexistent/x.json") == CT_EIO && strstr(ct_last_error(), "/nonexistent/x.json"),
            "a missing file names itself: %s", ct_last_error());
}

/* ---- SVG ---- */
static void test_svg(void)
{
    t_case("time/svg ticks are 1, 2 or 5 times a power of ten and cover the range");
    double first, step;
    int n = ct_svg_ticks(0, 1, 6, &first, &step);
    t_check(n == 6 && first == 0 && fabs(step - 0.2) < 1e-12, "[0, 1]: %d ticks from %g step %g", n, first, step);
    n = ct_svg_ticks(3.2, 97, 6, &first, &step);
    t_check(step == 20 && first == 20 && n == 4, "[3.2, 97]: %d ticks from %g step %g", n, first, step);
    n = ct_svg_ticks(0.0012, 0.0031, 5, &first, &step);
    t_check(fabs(step - 0.0005) < 1e-15 && n >= 3, "[0.0012, 0.0031]: %d ticks step %g", n, step);

    t_case("time/svg writer makes well-formed XML with axes, ticks, labels and a legend");
    char path[256];
    tmp_path(path, sizeof path, "plot.svg");
    double x[] = { 1, 2, 3, 4 }, a[] = { 3.5, 2.0, 2.1, 1.9 }, b[] = { 0.9, NAN, 0.5, 0.45 }, one[] = { 7 };
    ct_svg_series s1[] = { { "cpu <fast> & \"free\"", x, a, 4, 0, 0 }, { "gpu", x, b, 4, 1, 1 } };
    ct_svg_series s2[] = { { "single", x, one, 1, 0, 2 } };
    ct_svg_chart charts[] = {
        { "Seconds per epoch", "epoch", "seconds", s1, 2, 1, 1 },
        { "One point & <escapes>", "epoch", "loss", s2, 1, 1, 0 },
        { "Empty", "x", "y", NULL, 0, 0, 0 },
    };
    t_check(ct_svg_write(path, "title with 'quotes' & <tags>", charts, 3) == CT_OK, "write: %s", ct_last_error());
    check_python("svg", "import sys, xml.etree.ElementTree as E; r=E.parse(sys.argv[1]).getroot(); ns=\"{http://www.w3.org/2000/svg}\"; "
                 "assert r.tag==ns+\"svg\", r.tag; t=[e.text for e in r.iter(ns+\"text\")]; "
                 "assert \"cpu <fast> & \\\"free\\\"\" in t and \"gpu\" in t and \"single\" in t, t; "
                 "assert \"title with \\x27quotes\\x27 & <tags>\" in t and \"seconds\" in t and \"epoch\" in t and \"no data\" in t, t; "
                 "assert \"0\" in t and len(r.findall(ns+\"polyline\")) >= 3", path);
    t_check(ct_svg_write("/nonexistent-dir/p.svg", "t", charts, 1) == CT_EIO && strstr(ct_last_error(), "/nonexistent-dir/p.svg"),
            "unwritable path: %s", ct_last_error());
    unlink(path);
}

/* ---- the command ---- */
/* The line of the table that starts with `device` (NULL if none). */
static const char *table_line(const char *text, const char *device)
{
    size_t n = strlen(device);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, device, n) && p[n] == ' ') return p;
    return NULL;
}

/* Whitespace-separated words on the line starting at p. */
static int words_on_line(const char *p)
{
    int n = 0, in = 0;
    for (; *p && *p != '\n'; p++) {
        if (*p != ' ' && !in) n++;
        in = *p != ' ';
    }
    return n;
}

/* The line starting at p (at most n-1 characters), "" for NULL. */
static const char *line_of(char *buf, size_t n, const char *p)
{
    size_t len = p ? strcspn(p, "\n") : 0;
    if (len >= n) len = n - 1;
    memcpy(buf, p ? p : "", len);
    buf[len] = '\0';
    return buf;
}

static void check_table(const char *what)
{
    char head[512], cpu[512], gpu[512];
    line_of(head, sizeof head, table_line(out, "device"));
    line_of(cpu, sizeof cpu, table_line(out, "cpu"));
    line_of(gpu, sizeof gpu, table_line(out, "gpu"));
    t_check(strstr(out, "seconds per epoch") && *head, "%s: no table header: %s", what, out);
    t_check(strstr(head, "epochs") && strstr(head, "median") && strstr(head, "min") && strstr(head, "max") && strstr(head, "samples/s")
            && strstr(head, "GFLOP/s") && strstr(head, "of peak") && strstr(head, "of sgemm") && strstr(head, "vs cpu")
            && words_on_line(head) == 15, "%s: table header lacks a column: %s", what, head);
    t_check(strstr(out, "FP32 FMA peak") && strstr(out, "sgemm peak"), "%s: the two peaks are not named above the table: %s", what, out);
    t_check(words_on_line(cpu) == 12 && !strstr(cpu, "n/a"), "%s: the cpu row should have 12 columns, all measured: %s", what, cpu);
    int have_gpu = ct_gpu_visible() > 0;   /* the run timed it: a row of numbers (the CPU-only FMA columns read n/a) */
    t_check(words_on_line(gpu) == 12 && strstr(gpu, "n/a") && (!have_gpu || strstr(gpu, "x")),
            "%s: the gpu row should have 12 columns reading n/a%s: %s", what, have_gpu ? " where a GPU has none, and its ratio to the cpu" : "", gpu);
    t_check(strstr(out, "FMA peak: FP32 FMA loop") != NULL, "%s: how the FMA peak was measured is not said: %s", what, out);
    t_check(have_gpu ? !strstr(out, "gpu: unavailable: ") : strstr(out, "gpu: unavailable: ") != NULL,
            have_gpu ? "%s: a GPU is here but the run says it is unavailable" : "%s: no line saying why the gpu is unavailable", what);
    t_check(strstr(out, "CPU: ") && strstr(out, "BLAS: ") && strstr(out, "Protocol: smoke"), "%s: no hardware/protocol header", what);
}

static const char *PY_SCHEMA =
    "import json,sys; d=json.load(open(sys.argv[1])); num=(int,float); "
    "need={\"schema\":str,\"device\":str,\"model\":str,\"protocol\":str,\"threads\":int,\"batch\":int,\"epochs\":list,"
    "\"train_samples_per_s\":num,\"gflops\":num,\"peak_gflops\":num,\"host\":dict,\"ctrain_version\":str,"
    "\"fma_peak_gflops\":num,\"fraction_of_fma_peak\":num,\"fma_peak_what\":str}; "
    "[sys.exit(\"%s: %s\" % (k, type(d.get(k)))) for k,t in need.items() if not isinstance(d.get(k), t)]; "
    "assert d[\"schema\"]==\"ctrain-time/2\" and d[\"device\"]==\"cpu\" and d[\"protocol\"]==\"smoke\"; "
    "assert all(k in d[\"host\"] for k in (\"hostname\",\"cpu\",\"blas\",\"blas_core\",\"cpu_features\")); "
    "assert 0 < d[\"fma_peak_gflops\"] < 1e7 and abs(d[\"fraction_of_fma_peak\"] - d[\"gflops\"] / d[\"fma_peak_gflops\"]) < 1e-9; "
    "e=d[\"epochs\"]; assert len(e)==2 and all(isinstance(x[k],num) for x in e for k in "
    "(\"seconds\",\"train_seconds\",\"val_seconds\",\"loss\",\"accuracy\",\"val_loss\",\"val_accuracy\")); "
    "h=d[\"hardware\"]; assert h[\"sample_hz\"] > 0 and 0 <= h[\"sampler_cpu_seconds\"] < h[\"sampled_seconds\"] "
    "and 0 <= h[\"mark_seconds\"] < h[\"sampled_seconds\"], h; "
    "assert [l[\"name\"] for l in d[\"layers\"]]";

/* The JSON written by the command, read back: the schema's fields and types. */
static void check_json_file(const char *path, const char *model, int epochs)
{
    json_t *root = NULL;
    if (!t_check(ct_json_load(&root, path) == CT_OK, "%s: %s", path, ct_last_error())) return;
    const char *strings[] = { "schema", "model", "device", "protocol", "ctrain_version", "command" };
    for (int i = 0; i < 6; i++) t_check(json_is_string(json_object_get(root, strings[i])), "%s: \"%s\" should be a string", path, strings[i]);
    const char *numbers[] = { "threads", "batch", "train_samples_per_s", "gflops", "peak_gflops", "flops_per_sample",
                              "fma_peak_gflops", "fraction_of_fma_peak" };
    for (int i = 0; i < 8; i++) t_check(json_is_number(json_object_get(root, numbers[i])), "%s: \"%s\" should be a number", path, numbers[i]);
    const json_t *m = json_object_get(root, "model"), *e = json_object_get(root, "epochs"), *h = json_object_get(root, "host");
    t_check(json_is_string(m) && !strcmp(json_string_value(m), model), "%s: model", path);
    t_check(json_object_get(h, "cpu") && json_object_get(h, "hostname"), "%s: host.cpu, host.hostname", path);
    t_check(json_is_array(e) && json_array_size(e) == (size_t)epochs, "%s: %d epochs expected", path, epochs);
    for (size_t i = 0; i < json_array_size(e); i++) {
        const char *f[] = { "seconds", "train_seconds", "val_seconds", "loss", "accuracy", "val_loss", "val_accuracy" };
        for (int k = 0; k < 7; k++) {
            const json_t *v = json_object_get(json_array_get(e, i), f[k]);
            t_check(json_is_number(v) && json_number_value(v) >= 0, "%s: epochs[%zu].%s", path, i, f[k]);
        }
    }
    json_decref(root);
    check_python("time --json schema", PY_SCHEMA, path);
}

/* A CPU run with --per-layer says how much of a step ran outside the worker threads, in its
 * table and its JSON: a number of ms, at least 0 and less than the whole step. */
static void check_outside_threads(const char *path, const char *printed)
{
    const char *line = strstr(printed, "of which outside the worker threads: ");
    t_check(line != NULL, "no line on the time outside the worker threads: %s", printed);
    json_t *root = NULL;
    if (!t_check(ct_json_load(&root, path) == CT_OK, "%s: %s", path, ct_last_error())) return;
    const json_t *v = json_object_get(root, "outside_threads_ms");
    const double samples_per_s = json_number_value(json_object_get(root, "train_samples_per_s"));
    const double step_ms = samples_per_s > 0 ? 1e3 * json_number_value(json_object_get(root, "batch")) / samples_per_s : 0;
    t_check(json_is_number(v) && json_number_value(v) >= 0 && json_number_value(v) < step_ms,
            "%s: outside_threads_ms %g should be in [0, the step's %g ms)", path, json_number_value(v), step_ms);
    json_decref(root);
}

static void test_command(void)
{
    char base[256], args[1024], sjson[300], cjson[300], svg[300];
    tmp_path(base, sizeof base, "s.json");
    snprintf(sjson, sizeof sjson, "%.*s-cpu.json", (int)strlen(base) - 5, base);
    snprintf(svg, sizeof svg, "%.*s.svg", (int)strlen(base) - 5, base);
    tmp_path(cjson, sizeof cjson, "c.json");

    t_case("time/siamese-lstm smoke: table, --per-layer, JSON per device and the picture");
    snprintf(args, sizeof args, "time siamese-lstm --protocol smoke --threads 1 --per-layer --json %s", base);
    int rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    check_table("siamese-lstm");
    const char *parts[] = { "lstm_1", "dense_1", "euclidean", "contrastive", "other (optimizer, data)", "training step" };
    for (int i = 0; i < 6; i++) t_check(table_line(out, parts[i]) != NULL, "--per-layer lacks the row %s", parts[i]);
    t_check(strstr(out, "FLOPs: ") && strstr(out, "matrix products"), "what the FLOPs count is not said: %s", out);
    t_check(strstr(out, sjson) && strstr(out, svg), "output names %s and %s: %s", sjson, svg, out);
    check_json_file(sjson, "siamese-lstm", 2);
    check_outside_threads(sjson, out);
    check_python("time svg", "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])", svg);

    t_case("time/cnn smoke: --per-layer lists every layer of the network; one device writes FILE itself");
    snprintf(args, sizeof args, "time cnn --protocol smoke --device cpu --threads 1 --per-layer --json %s", cjson);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    /* on AVX-512 the first convolution runs the relu after it (models/seq_cnn.c, conv_relu_of), and both rows say so */
    const int c1 = ct_kernels_get() == CT_KERNELS_AVX512;
    const char *layers[] = { c1 ? "conv2d_1 (conv32k3, relu)" : "conv2d_1 (conv32k3)", "conv2d_2 (conv64k3)", "maxpool2",
                             "dropout0.25", "flatten", "dense_1 (dense128)", "dropout0.5", "dense_2 (dense10)", "relu",
                             c1 ? "relu (with conv2d_1)" : "relu" };
    for (int i = 0; i < 10; i++) t_check(table_line(out, layers[i]) != NULL, "--per-layer lacks the layer %s: %s", layers[i], out);
    t_check(table_line(out, "cpu") && !table_line(out, "gpu"), "only the cpu row expected");
    check_json_file(cjson, "cnn", 2);

    t_case("time/cnn smoke in bf16: the rows of the pool and the relu that the second convolution runs say so");
    setenv("CTRAIN_BF16_MODEL", "1", 1);   /* the tiles' C model: any CPU */
    rc = t_run_ctrain("time cnn --protocol smoke --device cpu --threads 1 --epochs 1 --samples 64 --val-samples 64 "
                      "--precision bf16 --per-layer", out, sizeof out);
    unsetenv("CTRAIN_BF16_MODEL");
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(table_line(out, "maxpool2 (with conv2d_2)") && table_line(out, "relu (with conv2d_2)"),
            "the pool's and the relu's rows should read \"maxpool2 (with conv2d_2)\" and \"relu (with conv2d_2)\": %s", out);

    t_case("time/siamese-cnn smoke: --layers (the old spelling, with a note) lists the tower's layers (a pool run with its "
           "batchnorm says so), FLOPs per pair");
    rc = t_run_ctrain("time siamese-cnn --protocol smoke --device cpu --threads 1 --epochs 1 --pairs 64 --val-pairs 32 --layers",
                      out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    /* on AVX-512 the first convolution's backward makes the batchnorm's din (models/seq_cnn.h,
     * ct_seq_cnn_conv_dw_by_pool), and its row says so */
    const char *tower[] = { ct_kernels_get() == CT_KERNELS_AVX512 ? "conv2d_1 (conv16k3p1, batchnorm_1 din)"
                                                                  : "conv2d_1 (conv16k3p1)", "batchnorm_1 (batchnorm)", "conv2d_3 (conv64k3p1)", "gaph",
                            "dense_1 (dense64)", "training step", "maxpool2 (with batchnorm_1)", "maxpool2 (with batchnorm_2)" };
    for (int i = 0; i < 8; i++) t_check(table_line(out, tower[i]) != NULL, "--layers lacks the layer %s: %s", tower[i], out);
    t_check(strstr(out, "Model: siamese-cnn") && strstr(out, "MFLOP per pair"), "model line: %s", out);
    t_check(strstr(out, "ctrain time: note: --layers is now spelled --per-layer") != NULL, "no deprecation note: %s", out);

    t_case("time/--compare prints the runs side by side");
    snprintf(args, sizeof args, "time --compare %s %s", sjson, cjson);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    const char *rows[] = { "file", "host", "device", "model", "s/epoch median", "train samples/s", "GFLOP/s", "speed vs first",
                           "FMA peak GFLOP/s", "of FMA peak", "sgemm peak GFLOP/s", "of sgemm peak", "blas", "ctrain's kernels" };
    for (int i = 0; i < 14; i++) t_check(table_line(out, rows[i]) != NULL, "--compare lacks the row %s: %s", rows[i], out);
    char model[512];
    line_of(model, sizeof model, table_line(out, "model"));
    t_check(strstr(model, "siamese-lstm") && strstr(model, "cnn"), "both models side by side: %s", out);
    t_check(strstr(out, "note:") != NULL, "different workloads should be pointed out: %s", out);

    t_case("time/--compare reads a file of an older ctrain (no FMA peak, no blas_core), next to today's");
    /* ctrain runs in the scratch folder: the fixture by its absolute path */
    char *fixture = realpath("tests/fixtures/time-0.1.0-2026-11-21.json", NULL);
    t_check(fixture != NULL, "tests/fixtures/time-0.1.0-2026-11-21.json is missing");
    snprintf(args, sizeof args, "time --compare -- %s %s", fixture ? fixture : "missing.json", sjson);
    free(fixture);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    char row[512];
    line_of(row, sizeof row, table_line(out, "date"));
    t_check(strstr(row, "2026-11-21T07:58:38Z") != NULL, "the old file's date: %s", out);
    line_of(row, sizeof row, table_line(out, "FMA peak GFLOP/s"));
    t_check(strstr(row, "n/a") != NULL, "the old file has no FMA peak: n/a expected: %s", out);
    line_of(row, sizeof row, table_line(out, "train samples/s"));
    t_check(strstr(row, "1491.3") != NULL, "the old file's samples/s (1491.3): %s", out);
    line_of(row, sizeof row, table_line(out, "ctrain's kernels"));
    t_check(strstr(row, ct_kernels_name(ct_kernels_get())) != NULL, "today's file names ctrain's kernels (%s), the old one none: %s",
            ct_kernels_name(ct_kernels_get()), out);

    t_case("time/--compare on a missing, corrupt or foreign file fails naming it");
    char bad[300];
    tmp_path(bad, sizeof bad, "bad.json");
    struct { const char *content, *expect; } files[] = {
        { NULL, "cannot open" },
        { "{\"schema\": \"ctrain-time/1\", \"host\": {", ":1:37: string or '}' expected near end of file (the text ends there: truncated" },
        { "[1, 2]", "not an object" },
        { "{\"schema\": \"other/2\"}", "not a ctrain time result" },
        { "{\"schema\": \"ctrain-time/1\", \"host\": {\"hostname\": \"h\", \"cpu\": \"c\"}, \"ctrain_version\": \"0\", "
          "\"date\": \"d\", \"device\": \"cpu\", \"model\": \"cnn\", \"protocol\": \"smoke\", \"threads\": \"two\"}", "\"threads\" should be a number" },
        { "{\"schema\": \"ctrain-time/1\", \"host\": {\"hostname\": \"h\", \"cpu\": \"c\"}, \"ctrain_version\": \"0\", "
          "\"date\": \"d\", \"device\": \"cpu\", \"model\": \"cnn\", \"protocol\": \"smoke\", \"threads\": 2, \"batch\": 64, "
          "\"n_train\": 1, \"n_val\": 1}", "\"epochs\" is missing" },
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        unlink(bad);
        if (files[i].content) {
            FILE *f = fopen(bad, "w");
            if (f) { fputs(files[i].content, f); fclose(f); }
        }
        snprintf(args, sizeof args, "time --compare %s %s", cjson, bad);
        rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc != 0 && rc != 134 && strstr(out, bad) && strstr(out, files[i].expect),
                "file %zu: exit %d, message lacks the file name or \"%s\": %s", i, rc, files[i].expect, out);
    }
    unlink(bad);
    unlink(sjson); unlink(svg); unlink(cjson);
    snprintf(svg, sizeof svg, "%.*s.svg", (int)strlen(cjson) - 5, cjson);
    unlink(svg);
}

static void test_gpu_and_errors(void)
{
    int rc;
    if (ct_gpu_visible() > 0) {
        t_skip("time/--device gpu says why it is unavailable and shows no numbers: this machine has a GPU (the GPU suite times it)");
    } else {
        t_case("time/--device gpu says why it is unavailable and shows no numbers");
        rc = t_run_ctrain("time cnn --device gpu --protocol smoke", out, sizeof out);
        char gpu[512];
        line_of(gpu, sizeof gpu, table_line(out, "gpu"));
        t_check(rc == 1, "nothing could be timed: exit 1 expected, got %d", rc);
        t_check(strstr(out, "gpu: unavailable: ") && (strstr(out, "no NVIDIA GPU found") || strstr(out, "built without CUDA")),
                "no reason given: %s", out);
        t_check(strstr(gpu, "n/a") && !table_line(out, "cpu"), "the gpu row should read n/a: %s", out);
        t_check(strstr(out, "no device could be timed") != NULL, "closing message: %s", out);
    }

    t_case("time/--devices, the old spelling, still works and says so");
    rc = t_run_ctrain("time cnn --devices cpu --protocol smoke --epochs 1 --samples 64 --val-samples 0 --threads 1", out, sizeof out);
    t_check(rc == 0 && strstr(out, "--devices is now spelled --device") && table_line(out, "cpu"), "exit %d: %s", rc, out);

    t_case("time/bad options give a clear error and a non-zero exit");
    struct { const char *args, *expect; } bad[] = {
        { "time", "usage: ctrain time" },
        { "time resnet", "unknown model 'resnet'" },
        { "time cnn --protocol fast", "--protocol fast: use seed, bench or smoke" },
        { "time cnn --device tpu", "--device tpu" },
        { "time cnn --device cpu,cpu", "listed twice" },
        { "time cnn --device cpu,", "comma-separated" },
        { "time cnn --pairs 10", "--pairs and --val-pairs are for the speaker models" },
        { "time siamese-lstm --samples 10", "--samples and --val-samples are for cnn" },
        { "time siamese-cnn --samples 10", "--samples and --val-samples are for cnn" },
        { "time siamese-cnn --protocol smoke --arch conv8k3,frob", "--arch" },
        { "time siamese-lstm --arch conv8k3", "--arch is for cnn" },
        { "time cnn --epochs 0", "--epochs: '0' is not an integer" },
        { "time cnn --batch", "needs a value" },
        { "time cnn --bogus", "unknown option '--bogus'" },
        { "time cnn --protocol smoke --arch conv8k3,frob", "--arch" },
        { "time cnn --protocol smoke --data /nonexistent-idx", "/nonexistent-idx" },
        { "time siamese-lstm --protocol smoke --data /nonexistent/feats.h5", "/nonexistent/feats.h5" },
        { "time cnn --protocol smoke --device cpu --epochs 1 --samples 64 --val-samples 0 --json /nonexistent-dir/r.json",
          "/nonexistent-dir/r.json" },
        { "time --compare", "needs at least one" },
        { "time cnn --precision fp16", "'fp16' is not a precision" },
        { "time cnn --precision bf16,bf16", "bf16 is named twice" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = t_run_ctrain(bad[i].args, out, sizeof out);
        t_check(rc > 0 && rc != 134 && strstr(out, bad[i].expect), "`ctrain %s` (exit %d) lacks \"%s\": %s",
                bad[i].args, rc, bad[i].expect, out);
    }
    rc = t_run_ctrain("time --help", out, sizeof out);
    t_check(rc == 0 && strstr(out, "--protocol") && strstr(out, "--layers") && strstr(out, "--compare"), "time --help (exit %d)", rc);
    rc = t_run_ctrain("--help", out, sizeof out);
    t_check(rc == 0 && strstr(out, "time MODEL"), "ctrain --help should list time: %s", out);
}

/* One session (catalog/session.h), as `ctrain time` uses it: the network built once for its
 * description is the one the first device trains, and a closed session opens again to the
 * very same run (the next device's). */
static ct_status session_run(ct_session *s, ct_fit_config *fit, float *weights)
{
    ct_session_config sc = { .be = &ct_cpu_backend, .seed = 7, .batch = 16 };
    CT_TRY(ct_session_open(s, &sc));
    FILE *log = fopen("/dev/null", "w");
    ct_status st = log ? ct_session_fit(s, fit, NULL, NULL, NULL, log) : CT_EIO;
    if (log) fclose(log);
    const ct_params *p = s->d->params(s->net);
    if (st == CT_OK) memcpy(weights, p->data, p->numel * sizeof(float));
    return st;
}

/* --precision fp32,bf16: both rows side by side, the bf16 one on the C model of the tiles here
 * (CTRAIN_BF16_MODEL=1), its JSON says so; without bf16 products the row says why. */
static void test_precision(void)
{
    char base[256], args[1024], bjson[300];
    tmp_path(base, sizeof base, "p.json");
    snprintf(bjson, sizeof bjson, "%.*s-cpu-bf16.json", (int)strlen(base) - 5, base);
    t_case("time/--precision fp32,bf16: a row each, side by side, and a JSON each");
    snprintf(args, sizeof args, "time siamese-lstm --protocol smoke --device cpu --threads 1 --epochs 1 --pairs 64 --val-pairs 32 "
             "--precision fp32,bf16 --json %s", base);
    setenv("CTRAIN_BF16_MODEL", "1", 1);
    int rc = t_run_ctrain(args, out, sizeof out);
    unsetenv("CTRAIN_BF16_MODEL");
    char cpu[512], bf[512];
    line_of(cpu, sizeof cpu, table_line(out, "cpu"));
    line_of(bf, sizeof bf, table_line(out, "cpu bf16"));
    t_check(rc == 0 && cpu[0] && bf[0] && !strstr(bf, "n/a   n/a   n/a"), "exit %d, rows '%s' and '%s': %s", rc, cpu, bf, out);
    t_check(strstr(out, "precision fp32,bf16") && strstr(out, "cpu bf16: ") && strstr(out, "bf16 peak: no bf16 peak"),
            "the protocol line and the bf16 row's description: %s", out);
    char probe[1200];
    snprintf(probe, sizeof probe, "grep -q '\"precision\": \"bf16\"' %s", bjson);
    t_check(system(probe) == 0, "%s does not record precision bf16", bjson);

    t_case("time/--precision bf16 on a CPU without bf16 products: the row says why, n/a");
    const char *cut = ct_kernels_bf16() == CT_BF16_NONE ? NULL : "avx512";
    if (cut) setenv("CTRAIN_CPU_KERNELS", cut, 1);
    rc = t_run_ctrain("time siamese-lstm --protocol smoke --device cpu --threads 1 --epochs 1 --pairs 64 --val-pairs 32 "
                      "--precision bf16", out, sizeof out);
    if (cut) unsetenv("CTRAIN_CPU_KERNELS");
    t_check(rc == 1 && strstr(out, "cpu bf16: unavailable: ") && strstr(out, "AMX-BF16") && strstr(out, "no device could be timed"),
            "exit %d: %s", rc, out);
}

static void test_session(void)
{
    t_case("time/session: the network built for the description is trained, and a reopened session repeats the run");
    const ct_model_descriptor *d = ct_model_find("small-cnn");
    void *cfg = calloc(1, d->cfg_size);
    static ct_model_data data;
    ct_session s;
    (d->time_defaults ? d->time_defaults : d->defaults)(cfg);
    d->set_counts(cfg, 48, 16);
    t_check(d->finish(cfg, 0) == CT_OK && d->load_data(&data, cfg, "synthetic", 7, 16) == CT_OK, "small-cnn's data: %s", ct_last_error());
    t_check(ct_session_init(&s, d, cfg, &data, NULL) == CT_OK && ct_session_build(&s) == CT_OK, "build: %s", ct_last_error());
    void *net = s.net;
    size_t n = d->params(s.net)->numel;
    t_check(s.built && !s.open && d->step_flops(s.net) > 0 && n > 0, "a built network with FLOPs and parameters");
    float *first = calloc(n, sizeof *first), *again = calloc(n, sizeof *again);
    ct_fit_config fit = { .epochs = 1, .batch = 16, .optim = ct_optim_defaults(d->train.optimizer) };
    fit.sched = (ct_sched){ .kind = SCHED_CONSTANT, .base_lr = fit.optim.lr, .t_max = 1 };
    ct_status st = session_run(&s, &fit, first);
    t_check(st == CT_OK && s.open && s.net == net, "the first run trains the network built before it: %s", ct_last_error());
    ct_session_close(&s, 0);
    t_check(!s.built && !s.open, "closed: nothing built");
    st = session_run(&s, &fit, again);
    t_check(st == CT_OK && memcmp(first, again, n * sizeof *first) == 0, "the reopened session's weights are the first run's, bit for bit");
    ct_session_free(&s);
    ct_model_data_free(&data);
    free(first); free(again); free(cfg);
}

void suite_time(void)
{
    test_json_roundtrip();
    test_json_reader();
    test_svg();
    test_command();
    test_gpu_and_errors();
    test_precision();
    test_session();
}
