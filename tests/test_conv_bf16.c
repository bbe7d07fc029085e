/* test_conv_bf16.c - conv2d with bf16 operands and float32 sums (layers/conv2d.h:
 * ct_conv2d_forward_bf16, ct_conv2d_backward_bf16, and the CPU backend's bf16 conv2d plan).
 *
 * The products run on the C model of the AMX tiles (ct_gemm_bf16_use_model(1): this runs
 * on any CPU), and again on the CPU's own bf16 kernel where it has one. For shapes with
 * tails (odd channels, 33 output channels, stride 2, padding, batch 1 and 3 on two
 * workers, kernels 1x1, 3x3 and 5x5), every element of out, din and dW is checked:
 *   (1) against the convolution of the bf16-ROUNDED operands, summed in double, within
 *       gemm_bf16.h's bound (1): gamma_n (sum |a^||b^| + |c_old|), n = the number of
 *       products in the element's sum (C*KH*KW for out, with the bias as c_old; N*OH*OW
 *       for dW, over the batch, with dW's old value as c_old; OC times the taps that reach
 *       the pixel for din), plus the double sum's own gamma_n in 2^-53;
 *   (2) against the convolution of the float32 operands themselves, summed in double,
 *       within bound (2): (2^-7 + 2^-16 + gamma_n (1 + 2^-8)^2) sum |a||b| + gamma_n |c_old|;
 *   and against the float32 layer (im2col) on the same operands, within bound (2) plus
 *       the float32 layer's own gamma_{n+1} (sum |a||b| + |c_old|).
 * db must be the float32 layer's db bit for bit. Each case's name gives the largest
 * ratio of an error to its bound, per bound, over out, din and dW.
 * The backend case: a bf16 CPU backend's conv2d plan sizes the bf16 workspace and gives,
 * for the planned batch and a smaller one, the bits of the layer's own bf16 functions. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/bf16.h"
#include "core/threads.h"
#include "layers/activation.h"   /* ct_relu_forward */
#include "layers/conv2d.h"
#include "layers/conv2d_direct_bf16.h"
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"   /* ct_kernels_get */
#include "layers/ops.h"

typedef struct { int N, C, H, W, OC, KH, KW, s, p, bias; } cshape;

static const cshape SHAPES[] = {
    { 1, 3, 7, 9, 5, 3, 3, 1, 1, 1 },      /* batch 1, odd channels */
    { 3, 5, 8, 7, 7, 3, 3, 2, 1, 1 },      /* stride 2, padding, batch 3 on two workers */
    { 3, 4, 6, 5, 3, 1, 1, 1, 0, 1 },      /* 1x1 stride 1: col is the image, dcol is din */
    { 2, 17, 5, 6, 16, 1, 1, 2, 1, 0 },    /* 1x1 stride 2 padded: pixels no tap reaches */
    { 1, 3, 9, 11, 4, 5, 5, 1, 2, 0 },     /* 5x5 padding 2, no bias */
    { 3, 2, 10, 9, 33, 5, 5, 2, 0, 1 },    /* 33 output channels: a tail past 32 */
    { 3, 9, 12, 12, 8, 3, 3, 1, 0, 1 },    /* K = 81, P = 100 */
    { 2, 16, 8, 8, 20, 5, 5, 1, 2, 1 },    /* K = 400: more than 256 products per output */
    /* input channels a multiple of 16, stride 1: the direct path (conv2d_direct_bf16.h) on the tiles
     * (so is the 16-channel shape above: half of its block of 32 channels is padding) */
    { 3, 32, 7, 9, 33, 3, 3, 1, 1, 1 },    /* padding 1, 33 output channels, batch 3 on two workers */
    { 2, 64, 6, 5, 7, 3, 3, 1, 0, 0 },     /* two channel blocks, no padding, no bias */
    { 1, 32, 9, 7, 16, 5, 5, 1, 2, 1 },    /* 5x5 padding 2: rows of 11 with 4 positions thrown away */
    { 3, 32, 4, 6, 40, 1, 1, 1, 0, 1 },    /* 1x1 */
    { 2, 32, 5, 4, 8, 2, 3, 1, 0, 1 },     /* a 2x3 kernel */
    { 3, 48, 6, 6, 12, 3, 3, 1, 1, 1 },    /* 48 channels: a block and a half */
    /* one input channel, stride 1: computed directly (conv2d_c1.h) where the CPU runs ctrain's
     * AVX-512 kernels, else im2col */
    { 3, 1, 20, 40, 16, 3, 3, 1, 1, 1 },   /* a spectrogram's first layer: rows of 16 + 16 + 8, 8 + 8 + 4 rows */
    { 2, 1, 9, 17, 5, 5, 3, 1, 2, 0 },     /* 5x3, padding 2, rows of 16 + 1, no bias */
    { 2, 1, 11, 16, 3, 3, 3, 1, 0, 1 },    /* no padding: rows of 14 */
};

