/* batchnorm.cu - batch normalisation on the GPU (see cuda/batchnorm.h; the math and
 * the backward derivation are in layers/batchnorm.h). One block per channel c; the
 * M = N*HW values of the channel are x[n*C*HW + c*HW + i]. */
#include <math.h>
#include "cuda/batchnorm.h"
#include "cuda/check.h"
#include "cuda/reduce.cuh"

/* Where the j-th of channel c's M values lies in [N, C, HW]. */
__device__ static inline size_t at_of(size_t j, int c, const batchnorm_dims &d)
{
    return (size_t)c * d.HW + j / d.HW * ((size_t)d.C * d.HW) + j % d.HW;
}

/* xhat = (x - mu) is, out = gamma xhat + beta over channel c (the block's threads) */
__device__ static void normalise_channel(float *out, float *xhat, const float *in, float mu, float is, float gc, float bc,
                                         int c, const batchnorm_dims &d)
{
    const size_t M = (size_t)d.N * d.HW;
    for (size_t j = threadIdx.x; j < M; j += blockDim.x) {
        size_t at = at_of(j, c, d);
        float h = (in[at] - mu) * is;
        xhat[at] = h;
        out[at] = gc * h + bc;
    }
}

/* *sd = sum dout, *sdx = sum dout xhat over channel c, on every thread of the block;
 * dbeta[c], dgamma[c] += them */
__device__ static void channel_grad_sums(double *sd, double *sdx, float *dgamma, float *dbeta, const float *dout,
                                         const float *xhat, int c, const batchnorm_dims &d, double *sh)
{
    const size_t M = (size_t)d.N * d.HW;
    double a = 0.0, b = 0.0;
    for (size_t j = threadIdx.x; j < M; j += blockDim.x) {
        size_t at = at_of(j, c, d);
        a += dout[at];
        b += (double)dout[at] * xhat[at];
    }
    *sd = ct_block_sum(a, sh);
    *sdx = ct_block_sum(b, sh);
    if (threadIdx.x == 0) { dbeta[c] += (float)*sd; dgamma[c] += (float)*sdx; }
}

/* din = k (dout - mean_d - xhat mean_dx) over channel c, k = gamma invstd */
__device__ static void din_channel(float *din, const float *dout, const float *xhat, float k, float mean_d, float mean_dx,
                                   int c, const batchnorm_dims &d)
{
    const size_t M = (size_t)d.N * d.HW;
    for (size_t j = threadIdx.x; j < M; j += blockDim.x) {
        size_t at = at_of(j, c, d);
        din[at] = k * (dout[at] - mean_d - xhat[at] * mean_dx);
    }
}

/* acc = sum over this batch's part of channel c of x (mean == NULL) or of (x - *mean)^2 */
__device__ static double channel_sum(const float *in, const double *mean, int c, const batchnorm_dims &d, double *sh)
{
    const size_t M = (size_t)d.N * d.HW;
    double s = 0.0;
    for (size_t j = threadIdx.x; j < M; j += blockDim.x) {
        double x = in[at_of(j, c, d)];
        if (mean) { x -= *mean; x *= x; }
        s += x;
    }
    return ct_block_sum(s, sh);
}

