/* conv2d_c1.c - conv2d for an input of one channel, stride 1, directly on AVX-512
 * (see conv2d_c1.h for when and why). Per image n, with Hp = H + 2p, Wp = W + 2p,
 * K = KH*KW taps numbered t = ky*KW + kx:
 *
 *   img [Hp, Wp]         the image with its zero border (rounded to bf16 in bf16), in scratch
 *   forward   out[o, y, x]  = sum_t w[o, t] * img[y + ky, x + kx]            (+ b[o] last)
 *   backward  dW_n[o, t]    = sum_{y, x} dout[o, y, x] * img[y + ky, x + kx]
 *             din[y, x]     = sum_o sum_t w[o, KH-1-ky, KW-1-kx] * doutp[o, y + ky, x + kx]
 *             with doutp [OC, H + KH - 1, W + KW - 1] dout behind a border of KH-1-p rows
 *             and KW-1-p columns of zeros (the full correlation, read as a plain one)
 *
 * Forward: the rows of out are made C1_ROWS = 8 at a time, a run of 16 positions x .. x+15
 * of each (one AVX-512 vector; the last run of a row masked). Tap (ky, kx) of output row y
 * reads img's row y + ky at x + kx, so one unaligned load of img's row j serves the rows
 * j - ky for every ky: 8 rows of a 3x3 kernel take 10 x 3 loads for 72 FMAs, in 8 independent
 * sums (correlate_rows). The block, 8 x OW floats in L1, is then written to out with
 * non-temporal stores: out is written once and read back by the next layer long after, so
 * its lines need not be read into the cache first (ct_conv2d_c1_stream_copy). For a batchnorm right
 * after, each block's statistics are taken from L1 before it is written, and merged into its
 * plane's (ct_bn_stats_add).
 *
 * Backward: each plane of dout is read once (prefetched a little ahead); each tap keeps one
 * register of 16 lane sums of dout x the shifted image over the whole image, added up at the
 * end (tap_sums). din, which a first layer never needs, is the forward's correlation over
 * dout's padded planes with the flipped filters.
 *
 * Cost (the siamese-cnn's conv16k3p1, 100 x 40 crops): per 16 outputs about 9 FMAs and 4
 * loads forward, 9 FMAs and 10 loads backward, from an image that stays in L1; the layer's
 * time is mostly writing its 16 planes (256 KB per crop) and reading dout back.
 *
 * Order of the sums: out and din take the taps (and output channels) in order, and add b
 * last (as conv2d.c's paths add it after the product); dW_n's 16 lanes are added lane 0
 * first. These differ from the im2col path's order only in the last bits
 * (tests/test_conv2d.c compares them); every image is computed alone, so out and din have
 * the same bits on any number of workers.
 */
#include <stdint.h>
#include <string.h>
#include "core/bf16.h"
#include "core/error.h"
#include "layers/batchnorm.h"   /* ct_bn_stats_add: the statistics of each plane, block by block */
#include "layers/conv2d_c1.h"

int ct_conv2d_c1_fits(const conv2d_dims *d)
{
    return d->C == 1 && d->stride == 1 && d->pad <= d->KH - 1 && d->pad <= d->KW - 1 &&
           d->KH * d->KW <= CT_CONV2D_C1_MAX_TAPS;
}

static size_t round16(size_t f) { return (f + 15) / 16 * 16; }
#define C1_ROWS 8   /* output rows computed together (correlate_rows) */
/* img: Hp rows of Wp, and 16 floats more so that a vector load past the last row stays inside */
static size_t img_floats(const conv2d_dims *d) { return round16((size_t)(d->H + 2 * d->pad) * (d->W + 2 * d->pad) + 16); }
static int doutp_rows(const conv2d_dims *d) { return d->H + d->KH - 1; }
static int doutp_cols(const conv2d_dims *d) { return d->W + d->KW - 1; }
static size_t doutp_floats(const conv2d_dims *d) { return round16((size_t)d->OC * doutp_rows(d) * doutp_cols(d) + 16); }

/* the flipped filters [OC, K], for din */
static size_t wflip_floats(const conv2d_dims *d) { return round16((size_t)d->OC * d->KH * d->KW); }

/* a block of output rows, for the forward */
static size_t plane_floats(const conv2d_dims *d) { return round16((size_t)C1_ROWS * d->OW); }

size_t ct_conv2d_c1_worker_floats(const conv2d_dims *d, int with_din)
{
    const size_t fwd = plane_floats(d), bwd = with_din ? doutp_floats(d) + wflip_floats(d) : 0;
    return img_floats(d) + (fwd > bwd ? fwd : bwd);
}

