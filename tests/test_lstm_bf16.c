/* test_lstm_bf16.c - the LSTM in mixed precision (layers/lstm.c, "bf16"): its matrix
 * products on bf16 operands with float32 sums, everything else float32.
 *
 * The products run on the C model of the AMX tiles (ct_gemm_bf16_use_model), so the
 * cases run on any CPU; where the CPU has AMX-BF16 or AVX512-BF16, its own kernel is
 * also compared with the model.
 *
 *   - one step, against a derived bound: with T = 1 (h_{-1} = c_{-1} = 0) the layer is
 *     h = r(z_o) tanh(r(z_i) tanh(z_g)), z = x W_ih^T + b. Each z carries the product's
 *     error, at most e_q = gamma_I sum_k |x^_k| |w^_qk| against the same bf16-rounded
 *     operands (layers/gemm_bf16.h, bound (1)). The slopes are at most 1/4 (sigmoid; the
 *     hard sigmoid's is 0.2) and 1 (tanh), and |tanh|, r <= 1, so
 *         |h - h_ref| <= e_o / 4 + e_i / 4 + e_g + 2e-6
 *     where 2e-6 allows for the float32 cell itself against double (its exp is accurate
 *     to 2e-7 relative; the float32 layer meets PyTorch to 5e-7). h_ref is computed in
 *     double from the rounded operands. Checked per element.
 *   - many steps, against the float32 layer on the unrounded operands: output, dx and
 *     every parameter gradient, 2 layers, lengths, every return mode. Through the
 *     recurrence no closed bound is derived (lstm.c says why); the case states its
 *     tolerance, 2^-4 of each tensor's largest entry - eight times one product's
 *     operand rounding, 2^-7 - and prints what it measured.
 *   - the tiles' fused step (layers/lstm_bf16.h), on the model: its z equals ct_gemm_bf16
 *     over the stacked operands [x | h_{t-1}] and [W_ih | W_hh]^T bit for bit (the same
 *     instructions on the same pairs), each block's cell is called exactly once, after
 *     its z is stored; rows past a multiple of 16, K past a multiple of 32, t = 0.
 *     The layer cases above run with the fused step and with the plain one.
 *   - the threads: the forward output and dx are the same bit for bit on 1 and 2
 *     threads (a row's products never depend on how rows are shared).
 *   - the weight gradients over windows of steps: the bits of one product per step, on
 *     the model and on the CPU's own kernel, for windows of one to eight steps.
 *   - training: `ctrain train siamese-lstm --precision bf16` against --precision fp32
 *     with the same seed, 4 epochs: every epoch's loss and val_loss within 5% of
 *     float32's (a stated tolerance; measured here 0.1-0.4%), the precision in the
 *     header and the checkpoint; without bf16 products, one line naming what is
 *     missing and --precision fp32. (tests/test_checkpoint.c resumes a bf16 run.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/bf16.h"
#include "core/threads.h"
#include "io/h5.h"
#include "layers/gemm_bf16.h"
#include "layers/lstm.h"
#include "layers/lstm_bf16.h"
#include "layers/lstm_fused.h"

static float bf(float x) { return ct_float_from_bf16(ct_bf16_from_float(x)); }

typedef struct {
    lstm_dims d;
    ct_params ps;
    lstm_ids ids;
    lstm_weights w[LSTM_MAX_LAYERS];
    lstm_grads g[LSTM_MAX_LAYERS];
    float *cache, *ws, *out, *dx;
} lrig;

static size_t out_floats(const lstm_dims *d)
{
    return (size_t)d->B * (size_t)d->H * (d->ret == LSTM_RETURN_SEQUENCE ? (size_t)d->T : 1);
}

static void lrig_init(lrig *r, const lstm_dims *d, const float *params)
{
    memset(r, 0, sizeof *r);
    r->d = *d;
    ct_params_init(&r->ps);
    CT_ASSERT(ct_lstm_params_add(&r->ids, &r->ps, "lstm", d->I, d->H, d->L) == CT_OK && ct_params_alloc(&r->ps) == CT_OK);
    memcpy(r->ps.data, params, r->ps.numel * sizeof(float));
    ct_lstm_params_view(r->w, r->g, &r->ps, &r->ids);
    r->cache = calloc(ct_lstm_cache_floats(d), sizeof(float));
    r->ws = calloc(ct_lstm_workspace_floats(d), sizeof(float));
    r->out = calloc(out_floats(d), sizeof(float));
    r->dx = calloc((size_t)d->B * d->T * d->I, sizeof(float));
    CT_ASSERT(r->cache && r->ws && r->out && r->dx);
}

static void lrig_run(lrig *r, const float *x, const int *len, const float *dout)
{
    ct_lstm_forward(r->out, r->cache, x, len, r->w, &r->d);
    memset(r->ps.grad, 0, r->ps.numel * sizeof(float));
    ct_lstm_backward(r->dx, r->g, r->ws, dout, r->cache, x, len, r->w, &r->d);
}

static void lrig_free(lrig *r)
{
    free(r->cache); free(r->ws); free(r->out); free(r->dx);
    ct_params_free(&r->ps);
}

static size_t n_params(int I, int H, int L)
{
    ct_params ps;
    lstm_ids ids;
    ct_params_init(&ps);
    CT_ASSERT(ct_lstm_params_add(&ids, &ps, "lstm", I, H, L) == CT_OK && ct_params_alloc(&ps) == CT_OK);
    const size_t n = ps.numel;   /* the flat buffer, alignment padding included */
    ct_params_free(&ps);
    return n;
}

/* A case's data, drawn from rng in this order: parameters in [-0.3, 0.3], the input in
 * [-xa, xa], the output's gradient in [-1, 1]. */
typedef struct { float *p, *x, *dout; size_t np, nx, no; } ldata;

