/* gemm_packed.c - C += A op(B) over a B packed once (see gemm_packed.h). */
/* syscall() for arch_prctl (not in POSIX) */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* ---- which kernels run ---- */

static const char *const KERNEL_NAMES[] = { "none (OpenBLAS)", "AVX2", "AVX-512", "AVX512-BF16", "AMX-BF16" };
static const char *const KERNEL_WORDS[] = { "blas", "avx2", "avx512", "avx512bf16", "amx" };
static int kernels_in_use = -1;   /* a ct_kernels over the whole chain, or -1 before the first question */
static int kernels_chosen;        /* 1 when CTRAIN_CPU_KERNELS or ct_kernels_set chose kernels_in_use */
static char amx_refusal[200];     /* ct_kernels_amx_refusal() */

const char *ct_kernels_name(ct_kernels k) { return k >= CT_KERNELS_BLAS && k <= CT_KERNELS_AMX ? KERNEL_NAMES[k] : "?"; }
const char *ct_kernels_amx_refusal(void) { (void)ct_kernels_cpu_all(); return amx_refusal; }

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

/* CPUID leaf 7 sub-leaf s: ebx, ecx, edx, eax of the structured extended features. */
static int cpuid7(unsigned s, unsigned *a, unsigned *b, unsigned *c, unsigned *d)
{
    return __get_cpuid_count(7, s, a, b, c, d);
}

