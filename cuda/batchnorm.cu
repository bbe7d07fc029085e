/* batchnorm.cu - batch normalisation on the GPU (see cuda/batchnorm.h; the math and
 * the backward derivation are in layers/batchnorm.h). The M = N*HW values of channel c
 * are x[n*C*HW + c*HW + i].
 *
 * Work: each channel's values are split between S blocks (grid C x S), so that few
 * channels over large maps (16 channels of 100x40 at batch 256: 1.0 M values each)
 * still fill the GPU: one block per channel left 116 of an H100's 132 SMs idle and took
 * 5.9 ms for that forward. The per-channel sums go through a fixed-order two-step
 * reduction: each block writes its partial sum (double) to the context's bn_sync
 * buffer, and the next kernel's blocks each add the S partials of their channel in
 * order, so every block, and every run, gets the same statistics. Forward: sums,
 * squared deviations, normalisation (3 launches); backward: the two gradient sums,
 * then din and dgamma/dbeta (2 launches). More channels than the buffer's partials
 * allow go in chunks. */
#include <math.h>
#include "cuda/batchnorm.h"
#include "cuda/check.h"
#include "cuda/reduce.cuh"

/* Calls f(at) for the values lo <= j < hi of channel c (j = n*HW + i, at its place in
 * [N, C, HW]), the block's threads taking every blockDim.x-th; n and i are stepped, not
 * divided out per value. */
template <class F>
__device__ static inline void for_channel(size_t lo, size_t hi, int c, const batchnorm_dims &d, F f)
{
    const unsigned HW = (unsigned)d.HW, step_i = blockDim.x % HW;
    const size_t step_n = blockDim.x / HW, CHW = (size_t)d.C * HW;
    size_t j = lo + threadIdx.x;
    if (j >= hi) return;
    size_t n = j / HW;
    unsigned i = (unsigned)(j % HW);
    for (; j < hi; j += blockDim.x) {
        f(n * CHW + (size_t)c * HW + i);
        i += step_i;
        n += step_n;
        if (i >= HW) { i -= HW; n++; }
    }
}

/* xhat = (x - mu) is, out = gamma xhat + beta over values [lo, hi) of channel c */
__device__ static void normalise_channel(float *out, float *xhat, const float *in, float mu, float is, float gc, float bc,
                                         int c, size_t lo, size_t hi, const batchnorm_dims &d)
{
    for_channel(lo, hi, c, d, [&](size_t at) {
        float h = (in[at] - mu) * is;
        xhat[at] = h;
        out[at] = gc * h + bc;
    });
}

/* *sd = sum dout, *sdx = sum dout xhat over values [lo, hi) of channel c, on every thread of the block */
__device__ static void channel_grad_sums(double *sd, double *sdx, const float *dout, const float *xhat, int c,
                                         size_t lo, size_t hi, const batchnorm_dims &d, double *sh)
{
    double a = 0.0, b = 0.0;
    for_channel(lo, hi, c, d, [&](size_t at) {
        a += dout[at];
        b += (double)dout[at] * xhat[at];
    });
    *sd = ct_block_sum(a, sh);
    *sdx = ct_block_sum(b, sh);
}

/* din = k (dout - mean_d - xhat mean_dx) over values [lo, hi) of channel c, k = gamma invstd */
__device__ static void din_channel(float *din, const float *dout, const float *xhat, float k, float mean_d, float mean_dx,
                                   int c, size_t lo, size_t hi, const batchnorm_dims &d)
{
    for_channel(lo, hi, c, d, [&](size_t at) { din[at] = k * (dout[at] - mean_d - xhat[at] * mean_dx); });
}

/* sum over values [lo, hi) of channel c of x (mean == NULL) or of (x - *mean)^2, on every thread */
__device__ static double channel_sum(const float *in, const double *mean, int c, size_t lo, size_t hi, const batchnorm_dims &d,
                                     double *sh)
{
    double s = 0.0;
    const double m = mean ? *mean : 0.0;
    for_channel(lo, hi, c, d, [&](size_t at) {
        double x = in[at];
        if (mean) { x -= m; x *= x; }
        s += x;
    });
    return ct_block_sum(s, sh);
}

/* ---- the plain (per-process) statistics: grid (channels of the chunk, S) ----
 * Block (b, s) works on channel c0 + b, values [M s / S, M (s + 1) / S). part holds two
 * sets of n*S partial sums: part[k*n*S + b*S + s]. */