static ldata ldata_make(const lstm_dims *d, ct_rng *rng, float xa)
{
    ldata c = { .np = n_params(d->I, d->H, d->L), .nx = (size_t)d->B * d->T * d->I, .no = out_floats(d) };
    c.p = malloc(c.np * sizeof(float));
    c.x = malloc(c.nx * sizeof(float));
    c.dout = malloc(c.no * sizeof(float));
    CT_ASSERT(c.p && c.x && c.dout);
    t_fill_uniform(c.p, c.np, -0.3f, 0.3f, rng);
    t_fill_uniform(c.x, c.nx, -xa, xa, rng);
    t_fill_uniform(c.dout, c.no, -1.0f, 1.0f, rng);
    return c;
}

static void ldata_free(ldata *c) { free(c->p); free(c->x); free(c->dout); }

static double rsig(double z, int hard) { return hard ? fmin(1.0, fmax(0.0, 0.2 * z + 0.5)) : 1.0 / (1.0 + exp(-z)); }

static void test_one_step(void)
{
    static const struct { int B, I, H, hard; } cs[] = {
        { 4, 40, 32, 0 }, { 1, 3, 5, 0 }, { 33, 17, 20, 1 }, { 7, 64, 16, 0 }, { 2, 100, 48, 1 },
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int B = cs[k].B, I = cs[k].I, H = cs[k].H, G = 4 * H;
        t_case("lstm_bf16/one step within the derived bound B=%d I=%d H=%d %s", B, I, H, cs[k].hard ? "hard_sigmoid" : "sigmoid");
        const lstm_dims d = { B, 1, I, H, 1, LSTM_RETURN_LAST, cs[k].hard ? LSTM_HARD_SIGMOID : LSTM_SIGMOID, CT_BF16, 0 };
        ct_rng rng;
        ct_rng_seed(&rng, 77 + k, 0);
        float *p = malloc(n_params(I, H, 1) * sizeof *p), *x = malloc((size_t)B * I * sizeof *x);
        t_fill_uniform(p, n_params(I, H, 1), -0.4f, 0.4f, &rng);
        t_fill_uniform(x, (size_t)B * I, -2.0f, 2.0f, &rng);
        lrig r;
        lrig_init(&r, &d, p);
        ct_lstm_forward(r.out, r.cache, x, NULL, r.w, &d);
        const double gam = I * ldexp(1.0, -24) / (1 - I * ldexp(1.0, -24));
        double worst = 0;
        int bad = 0;
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++) {
                double z[4], e[4];
                for (int q = 0; q < 4; q++) {
                    const float *wr = r.w[0].w_ih + (size_t)(q * H + j) * I;
                    double s = 0, a = 0;
                    for (int i = 0; i < I; i++) {
                        double t = (double)bf(x[(size_t)b * I + i]) * (double)bf(wr[i]);
                        s += t;
                        a += fabs(t);
                    }
                    z[q] = s + r.w[0].b_ih[q * H + j] + r.w[0].b_hh[q * H + j];
                    e[q] = gam * a;
                }
                (void)G;
                const double c = rsig(z[0], cs[k].hard) * tanh(z[2]), h = rsig(z[3], cs[k].hard) * tanh(c);
                const double bound = e[3] / 4 + e[0] / 4 + e[2] + 2e-6, err = fabs(r.out[(size_t)b * H + j] - h);
                if (err / bound > worst) worst = err / bound;
                if (err > bound) bad++;
            }
        t_check(!bad, "%d of %d outputs past the bound (worst %.3g of it)", bad, B * H, worst);
        printf("     worst error %.3g of the bound\n", worst);
        lrig_free(&r);
        free(p); free(x);
    }
}

static double rel_max(const float *got, const float *ref, size_t n)
{
    double e = 0, m = 1e-6;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        if (fabs(got[i] - ref[i]) > e) e = fabs(got[i] - ref[i]);
        if (fabs(ref[i]) > m) m = fabs(ref[i]);
    }
    return e / m;
}

