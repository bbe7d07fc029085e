/* peak.c - the CPU's FMA peak and sgemm rates (see peak.h). The GPU
 * measurement lives in cuda/peak.cu; a CPU-only build gets the stub at the end
 * of this file. */
#include <stdlib.h>
#include <cblas.h>
#include "core/peak.h"
#include "core/blas_select.h"
#include "core/threads.h"
#include "core/rng.h"
#include "core/clock.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ct_sort_median(double *v, int n)
{
    CT_ASSERT(n >= 1);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

ct_status ct_sgemm_rate_cpu(ct_sgemm_rate *r, int M, int N, int K, int trans_b, int calls, int repeats)
{
    CT_ASSERT(M > 0 && N > 0 && K > 0 && calls > 0 && repeats > 0);
    float *A = ct_malloc((size_t)M * K * sizeof *A, "sgemm A");          /* [M, K] */
    float *B = ct_malloc((size_t)K * N * sizeof *B, "sgemm B");          /* [K, N], or [N, K] when trans_b */
    float *C = ct_malloc((size_t)M * N * sizeof *C, "sgemm C");          /* [M, N] */
    double *g = ct_malloc((size_t)repeats * sizeof *g, "sgemm rates");
    ct_status st = A && B && C && g ? CT_OK : CT_ENOMEM;
    if (st == CT_OK) {
        ct_rng rng;
        ct_rng_seed(&rng, 1, 1);
        for (size_t i = 0; i < (size_t)M * K; i++) A[i] = ct_rng_uniform(&rng) - 0.5f;
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = ct_rng_uniform(&rng) - 0.5f;
        for (int rep = -1; rep < repeats; rep++) {   /* rep -1 is the warm-up */
            double t0 = ct_now();
            for (int c = 0; c < calls; c++)
                ct_sgemm(CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                         A, K, B, trans_b ? K : N, 0.0f, C, N);
            double dt = ct_now() - t0;
            if (rep >= 0) g[rep] = 2.0 * M * N * K * calls / dt / 1e9;
        }
        r->median = ct_sort_median(g, repeats);
        r->best = g[repeats - 1];
        r->worst = g[0];
        r->repeats = repeats;
    }
    free(A); free(B); free(C); free(g);
    return st;
}

/* ---- the FMA peak ---- */
#if defined(__x86_64__)
#include <immintrin.h>

/* The accumulators as named variables (an array may be kept in memory): X(i) for each. */
#define FMA_ACCS_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define FMA_ACCS_16(X) FMA_ACCS_12(X) X(12) X(13) X(14) X(15)

__attribute__((target("avx512f")))
static void fma_avx512(long iters, float m, float a, const float *init, float *out)
{
    const __m512 vm = _mm512_set1_ps(m), va = _mm512_set1_ps(a);
#define LOAD(i) __m512 c##i = _mm512_loadu_ps(init + 16 * (i));
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, vm, va);
#define STORE(i) _mm512_storeu_ps(out + 16 * (i), c##i);
    FMA_ACCS_16(LOAD)
    for (long it = 0; it < iters; it++) { FMA_ACCS_16(STEP) }
    FMA_ACCS_16(STORE)
#undef LOAD
#undef STEP
#undef STORE
}

__attribute__((target("avx2,fma")))
static void fma_avx2(long iters, float m, float a, const float *init, float *out)
{
    const __m256 vm = _mm256_set1_ps(m), va = _mm256_set1_ps(a);
#define LOAD(i) __m256 c##i = _mm256_loadu_ps(init + 8 * (i));
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, vm, va);
#define STORE(i) _mm256_storeu_ps(out + 8 * (i), c##i);
    FMA_ACCS_12(LOAD)
    for (long it = 0; it < iters; it++) { FMA_ACCS_12(STEP) }
    FMA_ACCS_12(STORE)
#undef LOAD
#undef STEP
#undef STORE
}

static void fma_sse(long iters, float m, float a, const float *init, float *out)
{
    const __m128 vm = _mm_set1_ps(m), va = _mm_set1_ps(a);
#define LOAD(i) __m128 c##i = _mm_loadu_ps(init + 4 * (i));
#define STEP(i) c##i = _mm_add_ps(_mm_mul_ps(c##i, vm), va);
#define STORE(i) _mm_storeu_ps(out + 4 * (i), c##i);
    FMA_ACCS_12(LOAD)
    for (long it = 0; it < iters; it++) { FMA_ACCS_12(STEP) }
    FMA_ACCS_12(STORE)
#undef LOAD
#undef STEP
#undef STORE
}
#else
/* Another architecture: plain C, which the compiler vectorises as it can (reported as "SSE"). */
static void fma_sse(long iters, float m, float a, const float *init, float *out)
{
    float c[48];
    for (int i = 0; i < 48; i++) c[i] = init[i];
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 48; i++) { float p = c[i] * m; c[i] = p + a; }
    for (int i = 0; i < 48; i++) out[i] = c[i];
}
#endif

ct_fma_isa ct_fma_isa_best(void)
{
    ct_cpu_features f;
    ct_cpu_detect(&f);
    if (f.flags & CT_CPU_AVX512F) return CT_FMA_AVX512;
    if ((f.flags & CT_CPU_AVX2) && (f.flags & CT_CPU_FMA)) return CT_FMA_AVX2;
    return CT_FMA_SSE;
}