__device__ static inline void share_of(size_t *lo, size_t *hi, size_t M, int s, int S)
{
    *lo = M * (size_t)s / (size_t)S;
    *hi = M * (size_t)(s + 1) / (size_t)S;
}

/* the S partials of chunk channel b in set k, added in order */
__device__ static inline double parts_sum(const double *part, int k, int b, int n, int S)
{
    const double *p = part + ((size_t)k * n + b) * S;
    double t = 0.0;
    for (int s = 0; s < S; s++) t += p[s];
    return t;
}

/* set `pass` of the partials: 0, the sums of x; 1, the sums of (x - mean)^2 with the mean from set 0 */
__global__ static void bn_stats_kernel(double *part, const float *in, int c0, int n, int S, int pass, batchnorm_dims d)
{
    __shared__ double sh[CT_THREADS];
    const int b = blockIdx.x, s = blockIdx.y;
    const size_t M = (size_t)d.N * d.HW;
    size_t lo, hi;
    share_of(&lo, &hi, M, s, S);
    double mean = 0.0;
    if (pass) mean = parts_sum(part, 0, b, n, S) / (double)M;
    const double t = channel_sum(in, pass ? &mean : NULL, c0 + b, lo, hi, d, sh);
    if (threadIdx.x == 0) part[((size_t)pass * n + b) * S + s] = t;
}

/* normalisation with this batch's statistics (train: from the partials) or the running ones */
__global__ static void bn_norm_kernel(float *out, float *xhat, float *mean, float *invstd, float *rmean, float *rvar,
                                      const float *in, const float *gamma, const float *beta, const double *part,
                                      int c0, int n, int S, batchnorm_dims d, int train)
{
    const int b = blockIdx.x, s = blockIdx.y, c = c0 + b;
    const size_t M = (size_t)d.N * d.HW;
    float mu, is;
    if (train) {
        const double m = parts_sum(part, 0, b, n, S) / (double)M, ss = parts_sum(part, 1, b, n, S);
        const double var = ss / (double)M, var_unb = M > 1 ? ss / (double)(M - 1) : var;
        mu = (float)m;
        is = (float)(1.0 / sqrt(var + (double)d.eps));
        if (s == 0 && threadIdx.x == 0) {
            rmean[c] = (1.0f - d.momentum) * rmean[c] + d.momentum * (float)m;
            rvar[c] = (1.0f - d.momentum) * rvar[c] + d.momentum * (float)var_unb;
        }
    } else {
        mu = rmean[c];
        is = (float)(1.0 / sqrt((double)rvar[c] + (double)d.eps));
    }
    if (s == 0 && threadIdx.x == 0) { mean[c] = mu; invstd[c] = is; }
    size_t lo, hi;
    share_of(&lo, &hi, M, s, S);
    normalise_channel(out, xhat, in, mu, is, gamma[c], beta[c], c, lo, hi, d);
}

/* partial (sum dout, sum dout xhat) per block, sets 0 and 1 */
__global__ static void bn_bwd_sums_kernel(double *part, const float *dout, const float *xhat, int c0, int n, int S, batchnorm_dims d)
{
    __shared__ double sh[CT_THREADS];
    const int b = blockIdx.x, s = blockIdx.y;
    size_t lo, hi;
    share_of(&lo, &hi, (size_t)d.N * d.HW, s, S);
    double sd, sdx;
    channel_grad_sums(&sd, &sdx, dout, xhat, c0 + b, lo, hi, d, sh);
    if (threadIdx.x == 0) { part[(size_t)b * S + s] = sd; part[((size_t)n + b) * S + s] = sdx; }
}

/* dbeta, dgamma += the channel's sums (block s = 0); din over the block's share */
__global__ static void bn_bwd_din_kernel(float *din, float *dgamma, float *dbeta, const double *part, const float *dout,
                                         const float *xhat, const float *invstd, const float *gamma, int c0, int n, int S,
                                         batchnorm_dims d)
{
    const int b = blockIdx.x, s = blockIdx.y, c = c0 + b;
    const size_t M = (size_t)d.N * d.HW;
    const double sd = parts_sum(part, 0, b, n, S), sdx = parts_sum(part, 1, b, n, S);
    if (s == 0 && threadIdx.x == 0) { dbeta[c] += (float)sd; dgamma[c] += (float)sdx; }
    if (!din) return;
    size_t lo, hi;
    share_of(&lo, &hi, M, s, S);
    din_channel(din, dout, xhat, gamma[c] * invstd[c], (float)(sd / (double)M), (float)(sdx / (double)M), c, lo, hi, d);
}