static void test_many_steps(void)
{
    static const struct { int B, T, I, H, L; lstm_return ret; int len; } cs[] = {
        { 8, 20, 40, 32, 1, LSTM_RETURN_LAST, 1 },
        { 5, 12, 7, 20, 2, LSTM_RETURN_SEQUENCE, 1 },
        { 6, 30, 16, 16, 2, LSTM_RETURN_MEAN, 0 },
    };
    const double tol = 1.0 / 16;
    for (size_t k = 0; k < 2 * sizeof cs / sizeof cs[0]; k++) {
        const int c = (int)(k / 2), plain = (int)(k % 2);   /* each case with the tiles' fused step (where H allows it) and plain */
        const int B = cs[c].B, T = cs[c].T, I = cs[c].I, H = cs[c].H, L = cs[c].L;
        if (plain && H % CT_LSTM_BF16_UNITS) continue;     /* the plain step was the only one */
        ct_lstm_set_fused(!plain);
        t_case("lstm_bf16/many steps against float32 B=%d T=%d I=%d H=%d L=%d ret=%d len=%s, %s step (tolerance 2^-4)", B, T, I, H, L,
               (int)cs[c].ret, cs[c].len ? "yes" : "no", plain || !ct_lstm_bf16_fused_ok(H) ? "plain" : "fused");
        lstm_dims d = { B, T, I, H, L, cs[c].ret, LSTM_SIGMOID, CT_F32, 0 };
        ct_rng rng;
        ct_rng_seed(&rng, 500 + c, 0);
        ldata cd = ldata_make(&d, &rng, 1.5f);
        float *p = cd.p, *x = cd.x, *dout = cd.dout;
        const size_t nx = cd.nx, no = cd.no;
        int len[64];
        for (int b = 0; b < B; b++) len[b] = cs[c].len ? 1 + (int)ct_rng_below(&rng, (unsigned)T) : T;
        lrig f, h;
        lrig_init(&f, &d, p);
        lrig_run(&f, x, cs[c].len ? len : NULL, dout);
        d.dtype = CT_BF16;
        lrig_init(&h, &d, p);
        lrig_run(&h, x, cs[c].len ? len : NULL, dout);
        ct_lstm_set_fused(1);
        double eo = rel_max(h.out, f.out, no), ex = rel_max(h.dx, f.dx, nx), eg = 0;
        for (int l = 0; l < L; l++) {
            const int Il = l ? H : I;
            const double e[4] = { rel_max(h.g[l].w_ih, f.g[l].w_ih, (size_t)4 * H * Il), rel_max(h.g[l].w_hh, f.g[l].w_hh, (size_t)4 * H * H),
                                  rel_max(h.g[l].b_ih, f.g[l].b_ih, (size_t)4 * H), rel_max(h.g[l].b_hh, f.g[l].b_hh, (size_t)4 * H) };
            for (int q = 0; q < 4; q++) if (!(e[q] <= eg)) eg = e[q];
        }
        t_check(eo <= tol && ex <= tol && eg <= tol, "out %.3g, dx %.3g, parameter gradients %.3g (tolerance %.3g)", eo, ex, eg, tol);
        printf("     measured: out %.3g, dx %.3g, parameter gradients %.3g of their largest entries\n", eo, ex, eg);
        static float fused_out[4096];   /* the fused run's output, for the plain run after it */
        if (!plain && no <= 4096) memcpy(fused_out, h.out, no * sizeof(float));
        if (plain) {
            /* the two steps sum in different orders (one product over [x | h], or two): the same results to rounding, not bit for bit */
            size_t differ = 0;
            for (size_t i = 0; i < no; i++) differ += memcmp(&fused_out[i], &h.out[i], sizeof(float)) != 0;
            printf("     fused against plain: %zu of %zu outputs differ in their bits, by at most %.3g of the largest\n", differ, no,
                   rel_max(fused_out, h.out, no));
        }
        lrig_free(&f); lrig_free(&h);
        ldata_free(&cd);
    }
}

/* The fused step's cell hook for the test: copies the block's z as it finds it (at the
 * block's rows, or with z_block at rows 0 .. nr-1 of the block buffer), counts the calls. */
typedef struct { const float *z; float *seen; int *calls; int ldz, H, block; } fused_probe;

static void probe_cell(void *ctx, int r0, int nr, int u0, int nu)
{
    const fused_probe *p = ctx;
    for (int r = r0; r < r0 + nr; r++)
        for (int u = u0; u < u0 + nu; u += CT_LSTM_BF16_UNITS) {
            p->calls[r * (p->H / CT_LSTM_BF16_UNITS) + u / CT_LSTM_BF16_UNITS]++;
            const float *zr = p->z + (size_t)(p->block ? r - r0 : r) * p->ldz;
            for (int q = 0; q < 4; q++)
                memcpy(p->seen + (size_t)r * p->ldz + (size_t)q * p->H + u, zr + (size_t)q * p->H + u,
                       CT_LSTM_BF16_UNITS * sizeof(float));
        }
}

