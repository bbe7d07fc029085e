/* gemm_bf16.h - C (+)= A op(B) with bfloat16 operands and float32 accumulation: the
 * matrix products of mixed-precision training (Micikevicius et al. 2018; Kalamkar et
 * al. 2019 for bfloat16), beside the float32 kernel of layers/gemm_packed.h.
 *
 * The master weights, their gradients and the optimizer state stay float32. Only the
 * operands of the products are rounded to bf16 (core/bf16.h: to nearest, ties to even),
 * and every sum is accumulated in float32. B (the weights) is rounded once, when it is
 * packed; A (the activations) is rounded as it is packed into tile rows, at every call.
 *
 * ---- Three implementations behind one dispatch ----
 *   AMX-BF16   the tiles of Xeon 4th/5th generation (Sapphire/Emerald Rapids): TDPBF16PS
 *              multiplies a 16 x 32 bf16 tile of A by a 32 x 16 one of B into a 16 x 16
 *              float32 tile of C, 16 x 16 x 32 = 8192 multiply-adds per instruction.
 *   AVX512-BF16  vdpbf16ps (Cooper Lake, Zen 4 and later): per 32-bit lane, two bf16
 *              products added to a float32, 32 multiply-adds per instruction (twice
 *              an FMA's 16) on the same register blocking as gemm_packed's kernel.
 *   the model  the tile machine written in plain C from the instructions' documented
 *              semantics (below). It runs anywhere, and only when named
 *              (ct_gemm_bf16_on(CT_BF16_MODEL, ...)): the tests run the AMX kernel's own
 *              packing, tile shapes, tails and loop order through it on CPUs without AMX.
 * The AMX kernel is ONE function body over five tile operations (TILELOADD, TILEZERO,
 * TDPBF16PS, TILESTORED, and the configuration around them); a compile-time switch at its
 * two call sites makes each operation either the instruction itself (inline assembly,
 * in a function compiled with target("amx-tile,amx-bf16")) or the model's C function.
 * Everything else - what is loaded from where, in what order, with which tails - is the
 * same code in both. (layers/amx_tiles.h holds the instructions and that seam, shared with
 * the LSTM's fused bf16 step, layers/lstm_bf16.h.)
 *
 * ---- Layouts ----
 * Tiles (palette 1): all eight configured 16 rows x 64 bytes.
 *   C tile   16 x 16 float32               tmm0..tmm3: a 2 x 2 block of C tiles, 32 x 32
 *   A tile   16 rows x 32 bf16 = 16 pairs  tmm4, tmm5: the block's two row tiles
 *   B tile   16 pair-rows x 16 columns x 2 tmm6, tmm7: the block's two column tiles
 * TDPBF16PS reads each 32-bit element of A and of B as a PAIR of bf16: A's row m, pair q
 * holds A[m, 2q] and A[m, 2q+1]; B's row q, element n holds B[2q, n] and B[2q+1, n]. A row
 * of A in bf16 is already pairs (consecutive k), so packed A is plain row-major bf16. B
 * must be stored with pairs of k interleaved ("VNNI-2"):
 *   packed op(B): [P][Kp/2][16][2]   P = 2 ceil(N/32) panels of 16 columns, Kp = K rounded
 *                 up to 32; element (p, q, j, h) = bf16(op(B)[2q + h, 16p + j]), zero
 *                 past K and past N
 *   packed A (the caller's work buffer): [Mp][Kp] bf16, Mp = M rounded up to 32, zero
 *                 past M and past K
 * So one B tile (panel p, k-block kb) is the contiguous kilobyte at bp + (p Kp/2 + 16 kb)
 * x 32 elements (row stride 64 bytes), and one A tile is 16 rows of 64 bytes at stride
 * Kp x 2 bytes. The padding (K to 32, M and N to 32) lets every tile be full-sized with
 * one configuration: the padded zeros add exact zeros. The AVX512-BF16 kernel reads the
 * same packed B (a 16-column panel row is one 512-bit register: 16 pairs) and the same
 * packed A (one 32-bit pair broadcast per row), and stops at pair ceil(K/2).
 *
 * Loop order (AMX): for each pair of panels (32 columns of C, kept in cache), for each
 * 32 rows: the four C tiles loaded (accumulate: from C, or through a zero-padded 16 x 16
 * buffer at the edges of C) or zeroed; for kb = 0 .. Kp/32-1: load A(rows, kb) x 2,
 * B(kb, panels) x 2, four TDPBF16PS; store the four tiles (at the edges, through the
 * buffer, only the elements that exist). A tile that holds no element of C (rows past M,
 * columns past N: a product of 16 rows or fewer) is neither loaded, computed nor stored.
 * Each element of C sees its k-blocks in order.
 *
 * ---- What TDPBF16PS computes (the model) ----
 * Intel SDM, TDPBF16PS, "Operation": per row m of C, a temporary of TWO float32 per
 * element, temp[2n] and temp[2n+1], starts at +0; for each pair q of the tile (16 of
 * them), for each column n:
 *     temp[2n]   = fma(A[m].bf16[2q],   B[q].bf16[2n],   temp[2n])
 *     temp[2n+1] = fma(A[m].bf16[2q+1], B[q].bf16[2n+1], temp[2n+1])
 * (fused: one rounding), then per column  C[m][n] = C[m][n] + (temp[2n] + temp[2n+1]).
 * Every operation rounds to nearest even, treats denormal inputs as zero (DAZ: bf16 and
 * float32 alike) and flushes denormal results to zero (FTZ); MXCSR is neither read nor
 * written. The model does exactly that with fmaf (correctly rounded) and explicit
 * flushes: a result is flushed when, rounded, it is below 2^-126 in magnitude (tininess
 * after rounding, on the subnormal grid: the one point the SDM leaves open). NaN payloads
 * are not modelled (a NaN gives some NaN). Intel's intrinsics guide describes
 * _tile_dpbf16ps differently: C's element itself accumulates both products of each pair,
 * even then odd, without the two temporaries. The model can follow that description
 * too (ct_gemm_bf16_model_order), so that a machine with AMX can tell which the hardware
 * does; the SDM's is the default.
 *
 * ---- Error bounds, derived ----
 * Let a^ = bf16(a), b^ = bf16(b), u = 2^-24 (float32's unit roundoff), gamma_n = n u /
 * (1 - n u), and assume no value in the range where DAZ/FTZ act (|x| < 2^-126, nonzero)
 * and no overflow.
 * (1) Against the float32 product of the SAME rounded operands. A product a^ b^ of two
 *     bf16 (8 significant bits each) has at most 16 significant bits: exact in float32
 *     (24), so fma and mul+add agree on it and the products carry no error. Each element
 *     of C is then a sum of n = K terms (K + 1 when accumulating: C's old value is one
 *     more), formed by SOME binary tree of float32 additions: the two temporaries, their
 *     sum, the addition to C, block after block (AMX), or one chain (vdpbf16ps). Every
 *     addition rounds once, |relative error| <= u, and adding the padded zeros is exact.
 *     A term passes through at most n - 1 additions, so (Higham, Accuracy and Stability
 *     of Numerical Algorithms, 2nd ed., section 4.2, for any order of summation)
 *         |c - sum_k a^_ik b^_kj| <= gamma_K (sum_k |a^_ik| |b^_kj| + |c_old|)
 *     (c_old = 0 when overwriting). The tests check this for every element, against a
 *     reference summed in double (whose own error, gamma_K in 2^-53, is added).
 * (2) Against the float32 operands themselves. Rounding to bf16 errs by at most 2^-8
 *     relative (core/bf16.h: 8 significant bits, half a unit in the last place): a^ =
 *     a (1 + d), b^ = b (1 + e), |d|, |e| <= 2^-8, so a^ b^ = a b (1 + d + e + d e),
 *     |d + e + d e| <= 2^-7 + 2^-16, and |a^| |b^| <= (1 + 2^-8)^2 |a| |b|. With (1):
 *         |c - sum_k a_ik b_kj| <= (2^-7 + 2^-16 + gamma_K (1 + 2^-8)^2) sum_k |a_ik| |b_kj|
 *                                  + gamma_K |c_old|
 *     For K = 512 that is about 7.9e-3 of sum |a||b|: rounding the operands (7.8e-3),
 *     not the float32 accumulation (3.1e-5), is what bf16 costs. (With 2^-9 per operand,
 *     half of this, the bound fails: the tests see errors of 1.4 times it at K = 1.)
 *
 * ---- Verified where ----
 * Here, on a Zen 3 (AVX2, FMA; no AVX-512, no AMX), by tests/test_bf16.c: the
 * conversions (every bf16 widened; 852k float bit patterns around every bf16 narrowed,
 * scalar and AVX2, against rounding by distances); the tile model, one TDPBF16PS at a
 * time, against a plain loop of the SDM's order (bit for bit), with DAZ, FTZ and a case
 * where the two documented orders differ; the AMX kernel's packing, tiles, tails and loop
 * order run through the model, against a plain loop of the same order over the whole
 * product (bit for bit) and against bounds (1) and (2) (largest error 0.93 of either
 * bound: they are nearly reached); the dispatch and the refusal. On Intel Xeons with AMX-BF16
 * and AVX512-BF16 (bench/RESULTS.md), the same suite runs the real tiles against the model
 * (bit for bit, every tail, and within the bounds) and the AVX512-BF16 kernel against the
 * bounds; where the CPU lacks them those cases skip with the reason. Their speed is in
 * bench/RESULTS.md (no AMD Zen 4/5 has run the AVX512-BF16 kernel yet).
 */
