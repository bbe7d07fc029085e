/* test_hwreport.c - the hardware figures of `ctrain time` and its report page:
 *   - io/hwmon.h on a fake sysfs tree (CTRAIN_SYSFS_ROOT): which RAPL zones and
 *     thermometers it takes, and the joules, average and peak watts and highest
 *     temperature of known counters, a wraparound included, to the last digit;
 *     a missing tree or an unknown wrap range is n/a with the reason;
 *   - the GPU meter from an energy counter and, without one, from power readings;
 *   - the command: the counters of a fake tree in the JSON (schema /2), the money
 *     (rent per epoch = price x seconds; break-even = hardware / price), bad --price,
 *     --hardware-cost and --electricity refused in one line with exit 2;
 *   - --compare of a /1 file (the new rows n/a, said why) beside a /2 file;
 *   - the report page: nothing in it points outside the file, and headless Chromium's
 *     DOM of it holds the figures of the JSON it came from (SKIP when no chromium);
 *   - the PyTorch twins (bench/siamese_torch.py, bench/cnn_torch.py) under a fake tree
 *     whose counter keeps moving and wrapping: schema /2 with the figures ctrain's
 *     arithmetic gives, the reasons in ctrain's words when there are no counters, their
 *     money, and `time --compare` of a ctrain file and a twin's with figures for both
 *     (SKIP when /usr/bin/python3 cannot import torch). */
#define _DEFAULT_SOURCE   /* setenv, unsetenv, realpath */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "tests/test.h"
#include "cuda/device.h"
#include "cuda/nvml.h"
#include "io/hwmon.h"
#include "io/json.h"

static char out[1 << 17];
static char dir[256];   /* the fake sysfs root */

static void put(const char *rel, const char *text)
{
    char path[512], cmd[700];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    if (system(cmd) != 0) { t_check(0, "cannot make the folder of %s", path); return; }
    FILE *f = fopen(path, "w");
    if (!t_check(f != NULL, "cannot write %s", path)) return;
    fprintf(f, "%s\n", text);
    fclose(f);
}

static void rm_tree(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) printf("  (could not remove %s)\n", path);
}

/* Two package zones (one wraps at 1 J), a core sub-zone and psys that must be left out;
 * k10temp's Tctl, coretemp's package (not its core), and a thermometer of another chip. */
static void fake_tree(void)
{
    snprintf(dir, sizeof dir, "/tmp/ctrain_hwreport_%ld", (long)getpid());
    rm_tree(dir);
    put("class/powercap/intel-rapl:0/name", "package-0");
    put("class/powercap/intel-rapl:0/energy_uj", "900000");
    put("class/powercap/intel-rapl:0/max_energy_range_uj", "1000000");
    put("class/powercap/intel-rapl:0:0/name", "core");
    put("class/powercap/intel-rapl:0:0/energy_uj", "123");
    put("class/powercap/intel-rapl:1/name", "package-1");
    put("class/powercap/intel-rapl:1/energy_uj", "5000000");
    put("class/powercap/intel-rapl:1/max_energy_range_uj", "262143328850");
    put("class/powercap/intel-rapl:2/name", "psys");
    put("class/powercap/intel-rapl:2/energy_uj", "99999999");
    put("class/hwmon/hwmon0/name", "k10temp");
    put("class/hwmon/hwmon0/temp1_label", "Tctl");
    put("class/hwmon/hwmon0/temp1_input", "61250");
    put("class/hwmon/hwmon1/name", "coretemp");
    put("class/hwmon/hwmon1/temp1_label", "Package id 0");
    put("class/hwmon/hwmon1/temp1_input", "70500");
    put("class/hwmon/hwmon1/temp2_label", "Core 0");
    put("class/hwmon/hwmon1/temp2_input", "99000");
    put("class/hwmon/hwmon2/name", "acpitz");
    put("class/hwmon/hwmon2/temp1_input", "95000");
}

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) > 1 ? fabs(b) : 1); }

