/* test_pool.c - tests of layers/pool: max pooling and global average pooling.
 * Finite-difference gradient checks (max pooling on inputs whose values are a
 * random permutation of a grid spaced far wider than 2h, so no window ever sits
 * on a kink), overlapping windows (stride < K), windows that skip inputs (stride
 * > K) or do not tile the input; ties; PyTorch parity (tests/golden/pool_*.h5,
 * argmax included); the errors of ct_maxpool2d_dims_make. Average pooling over H
 * (the CNN speaker encoder's mean over time): gradient check, parity with
 * torch's adaptive_avg_pool2d(x, (1, W)), and a check that it averages over H only.
 * The AVX-512 kernel of 2x2 windows of stride 2 against the scalar loop.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/threads.h"
#include "io/h5.h"
#include "layers/activation.h"
#include "layers/gemm_packed.h"
#include "layers/pool.h"

/* Tolerances.
 * Gradient check: max and mean are piecewise linear, and the inputs keep every window
 * away from its kinks, so central differences are exact up to float32 rounding of
 * the inputs and outputs divided by 2h (h = 1e-2): observed <= 4e-5 (max pooling
 * exact), tolerance 1e-3.
 * PyTorch parity: max pooling picks values (exact: tolerance 0, argmax equal);
 * averaging sums 15 floats: observed 2.4e-7, tolerance 1e-6. */
#define POOL_GC_H    1e-2f
#define POOL_GC_TOL  1e-3
#define POOL_PAR_TOL 1e-6

static size_t mp_n_in(const maxpool2d_dims *d)  { return (size_t)d->N * d->C * d->H * d->W; }
static size_t mp_n_out(const maxpool2d_dims *d) { return (size_t)d->N * d->C * d->OH * d->OW; }

typedef struct {
    maxpool2d_dims d;
    float *x, *out, *r;
    int *argmax;
} mp_ctx;

static double mp_objective(void *p)
{
    mp_ctx *c = p;
    ct_maxpool2d_forward(c->out, c->argmax, c->x, &c->d);
    return t_dot(c->out, c->r, mp_n_out(&c->d));
}

static void mp_gradcheck(int N, int C, int H, int W, int K, int stride, uint64_t seed)
{
    t_case("pool/max gradcheck N=%d C=%d %dx%d K=%d s%d", N, C, H, W, K, stride);
    mp_ctx c;
    if (!t_check(ct_maxpool2d_dims_make(&c.d, N, C, H, W, K, stride) == CT_OK, "dims: %s", ct_last_error())) return;
    size_t nin = mp_n_in(&c.d), nout = mp_n_out(&c.d);
    ct_rng r;
    ct_rng_seed(&r, seed, 5);
    /* x = a random permutation of -1 + 0.05 k: distinct values 0.05 = 5h apart, so a
     * perturbation of +-h never changes which input wins a window */
    int *perm = malloc(nin * sizeof *perm);
    if (!perm) { fprintf(stderr, "out of memory\n"); exit(2); }
    for (size_t i = 0; i < nin; i++) perm[i] = (int)i;
    ct_rng_shuffle_int(&r, perm, (int)nin);
    c.x = t_alloc(nin); c.out = t_alloc(nout); c.r = t_alloc(nout);
    c.argmax = calloc(nout, sizeof *c.argmax);
    if (!c.argmax) { fprintf(stderr, "out of memory\n"); exit(2); }
    for (size_t i = 0; i < nin; i++) c.x[i] = -1.0f + 0.05f * (float)perm[i];
    t_fill_uniform(c.r, nout, -1, 1, &r);

    float *din = t_alloc(nin);
    for (size_t i = 0; i < nin; i++) din[i] = 3.0f;   /* must be overwritten */
    ct_maxpool2d_forward(c.out, c.argmax, c.x, &c.d);
    ct_maxpool2d_backward(din, c.r, c.argmax, &c.d);
    /* kinks = 0: the spacing guarantees none, so every coordinate is checked */
    t_gradcheck("din", mp_objective, &c, c.x, din, nin, POOL_GC_H, POOL_GC_TOL, 0, 0);
    free(perm); free(c.x); free(c.out); free(c.r); free(c.argmax); free(din);
}

