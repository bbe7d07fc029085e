/* peak.h - how fast can this machine multiply float matrices? The measured
 * sgemm rate is the denominator of every "fraction of peak" ctrain reports
 * (`ctrain time`, bench/bench_sgemm).
 *
 * FLOPs of C = A B with A [M, K] and B [K, N]: 2 M N K. A measurement runs
 * `calls` back-to-back sgemms once as a warm-up, then `repeats` more times,
 * each timed; the rates are GFLOP/s of those repeats. The median is the
 * figure to quote; the best is the least disturbed on a shared machine.
 *
 * The practical peak is the square CT_PEAK_N^3 product: large enough that
 * OpenBLAS (cuBLAS on the GPU) runs at its best, small enough to take well
 * under a second on two cores.
 */
#ifndef CT_PEAK_H
#define CT_PEAK_H
#include "core/error.h"

#define CT_PEAK_N 2048        /* the square product that defines "peak" */
#define CT_PEAK_REPEATS 5     /* timed repeats of it in ct_peak_sgemm_cpu / _gpu */

typedef struct {
    double median, best, worst;   /* GFLOP/s over the repeats */
    int repeats;
} ct_sgemm_rate;

/* OpenBLAS sgemm on the CPU with the current thread count, through ct_sgemm
 * (core/threads.h: row blocks on ctrain's workers, as every large product runs):
 * A [M, K] times B [K, N], or B^T with B [N, K] when trans_b. Inputs are
 * uniform in [-0.5, 0.5) from a fixed seed. CT_ENOMEM if the matrices do not fit. */
ct_status ct_sgemm_rate_cpu(ct_sgemm_rate *r, int M, int N, int K, int trans_b, int calls, int repeats);

/* Sorts v [n] (n >= 1) ascending and returns its median (the mean of the two
 * middle values when n is even): the statistic every timing in ctrain quotes. */
double ct_sort_median(double *v, int n);

/* The CPU's practical peak: CT_PEAK_N^3, CT_PEAK_REPEATS repeats. */
ct_status ct_peak_sgemm_cpu(ct_sgemm_rate *r);

/* The GPU's practical peak: cuBLAS sgemm (FP32, no TF32) of CT_PEAK_N^3 on the
 * current GPU (cuda/device.h: ct_gpu_open first), timed with CUDA events.
 * CT_ENODEV with the reason when this build has no CUDA or no GPU is open. */
ct_status ct_peak_sgemm_gpu(ct_sgemm_rate *r);

/* cuBLAS sgemm of n^3 on the current GPU, `repeats` timed repeats (at most
 * CT_PEAK_MAX_REPEATS) after a warm-up: plain FP32 (tf32 = 0) or TensorFloat-32
 * tensor cores (tf32 = 1, Ampere and newer), whatever mode the GPU was opened
 * with; the mode is restored afterwards. A GPU's peak needs a larger n than the
 * CPU's (bench/bench_sgemm --device gpu uses 8192). CT_ENODEV as above;
 * CT_ENOMEM if three n x n matrices do not fit. */
#define CT_PEAK_MAX_REPEATS 64
ct_status ct_sgemm_rate_gpu(ct_sgemm_rate *r, int n, int tf32, int repeats);

#endif
