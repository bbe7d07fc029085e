/* hwmon.c - the CPU's energy and temperature counters from sysfs (RAPL, hwmon), the
 * sampling thread, and the figures of a stretch of samples (io/hwmon.h). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/clock.h"
#include "io/hwmon.h"

const char *ct_hw_sysfs_root(void)
{
    const char *r = getenv("CTRAIN_SYSFS_ROOT");
    return r && *r ? r : "/sys";
}

/* The first line of a small file, without its newline; 0 on success, else errno. */
static int read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return errno ? errno : EIO;
    int err = 0;
    if (!fgets(buf, (int)cap, f)) err = ferror(f) && errno ? errno : EIO;
    fclose(f);
    if (!err) buf[strcspn(buf, "\n")] = 0;
    return err;
}

/* A file holding one number; NaN when it cannot be read or is not a number. */
static double read_number(const char *path)
{
    char buf[64], *end;
    if (read_line(path, buf, sizeof buf) != 0) return NAN;
    double v = strtod(buf, &end);
    return end == buf ? NAN : v;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The entries of dir whose names start with prefix, sorted; returns the count (at most max, each freed by the caller). */
static int list_dir(const char *dir, const char *prefix, char **names, int max, int *err)
{
    DIR *d = opendir(dir);
    *err = d ? 0 : errno;
    if (!d) return 0;
    int n = 0;
    for (struct dirent *de; n < max && (de = readdir(d)); )
        if (!strncmp(de->d_name, prefix, strlen(prefix))) names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    return n;
}

/* The RAPL package zones: powercap/intel-rapl:N (not intel-rapl:N:M, not intel-rapl-mmio) named package-*. */
static void find_rapl(ct_hw *hw, const char *root)
{
    char dir[192], path[CT_HW_PATH + 64], *names[64];
    int err, unreadable = 0, other = 0;
    snprintf(dir, sizeof dir, "%.160s/class/powercap", root);
    int n = list_dir(dir, "intel-rapl:", names, 64, &err);
    if (err) {
        snprintf(hw->energy_why, sizeof hw->energy_why, "no CPU energy counter: %s: %s (no RAPL driver: a virtual machine, "
                 "or a kernel without intel_rapl)", dir, strerror(err));
        return;
    }
    for (int i = 0; i < n; i++) {
        int k, used = 0;
        if (sscanf(names[i], "intel-rapl:%d%n", &k, &used) == 1 && names[i][used] == 0 && hw->n_zones < CT_HW_MAX_ZONES) {
            char name[32] = "";
            snprintf(path, sizeof path, "%s/%s/name", dir, names[i]);
            read_line(path, name, sizeof name);
            if (strncmp(name, "package", 7) != 0) { other++; free(names[i]); continue; }
            int z = hw->n_zones;
            snprintf(hw->zone_path[z], CT_HW_PATH, "%s/%.200s/energy_uj", dir, names[i]);
            snprintf(hw->zone_name[z], sizeof hw->zone_name[z], "%s", name);
            snprintf(path, sizeof path, "%s/%s/max_energy_range_uj", dir, names[i]);
            double mx = read_number(path);
            hw->zone_max_uj[z] = isfinite(mx) && mx > 0 ? mx : 0;
            char probe[64];
            int e = read_line(hw->zone_path[z], probe, sizeof probe);
            if (e == 0) hw->n_zones++;
            else if (e == EACCES || e == EPERM) unreadable++;
        }
        free(names[i]);
    }
    if (hw->n_zones) return;
    if (unreadable)
        snprintf(hw->energy_why, sizeof hw->energy_why, "no CPU energy counter: %s/intel-rapl:*/energy_uj is readable by root "
                 "only (Linux 5.10 and later): run as root or `sudo chmod o+r` those files", dir);
    else
        snprintf(hw->energy_why, sizeof hw->energy_why, "no CPU energy counter: %s has no RAPL package zone%s", dir,
                 other ? " (only sub-zones or psys)" : "");
}

/* The CPU's thermometers: hwmon k10temp (Tdie, else Tctl) or coretemp (Package id N). */
static void find_temps(ct_hw *hw, const char *root)
{
    char dir[192], path[CT_HW_PATH + 128], *names[64];
    int err;
    snprintf(dir, sizeof dir, "%.160s/class/hwmon", root);
    int n = list_dir(dir, "hwmon", names, 64, &err);
    if (err) {
        snprintf(hw->temp_why, sizeof hw->temp_why, "no CPU thermometer: %s: %s (a virtual machine, or no k10temp/coretemp "
                 "driver)", dir, strerror(err));
        return;
    }
    for (int i = 0; i < n; i++) {
        char chip[64] = "";
        snprintf(path, sizeof path, "%s/%s/name", dir, names[i]);
        read_line(path, chip, sizeof chip);
        int amd = !strcmp(chip, "k10temp"), intel = !strcmp(chip, "coretemp");
        int best = -1, best_rank = 0;
        for (int k = 1; (amd || intel) && k <= 64; k++) {   /* temp1_label ... */
            char label[64];
            snprintf(path, sizeof path, "%s/%s/temp%d_label", dir, names[i], k);
            if (read_line(path, label, sizeof label) != 0) continue;
            int rank = amd ? (!strcmp(label, "Tdie") ? 2 : !strcmp(label, "Tctl") ? 1 : 0) : !strncmp(label, "Package id", 10);
            if (rank > best_rank) { best_rank = rank; best = k; snprintf(hw->temp_what, sizeof hw->temp_what, "%s %s", chip, label); }
        }
        if (best > 0 && hw->n_temps < CT_HW_MAX_TEMPS)
            snprintf(hw->temp_path[hw->n_temps++], CT_HW_PATH, "%s/%.100s/temp%d_input", dir, names[i], best);
        free(names[i]);
    }
    if (!hw->n_temps)
        snprintf(hw->temp_why, sizeof hw->temp_why, "no CPU thermometer: no k10temp (Tdie/Tctl) or coretemp (Package id) "
                 "sensor under %s", dir);
}

void ct_hw_open(ct_hw *hw)
{
    memset(hw, 0, sizeof *hw);
    const char *root = ct_hw_sysfs_root();
    find_rapl(hw, root);
    find_temps(hw, root);
}

void ct_hw_read_cpu(const ct_hw *hw, double t, ct_hw_sample *s)
{
    s->t = t;
    for (int z = 0; z < CT_HW_MAX_ZONES; z++) s->cpu_uj[z] = z < hw->n_zones ? read_number(hw->zone_path[z]) : NAN;
    s->cpu_temp_c = NAN;
    for (int k = 0; k < hw->n_temps; k++) {
        double c = read_number(hw->temp_path[k]) / 1000.0;
        if (isfinite(c) && !(c <= s->cpu_temp_c)) s->cpu_temp_c = c;
    }
    s->gpu_w = s->gpu_mj = s->gpu_temp_c = s->gpu_busy = s->gpu_mem_busy = s->gpu_sm_mhz = s->gpu_mem_mhz = NAN;
}

/* ---- figures ---- */
void ct_hw_meter_none(ct_hw_meter *m, const char *why)
{
    memset(m, 0, sizeof *m);
    m->joules = m->avg_w = m->peak_w = m->max_temp_c = m->busy_pct = m->mem_busy_pct = m->sm_mhz = NAN;
    m->seconds = NAN;
    snprintf(m->energy_why, sizeof m->energy_why, "%s", why);
    snprintf(m->temp_why, sizeof m->temp_why, "%s", why);
    snprintf(m->busy_why, sizeof m->busy_why, "%s", why);
}

static void meter_begin(ct_hw_meter *m, const ct_hw_sample *s, size_t lo, size_t hi)
{
    ct_hw_meter_none(m, "");
    m->n_samples = (int)(hi - lo + 1);
    m->seconds = s[hi].t - s[lo].t;
}

/* The highest temperature of the stretch (offset: the field in ct_hw_sample). */
static double max_of(const ct_hw_sample *s, size_t lo, size_t hi, size_t offset)
{
    double mx = NAN;
    for (size_t i = lo; i <= hi; i++) {
        double v = *(const double *)((const char *)&s[i] + offset);
        if (isfinite(v) && !(v <= mx)) mx = v;
    }
    return mx;
}

static double mean_of(const ct_hw_sample *s, size_t lo, size_t hi, size_t offset)
{
    double sum = 0;
    int n = 0;
    for (size_t i = lo; i <= hi; i++) {
        double v = *(const double *)((const char *)&s[i] + offset);
        if (isfinite(v)) { sum += v; n++; }
    }
    return n ? sum / n : NAN;
}

void ct_hw_cpu_meter(const ct_hw *hw, const ct_hw_sample *s, size_t lo, size_t hi, ct_hw_meter *m)
{
    meter_begin(m, s, lo, hi);
    m->max_temp_c = max_of(s, lo, hi, offsetof(ct_hw_sample, cpu_temp_c));
    if (!isfinite(m->max_temp_c))
        snprintf(m->temp_why, sizeof m->temp_why, "%s", hw->n_temps ? "the CPU thermometer could not be read" : hw->temp_why);
    snprintf(m->busy_why, sizeof m->busy_why, "a GPU figure");
    if (!hw->n_zones) { snprintf(m->energy_why, sizeof m->energy_why, "%s", hw->energy_why); return; }
    if (hi <= lo || !(m->seconds > 0)) { snprintf(m->energy_why, sizeof m->energy_why, "fewer than two samples"); return; }
    double total = 0, peak = NAN;
    for (size_t i = lo; i < hi; i++) {   /* sample by sample: at most one wrap between two samples */
        double uj = 0, dt = s[i + 1].t - s[i].t;
        for (int z = 0; z < hw->n_zones; z++) {
            double d = s[i + 1].cpu_uj[z] - s[i].cpu_uj[z];
            if (!isfinite(d)) {
                snprintf(m->energy_why, sizeof m->energy_why, "the energy counter %s could not be read during the run", hw->zone_path[z]);
                return;
            }
            if (d < 0) {
                if (!(hw->zone_max_uj[z] > 0)) {
                    snprintf(m->energy_why, sizeof m->energy_why, "the energy counter %s wrapped and its max_energy_range_uj is "
                             "unknown", hw->zone_path[z]);
                    return;
                }
                d += hw->zone_max_uj[z];
            }
            uj += d;
        }
        total += uj;
        if (dt > 0 && !(uj / 1e6 / dt <= peak)) peak = uj / 1e6 / dt;
    }
    m->joules = total / 1e6;
    m->avg_w = m->joules / m->seconds;
    m->peak_w = peak;
    snprintf(m->energy_how, sizeof m->energy_how, "RAPL package energy counter%s (%d zone%s)", hw->n_zones > 1 ? "s" : "",
             hw->n_zones, hw->n_zones > 1 ? "s" : "");
}

void ct_hw_gpu_meter(const char *gpu_why, const ct_hw_sample *s, size_t lo, size_t hi, ct_hw_meter *m)
{
    if (gpu_why) { ct_hw_meter_none(m, gpu_why); return; }
    meter_begin(m, s, lo, hi);
    m->max_temp_c = max_of(s, lo, hi, offsetof(ct_hw_sample, gpu_temp_c));
    if (!isfinite(m->max_temp_c)) snprintf(m->temp_why, sizeof m->temp_why, "NVML gave no GPU temperature");
    m->busy_pct = mean_of(s, lo, hi, offsetof(ct_hw_sample, gpu_busy));
    m->mem_busy_pct = mean_of(s, lo, hi, offsetof(ct_hw_sample, gpu_mem_busy));
    m->sm_mhz = mean_of(s, lo, hi, offsetof(ct_hw_sample, gpu_sm_mhz));
    if (!isfinite(m->busy_pct)) snprintf(m->busy_why, sizeof m->busy_why, "NVML gave no utilisation rates");
    m->peak_w = max_of(s, lo, hi, offsetof(ct_hw_sample, gpu_w));
    if (hi <= lo || !(m->seconds > 0)) { snprintf(m->energy_why, sizeof m->energy_why, "fewer than two samples"); return; }
    if (m->seconds < CT_HW_GPU_MIN_SECONDS) {
        snprintf(m->energy_why, sizeof m->energy_why, "the epochs after the warm-up lasted %.2f s, under the %.0f s NVML's power "
                 "figures need on recent GPUs (they average over 1 s); time more samples per epoch", m->seconds, CT_HW_GPU_MIN_SECONDS);
        return;
    }
    if (isfinite(s[lo].gpu_mj) && isfinite(s[hi].gpu_mj)) {   /* the board's own counter: exact */
        m->joules = (s[hi].gpu_mj - s[lo].gpu_mj) / 1e3;
        snprintf(m->energy_how, sizeof m->energy_how, "NVML total energy counter");
    } else {   /* no counter (GPUs before Volta): the power readings, integrated (trapezoids) */
        double j = 0;
        for (size_t i = lo; i < hi; i++) {
            if (!isfinite(s[i].gpu_w) || !isfinite(s[i + 1].gpu_w)) {
                snprintf(m->energy_why, sizeof m->energy_why, "NVML gave neither an energy counter nor power readings");
                return;
            }
            j += 0.5 * (s[i].gpu_w + s[i + 1].gpu_w) * (s[i + 1].t - s[i].t);
        }
        m->joules = j;
        snprintf(m->energy_how, sizeof m->energy_how, "NVML power readings integrated over the samples (no energy counter)");
    }
    m->avg_w = m->joules / m->seconds;
}

/* ---- the sampler ---- */
/* Appends one sample (the lock held); SIZE_MAX when out of memory. */
static size_t take(ct_hw_sampler *sp)
{
    if (sp->n == sp->cap) {
        size_t cap = sp->cap ? 2 * sp->cap : 256;
        ct_hw_sample *s = realloc(sp->s, cap * sizeof *s);
        if (!s) return SIZE_MAX;
        sp->s = s;
        sp->cap = cap;
    }
    ct_hw_sample *x = &sp->s[sp->n];
    ct_hw_read_cpu(&sp->hw, ct_now(), x);
    if (sp->gpu) sp->gpu(sp->gpu_ctx, x);
    return sp->n++;
}

static void *sampler_main(void *arg)
{
    ct_hw_sampler *sp = arg;
    pthread_mutex_lock(&sp->mu);
    while (!sp->stop) {
        take(sp);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double next = ts.tv_sec + ts.tv_nsec * 1e-9 + sp->period;
        ts.tv_sec = (time_t)next;
        ts.tv_nsec = (long)((next - (double)ts.tv_sec) * 1e9);
        while (!sp->stop && pthread_cond_timedwait(&sp->cv, &sp->mu, &ts) == 0) { }
    }
    struct timespec cpu;   /* what this thread cost the machine, all of it */
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0) sp->cpu_seconds = cpu.tv_sec + cpu.tv_nsec * 1e-9;
    pthread_mutex_unlock(&sp->mu);
    return NULL;
}