/* Calls launch(c0, n, S, grid) for each chunk of n channels from c0, grid = (n, S): S blocks per
 * channel, enough to fill the GPU several times over, none with fewer than 4096 values, and as
 * many channels per chunk as two sets of partials in the bn_sync buffer allow. */
template <class F>
static void for_chunks(const batchnorm_dims *d, F launch)
{
    const size_t M = (size_t)d->N * d->HW;
    int S = 1024 / (d->C > 0 ? d->C : 1);
    if (S > 32) S = 32;
    if ((size_t)S > M / 4096) S = (int)(M / 4096);
    if (S < 1) S = 1;
    const int chunk = CT_GPU_BN_SYNC / 2 / S;
    for (int c0 = 0; c0 < d->C; c0 += chunk) {
        const int n = d->C - c0 < chunk ? d->C - c0 : chunk;
        launch(c0, n, S, dim3((unsigned)n, (unsigned)S));
    }
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
    const double s = channel_sum(in, mean ? mean + b : NULL, c0 + b, 0, (size_t)d.N * d.HW, d, sh);
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
    normalise_channel(out, xhat, in, mu, is, gamma[c], beta[c], c, 0, (size_t)d.N * d.HW, d);
}

/* this replica's own sums: dbeta, dgamma += them; acc [2n] = (sum dout, sum dout xhat) */
__global__ static void bn_sync_bwd_sums_kernel(double *acc, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                               int c0, int n, batchnorm_dims d)
{
    __shared__ double sh[CT_THREADS];
    const int b = blockIdx.x;
    double sd, sdx;
    channel_grad_sums(&sd, &sdx, dout, xhat, c0 + b, 0, (size_t)d.N * d.HW, d, sh);
    if (threadIdx.x == 0) { dbeta[c0 + b] += (float)sd; dgamma[c0 + b] += (float)sdx; acc[b] = sd; acc[n + b] = sdx; }
}

/* din with the whole batch's means: means [2n] = (S_d, S_dx) / (M share) (layers/batchnorm.h) */
__global__ static void bn_sync_din_kernel(float *din, const float *dout, const float *xhat, const float *invstd, const float *gamma,
                                          const double *means, int c0, int n, batchnorm_dims d)
{
    const int b = blockIdx.x, c = c0 + b;
    din_channel(din, dout, xhat, gamma[c] * invstd[c], (float)means[b], (float)means[n + b], c, 0, (size_t)d.N * d.HW, d);
}

/* The n doubles at g->bn_sync + at, down to the same place of the pinned host buffer
 * (synchronises the stream: the host sums them over the replicas next). */
static double *download_doubles(ct_gpu *g, int at, int n)
{
    CT_CUDA_CHECK(cudaMemcpyAsync(g->host_bn_sync + at, g->bn_sync + at, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost, g->stream));
    CT_CUDA_CHECK(cudaStreamSynchronize(g->stream));
    return g->host_bn_sync + at;
}

/* and back up, queued on the stream before the kernels that read them */
static void upload_doubles(ct_gpu *g, int at, int n)
{
    CT_CUDA_CHECK(cudaMemcpyAsync(g->bn_sync + at, g->host_bn_sync + at, (size_t)n * sizeof(double), cudaMemcpyHostToDevice, g->stream));
}

/* Channels per chunk: the bn_sync buffers hold two doubles per channel. Every replica has
 * the same channels, so every replica makes the same sums in the same order. */
#define BN_SYNC_CHUNK (CT_GPU_BN_SYNC / 2)

