/* bench_sgemm.c - how fast can this machine multiply float matrices?
 *
 * Measures the CPU's FP32 FMA peak with the same threads (core/peak.h: the
 * denominator of every "fraction of peak" ctrain reports), then OpenBLAS's
 * sgemm as ctrain runs it (ct_sgemm) on square matrices (the machine's
 * practical sgemm peak) and on the shapes of the siamese LSTM's hot loop, each
 * as GFLOP/s and as a fraction of the FMA peak. FLOPs of C = A B with A [M,K],
 * B [K,N]: 2 M N K. Prints the median and best of several repeats after a
 * warm-up.
 *
 * With --device gpu (or gpu:N) it measures cuBLAS sgemm on that GPU instead: a
 * large square product (--n, default 8192) in plain FP32 and with TensorFloat-32
 * tensor cores, plus the CT_PEAK_N^3 product that `ctrain time` divides by. On a
 * machine without a usable GPU, or a build without CUDA, it says why and exits 1.
 *
 *   build/bench/bench_sgemm [--threads N] [--repeats R] [--device cpu|gpu|gpu:N] [--n N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/blas_select.h"
#include "core/peak.h"
#include "core/threads.h"
#include "cuda/device.h"

static double fma_peak;   /* GFLOP/s, same threads */

static int bench(const char *label, int M, int N, int K, int trans_b, int calls, int R)
{
    ct_sgemm_rate r;
    if (ct_sgemm_rate_cpu(&r, M, N, K, trans_b, calls, R) != CT_OK) {
        fprintf(stderr, "bench_sgemm: %s\n", ct_last_error());
        return 1;
    }
    printf("%-38s M=%5d N=%5d K=%5d  median %7.1f GFLOP/s  best %7.1f  = %3.0f%% of the FMA peak\n", label, M, N, K,
           r.median, r.best, 100 * r.median / fma_peak);
    return 0;
}

static int bench_gpu(ct_gpu *g, const char *label, int n, int tf32, int R)
{
    ct_sgemm_rate r;
    if (ct_sgemm_rate_gpu(g, &r, n, tf32, R) != CT_OK) {
        fprintf(stderr, "bench_sgemm: %s\n", ct_last_error());
        return 1;
    }
    printf("%-38s N=%5d  median %9.1f GFLOP/s  best %9.1f\n", label, n, r.median, r.best);
    return 0;
}

/* cuBLAS on GPU `index`: FP32 and TF32 at n, FP32 at CT_PEAK_N. */
static int main_gpu(int index, int n, int R)
{
    ct_gpu *g = NULL;
    if (ct_gpu_open(&g, index, NULL) != CT_OK) {
        fprintf(stderr, "bench_sgemm: %s\n", ct_last_error());
        return 1;
    }
    char line[512];
    ct_gpu_describe(g, NULL, line, sizeof line);
    printf("sgemm, cuBLAS, %s\n", line);
    int rc = bench_gpu(g, "cuBLAS sgemm FP32", n, 0, R)
          || bench_gpu(g, "cuBLAS sgemm TF32", n, 1, R)
          || bench_gpu(g, "cuBLAS sgemm FP32 (ctrain time's peak)", CT_PEAK_N, 0, R);
    ct_gpu_close(g);
    return rc;
}

int main(int argc, char **argv)
{
    ct_blas_select(argv);   /* OpenBLAS on the best kernels it has for this CPU (core/blas_select.h) */
    int threads = 2, R = 7, n = 8192;
    const char *device = "cpu";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) R = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
        else { fprintf(stderr, "usage: bench_sgemm [--threads N] [--repeats R] [--device cpu|gpu|gpu:N] [--n N]\n"); return 2; }
    }
    if (threads < 1 || R < 1 || R > CT_PEAK_MAX_REPEATS || n < 1) {
        fprintf(stderr, "bench_sgemm: --threads and --n must be >= 1, --repeats between 1 and %d\n", CT_PEAK_MAX_REPEATS);
        return 2;
    }
    int index = -1;
    if (ct_gpu_parse_device(device, &index) != CT_OK) { fprintf(stderr, "bench_sgemm: %s\n", ct_last_error()); return 2; }
    if (index >= 0) return main_gpu(index, n, R);
    ct_threads_set(threads);
    printf("sgemm, %d thread%s, %s, core %s\n", threads, threads > 1 ? "s" : "", ct_blas_config(), ct_blas_select_note());
    ct_fma_rate fr;
    if (ct_peak_fma_cpu(&fr, threads) != CT_OK) { fprintf(stderr, "bench_sgemm: %s\n", ct_last_error()); return 1; }
    fma_peak = fr.peak;
    printf("FP32 FMA peak (%s, %d lanes, %d thread%s)  peak %7.1f GFLOP/s (best of %d; median %.1f)\n", ct_fma_isa_name(fr.isa),
           fr.lanes, threads, threads > 1 ? "s" : "", fr.peak, fr.repeats, fr.median);
    const int P = CT_PEAK_N;
    return bench("square (the machine's sgemm peak)", P, P, P, 0, 1, R)
        || bench("square", 1024, 1024, 1024, 0, 4, R)
        || bench("LSTM input projection (x W_ih^T)", 256 * 100, 512, 40, 1, 1, R)
        || bench("LSTM recurrent step (h W_hh^T)", 256, 512, 128, 1, 100, R)
        || bench("LSTM dW_hh over all steps", 512, 128, 256 * 100, 0, 1, R);
}
