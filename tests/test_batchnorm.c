/* test_batchnorm.c - tests of layers/batchnorm: finite-difference gradient checks in
 * train mode (the batch mean and variance depend on the input, and the check goes
 * through them), for HW = 1 (after a dense layer) and HW > 1 (conv features),
 * N = 1 and C = 1; PyTorch parity of one train step (output, gradients, and the
 * running statistics after the update) and of eval mode with the updated running
 * statistics (tests/golden/batchnorm_*.h5); channels shared by 2 and 3 workers
 * give the same bits as one; synchronised statistics over two replicas (threads standing
 * for ranks) equal the whole batch's; parameter registration; the one-pass statistics
 * against a two-pass reference in long double (a large mean, and a first sample far from
 * the rest); the streamed element-wise passes against the plain formula on every
 * instruction set, at aligned and unaligned addresses; batchnorm and the maxpool after it
 * as one kernel against the two layers.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/threads.h"
#include "io/h5.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/pool.h"
#include "layers/gemm_packed.h"

/* Tolerances.
 * Gradient check: batchnorm is smooth but not linear; with h = 5e-3 the central
 * difference has an O(h^2) truncation error plus float32 rounding / 2h:
 * observed <= 6e-5, tolerance 1e-3.
 * PyTorch parity: same formulas in float32 (ctrain accumulates the statistics in
 * double): observed <= 2e-7 on every tensor; tolerance 1e-5 for all, running
 * statistics included. */
#define BN_GC_H    5e-3f
#define BN_GC_TOL  1e-3
#define BN_PAR_TOL 1e-5

typedef struct {
    batchnorm_dims d;
    float *x, *gamma, *beta, *out, *xhat, *mean, *invstd, *rm, *rv, *r;
} bn_ctx;

static double bn_objective(void *p)
{
    bn_ctx *c = p;
    ct_batchnorm_forward(c->out, c->xhat, c->mean, c->invstd, c->rm, c->rv, c->x, c->gamma, c->beta, &c->d, 1);
    return t_dot(c->out, c->r, (size_t)c->d.N * c->d.C * c->d.HW);
}

static void bn_gradcheck(int N, int C, int HW, uint64_t seed)
{
    t_case("batchnorm/gradcheck train N=%d C=%d HW=%d", N, C, HW);
    bn_ctx c;
    c.d = (batchnorm_dims){ .N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f };
    size_t n = (size_t)N * C * HW;
    ct_rng r;
    ct_rng_seed(&r, seed, 8);
    c.x = t_alloc(n); c.out = t_alloc(n); c.xhat = t_alloc(n); c.r = t_alloc(n);
    c.gamma = t_alloc((size_t)C); c.beta = t_alloc((size_t)C); c.mean = t_alloc((size_t)C);
    c.invstd = t_alloc((size_t)C); c.rm = t_alloc((size_t)C); c.rv = t_alloc((size_t)C);
    t_fill_uniform(c.x, n, -1, 2, &r);
    t_fill_uniform(c.gamma, (size_t)C, 0.5f, 1.5f, &r);
    t_fill_uniform(c.beta, (size_t)C, -0.5f, 0.5f, &r);
    t_fill_uniform(c.r, n, -1, 1, &r);

    float *din = t_alloc(n), *dgamma = t_alloc((size_t)C), *dbeta = t_alloc((size_t)C);
    for (size_t i = 0; i < n; i++) din[i] = 3.0f;   /* must be overwritten */
    ct_batchnorm_forward(c.out, c.xhat, c.mean, c.invstd, c.rm, c.rv, c.x, c.gamma, c.beta, &c.d, 1);
    ct_batchnorm_backward(din, dgamma, dbeta, c.r, c.xhat, c.invstd, c.gamma, &c.d);
    t_gradcheck("din", bn_objective, &c, c.x, din, n, BN_GC_H, BN_GC_TOL, 300, 0);
    t_gradcheck("dgamma", bn_objective, &c, c.gamma, dgamma, (size_t)C, BN_GC_H, BN_GC_TOL, 0, 0);
    t_gradcheck("dbeta", bn_objective, &c, c.beta, dbeta, (size_t)C, BN_GC_H, BN_GC_TOL, 0, 0);
    free(c.x); free(c.out); free(c.xhat); free(c.r); free(c.gamma); free(c.beta); free(c.mean);
    free(c.invstd); free(c.rm); free(c.rv); free(din); free(dgamma); free(dbeta);
}

static void bn_parity(const char *file, const char *label)
{
    t_case("batchnorm/parity torch %s", label);
    char path[128];
    snprintf(path, sizeof path, "%s.h5", file);
    hid_t f = t_golden_open(path);
    if (f < 0) return;
    batchnorm_dims d = { .N = (int)t_golden_attr(f, "N"), .C = (int)t_golden_attr(f, "C"),
                         .HW = (int)t_golden_attr(f, "HW"), .eps = (float)t_golden_attr(f, "eps"),
                         .momentum = (float)t_golden_attr(f, "momentum") };
    if (!t_check(d.N > 0 && d.C > 0 && d.HW > 0, "bad sizes in %s", path)) { ct_h5_close(f); return; }
    size_t n = (size_t)d.N * d.C * d.HW, C = (size_t)d.C;
    float *x = t_golden(f, "x", n), *gamma = t_golden(f, "gamma", C), *beta = t_golden(f, "beta", C);
    float *rm = t_golden(f, "running_mean0", C), *rv = t_golden(f, "running_var0", C);
    float *out_ref = t_golden(f, "out", n), *dout = t_golden(f, "dout", n), *dx_ref = t_golden(f, "dx", n);
    float *dgamma_ref = t_golden(f, "dgamma", C), *dbeta_ref = t_golden(f, "dbeta", C);
    float *rm_ref = t_golden(f, "running_mean1", C), *rv_ref = t_golden(f, "running_var1", C);
    float *x_eval = t_golden(f, "x_eval", n), *out_eval_ref = t_golden(f, "out_eval", n);
    float *out = t_alloc(n), *xhat = t_alloc(n), *mean = t_alloc(C), *invstd = t_alloc(C);
    float *dx = t_alloc(n), *dgamma = t_alloc(C), *dbeta = t_alloc(C);
    for (size_t i = 0; i < n; i++) dx[i] = 7.0f;   /* must be overwritten */

    ct_batchnorm_forward(out, xhat, mean, invstd, rm, rv, x, gamma, beta, &d, 1);
    t_close("train out", out, out_ref, n, BN_PAR_TOL);
    t_close("running_mean after the step", rm, rm_ref, C, BN_PAR_TOL);
    t_close("running_var after the step", rv, rv_ref, C, BN_PAR_TOL);
    ct_batchnorm_backward(dx, dgamma, dbeta, dout, xhat, invstd, gamma, &d);
    t_close("dx", dx, dx_ref, n, BN_PAR_TOL);
    t_close("dgamma", dgamma, dgamma_ref, C, BN_PAR_TOL);
    t_close("dbeta", dbeta, dbeta_ref, C, BN_PAR_TOL);

    /* eval: the updated running statistics normalise, and stay as they are */
    ct_batchnorm_forward(out, xhat, mean, invstd, rm, rv, x_eval, gamma, beta, &d, 0);
    t_close("eval out", out, out_eval_ref, n, BN_PAR_TOL);
    t_close("running_mean unchanged by eval", rm, rm_ref, C, BN_PAR_TOL);
    t_close("running_var unchanged by eval", rv, rv_ref, C, BN_PAR_TOL);
    ct_h5_close(f);
    free(x); free(gamma); free(beta); free(rm); free(rv); free(out_ref); free(dout); free(dx_ref);
    free(dgamma_ref); free(dbeta_ref); free(rm_ref); free(rv_ref); free(x_eval); free(out_eval_ref);
    free(out); free(xhat); free(mean); free(invstd); free(dx); free(dgamma); free(dbeta);
}

