/* test_lstm.c - tests of layers/lstm.c:
 *   - finite-difference gradient checks of dx and of every weight and bias of
 *     every layer, over awkward shapes (B=1, T=1, odd sizes, 1-3 layers), every
 *     return mode, both recurrent activations, with and without lengths;
 *   - PyTorch parity (tests/golden/lstm_*.h5 from tests/golden_gen/gen_lstm.py):
 *     output, dx and every parameter gradient against torch.nn.LSTM (sigmoid) or
 *     an autograd loop of the same cell (hard sigmoid);
 *   - the initialisers (orthogonal w_hh, forget bias, Glorot bounds), the
 *     configuration errors, gradient accumulation and masking invariance.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/threads.h"
#include "layers/lstm.h"
#include "layers/lstm_fused.h"
#include "core/bf16.h"
#include "layers/gemm_packed.h"

static const char *ret_name[] = { "last", "seq", "mean" };
static const char *recur_name[] = { "sigmoid", "hard_sigmoid" };

static size_t out_floats(const lstm_dims *d)
{
    return (size_t)d->B * (size_t)d->H * (d->ret == LSTM_RETURN_SEQUENCE ? (size_t)d->T : 1);
}

/* One LSTM with its parameters, buffers and a fixed objective sum_i out_i wout_i. */
typedef struct {
    lstm_dims d;
    int *len;                       /* [B] or NULL */
    ct_params ps;
    lstm_ids ids;
    lstm_weights w[LSTM_MAX_LAYERS];
    lstm_grads g[LSTM_MAX_LAYERS];
    float *x, *dx;                  /* [B, T, I] */
    float *out, *wout;              /* out's shape; wout is also dout */
    float *cache, *ws;
} rig;

static void rig_init(rig *r, const lstm_dims *d, const int *len, float wscale, ct_rng *rng)
{
    memset(r, 0, sizeof *r);
    r->d = *d;
    if (len) {
        r->len = malloc((size_t)d->B * sizeof *r->len);
        memcpy(r->len, len, (size_t)d->B * sizeof *len);
    }
    ct_params_init(&r->ps);
    ct_status s = ct_lstm_params_add(&r->ids, &r->ps, "lstm", d->I, d->H, d->L);
    t_check(s == CT_OK, "ct_lstm_params_add: %s", ct_last_error());
    t_check(ct_params_alloc(&r->ps) == CT_OK, "ct_params_alloc");
    /* weights: uniform on [-wscale, wscale] (larger than Keras's init, so the
     * gates are far from their linear range and saturate sometimes) */
    t_fill_uniform(r->ps.data, r->ps.numel, -wscale, wscale, rng);
    ct_lstm_params_view(r->w, r->g, &r->ps, &r->ids);
    if (wscale <= 0) {
        /* Kink-free design for the hard sigmoid (kinks at z = +-2.5): weights
         * U(-a, a) with a = 2 / (I_l + H), so |x W_ih^T + h W_hh^T| < 2 whatever
         * x and h in (-1, 1); b_hh U(-0.1, 0.1); b_ih of the i, f, o gates +5, -5,
         * 0, 0 in turn (g: 0). Every i, f, o pre-activation lies in (-2.1, 2.1)
         * (slope 0.2) or beyond +-2.9 (saturated, slope 0): never within 0.4 of a
         * kink, far more than any finite-difference step moves it. */
        for (int l = 0; l < d->L; l++) {
            int Il = l ? d->H : d->I, H = d->H, G = 4 * H;
            float a = 2.0f / (float)(Il + H), *bih = (float *)r->w[l].b_ih;
            t_fill_uniform((float *)r->w[l].w_ih, (size_t)G * Il, -a, a, rng);
            t_fill_uniform((float *)r->w[l].w_hh, (size_t)G * H, -a, a, rng);
            t_fill_uniform((float *)r->w[l].b_hh, (size_t)G, -0.1f, 0.1f, rng);
            for (int k = 0; k < G; k++) {
                int gate = k / H, j = k % H;
                bih[k] = gate == 2 ? 0.0f : (j % 4 == 0) ? 5.0f : (j % 4 == 1) ? -5.0f : 0.0f;
            }
        }
    }
    size_t nx = (size_t)d->B * d->T * d->I, no = out_floats(d);
    r->x = t_alloc(nx);  r->dx = t_alloc(nx);
    r->out = t_alloc(no); r->wout = t_alloc(no);
    t_fill_uniform(r->x, nx, -1.0f, 1.0f, rng);
    t_fill_uniform(r->wout, no, -1.0f, 1.0f, rng);
    r->cache = t_alloc(ct_lstm_cache_floats(d));
    r->ws = t_alloc(ct_lstm_workspace_floats(d));
}

static void rig_free(rig *r)
{
    ct_params_free(&r->ps);
    free(r->len); free(r->x); free(r->dx); free(r->out); free(r->wout); free(r->cache); free(r->ws);
}

static double rig_objective(void *ctx)
{
    rig *r = ctx;
    ct_lstm_forward(r->out, r->cache, r->x, r->len, r->w, &r->d);
    return t_dot(r->out, r->wout, out_floats(&r->d));
}

/* Analytic gradients of the objective: dout = wout. */
static void rig_backward(rig *r)
{
    ct_params_zero_grad(&r->ps);
    rig_objective(r);
    ct_lstm_backward(r->dx, r->g, r->ws, r->wout, r->cache, r->x, r->len, r->w, &r->d);
}