static void test_sysfs(void)
{
    t_case("hwreport/RAPL and hwmon on a fake tree: zones, wraparound, joules, watts, temperature exactly");
    fake_tree();
    setenv("CTRAIN_SYSFS_ROOT", dir, 1);
    ct_hw hw;
    ct_hw_open(&hw);
    t_check(hw.n_zones == 2, "package zones: %d, want 2 (intel-rapl:0 and :1; not the core sub-zone, not psys)", hw.n_zones);
    t_check(hw.n_temps == 2, "thermometers: %d, want 2 (k10temp Tctl, coretemp Package id 0)", hw.n_temps);
    t_check(hw.zone_max_uj[0] == 1000000 && hw.zone_max_uj[1] == 262143328850.0, "max ranges %g %g", hw.zone_max_uj[0], hw.zone_max_uj[1]);
    ct_hw_sample s[3];
    ct_hw_read_cpu(&hw, 10.0, &s[0]);
    put("class/powercap/intel-rapl:0/energy_uj", "100000");    /* wrapped at 1 J: +0.2 J */
    put("class/powercap/intel-rapl:1/energy_uj", "7000000");   /* +2 J */
    ct_hw_read_cpu(&hw, 10.5, &s[1]);
    put("class/powercap/intel-rapl:0/energy_uj", "600000");    /* +0.5 J */
    put("class/powercap/intel-rapl:1/energy_uj", "7500000");   /* +0.5 J */
    put("class/hwmon/hwmon0/temp1_input", "75000");
    ct_hw_read_cpu(&hw, 11.5, &s[2]);
    ct_hw_meter m;
    ct_hw_cpu_meter(&hw, s, 0, 2, &m);
    t_check(near(m.joules, 3.2), "joules %.15g, want 3.2 (0.2 + 2 + 0.5 + 0.5)", m.joules);
    t_check(near(m.seconds, 1.5) && near(m.avg_w, 3.2 / 1.5), "average %.15g W over %g s, want %.15g", m.avg_w, m.seconds, 3.2 / 1.5);
    t_check(near(m.peak_w, 4.4), "peak %.15g W, want 4.4 (2.2 J in 0.5 s)", m.peak_w);
    t_check(m.max_temp_c == 75.0, "highest temperature %g, want 75 (k10temp after the change)", m.max_temp_c);
    t_check(s[0].cpu_temp_c == 70.5, "first sample's temperature %g, want 70.5 (coretemp's package, not its core at 99)", s[0].cpu_temp_c);
    t_check(strstr(m.energy_how, "RAPL") != NULL, "how: %s", m.energy_how);
    ct_hw_cpu_meter(&hw, s, 1, 2, &m);
    t_check(near(m.joules, 1.0) && near(m.peak_w, 1.0), "samples 1-2: %.15g J, peak %.15g W; want 1 and 1", m.joules, m.peak_w);

    t_case("hwreport/a wrap with no max_energy_range_uj, and a tree without counters, are n/a with the reason");
    char path[512];
    snprintf(path, sizeof path, "%s/class/powercap/intel-rapl:0/max_energy_range_uj", dir);
    unlink(path);
    ct_hw_open(&hw);
    put("class/powercap/intel-rapl:0/energy_uj", "900000");
    ct_hw_read_cpu(&hw, 1, &s[0]);
    put("class/powercap/intel-rapl:0/energy_uj", "100");
    ct_hw_read_cpu(&hw, 2, &s[1]);
    ct_hw_cpu_meter(&hw, s, 0, 1, &m);
    t_check(isnan(m.joules) && isnan(m.avg_w) && strstr(m.energy_why, "wrapped"), "joules %g, why: %s", m.joules, m.energy_why);
    char empty[300];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    mkdir(empty, 0755);
    setenv("CTRAIN_SYSFS_ROOT", empty, 1);
    ct_hw_open(&hw);
    ct_hw_read_cpu(&hw, 1, &s[0]);
    ct_hw_read_cpu(&hw, 2, &s[1]);
    ct_hw_cpu_meter(&hw, s, 0, 1, &m);
    t_check(isnan(m.joules) && strstr(m.energy_why, "powercap") && strstr(m.energy_why, "No such file"), "why: %s", m.energy_why);
    t_check(isnan(m.max_temp_c) && strstr(m.temp_why, "hwmon"), "temperature %g, why: %s", m.max_temp_c, m.temp_why);
    unsetenv("CTRAIN_SYSFS_ROOT");

    t_case("hwreport/the sampler's thread and marks: samples in time order, marks at the ends");
    setenv("CTRAIN_SYSFS_ROOT", dir, 1);
    ct_hw_sampler sp;
    t_check(ct_hw_sampler_start(&sp, 50, NULL, NULL) == CT_OK, "start: %s", ct_last_error());
    size_t a = ct_hw_sampler_mark(&sp);
    usleep(120000);
    size_t b = ct_hw_sampler_mark(&sp);
    ct_hw_sampler_stop(&sp);
    t_check(b > a + 2, "marks %zu and %zu: the thread sampled %zu times in between at 50 Hz over 0.12 s", a, b, b - a - 1);
    for (size_t i = 1; i < sp.n; i++) t_check(sp.s[i].t >= sp.s[i - 1].t, "sample %zu before its predecessor", i);
    ct_hw_sampler_free(&sp);
    unsetenv("CTRAIN_SYSFS_ROOT");
}

