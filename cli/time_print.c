/* time_print.c - what `ctrain time` prints: its --help (its options from
 * time_opt_table, cli/time_opts.c; the models' own from the model table), and
 * once every device has run the statistics
 * over the epochs after the warm-up, the table of seconds, samples/s, GFLOP/s
 * and the fractions of both peaks, the --per-layer table, and the JSON and SVG
 * files of --json (cli/time_report.c writes them). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/common.h"
#include "cli/time.h"
#include "core/peak.h"

static const char *HELP_HEAD =
    "usage: ctrain time MODEL [options]\n"
    "       ctrain time --compare A.json B.json [...]\n"
    "\n"
    "Times real training (the loop of `ctrain train`) of MODEL on each device with the same seed,\n"
    "data and model, and prints one table: seconds per epoch (median, min and max over the epochs\n"
    "after a warm-up epoch), training samples/s, achieved GFLOP/s, the fraction of the CPU's measured\n"
    "FP32 FMA peak and of the measured sgemm peak (both with the same threads), and the speedup over the CPU.\n"
    "The optimizer is `ctrain train MODEL`'s at a constant learning rate; siamese-lstm times the seed's model\n"
    "(the last hidden state).\n"
    "\n"
    "models:\n";

/* The models that take option `flag` in `ctrain time` (NULL: the image models), in alphabetical order
 * ("cnn and siamese-cnn"). */
void time_models_with(const char *flag, char *buf, size_t cap)
{
    const char *names[16];
    int n = 0;
    for (int i = 0; ct_models[i] && n < 16; i++) {
        int has = !flag && ct_models[i]->task == CT_TASK_IMAGE;
        for (const ct_opt *o = ct_models[i]->opts; flag && !has && o->type != CT_OPT_END; o++)
            has = (o->cmds & CT_CMD_TIME) && o->flag && !strcmp(o->flag, flag);
        if (has) names[n++] = ct_models[i]->name;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) { const char *t = names[j]; names[j] = names[j - 1]; names[j - 1] = t; }
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", names[i]);
}

void time_help(FILE *out)
{
    fputs(HELP_HEAD, out);
    for (int i = 0; ct_models[i]; i++) fprintf(out, "  %-21s %s\n", ct_models[i]->name, ct_models[i]->summary);
    cli_opt_help(out, time_opt_table, CT_CMD_TIME, NULL);
    const char *seen[16];
    int n = 0;
    for (int i = 0; ct_models[i]; i++)   /* the models' own options that time takes, once each */
        for (const ct_opt *o = ct_models[i]->opts; o->type != CT_OPT_END; o++) {
            int dup = !(o->cmds & CT_CMD_TIME);
            for (int k = 0; k < n && !dup; k++) dup = !strcmp(seen[k], o->flag);
            if (dup || n == 16) continue;
            char left[64], text[256], who[128];
            seen[n++] = o->flag;
            time_models_with(o->flag, who, sizeof who);
            snprintf(left, sizeof left, "%s %s", o->flag, o->arg);
            snprintf(text, sizeof text, "%s: as in `ctrain train MODEL --help`", who);
            cli_help_line(out, left, text);
        }
}

/* Median, min and max of the epoch seconds after the warm-up; samples/s and GFLOP/s of their training parts. */
ct_status time_summarise(time_run *r, const time_setup *s)
{
    int first = r->n_epochs > s->warmup ? s->warmup : 0, k = r->n_epochs - first;
    if (k < 1) return CT_OK;   /* no epoch trained: nothing to summarise */
    double *sec = ct_malloc((size_t)k * sizeof *sec, "epoch seconds"), train = 0;
    if (!sec) return CT_ENOMEM;
    for (int e = first; e < r->n_epochs; e++) {
        sec[e - first] = r->hist[e].seconds;
        train += r->hist[e].train_seconds;
    }
    r->sec_median = ct_sort_median(sec, k);
    r->sec_min = sec[0];
    r->sec_max = sec[k - 1];
    free(sec);
    r->prof_train_seconds = train;
    r->samples_per_s = train > 0 ? (double)s->n_train * k / train : 0;
    r->gflops = r->samples_per_s * s->flops_per_sample / 1e9;
    return CT_OK;
}