/* dgamma, dbeta accumulate (two backward calls = twice one); din is overwritten. */
static void bn_conventions(void)
{
    t_case("batchnorm/backward overwrites din, accumulates dgamma dbeta");
    batchnorm_dims d = { .N = 3, .C = 2, .HW = 4, .eps = 1e-5f, .momentum = 0.1f };
    size_t n = 24;
    ct_rng r;
    ct_rng_seed(&r, 77, 2);
    float x[24], out[24], xhat[24], dout[24], din1[24], din2[24];
    float gamma[2] = { 0.7f, 1.3f }, beta[2] = { 0.1f, -0.2f }, mean[2], invstd[2], rm[2] = { 0, 0 }, rv[2] = { 1, 1 };
    float dg1[2] = { 0, 0 }, db1[2] = { 0, 0 }, dg2[2] = { 0, 0 }, db2[2] = { 0, 0 };
    t_fill_uniform(x, n, -1, 1, &r);
    t_fill_uniform(dout, n, -1, 1, &r);
    ct_batchnorm_forward(out, xhat, mean, invstd, rm, rv, x, gamma, beta, &d, 1);
    ct_batchnorm_backward(din1, dg1, db1, dout, xhat, invstd, gamma, &d);
    ct_batchnorm_backward(din2, dg2, db2, dout, xhat, invstd, gamma, &d);
    ct_batchnorm_backward(din2, dg2, db2, dout, xhat, invstd, gamma, &d);
    for (int c = 0; c < 2; c++) { dg1[c] *= 2; db1[c] *= 2; }
    t_close("din after two calls", din2, din1, n, 0.0);
    t_close("dgamma after two calls = 2 x one call", dg2, dg1, 2, 1e-6);
    t_close("dbeta after two calls = 2 x one call", db2, db1, 2, 1e-6);
}

static void bn_params(void)
{
    t_case("batchnorm/params_add names, stores, init");
    ct_params ps, bufs;
    ct_params_init(&ps);
    ct_params_init(&bufs);
    batchnorm_ids ids;
    t_check(ct_batchnorm_params_add(&ids, &ps, &bufs, "bn_1", 6) == CT_OK, "add: %s", ct_last_error());
    t_check(ps.n == 2 && bufs.n == 2, "%d trainable, %d buffers; want 2 and 2", ps.n, bufs.n);
    if (ps.n == 2 && bufs.n == 2 && ids.gamma >= 0 && ids.beta >= 0 && ids.running_mean >= 0 && ids.running_var >= 0) {
        const ct_param *g = &ps.p[ids.gamma], *b = &ps.p[ids.beta];
        const ct_param *m = &bufs.p[ids.running_mean], *v = &bufs.p[ids.running_var];
        t_check(!strcmp(g->name, "bn_1/gamma") && !strcmp(b->name, "bn_1/beta") &&
                !strcmp(m->name, "bn_1/running_mean") && !strcmp(v->name, "bn_1/running_var"),
                "names %s %s %s %s", g->name, b->name, m->name, v->name);
        t_check(g->ndim == 1 && g->shape[0] == 6 && b->shape[0] == 6 && m->shape[0] == 6 && v->shape[0] == 6,
                "shapes must all be [6]");
        t_check(g->init.kind == CT_INIT_CONST && g->init.value == 1.0f, "gamma init must be const 1");
        t_check(b->init.kind == CT_INIT_ZEROS, "beta init must be zeros");
        t_check(m->init.kind == CT_INIT_ZEROS, "running_mean init must be zeros");
        t_check(v->init.kind == CT_INIT_CONST && v->init.value == 1.0f, "running_var init must be const 1");
    }
    ct_params_free(&ps);
    ct_params_free(&bufs);
}

/* Forward (train) and backward with 1, 2 and 3 workers: each channel is computed
 * whole by one worker in the same order, so every output is bit-identical. */
static void bn_workers(void)
{
    const batchnorm_dims d = { .N = 3, .C = 5, .HW = 37, .eps = 1e-5f, .momentum = 0.1f };
    const size_t n = (size_t)d.N * d.C * d.HW;
    ct_rng r;
    ct_rng_seed(&r, 5, 9);
    float *x = t_alloc(n), *dout = t_alloc(n), *g = t_alloc(5), *b = t_alloc(5);
    t_fill_uniform(x, n, -2, 3, &r); t_fill_uniform(dout, n, -1, 1, &r);
    t_fill_uniform(g, 5, 0.5f, 1.5f, &r); t_fill_uniform(b, 5, -0.5f, 0.5f, &r);
    float *ref = NULL;
    size_t per = 2 * n + 6 * 5;   /* out, din, mean, invstd, running mean and var, dgamma, dbeta */
    for (int threads = 1; threads <= 3; threads++) {
        if (threads > 1) t_case("batchnorm/%d workers give the same bits as one (N=3 C=5 HW=37)", threads);
        float *o = t_alloc(per), *xhat = t_alloc(n);
        float *out = o, *din = o + n, *mean = din + n, *invstd = mean + 5, *rm = invstd + 5, *rv = rm + 5;
        float *dg = rv + 5, *db = dg + 5;
        for (int c = 0; c < 5; c++) rv[c] = 1.0f;
        ct_threads_set(threads);
        ct_batchnorm_forward(out, xhat, mean, invstd, rm, rv, x, g, b, &d, 1);
        ct_batchnorm_backward(din, dg, db, dout, xhat, invstd, g, &d);
        ct_threads_set(1);
        if (!ref) ref = o;
        else { t_check(memcmp(o, ref, per * sizeof *o) == 0, "results differ from one worker's"); free(o); }
        free(xhat);
    }
    free(ref); free(x); free(dout); free(g); free(b);
}