static void test_gpu_meter(void)
{
    t_case("hwreport/GPU meter: NVML's energy counter, else the power readings integrated; utilisation means; n/a under 1 s");
    ct_hw_sample s[3];
    for (int i = 0; i < 3; i++) {
        s[i] = (ct_hw_sample){ .t = i, .gpu_w = 100 + 50 * i, .gpu_mj = 1000.0 * (10 + 120 * i), .gpu_temp_c = 60 + i,
                               .gpu_busy = 90 + i, .gpu_mem_busy = 40, .gpu_sm_mhz = 1800, .cpu_temp_c = NAN };
    }
    ct_hw_meter m;
    ct_hw_gpu_meter(NULL, s, 0, 2, &m);
    t_check(near(m.joules, 240) && near(m.avg_w, 120) && m.peak_w == 200, "counter: %g J, %g W avg, %g W peak", m.joules, m.avg_w, m.peak_w);
    t_check(m.max_temp_c == 62 && near(m.busy_pct, 91) && m.sm_mhz == 1800, "temp %g busy %g clock %g", m.max_temp_c, m.busy_pct, m.sm_mhz);
    for (int i = 0; i < 3; i++) s[i].gpu_mj = NAN;
    ct_hw_gpu_meter(NULL, s, 0, 2, &m);
    t_check(near(m.joules, 125 + 175) && strstr(m.energy_how, "integrated"), "readings: %g J (%s)", m.joules, m.energy_how);
    for (int i = 0; i < 3; i++) s[i].t = 0.4 * i;   /* 0.8 s: too short for NVML's figures */
    ct_hw_gpu_meter(NULL, s, 0, 2, &m);
    t_check(isnan(m.joules) && isnan(m.avg_w) && strstr(m.energy_why, "0.80 s") && m.peak_w == 200 && m.max_temp_c == 62,
            "0.8 s: %g J, %g W (%s)", m.joules, m.avg_w, m.energy_why);
    ct_hw_gpu_meter("no GPU counters: libnvidia-ml.so.1 cannot be loaded", s, 0, 2, &m);
    t_check(isnan(m.joules) && isnan(m.busy_pct) && strstr(m.busy_why, "libnvidia-ml"), "no NVML: %g, why %s", m.joules, m.busy_why);
}

/* On a machine with an NVIDIA GPU: NVML, loaded at run time, reads the GPU's counters. */
static void test_nvml(void)
{
    if (!ct_gpu_compiled() || ct_gpu_visible() < 1) {
        t_skip("hwreport/NVML reads GPU 0's power, temperature and clocks: no GPU here (%s)",
               ct_gpu_compiled() ? "none visible" : "a CPU-only build");
        return;
    }
    t_case("hwreport/NVML reads GPU 0's power, temperature and clocks");
    ct_nvml *g = NULL;
    char name[96];
    if (!t_check(ct_nvml_open(&g, 0, name, sizeof name) == CT_OK, "ct_nvml_open: %s", ct_last_error())) return;
    ct_nvml_reading a, b;
    ct_nvml_read(g, &a);
    usleep(200000);
    ct_nvml_read(g, &b);
    printf("  %s: %.1f W, %.0f C, busy %.0f%%, SM %.0f MHz, memory %.0f MHz, energy counter %.0f mJ\n", name, b.power_w, b.temp_c,
           b.busy, b.sm_mhz, b.mem_mhz, b.energy_mj);
    t_check(b.power_w > 0 && b.power_w < 5000, "power %g W", b.power_w);
    t_check(b.temp_c > 0 && b.temp_c < 150, "temperature %g C", b.temp_c);
    t_check(b.sm_mhz > 0, "SM clock %g MHz", b.sm_mhz);
    t_check(isnan(a.energy_mj) || b.energy_mj >= a.energy_mj, "the energy counter went back: %g then %g mJ", a.energy_mj, b.energy_mj);
    ct_nvml_close(g);
}

