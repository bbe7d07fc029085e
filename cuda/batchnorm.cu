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

/* ---- synchronised statistics (layers/batchnorm.h: ct_replica_sum) ----
 * The CPU's order of work (layers/batchnorm.c): each channel's sum on the device, its sum
 * over the replicas on the host (d->sync->sum), the means back to the device, the squared
 * deviations from them, their sum over the replicas, then every element normalised with
 * the whole batch's statistics. The per-channel doubles travel through the context's
 * bn_sync buffers: two round trips of C doubles per forward, one of 2C per backward. */

/* acc[c] = sum over this replica's (n, hw) of x (mean == NULL) or of (x - mean[c])^2 */
__global__ static void bn_sync_pass_kernel(double *acc, const double *mean, const float *in, batchnorm_dims d)
{
    __shared__ double sh[CT_THREADS];
    const int c = blockIdx.x, HW = d.HW;
    const size_t M = (size_t)d.N * HW, cstride = (size_t)d.C * HW, off = (size_t)c * HW;
    double s = 0.0;
    for (size_t j = threadIdx.x; j < M; j += blockDim.x) {
        double x = in[off + j / HW * cstride + j % HW];
        if (mean) { x -= mean[c]; x *= x; }
        s += x;
    }
    s = ct_block_sum(s, sh);
    if (threadIdx.x == 0) acc[c] = s;
}

/* stats [2C] = the whole batch's means and summed squared deviations; M its values per channel */
__global__ static void bn_sync_norm_kernel(float *out, float *xhat, float *mean, float *invstd, float *rmean, float *rvar,
                                           const float *in, const float *gamma, const float *beta, const double *stats,
                                           double M, batchnorm_dims d)
{
    const int c = blockIdx.x, HW = d.HW;
    const size_t Mc = (size_t)d.N * HW, cstride = (size_t)d.C * HW, off = (size_t)c * HW;
    const float mu = (float)stats[c];
    const double var = stats[d.C + c] / M, var_unb = M > 1 ? stats[d.C + c] / (M - 1) : var;
    const float is = (float)(1.0 / sqrt(var + (double)d.eps));
    if (threadIdx.x == 0) {
        mean[c] = mu;
        invstd[c] = is;
        rmean[c] = (1.0f - d.momentum) * rmean[c] + d.momentum * mu;
        rvar[c] = (1.0f - d.momentum) * rvar[c] + d.momentum * (float)var_unb;
    }
    const float gc = gamma[c], bc = beta[c];
    for (size_t j = threadIdx.x; j < Mc; j += blockDim.x) {
        size_t at = off + j / HW * cstride + j % HW;
        float h = (in[at] - mu) * is;
        xhat[at] = h;
        out[at] = gc * h + bc;
    }
}

/* this replica's own sums: dbeta, dgamma += them; acc [2C] = (sum dout, sum dout xhat) */
__global__ static void bn_sync_bwd_sums_kernel(double *acc, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                               batchnorm_dims d)
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
    if (threadIdx.x == 0) { dbeta[c] += (float)sd; dgamma[c] += (float)sdx; acc[c] = sd; acc[d.C + c] = sdx; }
}

/* din with the whole batch's means: means [2C] = (S_d, S_dx) / (M share) (layers/batchnorm.h) */
__global__ static void bn_sync_din_kernel(float *din, const float *dout, const float *xhat, const float *invstd, const float *gamma,
                                          const double *means, batchnorm_dims d)
{
    const int c = blockIdx.x, HW = d.HW;
    const size_t M = (size_t)d.N * HW, cstride = (size_t)d.C * HW, off = (size_t)c * HW;
    const float k = gamma[c] * invstd[c], mean_d = (float)means[c], mean_dx = (float)means[d.C + c];
    for (size_t j = threadIdx.x; j < M; j += blockDim.x) {
        size_t at = off + j / HW * cstride + j % HW;
        din[at] = k * (dout[at] - mean_d - xhat[at] * mean_dx);
    }
}

/* The n doubles at g->bn_sync + at, down to the same place of the pinned host buffer
 * (synchronises the stream: the host sums them over the replicas next). */