/* Ties: a constant input makes every window's first element (top-left) the maximum. */
static void mp_ties(void)
{
    t_case("pool/max ties pick the first maximum");
    maxpool2d_dims d;
    if (!t_check(ct_maxpool2d_dims_make(&d, 1, 2, 5, 5, 3, 2) == CT_OK, "dims: %s", ct_last_error())) return;
    float x[50], out[8], dout[8], din[50];
    int am[8];
    for (int i = 0; i < 50; i++) x[i] = 0.5f;
    ct_maxpool2d_forward(out, am, x, &d);
    for (int j = 0; j < 8; j++) {
        int pl = j / 4, oy = (j % 4) / 2, ox = j % 2;
        int want = pl * 25 + (oy * 2) * 5 + ox * 2;
        t_check(am[j] == want && out[j] == 0.5f, "window %d: argmax %d, want %d (first of the tie)", j, am[j], want);
        dout[j] = 1.0f;
    }
    /* every output routes its gradient to exactly one input */
    ct_maxpool2d_backward(din, dout, am, &d);
    float sum = 0;
    for (int i = 0; i < 50; i++) sum += din[i];
    t_check(sum == 8.0f, "sum of din %g, want 8 (each output routes its gradient once)", sum);
}

/* Overlapping windows: an input that wins several windows collects all their gradients. */
static void mp_overlap(void)
{
    t_case("pool/max overlapping windows add gradients");
    maxpool2d_dims d;
    if (!t_check(ct_maxpool2d_dims_make(&d, 1, 1, 4, 4, 3, 1) == CT_OK, "dims: %s", ct_last_error())) return;
    float x[16], out[4], dout[4] = { 1, 2, 3, 4 }, din[16];
    int am[4];
    for (int i = 0; i < 16; i++) x[i] = (float)(i % 3) * 0.1f;
    x[5] = 9.0f;   /* (1,1) lies in all four 3x3 windows */
    ct_maxpool2d_forward(out, am, x, &d);
    ct_maxpool2d_backward(din, dout, am, &d);
    for (int j = 0; j < 4; j++) t_check(am[j] == 5 && out[j] == 9.0f, "window %d: argmax %d, want 5", j, am[j]);
    t_check(din[5] == 10.0f, "din at the shared maximum %g, want 1+2+3+4 = 10", din[5]);
    float rest = 0;
    for (int i = 0; i < 16; i++) if (i != 5) rest += fabsf(din[i]);
    t_check(rest == 0.0f, "din elsewhere must be 0, sum |din| = %g", rest);
}

static void mp_parity(const char *file)
{
    t_case("pool/parity torch max_pool2d %s", file);
    char path[128];
    snprintf(path, sizeof path, "%s.h5", file);
    hid_t f = t_golden_open(path);
    if (f < 0) return;
    int N = (int)t_golden_attr(f, "N"), C = (int)t_golden_attr(f, "C"), H = (int)t_golden_attr(f, "H");
    int W = (int)t_golden_attr(f, "W"), K = (int)t_golden_attr(f, "K"), s = (int)t_golden_attr(f, "stride");
    maxpool2d_dims d;
    if (!t_check(ct_maxpool2d_dims_make(&d, N, C, H, W, K, s) == CT_OK, "dims: %s", ct_last_error())) { ct_h5_close(f); return; }
    size_t nin = mp_n_in(&d), nout = mp_n_out(&d);
    float *x = t_golden(f, "x", nin), *out_ref = t_golden(f, "out", nout), *dout = t_golden(f, "dout", nout);
    float *dx_ref = t_golden(f, "dx", nin);
    int *am_ref = t_golden_i32(f, "argmax", nout);
    float *out = t_alloc(nout), *dx = t_alloc(nin);
    int *am = calloc(nout, sizeof *am);
    if (!am) { fprintf(stderr, "out of memory\n"); exit(2); }
    ct_maxpool2d_forward(out, am, x, &d);
    t_close("out", out, out_ref, nout, 0.0);
    size_t bad = 0;
    for (size_t j = 0; j < nout; j++) bad += am[j] != am_ref[j];
    t_check(bad == 0, "argmax differs from torch's at %zu of %zu outputs", bad, nout);
    ct_maxpool2d_backward(dx, dout, am, &d);
    t_close("dx", dx, dx_ref, nin, 0.0);
    ct_h5_close(f);
    free(x); free(out_ref); free(dout); free(dx_ref); free(am_ref); free(out); free(dx); free(am);
}

static void mp_dims_error(const char *what, int N, int C, int H, int W, int K, int stride, const char *must_mention)
{
    t_case("pool/max dims_make rejects %s", what);
    maxpool2d_dims d;
    ct_status st = ct_maxpool2d_dims_make(&d, N, C, H, W, K, stride);
    t_check(st == CT_EINVAL, "status %d, want CT_EINVAL", (int)st);
    t_check(strstr(ct_last_error(), "maxpool2d") != NULL && strstr(ct_last_error(), must_mention) != NULL,
            "message \"%s\" should name the layer and mention \"%s\"", ct_last_error(), must_mention);
}

