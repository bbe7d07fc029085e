/* lstm.c - stacked LSTM layers on OpenBLAS: forward pass and full
 * backpropagation through time (BPTT). See lstm.h for the contract.
 *
 * ---------------------------------------------------------------------------
 * The forward pass, for one layer, one sequence b, step t = 0 .. T-1:
 *
 *   z_t = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh      [4H] = (z_i, z_f, z_g, z_o)
 *   i_t = r(z_i)   f_t = r(z_f)   g_t = tanh(z_g)   o_t = r(z_o)
 *   c_t = f_t * c_{t-1} + i_t * g_t
 *   h_t = o_t * tanh(c_t)                                 h_{-1} = c_{-1} = 0
 *
 * where r is the sigmoid or Keras's hard sigmoid. Past a sequence's length
 * (t >= len[b]) nothing is computed: the state is carried, h_t = h_{t-1},
 * c_t = c_{t-1}, and the sequence output at t is 0.
 *
 * How the work is organised, in its plainest form (every product one cblas_sgemm):
 *   1. the input projection of ALL steps at once:  Z = X W_ih^T   [T*B, 4H]
 *   2. for t = 0 .. T-1:  Z_t += h_{t-1} W_hh^T                    [B, 4H]
 *                         one fused loop: gates, c_t, tanh(c_t), h_t
 * Only step 2's small product is sequential; it is what makes an RNN slow.
 * On CPUs with AVX-512 or AVX2 each step instead does its own input projection
 * next to the recurrent product, both on weights packed once per batch
 * (layers/gemm_packed.h: the same sums on either, bit for bit); with AVX-512 and
 * H a multiple of 16 the two products and the cell loop are one kernel whose
 * register tile holds the four gates of 16 units (layers/lstm_fused.h), bit for
 * bit the same numbers.
 * Sequences never interact, so step 2 is split by sequence across the
 * threads (core/threads.h: ct_parallel): each worker runs all T steps for its
 * own share of the batch - its own small gemm, its own fused loop - with no
 * synchronisation between steps. The big all-steps products are split into
 * row blocks across the same workers (ct_sgemm).
 *
 * ---------------------------------------------------------------------------
 * Backpropagation through time. Let E be the loss. Write dh_t = dE/dh_t for the
 * TOTAL gradient reaching h_t, which has two sources: the layer's output at t
 * (dout, or the layer above) and the next step, through z_{t+1} = ... + h_t W_hh^T:
 *
 *   dh_t = dout_t + dz_{t+1} W_hh                                        (1)
 *
 * c_t reaches E through h_t = o_t tanh(c_t) and through c_{t+1} = f_{t+1} c_t + ...:
 *
 *   dc_t = dh_t * o_t * (1 - tanh^2(c_t)) + dc_{t+1} * f_{t+1}           (2)
 *
 * From h_t = o_t tanh(c_t) and c_t = f_t c_{t-1} + i_t g_t, the gate gradients
 * (r' is the derivative of the recurrent activation, written with its output:
 * sigmoid' = y (1 - y); hard sigmoid' = 0.2 where 0 < y < 1, else 0):
 *
 *   dz_o = dh_t * tanh(c_t) * r'(o_t)
 *   dz_i = dc_t * g_t       * r'(i_t)
 *   dz_f = dc_t * c_{t-1}   * r'(f_t)
 *   dz_g = dc_t * i_t       * (1 - g_t^2)                                (3)
 *
 * and what flows back to step t-1:  dc_{t-1} gets dc_t * f_t  (the "+ dc_{t+1}
 * f_{t+1}" of (2), one step earlier), dh_{t-1} gets dz_t W_hh  (the second term
 * of (1)). dz_t is all the parameters need:
 *
 *   dW_hh += sum_t dz_t^T h_{t-1}    dW_ih += sum_t dz_t^T x_t    db_ih, db_hh += sum_t dz_t
 *   dx_t   = dz_t W_ih
 *
 * Because these sums run over all steps, they are done AFTER the time loop as
 * three big products over [T*B] rows; only (1)-(3) are sequential.
 *
 * Masking: at a padded step t >= len[b] the forward pass copied the state, so
 * backward copies the gradient: dh_{t-1} = dh_t, dc_{t-1} = dc_t, and dz_t = 0.
 * With dz_t = 0 that step adds nothing to any weight gradient nor to dx_t, and
 * the padded output (always 0) receives no gradient. For RETURN_LAST the output
 * is h at len-1 = the carried h at T-1, so dout simply enters at t = T-1 and is
 * carried down to len-1.
 *
 * Stacked layers: layer l > 0 reads layer l-1's h sequence. Its masked steps
 * never influence anything (their z is computed but never used, their dz is 0),
 * so the carried h can be fed up as it is, and the gradient passed down,
 * dz W_ih of the layer above, is 0 at masked steps as the mask demands.
 *
 * ---------------------------------------------------------------------------
 * Memory. Everything is time-major inside, so that the rows a step touches are
 * one contiguous [B, .] block and the "all steps" products see one contiguous
 * [T*B, .] matrix.
 *
 *   cache (ct_lstm_cache_floats):
 *     x     [T, B, I]      time-major copy of the input (layer 0's X for dW_ih)
 *     per layer l:
 *       gate [T, B, 4H]    z_t, overwritten in place by (i, f, g, o)_t
 *       h    [T+1, B, H]   h[0] = 0, h[t+1] = h_t  (so h[t] is step t's h_{t-1},
 *                          and h[0..T) is the [T*B, H] matrix dW_hh needs)
 *       c    [T+1, B, H]   likewise c
 *     tanh(c_t) is not kept: the backward computes it again from c_t with the forward's
 *     own function (the same bits), which costs it an exponential and a division per unit
 *     and saves a quarter of what it reads from the cache (bench/RESULTS.md)
 *   workspace (ct_lstm_workspace_floats):
 *     dz    [T, B, 4H]     one layer's gate gradients
 *     dseq  [T, B, max(H, I)]  gradient into the layer's h sequence from the
 *                          layer above; finally dx in time-major order
 *     dh, dc [B, H]        the carried dh_t and dc_t
 *     db    [CT_MAX_WORKERS, 4H]  sum of dz over steps and sequences, one
 *                          partial sum per worker, added in worker order
 * Every region starts on a 16-float boundary.
 *
 * ---------------------------------------------------------------------------
 * bf16 (d->dtype = CT_BF16): the same equations with every matrix product on
 * layers/gemm_bf16.h (AMX tiles or vdpbf16ps): its operands rounded to bfloat16
 * (to nearest even), its sums float32. Per layer and step, for a worker's rows:
 *
 *   forward   z_t  = x_t W_ih^T + h_{t-1} W_hh^T        W_ih^T, W_hh^T packed once per batch
 *             on the AMX tiles (or their model) with H a multiple of 16, one product
 *             [x_t | h_{t-1}] [W_ih | W_hh]^T with the cell applied per 16 or 32 rows
 *             (layers/lstm_bf16.h: the fused step; ct_lstm_set_fused(0) for the two
 *             products and the cell loop)
 *   backward  dh  += dz_t W_hh                         W_hh packed once per batch
 *             dW_hh += dz_t^T h_{t-1}   dW_ih += dz_t^T x_t   h_{t-1}, x_t packed per step,
 *             the products over a window of steps (LSTM_BF16_DW_K: same bits, fewer passes over dW)
 *   after     dX   = dz W_ih                           W_ih packed once; rows split across workers
 *
 * What stays float32 is what mixed precision keeps in float32 (Micikevicius et al.
 * 2018): the pre-activations z as the products leave them, the biases, the gate
 * functions, c and h, every gradient as it is summed over steps and workers, and
 * the weights themselves. Error: each product obeys gemm_bf16.h's bound (2) - at
 * most (2^-7 + 2^-16 + gamma_K (1 + 2^-8)^2) sum |a||b| for a K-term sum - and the
 * rest of a step is the float32 arithmetic of the float32 path. Across steps these
 * errors pass through the recurrence like any perturbation of z, so no closed bound
 * is given for a whole sequence; tests/test_lstm_bf16.c compares the layer with the
 * float32 layer fed the same bf16-rounded weights and inputs, and measures the drift.
 *
 * The gates kept for the backward (with the sigmoid) are bf16 too, as oneDNN's bf16
 * LSTM keeps its workspace: the forward computes the gates, c and h in float32 and
 * uses them at full precision, and stores i, f, g, o rounded (gate16, 1 KiB per row
 * at H = 128 instead of 2). The backward reads 40% fewer bytes of cache - on the AMX
 * Xeon of bench/RESULTS.md it is bound by those reads, and the step took 2 ms less of
 * 20 - and its equations (2)-(3) see gates off by at most 2^-8 of themselves:
 * docs/precision.md propagates that to a bound on dz and dc, which the tests check.
 * Not with the hard sigmoid: its derivative jumps from 0.2 to 0 at y = 1, and a gate
 * just below 1 can round to 1; those gates stay float32.
 * The extra memory (bf16, counted in floats): the packed weights in the cache and
 * workspace, the kept gates, and per worker a packed block of rows and an operand buffer.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cblas.h>
#include "core/hot.h"
#include "core/threads.h"
#include "layers/lstm.h"   /* after <cblas.h>: it removes complex.h's macro I */
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"
#include "layers/lstm_fused.h"
#include "layers/lstm_bf16.h"
#include "core/bf16.h"

