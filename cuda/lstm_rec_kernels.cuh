/* lstm_rec_kernels.cuh - the CUDA kernels of ctrain's own LSTM (the design, the thread
 * layout and the weight images are in cuda/lstm_rec.h). Included by cuda/lstm_rec_gpu.cu, which
 * launches them, and by tests/cuda_emu.cpp, which runs this same source on the CPU (each block's
 * threads as POSIX threads) to check it against the C model bit for bit. The includer provides
 * CUDA's names (<cuda_bf16.h> and the runtime, or the emulation's) and cuda/lstm_rec.h.
 *
 * Each kernel is built for P (the operands: rec_bf16 or rec_f32, below), HP (the padded hidden
 * size: 32, 64, 128) and S (sequences per block: 2, 4), so that the weight registers and the
 * accumulators are arrays of constant size the compiler keeps in registers. A block has 4 HP
 * threads (512 at HP = 128), so a thread may use at most 128 registers (65,536 per
 * multiprocessor). At HP = 128 the 64 words of a thread's weight image and the rest of its
 * work do not fit in that (with all 64 bf16 words in registers the compiler spilled about 60
 * values per thread). So there the first RW words stay in registers and the others go to
 * shared memory, each thread reading only its own words, consecutive threads on consecutive
 * banks: bf16, 32 of its 64 words (4 bytes each) in registers, 64 KiB of shared memory per
 * block; float32, 16 of its 64 words (8 bytes each), 192 KiB. The sums are the same either
 * way: a word's place does not change them.
 */
#ifndef CT_CUDA_LSTM_REC_KERNELS_CUH
#define CT_CUDA_LSTM_REC_KERNELS_CUH

#ifndef CT_DYNAMIC_SHARED   /* a block's dynamic shared memory, sized at launch, seen as an array of `type` */
#define CT_DYNAMIC_SHARED(type, name) \
    extern __shared__ __align__(16) unsigned char ct_dynamic_shared[]; \
    type *name = reinterpret_cast<type *>(ct_dynamic_shared)
#endif

#define FULL_MASK 0xffffffffu