static double *download_doubles(int at, int n)
{
    ct_gpu *g = ct_gpu_ctx();
    CT_CUDA_CHECK(cudaMemcpyAsync(g->host_bn_sync + at, g->bn_sync + at, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost, g->stream));
    CT_CUDA_CHECK(cudaStreamSynchronize(g->stream));
    return g->host_bn_sync + at;
}

/* and back up, queued on the stream before the kernels that read them */
static void upload_doubles(int at, int n)
{
    ct_gpu *g = ct_gpu_ctx();
    CT_CUDA_CHECK(cudaMemcpyAsync(g->bn_sync + at, g->host_bn_sync + at, (size_t)n * sizeof(double), cudaMemcpyHostToDevice, g->stream));
}

static void forward_synced_gpu(float *out, float *xhat, float *mean, float *invstd, float *running_mean, float *running_var,
                               const float *in, const float *gamma, const float *beta, const batchnorm_dims *d)
{
    ct_gpu *g = ct_gpu_ctx();
    const ct_replica_sum *r = d->sync;
    const int C = d->C;
    const double M = (double)r->total_N * d->HW;   /* the whole batch's values per channel */
    CT_ASSERT(2 * C <= CT_GPU_BN_SYNC);
    bn_sync_pass_kernel<<<C, CT_THREADS, 0, g->stream>>>(g->bn_sync, NULL, in, *d);
    CT_LAUNCH_CHECK();
    double *h = download_doubles(0, C);
    r->sum(r->ctx, h, C);
    for (int c = 0; c < C; c++) h[c] /= M;   /* the whole batch's means */
    upload_doubles(0, C);
    bn_sync_pass_kernel<<<C, CT_THREADS, 0, g->stream>>>(g->bn_sync + C, g->bn_sync, in, *d);
    CT_LAUNCH_CHECK();
    r->sum(r->ctx, download_doubles(C, C), C);   /* the whole batch's summed squared deviations */
    upload_doubles(C, C);
    bn_sync_norm_kernel<<<C, CT_THREADS, 0, g->stream>>>(out, xhat, mean, invstd, running_mean, running_var, in, gamma, beta,
                                                          g->bn_sync, M, *d);
    CT_LAUNCH_CHECK();
}

static void backward_synced_gpu(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                const float *invstd, const float *gamma, const batchnorm_dims *d)
{
    ct_gpu *g = ct_gpu_ctx();
    const ct_replica_sum *r = d->sync;
    const int C = d->C;
    CT_ASSERT(2 * C <= CT_GPU_BN_SYNC);
    bn_sync_bwd_sums_kernel<<<C, CT_THREADS, 0, g->stream>>>(g->bn_sync, dgamma, dbeta, dout, xhat, *d);
    CT_LAUNCH_CHECK();
    if (!din) return;
    double *h = download_doubles(0, 2 * C);
    for (int i = 0; i < 2 * C; i++) h[i] *= r->share;   /* each replica's weight in the whole batch's loss */
    r->sum(r->ctx, h, 2 * C);
    const double M = (double)r->total_N * d->HW;
    for (int i = 0; i < 2 * C; i++) h[i] /= M * r->share;   /* S / (M share): the means this replica's dout needs */
    upload_doubles(0, 2 * C);
    bn_sync_din_kernel<<<C, CT_THREADS, 0, g->stream>>>(din, dout, xhat, invstd, gamma, g->bn_sync, *d);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_batchnorm_forward_gpu(float *out, float *xhat, float *mean, float *invstd, float *running_mean, float *running_var,
                                      const float *in, const float *gamma, const float *beta, const batchnorm_dims *d, int train)
{
    if (train && d->sync) { forward_synced_gpu(out, xhat, mean, invstd, running_mean, running_var, in, gamma, beta, d); return; }
    bn_fwd_kernel<<<d->C, CT_THREADS, 0, ct_gpu_stream()>>>(out, xhat, mean, invstd, running_mean, running_var, in, gamma, beta, *d, train);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_batchnorm_backward_gpu(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                       const float *invstd, const float *gamma, const batchnorm_dims *d)
{
    if (d->sync) { backward_synced_gpu(din, dgamma, dbeta, dout, xhat, invstd, gamma, d); return; }
    bn_bwd_kernel<<<d->C, CT_THREADS, 0, ct_gpu_stream()>>>(din, dgamma, dbeta, dout, xhat, invstd, gamma, *d);
    CT_LAUNCH_CHECK();
}
