/* peak.c - sgemm rates on the CPU (see peak.h). The GPU measurement lives in
 * cuda/peak.cu; a CPU-only build gets the stub at the end of this file. */
#include <stdlib.h>
#include <cblas.h>
#include "core/peak.h"
#include "core/threads.h"
#include "core/rng.h"
#include "models/train.h"   /* ct_now: the monotonic clock every timing in ctrain uses */

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

ct_status ct_peak_sgemm_cpu(ct_sgemm_rate *r)
{
    return ct_sgemm_rate_cpu(r, CT_PEAK_N, CT_PEAK_N, CT_PEAK_N, 0, 1, CT_PEAK_REPEATS);
}

#ifndef CT_HAVE_CUDA
ct_status ct_peak_sgemm_gpu(ct_sgemm_rate *r)
{
    (void)r;
    return ct_fail(CT_ENODEV, "this ctrain was built without CUDA (CPU only): no GPU sgemm peak to measure");
}

ct_status ct_sgemm_rate_gpu(ct_sgemm_rate *r, int n, int tf32, int repeats)
{
    (void)r; (void)n; (void)tf32; (void)repeats;
    return ct_fail(CT_ENODEV, "this ctrain was built without CUDA (CPU only): no GPU sgemm peak to measure");
}
#endif