/* Prints text broken at spaces into lines of at most 100 characters. */
static void print_wrapped(const char *text)
{
    const int width = 100;
    while (*text) {
        int n = (int)strlen(text);
        if (n > width) {
            n = width;
            while (n > 0 && text[n] != ' ') n--;
            if (n == 0) n = width;
        }
        printf("%.*s\n", n, text);
        text += n;
        while (*text == ' ') text++;
    }
}

/* One row of the main table: all cells already formatted; fma and sgemm: the peak and the fraction of it. */
static void table_row(const char *dev, const char *epochs, const char *med, const char *mn, const char *mx,
                      const char *sps, const char *gf, const char *fma[2], const char *sgemm[2], const char *speed)
{
    printf("%-8s %7s %9s %9s %9s %12s %9s %9s %8s %10s %8s %8s\n", dev, epochs, med, mn, mx, sps, gf, fma[0], fma[1],
           sgemm[0], sgemm[1], speed);
}

/* The peak and achieved's fraction of it, or n/a. */
static void peak_cells(char peak[32], char frac[32], double gflops, double p, int available)
{
    if (p > 0) snprintf(peak, 32, "%.1f", p); else snprintf(peak, 32, "n/a");
    if (p > 0 && available) snprintf(frac, 32, "%.0f%%", 100 * gflops / p); else snprintf(frac, 32, "n/a");
}