static void test_fused_step(void)
{
    static const struct { int rows, Il, H, ldz_extra, first; } cs[] = {
        { 16, 40, 128, 0, 0 }, { 37, 17, 32, 0, 0 }, { 1, 3, 16, 8, 0 }, { 5, 100, 48, 0, 1 }, { 33, 64, 64, 16, 0 },
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int M = cs[k].rows, Il = cs[k].Il, H = cs[k].H, K = Il + H, G = 4 * H, ldz = G + cs[k].ldz_extra;
        t_case("lstm_bf16/fused step on the model = the product over [x | h] [W_ih | W_hh]^T, bit for bit, both orders, z whole or a block: rows %d, Il %d, H %d%s",
               M, Il, H, cs[k].first ? ", t = 0" : "");
        ct_rng rng;
        ct_rng_seed(&rng, 900 + k, 0);
        float *wih = malloc((size_t)G * Il * sizeof(float)), *whh = malloc((size_t)G * H * sizeof(float));
        float *x = malloc((size_t)M * Il * sizeof(float)), *hp = malloc((size_t)M * H * sizeof(float));
        float *a = calloc((size_t)M * K, sizeof(float)), *w = malloc((size_t)G * K * sizeof(float));
        float *zref = malloc((size_t)M * G * sizeof(float)), *z = malloc((size_t)M * ldz * sizeof(float));
        float *seen = malloc((size_t)M * ldz * sizeof(float));
        int *calls = calloc((size_t)M * (H / CT_LSTM_BF16_UNITS), sizeof(int));
        t_fill_uniform(wih, (size_t)G * Il, -0.5f, 0.5f, &rng);
        t_fill_uniform(whh, (size_t)G * H, -0.5f, 0.5f, &rng);
        t_fill_uniform(x, (size_t)M * Il, -2, 2, &rng);
        t_fill_uniform(hp, (size_t)M * H, -1, 1, &rng);
        for (int m = 0; m < M; m++) {   /* the stacked rows [x | h_{t-1}] (h_{-1} = 0) and weights [W_ih | W_hh] */
            memcpy(a + (size_t)m * K, x + (size_t)m * Il, Il * sizeof(float));
            if (!cs[k].first) memcpy(a + (size_t)m * K + Il, hp + (size_t)m * H, H * sizeof(float));
        }
        for (int n = 0; n < G; n++) {
            memcpy(w + (size_t)n * K, wih + (size_t)n * Il, Il * sizeof(float));
            memcpy(w + (size_t)n * K + Il, whh + (size_t)n * H, H * sizeof(float));
        }
        uint16_t *bp = malloc(ct_gemm_bf16_pack_elems(K, G) * 2), *work = malloc(ct_gemm_bf16_work_elems(M, K) * 2);
        ct_gemm_bf16_pack(bp, w, K, 1, K, G);
        ct_gemm_bf16_on(CT_BF16_MODEL, M, G, K, a, K, 0, bp, work, zref, G, 0);
        uint16_t *wp = malloc(ct_lstm_bf16_pack_elems(Il, H) * 2), *fwork = malloc(ct_lstm_bf16_work_elems(M, Il, H) * 2);
        memset(wp, 0xAA, ct_lstm_bf16_pack_elems(Il, H) * 2);   /* garbage: the packing must write every element */
        ct_lstm_bf16_pack(wp, wih, whh, Il, H);
        const int Kp = (K + 31) / 32 * 32;
        size_t wrong = 0;   /* the layout's definition (lstm_bf16.h): (u, q, p, j, h) = bf16(W[q H + 16u + j][2p + h]), 0 past K */
        for (int u = 0; u < H / 16; u++)
            for (int q = 0; q < 4; q++)
                for (int pp = 0; pp < Kp / 2; pp++)
                    for (int j = 0; j < 16; j++)
                        for (int h = 0; h < 2; h++) {
                            const int kk = 2 * pp + h, n = q * H + 16 * u + j;
                            const uint16_t want = kk < K ? ct_bf16_from_float(w[(size_t)n * K + kk]) : 0;
                            wrong += wp[((((size_t)u * 4 + q) * (Kp / 2) + pp) * 16 + j) * 2 + h] != want;
                        }
        t_check(!wrong && ct_lstm_bf16_pack_elems(Il, H) == (size_t)4 * H * Kp, "%zu packed weights differ from the layout's definition", wrong);
        for (int order = 0; order < 4; order++) {   /* the unit blocks outside, then the rows; z whole, then a block buffer */
            const int block = order >= 2;
            const char *on = order % 2 ? (block ? "rows outside, z a block buffer" : "rows outside")
                                       : (block ? "unit blocks outside, z a block buffer" : "unit blocks outside");
            for (size_t i = 0; i < (size_t)M * ldz; i++) z[i] = seen[i] = NAN;
            memset(calls, 0, (size_t)M * (H / CT_LSTM_BF16_UNITS) * sizeof *calls);
            fused_probe pr = { z, seen, calls, ldz, H, block };
            ct_lstm_bf16_step(CT_BF16_MODEL, order % 2 ? CT_LSTM_TILES_ROWS_OUTER : CT_LSTM_TILES_UNITS_OUTER, M, Il, H, x,
                              cs[k].first ? NULL : hp, wp, fwork, z, ldz, block, probe_cell, &pr);
            int diff = 0, twice = 0, pad = 0;
            for (int m = 0; m < M; m++) {
                for (int n = 0; n < G; n++) {
                    if (!block) diff += memcmp(&z[(size_t)m * ldz + n], &zref[(size_t)m * G + n], sizeof(float)) != 0;
                    diff += memcmp(&seen[(size_t)m * ldz + n], &zref[(size_t)m * G + n], sizeof(float)) != 0;
                }
                for (int n = G; n < ldz; n++) pad += !isnan(z[(size_t)m * ldz + n]);
                if (block && m >= (order % 2 ? CT_LSTM_BF16_BLOCK_ROWS : 16))   /* nothing below the buffer's rows */
                    for (int n = 0; n < G; n++) pad += !isnan(z[(size_t)m * ldz + n]);
                for (int u = 0; u < H / CT_LSTM_BF16_UNITS; u++) twice += calls[m * (H / CT_LSTM_BF16_UNITS) + u] != 1;
            }
            t_check(!diff, "%s: %d elements of z (as stored, or as the cell found them) differ from the stacked product", on, diff);
            t_check(!twice, "%s: %d blocks' cells were not called exactly once", on, twice);
            t_check(!pad, "%s: %d elements past 4H in z's rows were written", on, pad);
        }
        free(wih); free(whh); free(x); free(hp); free(a); free(w); free(zref); free(z); free(seen); free(calls);
        free(bp); free(work); free(wp); free(fwork);
    }
}

/* The two loop orders of the fused step give the layer the same bits: the same sums, the same cell. */
static void test_orders(void)
{
    t_case("lstm_bf16/the fused step's two loop orders: the same output, dx and gradients, bit for bit");
    const lstm_dims d = { 21, 6, 24, 32, 2, LSTM_RETURN_SEQUENCE, LSTM_HARD_SIGMOID, CT_BF16, 0 };
    ct_rng rng;
    ct_rng_seed(&rng, 12, 0);
    ldata cd = ldata_make(&d, &rng, 1.0f);
    float *p = cd.p, *x = cd.x, *dout = cd.dout;
    const size_t nx = cd.nx, no = cd.no;
    int len[21];
    for (int b = 0; b < 21; b++) len[b] = 1 + (int)ct_rng_below(&rng, 6);
    lrig a, b;
    lrig_init(&a, &d, p);
    lrig_run(&a, x, len, dout);
    ct_lstm_set_bf16_rows_outer(0);
    lrig_init(&b, &d, p);
    lrig_run(&b, x, len, dout);
    ct_lstm_set_bf16_rows_outer(1);
    t_check(ct_lstm_bf16_fused_ok(32), "the fused step does not run here");
    t_check(!memcmp(a.out, b.out, no * sizeof(float)) && !memcmp(a.dx, b.dx, nx * sizeof(float)) &&
            !memcmp(a.ps.grad, b.ps.grad, a.ps.numel * sizeof(float)), "the orders' results differ");
    lrig_free(&a); lrig_free(&b);
    ldata_free(&cd);
}

