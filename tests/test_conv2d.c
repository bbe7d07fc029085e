/* test_conv2d.c - tests of layers/conv2d: finite-difference gradient checks of din,
 * dw and db on awkward shapes (N=1, C=1, odd sizes, strides 2 and 3, padding 1 and
 * 2, non-square and 1x1 kernels, plus shapes drawn from a fixed seed), PyTorch
 * parity (tests/golden/conv2d_*.h5 from gen_conv.py), the gradient conventions
 * (din overwritten, dw/db accumulated), parameter registration, and the errors of
 * ct_conv2d_dims_make. Every lowering is checked: im2col on cblas_sgemm, im2col on
 * the packed AVX-512 kernel (layers/gemm_packed.h, where the CPU has it) and, for
 * 3x3 stride-1 kernels, Winograd F(2x2, 3x3) (forced on small shapes, and compared
 * with im2col on many shapes), and for one input channel the direct path of conv2d_c1.c
 * (where the CPU runs ctrain's AVX-512 kernels), each with one worker and with two
 * (core/threads.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "io/h5.h"
#include "core/threads.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/activation.h"
#include "layers/conv2d_c1.h"
#include "layers/conv2d_direct_bf16.h"
#include "layers/conv2d_winograd.h"
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"

/* Tolerances.
 * Gradient check: conv is linear in in, w and b, so central differences have no
 * truncation error; what remains is float32 rounding of the forward pass divided
 * by 2h (h = 1e-2): observed <= 2e-5 normalised, tolerance 1e-3.
 * PyTorch parity: the same float32 sums in another order (sgemm vs oneDNN/ATen),
 * sums of up to a few hundred products: observed <= 3e-7, tolerance 1e-5. */
#define CONV_GC_H    1e-2f
#define CONV_GC_TOL  1e-3
#define CONV_PAR_TOL 1e-5
/* Winograd or packed vs im2col: the same sums, transformed or in another order;
 * observed <= 1e-6 normalised. */
#define CONV_ALGO_TOL 1e-5

/* The lowering of a conv2d_dims, set by hand: */
enum { ALGO_DEFAULT = -1,   /* what ct_conv2d_dims_make picks */
       ALGO_IM2COL,         /* im2col + cblas_sgemm */
       ALGO_WINOGRAD,       /* Winograd F(2x2, 3x3) where it applies, else im2col */
       ALGO_PACKED,         /* im2col + the packed kernel where the CPU has it, else im2col */
       ALGO_DIRECT1 };      /* one input channel, directly (conv2d_c1.h), where the shape and CPU allow */
static int conv_algo = ALGO_DEFAULT;

/* The one-channel path runs here: ctrain's AVX-512 kernels. */
static int direct1_available(void) { return ct_kernels_get() == CT_KERNELS_AVX512; }

static void set_algo(conv2d_dims *d, int algo)
{
    if (algo == ALGO_DEFAULT) return;
    d->winograd = algo == ALGO_WINOGRAD && ct_conv2d_winograd_ok(d);
    d->packed = algo == ALGO_PACKED && ct_gemm_packed_available();
    d->direct1 = algo == ALGO_DIRECT1 && ct_conv2d_c1_fits(d) && direct1_available();
}

static ct_status conv_dims(conv2d_dims *d, int N, int C, int H, int W, int OC, int KH, int KW, int stride, int pad)
{
    ct_status st = ct_conv2d_dims_make(d, N, C, H, W, OC, KH, KW, stride, pad);
    if (st == CT_OK) set_algo(d, conv_algo);
    return st;
}

static const char *algo_name(const conv2d_dims *d)
{
    return d->direct1 ? "one channel, direct" : d->winograd ? "winograd" : d->packed ? "im2col packed" : "im2col";
}

typedef struct {
    conv2d_dims d;
    float *x, *w, *b, *out, *ws, *r;   /* r [N, OC, OH, OW]: fixed random weights of the objective */
} conv_ctx;

static size_t conv_n_in(const conv2d_dims *d)  { return (size_t)d->N * d->C * d->H * d->W; }
static size_t conv_n_out(const conv2d_dims *d) { return (size_t)d->N * d->OC * d->OH * d->OW; }
static size_t conv_n_w(const conv2d_dims *d)   { return (size_t)d->OC * d->C * d->KH * d->KW; }

/* objective = sum_i out_i r_i, accumulated in double */
static double conv_objective(void *p)
{
    conv_ctx *c = p;
    ct_conv2d_forward(c->out, c->ws, c->x, c->w, c->b, &c->d, NULL);
    return t_dot(c->out, c->r, conv_n_out(&c->d));
}

static void conv_gradcheck(int N, int C, int H, int W, int OC, int KH, int KW, int stride, int pad, int bias,
                           uint64_t seed)
{
    conv_ctx c;
    memset(&c, 0, sizeof c);
    ct_status st = conv_dims(&c.d, N, C, H, W, OC, KH, KW, stride, pad);
    t_case("conv2d/gradcheck N=%d C=%d %dx%d OC=%d k%dx%d s%d p%d%s (%s)", N, C, H, W, OC, KH, KW, stride, pad,
           bias ? "" : " nobias", algo_name(&c.d));
    if (!t_check(st == CT_OK, "dims: %s", ct_last_error()))
        return;
    const conv2d_dims *d = &c.d;
    size_t nin = conv_n_in(d), nout = conv_n_out(d), nw = conv_n_w(d);
    ct_rng r;
    ct_rng_seed(&r, seed, 7);
    c.x = t_alloc(nin); c.w = t_alloc(nw); c.b = bias ? t_alloc((size_t)OC) : NULL;
    c.out = t_alloc(nout); c.ws = t_alloc(ct_conv2d_workspace_floats(d)); c.r = t_alloc(nout);
    t_fill_uniform(c.x, nin, -1, 1, &r);
    t_fill_uniform(c.w, nw, -0.5f, 0.5f, &r);
    if (bias) t_fill_uniform(c.b, (size_t)OC, -0.5f, 0.5f, &r);
    t_fill_uniform(c.r, nout, -1, 1, &r);

    /* analytic: dout = r (the gradient of the objective with respect to out) */
    float *din = t_alloc(nin), *dw = t_alloc(nw), *db = t_alloc((size_t)OC);
    ct_conv2d_forward(c.out, c.ws, c.x, c.w, c.b, d, NULL);
    ct_conv2d_backward(din, dw, bias ? db : NULL, c.ws, c.r, c.x, c.w, d);

    int maxc = 300;
    t_gradcheck("din", conv_objective, &c, c.x, din, nin, CONV_GC_H, CONV_GC_TOL, maxc, 0);
    t_gradcheck("dw", conv_objective, &c, c.w, dw, nw, CONV_GC_H, CONV_GC_TOL, maxc, 0);
    if (bias) t_gradcheck("db", conv_objective, &c, c.b, db, (size_t)OC, CONV_GC_H, CONV_GC_TOL, 0, 0);
    free(c.x); free(c.w); free(c.b); free(c.out); free(c.ws); free(c.r);
    free(din); free(dw); free(db);
}