__device__ static inline float lo_half(uint32_t w) { return __uint_as_float(w << 16); }
__device__ static inline float hi_half(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
__device__ static inline float round_bf16(float f) { return __bfloat162float(__float2bfloat16_rn(f)); }
__device__ static inline uint16_t bf16_bits(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
__device__ static inline float sigm(float z) { return 1.0f / (1.0f + expf(-z)); }
/* the four lanes' values summed, (v0 + v1) + (v2 + v3) in every lane (adding is commutative) */
__device__ static inline float lanes_sum(float v)
{
    v += __shfl_xor_sync(FULL_MASK, v, 1);
    return v + __shfl_xor_sync(FULL_MASK, v, 2);
}
/* v[lane] for a lane number known only at run time, without indexing a register array */
template <int S> __device__ static inline float pick(const float (&v)[S], int lane)
{
    float r = v[0];
#pragma unroll
    for (int s = 1; s < S; s++) r = lane == s ? v[s] : r;
    return r;
}

/* The operands, as the kernels hold and pass them: a word of a weight image (a pair of W_hh
 * entries), its two entries as floats, op(v) as a float (the value the products see) and as
 * stored for the products over all steps (act). */
struct rec_bf16 {
    typedef uint32_t word;     /* two bf16, the lower half first */
    typedef uint16_t act;      /* bf16 bits */
    static constexpr int RW128 = 32;
    __device__ static inline float lo(word w) { return lo_half(w); }
    __device__ static inline float hi(word w) { return hi_half(w); }
    __device__ static inline float op(float v) { return round_bf16(v); }
    __device__ static inline act out(float v) { return bf16_bits(v); }
};
struct rec_f32 {
    typedef float2 word;
    typedef float act;
    static constexpr int RW128 = 16;
    __device__ static inline float lo(word w) { return w.x; }
    __device__ static inline float hi(word w) { return w.y; }
    __device__ static inline float op(float v) { return v; }
    __device__ static inline act out(float v) { return v; }
};

/* Words of a thread's weight image kept in registers; the rest are in shared memory. */
template <typename P, int HP> struct rec_words {
    static constexpr int NW = HP / 2, RW = HP == 128 ? P::RW128 : NW;
    static constexpr size_t smem = (size_t)(NW - RW) * 4 * HP * sizeof(typename P::word);   /* dynamic shared memory, bytes */
};
/* Loads a thread's image: words r < RW into w, the others into its column of wsm. */
template <typename P, int HP>
__device__ static inline void load_image(typename P::word (&w)[rec_words<P, HP>::RW], typename P::word *wsm,
                                         const typename P::word *image, int tid)
{
    constexpr int NT = 4 * HP, NW = rec_words<P, HP>::NW, RW = rec_words<P, HP>::RW;
#pragma unroll
    for (int r = 0; r < RW; r++) w[r] = image[(size_t)r * NT + tid];
    for (int r = RW; r < NW; r++) wsm[(size_t)(r - RW) * NT + tid] = image[(size_t)r * NT + tid];
}
/* word r (a constant once the loops are unrolled) of the thread's image */
template <typename P, int HP>
__device__ static inline typename P::word word(const typename P::word (&w)[rec_words<P, HP>::RW], const typename P::word *wsm,
                                               int r, int tid)
{
    constexpr int RW = rec_words<P, HP>::RW;
    return r < RW ? w[r < RW ? r : 0] : wsm[(size_t)(r - RW) * 4 * HP + tid];
}

/* ---- forward: all T steps of one layer, S sequences per block ---- */
template <typename P, int HP, int S>
__global__ static void __launch_bounds__(4 * HP, 1) rec_forward_kernel(lstm_rec_fwd_args a)
{
    typedef typename P::word word_t;
    constexpr int NT = 4 * HP, NP = HP / 8;
    __shared__ __align__(16) float hbuf[2][S][HP];      /* op(h_{t-1}) of the block's sequences, double-buffered;
                                                           aligned for the float2 reads */
    CT_DYNAMIC_SHARED(word_t, wsm);                     /* the image's words past RW */
    const int tid = threadIdx.x, u = tid / 4, kq = tid % 4;
    const int b = blockIdx.x * S + kq, H = a.H, T = a.T, G = 4 * H;
    const bool cell = kq < S && b < a.B && u < H;       /* this lane runs sequence kq's cell of unit u */
    word_t w[rec_words<P, HP>::RW];                     /* unit u's four gate rows, quarter kq of the k: word q NP + kk */
    load_image<P, HP>(w, wsm, (const word_t *)a.wf, tid);
    const int L = cell ? (a.len ? a.len[b] : T) : 0;
    float zx[4] = { 0, 0, 0, 0 }, h = 0.0f, c = 0.0f;
    for (int i = tid; i < 2 * S * HP; i += NT) (&hbuf[0][0][0])[i] = 0.0f;
    if (cell)   /* step t's projection is loaded at the end of step t - 1: the loads overlap step t's products */
#pragma unroll
        for (int q = 0; q < 4; q++) zx[q] = a.zx[(size_t)b * T * G + q * H + u];
    __syncthreads();
    for (int t = 0; t < T; t++) {
        const size_t row = (size_t)b * T + t;
        float acc[4][S];
#pragma unroll
        for (int q = 0; q < 4; q++)
#pragma unroll
            for (int s = 0; s < S; s++) acc[q][s] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < NP; kk++) {
            const int p = 4 * kk + kq;
            float2 hv[S];
#pragma unroll
            for (int s = 0; s < S; s++) hv[s] = *reinterpret_cast<const float2 *>(&hbuf[t & 1][s][2 * p]);
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const word_t wd = word<P, HP>(w, wsm, q * NP + kk, tid);
                const float w0 = P::lo(wd), w1 = P::hi(wd);
#pragma unroll
                for (int s = 0; s < S; s++) {
                    acc[q][s] = fmaf(w0, hv[s].x, acc[q][s]);
                    acc[q][s] = fmaf(w1, hv[s].y, acc[q][s]);
                }
            }
        }
        float z[4];
#pragma unroll
        for (int q = 0; q < 4; q++) {
#pragma unroll
            for (int s = 0; s < S; s++) acc[q][s] = lanes_sum(acc[q][s]);
            z[q] = pick<S>(acc[q], kq);
        }
        float hn = 0.0f;
        if (cell) {
            ((typename P::act *)a.hprev)[row * H + u] = P::out(hbuf[t & 1][kq][u]);   /* exact: it holds op(h) */
            if (t < L) {
#pragma unroll
                for (int q = 0; q < 4; q++) z[q] = (zx[q] + (a.b_ih[q * H + u] + a.b_hh[q * H + u])) + z[q];
                const float i = sigm(z[0]), f = sigm(z[1]), g = tanhf(z[2]), o = sigm(z[3]);
                c = fmaf(f, c, i * g);
                h = o * tanhf(c);
                float *gt = a.gates + row * G;
                gt[u] = i; gt[H + u] = f; gt[2 * H + u] = g; gt[3 * H + u] = o;
                a.cs[row * H + u] = c;
                a.y[row * H + u] = h;
            } else {   /* padded: the state carried, the output 0 */
                float *gt = a.gates + row * G;
                gt[u] = 0.0f; gt[H + u] = 0.0f; gt[2 * H + u] = 0.0f; gt[3 * H + u] = 0.0f;
                a.cs[row * H + u] = 0.0f;
                a.y[row * H + u] = 0.0f;
            }
            hn = P::op(h);
            if (t + 1 < L)
#pragma unroll
                for (int q = 0; q < 4; q++) zx[q] = a.zx[(row + 1) * G + q * H + u];
        }
        if (kq < S) hbuf[(t + 1) & 1][kq][u] = hn;   /* every (s, u) of the block, padding included */
        __syncthreads();
    }
    if (cell) a.hy[(size_t)b * H + u] = h;
}

