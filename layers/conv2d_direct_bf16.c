/* conv2d_direct_bf16.c - stride-1 convolution in bf16 on the AMX tiles with no column
 * matrix: each tap's product reads the image (or the output gradient) where it lies.
 *
 * Why: the im2col path (conv2d.c) builds, per image, a column matrix of C*KH*KW rows by
 * OH*OW positions - in the mnist_cnn's second layer 166 k values gathered from 22 k
 * pixels - then interleaves it into the tiles' pair layout, and in the backward scatters
 * dcol back with col2im into a zeroed din. With products on tiles, that data movement
 * was most of the layer's time. Here nothing is gathered: a convolution is a sum over
 * the taps (ky, kx) of shifted matrix products, and a shift is only an offset.
 *
 * ---- Padded-width positions ----
 * The image is copied, rounded to bf16, into a zero-bordered plane of Hp x Wp pixels
 * (Hp = H + 2p, Wp = W + 2p), pixel (y, x) at y Wp + x. An output position (oy, ox) is
 * numbered q = oy Wp + ox - also with the plane's width - so that tap t = (ky, kx) reads
 * the pixel q + s_t, s_t = ky Wp + kx: the same offset for every position. Positions with
 * ox >= OW (the last KW - 1 of each row) are computed and thrown away: the price of one
 * stride for all (in the mnist_cnn 26 computed for 24 kept, 8%).
 *     out[o, q]   = sum_t sum_c  W[o, c, t] img[c, q + s_t]                     (1)
 *     dW[o, c, t] = sum_q        dout[o, q] img[c, q + s_t]                     (2)
 *     din[c, x]   = sum_t sum_o  W[o, c, t] dout[o, x - s_t]   (x a pixel)      (3)
 * with dout zero at the thrown-away positions and outside [0, OH Wp), and din kept only at
 * the pixels inside the border. (3) is (1) transposed - the same taps and weights, read from
 * the output side - so din is a product written once, with no col2im.
 *
 * ---- The products (gemm_bf16.h's tiles: C += A B over pairs of k) ----
 * One blocked product, brgemm below, runs all three: C blocks of 32 x 32 (four 16 x 16
 * tiles), each the sum over a list of k-steps of 32, a k-step being an A tile pair at
 * A + aoff[s] and a B tile pair at B + boff[s] (Intel calls this a batch-reduce GEMM).
 * The layouts make every tile one TILELOADD with a fixed stride:
 *   (1) C [o, q]:     A = wf [OCp][T Cp], W rounded, row o holds tap t's channels at t Cp;
 *                     B = imgv [Cp/2][nimg][2], the image with channel pairs interleaved:
 *                     a B tile row is one channel pair at 16 consecutive positions, so
 *                     tap t's tile starts s_t pairs further on. k-steps: (t, 32 channels).
 *   (2) C [c, o]:     A = imgp [Cp][nimg], the image plane by plane: channel c's row from
 *                     q = s_t on; B = doutp [Mqp/2][OCp][2], dout with position pairs
 *                     interleaved. k-steps: 32 positions. One product per tap, C = dW^T of
 *                     that tap, summed per worker in [T][Cp][OCp] and permuted at the end.
 *   (3) C [c, x]:     A = wx [Cp][T OCp], W^T rounded, tap t's output channels at t OCp;
 *                     B = doutv [OCp/2][nq][2], dout with channel pairs interleaved after
 *                     smax = s_{T-1} leading zeros, so that x - s_t is never negative.
 *                     k-steps: (t, 32 output channels).
 * (1) and (3) store each C block into a 32 x 32 buffer in the core's cache, from which the
 * kept positions go to out (with the bias added) or din: each element written once.
 * Cp, OCp: C and OC rounded up to 32; the padded channels are zero rows of the image, the
 * weights and dout, and add exact zeros. ct_conv2d_direct_bf16_fits asks for C a multiple of
 * 16: at worst half of a block of 32 is padding, and the products, which are not what the
 * layer's time goes to, do twice the work (the siamese-cnn's 16 -> 32 channel layer still
 * went from 26.2 to 13.9 ms per batch). With one input channel (an image's first layer) they
 * would do 32 times the work, and there im2col is faster (1.6 against 2.7 ms per batch in the
 * mnist_cnn's first layer).
 *
 * ---- Rounding and bounds ----
 * Every operand is rounded once to bf16 (core/bf16.h) and the tiles sum in float32:
 * each element of out, dW and din is a sum of bf16 products whose error is gemm_bf16.h's
 * bound (1) over its own number of terms (C KH KW; N OH OW; OC times the taps that reach
 * the pixel), like the im2col path's; only the order of the sums differs (tap by tap
 * here). tests/test_conv_bf16.c checks every element against both bounds.
 *
 * ---- Work per image, per worker ----
 * forward:  imgv from the image; product (1); the kept positions + bias into the stage, then out.
 * backward: db's sums of the image; imgp from the image, doutp and doutv from dout; product (2) for each tap into
 *           the worker's dW^T (overwritten at its first image); product (3), the kept
 *           pixels into the stage, then din. After the images, dw += the workers' dW^T, in worker order.
 * Once per call: the weights rounded into wf (forward) or wx (backward), shared.
 */