static void conv_parity(const char *file)
{
    char path[128];
    snprintf(path, sizeof path, "%s.h5", file);
    hid_t f = t_golden_open(path);
    if (f < 0) return;
    int a[10];
    const char *names[10] = { "N", "C", "H", "W", "OC", "KH", "KW", "stride", "pad", "bias" };
    for (int i = 0; i < 10; i++) a[i] = (int)t_golden_attr(f, names[i]);
    conv2d_dims d;
    ct_status st = conv_dims(&d, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]);
    t_case("conv2d/parity torch %s (%s)", file, algo_name(&d));
    if (!t_check(st == CT_OK, "dims: %s", ct_last_error())) { ct_h5_close(f); return; }
    int bias = a[9];
    size_t nin = conv_n_in(&d), nout = conv_n_out(&d), nw = conv_n_w(&d);
    float *x = t_golden(f, "x", nin), *w = t_golden(f, "w", nw), *dout = t_golden(f, "dout", nout);
    float *out_ref = t_golden(f, "out", nout), *dx_ref = t_golden(f, "dx", nin), *dw_ref = t_golden(f, "dw", nw);
    float *b = bias ? t_golden(f, "b", (size_t)d.OC) : NULL, *db_ref = bias ? t_golden(f, "db", (size_t)d.OC) : NULL;
    float *out = t_alloc(nout), *ws = t_alloc(ct_conv2d_workspace_floats(&d));
    float *dx = t_alloc(nin), *dw = t_alloc(nw), *db = t_alloc((size_t)d.OC);
    for (size_t i = 0; i < nin; i++) dx[i] = 7.0f;    /* din must be overwritten */
    ct_conv2d_forward(out, ws, x, w, b, &d, NULL);
    t_close("out", out, out_ref, nout, CONV_PAR_TOL);
    ct_conv2d_backward(dx, dw, bias ? db : NULL, ws, dout, x, w, &d);
    t_close("dx", dx, dx_ref, nin, CONV_PAR_TOL);
    t_close("dw", dw, dw_ref, nw, CONV_PAR_TOL);
    if (bias) t_close("db", db, db_ref, (size_t)d.OC, CONV_PAR_TOL);
    ct_h5_close(f);
    free(x); free(w); free(dout); free(out_ref); free(dx_ref); free(dw_ref); free(b); free(db_ref);
    free(out); free(ws); free(dx); free(dw); free(db);
}

/* Backward twice with the same buffers: din must come out the same (overwritten),
 * dw and db doubled (accumulated); din = NULL must leave dw, db as with din. */
static void conv_conventions(int KH, int KW, int stride, int pad)
{
    conv2d_dims d;
    ct_status st = conv_dims(&d, 2, 3, 6, 5, 4, KH, KW, stride, pad);
    t_case("conv2d/backward overwrites din, accumulates dw db (k%dx%d s%d p%d, %s)", KH, KW, stride, pad, algo_name(&d));
    if (!t_check(st == CT_OK, "dims: %s", ct_last_error())) return;
    size_t nin = conv_n_in(&d), nout = conv_n_out(&d), nw = conv_n_w(&d);
    ct_rng r;
    ct_rng_seed(&r, 42, 1);
    float *x = t_alloc(nin), *w = t_alloc(nw), *dout = t_alloc(nout), *ws = t_alloc(ct_conv2d_workspace_floats(&d));
    t_fill_uniform(x, nin, -1, 1, &r); t_fill_uniform(w, nw, -1, 1, &r); t_fill_uniform(dout, nout, -1, 1, &r);
    float *din1 = t_alloc(nin), *dw1 = t_alloc(nw), *db1 = t_alloc((size_t)d.OC);
    float *din2 = t_alloc(nin), *dw2 = t_alloc(nw), *db2 = t_alloc((size_t)d.OC);
    float *dw3 = t_alloc(nw), *db3 = t_alloc((size_t)d.OC);
    ct_conv2d_backward(din1, dw1, db1, ws, dout, x, w, &d);
    ct_conv2d_backward(din2, dw2, db2, ws, dout, x, w, &d);
    ct_conv2d_backward(din2, dw2, db2, ws, dout, x, w, &d);
    ct_conv2d_backward(NULL, dw3, db3, ws, dout, x, w, &d);
    for (size_t i = 0; i < nw; i++) dw1[i] *= 2.0f;
    for (int i = 0; i < d.OC; i++) db1[i] *= 2.0f;
    t_close("din after two calls", din2, din1, nin, 0.0);
    t_close("dw after two calls = 2 x one call", dw2, dw1, nw, 1e-6);
    t_close("db after two calls = 2 x one call", db2, db1, (size_t)d.OC, 1e-6);
    for (size_t i = 0; i < nw; i++) dw3[i] *= 2.0f;
    for (int i = 0; i < d.OC; i++) db3[i] *= 2.0f;
    t_close("dw with din = NULL", dw3, dw1, nw, 1e-6);
    t_close("db with din = NULL", db3, db1, (size_t)d.OC, 1e-6);
    free(x); free(w); free(dout); free(ws); free(din1); free(dw1); free(db1);
    free(din2); free(dw2); free(db2); free(dw3); free(db3);
}

/* One forward and backward of d's shape from fixed random data: out, din, dw, db; in bf16
 * (ct_conv2d_forward_bf16 / _backward_bf16) if `bf16`. */
typedef struct { float *out, *din, *dw, *db; } conv_result;

static conv_result conv_run_prec(const conv2d_dims *d, uint64_t seed, int bf16)
{
    size_t nin = conv_n_in(d), nout = conv_n_out(d), nw = conv_n_w(d);
    ct_rng r;
    ct_rng_seed(&r, seed, 5);
    float *x = t_alloc(nin), *w = t_alloc(nw), *b = t_alloc((size_t)d->OC), *dout = t_alloc(nout);
    /* exact size: the sanitizer build catches overruns */
    float *ws = t_alloc(bf16 ? ct_conv2d_bf16_workspace_floats(d) : ct_conv2d_workspace_floats(d));
    t_fill_uniform(x, nin, -1, 1, &r); t_fill_uniform(w, nw, -1, 1, &r);
    t_fill_uniform(b, (size_t)d->OC, -1, 1, &r); t_fill_uniform(dout, nout, -1, 1, &r);
    conv_result res = { t_alloc(nout), t_alloc(nin), t_alloc(nw), t_alloc((size_t)d->OC) };
    if (bf16) {
        ct_conv2d_forward_bf16(res.out, ws, x, w, b, d, NULL);
        ct_conv2d_backward_bf16(res.din, res.dw, res.db, ws, dout, x, w, d);
    } else {
        ct_conv2d_forward(res.out, ws, x, w, b, d, NULL);
        ct_conv2d_backward(res.din, res.dw, res.db, ws, dout, x, w, d);
    }
    free(x); free(w); free(b); free(dout); free(ws);
    return res;
}

static conv_result conv_run(const conv2d_dims *d, uint64_t seed) { return conv_run_prec(d, seed, 0); }

static void conv_result_free(conv_result *r) { free(r->out); free(r->din); free(r->dw); free(r->db); }