static void len_str(char *buf, size_t n, const int *len, int B)
{
    if (!len) { snprintf(buf, n, "none"); return; }
    size_t k = 0;
    for (int b = 0; b < B && k + 8 < n; b++) k += (size_t)snprintf(buf + k, n - k, "%s%d", b ? "," : "", len[b]);
}

/* ---- finite differences ---------------------------------------------------
 * Central differences with h = 1e-2 on an objective accumulated in double from
 * a float forward pass. Truncation error is O(h^2) ~ 1e-4 relative and float
 * rounding in the forward pass adds ~1e-7 |f| / h; tolerance 2e-3 normalised
 * (the observed errors are printed on each PASS line); 5e-3 with 3 layers. Hard sigmoid: the
 * weights are chosen so that no pre-activation comes near the kinks at z = +-2.5
 * (see rig_init), so no coordinate is skipped; both the linear and the saturated
 * pieces are exercised. */
#define GC_H   1e-2f
#define GC_TOL 2e-3
#define GC_TOL_DEEP 5e-3   /* L = 3: layer 0 gets ~1e-5 gradients, float noise ~1e-7 / 2h */
#define GC_H_HARD 5e-3f  /* smaller: the hard-sigmoid design has larger pre-activations, more curvature */

static void gradcheck_case(const lstm_dims *d, const int *len, ct_rng *rng)
{
    char ls[128];
    len_str(ls, sizeof ls, len, d->B);
    t_case("lstm/gradcheck L=%d B=%d T=%d I=%d H=%d ret=%s %s len=%s", d->L, d->B, d->T, d->I, d->H,
           ret_name[d->ret], recur_name[d->recur], ls);
    int hard = d->recur == LSTM_HARD_SIGMOID;
    rig r;
    rig_init(&r, d, len, hard ? 0.0f : 0.7f, rng);   /* 0: the kink-free design */
    rig_backward(&r);
    int kinks = 0;
    float h = hard ? GC_H_HARD : GC_H;
    double tol = d->L >= 3 ? GC_TOL_DEEP : GC_TOL;
    t_gradcheck("x", rig_objective, &r, r.x, r.dx, (size_t)d->B * d->T * d->I, h, tol, 0, kinks);
    for (int l = 0; l < d->L; l++) {
        int id[4] = { r.ids.w_ih[l], r.ids.w_hh[l], r.ids.b_ih[l], r.ids.b_hh[l] };
        for (int k = 0; k < 4; k++) {
            const ct_param *p = &r.ps.p[id[k]];
            t_gradcheck(p->name, rig_objective, &r, ct_params_data(&r.ps, id[k]), ct_params_grad(&r.ps, id[k]),
                        p->numel, h, tol, 0, kinks);
        }
    }
    rig_free(&r);
}

static void suite_gradcheck(void)
{
    ct_rng rng;
    ct_rng_seed(&rng, 2024, 7);
    /* hand-picked awkward shapes */
    struct { int B, T, I, H, L; lstm_return ret; lstm_recurrent rec; int len[8]; } fixed[] = {
        { 1, 1, 3, 5, 1, LSTM_RETURN_LAST,     LSTM_SIGMOID,      { 0 } },
        { 1, 1, 3, 5, 2, LSTM_RETURN_LAST,     LSTM_HARD_SIGMOID, { 0 } },
        { 1, 1, 2, 3, 1, LSTM_RETURN_SEQUENCE, LSTM_SIGMOID,      { 0 } },
        { 1, 4, 3, 5, 1, LSTM_RETURN_MEAN,     LSTM_SIGMOID,      { 0 } },
        { 3, 5, 3, 5, 1, LSTM_RETURN_SEQUENCE, LSTM_SIGMOID,      { 5, 1, 3 } },
        { 3, 5, 3, 5, 1, LSTM_RETURN_LAST,     LSTM_HARD_SIGMOID, { 5, 1, 3 } },
        { 3, 4, 4, 3, 2, LSTM_RETURN_MEAN,     LSTM_HARD_SIGMOID, { 1, 4, 2 } },
        { 2, 6, 3, 5, 2, LSTM_RETURN_LAST,     LSTM_SIGMOID,      { 6, 1 } },
        { 2, 6, 3, 5, 2, LSTM_RETURN_SEQUENCE, LSTM_SIGMOID,      { 2, 6 } },
        { 2, 3, 7, 2, 1, LSTM_RETURN_MEAN,     LSTM_SIGMOID,      { 0 } },
        { 2, 4, 3, 4, 3, LSTM_RETURN_SEQUENCE, LSTM_HARD_SIGMOID, { 0 } },
        { 4, 3, 1, 1, 1, LSTM_RETURN_LAST,     LSTM_SIGMOID,      { 3, 1, 2, 3 } },
        /* H a multiple of 16: the fused forward step on AVX-512 (layers/lstm_fused.h) */
        { 2, 5, 3, 16, 1, LSTM_RETURN_LAST,     LSTM_SIGMOID,      { 5, 2 } },
        { 3, 4, 3, 16, 1, LSTM_RETURN_SEQUENCE, LSTM_HARD_SIGMOID, { 4, 1, 3 } },
        { 2, 4, 3, 16, 2, LSTM_RETURN_SEQUENCE, LSTM_SIGMOID,      { 4, 2 } },
        { 7, 3, 2, 32, 1, LSTM_RETURN_MEAN,     LSTM_SIGMOID,      { 3, 1, 2, 3, 3, 2, 1 } },
    };
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) {
        lstm_dims d = { fixed[k].B, fixed[k].T, fixed[k].I, fixed[k].H, fixed[k].L, fixed[k].ret, fixed[k].rec, CT_F32, 0 };
        gradcheck_case(&d, fixed[k].len[0] ? fixed[k].len : NULL, &rng);
    }
    /* shapes drawn from the fixed seed: lengths (when used) include T and 1;
     * H >= 3 and L <= 2 (H = 1, 2 and L = 3 are in the fixed list: in deep or
     * narrow stacks the gradient reaching layer 0 can drown in the float noise
     * of the objective, ~1e-7 / 2h; the L = 3 parity case covers the rest) */
    for (int k = 0; k < 8; k++) {
        lstm_dims d = { 1 + (int)ct_rng_below(&rng, 4), 1 + (int)ct_rng_below(&rng, 6), 1 + (int)ct_rng_below(&rng, 6),
                        3 + (int)ct_rng_below(&rng, 4), 1 + (int)ct_rng_below(&rng, 2),
                        (lstm_return)ct_rng_below(&rng, 3), (lstm_recurrent)ct_rng_below(&rng, 2), CT_F32, 0 };
        int len[4];
        int use_len = (int)ct_rng_below(&rng, 2);
        for (int b = 0; b < d.B; b++) len[b] = 1 + (int)ct_rng_below(&rng, (uint32_t)d.T);
        len[0] = d.T;
        if (d.B > 1) len[d.B - 1] = 1;
        gradcheck_case(&d, use_len ? len : NULL, &rng);
    }
}

