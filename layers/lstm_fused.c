/* lstm_fused.c - one LSTM forward step as a single AVX-512 kernel (see lstm_fused.h). */
#include <stdint.h>
#include <string.h>
#include "layers/lstm_fused.h"
#include "layers/gemm_packed.h"
#include "core/error.h"

#define UB 16   /* hidden units per panel: 4 gates x 16 units = 64 columns = 4 AVX-512 registers */
#define MR 6    /* rows per tile: 6 x 4 accumulators + 4 panel registers + 1 broadcast <= 32 registers */

/* AVX-512 only: with AVX2's 16 registers of 8 floats the step is no faster fused (a
 * tile of 2 rows by 4 gates of 8 units measured 1.6x slower than the plain step, one of
 * 6 rows making two gates at a time 3% slower), so AVX2 CPUs run the plain step on the
 * AVX2 packed products. */
int ct_lstm_fused_ok(int H) { return H > 0 && H % UB == 0 && ct_kernels_get() == CT_KERNELS_AVX512; }

size_t ct_lstm_fused_pack_floats(int Il, int H) { return (size_t)(H / UB) * (size_t)(Il + H) * 4 * UB; }

void ct_lstm_fused_pack(float *wp, const float *w_ih, const float *w_hh, int Il, int H)
{
    const int K = Il + H;
    for (int u = 0; u < H / UB; u++)
        for (int k = 0; k < K; k++) {
            float *row = wp + ((size_t)u * K + k) * 4 * UB;          /* [4 gates][16 units] */
            for (int q = 0; q < 4; q++)
                for (int l = 0; l < UB; l++) {
                    size_t n = (size_t)q * H + (size_t)u * UB + l;    /* row of W = [W_ih | W_hh] */
                    row[q * UB + l] = k < Il ? w_ih[n * Il + k] : w_hh[n * H + (k - Il)];
                }
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CT_AVX512 __attribute__((target("avx512f,prfchw")))   /* prfchw: prefetch for writing (every AVX-512 CPU has it) */
#define INLINE static inline __attribute__((always_inline)) CT_AVX512

/* lstm.c's lstm_expf, 16 lanes at a time, operation for operation: clamp to
 * [-87, 88], k = round(x / ln 2), r = x - k ln 2 (ln 2 in two parts), e^r from
 * the degree-6 polynomial, times 2^k built in the exponent bits. */
INLINE __m512 v_exp(__m512 x)
{
    x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x);   /* a NaN stays a NaN: max/min return the second operand then */
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), x);
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    __m512 k = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), magic), magic);
    __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-0.693359375f), x);
    r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(k), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

INLINE __m512 v_neg(__m512 x) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))); }
/* 1 / (1 + e^-x) */
INLINE __m512 v_sigmoid(__m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, v_exp(v_neg(x))));
}
/* 1 - 2 / (1 + e^2x) */
INLINE __m512 v_tanh(__m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(one, v_exp(_mm512_mul_ps(_mm512_set1_ps(2.0f), x)))));
}
/* Keras 2's hard sigmoid: clamp(0.2 x + 0.5, 0, 1) */
INLINE __m512 v_hard_sigmoid(__m512 x)
{
    __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(0.2f), x, _mm512_set1_ps(0.5f));
    y = _mm512_max_ps(_mm512_setzero_ps(), y);
    return _mm512_min_ps(_mm512_set1_ps(1.0f), y);
}

/* Stores of values no one reads before the backward: streamed past the caches with STREAM
 * (64-byte aligned addresses), or plain stores. */
INLINE void put_kept(const int STREAM, float *p, __m512 v) { if (STREAM) _mm512_stream_ps(p, v); else _mm512_storeu_ps(p, v); }

/* The cell on 16 units of one row, as lstm.c's lstm_cell_forward: z = (acc + b_ih) + b_hh
 * (acc[q]: gate q's products), the gates, c_t = f c_{t-1} + i g (two products, then their
 * sum), h_t = o tanh(c_t). The gates go to g (gate q at g + q H), c_t, tanh(c_t) and h_t
 * to c, tc and h; every pointer at the first of the 16 units. With STREAM the gates and
 * tanh(c_t) are streamed past the caches (put_kept); c_t and h_t, which the next step
 * reads, are stored. */
