/* gemm_bf16.c - bf16 products with float32 accumulation (see gemm_bf16.h): packing, the
 * C model of the AMX tiles, the AMX kernel written once over the tile operations, the
 * AVX512-BF16 kernel, and the dispatch. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"
#include "layers/amx_tiles.h"
#include "core/bf16.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/peak.h"
#include "core/threads.h"
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#define KB CT_BF16_KB
#define NB CT_BF16_NB
#define MB CT_BF16_MB

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* ---- packing ---- */

size_t ct_gemm_bf16_pack_elems(int K, int N) { return (size_t)round_up(N, 2 * NB) * (size_t)round_up(K, KB); }
size_t ct_gemm_bf16_work_elems(int M, int K) { return (size_t)round_up(M, MB) * (size_t)round_up(K, KB); }

/* Packing runs at every product (A) or every batch (B), beside kernels that do 16 x 16 x 32
 * multiply-adds per instruction, so it must not convert one element at a time: every row is
 * rounded with ct_bf16s_from_floats (eight at a time with AVX2; core/bf16.h) into a small
 * buffer, and then only moved. The rounding is the same function either way, so the packed
 * bits are the element-by-element definitions' (tests/test_bf16.c checks both layouts). */
enum { PACK_CHUNK = 256 };   /* elements of a row rounded at once */

static size_t panel_elems(int K) { return (size_t)(round_up(K, KB) / 2) * NB * 2; }   /* one panel of a packed B */

/* dst [pairs][16] 32-bit words = the transpose of the 16 rows t[j] (pairs words each, pairs a
 * multiple of 4): 4 x 4 blocks of words, transposed in SSE2 registers where there are, else one
 * at a time. */
static void pair_rows_transposed(uint16_t *dst, const uint16_t *const t[NB], int pairs)
{
    for (int q = 0; q < pairs; q += 4)
        for (int j = 0; j < NB; j += 4) {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__SSE2__)
            const __m128i r0 = _mm_loadu_si128((const __m128i *)(t[j] + 2 * q)), r1 = _mm_loadu_si128((const __m128i *)(t[j + 1] + 2 * q));
            const __m128i r2 = _mm_loadu_si128((const __m128i *)(t[j + 2] + 2 * q)), r3 = _mm_loadu_si128((const __m128i *)(t[j + 3] + 2 * q));
            const __m128i a = _mm_unpacklo_epi32(r0, r1), b = _mm_unpackhi_epi32(r0, r1);   /* rows j, j+1: pairs q, q+1 | q+2, q+3 */
            const __m128i c = _mm_unpacklo_epi32(r2, r3), d = _mm_unpackhi_epi32(r2, r3);   /* rows j+2, j+3: the same */
            _mm_storeu_si128((__m128i *)(dst + ((size_t)q * NB + j) * 2),       _mm_unpacklo_epi64(a, c));
            _mm_storeu_si128((__m128i *)(dst + ((size_t)(q + 1) * NB + j) * 2), _mm_unpackhi_epi64(a, c));
            _mm_storeu_si128((__m128i *)(dst + ((size_t)(q + 2) * NB + j) * 2), _mm_unpacklo_epi64(b, d));
            _mm_storeu_si128((__m128i *)(dst + ((size_t)(q + 3) * NB + j) * 2), _mm_unpackhi_epi64(b, d));
#else
            for (int qq = q; qq < q + 4; qq++)
                for (int jj = j; jj < j + 4; jj++) memcpy(dst + ((size_t)qq * NB + jj) * 2, t[jj] + 2 * qq, 2 * sizeof *dst);
#endif
        }
}

/* 16 columns of two rounded rows interleaved into one 64-byte tile row: pair j is (r0[j], r1[j]). */
static void pair_interleaved(uint16_t *row, const uint16_t *r0, const uint16_t *r1)
{
#if defined(__x86_64__) && defined(__GNUC__) && defined(__SSE2__)
    for (int j = 0; j < NB; j += 8) {
        const __m128i a = _mm_loadu_si128((const __m128i *)(r0 + j)), b = _mm_loadu_si128((const __m128i *)(r1 + j));
        _mm_storeu_si128((__m128i *)(row + 2 * j),     _mm_unpacklo_epi16(a, b));
        _mm_storeu_si128((__m128i *)(row + 2 * j + 8), _mm_unpackhi_epi16(a, b));
    }
#else
    for (int j = 0; j < NB; j++) { row[2 * j] = r0[j]; row[2 * j + 1] = r1[j]; }
#endif
}

/* dst [n] <- src [got] rounded to bf16 (src: float32) or copied (bf16), then zeros up to n. */
static void row_in(uint16_t *dst, const void *src, int bf16, int got, int n)
{
    if (got > 0 && bf16) memcpy(dst, src, (size_t)got * sizeof *dst);
    else if (got > 0)    ct_bf16s_from_floats(dst, src, (size_t)got);
    memset(dst + (got > 0 ? got : 0), 0, (size_t)(n - (got > 0 ? got : 0)) * sizeof *dst);
}

/* op(B) [K, N] -> [P][Kp/2][16][2]: element (p, q, j, h) = bf16(op(B)[2q + h, 16p + j]), zeros
 * past K and N. Rows k0 .. k0+kc-1 of op(B), given as rows [kc][ldr] of float32 (rounded here)
 * or of bf16 (already rounded): pair-row q interleaves rows 2q and 2q+1. Float rows are rounded
 * PACK_CHUNK columns at a time into a small buffer; bf16 rows are read where they are, but for
 * a panel cut short by N. Rows k0+kc .. kend-1 are written as zeros (kend even: the chunk that
 * reaches K passes Kp, so the zero pair-rows up to Kp are written). */
static void pack_rows(uint16_t *bp, const void *rows, int bf16, int ldr, int k0, int kc, int kend, int K, int N)
{
    const int Kp = round_up(K, KB), P = round_up(N, 2 * NB) / NB;
    CT_ASSERT(k0 % 2 == 0 && kc > 0 && k0 + kc <= K && kend % 2 == 0 && k0 + kc <= kend && kend <= Kp);
    const size_t panel = panel_elems(K), es = bf16 ? 2 : 4;   /* bytes per source element */
    const int qend = kend / 2;
    static const uint16_t zeros[PACK_CHUNK];
    uint16_t r[2][PACK_CHUNK];
    for (int q = k0 / 2; q < qend; q++)
        for (int n0 = 0; n0 < P * NB; n0 += PACK_CHUNK) {
            const int nc = P * NB - n0 < PACK_CHUNK ? P * NB - n0 : PACK_CHUNK;       /* a multiple of 16 */
            const int have = N - n0 < 0 ? 0 : N - n0 < nc ? N - n0 : nc;           /* columns that exist */
            const uint16_t *src[2];
            for (int h = 0; h < 2; h++) {
                const int k = 2 * q + h, got = k < k0 + kc ? have : 0;   /* row k's columns that exist; zeros after */
                if (!got) { src[h] = zeros; continue; }
                const char *from = (const char *)rows + ((size_t)(k - k0) * ldr + n0) * es;
                if (bf16 && got == nc) src[h] = (const uint16_t *)(const void *)from;
                else { row_in(r[h], from, bf16, got, nc); src[h] = r[h]; }
            }
            for (int c = 0; c < nc; c += NB)   /* one tile row, 64 bytes, per panel */
                pair_interleaved(bp + (size_t)((n0 + c) / NB) * panel + (size_t)q * NB * 2, src[0] + c, src[1] + c);
        }
}