typedef struct { int N, C, HW; float *x, *out, *r; } gap_ctx;

static double gap_objective(void *p)
{
    gap_ctx *c = p;
    ct_global_avgpool_forward(c->out, c->x, c->N, c->C, c->HW);
    return t_dot(c->out, c->r, (size_t)c->N * c->C);
}

static void gap_gradcheck(int N, int C, int HW, uint64_t seed)
{
    t_case("pool/global avg gradcheck N=%d C=%d HW=%d", N, C, HW);
    gap_ctx c = { N, C, HW, NULL, NULL, NULL };
    size_t nin = (size_t)N * C * HW, nout = (size_t)N * C;
    ct_rng r;
    ct_rng_seed(&r, seed, 6);
    c.x = t_alloc(nin); c.out = t_alloc(nout); c.r = t_alloc(nout);
    t_fill_uniform(c.x, nin, -1, 1, &r);
    t_fill_uniform(c.r, nout, -1, 1, &r);
    float *din = t_alloc(nin);
    for (size_t i = 0; i < nin; i++) din[i] = 3.0f;   /* must be overwritten */
    ct_global_avgpool_backward(din, c.r, N, C, HW);
    t_gradcheck("din", gap_objective, &c, c.x, din, nin, POOL_GC_H, POOL_GC_TOL, 0, 0);
    free(c.x); free(c.out); free(c.r); free(din);
}

static void gap_parity(void)
{
    t_case("pool/parity torch adaptive_avg_pool2d pool_gap");
    hid_t f = t_golden_open("pool_gap.h5");
    if (f < 0) return;
    int N = (int)t_golden_attr(f, "N"), C = (int)t_golden_attr(f, "C");
    int HW = (int)t_golden_attr(f, "H") * (int)t_golden_attr(f, "W");
    size_t nin = (size_t)N * C * HW, nout = (size_t)N * C;
    float *x = t_golden(f, "x", nin), *out_ref = t_golden(f, "out", nout), *dout = t_golden(f, "dout", nout);
    float *dx_ref = t_golden(f, "dx", nin), *out = t_alloc(nout), *dx = t_alloc(nin);
    ct_global_avgpool_forward(out, x, N, C, HW);
    t_close("out", out, out_ref, nout, POOL_PAR_TOL);
    ct_global_avgpool_backward(dx, dout, N, C, HW);
    t_close("dx", dx, dx_ref, nin, POOL_PAR_TOL);
    ct_h5_close(f);
    free(x); free(out_ref); free(dout); free(dx_ref); free(out); free(dx);
}

/* ---- average pooling over H ---- */
typedef struct { int N, C, H, W; float *x, *out, *r; } gaph_ctx;

static double gaph_objective(void *p)
{
    gaph_ctx *c = p;
    ct_avgpool_h_forward(c->out, c->x, c->N, c->C, c->H, c->W);
    return t_dot(c->out, c->r, (size_t)c->N * c->C * c->W);
}

static void gaph_gradcheck(int N, int C, int H, int W, uint64_t seed)
{
    t_case("pool/avg over H gradcheck N=%d C=%d %dx%d", N, C, H, W);
    gaph_ctx c = { N, C, H, W, NULL, NULL, NULL };
    size_t nin = (size_t)N * C * H * W, nout = (size_t)N * C * W;
    ct_rng r;
    ct_rng_seed(&r, seed, 7);
    c.x = t_alloc(nin); c.out = t_alloc(nout); c.r = t_alloc(nout);
    t_fill_uniform(c.x, nin, -1, 1, &r);
    t_fill_uniform(c.r, nout, -1, 1, &r);
    float *din = t_alloc(nin);
    for (size_t i = 0; i < nin; i++) din[i] = 3.0f;   /* must be overwritten */
    ct_avgpool_h_backward(din, c.r, N, C, H, W);
    t_gradcheck("din", gaph_objective, &c, c.x, din, nin, POOL_GC_H, POOL_GC_TOL, 0, 0);
    free(c.x); free(c.out); free(c.r); free(din);
}

