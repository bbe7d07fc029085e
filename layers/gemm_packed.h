/* gemm_packed.h - C += A op(B) for a B that many products share, packed once.
 *
 * The LSTM multiplies by the same recurrent weights W_hh at every one of its T
 * steps, forward (h_{t-1} W_hh^T) and backward (dz_t W_hh). A BLAS call copies
 * ("packs") both operands into its own panel layout on every call: for these
 * products - a few hundred rows against a 512 x 128 matrix - packing W_hh a
 * hundred times per batch cost about 14% of a whole training step. Here the
 * weights are packed ONCE per batch, and each step runs a register-blocked
 * kernel straight over the packed panels and the unpacked rows of A.
 *
 * Packed layout: op(B) [K, N] cut into panels of CT_GEMM_NR = 64 columns (the
 * last one zero-padded); panel p holds, for k = 0..K-1, the 64 values
 * op(B)[k, 64p .. 64p+63] one after the other: [ceil(N/64)][K][64].
 *
 * Kernel: 6 rows of C by 64 columns in 24 AVX-512 registers; for each k, four
 * loads of the panel's row k, one broadcast of A[i, k] per row and four fused
 * multiply-adds per row (measured on a Zen 5 core: 6 x 64 reaches about 95% of
 * the FMA peak on the LSTM's products, 14 x 32 about 85%, OpenBLAS with its
 * packing 70-85%). Every element of C is summed over k in order, in one
 * place, so the result does not depend on how rows are shared among threads.
 *
 * The same kernel is written twice: for AVX-512F as above, and for AVX2 with FMA
 * (16 registers of 8 floats: each 64-column panel is worked through as four strips
 * of 6 rows by 16 columns, 12 accumulators). Both sum every element of C over k in
 * the same order with the same fused multiply-adds, so they give the same bits.
 * ct_kernels_get() says which one runs (the widest the CPU has); on a CPU with
 * neither, ct_gemm_packed_available() is 0 and the callers call cblas_sgemm.
 */
#ifndef CT_GEMM_PACKED_H
#define CT_GEMM_PACKED_H
#include <stddef.h>
#include "core/error.h"

#define CT_GEMM_NR 64   /* columns per packed panel */

/* ctrain's own CPU kernels (these products, the LSTM step of layers/lstm_fused.h): which
 * instruction set they run on. Chosen once, the widest the CPU has (and the OS saves the
 * registers of); CTRAIN_CPU_KERNELS=avx2 or blas in the environment (any case) asks for a
 * narrower set, to compare them (blas: none of ctrain's kernels, OpenBLAS for every product).
 *
 * The sets form a chain, each one the one before plus something: AVX2 with FMA; AVX-512F;
 * AVX-512 plus AVX512-BF16 (vdpbf16ps); all that plus AMX-BF16 (the tiles; every CPU with
 * AMX has AVX512-BF16). The two bf16 sets add the bf16 products of layers/gemm_bf16.h and
 * change nothing in float32: ct_kernels_get() and ct_kernels_cpu() tell the set of the FP32
 * kernels, never above CT_KERNELS_AVX512, and ct_kernels_get_all() / ct_kernels_cpu_all()
 * the whole chain. CTRAIN_CPU_KERNELS=amx, avx512bf16, avx512, avx2 or blas cuts the chain
 * where it says: avx512 on an AMX CPU keeps the FP32 kernels and refuses bf16 products. */
typedef enum {
    CT_KERNELS_BLAS = 0, CT_KERNELS_AVX2 = 1, CT_KERNELS_AVX512 = 2,
    CT_KERNELS_AVX512BF16 = 3,   /* + vdpbf16ps (Cooper Lake, Zen 4 and later) */
    CT_KERNELS_AMX = 4           /* + AMX-BF16 tiles (Xeon 4th/5th generation and later), the OS permitting */
} ct_kernels;
/* The FP32 kernels' set in use (the first call reads CTRAIN_CPU_KERNELS when ct_kernels_init
 * has not: a bad value is one warning on stderr, and the CPU's widest set runs). */
ct_kernels  ct_kernels_get(void);
/* The widest FP32 set this CPU runs. */
ct_kernels  ct_kernels_cpu(void);
/* The same two over the whole chain: up to CT_KERNELS_AMX. */
ct_kernels  ct_kernels_get_all(void);
ct_kernels  ct_kernels_cpu_all(void);
/* Why AMX is not in ct_kernels_cpu_all() on a CPU whose CPUID has it ("" when it is, or the
 * CPU lacks it): the OS does not enable the tile state, or Linux refused this process the
 * permission to use it (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux 5.16+). */