/* Columns n0 .. n0+nc-1 of op(B) [K, N], given as the rows of B^T, cols [nc][ldc], float32 or
 * bf16: column n of op(B) is contiguous, and panel p holds columns 16p .. 16p+15. Those 16
 * rows are taken PACK_CHUNK at a time (float32 ones rounded into t; bf16 ones read where they
 * are, but at a tail), their 32-bit words being pairs (k, k+1) of a row, and the panel's tile
 * rows are their transpose, [pairs][16] (pair_rows_transposed). Every element is written, zeros
 * included; the call that reaches N also writes the zero panels up to P. */
static void pack_cols(uint16_t *bp, const void *cols, int bf16, int ldc, int n0, int nc, int K, int N)
{
    CT_ASSERT(n0 % NB == 0 && nc > 0 && n0 + nc <= N && (nc % NB == 0 || n0 + nc == N));
    const int Kp = round_up(K, KB), P = round_up(N, 2 * NB) / NB;
    const size_t panel = panel_elems(K), es = bf16 ? 2 : 4;
    const int pend = n0 + nc == N ? P : (n0 + nc) / NB;
    static const uint16_t zeros[PACK_CHUNK];
    uint16_t t[NB][PACK_CHUNK];
    const uint16_t *src[NB];
    for (int p = n0 / NB; p < pend; p++)
        for (int k0 = 0; k0 < Kp; k0 += PACK_CHUNK) {
            const int kc = Kp - k0 < PACK_CHUNK ? Kp - k0 : PACK_CHUNK;   /* a multiple of 32 */
            const int have = K - k0 < kc ? K - k0 : kc;                  /* columns that exist (> 0) */
            for (int j = 0; j < NB; j++) {
                const int n = p * NB + j, got = n < n0 + nc ? have : 0;
                if (!got) { src[j] = zeros; continue; }
                const char *from = (const char *)cols + ((size_t)(n - n0) * ldc + k0) * es;
                if (bf16 && got == kc) src[j] = (const uint16_t *)(const void *)from;
                else { row_in(t[j], from, bf16, got, kc); src[j] = t[j]; }
            }
            pair_rows_transposed(bp + (size_t)p * panel + (size_t)k0 * NB, src, kc / 2);
        }
}

/* Where a part does not reach K, it ends at its last row, which must end a pair. */
static int part_end(int k0, int kc, int K)
{
    CT_ASSERT(k0 + kc == K || kc % 2 == 0);
    return k0 + kc == K ? round_up(K, KB) : k0 + kc;
}

void ct_gemm_bf16_pack_rows_bf16(uint16_t *bp, const uint16_t *rows, int ldr, int k0, int kc, int K, int N)
{
    pack_rows(bp, rows, 1, ldr, k0, kc, part_end(k0, kc, K), K, N);
}

void ct_gemm_bf16_pack_segment(uint16_t *bp, const float *rows, int ldr, int k0, int kc, int kend, int K, int N)
{
    pack_rows(bp, rows, 0, ldr, k0, kc, kend, K, N);
}

void ct_gemm_bf16_pack_cols_bf16(uint16_t *bp, const uint16_t *cols, int ldc, int n0, int nc, int K, int N)
{
    pack_cols(bp, cols, 1, ldc, n0, nc, K, N);
}

/* From B [K, N] already packed as an A (w [Kp][Np], zeros past K and N): its rows are bf16 rows
 * of op(B), Np = N rounded up to 32 apart. */
void ct_gemm_bf16_pack_from_a(uint16_t *bp, const uint16_t *w, int K, int N)
{
    pack_rows(bp, w, 1, round_up(N, KB), 0, K, round_up(K, KB), K, N);
}

/* ---- sharing the work with the threads ----
 * Outside a ct_parallel task, a packing of at least CT_PARALLEL_MIN_ELEMS values, or a product
 * of at least CT_SGEMM_SPLIT_FLOPS, is shared by up to ct_threads_get() workers (core/threads.h: ct_parallel_range):
 * B packed in blocks of SPLIT_COLS columns, A in blocks of MB rows, the product in blocks of
 * MB rows x SPLIT_COLS columns of C. Each block is the same packing or product on a part of the
 * matrices: a block of columns of a packed B is itself a packed matrix (its panels are
 * contiguous and SPLIT_COLS is a multiple of the 32 columns the tiles take at once), and every
 * element of C is summed by the same instructions in the same order whatever the blocks (the
 * tiles and vdpbf16ps both run over one element's k in order). So the bits do not depend on the
 * thread count (tests/test_bf16.c checks it). Inside a task (conv2d's images, the LSTM's
 * workers) all of it runs in the caller. */
enum { SPLIT_COLS = 64 };   /* 4 panels: the AVX512-BF16 kernel's register block */

typedef struct { uint16_t *bp; const float *B; int ldb, trans, K, N; } pack_job;

static void pack_blocks(void *ctx, size_t lo, size_t hi)   /* columns [lo, hi) x SPLIT_COLS of op(B) */
{
    const pack_job *j = ctx;
    const int n0 = (int)lo * SPLIT_COLS, n1 = (int)hi * SPLIT_COLS < j->N ? (int)hi * SPLIT_COLS : j->N;
    uint16_t *bp = j->bp + (size_t)(n0 / NB) * panel_elems(j->K);
    if (j->trans) pack_cols(bp, j->B + (size_t)n0 * j->ldb, 0, j->ldb, 0, n1 - n0, j->K, n1 - n0);   /* B [N, K]: op(B) = B^T */
    else          pack_rows(bp, j->B + n0, 0, j->ldb, 0, j->K, round_up(j->K, KB), j->K, n1 - n0);   /* B [K, N] row-major */
}

void ct_gemm_bf16_pack(uint16_t *bp, const float *B, int ldb, int trans, int K, int N)
{
    pack_job j = { bp, B, ldb, trans, K, N };
    ct_parallel_range((size_t)(N + SPLIT_COLS - 1) / SPLIT_COLS, (size_t)K * N, pack_blocks, &j);
}

/* blk[ii][k] = A[(k0 + k) lda + i0 + ii] for ii < mi, k < kc: 16 columns of A, gathered into
 * rows. Plainly, one element at a time; with AVX2, 8 x 8 blocks transposed in registers
 * (eight rows of A loaded, three rounds of shuffles, eight rows of blk stored). */
