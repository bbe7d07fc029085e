/* batchnorm.c - batch normalisation over [N, C, HW], PyTorch's semantics (see
 * batchnorm.h). Channel c of sample n is the contiguous run x[n, c, 0..HW).
 *
 * Per-channel statistics are accumulated in double (two passes: mean, then the
 * mean of squared deviations), so large M = N*HW or a large mean do not cost digits;
 * eight accumulators per run keep the sums vectorised. Channels are independent
 * and are shared by ctrain's workers (core/threads.h: ct_parallel).
 *
 * Backward (train mode). With M = N*HW, xhat = (x - mu) invstd, out = gamma xhat + beta,
 * and g = dout * gamma = dL/dxhat:
 *   dbeta  += sum dout,       dgamma += sum dout xhat
 *   dL/dx   = invstd g  +  dL/dmu dmu/dx  +  dL/dvar dvar/dx, where
 *     dL/dvar = sum g (x - mu) (-1/2) invstd^3,   dvar/dx = 2 (x - mu) / M
 *     dL/dmu  = -invstd sum g  (the dvar/dmu term is 0: sum (x - mu) = 0),  dmu/dx = 1/M
 *   => din = invstd / M (M g - sum g - xhat sum g xhat)
 * and since gamma is constant per channel, sum g = gamma sum dout, sum g xhat = gamma sum dout xhat:
 *   din = gamma invstd / M (M dout - sum dout - xhat sum dout xhat)
 */
#include <math.h>
#include <stdio.h>
#include "core/hot.h"
#include "core/threads.h"
#include "layers/batchnorm.h"

ct_status ct_batchnorm_params_add(batchnorm_ids *ids, ct_params *ps, ct_params *buffers, const char *prefix, int C)
{
    char name[CT_NAME_MAX + 24];
    snprintf(name, sizeof name, "%s/gamma", prefix);
    if ((ids->gamma = ct_params_add(ps, name, 1, &C, ct_init_const(1.0f))) < 0) return CT_EINVAL;
    snprintf(name, sizeof name, "%s/beta", prefix);
    if ((ids->beta = ct_params_add(ps, name, 1, &C, ct_init_zeros())) < 0) return CT_EINVAL;
    snprintf(name, sizeof name, "%s/running_mean", prefix);
    if ((ids->running_mean = ct_params_add(buffers, name, 1, &C, ct_init_zeros())) < 0) return CT_EINVAL;
    snprintf(name, sizeof name, "%s/running_var", prefix);
    if ((ids->running_var = ct_params_add(buffers, name, 1, &C, ct_init_const(1.0f))) < 0) return CT_EINVAL;
    return CT_OK;
}

/* ---- sums over a contiguous run, in double ----
 * Eight independent accumulators in a fixed order: the compiler turns them into
 * SIMD lanes (a single double accumulator is a serial chain of dependent adds,
 * several times slower), and the result does not depend on the thread count. */
#define BN_LANES 8

static double run_sum(const float *x, int n)
{
    double acc[BN_LANES] = { 0 }, s = 0.0;
    int i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int k = 0; k < BN_LANES; k++) acc[k] += x[i + k];
    for (; i < n; i++) s += x[i];
    for (int k = 0; k < BN_LANES; k++) s += acc[k];
    return s;
}

/* sum of (x - m)^2 */
CT_HOT
static double run_sumsq_dev(const float *x, int n, double m)
{
    double acc[BN_LANES] = { 0 }, s = 0.0;
    int i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int k = 0; k < BN_LANES; k++) { double t = x[i + k] - m; acc[k] += t * t; }
    for (; i < n; i++) { double t = x[i] - m; s += t * t; }
    for (int k = 0; k < BN_LANES; k++) s += acc[k];
    return s;
}

/* *sg += sum g, *sgx += sum g xh */
CT_HOT
static void run_sums2(const float *g, const float *xh, int n, double *sg, double *sgx)
{
    double a[BN_LANES] = { 0 }, b[BN_LANES] = { 0 }, s = 0.0, sx = 0.0;
    int i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int k = 0; k < BN_LANES; k++) { a[k] += g[i + k]; b[k] += (double)g[i + k] * xh[i + k]; }
    for (; i < n; i++) { s += g[i]; sx += (double)g[i] * xh[i]; }
    for (int k = 0; k < BN_LANES; k++) { s += a[k]; sx += b[k]; }
    *sg += s;
    *sgx += sx;
}