/* Winograd, packed im2col (1 and 2 workers each) and im2col with 2 workers against
 * im2col on cblas_sgemm with 1 worker. */
static void conv_algos_agree(int N, int C, int H, int W, int OC, int pad, uint64_t seed)
{
    t_case("conv2d/winograd, packed and 2 workers agree with im2col N=%d C=%d %dx%d OC=%d p%d", N, C, H, W, OC, pad);
    enum { V = 5 };
    conv2d_dims ref, v[V];
    if (!t_check(ct_conv2d_dims_make(&ref, N, C, H, W, OC, 3, 3, 1, pad) == CT_OK, "dims: %s", ct_last_error())) return;
    set_algo(&ref, ALGO_IM2COL);
    const char *names[V] = { "winograd, 1 worker", "winograd, 2 workers", "im2col, 2 workers",
                             "im2col packed, 1 worker", "im2col packed, 2 workers" };
    const int algo[V] = { ALGO_WINOGRAD, ALGO_WINOGRAD, ALGO_IM2COL, ALGO_PACKED, ALGO_PACKED };
    for (int k = 0; k < V; k++) {
        ct_threads_set(k == 0 || k == 3 ? 1 : 2);   /* the workers come from the thread count when the dims are made */
        ct_conv2d_dims_make(&v[k], N, C, H, W, OC, 3, 3, 1, pad);
        set_algo(&v[k], algo[k]);
    }
    ct_threads_set(1);
    t_check(v[1].workers == (N < 2 ? N : 2), "workers %d with 2 threads and %d images", v[1].workers, N);
    conv_result want = conv_run(&ref, seed);
    size_t nin = conv_n_in(&ref), nout = conv_n_out(&ref), nw = conv_n_w(&ref);
    for (int k = 0; k < V; k++) {
        conv_result got = conv_run(&v[k], seed);
        char what[64];
        snprintf(what, sizeof what, "%s: out", names[k]);  t_close(what, got.out, want.out, nout, CONV_ALGO_TOL);
        snprintf(what, sizeof what, "%s: din", names[k]);  t_close(what, got.din, want.din, nin, CONV_ALGO_TOL);
        snprintf(what, sizeof what, "%s: dw", names[k]);   t_close(what, got.dw, want.dw, nw, CONV_ALGO_TOL);
        snprintf(what, sizeof what, "%s: db", names[k]);   t_close(what, got.db, want.db, (size_t)OC, CONV_ALGO_TOL);
        conv_result_free(&got);
    }
    conv_result_free(&want);
}

/* The sums after the workers - the bias gradient over all images, and the workers' partial
 * filter gradients - are split by output channel across the threads (serial loops before).
 * Each value must be summed in the same order however it is split: with the workers fixed
 * (4, from the thread count when the dims are made), running on 1 thread and on 4 must give
 * out, din, dw and db bit for bit, for each lowering. The sizes are the mnist_cnn's second
 * convolution, above the split size. And the bias gradient does not depend on the workers
 * at all: 1, 2 and 3 threads give the same db. */
static void conv_sums_threads(void)
{
    enum { N = 128, C = 32, H = 26, OC = 64 };
    const int algos[3] = { ALGO_WINOGRAD, ALGO_PACKED, ALGO_IM2COL };
    const char *names[3] = { "winograd", "im2col packed", "im2col" };
    for (int a = 0; a < 3; a++) {
        t_case("conv2d/%s, 4 workers: the sums after them split across 4 threads give the 1-thread bits", names[a]);
        conv2d_dims d;
        ct_threads_set(4);
        int ok = ct_conv2d_dims_make(&d, N, C, H, H, OC, 3, 3, 1, 0) == CT_OK;
        ct_threads_set(1);
        if (!t_check(ok, "dims: %s", ct_last_error())) return;
        set_algo(&d, algos[a]);
        conv_result one = conv_run(&d, 40);
        ct_threads_set(4);
        conv_result four = conv_run(&d, 40);
        ct_threads_set(1);
        t_check(memcmp(one.out, four.out, conv_n_out(&d) * sizeof *one.out) == 0, "out differs");
        t_check(memcmp(one.din, four.din, conv_n_in(&d) * sizeof *one.din) == 0, "din differs");
        t_check(memcmp(one.dw, four.dw, conv_n_w(&d) * sizeof *one.dw) == 0, "dw differs");
        t_check(memcmp(one.db, four.db, OC * sizeof *one.db) == 0, "db differs");
        conv_result_free(&one);
        conv_result_free(&four);
    }
    conv_result ref = { 0 };
    for (int threads = 1; threads <= 3; threads++) {
        if (threads > 1) t_case("conv2d/bias gradient and output on %d threads are the one-thread bits", threads);
        conv2d_dims d;
        ct_threads_set(threads);
        int ok = ct_conv2d_dims_make(&d, N, C, H, H, OC, 3, 3, 1, 0) == CT_OK;
        conv_result got = { 0 };
        if (ok) got = conv_run(&d, 40);
        ct_threads_set(1);
        if (!t_check(ok, "dims: %s", ct_last_error())) break;
        if (threads == 1) { ref = got; continue; }
        t_check(memcmp(got.db, ref.db, OC * sizeof *ref.db) == 0, "db differs from one thread's");
        t_check(memcmp(got.out, ref.out, conv_n_out(&d) * sizeof *ref.out) == 0, "out differs from one thread's");
        conv_result_free(&got);
    }
    if (ref.db) conv_result_free(&ref);
}

/* The one-channel path (conv2d_c1.c) against im2col on cblas_sgemm, 1 worker: out, din, dW
 * within CONV_ALGO_TOL (the same products summed in another order), db bit for bit (both
 * sum each image's plane with ct_conv2d_bias_sum and add the images in order); and on 2
 * and 3 workers, out and din bit for bit (each image is computed alone), dW within the
 * tolerance (the workers' partial sums), db bit for bit. In float32 and in bf16 (against
 * the bf16 layer's im2col path: the same rounded operands). */