/* ---- PyTorch parity --------------------------------------------------------
 * Tolerance (normalised max error): 1e-5 for every tensor of every case. Observed:
 * <= 1.3e-6 for T <= 7, and 5.8e-7 for T = 100 (B=4, I=40, H=16, lengths
 * 100,37,1,73): rounding of the two summation orders does not grow with T here,
 * as the forget gate (~0.5-0.7) damps old errors. */
static void parity_case(const char *file, double tol)
{
    hid_t f = t_golden_open(file);
    lstm_dims d = { 0 };
    int has_len = 0;
    if (f >= 0) {
        d.B = (int)t_golden_attr(f, "B"); d.T = (int)t_golden_attr(f, "T"); d.I = (int)t_golden_attr(f, "I");
        d.H = (int)t_golden_attr(f, "H"); d.L = (int)t_golden_attr(f, "L");
        d.ret = (lstm_return)(int)t_golden_attr(f, "ret"); d.recur = (lstm_recurrent)(int)t_golden_attr(f, "recur");
        has_len = (int)t_golden_attr(f, "has_len");
    }
    t_case("lstm/parity torch %s L=%d B=%d T=%d I=%d H=%d ret=%s %s len=%s", file, d.L, d.B, d.T, d.I, d.H,
           ret_name[d.ret], recur_name[d.recur], has_len ? "yes" : "none");
    if (f < 0 || !t_check(d.B > 0 && d.T > 0 && d.I > 0 && d.H > 0 && d.L >= 1 && d.L <= LSTM_MAX_LAYERS, "bad dims in %s", file)) {
        if (f >= 0) H5Fclose(f);
        return;
    }
    ct_params ps;
    ct_params_init(&ps);
    lstm_ids ids;
    t_check(ct_lstm_params_add(&ids, &ps, "lstm", d.I, d.H, d.L) == CT_OK, "ct_lstm_params_add: %s", ct_last_error());
    t_check(ct_params_alloc(&ps) == CT_OK, "alloc");
    static const char *pn[4] = { "w_ih", "w_hh", "b_ih", "b_hh" };
    for (int l = 0; l < d.L; l++) {
        int id[4] = { ids.w_ih[l], ids.w_hh[l], ids.b_ih[l], ids.b_hh[l] };
        for (int k = 0; k < 4; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s_l%d", pn[k], l);
            float *v = t_golden(f, name, ps.p[id[k]].numel);
            memcpy(ct_params_data(&ps, id[k]), v, ps.p[id[k]].numel * sizeof *v);
            free(v);
        }
    }
    lstm_weights w[LSTM_MAX_LAYERS];
    lstm_grads g[LSTM_MAX_LAYERS];
    ct_lstm_params_view(w, g, &ps, &ids);
    size_t nx = (size_t)d.B * d.T * d.I, no = out_floats(&d);
    float *x = t_golden(f, "x", nx), *out_ref = t_golden(f, "out", no), *dout = t_golden(f, "dout", no);
    float *dx_ref = t_golden(f, "dx", nx);
    int *len = has_len ? t_golden_i32(f, "len", (size_t)d.B) : NULL;
    float *out = t_alloc(no), *dx = t_alloc(nx);
    float *cache = t_alloc(ct_lstm_cache_floats(&d)), *ws = t_alloc(ct_lstm_workspace_floats(&d));
    int len_ok = 1;
    if (len) for (int b = 0; b < d.B; b++) len_ok &= len[b] >= 1 && len[b] <= d.T;
    if (t_check(len_ok, "lengths out of range in %s", file)) {
        ct_lstm_forward(out, cache, x, len, w, &d);
        t_close("out", out, out_ref, no, tol);
        ct_lstm_backward(dx, g, ws, dout, cache, x, len, w, &d);
        t_close("dx", dx, dx_ref, nx, tol);
        for (int l = 0; l < d.L; l++) {
            int id[4] = { ids.w_ih[l], ids.w_hh[l], ids.b_ih[l], ids.b_hh[l] };
            for (int k = 0; k < 4; k++) {
                char name[64];
                snprintf(name, sizeof name, "d%s_l%d", pn[k], l);
                float *ref = t_golden(f, name, ps.p[id[k]].numel);
                t_close(name, ct_params_grad(&ps, id[k]), ref, ps.p[id[k]].numel, tol);
                free(ref);
            }
        }
    }
    free(x); free(out_ref); free(dout); free(dx_ref); free(len); free(out); free(dx); free(cache); free(ws);
    ct_params_free(&ps);
    H5Fclose(f);
}