#ifndef CT_GEMM_BF16_H
#define CT_GEMM_BF16_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

#define CT_BF16_KB 32   /* k per tile: 16 pairs of bf16 in a 64-byte tile row */
#define CT_BF16_NB 16   /* columns per packed panel: one B tile */
#define CT_BF16_MB 32   /* rows per block: two A tiles */

/* What a bf16 product runs on. */
typedef enum {
    CT_BF16_NONE = 0,        /* refused: neither AMX-BF16 nor AVX512-BF16 (ct_bf16_check says which is missing) */
    CT_BF16_MODEL = 1,       /* the C model of the tiles: only when named, for the tests */
    CT_BF16_AVX512BF16 = 2,  /* vdpbf16ps */
    CT_BF16_AMX = 3          /* the tiles */
} ct_bf16_kernels;

/* What ct_gemm_bf16 runs on with the kernels in use (layers/gemm_packed.h's chain, which
 * CTRAIN_CPU_KERNELS or ct_kernels_set can cut short): CT_BF16_AMX, CT_BF16_AVX512BF16 (by
 * default only where it pays: CT_BF16_AVX512_MIN_RATIO below) or CT_BF16_NONE; CT_BF16_MODEL
 * only when asked for (ct_gemm_bf16_use_model). */
ct_bf16_kernels ct_kernels_bf16(void);
/* Runs every bf16 product on the C model of the tiles, on any CPU (on = 1), or on the CPU's
 * own kernels again (on = 0). The model computes what the tiles compute, bit for bit, many
 * times slower (a small LSTM's training step: 10x the float32 kernels on a Zen 3). It exists
 * so that bf16 training - the LSTM, conv2d and dense in bf16, the option, checkpoints - is
 * tested on CPUs without AMX. The first call of
 * ct_kernels_bf16 reads CTRAIN_BF16_MODEL=1 from the environment (the command-line tests). */
