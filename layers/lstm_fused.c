/* lstm_fused.c - one LSTM forward step as a single AVX-512 kernel, and the LSTM cell alone,
 * forward and backward, 16 units at a time (see lstm_fused.h). */
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
    return _mm512_scalef_ps(p, k);   /* p 2^k: k is a whole number, so the product with 2^k, rounded once */
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

/* 16 floats rounded to bf16 with core/bf16.h's formula on each lane (to nearest, ties to
 * even; a NaN cut, its quiet bit set): ct_bf16_from_float's bits, on any AVX-512 CPU. */
INLINE __m256i v_bf16(__m512 v)
{
    const __m512i x = _mm512_castps_si512(v);
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)),
                                                         _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1))), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x0040))));
}
/* The same with AVX512-BF16's VCVTNEPS2BF16 (one instruction; written as assembly so that this
 * file needs no target beyond AVX-512F: called only where the CPU has it). It gives v_bf16's
 * bits except on subnormal inputs, which it flushes to zero (core/bf16.c). */
INLINE __m256i v_bf16_cvt(__m512 v)
{
    __m256i r;
    __asm__("vcvtneps2bf16 %1, %0" : "=v"(r) : "v"(v));
    return r;
}
/* A cell's four gates (i, f, g, o) rounded: by the instruction where none of them is
 * subnormal, else all four by the formula; the same bits either way. A gate can be subnormal,
 * rarely: a tanh's output is 0 or at least 2^-24, but a sigmoid's goes down to 1/(1 + e^88),
 * about 6e-39, where z <= -88 (v_exp clamps its argument to 88). So only i, f and o are
 * tested, at once: their bits less one as unsigned integers (a subnormal's, 1 .. 0x007fffff,
 * become 0 .. 0x007ffffe; zero and every other value something larger), the least of the
 * three below 0x007fffff. One test per 16 units instead of one per gate. */
INLINE void v_bf16_gates_cvt(__m256i r[4], const __m512 y[4])
{
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i a = _mm512_sub_epi32(_mm512_castps_si512(y[0]), one), b = _mm512_sub_epi32(_mm512_castps_si512(y[1]), one);
    const __m512i m = _mm512_min_epu32(_mm512_min_epu32(a, b), _mm512_sub_epi32(_mm512_castps_si512(y[3]), one));
    const int subnormal = _mm512_cmplt_epu32_mask(m, _mm512_set1_epi32(0x007fffff)) != 0;
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) r[q] = subnormal ? v_bf16(y[q]) : v_bf16_cvt(y[q]);
}
/* 16 bf16 widened to floats (exact). */
INLINE __m512 v_widen(const uint16_t *p)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

/* The cell on 16 units of one row, as lstm.c's lstm_cell_forward: z = (acc + b_ih) + b_hh
 * (acc[q]: gate q's products), the gates, c_t = f c_{t-1} + i g (two products, then their
 * sum), h_t = o tanh(c_t). The gates go to g (gate q at g + q H), c_t and h_t to c and h
 * (the gates rounded to bf16 into g16 instead where g16 is not NULL); every pointer at the
 * first of the 16 units. With STREAM the gates are streamed past the caches (put_kept);
 * c_t and h_t, which the next step reads, are stored. CVT: the rounding by the CPU's
 * instruction (v_bf16_gates_cvt; the same bits). */
INLINE void cell16(const int HARD, const int STREAM, const int CVT, const __m512 acc[4], const float *restrict b_ih,
                   const float *restrict b_hh, const float *restrict cp, float *restrict g, uint16_t *restrict g16, int H,
                   float *restrict c, float *restrict h)
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
    __m256i r[4];
    if (g16 && CVT) v_bf16_gates_cvt(r, y);
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        if (g16 && !CVT) r[q] = v_bf16(y[q]);
        if (!g16 && g) put_kept(STREAM, g + (size_t)q * H, y[q]);
        else if (!g16) continue;   /* gates not kept: a forward with no backward after it */
        else if (STREAM) _mm256_stream_si256((__m256i *)(g16 + (size_t)q * H), r[q]);
        else _mm256_storeu_si256((__m256i *)(g16 + (size_t)q * H), r[q]);
    }
    _mm512_storeu_ps(c, ct);
    _mm512_storeu_ps(h, _mm512_mul_ps(y[3], tct));
}

