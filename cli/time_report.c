/* time_report.c - the results of `ctrain time` that travel: the JSON file of
 * one device's run and the SVG picture (cli/time_compare.c reads the JSON files
 * back for `ctrain time --compare` and --baseline).
 *
 * JSON schema "ctrain-time/1" (one object; numbers that are not finite are null):
 *   schema, framework ("ctrain 0.1.0"; bench/torch_timing.py writes "pytorch ..." and, in its files
 *   only, pytorch (its build), ctrain_blas_core and tf32), ctrain_version,
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
 *   epochs: [ { epoch, and every field of an epoch's log (ct_epoch_fields, train/task.h): loss,
 *               accuracy, val_loss, val_accuracy, val_eer (null when not computed; files before
 *               it lack it), seconds, train_seconds, val_seconds } ]
 *   epoch_seconds: { median, min, max }      over the epochs after the warm-up
 *   train_samples_per_s, gflops              training part of those epochs
 *   fma_peak_gflops, fma_peak_best_gflops, fma_peak_what, fraction_of_fma_peak
 *                                            the FP32 FMA peak with the same threads (core/peak.h): "of peak"
 *   peak_gflops, peak_best_gflops, peak_what, fraction_of_peak
 *                                            the sgemm peak (these names predate the FMA peak; files
 *                                            without the fma_ fields read as n/a in --compare)
 *   layers (with --layers): [ { name, forward_ms, backward_ms, share, gflops } ], profiled_batches
 *   outside_threads_ms (with --layers)       of a profiled training step, the ms the training thread
 *                                            spent outside the worker pool (core/threads.h): what more
 *                                            threads cannot shorten; null on a GPU (files before it lack it)
 *
 * Added in "ctrain-time/2" (cli/time_hw.c; a /1 file has none of them and --compare shows n/a):
 *   joules_per_epoch, avg_watts, peak_watts  the device's own meter (CPU run: the RAPL package
 *                                            counters; GPU run: NVML's board figures), over the
 *                                            epochs after the warm-up; joules of a whole epoch
 *                                            (validation included), W = J / s, peak: the highest
 *                                            power between two samples (RAPL) or reading (NVML)
 *   samples_per_joule                        training samples per epoch / joules_per_epoch
 *   max_temp_c                               the device's highest temperature, degrees C
 *   gpu_busy_pct                             NVML's mean GPU utilisation (percent of time a kernel ran)
 *   data_wait_share                          of the training seconds, the share spent waiting in
 *                                            the task's load() for a batch (0..1)
 *   energy_how, energy_why, temp_why, busy_why   how the joules were measured; why each is null ("" when not)
 *   hardware: { sample_hz,                   0: not sampled (--sample-hz 0)
 *               sampler_cpu_seconds, sampled_seconds, mark_seconds
 *                                            what sampling cost: the sampling thread's own CPU time over
 *                                            the sampled_seconds it ran, and the wall time the epochs'
 *                                            ends spent taking their samples (null: not sampled)
 *               cpu: { seconds, joules, avg_w, peak_w, energy_how, energy_why, max_temp_c, temp_why, n_samples },
 *               gpu: { the same, busy_pct, mem_busy_pct, sm_mhz, busy_why } }
 *                                            both meters of the run (a GPU run's cpu: the host's package)
 *   money: { price_per_hour, electricity_per_kwh, hardware_cost      as given (null: not given)
 *            epochs                                                  a whole run of the protocol
 *            rent_per_epoch, rent_per_run                            price x median s/epoch (x epochs)
 *            electricity_per_epoch, electricity_per_run              joules_per_epoch / 3.6e6 x per kWh
 *            break_even_hours, break_even_why }                      hardware_cost / (price - electricity an hour)
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
    ct_cpu_name(cpu, sizeof cpu);
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
        ct_json_object_begin(w, NULL);
        ct_json_int(w, "epoch", e + 1);
        for (int k = 0; k < CT_EPOCH_FIELDS; k++) {   /* the fields of an epoch's log (train/task.h): not computed is null */
            const ct_epoch_field *f = &ct_epoch_fields[k];
            double v = ct_epoch_get(&r->hist[e], f);
            ct_json_num(w, f->name, (f->flags & CT_EPOCH_OPTIONAL) && v < 0 ? NAN : v);
        }
        ct_json_object_end(w);
    }
    ct_json_array_end(w);
}

/* ms per profiled training step spent outside the worker pool (core/threads.h), CPU runs
 * with --per-layer; -1 elsewhere (a GPU run's pool is idle while the GPU works). */
double time_serial_ms(const time_run *r)
{
    if (r->prof_batches < 1 || strncmp(r->device, "cpu", 3) != 0) return -1;
    double ms = 1e3 * (r->prof_train_seconds - r->prof_parallel_seconds) / (double)r->prof_batches;
    return ms > 0 ? ms : 0;
}