void ct_gemm_bf16_use_model(int on);
/* "AMX-BF16", "AVX512-BF16", "C model of the AMX tiles" or "none". */
const char     *ct_bf16_kernels_name(ct_bf16_kernels k);
/* CT_OK when ct_kernels_bf16() is not CT_BF16_NONE; else CT_ENODEV with one line naming
 * the missing instruction sets (and whether the CPU lacks them or CTRAIN_CPU_KERNELS /
 * ct_kernels_set left them out), or, on AVX512-BF16 without AMX where it does not pay, the
 * two rates measured and how to run it all the same. Callers that offer bf16 ask this first. */
ct_status       ct_bf16_check(void);

/* ---- AVX512-BF16 without AMX: where it pays ----
 * Without AMX, bf16 products run on vdpbf16ps, and bf16 training beats float32 only where
 * that instruction multiplies well ahead of the float32 FMA: the rest of a bf16 step (rounding
 * and packing the operands, the LSTM cell, pooling, ...) costs what it costs in float32 or
 * more. Let r be vdpbf16ps's FLOP rate over the FMA's (ct_bf16_avx512_rates), q a bf16 run's
 * time over float32's and p the share of the bf16 run in the vdpbf16ps kernel, all measured at
 * one r0. A CPU whose ratio is r runs those products r0 / r times as long and the rest as
 * long, so bf16 equals float32 at
 *     r* = r0 p q / (1 - (1 - p) q).
 * The AMX Xeon of bench/RESULTS.md playing a CPU without AMX ("Where bf16 on AVX512-BF16 alone
 * pays"): r0 = 0.52, p = 0.78 and 0.68, q = 1.60-1.66 and 1.59-1.65 (siamese LSTM, mnist_cnn),
 * so r* = 1.00-1.06 and 1.15-1.24. The threshold is the largest, rounded up: by default bf16
 * runs on AVX512-BF16 only where r, measured once per process on one core (about 20 ms, the
 * first time bf16 is asked for), is at least CT_BF16_AVX512_MIN_RATIO; elsewhere
 * ct_bf16_check refuses, saying so. CTRAIN_CPU_KERNELS=avx512bf16 (or ct_kernels_set) runs it
 * wherever the CPU has it. */