/* One tile: rows [0, MROWS) of the step, units [16u, 16u + 16) (every pointer already
 * at the tile's first row and, for gate/c/h/cp/biases, its first unit). MROWS and
 * HARD are constants at each call, so the 24 accumulators live in registers.
 * HARD = PRODUCTS_ONLY stores the sums as they are (ct_lstm_fused_products). */
#define PRODUCTS_ONLY 2
INLINE void step_tile(const int MROWS, const int HARD, const int STREAM, int Il, int H, const float *restrict x,
                      const float *restrict hp, const float *restrict cp, const float *restrict panel,
                      const float *restrict b_ih, const float *restrict b_hh, float *restrict gate, float *restrict c,
                      float *restrict h)
{
    __m512 acc[MR][4];
    /* The tile's outputs are fresh memory (each step writes new rows of the cache): ask for
     * their cache lines now, for writing, so that the stores at the end do not wait on memory
     * while the products run - except, with STREAM, the gates', which the cell streams past
     * the caches (read again only by the backward). */
#pragma GCC unroll 6
    for (int i = 0; i < MROWS; i++) {
        if (!STREAM && gate)   /* (PRODUCTS_ONLY never streams) */
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) __builtin_prefetch(gate + (size_t)i * 4 * H + (size_t)q * H, 1, 3);
        if (HARD == PRODUCTS_ONLY) continue;
        __builtin_prefetch(c + (size_t)i * H, 1, 3);
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
        cell16(HARD, STREAM, 0, acc[i], b_ih, b_hh, cp + (size_t)i * H, gate ? gate + (size_t)i * 4 * H : NULL, NULL, H,
               c + (size_t)i * H, h + (size_t)i * H);
}

/* All tiles of one step, for one recurrent activation (HARD and STREAM constant per instance;
 * STREAM: the gates streamed, gate 64-byte aligned). */
INLINE void step(const int HARD, const int STREAM, int rows, int Il, int H, const float *x, const float *hprev,
                 const float *cprev, const float *wp, const float *b_ih, const float *b_hh, float *gate, float *c, float *h)
{
    const size_t G = 4 * (size_t)H;
    for (int u = 0; u < H / UB; u++) {   /* one unit block's panel stays in cache over all row tiles */
        const float *panel = wp + (size_t)u * (size_t)(Il + H) * 4 * UB;
        const size_t o = (size_t)u * UB;
        int i = 0;
#define AT(p, n) ((p) ? (p) + (n) : NULL)   /* hprev at t = 0, the cell's operands with PRODUCTS_ONLY, and gates not kept are NULL */
#define TILE(R) step_tile(R, HARD, STREAM, Il, H, x + (size_t)i * Il, AT(hprev, (size_t)i * H), AT(cprev, (size_t)i * H + o), \
                     panel, AT(b_ih, o), AT(b_hh, o), AT(gate, (size_t)i * G + o), AT(c, (size_t)i * H + o), \
                     AT(h, (size_t)i * H + o))
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
    if (STREAM) _mm_sfence();   /* the streamed stores ordered before whatever follows */
}

#define FUSED_STEP(NAME, HARD, STREAM) \
    static CT_AVX512 __attribute__((noinline)) \
    void NAME(int rows, int Il, int H, const float *x, const float *hprev, const float *cprev, const float *wp, \
              const float *b_ih, const float *b_hh, float *gate, float *c, float *h) \
    { step(HARD, STREAM, rows, Il, H, x, hprev, cprev, wp, b_ih, b_hh, gate, c, h); }
FUSED_STEP(fused_step_sigmoid, 0, 0)
FUSED_STEP(fused_step_hard, 1, 0)
FUSED_STEP(fused_step_sigmoid_stream, 0, 1)
FUSED_STEP(fused_step_hard_stream, 1, 1)
#undef FUSED_STEP