/* ---- synchronised batchnorm (ct_replica_sum) ----
 * Two threads stand for two ranks: each normalises its rows of one batch, and the sum
 * over the "replicas" goes through a barrier and a shared buffer. */
typedef struct {
    pthread_barrier_t bar;
    double buf[2][64];
} fake_replicas;

typedef struct {
    fake_replicas *all;
    int id;
    ct_replica_sum rs;
    batchnorm_dims d;
    const float *x, *dout, *gamma, *beta;
    float *out, *xhat, *mean, *invstd, *rmean, *rvar, *din, *dgamma, *dbeta;
} replica_job;

static int fake_sum(void *ctx, double *buf, int n)
{
    replica_job *j = ctx;
    memcpy(j->all->buf[j->id], buf, (size_t)n * sizeof *buf);
    pthread_barrier_wait(&j->all->bar);
    for (int i = 0; i < n; i++) buf[i] = j->all->buf[0][i] + j->all->buf[1][i];
    pthread_barrier_wait(&j->all->bar);   /* nobody writes the next sum before both have read this one */
    return 0;
}

static void *replica_main(void *arg)
{
    replica_job *j = arg;
    ct_batchnorm_forward(j->out, j->xhat, j->mean, j->invstd, j->rmean, j->rvar, j->x, j->gamma, j->beta, &j->d, 1);
    ct_batchnorm_backward(j->din, j->dgamma, j->dbeta, j->dout, j->xhat, j->invstd, j->gamma, &j->d);
    return NULL;
}

static void bn_synced(void)
{
    t_case("batchnorm/synchronised over 2 replicas of 2 and 3 rows = one batch of 5 (forward, running statistics, backward)");
    enum { N = 5, C = 3, HW = 7, L = N * C * HW };
    const int lo[2] = { 0, 2 }, hi[2] = { 2, 5 };
    ct_rng r;
    ct_rng_seed(&r, 31, 1);
    float x[L], dout[L], gamma[C], beta[C], out[L], xhat[L], mean[C], invstd[C], rmean[C], rvar[C], din[L], dg[C] = { 0 }, db[C] = { 0 };
    t_fill_uniform(x, L, -2, 3, &r);
    t_fill_uniform(dout, L, -1, 1, &r);
    t_fill_uniform(gamma, C, 0.5f, 1.5f, &r);
    t_fill_uniform(beta, C, -0.5f, 0.5f, &r);
    for (int c = 0; c < C; c++) { rmean[c] = 0.1f; rvar[c] = 0.9f; }
    batchnorm_dims d = { .N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f };
    ct_batchnorm_forward(out, xhat, mean, invstd, rmean, rvar, x, gamma, beta, &d, 1);   /* the whole batch */
    ct_batchnorm_backward(din, dg, db, dout, xhat, invstd, gamma, &d);

    fake_replicas all;
    pthread_barrier_init(&all.bar, NULL, 2);
    static float p_out[L], p_xhat[L], p_din[L], p_dout[L];
    float p_mean[2][C], p_invstd[2][C], p_rmean[2][C], p_rvar[2][C], p_dg[2][C], p_db[2][C];
    replica_job job[2];
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        size_t off = (size_t)lo[k] * C * HW;
        int n = hi[k] - lo[k];
        double share = (double)n / N;
        /* each replica's dout is the gradient of its own rows' mean loss: the whole batch's times N / n */
        for (size_t i = off; i < (size_t)hi[k] * C * HW; i++) p_dout[i] = dout[i] / (float)share;
        for (int c = 0; c < C; c++) { p_rmean[k][c] = 0.1f; p_rvar[k][c] = 0.9f; p_dg[k][c] = p_db[k][c] = 0; }
        job[k] = (replica_job){ .all = &all, .id = k, .rs = { .sum = fake_sum, .total_N = N, .share = share },
                                .d = { .N = n, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f },
                                .x = x + off, .dout = p_dout + off, .gamma = gamma, .beta = beta, .out = p_out + off,
                                .xhat = p_xhat + off, .mean = p_mean[k], .invstd = p_invstd[k], .rmean = p_rmean[k],
                                .rvar = p_rvar[k], .din = p_din + off, .dgamma = p_dg[k], .dbeta = p_db[k] };
        job[k].rs.ctx = &job[k];
        job[k].d.sync = &job[k].rs;
    }
    for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, replica_main, &job[k]);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&all.bar);
    t_close("out", p_out, out, L, 1e-5);
    for (int k = 0; k < 2; k++) {
        t_close("running mean", p_rmean[k], rmean, C, 1e-5);
        t_close("running var", p_rvar[k], rvar, C, 1e-5);
        /* din of a replica's own loss = the whole batch's din times N / n */
        float want[L];
        for (int i = lo[k] * C * HW; i < hi[k] * C * HW; i++) want[i] = din[i] * (float)N / (hi[k] - lo[k]);
        t_close("din", p_din + lo[k] * C * HW, want + lo[k] * C * HW, (size_t)(hi[k] - lo[k]) * C * HW, 1e-5);
    }
    float sum_dg[C], sum_db[C];   /* the gradient all-reduce: sum of share x each replica's own */
    for (int c = 0; c < C; c++) {
        sum_dg[c] = (float)(0.4 * p_dg[0][c] + 0.6 * p_dg[1][c]);
        sum_db[c] = (float)(0.4 * p_db[0][c] + 0.6 * p_db[1][c]);
    }
    t_close("dgamma", sum_dg, dg, C, 1e-5);
    t_close("dbeta", sum_db, db, C, 1e-5);
}

/* What the GPU suite's synchronised case stands on: R replicas holding the same rows are
 * one batch of R copies of them, so a sum over the replicas that multiplies by R gives the
 * statistics and gradients of that batch. */
static int times_three(void *ctx, double *buf, int n)
{
    (void)ctx;
    for (int i = 0; i < n; i++) buf[i] *= 3.0;
    return 0;
}

