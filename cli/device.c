/* device.c - `--device cpu|gpu|gpu:N` for every command, the GPU part of the
 * hardware header, and `ctrain time`'s devices: its list and each one's peaks.
 *
 * A CPU-only build answers --device gpu with "built without CUDA"; a CUDA build
 * opens the GPU (cuda/device.c), which on a machine without one says "no NVIDIA
 * GPU found". The command's backend (one per command: the CLI runs one device at
 * a time) stays open until cli_close_device, at exit or, for `ctrain time`, after
 * each device's run. */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/time.h"
#include "catalog/train_opts.h"
#include "core/blas_select.h"
#include "core/peak.h"
#include "core/threads.h"
#include "cuda/device.h"
#include "cuda/ops_gpu.h"
#include "layers/gemm_bf16.h"
#include "layers/ops.h"

/* The backend the command opened (zeroed: none). */
static ct_backend cli_backend;

ct_status cli_open_device(const char *spec, int tf32, int deterministic, int precision, const ct_backend **be)
{
    int index = -1;
    *be = NULL;
    CT_TRY(ct_gpu_parse_device(spec, &index));
    if (index < 0 && (tf32 || deterministic))
        return ct_fail(CT_EINVAL, "%s applies to the GPU; with --device cpu leave it out (the CPU always computes in FP32, "
                       "deterministically for a given --threads)", tf32 ? "--tf32" : "--deterministic");
    const ct_math math = { .tf32 = tf32, .deterministic = deterministic, .dtype = (ct_dtype)precision };
    cli_close_device();
    if (index < 0) {
        ct_status st = ct_backend_open_cpu(&cli_backend, &math);
        if (st != CT_OK && precision == CT_BF16) return ct_fail(st, "--precision bf16: %s", ct_last_error());
        CT_TRY(st);
    } else {
        CT_TRY(ct_backend_open_gpu(&cli_backend, index, &math));   /* no CUDA, no GPU, no such index: its one-line message */
    }
    *be = &cli_backend;
    return CT_OK;
}

void cli_close_device(void) { ct_backend_close(&cli_backend); }

const ct_backend *cli_device(void) { return cli_backend.ops ? &cli_backend : NULL; }

void cli_print_gpu_line(FILE *out)
{
    char line[512];
    if (cli_backend.ops && !cli_backend.host_memory) {
        ct_gpu_describe(cli_backend.dev, &cli_backend.math, line, sizeof line);
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

ct_status cli_precision_list(const char *list, int *out, int max, int *n)
{
    *n = 0;
    for (const char *p = list; ; ) {
        size_t len = strcspn(p, ",");
        int v = -1;
        for (const ct_opt_choice *c = ct_precision_choices; c->name; c++)
            if (strlen(c->name) == len && !strncmp(p, c->name, len)) v = c->value;
        if (v < 0) return ct_fail(CT_EINVAL, "--precision %s: '%.*s' is not a precision: use fp32, bf16 or fp32,bf16", list, (int)len, p);
        for (int i = 0; i < *n; i++)
            if (out[i] == v) return ct_fail(CT_EINVAL, "--precision %s: %.*s is named twice", list, (int)len, p);
        if (*n == max) return ct_fail(CT_EINVAL, "--precision %s: at most %d precisions", list, max);
        out[(*n)++] = v;
        if (!p[len]) return CT_OK;
        p += len + 1;
    }
}

ct_status cli_time_device_open(time_run *r, int threads, int tf32, int deterministic, int precision, const ct_backend **be_out,
                               int *gpu)
{
    int index = -1;
    *gpu = 0;
    CT_TRY(ct_gpu_parse_device(r->device, &index));
    const ct_math math = { .tf32 = tf32, .deterministic = deterministic, .dtype = (ct_dtype)precision };
    ct_sgemm_rate peak;
    cli_close_device();
    if (index < 0) {
        char cpu[256];
        ct_cpu_name(cpu, sizeof cpu);
        snprintf(r->device_desc, sizeof r->device_desc, "%s, %d of %d logical cores", cpu, threads, ct_cpu_count());
        CT_TRY(ct_peak_sgemm_cpu(&peak));
        snprintf(r->peak_what, sizeof r->peak_what, "OpenBLAS sgemm %d^3, %d thread%s, median of %d", CT_PEAK_N,
                 threads, threads == 1 ? "" : "s", peak.repeats);
        /* the CPU: --tf32 and --deterministic are the GPU's; bf16 where the CPU has bf16 products */
        const ct_math cpu_math = { .dtype = (ct_dtype)precision };
        if (ct_backend_open_cpu(&cli_backend, &cpu_math) != CT_OK) return unavailable(r, ct_last_error());
        if (precision == CT_BF16) {   /* a bf16 run's "of peak" is of the bf16 products' peak (layers/gemm_bf16.h) */
            double g = 0;
            char what[160];
            ct_status st = ct_bf16_peak(threads, &g, what, sizeof what);
            if (st != CT_OK) { cli_close_device(); return st; }
            r->fma_peak = r->fma_peak_best = g;
            snprintf(r->fma_peak_what, sizeof r->fma_peak_what, "%s", what);
        } else {
            ct_fma_rate fma;
            ct_status st = ct_peak_fma_cpu(&fma, threads);
            if (st != CT_OK) { cli_close_device(); return st; }
            r->fma_peak = fma.peak;
            r->fma_peak_best = fma.best;
            snprintf(r->fma_peak_what, sizeof r->fma_peak_what, "FP32 FMA loop, %s, %d thread%s, best of %d (median %.1f)",
                     ct_fma_isa_name(fma.isa), fma.threads, fma.threads == 1 ? "" : "s", fma.repeats, fma.median);
        }
    } else {
        if (ct_backend_open_gpu(&cli_backend, index, &math) != CT_OK) return unavailable(r, ct_last_error());
        ct_gpu_describe(cli_backend.dev, &cli_backend.math, r->device_desc, sizeof r->device_desc);
        /* the peak at the run's precision: bf16 tensor cores, or TF32 ones when they are allowed */
        const int bf16 = precision == CT_BF16;
        ct_status st = bf16 ? ct_gemm_rate_gpu_bf16(cli_backend.dev, &peak, CT_PEAK_N, CT_PEAK_REPEATS)
                            : ct_sgemm_rate_gpu(cli_backend.dev, &peak, CT_PEAK_N, tf32, CT_PEAK_REPEATS);
        if (st != CT_OK) { cli_close_device(); return st; }
        if (bf16)
            snprintf(r->peak_what, sizeof r->peak_what, "cuBLAS GemmEx %d^3 (bf16 in, FP32 accumulation), median of %d",
                     CT_PEAK_N, peak.repeats);
        else
            snprintf(r->peak_what, sizeof r->peak_what, "cuBLAS sgemm %d^3 (%s), median of %d", CT_PEAK_N,
                     tf32 ? "TF32 allowed" : "FP32, no TF32", peak.repeats);
    }
    r->peak = peak.median;
    r->peak_best = peak.best;
    r->available = 1;
    *be_out = &cli_backend;
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