static CT_AVX512 __attribute__((noinline))
void fused_products(int rows, int Il, int H, const float *x, const float *hprev, const float *wp, float *z)
{ step(PRODUCTS_ONLY, 0, rows, Il, H, x, hprev, NULL, wp, NULL, NULL, z, NULL, NULL); }

void ct_lstm_fused_products(int rows, int Il, int H, const float *x, const float *hprev, const float *wp, float *z)
{
    CT_ASSERT(ct_lstm_fused_ok(H) && Il >= 1);
    if (rows >= 1) fused_products(rows, Il, H, x, hprev, wp, z);
}

/* The cell alone over rows x n units: the products z (without the biases) in, the gates to
 * gate (which may be z) or, rounded to bf16, to g16 (where g16 is not NULL). */
INLINE void cell_rows(const int HARD, const int STREAM, const int CVT, int rows, int n, int H, const float *z, size_t ldz,
                      const float *cprev, const float *b_ih, const float *b_hh, float *gate, uint16_t *g16, size_t ldg,
                      float *c, float *h)
{
    for (int r = 0; r < rows; r++) {
        const float *zr = z + (size_t)r * ldz;
        float *gr = g16 || !gate ? NULL : gate + (size_t)r * ldg;
        uint16_t *g16r = g16 ? g16 + (size_t)r * ldg : NULL;
        const size_t o = (size_t)r * H;
        for (int u = 0; u < n; u += UB) {
            __m512 acc[4];
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[q] = _mm512_loadu_ps(zr + (size_t)q * H + u);
            cell16(HARD, STREAM, CVT, acc, b_ih + u, b_hh + u, cprev + o + u, gr ? gr + u : NULL, g16r ? g16r + u : NULL, H,
                   c + o + u, h + o + u);
        }
    }
    if (STREAM) _mm_sfence();   /* the streamed stores ordered before whatever follows */
}

#define CELL(NAME, HARD, STREAM, CVT) \
    static CT_AVX512 __attribute__((noinline)) \
    void NAME(int rows, int n, int H, const float *z, size_t ldz, const float *cprev, const float *b_ih, const float *b_hh, \
              float *gate, uint16_t *g16, size_t ldg, float *c, float *h) \
    { cell_rows(HARD, STREAM, CVT, rows, n, H, z, ldz, cprev, b_ih, b_hh, gate, g16, ldg, c, h); }
CELL(cell_sigmoid, 0, 0, 0)
CELL(cell_hard, 1, 0, 0)
CELL(cell_sigmoid_stream, 0, 1, 0)
CELL(cell_hard_stream, 1, 1, 0)
CELL(cell_sigmoid_stream_cvt, 0, 1, 1)   /* bf16 training's: the gates rounded by the CPU's instruction */
#undef CELL

static int cpu_has_bf16_cvt(void)
{
    static int has = -1;   /* every thread finds the same: a relaxed store is enough */
    int h = __atomic_load_n(&has, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx512bf16");
        __atomic_store_n(&has, h, __ATOMIC_RELAXED);
    }
    return h;
}

void ct_lstm_fused_cell(int rows, int n, int H, const float *z, size_t ldz, const float *cprev, const float *b_ih,
                        const float *b_hh, float *gate, uint16_t *gate16, size_t ldg, float *c, float *h, int hard)
{
    CT_ASSERT(ct_lstm_fused_ok(H) && n % UB == 0 && n <= H && ldz >= 3 * (size_t)H + (size_t)n && ldg >= 3 * (size_t)H + (size_t)n);
    CT_ASSERT(!(gate && gate16));
    if (rows < 1) return;
    /* streamed where every store is a whole aligned 64 bytes (32 for the bf16 gates: each
     * 64-byte line is two such stores, one after the other), and not in place (z read back) */
    const int stream = (gate16 ? (uintptr_t)gate16 % 32 == 0 : gate != z && (uintptr_t)gate % 64 == 0) && ldg % UB == 0 && H % UB == 0;
    if (stream && gate16 && !hard && cpu_has_bf16_cvt())
        cell_sigmoid_stream_cvt(rows, n, H, z, ldz, cprev, b_ih, b_hh, gate, gate16, ldg, c, h);
    else if (stream) (hard ? cell_hard_stream : cell_sigmoid_stream)(rows, n, H, z, ldz, cprev, b_ih, b_hh, gate, gate16, ldg, c, h);
    else        (hard ? cell_hard : cell_sigmoid)(rows, n, H, z, ldz, cprev, b_ih, b_hh, gate, gate16, ldg, c, h);
}