/* One call's arguments, shared by the workers; each task is one channel. */
typedef struct {
    float *out, *xhat_out, *mean, *invstd_out, *running_mean, *running_var, *din, *dgamma, *dbeta;
    const float *in, *gamma, *beta, *dout, *xhat, *invstd;   /* xhat, invstd: what backward reads */
    const batchnorm_dims *d;
    int train;
} bn_job;

CT_HOT
static void forward_channel(void *ctx, int c, int worker)
{
    const bn_job *j = ctx;
    const batchnorm_dims *d = j->d;
    const int N = d->N, HW = d->HW;
    const size_t M = (size_t)N * HW, cstride = (size_t)d->C * HW;   /* step from x[n, c] to x[n+1, c] */
    const float *xc = j->in + (size_t)c * HW;          /* x[0, c, :]; sample n at + n*cstride */
    float mu, is;
    (void)worker;
    if (j->train) {
        double s = 0.0;
        for (int n = 0; n < N; n++) s += run_sum(xc + n * cstride, HW);
        const double m = s / (double)M;
        double ss = 0.0;
        for (int n = 0; n < N; n++) ss += run_sumsq_dev(xc + n * cstride, HW, m);
        const double var = ss / (double)M;             /* biased: what normalises */
        /* the running variance is the unbiased estimate; with M = 1 there is none
         * (PyTorch refuses to train then), so the biased one (0) is used */
        const double var_unb = M > 1 ? ss / (double)(M - 1) : var;
        mu = (float)m;
        is = (float)(1.0 / sqrt(var + (double)d->eps));
        j->running_mean[c] = (1.0f - d->momentum) * j->running_mean[c] + d->momentum * (float)m;
        j->running_var[c]  = (1.0f - d->momentum) * j->running_var[c]  + d->momentum * (float)var_unb;
    } else {
        mu = j->running_mean[c];
        is = (float)(1.0 / sqrt((double)j->running_var[c] + (double)d->eps));
    }
    j->mean[c] = mu;
    j->invstd_out[c] = is;
    const float gc = j->gamma[c], bc = j->beta[c];
    for (int n = 0; n < N; n++) {
        const float *x = xc + n * cstride;
        float *xh = j->xhat_out + (size_t)c * HW + n * cstride, *y = j->out + (size_t)c * HW + n * cstride;
        for (int i = 0; i < HW; i++) {
            const float h = (x[i] - mu) * is;
            xh[i] = h;
            y[i] = gc * h + bc;
        }
    }
}

static int bn_workers(const batchnorm_dims *d)
{
    int w = ct_threads_get() < CT_MAX_WORKERS ? ct_threads_get() : CT_MAX_WORKERS;
    return w < d->C ? w : d->C;
}

/* ---- synchronised statistics (batchnorm.h: ct_replica_sum) ----
 * The same two passes as one batch, with a sum over the replicas after each: first the
 * channels' sums (-> the mean), then their squared deviations from that mean (-> the
 * variance); then every element is normalised with the whole batch's statistics. The
 * per-channel sums go through a fixed buffer, BN_SYNC_CHUNK channels at a time (every
 * replica has the same channels, so every replica makes the same sums in the same order). */
#define BN_SYNC_CHUNK 1024

typedef struct {
    const bn_job *j;
    int c0;         /* the chunk's first channel: worker index c is channel c0 + c */
    double *acc;    /* [chunk] per channel: the pass's sum */
    double *mean;   /* [chunk] the whole batch's means, for the second pass */
    int pass;       /* 0: sum x; 1: sum (x - mean)^2 */
} bn_sync_job;