static void bn_synced_copies(int N, int C, int HW)
{
    t_case("batchnorm/synchronised over 3 replicas holding the same rows = one batch of the 3 copies (N=%d C=%d HW=%d)", N, C, HW);
    const size_t L = (size_t)N * C * HW;
    ct_rng r;
    ct_rng_seed(&r, 41, 1);
    float *x3 = t_alloc(3 * L), *dout3 = t_alloc(3 * L), *out3 = t_alloc(3 * L), *xhat3 = t_alloc(3 * L), *din3 = t_alloc(3 * L);
    float *x = t_alloc(L), *dout = t_alloc(L), *out = t_alloc(L), *xhat = t_alloc(L), *din = t_alloc(L);
    float *gamma = t_alloc(C), *beta = t_alloc(C), *mean = t_alloc(C), *invstd = t_alloc(C), *rmean = t_alloc(C), *rvar = t_alloc(C);
    float *mean3 = t_alloc(C), *invstd3 = t_alloc(C), *rmean3 = t_alloc(C), *rvar3 = t_alloc(C);
    float *dg = t_alloc(C), *db = t_alloc(C), *dg3 = t_alloc(C), *db3 = t_alloc(C);
    t_fill_uniform(x, L, -2, 3, &r);
    t_fill_uniform(dout, L, -1, 1, &r);
    t_fill_uniform(gamma, C, 0.5f, 1.5f, &r);
    t_fill_uniform(beta, C, -0.5f, 0.5f, &r);
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < L; i++) { x3[k * L + i] = x[i]; dout3[k * L + i] = dout[i] / 3.0f; }   /* the whole batch's mean loss */
    for (int c = 0; c < C; c++) { rmean[c] = rmean3[c] = 0.1f; rvar[c] = rvar3[c] = 0.9f; dg[c] = db[c] = dg3[c] = db3[c] = 0; }
    batchnorm_dims d3 = { .N = 3 * N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f };
    ct_batchnorm_forward(out3, xhat3, mean3, invstd3, rmean3, rvar3, x3, gamma, beta, &d3, 1);
    ct_batchnorm_backward(din3, dg3, db3, dout3, xhat3, invstd3, gamma, &d3);
    ct_replica_sum rs = { .sum = times_three, .ctx = NULL, .total_N = 3 * N, .share = 1.0 / 3.0 };
    batchnorm_dims d = { .N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .sync = &rs };
    ct_batchnorm_forward(out, xhat, mean, invstd, rmean, rvar, x, gamma, beta, &d, 1);
    ct_batchnorm_backward(din, dg, db, dout, xhat, invstd, gamma, &d);
    t_close("out", out, out3, L, 1e-6);
    t_close("mean", mean, mean3, C, 1e-6);
    t_close("invstd", invstd, invstd3, C, 1e-6);
    t_close("running mean", rmean, rmean3, C, 1e-6);
    t_close("running var", rvar, rvar3, C, 1e-6);
    for (size_t i = 0; i < L; i++) din[i] /= 3.0f;   /* a replica's din is for its own rows' mean loss */
    t_close("din", din, din3, L, 1e-5);
    t_close("dgamma (3 replicas x share 1/3 x own)", dg, dg3, C, 1e-5);
    t_close("dbeta", db, db3, C, 1e-5);
    float *all[] = { x3, dout3, out3, xhat3, din3, x, dout, out, xhat, din, gamma, beta, mean, invstd, rmean, rvar,
                     mean3, invstd3, rmean3, rvar3, dg, db, dg3, db3 };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* |a - b| in units of float's spacing at b (b > 0 or < 0, not 0) */
static double ulps(float a, double b)
{
    int e;
    frexp(b, &e);
    return fabs((double)a - b) / ldexp(1.0, e - 24);
}

/* The statistics are taken plane by plane and merged (layers/batchnorm.c). Against a
 * two-pass reference in long double, the float mean, inverse deviation and running variance
 * are within one unit in the last place (batchnorm.c derives an error far below one before
 * the rounding to float). far = 0: values 100000 + U(-1, 1), where sums about 0 would lose
 * the variance's digits; far = 1: sample 0 at 100 + U(-1, 1) and the rest U(-1, 1), N = 64,
 * so that one plane's mean is 8 deviations from the batch's. */
static void bn_one_pass(int far)
{
    const int N = 64, C = 3, HW = 257;
    t_case("batchnorm/statistics plane by plane: mean, 1/sqrt(var + eps), running variance within 1 ulp of a two-pass "
           "long-double reference (%s)", far ? "first sample 8 deviations from the mean" : "mean 100000, deviation 0.58");
    const size_t n = (size_t)N * C * HW, M = (size_t)N * HW;
    batchnorm_dims d = { .N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f };
    ct_rng r;
    ct_rng_seed(&r, 11, (uint64_t)far);
    float *x = t_alloc(n), *out = t_alloc(n), *xhat = t_alloc(n), *g = t_alloc(C), *b = t_alloc(C);
    float mean[3], invstd[3], rm[3] = { 0 }, rv[3] = { 1, 1, 1 };
    t_fill_uniform(x, n, -1, 1, &r);
    for (size_t i = 0; i < n; i++)
        if (!far) x[i] += 100000.0f;
        else if (i < (size_t)C * HW) x[i] += 100.0f;    /* sample 0, every channel */
    for (int c = 0; c < C; c++) { g[c] = 1.0f; b[c] = 0.0f; }
    ct_batchnorm_forward(out, xhat, mean, invstd, rm, rv, x, g, b, &d, 1);
    double worst = 0.0;
    for (int c = 0; c < C; c++) {
        long double s = 0.0L, ss = 0.0L;
        for (int k = 0; k < N; k++) for (int i = 0; i < HW; i++) s += x[((size_t)k * C + c) * HW + i];
        const long double m = s / (long double)M;
        for (int k = 0; k < N; k++) for (int i = 0; i < HW; i++) {
            const long double t = x[((size_t)k * C + c) * HW + i] - m;
            ss += t * t;
        }
        const double want_is = (double)(1.0L / sqrtl(ss / (long double)M + (long double)d.eps));
        const double want_rv = (double)(0.9L + 0.1L * (ss / (long double)(M - 1)));
        const double e[3] = { ulps(mean[c], (double)m), ulps(invstd[c], want_is), ulps(rv[c], want_rv) };
        for (int k = 0; k < 3; k++) if (e[k] > worst) worst = e[k];
    }
    t_check(worst <= 1.0, "statistics off by %.2f ulp (tolerance 1)", worst);
    free(x); free(out); free(xhat); free(g); free(b);
}

/* A batchnorm handed its input's planes' statistics (batchnorm_dims.plane_stats, as a
 * convolution right before it takes them with ct_batchnorm_plane_stats) gives the bits it
 * makes reading its input itself: out, xhat, mean, invstd and the running statistics, and
 * with the maxpool after it the pooled map and argmax, on 1 and 3 workers. Planes taken as
 * blocks of rows (ct_bn_stats_add per block, as the one-channel convolution does) give a
 * mean, inverse deviation and running variance within 1 ulp of those (batchnorm.c's bound
 * is far below float's rounding). Values 50 + U(-1, 3): a mean far from 0. */