/* A map that varies only along W comes out unchanged; one that varies only along H comes out as its mean. */
static void gaph_axes(void)
{
    t_case("pool/avg over H keeps W and averages H");
    enum { C = 2, H = 4, W = 3 };
    float x[C * H * W], y[C * H * W], out[C * W];
    for (int c = 0; c < C; c++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) {
                x[(c * H + h) * W + w] = (float)(10 * c + w);   /* constant over h */
                y[(c * H + h) * W + w] = (float)(c + h);        /* constant over w: mean over h = c + 1.5 */
            }
    ct_avgpool_h_forward(out, x, 1, C, H, W);
    for (int k = 0; k < C * W; k++) t_check(out[k] == (float)(10 * (k / W) + k % W), "x: out[%d] = %g", k, out[k]);
    ct_avgpool_h_forward(out, y, 1, C, H, W);
    for (int k = 0; k < C * W; k++) t_check(out[k] == (float)(k / W) + 1.5f, "y: out[%d] = %g", k, out[k]);
}

static void gaph_parity(void)
{
    t_case("pool/parity torch adaptive_avg_pool2d (1, W) pool_gaph");
    hid_t f = t_golden_open("pool_gaph.h5");
    if (f < 0) return;
    int N = (int)t_golden_attr(f, "N"), C = (int)t_golden_attr(f, "C");
    int H = (int)t_golden_attr(f, "H"), W = (int)t_golden_attr(f, "W");
    size_t nin = (size_t)N * C * H * W, nout = (size_t)N * C * W;
    float *x = t_golden(f, "x", nin), *out_ref = t_golden(f, "out", nout), *dout = t_golden(f, "dout", nout);
    float *dx_ref = t_golden(f, "dx", nin), *out = t_alloc(nout), *dx = t_alloc(nin);
    ct_avgpool_h_forward(out, x, N, C, H, W);
    t_close("out", out, out_ref, nout, POOL_PAR_TOL);
    ct_avgpool_h_backward(dx, dout, N, C, H, W);
    t_close("dx", dx, dx_ref, nin, POOL_PAR_TOL);
    ct_h5_close(f);
    free(x); free(out_ref); free(dout); free(dx_ref); free(out); free(dx);
}

/* relu and maxpool (forward and backward) on a large input, with 2 and 3 workers
 * sharing the elements and planes: the same bits as one worker. Ties included
 * (values are rounded to a coarse grid) so the argmax order matters. */
static void pool_workers(void)
{
    maxpool2d_dims d;
    t_check(ct_maxpool2d_dims_make(&d, 9, 8, 30, 31, 2, 2) == CT_OK, "dims: %s", ct_last_error());
    const size_t n = (size_t)9 * 8 * 30 * 31, m = (size_t)9 * 8 * d.OH * d.OW;   /* 66,960 values: above the split size */
    ct_rng r;
    ct_rng_seed(&r, 3, 4);
    float *x = t_alloc(n), *dy = t_alloc(m), *ref = NULL;
    t_fill_uniform(x, n, -1, 1, &r);
    for (size_t i = 0; i < n; i++) x[i] = roundf(x[i] * 8.0f) / 8.0f;
    t_fill_uniform(dy, m, -1, 1, &r);
    /* relu out, relu din, pool out, pool din; average pooling over H and global: out, din each */
    const size_t pc = (size_t)9 * 8, per = 2 * n + m + n + pc * 31 + n + pc + n;
    for (int threads = 1; threads <= 3; threads++) {
        if (threads > 1) t_case("pool/relu, maxpool and the average poolings with %d workers give the same bits as one", threads);
        float *o = t_alloc(per);
        int *am = malloc(m * sizeof *am);
        ct_threads_set(threads);
        ct_relu_forward(o, x, n);
        ct_relu_backward(o + n, x, o, n);
        ct_maxpool2d_forward(o + 2 * n, am, o, &d);
        ct_maxpool2d_backward(o + 2 * n + m, dy, am, &d);
        float *ah = o + 3 * n + m, *ahd = ah + pc * 31, *ag = ahd + n, *agd = ag + pc;
        ct_avgpool_h_forward(ah, x, 9, 8, 30, 31);
        ct_avgpool_h_backward(ahd, ah, 9, 8, 30, 31);
        ct_global_avgpool_forward(ag, x, 9, 8, 30 * 31);
        ct_global_avgpool_backward(agd, ag, 9, 8, 30 * 31);
        ct_threads_set(1);
        if (!ref) ref = o;
        else { t_check(memcmp(o, ref, per * sizeof *o) == 0, "results differ from one worker's"); free(o); }
        free(am);
    }
    free(ref); free(x); free(dy);
}

/* 2x2 windows of stride 2 run 16 at a time with AVX-512 (layers/pool.c): out, argmax and
 * din must be the scalar loop's bit for bit, on widths whose window count is not a multiple
 * of 16, odd sizes (a row and a column no window covers), inputs on a coarse grid (ties in
 * every order), NaN inputs, and gradients of -0 (the scatter into zeros makes them +0). */
