/* optim.h - optimizers on the flat buffers, gradient clipping, learning-rate
 * schedules.
 *
 * Parameters, gradients and optimizer state share one layout (core/params.h),
 * so each update is ONE loop over n floats, whatever the model.
 * The formulas are PyTorch's (torch.optim), with Keras's defaults where the
 * seed used Keras:
 *
 * SGD (lr, momentum mu, nesterov, weight decay wd):
 *   g = grad + wd p;  if mu: m = mu m + g (m = g at step 1); g = nesterov ? g + mu m : m
 *   p -= lr g
 * RMSprop (Keras 2 defaults rho 0.9, eps 1e-7; PyTorch's alpha = rho):
 *   g = grad + wd p;  v = rho v + (1 - rho) g^2;  p -= lr g / (sqrt(v) + eps)
 * Adam (beta1 0.9, beta2 0.999, eps 1e-8), bias-corrected, step t = 1, 2, ...:
 *   g = grad + wd p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 * AdamW: as Adam with wd = 0 in g, but first p -= lr wd p (decoupled decay).
 *
 * Global-norm clipping (torch.nn.utils.clip_grad_norm_): norm = ||grad||_2 over
 * ALL parameters; if norm > max_norm, grad *= max_norm / (norm + 1e-6).
 */
#ifndef CT_OPTIM_H
#define CT_OPTIM_H
#include <stddef.h>
#include "core/error.h"

typedef enum { OPT_SGD, OPT_RMSPROP, OPT_ADAM, OPT_ADAMW } ct_optim_kind;

typedef struct {
    ct_optim_kind kind;
    float lr;
    float momentum; int nesterov;   /* SGD */
    float rho;                      /* RMSprop */
    float beta1, beta2;             /* Adam, AdamW */
    float eps;                      /* RMSprop, Adam, AdamW */
    float weight_decay;             /* L2 for SGD/RMSprop/Adam, decoupled for AdamW */
    float clip_norm;                /* global-norm clipping before the update; 0 = off */
} ct_optim_config;

typedef struct {
    ct_optim_config cfg;
    size_t n;
    float *m;       /* [n] SGD momentum buffer / Adam first moment (NULL if unused) */
    float *v;       /* [n] RMSprop mean square / Adam second moment (NULL if unused) */
    long step;      /* updates done so far */
    void *dev;      /* device scratch of a GPU optimizer (cuda/kernels.h); NULL on the CPU */
} ct_optim;

/* Defaults: SGD lr 0.01; RMSprop lr 1e-3 rho 0.9 eps 1e-7; Adam/AdamW lr 1e-3
 * betas 0.9/0.999 eps 1e-8 (AdamW wd 0.01); no clipping. */
ct_optim_config ct_optim_defaults(ct_optim_kind kind);
/* Parses "sgd", "rmsprop", "adam", "adamw" (error names the accepted values). */
ct_status ct_optim_parse(ct_optim_kind *kind, const char *name);
const char *ct_optim_name(ct_optim_kind kind);
/* Validates the fields the kind uses (CT_EINVAL naming the field and its range;
 * nesterov also needs momentum > 0, as in torch), then allocates m/v as needed.
 * On failure o holds no memory (ct_optim_free is still safe). */
ct_status ct_optim_init(ct_optim *o, const ct_optim_config *cfg, size_t n);   /* state zeroed */
void      ct_optim_free(ct_optim *o);
/* One update of param [n] with grad [n] at learning rate lr (from a schedule).
 * Clips grad in place first when cfg.clip_norm > 0. */
void      ct_optim_step(ct_optim *o, float *param, float *grad, float lr);
/* Returns the global L2 norm before clipping (accumulated in double). Exactly
 * torch's test: scales when max_norm / (norm + 1e-6) < 1. max_norm <= 0 only
 * measures the norm; a NaN/Inf norm is returned and grad is left untouched. */
float     ct_clip_grad_norm(float *grad, size_t n, float max_norm);

/* Learning-rate schedules, as functions of the epoch (or step) index t = 0, 1, ...
 *   constant: base_lr
 *   step:     base_lr * gamma^floor(t / step_size)                        (StepLR)
 *   cosine:   eta_min + (base_lr - eta_min) (1 + cos(pi min(t, t_max) / t_max)) / 2  (CosineAnnealingLR)
 */
typedef enum { SCHED_CONSTANT, SCHED_STEP, SCHED_COSINE } ct_sched_kind;
typedef struct {
    ct_sched_kind kind;
    float base_lr;
    int step_size; float gamma;     /* step */
    int t_max; float eta_min;       /* cosine */
} ct_sched;
/* t < 0 counts as 0; step_size < 1 or t_max < 1 give the constant schedule
 * (this function cannot report errors: validate user values before). */
float ct_sched_lr(const ct_sched *s, long t);

#endif