static uint32_t bits_of(float f) { uint32_t x; memcpy(&x, &f, sizeof x); return x; }
static double bf(float x) { return ct_float_from_bf16(ct_bf16_from_float(x)); }
static double gamma_of(double n, double u) { return n * u / (1 - n * u); }

/* The largest error / bound seen, per bound, and the first few elements out of bound. */
typedef struct {
    double w1, w2, w3;
    int bad;
    char msg[3][480];
} tally;

/* One element: got (bf16 layer), f32 (float32 layer); ref1/abs1 the sum and the sum of
 * |terms| over the rounded operands, ref2/abs2 over the float32 ones, both including c_old
 * in ref only; n the number of products. */
static void check_elem(tally *t, const char *what, size_t i, float got, float f32, double ref1, double abs1, double ref2,
                       double abs2, double c_old, double n)
{
    const double gK = gamma_of(n, ldexp(1, -24)), gKd = gamma_of(n + 1, ldexp(1, -53)), g32 = gamma_of(n + 1, ldexp(1, -24));
    const double c = fabs(c_old);
    const double bound1 = (gK + gKd) * (abs1 + c);
    const double bound2 = (ldexp(1, -7) + ldexp(1, -16) + gK * pow(1 + ldexp(1, -8), 2)) * abs2 + gK * c + gKd * (abs2 + c);
    const double bound3 = bound2 + g32 * (abs2 + c);
    const double e1 = fabs(got - ref1), e2 = fabs(got - ref2), e3 = fabs((double)got - f32);
    const int ok1 = e1 <= bound1, ok2 = e2 <= bound2, ok3 = e3 <= bound3;
    if (!(ok1 && ok2 && ok3)) {
        if (t->bad < 3)
            snprintf(t->msg[t->bad], sizeof t->msg[0], "%s[%zu] = %.9g: rounded-operand sum %.9g (err %.3g, bound (1) %.3g), "
                     "float32-operand sum %.9g (err %.3g, bound (2) %.3g), float32 layer %.9g (err %.3g, bound %.3g)",
                     what, i, got, ref1, e1, bound1, ref2, e2, bound2, f32, e3, bound3);
        t->bad++;
    }
    if (bound1 > 0 && e1 / bound1 > t->w1) t->w1 = e1 / bound1;
    if (bound2 > 0 && e2 / bound2 > t->w2) t->w2 = e2 / bound2;
    if (bound3 > 0 && e3 / bound3 > t->w3) t->w3 = e3 / bound3;
}

typedef struct {
    conv2d_dims d;
    float *in, *w, *b, *dout, *dw0, *db0;
} conv_data;

static size_t n_in(const conv2d_dims *d) { return (size_t)d->N * d->C * d->H * d->W; }
static size_t n_out(const conv2d_dims *d) { return (size_t)d->N * d->OC * d->OH * d->OW; }
static size_t n_w(const conv2d_dims *d) { return (size_t)d->OC * d->C * d->KH * d->KW; }