static void suite_parity(void)
{
    static const char *files[] = {
        "lstm_l1_last.h5", "lstm_l1_seq_len.h5", "lstm_l1_mean_len.h5",
        "lstm_l2_last_len.h5", "lstm_l2_seq.h5", "lstm_l2_mean_len.h5",
        "lstm_l3_seq_len.h5", "lstm_hard_l1_seq_len.h5", "lstm_hard_l2_last_len.h5", "lstm_hard_l1_mean.h5",
    };
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) parity_case(files[k], 1e-5);
    parity_case("lstm_long_t100.h5", 1e-5);
}

/* ---- initialisation and configuration ------------------------------------- */

static void suite_init(void)
{
    t_case("lstm/init orthogonal w_hh, forget bias, Glorot w_ih (I=40 H=16 L=2)");
    const int I = 40, H = 16, L = 2;
    ct_params ps;
    ct_params_init(&ps);
    lstm_ids ids;
    t_check(ct_lstm_params_add(&ids, &ps, "enc", I, H, L) == CT_OK, "ct_lstm_params_add: %s", ct_last_error());
    t_check(ids.L == L, "ids.L = %d, want %d", ids.L, L);
    t_check(ct_params_find(&ps, "enc/w_ih_l1") >= 0 && ct_params_find(&ps, "enc/b_hh_l0") >= 0, "parameter names");
    t_check(ct_params_alloc(&ps) == CT_OK, "alloc");
    ct_rng rng;
    ct_rng_seed(&rng, 5, CT_STREAM_INIT);
    ct_params_initialize(&ps, &rng);
    for (int l = 0; l < L; l++) {
        int Il = l ? H : I;
        const ct_param *pih = &ps.p[ids.w_ih[l]], *phh = &ps.p[ids.w_hh[l]];
        t_check(pih->shape[0] == 4 * H && pih->shape[1] == Il, "w_ih_l%d shape [%d, %d]", l, pih->shape[0], pih->shape[1]);
        t_check(phh->shape[0] == 4 * H && phh->shape[1] == H, "w_hh_l%d shape", l);
        /* W^T W = I_H for w_hh [4H, H] */
        const float *whh = ct_params_data(&ps, ids.w_hh[l]);
        double wtw[16 * 16], eye[16 * 16];
        for (int a = 0; a < H; a++)
            for (int b = 0; b < H; b++) {
                double s = 0;
                for (int k = 0; k < 4 * H; k++) s += (double)whh[k * H + a] * whh[k * H + b];
                wtw[a * H + b] = s;
                eye[a * H + b] = a == b;
            }
        float wtwf[16 * 16];
        for (int k = 0; k < H * H; k++) wtwf[k] = (float)wtw[k];
        t_close_d("w_hh^T w_hh vs identity", wtwf, eye, (size_t)H * H, 1e-5);
        /* Glorot: |w| <= sqrt(6 / (Il + 4H)), and the values fill the range */
        const float *wih = ct_params_data(&ps, ids.w_ih[l]);
        double lim = sqrt(6.0 / (Il + 4 * H)), mx = 0;
        for (size_t k = 0; k < pih->numel; k++) mx = fmax(mx, fabs(wih[k]));
        t_check(mx <= lim * (1 + 1e-6) && mx > 0.95 * lim, "w_ih_l%d max |w| %g, Glorot limit %g", l, mx, lim);
        const float *bih = ct_params_data(&ps, ids.b_ih[l]), *bhh = ct_params_data(&ps, ids.b_hh[l]);
        int ok = 1;
        for (int k = 0; k < 4 * H; k++) ok &= bih[k] == (k >= H && k < 2 * H ? 1.0f : 0.0f) && bhh[k] == 0.0f;
        t_check(ok, "b_ih_l%d: forget gate 1, others 0; b_hh_l%d: 0", l, l);
    }
    ct_params_free(&ps);

    t_case("lstm/config errors (L=0, L>LSTM_MAX_LAYERS, H=0, I=-1)");
    int bad[4][3] = { { 4, 4, 0 }, { 4, 4, LSTM_MAX_LAYERS + 1 }, { 4, 0, 1 }, { -1, 4, 1 } };
    for (int k = 0; k < 4; k++) {
        ct_params_init(&ps);
        ct_status s = ct_lstm_params_add(&ids, &ps, "bad", bad[k][0], bad[k][1], bad[k][2]);
        t_check(s == CT_EINVAL && strlen(ct_last_error()) > 10, "I=%d H=%d L=%d: status %d, message '%s'",
                bad[k][0], bad[k][1], bad[k][2], (int)s, ct_last_error());
        ct_params_free(&ps);
    }
}

/* Parameter gradients accumulate, dx is overwritten, dx = NULL skips it, and
 * padded frames change nothing. */
