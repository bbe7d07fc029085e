/* lstm_rec.h - ctrain's own LSTM for the GPU: the recurrence of every time step of a layer
 * in ONE kernel launch, with the recurrent weights held on chip (registers and shared
 * memory), and the products over all steps (input projection, dx, weight gradients) as
 * cuBLAS matrix products. The math is layers/lstm.c's (forward, BPTT, masking). Two
 * precisions, the plan's (dims.dtype): float32, and docs/precision.md's bf16 (products of
 * bf16 operands with float32 sums, the cell and every state in float32).
 *
 * Why: cuDNN 9 runs bf16 RNN data on its standard algorithm only (a matrix product and a
 * pointwise kernel launched per time step), so at the seed's sizes (256 sequences, 100
 * steps, H = 128) its bf16 LSTM is slower than its float32 persistent kernel; and its float32
 * persistent kernel took 1.43 of a 1.70 ms training step on an H200. Here each thread block
 * owns S sequences for all T steps: sequences never interact, so blocks never wait for each
 * other, and within a block a step costs one or two __syncthreads.
 *
 * ---- Forward, one layer ----
 * (op(v) below is bf16(v) in bf16 plans and v itself in float32 ones: the products' operands.)
 *   1. zx = op(x) op(W_ih)^T               [B*T, 4H] one product over all steps (batch-major rows b*T+t)
 *   2. one launch, block = S sequences, 4 HP threads (HP = H padded to 32, 64 or 128):
 *        for t = 0 .. T-1:
 *          z  = zx_t + (b_ih + b_hh) + op(h_{t-1}) op(W_hh)^T          (float32 sums)
 *          i, f, g, o, c_t, h_t as lstm.c; padded steps (t >= len[b]) carry h and c, output 0
 *          op(h_t) goes to shared memory for the next step's product
 *      and keeps for the backward: the gates i, f, g, o and c_t (float32) and op(h_{t-1}).
 * Thread (u, kq) = (tid / 4, tid % 4) holds the four gates' weights of unit u for one
 * quarter of the k (pairs p = 4 kk + kq, interleaved so that the four quarters' reads of
 * h fall in different shared-memory banks) as pairs: HP / 2 words. It sums
 * its quarter for the S sequences; two shuffles (lanes xor 1, then xor 2) give every lane
 * the whole sum, (p0 + p1) + (p2 + p3) in every lane; lane kq < S then runs the cell of
 * sequence kq. Units u >= H (the padding) hold zero weights and stay 0.
 *
 * ---- Backward, one layer ----
 *   1. one launch, the same blocks, t = T-1 .. 0, two phases per step:
 *        A (thread (u, s)): dh = dy_t + dh_rec + dh carried; dc, dz_i, dz_f, dz_g, dz_o and
 *          dc_{t-1} as lstm.c (2)-(3), from the kept gates and c; op(dz) goes out and to
 *          shared memory; each thread also sums its dz over t (the bias gradient)
 *        B (thread (k, jq)): dh_rec[s][k] = sum_j op(dz[s][j]) op(W_hh[j][k]): thread
 *          (k, jq) holds W_hh's column k for one quarter of the 4 HP rows j (pairs
 *          interleaved as forward), the quarters summed by the same two shuffles
 *      Padded steps carry dh and dc and give dz = 0.
 *   2. dW_ih += op(dz)^T op(x),  dW_hh += op(dz)^T op(h_{t-1}),  dx = op(dz) op(W_ih)
 *      (products over all steps, float32 sums), db_ih and db_hh += the per-sequence sums of
 *      dz, summed over the batch in order.
 *
 * ---- The weights on chip ----
 * A layer's op(W_hh) [4H, H] is laid out twice per batch, once for each kernel:
 * image[r][tid] (HP / 2 words x 4 HP threads, so that word r of all threads is contiguous)
 * holds a pair of entries: two bf16 in one 32-bit word, the lower half first, or two floats
 * (8 bytes):
 *   forward  word r of thread (u, kq): W_hh[q H + u][2p], W_hh[q H + u][2p + 1]
 *            with q = r / (HP / 8), p = 4 (r % (HP / 8)) + kq
 *   backward word r of thread (k, jq): W_hh[j][k], W_hh[j + 1][k]
 *            with j = 2p, p = 4 r + jq, j counted in the padded gate rows q HP + u
 * and zero wherever a row or column lies in the padding (ct_lstm_rec_word). At HP = 128
 * that is 64 words per thread and 512 threads per block: more than a thread's registers
 * hold beside its work, so there part of each thread's words live in shared memory
 * (cuda/lstm_rec_kernels.cuh says how many).
 *
 * ---- Two implementations of the same steps ----
 * The steps above are written once, here (lstm_rec.c), over an engine: the GPU's
 * (cuda/lstm_rec_gpu.cu: the kernels of cuda/lstm_rec_kernels.cuh and cuBLAS's cublasGemmEx)
 * and a C model of the kernels that runs the same threads' work one after another on the CPU
 * (lstm_rec.c). The CPU tests check the model against the float32 layer, and the kernels'
 * CUDA source, run on the CPU by a small emulation of CUDA's threads, barriers and shuffles
 * (tests/cuda_emu.cpp), against the model bit for bit; the GPU tests check the kernels on the
 * GPU against the model. A sequence's results do not depend on S or on the other sequences
 * of its block.
 */