static void data_make(conv_data *x, const cshape *s, uint64_t seed)
{
    ct_threads_set(2);   /* before the dims: two workers where the batch has two images or more */
    CT_ASSERT(ct_conv2d_dims_make(&x->d, s->N, s->C, s->H, s->W, s->OC, s->KH, s->KW, s->s, s->p) == CT_OK);
    ct_threads_set(1);
    const conv2d_dims *d = &x->d;
    ct_rng r;
    ct_rng_seed(&r, seed, 7);
    x->in = t_alloc(n_in(d)); x->w = t_alloc(n_w(d)); x->b = s->bias ? t_alloc((size_t)d->OC) : NULL;
    x->dout = t_alloc(n_out(d)); x->dw0 = t_alloc(n_w(d)); x->db0 = t_alloc((size_t)d->OC);
    t_fill_uniform(x->in, n_in(d), -1.0f, 1.0f, &r);
    t_fill_uniform(x->w, n_w(d), -0.5f, 0.5f, &r);
    if (x->b) t_fill_uniform(x->b, (size_t)d->OC, -0.5f, 0.5f, &r);
    t_fill_uniform(x->dout, n_out(d), -1.0f, 1.0f, &r);
    t_fill_uniform(x->dw0, n_w(d), -0.25f, 0.25f, &r);   /* dW accumulates onto this */
    t_fill_uniform(x->db0, (size_t)d->OC, -0.25f, 0.25f, &r);
}

static void data_free(conv_data *x)
{
    free(x->in); free(x->w); free(x->b); free(x->dout); free(x->dw0); free(x->db0);
}

/* A workspace of `floats` filled with NaNs: a value read before it is written shows. */
static float *nan_ws(size_t floats)
{
    float *ws = t_alloc(floats ? floats : 1);
    for (size_t i = 0; i < floats; i++) ws[i] = NAN;
    return ws;
}

typedef struct { float *out, *din, *dw, *db; } conv_grads;

static conv_grads run_layer(const conv_data *x, const conv2d_dims *d, int bf16)
{
    conv_grads g = { t_alloc(n_out(d)), t_alloc(n_in(d)), t_alloc(n_w(d)), t_alloc((size_t)d->OC) };
    memcpy(g.dw, x->dw0, n_w(d) * sizeof *g.dw);
    memcpy(g.db, x->db0, (size_t)d->OC * sizeof *g.db);
    float *ws = nan_ws(bf16 ? ct_conv2d_bf16_workspace_floats(d) : ct_conv2d_workspace_floats(d));
    if (bf16) {
        ct_conv2d_forward_bf16(g.out, ws, x->in, x->w, x->b, d, NULL);
        ct_conv2d_backward_bf16(g.din, g.dw, g.db, ws, x->dout, x->in, x->w, d);
    } else {
        ct_conv2d_forward(g.out, ws, x->in, x->w, x->b, d, NULL);
        ct_conv2d_backward(g.din, g.dw, g.db, ws, x->dout, x->in, x->w, d);
    }
    free(ws);
    return g;
}

static void grads_free(conv_grads *g) { free(g->out); free(g->din); free(g->dw); free(g->db); }