const char *ct_kernels_amx_refusal(void);
/* Reads CTRAIN_CPU_KERNELS: CT_EINVAL naming the variable when its value is not amx,
 * avx512bf16, avx512, avx2 or blas, or asks for a set this CPU lacks (naming the missing
 * instruction set); CT_ENODEV when it asks for amx on a CPU with AMX whose OS refuses the
 * tiles to this process (ct_kernels_get() then keeps the CPU's widest). */
ct_status   ct_kernels_init(void);
/* Runs set k from now on (the tests: the AVX2 kernels on an AVX-512 CPU; bf16 refused on an
 * AMX CPU); k must be one the CPU runs (k <= ct_kernels_cpu_all()). Returns the set before,
 * over the whole chain. Not while other threads run products. */
ct_kernels  ct_kernels_set(ct_kernels k);
/* 1 when the set in use was chosen (CTRAIN_CPU_KERNELS, ct_kernels_set), 0 when it is the
 * CPU's widest by default. It matters to bf16 on AVX512-BF16 alone, which runs by default only
 * where it pays (layers/gemm_bf16.h: ct_kernels_bf16) and when chosen wherever it can. */
int         ct_kernels_chosen(void);
/* As ct_kernels_set, but k counts as the CPU's widest, chosen by nobody: the tests play a CPU
 * with AVX512-BF16 and no AMX on one with AMX. */
ct_kernels  ct_kernels_set_as_cpu(ct_kernels k);
/* "AMX-BF16", "AVX512-BF16", "AVX-512", "AVX2" or "none (OpenBLAS)". */
const char *ct_kernels_name(ct_kernels k);
/* 1 when the packed kernel runs on this CPU (ct_kernels_get() is AVX-512 or AVX2). */
int    ct_gemm_packed_available(void);
/* Floats of a packed op(B) [K, N]. */
size_t ct_gemm_pack_floats(int K, int N);
/* Packs op(B) [K, N] into bp: trans = 0, B is [K, N] row-major with leading dimension ldb;
 * trans = 1, B is [N, K] (op(B) = B^T), leading dimension ldb. */
void   ct_gemm_pack(float *bp, const float *B, int ldb, int trans, int K, int N);
/* C [M, N] (leading dimension ldc) += op(A) [M, K] op(B), op(B) packed in bp; with
 * accumulate = 0, C = op(A) op(B) (C's old values are not read). trans_a = 0: A is [M, K]
 * row-major, leading dimension lda; trans_a = 1: A is [K, M] (op(A) = A^T). Needs
 * ct_gemm_packed_available(). */
void   ct_gemm_packed(int M, int N, int K, const float *A, int lda, int trans_a, const float *bp, float *C, int ldc,
                      int accumulate);
/* The same kernel over a B [K, N] that is not packed: row-major with leading dimension ldb,
 * read in place (row k of panel p is B[k, 64p .. 64p+63], 64 consecutive floats). For a B
 * used once, where packing would cost a copy: the LSTM's dW_ih^T += x^T dz, whose B is
 * one step's gate gradients. Needs N a multiple of 64. */
void   ct_gemm_rowmajor(int M, int N, int K, const float *A, int lda, int trans_a, const float *B, int ldb, float *C,
                        int ldc, int accumulate);
/* The same kernel over a B whose row k is the N consecutive floats at B + boff[k], read in
 * place: a convolution's column matrix on its wide positions without building it (row k =
 * tap (c, ky, kx) is a run of the image; layers/conv2d.c). Columns past N are read with
 * masked loads, so nothing beyond B + boff[k] + N - 1 is touched. A [M, K] row-major. */
void   ct_gemm_rowoffsets(int M, int N, int K, const float *A, int lda, const float *B, const int *boff, float *C,
                          int ldc, int accumulate);
/* ct_gemm_packed with A's row i the K consecutive floats at A + aoff[i], read in place: a
 * convolution's column matrix as the left operand (its weight gradient), not built. */
void   ct_gemm_packed_arows(int M, int N, int K, const float *A, const int *aoff, const float *bp, float *C, int ldc,
                            int accumulate);

#endif