static void conv_c1_agree(int N, int H, int W, int OC, int KH, int KW, int pad, int bf16, uint64_t seed)
{
    t_case("conv2d/one channel, direct%s agrees with im2col N=%d %dx%d OC=%d k%dx%d p%d, 1-3 workers",
           bf16 ? ", bf16," : "", N, H, W, OC, KH, KW, pad);
    if (!direct1_available()) { t_skip("ctrain's AVX-512 kernels do not run on this CPU (%s)", ct_kernels_name(ct_kernels_get())); return; }
    conv2d_dims ref;
    if (!t_check(ct_conv2d_dims_make(&ref, N, 1, H, W, OC, KH, KW, 1, pad) == CT_OK, "dims: %s", ct_last_error())) return;
    t_check(ref.direct1, "ct_conv2d_dims_make did not choose the one-channel path");
    set_algo(&ref, ALGO_IM2COL);
    const size_t nin = conv_n_in(&ref), nout = conv_n_out(&ref), nw = conv_n_w(&ref);
    ct_gemm_bf16_use_model(bf16);   /* the im2col path's bf16 products: the tile model, on any CPU */
    conv_result want = conv_run_prec(&ref, seed, bf16);
    ct_gemm_bf16_use_model(0);
    conv_result one = { 0 };   /* the 1-worker result, for the bits of out and din */
    for (int workers = 1; workers <= 3; workers++) {
        conv2d_dims d;
        ct_threads_set(workers);
        ct_conv2d_dims_make(&d, N, 1, H, W, OC, KH, KW, 1, pad);
        set_algo(&d, ALGO_DIRECT1);
        conv_result got = conv_run_prec(&d, seed, bf16);
        ct_threads_set(1);
        char what[64];
        snprintf(what, sizeof what, "%d worker%s: out", d.workers, d.workers > 1 ? "s" : "");
        t_close(what, got.out, want.out, nout, CONV_ALGO_TOL);
        snprintf(what, sizeof what, "%d worker%s: din", d.workers, d.workers > 1 ? "s" : "");
        t_close(what, got.din, want.din, nin, CONV_ALGO_TOL);
        snprintf(what, sizeof what, "%d worker%s: dw", d.workers, d.workers > 1 ? "s" : "");
        t_close(what, got.dw, want.dw, nw, CONV_ALGO_TOL);
        t_check(memcmp(got.db, want.db, (size_t)OC * sizeof *got.db) == 0, "%d workers: db differs from im2col's", d.workers);
        if (workers == 1) { one = got; continue; }
        t_check(memcmp(got.out, one.out, nout * sizeof *got.out) == 0, "%d workers: out differs from 1 worker's", d.workers);
        t_check(memcmp(got.din, one.din, nin * sizeof *got.din) == 0, "%d workers: din differs from 1 worker's", d.workers);
        conv_result_free(&got);
    }
    conv_result_free(&one);
    conv_result_free(&want);
}

/* dout's planes handed over one at a time (ct_conv2d_backward_planes, for a batchnorm that
 * makes its din so): dw and db (accumulated onto values already there) the bits of
 * ct_conv2d_backward from dout in memory, in float32 and bf16, on 1 to 3 workers; every
 * plane asked for exactly once. */
typedef struct { const float *dout; int *asked; int OC, P; } planes_src;

static void copy_plane(const void *ctx, float *dout_no, int n, int o)
{
    const planes_src *s = ctx;
    memcpy(dout_no, s->dout + ((size_t)n * s->OC + o) * s->P, (size_t)s->P * sizeof *dout_no);
    s->asked[(size_t)n * s->OC + o]++;
}

static void conv_c1_planes(int N, int H, int W, int OC, int KH, int KW, int pad, int bf16)
{
    t_case("conv2d/one channel, direct%s: dout plane by plane gives dw and db bit for bit N=%d %dx%d OC=%d k%dx%d p%d, "
           "1-3 workers", bf16 ? " in bf16" : "", N, H, W, OC, KH, KW, pad);
    if (!direct1_available()) { t_skip("ctrain's AVX-512 kernels do not run on this CPU (%s)", ct_kernels_name(ct_kernels_get())); return; }
    int bad = 0, asked_wrong = 0;
    for (int workers = 1; workers <= 3; workers++) {
        conv2d_dims d;
        ct_threads_set(workers);
        if (!t_check(ct_conv2d_dims_make(&d, N, 1, H, W, OC, KH, KW, 1, pad) == CT_OK, "dims: %s", ct_last_error())) break;
        ct_threads_set(1);
        if (!t_check(ct_conv2d_backward_planes_fits(&d), "the one-channel path should take planes")) break;
        const size_t nin = conv_n_in(&d), nout = conv_n_out(&d), nw = conv_n_w(&d);
        ct_rng r;
        ct_rng_seed(&r, 48, (uint64_t)workers);
        float *x = t_alloc(nin), *w = t_alloc(nw), *dout = t_alloc(nout), *dw[2], *db[2];
        float *ws = t_alloc(bf16 ? ct_conv2d_bf16_workspace_floats(&d) : ct_conv2d_workspace_floats(&d));
        t_fill_uniform(x, nin, -1, 1, &r); t_fill_uniform(w, nw, -1, 1, &r); t_fill_uniform(dout, nout, -1, 1, &r);
        for (int k = 0; k < 2; k++) { dw[k] = t_alloc(nw); db[k] = t_alloc((size_t)OC); }
        t_fill_uniform(dw[0], nw, -1, 1, &r); t_fill_uniform(db[0], (size_t)OC, -1, 1, &r);
        memcpy(dw[1], dw[0], nw * sizeof *dw[0]); memcpy(db[1], db[0], (size_t)OC * sizeof *db[0]);
        int *asked = calloc((size_t)N * OC, sizeof *asked);
        planes_src src = { dout, asked, OC, d.OH * d.OW };
        ct_threads_set(workers);
        if (bf16) ct_conv2d_backward_bf16(NULL, dw[0], db[0], ws, dout, x, w, &d);
        else      ct_conv2d_backward(NULL, dw[0], db[0], ws, dout, x, w, &d);
        ct_conv2d_backward_planes(dw[1], db[1], ws, copy_plane, &src, x, &d, bf16);
        ct_threads_set(1);
        bad += memcmp(dw[0], dw[1], nw * sizeof *dw[0]) != 0 || memcmp(db[0], db[1], (size_t)OC * sizeof *db[0]) != 0;
        for (size_t k = 0; k < (size_t)N * OC; k++) asked_wrong += asked[k] != 1;
        free(x); free(w); free(dout); free(ws); free(asked);
        for (int k = 0; k < 2; k++) { free(dw[k]); free(db[k]); }
    }
    t_check(bad == 0, "dw or db differ on %d of 3 worker counts", bad);
    t_check(asked_wrong == 0, "%d planes were not asked for exactly once", asked_wrong);
}

/* The one-channel path with the relu after it (ct_conv2d_forward_relu): out the bits of the
 * convolution followed by ct_relu_forward; and the pair's backward from the relu's dout and out
 * (ct_conv2d_backward_planes with ct_relu_din_plane) dw and db the bits of ct_relu_backward
 * followed by the convolution's backward. Biases and inputs centred so that about half of the
 * outputs are cut, and a NaN in the image; 26 output rows (blocks of 8 and a last block made over the rows before it),
 * a 7x7 kernel with padding, and a batch large enough to stream its output; 1-3 workers. */