static void test_threads(void)
{
    t_case("lstm_bf16/the output and dx do not depend on the thread count");
    const int saved = ct_threads_get();
    const lstm_dims d = { 9, 7, 11, 16, 2, LSTM_RETURN_SEQUENCE, LSTM_SIGMOID, CT_BF16, 0 };
    ct_rng rng;
    ct_rng_seed(&rng, 9, 0);
    ldata cd = ldata_make(&d, &rng, 1.0f);
    float *p = cd.p, *x = cd.x, *dout = cd.dout;
    const size_t nx = cd.nx, no = cd.no;
    lrig a, b;
    ct_threads_set(1);
    lrig_init(&a, &d, p);
    lrig_run(&a, x, NULL, dout);
    ct_threads_set(2);
    lrig_init(&b, &d, p);
    lrig_run(&b, x, NULL, dout);
    ct_threads_set(saved);
    t_check(!memcmp(a.out, b.out, no * sizeof(float)), "the output differs between 1 and 2 threads");
    t_check(!memcmp(a.dx, b.dx, nx * sizeof(float)), "dx differs between 1 and 2 threads");
    t_close("parameter gradients (summed per worker)", b.ps.grad, a.ps.grad, a.ps.numel, 1e-5);
    lrig_free(&a); lrig_free(&b);
    ldata_free(&cd);
}

/* The weight gradients over windows of steps (lstm.c, LSTM_BF16_DW_K) against one product per
 * step: the same bits, on the model and on the CPU's own kernel. Shapes where a window is
 * several steps (few rows per worker), where T is not a multiple of it, a worker's rows odd,
 * two layers, lengths, T = 2 (step 1 and step 0 each alone), and rows past a window (one step each). */
static void test_dw_windows(void)
{
    static const struct { int B, T, I, H, L, threads; } sh[] = {
        { 9, 7, 40, 32, 1, 2 }, { 21, 13, 24, 48, 2, 3 }, { 3, 2, 5, 16, 1, 1 }, { 40, 11, 40, 128, 1, 1 }, { 150, 5, 12, 16, 1, 1 } };
    const int saved = ct_threads_get();
    for (int kernel = 0; kernel < 2; kernel++) {
        ct_gemm_bf16_use_model(0);
        const ct_bf16_kernels k = ct_kernels_bf16();
        if (kernel && k == CT_BF16_NONE) {
            t_skip("lstm_bf16/weight gradients over windows of steps on the CPU's own kernel: it has none (the model ran them)");
            break;
        }
        ct_gemm_bf16_use_model(!kernel);
        for (size_t c = 0; c < sizeof sh / sizeof sh[0]; c++) {
            const lstm_dims d = { sh[c].B, sh[c].T, sh[c].I, sh[c].H, sh[c].L, LSTM_RETURN_MEAN, c % 2 ? LSTM_HARD_SIGMOID : LSTM_SIGMOID, CT_BF16, 0 };
            t_case("lstm_bf16/weight gradients over windows of steps, %s: B=%d T=%d I=%d H=%d L=%d on %d threads, the per-step products' bits",
                   kernel ? ct_bf16_kernels_name(k) : "the tile model", d.B, d.T, d.I, d.H, d.L, sh[c].threads);
            ct_threads_set(sh[c].threads);
            ct_rng rng;
            ct_rng_seed(&rng, 44, c);
            ldata cd = ldata_make(&d, &rng, 1.0f);
            int *len = malloc((size_t)d.B * sizeof *len);
            CT_ASSERT(len);
            for (int b = 0; b < d.B; b++) len[b] = 1 + (int)ct_rng_below(&rng, (uint32_t)d.T);
            lrig a, b;
            lrig_init(&a, &d, cd.p);
            lrig_run(&a, cd.x, len, cd.dout);
            ct_lstm_set_bf16_dw_windows(0);
            lrig_init(&b, &d, cd.p);
            lrig_run(&b, cd.x, len, cd.dout);
            ct_lstm_set_bf16_dw_windows(1);
            size_t differ = 0, zero = 0;
            for (size_t i = 0; i < a.ps.numel; i++) {
                differ += memcmp(&a.ps.grad[i], &b.ps.grad[i], sizeof(float)) != 0;
                zero += a.ps.grad[i] == 0.0f;
            }
            t_check(!differ, "%zu of %zu gradient values differ", differ, a.ps.numel);
            t_check(zero < a.ps.numel / 2, "%zu of %zu gradient values are 0: the case tests little", zero, a.ps.numel);
            t_check(!memcmp(a.dx, b.dx, cd.nx * sizeof(float)), "dx differs");
            lrig_free(&a); lrig_free(&b);
            ldata_free(&cd);
            free(len);
        }
    }
    ct_threads_set(saved);
    ct_gemm_bf16_use_model(1);
}