/* ---- scalar math for the fused gate loops ----------------------------------
 * Written branch-free so the compiler vectorises the gate loops (libm's expf and
 * tanhf are opaque calls that it cannot). e^x = 2^k e^r with k = round(x/ln 2),
 * |r| <= ln2/2, e^r from Cephes's degree-6 polynomial: relative error ~2e-7. */
#ifdef __FMA__
#define LSTM_MADD(a, b, c) fmaf((a), (b), (c))
#else
#define LSTM_MADD(a, b, c) ((a) * (b) + (c))
#endif

static inline float lstm_expf(float x)
{
    x = x < -87.0f ? -87.0f : x;          /* result stays a normal float */
    x = x > 88.0f ? 88.0f : x;
    /* k = round(x / ln 2): adding 1.5 * 2^23 pushes the fraction bits out (a
     * floorf would do, but GCC vectorises it only with -fno-trapping-math) */
    float k = LSTM_MADD(x, 1.44269504088896341f, 12582912.0f) - 12582912.0f;
    float r = LSTM_MADD(k, -0.693359375f, x);       /* ln 2 split in two for exactness */
    r = LSTM_MADD(k, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = LSTM_MADD(p, r, 1.3981999507e-3f);
    p = LSTM_MADD(p, r, 8.3334519073e-3f);
    p = LSTM_MADD(p, r, 4.1665795894e-2f);
    p = LSTM_MADD(p, r, 1.6666665459e-1f);
    p = LSTM_MADD(p, r, 5.0000001201e-1f);
    p = LSTM_MADD(p, r * r, r + 1.0f);
    uint32_t bits = (uint32_t)((int32_t)k + 127) << 23;   /* 2^k as a float */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline float lstm_sigmoidf(float x) { return 1.0f / (1.0f + lstm_expf(-x)); }
/* tanh x = 1 - 2 / (1 + e^{2x}); absolute error ~1e-7 (not relative near 0). */
static inline float lstm_tanhf(float x) { return 1.0f - 2.0f / (1.0f + lstm_expf(2.0f * x)); }
/* Keras 2's hard sigmoid, as ct_hard_sigmoidf in activation.h. */
static inline float lstm_hard_sigmoidf(float x)
{
    float y = LSTM_MADD(0.2f, x, 0.5f);
    y = y < 0.0f ? 0.0f : y;
    return y > 1.0f ? 1.0f : y;
}
/* r'(z) written with the output y = r(z). */
static inline float lstm_dsigmoid(float y) { return y * (1.0f - y); }
static inline float lstm_dhard_sigmoid(float y) { return (y > 0.0f && y < 1.0f) ? 0.2f : 0.0f; }

/* ---- layout ---------------------------------------------------------------- */

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

typedef struct {
    float *gate;       /* [T, B, 4H] */
    float *h;          /* [T+1, B, H] */
    float *c;          /* [T+1, B, H] */
    uint16_t *gate16;  /* bf16 with the sigmoid: [T, B, 4H], the gates rounded to bf16, as the backward reads them
                        * (gate is then the forward's scratch); NULL: the backward reads gate */
} lstm_layer_cache;

typedef struct {
    float *x;                                  /* [T, B, I] */
    lstm_layer_cache l[LSTM_MAX_LAYERS];
    float *wp;                                 /* W_hh^T [H, 4H] packed (layers/gemm_packed.h), one layer at a time */
    float *wp_ih;                              /* W_ih^T [I_l, 4H] packed, likewise */
    float *wpf;                                /* [W_ih | W_hh] packed per unit block (layers/lstm_fused.h), one layer at a time */
    uint16_t *bih, *bhh;                       /* bf16: W_ih^T [I_l, 4H] and W_hh^T [H, 4H] packed (layers/gemm_bf16.h) */
    uint16_t *bwf;                             /* bf16, H a multiple of 16: [W_ih | W_hh] packed for the tiles' fused step (layers/lstm_bf16.h) */
    uint16_t *work;                            /* bf16: per worker, a step's rows rounded to bf16 */
    size_t work_elems;                         /* per worker */
    float *zblk;                               /* bf16 fused step: per worker, one block's products [32, 4H] */
    size_t zblk_floats;                        /* per worker */
} lstm_cache_view;

static size_t halves(size_t elems) { return (elems + 1) / 2; }   /* floats that hold `elems` bf16 */
/* Whether the forward keeps the gates for the backward in bf16 (the "bf16" section above). */
static int lstm_gates_bf16(const lstm_dims *d) { return d->dtype == CT_BF16 && d->recur == LSTM_SIGMOID; }
static int lstm_wide(const lstm_dims *d) { return d->I > d->H ? d->I : d->H; }
static int lstm_parts(int B);

/* Carves the cache into its regions; returns the floats used (cache may be NULL to only count). */
static size_t lstm_cache_layout(lstm_cache_view *v, float *cache, const lstm_dims *d)
{
    size_t TB = (size_t)d->T * (size_t)d->B, H = (size_t)d->H, B = (size_t)d->B;
    size_t off = 0;
#define TAKE(ptr, n) do { (ptr) = cache ? cache + off : NULL; off += round16(n); } while (0)
    lstm_cache_view dummy;
    if (!v) v = &dummy;
    TAKE(v->x, TB * (size_t)d->I);
    for (int l = 0; l < d->L; l++) {
        TAKE(v->l[l].gate, TB * 4 * H);
        TAKE(v->l[l].h, TB * H + B * H);
        TAKE(v->l[l].c, TB * H + B * H);
        float *g16;
        TAKE(g16, lstm_gates_bf16(d) ? halves(TB * 4 * H) : 0);
        v->l[l].gate16 = lstm_gates_bf16(d) ? (uint16_t *)g16 : NULL;
    }
    TAKE(v->wp, ct_gemm_pack_floats(d->H, 4 * d->H));
    TAKE(v->wp_ih, ct_gemm_pack_floats(d->I > d->H ? d->I : d->H, 4 * d->H));
    TAKE(v->wpf, d->H % 16 == 0 ? ct_lstm_fused_pack_floats(d->I > d->H ? d->I : d->H, d->H) : 0);
    if (d->dtype == CT_BF16) {
        const int parts = lstm_parts(d->B), rows = (d->B + parts - 1) / parts;
        float *f;
        TAKE(f, halves(ct_gemm_bf16_pack_elems(lstm_wide(d), 4 * d->H)));
        v->bih = (uint16_t *)f;
        TAKE(f, halves(ct_gemm_bf16_pack_elems(d->H, 4 * d->H)));
        v->bhh = (uint16_t *)f;
        const int fused = d->H % CT_LSTM_BF16_UNITS == 0;   /* whether the tiles' fused step can run; it chooses at run time */
        TAKE(f, fused ? halves(ct_lstm_bf16_pack_elems(lstm_wide(d), d->H)) : 0);
        v->bwf = (uint16_t *)f;
        const size_t w1 = ct_gemm_bf16_work_elems(rows, lstm_wide(d)), w2 = fused ? ct_lstm_bf16_work_elems(rows, lstm_wide(d), d->H) : 0;
        v->work_elems = round16(w1 > w2 ? w1 : w2);
        TAKE(f, halves((size_t)parts * v->work_elems));
        v->work = (uint16_t *)f;
        v->zblk_floats = fused ? round16((size_t)CT_LSTM_BF16_BLOCK_ROWS * 4 * H) : 0;
        TAKE(v->zblk, (size_t)parts * v->zblk_floats);
    }
    return off;
}

typedef struct {
    float *dz;     /* [T, B, 4H] */
    float *dseq;   /* [T, B, max(H, I)] */
    float *dh;     /* [B, H] */
    float *dc;     /* [B, H] */
    float *db;     /* [CT_MAX_WORKERS, 4H] */
    float *wp;     /* W_hh [4H, H] packed (layers/gemm_packed.h), one layer at a time */
    float *dw;     /* per worker: its sums of dW_hh [4H, H] then dW_ih [4H, max(H, I)] or its transpose (the packed kernel's path);
                    * bf16: dW_hh [4H, Hp] then dW_ih [4H, Ip], each row padded to 32 columns (lstm_dw_ld) */
    float *pk;     /* per worker: one step's h_{t-1} or x_t rows, packed */
    float *dzs;    /* per worker: one step's dz rows, when dz is not kept for dX (it then stays in cache) */
    size_t dw_floats, pk_floats, dzs_floats;   /* per worker */
    uint16_t *bwh, *bwi;   /* bf16: W_hh [4H, H] and W_ih [4H, I_l] packed (layers/gemm_bf16.h) */
    uint16_t *bph, *bpx;   /* bf16: per worker, a window's h_{t-1} and x_t rows packed, [Kw, H] and [Kw, I_l] */
    uint16_t *work;        /* bf16: per worker, an operand rounded to bf16 (dz_t [rows, 4H] in the steps) */
    uint16_t *workt;       /* bf16: per worker, a window's dz_t^T [4H, Kw]: work's values transposed, step by step */
    float *grow;           /* bf16: per worker, one row's kept gates widened [4H] (the scalar backward cell) */
    size_t bph_elems, bpx_elems, work_elems, workt_elems;   /* per worker */
} lstm_ws_view;

/* The rows of dX = dz W_ih that one bf16 product takes (its operand buffer's size). */
#define LSTM_BF16_DX_ROWS 256

/* bf16: the weight gradients dW += dz_t^T [h_{t-1} | x_t] of several steps in one product.
 * A worker's product for one step has K = its rows, padded to 32 (a tile's k); each product
 * loads every float32 tile of dW from memory and stores it again (dW_hh and dW_ih: 336 KB at
 * H = 128, I = 40), so with few rows per worker - 16 at the bench batch on 16 threads - that
 * traffic, not the multiply-adds, is the product's time. A window of steps t, t-1, ..., each
 * step's rows padded to 32 as before, is one product of K = the window's padded rows: every
 * element of dW sees the same tile instructions on the same pairs in the same order (the
 * steps descending), only without the stores and loads between them, so the bits are the
 * per-step products'. A window reaches LSTM_BF16_DW_K rows (or one step, where a step has
 * more); step 0 (no h_{-1}) is a window of its own. */
#define LSTM_BF16_DW_K 256
static int lstm_bf16_dw_windows = 1;
void ct_lstm_set_bf16_dw_windows(int on) { lstm_bf16_dw_windows = on != 0; }
static int round32(int n) { return (n + 31) / 32 * 32; }
/* Steps per window for a worker's rows (1 where windows are off), and the widest window's K. */
static int lstm_dw_steps(int rows) { return lstm_bf16_dw_windows && round32(rows) < LSTM_BF16_DW_K ? LSTM_BF16_DW_K / round32(rows) : 1; }
static int lstm_dw_kmax(int rows) { return round32(rows) > LSTM_BF16_DW_K ? round32(rows) : LSTM_BF16_DW_K; }
/* The row length of a worker's dW sums: n (float32), or n padded to 32 (bf16: whole tiles, no edges). */
static size_t lstm_dw_ld(int n, int bf16) { return bf16 ? (size_t)round32(n) : (size_t)n; }

static size_t lstm_ws_layout(lstm_ws_view *v, float *ws, const lstm_dims *d)
{
    size_t TB = (size_t)d->T * (size_t)d->B, H = (size_t)d->H, B = (size_t)d->B;
    size_t wide = (size_t)(d->H > d->I ? d->H : d->I);
    size_t off = 0;
    float *cache = ws;   /* for TAKE */
    lstm_ws_view dummy;
    if (!v) v = &dummy;
    TAKE(v->dz, TB * 4 * H);
    TAKE(v->dseq, TB * wide);
    TAKE(v->dh, B * H);
    TAKE(v->dc, B * H);
    TAKE(v->db, (size_t)CT_MAX_WORKERS * 4 * H);
    TAKE(v->wp, ct_gemm_pack_floats(4 * d->H, d->H));
    /* the weight gradients summed step by step, while dz_t is in cache: per worker */
    int parts = lstm_parts(d->B), rows = (d->B + parts - 1) / parts;
    const int bf16 = d->dtype == CT_BF16;
    v->dw_floats = round16(4 * H * (lstm_dw_ld(d->H, bf16) + lstm_dw_ld((int)wide, bf16)));
    v->pk_floats = round16(ct_gemm_pack_floats(rows, (int)wide));
    TAKE(v->dw, (size_t)parts * v->dw_floats);
    TAKE(v->pk, (size_t)parts * v->pk_floats);
    v->dzs_floats = round16((size_t)rows * 4 * H);
    TAKE(v->dzs, (size_t)parts * v->dzs_floats);
    if (d->dtype == CT_BF16) {
        const int G = 4 * d->H;
        float *f;
        TAKE(f, halves(ct_gemm_bf16_pack_elems(G, d->H)));
        v->bwh = (uint16_t *)f;
        TAKE(f, halves(ct_gemm_bf16_pack_elems(G, (int)wide)));
        v->bwi = (uint16_t *)f;
        const int kw = lstm_dw_kmax(rows);   /* the widest window */
        v->bph_elems = round16(ct_gemm_bf16_pack_elems(kw, d->H));
        TAKE(f, halves((size_t)parts * v->bph_elems));
        v->bph = (uint16_t *)f;
        v->bpx_elems = round16(ct_gemm_bf16_pack_elems(kw, (int)wide));
        TAKE(f, halves((size_t)parts * v->bpx_elems));
        v->bpx = (uint16_t *)f;
        size_t w1 = ct_gemm_bf16_work_elems(rows, G), w2 = ct_gemm_bf16_work_elems(G, kw);
        size_t w3 = ct_gemm_bf16_work_elems(LSTM_BF16_DX_ROWS, G);
        v->work_elems = round16(w1 > w3 ? w1 : w3);
        TAKE(f, halves((size_t)parts * v->work_elems));
        v->work = (uint16_t *)f;
        v->workt_elems = round16(w2);
        TAKE(f, halves((size_t)parts * v->workt_elems));
        v->workt = (uint16_t *)f;
        TAKE(v->grow, (size_t)parts * (size_t)G);
    }
#undef TAKE
    return off;
}

static void lstm_dims_check(const lstm_dims *d)
{
    CT_ASSERT(d->B > 0 && d->T > 0 && d->I > 0 && d->H > 0);
    CT_ASSERT(d->L >= 1 && d->L <= LSTM_MAX_LAYERS);
    CT_ASSERT(d->ret == LSTM_RETURN_LAST || d->ret == LSTM_RETURN_SEQUENCE || d->ret == LSTM_RETURN_MEAN);
    CT_ASSERT(d->recur == LSTM_SIGMOID || d->recur == LSTM_HARD_SIGMOID);
    CT_ASSERT(d->dtype == CT_F32 || d->dtype == CT_BF16);
}

size_t ct_lstm_cache_floats(const lstm_dims *d)     { lstm_dims_check(d); return lstm_cache_layout(NULL, NULL, d); }
size_t ct_lstm_workspace_floats(const lstm_dims *d) { lstm_dims_check(d); return lstm_ws_layout(NULL, NULL, d); }

/* ---- parameters ------------------------------------------------------------ */

ct_status ct_lstm_params_add(lstm_ids *ids, ct_params *ps, const char *prefix, int I, int H, int L)
{
    if (L < 1 || L > LSTM_MAX_LAYERS)
        return ct_fail(CT_EINVAL, "lstm %s: %d layers requested; use 1 to %d (raise LSTM_MAX_LAYERS in layers/lstm.h for more)",
                       prefix, L, LSTM_MAX_LAYERS);
    if (I <= 0 || H <= 0)
        return ct_fail(CT_EINVAL, "lstm %s: input size %d and hidden size %d must both be positive", prefix, I, H);
    for (int k = 0; k < L; k++) {
        int Ik = k == 0 ? I : H;
        char name[CT_NAME_MAX + 32];
        int s_ih[2] = { 4 * H, Ik }, s_hh[2] = { 4 * H, H }, s_b[1] = { 4 * H };
        struct { int *id; const char *what; int ndim; const int *shape; ct_init init; } p[4] = {
            { &ids->w_ih[k], "w_ih", 2, s_ih, ct_init_glorot(Ik, 4 * H) },
            { &ids->w_hh[k], "w_hh", 2, s_hh, ct_init_orthogonal(1.0f) },
            { &ids->b_ih[k], "b_ih", 1, s_b,  ct_init_forget_bias(1.0f) },
            { &ids->b_hh[k], "b_hh", 1, s_b,  ct_init_zeros() },
        };
        for (int j = 0; j < 4; j++) {
            snprintf(name, sizeof name, "%s/%s_l%d", prefix, p[j].what, k);
            *p[j].id = ct_params_add(ps, name, p[j].ndim, p[j].shape, p[j].init);
            if (*p[j].id < 0) return CT_EINVAL;   /* ct_params_add left the message */
        }
    }
    ids->L = L;
    return CT_OK;
}

void ct_lstm_params_view(lstm_weights *w, lstm_grads *g, const ct_params *ps, const lstm_ids *ids)
{
    for (int k = 0; k < ids->L; k++) {
        w[k] = (lstm_weights){ ct_params_data(ps, ids->w_ih[k]), ct_params_data(ps, ids->w_hh[k]),
                               ct_params_data(ps, ids->b_ih[k]), ct_params_data(ps, ids->b_hh[k]) };
        if (g) g[k] = (lstm_grads){ ct_params_grad(ps, ids->w_ih[k]), ct_params_grad(ps, ids->w_hh[k]),
                                    ct_params_grad(ps, ids->b_ih[k]), ct_params_grad(ps, ids->b_hh[k]) };
    }
}

/* ---- forward ---------------------------------------------------------------- */

static int lstm_fused_on = 1;
void ct_lstm_set_fused(int on) { lstm_fused_on = on != 0; }
static ct_lstm_tile_order lstm_bf16_order = CT_LSTM_TILES_ROWS_OUTER;
void ct_lstm_set_bf16_rows_outer(int on) { lstm_bf16_order = on ? CT_LSTM_TILES_ROWS_OUTER : CT_LSTM_TILES_UNITS_OUTER; }

/* One step's fused loop for one sequence, units 0 .. n-1 of its H: z (pre-activations
 * without the biases; gate q of unit j at z[q H + j]) becomes the gates (i, f, g, o);
 * writes c_t and h_t. n = H for a whole row; the bf16 tiles pass 16 units at a
 * time, every pointer moved to the block's first unit. */
static inline __attribute__((always_inline))
void lstm_cell_forward(float *restrict z, float *restrict c, float *restrict h,
                       const float *restrict cprev, const float *restrict b_ih, const float *restrict b_hh,
                       int n, int H, int hard)
{
    for (int j = 0; j < n; j++) {
        float zi = z[j]         + b_ih[j]         + b_hh[j];
        float zf = z[H + j]     + b_ih[H + j]     + b_hh[H + j];
        float zg = z[2 * H + j] + b_ih[2 * H + j] + b_hh[2 * H + j];
        float zo = z[3 * H + j] + b_ih[3 * H + j] + b_hh[3 * H + j];
        float i = hard ? lstm_hard_sigmoidf(zi) : lstm_sigmoidf(zi);
        float f = hard ? lstm_hard_sigmoidf(zf) : lstm_sigmoidf(zf);
        float g = lstm_tanhf(zg);
        float o = hard ? lstm_hard_sigmoidf(zo) : lstm_sigmoidf(zo);
        float ct = f * cprev[j] + i * g;                 /* c_t = f c_{t-1} + i g */
        float tct = lstm_tanhf(ct);
        z[j] = i; z[H + j] = f; z[2 * H + j] = g; z[3 * H + j] = o;
        c[j] = ct;
        h[j] = o * tct;                                  /* h_t = o tanh(c_t) */
    }
}

CT_HOT
static __attribute__((noinline))
void lstm_cell_forward_sigmoid(float *restrict z, float *restrict c, float *restrict h,
                               const float *restrict cprev, const float *restrict b_ih, const float *restrict b_hh, int n, int H)
{ lstm_cell_forward(z, c, h, cprev, b_ih, b_hh, n, H, 0); }
CT_HOT
static __attribute__((noinline))
void lstm_cell_forward_hard(float *restrict z, float *restrict c, float *restrict h,
                            const float *restrict cprev, const float *restrict b_ih, const float *restrict b_hh, int n, int H)
{ lstm_cell_forward(z, c, h, cprev, b_ih, b_hh, n, H, 1); }

/* The same loop for the bf16 tiles' fused step with the unit blocks outside (layers/lstm_bf16.h,
 * "Order"): `rows` consecutive time-major rows, units 0 .. 15 of each from the block's first
 * unit (every pointer already there); z's rows 4H floats apart, the others' H. With the unit
 * count a constant each row is whole vectors, and one call covers the block (on the tile
 * model, siamese shapes, 2 threads: 32-40 ms of CPU per training step in this loop, against
 * 39-46 ms with one call per row; the float32 path's whole rows take 16 ms for the same
 * elements, so the unit blocks' scattered 64-byte pieces of c and h still cost, at
 * least on the model, which is why the rows go outside). */
CT_HOT
static __attribute__((noinline))
void lstm_cell_block_sigmoid(float *restrict z, float *restrict c, float *restrict h,
                             const float *restrict cprev, const float *restrict b_ih, const float *restrict b_hh, int rows, int H)
{
    for (int r = 0; r < rows; r++)
        lstm_cell_forward(z + (size_t)r * 4 * H, c + (size_t)r * H, h + (size_t)r * H, cprev + (size_t)r * H,
                          b_ih, b_hh, CT_LSTM_BF16_UNITS, H, 0);
}
CT_HOT
static __attribute__((noinline))
void lstm_cell_block_hard(float *restrict z, float *restrict c, float *restrict h,
                          const float *restrict cprev, const float *restrict b_ih, const float *restrict b_hh, int rows, int H)
{
    for (int r = 0; r < rows; r++)
        lstm_cell_forward(z + (size_t)r * 4 * H, c + (size_t)r * H, h + (size_t)r * H, cprev + (size_t)r * H,
                          b_ih, b_hh, CT_LSTM_BF16_UNITS, H, 1);
}

/* Padded steps of sequences [b0, b1) at step t (t >= len[b]): the state is carried. */
static void lstm_step_carry(const lstm_layer_cache *lc, int t, const int *len, int B, int b0, int b1, int H)
{
    for (int b = b0; len && b < b1; b++) {
        if (t < len[b]) continue;
        size_t row = (size_t)t * B + b;
        memcpy(lc->h + (row + B) * H, lc->h + row * H, (size_t)H * sizeof(float));
        memcpy(lc->c + (row + B) * H, lc->c + row * H, (size_t)H * sizeof(float));
    }
}

/* The fused loop of step t for sequences [b0, b1). */
static void lstm_step_forward(const lstm_layer_cache *lc, int t, const int *len, const lstm_weights *w,
                              int B, int b0, int b1, int H, int hard)
{
    size_t G = 4 * (size_t)H;
    for (int b = b0; b < b1; b++) {
        size_t row = (size_t)t * B + b;                  /* (t, b) in the time-major [T*B] rows */
        const float *hprev = lc->h + row * H, *cprev = lc->c + row * H;
        float *hnext = lc->h + (row + B) * H, *cnext = lc->c + (row + B) * H;
        if (len && t >= len[b]) {                        /* padded step: carry the state */
            memcpy(hnext, hprev, (size_t)H * sizeof *hnext);
            memcpy(cnext, cprev, (size_t)H * sizeof *cnext);
            continue;
        }
        if (hard) lstm_cell_forward_hard(lc->gate + row * G, cnext, hnext, cprev, w->b_ih, w->b_hh, H, H);
        else      lstm_cell_forward_sigmoid(lc->gate + row * G, cnext, hnext, cprev, w->b_ih, w->b_hh, H, H);
    }
}

/* The cell of one block of the bf16 tiles' fused step (layers/lstm_bf16.h): rows r0 ..
 * r0+nr-1 of the step's rows (time-major row row0 + r), units u0 .. u0+nu-1: 16 of them
 * (the unit blocks outside), or all H (the rows outside: the plain step's whole rows).
 * The tiles store each block's products in the worker's small zblk [32, 4H] (z_block);
 * the AVX-512 cell writes the gates into the cache from there, streamed: the forward
 * then never reads the cache's lines before overwriting them (on the Xeon of
 * bench/RESULTS.md the forward's writes of fresh lines were most of its time), or into
 * gate16 rounded. Without AVX-512 the scalar cell makes the gates in zblk, and they are
 * copied (or rounded) from there. */
typedef struct {
    const lstm_layer_cache *lc;
    const lstm_weights *w;
    float *zblk;                  /* [32, 4H]: the block's products, rows r0 .. r0+nr-1 at 0 .. nr-1 */
    size_t row0;                  /* t B + b0: the step's first row */
    int B, H, hard;
    int vec;                      /* the AVX-512 cell (layers/lstm_fused.h: the same operations, 16 units at a time) */
    int keep;                     /* the gates go to the cache (0: a forward only: none are stored) */
} lstm_cell_job;

static void lstm_cell_block(void *ctx, int r0, int nr, int u0, int nu)
{
    const lstm_cell_job *j = ctx;
    const size_t G = 4 * (size_t)j->H, H = (size_t)j->H, B = (size_t)j->B, row = j->row0 + (size_t)r0;
    float *gate = j->lc->gate + row * G + u0, *z = j->zblk + u0;
    float *cnext = j->lc->c + (row + B) * H + u0, *hnext = j->lc->h + (row + B) * H + u0;
    const float *cprev = j->lc->c + row * H + u0;
    const float *bi = j->w->b_ih + u0, *bh = j->w->b_hh + u0;
    uint16_t *g16 = j->lc->gate16 ? j->lc->gate16 + row * G + u0 : NULL;
    if (j->vec) {
        ct_lstm_fused_cell(nr, nu, j->H, z, G, cprev, bi, bh, g16 || !j->keep ? NULL : gate, j->keep ? g16 : NULL, G, cnext,
                           hnext, j->hard);
        return;
    }
    if (nu == CT_LSTM_BF16_UNITS) {
        if (j->hard) lstm_cell_block_hard(z, cnext, hnext, cprev, bi, bh, nr, j->H);
        else         lstm_cell_block_sigmoid(z, cnext, hnext, cprev, bi, bh, nr, j->H);
    } else
        for (size_t r = 0; r < (size_t)nr; r++) {   /* whole rows, as lstm_step_forward */
            if (j->hard) lstm_cell_forward_hard(z + r * G, cnext + r * H, hnext + r * H, cprev + r * H, bi, bh, nu, j->H);
            else         lstm_cell_forward_sigmoid(z + r * G, cnext + r * H, hnext + r * H, cprev + r * H, bi, bh, nu, j->H);
        }
    for (size_t r = 0; j->keep && r < (size_t)nr; r++)   /* the gates, made in zblk, to the cache */
        for (size_t q = 0; q < 4; q++) {
            if (g16) ct_bf16s_from_floats(g16 + r * G + q * H, z + r * G + q * H, (size_t)nu);
            else     memcpy(gate + r * G + q * H, z + r * G + q * H, (size_t)nu * sizeof *gate);
        }
}

/* One layer's recurrence (step 2) for one worker's share of the sequences. */
typedef struct {
    const lstm_layer_cache *lc;
    const lstm_weights *w;
    const float *wpf;             /* [W_ih | W_hh] packed per unit block: the fused step (layers/lstm_fused.h), or NULL */
    const float *wp;              /* W_hh^T packed, or NULL: cblas_sgemm (and the input projection done before) */
    const float *wp_ih;           /* W_ih^T packed: each step projects its own inputs */
    const lstm_cache_view *bf16;  /* bf16 products (its bih, bhh, work), or NULL */
    const uint16_t *bwf;          /* bf16: [W_ih | W_hh] packed for the tiles' fused step (layers/lstm_bf16.h), or NULL */
    ct_bf16_kernels bk;           /* bf16: what the fused step runs on (the tiles or their model) */
    const float *X;               /* [T*B, Il] the layer's input, time-major */
    const int *len;
    int B, T, H, Il, hard, parts;
    int keep;                     /* the gates kept for the backward (0: forward only; the fused step and the AVX-512 cell store none) */
} lstm_fwd_job;

static void lstm_recurrence_forward(void *ctx, int part, int worker)
{
    const lstm_fwd_job *j = ctx;
    const int B = j->B, H = j->H, b0 = (int)((long)B * part / j->parts), b1 = (int)((long)B * (part + 1) / j->parts);
    const size_t G = 4 * (size_t)H;
    (void)worker;
    for (int t = 0; t < j->T; t++) {
        /* gate_t [b0:b1, 4H] += h_{t-1} [b0:b1, H] W_hh^T   (h_{-1} = 0: nothing to add at t = 0) */
        const float *hp = j->lc->h + ((size_t)t * B + b0) * H;
        float *gt = j->lc->gate + ((size_t)t * B + b0) * G;
        if (j->wpf) {  /* products and cell in one pass over the rows; then the padded rows carry their state */
            const size_t r = (size_t)t * B + b0;
            ct_lstm_fused_step(b1 - b0, j->Il, H, j->X + r * j->Il, t > 0 ? hp : NULL, j->lc->c + r * H, j->wpf,
                               j->w->b_ih, j->w->b_hh, j->keep ? gt : NULL, j->lc->c + (r + B) * H, j->lc->h + (r + B) * H, j->hard);
            lstm_step_carry(j->lc, t, j->len, B, b0, b1, H);
            continue;
        }
        if (j->bwf) {    /* bf16 on tiles: products and cell block by block; then the padded rows carry their state */
            const size_t r = (size_t)t * B + b0;
            lstm_cell_job cj = { .lc = j->lc, .w = j->w, .zblk = j->bf16->zblk + (size_t)part * j->bf16->zblk_floats, .row0 = r,
                                 .B = B, .H = H, .hard = j->hard, .vec = lstm_fused_on && ct_lstm_fused_ok(H), .keep = j->keep };
            ct_lstm_bf16_step(j->bk, lstm_bf16_order, b1 - b0, j->Il, H, j->X + r * j->Il, t > 0 ? hp : NULL, j->bwf,
                              j->bf16->work + (size_t)part * j->bf16->work_elems, cj.zblk, (int)G, 1, lstm_cell_block, &cj);
            lstm_step_carry(j->lc, t, j->len, B, b0, b1, H);
            continue;
        }
        if (j->bf16) {   /* the same two products with bf16 operands */
            uint16_t *work = j->bf16->work + (size_t)part * j->bf16->work_elems;
            ct_gemm_bf16(b1 - b0, (int)G, j->Il, j->X + ((size_t)t * B + b0) * j->Il, j->Il, 0, j->bf16->bih, work, gt, (int)G, 0);
            if (t > 0) ct_gemm_bf16(b1 - b0, (int)G, H, hp, H, 0, j->bf16->bhh, work, gt, (int)G, 1);
        } else if (j->wp) {   /* gate_t = x_t W_ih^T (+ h_{t-1} W_hh^T), while the rows are in cache */
            ct_gemm_packed(b1 - b0, (int)G, j->Il, j->X + ((size_t)t * B + b0) * j->Il, j->Il, 0, j->wp_ih, gt, (int)G, 0);
            if (t > 0) ct_gemm_packed(b1 - b0, (int)G, H, hp, H, 0, j->wp, gt, (int)G, 1);
        } else if (t > 0) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b1 - b0, (int)G, H, 1.0f, hp, H, j->w->w_hh, H, 1.0f, gt, (int)G);
        }
        lstm_step_forward(j->lc, t, j->len, j->w, B, b0, b1, H, j->hard);
        if (j->lc->gate16)   /* the gates kept for the backward, rounded */
            ct_bf16s_from_floats(j->lc->gate16 + ((size_t)t * B + b0) * G, gt, (size_t)(b1 - b0) * G);
    }
}

