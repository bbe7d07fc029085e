/* test_batchnorm.c - tests of layers/batchnorm: finite-difference gradient checks in
 * train mode (the batch mean and variance depend on the input, and the check goes
 * through them), for HW = 1 (after a dense layer) and HW > 1 (conv features),
 * N = 1 and C = 1; PyTorch parity of one train step (output, gradients, and the
 * running statistics after the update) and of eval mode with the updated running
 * statistics (tests/golden/batchnorm_*.h5); channels shared by 2 and 3 workers
 * give the same bits as one; synchronised statistics over two replicas (threads standing
 * for ranks) equal the whole batch's; parameter registration.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/threads.h"
#include "io/h5.h"
#include "layers/batchnorm.h"

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

void suite_batchnorm(void)
{
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