static void bn_plane_stats(int N, int C, int H, int W, int threads)
{
    t_case("batchnorm/statistics from the planes' statistics handed over = taken here, bit for bit; blocks of rows "
           "within 1 ulp (N=%d C=%d %dx%d, %d workers)", N, C, H, W, threads);
    const int HW = H * W, saved = ct_threads_get();
    const size_t n = (size_t)N * C * HW, planes = (size_t)N * C;
    ct_threads_set(threads);
    batchnorm_dims d = { .N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f }, dh = d, db = d;
    maxpool2d_dims pd;
    ct_maxpool2d_dims_make(&pd, N, C, H, W, 2, 2);
    const size_t np = (size_t)N * C * pd.OH * pd.OW;
    ct_rng r;
    ct_rng_seed(&r, 13, (uint64_t)(N * C + HW));
    float *x = t_alloc(n), *g = t_alloc(C), *b = t_alloc(C);
    t_fill_uniform(x, n, 49, 53, &r);
    t_fill_uniform(g, C, 0.5f, 1.5f, &r);
    t_fill_uniform(b, C, -0.5f, 0.5f, &r);
    double *whole = calloc(2 * planes, sizeof *whole), *blocks = calloc(2 * planes, sizeof *blocks);
    for (size_t pl = 0; pl < planes; pl++) {
        ct_batchnorm_plane_stats(whole + 2 * pl, x + pl * HW, HW);
        ct_bn_stats a = { 0 };
        for (int y = 0; y < H; y += 3) ct_bn_stats_add(&a, x + pl * HW + (size_t)y * W, (H - y < 3 ? H - y : 3) * W);
        blocks[2 * pl] = a.mean;
        blocks[2 * pl + 1] = a.ss;
    }
    dh.plane_stats = whole;
    db.plane_stats = blocks;
    int bad = 0;
    /* [0] read here, [1] handed over, [2] handed over by blocks */
    float *out[3], *xh[3], *pooled[3], mean[3][8], is[3][8], rm[3][8], rv[3][8];
    int *am[3];
    const batchnorm_dims *dd[3] = { &d, &dh, &db };
    for (int k = 0; k < 3; k++) {
        out[k] = t_alloc(n); xh[k] = t_alloc(n); pooled[k] = t_alloc(np);
        am[k] = calloc(np, sizeof(int));
        for (int c = 0; c < C; c++) { rm[k][c] = 0.1f; rv[k][c] = 0.9f; }
        ct_batchnorm_forward(out[k], xh[k], mean[k], is[k], rm[k], rv[k], x, g, b, dd[k], 1);
        float pm[8], pis[8], prm[8], prv[8];
        for (int c = 0; c < C; c++) { prm[c] = 0.1f; prv[c] = 0.9f; }
        ct_batchnorm_maxpool_forward(pooled[k], am[k], pm, pis, prm, prv, x, g, b, dd[k], &pd, 0, 1);
        bad += memcmp(pm, mean[k], C * sizeof *pm) || memcmp(pis, is[k], C * sizeof *pis) ||
               memcmp(prm, rm[k], C * sizeof *prm) || memcmp(prv, rv[k], C * sizeof *prv);
    }
    bad += memcmp(out[0], out[1], n * sizeof(float)) || memcmp(xh[0], xh[1], n * sizeof(float)) ||
           memcmp(mean[0], mean[1], C * sizeof(float)) || memcmp(is[0], is[1], C * sizeof(float)) ||
           memcmp(rm[0], rm[1], C * sizeof(float)) || memcmp(rv[0], rv[1], C * sizeof(float)) ||
           memcmp(pooled[0], pooled[1], np * sizeof(float)) || memcmp(am[0], am[1], np * sizeof(int));
    t_check(bad == 0, "%d results differ from the batchnorm's own statistics", bad);
    double worst = 0.0;
    for (int c = 0; c < C; c++) {
        const double e[3] = { ulps(mean[2][c], mean[0][c]), ulps(is[2][c], is[0][c]), ulps(rv[2][c], rv[0][c]) };
        for (int k = 0; k < 3; k++) if (e[k] > worst) worst = e[k];
    }
    t_check(worst <= 1.0, "statistics from blocks of rows off by %.2f ulp (tolerance 1)", worst);
    /* and they are what it uses: every plane's mean handed over 1 higher moves the mean by 1 */
    for (size_t pl = 0; pl < planes; pl++) whole[2 * pl] += 1.0;
    float m1[8], is1[8], rm1[8] = { 0 }, rv1[8] = { 0 };
    ct_batchnorm_forward(out[1], xh[1], m1, is1, rm1, rv1, x, g, b, &dh, 1);
    worst = 0.0;
    for (int c = 0; c < C; c++) {
        const double e = ulps(m1[c], (double)mean[0][c] + 1.0);
        if (e > worst) worst = e;
    }
    t_check(worst <= 1.0, "with every plane's mean handed over 1 higher, the mean is off from mean + 1 by %.2f ulp", worst);
    for (int k = 0; k < 3; k++) { free(out[k]); free(xh[k]); free(pooled[k]); free(am[k]); }
    free(x); free(g); free(b); free(whole); free(blocks);
    ct_threads_set(saved);
}

/* The element-wise passes stream their outputs with AVX-512 or SSE, with plain stores
 * before the first aligned address and after the last full vector. On every instruction
 * set this CPU runs, at run lengths 1, 37 and 1000 and at arrays starting 0 to 3 floats
 * past a 64-byte boundary: out is the plain formula gamma ((x - mu) invstd) + beta bit for
 * bit with the returned statistics, eval mode likewise with the running ones, and every
 * set gives the first set's bits for out, xhat and din. */