/* [B, T, I] <-> time-major [T, B, I]: one memcpy of I floats per (b, t), the sequences
 * [lo, hi) on each worker (ct_parallel_range: every row is copied on its own). */
typedef struct { float *dst; const float *src; int B, T, I, to_time_major; } lstm_transpose_job;

static void lstm_transpose_range(void *ctx, size_t lo, size_t hi)
{
    const lstm_transpose_job *j = ctx;
    const size_t I = (size_t)j->I;
    for (size_t b = lo; b < hi; b++)
        for (int t = 0; t < j->T; t++) {
            const size_t bt = (b * j->T + t) * I, tb = ((size_t)t * j->B + b) * I;
            if (j->to_time_major) memcpy(j->dst + tb, j->src + bt, I * sizeof *j->dst);
            else                  memcpy(j->dst + bt, j->src + tb, I * sizeof *j->dst);
        }
}

static void lstm_transpose(float *dst, const float *src, int B, int T, int I, int to_time_major)
{
    lstm_transpose_job j = { dst, src, B, T, I, to_time_major };
    ct_parallel_range((size_t)B, (size_t)B * T * I, lstm_transpose_range, &j);
}

/* Shares of the batch: one per thread, at most one per sequence. */
static int lstm_parts(int B)
{
    int n = ct_threads_get() < CT_MAX_WORKERS ? ct_threads_get() : CT_MAX_WORKERS;
    return n < B ? n : B;
}