void time_print_table(const time_setup *s, const time_run *runs, int n)
{
    const time_run *cpu = NULL;
    for (int i = 0; i < n; i++)   /* the baseline: the CPU in float32 (else the first CPU run) */
        if (!strcmp(runs[i].device, "cpu") && runs[i].available && (!cpu || (cpu->precision != CT_F32 && runs[i].precision == CT_F32)))
            cpu = &runs[i];
    int bf16 = 0;
    for (int i = 0; i < n; i++) bf16 |= runs[i].precision == CT_BF16;
    printf("\n%-8s %7s %29s %12s %9s %18s %19s %8s\n", "", "", "seconds per epoch", "training", "", bf16 ? "FMA or bf16 peak" : "FP32 FMA peak",
           "sgemm peak", "");
    const char *head_fma[2] = { "GFLOP/s", "of peak" }, *head_sgemm[2] = { "GFLOP/s", "of sgemm" };
    table_row("device", "epochs", "median", "min", "max", "samples/s", "GFLOP/s", head_fma, head_sgemm, "vs cpu");
    for (int i = 0; i < n; i++) {
        const time_run *r = &runs[i];
        char c[9][32], fp[32], ff[32], sp[32], sf[32];
        const char *na = "n/a";
        peak_cells(fp, ff, r->gflops, r->fma_peak, r->available);
        peak_cells(sp, sf, r->gflops, r->peak, r->available);
        const char *fma[2] = { fp, ff }, *sgemm[2] = { sp, sf };
        if (!r->available) {   /* the peaks may have been measured even so */
            table_row(r->label, na, na, na, na, na, na, fma, sgemm, na);
            continue;
        }
        int first = r->n_epochs > s->warmup ? s->warmup : 0;
        if (r->n_epochs - first > 1) snprintf(c[0], sizeof c[0], "%d-%d", first + 1, r->n_epochs);
        else snprintf(c[0], sizeof c[0], "%d", r->n_epochs);
        snprintf(c[1], sizeof c[1], "%.2f", r->sec_median);
        snprintf(c[2], sizeof c[2], "%.2f", r->sec_min);
        snprintf(c[3], sizeof c[3], "%.2f", r->sec_max);
        snprintf(c[4], sizeof c[4], "%.1f", r->samples_per_s);
        snprintf(c[5], sizeof c[5], "%.1f", r->gflops);
        if (cpu && cpu->samples_per_s > 0) snprintf(c[8], sizeof c[8], "%.2fx", r->samples_per_s / cpu->samples_per_s);
        else snprintf(c[8], sizeof c[8], "%s", na);
        table_row(r->label, c[0], c[1], c[2], c[3], c[4], c[5], fma, sgemm, c[8]);
    }
    printf("\n");
    for (int i = 0; i < n && s->ranks > 1; i++)   /* data-parallel: the table's numbers are the whole job's */
        if (runs[i].available)
            printf("%s: %d ranks x %d thread%s: %.1f %s/s in total, %.1f per rank; the peaks are the sum of the ranks' peaks, "
                   "each measured on its rank while the others measured theirs\n", runs[i].label, s->ranks, s->threads,
                   s->threads == 1 ? "" : "s", runs[i].samples_per_s, s->sample_name, runs[i].samples_per_s / s->ranks);
    for (int i = 0; i < n; i++) {
        if (!runs[i].available) printf("%s: unavailable: %s\n", runs[i].label, runs[i].why);
        else printf("%s: %s; %s: %s (best %.1f); sgemm peak: %s (best %.1f)\n", runs[i].label, runs[i].device_desc,
                    runs[i].precision == CT_BF16 ? "bf16 peak" : "FMA peak", runs[i].fma_peak_what, runs[i].fma_peak_best,
                    runs[i].peak_what, runs[i].peak_best);
    }
    char text[2048];
    if (s->warmup == 0) snprintf(text, sizeof text, "Statistics over the single epoch (no warm-up epoch left out: use --epochs 2 or more).");
    else if (s->epochs == 2) snprintf(text, sizeof text, "Statistics over epoch 2; epoch 1 is the warm-up and is left out.");
    else snprintf(text, sizeof text, "Statistics over epochs 2-%d; epoch 1 is the warm-up and is left out.", s->epochs);
    print_wrapped(text);
    snprintf(text, sizeof text, "Seconds per epoch: wall time of training and validation (%ld + %ld %s). Samples/s and "
             "GFLOP/s: the training part only (forward, backward, optimizer and data loading). FLOPs: %.1f M per %s per "
             "training step, counting %s.", s->n_train, s->n_val, s->sample_name, s->flops_per_sample / 1e6,
             !strcmp(s->sample_name, "pairs") ? "pair" : "image", s->flops_counted);
    print_wrapped(text);
}

static void layer_row(const char *name, const char *fwd, const char *bwd, double total_ms, double share, const char *gf)
{
    printf("%-40s %10s %10s %10.3f %7.1f%% %9s\n", name, fwd, bwd, total_ms, 100 * share, gf);
}