/* ---- backward: all T steps of one layer, from t = T-1 down, S sequences per block ---- */
template <typename P, int HP, int S>
__global__ static void __launch_bounds__(4 * HP, 1) rec_backward_kernel(lstm_rec_bwd_args a)
{
    typedef typename P::word word_t;
    constexpr int NT = 4 * HP, NW = rec_words<P, HP>::NW;
    __shared__ __align__(16) float dzs[S][4 * HP];   /* op(dz_t) of the block's sequences, padded gate rows q HP + u */
    __shared__ __align__(16) float dhrec[S][HP];     /* dz_{t+1} W_hh */
    CT_DYNAMIC_SHARED(word_t, wsm);    /* the image's words past RW */
    const int tid = threadIdx.x, hi = tid / 4, lane = tid % 4;   /* A: unit hi of sequence lane; B: column hi, quarter lane */
    const int b = blockIdx.x * S + lane, u = hi, H = a.H, T = a.T, G = 4 * H;
    const bool cell = lane < S && b < a.B && u < H;
    word_t w[rec_words<P, HP>::RW];    /* column hi of W_hh, quarter `lane` of the rows */
    load_image<P, HP>(w, wsm, (const word_t *)a.wb, tid);
    const int L = cell ? (a.len ? a.len[b] : T) : 0;
    float dc = 0.0f, pass = cell && a.dhy ? a.dhy[(size_t)b * H + u] : 0.0f, dbs[4] = { 0, 0, 0, 0 };
    for (int i = tid; i < S * HP; i += NT) (&dhrec[0][0])[i] = 0.0f;
    /* step t's inputs, loaded one step ahead: the gates, c_t, c_{t-1}, dy_t */
    float ng[4] = { 0, 0, 0, 0 }, nc = 0.0f, ncp = 0.0f, ndy = 0.0f;
    if (cell && T - 1 < L) {
        const size_t row = (size_t)b * T + T - 1;
#pragma unroll
        for (int q = 0; q < 4; q++) ng[q] = a.gates[row * G + q * H + u];
        nc = a.cs[row * H + u];
        ncp = T > 1 ? a.cs[(row - 1) * H + u] : 0.0f;
        ndy = a.dy ? a.dy[row * H + u] : 0.0f;
    }
    __syncthreads();
    for (int t = T - 1; t >= 0; t--) {
        /* phase A: the cell's backward, thread (u, lane) */
        if (lane < S) {
            float dz[4] = { 0, 0, 0, 0 };
            if (cell) {
                const size_t row = (size_t)b * T + t;
                const float i = ng[0], f = ng[1], g = ng[2], o = ng[3], cv = nc, cp = ncp, dyv = ndy;
                if (t - 1 >= 0 && t - 1 < L) {
#pragma unroll
                    for (int q = 0; q < 4; q++) ng[q] = a.gates[(row - 1) * G + q * H + u];
                    nc = a.cs[(row - 1) * H + u];
                    ncp = t - 1 > 0 ? a.cs[(row - 2) * H + u] : 0.0f;
                    ndy = a.dy ? a.dy[(row - 1) * H + u] : 0.0f;
                }
                if (t < L) {
                    const float dh = (dyv + dhrec[lane][u]) + pass;
                    pass = 0.0f;
                    const float tc = tanhf(cv);
                    const float dct = dc + dh * o * (1.0f - tc * tc);
                    dz[0] = dct * g * (i * (1.0f - i));
                    dz[1] = dct * cp * (f * (1.0f - f));
                    dz[2] = dct * i * (1.0f - g * g);
                    dz[3] = dh * tc * (o * (1.0f - o));
                    dc = dct * f;
                } else {
                    pass += dhrec[lane][u];
                }
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    dbs[q] += dz[q];
                    ((typename P::act *)a.dzh)[row * G + q * H + u] = P::out(dz[q]);
                }
            }
#pragma unroll
            for (int q = 0; q < 4; q++) dzs[lane][q * HP + u] = P::op(dz[q]);
        }
        __syncthreads();
        /* phase B: dh_rec = dz_t W_hh, thread (column hi, quarter lane) */
        float acc[S];
#pragma unroll
        for (int s = 0; s < S; s++) acc[s] = 0.0f;
#pragma unroll
        for (int r = 0; r < NW; r++) {
            const int p = 4 * r + lane;
            const word_t wd = word<P, HP>(w, wsm, r, tid);
            const float w0 = P::lo(wd), w1 = P::hi(wd);
#pragma unroll
            for (int s = 0; s < S; s++) {
                const float2 v = *reinterpret_cast<const float2 *>(&dzs[s][2 * p]);
                acc[s] = fmaf(w0, v.x, acc[s]);
                acc[s] = fmaf(w1, v.y, acc[s]);
            }
        }
#pragma unroll
        for (int s = 0; s < S; s++) acc[s] = lanes_sum(acc[s]);
        if (lane < S) dhrec[lane][hi] = pick<S>(acc, lane);
        __syncthreads();
    }
    if (cell)