void ct_lstm_forward(float *out, float *cache, const float *x, const int *len,
                  const lstm_weights *w, const lstm_dims *d)
{
    lstm_dims_check(d);
    const int B = d->B, T = d->T, I = d->I, H = d->H, L = d->L, hard = d->recur == LSTM_HARD_SIGMOID;
    const size_t TB = (size_t)T * B, G = 4 * (size_t)H;
    if (len) for (int b = 0; b < B; b++) CT_ASSERT(len[b] >= 1 && len[b] <= T);
    lstm_cache_view cv;
    lstm_cache_layout(&cv, cache, d);

    lstm_transpose(cv.x, x, B, T, I, 1);   /* x [B, T, I] -> time-major [T, B, I] */

    for (int l = 0; l < L; l++) {
        const lstm_layer_cache *lc = &cv.l[l];
        const int Il = l == 0 ? I : H;
        const float *X = l == 0 ? cv.x : cv.l[l - 1].h + (size_t)B * H;   /* [T*B, Il]: layer l-1's h_0..h_{T-1} */
        memset(lc->h, 0, (size_t)B * H * sizeof(float));                  /* h_{-1} = 0 */
        memset(lc->c, 0, (size_t)B * H * sizeof(float));                  /* c_{-1} = 0 */
        /* gate [T*B, 4H] = X [T*B, Il] W_ih^T + h_prev W_hh^T (the biases are added in the cell loop):
         * with the packed kernel each step does both products for its own rows; else the input
         * projection of all steps is one product here, and the steps add theirs */
        const float *wp = NULL, *wpf = NULL;
        const uint16_t *bwf = NULL;
        if (d->dtype == CT_BF16 && lstm_fused_on && ct_lstm_bf16_fused_ok(H)) {
            ct_lstm_bf16_pack(cv.bwf, w[l].w_ih, w[l].w_hh, Il, H);
            bwf = cv.bwf;
        } else if (d->dtype == CT_BF16) {
            ct_gemm_bf16_pack(cv.bih, w[l].w_ih, Il, 1, Il, (int)G);
            ct_gemm_bf16_pack(cv.bhh, w[l].w_hh, H, 1, H, (int)G);
        } else if (lstm_fused_on && ct_lstm_fused_ok(H)) {
            ct_lstm_fused_pack(cv.wpf, w[l].w_ih, w[l].w_hh, Il, H);
            wpf = cv.wpf;
        } else if (ct_gemm_packed_available()) {
            ct_gemm_pack(cv.wp_ih, w[l].w_ih, Il, 1, Il, (int)G);
            ct_gemm_pack(cv.wp, w[l].w_hh, H, 1, H, (int)G);
            wp = cv.wp;
        } else {
            ct_sgemm(CblasNoTrans, CblasTrans, (int)TB, (int)G, Il, 1.0f, X, Il, w[l].w_ih, Il, 0.0f, lc->gate, (int)G);
        }
        /* the steps, each worker with its share of the sequences */
        lstm_fwd_job job = { .lc = lc, .w = &w[l], .wpf = wpf, .wp = wp, .wp_ih = cv.wp_ih,
                             .bf16 = d->dtype == CT_BF16 ? &cv : NULL, .bwf = bwf, .bk = ct_kernels_bf16(), .X = X, .len = len, .B = B, .T = T, .H = H,
                             .Il = Il, .hard = hard, .parts = lstm_parts(B), .keep = !d->forward_only };
        ct_parallel(job.parts, job.parts, lstm_recurrence_forward, &job);
    }

    /* the last layer's output */
    const lstm_layer_cache *top = &cv.l[L - 1];
    for (int b = 0; b < B; b++) {
        int n = len ? len[b] : T;
        if (d->ret == LSTM_RETURN_LAST) {                /* carried h at T-1 = h at len-1 */
            memcpy(out + (size_t)b * H, top->h + ((size_t)T * B + b) * H, (size_t)H * sizeof *out);
        } else if (d->ret == LSTM_RETURN_SEQUENCE) {     /* out [B, T, H], 0 past the length */
            for (int t = 0; t < T; t++) {
                float *o = out + ((size_t)b * T + t) * H;
                if (t < n) memcpy(o, top->h + ((size_t)(t + 1) * B + b) * H, (size_t)H * sizeof *o);
                else       memset(o, 0, (size_t)H * sizeof *o);
            }
        } else {                                         /* mean over the n valid steps */
            float *o = out + (size_t)b * H;
            memset(o, 0, (size_t)H * sizeof *o);
            for (int t = 0; t < n; t++) {
                const float *ht = top->h + ((size_t)(t + 1) * B + b) * H;
                for (int j = 0; j < H; j++) o[j] += ht[j];
            }
            float s = 1.0f / (float)n;
            for (int j = 0; j < H; j++) o[j] *= s;
        }
    }
}