static void conv_c1_relu(int N, int H, int W, int OC, int KH, int KW, int pad, int bf16)
{
    t_case("conv2d/one channel, direct%s, with the relu after it: out, dw and db those of conv then relu, bit for bit "
           "N=%d %dx%d OC=%d k%dx%d p%d, 1-3 workers", bf16 ? " in bf16" : "", N, H, W, OC, KH, KW, pad);
    if (!direct1_available()) { t_skip("ctrain's AVX-512 kernels do not run on this CPU (%s)", ct_kernels_name(ct_kernels_get())); return; }
    int bad_out = 0, bad_grad = 0, cut = 0;
    for (int workers = 1; workers <= 3; workers++) {
        conv2d_dims d;
        ct_threads_set(workers);
        if (!t_check(ct_conv2d_dims_make(&d, N, 1, H, W, OC, KH, KW, 1, pad) == CT_OK, "dims: %s", ct_last_error())) break;
        if (!t_check(ct_conv2d_backward_planes_fits(&d), "the one-channel path should take the relu")) break;
        const size_t nin = conv_n_in(&d), nout = conv_n_out(&d), nw = conv_n_w(&d);
        ct_rng r;
        ct_rng_seed(&r, 49, (uint64_t)workers);
        float *x = t_alloc(nin), *w = t_alloc(nw), *b = t_alloc((size_t)OC), *dout = t_alloc(nout), *out[2], *dw[2], *db[2];
        float *ws = t_alloc(bf16 ? ct_conv2d_bf16_workspace_floats(&d) : ct_conv2d_workspace_floats(&d));
        t_fill_uniform(x, nin, -1, 1, &r); t_fill_uniform(w, nw, -1, 1, &r); t_fill_uniform(b, (size_t)OC, -0.5f, 0.5f, &r);
        t_fill_uniform(dout, nout, -1, 1, &r);
        x[nin / 2] = NAN;   /* the outputs it reaches are NaN, which the relu makes 0 (activation.h: y > 0 ? y : 0) */
        for (int k = 0; k < 2; k++) { out[k] = t_alloc(nout); dw[k] = t_alloc(nw); db[k] = t_alloc((size_t)OC); }
        t_fill_uniform(dw[0], nw, -1, 1, &r); t_fill_uniform(db[0], (size_t)OC, -1, 1, &r);
        memcpy(dw[1], dw[0], nw * sizeof *dw[0]); memcpy(db[1], db[0], (size_t)OC * sizeof *db[0]);
        for (size_t k = 0; k < nout; k++) out[1][k] = NAN;   /* every value must be written */
        if (bf16) ct_conv2d_forward_bf16(out[0], ws, x, w, b, &d, NULL);
        else      ct_conv2d_forward(out[0], ws, x, w, b, &d, NULL);
        ct_relu_forward(out[0], out[0], nout);
        ct_conv2d_forward_relu(out[1], ws, x, w, b, &d, bf16);
        bad_out += memcmp(out[0], out[1], nout * sizeof *out[0]) != 0;
        for (size_t k = 0; k < nout; k++) cut += out[0][k] == 0.0f;
        float *din = t_alloc(nout);   /* the relu's din, in memory, for the layers one by one */
        ct_relu_backward(din, dout, out[0], nout);
        if (bf16) ct_conv2d_backward_bf16(NULL, dw[0], db[0], ws, din, x, w, &d);
        else      ct_conv2d_backward(NULL, dw[0], db[0], ws, din, x, w, &d);
        const ct_relu_din src = { .dout = dout, .out = out[1], .plane = (size_t)d.OH * d.OW, .C = OC };
        ct_conv2d_backward_planes(dw[1], db[1], ws, ct_relu_din_plane, &src, x, &d, bf16);
        bad_grad += memcmp(dw[0], dw[1], nw * sizeof *dw[0]) != 0 || memcmp(db[0], db[1], (size_t)OC * sizeof *db[0]) != 0;
        ct_threads_set(1);
        free(x); free(w); free(b); free(dout); free(ws); free(din);
        for (int k = 0; k < 2; k++) { free(out[k]); free(dw[k]); free(db[k]); }
    }
    ct_threads_set(1);   /* also after a failed case's break */
    t_check(bad_out == 0, "out differs on %d of 3 worker counts", bad_out);
    t_check(bad_grad == 0, "dw or db differ on %d of 3 worker counts", bad_grad);
    t_check(cut > 0, "no output was cut by the relu: the case does not test it");
}

/* The packed path with the maxpool after it (ct_conv2d_forward_pool, ct_conv2d_backward_pool):
 * pooled and argmax those of the layer, then ct_maxpool2d_forward (then ct_relu_forward, argmax
 * -1 where it zeroed a window); din, dw and db those of ct_maxpool2d_backward, then the layer's
 * backward, from the pool's gradient (the relu's applied first, as models do), bit for bit.
 * 2x2 windows and overlapping 3x3 ones with stride 2, padded and unpadded, 1-3 workers. */
static void conv_pool(int N, int C, int H, int W, int OC, int pad, int win)
{
    t_case("conv2d/packed, with the maxpool after it (%dx%d, stride 2; and a relu): pooled, argmax, din, dw, db those of "
           "the layers, bit for bit N=%d C=%d %dx%d OC=%d k3x3 p%d, 1-3 workers", win, win, N, C, H, W, OC, pad);
    if (!direct1_available()) { t_skip("ctrain's AVX-512 kernels do not run on this CPU (%s)", ct_kernels_name(ct_kernels_get())); return; }
    int bad_fwd = 0, bad_bwd = 0, zeroed = 0, runs = 0;
    for (int workers = 1; workers <= 3; workers++) {
        conv2d_dims d;
        maxpool2d_dims pd;
        ct_threads_set(workers);
        if (!t_check(ct_conv2d_dims_make(&d, N, C, H, W, OC, 3, 3, 1, pad) == CT_OK &&
                     ct_maxpool2d_dims_make(&pd, N, OC, d.OH, d.OW, win, 2) == CT_OK, "dims: %s", ct_last_error())) break;
        if (!t_check(ct_conv2d_pool_fits(&d, &pd), "the packed path should take the pool")) break;
        const size_t nin = conv_n_in(&d), nout = conv_n_out(&d), nw = conv_n_w(&d), np = (size_t)N * OC * pd.OH * pd.OW;
        ct_rng r;
        ct_rng_seed(&r, 50, (uint64_t)workers);
        float *x = t_alloc(nin), *w = t_alloc(nw), *b = t_alloc((size_t)OC), *out = t_alloc(nout), *dp = t_alloc(np);
        float *want = t_alloc(np), *got = t_alloc(np), *dpr = t_alloc(np), *dout = t_alloc(nout), *ws = t_alloc(ct_conv2d_workspace_floats(&d));
        int *am_want = calloc(np, sizeof(int)), *am_got = calloc(np, sizeof(int));
        t_fill_uniform(x, nin, -1, 1, &r); t_fill_uniform(w, nw, -0.5f, 0.5f, &r); t_fill_uniform(b, (size_t)OC, -0.5f, 0.5f, &r);
        t_fill_uniform(dp, np, -1, 1, &r);
        ct_conv2d_forward(out, ws, x, w, b, &d, NULL);
        for (int relu = 0; relu <= 1; relu++) {
            ct_maxpool2d_forward(want, am_want, out, &pd);
            if (relu) ct_relu_forward(want, want, np);
            ct_conv2d_forward_pool(got, am_got, ws, x, w, b, &d, &pd, relu);
            bad_fwd += memcmp(want, got, np * sizeof *got) != 0;
            for (size_t e = 0; e < np; e++) {
                const int expect = relu && !(want[e] > 0.0f) ? -1 : am_want[e];
                bad_fwd += am_got[e] != expect;
                zeroed += expect < 0;
            }
            for (size_t e = 0; e < np; e++) dpr[e] = relu && !(got[e] > 0.0f) ? 0.0f : dp[e];   /* the relu's backward */
            ct_maxpool2d_backward(dout, dpr, am_got, &pd);
            float *din[2], *dw[2], *db[2];
            for (int k = 0; k < 2; k++) { din[k] = t_alloc(nin); dw[k] = t_alloc(nw); db[k] = t_alloc((size_t)OC); }
            t_fill_uniform(dw[0], nw, -1, 1, &r); t_fill_uniform(db[0], (size_t)OC, -1, 1, &r);
            memcpy(dw[1], dw[0], nw * sizeof *dw[0]); memcpy(db[1], db[0], (size_t)OC * sizeof *db[0]);
            ct_conv2d_backward(din[0], dw[0], db[0], ws, dout, x, w, &d);
            ct_conv2d_backward_pool(din[1], dw[1], db[1], ws, dpr, am_got, &pd, x, w, &d);
            bad_bwd += memcmp(din[0], din[1], nin * sizeof *din[0]) != 0 || memcmp(dw[0], dw[1], nw * sizeof *dw[0]) != 0 ||
                       memcmp(db[0], db[1], (size_t)OC * sizeof *db[0]) != 0;
            for (int k = 0; k < 2; k++) { free(din[k]); free(dw[k]); free(db[k]); }
            runs++;
        }
        ct_threads_set(1);
        free(x); free(w); free(b); free(out); free(dp); free(want); free(got); free(dpr); free(dout); free(ws);
        free(am_want); free(am_got);
    }
    ct_threads_set(1);   /* also after a failed case's break */
    t_check(bad_fwd == 0, "%d pooled values or argmax differ", bad_fwd);
    t_check(bad_bwd == 0, "din, dw or db differ in %d of %d runs", bad_bwd, runs);
    t_check(zeroed > 0, "the relu should zero some windows");
}