ct_status ct_hw_sampler_start(ct_hw_sampler *sp, double hz, ct_hw_gpu_read gpu, void *gpu_ctx)
{
    memset(sp, 0, sizeof *sp);
    ct_hw_open(&sp->hw);
    sp->gpu = gpu;
    sp->gpu_ctx = gpu_ctx;
    sp->period = hz > 0 ? 1.0 / hz : 0;
    sp->started = ct_now();
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&sp->mu, NULL);
    pthread_cond_init(&sp->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (hz > 0) {
        int e = pthread_create(&sp->thread, NULL, sampler_main, sp);
        if (e) return ct_fail(CT_EIO, "cannot start the thread that samples the power counters: %s", strerror(e));
        sp->running = 1;
    }
    return CT_OK;
}

size_t ct_hw_sampler_mark(ct_hw_sampler *sp)
{
    const double t0 = ct_now();
    pthread_mutex_lock(&sp->mu);
    size_t i = take(sp);
    pthread_mutex_unlock(&sp->mu);
    sp->mark_seconds += ct_now() - t0;
    return i;
}

void ct_hw_sampler_stop(ct_hw_sampler *sp)
{
    if (!sp->running) return;
    sp->wall_seconds = ct_now() - sp->started;
    pthread_mutex_lock(&sp->mu);
    sp->stop = 1;
    pthread_cond_signal(&sp->cv);
    pthread_mutex_unlock(&sp->mu);
    pthread_join(sp->thread, NULL);
    sp->running = 0;
}

void ct_hw_sampler_free(ct_hw_sampler *sp)
{
    ct_hw_sampler_stop(sp);
    pthread_mutex_destroy(&sp->mu);
    pthread_cond_destroy(&sp->cv);
    free(sp->s);
    sp->s = NULL;
    sp->n = sp->cap = 0;
}