static void suite_contract(void)
{
    t_case("lstm/backward accumulates params, overwrites dx, dx=NULL L=2 ret=seq len=4,1,3");
    ct_rng rng;
    ct_rng_seed(&rng, 77, 1);
    lstm_dims d = { 3, 4, 3, 5, 2, LSTM_RETURN_SEQUENCE, LSTM_SIGMOID, CT_F32, 0 };
    int len[3] = { 4, 1, 3 };
    rig r;
    rig_init(&r, &d, len, 0.7f, &rng);
    rig_backward(&r);
    size_t nx = (size_t)d.B * d.T * d.I, np = r.ps.numel;
    float *g1 = t_alloc(np), *dx1 = t_alloc(nx), *g2 = t_alloc(np);
    memcpy(g1, r.ps.grad, np * sizeof *g1);
    memcpy(dx1, r.dx, nx * sizeof *dx1);
    ct_lstm_backward(r.dx, r.g, r.ws, r.wout, r.cache, r.x, r.len, r.w, &d);      /* second call */
    for (size_t k = 0; k < np; k++) g2[k] = 2 * g1[k];
    t_close("params after two backward calls = 2x", r.ps.grad, g2, np, 1e-6);
    t_close("dx overwritten", r.dx, dx1, nx, 0);
    ct_params_zero_grad(&r.ps);
    ct_lstm_backward(NULL, r.g, r.ws, r.wout, r.cache, r.x, r.len, r.w, &d);
    t_close("params with dx=NULL", r.ps.grad, g1, np, 0);

    t_case("lstm/masking: padded frames change nothing, output 0 there");
    float *out1 = t_alloc(out_floats(&d));
    ct_lstm_forward(out1, r.cache, r.x, r.len, r.w, &d);
    int zero = 1;
    for (int b = 0; b < d.B; b++)
        for (int t = len[b]; t < d.T; t++) {
            for (int j = 0; j < d.H; j++) zero &= out1[((size_t)b * d.T + t) * d.H + j] == 0.0f;
            for (int i = 0; i < d.I; i++) {
                r.x[((size_t)b * d.T + t) * d.I + i] = 100.0f;   /* garbage in the padding */
                zero &= dx1[((size_t)b * d.T + t) * d.I + i] == 0.0f;
            }
        }
    t_check(zero, "sequence output and dx must be 0 at padded steps");
    rig_backward(&r);
    t_close("out with garbage padding", r.out, out1, out_floats(&d), 0);
    t_close("param grads with garbage padding", r.ps.grad, g1, np, 0);
    free(g1); free(dx1); free(g2); free(out1);
    rig_free(&r);
}

/* The recurrence split by sequence across workers (2 and 3 threads) against one
 * thread: out, dx and every parameter gradient. Two sizes: B = 7, which does not
 * divide evenly, and one large enough that the transposes to and from time-major
 * order and the sum of the workers' gradients are split across the workers too
 * (core/threads.h: CT_PARALLEL_MIN_ELEMS). The forward pass is the same bit for
 * bit; the gradients are summed per worker, then over the workers, so their
 * order differs and the tolerance is a float rounding one. */
static void workers_case(const lstm_dims *dp, const int *len, const char *what)
{
    lstm_dims d = *dp;
    ct_rng rng;
    ct_rng_seed(&rng, 91, 1);
    rig ref;
    rig_init(&ref, &d, len, 0.7f, &rng);
    rig_backward(&ref);
    for (int threads = 2; threads <= 3; threads++) {
        t_case("lstm/%d workers agree with 1 (%s)", threads, what);
        rig r = ref;   /* same weights and inputs; its own outputs and gradients */
        ct_threads_set(threads);   /* before sizing: the workspace holds one region per worker */
        r.out = t_alloc(out_floats(&d)); r.dx = t_alloc((size_t)d.B * d.T * d.I);
        r.cache = t_alloc(ct_lstm_cache_floats(&d)); r.ws = t_alloc(ct_lstm_workspace_floats(&d));
        float *grad = t_alloc(ref.ps.numel);
        lstm_grads g[LSTM_MAX_LAYERS];
        ct_params view = ref.ps;
        view.grad = grad;
        ct_lstm_params_view(r.w, g, &view, &ref.ids);
        ct_lstm_forward(r.out, r.cache, r.x, r.len, r.w, &d);
        ct_lstm_backward(r.dx, g, r.ws, r.wout, r.cache, r.x, r.len, r.w, &d);
        ct_threads_set(1);
        t_close("out", r.out, ref.out, out_floats(&d), 0);
        t_close("dx", r.dx, ref.dx, (size_t)d.B * d.T * d.I, 1e-6);
        t_close("param grads", grad, ref.ps.grad, ref.ps.numel, 1e-6);
        free(r.out); free(r.dx); free(r.cache); free(r.ws); free(grad);
    }
    rig_free(&ref);
}

static void suite_workers(void)
{
    const lstm_dims small = { 7, 6, 3, 5, 2, LSTM_RETURN_MEAN, LSTM_SIGMOID, CT_F32, 0 };
    const int len[7] = { 6, 1, 3, 6, 2, 5, 4 };
    workers_case(&small, len, "L=2 B=7 ret=mean, masked");
    /* B T I = 76,800 values to transpose; 4H x (H + Il) x workers >= 104,448 to sum */
    const lstm_dims large = { 64, 30, 40, 96, 2, LSTM_RETURN_SEQUENCE, LSTM_SIGMOID, CT_F32, 0 };
    int len64[64];
    for (int b = 0; b < 64; b++) len64[b] = 30 - (b * 7) % 30;
    workers_case(&large, len64, "L=2 B=64 T=30 I=40 H=96 ret=sequence, masked: transposes and sums split too");
}