/* after the padded image, where din's padded planes go: room for at least one plane of dout
 * (OH <= H + KH - 1 and OW <= W + KW - 1, as pad <= KH - 1 and KW - 1) */
float *ct_conv2d_c1_plane_buffer(float *scratch, const conv2d_dims *d)
{
    return scratch + img_floats(d);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CT_AVX512 __attribute__((target("avx512f")))
#define C1_INLINE static inline __attribute__((always_inline)) CT_AVX512

/* Each lane's float rounded to the nearest bf16 (ties to even) and widened back: the bits
 * of ct_float_from_bf16(ct_bf16_from_float(x)), NaN cut with its quiet bit set. */
C1_INLINE __m512 round_bf16(__m512 v)
{
    const __m512i x = _mm512_castps_si512(v), top = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)),
                                                        _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1))), top);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    const __m512i cut = _mm512_and_si512(_mm512_or_si512(x, _mm512_set1_epi32(0x00400000)), top);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(nan, r, cut));
}

C1_INLINE __m512 load_run(const float *p, __mmask16 m, int round)
{
    const __m512 v = _mm512_maskz_loadu_ps(m, p);
    return round ? round_bf16(v) : v;
}

/* dst [rows, cols] with a zero border of top/left rows/columns around src [h, w] (dst's other
 * entries zero too), rounded to bf16 if `round`; then 16 zeros after the last row. */
static CT_AVX512 void c1_pad_plane(float *dst, int rows, int cols, const float *src, int h, int w, int top, int left, int round)
{
    memset(dst, 0, ((size_t)rows * cols + 16) * sizeof *dst);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x += 16) {
            const __mmask16 m = (__mmask16)(w - x >= 16 ? 0xffff : (1u << (w - x)) - 1);
            _mm512_mask_storeu_ps(dst + (size_t)(y + top) * cols + left + x, m, load_run(src + (size_t)y * w + x, m, round));
        }
}

/* Rows y < nr (at most C1_ROWS) of a correlation with a kh x kw kernel, each of n values:
 *   out[y*ldo + i] = sum over planes q < nq and taps (ky, kx) of
 *                    wt[(q*kh + ky)*kw + kx] * src[q*plane + (y + ky)*lds + kx + i]
 * (+ bias if has_bias; then max(., 0) if relu: y > 0 ? y : 0, activation.h's relu), planes
 * and taps in order. A run of 16 values of every row at once,
 * one input row at a time: a load of src's row j at kx serves the output rows j - ky for
 * every ky, so the nr rows' kh*kw taps take (nr + kh - 1)*kw loads instead of nr*kh*kw (30
 * instead of 72 for 3x3 and 8 rows), and the nr sums are independent chains of FMAs.
 * Inlined with kh = kw = 3 and nr = C1_ROWS for 3x3 kernels, so that the loops unroll and
 * the tests on r fold away. */
C1_INLINE void correlate_rows(float *out, int ldo, int nr, int n, const float *src, int lds, size_t plane, int nq,
                              int kh, int kw, const float *wt, int has_bias, float bias, int relu)
{
    for (int x = 0; x < n; x += 16) {
        const __mmask16 m = (__mmask16)(n - x >= 16 ? 0xffff : (1u << (n - x)) - 1);
        __m512 acc[C1_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
        for (int q = 0; q < nq; q++)
#pragma GCC unroll 16
            for (int j = 0; j < nr + kh - 1; j++)        /* src's row j of this block */
#pragma GCC unroll 4
                for (int kx = 0; kx < kw; kx++) {
                    const __m512 v = _mm512_loadu_ps(src + q * plane + (size_t)j * lds + kx + x);
#pragma GCC unroll 4
                    for (int ky = kh - 1; ky >= 0; ky--) {   /* output row j - ky: its taps in order */
                        const int r = j - ky;
                        if (r >= 0 && r < nr)
                            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(wt[(q * kh + ky) * kw + kx]), v, acc[r]);
                    }
                }
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            __m512 v = has_bias ? _mm512_add_ps(acc[r], _mm512_set1_ps(bias)) : acc[r];
            if (relu) v = _mm512_max_ps(v, _mm512_setzero_ps());   /* the second operand where v is NaN or a zero: 0 */
            _mm512_mask_storeu_ps(out + (size_t)r * ldo + x, m, v);
        }
    }
}

