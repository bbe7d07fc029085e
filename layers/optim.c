/* optim.c - the optimizers (SGD, RMSprop, Adam, AdamW), global-norm gradient
 * clipping and the learning-rate schedules of layers/optim.h.
 *
 * Every update is ONE loop over the n floats of the flat parameter buffer:
 * parameters, gradients and the optimizer state m, v share the layout of
 * core/params.h, so the loops know nothing about layers. Scalars that depend on
 * the step (bias corrections, 1 - beta) are formed once per step, in double, as
 * PyTorch forms them in Python, then rounded to float for the loop, so the loop
 * body is plain float arithmetic that the compiler vectorises (the RMSprop and
 * Adam loops only with -fno-math-errno: otherwise GCC keeps a scalar errno path
 * for sqrtf, although v >= 0 never takes it).
 *
 * The loop is cut into one contiguous range per worker thread; each float's
 * update reads and writes only that float, so the split changes no result.
 *
 * Padding floats of the buffer have p = 0 and grad = 0; every update below maps
 * (p, grad, m, v) = (0, 0, 0, 0) to itself, so padding stays zero.
 */
#include "layers/optim.h"

#include <math.h>
#include <stdlib.h>
#include <strings.h>
#include "core/hot.h"
#include "core/threads.h"

static const double optim_pi = 3.14159265358979323846;

/* ---- configuration ---- */

ct_optim_config ct_optim_defaults(ct_optim_kind kind)
{
    ct_optim_config c = {
        .kind = kind, .lr = 1e-3f,
        .momentum = 0.0f, .nesterov = 0,
        .rho = 0.9f,
        .beta1 = 0.9f, .beta2 = 0.999f,
        .eps = 1e-8f,
        .weight_decay = 0.0f,
        .clip_norm = 0.0f,
    };
    switch (kind) {
    case OPT_SGD:     c.lr = 0.01f; break;
    case OPT_RMSPROP: c.eps = 1e-7f; break;          /* Keras's epsilon */
    case OPT_ADAM:    break;
    case OPT_ADAMW:   c.weight_decay = 0.01f; break; /* torch.optim.AdamW's default */
    }
    return c;
}

static const char *const optim_names[] = { "sgd", "rmsprop", "adam", "adamw" };
#define OPTIM_KINDS ((int)(sizeof optim_names / sizeof optim_names[0]))

ct_status ct_optim_parse(ct_optim_kind *kind, const char *name)
{
    for (int k = 0; name && k < OPTIM_KINDS; k++)
        if (strcasecmp(name, optim_names[k]) == 0) { *kind = (ct_optim_kind)k; return CT_OK; }
    return ct_fail(CT_EINVAL, "unknown optimizer '%s': expected one of sgd, rmsprop, adam, adamw",
                   name ? name : "(null)");
}

const char *ct_optim_name(ct_optim_kind kind)
{
    return ((int)kind >= 0 && (int)kind < OPTIM_KINDS) ? optim_names[kind] : "unknown";
}

/* Checks the fields the kind uses. Comparisons are written so that NaN fails
 * them (every comparison with NaN is false). */
static ct_status optim_validate(const ct_optim_config *c)
{
    if ((int)c->kind < 0 || (int)c->kind >= OPTIM_KINDS)
        return ct_fail(CT_EINVAL, "optimizer kind %d is not one of sgd, rmsprop, adam, adamw", (int)c->kind);
    const char *opt = ct_optim_name(c->kind);
    if (!(c->lr > 0.0f && isfinite(c->lr)))
        return ct_fail(CT_EINVAL, "%s: lr = %g: the learning rate must be > 0 and finite", opt, c->lr);
    if (!(c->weight_decay >= 0.0f && isfinite(c->weight_decay)))
        return ct_fail(CT_EINVAL, "%s: weight_decay = %g: must be >= 0 and finite (0 = off)", opt, c->weight_decay);
    if (!(c->clip_norm >= 0.0f && isfinite(c->clip_norm)))
        return ct_fail(CT_EINVAL, "%s: clip_norm = %g: must be >= 0 and finite (0 = no clipping)", opt, c->clip_norm);
    switch (c->kind) {
    case OPT_SGD:
        if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
            return ct_fail(CT_EINVAL, "sgd: momentum = %g: must be in [0, 1)", c->momentum);
        if (c->nesterov && c->momentum == 0.0f)
            return ct_fail(CT_EINVAL, "sgd: nesterov needs momentum in (0, 1); momentum is 0");
        break;
    case OPT_RMSPROP:
        if (!(c->rho >= 0.0f && c->rho < 1.0f))
            return ct_fail(CT_EINVAL, "rmsprop: rho = %g: must be in [0, 1)", c->rho);
        break;
    case OPT_ADAM:
    case OPT_ADAMW:
        if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
            return ct_fail(CT_EINVAL, "%s: beta1 = %g: must be in [0, 1)", opt, c->beta1);
        if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
            return ct_fail(CT_EINVAL, "%s: beta2 = %g: must be in [0, 1)", opt, c->beta2);
        break;
    }
    if (c->kind != OPT_SGD && !(c->eps > 0.0f && isfinite(c->eps)))
        return ct_fail(CT_EINVAL, "%s: eps = %g: must be > 0 and finite", opt, c->eps);
    return CT_OK;
}