/* Every element of out, din and dW of the bf16 layer against the sums in double and the float32 layer. */
static void check_all(tally *t, const conv_data *x, const conv_grads *g, const conv_grads *f)
{
    const conv2d_dims *d = &x->d;
    const int N = d->N, C = d->C, H = d->H, W = d->W, OC = d->OC, KH = d->KH, KW = d->KW, s = d->stride, p = d->pad;
    const int OH = d->OH, OW = d->OW;
#define IN(n, c, y, xx) x->in[(((size_t)(n) * C + (c)) * H + (y)) * W + (xx)]
#define WT(o, c, ky, kx) x->w[(((size_t)(o) * C + (c)) * KH + (ky)) * KW + (kx)]
#define DOUT(n, o, y, xx) x->dout[(((size_t)(n) * OC + (o)) * OH + (y)) * OW + (xx)]
    /* out [N, OC, OH, OW] = W . in + b: n = C*KH*KW products (the padding's zeros among them) */
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++)
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    double s1 = 0, a1 = 0, s2 = 0, a2 = 0;
                    for (int c = 0; c < C; c++)
                        for (int ky = 0; ky < KH; ky++)
                            for (int kx = 0; kx < KW; kx++) {
                                const int iy = oy * s + ky - p, ix = ox * s + kx - p;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                const float wv = WT(o, c, ky, kx), iv = IN(n, c, iy, ix);
                                s1 += bf(wv) * bf(iv); a1 += fabs(bf(wv) * bf(iv));
                                s2 += (double)wv * iv; a2 += fabs((double)wv * iv);
                            }
                    const double b = x->b ? x->b[o] : 0.0;
                    const size_t i = (((size_t)n * OC + o) * OH + oy) * OW + ox;
                    check_elem(t, "out", i, g->out[i], f->out[i], s1 + b, a1, s2 + b, a2, b, (double)C * KH * KW);
                }
    /* dW [OC, C, KH, KW] = dW0 + sum over images and positions of dout . in: n = N*OH*OW products */
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++)
            for (int ky = 0; ky < KH; ky++)
                for (int kx = 0; kx < KW; kx++) {
                    double s1 = 0, a1 = 0, s2 = 0, a2 = 0;
                    for (int n = 0; n < N; n++)
                        for (int oy = 0; oy < OH; oy++)
                            for (int ox = 0; ox < OW; ox++) {
                                const int iy = oy * s + ky - p, ix = ox * s + kx - p;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                const float gv = DOUT(n, o, oy, ox), iv = IN(n, c, iy, ix);
                                s1 += bf(gv) * bf(iv); a1 += fabs(bf(gv) * bf(iv));
                                s2 += (double)gv * iv; a2 += fabs((double)gv * iv);
                            }
                    const size_t i = (((size_t)o * C + c) * KH + ky) * KW + kx;
                    const double c0 = x->dw0[i];
                    check_elem(t, "dW", i, g->dw[i], f->dw[i], s1 + c0, a1, s2 + c0, a2, c0, (double)N * OH * OW);
                }
    /* din [N, C, H, W] = sum over the taps that reach the pixel of W^T dout: n = OC x those taps */
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int iy = 0; iy < H; iy++)
                for (int ix = 0; ix < W; ix++) {
                    double s1 = 0, a1 = 0, s2 = 0, a2 = 0;
                    int taps = 0;
                    for (int ky = 0; ky < KH; ky++)
                        for (int kx = 0; kx < KW; kx++) {
                            const int ty = iy + p - ky, tx = ix + p - kx;   /* = oy*s, ox*s */
                            if (ty < 0 || tx < 0 || ty % s || tx % s || ty / s >= OH || tx / s >= OW) continue;
                            taps++;
                            for (int o = 0; o < OC; o++) {
                                const float wv = WT(o, c, ky, kx), gv = DOUT(n, o, ty / s, tx / s);
                                s1 += bf(wv) * bf(gv); a1 += fabs(bf(wv) * bf(gv));
                                s2 += (double)wv * gv; a2 += fabs((double)wv * gv);
                            }
                        }
                    const size_t i = (((size_t)n * C + c) * H + iy) * W + ix;
                    check_elem(t, "din", i, g->din[i], f->din[i], s1, a1, s2, a2, 0.0, taps ? (double)OC * taps : 1.0);
                }
#undef IN
#undef WT
#undef DOUT
}