/* All rows of a correlation (correlate_rows' arguments), C1_ROWS at a time. */
C1_INLINE void correlate(float *out, int ldo, int rows, int n, const float *src, int lds, size_t plane, int nq,
                         int kh, int kw, const float *wt, int has_bias, float bias, int relu)
{
    int y = 0;
    for (; y + C1_ROWS <= rows; y += C1_ROWS)
        correlate_rows(out + (size_t)y * ldo, ldo, C1_ROWS, n, src + (size_t)y * lds, lds, plane, nq, kh, kw, wt, has_bias, bias,
                       relu);
    for (; y < rows; y++)
        correlate_rows(out + (size_t)y * ldo, ldo, 1, n, src + (size_t)y * lds, lds, plane, nq, kh, kw, wt, has_bias, bias, relu);
}

/* The filters of the layer [OC, K] as multiplied: rounded to bf16 if `round`; flipped
 * (t -> K-1-t, which is (KH-1-ky, KW-1-kx)) if `flip`. */
static void filters(float *dst, const float *w, int OC, int K, int round, int flip)
{
    for (int o = 0; o < OC; o++)
        for (int t = 0; t < K; t++) {
            const float v = w[(size_t)o * K + (flip ? K - 1 - t : t)];
            dst[(size_t)o * K + t] = round ? ct_float_from_bf16(ct_bf16_from_float(v)) : v;
        }
}

/* dst [n] = src [n], the 64-byte-aligned middle with non-temporal stores: a large output
 * (C1_STREAM_BYTES or more for the batch: the siamese-cnn's first layer writes 65 MB) is read
 * by the next layer from memory in any case, so its lines should not first be read into the
 * cache, as plain stores to fresh lines are. A smaller one (the mnist_cnn's 11 MB) is written
 * in place with plain stores and may still be in a cache when the next layer reads it:
 * streamed, its relu measured 0.15-0.3 ms slower per batch. */
#define C1_STREAM_BYTES ((size_t)32 << 20)
CT_AVX512 void ct_conv2d_c1_stream_copy(float *dst, const float *src, size_t n)
{
    size_t i = 0;
    while (i < n && ((uintptr_t)(dst + i) & 63)) { dst[i] = src[i]; i++; }
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
    for (; i < n; i++) dst[i] = src[i];
}

/* Compiled for AVX-512 whatever the build's baseline (the portable build's is x86-64-v2):
 * conv2d.c calls these only where d->direct1 says the CPU runs it. */
CT_AVX512 void ct_conv2d_c1_forward_image(float *out_n, float *scratch, const float *in_n, const float *w, const float *b,
                                          const conv2d_dims *d, int round, int relu, double *stats_n)
{
    const int Wp = d->W + 2 * d->pad, K = d->KH * d->KW, P = d->OH * d->OW;
    CT_ASSERT(ct_conv2d_c1_fits(d));
    float wt[CT_CONV2D_C1_MAX_TAPS];
    float *img = scratch;                                          /* [Hp, Wp] */
    c1_pad_plane(img, d->H + 2 * d->pad, Wp, in_n, d->H, d->W, d->pad, d->pad, round);
    float *rows = scratch + img_floats(d);                         /* [C1_ROWS, OW]: a block of output rows, in L1 */
    const int stream = (size_t)d->N * d->OC * P * sizeof(float) >= C1_STREAM_BYTES;
    for (int o = 0; o < d->OC; o++) {
        filters(wt, w + (size_t)o * K, 1, K, round, 0);
        float *out_o = out_n + (size_t)o * P;                      /* [OH, OW] */
        ct_bn_stats acc = { 0 };               /* the plane's statistics, block by block */
        for (int y = 0; y < d->OH; y += C1_ROWS) {                 /* each block streamed out as soon as it is made */
            const int nr = d->OH - y < C1_ROWS ? d->OH - y : C1_ROWS;
            const float *made;                                     /* its rows y .. y+nr-1 */
            if (d->KH == 3 && d->KW == 3 && d->OH >= C1_ROWS) {
                /* a last block of fewer rows is made as the 8 rows that end the plane (the rows
                 * made twice come out the same), so that every block is the unrolled kernel's */
                const int y0 = y + C1_ROWS <= d->OH ? y : d->OH - C1_ROWS;
                float *dst = stream ? rows : out_o + (size_t)y0 * d->OW;
                correlate_rows(dst, d->OW, C1_ROWS, d->OW, img + (size_t)y0 * Wp, Wp, 0, 1, 3, 3, wt, b != NULL, b ? b[o] : 0.0f,
                               relu);
                made = dst + (size_t)(y - y0) * d->OW;
            } else {
                float *dst = stream ? rows : out_o + (size_t)y * d->OW;
                correlate(dst, d->OW, nr, d->OW, img + (size_t)y * Wp, Wp, 0, 1, d->KH, d->KW, wt, b != NULL, b ? b[o] : 0.0f, relu);
                made = dst;
            }
            if (stats_n) ct_bn_stats_add(&acc, made, nr * d->OW);   /* from L1, before it leaves */
            if (stream) ct_conv2d_c1_stream_copy(out_o + (size_t)y * d->OW, made, (size_t)nr * d->OW);
        }
        if (stats_n) { stats_n[2 * o] = acc.mean; stats_n[2 * o + 1] = acc.ss; }
    }
    _mm_sfence();   /* the streamed stores are seen before the workers' barrier */
}