INLINE void cell16(const int HARD, const int STREAM, const __m512 acc[4], const float *restrict b_ih,
                      const float *restrict b_hh, const float *restrict cp, float *restrict g, int H,
                      float *restrict c, float *restrict tc, float *restrict h)
{
    __m512 z[4], y[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++)
        z[q] = _mm512_add_ps(_mm512_add_ps(acc[q], _mm512_loadu_ps(b_ih + (size_t)q * H)), _mm512_loadu_ps(b_hh + (size_t)q * H));
    y[0] = HARD ? v_hard_sigmoid(z[0]) : v_sigmoid(z[0]);
    y[1] = HARD ? v_hard_sigmoid(z[1]) : v_sigmoid(z[1]);
    y[2] = v_tanh(z[2]);
    y[3] = HARD ? v_hard_sigmoid(z[3]) : v_sigmoid(z[3]);
    const __m512 ct = _mm512_add_ps(_mm512_mul_ps(y[1], _mm512_loadu_ps(cp)), _mm512_mul_ps(y[0], y[2]));
    const __m512 tct = v_tanh(ct);
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) put_kept(STREAM, g + (size_t)q * H, y[q]);
    _mm512_storeu_ps(c, ct);
    put_kept(STREAM, tc, tct);
    _mm512_storeu_ps(h, _mm512_mul_ps(y[3], tct));
}


/* One tile: rows [0, MROWS) of the step, units [16u, 16u + 16) (every pointer already
 * at the tile's first row and, for gate/c/tc/h/cp/biases, its first unit). MROWS and
 * HARD are constants at each call, so the 24 accumulators live in registers.
 * HARD = PRODUCTS_ONLY stores the sums as they are (ct_lstm_fused_products). */
#define PRODUCTS_ONLY 2
INLINE void step_tile(const int MROWS, const int HARD, int Il, int H, const float *restrict x, const float *restrict hp,
                      const float *restrict cp, const float *restrict panel, const float *restrict b_ih,
                      const float *restrict b_hh, float *restrict gate, float *restrict c, float *restrict tc, float *restrict h)
{
    __m512 acc[MR][4];
    /* The tile's outputs are fresh memory (each step writes new rows of the cache): ask for
     * their 7 cache lines per row now, for writing, so that the stores at the end do not
     * wait on memory while the products run. */
#pragma GCC unroll 6
    for (int i = 0; i < MROWS; i++) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) __builtin_prefetch(gate + (size_t)i * 4 * H + (size_t)q * H, 1, 3);
        if (HARD == PRODUCTS_ONLY) continue;
        __builtin_prefetch(c + (size_t)i * H, 1, 3);
        __builtin_prefetch(tc + (size_t)i * H, 1, 3);
        __builtin_prefetch(h + (size_t)i * H, 1, 3);
    }
#pragma GCC unroll 6
    for (int i = 0; i < MROWS; i++)
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) acc[i][q] = _mm512_setzero_ps();
    /* z = [x_t | h_{t-1}] [W_ih | W_hh]^T: k over the input, then over the hidden state
     * (h_{-1} = 0: nothing to add at t = 0); the panel's rows follow the same k */
    const float *seg[2] = { x, hp };
    const size_t ld[2] = { (size_t)Il, (size_t)H };
    const int len[2] = { Il, hp ? H : 0 };
    const float *pk = panel;
    for (int sg = 0; sg < 2; sg++) {
        const float *restrict A = seg[sg];
        for (int k = 0; k < len[sg]; k++, pk += 4 * UB) {
            __m512 b[4];
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) b[q] = _mm512_loadu_ps(pk + q * UB);
#pragma GCC unroll 6
            for (int i = 0; i < MROWS; i++) {
                const __m512 a = _mm512_set1_ps(A[(size_t)i * ld[sg] + k]);
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) acc[i][q] = _mm512_fmadd_ps(a, b[q], acc[i][q]);
            }
        }
    }
    if (HARD == PRODUCTS_ONLY) {
#pragma GCC unroll 6
        for (int i = 0; i < MROWS; i++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) _mm512_storeu_ps(gate + (size_t)i * 4 * H + (size_t)q * H, acc[i][q]);
        return;
    }