/* The fused forward step (layers/lstm_fused.h: AVX-512, H a multiple of 16) against
 * the plain one (two packed products, then the cell loop): out, dx and every
 * parameter gradient; and the plain step on the AVX2 kernels (what an AVX2 CPU runs,
 * forward and backward) against the same reference: the two sets of kernels sum in
 * the same order, so they must agree as the two steps do. Batches of 13 and 7 rows leave partial register tiles;
 * masked lengths, both recurrent activations, every return mode, two layers
 * (the second layer's input is H wide), 1 and 2 threads. The fused kernel repeats
 * the plain step's arithmetic operation for operation, so where the scalar cell
 * code is compiled with FMA (a -march=native build on an FMA machine) the results
 * must be bit for bit the same; the portable build's scalar code rounds products
 * before adding them, and there they agree to float rounding. */
static void suite_fused(void)
{
#if defined(__FMA__) && !defined(CT_PORTABLE)
    const double tol = 0;
#else
    const double tol = 1e-5;
#endif
    struct { int B, T, I, H, L; lstm_return ret; lstm_recurrent rec; int threads; } cases[] = {
        { 13, 7, 40, 16,  2, LSTM_RETURN_SEQUENCE, LSTM_SIGMOID,      1 },
        { 13, 7, 40, 32,  1, LSTM_RETURN_LAST,     LSTM_HARD_SIGMOID, 2 },
        { 7,  9, 5,  128, 1, LSTM_RETURN_MEAN,     LSTM_SIGMOID,      2 },
        { 7,  5, 3,  48,  2, LSTM_RETURN_LAST,     LSTM_HARD_SIGMOID, 1 },
        { 13, 6, 40, 32,  1, LSTM_RETURN_LAST,     LSTM_SIGMOID,      2 },   /* the siamese model's: the last state, sigmoid */
    };
    ct_rng rng;
    ct_rng_seed(&rng, 4242, 3);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        lstm_dims d = { cases[k].B, cases[k].T, cases[k].I, cases[k].H, cases[k].L, cases[k].ret, cases[k].rec, CT_F32, 0 };
        if (!ct_lstm_fused_ok(d.H)) {
            t_skip("lstm/fused forward step: this CPU has no AVX-512F, the fused step never runs here");
            return;
        }
        const ct_kernels widest = ct_kernels_get(), saved = ct_kernels_get_all();   /* saved: with the bf16 sets */
        t_case("lstm/fused forward step and the AVX2 kernels' plain step = plain step: B=%d T=%d I=%d H=%d L=%d ret=%s %s, "
               "%d thread%s, masked (tolerance %g)", d.B, d.T, d.I, d.H, d.L, ret_name[d.ret], recur_name[d.recur],
               cases[k].threads, cases[k].threads > 1 ? "s" : "", tol);
        int len[13];
        for (int b = 0; b < d.B; b++) len[b] = 1 + (int)ct_rng_below(&rng, (uint32_t)d.T);
        len[0] = d.T;
        ct_threads_set(cases[k].threads);   /* before sizing the workspace */
        rig r;
        rig_init(&r, &d, len, 0.7f, &rng);
        size_t no = out_floats(&d), nx = (size_t)d.B * d.T * d.I, np = r.ps.numel;
        ct_lstm_set_fused(0);
        rig_backward(&r);
        float *out0 = t_alloc(no), *dx0 = t_alloc(nx), *g0 = t_alloc(np);
        memcpy(out0, r.out, no * sizeof *out0);
        memcpy(dx0, r.dx, nx * sizeof *dx0);
        memcpy(g0, r.ps.grad, np * sizeof *g0);
        for (int set = widest; set >= CT_KERNELS_AVX2; set--)
            for (int fused = 1; fused >= 0; fused--) {
                ct_kernels_set((ct_kernels)set);
                if ((fused && !ct_lstm_fused_ok(d.H)) || (!fused && set == (int)widest)) continue;   /* the reference */
                ct_lstm_set_fused(fused);
                for (size_t i = 0; i < ct_lstm_cache_floats(&d); i++) r.cache[i] = NAN;   /* every value must be written again */
                rig_backward(&r);
                char what[64];
                snprintf(what, sizeof what, "%s %s: out", ct_kernels_name((ct_kernels)set), fused ? "fused" : "plain");
                t_close(what, r.out, out0, no, tol);
                snprintf(what, sizeof what, "%s %s: dx", ct_kernels_name((ct_kernels)set), fused ? "fused" : "plain");
                t_close(what, r.dx, dx0, nx, tol);
                snprintf(what, sizeof what, "%s %s: param grads", ct_kernels_name((ct_kernels)set), fused ? "fused" : "plain");
                t_close(what, r.ps.grad, g0, np, tol);
            }
        ct_kernels_set(saved);
        ct_lstm_set_fused(1);
        ct_threads_set(1);
        free(out0); free(dx0); free(g0);
        rig_free(&r);
    }
}

/* The fused step's products alone (ct_lstm_fused_products, what bench_lstm --ceiling
 * times): z = [x | h_{t-1}] [W_ih | W_hh]^T must equal the packed product over the
 * stacked rows [x | h_{t-1}] bit for bit (both sum k in order with fused multiply-adds
 * from 0), and at t = 0 (no h_{t-1}) the product over x alone. z is NaN before, so
 * every value must be written; 13 rows leave a partial tile, H = 48 three unit blocks. */
