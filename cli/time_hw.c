/* time_hw.c - what `ctrain time` measures beside the seconds: the counters sampled while a
 * device trains (the CPU's RAPL energy and temperature, io/hwmon.h; a GPU's power, energy,
 * temperature, utilisation and clocks through NVML, cuda/nvml.h), the share of the steps
 * spent waiting for data (train/task.h's data_seconds), and the money: what an epoch and a
 * whole run cost rented (--price) or in electricity (--electricity), and after how many
 * hours owning the hardware (--hardware-cost) beats renting it.
 *
 * The figures are over the epochs after the warm-up, like the seconds: from the sample
 * taken at the warm-up epoch's end to the one at the last epoch's end. A counter that is not
 * there gives NaN and its reason, printed once below the table; nothing is estimated. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/time.h"
#include "cuda/device.h"
#include "cuda/nvml.h"

/* ---- sampling ---- */
static void read_gpu(void *ctx, ct_hw_sample *s)
{
    ct_nvml_reading g;
    ct_nvml_read(ctx, &g);
    s->gpu_w = g.power_w;
    s->gpu_mj = g.energy_mj;
    s->gpu_temp_c = g.temp_c;
    s->gpu_busy = g.busy;
    s->gpu_mem_busy = g.mem_busy;
    s->gpu_sm_mhz = g.sm_mhz;
    s->gpu_mem_mhz = g.mem_mhz;
}

ct_status time_hw_begin(time_hw *h, const time_run *r, const time_setup *s, double hz)
{
    memset(h, 0, sizeof *h);
    h->warmup = s->warmup;
    h->n_train = s->n_train;
    int index = -1;
    if (ct_gpu_parse_device(r->device, &index) != CT_OK) index = -1;
    h->gpu_run = index >= 0;
    h->sampling = hz > 0;
    if (!h->sampling) return CT_OK;
    if (!(h->marks = ct_calloc((size_t)s->epochs + 1, sizeof *h->marks, "sample marks"))) return CT_ENOMEM;
    if (!h->gpu_run) snprintf(h->gpu_why, sizeof h->gpu_why, "not a GPU run");
    else {
        char name[96];
        if (ct_nvml_open(&h->gpu, index, name, sizeof name) != CT_OK) snprintf(h->gpu_why, sizeof h->gpu_why, "%s", ct_last_error());
    }
    ct_status st = ct_hw_sampler_start(&h->sp, hz, h->gpu ? read_gpu : NULL, h->gpu);
    if (st != CT_OK) { ct_nvml_close(h->gpu); h->gpu = NULL; free(h->marks); h->marks = NULL; return st; }
    h->start = ct_hw_sampler_mark(&h->sp);
    return CT_OK;
}

/* The device's own meter: the GPU on a GPU run, else the CPU package. */
static const ct_hw_meter *own_meter(const time_run *r)
{
    int index = -1;
    return ct_gpu_parse_device(r->device, &index) == CT_OK && index >= 0 ? &r->gpu_hw : &r->cpu_hw;
}

int time_hw_epoch(void *ctx, const ct_epoch_report *rep, const char **tags, float *values, int max)
{
    time_hw *h = ctx;
    const ct_epoch_log *l = &rep->hist[rep->epoch];
    int n = 0;
#define SCALAR(tag, v) do { double v_ = (v); if (isfinite(v_) && n < max) { tags[n] = (tag); values[n++] = (float)v_; } } while (0)
    SCALAR("data_wait_share", l->train_seconds > 0 ? l->data_seconds / l->train_seconds : NAN);
    if (!h->sampling) return n;
    size_t at = ct_hw_sampler_mark(&h->sp), from = h->n_marks ? h->marks[h->n_marks - 1] : h->start;
    h->marks[h->n_marks++] = at;
    if (at == SIZE_MAX || from == SIZE_MAX) return n;
    pthread_mutex_lock(&h->sp.mu);   /* the thread may be growing the samples */
    ct_hw_meter cpu, gpu;
    ct_hw_cpu_meter(&h->sp.hw, h->sp.s, from, at, &cpu);
    ct_hw_gpu_meter(h->gpu ? NULL : h->gpu_why, h->sp.s, from, at, &gpu);
    pthread_mutex_unlock(&h->sp.mu);
    const ct_hw_meter *own = h->gpu_run ? &gpu : &cpu;
    SCALAR("power_watts", own->avg_w);
    SCALAR("peak_watts", own->peak_w);
    SCALAR("energy_joules", own->joules);
    SCALAR("samples_per_joule", own->joules > 0 ? h->n_train / own->joules : NAN);
    SCALAR("temperature_celsius", own->max_temp_c);
    if (h->gpu_run) {
        SCALAR("gpu_busy_percent", gpu.busy_pct);
        SCALAR("gpu_sm_clock_mhz", gpu.sm_mhz);
        SCALAR("cpu_package_watts", cpu.avg_w);
    }
#undef SCALAR
    return n;
}

