/* time_html.c - `ctrain time ... --html FILE.html` and `ctrain time --compare A.json
 * B.json --html FILE.html`: one self-contained page (inline CSS and inline SVG, no script,
 * no font or image from anywhere) with the table of every run's figures and bar charts of
 * the seconds per epoch, samples/s, samples per joule and cost per run, by device and
 * machine. It reads on a phone: a viewport, a table that scrolls sideways inside its box,
 * charts that scale to the width.
 *
 * Every cell of the table carries its figure's name (data-k="sec_median"), and every
 * figure is printed with one format (FIGS below), so the page can be checked against the
 * JSON it came from (tests/test_hwreport.c does, in Chromium's DOM). n/a cells carry the
 * reason as a title, and the reasons are listed once below the table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/time.h"
#include "io/svg.h"

/* The table's columns: key, heading, printf format (of value * scale). */
typedef struct {
    const char *key, *head, *fmt;
    size_t off;       /* offsetof(time_figures, field) */
    double scale;
} fig_col;

#define F(field) offsetof(time_figures, field)
static const fig_col FIGS[] = {
    { "sec_median", "s/epoch (median)", "%.2f", F(sec_median), 1 },
    { "samples_per_s", "samples/s", "%.1f", F(samples_per_s), 1 },
    { "gflops", "GFLOP/s", "%.1f", F(gflops), 1 },
    { "joules_per_epoch", "J/epoch", "%.1f", F(joules_per_epoch), 1 },
    { "avg_watts", "avg W", "%.1f", F(avg_w), 1 },
    { "peak_watts", "peak W", "%.1f", F(peak_w), 1 },
    { "samples_per_joule", "samples/J", "%.2f", F(samples_per_joule), 1 },
    { "max_temp_c", "max &#176;C", "%.0f", F(max_temp_c), 1 },
    { "gpu_busy_pct", "GPU busy %", "%.0f", F(gpu_busy_pct), 1 },
    { "data_wait_share", "data wait %", "%.1f", F(data_wait), 100 },
    { "rent_per_epoch", "rent/epoch", "%.4g", F(rent_per_epoch), 1 },
    { "rent_per_run", "rent/run", "%.4g", F(rent_per_run), 1 },
    { "electricity_per_run", "electricity/run", "%.4g", F(power_per_run), 1 },
    { "break_even_hours", "break-even h", "%.0f", F(break_even_hours), 1 },
};
#undef F
#define N_FIGS (int)(sizeof FIGS / sizeof FIGS[0])

static double fig(const time_figures *f, const fig_col *c) { return *(const double *)((const char *)f + c->off) * c->scale; }

/* Text escaped for HTML (the same five characters as XML). */
static void esc(FILE *o, const char *s) { ct_svg_write_text(o, s ? s : ""); }

/* Why figure c of f is n/a, or NULL when it is not (or nothing more specific is known). */
static const char *why_na(const time_figures *f, const fig_col *c)
{
    if (!strcmp(c->key, "max_temp_c")) return f->temp_why;
    if (!strcmp(c->key, "gpu_busy_pct")) return f->busy_why;
    if (!strcmp(c->key, "break_even_hours")) return f->money_why;
    if (strstr(c->key, "joule") || strstr(c->key, "watts") || !strcmp(c->key, "electricity_per_run")) return f->energy_why;
    return NULL;
}

static void row_name(char *buf, size_t n, const time_figures *f)
{
    if (f->file) snprintf(buf, n, "%s (%s, %s)", f->file, f->host ? f->host : "?", f->label);
    else snprintf(buf, n, "%s on %s", f->label, f->host ? f->host : "?");
}