static void suite_fused_products(void)
{
    if (!ct_lstm_fused_ok(16) || !ct_gemm_packed_available()) {
        t_skip("lstm/fused products alone: this CPU has no AVX-512F, the fused step never runs here");
        return;
    }
    const int cases[][3] = { { 13, 40, 48 }, { 6, 5, 16 }, { 1, 3, 32 } };   /* rows, Il, H */
    ct_rng rng;
    ct_rng_seed(&rng, 77, 3);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int rows = cases[c][0], Il = cases[c][1], H = cases[c][2], K = Il + H, G = 4 * H;
        t_case("lstm/fused products alone = the packed product over [x | h]: rows=%d Il=%d H=%d, and at t = 0", rows, Il, H);
        float *x = t_alloc((size_t)rows * Il), *h = t_alloc((size_t)rows * H), *wi = t_alloc((size_t)G * Il);
        float *wh = t_alloc((size_t)G * H), *A = t_alloc((size_t)rows * K), *W = t_alloc((size_t)G * K);
        float *wp = t_alloc(ct_lstm_fused_pack_floats(Il, H)), *bp = t_alloc(ct_gemm_pack_floats(K, G));
        float *z = t_alloc((size_t)rows * G), *ref = t_alloc((size_t)rows * G);
        for (int i = 0; i < rows * Il; i++) x[i] = ct_rng_uniform(&rng) - 0.5f;
        for (int i = 0; i < rows * H; i++) h[i] = ct_rng_uniform(&rng) - 0.5f;
        for (int i = 0; i < G * Il; i++) wi[i] = ct_rng_uniform(&rng) - 0.5f;
        for (int i = 0; i < G * H; i++) wh[i] = ct_rng_uniform(&rng) - 0.5f;
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < K; k++) A[(size_t)r * K + k] = k < Il ? x[(size_t)r * Il + k] : h[(size_t)r * H + k - Il];
        for (int n = 0; n < G; n++)
            for (int k = 0; k < K; k++) W[(size_t)n * K + k] = k < Il ? wi[(size_t)n * Il + k] : wh[(size_t)n * H + k - Il];
        ct_lstm_fused_pack(wp, wi, wh, Il, H);
        for (int t0 = 0; t0 < 2; t0++) {   /* t > 0, then t = 0 */
            int Kt = t0 ? Il : K;
            ct_gemm_pack(bp, W, K, 1, Kt, G);   /* the first Kt columns of W, transposed */
            ct_gemm_packed(rows, G, Kt, A, K, 0, bp, ref, G, 0);
            for (int i = 0; i < rows * G; i++) z[i] = NAN;
            ct_lstm_fused_products(rows, Il, H, x, t0 ? NULL : h, wp, z);
            t_close(t0 ? "z at t = 0" : "z", z, ref, (size_t)rows * G, 0);
        }
        free(x); free(h); free(wi); free(wh); free(A); free(W); free(wp); free(bp); free(z); free(ref);
    }
}

/* The fused step's cell alone (ct_lstm_fused_cell, what the bf16 tiles' fused step runs on
 * its stored products): the products alone, then the cell on them, must give the whole
 * fused step's gates, c and h bit for bit (the fused step is checked against the
 * plain scalar cell above). Whole rows, and 16-unit blocks in turn as the tiles' unit
 * blocks call it; both recurrent activations; 13 rows; gates past a block untouched. */