/* ---- backward --------------------------------------------------------------- */

/* One step's fused loop for one valid (unpadded) sequence. dh holds the
 * recurrent part of dh_t (dz_{t+1} W_hh, carried from the step above); `ds`
 * scaled by `s` is the output part (NULL: none). dc holds dc_{t+1} f_{t+1}.
 * Writes dz_t and adds it to db (four pointers, one per gate, so that the
 * compiler sees they do not overlap and vectorises the loop); leaves dc = dc_t f_t for step t-1, and dh = 0,
 * ready for the product that adds dz_t W_hh. Equations (1)-(3) at the top.
 * `with_ds` is a constant at each call: with a test of ds inside the loop, GCC
 * reads ds[j] through a masked load even when ds is NULL, and on AMD Zen a masked
 * load from an unmapped address with an empty mask is a slow microcode assist
 * (measured: the LSTM's whole backward ran 1.4x slower). */
static inline __attribute__((always_inline))
void lstm_cell_backward(float *restrict dz, float *restrict dbi, float *restrict dbf, float *restrict dbg,
                        float *restrict dbo, float *restrict dh, float *restrict dc,
                        const float *restrict ds, float s, const float *restrict gate,
                        const float *restrict c, const float *restrict cprev, int H, int hard, int with_ds)
{
    for (int j = 0; j < H; j++) {
        float i = gate[j], f = gate[H + j], g = gate[2 * H + j], o = gate[3 * H + j];
        float tct = lstm_tanhf(c[j]);                                  /* the forward's tanh(c_t), made again */
        float dht = with_ds ? dh[j] + s * ds[j] : dh[j];               /* (1) */
        float dct = dc[j] + dht * o * (1.0f - tct * tct);              /* (2) */
        float ri = hard ? lstm_dhard_sigmoid(i) : lstm_dsigmoid(i);
        float rf = hard ? lstm_dhard_sigmoid(f) : lstm_dsigmoid(f);
        float ro = hard ? lstm_dhard_sigmoid(o) : lstm_dsigmoid(o);
        float dzi = dct * g * ri;                                      /* (3) */
        float dzf = dct * cprev[j] * rf;
        float dzg = dct * i * (1.0f - g * g);
        float dzo = dht * tct * ro;
        dz[j] = dzi; dz[H + j] = dzf; dz[2 * H + j] = dzg; dz[3 * H + j] = dzo;
        dbi[j] += dzi; dbf[j] += dzf; dbg[j] += dzg; dbo[j] += dzo;
        dc[j] = dct * f;                                               /* dc_{t-1} gets dc_t f_t */
        dh[j] = 0.0f;                                                  /* dh_{t-1} = dz_t W_hh, added next */
    }
}