static void bn_streamed(void)
{
    t_case("batchnorm/streamed passes: the plain formula bit for bit, the same bits on every instruction set, "
           "runs of 1, 37 and 1000 at any alignment");
    const int N = 3, C = 2, lens[3] = { 1, 37, 1000 };
    const ct_kernels saved = ct_kernels_set(ct_kernels_get());
    int bad = 0, sets = 0;
    for (int li = 0; li < 3; li++)
        for (int shift = 0; shift < 4; shift++) {
            const int HW = lens[li];
            const size_t n = (size_t)N * C * HW;
            batchnorm_dims d = { .N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f };
            ct_rng r;
            ct_rng_seed(&r, 12, (uint64_t)(li * 4 + shift));
            float *xa = t_alloc(n + 4), *dya = t_alloc(n + 4), *g = t_alloc(C), *b = t_alloc(C);
            float *x = xa + shift, *dy = dya + shift;
            t_fill_uniform(x, n, -2, 3, &r);
            t_fill_uniform(dy, n, -1, 1, &r);
            t_fill_uniform(g, C, 0.5f, 1.5f, &r);
            t_fill_uniform(b, C, -0.5f, 0.5f, &r);
            float *first = NULL;
            sets = 0;
            for (int k = CT_KERNELS_BLAS; k <= (int)ct_kernels_cpu(); k++) {
                ct_kernels_set((ct_kernels)k);
                sets++;
                float *buf = t_alloc(4 * (n + 4)), *out = buf + shift, *xhat = buf + (n + 4) + shift;
                float *din = buf + 2 * (n + 4) + shift, *eout = buf + 3 * (n + 4) + shift;
                float mean[2], invstd[2], rm[2] = { 0.1f, -0.2f }, rv[2] = { 0.7f, 1.3f }, dg[2] = { 0 }, db[2] = { 0 };
                ct_batchnorm_forward(out, xhat, mean, invstd, rm, rv, x, g, b, &d, 1);
                ct_batchnorm_backward(din, dg, db, dy, xhat, invstd, g, &d);
                float em[2], eis[2], exh;
                float *exhat = t_alloc(n);
                ct_batchnorm_forward(eout, exhat, em, eis, rm, rv, x, g, b, &d, 0);
                for (int c = 0; c < C; c++)
                    for (int s2 = 0; s2 < N; s2++)
                        for (int i = 0; i < HW; i++) {
                            const size_t o = ((size_t)s2 * C + c) * HW + i;
                            const float h = (x[o] - mean[c]) * invstd[c];
                            const float y = g[c] * h + b[c];
                            exh = (x[o] - em[c]) * eis[c];
                            const float ey = g[c] * exh + b[c];
                            if (memcmp(&h, &xhat[o], 4) || memcmp(&y, &out[o], 4) || memcmp(&ey, &eout[o], 4)) bad++;
                        }
                free(exhat);
                if (!first) first = buf;
                else {
                    if (memcmp(first, buf, 4 * (n + 4) * sizeof *buf)) bad++;
                    free(buf);
                }
            }
            free(first); free(xa); free(dya); free(g); free(b);
        }
    ct_kernels_set(saved);
    t_check(bad == 0, "%d runs or elements differ (%d instruction sets)", bad, sets);
}

/* The chain's backward keeps each channel's sums of g and g xhat in double (sums [N + 1, C, 2],
 * the channels' last): they must be those of the order batchnorm.c documents, the channel's
 * running sum over n of each plane's total, a plane taken in 32 lanes (position i in lane i % 32,
 * each lane's terms in the order of i) added as a tree. Compared in double, where a term added
 * in another order shows (the float results round most of it away). g, xh [N, C, HW]. */
static int chain_sums_differ(const double *sums, const float *g, const float *xh, int N, int C, int HW)
{
    int bad = 0;
    for (int c = 0; c < C; c++) {
        double sd = 0.0, sdx = 0.0;
        for (int n = 0; n < N; n++) {
            const float *gp = g + ((size_t)n * C + c) * HW, *hp = xh + ((size_t)n * C + c) * HW;
            double a[32] = { 0 }, b[32] = { 0 };
            for (int i = 0; i < HW; i++) { a[i % 32] += gp[i]; b[i % 32] += (double)gp[i] * hp[i]; }
            for (int w = 16; w >= 1; w /= 2)
                for (int k = 0; k < w; k++) { a[k] += a[k + w]; b[k] += b[k + w]; }
            sd += a[0];
            sdx += b[0];
        }
        const double *ch = sums + 2 * ((size_t)N * C + c);
        bad += ch[0] != sd || ch[1] != sdx;
    }
    return bad;
}

/* ct_batchnorm_maxpool_forward/_backward against ct_batchnorm_forward + ct_maxpool2d_forward
 * (+ ct_relu_forward on the pooled map, relu = 1) and (ct_relu_backward +)
 * ct_maxpool2d_backward + ct_batchnorm_backward: pooled values, argmax (-1 where the relu
 * zeroed the window), the statistics, din, dgamma and dbeta bit for bit (the pair's backward
 * remaking xhat from x), in train and eval mode, on 1 to 3 workers, for 2x2 windows over odd
 * maps (a column no window covers) and overlapping 3x3 windows of stride 1; din made a plane
 * at a time (ct_batchnorm_maxpool_din_plane, from the sums the backward kept) too, in any
 * order; and which pairs it refuses. */