#define CT_BF16_AVX512_MIN_RATIO 1.25
/* GFLOP/s of independent vdpbf16ps chains and of the FMA peak's loop (core/peak.h), on the
 * calling thread, best of 7 each; CT_ENODEV on a CPU without AVX512-BF16. */
ct_status ct_bf16_avx512_rates(double *bf16_gflops, double *fma_gflops);
/* The rates the dispatch goes by: this CPU's, measured by the first call (ct_bf16_avx512_rates;
 * 0 and 0 where that failed), or the tests' (ct_bf16_avx512_rates_set). */
void      ct_bf16_avx512_rates_used(double *bf16_gflops, double *fma_gflops);
/* The tests: the dispatch goes by these rates instead of measured ones (0, 0: the measured ones again). */
void      ct_bf16_avx512_rates_set(double bf16_gflops, double fma_gflops);

/* The bf16 peak of this CPU: GFLOP/s of the product instruction alone (AMX TDPBF16PS on
 * tiles already loaded, or independent vdpbf16ps chains), on `threads` workers, best of 5,
 * as core/peak.h measures the FP32 FMA peak; `what` says how. On the C model: 0 and why
 * (CT_OK); without bf16 products: ct_bf16_check's refusal. */
ct_status ct_bf16_peak(int threads, double *gflops, char *what, size_t cap);

/* Elements (uint16_t) of a packed op(B) [K, N] and of the work buffer for an A [M, K]. */
size_t ct_gemm_bf16_pack_elems(int K, int N);
size_t ct_gemm_bf16_work_elems(int M, int K);
/* Rounds op(B) [K, N] to bf16 and packs it into bp (layout above): trans = 0, B is [K, N]
 * row-major with leading dimension ldb; trans = 1, B is [N, K] (op(B) = B^T). */
