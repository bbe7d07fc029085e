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

typedef struct { int N, C, HW; float eps, momentum; } batchnorm_dims;
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

#endif