void time_hw_end(time_hw *h, time_run *r, const time_setup *s)
{
    r->sample_hz = 0;
    r->sampler_cpu = r->sampled = r->mark_seconds = NAN;
    int first = r->n_epochs > s->warmup ? s->warmup : 0;
    double data = 0, train = 0;
    for (int e = first; e < r->n_epochs; e++) { data += r->hist[e].data_seconds; train += r->hist[e].train_seconds; }
    r->data_wait = train > 0 ? data / train : NAN;
    if (!h->sampling) {
        ct_hw_meter_none(&r->cpu_hw, "not sampled (--sample-hz 0)");
        ct_hw_meter_none(&r->gpu_hw, "not sampled (--sample-hz 0)");
        return;
    }
    ct_hw_sampler_stop(&h->sp);
    r->sample_hz = 1.0 / h->sp.period;
    r->sampler_cpu = h->sp.cpu_seconds;
    r->sampled = h->sp.wall_seconds;
    r->mark_seconds = h->sp.mark_seconds;
    /* the stretch: the warm-up epoch's end (the start when there is no warm-up) to the last epoch's end */
    int k = r->n_epochs - first;
    if (h->n_marks >= r->n_epochs && k > 0) {
        size_t lo = first > 0 ? h->marks[first - 1] : h->start, hi = h->marks[r->n_epochs - 1];
        if (lo != SIZE_MAX && hi != SIZE_MAX) {
            ct_hw_cpu_meter(&h->sp.hw, h->sp.s, lo, hi, &r->cpu_hw);
            ct_hw_gpu_meter(h->gpu_run ? (h->gpu ? NULL : h->gpu_why) : "not a GPU run", h->sp.s, lo, hi, &r->gpu_hw);
        } else {
            ct_hw_meter_none(&r->cpu_hw, "out of memory for the samples");
            ct_hw_meter_none(&r->gpu_hw, "out of memory for the samples");
        }
    } else {
        ct_hw_meter_none(&r->cpu_hw, "the run ended before its epochs were sampled");
        ct_hw_meter_none(&r->gpu_hw, "the run ended before its epochs were sampled");
    }
    ct_hw_sampler_free(&h->sp);
    ct_nvml_close(h->gpu);
    h->gpu = NULL;
    free(h->marks);
    h->marks = NULL;
}

/* ---- the figures ---- */
void time_money(time_figures *f)
{
    double hours = f->sec_median / 3600;
    f->rent_per_epoch = f->price_per_hour * hours;
    f->rent_per_run = f->rent_per_epoch * f->epochs;
    f->power_per_epoch = f->joules_per_epoch / 3.6e6 * f->electricity_per_kwh;
    f->power_per_run = f->power_per_epoch * f->epochs;
    f->break_even_hours = NAN;
    f->money_why[0] = 0;
    if (!isfinite(f->hardware_cost) || !isfinite(f->price_per_hour)) {
        snprintf(f->money_why, sizeof f->money_why, "break-even needs --hardware-cost and --price for the device");
        return;
    }
    /* owning costs the hardware once, then the electricity; renting costs the price every hour (the seed's
     * arithmetic: the hardware's price over the hourly rate, less the electricity when it is given) */
    double elec_per_hour = 0;
    if (isfinite(f->electricity_per_kwh)) {
        if (!isfinite(f->avg_w)) {
            snprintf(f->money_why, sizeof f->money_why, "break-even with --electricity needs the device's power: %.400s", f->energy_why);
            return;
        }
        elec_per_hour = f->avg_w / 1000 * f->electricity_per_kwh;
    }
    if (f->price_per_hour <= elec_per_hour) {
        snprintf(f->money_why, sizeof f->money_why, "never: its electricity costs more an hour than renting");
        return;
    }
    f->break_even_hours = f->hardware_cost / (f->price_per_hour - elec_per_hour);
}

