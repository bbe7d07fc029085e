/* peak.h - how fast can this machine compute? Two peaks, both measured:
 *
 *   - the FP32 FMA peak: what the CPU's vector units can do at all, from a
 *     loop of independent fused multiply-adds at the widest vector width the
 *     CPU has, on ctrain's workers. It is the denominator of every "fraction
 *     of peak" ctrain reports (`ctrain time`, bench/bench_sgemm), so a BLAS
 *     running kernels older than the CPU shows as a low fraction;
 *   - the sgemm peak: what OpenBLAS's sgemm reaches as ctrain runs it, the
 *     practical ceiling of a step made of matrix products. Reported beside
 *     the first.
 *
 * FMA peak: GFLOP/s = 2 x lanes x FMAs / s over all threads, where each of
 * `threads` workers runs independent accumulators (16 vectors of 16 floats
 * with AVX-512; 12 of 8 with AVX2+FMA; 12 of 4 with SSE, where a multiply and
 * an add stand in for the FMA): more than the FMA latency times the number of
 * FMA pipes of current x86 cores (4 x 2), and few enough to stay in registers.
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

/* ---- the FMA peak ---- */
typedef enum { CT_FMA_SSE = 0, CT_FMA_AVX2, CT_FMA_AVX512 } ct_fma_isa;
#define CT_FMA_MAX_OUT 256    /* accumulators x lanes, at most */
#define CT_FMA_REPEATS 7      /* timed repeats after a warm-up */

/* The FMA peak is the best repeat: the loop touches no memory and its work never
 * varies, so a slower repeat only means that a core was shared at the time (on a
 * shared machine, most of them). The median is kept beside it. */
typedef struct {
    double peak;              /* GFLOP/s, all threads together: the best repeat */
    double median, best;      /* GFLOP/s over the repeats (best == peak) */
    int threads, lanes, repeats;
    ct_fma_isa isa;
} ct_fma_rate;

/* The widest FMA kernel this CPU (and OS) can run. */
ct_fma_isa ct_fma_isa_best(void);
const char *ct_fma_isa_name(ct_fma_isa isa);   /* "AVX-512", "AVX2+FMA", "SSE (mul+add)" */
int ct_fma_isa_lanes(ct_fma_isa isa);          /* floats per vector: 16, 8, 4 */
int ct_fma_isa_accs(ct_fma_isa isa);           /* independent vector accumulators: 16, 12, 12 */

/* The kernel itself, exposed for its test: accs x lanes accumulators,
 * accumulator i starting at x0 + i * 1e-3, each stepped `iters` times as
 * acc = acc * m + a (one rounding with FMA; two with SSE), written to
 * out [accs * lanes]. `isa` must be runnable here (<= ct_fma_isa_best()). */
void ct_fma_kernel_run(ct_fma_isa isa, long iters, float m, float a, float x0, float *out);

/* The FMA peak with `threads` workers (ct_parallel), at the widest width: a
 * warm-up sized from a short probe so that each repeat takes about 30 ms, then
 * CT_FMA_REPEATS timed repeats (about a quarter of a second in all). */
ct_status ct_peak_fma_cpu(ct_fma_rate *r, int threads);

/* The CPU's practical sgemm peak: CT_PEAK_N^3, CT_PEAK_REPEATS repeats. */
ct_status ct_peak_sgemm_cpu(ct_sgemm_rate *r);

/* The GPU's practical peak: cuBLAS sgemm of CT_PEAK_N^3 in the math mode g was
 * opened with, on the GPU g (cuda/device.h: ct_gpu_open), timed with CUDA events.
 * CT_ENODEV with the reason when this build has no CUDA or g is NULL. */
struct ct_gpu;
ct_status ct_peak_sgemm_gpu(struct ct_gpu *g, ct_sgemm_rate *r);

/* cuBLAS sgemm of n^3 on the GPU g, `repeats` timed repeats (at most
 * CT_PEAK_MAX_REPEATS) after a warm-up: plain FP32 (tf32 = 0) or TensorFloat-32
 * tensor cores (tf32 = 1, Ampere and newer), whatever mode the GPU was opened
 * with; the mode is restored afterwards. A GPU's peak needs a larger n than the
 * CPU's (bench/bench_sgemm --device gpu uses 8192). CT_ENODEV as above;
 * CT_ENOMEM if three n x n matrices do not fit. */
#define CT_PEAK_MAX_REPEATS 64
ct_status ct_sgemm_rate_gpu(struct ct_gpu *g, ct_sgemm_rate *r, int n, int tf32, int repeats);
/* The product the GPU's bf16 layers run: cublasGemmEx of n^3 with bf16 A and B, float32 C
 * and float32 accumulation (CUBLAS_COMPUTE_32F: the bf16 tensor cores), `repeats` timed
 * repeats after a warm-up. The "peak" of a bf16 run. Errors as above. */
ct_status ct_gemm_rate_gpu_bf16(struct ct_gpu *g, ct_sgemm_rate *r, int n, int repeats);

#endif