/* Where the CPU has its own bf16 kernel: the LSTM on it is the LSTM on the model, bit for bit. */
static void test_real_kernel(void)
{
    ct_gemm_bf16_use_model(0);
    const ct_bf16_kernels k = ct_kernels_bf16();
    if (k == CT_BF16_NONE) {
        ct_bf16_check();
        const char *req = getenv("CT_REQUIRE_AMX");   /* the GPU machine's check: its Xeon has AMX, so a skip is a failure */
        if (req && !strcmp(req, "1")) {
            t_case("lstm_bf16/the CPU's own bf16 kernel against the model (CT_REQUIRE_AMX=1)");
            t_check(0, "it did not run: %s", ct_last_error());
        } else {
            t_skip("lstm_bf16/the CPU's own bf16 kernel against the model: %s", ct_last_error());
        }
        return;
    }
    const lstm_dims d = { 45, 9, 40, 32, 2, LSTM_RETURN_LAST, LSTM_SIGMOID, CT_BF16, 0 };   /* 45 rows: a 32-row block and a short one */
    for (int v = 0; v < 3; v++) {   /* with the tiles: their fused forward step in both orders, then the plain one */
        if (v && k != CT_BF16_AMX) break;   /* vdpbf16ps has only the plain step */
        const int plain = v == 2;
        t_case("lstm_bf16/%s against the model, %s forward step, bit for bit", ct_bf16_kernels_name(k),
               k != CT_BF16_AMX || plain ? "plain" : v ? "fused (unit blocks outside)" : "fused (rows outside)");
        ct_lstm_set_fused(!plain);
        ct_lstm_set_bf16_rows_outer(v != 1);
        ct_rng rng;
        ct_rng_seed(&rng, 4, 0);
        ldata cd = ldata_make(&d, &rng, 1.0f);
        float *p = cd.p, *x = cd.x, *dout = cd.dout;
        const size_t no = cd.no;
        lrig a, b;
        ct_gemm_bf16_use_model(0);
        lrig_init(&a, &d, p);
        lrig_run(&a, x, NULL, dout);
        ct_gemm_bf16_use_model(1);
        lrig_init(&b, &d, p);
        lrig_run(&b, x, NULL, dout);
        ct_lstm_set_fused(1);
        ct_lstm_set_bf16_rows_outer(1);
        if (k == CT_BF16_AMX) {   /* vdpbf16ps sums in another order: only the bounds hold */
            t_check(!memcmp(a.out, b.out, no * sizeof(float)) && !memcmp(a.ps.grad, b.ps.grad, a.ps.numel * sizeof(float)),
                    "the tiles and their model differ");
        } else {
            t_close("output", a.out, b.out, no, 1e-5);
            t_close("gradients", a.ps.grad, b.ps.grad, a.ps.numel, 1e-5);
        }
        lrig_free(&a); lrig_free(&b);
        ldata_free(&cd);
    }
}

static char run_out[2][1 << 15];

static void test_training(void)
{
    t_case("lstm_bf16/training with --precision bf16 against fp32 (losses within 5%%), recorded in the checkpoint");
    const char *base = "train siamese-lstm --data synthetic --pairs 512 --val-pairs 128 --batch 64 --hidden 32 --embed 16 --frames 40 "
                       "--speakers 10 --utts 6 --threads 2 --no-run-dir --no-progress --epochs 4";
    char args[1024];
    snprintf(args, sizeof args, "%s --precision fp32", base);
    int rc0 = t_run_ctrain(args, run_out[0], sizeof run_out[0]);
    setenv("CTRAIN_BF16_MODEL", "1", 1);
    snprintf(args, sizeof args, "%s --precision bf16 --checkpoint bf16-ck.h5", base);
    int rc1 = t_run_ctrain(args, run_out[1], sizeof run_out[1]);
    unsetenv("CTRAIN_BF16_MODEL");
    t_check(rc0 == 0 && rc1 == 0, "exit %d and %d:\n%s\n%s", rc0, rc1, run_out[0], run_out[1]);
    t_check(strstr(run_out[0], "Precision: fp32") && strstr(run_out[1], "Precision: bf16 mixed"), "the header names the precision");
    double l[2][8], v[2][8];
    int n0 = t_epoch_losses(run_out[0], l[0], v[0], 8), n1 = t_epoch_losses(run_out[1], l[1], v[1], 8);
    t_check(n0 == 4 && n1 == 4, "4 epoch lines each: %d, %d", n0, n1);
    double worst = 0;
    for (int e = 0; e < n0 && e < n1; e++) {
        const double dl = fabs(l[1][e] - l[0][e]) / l[0][e], dv = fabs(v[1][e] - v[0][e]) / v[0][e];
        if (dl > worst) worst = dl;
        if (dv > worst) worst = dv;
        t_check(dl <= 0.05 && dv <= 0.05, "epoch %d: loss %.5f vs %.5f, val_loss %.5f vs %.5f", e + 1, l[1][e], l[0][e], v[1][e], v[0][e]);
    }
    printf("     largest relative difference of a loss: %.3g (tolerance 0.05)\n", worst);
    /* read with ctrain's own HDF5 helpers: HDF5's command-line tools are not on every machine */
    char path[1024], recorded[32] = "";
    snprintf(path, sizeof path, "%s/bf16-ck.h5", t_scratch_dir());
    hid_t ck;
    ct_status st = ct_h5_open(&ck, path);
    if (st == CT_OK) {
        st = ct_h5_attr_read_str(ck, "/training", "precision", recorded, sizeof recorded);
        ct_h5_close(ck);
    }
    t_check(st == CT_OK && strcmp(recorded, "bf16") == 0, "the checkpoint's /training/precision is \"%s\", not bf16 (%s%s%s)",
            recorded, path, st == CT_OK ? "" : ": ", st == CT_OK ? "" : ct_last_error());

    t_case("lstm_bf16/--precision bf16 without bf16 products: one line, and --precision fp32");
    ct_gemm_bf16_use_model(0);
    if (ct_kernels_bf16() != CT_BF16_NONE) {
        /* this CPU has them: cut the kernel chain to AVX2 to see the refusal */
        setenv("CTRAIN_CPU_KERNELS", "avx512", 1);
    }
    snprintf(args, sizeof args, "%s --epochs 1 --precision bf16", base);
    int rc = t_run_ctrain(args, run_out[0], sizeof run_out[0]);
    unsetenv("CTRAIN_CPU_KERNELS");
    t_check(rc == 2 && strstr(run_out[0], "--precision bf16") && strstr(run_out[0], "AMX-BF16") &&
            strstr(run_out[0], "use float32 (--precision fp32)") && !strstr(run_out[0], "Epoch"), "exit %d: %s", rc, run_out[0]);
    snprintf(args, sizeof args, "%s --epochs 1 --precision fp16", base);
    rc = t_run_ctrain(args, run_out[0], sizeof run_out[0]);
    t_check(rc == 2 && strstr(run_out[0], "--precision") && strstr(run_out[0], "bf16"), "an unknown precision: exit %d: %s", rc, run_out[0]);
    ct_gemm_bf16_use_model(1);
}