#pragma GCC unroll 6
    for (int i = 0; i < MROWS; i++)
        cell16(HARD, 0, acc[i], b_ih, b_hh, cp + (size_t)i * H, gate + (size_t)i * 4 * H, H, c + (size_t)i * H,
               tc + (size_t)i * H, h + (size_t)i * H);
}

/* All tiles of one step, for one recurrent activation (HARD constant per instance). */
INLINE void step(const int HARD, int rows, int Il, int H, const float *x, const float *hprev, const float *cprev,
                 const float *wp, const float *b_ih, const float *b_hh, float *gate, float *c, float *tc, float *h)
{
    const size_t G = 4 * (size_t)H;
    for (int u = 0; u < H / UB; u++) {   /* one unit block's panel stays in cache over all row tiles */
        const float *panel = wp + (size_t)u * (size_t)(Il + H) * 4 * UB;
        const size_t o = (size_t)u * UB;
        int i = 0;
#define AT(p, n) ((p) ? (p) + (n) : NULL)   /* hprev at t = 0, and the cell's operands with PRODUCTS_ONLY, are NULL */
#define TILE(R) step_tile(R, HARD, Il, H, x + (size_t)i * Il, AT(hprev, (size_t)i * H), AT(cprev, (size_t)i * H + o), \
                     panel, AT(b_ih, o), AT(b_hh, o), gate + (size_t)i * G + o, AT(c, (size_t)i * H + o), \
                     AT(tc, (size_t)i * H + o), AT(h, (size_t)i * H + o))
        for (; i + MR <= rows; i += MR) TILE(MR);
        switch (rows - i) {
        case 1: TILE(1); break;
        case 2: TILE(2); break;
        case 3: TILE(3); break;
        case 4: TILE(4); break;
        case 5: TILE(5); break;
        default: break;
        }
#undef TILE
#undef AT
    }
}

static CT_AVX512 __attribute__((noinline))
void fused_step_sigmoid(int rows, int Il, int H, const float *x, const float *hprev, const float *cprev, const float *wp,
                  const float *b_ih, const float *b_hh, float *gate, float *c, float *tc, float *h)
{ step(0, rows, Il, H, x, hprev, cprev, wp, b_ih, b_hh, gate, c, tc, h); }

static CT_AVX512 __attribute__((noinline))
void fused_step_hard(int rows, int Il, int H, const float *x, const float *hprev, const float *cprev, const float *wp,
               const float *b_ih, const float *b_hh, float *gate, float *c, float *tc, float *h)
{ step(1, rows, Il, H, x, hprev, cprev, wp, b_ih, b_hh, gate, c, tc, h); }

static CT_AVX512 __attribute__((noinline))
void fused_products(int rows, int Il, int H, const float *x, const float *hprev, const float *wp, float *z)
{ step(PRODUCTS_ONLY, rows, Il, H, x, hprev, NULL, wp, NULL, NULL, z, NULL, NULL, NULL); }

void ct_lstm_fused_products(int rows, int Il, int H, const float *x, const float *hprev, const float *wp, float *z)
{
    CT_ASSERT(ct_lstm_fused_ok(H) && Il >= 1);
    if (rows >= 1) fused_products(rows, Il, H, x, hprev, wp, z);
}

/* The cell alone over rows x n units: the products z (without the biases) in, the gates to
 * gate (which may be z). */
INLINE void cell_rows(const int HARD, const int STREAM, int rows, int n, int H, const float *z, size_t ldz, const float *cprev,
                      const float *b_ih, const float *b_hh, float *gate, size_t ldg, float *c, float *tc, float *h)
{
    for (int r = 0; r < rows; r++) {
        const float *zr = z + (size_t)r * ldz;
        float *gr = gate + (size_t)r * ldg;
        const size_t o = (size_t)r * H;
        for (int u = 0; u < n; u += UB) {
            __m512 acc[4];
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[q] = _mm512_loadu_ps(zr + (size_t)q * H + u);
            cell16(HARD, STREAM, acc, b_ih + u, b_hh + u, cprev + o + u, gr + u, H, c + o + u, tc + o + u, h + o + u);
        }
    }
    if (STREAM) _mm_sfence();   /* the streamed stores ordered before whatever follows */
}