/* Lane sums of one tap: the 16 lanes of acc added, lane 0 first. */
C1_INLINE float lane_sum(__m512 acc)
{
    float lane[16];
    _mm512_storeu_ps(lane, acc);
    float s = lane[0];
    for (int l = 1; l < 16; l++) s += lane[l];
    return s;
}

/* sums[t] = sum over the image of dout_o x img shifted by tap t, for the taps t < nt of
 * off (a group of at most C1_GROUP): one register of 16 lane sums per tap, added up at the
 * end. Any kernel; tap_sums_3x3 below is the one the 3x3 layers run. */
#define C1_GROUP 12
#define C1_AHEAD 512   /* dout is prefetched this many floats ahead (2 KB: measured best of 0.5-8 KB) */
C1_INLINE void tap_sums(float *sums, const float *dout_o, const float *img, int Wp, const conv2d_dims *d, const int *off,
                        int nt, int round)
{
    __m512 acc[C1_GROUP];
    for (int t = 0; t < C1_GROUP; t++) acc[t] = _mm512_setzero_ps();
    for (int y = 0; y < d->OH; y++) {
        const float *g_row = dout_o + (size_t)y * d->OW, *src = img + (size_t)y * Wp;
        for (int x = 0; x < d->OW; x += 16) {
            const __mmask16 m = (__mmask16)(d->OW - x >= 16 ? 0xffff : (1u << (d->OW - x)) - 1);
            _mm_prefetch((const char *)(g_row + x + C1_AHEAD), _MM_HINT_T0);
            const __m512 g = load_run(g_row + x, m, round);        /* 0 in the lanes past the row */
            for (int t = 0; t < nt && t < C1_GROUP; t++)
                acc[t] = _mm512_fmadd_ps(g, _mm512_maskz_loadu_ps(m, src + off[t] + x), acc[t]);
        }
    }
    for (int t = 0; t < nt && t < C1_GROUP; t++) sums[t] = lane_sum(acc[t]);
}

/* tap_sums for a 3x3 kernel, C1_DROWS rows of dout at a time (the rows left over one at a
 * time): a load of img's row j at kx serves the three taps (ky, kx) of dout's rows j - ky,
 * so 4 rows take 4 + 6 x 3 loads for 36 FMAs instead of 40 loads. The image's masked
 * lanes are loaded as 0 (maskz), so that 0 x a value past the row never adds a NaN. */
#define C1_DROWS 4
C1_INLINE void tap_rows_3x3(__m512 *acc, int nr, const float *dout_o, int OW, const float *img, int Wp, int round)
{
    for (int x = 0; x < OW; x += 16) {
        const __mmask16 m = (__mmask16)(OW - x >= 16 ? 0xffff : (1u << (OW - x)) - 1);
        __m512 g[C1_DROWS];
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            _mm_prefetch((const char *)(dout_o + (size_t)r * OW + x + C1_AHEAD), _MM_HINT_T0);
            g[r] = load_run(dout_o + (size_t)r * OW + x, m, round);
        }
#pragma GCC unroll 8
        for (int j = 0; j < nr + 2; j++)
#pragma GCC unroll 3
            for (int kx = 0; kx < 3; kx++) {
                const __m512 v = _mm512_maskz_loadu_ps(m, img + (size_t)j * Wp + kx + x);
#pragma GCC unroll 3
                for (int ky = 0; ky < 3; ky++) {
                    const int r = j - ky;
                    if (r >= 0 && r < nr) acc[ky * 3 + kx] = _mm512_fmadd_ps(g[r], v, acc[ky * 3 + kx]);
                }
            }
    }
}