static void bn_pool_case(int N, int C, int H, int W, int K, int stride, int relu, int threads)
{
    t_case("batchnorm/with the maxpool after it%s as one = the layers bit for bit (N=%d C=%d %dx%d, window %d stride %d, "
           "%d workers)", relu ? " and a relu" : "", N, C, H, W, K, stride, threads);
    const batchnorm_dims d = { .N = N, .C = C, .HW = H * W, .eps = 1e-5f, .momentum = 0.1f };
    maxpool2d_dims pd;
    if (!t_check(ct_maxpool2d_dims_make(&pd, N, C, H, W, K, stride) == CT_OK, "dims")) return;
    if (!t_check(ct_batchnorm_maxpool_fits(&d, &pd), "the pair should fit")) return;
    const size_t n = (size_t)N * C * H * W, np = (size_t)N * C * pd.OH * pd.OW;
    ct_rng r;
    ct_rng_seed(&r, 13, (uint64_t)(K * 10 + threads + 100 * relu));
    float *x = t_alloc(n), *dp = t_alloc(np), *g = t_alloc(C), *b = t_alloc(C);
    double *sums = malloc(ct_batchnorm_chain_sums_doubles(&d) * sizeof *sums);   /* exact size: the sanitizer sees overruns */
    t_fill_uniform(x, n, -2, 3, &r);
    t_fill_uniform(dp, np, -1, 1, &r);
    /* magnitudes from 2^-11 to 2^11: the sums in double round, so a term added in another order shows */
    for (size_t k = 0; k < np; k++) dp[k] = ldexpf(dp[k], (int)(k * 7 % 23) - 11);
    t_fill_uniform(g, C, -1.5f, 1.5f, &r);   /* negative gamma: the pool's maximum is not at x's maximum */
    if (relu) t_fill_uniform(b, C, -2.5f, -1.0f, &r);   /* so that the relu zeroes some windows' maxima */
    else      t_fill_uniform(b, C, -0.5f, 0.5f, &r);
    ct_threads_set(threads);
    int bad = 0, zeroed = 0;
    for (int train = 1; train >= 0; train--) {
        /* [0]: the layers; [1]: as one */
        float *y = t_alloc(n), *din[2], *xh[2], *pool[2], st[2][6][8] = { { { 0 } } };
        int *am[2];
        for (int k = 0; k < 2; k++) {
            din[k] = t_alloc(n); xh[k] = t_alloc(n); pool[k] = t_alloc(np);
            am[k] = calloc(np, sizeof(int));
            for (int c = 0; c < C; c++) { st[k][0][c] = st[k][1][c] = st[k][4][c] = st[k][5][c] = 0; st[k][2][c] = 0.3f; st[k][3][c] = 1.2f; }
        }
        /* st[k]: mean, invstd, running mean, running var, dgamma, dbeta */
        ct_batchnorm_forward(y, xh[0], st[0][0], st[0][1], st[0][2], st[0][3], x, g, b, &d, train);
        ct_maxpool2d_forward(pool[0], am[0], y, &pd);
        if (relu) ct_relu_forward(pool[0], pool[0], np);
        ct_batchnorm_maxpool_forward(pool[1], am[1], st[1][0], st[1][1], st[1][2], st[1][3], x, g, b, &d, &pd, relu, train);
        float *dq = t_alloc(np);   /* the gradient at the pool's output: the relu's backward first */
        if (relu) ct_relu_backward(dq, dp, pool[0], np);
        else memcpy(dq, dp, np * sizeof *dq);
        if (train) {
            ct_maxpool2d_backward(y, dq, am[0], &pd);
            ct_batchnorm_backward(din[0], st[0][4], st[0][5], y, xh[0], st[0][1], g, &d);
            ct_batchnorm_maxpool_backward(din[1], st[1][4], st[1][5], sums, dp, am[1], x, st[1][0], st[1][1], g, &d, &pd);
            bad += chain_sums_differ(sums, y, xh[0], N, C, H * W);
        }
        bad += memcmp(pool[0], pool[1], np * sizeof(float)) != 0;
        for (size_t k = 0; k < np; k++) {
            const int want = relu && !(pool[0][k] > 0.0f) ? -1 : am[0][k];
            bad += am[1][k] != want;
            zeroed += want < 0;
        }
        bad += memcmp(din[0], din[1], n * sizeof(float)) != 0;
        bad += memcmp(st[0], st[1], sizeof st[0]) != 0;
        if (train) {   /* without din: the same parameter gradients added once more, and din plane by plane */
            ct_batchnorm_maxpool_backward(NULL, st[1][4], st[1][5], sums, dp, am[1], x, st[1][0], st[1][1], g, &d, &pd);
            ct_batchnorm_backward(NULL, st[0][4], st[0][5], y, xh[0], st[0][1], g, &d);
            bad += memcmp(st[0][4], st[1][4], sizeof st[0][4]) != 0 || memcmp(st[0][5], st[1][5], sizeof st[0][5]) != 0;
            const ct_bn_pool_din src = { .dpooled = dp, .argmax = am[1], .in = x, .mean = st[1][0], .invstd = st[1][1],
                                         .gamma = g, .sums = sums, .d = &d, .pd = &pd };
            float *plane = t_alloc((size_t)H * W);
            for (int i = 0; i < N; i++)   /* the images backwards, and each image's channels backwards */
                for (int c = C - 1; c >= 0; c--) {
                    ct_batchnorm_maxpool_din_plane(&src, plane, N - 1 - i, c);
                    bad += memcmp(plane, din[0] + ((size_t)(N - 1 - i) * C + c) * H * W, (size_t)H * W * sizeof *plane) != 0;
                }
            free(plane);
        }
        for (int k = 0; k < 2; k++) { free(din[k]); free(xh[k]); free(pool[k]); free(am[k]); }
        free(y); free(dq);
    }
    ct_threads_set(1);
    t_check(bad == 0, "%d of the outputs differ", bad);
    if (relu) t_check(zeroed > 0, "the relu should zero some windows");
    free(x); free(dp); free(g); free(b); free(sums);
}

static void bn_pool_refusals(void)
{
    t_case("batchnorm/with the maxpool after it: refused with synchronised statistics, another map's pool, planes over 8,192");
    batchnorm_dims d = { .N = 2, .C = 3, .HW = 20, .eps = 1e-5f, .momentum = 0.1f };
    maxpool2d_dims pd, other, big, edge;
    ct_replica_sum rs = { 0 };
    ct_maxpool2d_dims_make(&pd, 2, 3, 4, 5, 2, 2);
    ct_maxpool2d_dims_make(&other, 2, 3, 5, 5, 2, 2);
    ct_maxpool2d_dims_make(&big, 2, 3, 91, 91, 2, 2);     /* 8,281 values */
    ct_maxpool2d_dims_make(&edge, 2, 3, 64, 128, 2, 2);   /* 8,192: the largest that fits */
    batchnorm_dims dbig = d, dedge = d;
    dbig.HW = 91 * 91;
    dedge.HW = 64 * 128;
    t_check(ct_batchnorm_maxpool_fits(&d, &pd), "a plain pair should fit");
    t_check(ct_batchnorm_maxpool_fits(&dedge, &edge), "a 64x128 plane should fit");
    t_check(!ct_batchnorm_maxpool_fits(&d, &other), "a pool over other maps fits");
    t_check(!ct_batchnorm_maxpool_fits(&dbig, &big), "a 91x91 plane fits");
    d.sync = &rs;
    t_check(!ct_batchnorm_maxpool_fits(&d, &pd), "synchronised statistics fit");
}

/* ct_batchnorm_avgpool_h_forward/_backward against the layers one by one: ct_batchnorm_forward,
 * ct_relu_forward (relu = 1), then ct_avgpool_h_forward, or ct_global_avgpool_forward for gap
 * (the chain's plane read as [HW, 1]); backward the same in reverse. Pooled values, the
 * statistics, din (and without din), dgamma and dbeta bit for bit, in train and eval mode,
 * on 1 to 3 workers. */