static void write_layers(ct_json_writer *w, const time_run *r)
{
    double nb = (double)r->prof_batches, step = nb > 0 ? r->prof_train_seconds / nb : 0;
    ct_json_int(w, "profiled_batches", r->prof_batches);
    ct_json_num(w, "outside_threads_ms", time_serial_ms(r) >= 0 ? time_serial_ms(r) : NAN);
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

static void write_meter(ct_json_writer *w, const char *key, const ct_hw_meter *m, int gpu)
{
    ct_json_object_begin(w, key);
    ct_json_num(w, "seconds", m->seconds);
    ct_json_num(w, "joules", m->joules);
    ct_json_num(w, "avg_w", m->avg_w);
    ct_json_num(w, "peak_w", m->peak_w);
    ct_json_str(w, "energy_how", m->energy_how);
    ct_json_str(w, "energy_why", isfinite(m->joules) ? "" : m->energy_why);
    ct_json_num(w, "max_temp_c", m->max_temp_c);
    ct_json_str(w, "temp_why", isfinite(m->max_temp_c) ? "" : m->temp_why);
    if (gpu) {
        ct_json_num(w, "busy_pct", m->busy_pct);
        ct_json_num(w, "mem_busy_pct", m->mem_busy_pct);
        ct_json_num(w, "sm_mhz", m->sm_mhz);
        ct_json_str(w, "busy_why", isfinite(m->busy_pct) ? "" : m->busy_why);
    }
    ct_json_int(w, "n_samples", m->n_samples);
    ct_json_object_end(w);
}

/* The counters and the money (schema /2). */
static void write_hardware(ct_json_writer *w, const time_setup *s, const time_run *r)
{
    time_figures f;
    time_figures_of(r, s, &f);
    ct_json_num(w, "joules_per_epoch", f.joules_per_epoch);
    ct_json_num(w, "avg_watts", f.avg_w);
    ct_json_num(w, "peak_watts", f.peak_w);
    ct_json_num(w, "samples_per_joule", f.samples_per_joule);
    ct_json_num(w, "max_temp_c", f.max_temp_c);
    ct_json_num(w, "gpu_busy_pct", f.gpu_busy_pct);
    ct_json_num(w, "data_wait_share", f.data_wait);
    ct_json_str(w, "energy_how", isfinite(f.joules_per_epoch) ? f.energy_how : "");
    ct_json_str(w, "energy_why", isfinite(f.joules_per_epoch) ? "" : f.energy_why);
    ct_json_str(w, "temp_why", isfinite(f.max_temp_c) ? "" : f.temp_why);
    ct_json_str(w, "busy_why", isfinite(f.gpu_busy_pct) ? "" : f.busy_why);
    ct_json_object_begin(w, "hardware");
    ct_json_num(w, "sample_hz", r->sample_hz);
    ct_json_num(w, "sampler_cpu_seconds", r->sampler_cpu);
    ct_json_num(w, "sampled_seconds", r->sampled);
    ct_json_num(w, "mark_seconds", r->mark_seconds);
    write_meter(w, "cpu", &r->cpu_hw, 0);
    write_meter(w, "gpu", &r->gpu_hw, 1);
    ct_json_object_end(w);
    ct_json_object_begin(w, "money");
    ct_json_num(w, "price_per_hour", f.price_per_hour);
    ct_json_num(w, "electricity_per_kwh", f.electricity_per_kwh);
    ct_json_num(w, "hardware_cost", f.hardware_cost);
    ct_json_int(w, "epochs", s->epochs);
    ct_json_num(w, "rent_per_epoch", f.rent_per_epoch);
    ct_json_num(w, "rent_per_run", f.rent_per_run);
    ct_json_num(w, "electricity_per_epoch", f.power_per_epoch);
    ct_json_num(w, "electricity_per_run", f.power_per_run);
    ct_json_num(w, "break_even_hours", f.break_even_hours);
    ct_json_str(w, "break_even_why", isfinite(f.break_even_hours) ? "" : f.money_why);
    ct_json_object_end(w);
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
    ct_json_str(&w, "precision", r->precision == CT_BF16 ? "bf16" : "fp32");
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
    write_hardware(&w, s, r);
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
        secs[ns++] = (ct_svg_series){ r->label, x, sy, r->n_epochs, 0, i };
        snprintf(names[nl], sizeof names[nl], "%s loss", r->label);
        loss[nl] = (ct_svg_series){ names[nl], x, ly, r->n_epochs, 0, i };
        nl++;
        snprintf(names[nl], sizeof names[nl], "%s val_loss", r->label);
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