static void suite_fused_cell(void)
{
    if (!ct_lstm_fused_ok(16)) {
        t_skip("lstm/fused cell alone: this CPU has no AVX-512F, the fused step never runs here");
        return;
    }
    const int rows = 13, Il = 7, H = 48, G = 4 * H;
    ct_rng rng;
    ct_rng_seed(&rng, 78, 3);
    float *x = t_alloc((size_t)rows * Il), *hp = t_alloc((size_t)rows * H), *cp = t_alloc((size_t)rows * H);
    float *wi = t_alloc((size_t)G * Il), *wh = t_alloc((size_t)G * H), *bi = t_alloc(G), *bh = t_alloc(G);
    float *wp = t_alloc(ct_lstm_fused_pack_floats(Il, H));
    float *g0 = t_alloc((size_t)rows * G), *c0 = t_alloc((size_t)rows * H), *h0 = t_alloc((size_t)rows * H);
    float *g1 = t_alloc((size_t)rows * G), *c1 = t_alloc((size_t)rows * H), *h1 = t_alloc((size_t)rows * H);
    uint16_t *g16 = malloc((size_t)rows * G * sizeof *g16);
    for (int i = 0; i < rows * Il; i++) x[i] = 4 * (ct_rng_uniform(&rng) - 0.5f);
    for (int i = 0; i < rows * H; i++) { hp[i] = 2 * ct_rng_uniform(&rng) - 1; cp[i] = 6 * (ct_rng_uniform(&rng) - 0.5f); }
    for (int i = 0; i < G * Il; i++) wi[i] = 2 * (ct_rng_uniform(&rng) - 0.5f);
    for (int i = 0; i < G * H; i++) wh[i] = ct_rng_uniform(&rng) - 0.5f;
    for (int i = 0; i < G; i++) { bi[i] = ct_rng_uniform(&rng) - 0.5f; bh[i] = ct_rng_uniform(&rng) - 0.5f; }
    ct_lstm_fused_pack(wp, wi, wh, Il, H);
    for (int hard = 0; hard < 2; hard++)
        for (int blocks = 0; blocks < 2; blocks++) {
            t_case("lstm/fused cell alone on the products alone = the fused step, bit for bit: rows=%d H=%d, %s, %s", rows, H,
                   hard ? "hard_sigmoid" : "sigmoid", blocks ? "16-unit blocks" : "whole rows");
            ct_lstm_fused_step(rows, Il, H, x, hp, cp, wp, bi, bh, g0, c0, h0, hard);
            for (int i = 0; i < rows * H; i++) c1[i] = h1[i] = NAN;
            ct_lstm_fused_products(rows, Il, H, x, hp, wp, g1);
            if (!blocks) ct_lstm_fused_cell(rows, H, H, g1, G, cp, bi, bh, g1, NULL, G, c1, h1, hard);
            else
                for (int u = 0; u < H; u += 16) {
                    ct_lstm_fused_cell(rows, 16, H, g1 + u, G, cp + u, bi + u, bh + u, g1 + u, NULL, G, c1 + u, h1 + u, hard);
                    int touched = 0;   /* units past this block: still the products and NaN */
                    for (int r = 0; r < rows; r++)
                        for (int j = u + 16; j < H; j++) touched += !isnan(c1[(size_t)r * H + j]);
                    t_check(!touched, "the block at unit %d wrote %d values past itself", u, touched);
                }
            t_close("gates", g1, g0, (size_t)rows * G, 0);
            t_close("c", c1, c0, (size_t)rows * H, 0);
            t_close("h", h1, h0, (size_t)rows * H, 0);
            /* the gates rounded to bf16 instead (what bf16 training keeps for the backward): the
             * same c and h, and each gate ct_bf16_from_float of the float32 gate */
            ct_lstm_fused_products(rows, Il, H, x, hp, wp, g1);
            for (int i = 0; i < rows * G; i++) g16[i] = 0xFFFF;
            ct_lstm_fused_cell(rows, H, H, g1, G, cp, bi, bh, NULL, g16, G, c1, h1, hard);
            int wrong = 0;
            for (int i = 0; i < rows * G; i++) wrong += g16[i] != ct_bf16_from_float(g0[i]);
            t_check(!wrong, "%d gates kept in bf16 differ from the float32 gates rounded", wrong);
            t_close("c (gates to bf16)", c1, c0, (size_t)rows * H, 0);
            t_close("h (gates to bf16)", h1, h0, (size_t)rows * H, 0);
        }
    free(x); free(hp); free(cp); free(wi); free(wh); free(bi); free(bh); free(wp);
    free(g0); free(c0); free(h0); free(g1); free(c1); free(h1); free(g16);

    /* Products at the edges of the activations, gates to bf16 on the streamed path (aligned
     * gates: with AVX512-BF16, the CPU's own rounding): z <= -88 makes a sigmoid's output a
     * subnormal (1/(1 + e^88), v_exp's clamp), which VCVTNEPS2BF16 would flush to zero;
     * +-100 saturates; a NaN stays a NaN. Rows 0, 1, 2 put the edges in gate i, f, o alone
     * (the others 0.5: every 16 units' subnormal in one gate only), row 3 in all four. Every
     * gate kept must be the float32 gate rounded. */
    static const float edge[] = { -100.0f, -88.5f, -88.0f, -87.5f, -40.0f, -1e-30f, 0.0f, 1e-30f, 40.0f, 88.0f, 100.0f, NAN };
    enum { ER = 4, EH = 32, EG = 4 * EH };
    t_case("lstm/fused cell: gates to bf16 at the activations' edges (subnormal sigmoids, saturation, NaN) = the float32 gates rounded");
    float *zf = ct_alloc_aligned(ER * EG * sizeof *zf, "z"), *gf = ct_alloc_aligned(ER * EG * sizeof *gf, "gates");
    uint16_t *gb = ct_alloc_aligned(ER * EG * sizeof *gb, "bf16 gates");
    float *ec = t_alloc(ER * EH), *eh = t_alloc(ER * EH), *ecp = t_alloc(ER * EH), *eb = t_alloc(EG);
    for (int i = 0; i < ER * EG; i++) {
        const int r = i / EG, q = i % EG / EH, alone[3] = { 0, 1, 3 };
        zf[i] = r == 3 || q == alone[r] ? edge[i % (int)(sizeof edge / sizeof *edge)] : 0.5f;
    }
    ct_lstm_fused_cell(ER, EH, EH, zf, EG, ecp, eb, eb, gf, NULL, EG, ec, eh, 0);
    ct_lstm_fused_cell(ER, EH, EH, zf, EG, ecp, eb, eb, NULL, gb, EG, ec, eh, 0);
    int wrong = 0, subnormal = 0;
    for (int i = 0; i < ER * EG; i++) {
        wrong += gb[i] != ct_bf16_from_float(gf[i]);
        subnormal += fpclassify(gf[i]) == FP_SUBNORMAL;
    }
    t_check(subnormal > 0, "no gate was subnormal: the case does not test what it says");
    t_check(!wrong, "%d of %d gates kept in bf16 differ from the float32 gates rounded", wrong, ER * EG);
    free(zf); free(gf); free(gb);
    free(ec); free(eh); free(ecp); free(eb);
}

void suite_lstm(void)
{
    suite_fused();
    suite_fused_products();
    suite_fused_cell();
    suite_init();
    suite_contract();
    suite_workers();
    suite_gradcheck();
    suite_parity();
}