static void gather_plain(float (*blk)[PACK_CHUNK], const float *A, int lda, int i0, int mi, int k0, int kc, int from)
{
    for (int k = 0; k < kc; k++) {
        const float *a = A + (size_t)(k0 + k) * lda + i0;
        for (int ii = from; ii < mi; ii++) blk[ii][k] = a[ii];
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
static __attribute__((target("avx2"))) void gather_avx2(float (*blk)[PACK_CHUNK], const float *A, int lda, int i0, int mi, int k0, int kc)
{
    const int m8 = mi / 8 * 8, k8 = kc / 8 * 8;
    for (int ib = 0; ib < m8; ib += 8) {
        for (int kb = 0; kb < k8; kb += 8) {
            __m256 r[8], t[8];
            for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps(A + (size_t)(k0 + kb + k) * lda + i0 + ib);   /* row k: columns ib .. ib+7 */
            for (int k = 0; k < 8; k += 2) {   /* pairs of rows interleaved */
                t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
                t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
            }
            for (int k = 0; k < 8; k += 4) {   /* then quadruples */
                r[k]     = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
                r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
                r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
                r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
            }
            for (int c = 0; c < 4; c++) {      /* then the 128-bit halves: column c and c + 4 */
                _mm256_storeu_ps(&blk[ib + c][kb],     _mm256_permute2f128_ps(r[c], r[c + 4], 0x20));
                _mm256_storeu_ps(&blk[ib + c + 4][kb], _mm256_permute2f128_ps(r[c], r[c + 4], 0x31));
            }
        }
        for (int k = k8; k < kc; k++)
            for (int ii = ib; ii < ib + 8; ii++) blk[ii][k] = A[(size_t)(k0 + k) * lda + i0 + ii];
    }
    gather_plain(blk, A, lda, i0, mi, k0, kc, m8);
}
#endif

/* op(A) [M, K] -> work [Mp][Kp] bf16, rounded as it goes; zeros past M and K. trans_a: A is
 * [K, M], each output row a column of A: 16 columns are gathered into a float block, 16 rows
 * of PACK_CHUNK at a time (reading A's rows, not striding down its columns), then rounded. */
static void pack_a_rows(uint16_t *w, const float *A, int lda, int trans_a, int M, int K)
{
    const int Mp = round_up(M, MB), Kp = round_up(K, KB);
    if (!trans_a) {
        for (int i = 0; i < Mp; i++) {
            uint16_t *row = w + (size_t)i * Kp;
            if (i >= M) { memset(row, 0, (size_t)Kp * sizeof *row); continue; }
            ct_bf16s_from_floats(row, A + (size_t)i * lda, (size_t)K);
            memset(row + K, 0, (size_t)(Kp - K) * sizeof *row);
        }
        return;
    }
    float blk[16][PACK_CHUNK];
    for (int i0 = 0; i0 < Mp; i0 += 16) {
        const int mi = M - i0 < 0 ? 0 : M - i0 < 16 ? M - i0 : 16;   /* rows of this block that exist */
        for (int k0 = 0; k0 < K; k0 += PACK_CHUNK) {
            const int kc = K - k0 < PACK_CHUNK ? K - k0 : PACK_CHUNK;
#if defined(__x86_64__) && defined(__GNUC__)
            if (ct_kernels_get() >= CT_KERNELS_AVX2) gather_avx2(blk, A, lda, i0, mi, k0, kc);
            else
#endif
                gather_plain(blk, A, lda, i0, mi, k0, kc, 0);
            for (int ii = 0; ii < mi; ii++) ct_bf16s_from_floats(w + (size_t)(i0 + ii) * Kp + k0, blk[ii], (size_t)kc);
        }
        for (int ii = 0; ii < 16; ii++) {
            uint16_t *row = w + (size_t)(i0 + ii) * Kp;
            if (ii >= mi) memset(row, 0, (size_t)Kp * sizeof *row);
            else          memset(row + K, 0, (size_t)(Kp - K) * sizeof *row);
        }
    }
}

typedef struct { uint16_t *w; const float *A; int lda, trans_a, M, K; } pack_a_job;

static void pack_a_blocks(void *ctx, size_t lo, size_t hi)   /* rows [lo, hi) x MB of op(A) */
{
    const pack_a_job *j = ctx;
    const int r0 = (int)lo * MB, r1 = (int)hi * MB < j->M ? (int)hi * MB : j->M;
    const float *A = j->trans_a ? j->A + r0 : j->A + (size_t)r0 * j->lda;   /* op(A)'s row r0: A's row, or column */
    pack_a_rows(j->w + (size_t)r0 * round_up(j->K, KB), A, j->lda, j->trans_a, r1 - r0, j->K);
}

void ct_gemm_bf16_pack_a(uint16_t *w, const float *A, int lda, int trans_a, int M, int K)
{
    pack_a_job j = { w, A, lda, trans_a, M, K };
    ct_parallel_range((size_t)round_up(M, MB) / MB, (size_t)M * K, pack_a_blocks, &j);
}

/* wt [Kp][Mt] = the packing of A^T from w [Mp][Kp], the packing of A [M, K]: wt's row i is
 * w's column i, zeros past M and K. One 8 x 8 block at a time: eight 16-bit rows in, eight out,
 * by interleaving pairs of rows, then pairs of pairs, then halves (SSE2, which every x86-64
 * has; the plain loop elsewhere). */
static void transpose8_bf16(uint16_t *dst, size_t ldd, const uint16_t *src, size_t lds)
{
#if defined(__x86_64__) && defined(__GNUC__) && defined(__SSE2__)
    __m128i r[8], t[8];
    for (int k = 0; k < 8; k++) r[k] = _mm_loadu_si128((const __m128i *)(src + (size_t)k * lds));
    for (int k = 0; k < 8; k += 2) {   /* rows k, k+1 interleaved: columns 0-3, then 4-7 */
        t[k / 2]     = _mm_unpacklo_epi16(r[k], r[k + 1]);
        t[k / 2 + 4] = _mm_unpackhi_epi16(r[k], r[k + 1]);
    }
    for (int h = 0; h < 8; h += 4) {   /* r[h], r[h+1]: rows 0-3 of columns (0,1), (2,3) (each + h); r[h+2], r[h+3]: rows 4-7 */
        r[h]     = _mm_unpacklo_epi32(t[h], t[h + 1]);
        r[h + 1] = _mm_unpackhi_epi32(t[h], t[h + 1]);
        r[h + 2] = _mm_unpacklo_epi32(t[h + 2], t[h + 3]);
        r[h + 3] = _mm_unpackhi_epi32(t[h + 2], t[h + 3]);
    }
    for (int q = 0; q < 4; q++) {      /* rows 0-3 beside rows 4-7 of the same two columns: whole columns */
        const __m128i top = r[q / 2 * 4 + q % 2], bottom = r[q / 2 * 4 + q % 2 + 2];
        _mm_storeu_si128((__m128i *)(dst + (size_t)(2 * q) * ldd),     _mm_unpacklo_epi64(top, bottom));
        _mm_storeu_si128((__m128i *)(dst + (size_t)(2 * q + 1) * ldd), _mm_unpackhi_epi64(top, bottom));
    }
#else
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 8; k++) dst[(size_t)i * ldd + k] = src[(size_t)k * lds + i];
#endif
}

void ct_gemm_bf16_transpose_a(uint16_t *wt, int ldwt, const uint16_t *w, int M, int K)
{
    const size_t ldw = (size_t)round_up(K, KB), ldt = (size_t)ldwt, Mt = (size_t)round_up(M, KB);   /* w's row length; wt's row stride and length */
    const int Kt = round_up(K, MB), K8 = K / 8 * 8;
    CT_ASSERT(ldt >= Mt);
    /* 32 rows of w at a time (64 bytes of each of wt's rows), 8 of its columns across: each of
     * wt's lines is written whole before the next, and the 32 lines read stay in L1. w's rows
     * past M are its packing's zeros, so the blocks run over all Mt of them and write wt's
     * zeros past M too */
    for (size_t kb = 0; kb < Mt; kb += 32)
        for (int i0 = 0; i0 < K8; i0 += 8)
            for (size_t k0 = kb; k0 < kb + 32; k0 += 8) transpose8_bf16(wt + (size_t)i0 * ldt + k0, ldt, w + k0 * ldw + i0, ldw);
    for (int i = K8; i < Kt; i++) {   /* the columns of w past the last 8, then wt's zero rows past K */
        uint16_t *row = wt + (size_t)i * ldt;
        for (size_t k = 0; k < Mt; k++) row[k] = i < K ? w[k * ldw + i] : 0;
    }
}

/* ---- the tile machine in C (gemm_bf16.h: "What TDPBF16PS computes") ---- */

static ct_tile_order model_order = CT_TILE_ORDER_SDM;

ct_tile_order ct_gemm_bf16_model_order(ct_tile_order o)
{
    const ct_tile_order before = model_order;
    model_order = o;
    return before;
}

ct_status ct_tile_model_config(ct_tile_model *tm, const ct_tile_config *cfg)
{
    if (cfg->palette != 1 || cfg->start_row != 0) return ct_fail(CT_EINVAL, "tile configuration: palette %d, start row %d (need 1, 0)", cfg->palette, cfg->start_row);
    for (int i = 0; i < 14; i++)
        if (cfg->reserved[i]) return ct_fail(CT_EINVAL, "tile configuration: reserved byte %d is not zero", 2 + i);
    for (int t = 0; t < 16; t++) {
        if (t >= 8 && (cfg->rows[t] || cfg->colsb[t])) return ct_fail(CT_EINVAL, "tile configuration: palette 1 has 8 tiles, tile %d configured", t);
        if (cfg->rows[t] > 16 || cfg->colsb[t] > 64)
            return ct_fail(CT_EINVAL, "tile configuration: tile %d of %d rows x %d bytes (at most 16 x 64)", t, cfg->rows[t], cfg->colsb[t]);
    }
    tm->cfg = *cfg;
    memset(tm->t, 0, sizeof tm->t);   /* LDTILECFG zeroes every tile */
    tm->order = model_order;
    return CT_OK;
}

/* TILELOADD: rows x colsb bytes from base, rows stride bytes apart; the rest of the tile zeroed. */
void ct_tile_model_load(ct_tile_model *tm, int t, const void *base, size_t stride)
{
    memset(tm->t[t], 0, sizeof tm->t[t]);
    for (int r = 0; r < tm->cfg.rows[t]; r++) memcpy(tm->t[t][r], (const uint8_t *)base + r * stride, tm->cfg.colsb[t]);
}

void ct_tile_model_store(const ct_tile_model *tm, int t, void *base, size_t stride)
{
    for (int r = 0; r < tm->cfg.rows[t]; r++) memcpy((uint8_t *)base + r * stride, tm->t[t][r], tm->cfg.colsb[t]);
}

void ct_tile_model_zero(ct_tile_model *tm, int t) { memset(tm->t[t], 0, sizeof tm->t[t]); }

static float f32_bits(uint32_t x) { float f; memcpy(&f, &x, sizeof f); return f; }
static uint32_t bits_f32(float f) { uint32_t x; memcpy(&x, &f, sizeof x); return x; }
/* denormals as zero (input), flushed to zero (output): a zero exponent field keeps only the sign */
static float dz(float f) { const uint32_t x = bits_f32(f); return (x & 0x7f800000u) ? f : f32_bits(x & 0x80000000u); }
/* the k-th bf16 of a tile row, widened (make_fp32: the 16 bits on top), denormal as zero */
static float bf16_at(const uint8_t *row, int k) { uint16_t b; memcpy(&b, row + 2 * k, 2); return dz(f32_bits((uint32_t)b << 16)); }
static float f32_at(const uint8_t *row, int n) { float f; memcpy(&f, row + 4 * n, 4); return f; }
/* c + a b rounded once to nearest even, DAZ on c (a, b come DAZ'd), FTZ on the result */
static float fma_dz(float a, float b, float c) { return dz(fmaf(a, b, dz(c))); }
static float add_dz(float x, float y) { return dz(dz(x) + dz(y)); }

/* One row m of TDPBF16PS, plainly, as the SDM (or the intrinsics guide) says: the reference. */
static void dp_row_scalar(ct_tile_order order, uint8_t *crow, const uint8_t *arow, const uint8_t (*b)[64], int pairs, int cols)
{
    float out[16];
    if (order == CT_TILE_ORDER_SDM) {
        float temp[32] = { 0 };   /* temp[2n], temp[2n+1]: the even and the odd products of column n */
        for (int q = 0; q < pairs; q++) {
            const uint8_t *brow = b[q];
            const float a0 = bf16_at(arow, 2 * q), a1 = bf16_at(arow, 2 * q + 1);
            for (int n = 0; n < cols; n++) {
                temp[2 * n]     = fma_dz(a0, bf16_at(brow, 2 * n),     temp[2 * n]);
                temp[2 * n + 1] = fma_dz(a1, bf16_at(brow, 2 * n + 1), temp[2 * n + 1]);
            }
        }
        for (int n = 0; n < cols; n++) out[n] = add_dz(f32_at(crow, n), add_dz(temp[2 * n], temp[2 * n + 1]));
    } else {                      /* the intrinsics guide: C's element takes both products of each pair, even first */
        for (int n = 0; n < cols; n++) out[n] = f32_at(crow, n);
        for (int q = 0; q < pairs; q++) {
            const uint8_t *brow = b[q];
            const float a0 = bf16_at(arow, 2 * q), a1 = bf16_at(arow, 2 * q + 1);
            for (int n = 0; n < cols; n++) {
                out[n] = fma_dz(a0, bf16_at(brow, 2 * n), out[n]);
                out[n] = fma_dz(a1, bf16_at(brow, 2 * n + 1), out[n]);
            }
        }
    }
    memset(crow, 0, 64);          /* the row written, bytes past colsb zeroed */
    memcpy(crow, out, (size_t)cols * 4);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The same instruction, fast: eight columns to a register with plain vfmadd and vaddps
 * (round to nearest even, no flushing), in the same order. This equals the plain rows bit
 * for bit unless a denormal appears somewhere: as an input, or as a result the model would
 * flush. Every such case leaves a mark: a denormal operand raises MXCSR's DE flag, a
 * denormal inexact result raises UE (and is then an operand of the next step, raising DE
 * too), and an exact denormal result is either the next step's operand (DE) or one of the
 * outputs, which are scanned. So the caller clears the flags, runs this, and on any mark
 * runs the plain rows from the saved C tile instead. Returns 1 when an output is denormal. */
#define CT_AVX2_FMA __attribute__((target("avx2,fma")))
/* R = 1 or 2 rows of C at once (two rows: eight independent chains, enough to keep both
 * FMA units busy); returns 1 when an output is denormal. */
static inline CT_AVX2_FMA __attribute__((always_inline))
int dp_rows_avx2(const int R, ct_tile_order order, uint8_t (*ct)[64], const uint8_t (*at)[64], __m256 even[16][2], __m256 odd[16][2],
                 int pairs, int cols)
{
    __m256 c[2][2], e[2][2], o[2][2];
    for (int r = 0; r < R; r++)
        for (int h = 0; h < 2; h++) { c[r][h] = _mm256_loadu_ps((const float *)ct[r] + 8 * h); e[r][h] = o[r][h] = _mm256_setzero_ps(); }
    for (int q = 0; q < pairs; q++)
        for (int r = 0; r < R; r++) {
            uint32_t w;   /* A's pair q of row r: (bf16[2q], bf16[2q+1]) */
            memcpy(&w, at[r] + 4 * q, 4);
            const __m256 a0 = _mm256_set1_ps(f32_bits(w << 16)), a1 = _mm256_set1_ps(f32_bits(w & 0xffff0000u));
            for (int h = 0; h < 2; h++) {
                if (order == CT_TILE_ORDER_SDM) {
                    e[r][h] = _mm256_fmadd_ps(a0, even[q][h], e[r][h]);
                    o[r][h] = _mm256_fmadd_ps(a1, odd[q][h], o[r][h]);
                } else
                    c[r][h] = _mm256_fmadd_ps(a1, odd[q][h], _mm256_fmadd_ps(a0, even[q][h], c[r][h]));
            }
        }
    int tiny = 0;
    for (int r = 0; r < R; r++) {
        float out[16];
        for (int h = 0; h < 2; h++)
            _mm256_storeu_ps(out + 8 * h, order == CT_TILE_ORDER_SDM ? _mm256_add_ps(c[r][h], _mm256_add_ps(e[r][h], o[r][h])) : c[r][h]);
        for (int n = 0; n < cols; n++) tiny |= out[n] != 0 && !(bits_f32(out[n]) & 0x7f800000u);
        memset(ct[r], 0, 64);
        memcpy(ct[r], out, (size_t)cols * 4);
    }
    return tiny;
}

static CT_AVX2_FMA __attribute__((noinline))
int dp_tile_avx2(ct_tile_order order, uint8_t (*ct)[64], const uint8_t (*at)[64], const uint8_t (*bt)[64], int rows, int pairs, int cols)
{
    /* B's pairs as float32, once per instruction: even[q] = bf16[2n] of row q, odd[q] = bf16[2n+1]. */
    __m256 even[16][2], odd[16][2];
    for (int q = 0; q < pairs; q++)
        for (int h = 0; h < 2; h++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)bt[q] + h);   /* word n: (bf16[2n], bf16[2n+1]) */
            even[q][h] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
            odd[q][h]  = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xffff0000u)));
        }
    int tiny = 0;
    for (int m = 0; m < rows; m += 2)
        tiny |= rows - m >= 2 ? dp_rows_avx2(2, order, ct + m, at + m, even, odd, pairs, cols)
                              : dp_rows_avx2(1, order, ct + m, at + m, even, odd, pairs, cols);
    return tiny;
}
#define MXCSR_DE   0x0002u   /* denormal operand (flag) */
#define MXCSR_UE   0x0010u   /* underflow (flag) */
#define MXCSR_DAZ  0x0040u
#define MXCSR_RC   0x6000u   /* rounding control: 00 = to nearest even */
#define MXCSR_FTZ  0x8000u
#endif