/* A horizontal bar chart of figure c: one bar per set of figures with a finite value. */
static void bar_chart(FILE *o, const char *title, const char *unit, const time_figures *f, int n, const fig_col *c)
{
    double mx = 0;
    int k = 0;
    for (int i = 0; i < n; i++) { double v = fig(&f[i], c); if (isfinite(v)) { k++; if (v > mx) mx = v; } }
    fprintf(o, "<figure><figcaption>");
    esc(o, title);
    fprintf(o, "</figcaption>\n");
    if (!k) { fprintf(o, "<p class=\"na\">n/a for every run</p></figure>\n"); return; }
    /* each run: its name on a line of its own (names are long: file, machine, device), its bar below */
    const int W = 480, name_h = 18, bar_h = 20, gap = 10, row_h = name_h + bar_h + gap, h = n * row_h;
    fprintf(o, "<svg viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"", W, h);
    esc(o, title);
    fprintf(o, "\">\n");
    static const char *colors[] = { "#4878d0", "#ee854a", "#6acc64", "#d65f5f", "#956cb4", "#8c613c", "#dc7ec0", "#797979" };
    for (int i = 0; i < n; i++) {
        double v = fig(&f[i], c), y = i * row_h, bar_y = y + name_h;
        char name[256], val[64];
        row_name(name, sizeof name, &f[i]);
        fprintf(o, "<text x=\"0\" y=\"%.0f\" class=\"l\">", y + name_h - 4);
        esc(o, name);
        fprintf(o, "</text>");
        if (isfinite(v)) {
            double len = mx > 0 ? (W - 110) * v / mx : 0;
            snprintf(val, sizeof val, c->fmt, v);
            fprintf(o, "<rect x=\"0\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>", bar_y, len, bar_h, colors[i % 8]);
            fprintf(o, "<text x=\"%.1f\" y=\"%.0f\" class=\"v\">%s%s%s</text>\n", len + 4, bar_y + bar_h * 0.75, val,
                    *unit ? " " : "", unit);
        } else {
            fprintf(o, "<text x=\"4\" y=\"%.0f\" class=\"v\">n/a</text>\n", bar_y + bar_h * 0.75);
        }
    }
    fprintf(o, "</svg></figure>\n");
}

static const char *CSS =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;padding:12px;max-width:1100px;color:#222}"
    "h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}"
    ".scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;border:1px solid #ddd}"
    "table{border-collapse:collapse;font-size:.9em;white-space:nowrap}"
    "th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:right}th:first-child,td:first-child{text-align:left;"
    "position:sticky;left:0;background:#fff}"
    "thead th{background:#f4f4f4;position:sticky;top:0}"
    "td.na{color:#999}"
    ".charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:16px}"
    "figure{margin:0}figcaption{font-weight:600;margin:.5em 0}svg{width:100%;height:auto}"
    "svg text{font-size:15px;fill:#222}svg text.l{font-size:13px;fill:#555}"
    ".why{font-size:.85em;color:#555}"
    "@media (max-width:600px){body{padding:6px}table{font-size:.8em}}";

ct_status time_write_html(const char *path, const char *title, const time_figures *f, int n)
{
    FILE *o = fopen(path, "w");
    if (!o) return ct_fail(CT_EIO, "--html %s: cannot write the file (directory missing or not writable?)", path);
    fprintf(o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    esc(o, title);
    fprintf(o, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", CSS);
    esc(o, title);
    fprintf(o, "</h1>\n<div class=\"scroll\"><table id=\"figures\">\n<thead><tr><th>run</th><th>model</th><th>protocol</th>"
               "<th>precision</th>");
    for (int c = 0; c < N_FIGS; c++) fprintf(o, "<th>%s</th>", FIGS[c].head);
    fprintf(o, "</tr></thead>\n<tbody>\n");
    for (int i = 0; i < n; i++) {
        char name[256];
        row_name(name, sizeof name, &f[i]);
        fprintf(o, "<tr><td data-k=\"run\">");
        esc(o, name);
        fprintf(o, "</td><td data-k=\"model\">");
        esc(o, f[i].model);
        fprintf(o, "</td><td data-k=\"protocol\">");
        esc(o, f[i].protocol);
        fprintf(o, "</td><td data-k=\"precision\">");
        esc(o, f[i].precision);
        fprintf(o, "</td>");
        for (int c = 0; c < N_FIGS; c++) {
            double v = fig(&f[i], &FIGS[c]);
            if (isfinite(v)) {
                fprintf(o, "<td data-k=\"%s\">", FIGS[c].key);
                fprintf(o, FIGS[c].fmt, v);
                fprintf(o, "</td>");
            } else {
                const char *why = why_na(&f[i], &FIGS[c]);
                fprintf(o, "<td data-k=\"%s\" class=\"na\"", FIGS[c].key);
                if (why && *why) { fprintf(o, " title=\""); esc(o, why); fprintf(o, "\""); }
                fprintf(o, ">n/a</td>");
            }
        }
        fprintf(o, "</tr>\n");
    }
    fprintf(o, "</tbody>\n</table></div>\n<div class=\"why\">\n");
    char seen[64][256];
    int n_seen = 0;
    for (int i = 0; i < n; i++)   /* each reason once */
        for (int c = 0; c < N_FIGS; c++) {
            const char *why = isfinite(fig(&f[i], &FIGS[c])) ? NULL : why_na(&f[i], &FIGS[c]);
            if (!why || !*why) continue;
            int dup = 0;
            for (int k = 0; k < n_seen && !dup; k++) dup = !strcmp(seen[k], why);
            if (dup || n_seen == 64) continue;
            snprintf(seen[n_seen++], 256, "%s", why);
            fprintf(o, "<p>n/a: ");
            esc(o, why);
            fprintf(o, "</p>\n");
        }
    fprintf(o, "<p>Power: each device's own counter (RAPL package energy for a CPU, NVML's board figures for a GPU; not the "
               "wall), over the epochs after the warm-up. J/epoch: the whole epoch, validation included; samples/J: training "
               "samples per epoch over it. Data wait: the share of the training time spent waiting for batches. Rent: the "
               "price an hour x the median seconds per epoch; a run: all the protocol's epochs. Break-even: hours of training "
               "after which owning the device beats renting it, less its electricity.</p>\n</div>\n");
    fprintf(o, "<h2>Charts</h2>\n<section class=\"charts\">\n");
    bar_chart(o, "Seconds per epoch (median; shorter is better)", "s", f, n, &FIGS[0]);
    bar_chart(o, "Training samples per second", "", f, n, &FIGS[1]);
    bar_chart(o, "Training samples per joule", "", f, n, &FIGS[6]);
    bar_chart(o, "Cost of a whole run, rented", "", f, n, &FIGS[11]);
    fprintf(o, "</section>\n</body>\n</html>\n");
    int bad = ferror(o);
    if (fclose(o) != 0 || bad) return ct_fail(CT_EIO, "--html %s: writing failed (disk full?)", path);
    return CT_OK;
}

ct_status time_write_run_html(const char *path, const time_setup *s, const time_run *runs, int n)
{
    static time_figures f[16];
    char host[128] = "unknown", title[512];
    gethostname(host, sizeof host - 1);
    int k = 0;
    for (int i = 0; i < n && k < 16; i++) {
        time_figures_of(&runs[i], s, &f[k]);
        f[k++].host = host;
    }
    snprintf(title, sizeof title, "ctrain time %s, protocol %s, batch %d, on %s", s->model, s->protocol, s->batch, host);
    CT_TRY(time_write_html(path, title, f, k));
    printf("report page written to %s\n", path);
    return CT_OK;
}