static void sync_pass_channel(void *ctx, int c, int worker)
{
    const bn_sync_job *s = ctx;
    const batchnorm_dims *d = s->j->d;
    const size_t cstride = (size_t)d->C * d->HW;
    const float *xc = s->j->in + (size_t)(s->c0 + c) * d->HW;
    double acc = 0.0;
    (void)worker;
    for (int n = 0; n < d->N; n++)
        acc += s->pass == 0 ? run_sum(xc + n * cstride, d->HW) : run_sumsq_dev(xc + n * cstride, d->HW, s->mean[c]);
    s->acc[c] = acc;
}

static void normalise_channel(void *ctx, int c, int worker)
{
    const bn_job *j = ctx;
    const batchnorm_dims *d = j->d;
    const size_t cstride = (size_t)d->C * d->HW;
    const float mu = j->mean[c], is = j->invstd_out[c], gc = j->gamma[c], bc = j->beta[c];
    (void)worker;
    for (int n = 0; n < d->N; n++) {
        const float *x = j->in + (size_t)c * d->HW + n * cstride;
        float *xh = j->xhat_out + (size_t)c * d->HW + n * cstride, *y = j->out + (size_t)c * d->HW + n * cstride;
        for (int i = 0; i < d->HW; i++) {
            const float h = (x[i] - mu) * is;
            xh[i] = h;
            y[i] = gc * h + bc;
        }
    }
}

static void forward_synced(bn_job *j)
{
    const batchnorm_dims *d = j->d;
    const ct_replica_sum *r = d->sync;
    const size_t M = (size_t)r->total_N * d->HW;   /* the whole batch's values per channel */
    double buf[2 * BN_SYNC_CHUNK];
    for (int c0 = 0; c0 < d->C; c0 += BN_SYNC_CHUNK) {
        const int n = d->C - c0 < BN_SYNC_CHUNK ? d->C - c0 : BN_SYNC_CHUNK;
        bn_sync_job s = { .j = j, .c0 = c0, .acc = buf, .mean = buf + n, .pass = 0 };
        ct_parallel(n, bn_workers(d), sync_pass_channel, &s);
        r->sum(r->ctx, buf, n);
        for (int c = 0; c < n; c++) {
            s.mean[c] = buf[c] / (double)M;
            j->mean[c0 + c] = (float)s.mean[c];
        }
        s.pass = 1;
        ct_parallel(n, bn_workers(d), sync_pass_channel, &s);
        r->sum(r->ctx, buf, n);
        for (int c = 0; c < n; c++) {
            const double var = buf[c] / (double)M, var_unb = M > 1 ? buf[c] / (double)(M - 1) : var;
            const int g = c0 + c;
            j->invstd_out[g] = (float)(1.0 / sqrt(var + (double)d->eps));
            j->running_mean[g] = (1.0f - d->momentum) * j->running_mean[g] + d->momentum * j->mean[g];
            j->running_var[g]  = (1.0f - d->momentum) * j->running_var[g]  + d->momentum * (float)var_unb;
        }
    }
    ct_parallel(d->C, bn_workers(d), normalise_channel, j);
}

/* Channels are independent: they are shared by the workers (core/threads.h). */
void ct_batchnorm_forward(float *out, float *xhat, float *mean, float *invstd, float *running_mean, float *running_var,
                       const float *in, const float *gamma, const float *beta, const batchnorm_dims *d, int train)
{
    bn_job j = { .out = out, .xhat_out = xhat, .mean = mean, .invstd_out = invstd, .running_mean = running_mean,
                 .running_var = running_var, .in = in, .gamma = gamma, .beta = beta, .d = d, .train = train };
    if (train && d->sync) forward_synced(&j);
    else ct_parallel(d->C, bn_workers(d), forward_channel, &j);
}

CT_HOT
static void backward_channel(void *ctx, int c, int worker)
{
    const bn_job *j = ctx;
    const batchnorm_dims *d = j->d;
    const int N = d->N, HW = d->HW;
    const size_t M = (size_t)N * HW, cstride = (size_t)d->C * HW, off = (size_t)c * HW;
    (void)worker;
    /* sd = sum dout, sdx = sum dout xhat over (n, hw) of channel c */
    double sd = 0.0, sdx = 0.0;
    for (int n = 0; n < N; n++) run_sums2(j->dout + off + n * cstride, j->xhat + off + n * cstride, HW, &sd, &sdx);
    j->dbeta[c] += (float)sd;
    j->dgamma[c] += (float)sdx;
    if (!j->din) return;
    /* din = gamma invstd / M (M dout - sd - xhat sdx) = k (dout - mean_d - xhat mean_dx) */
    const float k = j->gamma[c] * j->invstd[c];
    const float mean_d = (float)(sd / (double)M), mean_dx = (float)(sdx / (double)M);
    for (int n = 0; n < N; n++) {
        const float *g = j->dout + off + n * cstride, *xh = j->xhat + off + n * cstride;
        float *dx = j->din + off + n * cstride;
        for (int i = 0; i < HW; i++) dx[i] = k * (g[i] - mean_d - xh[i] * mean_dx);
    }
}