/* The backward cell with the gates kept in bf16 (lstm.c, "bf16"): fed the same gates as bf16
 * and as float32, it gives the same bits where the gates are bf16 values already (so the
 * widening and the plumbing are exact); fed the float32 gates and their rounding, every dz
 * and dc_{t-1} is within the bound propagated from |y^ - y| <= 2^-8 |y| through equations
 * (2) and (3) of lstm.c (docs/precision.md), plus float32 rounding. */
static double largest(double a, double da) { return fabs(a) + da; }   /* the largest |a^| where |a^ - a| <= da */
static void test_kept_gates(void)
{
    if (!ct_lstm_fused_ok(16)) {
        t_skip("lstm_bf16/backward cell on gates kept in bf16: no AVX-512F here (the scalar cell widens the gates first)");
        return;
    }
    const int H = 48, G = 4 * H, R = 64;
    ct_rng rng;
    ct_rng_seed(&rng, 33, 1);
    float *gate = malloc((size_t)R * G * sizeof(float)), *gr = malloc((size_t)R * G * sizeof(float));
    uint16_t *g16 = malloc((size_t)R * G * sizeof(uint16_t));
    float *ct = malloc((size_t)R * H * sizeof(float)), *cp = malloc((size_t)R * H * sizeof(float)), *ds = malloc((size_t)R * H * sizeof(float));
    float dz0[4 * 48], dz1[4 * 48], db0[4 * 48] = { 0 }, db1[4 * 48] = { 0 }, dh0[48], dh1[48], dc0[48], dc1[48];
    for (int r = 0; r < R; r++) {
        for (int j = 0; j < H; j++) {   /* sigmoid gates in (0, 1), g in (-1, 1), some saturated */
            const float wide = r % 4 == 0 ? 12.0f : 3.0f;
            for (int q = 0; q < 4; q++) {
                const float zz = wide * (2 * ct_rng_uniform(&rng) - 1);
                gate[(size_t)r * G + q * H + j] = q == 2 ? tanhf(zz) : 1.0f / (1.0f + expf(-zz));
            }
            cp[(size_t)r * H + j] = 4 * (2 * ct_rng_uniform(&rng) - 1);
            ct[(size_t)r * H + j] = 3 * (2 * ct_rng_uniform(&rng) - 1);   /* c_t: the cell takes tanh of it */
            ds[(size_t)r * H + j] = 2 * ct_rng_uniform(&rng) - 1;
        }
        ct_bf16s_from_floats(g16 + (size_t)r * G, gate + (size_t)r * G, (size_t)G);
        ct_floats_from_bf16s(gr + (size_t)r * G, g16 + (size_t)r * G, (size_t)G);
    }
    t_case("lstm_bf16/backward cell: gates given as bf16 and as the same values in float32, bit for bit");
    int differ = 0;
    for (int r = 0; r < R; r++) {
        for (int j = 0; j < H; j++) { dh0[j] = dh1[j] = 2 * ct_rng_uniform(&rng) - 1; dc0[j] = dc1[j] = 2 * ct_rng_uniform(&rng) - 1; }
        const float *d = r % 2 ? ds + (size_t)r * H : NULL;
        ct_lstm_fused_cell_backward(dz0, db0, dh0, dc0, d, 0.5f, gr + (size_t)r * G, NULL, ct + (size_t)r * H, cp + (size_t)r * H, H, 0);
        ct_lstm_fused_cell_backward(dz1, db1, dh1, dc1, d, 0.5f, NULL, g16 + (size_t)r * G, ct + (size_t)r * H, cp + (size_t)r * H, H, 0);
        differ += memcmp(dz0, dz1, sizeof dz0) != 0 || memcmp(db0, db1, sizeof db0) != 0 || memcmp(dc0, dc1, sizeof dc0) != 0 ||
                  memcmp(dh0, dh1, sizeof dh0) != 0;
    }
    t_check(!differ, "%d of %d rows differ", differ, R);

    t_case("lstm_bf16/backward cell on gates rounded to bf16: dz and dc_{t-1} within the propagated bound");
    const double e = ldexp(1, -8), u8 = 8 * ldexp(1, -24);   /* a gate's relative rounding; float32 arithmetic, 8 ulps */
    double worst = 0;
    int bad = 0;
    for (int r = 0; r < R; r++) {
        float dhin[48], dcin[48];
        for (int j = 0; j < H; j++) { dhin[j] = 2 * ct_rng_uniform(&rng) - 1; dcin[j] = 2 * ct_rng_uniform(&rng) - 1; }
        memcpy(dh0, dhin, sizeof dh0); memcpy(dh1, dhin, sizeof dh1); memcpy(dc0, dcin, sizeof dc0); memcpy(dc1, dcin, sizeof dc1);
        ct_lstm_fused_cell_backward(dz0, db0, dh0, dc0, NULL, 1.0f, gate + (size_t)r * G, NULL, ct + (size_t)r * H, cp + (size_t)r * H, H, 0);
        ct_lstm_fused_cell_backward(dz1, db1, dh1, dc1, NULL, 1.0f, NULL, g16 + (size_t)r * G, ct + (size_t)r * H, cp + (size_t)r * H, H, 0);
        for (int j = 0; j < H; j++) {
            const float *y = gate + (size_t)r * G;
            const double i = y[j], f = y[H + j], g = y[2 * H + j], o = y[3 * H + j], t = tanh(ct[(size_t)r * H + j]), c = cp[(size_t)r * H + j];
            const double di = e * fabs(i), df = e * fabs(f), dg = e * fabs(g), dO = e * fabs(o), A = fabs(dhin[j]);
            /* (2) dc_t = dc + dh o (1 - t^2): only o is rounded */
            const double dct = fabs((double)dcin[j] + dhin[j] * o * (1 - t * t)), ddct = A * (1 - t * t) * dO;
            /* the derivatives: |d(y (1 - y))| <= dy |1 - 2y| + dy^2, |d(1 - g^2)| <= dg (2|g| + dg) */
            const double ri = i * (1 - i), rf = f * (1 - f), ro = o * (1 - o), g2 = 1 - g * g;
            const double dri = di * fabs(1 - 2 * i) + di * di, drf = df * fabs(1 - 2 * f) + df * df;
            const double dro = dO * fabs(1 - 2 * o) + dO * dO, dg2 = dg * (2 * fabs(g) + dg);
            /* (3) each dz a product of factors, each perturbed: |d(ab..)| <= sum of |da| times the others at their largest */
            const double bz[4] = {
                ddct * largest(g, dg) * largest(ri, dri) + largest(dct, ddct) * (dg * largest(ri, dri) + fabs(g) * dri),
                fabs(c) * (ddct * largest(rf, drf) + largest(dct, ddct) * drf),
                ddct * largest(i, di) * largest(g2, dg2) + largest(dct, ddct) * (di * largest(g2, dg2) + fabs(i) * dg2),
                A * fabs(t) * dro,
            };
            const double mz[4] = { dct * fabs(g) * ri, dct * fabs(c) * rf, dct * fabs(i) * g2, A * fabs(t) * ro };
            for (int q = 0; q < 4; q++) {
                const double err = fabs((double)dz1[q * H + j] - dz0[q * H + j]), bound = bz[q] + u8 * (mz[q] + bz[q]) + 1e-30;
                worst = fmax(worst, err / bound);
                if (err > bound && bad++ < 3) t_check(0, "row %d unit %d gate %d: error %.3g over the bound %.3g", r, j, q, err, bound);
            }
            const double errc = fabs((double)dc1[j] - dc0[j]), boundc = ddct * largest(f, df) + largest(dct, ddct) * df + u8 * (dct + ddct) + 1e-30;
            worst = fmax(worst, errc / boundc);
            if (errc > boundc && bad++ < 3) t_check(0, "row %d unit %d: dc error %.3g over the bound %.3g", r, j, errc, boundc);
        }
    }
    t_check(!bad, "%d values over the bound", bad);
    t_check(worst > 0.05, "the largest error is %.3g of the bound: the gates' rounding did not show", worst);
    printf("     largest error: %.3g of the bound\n", worst);
    free(gate); free(gr); free(g16); free(ct); free(cp); free(ds);
}