static void mp_vector(int N, int C, int H, int W)
{
    const ct_kernels cpu = ct_kernels_cpu();
    t_case("pool/maxpool 2x2 stride 2: %s = the scalar loop bit for bit (N=%d C=%d %dx%d; ties, NaN, -0)",
           cpu >= CT_KERNELS_AVX512 ? "AVX-512" : "this CPU's loop (no AVX-512 here)", N, C, H, W);
    maxpool2d_dims d;
    if (!t_check(ct_maxpool2d_dims_make(&d, N, C, H, W, 2, 2) == CT_OK, "dims")) return;
    const size_t n = (size_t)N * C * H * W, no = (size_t)N * C * d.OH * d.OW;
    ct_rng r;
    ct_rng_seed(&r, 21, (uint64_t)W);
    float *x = t_alloc(n), *g = t_alloc(no), *out[2], *din[2];
    int *am[2];
    t_fill_uniform(x, n, -2, 2, &r);
    t_fill_uniform(g, no, -1, 1, &r);
    for (size_t i = 0; i < n; i++) x[i] = roundf(x[i] * 2.0f) / 2.0f;   /* 9 values: ties everywhere */
    for (size_t i = 0; i < n; i += 37) x[i] = NAN;
    for (size_t i = 0; i < no; i += 5) g[i] = -0.0f;
    const ct_kernels saved = ct_kernels_set(ct_kernels_get());
    for (int k = 0; k < 2; k++) {
        ct_kernels_set(k == 0 ? (cpu >= CT_KERNELS_AVX2 ? CT_KERNELS_AVX2 : cpu) : cpu);
        out[k] = t_alloc(no); din[k] = t_alloc(n); am[k] = calloc(no, sizeof(int));
        for (size_t i = 0; i < n; i++) din[k][i] = 7.0f;   /* must be overwritten */
        ct_maxpool2d_forward(out[k], am[k], x, &d);
        ct_maxpool2d_backward(din[k], g, am[k], &d);
    }
    ct_kernels_set(saved);
    t_check(memcmp(out[0], out[1], no * sizeof(float)) == 0, "pooled values differ");
    t_check(memcmp(am[0], am[1], no * sizeof(int)) == 0, "argmax differs");
    t_check(memcmp(din[0], din[1], n * sizeof(float)) == 0, "din differs");
    for (int k = 0; k < 2; k++) { free(out[k]); free(din[k]); free(am[k]); }
    free(x); free(g);
}

void suite_pool(void)
{
    mp_vector(2, 3, 7, 35);   /* 17 windows a row: a full vector and one lane; odd sizes */
    mp_vector(3, 2, 100, 40); /* the CNN speaker encoder's first map: 20 windows a row */
    mp_vector(1, 4, 5, 5);    /* 2 windows a row */
    pool_workers();
    mp_gradcheck(1, 1, 5, 5, 2, 2, 1);    /* N=1, C=1, 2x2 windows that do not tile 5x5 (last row/col dropped) */
    mp_gradcheck(2, 3, 7, 6, 3, 2, 2);    /* overlapping windows (s < K), odd sizes */
    mp_gradcheck(2, 2, 6, 6, 3, 1, 3);    /* stride 1: every interior input is in 9 windows */
    mp_gradcheck(1, 3, 8, 7, 2, 3, 4);    /* stride > K: inputs no window sees */
    mp_gradcheck(3, 2, 4, 5, 4, 1, 5);    /* window as tall as the input */
    mp_gradcheck(2, 2, 3, 3, 1, 1, 6);    /* K = 1: identity */
    mp_ties();
    mp_overlap();
    mp_parity("pool_max_k2_s2");
    mp_parity("pool_max_k3_s2");
    mp_parity("pool_max_k2_s3");
    mp_dims_error("a window larger than the input", 2, 3, 5, 3, 4, 1, "4x4");
    mp_dims_error("stride 0", 1, 1, 8, 8, 2, 0, "stride 0");
    mp_dims_error("window 0", 1, 1, 8, 8, 0, 1, "window 0");
    mp_dims_error("an empty input", 1, 1, 0, 8, 2, 2, "input 0x8");

    gap_gradcheck(2, 3, 5, 11);
    gap_gradcheck(1, 1, 1, 12);           /* HW = 1: identity */
    gap_gradcheck(3, 2, 49, 13);
    gap_parity();

    gaph_gradcheck(2, 3, 5, 4, 14);
    gaph_gradcheck(1, 1, 1, 3, 15);       /* H = 1: identity */
    gaph_gradcheck(3, 2, 25, 1, 16);      /* W = 1: the global average */
    gaph_axes();
    gaph_parity();
}
