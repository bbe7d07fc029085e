/* gemm_packed.c - C += A op(B) over a B packed once (see gemm_packed.h). */
#include <string.h>
#include "layers/gemm_packed.h"
#include "core/error.h"

#define NR CT_GEMM_NR
#define NV (NR / 16)          /* AVX-512 registers per row of a tile */
#define MR 6                  /* rows per tile: NV * MR accumulators + NV panel registers + 1 broadcast <= 32 */

size_t ct_gemm_pack_floats(int K, int N) { return (size_t)K * (size_t)((N + NR - 1) / NR) * NR; }

void ct_gemm_pack(float *bp, const float *B, int ldb, int trans, int K, int N)
{
    const int panels = (N + NR - 1) / NR;
    for (int p = 0; p < panels; p++) {
        float *dst = bp + (size_t)p * K * NR;                 /* [K][NR] */
        const int n0 = p * NR, nv = N - n0 < NR ? N - n0 : NR; /* columns that exist */
        if (!trans)                                            /* row k of the panel: B[k, n0 .. n0+nv) */
            for (int k = 0; k < K; k++) {
                memcpy(dst + (size_t)k * NR, B + (size_t)k * ldb + n0, (size_t)nv * sizeof *dst);
                if (nv < NR) memset(dst + (size_t)k * NR + nv, 0, (size_t)(NR - nv) * sizeof *dst);
            }
        else {                                                 /* column j of the panel: row n0 + j of B */
            for (int j = 0; j < nv; j++) {
                const float *src = B + (size_t)(n0 + j) * ldb;
                for (int k = 0; k < K; k++) dst[(size_t)k * NR + j] = src[k];
            }
            for (int k = 0; nv < NR && k < K; k++) memset(dst + (size_t)k * NR + nv, 0, (size_t)(NR - nv) * sizeof *dst);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

int ct_gemm_packed_available(void)
{
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx512f") ? 1 : 0;
    }
    return known;
}

/* One tile: rows [0, MROWS) of C, one panel (masks m keep the columns that exist);
 * op(A)[i, k] is A[i * ai + k * ak], or, with aoff, A[aoff[i] + k]; the panel's row k
 * is at panel + k * ldp, or, with boff, at panel + boff[k] (read with the masks).
 * MROWS is a constant at every call, so the accumulators live in registers. */
#define CT_AVX512 __attribute__((target("avx512f")))
static inline __attribute__((always_inline)) CT_AVX512
void tile(const int MROWS, int K, const float *restrict A, size_t ai, size_t ak, const int *restrict aoff,
          const float *restrict panel, size_t ldp, const int *restrict boff, float *restrict C, int ldc,
          const __mmask16 *m, int acc)
{
    const float *arow[MR];   /* row i of op(A) starts at arow[i]; its k-th value at arow[i][k * ak] */
#pragma GCC unroll 16
    for (int i = 0; i < MROWS; i++) arow[i] = aoff ? A + aoff[i] : A + (size_t)i * ai;
    if (aoff) ak = 1;
    __m512 c[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MROWS; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[i][v] = acc ? _mm512_maskz_loadu_ps(m[v], C + (size_t)i * ldc + 16 * v) : _mm512_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m512 b[NV];
        if (boff)
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) b[v] = _mm512_maskz_loadu_ps(m[v], panel + boff[k] + 16 * v);
        else
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) b[v] = _mm512_loadu_ps(panel + (size_t)k * ldp + 16 * v);
#pragma GCC unroll 16
        for (int i = 0; i < MROWS; i++) {
            const __m512 a = _mm512_set1_ps(arow[i][(size_t)k * ak]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) c[i][v] = _mm512_fmadd_ps(a, b[v], c[i][v]);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MROWS; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(C + (size_t)i * ldc + 16 * v, m[v], c[i][v]);
}

/* The rows that do not fill a whole tile, one instance per count. */
static CT_AVX512 __attribute__((noinline))
void tile_rest(int rows, int K, const float *A, size_t ai, size_t ak, const int *aoff, const float *panel, size_t ldp,
               const int *boff, float *C, int ldc, const __mmask16 *m, int acc)
{
    switch (rows) {
#define CASE(r) case r: tile(r, K, A, ai, ak, aoff, panel, ldp, boff, C, ldc, m, acc); break;
    CASE(1) CASE(2) CASE(3) CASE(4) CASE(5)
#undef CASE
    default: break;
    }
}

/* ldb = 0 and boff NULL: bp is packed; ldb > 0: B [K, N] row-major read in place (panel p =
 * columns 64p .. 64p+63); boff: row k of B at bp + boff[k]. aoff: row i of A at A + aoff[i]. */
static CT_AVX512 __attribute__((noinline))
void gemm_packed_avx512(int M, int N, int K, const float *A, int lda, int trans_a, const int *aoff, const float *bp, int ldb,
                        const int *boff, float *C, int ldc, int acc)
{
    const int panels = (N + NR - 1) / NR;
    const size_t ai = trans_a ? 1 : (size_t)lda, ak = trans_a ? (size_t)lda : 1;   /* op(A)[i, k] = A[i ai + k ak] */
    const size_t ldp = ldb ? (size_t)ldb : NR;                                       /* from one k to the next in a panel */
    for (int p = 0; p < panels; p++) {        /* a panel (K x NR floats) stays in cache over all row tiles */
        const float *panel = ldb || boff ? bp + (size_t)p * NR : bp + (size_t)p * K * NR;
        const int nv = N - p * NR < NR ? N - p * NR : NR;
        __mmask16 m[NV];                      /* the columns of each register that exist */
        for (int v = 0; v < NV; v++) {
            int have = nv - 16 * v;
            m[v] = have >= 16 ? (__mmask16)0xFFFF : have > 0 ? (__mmask16)((1u << have) - 1) : (__mmask16)0;
        }
        float *Cp = C + (size_t)p * NR;
        int i = 0;
#define TILE_A(i) (aoff ? A : A + (size_t)(i) * ai), ai, ak, (aoff ? aoff + (i) : NULL)
        for (; i + MR <= M; i += MR) tile(MR, K, TILE_A(i), panel, ldp, boff, Cp + (size_t)i * ldc, ldc, m, acc);
        if (i < M) tile_rest(M - i, K, TILE_A(i), panel, ldp, boff, Cp + (size_t)i * ldc, ldc, m, acc);
#undef TILE_A
    }
}

void ct_gemm_packed(int M, int N, int K, const float *A, int lda, int trans_a, const float *bp, float *C, int ldc,
                    int accumulate)
{
    CT_ASSERT(ct_gemm_packed_available() && K >= 1);
    if (M < 1 || N < 1) return;
    gemm_packed_avx512(M, N, K, A, lda, trans_a, NULL, bp, 0, NULL, C, ldc, accumulate);
}

void ct_gemm_rowmajor(int M, int N, int K, const float *A, int lda, int trans_a, const float *B, int ldb, float *C, int ldc,
                      int accumulate)
{
    CT_ASSERT(ct_gemm_packed_available() && K >= 1 && N % NR == 0 && ldb >= N);
    if (M < 1 || N < 1) return;
    gemm_packed_avx512(M, N, K, A, lda, trans_a, NULL, B, ldb, NULL, C, ldc, accumulate);
}

void ct_gemm_rowoffsets(int M, int N, int K, const float *A, int lda, const float *B, const int *boff, float *C,
                        int ldc, int accumulate)
{
    CT_ASSERT(ct_gemm_packed_available() && K >= 1 && boff);
    if (M < 1 || N < 1) return;
    gemm_packed_avx512(M, N, K, A, lda, 0, NULL, B, 0, boff, C, ldc, accumulate);
}

void ct_gemm_packed_arows(int M, int N, int K, const float *A, const int *aoff, const float *bp, float *C, int ldc,
                          int accumulate)
{
    CT_ASSERT(ct_gemm_packed_available() && K >= 1 && aoff);
    if (M < 1 || N < 1) return;
    gemm_packed_avx512(M, N, K, A, 0, 0, aoff, bp, 0, NULL, C, ldc, accumulate);
}

#else   /* not x86-64: the callers use cblas_sgemm */

int ct_gemm_packed_available(void) { return 0; }
void ct_gemm_packed(int M, int N, int K, const float *A, int lda, int trans_a, const float *bp, float *C, int ldc,
                    int accumulate)
{
    (void)M; (void)N; (void)K; (void)A; (void)lda; (void)trans_a; (void)bp; (void)C; (void)ldc; (void)accumulate;
    CT_ASSERT(0);
}
void ct_gemm_rowmajor(int M, int N, int K, const float *A, int lda, int trans_a, const float *B, int ldb, float *C, int ldc,
                      int accumulate)
{
    (void)M; (void)N; (void)K; (void)A; (void)lda; (void)trans_a; (void)B; (void)ldb; (void)C; (void)ldc; (void)accumulate;
    CT_ASSERT(0);
}
void ct_gemm_rowoffsets(int M, int N, int K, const float *A, int lda, const float *B, const int *boff, float *C,
                        int ldc, int accumulate)
{
    (void)M; (void)N; (void)K; (void)A; (void)lda; (void)B; (void)boff; (void)C; (void)ldc; (void)accumulate;
    CT_ASSERT(0);
}
void ct_gemm_packed_arows(int M, int N, int K, const float *A, const int *aoff, const float *bp, float *C, int ldc,
                          int accumulate)
{
    (void)M; (void)N; (void)K; (void)A; (void)aoff; (void)bp; (void)C; (void)ldc; (void)accumulate;
    CT_ASSERT(0);
}

#endif