/* Synchronised backward, a chunk of channels at a time: each channel's own sums first
 * (dgamma, dbeta take them), then the replicas' weighted sums, then din with the whole
 * batch's means. */
typedef struct {
    const bn_job *j;
    int c0;             /* the chunk's first channel */
    double *sd, *sdx;   /* [chunk] */
} bn_sync_bwd;

static void sync_sums_channel(void *ctx, int c, int worker)
{
    const bn_sync_bwd *s = ctx;
    const batchnorm_dims *d = s->j->d;
    const int g = s->c0 + c;
    const size_t cstride = (size_t)d->C * d->HW, off = (size_t)g * d->HW;
    double sd = 0.0, sdx = 0.0;
    (void)worker;
    for (int n = 0; n < d->N; n++) run_sums2(s->j->dout + off + n * cstride, s->j->xhat + off + n * cstride, d->HW, &sd, &sdx);
    s->j->dbeta[g] += (float)sd;
    s->j->dgamma[g] += (float)sdx;
    s->sd[c] = sd;
    s->sdx[c] = sdx;
}

static void sync_din_channel(void *ctx, int c, int worker)
{
    const bn_sync_bwd *s = ctx;
    const batchnorm_dims *d = s->j->d;
    const int g = s->c0 + c;
    const size_t cstride = (size_t)d->C * d->HW, off = (size_t)g * d->HW;
    (void)worker;
    const float k = s->j->gamma[g] * s->j->invstd[g];
    const float mean_d = (float)s->sd[c], mean_dx = (float)s->sdx[c];   /* already divided (backward_synced) */
    for (int n = 0; n < d->N; n++) {
        const float *gr = s->j->dout + off + n * cstride, *xh = s->j->xhat + off + n * cstride;
        float *dx = s->j->din + off + n * cstride;
        for (int i = 0; i < d->HW; i++) dx[i] = k * (gr[i] - mean_d - xh[i] * mean_dx);
    }
}

static void backward_synced(bn_job *j)
{
    const batchnorm_dims *d = j->d;
    const ct_replica_sum *r = d->sync;
    const double M = (double)r->total_N * d->HW;
    double buf[2 * BN_SYNC_CHUNK];
    for (int c0 = 0; c0 < d->C; c0 += BN_SYNC_CHUNK) {
        const int n = d->C - c0 < BN_SYNC_CHUNK ? d->C - c0 : BN_SYNC_CHUNK;
        bn_sync_bwd s = { .j = j, .c0 = c0, .sd = buf, .sdx = buf + n };
        ct_parallel(n, bn_workers(d), sync_sums_channel, &s);
        if (!j->din) continue;
        for (int i = 0; i < 2 * n; i++) buf[i] *= r->share;   /* each replica's weight in the whole batch's loss */
        r->sum(r->ctx, buf, 2 * n);
        for (int i = 0; i < 2 * n; i++) buf[i] /= M * r->share;   /* S / (M share): the means this replica's dout needs */
        ct_parallel(n, bn_workers(d), sync_din_channel, &s);
    }
}

void ct_batchnorm_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                        const float *invstd, const float *gamma, const batchnorm_dims *d)
{
    bn_job j = { .din = din, .dgamma = dgamma, .dbeta = dbeta, .dout = dout, .xhat = xhat,
                 .invstd = invstd, .gamma = gamma, .d = d };
    if (d->sync) backward_synced(&j);
    else ct_parallel(d->C, bn_workers(d), backward_channel, &j);
}