void time_print_layers(const time_setup *s, const time_run *r)
{
    if (!r->available || r->n_layers == 0) return;
    double nb = (double)r->prof_batches;
    if (nb < 1) { printf("\n%s: no batch was profiled (use --epochs 2 or more: the first epoch is the warm-up)\n", r->label); return; }
    double step_ms = 1e3 * r->prof_train_seconds / nb, sum_ms = 0;
    printf("\nLayers on %s: ms per training batch (mean over %ld batches of up to %d %s, the epochs after the warm-up)\n",
           r->label, r->prof_batches, s->batch, s->sample_name);
    printf("%-40s %10s %10s %10s %8s %9s\n", "layer", "forward", "backward", "total", "share", "GFLOP/s");
    for (int i = 0; i < r->n_layers; i++) {
        const time_layer *l = &r->layer[i];
        double f = 1e3 * l->fwd_s / nb, b = 1e3 * l->bwd_s / nb;
        char fs[32], bs[32], gs[32];
        snprintf(fs, sizeof fs, "%.3f", f);
        snprintf(bs, sizeof bs, "%.3f", b);
        if (l->flops_per_sample > 0 && l->fwd_s + l->bwd_s > 0)
            snprintf(gs, sizeof gs, "%.1f", l->flops_per_sample * (double)r->prof_samples / (l->fwd_s + l->bwd_s) / 1e9);
        else snprintf(gs, sizeof gs, "-");
        layer_row(l->name, fs, bs, f + b, step_ms > 0 ? (f + b) / step_ms : 0, gs);
        sum_ms += f + b;
    }
    layer_row("other (optimizer, data)", "", "", step_ms - sum_ms, step_ms > 0 ? (step_ms - sum_ms) / step_ms : 0, "");
    char gs[32];
    snprintf(gs, sizeof gs, "%.1f", step_ms > 0 ? s->flops_per_sample * (double)r->prof_samples / nb / (step_ms * 1e-3) / 1e9 : 0);
    layer_row("training step", "", "", step_ms, 1, gs);
    if (time_serial_ms(r) >= 0)
        printf("of which outside the worker threads: %.2f ms (%.1f%%), what more threads cannot shorten\n",
               time_serial_ms(r), step_ms > 0 ? 100 * time_serial_ms(r) / step_ms : 0);
}

/* FILE.json -> FILE-DEVICE.json when several devices are timed; the picture is FILE.svg. */
static void output_path(char *buf, size_t n, const char *json, const char *device, const char *ext)
{
    size_t len = strlen(json);
    int has_ext = len > 5 && !strcmp(json + len - 5, ".json");
    int base = (int)(has_ext ? len - 5 : len);
    if (device) {
        char dev[32];
        snprintf(dev, sizeof dev, "%.31s", device);
        for (char *c = dev; *c; c++) if (*c == ':' || *c == ' ') *c = '-';
        snprintf(buf, n, "%.*s-%s%s", base, json, dev, ext);
    } else {
        snprintf(buf, n, "%.*s%s", base, json, ext);
    }
}

ct_status time_write_outputs(const char *json, const time_setup *s, const time_run *runs, int n)
{
    char path[4200];
    for (int i = 0; i < n; i++) {
        if (!runs[i].available) { printf("%s: nothing timed, no JSON written\n", runs[i].label); continue; }
        if (n == 1) snprintf(path, sizeof path, "%s", json);
        else output_path(path, sizeof path, json, runs[i].label, ".json");
        CT_TRY(time_write_json(path, s, &runs[i]));
        printf("results written to %s\n", path);
    }
    output_path(path, sizeof path, json, NULL, ".svg");
    CT_TRY(time_write_svg(path, s, runs, n));
    printf("picture written to %s\n", path);
    return CT_OK;
}

/* ---- the counters and the money ---- */
/* A number with fmt, or n/a. */
static void cell(char *buf, size_t n, const char *fmt, double v)
{
    if (isfinite(v)) snprintf(buf, n, fmt, v); else snprintf(buf, n, "n/a");
}

/* Prints "what: why" unless the same reason was printed already (each reason once). */
static void reason_once(const char *what, const char *why, char seen[][512], int *n_seen)
{
    if (!why || !*why) return;
    for (int i = 0; i < *n_seen; i++) if (!strcmp(seen[i], why)) return;
    if (*n_seen < 16) snprintf(seen[(*n_seen)++], 512, "%s", why);
    printf("n/a: %s: %s\n", what, why);
}