/* Which shapes take the one-channel path: one input channel, stride 1, padding below the
 * kernel, on ctrain's AVX-512 kernels; and not when the kernels are switched to AVX2. */
static void conv_c1_choice(void)
{
    t_case("conv2d/one channel, direct: chosen exactly for one channel, stride 1, padding < kernel, AVX-512");
    if (!direct1_available()) { t_skip("ctrain's AVX-512 kernels do not run on this CPU (%s)", ct_kernels_name(ct_kernels_get())); return; }
    static const struct { int C, KH, KW, s, p, want; } cases[] = {
        { 1, 3, 3, 1, 1, 1 }, { 1, 3, 3, 1, 0, 1 }, { 1, 5, 3, 1, 2, 1 }, { 1, 1, 1, 1, 0, 1 },
        { 1, 3, 3, 2, 1, 0 },   /* stride 2 */
        { 1, 3, 3, 1, 3, 0 },   /* padding 3 > kernel - 1: rows of nothing but zeros */
        { 1, 2, 3, 1, 2, 0 },   /* padding 2 > 2 - 1 */
        { 1, 9, 9, 1, 1, 0 },   /* 81 taps: more than CT_CONV2D_C1_MAX_TAPS */
        { 2, 3, 3, 1, 1, 0 },   /* two input channels */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        conv2d_dims d;
        CT_ASSERT(ct_conv2d_dims_make(&d, 2, cases[k].C, 12, 12, 4, cases[k].KH, cases[k].KW, cases[k].s, cases[k].p) == CT_OK);
        t_check(d.direct1 == cases[k].want, "C=%d k%dx%d s%d p%d: direct1 %d, expected %d", cases[k].C, cases[k].KH,
                cases[k].KW, cases[k].s, cases[k].p, d.direct1, cases[k].want);
        t_check(!(d.direct1 && (d.packed || d.winograd)), "C=%d k%dx%d: more than one path chosen", cases[k].C, cases[k].KH, cases[k].KW);
    }
    const ct_kernels was = ct_kernels_set(CT_KERNELS_AVX2);   /* the whole chain before: AMX stays on after */
    conv2d_dims d;
    CT_ASSERT(ct_conv2d_dims_make(&d, 2, 1, 12, 12, 4, 3, 3, 1, 1) == CT_OK);
    ct_kernels_set(was);
    t_check(!d.direct1, "with the AVX2 kernels the one-channel path was still chosen");
}

/* The output planes' statistics a convolution takes for a batchnorm right after it (the
 * stats argument, layers/batchnorm.h): out the same bits as without them; each plane's
 * statistics those of ct_batchnorm_plane_stats on the plane, bit for bit where the path
 * takes each plane whole, and within 1e-12 (the mean relative to |mean| + sd, the squared
 * deviations relative) where it takes the plane's blocks of rows (the one-channel path,
 * which merges them: batchnorm.c bounds the difference at a few hundred times 2^-53). The
 * largest batch is the siamese-cnn's first layer's size that streams its output. */
static void conv_stats(int N, int C, int H, int W, int OC, int algo, int bf16)
{
    /* bf16 on a CPU without bf16 products (AVX2, AVX-512 without BF16) runs on the exact C
     * model of the tile instructions, as the conv_bf16 suite does */
    const int model = bf16 && ct_kernels_bf16() == CT_BF16_NONE;
    if (model) ct_gemm_bf16_use_model(1);
    conv2d_dims d;
    ct_conv2d_dims_make(&d, N, C, H, W, OC, 3, 3, 1, 1);
    set_algo(&d, algo);
    const int direct_bf16 = bf16 && !d.direct1 && ct_conv2d_direct_bf16_runs(&d);
    t_case("conv2d/output planes' statistics for a batchnorm: N=%d C=%d %dx%d OC=%d (%s%s)", N, C, H, W, OC,
           direct_bf16 ? "direct" : algo_name(&d), !bf16 ? "" : model ? ", bf16 on the C model of the tiles" : ", bf16");
    const size_t nin = conv_n_in(&d), nout = conv_n_out(&d), P = (size_t)d.OH * d.OW, planes = (size_t)N * OC;
    ct_rng r;
    ct_rng_seed(&r, 60, (uint64_t)(algo * 2 + bf16));
    float *x = t_alloc(nin), *w = t_alloc(conv_n_w(&d)), *b = t_alloc((size_t)OC), *out = t_alloc(nout), *out2 = t_alloc(nout);
    float *ws = t_alloc(bf16 ? ct_conv2d_bf16_workspace_floats(&d) : ct_conv2d_workspace_floats(&d));
    double *st = calloc(2 * planes, sizeof *st);
    t_fill_uniform(x, nin, -1, 1, &r); t_fill_uniform(w, conv_n_w(&d), -1, 1, &r); t_fill_uniform(b, (size_t)OC, 2, 3, &r);
    if (bf16) { ct_conv2d_forward_bf16(out, ws, x, w, b, &d, NULL); ct_conv2d_forward_bf16(out2, ws, x, w, b, &d, st); }
    else      { ct_conv2d_forward(out, ws, x, w, b, &d, NULL);      ct_conv2d_forward(out2, ws, x, w, b, &d, st); }
    t_check(memcmp(out, out2, nout * sizeof *out) == 0, "out differs when the statistics are taken");
    double worst = 0.0;
    size_t differ = 0;
    for (size_t pl = 0; pl < planes; pl++) {
        double want[2];
        ct_batchnorm_plane_stats(want, out2 + pl * P, (int)P);
        const double sd = sqrt(want[1] / (double)P);
        const double e0 = fabs(st[2 * pl] - want[0]) / (fabs(want[0]) + sd), e1 = fabs(st[2 * pl + 1] - want[1]) / want[1];
        if (e0 > worst) worst = e0;
        if (e1 > worst) worst = e1;
        differ += memcmp(&st[2 * pl], want, sizeof want) != 0;
    }
    if (d.direct1) t_check(worst <= 1e-12, "statistics off by %.3g (tolerance 1e-12)", worst);
    else           t_check(differ == 0, "%zu of %zu planes' statistics differ from ct_batchnorm_plane_stats (by up to %.3g)",
                           differ, planes, worst);
    free(x); free(w); free(b); free(out); free(out2); free(ws); free(st);
    if (model) ct_gemm_bf16_use_model(0);
}

