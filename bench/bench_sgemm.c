/* bench_sgemm.c - how fast can this machine multiply float matrices?
 *
 * Measures OpenBLAS's cblas_sgemm on square matrices (the machine's practical
 * peak, the denominator of every "fraction of peak" ctrain reports) and on the
 * shapes of the siamese LSTM's hot loop. FLOPs of C = A B with A [M,K], B [K,N]:
 * 2 M N K. Prints the median and best of several repeats after a warm-up.
 *
 *   build/bench/bench_sgemm [--threads N] [--repeats R]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include "core/rng.h"
#include "core/threads.h"
#include "models/train.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and best GFLOP/s of R timed runs of `calls` back-to-back sgemms. */
static void bench(const char *label, int M, int N, int K, int transB, int calls, int R)
{
    float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B), *C = malloc((size_t)M * N * sizeof *C);
    if (!A || !B || !C) { fprintf(stderr, "out of memory\n"); exit(1); }
    ct_rng r;
    ct_rng_seed(&r, 1, 1);
    for (size_t i = 0; i < (size_t)M * K; i++) A[i] = ct_rng_uniform(&r) - 0.5f;
    for (size_t i = 0; i < (size_t)K * N; i++) B[i] = ct_rng_uniform(&r) - 0.5f;
    double *g = malloc((size_t)R * sizeof *g);
    for (int rep = -1; rep < R; rep++) {   /* rep -1 is the warm-up */
        double t0 = ct_now();
        for (int c = 0; c < calls; c++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, transB ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                        A, K, B, transB ? K : N, 0.0f, C, N);
        double dt = ct_now() - t0;
        if (rep >= 0) g[rep] = 2.0 * M * N * K * calls / dt / 1e9;
    }
    qsort(g, (size_t)R, sizeof *g, cmp_double);
    printf("%-38s M=%5d N=%5d K=%5d  median %7.1f GFLOP/s  best %7.1f\n", label, M, N, K, g[R / 2], g[R - 1]);
    free(A); free(B); free(C); free(g);
}

int main(int argc, char **argv)
{
    int threads = 2, R = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) R = atoi(argv[++i]);
        else { fprintf(stderr, "usage: bench_sgemm [--threads N] [--repeats R]\n"); return 2; }
    }
    if (threads < 1 || R < 1) { fprintf(stderr, "bench_sgemm: --threads and --repeats must be >= 1\n"); return 2; }
    ct_threads_set(threads);
    printf("sgemm, %d thread%s, %s\n", threads, threads > 1 ? "s" : "", ct_blas_config());
    bench("square (the machine's sgemm peak)", 2048, 2048, 2048, 0, 1, R);
    bench("square", 1024, 1024, 1024, 0, 4, R);
    bench("LSTM input projection (x W_ih^T)", 256 * 100, 512, 40, 1, 1, R);
    bench("LSTM recurrent step (h W_hh^T)", 256, 512, 128, 1, 100, R);
    bench("LSTM dW_hh over all steps", 512, 128, 256 * 100, 0, 1, R);
    return 0;
}
