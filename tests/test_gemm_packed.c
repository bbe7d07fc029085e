/* test_gemm_packed.c - the packed-B kernel of layers/gemm_packed.h against OpenBLAS:
 * every tail (rows not a multiple of the tile, columns not of the panel, K of 1), both
 * layouts of A, accumulating and overwriting, and NaN in C's old values when
 * overwriting (they must not be read); B packed, read in place, or by row offsets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include "tests/test.h"
#include "layers/gemm_packed.h"

/* trans_b = 2: B [K, N] row-major read in place (ct_gemm_rowmajor) instead of packed */
static void one(int M, int N, int K, int trans_a, int trans_b, int acc, ct_rng *r)
{
    int lda = (trans_a ? M : K) + 3, ldb = (trans_b == 1 ? K : N) + 5, ldc = N + 2;   /* leading dimensions with slack */
    float *A = t_alloc((size_t)(trans_a ? K : M) * lda), *B = t_alloc((size_t)(trans_b == 1 ? N : K) * ldb);
    float *C = t_alloc((size_t)M * ldc), *ref = t_alloc((size_t)M * ldc), *bp = t_alloc(ct_gemm_pack_floats(K, N));
    t_fill_uniform(A, (size_t)(trans_a ? K : M) * lda, -1, 1, r);
    t_fill_uniform(B, (size_t)(trans_b == 1 ? N : K) * ldb, -1, 1, r);
    t_fill_uniform(ref, (size_t)M * ldc, -1, 1, r);
    for (size_t i = 0; i < (size_t)M * ldc; i++) C[i] = acc || (int)(i % ldc) >= N ? ref[i] : NAN;   /* slack: untouched */
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b == 1 ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                lda, B, ldb, acc ? 1.0f : 0.0f, ref, ldc);
    if (trans_b == 2) {
        ct_gemm_rowmajor(M, N, K, A, lda, trans_a, B, ldb, C, ldc, acc);
    } else {
        ct_gemm_pack(bp, B, ldb, trans_b, K, N);
        ct_gemm_packed(M, N, K, A, lda, trans_a, bp, C, ldc, acc);
    }
    char what[96];
    snprintf(what, sizeof what, "M %d N %d K %d, A%s B%s, %s", M, N, K, trans_a ? "^T" : "",
             trans_b == 1 ? "^T" : trans_b == 2 ? " in place" : "", acc ? "C +=" : "C =");
    t_close(what, C, ref, (size_t)M * ldc, 2e-6);
    free(A); free(B); free(C); free(ref); free(bp);
}

/* ct_gemm_rowoffsets: row k of B is the N floats at src + off[k], runs that overlap as a
 * convolution's taps do (off = c*HW + ky*W + kx for a k3x3 over c x 9 x 11, N = its wide
 * positions); the allocation ends where the last run does, so a read past it (a column past
 * N not masked) shows under the sanitizer build. ct_gemm_packed_arows: the same runs as the
 * rows of A. */
static void one_offsets(int M, int C, int H, int W, int acc, ct_rng *r)
{
    const int K = C * 9, N = (H - 3) * W + (W - 2), lda = K + 1, ldc = N + 3;
    const size_t nsrc = (size_t)C * H * W;
    float *A = t_alloc((size_t)M * lda), *src = t_alloc(nsrc), *B = t_alloc((size_t)K * N);
    float *C_ = t_alloc((size_t)M * ldc), *ref = t_alloc((size_t)M * ldc);
    int *off = malloc((size_t)K * sizeof *off);
    t_fill_uniform(A, (size_t)M * lda, -1, 1, r);
    t_fill_uniform(src, nsrc, -1, 1, r);
    t_fill_uniform(ref, (size_t)M * ldc, -1, 1, r);
    for (int k = 0; k < K; k++) {
        off[k] = (k / 9) * H * W + (k / 3 % 3) * W + k % 3;
        memcpy(B + (size_t)k * N, src + off[k], (size_t)N * sizeof *B);
    }
    t_check(off[K - 1] + N == (int)nsrc, "the last run should end at the end of the allocation");
    for (size_t i = 0; i < (size_t)M * ldc; i++) C_[i] = acc || (int)(i % ldc) >= N ? ref[i] : NAN;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, N, acc ? 1.0f : 0.0f, ref, ldc);
    ct_gemm_rowoffsets(M, N, K, A, lda, src, off, C_, ldc, acc);
    char what[96];
    snprintf(what, sizeof what, "M %d, B by row offsets over %d x %d x %d (N %d, K %d), %s", M, C, H, W, N, K, acc ? "C +=" : "C =");
    t_close(what, C_, ref, (size_t)M * ldc, 2e-6);
    /* the same runs as the left operand: D [K, M] (+)= runs [K, N] x X [N, M], X packed */
    float *X = t_alloc((size_t)N * M), *xp = t_alloc(ct_gemm_pack_floats(N, M));
    float *D = t_alloc((size_t)K * M), *dref = t_alloc((size_t)K * M);
    t_fill_uniform(X, (size_t)N * M, -1, 1, r);
    t_fill_uniform(dref, (size_t)K * M, -1, 1, r);
    for (size_t i = 0; i < (size_t)K * M; i++) D[i] = acc ? dref[i] : NAN;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, M, N, 1.0f, B, N, X, M, acc ? 1.0f : 0.0f, dref, M);
    ct_gemm_pack(xp, X, M, 0, N, M);
    ct_gemm_packed_arows(K, M, N, src, off, xp, D, M, acc);
    snprintf(what, sizeof what, "A by row offsets over %d x %d x %d (K %d), N %d, %s", C, H, W, N, M, acc ? "C +=" : "C =");
    t_close(what, D, dref, (size_t)K * M, 2e-6);
    free(A); free(src); free(B); free(C_); free(ref); free(off); free(X); free(xp); free(D); free(dref);
}