/* One shape on the products of `which` (the model, or the CPU's own kernel). */
static void shape_case(const cshape *sh, uint64_t seed, ct_bf16_kernels which)
{
    conv_data x;
    data_make(&x, sh, seed);
    const conv2d_dims *d = &x.d;
    conv2d_dims d32 = x.d;
    d32.winograd = 0;   /* the float32 layer as plain sums of products (im2col) */
    conv_grads f = run_layer(&x, &d32, 0);
    conv_grads g = run_layer(&x, d, 1);
    tally t = { 0 };
    check_all(&t, &x, &g, &f);
    int db_diff = 0;
    for (int o = 0; o < d->OC; o++) db_diff += bits_of(g.db[o]) != bits_of(f.db[o]);
    t_case("conv_bf16/N=%d C=%d %dx%d OC=%d k%dx%d s%d p%d%s, %d worker%s, %s, %s: worst error/bound (1) %.3f (2) %.3f "
           "vs float32 layer %.3f", sh->N, sh->C, sh->H, sh->W, sh->OC, sh->KH, sh->KW, sh->s, sh->p, sh->bias ? "" : " no bias",
           d->workers, d->workers > 1 ? "s" : "", ct_bf16_kernels_name(which),
           d->direct1 ? "one channel, direct" : ct_conv2d_direct_bf16_runs(d) ? "direct" : "im2col", t.w1, t.w2, t.w3);
    t_check(t.bad == 0, "%d elements of out, din, dW out of bound; first: %s", t.bad, t.msg[0]);
    for (int k = 1; k < t.bad && k < 3; k++) t_check(0, "also: %s", t.msg[k]);
    t_check(db_diff == 0, "db: %d of %d elements differ from the float32 layer's", db_diff, d->OC);
    t_check(t.w1 > 0 && t.w2 > 0, "no error at all: the bounds were not exercised");
    grads_free(&f); grads_free(&g); data_free(&x);
}

/* The bounds are tight enough to tell: the float32 layer's own results, whose operands were
 * not rounded, are outside bound (1) for most elements. */
static void bounds_case(void)
{
    t_case("conv_bf16/the bounds catch a layer that does not round its operands: the float32 layer fails bound (1)");
    const cshape sh = { 3, 9, 12, 12, 8, 3, 3, 1, 0, 1 };
    conv_data x;
    data_make(&x, &sh, 40);
    conv2d_dims d32 = x.d;
    d32.winograd = 0;
    conv_grads f = run_layer(&x, &d32, 0);
    tally t = { 0 };
    check_all(&t, &x, &f, &f);
    const size_t total = n_out(&x.d) + n_in(&x.d) + n_w(&x.d);
    t_check(t.bad > (int)(total * 9 / 10), "only %d of %zu elements of the float32 layer are outside the bounds", t.bad, total);
    printf("  the float32 layer: %d of %zu elements outside bound (1), worst error/bound %.1f\n", t.bad, total, t.w1);
    grads_free(&f); data_free(&x);
}

/* The bf16 CPU backend's conv2d plan: the bf16 workspace, and the bf16 layer's bits for the
 * planned batch and a smaller one; backward without din leaves dW as with it. */
