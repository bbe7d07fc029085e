/* info.c - `ctrain info` and the hardware/software header printed before training. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include <hdf5.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "core/blas_select.h"
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"
#include "layers/ops.h"
#include "core/peak.h"
#include "core/threads.h"
#include "cuda/device.h"

void cli_print_header(FILE *out, int threads)
{
    char cpu[256];
    unsigned maj, min, rel;
    ct_cpu_name(cpu, sizeof cpu);
    H5get_libversion(&maj, &min, &rel);
    const ct_backend *be = cli_device();
    const ct_gpu *g = be && !be->host_memory ? be->dev : NULL;
    if (g) fprintf(out, "ctrain %s | device: gpu:%d\n", CTRAIN_VERSION, g->index);
    else fprintf(out, "ctrain %s | device: cpu\n", CTRAIN_VERSION);
    fprintf(out, "CPU: %s, %d logical cores, %d thread%s used; ctrain's own kernels: %s%s\n", cpu, ct_cpu_count(), threads,
            threads == 1 ? "" : "s", ct_kernels_name(ct_kernels_get()),
            ct_kernels_get() < ct_kernels_cpu() ? " (CTRAIN_CPU_KERNELS; the CPU runs wider ones)" : "");
    if (be && be->math.dtype == CT_BF16)
        fprintf(out, "Precision: bf16 mixed: products on bfloat16 operands (%s), float32 sums, weights and optimizer\n",
                be->host_memory ? ct_bf16_kernels_name(ct_kernels_bf16()) : "GPU tensor cores: cuBLAS and cuDNN");
    else if (be)   /* a command with one backend (train, eval); time names its precisions per run */
        fprintf(out, "Precision: fp32%s\n", !be->host_memory && be->math.tf32 ? " (TF32 products allowed)" : "");
    fprintf(out, "BLAS: %s, core %s\n", ct_blas_config(), ct_blas_select_note());
    fprintf(out, "HDF5: %u.%u.%u\n", maj, min, rel);
    cli_print_gpu_line(out);
}

/* The two peaks (core/peak.h): FMA with 1 and `threads` threads, sgemm with `threads`. */
static int print_peaks(int threads)
{
    ct_fma_rate one, all;
    ct_sgemm_rate sg;
    if (ct_peak_fma_cpu(&one, 1) != CT_OK || (threads > 1 && ct_peak_fma_cpu(&all, threads) != CT_OK)) {
        fprintf(stderr, "ctrain info: %s\n", ct_last_error());
        return 1;
    }
    if (threads == 1) all = one;
    printf("FP32 FMA peak: %.1f GFLOP/s with 1 thread", one.peak);
    if (threads > 1) printf(", %.1f with %d threads", all.peak, threads);
    printf(" (%s, %d lanes, best of %d)\n", ct_fma_isa_name(all.isa), all.lanes, all.repeats);
    fflush(stdout);
    if (ct_peak_sgemm_cpu(&sg) != CT_OK) { fprintf(stderr, "ctrain info: %s\n", ct_last_error()); return 1; }
    printf("sgemm peak: %.1f GFLOP/s with %d thread%s (OpenBLAS %d^3, median of %d) = %.0f%% of the FMA peak\n", sg.median,
           threads, threads == 1 ? "" : "s", CT_PEAK_N, sg.repeats, 100 * sg.median / all.peak);
    return 0;
}

int cmd_info(int argc, char **argv)
{
    int threads = ct_cpu_count(), peaks = 1;
    ct_args a = { .argc = argc, .argv = argv };
    ct_status st = CT_OK;
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            printf("usage: ctrain info [--threads N] [--no-peak]\n\n"
                   "Prints the CPU (model, cores, the vector instructions it has, which of ctrain's own kernels run:\n"
                   "AVX-512, AVX2 or none), the BLAS library with the kernels it runs and who chose them, the HDF5\n"
                   "version and the GPU; then measures the CPU's FP32 FMA peak (1 thread and N threads, default all\n"
                   "cores) and OpenBLAS's sgemm peak (N threads), about 2 seconds.\n\n"
                   "environment (every command):\n"
                   "  OPENBLAS_CORETYPE=CORE     OpenBLAS's kernels, instead of the core ctrain or OpenBLAS chooses\n"
                   "  CTRAIN_CPU_KERNELS=SET     ctrain's own kernels (the LSTM's and the convolutions' products):\n"
                   "                             avx512, avx2 or blas (none: OpenBLAS for every product); default\n"
                   "                             the widest the CPU runs, a narrower set for comparisons; amx or\n"
                   "                             avx512bf16 keep bf16 products (--precision bf16; avx512bf16 runs\n"
                   "                             them where by default they would be refused for not paying)\n"
                   "  CTRAIN_BF16_MODEL=1        --precision bf16's products on an exact C model of the AMX tiles,\n"
                   "                             on any CPU, many times slower: for tests\n");
            return 0;
        }
        if (ct_args_end(&a)) continue;
        if (ct_args_flag(&a, "--no-peak")) { peaks = 0; continue; }
        if (ct_args_int(&a, "--threads", &threads, 1, CT_MAX_WORKERS, &st)) continue;
        st = ct_args_unknown(&a, "ctrain info --help");
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain info: %s\n", ct_last_error()); return 2; }
    ct_threads_set(threads);
    cli_print_header(stdout, threads);
    ct_cpu_features f;
    char desc[256];
    const char *why = NULL;
    ct_cpu_detect(&f);
    ct_cpu_describe(&f, desc, sizeof desc);
    const char *best = ct_blas_choose(&f, NULL, -1, &why);
    printf("CPU features: %s\n", desc);
    printf("BLAS policy: %s for this CPU (%s)\n", best, why);
    /* what --precision bf16 runs on here (ctrain train --help, --precision) */
    if (ct_bf16_check() == CT_OK) {
        char rates[160] = "";
        double b = 0, fm = 0;
        if (ct_kernels_bf16() == CT_BF16_AVX512BF16) {   /* does it pay here? the figures the dispatch went by */
            ct_bf16_avx512_rates_used(&b, &fm);
            if (fm > 0) snprintf(rates, sizeof rates, " (VDPBF16PS at %.2fx the float32 FMA's rate on one core: %.0f against %.0f GFLOP/s)", b / fm, b, fm);
        }
        printf("--precision bf16: CPU products on %s%s%s; GPU: compute capability 8.0+ with cuDNN 9.13+\n", ct_bf16_kernels_name(ct_kernels_bf16()),
               ct_kernels_bf16() == CT_BF16_MODEL ? " (CTRAIN_BF16_MODEL=1: exact, for tests, not for speed)" : "", rates);
    } else
        printf("--precision bf16: not on this CPU: %s; GPU: compute capability 8.0+ with cuDNN 9.13+\n", ct_last_error());
    char nccl[700];
    printf("Data-parallel: %s%s%s%s\n", ct_dist_backend(),
           ct_dist_compiled() ? " (mpirun -np N ctrain train ...)" : ": one process (make MPI=1 with libopenmpi-dev)",
           ct_comm_nccl_compiled() ? "; GPU gradients: " : "",
           ct_comm_nccl_compiled() ? ct_comm_nccl_describe(nccl, sizeof nccl) : "");
    fflush(stdout);
    return peaks ? print_peaks(threads) : 0;
}