#ifndef CT_CUDA_LSTM_REC_H
#define CT_CUDA_LSTM_REC_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/lstm.h"
#include "cuda/hd.h"


#define LSTM_REC_MAX_H 128   /* the largest hidden size the kernels hold in registers */
#define LSTM_REC_LANES 4     /* threads that share one unit's sums (forward) or one column's (backward) */

/* H padded to the size a kernel is built for: 32, 64 or 128 */
static inline CT_HD int ct_lstm_rec_hp(int H) { return H <= 32 ? 32 : H <= 64 ? 64 : 128; }
/* words per thread of a weight image, threads per block, and a word's bytes (bf16: 2 bf16; float32: 2 floats) */
static inline CT_HD int ct_lstm_rec_words(int HP) { return HP / 2; }
static inline CT_HD int ct_lstm_rec_threads(int HP) { return LSTM_REC_LANES * HP; }
static inline CT_HD size_t ct_lstm_rec_word_bytes(int bf16) { return bf16 ? 4 : 8; }

/* Word r of thread tid in the forward (backward = 0) or backward (1) image: the two entries
 * of w_hh [4H, H] (row-major) it holds, as indices into w_hh, lower half first; -1 where the
 * half lies in the padding (a zero). */
static inline CT_HD void ct_lstm_rec_word(int backward, int H, int HP, int r, int tid, long *lo, long *hi)
{
    if (!backward) {
        const int u = tid / LSTM_REC_LANES, kq = tid % LSTM_REC_LANES, np = HP / 8;
        const int q = r / np, p = LSTM_REC_LANES * (r % np) + kq, row = q * H + u;
        *lo = u < H && 2 * p < H ? (long)row * H + 2 * p : -1;
        *hi = u < H && 2 * p + 1 < H ? (long)row * H + 2 * p + 1 : -1;
    } else {
        const int k = tid / LSTM_REC_LANES, jq = tid % LSTM_REC_LANES, j = 2 * (LSTM_REC_LANES * r + jq);
        const int q = j / HP, u = j % HP;   /* j and j + 1: units u and u + 1 of gate q (HP is even) */
        *lo = k < H && u < H ? (long)(q * H + u) * H + k : -1;
        *hi = k < H && u + 1 < H ? (long)(q * H + u + 1) * H + k : -1;
    }
}

/* The recurrent kernels' arguments (device pointers on the GPU, host pointers in the model).
 * Rows are batch-major: row b*T + t. */
typedef struct {
    int B, T, H, HP, S;
    int bf16;                 /* the operands: bf16 (1) or float32 (0); the types of wf, hprev below */
    const float *zx;          /* [B*T, 4H] x_t W_ih^T, no biases */
    const float *b_ih, *b_hh; /* [4H] */
    const void *wf;           /* forward image of W_hh */
    const int *len;           /* [B], or NULL: all T */
    float *y;                 /* [B*T, H] h_t, 0 at padded steps */
    float *hy;                /* [B, H] h at each sequence's last valid step */
    float *gates;             /* [B*T, 4H] i, f, g, o (0 at padded steps) */
    float *cs;                /* [B*T, H] c_t (0 at padded steps) */
    void *hprev;              /* [B*T, H] op(h_{t-1}) (0 at t = 0): uint16_t bf16 bits or float */
} lstm_rec_fwd_args;

typedef struct {
    int B, T, H, HP, S;
    int bf16;                 /* as in lstm_rec_fwd_args: the types of wb, dzh below */
    const float *dy;          /* [B*T, H] gradient into y, or NULL (none) */
    const float *dhy;         /* [B, H] gradient into hy, or NULL (none) */
    const float *gates, *cs;  /* the forward's */
    const void *wb;           /* backward image of W_hh */
    const int *len;
    void *dzh;                /* [B*T, 4H] op(dz), 0 at padded steps: uint16_t bf16 bits or float */
    float *dbpart;            /* [B, 4H] each sequence's sum of dz over t (float32, t descending) */
} lstm_rec_bwd_args;

/* What the steps run on. Products are row-major: C [M, N] = beta C + A' B', with A' [M, K],
 * B' [K, N] (ta / tb = 1: A' = A^T, B' = B^T), A and B bf16 (bf16 = 1) or float32, C float32. */