static int model_vector = -1;   /* -1: not chosen yet (the fast rows, wherever the FP32 kernels are AVX2 or wider) */

int ct_tile_model_vector(int on)
{
    const int before = model_vector;
    model_vector = on;
    return before;
}

void ct_tile_model_dpbf16ps(ct_tile_model *tm, int c, int a, int b)
{
    const ct_tile_config *g = &tm->cfg;
    CT_ASSERT(c != a && c != b && a != b);
    CT_ASSERT(g->rows[c] == g->rows[a] && g->colsb[c] == g->colsb[b] && g->colsb[a] / 4 == g->rows[b]);
    const int rows = g->rows[c], pairs = g->colsb[a] / 4, cols = g->colsb[c] / 4;
    const uint8_t (*bt)[64] = (const uint8_t (*)[64])tm->t[b];
    if (model_vector < 0) model_vector = 1;
    int done = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (model_vector && ct_kernels_get() >= CT_KERNELS_AVX2) {   /* the fast rows (AVX2, FMA) under a clean MXCSR; the plain rows again on a mark */
        uint8_t saved[16][64];
        memcpy(saved, tm->t[c], sizeof saved);
        const unsigned csr = _mm_getcsr();
        _mm_setcsr(csr & ~(MXCSR_DE | MXCSR_UE | MXCSR_DAZ | MXCSR_FTZ | MXCSR_RC));
        const int tiny = dp_tile_avx2(tm->order, tm->t[c], (const uint8_t (*)[64])tm->t[a], bt, rows, pairs, cols);
        const unsigned flags = _mm_getcsr();
        _mm_setcsr(csr);
        done = !tiny && !(flags & (MXCSR_DE | MXCSR_UE));
        if (!done) memcpy(tm->t[c], saved, sizeof saved);
    }
#endif
    if (!done)
        for (int m = 0; m < rows; m++) dp_row_scalar(tm->order, tm->t[c][m], tm->t[a][m], bt, pairs, cols);
    for (int m = rows; m < 16; m++) memset(tm->t[c][m], 0, 64);   /* rows past the configured ones zeroed */
}