/* A forward with no backward after it (lstm_dims.forward_only, evaluation): the same output
 * bit for bit, and the cache it writes is the training forward's but for the gates, which the
 * fused float32 step and the AVX-512 cell (float32 gates and bf16 ones) then do not store.
 * The cache starts filled with a marker: every word of it afterwards must be the training
 * forward's or the marker, and where those steps run, at least the gates' words the marker. */
static void test_forward_only(void)
{
    static const uint32_t MARK = 0x7fc0dea1u;   /* a NaN no computation makes */
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int fused = 0; fused < 2; fused++)
            for (int seq = 0; seq < 2; seq++) {
                const lstm_dims d = { 10, 7, 12, 32, 2, seq ? LSTM_RETURN_SEQUENCE : LSTM_RETURN_LAST, LSTM_SIGMOID,
                                      bf16 ? CT_BF16 : CT_F32, 0 };
                const int vec = fused && ct_lstm_fused_ok(d.H);   /* where the steps store no gates */
                t_case("lstm_bf16/forward only: the training forward's output and cache but the gates, %s, %s step%s, ret %s",
                       bf16 ? "bf16" : "float32", fused ? "fused" : "plain", fused && !vec ? " (not on this CPU)" : "",
                       seq ? "sequence" : "last");
                ct_rng rng;
                ct_rng_seed(&rng, 31, (uint64_t)(4 * bf16 + 2 * fused + seq));
                ldata cd = ldata_make(&d, &rng, 1.0f);
                int len[10];
                for (int b = 0; b < d.B; b++) len[b] = 1 + (int)ct_rng_below(&rng, (uint32_t)d.T);
                ct_lstm_set_fused(fused);
                lrig a, b;
                lrig_init(&a, &d, cd.p);
                lrig_run(&a, cd.x, len, cd.dout);
                lrig_init(&b, &d, cd.p);
                b.d.forward_only = 1;
                const size_t nc = ct_lstm_cache_floats(&d);
                for (size_t i = 0; i < nc; i++) memcpy(&b.cache[i], &MARK, sizeof MARK);
                ct_lstm_forward(b.out, b.cache, cd.x, len, b.w, &b.d);
                ct_lstm_set_fused(1);
                size_t other = 0, marked = 0;
                for (size_t i = 0; i < nc; i++) {
                    uint32_t wb, wa;
                    memcpy(&wb, &b.cache[i], sizeof wb);
                    memcpy(&wa, &a.cache[i], sizeof wa);
                    marked += wb == MARK;
                    other += wb != MARK && wb != wa;
                }
                const size_t gates = (size_t)d.L * d.T * d.B * 4 * d.H / (bf16 ? 2 : 1);   /* in 32-bit words */
                t_check(!memcmp(a.out, b.out, cd.no * sizeof(float)), "the output differs from the training forward's");
                t_check(other == 0, "%zu words of the cache differ from the training forward's", other);
                t_check(!vec || marked >= gates, "only %zu words of the cache were left, fewer than the gates' %zu", marked, gates);
                lrig_free(&a); lrig_free(&b);
                ldata_free(&cd);
            }
}

void suite_lstm_bf16(void)
{
    ct_gemm_bf16_use_model(1);
    test_one_step();
    test_fused_step();
    test_many_steps();
    test_orders();
    test_kept_gates();
    test_threads();
    test_dw_windows();
    test_forward_only();
    test_real_kernel();
    test_training();
    ct_gemm_bf16_use_model(0);
}