__global__ static void bn_fwd_kernel(float *out, float *xhat, float *mean, float *invstd, float *rmean, float *rvar,
                                     const float *in, const float *gamma, const float *beta, batchnorm_dims d, int train)
{
    __shared__ double sh[CT_THREADS];
    const int c = blockIdx.x;
    const size_t M = (size_t)d.N * d.HW;
    float mu, is;
    if (train) {
        const double m = channel_sum(in, NULL, c, d, sh) / (double)M;
        const double ss = channel_sum(in, &m, c, d, sh);
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
    normalise_channel(out, xhat, in, mu, is, gamma[c], beta[c], c, d);
}

__global__ static void bn_bwd_kernel(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                     const float *invstd, const float *gamma, batchnorm_dims d)
{
    __shared__ double sh[CT_THREADS];
    const int c = blockIdx.x;
    const double M = (double)d.N * d.HW;
    double sd, sdx;
    channel_grad_sums(&sd, &sdx, dgamma, dbeta, dout, xhat, c, d, sh);
    if (!din) return;
    din_channel(din, dout, xhat, gamma[c] * invstd[c], (float)(sd / M), (float)(sdx / M), c, d);
}

/* ---- synchronised statistics (layers/batchnorm.h: ct_replica_sum) ----
 * The CPU's order of work (layers/batchnorm.c): each channel's sum on the device, its sum
 * over the replicas on the host (d->sync->sum), the means back to the device, the squared
 * deviations from them, their sum over the replicas, then every element normalised with
 * the whole batch's statistics. The per-channel doubles travel through the context's
 * bn_sync buffers, up to BN_SYNC_CHUNK channels at a time: two round trips of C doubles per
 * forward, one of 2C per backward. */

/* The synchronised kernels work on a chunk of n channels from c0 (block b: channel c0 + b),
 * their per-channel doubles at the start of the context's bn_sync buffer. */

/* acc[b] = channel_sum of this replica's part (mean: the whole batch's means, or NULL) */
__global__ static void bn_sync_pass_kernel(double *acc, const double *mean, const float *in, int c0, batchnorm_dims d)
{
    __shared__ double sh[CT_THREADS];
    const int b = blockIdx.x;
    const double s = channel_sum(in, mean ? mean + b : NULL, c0 + b, d, sh);
    if (threadIdx.x == 0) acc[b] = s;
}

/* stats [2n] = the whole batch's means and summed squared deviations; M its values per channel */
__global__ static void bn_sync_norm_kernel(float *out, float *xhat, float *mean, float *invstd, float *rmean, float *rvar,
                                           const float *in, const float *gamma, const float *beta, const double *stats,
                                           double M, int c0, int n, batchnorm_dims d)
{
    const int b = blockIdx.x, c = c0 + b;
    const float mu = (float)stats[b];
    const double var = stats[n + b] / M, var_unb = M > 1 ? stats[n + b] / (M - 1) : var;
    const float is = (float)(1.0 / sqrt(var + (double)d.eps));
    if (threadIdx.x == 0) {
        mean[c] = mu;
        invstd[c] = is;
        rmean[c] = (1.0f - d.momentum) * rmean[c] + d.momentum * mu;
        rvar[c] = (1.0f - d.momentum) * rvar[c] + d.momentum * (float)var_unb;
    }
    normalise_channel(out, xhat, in, mu, is, gamma[c], beta[c], c, d);
}

/* this replica's own sums: dbeta, dgamma += them; acc [2n] = (sum dout, sum dout xhat) */
__global__ static void bn_sync_bwd_sums_kernel(double *acc, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                               int c0, int n, batchnorm_dims d)
{
    __shared__ double sh[CT_THREADS];
    const int b = blockIdx.x;
    double sd, sdx;
    channel_grad_sums(&sd, &sdx, dgamma, dbeta, dout, xhat, c0 + b, d, sh);
    if (threadIdx.x == 0) { acc[b] = sd; acc[n + b] = sdx; }
}

/* din with the whole batch's means: means [2n] = (S_d, S_dx) / (M share) (layers/batchnorm.h) */
__global__ static void bn_sync_din_kernel(float *din, const float *dout, const float *xhat, const float *invstd, const float *gamma,
                                          const double *means, int c0, int n, batchnorm_dims d)
{
    const int b = blockIdx.x, c = c0 + b;
    din_channel(din, dout, xhat, gamma[c] * invstd[c], (float)means[b], (float)means[n + b], c, d);
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

/* Channels per chunk: the bn_sync buffers hold two doubles per channel. Every replica has
 * the same channels, so every replica makes the same sums in the same order. */
#define BN_SYNC_CHUNK (CT_GPU_BN_SYNC / 2)

static void forward_synced_gpu(float *out, float *xhat, float *mean, float *invstd, float *running_mean, float *running_var,
                               const float *in, const float *gamma, const float *beta, const batchnorm_dims *d)
{
    ct_gpu *g = ct_gpu_ctx();
    const ct_replica_sum *r = d->sync;
    const double M = (double)r->total_N * d->HW;   /* the whole batch's values per channel */
    for (int c0 = 0; c0 < d->C; c0 += BN_SYNC_CHUNK) {
        const int n = d->C - c0 < BN_SYNC_CHUNK ? d->C - c0 : BN_SYNC_CHUNK;
        bn_sync_pass_kernel<<<n, CT_THREADS, 0, g->stream>>>(g->bn_sync, NULL, in, c0, *d);
        CT_LAUNCH_CHECK();
        double *h = download_doubles(0, n);
        r->sum(r->ctx, h, n);
        for (int c = 0; c < n; c++) h[c] /= M;   /* the whole batch's means */
        upload_doubles(0, n);
        bn_sync_pass_kernel<<<n, CT_THREADS, 0, g->stream>>>(g->bn_sync + n, g->bn_sync, in, c0, *d);
        CT_LAUNCH_CHECK();
        r->sum(r->ctx, download_doubles(n, n), n);   /* the whole batch's summed squared deviations */
        upload_doubles(n, n);
        bn_sync_norm_kernel<<<n, CT_THREADS, 0, g->stream>>>(out, xhat, mean, invstd, running_mean, running_var, in, gamma, beta,
                                                              g->bn_sync, M, c0, n, *d);
        CT_LAUNCH_CHECK();
    }
}

static void backward_synced_gpu(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                const float *invstd, const float *gamma, const batchnorm_dims *d)
{
    ct_gpu *g = ct_gpu_ctx();
    const ct_replica_sum *r = d->sync;
    const double M = (double)r->total_N * d->HW;
    for (int c0 = 0; c0 < d->C; c0 += BN_SYNC_CHUNK) {
        const int n = d->C - c0 < BN_SYNC_CHUNK ? d->C - c0 : BN_SYNC_CHUNK;
        bn_sync_bwd_sums_kernel<<<n, CT_THREADS, 0, g->stream>>>(g->bn_sync, dgamma, dbeta, dout, xhat, c0, n, *d);
        CT_LAUNCH_CHECK();
        if (!din) continue;
        double *h = download_doubles(0, 2 * n);
        for (int i = 0; i < 2 * n; i++) h[i] *= r->share;   /* each replica's weight in the whole batch's loss */
        r->sum(r->ctx, h, 2 * n);
        for (int i = 0; i < 2 * n; i++) h[i] /= M * r->share;   /* S / (M share): the means this replica's dout needs */
        upload_doubles(0, 2 * n);
        bn_sync_din_kernel<<<n, CT_THREADS, 0, g->stream>>>(din, dout, xhat, invstd, gamma, g->bn_sync, c0, n, *d);
        CT_LAUNCH_CHECK();
    }
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