/* ---- the AMX kernel, once, over the tile operations (layers/amx_tiles.h: the seam) ---- */

/* The part of C [16, 16] at (r0, c0) that exists (rows below M, columns below N) to or from
 * a full 16 x 16 buffer (zeros where C has no element). */
static void edge_in(float buf[16][16], const float *C, int ldc, int r0, int c0, int M, int N)
{
    memset(buf, 0, 16 * 16 * sizeof(float));
    for (int r = 0; r < 16 && r0 + r < M; r++)
        for (int j = 0; j < 16 && c0 + j < N; j++) buf[r][j] = C[(size_t)(r0 + r) * ldc + c0 + j];
}
static void edge_out(float *C, int ldc, float buf[16][16], int r0, int c0, int M, int N)
{
    for (int r = 0; r < 16 && r0 + r < M; r++)
        for (int j = 0; j < 16 && c0 + j < N; j++) C[(size_t)(r0 + r) * ldc + c0 + j] = buf[r][j];
}

/* C tile t <- C at (r0, c0), or zero; and back. Whole tiles go straight to and from C. */
#define C_TILE_IN(t, r0, c0) do {                                                                   \
        if (!acc) T_ZERO(t);                                                                      \
        else if ((r0) + 16 <= M && (c0) + 16 <= N) T_LOAD(t, C + (size_t)(r0) * ldc + (c0), cstride); \
        else { edge_in(edge[t], C, ldc, r0, c0, M, N); T_LOAD(t, edge[t], 64); }                  \
    } while (0)
#define C_TILE_OUT(t, r0, c0) do {                                                                  \
        if ((r0) + 16 <= M && (c0) + 16 <= N) T_STORE(t, C + (size_t)(r0) * ldc + (c0), cstride); \
        else if ((r0) < M && (c0) < N) { T_STORE(t, edge[t], 64); edge_out(C, ldc, edge[t], r0, c0, M, N); } \
    } while (0)