/* The backward cell of one row, as lstm.c's lstm_cell_backward, operation for operation
 * (equations (1)-(3) of lstm.c), 16 units at a time; the gates read as floats, or as bf16
 * (g16) and widened; tanh(c_t) made again from c_t by the forward's v_tanh (the same bits).
 * WITH_DS: the output part s ds enters dh. */
INLINE void cell_backward_row(const int HARD, const int WITH_DS, float *restrict dz, float *restrict db, float *restrict dh,
                              float *restrict dc, const float *restrict ds, float s, const float *restrict gate,
                              const uint16_t *restrict g16, const float *restrict c, const float *restrict cprev, int H)
{
    const __m512 one = _mm512_set1_ps(1.0f), vs = _mm512_set1_ps(s);
    for (int j = 0; j < H; j += UB) {
        __m512 y[4];
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) y[q] = g16 ? v_widen(g16 + (size_t)q * H + j) : _mm512_loadu_ps(gate + (size_t)q * H + j);
        const __m512 i = y[0], f = y[1], g = y[2], o = y[3];
        const __m512 tct = v_tanh(_mm512_loadu_ps(c + j));
        __m512 dht = _mm512_loadu_ps(dh + j);
        if (WITH_DS) dht = _mm512_add_ps(dht, _mm512_mul_ps(vs, _mm512_loadu_ps(ds + j)));                          /* (1) */
        const __m512 dct = _mm512_add_ps(_mm512_loadu_ps(dc + j),
                                         _mm512_mul_ps(_mm512_mul_ps(dht, o), _mm512_sub_ps(one, _mm512_mul_ps(tct, tct))));   /* (2) */
        __m512 ri, rf, ro;
        if (HARD) {   /* 0.2 where 0 < y < 1, else 0 */
            const __m512 zero = _mm512_setzero_ps(), fifth = _mm512_set1_ps(0.2f);
            ri = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(i, zero, _CMP_GT_OQ) & _mm512_cmp_ps_mask(i, one, _CMP_LT_OQ), fifth);
            rf = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(f, zero, _CMP_GT_OQ) & _mm512_cmp_ps_mask(f, one, _CMP_LT_OQ), fifth);
            ro = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(o, zero, _CMP_GT_OQ) & _mm512_cmp_ps_mask(o, one, _CMP_LT_OQ), fifth);
        } else {      /* y (1 - y) */
            ri = _mm512_mul_ps(i, _mm512_sub_ps(one, i));
            rf = _mm512_mul_ps(f, _mm512_sub_ps(one, f));
            ro = _mm512_mul_ps(o, _mm512_sub_ps(one, o));
        }
        __m512 d[4];
        d[0] = _mm512_mul_ps(_mm512_mul_ps(dct, g), ri);                                                            /* (3) */
        d[1] = _mm512_mul_ps(_mm512_mul_ps(dct, _mm512_loadu_ps(cprev + j)), rf);
        d[2] = _mm512_mul_ps(_mm512_mul_ps(dct, i), _mm512_sub_ps(one, _mm512_mul_ps(g, g)));
        d[3] = _mm512_mul_ps(_mm512_mul_ps(dht, tct), ro);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            const size_t at = (size_t)q * H + j;
            _mm512_storeu_ps(dz + at, d[q]);
            _mm512_storeu_ps(db + at, _mm512_add_ps(_mm512_loadu_ps(db + at), d[q]));
        }
        _mm512_storeu_ps(dc + j, _mm512_mul_ps(dct, f));                                                              /* dc_{t-1} gets dc_t f_t */
        _mm512_storeu_ps(dh + j, _mm512_setzero_ps());                                                                /* dh_{t-1}: the product adds it */
    }
}