static void bn_avg_case(int N, int C, int H, int W, int relu, int gap, int threads)
{
    t_case("batchnorm/with %sthe mean over %s after it as one = the layers bit for bit (N=%d C=%d %dx%d, %d workers)",
           relu ? "a relu and " : "", gap ? "the plane (gap)" : "H (gaph)", N, C, H, W, threads);
    const batchnorm_dims d = { .N = N, .C = C, .HW = H * W, .eps = 1e-5f, .momentum = 0.1f };
    const int PH = gap ? H * W : H, PW = gap ? 1 : W;   /* the plane as the kernel pools it */
    if (!t_check(ct_batchnorm_avgpool_h_fits(&d, PH, PW), "the chain should fit")) return;
    const size_t n = (size_t)N * C * H * W, np = (size_t)N * C * PW;
    ct_rng r;
    ct_rng_seed(&r, 14, (uint64_t)(relu * 4 + gap * 2 + threads));
    float *x = t_alloc(n), *dp = t_alloc(np), *g = t_alloc(C), *b = t_alloc(C);
    double *sums = malloc(ct_batchnorm_chain_sums_doubles(&d) * sizeof *sums);   /* exact size: the sanitizer sees overruns */
    t_fill_uniform(x, n, -2, 3, &r);
    t_fill_uniform(dp, np, -1, 1, &r);
    t_fill_uniform(g, C, -1.5f, 1.5f, &r);   /* negative gamma, and beta: the relu cuts different parts */
    t_fill_uniform(b, C, -0.5f, 0.5f, &r);
    ct_threads_set(threads);
    int bad = 0;
    for (int train = 1; train >= 0; train--) {
        /* [0]: the layers; [1]: as one */
        float *y = t_alloc(n), *din[2], *xh = t_alloc(n), *pool[2], st[2][6][8] = { { { 0 } } };
        for (int k = 0; k < 2; k++) {
            din[k] = t_alloc(n); pool[k] = t_alloc(np);
            for (int c = 0; c < C; c++) { st[k][2][c] = 0.3f; st[k][3][c] = 1.2f; }
        }
        /* st[k]: mean, invstd, running mean, running var, dgamma, dbeta */
        ct_batchnorm_forward(y, xh, st[0][0], st[0][1], st[0][2], st[0][3], x, g, b, &d, train);
        if (relu) ct_relu_forward(y, y, n);
        if (gap) ct_global_avgpool_forward(pool[0], y, N, C, H * W);
        else     ct_avgpool_h_forward(pool[0], y, N, C, H, W);
        ct_batchnorm_avgpool_h_forward(pool[1], st[1][0], st[1][1], st[1][2], st[1][3], x, g, b, &d, PH, PW, relu, train);
        if (train) {
            float *dy = t_alloc(n);
            if (gap) ct_global_avgpool_backward(dy, dp, N, C, H * W);
            else     ct_avgpool_h_backward(dy, dp, N, C, H, W);
            if (relu) ct_relu_backward(dy, dy, y, n);
            ct_batchnorm_backward(din[0], st[0][4], st[0][5], dy, xh, st[0][1], g, &d);
            ct_batchnorm_avgpool_h_backward(din[1], st[1][4], st[1][5], sums, dp, x, st[1][0], st[1][1], g, b, &d, PH, PW, relu);
            bad += memcmp(din[0], din[1], n * sizeof(float)) != 0;
            /* without din: the same parameter gradients added once more */
            ct_batchnorm_avgpool_h_backward(NULL, st[1][4], st[1][5], sums, dp, x, st[1][0], st[1][1], g, b, &d, PH, PW, relu);
            ct_batchnorm_backward(NULL, st[0][4], st[0][5], dy, xh, st[0][1], g, &d);
            free(dy);
        }
        bad += memcmp(pool[0], pool[1], np * sizeof(float)) != 0;
        bad += memcmp(st[0], st[1], sizeof st[0]) != 0;
        for (int k = 0; k < 2; k++) { free(din[k]); free(pool[k]); }
        free(y); free(xh);
    }
    ct_threads_set(1);
    t_check(bad == 0, "%d of the outputs differ", bad);
    free(x); free(dp); free(g); free(b); free(sums);
}

static void bn_avg_refusals(void)
{
    t_case("batchnorm/with the mean over H after it: refused with synchronised statistics, another plane's shape, planes over 8,192");
    batchnorm_dims d = { .N = 2, .C = 3, .HW = 20, .eps = 1e-5f, .momentum = 0.1f }, big = d;
    ct_replica_sum rs = { 0 };
    big.HW = 91 * 91;
    t_check(ct_batchnorm_avgpool_h_fits(&d, 4, 5) && ct_batchnorm_avgpool_h_fits(&d, 20, 1), "a plain chain should fit");
    t_check(!ct_batchnorm_avgpool_h_fits(&d, 5, 5), "a plane of 25 values fits maps of 20");
    t_check(!ct_batchnorm_avgpool_h_fits(&big, 91, 91), "a 91x91 plane fits");
    d.sync = &rs;
    t_check(!ct_batchnorm_avgpool_h_fits(&d, 4, 5), "synchronised statistics fit");
}

void suite_batchnorm(void)
{
    for (int relu = 0; relu <= 1; relu++) {
        bn_pool_case(3, 4, 9, 7, 2, 2, relu, 1);
        bn_pool_case(3, 4, 9, 7, 2, 2, relu, 3);
        bn_pool_case(2, 3, 8, 6, 3, 1, relu, 2);
        bn_pool_case(4, 2, 40, 20, 2, 2, relu, 2);   /* runs long enough for the vector loops */
    }
    bn_pool_case(2, 2, 64, 128, 2, 2, 1, 2);  /* the largest plane the pair takes */
    bn_avg_case(3, 4, 9, 7, 1, 0, 1);
    bn_avg_case(3, 4, 9, 7, 1, 0, 3);
    bn_avg_case(4, 3, 25, 10, 0, 0, 2);    /* the siamese-cnn's last map's shape, without the relu */
    bn_avg_case(3, 5, 6, 11, 1, 1, 2);     /* gap */
    bn_avg_case(2, 3, 5, 40, 0, 1, 3);
    bn_avg_refusals();
    bn_pool_refusals();
    bn_one_pass(0);
    bn_one_pass(1);
    bn_plane_stats(5, 3, 13, 11, 1);
    bn_plane_stats(6, 8, 40, 20, 3);
    bn_streamed();
    bn_synced();
    bn_synced_copies(4, 5, 7);
    bn_synced_copies(2, 2500, 3);   /* more channels than one chunk of the replicas' sums (1024) */
    bn_workers();
    bn_gradcheck(4, 3, 1, 1);      /* BatchNorm1d after a dense layer */
    bn_gradcheck(3, 1, 1, 2);      /* C = 1, smallest batch where the gradient is not 0 (M = 3) */
    bn_gradcheck(2, 3, 15, 3);     /* BatchNorm2d, odd 3x5 feature maps */
    bn_gradcheck(1, 2, 9, 4);      /* N = 1: the statistics run over the 3x3 map alone */
    bn_gradcheck(5, 4, 6, 5);
    bn_parity("batchnorm_2d", "train+eval 2d N=4 C=3 HW=15");
    bn_parity("batchnorm_1d", "train+eval 1d N=6 C=5 momentum 0.3 eps 1e-3");
    bn_conventions();
    bn_params();
}
