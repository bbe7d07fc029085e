/* batchnorm.h - batch normalisation over [N, C, HW] (HW = H*W for conv
 * features, 1 after a dense layer), per channel c:
 *
 * train:  mu_c = mean over (n, hw),  var_c = biased variance over (n, hw)
 *         xhat = (x - mu_c) / sqrt(var_c + eps),   out = gamma_c xhat + beta_c
 *         running_mean = (1 - momentum) running_mean + momentum mu_c
 *         running_var  = (1 - momentum) running_var  + momentum var_c * M/(M-1)   (M = N*HW, unbiased)
 * eval:   xhat = (x - running_mean) / sqrt(running_var + eps)
 *
 * momentum and eps follow PyTorch (0.1, 1e-5); Keras's momentum 0.99 is
 * PyTorch's 0.01. gamma [C] init 1 and beta [C] init 0 are trainable; the
 * running statistics are state (saved, not trained): register them in the
 * model's buffer store.
 *
 * backward (train mode), with M = N*HW and g = dout * gamma:
 *   din = invstd / M * (M g - sum(g) - xhat sum(g xhat))      (sums over n, hw of channel c)
 *   dgamma += sum(dout xhat),  dbeta += sum(dout)
 */
#ifndef CT_BATCHNORM_H
#define CT_BATCHNORM_H
#include "core/params.h"
#include "layers/pool.h"

/* Synchronised batch normalisation (data-parallel training, train/dist.h): this batch of
 * N rows is one replica's part of a batch of total_N rows spread over several replicas,
 * and the statistics are the whole batch's. sum(ctx, buf, n) replaces the host doubles
 * buf [n] by their sum over the replicas (every replica calls it at the same points);
 * share = this replica's weight in the loss, N / total_N. With it, train mode computes:
 *   mu_c  = (sum over replicas of sum x) / M,          M = total_N * HW
 *   var_c = (sum over replicas of sum (x - mu_c)^2) / M
 *   din   = gamma invstd (dout - S_d / (M share) - xhat S_dx / (M share)),
 *           S_d = sum over replicas of share_r sum dout,  S_dx likewise with dout xhat
 * which is the single-batch formula for the gradient of the whole batch's mean loss, each
 * replica's dout being the gradient of its own rows' mean loss. dgamma, dbeta stay the
 * replica's own sums (the gradient all-reduce adds them, weighted by share). */
typedef struct {
    int (*sum)(void *ctx, double *buf, int n);   /* returns 0, or non-zero when the replicas stopped answering */
    void *ctx;
    int total_N;
    double share;
} ct_replica_sum;

typedef struct {
    int N, C, HW; float eps, momentum;
    const ct_replica_sum *sync;   /* NULL: this batch's own statistics (both devices: cuda/batchnorm.cu) */
    /* CPU, train mode, no sync: NULL, or the input's planes' statistics [N, C, 2] as
     * ct_batchnorm_plane_stats gives them, taken by the layer that wrote the input (a
     * convolution, while its output was in the cache): the statistics are then merged from
     * them without reading the input (the same bits where that layer called
     * ct_batchnorm_plane_stats on each plane). */
    const double *plane_stats;
} batchnorm_dims;

/* Statistics of values taken a run at a time, in double: their count, mean and squared
 * deviations about the mean. ct_bn_stats_add merges in a run of n values (its own mean and
 * squared deviations, two passes over the run, then Chan, Golub and LeVeque's update; the
 * error is bounded in batchnorm.c). Start from { 0 }. */
typedef struct { double count, mean, ss; } ct_bn_stats;
void ct_bn_stats_add(ct_bn_stats *a, const float *x, int n);

/* One plane [n, c] of HW values as one run: st[0] = its mean, st[1] = the squared
 * deviations about it (batchnorm.c merges the planes over n). A layer that makes the plane a
 * block of rows at a time may add the blocks instead: the same statistics to within the
 * bound, not the same bits. */
void ct_batchnorm_plane_stats(double *st, const float *x, int HW);
/* The same for `planes` consecutive planes x [planes, HW]: st [planes, 2] (a convolution's
 * output channels of one image). */
void ct_batchnorm_planes_stats(double *st, const float *x, int planes, int HW);
typedef struct { int gamma, beta, running_mean, running_var; } batchnorm_ids;

/* gamma, beta in `ps` (trainable); running_mean (0), running_var (1) in `buffers`. */
ct_status ct_batchnorm_params_add(batchnorm_ids *ids, ct_params *ps, ct_params *buffers, const char *prefix, int C);

/* out, xhat [N, C, HW]; mean, invstd [C] (batch statistics, kept for backward);
 * running_mean/var [C] updated in train mode only. In eval mode mean/invstd
 * receive the running statistics used. Train mode with M = N*HW = 1 (PyTorch
 * refuses it) normalises to beta and feeds the biased variance (0) to running_var. */
void ct_batchnorm_forward(float *out, float *xhat, float *mean, float *invstd, float *running_mean, float *running_var,
                       const float *in, const float *gamma, const float *beta, const batchnorm_dims *d, int train);