/* The number at key in the JSON file (NaN: absent or null). */
static double json_num(json_t *root, const char *obj, const char *key)
{
    json_t *o = obj ? json_object_get(root, obj) : root;
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Whether the page holds nothing that points outside the file. */
static void check_self_contained(const char *html)
{
    FILE *f = fopen(html, "r");
    if (!t_check(f != NULL, "no page %s", html)) return;
    static char page[1 << 18];
    size_t n = fread(page, 1, sizeof page - 1, f);
    page[n] = 0;
    fclose(f);
    const char *bad[] = { "http:", "https:", "//", "src=", "href=", "<script", "@import", "url(", "<link", "<iframe" };
    for (int i = 0; i < 10; i++) t_check(!strstr(page, bad[i]), "%s holds '%s': it must not point outside the file", html, bad[i]);
    t_check(strstr(page, "name=\"viewport\"") != NULL, "%s has no viewport (phones)", html);
    t_check(strstr(page, "<svg") != NULL && strstr(page, "<table") != NULL, "%s lacks the table or the charts", html);
}

#define CHROMIUM_N 3
static const char *CHROMIUM[CHROMIUM_N] = { "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome" };

static const char *find_chromium(void)
{
    for (int i = 0; i < CHROMIUM_N; i++) if (access(CHROMIUM[i], X_OK) == 0) return CHROMIUM[i];
    return NULL;
}

/* Chromium's DOM of the page into dom (NUL-terminated); 0 when it could not be had. */
static int dump_dom(const char *chromium, const char *html, char *dom, size_t cap)
{
    char cmd[2048], abs[1024];
    if (!realpath(html, abs)) return 0;
    snprintf(cmd, sizeof cmd, "timeout 120 %s --headless --disable-gpu --no-sandbox --no-first-run --user-data-dir=%s/chromium-profile "
             "--dump-dom 'file://%s' 2>/dev/null", chromium, dir, abs);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    size_t n = fread(dom, 1, cap - 1, p);
    dom[n] = 0;
    int rc = pclose(p);
    return rc == 0 && n > 0;
}

/* The DOM has cell key with the figure formatted as the page formats it (n/a when v is NaN). */
static void dom_has(const char *dom, const char *key, const char *fmt, double v, const char *file)
{
    char want[160], num[64];
    if (isfinite(v)) snprintf(num, sizeof num, fmt, v); else snprintf(num, sizeof num, "n/a");
    snprintf(want, sizeof want, "data-k=\"%s\"", key);
    int found = 0;
    for (const char *p = strstr(dom, want); p && !found; p = strstr(p + 1, want)) {
        const char *gt = strchr(p, '>');
        found = gt && !strncmp(gt + 1, num, strlen(num)) && gt[1 + strlen(num)] == '<';
    }
    t_check(found, "the DOM has no %s cell reading %s (from %s)", key, num, file);
}

static void check_dom(const char *what, const char *html, const char *json1, const char *json2)
{
    const char *chromium = find_chromium();
    if (!chromium) {
        t_skip("hwreport/%s in headless Chromium: no chromium (/usr/bin/chromium; scripts/deps.sh test installs Debian's chromium)", what);
        return;
    }
    t_case("hwreport/%s in headless Chromium: its DOM holds the figures of the JSON it came from", what);
    static char dom[1 << 18];
    if (!t_check(dump_dom(chromium, html, dom, sizeof dom), "%s --dump-dom %s failed", chromium, html)) return;
    t_check(strstr(dom, "<table id=\"figures\"") != NULL, "no table in the DOM");
    const char *files[2] = { json1, json2 };
    for (int i = 0; i < 2 && files[i]; i++) {
        json_t *root = NULL;
        if (!t_check(ct_json_load(&root, files[i]) == CT_OK, "%s: %s", files[i], ct_last_error())) continue;
        dom_has(dom, "sec_median", "%.2f", json_num(root, "epoch_seconds", "median"), files[i]);
        dom_has(dom, "samples_per_s", "%.1f", json_num(root, NULL, "train_samples_per_s"), files[i]);
        dom_has(dom, "joules_per_epoch", "%.1f", json_num(root, NULL, "joules_per_epoch"), files[i]);
        dom_has(dom, "avg_watts", "%.1f", json_num(root, NULL, "avg_watts"), files[i]);
        dom_has(dom, "max_temp_c", "%.0f", json_num(root, NULL, "max_temp_c"), files[i]);
        dom_has(dom, "data_wait_share", "%.1f", 100 * json_num(root, NULL, "data_wait_share"), files[i]);
        dom_has(dom, "rent_per_run", "%.4g", json_num(root, "money", "rent_per_run"), files[i]);
        dom_has(dom, "break_even_hours", "%.0f", json_num(root, "money", "break_even_hours"), files[i]);
        json_decref(root);
    }
}

static void test_command(void)
{
    char json[300], html[300], chtml[300], args[2048], old[300];
    snprintf(json, sizeof json, "%s/run.json", dir);
    snprintf(html, sizeof html, "%s/run.html", dir);
    snprintf(chtml, sizeof chtml, "%s/compare.html", dir);
    fake_tree();   /* static counters: 0 J, and the thermometers' 61.25 and 70.5 C */

    t_case("hwreport/time on a fake tree: the counters and the money in the table and JSON /2");
    snprintf(args, sizeof args, "CTRAIN_SYSFS_ROOT=%s %s time cnn --protocol smoke --device cpu --threads 1 --epochs 2 --samples 128 "
             "--val-samples 64 --price cpu=3600 --hardware-cost cpu=100 --json %s --html %s > %s/out.txt 2>&1",
             dir, t_ctrain_bin(), json, html, dir);
    int rc = system(args);
    char txt[400];
    snprintf(txt, sizeof txt, "%s/out.txt", dir);
    FILE *f = fopen(txt, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(strstr(out, "J/epoch") && strstr(out, "samples/J") && strstr(out, "data wait") && strstr(out, "break-even h"),
            "the counters' table is missing: %s", out);
    json_t *root = NULL;
    if (t_check(ct_json_load(&root, json) == CT_OK, "%s: %s", json, ct_last_error())) {
        const char *schema = json_string_value(json_object_get(root, "schema"));
        t_check(schema && !strcmp(schema, "ctrain-time/2"), "schema %s", schema ? schema : "(none)");
        t_check(json_num(root, NULL, "max_temp_c") == 70.5, "max_temp_c %g, want 70.5", json_num(root, NULL, "max_temp_c"));
        t_check(json_num(root, NULL, "joules_per_epoch") == 0, "a counter that did not move: %g J", json_num(root, NULL, "joules_per_epoch"));
        double sec = json_num(root, "epoch_seconds", "median"), rent = json_num(root, "money", "rent_per_epoch");
        t_check(fabs(rent - sec) <= 1e-9 * sec, "rent per epoch at 3600 an hour %.10g, want the seconds %.10g", rent, sec);
        t_check(fabs(json_num(root, "money", "rent_per_run") - 2 * rent) <= 1e-9 * rent, "rent per run of 2 epochs");
        t_check(fabs(json_num(root, "money", "break_even_hours") - 100.0 / 3600) < 1e-9, "break-even %.10g, want 100/3600",
                json_num(root, "money", "break_even_hours"));
        double dw = json_num(root, NULL, "data_wait_share");
        t_check(dw >= 0 && dw < 1, "data_wait_share %g", dw);
        t_check(json_num(root, "hardware", "sample_hz") == 4, "sample_hz %g", json_num(root, "hardware", "sample_hz"));
        json_decref(root);
    }
    check_self_contained(html);

    t_case("hwreport/bad --price, --hardware-cost, --electricity: one line, exit 2");
    struct { const char *opt, *says; } bad[] = {
        { "--price cpu=abc", "'abc' for cpu is not an amount" },
        { "--price gpu=2.50", "does not time gpu" },
        { "--price cpu", "is not DEVICE=AMOUNT" },
        { "--price cpu=1,cpu=2", "priced twice" },
        { "--hardware-cost cpu=-5", "not an amount" },
        { "--electricity cheap", "--electricity cheap: not a price per kWh" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "time cnn --protocol smoke --device cpu %s", bad[i].opt);
        rc = t_run_ctrain(args, out, sizeof out);
        int lines = 0;
        for (const char *p = out; *p; p++) lines += *p == '\n';
        t_check(rc == 2 && lines == 1 && strstr(out, bad[i].says), "%s: exit %d, %d lines, want 2 and one line saying '%s': %s", bad[i].opt,
                rc, lines, bad[i].says, out);
    }

    t_case("hwreport/--compare: a ctrain-time/1 file (new rows n/a, said why) beside a /2 file, and --html");
    char *fixture = realpath("tests/fixtures/time-0.1.0-2026-11-21.json", NULL);
    snprintf(old, sizeof old, "%s", fixture ? fixture : "missing.json");
    free(fixture);
    snprintf(args, sizeof args, "time --compare %s %s --html %s", old, json, chtml);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(strstr(out, "joules/epoch") && strstr(out, "break-even hours") && strstr(out, "max temperature C"), "new rows missing: %s", out);
    t_check(strstr(out, "not recorded: a ctrain-time/1 file") != NULL, "the /1 file's n/a is not explained: %s", out);
    check_self_contained(chtml);
    check_dom("time --html's page", html, json, NULL);
    check_dom("time --compare --html's page (a /1 and a /2 file)", chtml, old, json);
}

/* ---- the PyTorch twins ---- */
#define PYTHON "/usr/bin/python3"
#define TICK_UJ 250000   /* the moving counter's step: 0.25 J, wrapping at 1 J every 4th step */

/* A child that advances intel-rapl:0 (max_energy_range_uj 1 J) by 0.25 J every 20 ms, wrapping
 * at 1 J, each value written whole (a new file renamed over the counter); its pid. The
 * sampler (100 Hz) sees at most 3 steps between two samples, less than one wrap range. */
static pid_t start_ticking(void)
{
    put("class/powercap/intel-rapl:0/energy_uj", "0");
    put("class/powercap/intel-rapl:0/max_energy_range_uj", "1000000");
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/class/powercap/intel-rapl:0/energy_uj", dir);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    for (long n = 1; ; n++) {
        FILE *f = fopen(tmp, "w");
        if (f) { fprintf(f, "%ld\n", n * TICK_UJ % 1000000); fclose(f); rename(tmp, path); }
        usleep(20000);
    }
}

static void stop_ticking(pid_t pid)
{
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static const char *json_text(json_t *root, const char *obj, const char *key)
{
    json_t *o = obj ? json_object_get(root, obj) : root;
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "(none)";
}

static double json_sub(json_t *root, const char *obj, const char *sub, const char *key)
{
    json_t *v = json_object_get(json_object_get(json_object_get(root, obj), sub), key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1); }

/* Whether j joules are a whole number of the moving counter's steps (0.25 J). */
static int whole_steps(double j) { return isfinite(j) && fabs(j / 0.25 - round(j / 0.25)) < 1e-6; }

/* Runs "ENV python3 bench/SCRIPT ARGS" from the source tree, its output into out; the exit status. */
static int run_twin(const char *root, const char *script, const char *args)
{
    char cmd[2048], log[300];
    snprintf(log, sizeof log, "%s/twin.txt", dir);
    snprintf(cmd, sizeof cmd, "CTRAIN_SYSFS_ROOT='%s' " PYTHON " bench/%s %s > '%s' 2>&1", root, script, args, log);
    int rc = system(cmd);
    FILE *f = fopen(log, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

/* The figures of a JSON written under the moving counter: what ctrain's arithmetic gives. */
static void check_moving(json_t *root, const char *file, int timed_epochs, double n_train, double hz)
{
    const char *schema = json_text(root, NULL, "schema");
    t_check(!strcmp(schema, "ctrain-time/2"), "%s: schema %s, want ctrain-time/2", file, schema);
    double j = json_sub(root, "hardware", "cpu", "joules"), s = json_sub(root, "hardware", "cpu", "seconds");
    double jpe = json_num(root, NULL, "joules_per_epoch"), w = json_num(root, NULL, "avg_watts");
    t_check(whole_steps(j), "%s: %.9g J is not a whole number of the counter's 0.25 J steps", file, j);
    t_check(jpe > 0 && close_to(jpe * timed_epochs, j), "%s: joules_per_epoch %.12g, want %.12g J / %d epochs", file, jpe, j, timed_epochs);
    t_check(s > 0 && close_to(w, j / s) && close_to(jpe * timed_epochs, w * s), "%s: avg_watts %.12g, want %.12g J / %.12g s", file, w, j, s);
    t_check(json_num(root, NULL, "peak_watts") >= w, "%s: peak %.12g W below the average %.12g", file, json_num(root, NULL, "peak_watts"), w);
    t_check(close_to(json_num(root, NULL, "samples_per_joule"), n_train / jpe), "%s: samples_per_joule %.12g, want %g / %.12g", file,
            json_num(root, NULL, "samples_per_joule"), n_train, jpe);
    t_check(json_num(root, NULL, "max_temp_c") == 70.5 && json_sub(root, "hardware", "cpu", "max_temp_c") == 70.5,
            "%s: max_temp_c %g, want 70.5 (coretemp's package; k10temp's Tctl reads 61.25)", file, json_num(root, NULL, "max_temp_c"));
    t_check(!strcmp(json_text(root, NULL, "energy_how"), "RAPL package energy counters (2 zones)") && !*json_text(root, NULL, "energy_why"),
            "%s: energy_how '%s', energy_why '%s'", file, json_text(root, NULL, "energy_how"), json_text(root, NULL, "energy_why"));
    t_check(isnan(json_num(root, NULL, "gpu_busy_pct")) && !strcmp(json_text(root, NULL, "busy_why"), "not a GPU run"),
            "%s: gpu_busy_pct %g, busy_why '%s'", file, json_num(root, NULL, "gpu_busy_pct"), json_text(root, NULL, "busy_why"));
    t_check(json_num(root, "hardware", "sample_hz") == hz && json_sub(root, "hardware", "cpu", "n_samples") >= 2,
            "%s: sample_hz %g, %g samples", file, json_num(root, "hardware", "sample_hz"), json_sub(root, "hardware", "cpu", "n_samples"));
    double dw = json_num(root, NULL, "data_wait_share");
    t_check(dw >= 0 && dw < 1, "%s: data_wait_share %g", file, dw);
}

static void test_twins(void)
{
    if (access(PYTHON, X_OK) != 0 || system(PYTHON " -c 'import torch' > /dev/null 2>&1") != 0) {
        t_skip("hwreport/the PyTorch twins write ctrain-time/2: %s cannot import torch (install Debian's python3-torch)", PYTHON);
        return;
    }
    char tj[300], cj[300], ej[300], kj[300], args[2048], empty[300];
    snprintf(tj, sizeof tj, "%s/siamese-torch.json", dir);
    snprintf(cj, sizeof cj, "%s/cnn-torch.json", dir);
    snprintf(kj, sizeof kj, "%s/cnn-ctrain.json", dir);
    snprintf(ej, sizeof ej, "%s/empty-torch.json", dir);
    snprintf(empty, sizeof empty, "%s/empty", dir);
    fake_tree();
    mkdir(empty, 0755);

    t_case("hwreport/siamese_torch.py under a moving, wrapping counter: schema /2, ctrain's arithmetic, money");
    pid_t ticker = start_ticking();
    snprintf(args, sizeof args, "--epochs 3 --pairs 16 --val-pairs 8 --batch 8 --threads 1 --sample-hz 100 --json '%s' "
             "--price cpu=3600 --electricity 0.3 --hardware-cost cpu=100", tj);
    int rc = run_twin(dir, "siamese_torch.py", args);
    t_check(rc == 0, "siamese_torch.py: exit %d: %s", rc, out);
    json_t *root = NULL;
    if (rc == 0 && t_check(ct_json_load(&root, tj) == CT_OK, "%s: %s", tj, ct_last_error())) {
        check_moving(root, tj, 2, 16, 100);
        double j = json_sub(root, "hardware", "cpu", "joules");
        t_check(j >= 1.0, "%.9g J over at least 4 steps must count each wrap at 1 J (a wrap left uncounted makes it less than 1 J)", j);
        double sec = json_num(root, "epoch_seconds", "median"), w = json_num(root, NULL, "avg_watts");
        double jpe = json_num(root, NULL, "joules_per_epoch");
        t_check(close_to(json_num(root, "money", "rent_per_epoch"), sec) && close_to(json_num(root, "money", "rent_per_run"), 3 * sec),
                "rent %.12g / %.12g, want the median seconds %.12g x 1 and x 3", json_num(root, "money", "rent_per_epoch"),
                json_num(root, "money", "rent_per_run"), sec);
        t_check(close_to(json_num(root, "money", "electricity_per_epoch"), jpe / 3.6e6 * 0.3), "electricity per epoch %.12g",
                json_num(root, "money", "electricity_per_epoch"));
        t_check(close_to(json_num(root, "money", "break_even_hours"), 100 / (3600 - w / 1000 * 0.3)), "break-even %.12g, want %.12g",
                json_num(root, "money", "break_even_hours"), 100 / (3600 - w / 1000 * 0.3));
        json_t *e0 = json_array_get(json_object_get(root, "epochs"), 0);
        t_check(json_object_get(e0, "loss") && !json_object_get(e0, "data_seconds"), "an epoch's fields changed");
        json_decref(root);
    }

    t_case("hwreport/cnn_torch.py and ctrain time cnn under the same moving counter");
    snprintf(args, sizeof args, "--epochs 2 --data synthetic --samples 64 --val-samples 32 --batch 32 --threads 1 --sample-hz 100 "
             "--json '%s' --price cpu=3600 --hardware-cost cpu=100", cj);
    rc = run_twin(dir, "cnn_torch.py", args);
    t_check(rc == 0, "cnn_torch.py: exit %d: %s", rc, out);
    if (rc == 0 && t_check(ct_json_load(&root, cj) == CT_OK, "%s: %s", cj, ct_last_error())) {
        check_moving(root, cj, 1, 64, 100);
        json_decref(root);
    }
    snprintf(args, sizeof args, "CTRAIN_SYSFS_ROOT=%s %s time cnn --protocol smoke --device cpu --threads 1 --epochs 2 --samples 64 "
             "--val-samples 32 --sample-hz 100 --price cpu=3600 --electricity 0.3 --hardware-cost cpu=100 --json %s > %s/ctrain.txt 2>&1",
             dir, t_ctrain_bin(), kj, dir);
    rc = system(args);
    stop_ticking(ticker);
    t_check(rc == 0, "ctrain time cnn: exit %d (%s/ctrain.txt)", rc, dir);
    if (rc == 0 && t_check(ct_json_load(&root, kj) == CT_OK, "%s: %s", kj, ct_last_error())) {
        double j = json_sub(root, "hardware", "cpu", "joules");
        t_check(whole_steps(j), "ctrain: %.9g J is not a whole number of the counter's 0.25 J steps", j);
        json_decref(root);
    }

    t_case("hwreport/time --compare of ctrain's file and siamese_torch.py's: energy and cost rows with figures for both");
    snprintf(args, sizeof args, "time --compare %s %s", kj, tj);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    const char *rows[] = { "joules/epoch", "avg W", "peak W", "max temperature C", "data wait", "rent/epoch", "rent/run",
                           "electricity/run", "break-even hours" };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *line = out;
        while (line && strncmp(line, rows[i], strlen(rows[i])) != 0) line = (line = strchr(line, '\n')) ? line + 1 : NULL;
        size_t len = line ? strcspn(line, "\n") : 0;
        char row[256];
        snprintf(row, sizeof row, "%.*s", (int)(len < 255 ? len : 255), line ? line : "");
        t_check(line && !strstr(row, "n/a"), "row '%s' missing or n/a: '%s'\n%s", rows[i], row, out);
    }
    t_check(!strstr(out, "not recorded"), "a file read as /1: %s", out);

    t_case("hwreport/siamese_torch.py without counters: null figures, the reasons in ctrain's words");
    snprintf(args, sizeof args, "--epochs 2 --pairs 8 --val-pairs 0 --batch 8 --threads 1 --json '%s' --price cpu=1 --electricity 0.3 "
             "--hardware-cost cpu=10", ej);
    rc = run_twin(empty, "siamese_torch.py", args);
    t_check(rc == 0, "siamese_torch.py: exit %d: %s", rc, out);
    ct_hw hw;
    setenv("CTRAIN_SYSFS_ROOT", empty, 1);
    ct_hw_open(&hw);   /* ctrain's reasons for the same tree */
    unsetenv("CTRAIN_SYSFS_ROOT");
    if (rc == 0 && t_check(ct_json_load(&root, ej) == CT_OK, "%s: %s", ej, ct_last_error())) {
        t_check(isnan(json_num(root, NULL, "joules_per_epoch")) && isnan(json_num(root, NULL, "avg_watts"))
                && isnan(json_num(root, NULL, "samples_per_joule")) && isnan(json_sub(root, "hardware", "cpu", "joules")),
                "figures without a counter: %g J/epoch", json_num(root, NULL, "joules_per_epoch"));
        t_check(!strcmp(json_text(root, NULL, "energy_why"), hw.energy_why), "energy_why '%s', ctrain's '%s'",
                json_text(root, NULL, "energy_why"), hw.energy_why);
        t_check(isnan(json_num(root, NULL, "max_temp_c")) && !strcmp(json_text(root, NULL, "temp_why"), hw.temp_why),
                "temp_why '%s', ctrain's '%s'", json_text(root, NULL, "temp_why"), hw.temp_why);
        char want[700];
        snprintf(want, sizeof want, "break-even with --electricity needs the device's power: %.400s", hw.energy_why);
        t_check(isnan(json_num(root, "money", "break_even_hours")) && !strcmp(json_text(root, "money", "break_even_why"), want),
                "break_even_why '%s'", json_text(root, "money", "break_even_why"));
        t_check(close_to(json_num(root, "money", "rent_per_epoch"), json_num(root, "epoch_seconds", "median") / 3600), "rent per epoch");
        json_decref(root);
    }

    t_case("hwreport/siamese_torch.py --price for a device it does not time: one line, exit 2");
    rc = run_twin(dir, "siamese_torch.py", "--epochs 1 --pairs 8 --price gpu=2.50");
    int lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    t_check(rc == 2 && lines == 1 && strstr(out, "--price gpu=2.50: this run does not time gpu (its devices: cpu)"),
            "exit %d, %d lines: %s", rc, lines, out);
}

void suite_hwreport(void)
{
    test_sysfs();
    test_gpu_meter();
    test_nvml();
    test_command();
    test_twins();
    rm_tree(dir);
}