#pragma unroll
        for (int q = 0; q < 4; q++) a.dbpart[(size_t)b * G + q * H + u] = dbs[q];
}

/* ---- the other kernels ---- */

/* image (bf16: uint32_t words; float32: pairs of floats) = the layout of lstm_rec.h */
__global__ static void pack_kernel(int bf16, int backward, void *image, const float *w_hh, int H, int HP)
{
    const int NT = ct_lstm_rec_threads(HP);
    const size_t n = (size_t)ct_lstm_rec_words(HP) * NT;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        long lo, hi;
        ct_lstm_rec_word(backward, H, HP, (int)(e / NT), (int)(e % NT), &lo, &hi);
        const float x = lo >= 0 ? w_hh[lo] : 0.0f, y = hi >= 0 ? w_hh[hi] : 0.0f;
        if (bf16) ((uint32_t *)image)[e] = (uint32_t)bf16_bits(x) | (uint32_t)bf16_bits(y) << 16;
        else ((float2 *)image)[e] = make_float2(x, y);
    }
}

/* db_ih[j] and db_hh[j] += sum_b part[b, j], b in order */
__global__ static void bias_grad_kernel(float *db_ih, float *db_hh, const float *part, int B, int n)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += part[(size_t)b * n + j];
        db_ih[j] += s;
        db_hh[j] += s;
    }
}

#endif