#include <stdint.h>
#include <string.h>
#include "core/bf16.h"
#include "core/hot.h"
#include "core/threads.h"
#include "layers/amx_tiles.h"
#include "layers/batchnorm.h"   /* ct_batchnorm_planes_stats */
#include "layers/conv2d_c1.h"        /* ct_conv2d_c1_stream_copy */
#include "layers/conv2d_direct_bf16.h"
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"   /* ct_kernels_get: streamed stores on AVX-512 */
#include "layers/pool.h"          /* ct_maxpool2d_plane: a maxpool after the layer, from the stage */

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* The geometry of one layer: see the top of the file. */
typedef struct {
    int    T, Hp, Wp, smax;    /* taps; the bordered plane; the largest tap offset s_{T-1} */
    int    Cp, OCp;            /* channels rounded up to 32 */
    size_t Mq, Mqp;            /* positions computed (OH Wp), rounded up to 32 */
    size_t npix, Np;           /* pixels of the plane (Hp Wp), rounded up to 32 */
    size_t nimg;               /* length of imgv's and imgp's rows: what (1) and (2) read, past Mqp + smax */
    size_t nq;                 /* length of doutv's rows: smax zeros, then Np positions */
} geo;

static geo geo_of(const conv2d_dims *d)
{
    geo g;
    g.T = d->KH * d->KW;
    g.Hp = d->H + 2 * d->pad;
    g.Wp = d->W + 2 * d->pad;
    g.smax = (d->KH - 1) * g.Wp + d->KW - 1;
    g.Cp = (int)round_up((size_t)d->C, 32);
    g.OCp = (int)round_up((size_t)d->OC, 32);
    g.Mq = (size_t)d->OH * g.Wp;
    g.Mqp = round_up(g.Mq, 32);
    g.npix = (size_t)g.Hp * g.Wp;
    g.Np = round_up(g.npix, 32);
    const size_t reach = g.Mqp + (size_t)g.smax;   /* (1) and (2) read positions q + s_t < Mqp + smax */
    g.nimg = round_up(reach > g.npix ? reach : g.npix, 32);
    g.nq = round_up((size_t)g.smax + g.Np, 32);
    return g;
}

/* ---- the workspace ----
 * Per worker (each part rounded up to 64 bytes): rnd (the larger of the image and dout_n, in
 * bf16), imgv and imgp (Cp x nimg bf16 each), dpad and doutp (Mqp x OCp bf16 each), doutv
 * (OCp x nq bf16), a C block [32][32] float, the k-step offsets (two lists of the longest
 * product's steps), dW^T [T][Cp][OCp] float, and the stage (the larger of out_n and din_n,
 * float) where an image's result is made before it is copied out. After the workers: the rounded weights, wf
 * or wx (OCp x T Cp bf16 either way); then the bias-gradient sums [N][OC] float. */
static size_t f16(size_t bf16s) { return round_up((bf16s + 1) / 2, 16); }   /* floats that hold them, to 64 bytes */