static void forward_synced_gpu(ct_gpu *g, float *out, float *xhat, float *mean, float *invstd, float *running_mean,
                               float *running_var, const float *in, const float *gamma, const float *beta,
                               const batchnorm_dims *d)
{
    const ct_replica_sum *r = d->sync;
    const double M = (double)r->total_N * d->HW;   /* the whole batch's values per channel */
    for (int c0 = 0; c0 < d->C; c0 += BN_SYNC_CHUNK) {
        const int n = d->C - c0 < BN_SYNC_CHUNK ? d->C - c0 : BN_SYNC_CHUNK;
        bn_sync_pass_kernel<<<n, CT_THREADS, 0, g->stream>>>(g->bn_sync, NULL, in, c0, *d);
        CT_LAUNCH_CHECK();
        double *h = download_doubles(g, 0, n);
        r->sum(r->ctx, h, n);
        for (int c = 0; c < n; c++) h[c] /= M;   /* the whole batch's means */
        upload_doubles(g, 0, n);
        bn_sync_pass_kernel<<<n, CT_THREADS, 0, g->stream>>>(g->bn_sync + n, g->bn_sync, in, c0, *d);
        CT_LAUNCH_CHECK();
        r->sum(r->ctx, download_doubles(g, n, n), n);   /* the whole batch's summed squared deviations */
        upload_doubles(g, n, n);
        bn_sync_norm_kernel<<<n, CT_THREADS, 0, g->stream>>>(out, xhat, mean, invstd, running_mean, running_var, in, gamma, beta,
                                                              g->bn_sync, M, c0, n, *d);
        CT_LAUNCH_CHECK();
    }
}

static void backward_synced_gpu(ct_gpu *g, float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                                const float *invstd, const float *gamma, const batchnorm_dims *d)
{
    const ct_replica_sum *r = d->sync;
    const double M = (double)r->total_N * d->HW;
    for (int c0 = 0; c0 < d->C; c0 += BN_SYNC_CHUNK) {
        const int n = d->C - c0 < BN_SYNC_CHUNK ? d->C - c0 : BN_SYNC_CHUNK;
        bn_sync_bwd_sums_kernel<<<n, CT_THREADS, 0, g->stream>>>(g->bn_sync, dgamma, dbeta, dout, xhat, c0, n, *d);
        CT_LAUNCH_CHECK();
        if (!din) continue;
        double *h = download_doubles(g, 0, 2 * n);
        for (int i = 0; i < 2 * n; i++) h[i] *= r->share;   /* each replica's weight in the whole batch's loss */
        r->sum(r->ctx, h, 2 * n);
        for (int i = 0; i < 2 * n; i++) h[i] /= M * r->share;   /* S / (M share): the means this replica's dout needs */
        upload_doubles(g, 0, 2 * n);
        bn_sync_din_kernel<<<n, CT_THREADS, 0, g->stream>>>(din, dout, xhat, invstd, gamma, g->bn_sync, c0, n, *d);
        CT_LAUNCH_CHECK();
    }
}

extern "C" void ct_batchnorm_forward_gpu(const ct_backend *be, float *out, float *xhat, float *mean, float *invstd,
                                         float *running_mean, float *running_var, const float *in, const float *gamma,
                                         const float *beta, const batchnorm_dims *d, int train)
{
    ct_gpu *g = ct_gpu_of(be);
    if (train && d->sync) { forward_synced_gpu(g, out, xhat, mean, invstd, running_mean, running_var, in, gamma, beta, d); return; }
    for_chunks(d, [&](int c0, int n, int S, dim3 grid) {
        if (train) {
            bn_stats_kernel<<<grid, CT_THREADS, 0, g->stream>>>(g->bn_sync, in, c0, n, S, 0, *d);
            CT_LAUNCH_CHECK();
            bn_stats_kernel<<<grid, CT_THREADS, 0, g->stream>>>(g->bn_sync, in, c0, n, S, 1, *d);
            CT_LAUNCH_CHECK();
        }
        bn_norm_kernel<<<grid, CT_THREADS, 0, g->stream>>>(out, xhat, mean, invstd, running_mean, running_var, in, gamma, beta,
                                                           g->bn_sync, c0, n, S, *d, train);
        CT_LAUNCH_CHECK();
    });
}

extern "C" void ct_batchnorm_backward_gpu(const ct_backend *be, float *din, float *dgamma, float *dbeta, const float *dout,
                                          const float *xhat, const float *invstd, const float *gamma,
                                          const batchnorm_dims *d)
{
    ct_gpu *g = ct_gpu_of(be);
    if (d->sync) { backward_synced_gpu(g, din, dgamma, dbeta, dout, xhat, invstd, gamma, d); return; }
    for_chunks(d, [&](int c0, int n, int S, dim3 grid) {
        bn_bwd_sums_kernel<<<grid, CT_THREADS, 0, g->stream>>>(g->bn_sync, dout, xhat, c0, n, S, *d);
        CT_LAUNCH_CHECK();
        bn_bwd_din_kernel<<<grid, CT_THREADS, 0, g->stream>>>(din, dgamma, dbeta, g->bn_sync, dout, xhat, invstd, gamma, c0, n, S, *d);
        CT_LAUNCH_CHECK();
    });
}
