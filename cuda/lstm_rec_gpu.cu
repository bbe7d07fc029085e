/* lstm_rec_gpu.cu - the GPU engine of ctrain's own LSTM (cuda/lstm_rec.h): the launches of
 * its kernels (cuda/lstm_rec_kernels.cuh) and its products on cuBLAS. The steps that call these
 * are in cuda/lstm_rec.c, with the C model that does each kernel's threads' work in turn.
 */
#include <cuda_bf16.h>
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/lstm_rec.h"
#include "cuda/lstm_rec_kernels.cuh"

/* ---- the engine (its context: the backend of the call) ---- */

static ct_gpu *gpu_of(void *ctx) { return ct_gpu_of((const ct_backend *)ctx); }

static void *gpu_alloc(void *ctx, size_t bytes, const char *what)
{
    void *p = NULL;
    return ct_gpu_malloc(gpu_of(ctx), &p, bytes, what) == CT_OK ? p : NULL;
}
static void gpu_release(void *ctx, void *p) { (void)ctx; ct_gpu_free(p); }

static void gpu_to_bf16(void *ctx, uint16_t *dst, const float *src, size_t n)
{
    ct_bf16_from_float_gpu((const ct_backend *)ctx, dst, src, n);   /* cuda/kernels.h: to nearest even */
}

static void gpu_pack(void *ctx, int bf16, int backward, void *image, const float *w_hh, int H, int HP)
{
    const size_t n = (size_t)ct_lstm_rec_words(HP) * ct_lstm_rec_threads(HP);
    pack_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, gpu_of(ctx)->stream>>>(bf16, backward, image, w_hh, H, HP);
    CT_LAUNCH_CHECK();
}

/* Row-major C [M, N] = A' B' (+ C) is column-major C^T = B'^T A'^T: cuBLAS gets B first, with
 * the same transposition flags (cuda/dense.cu's convention). bf16: GemmEx with float32
 * accumulation; float32: sgemm, in the handle's math (TF32 when the backend allows it, as
 * every other float32 product of the GPU backend). */
static void gpu_gemm(void *ctx, int bf16, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                     float beta, float *C, int ldc)
{
    const float one = 1.0f;
    const cublasOperation_t oa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, ob = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (bf16)
        CT_CUBLAS_CHECK(cublasGemmEx(gpu_of(ctx)->cublas, oa, ob, N, M, K, &one, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C,
                                     CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        CT_CUBLAS_CHECK(cublasSgemm(gpu_of(ctx)->cublas, oa, ob, N, M, K, &one, (const float *)B, ldb, (const float *)A, lda, &beta,
                                    C, ldc));
}

/* More than 48 KiB of dynamic shared memory must be allowed per kernel, once. */
template <typename K> static void allow_smem(K kernel, size_t bytes, int *done)
{
    if (*done || bytes <= 48 * 1024) return;
    CT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    *done = 1;
}
template <typename P, int HP, int S> static void launch_forward(cudaStream_t st, const lstm_rec_fwd_args *a)
{
    static int allowed;
    allow_smem(rec_forward_kernel<P, HP, S>, rec_words<P, HP>::smem, &allowed);
    rec_forward_kernel<P, HP, S><<<(a->B + S - 1) / S, 4 * HP, rec_words<P, HP>::smem, st>>>(*a);
}
template <typename P, int HP, int S> static void launch_backward(cudaStream_t st, const lstm_rec_bwd_args *a)
{
    static int allowed;
    allow_smem(rec_backward_kernel<P, HP, S>, rec_words<P, HP>::smem, &allowed);
    rec_backward_kernel<P, HP, S><<<(a->B + S - 1) / S, 4 * HP, rec_words<P, HP>::smem, st>>>(*a);
}
/* the instance for (operands, HP, S) */
#define REC_BY_SIZE(fn, P, HPv, Sv) ((HPv) == 32 ? ((Sv) == 2 ? fn<P, 32, 2> : fn<P, 32, 4>) \
                                     : (HPv) == 64 ? ((Sv) == 2 ? fn<P, 64, 2> : fn<P, 64, 4>) : ((Sv) == 2 ? fn<P, 128, 2> : fn<P, 128, 4>))
#define REC_INSTANCE(fn, bf16, HPv, Sv) ((bf16) ? REC_BY_SIZE(fn, rec_bf16, HPv, Sv) : REC_BY_SIZE(fn, rec_f32, HPv, Sv))

static void gpu_forward(void *ctx, const lstm_rec_fwd_args *a)
{
    CT_ASSERT((a->HP == 32 || a->HP == 64 || a->HP == 128) && (a->S == 2 || a->S == 4));
    REC_INSTANCE(launch_forward, a->bf16, a->HP, a->S)(gpu_of(ctx)->stream, a);
    CT_LAUNCH_CHECK();
}

static void gpu_backward(void *ctx, const lstm_rec_bwd_args *a)
{
    CT_ASSERT((a->HP == 32 || a->HP == 64 || a->HP == 128) && (a->S == 2 || a->S == 4));
    REC_INSTANCE(launch_backward, a->bf16, a->HP, a->S)(gpu_of(ctx)->stream, a);
    CT_LAUNCH_CHECK();
}

static void gpu_bias_grad(void *ctx, float *db_ih, float *db_hh, const float *part, int B, int n)
{
    bias_grad_kernel<<<ct_gpu_blocks((size_t)n, CT_THREADS), CT_THREADS, 0, gpu_of(ctx)->stream>>>(db_ih, db_hh, part, B, n);
    CT_LAUNCH_CHECK();
}

/* The most shared memory one of the kernels of this precision and padded size asks for per block
 * (its dynamic part and its arrays), bytes. */
template <typename P> static size_t smem_for(int HP, int S)
{
    const size_t dyn = HP == 128 ? rec_words<P, 128>::smem : HP == 64 ? rec_words<P, 64>::smem : rec_words<P, 32>::smem;
    return dyn + (size_t)(S * 4 * HP + S * HP) * sizeof(float);   /* the backward's dzs and dhrec, the larger */
}
extern "C" size_t ct_lstm_rec_gpu_smem(int bf16, int HP, int S) { return bf16 ? smem_for<rec_bf16>(HP, S) : smem_for<rec_f32>(HP, S); }

extern "C" const lstm_rec_engine ct_lstm_rec_gpu = {
    NULL, gpu_alloc, gpu_release, gpu_to_bf16, gpu_pack, gpu_gemm, gpu_forward, gpu_backward, gpu_bias_grad,
};