/* XCR0, the state components the OS saves and restores (0 when XGETBV is not enabled). */
static unsigned long long xcr0(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0;   /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

/* AVX512-BF16: CPUID.(7,1):EAX[5]; the ZMM state is the OS's, as for AVX-512F (asked first). */
static int cpu_avx512bf16(void)
{
    unsigned a, b, c, d;
    return cpuid7(1, &a, &b, &c, &d) && (a & (1u << 5));
}

/* AMX-BF16 usable by this process: CPUID.(7,0):EDX[24] AMX-TILE and EDX[22] AMX-BF16; XCR0
 * bits 17 (XTILECFG) and 18 (XTILEDATA), the OS saving the tiles; and Linux's permission:
 * since 5.16 the 8 KiB of tile data are first disabled in every process (XFD) and a tile
 * instruction without the permission is a SIGILL, so it is asked for here, once, for the
 * whole process. A refusal is recorded in amx_refusal. */
static int cpu_amx(void)
{
    unsigned a, b, c, d;
    if (!cpuid7(0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) return 0;
    if ((xcr0() & (3ull << 17)) != (3ull << 17)) {
        snprintf(amx_refusal, sizeof amx_refusal, "the CPU has AMX-BF16 but the OS does not enable its tile state (XCR0 bits 17, 18)");
        return 0;
    }
#ifdef SYS_arch_prctl
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        snprintf(amx_refusal, sizeof amx_refusal, "Linux refused this process the AMX tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, "
                 "XFEATURE_XTILEDATA): %s; Linux 5.16 or newer grants it)", strerror(errno));
        return 0;
    }
    return 1;
#else
    snprintf(amx_refusal, sizeof amx_refusal, "no arch_prctl system call here to ask for the AMX tile data");
    return 0;
#endif
}
#endif

ct_kernels ct_kernels_cpu_all(void)
{
    static int known = -1;   /* asked once: the permission is the process's (the same answer if two threads race) */
    if (known >= 0) return (ct_kernels)known;
    int k = CT_KERNELS_BLAS;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();   /* libgcc's answers include the OS's saving of the registers */
    if (__builtin_cpu_supports("avx512f")) {
        k = CT_KERNELS_AVX512;
        if (cpu_avx512bf16()) k = cpu_amx() ? CT_KERNELS_AMX : CT_KERNELS_AVX512BF16;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        k = CT_KERNELS_AVX2;
#endif
    known = k;
    return (ct_kernels)k;
}

ct_kernels ct_kernels_cpu(void)
{
    const ct_kernels k = ct_kernels_cpu_all();
    return k > CT_KERNELS_AVX512 ? CT_KERNELS_AVX512 : k;
}

ct_status ct_kernels_init(void)
{
    const ct_kernels cpu = ct_kernels_cpu_all();
    kernels_in_use = cpu;
    kernels_chosen = 0;
    const char *e = getenv("CTRAIN_CPU_KERNELS");
    if (!e || !*e) return CT_OK;
    for (int k = CT_KERNELS_BLAS; k <= CT_KERNELS_AMX; k++)
        if (!strcasecmp(e, KERNEL_WORDS[k])) {
            if (k == CT_KERNELS_AMX && cpu == CT_KERNELS_AVX512BF16 && ct_kernels_amx_refusal()[0])
                return ct_fail(CT_ENODEV, "CTRAIN_CPU_KERNELS=%s: %s: unset it or choose avx512bf16", e, ct_kernels_amx_refusal());
            if (k > (int)cpu)
                return ct_fail(CT_EINVAL, "CTRAIN_CPU_KERNELS=%s: this CPU cannot run them: it lacks %s (its widest are %s): "
                               "unset it or choose a narrower set", e, ct_kernels_name((ct_kernels)k), ct_kernels_name(cpu));
            kernels_in_use = k;
            kernels_chosen = 1;
            return CT_OK;
        }
    return ct_fail(CT_EINVAL, "CTRAIN_CPU_KERNELS=%s: use avx512, avx2 or blas, or amx or avx512bf16 to add bf16 products (or "
                   "unset it: the widest this CPU runs)", e);
}

ct_kernels ct_kernels_get_all(void)
{
    /* a program that did not call ct_kernels_init first (the CLI does, and stops on a bad value):
     * a bad value is said once, and the CPU's widest set runs */
    if (kernels_in_use < 0 && ct_kernels_init() != CT_OK)
        fprintf(stderr, "ctrain: warning: %s; running %s\n", ct_last_error(), ct_kernels_name((ct_kernels)kernels_in_use));
    return (ct_kernels)kernels_in_use;
}

ct_kernels ct_kernels_get(void)
{
    const ct_kernels k = ct_kernels_get_all();
    return k > CT_KERNELS_AVX512 ? CT_KERNELS_AVX512 : k;
}

ct_kernels ct_kernels_set(ct_kernels k)
{
    const ct_kernels before = ct_kernels_get_all();
    CT_ASSERT(k >= CT_KERNELS_BLAS && k <= ct_kernels_cpu_all());
    kernels_in_use = k;
    kernels_chosen = 1;
    return before;
}

ct_kernels ct_kernels_set_as_cpu(ct_kernels k)
{
    const ct_kernels before = ct_kernels_set(k);
    kernels_chosen = 0;
    return before;
}

int ct_kernels_chosen(void)
{
    (void)ct_kernels_get_all();
    return kernels_chosen;
}

int ct_gemm_packed_available(void) { return ct_kernels_get() != CT_KERNELS_BLAS; }

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* One tile: rows [0, MROWS) of C, one panel (masks m keep the columns that exist);
 * op(A)[i, k] is A[i * ai + k * ak], or, with aoff, A[aoff[i] + k]; the panel's row k
 * is at panel + k * ldp, or, with boff, at panel + boff[k] (read with the masks).
 * MROWS is a constant at every call, so the accumulators live in registers. */
#define CT_AVX512 __attribute__((target("avx512f")))
static inline __attribute__((always_inline)) CT_AVX512
void gemm_tile(const int MROWS, int K, const float *restrict A, size_t ai, size_t ak, const int *restrict aoff,
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
#define CASE(r) case r: gemm_tile(r, K, A, ai, ak, aoff, panel, ldp, boff, C, ldc, m, acc); break;
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
        for (; i + MR <= M; i += MR) gemm_tile(MR, K, TILE_A(i), panel, ldp, boff, Cp + (size_t)i * ldc, ldc, m, acc);
        if (i < M) tile_rest(M - i, K, TILE_A(i), panel, ldp, boff, Cp + (size_t)i * ldc, ldc, m, acc);
#undef TILE_A
    }
}

/* ---- the same kernel for AVX2 with FMA ----
 * 16 registers of 8 floats: a tile is 6 rows by a strip of 16 columns (12 accumulators,
 * 2 panel registers, 1 broadcast), and each 64-column panel is four strips. Per element of
 * C the same operations in the same order as above. (A build for -march=native on an
 * AVX-512 CPU may give these functions its 32 registers; the portable build of `make
 * dist` compiles them for AVX2 and FMA alone, as an AVX2 CPU runs them.) */
#define CT_AVX2 __attribute__((target("avx2,fma")))
#define MR2 6   /* rows per AVX2 tile: 6 x 2 accumulators + 2 panel registers + 1 broadcast <= 16 */

/* The columns of a strip that exist: 8 lanes each of two registers, all ones for a whole one. */
static inline __attribute__((always_inline)) CT_AVX2 __m256i lanes(int have)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(have), idx);   /* lane j: -1 where j < have */
}