/* Out-of-line instances, one per recurrent activation: as function parameters
 * the restrict pointers let GCC vectorise the loop (inlined into the caller,
 * where dbi..dbo visibly point into one array, it gives up). */
CT_HOT
static __attribute__((noinline))
void lstm_cell_backward_sigmoid(float *restrict dz, float *restrict dbi, float *restrict dbf, float *restrict dbg,
                                float *restrict dbo, float *restrict dh, float *restrict dc,
                                const float *restrict ds, float s, const float *restrict gate,
                                const float *restrict c, const float *restrict cprev, int H)
{
    if (ds) lstm_cell_backward(dz, dbi, dbf, dbg, dbo, dh, dc, ds, s, gate, c, cprev, H, 0, 1);
    else    lstm_cell_backward(dz, dbi, dbf, dbg, dbo, dh, dc, NULL, 0.0f, gate, c, cprev, H, 0, 0);
}
CT_HOT
static __attribute__((noinline))
void lstm_cell_backward_hard(float *restrict dz, float *restrict dbi, float *restrict dbf, float *restrict dbg,
                             float *restrict dbo, float *restrict dh, float *restrict dc,
                             const float *restrict ds, float s, const float *restrict gate,
                             const float *restrict c, const float *restrict cprev, int H)
{
    if (ds) lstm_cell_backward(dz, dbi, dbf, dbg, dbo, dh, dc, ds, s, gate, c, cprev, H, 1, 1);
    else    lstm_cell_backward(dz, dbi, dbf, dbg, dbo, dh, dc, NULL, 0.0f, gate, c, cprev, H, 1, 0);
}

/* The backward loop reads the forward's gates and c_{t-1} from memory written long
 * before (out of cache; c_t it read one step ago, as step t+1's c_{t-1}): asking for the
 * rows a few sequences ahead keeps several misses in flight, which the hardware
 * prefetcher alone does not (measured: the loop runs ~1.7x faster). dz is prefetched
 * for writing. */