static void backend_case(void)
{
    t_case("conv_bf16/a bf16 CPU backend's conv2d plan runs the bf16 layer (bit for bit, batch 3 and 2, din or not)");
    const cshape sh = { 3, 5, 8, 7, 7, 3, 3, 2, 1, 1 };
    conv_data x;
    data_make(&x, &sh, 41);
    const conv2d_dims *d = &x.d;
    const ct_math m = { .dtype = CT_BF16 };
    ct_backend be;
    if (!t_check(ct_backend_open_cpu(&be, &m) == CT_OK, "open: %s", ct_last_error())) { data_free(&x); return; }
    void *plan = NULL;
    if (t_check(be.ops->conv2d_plan(&be, &plan, d, 1) == CT_OK && plan, "bf16 conv2d plan: %s", ct_last_error())) {
        const size_t wsf = be.ops->conv2d_workspace_floats(&be, plan);
        t_check(wsf == ct_conv2d_bf16_workspace_floats(d), "plan's workspace %zu floats, the bf16 layer's %zu", wsf,
                ct_conv2d_bf16_workspace_floats(d));
        for (int N = d->N; N >= d->N - 1; N--) {
            conv2d_dims dn = *d;
            dn.N = N;
            conv_grads want = run_layer(&x, &dn, 1);
            conv_grads got = { t_alloc(n_out(&dn)), t_alloc(n_in(&dn)), t_alloc(n_w(&dn)), t_alloc((size_t)dn.OC) };
            memcpy(got.dw, x.dw0, n_w(&dn) * sizeof *got.dw);
            memcpy(got.db, x.db0, (size_t)dn.OC * sizeof *got.db);
            float *ws = nan_ws(wsf);
            be.ops->conv2d_forward(&be, got.out, ws, x.in, x.w, x.b, plan, N);
            be.ops->conv2d_backward(&be, got.din, got.dw, got.db, ws, x.dout, x.in, x.w, plan, N);
            t_check(!memcmp(got.out, want.out, n_out(&dn) * sizeof *got.out), "batch %d: out differs from the layer's", N);
            t_check(!memcmp(got.din, want.din, n_in(&dn) * sizeof *got.din), "batch %d: din differs from the layer's", N);
            t_check(!memcmp(got.dw, want.dw, n_w(&dn) * sizeof *got.dw), "batch %d: dW differs from the layer's", N);
            t_check(!memcmp(got.db, want.db, (size_t)dn.OC * sizeof *got.db), "batch %d: db differs from the layer's", N);
            /* din not asked for: dW and db the same */
            memcpy(got.dw, x.dw0, n_w(&dn) * sizeof *got.dw);
            memcpy(got.db, x.db0, (size_t)dn.OC * sizeof *got.db);
            be.ops->conv2d_backward(&be, NULL, got.dw, got.db, ws, x.dout, x.in, x.w, plan, N);
            t_check(!memcmp(got.dw, want.dw, n_w(&dn) * sizeof *got.dw), "batch %d without din: dW differs", N);
            t_check(!memcmp(got.db, want.db, (size_t)dn.OC * sizeof *got.db), "batch %d without din: db differs", N);
            free(ws); grads_free(&got); grads_free(&want);
        }
        be.ops->conv2d_plan_free(&be, plan);
    }
    ct_backend_close(&be);
    data_free(&x);
}

/* Which path each shape takes on the tiles (here their model): the direct one for stride 1 and
 * input channels in 16s, im2col otherwise - one input channel, 17, stride 2 - so that the shapes
 * above do test both, and the measured rule (docs: conv2d_direct_bf16.c) does not drift. */
static void path_case(void)
{
    const int ns = (int)(sizeof SHAPES / sizeof SHAPES[0]);
    t_case("conv_bf16/the direct path runs exactly for stride 1 and input channels in 16s (7 of the shapes)");
    int direct = 0;
    for (int k = 0; k < ns; k++) {
        const cshape *sh = &SHAPES[k];
        conv2d_dims d;
        CT_ASSERT(ct_conv2d_dims_make(&d, sh->N, sh->C, sh->H, sh->W, sh->OC, sh->KH, sh->KW, sh->s, sh->p) == CT_OK);
        const int want = sh->s == 1 && sh->C % 16 == 0, got = ct_conv2d_direct_bf16_runs(&d);
        t_check(got == want, "N=%d C=%d k%dx%d s%d: %s, expected %s", sh->N, sh->C, sh->KH, sh->KW, sh->s,
                got ? "direct" : "im2col", want ? "direct" : "im2col");
        direct += got;
    }
    t_check(direct == 7, "%d shapes take the direct path, 7 expected", direct);
    conv2d_dims one;   /* one input channel, stride 1: im2col (measured faster there) */
    CT_ASSERT(ct_conv2d_dims_make(&one, 2, 1, 28, 28, 32, 3, 3, 1, 0) == CT_OK);
    t_check(!ct_conv2d_direct_bf16_runs(&one), "a 1-channel 3x3 stride-1 layer takes the direct path");
}

/* An image's result is copied out of the worker's stage plainly, or for a large layer with
 * non-temporal stores (conv2d_direct_bf16.c, stage_out): the same out, din, dW and db bit for
 * bit, every shape the direct path takes, the second copy forced on them by lowering its
 * threshold to 0 (on AVX-512; elsewhere both are plain copies). */