void time_print_hw(const time_setup *s, const time_run *runs, int n)
{
    int money = 0;
    for (int i = 0; i < n; i++) money |= isfinite(runs[i].price_per_hour) || isfinite(runs[i].electricity_per_kwh);
    printf("\n%-8s %9s %7s %7s %10s %7s %8s %9s", "device", "J/epoch", "avg W", "peak W", "samples/J", "max C", "GPU busy", "data wait");
    if (money) printf(" %10s %10s %10s %10s %11s", "rent/epoch", "rent/run", "power/epoch", "power/run", "break-even h");
    printf("\n");
    char seen[16][512];
    int n_seen = 0;
    for (int i = 0; i < n; i++) {
        time_figures f;
        time_figures_of(&runs[i], s, &f);
        char c[12][32];
        cell(c[0], 32, "%.1f", f.joules_per_epoch);
        cell(c[1], 32, "%.1f", f.avg_w);
        cell(c[2], 32, "%.1f", f.peak_w);
        cell(c[3], 32, "%.2f", f.samples_per_joule);
        cell(c[4], 32, "%.0f", f.max_temp_c);
        cell(c[5], 32, "%.0f%%", f.gpu_busy_pct);
        cell(c[6], 32, "%.1f%%", 100 * f.data_wait);
        printf("%-8s %9s %7s %7s %10s %7s %8s %9s", f.label, c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
        if (money) {
            cell(c[7], 32, "%.4g", f.rent_per_epoch);
            cell(c[8], 32, "%.4g", f.rent_per_run);
            cell(c[9], 32, "%.4g", f.power_per_epoch);
            cell(c[10], 32, "%.4g", f.power_per_run);
            cell(c[11], 32, "%.0f", f.break_even_hours);
            printf(" %10s %10s %11s %10s %12s", c[7], c[8], c[9], c[10], c[11]);
        }
        printf("\n");
    }
    for (int i = 0; i < n; i++) {
        if (!runs[i].available) continue;
        time_figures f;
        time_figures_of(&runs[i], s, &f);
        char what[96];
        snprintf(what, sizeof what, "%s energy and power", f.label);
        reason_once(what, isfinite(f.joules_per_epoch) ? NULL : f.energy_why, seen, &n_seen);
        snprintf(what, sizeof what, "%s temperature", f.label);
        reason_once(what, isfinite(f.max_temp_c) ? NULL : f.temp_why, seen, &n_seen);
        if (strncmp(runs[i].device, "gpu", 3) == 0) {
            snprintf(what, sizeof what, "%s GPU busy", f.label);
            reason_once(what, isfinite(f.gpu_busy_pct) ? NULL : f.busy_why, seen, &n_seen);
        }
        if (isfinite(f.joules_per_epoch)) printf("%s: energy from the %s\n", f.label, f.energy_how);
        if (isfinite(f.cpu_avg_w)) printf("%s: the CPU package drew %.1f W meanwhile (not in the figures above)\n", f.label, f.cpu_avg_w);
        if (money && isfinite(f.hardware_cost) && !isfinite(f.break_even_hours)) printf("%s: break-even n/a: %s\n", f.label, f.money_why);
    }
    for (int i = 0; i < n; i++)
        if (runs[i].available && isfinite(runs[i].sampler_cpu) && runs[i].sampled > 0)
            printf("%s: sampling cost the sampling thread %.1f ms of CPU in %.1f s (%.3f%% of one core), the epochs' ends %.2f ms\n",
                   runs[i].label, 1e3 * runs[i].sampler_cpu, runs[i].sampled, 100 * runs[i].sampler_cpu / runs[i].sampled,
                   1e3 * runs[i].mark_seconds);
    char text[1024];
    snprintf(text, sizeof text, "Power: the device's own counter (the CPU package for the CPU, the board for a GPU; not the wall), "
             "over the epochs after the warm-up, sampled %s. J/epoch: the whole epoch, validation included; samples/J: training "
             "%s per epoch over it. Data wait: the share of the training time spent waiting for batches.%s",
             runs[0].sample_hz > 0 ? "by a thread a few times a second" : "not at all (--sample-hz 0)", s->sample_name,
             money ? " Run: all the protocol's epochs at the median s/epoch. Break-even: hours of training after which owning "
                     "the device (--hardware-cost) beats renting it (--price), less its electricity (--electricity)." : "");
    print_wrapped(text);
}