typedef struct {
    void *ctx;
    void *(*alloc)(void *ctx, size_t bytes, const char *what);   /* zeroed; NULL (error set) on failure */
    void  (*release)(void *ctx, void *p);
    void  (*to_bf16)(void *ctx, uint16_t *dst, const float *src, size_t n);
    void  (*pack)(void *ctx, int bf16, int backward, void *image, const float *w_hh, int H, int HP);
    void  (*gemm)(void *ctx, int bf16, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                  float beta, float *C, int ldc);
    void  (*forward)(void *ctx, const lstm_rec_fwd_args *a);
    void  (*backward)(void *ctx, const lstm_rec_bwd_args *a);
    /* db_ih [n] += sum_b part[b, :] and db_hh [n] += the same sums (rows in order) */
    void  (*bias_grad)(void *ctx, float *db_ih, float *db_hh, const float *part, int B, int n);
} lstm_rec_engine;

/* Memory planned once for the largest batch and longest sequence (d->B, d->T), for the
 * operands d->dtype says (CT_BF16 or CT_F32). */
typedef struct {
    lstm_dims d;                       /* d.dtype: CT_BF16 or CT_F32, the operands */
    int HP, S, bf16;
    const lstm_rec_engine *eng;
    uint16_t *xh[LSTM_MAX_LAYERS];     /* bf16: [B*T, I_l] the layer's input in bf16 (float32: NULL) */
    uint16_t *wih[LSTM_MAX_LAYERS];    /* bf16: [4H, I_l] bf16(W_ih) of this batch (float32: NULL) */
    const void *xop[LSTM_MAX_LAYERS];  /* this batch's op(x) and op(W_ih) of each layer: xh and wih, or */
    const void *wop[LSTM_MAX_LAYERS];  /* (float32) the input and the weights themselves */
    void *wf[LSTM_MAX_LAYERS], *wb[LSTM_MAX_LAYERS];       /* W_hh's two images */
    float *y[LSTM_MAX_LAYERS];         /* [B*T, H] each layer's h sequence (the last layer's is the output) */
    float *gates[LSTM_MAX_LAYERS];     /* [B*T, 4H] */
    float *cs[LSTM_MAX_LAYERS];        /* [B*T, H] */
    void *hprev[LSTM_MAX_LAYERS];      /* [B*T, H] op(h_{t-1}) */
    float *hy;                         /* [B, H] the last layer's final h */
    float *zx;                         /* [B*T, 4H] */
    void *dzh;                         /* [B*T, 4H] op(dz) */
    float *dyl;                        /* [B*T, H] the gradient passed down between layers */
    float *dbpart;                     /* [B, 4H] */
} lstm_rec_plan;

/* 1 when these dims run here: sigmoid, 1 <= H <= LSTM_REC_MAX_H, L <= LSTM_MAX_LAYERS. */
int       ct_lstm_rec_fits(const lstm_dims *d);
/* S, the sequences per block, for a batch of B on a GPU with `sms` multiprocessors: 2 while
 * that fills at most one block per multiprocessor, else 4. */
int       ct_lstm_rec_seqs(int B, int sms);
ct_status ct_lstm_rec_plan_make(lstm_rec_plan *p, const lstm_rec_engine *eng, const lstm_dims *d, int S);
void      ct_lstm_rec_plan_free(lstm_rec_plan *p);
/* x [B, T, I]; len [B] or NULL (on the engine's side); w [L]; d->B, d->T <= planned.
 * The last layer's h sequence is p->y[L-1] [B, T, H], its final h p->hy [B, H]. x and w
 * must stay as they are until this batch's backward (float32 plans read them there). */
void      ct_lstm_rec_forward(lstm_rec_plan *p, const float *x, const int *len, const lstm_weights *w, const lstm_dims *d);
/* After this batch's forward: dy [B, T, H] (or NULL) into the last layer's h sequence, dhy
 * [B, H] (or NULL) into its final h; dx [B, T, I] overwritten (NULL: not computed); g [L]
 * ACCUMULATE. */
void      ct_lstm_rec_backward(lstm_rec_plan *p, float *dx, const lstm_grads *g, const float *dy, const float *dhy,
                               const int *len, const lstm_weights *w, const lstm_dims *d);

/* The C model's engine (host memory; the kernels run their threads one after another). */
extern const lstm_rec_engine ct_lstm_rec_model;
/* The GPU's (cuda/lstm_rec_gpu.cu; CUDA builds): device memory, its context a const ct_backend *
 * of the GPU, set before each use. */
extern const lstm_rec_engine ct_lstm_rec_gpu;
/* The shared memory per block the GPU's kernels for these operands, HP and S ask for, bytes:
 * a plan is made only where the GPU allows that much (cudaDevAttrMaxSharedMemoryPerBlockOptin:
 * 227 KiB on an H100, 163 KiB on an A100, whose float32 kernels at HP = 128 it does not run). */
size_t ct_lstm_rec_gpu_smem(int bf16, int HP, int S);

#ifdef __cplusplus
}
#endif
#endif