#define LSTM_PREFETCH_ROWS 4
static inline void lstm_prefetch_row(const lstm_layer_cache *lc, const float *dz, size_t row, size_t rows, int H)
{
    if (row >= rows) return;
    size_t G = 4 * (size_t)H;
    const char *pg = lc->gate16 ? (const char *)(lc->gate16 + row * G) : (const char *)(lc->gate + row * G);
    const char *pz = dz ? (const char *)(dz + row * G) : NULL;
    const char *pc = (const char *)(lc->c + row * H);
    for (size_t o = 0; o < G * (lc->gate16 ? sizeof(uint16_t) : sizeof(float)); o += 64) __builtin_prefetch(pg + o, 0);
    for (size_t o = 0; dz && o < G * sizeof(float); o += 64) __builtin_prefetch(pz + o, 1);
    for (size_t o = 0; o < (size_t)H * sizeof(float); o += 64) __builtin_prefetch(pc + o, 0);
}

/* One layer's backward recurrence, equations (1)-(3), for one worker's share of the sequences. */
typedef struct {
    const lstm_layer_cache *lc;
    const lstm_ws_view *wv;
    const lstm_weights *w;
    const float *wp;              /* W_hh packed, or NULL: cblas_sgemm (and the weight gradients as two products after) */
    int bf16;                     /* the products with bf16 operands (wv->bwh, bph, bpx, work, workt) */
    const float *X;               /* [T*B, Il] the layer's input, time-major */
    int Il;
    const float *dout;
    const int *len;
    int B, T, H, hard, top, parts;
    int keep_dz;                  /* dz of every step is needed after the loop (dX); else one step's, in cache */
    int dwi_t;                    /* the workers sum dW_ih transposed, [Il, 4H] (4H a multiple of 64) */
    int vec;                      /* the AVX-512 backward cell (layers/lstm_fused.h: the same operations) */
    lstm_return ret;
} lstm_bwd_job;

static void lstm_recurrence_backward(void *ctx, int part, int worker)
{
    const lstm_bwd_job *j = ctx;
    const lstm_ws_view *wv = j->wv;
    const int B = j->B, T = j->T, H = j->H, b0 = (int)((long)B * part / j->parts), b1 = (int)((long)B * (part + 1) / j->parts);
    const size_t TB = (size_t)T * B, G = 4 * (size_t)H;
    float *db = wv->db + (size_t)part * G;               /* this part's sum of dz */
    const size_t ldh = lstm_dw_ld(H, j->bf16), ldi = lstm_dw_ld(j->Il, j->bf16);
    float *dwh = wv->dw + (size_t)part * wv->dw_floats;  /* this part's sums of dW_hh [4H, H] and dW_ih [4H, Il] (rows ldh, ldi apart) */
    float *dwi = dwh + G * ldh, *pk = wv->pk + (size_t)part * wv->pk_floats;
    const int rows = b1 - b0, Il = j->Il;
    const int ks = round32(rows), wsteps = lstm_dw_steps(rows);   /* bf16: a step's padded rows, steps per window */
    int wn = 0, wi = 0;                                           /* bf16: the window's steps, and how many are in */
    (void)worker;
    if (j->wp || j->bf16) memset(dwh, 0, (G * ldh + G * ldi) * sizeof *dwh);
    for (int t = T - 1; t >= 0; t--) {
        float *dzt = j->keep_dz ? wv->dz + ((size_t)t * B + b0) * G : wv->dzs + (size_t)part * wv->dzs_floats;   /* [rows, 4H] */
        for (int b = b0; b < b1; b++) {
            size_t row = (size_t)t * B + b;
            float *dzr = dzt + (size_t)(b - b0) * G;
            int n = j->len ? j->len[b] : T;
            if (t >= n) {                                /* padded: dz = 0, dh and dc carried */
                memset(dzr, 0, G * sizeof *dzr);
                continue;
            }
            const float *ds;
            float s = 1.0f;
            if (!j->top)                                ds = wv->dseq + row * H;
            else if (j->ret == LSTM_RETURN_SEQUENCE)    ds = j->dout + ((size_t)b * T + t) * H;
            else if (j->ret == LSTM_RETURN_MEAN)      { ds = j->dout + (size_t)b * H; s = 1.0f / (float)n; }
            else                                        ds = NULL;
            float *dhb = wv->dh + (size_t)b * H, *dcb = wv->dc + (size_t)b * H;
            const float *gate = j->lc->gate + row * G, *ct = j->lc->c + (row + B) * H, *cprev = j->lc->c + row * H;
            const uint16_t *g16 = j->lc->gate16 ? j->lc->gate16 + row * G : NULL;
            lstm_prefetch_row(j->lc, j->keep_dz ? wv->dz : NULL, row + LSTM_PREFETCH_ROWS, TB, H);
            if (j->vec) {
                ct_lstm_fused_cell_backward(dzr, db, dhb, dcb, ds, s, g16 ? NULL : gate, g16, ct, cprev, H, j->hard);
                continue;
            }
            if (g16) {   /* the kept bf16 gates widened (exactly) for the scalar cell */
                float *wide = wv->grow + (size_t)part * G;
                ct_floats_from_bf16s(wide, g16, G);
                gate = wide;
            }
            if (j->hard) lstm_cell_backward_hard(dzr, db, db + H, db + 2 * H, db + 3 * H, dhb, dcb, ds, s, gate, ct, cprev, H);
            else         lstm_cell_backward_sigmoid(dzr, db, db + H, db + 2 * H, db + 3 * H, dhb, dcb, ds, s, gate, ct, cprev, H);
        }
        /* dh_{t-1} [b0:b1, H] += dz_t [b0:b1, 4H] W_hh [4H, H]   (padded rows: dz = 0, dh carried) */
        if (j->bf16) {   /* the same three products with bf16 operands; dW over a window of steps (LSTM_BF16_DW_K) */
            uint16_t *work = wv->work + (size_t)part * wv->work_elems, *workt = wv->workt + (size_t)part * wv->workt_elems;
            uint16_t *bph = wv->bph + (size_t)part * wv->bph_elems, *bpx = wv->bpx + (size_t)part * wv->bpx_elems;
            ct_gemm_bf16_pack_a(work, dzt, (int)G, 0, rows, (int)G);       /* dz_t [rows, 4H], rounded once for all three */
            if (t > 0) ct_gemm_bf16_packed(rows, H, (int)G, work, wv->bwh, wv->dh + (size_t)b0 * H, H, 1);
            if (wi == 0) wn = t == 0 ? 1 : t < wsteps ? t : wsteps;       /* steps t .. t-wn+1, all past 0; or step 0 alone */
            const int kw = wn * ks, k0 = wi * ks;                         /* the window's K; this step's first column */
            /* dz_t^T [4H, rows] as columns k0 .. k0+ks-1 of the window's [4H, kw]: moved, not rounded again;
             * h_{t-1} and x_t [rows, .] as its rows k0 .. (zeros to k0+ks) */
            ct_gemm_bf16_transpose_a(workt + k0, kw, work, rows, (int)G);
            if (t > 0) ct_gemm_bf16_pack_segment(bph, j->lc->h + ((size_t)t * B + b0) * H, H, k0, rows, k0 + ks, kw, H);
            ct_gemm_bf16_pack_segment(bpx, j->X + ((size_t)t * B + b0) * Il, Il, k0, rows, k0 + ks, kw, Il);
            if (++wi == wn) {   /* dW_hh [4H, H] += dz^T h_prev, dW_ih [4H, Il] += dz^T x over the window (step 0: dW_ih only) */
                if (t > 0) ct_gemm_bf16_packed((int)G, (int)ldh, kw, workt, bph, dwh, (int)ldh, 1);
                ct_gemm_bf16_packed((int)G, (int)ldi, kw, workt, bpx, dwi, (int)ldi, 1);
                wi = 0;
            }
        } else if (j->wp) {
            if (t > 0) {
                ct_gemm_packed(rows, H, (int)G, dzt, (int)G, 0, j->wp, wv->dh + (size_t)b0 * H, H, 1);
                /* dW_hh [4H, H] += dz_t^T [4H, rows] h_{t-1} [rows, H]   (step 0's h_prev is 0) */
                ct_gemm_pack(pk, j->lc->h + ((size_t)t * B + b0) * H, H, 0, rows, H);
                ct_gemm_packed((int)G, H, rows, dzt, (int)G, 1, pk, dwh, H, 1);
            }
            /* dW_ih [4H, Il] += dz_t^T [4H, rows] x_t [rows, Il]; where 4H is a multiple of 64, as
             * dW_ih^T [Il, 4H] += x_t^T [Il, rows] dz_t [rows, 4H]: dz_t is read in place, and no
             * panel is padded (with Il = 40 inputs, 64-column panels of x_t would be 38% zeros) */
            if (j->dwi_t) {
                ct_gemm_rowmajor(Il, (int)G, rows, j->X + ((size_t)t * B + b0) * Il, Il, 1, dzt, (int)G, dwi, (int)G, 1);
            } else {
                ct_gemm_pack(pk, j->X + ((size_t)t * B + b0) * Il, Il, 0, rows, Il);
                ct_gemm_packed((int)G, Il, rows, dzt, (int)G, 1, pk, dwi, Il, 1);
            }
        } else if (t > 0) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, H, (int)G, 1.0f, dzt, (int)G, j->w->w_hh, H,
                        1.0f, wv->dh + (size_t)b0 * H, H);
        }
    }
}