static void stream_case(void)
{
    const int ns = (int)(sizeof SHAPES / sizeof SHAPES[0]);
    t_case("conv_bf16/the direct path's results copied out with non-temporal stores = plainly, bit for bit%s",
           ct_kernels_get() == CT_KERNELS_AVX512 ? "" : " (no AVX-512: both plain)");
    int shapes = 0, bad = 0;
    for (int k = 0; k < ns; k++) {
        conv_data x;
        data_make(&x, &SHAPES[k], 300 + (uint64_t)k);
        if (ct_conv2d_direct_bf16_runs(&x.d)) {
            const conv2d_dims *d = &x.d;
            conv_grads plain = run_layer(&x, d, 1);
            ct_conv2d_direct_bf16_stream_from(0);
            conv_grads streamed = run_layer(&x, d, 1);
            ct_conv2d_direct_bf16_stream_from((size_t)16 << 20);
            bad += memcmp(plain.out, streamed.out, n_out(d) * sizeof(float)) != 0;
            bad += memcmp(plain.din, streamed.din, n_in(d) * sizeof(float)) != 0;
            bad += memcmp(plain.dw, streamed.dw, n_w(d) * sizeof(float)) != 0;
            bad += memcmp(plain.db, streamed.db, (size_t)d->OC * sizeof(float)) != 0;
            grads_free(&plain); grads_free(&streamed);
            shapes++;
        }
        data_free(&x);
    }
    t_check(shapes >= 5, "only %d shapes took the direct path", shapes);
    t_check(bad == 0, "%d of the results differ", bad);
}

/* The layer with the maxpool after it, without its output in memory
 * (ct_conv2d_direct_bf16_forward_pool): pooled and argmax against the layer's out through
 * ct_maxpool2d_forward (and ct_relu_forward on the pooled map; argmax -1 where that relu
 * zeroed the window), bit for bit, on every shape the direct path takes whose output a 2x2
 * window (and a 3x3 one of stride 2) fits, with and without the relu. */
/* And its backward from the pool's gradient (ct_conv2d_direct_bf16_backward_pool: dout made
 * image by image from it, never in memory): din, dw and db those of the layer's backward on
 * what ct_maxpool2d_backward makes, bit for bit, the relu's gradient applied first as the
 * model does (models/seq_cnn.c, maxpool_backward); 2x2 and overlapping 3x3 windows. */
static int pool_backward_differs(const conv_data *x, const maxpool2d_dims *pd, const float *pooled, const int *argmax, int relu)
{
    const conv2d_dims *d = &x->d;
    const size_t np = (size_t)d->N * d->OC * pd->OH * pd->OW, nw = n_w(d), no = n_out(d), ni = n_in(d);
    float *dp = t_alloc(np), *dout = t_alloc(no), *din[2], *dw[2], *db[2];
    for (size_t e = 0; e < np; e++) dp[e] = relu && !(pooled[e] > 0.0f) ? 0.0f : x->dout[e];   /* the relu's backward */
    ct_maxpool2d_backward(dout, dp, argmax, pd);
    for (int k = 0; k < 2; k++) {
        din[k] = t_alloc(ni); dw[k] = t_alloc(nw); db[k] = t_alloc((size_t)d->OC);
        memcpy(dw[k], x->dw0, nw * sizeof *dw[k]);
        memcpy(db[k], x->db0, (size_t)d->OC * sizeof *db[k]);
    }
    float *ws = nan_ws(ct_conv2d_bf16_workspace_floats(d));
    ct_conv2d_backward_bf16(din[0], dw[0], db[0], ws, dout, x->in, x->w, d);
    ct_conv2d_direct_bf16_backward_pool(din[1], dw[1], db[1], ws, dp, argmax, pd, x->in, x->w, d);
    const int differ = memcmp(din[0], din[1], ni * sizeof *din[0]) != 0 || memcmp(dw[0], dw[1], nw * sizeof *dw[0]) != 0 ||
                       memcmp(db[0], db[1], (size_t)d->OC * sizeof *db[0]) != 0;
    free(dp); free(dout); free(ws);
    for (int k = 0; k < 2; k++) { free(din[k]); free(dw[k]); free(db[k]); }
    return differ;
}