C1_INLINE void tap_sums_3x3(float *sums, const float *dout_o, const float *img, int Wp, const conv2d_dims *d, int round)
{
    __m512 acc[9];
    for (int t = 0; t < 9; t++) acc[t] = _mm512_setzero_ps();
    int y = 0;
    for (; y + C1_DROWS <= d->OH; y += C1_DROWS)
        tap_rows_3x3(acc, C1_DROWS, dout_o + (size_t)y * d->OW, d->OW, img + (size_t)y * Wp, Wp, round);
    for (; y < d->OH; y++)
        tap_rows_3x3(acc, 1, dout_o + (size_t)y * d->OW, d->OW, img + (size_t)y * Wp, Wp, round);
    for (int t = 0; t < 9; t++) sums[t] = lane_sum(acc[t]);
}

CT_AVX512 float *ct_conv2d_c1_pad_image(float *scratch, const float *in_n, const conv2d_dims *d, int round)
{
    CT_ASSERT(ct_conv2d_c1_fits(d));
    c1_pad_plane(scratch, d->H + 2 * d->pad, d->W + 2 * d->pad, in_n, d->H, d->W, d->pad, d->pad, round);
    return scratch;
}

/* dW_no [K]: other kernels than 3x3 take their taps in groups that fit the registers */
CT_AVX512 void ct_conv2d_c1_dw_plane(float *dw_no, const float *dout_o, const float *img, const conv2d_dims *d, int round)
{
    const int Wp = d->W + 2 * d->pad, K = d->KH * d->KW;
    if (d->KH == 3 && d->KW == 3) { tap_sums_3x3(dw_no, dout_o, img, Wp, d, round); return; }
    int off[CT_CONV2D_C1_MAX_TAPS];                                /* tap t's offset in img */
    for (int t = 0; t < K; t++) off[t] = (t / d->KW) * Wp + t % d->KW;
    for (int t0 = 0; t0 < K; t0 += C1_GROUP) tap_sums(dw_no + t0, dout_o, img, Wp, d, off + t0, K - t0, round);
}

CT_AVX512 void ct_conv2d_c1_backward_image(float *dw_n, float *din_n, float *scratch, const float *dout_n, const float *in_n,
                                           const float *w, const conv2d_dims *d, int round)
{
    const int K = d->KH * d->KW, P = d->OH * d->OW;
    const float *img = ct_conv2d_c1_pad_image(scratch, in_n, d, round);   /* [Hp, Wp] */
    for (int o = 0; o < d->OC; o++)                                      /* dW_n [OC, K], a plane of dout at a time */
        ct_conv2d_c1_dw_plane(dw_n + (size_t)o * K, dout_n + (size_t)o * P, img, d, round);
    if (!din_n) return;
    /* din_n [H, W]: doutp's planes, then every output channel's flipped filter over them */
    const int Hq = doutp_rows(d), Wq = doutp_cols(d);
    const size_t plane = (size_t)Hq * Wq;
    float *doutp = ct_conv2d_c1_plane_buffer(scratch, d);         /* [OC, Hq, Wq] */
    for (int o = 0; o < d->OC; o++)
        c1_pad_plane(doutp + o * plane, Hq, Wq, dout_n + (size_t)o * P, d->OH, d->OW, d->KH - 1 - d->pad, d->KW - 1 - d->pad, round);
    float *wt = doutp + doutp_floats(d);                          /* [OC, K] flipped */
    filters(wt, w, d->OC, K, round, 1);
    correlate(din_n, d->W, d->H, d->W, doutp, Wq, plane, d->OC, d->KH, d->KW, wt, 0, 0.0f, 0);
}

#else   /* no AVX-512 intrinsics: ct_conv2d_dims_make never sets direct1 */

void ct_conv2d_c1_forward_image(float *out_n, float *scratch, const float *in_n, const float *w, const float *b,
                                const conv2d_dims *d, int round, int relu, double *stats_n)
{
    CT_ASSERT(!"conv2d_c1: not built for this CPU");
}

void ct_conv2d_c1_backward_image(float *dw_n, float *din_n, float *scratch, const float *dout_n, const float *in_n,
                                 const float *w, const conv2d_dims *d, int round)
{
    CT_ASSERT(!"conv2d_c1: not built for this CPU");
}

float *ct_conv2d_c1_pad_image(float *scratch, const float *in_n, const conv2d_dims *d, int round)
{
    CT_ASSERT(!"conv2d_c1: not built for this CPU");
    return scratch;
}

void ct_conv2d_c1_dw_plane(float *dw_no, const float *dout_o, const float *img, const conv2d_dims *d, int round)
{
    CT_ASSERT(!"conv2d_c1: not built for this CPU");
}

void ct_conv2d_c1_stream_copy(float *dst, const float *src, size_t n)
{
    CT_ASSERT(!"conv2d_c1: not built for this CPU");
}
#endif