/* din [N, C, HW] overwritten (NULL: not computed); dgamma, dbeta accumulated. Train mode only. */
void ct_batchnorm_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *xhat,
                        const float *invstd, const float *gamma, const batchnorm_dims *d);

/* Batchnorm, then max pooling over its output, without that output or xhat in memory:
 * pooled and argmax [N, C, OH, OW] are what ct_maxpool2d_forward gives on the batchnorm's
 * output (argmax indexes [N, C, H, W]); mean, invstd and the running statistics what
 * ct_batchnorm_forward gives. relu = 1: a relu after the pool as well (pooled = its output;
 * argmax -1 where it is 0, so that the backward below is the relu's, the pool's and the
 * batchnorm's: layers/pool.h, ct_maxpool2d_plane). Bit for bit the layers' results. Needs
 * ct_batchnorm_maxpool_fits(d, pd): no synchronised statistics, pd over d's maps, planes of
 * at most 8,192 values. */
int  ct_batchnorm_maxpool_fits(const batchnorm_dims *d, const maxpool2d_dims *pd);
void ct_batchnorm_maxpool_forward(float *pooled, int *argmax, float *mean, float *invstd, float *running_mean,
                                  float *running_var, const float *in, const float *gamma, const float *beta,
                                  const batchnorm_dims *d, const maxpool2d_dims *pd, int relu, int train);
/* The pair's backward from dpooled [N, C, OH, OW], with the forward pass's input `in`, mean
 * and invstd (xhat is remade from them): din [N, C, H, W] overwritten (NULL: not computed),
 * dgamma and dbeta accumulated; bit for bit (ct_relu_backward,) ct_maxpool2d_backward, then
 * ct_batchnorm_backward. sums: a workspace of ct_batchnorm_chain_sums_doubles(d), which
 * keeps, after the call, each channel's sums over the batch of the gradient at the
 * batchnorm's output g and of g xhat, for ct_batchnorm_maxpool_din_plane. */
size_t ct_batchnorm_chain_sums_doubles(const batchnorm_dims *d);
void ct_batchnorm_maxpool_backward(float *din, float *dgamma, float *dbeta, double *sums, const float *dpooled,
                                   const int *argmax, const float *in, const float *mean, const float *invstd,
                                   const float *gamma, const batchnorm_dims *d, const maxpool2d_dims *pd);
/* din a plane at a time, for a layer before the pair that takes it so (conv2d.h,
 * ct_conv2d_backward_planes: a first convolution's weight gradient), so that din is never
 * written: after ct_batchnorm_maxpool_backward(NULL, ..., sums, ...),
 * ct_batchnorm_maxpool_din_plane(src, din_nc, n, c) makes plane [n, c] of din (HW values) in
 * din_nc, the bits ct_batchnorm_maxpool_backward writes there. src is a ct_bn_pool_din
 * naming that call's arguments. Its signature is ct_conv2d_plane_fn's. */
typedef struct {
    const float *dpooled; const int *argmax;    /* [N, C, OH, OW] */
    const float *in;                             /* the batchnorm's input [N, C, H, W] */
    const float *mean, *invstd, *gamma;          /* [C] */
    const double *sums;                          /* as ct_batchnorm_maxpool_backward left them */
    const batchnorm_dims *d;
    const maxpool2d_dims *pd;
} ct_bn_pool_din;
void ct_batchnorm_maxpool_din_plane(const void *src, float *din_nc, int n, int c);

/* Batchnorm, then (relu = 1: a relu, then) the mean over H, without the batchnorm's output,
 * xhat or the relu's output in memory: pooled [N, C, W] is what ct_avgpool_h_forward gives
 * on the (relu'd) batchnorm output [N, C, H, W]; mean, invstd and the running statistics
 * what ct_batchnorm_forward gives. The global average pooling is the same with H = HW and
 * W = 1 (pooled [N, C]). Bit for bit the layers' results. Needs
 * ct_batchnorm_avgpool_h_fits(d, H, W): no synchronised statistics, H W = d->HW, planes of
 * at most 8,192 values. */
int  ct_batchnorm_avgpool_h_fits(const batchnorm_dims *d, int H, int W);
void ct_batchnorm_avgpool_h_forward(float *pooled, float *mean, float *invstd, float *running_mean, float *running_var,
                                    const float *in, const float *gamma, const float *beta, const batchnorm_dims *d,
                                    int H, int W, int relu, int train);
/* Its backward from dpooled [N, C, W], with the forward pass's input `in`, mean and invstd
 * (xhat and, for the relu, the output are remade from them): din [N, C, H, W] overwritten
 * (NULL: not computed), dgamma and dbeta accumulated; bit for bit ct_avgpool_h_backward,
 * ct_relu_backward, then ct_batchnorm_backward. sums: a workspace of
 * ct_batchnorm_chain_sums_doubles(d). */
void ct_batchnorm_avgpool_h_backward(float *din, float *dgamma, float *dbeta, double *sums, const float *dpooled,
                                     const float *in, const float *mean, const float *invstd, const float *gamma,
                                     const float *beta, const batchnorm_dims *d, int H, int W, int relu);

#endif
