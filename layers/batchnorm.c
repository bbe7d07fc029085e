/* batchnorm.c - batch normalisation over [N, C, HW], PyTorch's semantics (see
 * batchnorm.h). Channel c of sample n is the contiguous run x[n, c, 0..HW).
 *
 * Per-channel statistics are accumulated in double (two passes: mean, then the
 * mean of squared deviations), so large M = N*HW or a large mean do not cost digits.
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
#include "layers/batchnorm.h"

ct_status batchnorm_params_add(batchnorm_ids *ids, ct_params *ps, ct_params *buffers, const char *prefix, int C)
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

void batchnorm_forward(float *out, float *xhat, float *mean, float *invstd, float *running_mean, float *running_var,
                       const float *in, const float *gamma, const float *beta, const batchnorm_dims *d, int train)
{
    const int N = d->N, C = d->C, HW = d->HW;
    const size_t M = (size_t)N * HW, cstride = (size_t)C * HW;   /* step from x[n, c] to x[n+1, c] */
    for (int c = 0; c < C; c++) {
        const float *xc = in + (size_t)c * HW;          /* x[0, c, :]; sample n at + n*cstride */
        float mu, is;
        if (train) {
            double s = 0.0;
            for (int n = 0; n < N; n++)
                for (int i = 0; i < HW; i++) s += xc[n * cstride + i];
            const double m = s / (double)M;
            double ss = 0.0;
            for (int n = 0; n < N; n++)
                for (int i = 0; i < HW; i++) { double t = xc[n * cstride + i] - m; ss += t * t; }
            const double var = ss / (double)M;             /* biased: what normalises */
            /* the running variance is the unbiased estimate; with M = 1 there is none
             * (PyTorch refuses to train then), so the biased one (0) is used */
            const double var_unb = M > 1 ? ss / (double)(M - 1) : var;
            mu = (float)m;
            is = (float)(1.0 / sqrt(var + (double)d->eps));
            running_mean[c] = (1.0f - d->momentum) * running_mean[c] + d->momentum * (float)m;
            running_var[c]  = (1.0f - d->momentum) * running_var[c]  + d->momentum * (float)var_unb;
        } else {
            mu = running_mean[c];
            is = (float)(1.0 / sqrt((double)running_var[c] + (double)d->eps));
        }
        mean[c] = mu;
        invstd[c] = is;
        const float gc = gamma[c], bc = beta[c];
        for (int n = 0; n < N; n++) {
            const float *x = xc + n * cstride;
            float *xh = xhat + (size_t)c * HW + n * cstride, *y = out + (size_t)c * HW + n * cstride;
            for (int i = 0; i < HW; i++) {
                const float h = (x[i] - mu) * is;
                xh[i] = h;
                y[i] = gc * h + bc;
            }
        }
    }
}

void batchnorm_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                        const float *invstd, const float *gamma, const batchnorm_dims *d)
{
    const int N = d->N, C = d->C, HW = d->HW;
    const size_t M = (size_t)N * HW, cstride = (size_t)C * HW;
    for (int c = 0; c < C; c++) {
        const size_t off = (size_t)c * HW;
        /* sd = sum dout, sdx = sum dout xhat over (n, hw) of channel c */
        double sd = 0.0, sdx = 0.0;
        for (int n = 0; n < N; n++) {
            const float *g = dout + off + n * cstride, *xh = xhat + off + n * cstride;
            for (int i = 0; i < HW; i++) { sd += g[i]; sdx += (double)g[i] * xh[i]; }
        }
        dbeta[c] += (float)sd;
        dgamma[c] += (float)sdx;
        if (!din) continue;
        /* din = gamma invstd / M (M dout - sd - xhat sdx) = k (dout - mean_d - xhat mean_dx) */
        const float k = gamma[c] * invstd[c];
        const float mean_d = (float)(sd / (double)M), mean_dx = (float)(sdx / (double)M);
        for (int n = 0; n < N; n++) {
            const float *g = dout + off + n * cstride, *xh = xhat + off + n * cstride;
            float *dx = din + off + n * cstride;
            for (int i = 0; i < HW; i++) dx[i] = k * (g[i] - mean_d - xh[i] * mean_dx);
        }
    }
}