/* bf16: dX [TB, Il] = dz [TB, 4H] W_ih [4H, Il] (W_ih packed in wv->bwi), one share of the rows per
 * worker, LSTM_BF16_DX_ROWS rows per product (the operand buffer's size). */
typedef struct { const lstm_ws_view *wv; size_t TB; int G, Il, parts; } lstm_dx_job;

static void lstm_dx_bf16(void *ctx, int part, int worker)
{
    const lstm_dx_job *j = ctx;
    const lstm_ws_view *wv = j->wv;
    const size_t r0 = j->TB * (size_t)part / (size_t)j->parts, r1 = j->TB * (size_t)(part + 1) / (size_t)j->parts;
    uint16_t *work = wv->work + (size_t)part * wv->work_elems;
    (void)worker;
    for (size_t r = r0; r < r1; r += LSTM_BF16_DX_ROWS) {
        const int rows = (int)(r1 - r < LSTM_BF16_DX_ROWS ? r1 - r : LSTM_BF16_DX_ROWS);
        ct_gemm_bf16(rows, j->Il, j->G, wv->dz + r * (size_t)j->G, j->G, 0, wv->bwi, work, wv->dseq + r * (size_t)j->Il, j->Il, 0);
    }
}

/* The sums over the workers of what each added up for its sequences, for the gate rows
 * [lo, hi): db (into both bias gradients), and where the steps made them dW_hh [4H, H] and
 * dW_ih [4H, Il] (stored as dW_ih^T [Il, 4H] when dwi_t). Each value is added in worker
 * order 0, 1, ..., so the split of the rows changes no bit. */
typedef struct {
    const lstm_ws_view *wv;
    const lstm_grads *g;
    size_t G;
    int H, Il, parts, dw, dwi_t;
    size_t ldh, ldi;   /* the row lengths of the workers' dW_hh and dW_ih sums */
} lstm_reduce_job;

static void lstm_reduce_range(void *ctx, size_t lo, size_t hi)
{
    const lstm_reduce_job *j = ctx;
    const lstm_ws_view *wv = j->wv;
    const size_t G = j->G, H = (size_t)j->H, Il = (size_t)j->Il;
    for (size_t n = lo; n < hi; n++) {
        float db = wv->db[n];
        for (int p = 1; p < j->parts; p++) db += wv->db[(size_t)p * G + n];
        j->g->b_ih[n] += db;
        j->g->b_hh[n] += db;
    }
    if (!j->dw) return;
    for (int p = 0; p < j->parts; p++) {
        const float *dwh = wv->dw + (size_t)p * wv->dw_floats, *dwi = dwh + G * j->ldh;
        for (size_t n = lo; n < hi; n++)
            for (size_t k = 0; k < H; k++) j->g->w_hh[n * H + k] += dwh[n * j->ldh + k];
        if (j->dwi_t)   /* dwi is dW_ih^T [Il, 4H] */
            for (size_t n = lo; n < hi; n++)
                for (size_t k = 0; k < Il; k++) j->g->w_ih[n * Il + k] += dwi[k * G + n];
        else
            for (size_t n = lo; n < hi; n++)
                for (size_t k = 0; k < Il; k++) j->g->w_ih[n * Il + k] += dwi[n * j->ldi + k];
    }
}

void ct_lstm_backward(float *dx, const lstm_grads *g, float *ws, const float *dout, const float *cache,
                   const float *x, const int *len, const lstm_weights *w, const lstm_dims *d)
{
    lstm_dims_check(d);
    const int B = d->B, T = d->T, I = d->I, H = d->H, L = d->L, hard = d->recur == LSTM_HARD_SIGMOID;
    const size_t TB = (size_t)T * B, G = 4 * (size_t)H, BH = (size_t)B * H;
    lstm_cache_view cv;
    lstm_cache_layout(&cv, (float *)cache, d);
    lstm_ws_view wv;
    lstm_ws_layout(&wv, ws, d);

    for (int l = L - 1; l >= 0; l--) {
        const lstm_layer_cache *lc = &cv.l[l];
        const int Il = l == 0 ? I : H, top = l == L - 1;
        memset(wv.dc, 0, BH * sizeof(float));
        memset(wv.db, 0, (size_t)lstm_parts(B) * G * sizeof(float));
        /* where the output gradient enters: the last step only (LAST), or every step */
        if (top && d->ret == LSTM_RETURN_LAST) memcpy(wv.dh, dout, BH * sizeof(float));
        else memset(wv.dh, 0, BH * sizeof(float));

        /* the steps backwards, each worker with its share of the sequences and its own db; W_hh packed once */
        const float *wp = NULL;
        const int bf16 = d->dtype == CT_BF16;
        if (bf16) ct_gemm_bf16_pack(wv.bwh, w[l].w_hh, H, 0, (int)G, H);
        else if (ct_gemm_packed_available()) { ct_gemm_pack(wv.wp, w[l].w_hh, H, 0, (int)G, H); wp = wv.wp; }
        const float *X = l == 0 ? cv.x : cv.l[l - 1].h + BH;   /* [TB, Il]: the layer's input */
        lstm_bwd_job job = { .lc = lc, .wv = &wv, .w = &w[l], .wp = wp, .bf16 = bf16, .X = X, .Il = Il, .dout = dout, .len = len, .B = B,
                             .T = T, .H = H, .hard = hard, .top = top, .ret = d->ret, .parts = lstm_parts(B),
                             .keep_dz = !(wp || bf16) || l > 0 || dx != NULL, .dwi_t = wp && G % CT_GEMM_NR == 0,
                             .vec = lstm_fused_on && ct_lstm_fused_ok(H) };
        ct_parallel(job.parts, job.parts, lstm_recurrence_backward, &job);
        /* the workers' partial sums (db; dW_hh and dW_ih where the steps made them), added in
         * worker order, gate rows [lo, hi) on each worker */
        lstm_reduce_job rj = { .wv = &wv, .g = &g[l], .G = G, .H = H, .Il = Il, .parts = job.parts,
                               .dw = wp || bf16, .dwi_t = job.dwi_t, .ldh = lstm_dw_ld(H, bf16), .ldi = lstm_dw_ld(Il, bf16) };
        ct_parallel_range(G, G * (size_t)job.parts * (rj.dw ? (size_t)(H + Il) : 1), lstm_reduce_range, &rj);

        if (!(wp || bf16)) {
            /* dW_hh [4H, H] += dz^T [4H, (T-1)B] h_prev [(T-1)B, H]   (step 0's h_prev is 0) */
            if (T > 1)
                ct_sgemm(CblasTrans, CblasNoTrans, (int)G, H, (int)(TB - B),
                            1.0f, wv.dz + (size_t)B * G, (int)G, lc->h + BH, H, 1.0f, g[l].w_hh, H);
            /* dW_ih [4H, Il] += dz^T [4H, TB] X [TB, Il] */
            ct_sgemm(CblasTrans, CblasNoTrans, (int)G, Il, (int)TB,
                        1.0f, wv.dz, (int)G, X, Il, 1.0f, g[l].w_ih, Il);
        }
        /* dX [TB, Il] = dz [TB, 4H] W_ih [4H, Il]: layer l-1's dseq, or dx (time-major) */
        if ((l > 0 || dx) && bf16) {
            ct_gemm_bf16_pack(wv.bwi, w[l].w_ih, Il, 0, (int)G, Il);
            lstm_dx_job dj = { .wv = &wv, .TB = TB, .G = (int)G, .Il = Il, .parts = job.parts };
            ct_parallel(dj.parts, dj.parts, lstm_dx_bf16, &dj);
        } else if (l > 0 || dx)
            ct_sgemm(CblasNoTrans, CblasNoTrans, (int)TB, Il, (int)G,
                        1.0f, wv.dz, (int)G, w[l].w_ih, Il, 0.0f, wv.dseq, Il);
    }
    (void)x;   /* the cache holds the time-major copy */
    if (dx) lstm_transpose(dx, wv.dseq, B, T, I, 0);   /* [T, B, I] -> [B, T, I] */
}
