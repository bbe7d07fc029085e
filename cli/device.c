/* device.c - `--device cpu|gpu|gpu:N` for every command, the GPU part of the
 * hardware header, and `ctrain time`'s devices: its list and each one's peaks.
 *
 * A CPU-only build answers --device gpu with "built without CUDA"; a CUDA build
 * opens the GPU (cuda/device.c), which on a machine without one says "no NVIDIA
 * GPU found". An open GPU is the process's one GPU context until exit. */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/time.h"
#include "core/peak.h"
#include "core/threads.h"
#include "cuda/device.h"
#include "cuda/ops_gpu.h"
#include "layers/ops.h"

ct_status cli_open_device(const char *spec, int tf32, int deterministic, const ct_ops **ops)
{
    int index = -1;
    *ops = NULL;
    CT_TRY(ct_gpu_parse_device(spec, &index));
    if (index < 0) {
        if (tf32 || deterministic)
            return ct_fail(CT_EINVAL, "%s applies to the GPU; with --device cpu leave it out (the CPU always computes in FP32, "
                           "deterministically for a given --threads)", tf32 ? "--tf32" : "--deterministic");
        *ops = &ct_ops_cpu;
        return CT_OK;
    }
    ct_gpu_options opt = { .tf32 = tf32, .deterministic = deterministic };
    CT_TRY(ct_gpu_open(index, &opt));   /* no CUDA, no GPU, no such index: its one-line message */
    *ops = ct_ops_gpu();
    return CT_OK;
}

void cli_print_gpu_line(FILE *out)
{
    char line[512];
    if (ct_gpu_current()) {
        ct_gpu_describe(line, sizeof line);
        fprintf(out, "%s\n", line);
    } else if (ct_gpu_compiled()) {
        fprintf(out, "GPU: CUDA backend compiled in, not used (--device cpu)\n");
    } else {
        fprintf(out, "GPU: not compiled in (CPU-only build)\n");
    }
}

/* Marks the run unavailable with the reason; this is a result, not an error. */
static ct_status unavailable(time_run *r, const char *why)
{
    r->available = 0;
    snprintf(r->why, sizeof r->why, "%s", why);
    return CT_OK;
}

ct_status cli_time_device_open(time_run *r, int threads, int tf32, int deterministic, const ct_ops **ops_out, int *gpu)
{
    int index = -1;
    *gpu = 0;
    CT_TRY(ct_gpu_parse_device(r->device, &index));
    const ct_ops *ops;
    ct_sgemm_rate peak;
    if (index < 0) {
        char cpu[256];
        cli_cpu_model(cpu, sizeof cpu);
        snprintf(r->device_desc, sizeof r->device_desc, "%s, %d of %d logical cores", cpu, threads, ct_cpu_count());
        CT_TRY(ct_peak_sgemm_cpu(&peak));
        snprintf(r->peak_what, sizeof r->peak_what, "OpenBLAS sgemm %d^3, %d thread%s, median of %d", CT_PEAK_N,
                 threads, threads == 1 ? "" : "s", peak.repeats);
        ct_fma_rate fma;
        CT_TRY(ct_peak_fma_cpu(&fma, threads));
        r->fma_peak = fma.peak;
        r->fma_peak_best = fma.best;
        snprintf(r->fma_peak_what, sizeof r->fma_peak_what, "FP32 FMA loop, %s, %d thread%s, best of %d (median %.1f)",
                 ct_fma_isa_name(fma.isa), fma.threads, fma.threads == 1 ? "" : "s", fma.repeats, fma.median);
        ops = &ct_ops_cpu;
    } else {
        ct_gpu_options opt = { .tf32 = tf32, .deterministic = deterministic };
        if (ct_gpu_open(index, &opt) != CT_OK) return unavailable(r, ct_last_error());
        ct_gpu_describe(r->device_desc, sizeof r->device_desc);
        /* the peak at the run's precision: TF32 tensor cores when they are allowed */
        ct_status st = ct_sgemm_rate_gpu(&peak, CT_PEAK_N, tf32, CT_PEAK_REPEATS);
        if (st != CT_OK) { ct_gpu_close(); return st; }
        snprintf(r->peak_what, sizeof r->peak_what, "cuBLAS sgemm %d^3 (%s), median of %d", CT_PEAK_N,
                 tf32 ? "TF32 allowed" : "FP32, no TF32", peak.repeats);
        ops = ct_ops_gpu();
    }
    r->peak = peak.median;
    r->peak_best = peak.best;
    r->available = 1;
    *ops_out = ops;
    *gpu = index >= 0;
    return CT_OK;
}

/* Splits --device into names, checking each (cpu, gpu, gpu:N, cuda:N) and refusing repeats. */
ct_status cli_device_list(const char *list, char names[][32], int max, int *n)
{
    *n = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= 32) return ct_fail(CT_EINVAL, "--device %s: expected a comma-separated list such as cpu,gpu", list);
        if (*n == max) return ct_fail(CT_EINVAL, "--device %s: at most %d devices", list, max);
        memcpy(names[*n], p, len);
        names[*n][len] = '\0';
        int index;
        if (ct_gpu_parse_device(names[*n], &index) != CT_OK) return CT_EINVAL;   /* its message names the value */
        if (!strcmp(names[*n], "cuda")) snprintf(names[*n], 32, "gpu");
        for (int k = 0; k < *n; k++)
            if (!strcmp(names[k], names[*n])) return ct_fail(CT_EINVAL, "--device %s: %s is listed twice", list, names[k]);
        (*n)++;
        if (!p[len]) return CT_OK;
        p += len + 1;
    }
}



const char *cli_rank_device(const char *spec, char *buf, size_t cap)
{
    if (!cli_dist.mpi || (strcmp(spec, "gpu") && strcmp(spec, "cuda"))) return spec;
    /* a launcher that gives each rank its own GPU (CUDA_VISIBLE_DEVICES, Slurm's
     * --gpus-per-task=1) leaves each rank one visible device: that one */
    snprintf(buf, cap, "gpu:%d", cli_dist.local_size > 1 && ct_gpu_visible() == 1 ? 0 : cli_dist.local_rank);
    return buf;
}

void cli_device_folder(const char *spec, char *out, size_t cap)
{
    int index = -1;
    if (ct_gpu_parse_device(spec, &index) != CT_OK || index < 0) snprintf(out, cap, "cpu");
    else if (index == 0) snprintf(out, cap, "gpu");
    else snprintf(out, cap, "gpu%d", index);
}