/* Every case with one set of kernels. */
static void cases(ct_kernels set)
{
    const char *isa = ct_kernels_name(set);
    t_case("gemm_packed/%s against OpenBLAS: tails, layouts, accumulate and overwrite", isa);
    ct_rng r;
    ct_rng_seed(&r, 4242, 1);
    const int shapes[][3] = { { 1, 1, 1 }, { 5, 7, 3 }, { 6, 64, 40 }, { 7, 65, 17 }, { 13, 127, 128 }, { 128, 512, 128 },
                              { 128, 128, 512 }, { 512, 40, 128 }, { 3, 16, 1 }, { 12, 130, 9 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int acc = 0; acc < 2; acc++) one(shapes[s][0], shapes[s][1], shapes[s][2], ta, tb, acc, &r);

    t_case("gemm_packed/%s, B read in place (ct_gemm_rowmajor) against OpenBLAS: N a multiple of 64, row tails, K of 1", isa);
    const int shapes_rm[][3] = { { 1, 64, 1 }, { 40, 512, 128 }, { 7, 128, 13 }, { 13, 192, 5 }, { 6, 64, 64 } };
    for (size_t s = 0; s < sizeof shapes_rm / sizeof shapes_rm[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int acc = 0; acc < 2; acc++) one(shapes_rm[s][0], shapes_rm[s][1], shapes_rm[s][2], ta, 2, acc, &r);

    t_case("gemm_packed/%s, B or A by row offsets (ct_gemm_rowoffsets, ct_gemm_packed_arows) against OpenBLAS: overlapping "
           "runs, tails, nothing read past the last run", isa);
    const int shapes_off[][4] = { { 64, 32, 26, 26 }, { 7, 1, 9, 11 }, { 1, 2, 3, 3 }, { 13, 3, 12, 40 }, { 6, 1, 4, 70 } };
    for (size_t s = 0; s < sizeof shapes_off / sizeof shapes_off[0]; s++)
        for (int acc = 0; acc < 2; acc++) one_offsets(shapes_off[s][0], shapes_off[s][1], shapes_off[s][2], shapes_off[s][3], acc, &r);
}

/* The two sets sum every element in the same order with the same operations: the same bits. */
static void same_bits(void)
{
    t_case("gemm_packed/AVX2 = AVX-512 bit for bit (packed, in place, by offsets; tails)");
    ct_rng r;
    ct_rng_seed(&r, 77, 2);
    const int M = 13, N = 130, K = 37;
    float *A = t_alloc((size_t)M * K), *B = t_alloc((size_t)K * N), *bp = t_alloc(ct_gemm_pack_floats(K, N));
    float *C[2] = { t_alloc((size_t)M * N), t_alloc((size_t)M * N) };
    t_fill_uniform(A, (size_t)M * K, -1, 1, &r);
    t_fill_uniform(B, (size_t)K * N, -1, 1, &r);
    ct_gemm_pack(bp, B, N, 0, K, N);
    int off[37];
    for (int k = 0; k < K; k++) off[k] = 3 * k;   /* overlapping runs of B's first rows */
    const ct_kernels before = ct_kernels_get_all();
    for (int s = 0; s < 2; s++) {
        ct_kernels_set(s ? CT_KERNELS_AVX2 : CT_KERNELS_AVX512);
        for (size_t i = 0; i < (size_t)M * N; i++) C[s][i] = 0.25f;
        ct_gemm_packed(M, N, K, A, K, 0, bp, C[s], N, 1);
        ct_gemm_rowmajor(M, 128, K, A, K, 0, B, N, C[s], N, 1);
        ct_gemm_rowoffsets(M, N - 40, K, A, K, B, off, C[s], N, 1);
    }
    ct_kernels_set(before);
    t_close("C", C[1], C[0], (size_t)M * N, 0);
    free(A); free(B); free(bp); free(C[0]); free(C[1]);
}

void suite_gemm_packed(void)
{
    const ct_kernels widest = ct_kernels_get(), saved = ct_kernels_get_all();   /* saved: with the bf16 sets */
    if (widest == CT_KERNELS_BLAS) {
        t_skip("gemm_packed/against OpenBLAS: this CPU has neither AVX-512F nor AVX2 with FMA; the callers use cblas_sgemm here");
        return;
    }
    for (int set = widest; set >= CT_KERNELS_AVX2; set--) {   /* on an AVX-512 CPU the AVX2 kernels too */
        ct_kernels_set((ct_kernels)set);
        cases((ct_kernels)set);
    }
    ct_kernels_set(saved);
    if (widest == CT_KERNELS_AVX512) same_bits();
}