/* One tile: rows [0, MROWS) of C, one strip of 16 columns (WHOLE: all 16 exist; else the
 * masks m[0], m[1] keep those that do); A, the panel and boff as gemm_tile() above. */
static inline __attribute__((always_inline)) CT_AVX2
void gemm_tile2(const int MROWS, const int WHOLE, int K, const float *restrict A, size_t ai, size_t ak, const int *restrict aoff,
                const float *restrict panel, size_t ldp, const int *restrict boff, float *restrict C, int ldc, const __m256i *m,
                int acc)
{
    const float *arow[MR2];
#pragma GCC unroll 6
    for (int i = 0; i < MROWS; i++) arow[i] = aoff ? A + aoff[i] : A + (size_t)i * ai;
    if (aoff) ak = 1;
    __m256 c[MR2][2];
#pragma GCC unroll 6
    for (int i = 0; i < MROWS; i++)
#pragma GCC unroll 2
        for (int v = 0; v < 2; v++)
            c[i][v] = !acc ? _mm256_setzero_ps() : WHOLE ? _mm256_loadu_ps(C + (size_t)i * ldc + 8 * v)
                                                         : _mm256_maskload_ps(C + (size_t)i * ldc + 8 * v, m[v]);
    for (int k = 0; k < K; k++) {
        __m256 b[2];
#pragma GCC unroll 2
        for (int v = 0; v < 2; v++)
            b[v] = !boff ? _mm256_loadu_ps(panel + (size_t)k * ldp + 8 * v)
                 : WHOLE ? _mm256_loadu_ps(panel + boff[k] + 8 * v) : _mm256_maskload_ps(panel + boff[k] + 8 * v, m[v]);
#pragma GCC unroll 6
        for (int i = 0; i < MROWS; i++) {
            const __m256 a = _mm256_set1_ps(arow[i][(size_t)k * ak]);
#pragma GCC unroll 2
            for (int v = 0; v < 2; v++) c[i][v] = _mm256_fmadd_ps(a, b[v], c[i][v]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MROWS; i++)
#pragma GCC unroll 2
        for (int v = 0; v < 2; v++) {
            if (WHOLE) _mm256_storeu_ps(C + (size_t)i * ldc + 8 * v, c[i][v]);
            else       _mm256_maskstore_ps(C + (size_t)i * ldc + 8 * v, m[v], c[i][v]);
        }
}

/* All row tiles of one strip, WHOLE constant per instance. */
static inline __attribute__((always_inline)) CT_AVX2
void strip2(const int WHOLE, int M, int K, const float *A, size_t ai, size_t ak, const int *aoff, const float *panel,
            size_t ldp, const int *boff, float *C, int ldc, const __m256i *m, int acc)
{
    int i = 0;
#define TILE2(r) gemm_tile2(r, WHOLE, K, aoff ? A : A + (size_t)i * ai, ai, ak, aoff ? aoff + i : NULL, panel, ldp, boff, \
                       C + (size_t)i * ldc, ldc, m, acc)
    for (; i + MR2 <= M; i += MR2) TILE2(MR2);
    switch (M - i) {   /* the rows that do not fill a whole tile, one instance per count */
#define CASE(r) case r: TILE2(r); break;
    CASE(1) CASE(2) CASE(3) CASE(4) CASE(5)
#undef CASE
    default: break;
    }
#undef TILE2
}

static CT_AVX2 __attribute__((noinline))
void strip2_whole(int M, int K, const float *A, size_t ai, size_t ak, const int *aoff, const float *panel, size_t ldp,
                  const int *boff, float *C, int ldc, int acc)
{ strip2(1, M, K, A, ai, ak, aoff, panel, ldp, boff, C, ldc, NULL, acc); }

static CT_AVX2 __attribute__((noinline))
void strip2_part(int M, int K, const float *A, size_t ai, size_t ak, const int *aoff, const float *panel, size_t ldp,
                 const int *boff, float *C, int ldc, int have, int acc)
{
    const __m256i m[2] = { lanes(have), lanes(have - 8) };
    strip2(0, M, K, A, ai, ak, aoff, panel, ldp, boff, C, ldc, m, acc);
}

/* gemm_packed_avx512's arguments and work, strip by strip. */
static void gemm_packed_avx2(int M, int N, int K, const float *A, int lda, int trans_a, const int *aoff, const float *bp,
                             int ldb, const int *boff, float *C, int ldc, int acc)
{
    const int panels = (N + NR - 1) / NR;
    const size_t ai = trans_a ? 1 : (size_t)lda, ak = trans_a ? (size_t)lda : 1;
    const size_t ldp = ldb ? (size_t)ldb : NR;
    for (int p = 0; p < panels; p++) {
        const float *panel = ldb || boff ? bp + (size_t)p * NR : bp + (size_t)p * K * NR;
        for (int s = 0; s < NR / 16; s++) {   /* columns 64p + 16s .. 64p + 16s + 15 */
            const int have = N - p * NR - 16 * s;
            if (have <= 0) break;
            float *Cs = C + (size_t)p * NR + 16 * s;
            if (have >= 16) strip2_whole(M, K, A, ai, ak, aoff, panel + 16 * s, ldp, boff, Cs, ldc, acc);
            else            strip2_part(M, K, A, ai, ak, aoff, panel + 16 * s, ldp, boff, Cs, ldc, have, acc);
        }
    }
}

/* The kernel of the set in use. */
static void gemm_any(int M, int N, int K, const float *A, int lda, int trans_a, const int *aoff, const float *bp, int ldb,
                     const int *boff, float *C, int ldc, int acc)
{
    if (ct_kernels_get() == CT_KERNELS_AVX512) gemm_packed_avx512(M, N, K, A, lda, trans_a, aoff, bp, ldb, boff, C, ldc, acc);
    else                                        gemm_packed_avx2(M, N, K, A, lda, trans_a, aoff, bp, ldb, boff, C, ldc, acc);
}

void ct_gemm_packed(int M, int N, int K, const float *A, int lda, int trans_a, const float *bp, float *C, int ldc,
                    int accumulate)
{
    CT_ASSERT(ct_gemm_packed_available() && K >= 1);
    if (M < 1 || N < 1) return;
    gemm_any(M, N, K, A, lda, trans_a, NULL, bp, 0, NULL, C, ldc, accumulate);
}

void ct_gemm_rowmajor(int M, int N, int K, const float *A, int lda, int trans_a, const float *B, int ldb, float *C, int ldc,
                      int accumulate)
{
    CT_ASSERT(ct_gemm_packed_available() && K >= 1 && N % NR == 0 && ldb >= N);
    if (M < 1 || N < 1) return;
    gemm_any(M, N, K, A, lda, trans_a, NULL, B, ldb, NULL, C, ldc, accumulate);
}

void ct_gemm_rowoffsets(int M, int N, int K, const float *A, int lda, const float *B, const int *boff, float *C,
                        int ldc, int accumulate)
{
    CT_ASSERT(ct_gemm_packed_available() && K >= 1 && boff);
    if (M < 1 || N < 1) return;
    gemm_any(M, N, K, A, lda, 0, NULL, B, 0, boff, C, ldc, accumulate);
}

void ct_gemm_packed_arows(int M, int N, int K, const float *A, const int *aoff, const float *bp, float *C, int ldc,
                          int accumulate)
{
    CT_ASSERT(ct_gemm_packed_available() && K >= 1 && aoff);
    if (M < 1 || N < 1) return;
    gemm_any(M, N, K, A, 0, 0, aoff, bp, 0, NULL, C, ldc, accumulate);
}

#else   /* not x86-64: ct_kernels_cpu() is CT_KERNELS_BLAS, the callers use cblas_sgemm */

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