ct_status ct_optim_init(ct_optim *o, const ct_optim_config *cfg, size_t n)
{
    o->m = o->v = NULL;
    o->dev = NULL;
    o->n = n;
    o->step = 0;
    o->cfg = *cfg;
    CT_TRY(optim_validate(cfg));
    /* which state the kind needs: SGD m only with momentum, RMSprop v, Adam(W) both */
    int need_m = (cfg->kind == OPT_SGD && cfg->momentum > 0.0f) || cfg->kind == OPT_ADAM || cfg->kind == OPT_ADAMW;
    int need_v = cfg->kind != OPT_SGD;
    if (need_m && !(o->m = ct_alloc_aligned(n * sizeof(float), "optimizer first moment"))) return CT_ENOMEM;
    if (need_v && !(o->v = ct_alloc_aligned(n * sizeof(float), "optimizer second moment"))) {
        ct_optim_free(o);
        return CT_ENOMEM;
    }
    return CT_OK;   /* ct_alloc_aligned zeroes: m = v = 0 */
}

void ct_optim_free(ct_optim *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

/* ---- clipping ----
 * torch.nn.utils.clip_grad_norm_: norm = sqrt(sum_i g_i^2) over the whole flat
 * buffer (all parameters), accumulated in double so that a million squares do
 * not lose digits; coef = max_norm / (norm + 1e-6); if coef < 1, g *= coef.
 * (coef < 1 is torch's test, i.e. norm > max_norm - 1e-6.)
 * max_norm <= 0 only measures the norm. A NaN/Inf norm is returned as is and the
 * gradient is left alone: the caller decides what a non-finite gradient means. */
float ct_clip_grad_norm(float *grad, size_t n, float max_norm)
{
    double sumsq = 0.0;
    for (size_t i = 0; i < n; i++) sumsq += (double)grad[i] * grad[i];
    double norm = sqrt(sumsq);
    if (max_norm > 0.0f && isfinite(norm)) {
        double coef = (double)max_norm / (norm + 1e-6);
        if (coef < 1.0) {
            float c = (float)coef;
            for (size_t i = 0; i < n; i++) grad[i] *= c;
        }
    }
    return (float)norm;
}

/* ---- the updates ---- */

/* SGD: g = grad + wd p;  with momentum mu: m = mu m + g  (m starts at 0, so
 * m = g at step 1, which is torch's buf = g.clone());  the direction is
 * g + mu m (Nesterov) or m (heavy ball);  p -= lr direction. */
CT_HOT
static void sgd_step(const ct_optim *o, float *p, const float *grad, float lr, size_t lo, size_t hi)
{
    const float wd = o->cfg.weight_decay, mu = o->cfg.momentum;
    if (!o->m) {
        for (size_t i = lo; i < hi; i++) {
            float g = grad[i] + wd * p[i];
            p[i] -= lr * g;
        }
        return;
    }
    float *m = o->m;
    const int nesterov = o->cfg.nesterov;
    for (size_t i = lo; i < hi; i++) {
        float g = grad[i] + wd * p[i];
        m[i] = mu * m[i] + g;
        float d = nesterov ? g + mu * m[i] : m[i];
        p[i] -= lr * d;
    }
}

/* RMSprop (torch.optim.RMSprop, alpha = rho, centered = False, momentum = 0):
 * g = grad + wd p;  v = rho v + (1 - rho) g^2;  p -= lr g / (sqrt(v) + eps).
 * eps is added AFTER the square root, as in torch (Keras 2 does the same). */
CT_HOT
static void rmsprop_step(const ct_optim *o, float *p, const float *grad, float lr, size_t lo, size_t hi)
{
    const float wd = o->cfg.weight_decay, rho = o->cfg.rho, eps = o->cfg.eps;
    const float one_minus_rho = (float)(1.0 - (double)rho);
    float *v = o->v;
    for (size_t i = lo; i < hi; i++) {
        float g = grad[i] + wd * p[i];
        v[i] = rho * v[i] + one_minus_rho * g * g;
        p[i] -= lr * (g / (sqrtf(v[i]) + eps));
    }
}

/* Adam / AdamW at step t (1, 2, ...), as torch.optim.Adam / AdamW compute it:
 *   AdamW only: p *= 1 - lr wd            (decoupled decay; wd is not in g)
 *   Adam only:  g = grad + wd p           (L2 penalty in the gradient)
 *   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
 *   m_hat / (sqrt(v_hat) + eps) with m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t),
 *   written as torch does:  p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * so eps is added to the bias-corrected root, not to the raw one. */
CT_HOT
static void adam_step(const ct_optim *o, float *p, const float *grad, float lr, size_t lo, size_t hi)
{
    const double b1 = o->cfg.beta1, b2 = o->cfg.beta2, t = (double)o->step;
    const float beta1 = o->cfg.beta1, beta2 = o->cfg.beta2, eps = o->cfg.eps;
    const float one_minus_b1 = (float)(1.0 - b1), one_minus_b2 = (float)(1.0 - b2);
    const float step_size = (float)((double)lr / (1.0 - pow(b1, t)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(b2, t));
    const int decoupled = o->cfg.kind == OPT_ADAMW;
    const float wd_grad = decoupled ? 0.0f : o->cfg.weight_decay;
    const float decay = decoupled ? (float)(1.0 - (double)lr * o->cfg.weight_decay) : 1.0f;
    float *m = o->m, *v = o->v;
    for (size_t i = lo; i < hi; i++) {
        float pi = p[i] * decay;                 /* AdamW; decay = 1 for Adam */
        float g = grad[i] + wd_grad * pi;        /* Adam;  wd_grad = 0 for AdamW */
        m[i] = beta1 * m[i] + one_minus_b1 * g;
        v[i] = beta2 * v[i] + one_minus_b2 * g * g;
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] = pi - step_size * (m[i] / denom);
    }
}

/* One step's update of the floats [lo, hi): every float is updated on its own,
 * so the buffer is cut into one range per worker (core/threads.h:
 * ct_parallel_range) and the result is the same on any number of threads. */
typedef struct {
    const ct_optim *o;
    float *param;
    const float *grad;
    float lr;
} optim_job;

static void optim_step_range(void *ctx, size_t lo, size_t hi)
{
    const optim_job *j = ctx;
    switch (j->o->cfg.kind) {
    case OPT_SGD:     sgd_step(j->o, j->param, j->grad, j->lr, lo, hi); break;
    case OPT_RMSPROP: rmsprop_step(j->o, j->param, j->grad, j->lr, lo, hi); break;
    case OPT_ADAM:
    case OPT_ADAMW:   adam_step(j->o, j->param, j->grad, j->lr, lo, hi); break;
    }
}

void ct_optim_step(ct_optim *o, float *param, float *grad, float lr)
{
    CT_ASSERT(o && (o->n == 0 || (param && grad)));
    if (o->cfg.clip_norm > 0.0f) ct_clip_grad_norm(grad, o->n, o->cfg.clip_norm);
    o->step++;
    optim_job j = { .o = o, .param = param, .grad = grad, .lr = lr };
    ct_parallel_range(o->n, o->n, optim_step_range, &j);
}

/* ---- learning-rate schedules ----
 * Closed forms, evaluated in double. t < 0 counts as 0. Values that make no
 * sense (step_size < 1, t_max < 1) cannot be reported from here, so they give
 * the constant schedule; the caller (the CLI) validates them. */
float ct_sched_lr(const ct_sched *s, long t)
{
    if (t < 0) t = 0;
    double base = s->base_lr;
    switch (s->kind) {
    case SCHED_CONSTANT:
        return s->base_lr;
    case SCHED_STEP:      /* StepLR: base gamma^floor(t / step_size) */
        if (s->step_size < 1) return s->base_lr;
        return (float)(base * pow((double)s->gamma, (double)(t / s->step_size)));
    case SCHED_COSINE: {  /* CosineAnnealingLR over 0..t_max, then held at eta_min */
        if (s->t_max < 1) return s->base_lr;
        double tt = t < s->t_max ? (double)t : (double)s->t_max;
        double eta_min = s->eta_min;
        return (float)(eta_min + (base - eta_min) * (1.0 + cos(optim_pi * tt / s->t_max)) / 2.0);
    }
    }
    return s->base_lr;
}