static void pool_case(void)
{
    const int ns = (int)(sizeof SHAPES / sizeof SHAPES[0]);
    t_case("conv_bf16/the direct path with the maxpool after it (and a relu) = the layer, then the pool, bit for bit; its "
           "backward from the pool's gradient = the pool's backward, then the layer's");
    int runs = 0, bad = 0, zeroed = 0, bad_back = 0;
    for (int k = 0; k < ns; k++) {
        conv_data x;
        data_make(&x, &SHAPES[k], 400 + (uint64_t)k);
        const conv2d_dims *d = &x.d;
        for (int win = 2; win <= 3 && ct_conv2d_direct_bf16_runs(d); win++) {
            maxpool2d_dims pd;
            if (d->OH < win || d->OW < win || ct_maxpool2d_dims_make(&pd, d->N, d->OC, d->OH, d->OW, win, 2) != CT_OK) continue;
            if (!t_check(ct_conv2d_direct_bf16_pool_fits(d, &pd), "shape %d: the pool should fit", k)) continue;
            const size_t np = (size_t)d->N * d->OC * pd.OH * pd.OW;
            float *ws = nan_ws(ct_conv2d_bf16_workspace_floats(d)), *out = t_alloc(n_out(d));
            float *want = t_alloc(np), *got = t_alloc(np);
            int *am_want = calloc(np, sizeof(int)), *am_got = calloc(np, sizeof(int));
            ct_conv2d_forward_bf16(out, ws, x.in, x.w, x.b, d, NULL);
            ct_maxpool2d_forward(want, am_want, out, &pd);
            for (int relu = 0; relu <= 1; relu++) {
                if (relu) ct_relu_forward(want, want, np);
                ct_conv2d_direct_bf16_forward_pool(got, am_got, ws, x.in, x.w, x.b, d, &pd, relu);
                bad += memcmp(want, got, np * sizeof *got) != 0;
                for (size_t e = 0; e < np; e++) {
                    const int expect = relu && !(want[e] > 0.0f) ? -1 : am_want[e];
                    bad += am_got[e] != expect;
                    zeroed += expect < 0;
                }
                bad_back += pool_backward_differs(&x, &pd, got, am_got, relu);
                runs++;
            }
            free(ws); free(out); free(want); free(got); free(am_want); free(am_got);
        }
        data_free(&x);
    }
    t_check(runs >= 10, "only %d runs", runs);
    t_check(bad == 0, "%d of the pooled values or argmax differ", bad);
    t_check(bad_back == 0, "the backward from the pool's gradient differs in %d of %d runs", bad_back, runs);
    t_check(zeroed > 0, "the relu should zero some windows");
}

void suite_conv_bf16(void)
{
    const int ns = (int)(sizeof SHAPES / sizeof SHAPES[0]);
    ct_gemm_bf16_use_model(1);
    path_case();
    for (int k = 0; k < ns; k++) shape_case(&SHAPES[k], 100 + (uint64_t)k, CT_BF16_MODEL);
    bounds_case();
    backend_case();
    stream_case();
    pool_case();
    ct_gemm_bf16_use_model(0);
    const ct_bf16_kernels real = ct_kernels_bf16();
    if (real != CT_BF16_NONE)
        for (int k = 0; k < ns; k++) shape_case(&SHAPES[k], 100 + (uint64_t)k, real);
    else if (getenv("CT_REQUIRE_AMX") && !strcmp(getenv("CT_REQUIRE_AMX"), "1")) {   /* the GPU machine's Xeon has AMX */
        t_case("conv_bf16/the shapes on the CPU's own bf16 kernel (CT_REQUIRE_AMX=1)");
        t_check(0, "it did not run: %s", ct_bf16_check() == CT_OK ? "?" : ct_last_error());
    } else
        t_skip("conv_bf16/the shapes on the CPU's own bf16 kernel: %s (the C model of the tiles ran them above)",
               ct_bf16_check() == CT_OK ? "?" : ct_last_error());
}