#define CELL_BACKWARD(NAME, HARD, WITH_DS) \
    static CT_AVX512 __attribute__((noinline)) \
    void NAME(float *dz, float *db, float *dh, float *dc, const float *ds, float s, const float *gate, const uint16_t *g16, \
              const float *c, const float *cprev, int H) \
    { cell_backward_row(HARD, WITH_DS, dz, db, dh, dc, ds, s, gate, g16, c, cprev, H); }
CELL_BACKWARD(cell_backward_sigmoid, 0, 0)
CELL_BACKWARD(cell_backward_sigmoid_ds, 0, 1)
CELL_BACKWARD(cell_backward_hard, 1, 0)
CELL_BACKWARD(cell_backward_hard_ds, 1, 1)
#undef CELL_BACKWARD

void ct_lstm_fused_cell_backward(float *dz, float *db, float *dh, float *dc, const float *ds, float s, const float *gate,
                                 const uint16_t *gate16, const float *c, const float *cprev, int H, int hard)
{
    CT_ASSERT(ct_lstm_fused_ok(H) && !gate != !gate16);
    if (hard) (ds ? cell_backward_hard_ds : cell_backward_hard)(dz, db, dh, dc, ds, s, gate, gate16, c, cprev, H);
    else      (ds ? cell_backward_sigmoid_ds : cell_backward_sigmoid)(dz, db, dh, dc, ds, s, gate, gate16, c, cprev, H);
}

void ct_lstm_fused_step(int rows, int Il, int H, const float *x, const float *hprev, const float *cprev,
                        const float *wp, const float *b_ih, const float *b_hh,
                        float *gate, float *c, float *h, int hard)
{
    CT_ASSERT(ct_lstm_fused_ok(H) && Il >= 1);
    if (rows < 1) return;
    /* the gates streamed where each of their stores is a whole aligned 64 bytes (H is a
     * multiple of 16: with the base aligned, every row and unit block is) */
    if ((uintptr_t)gate % 64 == 0)
        (hard ? fused_step_hard_stream : fused_step_sigmoid_stream)(rows, Il, H, x, hprev, cprev, wp, b_ih, b_hh, gate, c, h);
    else
        (hard ? fused_step_hard : fused_step_sigmoid)(rows, Il, H, x, hprev, cprev, wp, b_ih, b_hh, gate, c, h);
}

#else   /* not x86-64: ct_lstm_fused_ok() is 0 (ct_gemm_packed_available() is), lstm.c never calls this */

void ct_lstm_fused_step(int rows, int Il, int H, const float *x, const float *hprev, const float *cprev,
                        const float *wp, const float *b_ih, const float *b_hh,
                        float *gate, float *c, float *h, int hard)
{
    (void)rows; (void)Il; (void)H; (void)x; (void)hprev; (void)cprev; (void)wp; (void)b_ih; (void)b_hh;
    (void)gate; (void)c; (void)h; (void)hard;
    CT_ASSERT(0);
}

void ct_lstm_fused_products(int rows, int Il, int H, const float *x, const float *hprev, const float *wp, float *z)
{
    (void)rows; (void)Il; (void)H; (void)x; (void)hprev; (void)wp; (void)z;
    CT_ASSERT(0);
}

void ct_lstm_fused_cell(int rows, int n, int H, const float *z, size_t ldz, const float *cprev, const float *b_ih,
                        const float *b_hh, float *gate, uint16_t *gate16, size_t ldg, float *c, float *h, int hard)
{
    (void)rows; (void)n; (void)H; (void)z; (void)ldz; (void)cprev; (void)b_ih; (void)b_hh; (void)gate; (void)gate16; (void)ldg;
    (void)c; (void)h; (void)hard;
    CT_ASSERT(0);
}

void ct_lstm_fused_cell_backward(float *dz, float *db, float *dh, float *dc, const float *ds, float s, const float *gate,
                                 const uint16_t *gate16, const float *c, const float *cprev, int H, int hard)
{
    (void)dz; (void)db; (void)dh; (void)dc; (void)ds; (void)s; (void)gate; (void)gate16; (void)c; (void)cprev; (void)H; (void)hard;
    CT_ASSERT(0);
}

#endif