#define CELL(NAME, HARD, STREAM) \
    static CT_AVX512 __attribute__((noinline)) \
    void NAME(int rows, int n, int H, const float *z, size_t ldz, const float *cprev, const float *b_ih, const float *b_hh, \
              float *gate, size_t ldg, float *c, float *tc, float *h) \
    { cell_rows(HARD, STREAM, rows, n, H, z, ldz, cprev, b_ih, b_hh, gate, ldg, c, tc, h); }
CELL(cell_sigmoid, 0, 0)
CELL(cell_hard, 1, 0)
CELL(cell_sigmoid_stream, 0, 1)
CELL(cell_hard_stream, 1, 1)
#undef CELL

void ct_lstm_fused_cell(int rows, int n, int H, const float *z, size_t ldz, const float *cprev, const float *b_ih,
                        const float *b_hh, float *gate, size_t ldg, float *c, float *tc, float *h, int hard)
{
    CT_ASSERT(ct_lstm_fused_ok(H) && n % UB == 0 && n <= H && ldz >= 3 * (size_t)H + (size_t)n && ldg >= 3 * (size_t)H + (size_t)n);
    if (rows < 1) return;
    /* streamed where every store is a whole aligned 64 bytes, and not in place (z read back) */
    const int stream = gate != z && ((uintptr_t)gate | (uintptr_t)tc) % 64 == 0 && ldg % UB == 0 && H % UB == 0;
    if (stream) (hard ? cell_hard_stream : cell_sigmoid_stream)(rows, n, H, z, ldz, cprev, b_ih, b_hh, gate, ldg, c, tc, h);
    else        (hard ? cell_hard : cell_sigmoid)(rows, n, H, z, ldz, cprev, b_ih, b_hh, gate, ldg, c, tc, h);
}

void ct_lstm_fused_step(int rows, int Il, int H, const float *x, const float *hprev, const float *cprev,
                        const float *wp, const float *b_ih, const float *b_hh,
                        float *gate, float *c, float *tc, float *h, int hard)
{
    CT_ASSERT(ct_lstm_fused_ok(H) && Il >= 1);
    if (rows < 1) return;
    if (hard) fused_step_hard(rows, Il, H, x, hprev, cprev, wp, b_ih, b_hh, gate, c, tc, h);
    else      fused_step_sigmoid(rows, Il, H, x, hprev, cprev, wp, b_ih, b_hh, gate, c, tc, h);
}

#else   /* not x86-64: ct_lstm_fused_ok() is 0 (ct_gemm_packed_available() is), lstm.c never calls this */

void ct_lstm_fused_step(int rows, int Il, int H, const float *x, const float *hprev, const float *cprev,
                        const float *wp, const float *b_ih, const float *b_hh,
                        float *gate, float *c, float *tc, float *h, int hard)
{
    (void)rows; (void)Il; (void)H; (void)x; (void)hprev; (void)cprev; (void)wp; (void)b_ih; (void)b_hh;
    (void)gate; (void)c; (void)tc; (void)h; (void)hard;
    CT_ASSERT(0);
}

void ct_lstm_fused_products(int rows, int Il, int H, const float *x, const float *hprev, const float *wp, float *z)
{
    (void)rows; (void)Il; (void)H; (void)x; (void)hprev; (void)wp; (void)z;
    CT_ASSERT(0);
}

void ct_lstm_fused_cell(int rows, int n, int H, const float *z, size_t ldz, const float *cprev, const float *b_ih,
                        const float *b_hh, float *gate, size_t ldg, float *c, float *tc, float *h, int hard)
{
    (void)rows; (void)n; (void)H; (void)z; (void)ldz; (void)cprev; (void)b_ih; (void)b_hh; (void)gate; (void)ldg;
    (void)c; (void)tc; (void)h; (void)hard;
    CT_ASSERT(0);
}

#endif