void   ct_gemm_bf16_pack(uint16_t *bp, const float *B, int ldb, int trans, int K, int N);
/* The same packing a part at a time, from values already rounded to bf16, for an op(B) that
 * is made a part at a time and never whole (conv2d rounds each image once and gathers its
 * columns in bf16, 16 taps at a time, into a small buffer):
 *   pack_rows_bf16: rows k0 .. k0+kc-1 of op(B), given as rows [kc] with leading dimension
 *                   ldr; k0 even, and kc even unless k0 + kc = K;
 *   pack_cols_bf16: columns n0 .. n0+nc-1 of op(B), given as the rows of B^T, cols [nc] with
 *                   leading dimension ldc; n0 a multiple of 16, and nc too unless n0 + nc = N.
 * Every range must be packed once; the part that reaches K (rows) or N (columns) also writes
 * the padding after it. Nothing is rounded again: the bits are those of ct_gemm_bf16_pack on
 * the floats the values were rounded from. */
void   ct_gemm_bf16_pack_rows_bf16(uint16_t *bp, const uint16_t *rows, int ldr, int k0, int kc, int K, int N);
/* Rows k0 .. k0+kc-1 of op(B) [K, N] rounded from float32 rows [kc] (leading dimension ldr), and
 * zero rows k0+kc .. kend-1 (k0 and kend even, kend <= K rounded up to 32): for an op(B) made of
 * segments of padded rows (the LSTM's weight gradients over a window of steps, each step's rows
 * padded to 32 as its own product would pad them). The same bits as ct_gemm_bf16_pack. */
void   ct_gemm_bf16_pack_segment(uint16_t *bp, const float *rows, int ldr, int k0, int kc, int kend, int K, int N);
void   ct_gemm_bf16_pack_cols_bf16(uint16_t *bp, const uint16_t *cols, int ldc, int n0, int nc, int K, int N);
/* Rounds op(A) [M, K] into work (ct_gemm_bf16_work_elems(M, K) elements, layout above), as
 * ct_gemm_bf16 does at every call: for an A that several products share (pack it once, then
 * ct_gemm_bf16_packed for each). trans_a = 0: A is [M, K] with leading dimension lda; 1: [K, M]. */
void   ct_gemm_bf16_pack_a(uint16_t *work, const float *A, int lda, int trans_a, int M, int K);
/* wt = the packing of A^T [K, M], made from work holding A [M, K] packed by ct_gemm_bf16_pack_a
 * (as it left it, zeros past M and K included):
 * the same bits as packing A^T from the floats (rounding is element by element), without
 * rounding again or striding down float columns. For an operand used both ways (the LSTM
 * backward's dz_t: dh = dz_t W_hh and dW = dz_t^T h). wt's rows are ldwt elements apart, of
 * which the first M rounded up to 32 are written (zeros past M): ldwt = M rounded up is the
 * packing itself (ct_gemm_bf16_work_elems(K, M) elements); a wider ldwt writes it as columns of
 * a wider packed A (the LSTM's dz^T over a window of steps, one step's columns at a time). */
void   ct_gemm_bf16_transpose_a(uint16_t *wt, int ldwt, const uint16_t *work, int M, int K);
/* bp = the packing of B [K, N] (ct_gemm_bf16_pack, trans = 0) made from work holding the same B
 * packed as an A (ct_gemm_bf16_pack_a(work, B, ldb, 0, K, N)): the same bits, without rounding
 * again. For an operand used both ways (conv2d's dout_n: A of dW, B of dcol). */