static void conv_params(void)
{
    t_case("conv2d/params_add names, shapes, init");
    conv2d_dims d;
    t_check(ct_conv2d_dims_make(&d, 2, 3, 8, 8, 5, 3, 2, 1, 1) == CT_OK, "dims: %s", ct_last_error());
    ct_params ps;
    ct_params_init(&ps);
    conv2d_ids a, b;
    t_check(ct_conv2d_params_add(&a, &ps, "conv_1", &d, 1) == CT_OK, "add conv_1: %s", ct_last_error());
    t_check(ct_conv2d_params_add(&b, &ps, "conv_2", &d, 0) == CT_OK, "add conv_2: %s", ct_last_error());
    t_check(ps.n == 3, "3 parameters registered, got %d", ps.n);
    t_check(b.b == -1, "no bias: ids->b = %d, want -1", b.b);
    if (ps.n == 3 && a.w >= 0 && a.b >= 0 && b.w >= 0) {
        const ct_param *w = &ps.p[a.w], *bb = &ps.p[a.b], *w2 = &ps.p[b.w];
        t_check(strcmp(w->name, "conv_1/w") == 0 && strcmp(bb->name, "conv_1/b") == 0 && strcmp(w2->name, "conv_2/w") == 0,
                "names %s %s %s", w->name, bb->name, w2->name);
        t_check(w->ndim == 4 && w->shape[0] == 5 && w->shape[1] == 3 && w->shape[2] == 3 && w->shape[3] == 2,
                "w shape [%d, %d, %d, %d], want [5, 3, 3, 2]", w->shape[0], w->shape[1], w->shape[2], w->shape[3]);
        t_check(bb->ndim == 1 && bb->shape[0] == 5, "b shape [%d], want [5]", bb->shape[0]);
        t_check(w->init.kind == CT_INIT_GLOROT_UNIFORM && w->init.fan_in == 3 * 3 * 2 && w->init.fan_out == 5 * 3 * 2,
                "w init kind %d fan_in %d fan_out %d, want Glorot 18, 30", (int)w->init.kind, w->init.fan_in, w->init.fan_out);
        t_check(bb->init.kind == CT_INIT_ZEROS, "b init kind %d, want zeros", (int)bb->init.kind);
    }
    conv2d_ids c;
    t_check(ct_conv2d_params_add(&c, &ps, "conv_1", &d, 1) != CT_OK, "registering conv_1 twice must fail");
    ct_params_free(&ps);
}

static void conv_dims_error(const char *what, int N, int C, int H, int W, int OC, int KH, int KW, int stride, int pad,
                            const char *must_mention)
{
    t_case("conv2d/dims_make rejects %s", what);
    conv2d_dims d;
    ct_status s = ct_conv2d_dims_make(&d, N, C, H, W, OC, KH, KW, stride, pad);
    t_check(s == CT_EINVAL, "status %d, want CT_EINVAL", (int)s);
    t_check(strstr(ct_last_error(), "conv2d") != NULL && strstr(ct_last_error(), must_mention) != NULL,
            "message \"%s\" should name the layer and mention \"%s\"", ct_last_error(), must_mention);
}

/* The hand-picked and the drawn gradient checks, with the lowering conv_algo. */
static void conv_gradchecks(void)
{
    /* hand-picked awkward shapes */
    conv_gradcheck(1, 3, 5, 7, 2, 3, 2, 2, 1, 1, 1);     /* N=1, odd sizes, non-square, stride 2, pad 1 */
    conv_gradcheck(2, 1, 6, 6, 3, 3, 3, 1, 2, 1, 2);     /* C=1, pad 2 (> kernel/2: whole rows of padding) */
    conv_gradcheck(2, 4, 4, 5, 3, 1, 1, 1, 0, 1, 3);     /* 1x1 pointwise fast path */
    conv_gradcheck(3, 2, 7, 5, 2, 1, 1, 2, 1, 0, 4);     /* 1x1 with stride and padding, no bias */
    conv_gradcheck(2, 2, 9, 8, 4, 5, 3, 3, 2, 1, 5);     /* stride 3, tall kernel */
    conv_gradcheck(1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 6);     /* 1x1 image */
    conv_gradcheck(1, 2, 2, 3, 2, 3, 4, 1, 1, 1, 7);     /* kernel bigger than the image, fits only with padding */
    conv_gradcheck(2, 3, 8, 8, 4, 3, 3, 1, 1, 0, 8);     /* the usual CNN block */
    conv_gradcheck(2, 3, 9, 11, 70, 3, 3, 1, 0, 1, 9);   /* 70 output channels: a second, partial panel of 64 */
    conv_gradcheck(2, 2, 6, 7, 3, 2, 3, 1, 0, 0, 10);    /* stride 1, no padding, 2x3: packed runs on wide positions */
    /* shapes drawn from a fixed seed */
    ct_rng r;
    ct_rng_seed(&r, 2024, 3);
    for (int k = 0; k < 6; k++) {
        int N, C, H, W, OC, KH, KW, s, p, bias;
        conv2d_dims d;
        do {
            N = 1 + (int)ct_rng_below(&r, 3); C = 1 + (int)ct_rng_below(&r, 4);
            H = 1 + (int)ct_rng_below(&r, 9); W = 1 + (int)ct_rng_below(&r, 9);
            OC = 1 + (int)ct_rng_below(&r, 4); KH = 1 + (int)ct_rng_below(&r, 4); KW = 1 + (int)ct_rng_below(&r, 4);
            s = 1 + (int)ct_rng_below(&r, 3); p = (int)ct_rng_below(&r, 3); bias = (int)ct_rng_below(&r, 2);
        } while (ct_conv2d_dims_make(&d, N, C, H, W, OC, KH, KW, s, p) != CT_OK);
        conv_gradcheck(N, C, H, W, OC, KH, KW, s, p, bias, 100 + (uint64_t)k);
    }
}