const char *ct_fma_isa_name(ct_fma_isa isa)
{
    return isa == CT_FMA_AVX512 ? "AVX-512" : isa == CT_FMA_AVX2 ? "AVX2+FMA" : "SSE (mul+add)";
}

int ct_fma_isa_lanes(ct_fma_isa isa) { return isa == CT_FMA_AVX512 ? 16 : isa == CT_FMA_AVX2 ? 8 : 4; }
int ct_fma_isa_accs(ct_fma_isa isa) { return isa == CT_FMA_AVX512 ? 16 : 12; }

void ct_fma_kernel_run(ct_fma_isa isa, long iters, float m, float a, float x0, float *out)
{
    CT_ASSERT(isa <= ct_fma_isa_best() && iters >= 0);
    float init[CT_FMA_MAX_OUT];
    const int n = ct_fma_isa_accs(isa) * ct_fma_isa_lanes(isa);
    for (int i = 0; i < n; i++) init[i] = x0 + (float)i * 1e-3f;
#if defined(__x86_64__)
    if (isa == CT_FMA_AVX512) { fma_avx512(iters, m, a, init, out); return; }
    if (isa == CT_FMA_AVX2) { fma_avx2(iters, m, a, init, out); return; }
#endif
    fma_sse(iters, m, a, init, out);
}

typedef struct {
    ct_fma_isa isa;
    long iters;
    volatile float sink;          /* keeps the results alive */
} fma_job;

static void fma_task(void *ctx, int task, int worker)
{
    fma_job *j = ctx;
    float out[CT_FMA_MAX_OUT];
    (void)worker;
    /* m < 1 and a > 0: every accumulator converges to a / (1 - m), so nothing overflows or underflows */
    ct_fma_kernel_run(j->isa, j->iters, 0.999f, 1e-3f, 0.5f + 1e-2f * (float)task, out);
    if (task == 0) j->sink = out[0];
}

/* Seconds for one parallel run of the kernel on `threads` workers. */
static double fma_time(fma_job *j, int threads)
{
    double t0 = ct_now();
    ct_parallel(threads, threads, fma_task, j);
    return ct_now() - t0;
}

ct_status ct_peak_fma_cpu(ct_fma_rate *r, int threads)
{
    CT_ASSERT(threads >= 1);
    if (threads > CT_MAX_WORKERS) threads = CT_MAX_WORKERS;
    fma_job j = { .isa = ct_fma_isa_best(), .iters = 100000 };
    double probe = fma_time(&j, threads);
    const double target = 0.03;   /* seconds per repeat */
    double iters = probe > 0 ? (double)j.iters * target / probe : 1e8;
    j.iters = iters < 1e4 ? 10000 : iters > 1e9 ? 1000000000L : (long)iters;
    double g[CT_FMA_REPEATS];
    const double flops = 2.0 * ct_fma_isa_lanes(j.isa) * ct_fma_isa_accs(j.isa) * (double)j.iters * threads;
    for (int rep = -1; rep < CT_FMA_REPEATS; rep++) {   /* rep -1 is the warm-up */
        double dt = fma_time(&j, threads);
        if (rep >= 0) g[rep] = dt > 0 ? flops / dt / 1e9 : 0;
    }
    r->median = ct_sort_median(g, CT_FMA_REPEATS);
    r->best = r->peak = g[CT_FMA_REPEATS - 1];
    r->threads = threads;
    r->lanes = ct_fma_isa_lanes(j.isa);
    r->repeats = CT_FMA_REPEATS;
    r->isa = j.isa;
    if (!(r->median > 0) || r->median > 1e9)
        return ct_fail(CT_ENUMERIC, "FMA peak: the timed loop gave %g GFLOP/s (is the clock broken?)", r->median);
    return CT_OK;
}

ct_status ct_peak_sgemm_cpu(ct_sgemm_rate *r)
{
    return ct_sgemm_rate_cpu(r, CT_PEAK_N, CT_PEAK_N, CT_PEAK_N, 0, 1, CT_PEAK_REPEATS);
}

#ifndef CT_HAVE_CUDA
ct_status ct_peak_sgemm_gpu(struct ct_gpu *g, ct_sgemm_rate *r)
{
    (void)g; (void)r;
    return ct_fail(CT_ENODEV, "this ctrain was built without CUDA (CPU only): no GPU sgemm peak to measure");
}

ct_status ct_sgemm_rate_gpu(struct ct_gpu *g, ct_sgemm_rate *r, int n, int tf32, int repeats)
{
    (void)g; (void)r; (void)n; (void)tf32; (void)repeats;
    return ct_fail(CT_ENODEV, "this ctrain was built without CUDA (CPU only): no GPU sgemm peak to measure");
}

ct_status ct_gemm_rate_gpu_bf16(struct ct_gpu *g, ct_sgemm_rate *r, int n, int repeats)
{
    (void)g; (void)r; (void)n; (void)repeats;
    return ct_fail(CT_ENODEV, "this ctrain was built without CUDA (CPU only): no GPU bf16 peak to measure");
}
#endif