static size_t max_steps(const geo *g) {
    const size_t a = (size_t)g->T * g->Cp / 32, b = g->Mqp / 32, c = (size_t)g->T * g->OCp / 32;
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

typedef struct {
    uint16_t  *rnd;            /* the image or dout_n rounded as it lies, [C][H][W] or [OC][OH][OW] */
    uint16_t  *imgv, *imgp;    /* the image for (1) and for (2) */
    uint16_t  *dpad;           /* dout_n at the padded-width positions, [OCp][Mqp] */
    uint16_t  *doutp, *doutv;  /* dout for (2) and for (3) */
    float     *blk, *dwt;
    ptrdiff_t *aoff, *boff;
    float     *stage;          /* out_n [OC][OH][OW] or din_n [C][H][W] made here, then copied out (stage_out) */
} region;

static size_t rnd_elems(const conv2d_dims *d)
{
    const size_t a = (size_t)d->C * d->H * d->W, b = (size_t)d->OC * d->OH * d->OW;
    return a > b ? a : b;
}

static size_t worker_floats(const conv2d_dims *d, const geo *g)
{
    return f16(rnd_elems(d)) + 2 * f16((size_t)g->Cp * g->nimg) + 2 * f16(g->Mqp * g->OCp) + f16((size_t)g->OCp * g->nq) +
           32 * 32 + round_up(2 * 2 * max_steps(g), 16) + round_up((size_t)g->T * g->Cp * g->OCp, 16) +
           round_up(rnd_elems(d), 16);
}

static region region_of(float *ws, const conv2d_dims *d, const geo *g, int worker)
{
    region r;
    float *p = ws + (size_t)worker * worker_floats(d, g);
    r.rnd = (uint16_t *)(void *)p;   p += f16(rnd_elems(d));
    r.imgv = (uint16_t *)(void *)p;  p += f16((size_t)g->Cp * g->nimg);
    r.imgp = (uint16_t *)(void *)p;  p += f16((size_t)g->Cp * g->nimg);
    r.dpad = (uint16_t *)(void *)p;  p += f16(g->Mqp * g->OCp);
    r.doutp = (uint16_t *)(void *)p; p += f16(g->Mqp * g->OCp);
    r.doutv = (uint16_t *)(void *)p; p += f16((size_t)g->OCp * g->nq);
    r.blk = p;                       p += 32 * 32;
    r.aoff = (ptrdiff_t *)(void *)p; r.boff = r.aoff + max_steps(g);
    p += round_up(2 * 2 * max_steps(g), 16);
    r.dwt = p;                       p += round_up((size_t)g->T * g->Cp * g->OCp, 16);
    r.stage = p;
    return r;
}

static uint16_t *weights_of(float *ws, const conv2d_dims *d, const geo *g)
{
    return (uint16_t *)(void *)(ws + (size_t)d->workers * worker_floats(d, g));
}

/* After the weights: each image's bias-gradient sums, [N][OC]. */
static float *bias_sums_of(float *ws, const conv2d_dims *d, const geo *g)
{
    return ws + (size_t)d->workers * worker_floats(d, g) + f16((size_t)g->OCp * g->T * g->Cp);
}

int ct_conv2d_direct_bf16_fits(const conv2d_dims *d) { return d->stride == 1 && d->C % 16 == 0; }

int ct_conv2d_direct_bf16_runs(const conv2d_dims *d)
{
    const ct_bf16_kernels k = ct_kernels_bf16();
    return ct_conv2d_direct_bf16_fits(d) && (k == CT_BF16_AMX || k == CT_BF16_MODEL);
}

size_t ct_conv2d_direct_bf16_workspace_floats(const conv2d_dims *d)
{
    if (!ct_conv2d_direct_bf16_fits(d)) return 0;
    const geo g = geo_of(d);
    return (size_t)d->workers * worker_floats(d, &g) + f16((size_t)g.OCp * g.T * g.Cp) + round_up((size_t)d->N * d->OC, 16);
}

/* ---- the blocked product: C blocks (32 x 32) += sum over k-steps of A tiles x B tiles ---- */
typedef struct {
    int mb, nb, nk;                       /* blocks of 32 rows and of 32 columns; k-steps */
    const ptrdiff_t *aoff, *boff;         /* k-step s: A pair at A + aoff[s], B pair at B + boff[s] (elements) */
    const uint16_t *A;                    /* block row i: A + i a_m; tiles of 16 rows at astride bytes, the second 16 rows on */
    ptrdiff_t a_m;
    size_t astride;
    const uint16_t *B;                    /* block column j: B + j b_n; the second tile b1 elements on, rows bstride bytes */
    ptrdiff_t b_n, b1;
    size_t bstride;
    float *C;                             /* block (i, j) at C + i c_m + j c_n, rows cstride bytes, accumulated if acc; */
    ptrdiff_t c_m, c_n;                   /* or NULL: each block computed into blk [32][32], then done(ctx, i, j, blk) */
    size_t cstride;
    int acc;
    float *blk;
    void (*done)(void *ctx, int i, int j, const float *blk);
    void *ctx;
} brgemm;

static inline __attribute__((always_inline))
void brgemm_blocks(const int REAL, ct_tile_model *tm, const brgemm *g)
{
    for (int i = 0; i < g->mb; i++)
        for (int j = 0; j < g->nb; j++) {
            const uint16_t *A = g->A + i * g->a_m, *B = g->B + j * g->b_n;
            float *c = g->C ? g->C + i * g->c_m + j * g->c_n : g->blk;
            const size_t cs = g->C ? g->cstride : 32 * sizeof(float);
            float *c2 = (float *)(void *)((char *)c + 16 * cs);   /* rows 16 .. 31 */
            if (g->C && g->acc) { T_LOAD(0, c, cs); T_LOAD(1, c + 16, cs); T_LOAD(2, c2, cs); T_LOAD(3, c2 + 16, cs); }
            else                { T_ZERO(0); T_ZERO(1); T_ZERO(2); T_ZERO(3); }
            for (int s = 0; s < g->nk; s++) {
                const uint16_t *a = A + g->aoff[s], *b = B + g->boff[s];
                T_LOAD(4, a, g->astride);
                T_LOAD(5, (const char *)a + 16 * g->astride, g->astride);
                T_LOAD(6, b, g->bstride);
                T_LOAD(7, b + g->b1, g->bstride);
                T_DP(0, 4, 6); T_DP(1, 4, 7);
                T_DP(2, 5, 6); T_DP(3, 5, 7);
            }
            T_STORE(0, c, cs); T_STORE(1, c + 16, cs); T_STORE(2, c2, cs); T_STORE(3, c2 + 16, cs);
            if (!g->C) g->done(g->ctx, i, j, g->blk);
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
static __attribute__((target("amx-tile,amx-bf16"), noinline))
void brgemm_amx(const brgemm *g)
{
    AMX_LDTILECFG(&CT_TILES_16x64);
    brgemm_blocks(1, NULL, g);
    AMX_TILERELEASE();
}
#endif

static __attribute__((noinline))
void brgemm_model(const brgemm *g)
{
    ct_tile_model tm;
    CT_ASSERT(ct_tile_model_config(&tm, &CT_TILES_16x64) == CT_OK);
    brgemm_blocks(0, &tm, g);
}

static void brgemm_run(const brgemm *g)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (ct_kernels_bf16() == CT_BF16_AMX) { brgemm_amx(g); return; }
#endif
    CT_ASSERT(ct_kernels_bf16() == CT_BF16_MODEL);
    brgemm_model(g);
}

/* ---- rounding into the layouts ----
 * Each array is rounded once, whole, as it lies (ct_bf16s_from_floats: vectorised), into
 * rnd; the layouts are then made from those bf16 by copies. */

/* dst [n] (uint32: a pair) <- (a[x], b[x]); b NULL: the pair's second half zero. */
CT_HOT
static void pair_rows(uint32_t *dst, const uint16_t *a, const uint16_t *b, int n)
{
    if (b) for (int x = 0; x < n; x++) dst[x] = (uint32_t)a[x] | (uint32_t)b[x] << 16;
    else   for (int x = 0; x < n; x++) dst[x] = a[x];
}

/* imgv [Cp/2][nimg] pairs: channels (2k, 2k+1) of the rounded image rnd [C, H, W] at pixel
 * (y + p) Wp + x + p, zero elsewhere. */
static void make_imgv(uint16_t *imgv, const uint16_t *rnd, const conv2d_dims *d, const geo *g)
{
    const int C = d->C, H = d->H, W = d->W, p = d->pad;
    memset(imgv, 0, (size_t)g->Cp * g->nimg * sizeof *imgv);
    uint32_t *v = (uint32_t *)(void *)imgv;
    for (int c = 0; c < C; c += 2)
        for (int y = 0; y < H; y++)
            pair_rows(v + (size_t)(c / 2) * g->nimg + (size_t)(y + p) * g->Wp + p, rnd + ((size_t)c * H + y) * W,
                      c + 1 < C ? rnd + ((size_t)(c + 1) * H + y) * W : NULL, W);
}

/* imgp [Cp][nimg]: channel c of rnd [C, H, W] at pixel (y + p) Wp + x + p, zero elsewhere. */
static void make_imgp(uint16_t *imgp, const uint16_t *rnd, const conv2d_dims *d, const geo *g)
{
    const int C = d->C, H = d->H, W = d->W, p = d->pad;
    memset(imgp, 0, (size_t)g->Cp * g->nimg * sizeof *imgp);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            memcpy(imgp + (size_t)c * g->nimg + (size_t)(y + p) * g->Wp + p, rnd + ((size_t)c * H + y) * W,
                   (size_t)W * sizeof *imgp);
}

/* dpad [OCp][Mqp]: output channel o of rnd [OC, OH, OW] at position oy Wp + ox, zero elsewhere. */
static void make_dpad(uint16_t *dpad, const uint16_t *rnd, const conv2d_dims *d, const geo *g)
{
    const int OC = d->OC, OH = d->OH, OW = d->OW;
    memset(dpad, 0, g->Mqp * g->OCp * sizeof *dpad);
    for (int o = 0; o < OC; o++)
        for (int y = 0; y < OH; y++)
            memcpy(dpad + (size_t)o * g->Mqp + (size_t)y * g->Wp, rnd + ((size_t)o * OH + y) * OW, (size_t)OW * sizeof *dpad);
}

/* doutv [OCp/2][nq] pairs: rows (2k, 2k+1) of dpad after smax zeros, zero past them. */
static void make_doutv(uint16_t *doutv, const uint16_t *dpad, const geo *g)
{
    uint32_t *v = (uint32_t *)(void *)doutv;
    for (int k = 0; k < g->OCp / 2; k++) {
        uint32_t *row = v + (size_t)k * g->nq;
        memset(row, 0, (size_t)g->smax * sizeof *row);
        pair_rows(row + g->smax, dpad + (size_t)2 * k * g->Mqp, dpad + (size_t)(2 * k + 1) * g->Mqp, (int)g->Mqp);
        memset(row + g->smax + g->Mqp, 0, (g->nq - g->smax - g->Mqp) * sizeof *row);
    }
}

/* doutp [Mqp/2][OCp] pairs: doutp[m][o] = positions (2m, 2m+1) of dpad's row o, one 32-bit
 * element: the transpose of dpad read as [OCp][Mqp/2] pairs, 16 x 16 pairs at a time. */
CT_HOT
static void make_doutp(uint16_t *doutp, const uint16_t *dpad, const geo *g)
{
    const size_t M2 = g->Mqp / 2, OCp = (size_t)g->OCp;
    const uint32_t *src = (const uint32_t *)(const void *)dpad;
    uint32_t *dst = (uint32_t *)(void *)doutp;
    for (size_t m0 = 0; m0 < M2; m0 += 16)
        for (size_t o0 = 0; o0 < OCp; o0 += 16)
            for (size_t m = m0; m < m0 + 16; m++)
                for (size_t o = o0; o < o0 + 16; o++) dst[m * OCp + o] = src[o * M2 + m];
}

/* The k-steps of (1) and (3): for each tap t, for each block b of 32 of the `kc` channels summed
 * over (input channels in (1), output channels in (3)): A at t kc + 32 b (the rounded weights'
 * row holds tap after tap); B at channel pair 16 b of rows `rowlen` pairs long, position
 * base + sign s_t. Returns the steps. */
static int tap_steps(ptrdiff_t *aoff, ptrdiff_t *boff, const conv2d_dims *d, const geo *g, int kc, size_t rowlen,
                     ptrdiff_t base, int sign)
{
    int nk = 0;
    for (int t = 0; t < g->T; t++)
        for (int b = 0; b < kc / 32; b++, nk++) {
            const ptrdiff_t st = (ptrdiff_t)(t / d->KW) * g->Wp + t % d->KW;
            aoff[nk] = (ptrdiff_t)t * kc + 32 * b;
            boff[nk] = ((ptrdiff_t)16 * b * (ptrdiff_t)rowlen + base + sign * st) * 2;
        }
    return nk;
}

/* ---- a call's job, and where the kept positions go ---- */
typedef struct {
    const conv2d_dims *d;
    geo g;
    float *ws, *out, *din, *dw, *bsum;   /* bsum: [N][OC] bias-gradient sums, or NULL */
    const float *in, *dout, *b;
    const uint16_t *wr;   /* the rounded weights: wf or wx */
    double *stats;        /* forward: the output planes' statistics [N, OC, 2], or NULL */
    float *pooled;        /* forward: NULL, or out is not written but max-pooled (pd) into pooled and argmax */
    int *argmax;
    const maxpool2d_dims *pd;
    int relu;             /* with pooled: a relu after the pool */
    const float *dpooled; /* backward: NULL, or dout is not read but made image by image from the pool's gradient */
    const int *dargmax;   /* and argmax (pd), as ct_maxpool2d_backward would make it */
} job;

/* The kept part of a block's 32 positions [x0, x1) of a grid Wp wide: rows [ylo, yhi), columns
 * [xlo, xhi), which go to a plane (yhi - ylo) x (xhi - xlo). Cut into runs, one per grid row:
 * from the block's column `from`, n of them, to the plane's element `to`. Returns the runs. */
typedef struct { int from, to, n; } run;

static int kept_runs(run rs[33], size_t x0, size_t x1, int Wp, int ylo, int yhi, int xlo, int xhi)
{
    int k = 0;
    for (size_t x = x0; x < x1;) {
        const int y = (int)(x / (size_t)Wp), col = (int)(x % (size_t)Wp);
        const size_t end = x - (size_t)col + (size_t)Wp < x1 ? x - (size_t)col + (size_t)Wp : x1;
        const int lo = col > xlo ? col : xlo, hi = col + (int)(end - x) < xhi ? col + (int)(end - x) : xhi;
        if (y >= ylo && y < yhi && lo < hi)
            rs[k++] = (run){ .from = (int)(x - x0) + lo - col, .to = (y - ylo) * (xhi - xlo) + lo - xlo, .n = hi - lo };
        x = end;
    }
    return k;
}

/* ---- an image's result, made in the worker's stage, then copied out whole ----
 * A block of (1) or (3) holds 32 positions of 32 channels: written straight to out_n (or
 * din_n), each block touches 32 planes a few lines each, and every line is read from memory
 * before it is written. So the image's whole result is made in the worker's stage (in L2:
 * 128 KB for the siamese-cnn's second layer) and copied out in one sequential pass; a
 * layer's result of 16 MB or more for the batch (stream_bytes), which the next layer reads
 * from memory in any case, with non-temporal stores that skip reading the lines (the
 * siamese-cnn's bf16 conv2d_2 forward 6.1 -> 5.4 ms and conv2d_3's 4.4 -> 3.3 ms per batch;
 * copied plainly, conv2d_3's 16 MB still left part in a cache for the batchnorm after it,
 * and both ways came out even). The values are the same either way. */
static size_t stream_bytes = (size_t)16 << 20;   /* streamed from this size of the batch's result; tests lower it */

void ct_conv2d_direct_bf16_stream_from(size_t bytes) { stream_bytes = bytes; }

/* dst [n] = the stage's src [n]; batch_bytes: the layer's whole result, streamed (with
 * conv2d_c1.c's copy) from stream_bytes on */
static void stage_out(float *dst, const float *src, size_t n, size_t batch_bytes)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (batch_bytes >= stream_bytes && ct_kernels_get() == CT_KERNELS_AVX512) {
        ct_conv2d_c1_stream_copy(dst, src, n);
        __builtin_ia32_sfence();   /* the streamed stores are seen before the workers' barrier */
        return;
    }
#else
    (void)batch_bytes;
#endif
    memcpy(dst, src, n * sizeof *dst);
}

/* ---- forward ---- */
typedef struct { const job *j; float *out_n; } fwd_out;   /* out_n [OC, OH, OW] */

/* Block (i, j) of (1): output channels 32 i .., positions 32 j ..; the kept ones (+ bias) into out_n. */
static void forward_block_out(void *ctx, int i, int j, const float *blk)
{
    const fwd_out *o = ctx;
    const conv2d_dims *d = o->j->d;
    const geo *g = &o->j->g;
    const size_t P = (size_t)d->OH * d->OW, q0 = (size_t)j * 32, q1 = q0 + 32 < g->Mq ? q0 + 32 : g->Mq;
    run rs[33];
    const int nr = kept_runs(rs, q0, q1, g->Wp, 0, d->OH, 0, d->OW);
    for (int r = 0; r < 32 && 32 * i + r < d->OC; r++) {
        const int oc = 32 * i + r;
        const float *src = blk + 32 * r, bv = o->j->b ? o->j->b[oc] : 0.0f;
        float *dst = o->out_n + (size_t)oc * P;
        for (int k = 0; k < nr; k++) {
            float *to = dst + rs[k].to;
            const float *from = src + rs[k].from;
            if (o->j->b) for (int e = 0; e < rs[k].n; e++) to[e] = from[e] + bv;
            else memcpy(to, from, (size_t)rs[k].n * sizeof *to);
        }
    }
}

static void forward_image(void *ctx, int n, int worker)
{
    const job *j = ctx;
    const conv2d_dims *d = j->d;
    const geo *g = &j->g;
    const region r = region_of(j->ws, d, g, worker);
    ct_bf16s_from_floats(r.rnd, j->in + (size_t)n * d->C * d->H * d->W, (size_t)d->C * d->H * d->W);   /* in_n [C, H, W] */
    make_imgv(r.imgv, r.rnd, d, g);
    /* k-steps (t, 32 channels): A wf at t Cp + 32 cb; B imgv at channel pair 16 cb, position s_t */
    const int nk = tap_steps(r.aoff, r.boff, d, g, g->Cp, g->nimg, 0, 1);
    const size_t out_img = (size_t)d->OC * d->OH * d->OW;
    fwd_out o = { j, r.stage };   /* out_n [OC, OH, OW], made in the stage */
    const brgemm p = {
        .mb = g->OCp / 32, .nb = (int)(g->Mqp / 32), .nk = nk, .aoff = r.aoff, .boff = r.boff,
        .A = j->wr, .a_m = (ptrdiff_t)32 * g->T * g->Cp, .astride = (size_t)g->T * g->Cp * 2,
        .B = r.imgv, .b_n = 64, .b1 = 32, .bstride = g->nimg * 4,
        .C = NULL, .blk = r.blk, .done = forward_block_out, .ctx = &o };
    brgemm_run(&p);
    if (j->stats)   /* out_n's planes, still in the cache */
        ct_batchnorm_planes_stats(j->stats + (size_t)2 * n * d->OC, r.stage, d->OC, d->OH * d->OW);
    if (j->pooled) {   /* pooled from the stage; out itself is never written */
        ct_maxpool2d_image(j->pooled, j->argmax, r.stage, n, j->pd, j->relu);
        return;
    }
    stage_out(j->out + (size_t)n * out_img, r.stage, out_img, d->N * out_img * sizeof(float));
}

static void forward_job(job *j, const float *w)
{
    const conv2d_dims *d = j->d;
    const geo g = j->g;
    const int C = d->C, T = g.T;
    uint16_t *wf = weights_of(j->ws, d, &g);   /* [OCp][T Cp]: wf[o][t Cp + c] = bf16(W[o, c, t]) */
    memset(wf, 0, (size_t)g.OCp * T * g.Cp * sizeof *wf);
    for (int o = 0; o < d->OC; o++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < T; t++)
                wf[((size_t)o * T + t) * g.Cp + c] = ct_bf16_from_float(w[((size_t)o * C + c) * T + t]);
    j->wr = wf;
    ct_parallel(d->N, d->workers, forward_image, j);
}

void ct_conv2d_direct_bf16_forward(float *out, float *ws, const float *in, const float *w, const float *b,
                                   const conv2d_dims *d, double *stats)
{
    job j = { .d = d, .g = geo_of(d), .ws = ws, .out = out, .in = in, .b = b, .stats = stats };
    forward_job(&j, w);
}

int ct_conv2d_direct_bf16_pool_fits(const conv2d_dims *d, const maxpool2d_dims *pd)
{
    return ct_conv2d_direct_bf16_runs(d) && ct_maxpool2d_image_fits(pd, d->N, d->OC, d->OH, d->OW);
}

void ct_conv2d_direct_bf16_forward_pool(float *pooled, int *argmax, float *ws, const float *in, const float *w,
                                        const float *b, const conv2d_dims *d, const maxpool2d_dims *pd, int relu)
{
    CT_ASSERT(ct_conv2d_direct_bf16_pool_fits(d, pd));
    job j = { .d = d, .g = geo_of(d), .ws = ws, .in = in, .b = b, .pooled = pooled, .argmax = argmax, .pd = pd, .relu = relu };
    forward_job(&j, w);
}

/* ---- backward ---- */
typedef struct { const job *j; float *din_n; } bwd_out;   /* din_n [C, H, W] */

/* Block (i, j) of (3): channels 32 i .., pixels 32 j ..; the pixels inside the border into din_n. */
static void backward_block_din(void *ctx, int i, int j, const float *blk)
{
    const bwd_out *o = ctx;
    const conv2d_dims *d = o->j->d;
    const geo *g = &o->j->g;
    const int H = d->H, W = d->W, p = d->pad;
    const size_t x0 = (size_t)j * 32, x1 = x0 + 32 < g->npix ? x0 + 32 : g->npix;
    run rs[33];
    const int nr = kept_runs(rs, x0, x1, g->Wp, p, p + H, p, p + W);
    for (int r = 0; r < 32 && 32 * i + r < d->C; r++) {
        const float *src = blk + 32 * r;
        float *dst = o->din_n + (size_t)(32 * i + r) * H * W;
        for (int k = 0; k < nr; k++) memcpy(dst + rs[k].to, src + rs[k].from, (size_t)rs[k].n * sizeof *dst);
    }
}

static void backward_image(void *ctx, int n, int worker)
{
    const job *j = ctx;
    const conv2d_dims *d = j->d;
    const geo *g = &j->g;
    const region r = region_of(j->ws, d, g, worker);
    const float *in_n = j->in + (size_t)n * d->C * d->H * d->W;              /* [C, H, W] */
    const float *dout_n;                                                      /* [OC, OH, OW] */
    if (!j->dpooled) dout_n = j->dout + (size_t)n * d->OC * d->OH * d->OW;
    else {   /* dout_n made in the stage as the pool's backward makes it; free again before (3) */
        ct_maxpool2d_image_backward(r.stage, j->dpooled, j->dargmax, n, j->pd);
        dout_n = r.stage;
    }
    ct_bf16s_from_floats(r.rnd, in_n, (size_t)d->C * d->H * d->W);
    make_imgp(r.imgp, r.rnd, d, g);
    if (j->bsum)   /* db's share of this image, while dout_n is in the cache */
        for (int o = 0; o < d->OC; o++)
            j->bsum[(size_t)n * d->OC + o] = ct_conv2d_bias_sum(dout_n + (size_t)o * d->OH * d->OW, d->OH * d->OW);
    ct_bf16s_from_floats(r.rnd, dout_n, (size_t)d->OC * d->OH * d->OW);
    make_dpad(r.dpad, r.rnd, d, g);
    make_doutp(r.doutp, r.dpad, g);
    /* (2) per tap t: dW^T_t [Cp, OCp] (+)= imgp [Cp, q + s_t] x doutp; k-steps of 32 positions */
    const int nk = (int)(g->Mqp / 32);
    for (int s = 0; s < nk; s++) { r.aoff[s] = (ptrdiff_t)32 * s; r.boff[s] = (ptrdiff_t)32 * s * g->OCp; }
    for (int t = 0; t < g->T; t++) {
        const ptrdiff_t st = (ptrdiff_t)(t / d->KW) * g->Wp + t % d->KW;
        const brgemm p = {
            .mb = g->Cp / 32, .nb = g->OCp / 32, .nk = nk, .aoff = r.aoff, .boff = r.boff,
            .A = r.imgp + st, .a_m = (ptrdiff_t)32 * (ptrdiff_t)g->nimg, .astride = g->nimg * 2,
            .B = r.doutp, .b_n = 64, .b1 = 32, .bstride = (size_t)g->OCp * 4,
            .C = r.dwt + (size_t)t * g->Cp * g->OCp, .c_m = (ptrdiff_t)32 * g->OCp, .c_n = 32,
            .cstride = (size_t)g->OCp * 4, .acc = n != worker };   /* a worker's first image is its number */
        brgemm_run(&p);
    }
    if (!j->din) return;
    /* (3) din [Cp, pixels] = wx x doutv; k-steps (t, 32 output channels): A wx at t OCp + 32 ob,
     * B doutv at output-channel pair 16 ob, position smax - s_t */
    make_doutv(r.doutv, r.dpad, g);
    const int nk3 = tap_steps(r.aoff, r.boff, d, g, g->OCp, g->nq, g->smax, -1);
    const size_t in_img = (size_t)d->C * d->H * d->W;
    bwd_out o = { j, r.stage };   /* din_n [C, H, W], made in the stage */
    const brgemm p = {
        .mb = g->Cp / 32, .nb = (int)(g->Np / 32), .nk = nk3, .aoff = r.aoff, .boff = r.boff,
        .A = j->wr, .a_m = (ptrdiff_t)32 * g->T * g->OCp, .astride = (size_t)g->T * g->OCp * 2,
        .B = r.doutv, .b_n = 64, .b1 = 32, .bstride = g->nq * 4,
        .C = NULL, .blk = r.blk, .done = backward_block_din, .ctx = &o };
    brgemm_run(&p);
    stage_out(j->din + (size_t)n * in_img, r.stage, in_img, d->N * in_img * sizeof(float));
}

/* dw [OC, C, T] += the workers' dW^T [T][Cp][OCp], in worker order, output channels shared out. */
typedef struct { float *dw; const float *ws; const conv2d_dims *d; const geo *g; int used; } dw_job;

static void dw_add_range(void *ctx, size_t lo, size_t hi)
{
    const dw_job *j = ctx;
    const int C = j->d->C, T = j->g->T, Cp = j->g->Cp, OCp = j->g->OCp;
    for (int w = 0; w < j->used; w++) {
        const float *part = region_of((float *)j->ws, j->d, j->g, w).dwt;
        for (size_t o = lo; o < hi; o++)
            for (int c = 0; c < C; c++)
                for (int t = 0; t < T; t++)
                    j->dw[(o * C + (size_t)c) * T + t] += part[((size_t)t * Cp + c) * OCp + o];
    }
}

static void backward_job(job *j, float *dw, float *db, const float *w);

void ct_conv2d_direct_bf16_backward(float *din, float *dw, float *db, float *ws, const float *dout, const float *in, const float *w,
                                    const conv2d_dims *d)
{
    job j = { .d = d, .g = geo_of(d), .ws = ws, .din = din, .in = in, .dout = dout };
    backward_job(&j, dw, db, w);
}

void ct_conv2d_direct_bf16_backward_pool(float *din, float *dw, float *db, float *ws, const float *dpooled, const int *argmax,
                                         const maxpool2d_dims *pd, const float *in, const float *w, const conv2d_dims *d)
{
    CT_ASSERT(ct_conv2d_direct_bf16_pool_fits(d, pd));
    job j = { .d = d, .g = geo_of(d), .ws = ws, .din = din, .in = in, .dpooled = dpooled, .dargmax = argmax, .pd = pd };
    backward_job(&j, dw, db, w);
}

/* The backward of j's images (din, in and dout or dpooled set): the rounded weights for din,
 * the images on the workers, then db and dw summed in order. */
static void backward_job(job *jb, float *dw, float *db, const float *w)
{
    const conv2d_dims *d = jb->d;
    float *ws = jb->ws, *din = jb->din;
    const geo g = jb->g;
    const int C = d->C, T = g.T;
    uint16_t *wx = NULL;
    if (din) {   /* [Cp][T OCp]: wx[c][t OCp + o] = bf16(W[o, c, t]) */
        wx = weights_of(ws, d, &g);
        memset(wx, 0, (size_t)g.Cp * T * g.OCp * sizeof *wx);
        for (int o = 0; o < d->OC; o++)
            for (int c = 0; c < C; c++)
                for (int t = 0; t < T; t++)
                    wx[((size_t)c * T + t) * g.OCp + o] = ct_bf16_from_float(w[((size_t)o * C + c) * T + t]);
    }
    jb->wr = wx;
    jb->bsum = db ? bias_sums_of(ws, d, &g) : NULL;
    const int used = ct_parallel(d->N, d->workers, backward_image, jb);
    if (db)   /* image by image, in order: the float32 layer's additions */
        for (int n = 0; n < d->N; n++)
            for (int o = 0; o < d->OC; o++) db[o] += jb->bsum[(size_t)n * d->OC + o];
    dw_job a = { dw, ws, d, &g, used };
    ct_parallel_range((size_t)d->OC, (size_t)d->OC * C * T * used, dw_add_range, &a);
}