void   ct_gemm_bf16_pack_from_a(uint16_t *bp, const uint16_t *work, int K, int N);
/* C [M, N] (+)= A op(B) with both operands packed (ct_gemm_bf16_pack_a, ct_gemm_bf16_pack). */
void   ct_gemm_bf16_packed(int M, int N, int K, const uint16_t *ap, const uint16_t *bp, float *C, int ldc, int accumulate);
/* C [M, N] (leading dimension ldc) += op(A) [M, K] op(B), op(B) packed in bp, op(A) rounded
 * to bf16 into work (ct_gemm_bf16_work_elems(M, K) elements, overwritten); accumulate = 0:
 * C = op(A) op(B) (C's old values are not read). trans_a = 0: A is [M, K] row-major with
 * leading dimension lda; trans_a = 1: A is [K, M]. Runs on ct_kernels_bf16(), which must
 * not be CT_BF16_NONE (ct_bf16_check). */
void   ct_gemm_bf16(int M, int N, int K, const float *A, int lda, int trans_a, const uint16_t *bp, uint16_t *work,
                    float *C, int ldc, int accumulate);
/* The same on a named implementation (the tests: the model anywhere; the real tiles against
 * it): CT_BF16_AMX and CT_BF16_AVX512BF16 need ct_kernels_cpu_all() to include them. */
void   ct_gemm_bf16_on(ct_bf16_kernels which, int M, int N, int K, const float *A, int lda, int trans_a,
                       const uint16_t *bp, uint16_t *work, float *C, int ldc, int accumulate);

/* The model's reading of TDPBF16PS (above): the SDM's two temporaries (the default), or the
 * intrinsics guide's accumulation into C. Returns the order before. Tests only. */
typedef enum { CT_TILE_ORDER_SDM = 0, CT_TILE_ORDER_INTRINSICS_GUIDE = 1 } ct_tile_order;
ct_tile_order ct_gemm_bf16_model_order(ct_tile_order o);

/* ---- the tile machine, for the tests: one instruction at a time ----
 * Eight tiles of 16 rows x 64 bytes and their configuration (palette 1), as LDTILECFG
 * loads it from 64 bytes: palette, start row, 14 reserved bytes, the bytes per row of
 * tiles 0..15 (16-bit each), then their rows (8-bit each). */
typedef struct {
    uint8_t  palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t  rows[16];
} ct_tile_config;
typedef struct {
    ct_tile_config cfg;
    uint8_t        t[8][16][64];    /* tile, row, byte */
    ct_tile_order  order;
} ct_tile_model;
/* LDTILECFG: CT_EINVAL on a configuration the instruction would fault on (palette not 1,
 * more than 16 rows or 64 bytes, start_row not 0, tiles 8..15 configured); all tiles zeroed. */
ct_status ct_tile_model_config(ct_tile_model *tm, const ct_tile_config *cfg);
void ct_tile_model_load(ct_tile_model *tm, int t, const void *base, size_t stride);    /* TILELOADD tmm_t, [base + stride] */
void ct_tile_model_store(const ct_tile_model *tm, int t, void *base, size_t stride);   /* TILESTORED [base + stride], tmm_t */
void ct_tile_model_zero(ct_tile_model *tm, int t);                                      /* TILEZERO tmm_t */
/* TDPBF16PS tmm_c, tmm_a, tmm_b: C += A B over pairs; the shapes must agree as the
 * instruction requires (rows of C = rows of A, bytes per row of C = of B, A's bytes per
 * row / 4 = B's rows), else CT_ASSERT (the instruction faults). */
void ct_tile_model_dpbf16ps(ct_tile_model *tm, int c, int a, int b);
/* How the model computes TDPBF16PS: on = 1 (the default), eight columns at a time with AVX2
 * and FMA and no flushing, falling back to the plain rows whenever a denormal appears
 * (MXCSR's flags and a scan of the outputs tell); on = 0, always the plain rows, one element
 * at a time. Where the FP32 kernels are narrower than AVX2 (a CPU without it, or
 * CTRAIN_CPU_KERNELS=blas) the plain rows run whatever on says. The results are the same bit
 * for bit (the tests check it); the fast rows are what make training on the model practical.
 * Returns the setting before (-1: not chosen yet). */
int  ct_tile_model_vector(int on);

#endif