void time_figures_of(const time_run *r, const time_setup *s, time_figures *f)
{
    memset(f, 0, sizeof *f);
    ct_hw_meter none;
    ct_hw_meter_none(&none, r->why);
    const ct_hw_meter *m = r->available ? own_meter(r) : &none;
    int first = r->n_epochs > s->warmup ? s->warmup : 0, k = r->n_epochs - first;
    f->label = r->label;
    f->model = s->model;
    f->protocol = s->protocol;
    f->precision = r->precision == CT_BF16 ? "bf16" : "fp32";
    f->sec_median = r->available ? r->sec_median : NAN;
    f->samples_per_s = r->available ? r->samples_per_s : NAN;
    f->gflops = r->available ? r->gflops : NAN;
    f->n_train = (double)s->n_train;
    f->epochs = s->epochs;
    f->joules_per_epoch = r->available && k > 0 ? m->joules / k : NAN;
    f->avg_w = m->avg_w;
    f->peak_w = m->peak_w;
    f->samples_per_joule = f->joules_per_epoch > 0 ? (double)s->n_train / f->joules_per_epoch : NAN;
    f->max_temp_c = m->max_temp_c;
    f->gpu_busy_pct = r->available ? r->gpu_hw.busy_pct : NAN;
    f->data_wait = r->available ? r->data_wait : NAN;
    f->cpu_avg_w = r->available && m == &r->gpu_hw ? r->cpu_hw.avg_w : NAN;
    snprintf(f->energy_why, sizeof f->energy_why, "%.500s", r->available ? m->energy_why : r->why);
    snprintf(f->energy_how, sizeof f->energy_how, "%s", m->energy_how);
    snprintf(f->temp_why, sizeof f->temp_why, "%s", m->temp_why);
    snprintf(f->busy_why, sizeof f->busy_why, "%s", r->available ? r->gpu_hw.busy_why : none.busy_why);
    f->price_per_hour = r->price_per_hour;
    f->electricity_per_kwh = r->electricity_per_kwh;
    f->hardware_cost = r->hardware_cost;
    time_money(f);
}

/* ---- the prices ---- */
/* One of --price and --hardware-cost: DEVICE=NUMBER,...; into each run of that device (off: the field). */
static ct_status parse_prices(const char *flag, const char *list, char devices[][32], int n_dev, time_run *runs, int n_runs, size_t off)
{
    if (!*list) return ct_fail(CT_EINVAL, "%s needs DEVICE=AMOUNT[,DEVICE=AMOUNT] (e.g. cpu=0.10,gpu=2.50)", flag);
    for (const char *p = list; ; ) {
        size_t len = strcspn(p, ","), eq = strcspn(p, "=");
        char dev[64];
        if (eq >= len || eq == 0 || eq >= sizeof dev)
            return ct_fail(CT_EINVAL, "%s %s: '%.*s' is not DEVICE=AMOUNT (e.g. cpu=0.10,gpu=2.50)", flag, list, (int)len, p);
        memcpy(dev, p, eq);
        dev[eq] = 0;
        if (!strcmp(dev, "cuda")) snprintf(dev, sizeof dev, "gpu");
        char num[64], *end;
        snprintf(num, sizeof num, "%.*s", (int)(len - eq - 1), p + eq + 1);
        double v = strtod(num, &end);
        if (!num[0] || *end || !isfinite(v) || v < 0)
            return ct_fail(CT_EINVAL, "%s %s: '%s' for %s is not an amount (a number such as 2.50, in any currency)", flag, list, num, dev);
        int found = 0;
        for (int d = 0; d < n_dev; d++) found |= !strcmp(devices[d], dev);
        if (!found) {
            char names[160] = "";
            for (int d = 0; d < n_dev; d++) snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", d ? ", " : "", devices[d]);
            return ct_fail(CT_EINVAL, "%s %s: this run does not time %s (its devices: %s)", flag, list, dev, names);
        }
        for (int i = 0; i < n_runs; i++)
            if (!strcmp(runs[i].device, dev)) {
                double *field = (double *)((char *)&runs[i] + off);
                if (isfinite(*field)) return ct_fail(CT_EINVAL, "%s %s: %s is priced twice", flag, list, dev);
                *field = v;
            }
        if (!p[len]) return CT_OK;
        p += len + 1;
    }
}

ct_status time_parse_money(const time_opts *o, char devices[][32], int n_dev, time_run *runs, int n_runs)
{
    double kwh = NAN;
    if (o->electricity) {
        char *end;
        kwh = strtod(o->electricity, &end);
        if (!*o->electricity || *end || !isfinite(kwh) || kwh < 0)
            return ct_fail(CT_EINVAL, "--electricity %s: not a price per kWh (a number such as 0.30, in any currency)", o->electricity);
    }
    for (int i = 0; i < n_runs; i++) {
        runs[i].price_per_hour = runs[i].hardware_cost = NAN;
        runs[i].electricity_per_kwh = kwh;
    }
    if (o->price) CT_TRY(parse_prices("--price", o->price, devices, n_dev, runs, n_runs, offsetof(time_run, price_per_hour)));
    if (o->hardware_cost)
        CT_TRY(parse_prices("--hardware-cost", o->hardware_cost, devices, n_dev, runs, n_runs, offsetof(time_run, hardware_cost)));
    return CT_OK;
}