/* C [M, N] (+)= A B: ap packed A [Mp][Kp], bp packed B [P][Kp/2][16][2] (gemm_bf16.h). */
static inline __attribute__((always_inline))
void amx_blocks(const int REAL, ct_tile_model *tm, int M, int N, int K, const uint16_t *ap, const uint16_t *bp, float *C,
                int ldc, int acc)
{
    const int Kp = round_up(K, KB), Mp = round_up(M, MB), Np = round_up(N, 2 * NB);
    const size_t astride = (size_t)Kp * 2, cstride = (size_t)ldc * 4;   /* bytes from row to row */
    const size_t panel = (size_t)(Kp / 2) * NB * 2;                     /* elements of one packed panel */
    float edge[4][16][16];                                              /* C tiles at the edges of C */
    for (int n0 = 0; n0 < Np; n0 += 2 * NB) {           /* two panels: 32 columns of C */
        const uint16_t *b0 = bp + (size_t)(n0 / NB) * panel, *b1 = b0 + panel;
        const int right = n0 + 16 < N;                  /* columns n0+16 .. n0+31 hold some of C */
        for (int i0 = 0; i0 < Mp; i0 += MB) {           /* 32 rows of C */
            const uint16_t *a0 = ap + (size_t)i0 * Kp, *a1 = a0 + (size_t)16 * Kp;
            const int lower = i0 + 16 < M;              /* rows i0+16 .. i0+31 hold some of C */
            /* a tile wholly outside C (a product of 16 rows or fewer, an edge) is not computed: its
             * elements would be thrown away, and the others do not depend on it */
            C_TILE_IN(0, i0, n0);
            if (right) C_TILE_IN(1, i0, n0 + 16);
            if (lower) C_TILE_IN(2, i0 + 16, n0);
            if (lower && right) C_TILE_IN(3, i0 + 16, n0 + 16);
            for (int kb = 0; kb < Kp / KB; kb++) {
                T_LOAD(4, a0 + (size_t)kb * KB, astride);                 /* A rows i0 .. i0+15, k 32kb .. 32kb+31 */
                if (lower) T_LOAD(5, a1 + (size_t)kb * KB, astride);      /* A rows i0+16 .. i0+31 */
                T_LOAD(6, b0 + (size_t)kb * (KB / 2) * NB * 2, 64);       /* B pairs 16kb .. 16kb+15, columns n0 .. n0+15 */
                if (right) T_LOAD(7, b1 + (size_t)kb * (KB / 2) * NB * 2, 64);   /* columns n0+16 .. n0+31 */
                T_DP(0, 4, 6);
                if (right) T_DP(1, 4, 7);
                if (lower) T_DP(2, 5, 6);
                if (lower && right) T_DP(3, 5, 7);
            }
            C_TILE_OUT(0, i0, n0);
            if (right) C_TILE_OUT(1, i0, n0 + 16);
            if (lower) C_TILE_OUT(2, i0 + 16, n0);
            if (lower && right) C_TILE_OUT(3, i0 + 16, n0 + 16);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The real tiles: configure, run, release (the next LDTILECFG or a thread switch finds them free). */
static __attribute__((target("amx-tile,amx-bf16"), noinline))
void amx_tiles(int M, int N, int K, const uint16_t *ap, const uint16_t *bp, float *C, int ldc, int acc)
{
    AMX_LDTILECFG(&CT_TILES_16x64);
    amx_blocks(1, NULL, M, N, K, ap, bp, C, ldc, acc);
    AMX_TILERELEASE();
}
#endif

/* The same code over the model. */
static __attribute__((noinline))
void amx_model(int M, int N, int K, const uint16_t *ap, const uint16_t *bp, float *C, int ldc, int acc)
{
    ct_tile_model tm;
    CT_ASSERT(ct_tile_model_config(&tm, &CT_TILES_16x64) == CT_OK);
    amx_blocks(0, &tm, M, N, K, ap, bp, C, ldc, acc);
}

/* ---- the AVX512-BF16 kernel ----
 * gemm_packed's register blocking with vdpbf16ps for the FMA: 6 rows by 4 panels (64
 * columns) of C in 24 registers; per pair q of k, four loads of the panels' row q (16
 * columns x 2 bf16 each), one 32-bit broadcast of A's pair (A[i, 2q], A[i, 2q+1]) per row,
 * four vdpbf16ps per row. vdpbf16ps adds, per lane, the odd product then the even one to
 * the float32 (SDM: each an FMA, DAZ, FTZ, round to nearest even): one chain per element
 * over all pairs in order, bound (1) of gemm_bf16.h. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CT_AVX512BF16 __attribute__((target("avx512f,avx512bf16")))
#define MR 6
#define NV 4

static inline __attribute__((always_inline)) CT_AVX512BF16
void bf16_tile(const int MROWS, int pairs, const uint16_t *restrict a, size_t Kp, const uint16_t *restrict b, size_t panel,
               const __mmask16 *pm, const __mmask16 *m, float *restrict C, int ldc, int acc)
{
    __m512 c[MR][NV];
#pragma GCC unroll 6
    for (int i = 0; i < MROWS; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[i][v] = acc ? _mm512_maskz_loadu_ps(m[v], C + (size_t)i * ldc + 16 * v) : _mm512_setzero_ps();
    for (int q = 0; q < pairs; q++) {
        __m512i bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)   /* a panel past the packed ones (pm[v] = 0) reads nothing */
            bv[v] = _mm512_maskz_loadu_epi32(pm[v], b + (pm[v] ? (size_t)v * panel : 0) + (size_t)q * NB * 2);
#pragma GCC unroll 6
        for (int i = 0; i < MROWS; i++) {
            int32_t pair;
            memcpy(&pair, a + (size_t)i * Kp + 2 * q, sizeof pair);
            const __m512i av = _mm512_set1_epi32(pair);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) c[i][v] = _mm512_dpbf16_ps(c[i][v], (__m512bh)av, (__m512bh)bv[v]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MROWS; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(C + (size_t)i * ldc + 16 * v, m[v], c[i][v]);
}

static CT_AVX512BF16 __attribute__((noinline))
void gemm_avx512bf16(int M, int N, int K, const uint16_t *ap, const uint16_t *bp, float *C, int ldc, int acc)
{
    const int Kp = round_up(K, KB), P = round_up(N, 2 * NB) / NB, pairs = (K + 1) / 2;
    const size_t panel = (size_t)(Kp / 2) * NB * 2;
    for (int p0 = 0; p0 < P; p0 += NV) {            /* 4 panels: 64 columns of C */
        __mmask16 pm[NV], m[NV];
        for (int v = 0; v < NV; v++) {
            const int have = N - (p0 + v) * NB;     /* columns of panel p0 + v that exist in C */
            pm[v] = p0 + v < P ? (__mmask16)0xFFFF : 0;
            m[v] = have >= 16 ? (__mmask16)0xFFFF : have > 0 ? (__mmask16)((1u << have) - 1) : 0;
        }
        const uint16_t *b = bp + (size_t)p0 * panel;
        float *Cp = C + (size_t)p0 * NB;
        int i = 0;
        for (; i + MR <= M; i += MR) bf16_tile(MR, pairs, ap + (size_t)i * Kp, Kp, b, panel, pm, m, Cp + (size_t)i * ldc, ldc, acc);
        switch (M - i) {   /* the rows that do not fill a whole tile, one instance per count */
#define CASE(r) case r: bf16_tile(r, pairs, ap + (size_t)i * Kp, Kp, b, panel, pm, m, Cp + (size_t)i * ldc, ldc, acc); break;
        CASE(1) CASE(2) CASE(3) CASE(4) CASE(5)
#undef CASE
        default: break;
        }
    }
}
#endif

/* ---- the bf16 peak: the product instructions alone ----
 * As core/peak.h measures the FMA peak: each worker runs independent chains of the
 * instruction on data already in registers (tiles), nothing loaded or stored inside the
 * loop. AMX: four accumulating tiles, four TDPBF16PS per round (each 16 x 16 x 32
 * multiply-adds: 16,384 FLOPs). AVX512-BF16: twelve independent vdpbf16ps chains per round
 * (each 16 lanes x 2 products: 64 FLOPs), enough to cover the instruction's latency. */
#if defined(__x86_64__) && defined(__GNUC__)
static __attribute__((target("amx-tile,amx-bf16"), noinline))
double amx_peak_rounds(long rounds)
{
    static const uint16_t ones[16 * 32] __attribute__((aligned(64))) = { 0 };   /* zeros: the rate does not depend on the values */
    AMX_LDTILECFG(&CT_TILES_16x64);
    AMX_TILEZERO(0); AMX_TILEZERO(1); AMX_TILEZERO(2); AMX_TILEZERO(3);
    AMX_TILELOADD(4, ones, 64); AMX_TILELOADD(5, ones, 64); AMX_TILELOADD(6, ones, 64); AMX_TILELOADD(7, ones, 64);
    const double t0 = ct_now();
    for (long r = 0; r < rounds; r++) {
        AMX_TDPBF16PS(0, 4, 6); AMX_TDPBF16PS(1, 4, 7);
        AMX_TDPBF16PS(2, 5, 6); AMX_TDPBF16PS(3, 5, 7);
    }
    const double t = ct_now() - t0;
    AMX_TILERELEASE();
    return t;
}

static CT_AVX512BF16 __attribute__((noinline))
double avx512bf16_peak_rounds(long rounds)
{
    __m512 c[12];
    for (int i = 0; i < 12; i++) c[i] = _mm512_setzero_ps();
    const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x3f803f80);   /* pairs of 1.0 */
    const double t0 = ct_now();
    for (long r = 0; r < rounds; r++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) c[i] = _mm512_dpbf16_ps(c[i], a, b);
    const double t = ct_now() - t0;
    float sink = 0;
    for (int i = 0; i < 12; i++) sink += _mm512_reduce_add_ps(c[i]);
    __asm__ volatile("" ::"x"(sink));   /* the chains are used */
    return t;
}
#endif

typedef struct { ct_bf16_kernels k; long rounds; double seconds[CT_MAX_WORKERS]; } bf16_peak_job;

static void bf16_peak_worker(void *ctx, int task, int worker)
{
    bf16_peak_job *j = ctx;
    (void)worker;
#if defined(__x86_64__) && defined(__GNUC__)
    j->seconds[task] = j->k == CT_BF16_AMX ? amx_peak_rounds(j->rounds) : avx512bf16_peak_rounds(j->rounds);
#else
    j->seconds[task] = 1;
#endif
}

ct_status ct_bf16_peak(int threads, double *gflops, char *what, size_t cap)
{
    *gflops = 0;
    const ct_bf16_kernels k = ct_kernels_bf16();
    if (k == CT_BF16_MODEL) {
        snprintf(what, cap, "no bf16 peak: the products run on the C model of the tiles (CTRAIN_BF16_MODEL), not on hardware");
        return CT_OK;
    }
    CT_TRY(ct_bf16_check());
    if (threads < 1) threads = 1;
    if (threads > CT_MAX_WORKERS) threads = CT_MAX_WORKERS;
    const double per_round = k == CT_BF16_AMX ? 4.0 * 16 * 16 * 32 * 2 : 12.0 * 16 * 2 * 2;   /* FLOPs */
    bf16_peak_job j = { .k = k, .rounds = k == CT_BF16_AMX ? 200000 : 2000000 };
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        ct_parallel(threads, threads, bf16_peak_worker, &j);
        double slowest = 0;
        for (int t = 0; t < threads; t++) if (j.seconds[t] > slowest) slowest = j.seconds[t];
        const double rate = slowest > 0 ? per_round * (double)j.rounds * threads / slowest / 1e9 : 0;
        if (rate > best) best = rate;
    }
    *gflops = best;
    snprintf(what, cap, "%s loop (%s), %d thread%s, best of 5", k == CT_BF16_AMX ? "AMX TDPBF16PS" : "vdpbf16ps",
             ct_bf16_kernels_name(k), threads, threads == 1 ? "" : "s");
    return CT_OK;
}

/* ---- AVX512-BF16 without AMX: where it pays ----
 * See gemm_bf16.h (CT_BF16_AVX512_MIN_RATIO). Both loops run on the calling thread, alternately,
 * about a millisecond each, after one warm-up run of each (the first 512-bit instructions after
 * a pause run slower while the core powers its vector units up); the best of the repeats of each,
 * as ct_bf16_peak and core/peak.h take theirs. */
enum { RATE_REPEATS = 7, BF16_RATE_ROUNDS = 150000, FMA_RATE_ITERS = 600000 };

ct_status ct_bf16_avx512_rates(double *bf16_gflops, double *fma_gflops)
{
    *bf16_gflops = *fma_gflops = 0;
    if (ct_kernels_cpu_all() < CT_KERNELS_AVX512BF16)
        return ct_fail(CT_ENODEV, "the vdpbf16ps rate: this CPU has no AVX512-BF16 (its widest are %s)", ct_kernels_name(ct_kernels_cpu_all()));
#if defined(__x86_64__) && defined(__GNUC__)
    const ct_fma_isa isa = ct_fma_isa_best();
    const double bf16_flops = 12.0 * 16 * 2 * 2 * BF16_RATE_ROUNDS;                                      /* avx512bf16_peak_rounds */
    const double fma_flops = 2.0 * ct_fma_isa_lanes(isa) * ct_fma_isa_accs(isa) * (double)FMA_RATE_ITERS;   /* ct_fma_kernel_run */
    float out[CT_FMA_MAX_OUT];
    for (int rep = -1; rep < RATE_REPEATS; rep++) {   /* rep -1: the warm-up */
        const double tb = avx512bf16_peak_rounds(BF16_RATE_ROUNDS);
        const double t0 = ct_now();
        ct_fma_kernel_run(isa, FMA_RATE_ITERS, 0.999f, 1e-3f, 0.5f, out);
        const double tf = ct_now() - t0;
        if (rep < 0) continue;
        if (tb > 0 && bf16_flops / tb / 1e9 > *bf16_gflops) *bf16_gflops = bf16_flops / tb / 1e9;
        if (tf > 0 && fma_flops / tf / 1e9 > *fma_gflops) *fma_gflops = fma_flops / tf / 1e9;
    }
    __asm__ volatile("" ::"m"(out));   /* the FMA chains are used */
#endif
    if (!(*bf16_gflops > 0 && *fma_gflops > 0))
        return ct_fail(CT_ENUMERIC, "the vdpbf16ps and FMA rates: the timed loops gave %g and %g GFLOP/s (is the clock broken?)",
                       *bf16_gflops, *fma_gflops);
    return CT_OK;
}

static double rates_set[2];            /* the tests' rates (ct_bf16_avx512_rates_set); 0: measured */
static double rates_measured[2];       /* measured once, the first time a default AVX512-BF16 chain is asked */
static pthread_once_t rates_once = PTHREAD_ONCE_INIT;

static void measure_rates(void)
{
    if (ct_bf16_avx512_rates(&rates_measured[0], &rates_measured[1]) != CT_OK) rates_measured[0] = rates_measured[1] = 0;
}

void ct_bf16_avx512_rates_set(double bf16_gflops, double fma_gflops)
{
    rates_set[0] = bf16_gflops > 0 && fma_gflops > 0 ? bf16_gflops : 0;
    rates_set[1] = bf16_gflops > 0 && fma_gflops > 0 ? fma_gflops : 0;
}

void ct_bf16_avx512_rates_used(double *bf16_gflops, double *fma_gflops)
{
    if (rates_set[0] > 0) { *bf16_gflops = rates_set[0]; *fma_gflops = rates_set[1]; return; }
    pthread_once(&rates_once, measure_rates);
    *bf16_gflops = rates_measured[0];
    *fma_gflops = rates_measured[1];
}

/* Whether the chain in use is AVX512-BF16 by default (not chosen), and there it does not pay. */
static int avx512_refused(double *bf16_gflops, double *fma_gflops)
{
    *bf16_gflops = *fma_gflops = 0;
    if (ct_kernels_get_all() != CT_KERNELS_AVX512BF16 || ct_kernels_chosen()) return 0;
    ct_bf16_avx512_rates_used(bf16_gflops, fma_gflops);
    return !(*fma_gflops > 0 && *bf16_gflops / *fma_gflops >= CT_BF16_AVX512_MIN_RATIO);
}

/* ---- dispatch ---- */

static const char *const BF16_NAMES[] = { "none", "C model of the AMX tiles", "AVX512-BF16", "AMX-BF16" };

const char *ct_bf16_kernels_name(ct_bf16_kernels k) { return k >= CT_BF16_NONE && k <= CT_BF16_AMX ? BF16_NAMES[k] : "?"; }

static int use_model = -1;   /* -1: CTRAIN_BF16_MODEL not read yet */

void ct_gemm_bf16_use_model(int on) { use_model = on != 0; }

ct_bf16_kernels ct_kernels_bf16(void)
{
    if (use_model < 0) {
        const char *e = getenv("CTRAIN_BF16_MODEL");
        use_model = e && !strcmp(e, "1");
    }
    if (use_model) return CT_BF16_MODEL;
    const ct_kernels k = ct_kernels_get_all();
    double b, f;
    return k == CT_KERNELS_AMX ? CT_BF16_AMX : k == CT_KERNELS_AVX512BF16 && !avx512_refused(&b, &f) ? CT_BF16_AVX512BF16 : CT_BF16_NONE;
}

ct_status ct_bf16_check(void)
{
    if (ct_kernels_bf16() != CT_BF16_NONE) return CT_OK;
    const ct_kernels cpu = ct_kernels_cpu_all(), use = ct_kernels_get_all();
    double b, f;
    if (avx512_refused(&b, &f)) {
        const char *amx = ct_kernels_amx_refusal();
        return ct_fail(CT_ENODEV, "bf16 products here would run on AVX512-BF16 (VDPBF16PS), which this CPU multiplies at %.2fx the rate "
                       "of its float32 FMA (%.0f against %.0f GFLOP/s on one core, measured by this process), and bf16 training beats float32 on it only "
                       "from %.2fx (docs/precision.md); it has no AMX-BF16%s%s: use float32 (--precision fp32), or set "
                       "CTRAIN_CPU_KERNELS=avx512bf16 to train in bf16 on it all the same",
                       f > 0 ? b / f : 0.0, b, f, CT_BF16_AVX512_MIN_RATIO, amx[0] ? " tiles here: " : "", amx);
    }
    if (cpu >= CT_KERNELS_AVX512BF16)
        return ct_fail(CT_ENODEV, "bf16 products need AMX-BF16 or AVX512-BF16, which this CPU has (%s) but the kernels in use "
                       "(%s: CTRAIN_CPU_KERNELS or ct_kernels_set) leave out: unset CTRAIN_CPU_KERNELS or choose amx or avx512bf16, or use float32 (--precision fp32)",
                       ct_kernels_name(cpu), ct_kernels_name(use));
    const char *amx = ct_kernels_amx_refusal();
    return ct_fail(CT_ENODEV, "bf16 products need AMX-BF16 (TDPBF16PS) or AVX512-BF16 (VDPBF16PS), and this CPU has neither "
                   "(its widest are %s%s%s): use float32 (--precision fp32)", ct_kernels_name(cpu), amx[0] ? "; " : "", amx);
}

/* The product of packed operands on a named implementation. */
static void packed_on(ct_bf16_kernels which, int M, int N, int K, const uint16_t *work, const uint16_t *bp, float *C, int ldc,
                      int accumulate)
{
    switch (which) {
    case CT_BF16_MODEL: amx_model(M, N, K, work, bp, C, ldc, accumulate); return;
#if defined(__x86_64__) && defined(__GNUC__)
    case CT_BF16_AMX:
        CT_ASSERT(ct_kernels_cpu_all() >= CT_KERNELS_AMX);
        amx_tiles(M, N, K, work, bp, C, ldc, accumulate);
        return;
    case CT_BF16_AVX512BF16:
        CT_ASSERT(ct_kernels_cpu_all() >= CT_KERNELS_AVX512BF16);
        gemm_avx512bf16(M, N, K, work, bp, C, ldc, accumulate);
        return;
#endif
    default: CT_ASSERT(!"a bf16 kernel this CPU runs (ct_bf16_check)");
    }
}

typedef struct {
    ct_bf16_kernels which;
    int M, N, K, ldc, acc, row_blocks;
    const uint16_t *ap, *bp;
    float *C;
} product_job;

/* Blocks [lo, hi) of C, numbered column block by column block (a block of B's panels stays in
 * cache while the rows go by, as in the kernels' own loop order); the row blocks that follow
 * one another in one column block are one call. */
static void product_blocks(void *ctx, size_t lo, size_t hi)
{
    const product_job *j = ctx;
    const size_t Kp = (size_t)round_up(j->K, KB);
    for (size_t t = lo; t < hi;) {
        const int cb = (int)(t / (size_t)j->row_blocks), rb0 = (int)(t % (size_t)j->row_blocks);
        const size_t end = (size_t)(cb + 1) * (size_t)j->row_blocks < hi ? (size_t)(cb + 1) * (size_t)j->row_blocks : hi;
        const int rb1 = rb0 + (int)(end - t);
        const int n0 = cb * SPLIT_COLS, n1 = n0 + SPLIT_COLS < j->N ? n0 + SPLIT_COLS : j->N;
        const int r0 = rb0 * MB, r1 = rb1 * MB < j->M ? rb1 * MB : j->M;
        packed_on(j->which, r1 - r0, n1 - n0, j->K, j->ap + (size_t)r0 * Kp, j->bp + (size_t)(n0 / NB) * panel_elems(j->K),
                  j->C + (size_t)r0 * j->ldc + n0, j->ldc, j->acc);
        t = end;
    }
}

static void products(ct_bf16_kernels which, int M, int N, int K, const uint16_t *ap, const uint16_t *bp, float *C, int ldc,
                     int accumulate)
{
    if (2.0 * M * N * K < CT_SGEMM_SPLIT_FLOPS) { packed_on(which, M, N, K, ap, bp, C, ldc, accumulate); return; }
    product_job j = { which, M, N, K, ldc, accumulate, round_up(M, MB) / MB, ap, bp, C };
    const size_t blocks = (size_t)j.row_blocks * (size_t)((N + SPLIT_COLS - 1) / SPLIT_COLS);
    ct_parallel_range(blocks, (size_t)M * N * K, product_blocks, &j);
}

void ct_gemm_bf16_on(ct_bf16_kernels which, int M, int N, int K, const float *A, int lda, int trans_a, const uint16_t *bp,
                     uint16_t *work, float *C, int ldc, int accumulate)
{
    CT_ASSERT(K >= 1 && bp && work && C);
    if (M < 1 || N < 1) return;
    ct_gemm_bf16_pack_a(work, A, lda, trans_a, M, K);
    products(which, M, N, K, work, bp, C, ldc, accumulate);
}

void ct_gemm_bf16_packed(int M, int N, int K, const uint16_t *ap, const uint16_t *bp, float *C, int ldc, int accumulate)
{
    const ct_bf16_kernels k = ct_kernels_bf16();
    CT_ASSERT(k != CT_BF16_NONE && K >= 1 && ap && bp && C);
    if (M < 1 || N < 1) return;
    products(k, M, N, K, ap, bp, C, ldc, accumulate);
}

void ct_gemm_bf16(int M, int N, int K, const float *A, int lda, int trans_a, const uint16_t *bp, uint16_t *work, float *C,
                  int ldc, int accumulate)
{
    const ct_bf16_kernels k = ct_kernels_bf16();
    CT_ASSERT(k != CT_BF16_NONE);
    ct_gemm_bf16_on(k, M, N, K, A, lda, trans_a, bp, work, C, ldc, accumulate);
}