void suite_conv2d(void)
{
    /* im2col on cblas_sgemm and on the packed kernel (the same as cblas where the CPU lacks AVX-512) */
    conv_algo = ALGO_IM2COL;
    conv_gradchecks();
    conv_algo = ALGO_PACKED;
    conv_gradchecks();
    conv_parity("conv2d_3x3_s1_p1");
    conv_parity("conv2d_2x3_s2_p2_nobias");
    conv_parity("conv2d_1x1");
    conv_parity("conv2d_5x5_s3_p0");
    conv_parity("conv2d_c1_3x3_s1_p1");
    conv_conventions(3, 3, 1, 1);
    conv_conventions(1, 1, 1, 0);
    conv_conventions(2, 3, 2, 2);

    /* the Winograd lowering, forced on shapes dims_make would give to im2col */
    conv_algo = ALGO_WINOGRAD;
    conv_gradcheck(2, 3, 6, 7, 3, 3, 3, 1, 1, 1, 20);    /* odd output width: a half-empty last tile */
    conv_gradcheck(1, 2, 5, 5, 2, 3, 3, 1, 0, 0, 21);    /* no padding, odd output */
    conv_gradcheck(2, 2, 4, 9, 3, 3, 3, 1, 2, 1, 22);    /* padding 2: the input gradient's own padding is 0 */
    conv_gradcheck(3, 1, 1, 8, 2, 3, 3, 1, 1, 1, 23);    /* a one-row image */
    conv_parity("conv2d_3x3_s1_p1");
    conv_conventions(3, 3, 1, 1);
    conv_algo = ALGO_IM2COL;
    conv_parity("conv2d_3x3_s1_p1");
    conv_algo = ALGO_DEFAULT;
    conv_parity("conv2d_2x3_s2_p2_nobias");
    conv_parity("conv2d_1x1");
    conv_parity("conv2d_5x5_s3_p0");
    conv_algos_agree(128, 32, 26, 26, 64, 0, 30);         /* the mnist_cnn's second convolution: several chunks */
    conv_sums_threads();
    conv_algos_agree(5, 16, 9, 9, 8, 1, 31);
    conv_algos_agree(3, 8, 7, 12, 5, 2, 32);
    conv_algos_agree(1, 9, 3, 3, 4, 1, 33);               /* one image: one worker even with two threads */
    conv_algos_agree(7, 8, 40, 100, 16, 1, 34);           /* a log-mel-shaped input, one image per chunk */
    conv_algos_agree(2, 8, 5, 140, 4, 1, 35);             /* rows of more tiles than one transform block */
    conv_algos_agree(3, 5, 10, 13, 70, 1, 36);            /* 70 output channels: a partial second panel */

    conv_conventions(3, 3, 1, 1);
    conv_conventions(1, 1, 1, 0);
    conv_conventions(2, 3, 2, 2);

    /* one input channel, directly (conv2d_c1.c; skipped where ctrain's AVX-512 kernels do not run) */
    conv_c1_choice();
    conv_algo = ALGO_DIRECT1;
    if (direct1_available()) {
        conv_gradcheck(2, 1, 6, 6, 3, 3, 3, 1, 2, 1, 40);     /* padding 2 = kernel - 1 */
        conv_gradcheck(2, 1, 11, 40, 3, 3, 3, 1, 1, 1, 41);   /* rows of 16 + 16 + 8; 8 + 3 rows */
        conv_gradcheck(1, 1, 9, 17, 2, 5, 3, 1, 2, 0, 42);    /* 5x3, a row of 16 + 1, no bias */
        conv_gradcheck(3, 1, 5, 7, 2, 1, 1, 1, 0, 1, 43);     /* 1x1 */
        conv_gradcheck(2, 1, 8, 5, 2, 2, 4, 1, 1, 1, 44);     /* 2x4: even kernels, 8 rows in one block */
        conv_parity("conv2d_c1_3x3_s1_p1");                   /* 16 filters over 12 x 40 */
        conv_parity("conv2d_5x5_s3_p0");                      /* two channels, stride 3: im2col, as it must */
        conv_conventions(3, 3, 1, 1);
    }
    conv_algo = ALGO_DEFAULT;
    conv_c1_agree(7, 100, 40, 16, 3, 3, 1, 0, 45);            /* the siamese-cnn's first layer, 7 crops */
    conv_c1_agree(7, 100, 40, 16, 3, 3, 1, 1, 45);
    conv_c1_agree(5, 28, 28, 32, 3, 3, 0, 0, 46);             /* the mnist_cnn's first layer */
    conv_c1_agree(5, 28, 28, 32, 3, 3, 0, 1, 46);
    conv_c1_agree(3, 13, 33, 5, 7, 7, 3, 0, 47);              /* 7x7: taps in groups of 12 for dW */
    conv_c1_agree(3, 13, 33, 5, 7, 7, 3, 1, 47);
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        conv_c1_planes(7, 100, 40, 16, 3, 3, 1, bf16);        /* the siamese-cnn's first layer, 7 crops */
        conv_c1_planes(5, 13, 33, 5, 7, 7, 3, bf16);          /* 7x7: taps in groups of 12 */
        conv_c1_relu(6, 28, 28, 32, 3, 3, 0, bf16);           /* the mnist_cnn's first layer: 26 rows */
        conv_c1_relu(5, 13, 33, 5, 7, 7, 3, bf16);            /* 7x7 */
        conv_c1_relu(64, 100, 80, 16, 3, 3, 1, bf16);         /* 33 MB of output: streamed */
    }

    conv_pool(3, 8, 12, 12, 20, 0, 2);                        /* the mnist_cnn's second layer's form: every output pooled */
    conv_pool(2, 5, 13, 14, 70, 1, 3);                        /* padded (a copy of the image), 3x3 windows overlapping */

    for (int bf16 = 0; bf16 <= 1; bf16++) {
        conv_stats(3, 1, 13, 21, 5, ALGO_DIRECT1, bf16);      /* blocks of 8 + 5 rows, in place */
        conv_stats(3, 1, 13, 21, 5, ALGO_IM2COL, bf16);
        conv_stats(2, 16, 9, 10, 6, ALGO_IM2COL, bf16);       /* bf16: the direct path where it runs */
        conv_stats(2, 8, 9, 10, 6, bf16 ? ALGO_IM2COL : ALGO_PACKED, bf16);
    }
    conv_stats(2, 16, 9, 10, 6, ALGO_WINOGRAD, 0);
    conv_stats(64, 1, 100, 80, 16, ALGO_DIRECT1, 0);          /* 33 MB of output: streamed */

    conv_params();

    conv_dims_error("a kernel larger than the padded input", 1, 1, 3, 3, 1, 5, 3, 1, 0, "5x3");
    conv_dims_error("a kernel wider than the padded input", 1, 1, 8, 2, 1, 3, 5, 1, 1, "padded input 10x4");
    conv_dims_error("stride 0", 1, 1, 8, 8, 1, 3, 3, 0, 1, "stride 0");
    conv_dims_error("negative padding", 1, 1, 8, 8, 1, 3, 3, 1, -1, "padding -1");
    conv_dims_error("a zero-sized kernel", 1, 1, 8, 8, 1, 0, 3, 1, 0, "kernel 0x3");
    conv_dims_error("zero channels", 1, 0, 8, 8, 1, 3, 3, 1, 0, "input channels 0");
}
