/* batchnorm.cu - batch normalisation on the GPU (see cuda/batchnorm.h; the math and
 * the backward derivation are in layers/batchnorm.h). One block per channel c; the
 * M = N*HW values of the channel are x[n*C*HW + c*HW + i]. */
#include <math.h>
#include "cuda/batchnorm.h"
#include "cuda/check.h"
#include "cuda/reduce.cuh"


__global__ static void bn_fwd_kernel(float *out, float *xhat, float *mean, float *invstd, float *rmean, float *rvar,
                                     const float *in, const float *gamma, const float *beta, batchnorm_dims d, int train)
{
    __shared__ double sh[CT_THREADS];
    const int c = blockIdx.x, HW = d.HW;
    const size_t M = (size_t)d.N * HW, cstride = (size_t)d.C * HW, off = (size_t)c * HW;
    float mu, is;
    if (train) {
        double s = 0.0;
        for (size_t j = threadIdx.x; j < M; j += blockDim.x) s += in[off + j / HW * cstride + j % HW];
        const double m = ct_block_sum(s, sh) / (double)M;
        double ss = 0.0;
        for (size_t j = threadIdx.x; j < M; j += blockDim.x) { double t = in[off + j / HW * cstride + j % HW] - m; ss += t * t; }
        ss = ct_block_sum(ss, sh);
        const double var = ss / (double)M, var_unb = M > 1 ? ss / (double)(M - 1) : var;
        mu = (float)m;
        is = (float)(1.0 / sqrt(var + (double)d.eps));
        if (threadIdx.x == 0) {
            rmean[c] = (1.0f - d.momentum) * rmean[c] + d.momentum * (float)m;
            rvar[c] = (1.0f - d.momentum) * rvar[c] + d.momentum * (float)var_unb;
        }
    } else {
        mu = rmean[c];
        is = (float)(1.0 / sqrt((double)rvar[c] + (double)d.eps));
    }
    if (threadIdx.x == 0) { mean[c] = mu; invstd[c] = is; }
    const float gc = gamma[c], bc = beta[c];
    for (size_t j = threadIdx.x; j < M; j += blockDim.x) {
        size_t at = off + j / HW * cstride + j % HW;
        float h = (in[at] - mu) * is;
        xhat[at] = h;
        out[at] = gc * h + bc;
    }
}

__global__ static void bn_bwd_kernel(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                     const float *invstd, const float *gamma, batchnorm_dims d)
{
    __shared__ double sh[CT_THREADS];
    const int c = blockIdx.x, HW = d.HW;
    const size_t M = (size_t)d.N * HW, cstride = (size_t)d.C * HW, off = (size_t)c * HW;
    double sd = 0.0, sdx = 0.0;
    for (size_t j = threadIdx.x; j < M; j += blockDim.x) {
        size_t at = off + j / HW * cstride + j % HW;
        sd += dout[at];
        sdx += (double)dout[at] * xhat[at];
    }
    sd = ct_block_sum(sd, sh);
    sdx = ct_block_sum(sdx, sh);
    if (threadIdx.x == 0) { dbeta[c] += (float)sd; dgamma[c] += (float)sdx; }
    if (!din) return;
    const float k = gamma[c] * invstd[c];
    const float mean_d = (float)(sd / (double)M), mean_dx = (float)(sdx / (double)M);
    for (size_t j = threadIdx.x; j < M; j += blockDim.x) {
        size_t at = off + j / HW * cstride + j % HW;
        din[at] = k * (dout[at] - mean_d - xhat[at] * mean_dx);
    }
}

extern "C" void ct_batchnorm_forward_gpu(float *out, float *xhat, float *mean, float *invstd, float *running_mean, float *running_var,
                                      const float *in, const float *gamma, const float *beta, const batchnorm_dims *d, int train)
{
    bn_fwd_kernel<<<d->C, CT_THREADS, 0, ct_gpu_stream()>>>(out, xhat, mean, invstd, running_mean, running_var, in, gamma, beta, *d, train);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_batchnorm_backward_gpu(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                       const float *invstd, const float *gamma, const batchnorm_dims *d)
{
    bn_bwd_kernel<<<d->C, CT_THREADS, 0, ct_gpu_stream()>>>(din, dgamma, dbeta, dout, xhat, invstd, gamma, *d);
    CT_LAUNCH_CHECK();
}
