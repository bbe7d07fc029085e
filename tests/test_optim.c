/* test_optim.c - tests of layers/optim.c:
 *   1. PyTorch parity (tests/golden/optim_*.h5 from tests/golden_gen/gen_optim.py):
 *      three steps of every optimizer configuration, with and without global-norm
 *      clipping, on parameter vectors of 37 and 1000 floats; clip_grad_norm_ on
 *      its own; the StepLR and CosineAnnealingLR learning-rate sequences.
 *   2. An analytic check: every optimizer minimises the convex quadratic
 *      f(p) = 1/2 sum_i a_i (p_i - c_i)^2 (gradient a_i (p_i - c_i), computed here)
 *      to its known minimiser, and entries whose gradient is always zero (padding,
 *      frozen values) are left alone.
 *   3. Validation: every bad configuration field is refused with CT_EINVAL and a
 *      message naming the field; unknown optimizer names are refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/threads.h"
#include "layers/optim.h"

/* Parity tolerance: the same float32 math as torch, step for step; what differs
 * is rounding order (torch's scalar handling, the clipping norm in float vs our
 * double), a few ulps of parameters of size ~1, so 1e-6 normalised. */
#define PARITY_TOL 1e-6

/* ---- 1. PyTorch parity ---- */

typedef struct {
    const char *file;     /* optim_<file>.h5 */
    const char *name;     /* configuration name in the file and in gen_optim.py */
    const char *label;    /* case label */
    ct_optim_config cfg;
} parity_cfg;

static ct_optim_config cfg_make(ct_optim_kind kind, float lr, float wd)
{
    ct_optim_config c = ct_optim_defaults(kind);
    c.lr = lr;
    c.weight_decay = wd;
    return c;
}

/* The configurations of gen_optim.py's CONFIGS, field for field. */
static int parity_cfgs(parity_cfg *out)
{
    int k = 0;
    ct_optim_config c;
    c = cfg_make(OPT_SGD, 0.1f, 0.0f);
    out[k++] = (parity_cfg){ "sgd", "sgd_plain", "plain", c };
    c.momentum = 0.9f;
    out[k++] = (parity_cfg){ "sgd", "sgd_momentum", "momentum 0.9", c };
    c.nesterov = 1;
    out[k++] = (parity_cfg){ "sgd", "sgd_nesterov", "nesterov 0.9", c };
    c.nesterov = 0; c.weight_decay = 0.05f;
    out[k++] = (parity_cfg){ "sgd", "sgd_wd", "momentum 0.9 wd=0.05", c };

    c = cfg_make(OPT_RMSPROP, 0.01f, 0.0f);
    c.rho = 0.9f; c.eps = 1e-7f;
    out[k++] = (parity_cfg){ "rmsprop", "rmsprop", "rho 0.9 eps 1e-7", c };
    c.weight_decay = 0.05f;
    out[k++] = (parity_cfg){ "rmsprop", "rmsprop_wd", "rho 0.9 eps 1e-7 wd=0.05", c };

    c = cfg_make(OPT_ADAM, 0.05f, 0.0f);
    out[k++] = (parity_cfg){ "adam", "adam", "betas 0.9/0.999", c };
    c.beta1 = 0.8f; c.beta2 = 0.99f; c.eps = 1e-3f; c.weight_decay = 0.05f;
    out[k++] = (parity_cfg){ "adam", "adam_wd", "betas 0.8/0.99 eps 1e-3 wd=0.05", c };

    c = cfg_make(OPT_ADAMW, 0.05f, 0.01f);
    out[k++] = (parity_cfg){ "adamw", "adamw_wd0.01", "wd=0.01", c };
    c.weight_decay = 0.1f;
    out[k++] = (parity_cfg){ "adamw", "adamw_wd0.1", "wd=0.1", c };
    return k;
}

static void test_parity_steps(void)
{
    static const size_t sizes[2] = { 37, 1000 };
    parity_cfg cfgs[16];
    int ncfg = parity_cfgs(cfgs);
    hid_t in = t_golden_open("optim_inputs.h5");
    /* inputs: p0 and the gradients of steps 1..3, per size */
    float *p0[2], *g[2][3];
    char name[128];
    for (int s = 0; s < 2; s++) {
        snprintf(name, sizeof name, "n%zu_p0", sizes[s]);
        p0[s] = t_golden(in, name, sizes[s]);
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "n%zu_g%d", sizes[s], k + 1);
            g[s][k] = t_golden(in, name, sizes[s]);
        }
    }
    if (in >= 0) H5Fclose(in);
    for (int clip = 0; clip < 2; clip++) {
        for (int c = 0; c < ncfg; c++) {
            const parity_cfg *pc = &cfgs[c];
            if (clip) t_case("optim/clip/parity torch 3 steps %s %s", pc->file, pc->label);
            else      t_case("optim/%s/parity torch 3 steps %s", pc->file, pc->label);
            snprintf(name, sizeof name, "optim_%s.h5", pc->file);
            hid_t f = t_golden_open(name);
            ct_optim_config cfg = pc->cfg;
            if (clip) cfg.clip_norm = (float)t_golden_attr(f, "clip");
            for (int s = 0; s < 2; s++) {
                size_t n = sizes[s];
                float *p = t_alloc(n), *grad = t_alloc(n);
                memcpy(p, p0[s], n * sizeof *p);
                ct_optim o;
                t_check(ct_optim_init(&o, &cfg, n) == CT_OK, "init: %s", ct_last_error());
                for (int k = 0; k < 3; k++) {
                    memcpy(grad, g[s][k], n * sizeof *grad);   /* clipping scales grad in place */
                    ct_optim_step(&o, p, grad, cfg.lr);
                    snprintf(name, sizeof name, "%s%s_n%zu_p%d", pc->name, clip ? "_clip" : "", n, k + 1);
                    float *want = t_golden(f, name, n);
                    t_close(name, p, want, n, PARITY_TOL);
                    free(want);
                }
                t_check(o.step == 3, "step counter %ld after 3 steps", o.step);
                ct_optim_free(&o);
                free(p); free(grad);
            }
            if (f >= 0) H5Fclose(f);
        }
    }
    for (int s = 0; s < 2; s++) {
        free(p0[s]);
        for (int k = 0; k < 3; k++) free(g[s][k]);
    }
}

static void test_parity_clip(void)
{
    t_case("optim/clip/parity torch clip_grad_norm_");
    const size_t n = 1000;
    hid_t in = t_golden_open("optim_inputs.h5"), f = t_golden_open("optim_clip.h5");
    float *g = t_golden(in, "n1000_g1", n);
    float *clipped = t_golden(f, "clipped", n), *unclipped = t_golden(f, "unclipped", n);
    float max_norm = (float)t_golden_attr(f, "max_norm"), big = (float)t_golden_attr(f, "big_max_norm");
    float want_norm = (float)t_golden_attr(f, "norm");
    float *x = t_alloc(n);

    memcpy(x, g, n * sizeof *x);
    float norm = ct_clip_grad_norm(x, n, max_norm);
    t_close("norm returned", &norm, &want_norm, 1, PARITY_TOL);
    t_close("clipped gradient", x, clipped, n, PARITY_TOL);
    /* after clipping, the norm is max_norm (less the 1e-6 of the formula) */
    float after = ct_clip_grad_norm(x, n, 0.0f);
    t_close("norm after clipping", &after, &max_norm, 1, PARITY_TOL);

    memcpy(x, g, n * sizeof *x);
    norm = ct_clip_grad_norm(x, n, big);
    t_close("norm returned, no clipping", &norm, &want_norm, 1, PARITY_TOL);
    t_check(memcmp(x, unclipped, n * sizeof *x) == 0 && memcmp(x, g, n * sizeof *x) == 0,
            "max_norm above the norm must leave the gradient bit for bit unchanged");

    free(g); free(clipped); free(unclipped); free(x);
    if (in >= 0) H5Fclose(in);
    if (f >= 0) H5Fclose(f);
}

static void test_parity_sched(void)
{
    hid_t f = t_golden_open("optim_sched.h5");
    int epochs = (int)t_golden_attr(f, "epochs");
    if (epochs <= 0 || epochs > 1000) { t_check(0, "bad epochs attribute %d", epochs); epochs = 1; }
    size_t n = (size_t)epochs + 1;
    ct_sched step = { .kind = SCHED_STEP, .base_lr = (float)t_golden_attr(f, "base_lr"),
                      .step_size = (int)t_golden_attr(f, "step_size"), .gamma = (float)t_golden_attr(f, "gamma") };
    ct_sched cosine = { .kind = SCHED_COSINE, .base_lr = step.base_lr,
                        .t_max = (int)t_golden_attr(f, "t_max"), .eta_min = (float)t_golden_attr(f, "eta_min") };
    float *got = t_alloc(n);

    t_case("optim/sched/step parity torch");
    float *want = t_golden(f, "step_lr", n);
    for (size_t t = 0; t < n; t++) got[t] = ct_sched_lr(&step, (long)t);
    t_close("StepLR lr(t), t = 0..epochs", got, want, n, PARITY_TOL);
    free(want);

    t_case("optim/sched/cosine parity torch");
    want = t_golden(f, "cosine_lr", n);
    for (size_t t = 0; t < n; t++) got[t] = ct_sched_lr(&cosine, (long)t);
    t_close("CosineAnnealingLR lr(t), t = 0..t_max", got, want, n, PARITY_TOL);
    free(want);

    t_case("optim/sched/constant, and cosine held after t_max");
    ct_sched constant = { .kind = SCHED_CONSTANT, .base_lr = 0.25f };
    int ok = 1;
    for (long t = 0; t < 100; t++) ok &= ct_sched_lr(&constant, t) == 0.25f;
    t_check(ok, "the constant schedule must return base_lr at every t");
    for (long t = cosine.t_max; t < cosine.t_max + 50; t++) ok &= ct_sched_lr(&cosine, t) == cosine.eta_min;
    t_check(ok, "cosine after t_max must stay at eta_min (torch's scheduler would climb back up)");
    t_check(ct_sched_lr(&step, 1000) < step.base_lr * 1e-10f + 1e-30f, "step decays towards 0");

    free(got);
    if (f >= 0) H5Fclose(f);
}

/* ---- 2. Analytic check: a convex quadratic ----
 * Layout of the n = 64 floats, like a parameter buffer:
 *   [0, 50)   active: f = 1/2 sum a_i (p_i - c_i)^2, grad = a_i (p_i - c_i),
 *             a_i in [0.5, 2], c_i in [-1, 1], p starts in [-1, 1]
 *   [50, 56)  frozen: p != 0, gradient always 0
 *   [56, 64)  padding: p = 0, gradient always 0
 * The minimiser: c_i; with L2 weight decay wd (SGD, RMSprop, Adam) the penalised
 * objective f + wd/2 |p|^2 has its minimum at a_i c_i / (a_i + wd).
 * The lr follows a cosine schedule to 0 over the STEPS steps, so the adaptive
 * optimizers (whose steps do not shrink with the gradient) settle too. */
#define Q_N 64
#define Q_ACTIVE 50
#define Q_FROZEN 56
#define Q_STEPS 600

static void test_quadratic_one(const char *label, ct_optim_config cfg, double tol)
{
    t_case("optim/%s/minimises a convex quadratic", label);
    ct_rng r;
    ct_rng_seed(&r, 2024, 7);
    float a[Q_N], c[Q_N], p[Q_N], grad[Q_N], p_start[Q_N], want[Q_ACTIVE];
    t_fill_uniform(a, Q_N, 0.5f, 2.0f, &r);
    t_fill_uniform(c, Q_N, -1.0f, 1.0f, &r);
    t_fill_uniform(p, Q_N, -1.0f, 1.0f, &r);
    for (int i = Q_FROZEN; i < Q_N; i++) p[i] = 0.0f;
    memcpy(p_start, p, sizeof p);
    /* the L2 penalty moves the minimiser; AdamW's decoupled decay is left out of this check */
    float wd = cfg.kind == OPT_ADAMW ? 0.0f : cfg.weight_decay;
    for (int i = 0; i < Q_ACTIVE; i++) want[i] = a[i] * c[i] / (a[i] + wd);

    ct_sched sched = { .kind = SCHED_COSINE, .base_lr = cfg.lr, .t_max = Q_STEPS, .eta_min = 0.0f };
    ct_optim o;
    if (!t_check(ct_optim_init(&o, &cfg, Q_N) == CT_OK, "init: %s", ct_last_error())) return;
    for (long t = 0; t < Q_STEPS; t++) {
        for (int i = 0; i < Q_N; i++) grad[i] = i < Q_ACTIVE ? a[i] * (p[i] - c[i]) : 0.0f;
        ct_optim_step(&o, p, grad, ct_sched_lr(&sched, t));
    }
    ct_optim_free(&o);
    t_close("p after the run vs the minimiser", p, want, Q_ACTIVE, tol);
    if (cfg.weight_decay == 0.0f)
        t_check(memcmp(p + Q_ACTIVE, p_start + Q_ACTIVE, (Q_FROZEN - Q_ACTIVE) * sizeof *p) == 0,
                "entries with zero gradient (and no weight decay) must not move");
    int zero = 1;
    for (int i = Q_FROZEN; i < Q_N; i++) zero &= p[i] == 0.0f;
    t_check(zero, "padding (p = 0, grad = 0) must stay exactly 0");
}

static void test_quadratic(void)
{
    /* Tolerances (normalised max error against the minimiser): every run ends
     * within ~1e-6 of the minimiser in 600 steps (float32 resolution of the
     * fixed point), so 1e-5; the clipped SGD, whose early steps are shortened,
     * ends at ~1e-5, so 1e-4. A broken update misses by orders of magnitude. */
    ct_optim_config c;
    c = cfg_make(OPT_SGD, 0.1f, 0.0f);
    test_quadratic_one("sgd", c, 1e-5);
    c.momentum = 0.9f;
    test_quadratic_one("sgd momentum", c, 1e-5);
    c.nesterov = 1;
    test_quadratic_one("sgd nesterov", c, 1e-5);
    c.nesterov = 0; c.weight_decay = 0.1f;
    test_quadratic_one("sgd momentum wd=0.1", c, 1e-5);
    c = cfg_make(OPT_RMSPROP, 0.01f, 0.0f);
    test_quadratic_one("rmsprop", c, 1e-5);
    c.weight_decay = 0.1f;
    test_quadratic_one("rmsprop wd=0.1", c, 1e-5);
    c = cfg_make(OPT_ADAM, 0.05f, 0.0f);
    test_quadratic_one("adam", c, 1e-5);
    c.weight_decay = 0.1f;
    test_quadratic_one("adam wd=0.1", c, 1e-5);
    c = cfg_make(OPT_ADAMW, 0.05f, 0.0f);
    test_quadratic_one("adamw wd=0", c, 1e-5);
    c = cfg_make(OPT_SGD, 0.1f, 0.0f);
    c.clip_norm = 0.5f;   /* clips at the start (|grad| ~ 4), not at the end */
    test_quadratic_one("clip sgd", c, 1e-4);
}

/* The update is cut into one range per worker: three steps of every kind on 2 and
 * 3 workers must give the one-worker parameters and state bit for bit. N is above
 * the split size and odd, so the ranges start and end off the vector width. */
static void test_workers(void)
{
    enum { N = 70001 };
    const ct_optim_kind kinds[4] = { OPT_SGD, OPT_RMSPROP, OPT_ADAM, OPT_ADAMW };
    const char *names[4] = { "sgd momentum", "rmsprop", "adam", "adamw" };
    float *p0 = t_alloc(N), *g = t_alloc(N);
    ct_rng r; ct_rng_seed(&r, 31, 7);
    t_fill_uniform(p0, N, -1, 1, &r);
    t_fill_uniform(g, N, -1, 1, &r);
    for (int k = 0; k < 4; k++) {
        ct_optim_config cfg = cfg_make(kinds[k], 0.01f, 0.01f);
        if (kinds[k] == OPT_SGD) cfg.momentum = 0.9f;
        float *ref = NULL;
        for (int threads = 1; threads <= 3; threads++) {
            if (threads > 1) t_case("optim/%s on %d workers gives the one-worker parameters and state", names[k], threads);
            float *p = t_alloc(3 * (size_t)N);   /* the parameters, then m and v as they end */
            memcpy(p, p0, N * sizeof *p);
            ct_optim o;
            if (!t_check(ct_optim_init(&o, &cfg, N) == CT_OK, "init: %s", ct_last_error())) { free(p); break; }
            ct_threads_set(threads);
            for (int step = 0; step < 3; step++) ct_optim_step(&o, p, g, cfg.lr);
            ct_threads_set(1);
            if (o.m) memcpy(p + N, o.m, N * sizeof *p);
            if (o.v) memcpy(p + 2 * (size_t)N, o.v, N * sizeof *p);
            ct_optim_free(&o);
            if (!ref) { ref = p; continue; }
            t_check(memcmp(p, ref, 3 * (size_t)N * sizeof *p) == 0, "parameters or state differ from one worker's");
            free(p);
        }
        free(ref);
    }
    free(p0); free(g);
}

/* ---- 3. Validation ---- */

static void check_bad(const ct_optim_config *c, const char *field, const char *what)
{
    ct_optim o;
    ct_status s = ct_optim_init(&o, c, 10);
    t_check(s == CT_EINVAL, "%s %s: status %d, want CT_EINVAL", ct_optim_name(c->kind), what, (int)s);
    t_check(strstr(ct_last_error(), field) != NULL, "%s %s: message \"%s\" does not name %s",
            ct_optim_name(c->kind), what, ct_last_error(), field);
    t_check(o.m == NULL && o.v == NULL, "%s %s: a refused init must leave no state", ct_optim_name(c->kind), what);
    ct_optim_free(&o);
}

#define BAD(kind_, field_, value_) do { \
        ct_optim_config c_ = ct_optim_defaults(kind_); \
        c_.field_ = (value_); \
        check_bad(&c_, #field_, #field_ " = " #value_); \
    } while (0)

static void test_validation(void)
{
    t_case("optim/validate rejects each bad field");
    const ct_optim_kind kinds[4] = { OPT_SGD, OPT_RMSPROP, OPT_ADAM, OPT_ADAMW };
    for (int k = 0; k < 4; k++) {
        BAD(kinds[k], lr, 0.0f);
        BAD(kinds[k], lr, -1e-3f);
        BAD(kinds[k], lr, NAN);
        BAD(kinds[k], lr, INFINITY);
        BAD(kinds[k], weight_decay, -0.1f);
        BAD(kinds[k], weight_decay, NAN);
        BAD(kinds[k], clip_norm, -1.0f);
        BAD(kinds[k], clip_norm, INFINITY);
    }
    BAD(OPT_SGD, momentum, -0.1f);
    BAD(OPT_SGD, momentum, 1.0f);
    BAD(OPT_SGD, momentum, NAN);
    BAD(OPT_SGD, nesterov, 1);          /* needs momentum > 0; the default is 0 */
    BAD(OPT_RMSPROP, rho, -0.1f);
    BAD(OPT_RMSPROP, rho, 1.0f);
    BAD(OPT_RMSPROP, eps, 0.0f);
    BAD(OPT_RMSPROP, eps, -1e-7f);
    for (int k = 2; k < 4; k++) {
        BAD(kinds[k], beta1, -0.1f);
        BAD(kinds[k], beta1, 1.0f);
        BAD(kinds[k], beta2, 1.0f);
        BAD(kinds[k], beta2, NAN);
        BAD(kinds[k], eps, 0.0f);
    }
    ct_optim_config odd = ct_optim_defaults(OPT_SGD);
    odd.kind = (ct_optim_kind)17;
    check_bad(&odd, "sgd, rmsprop, adam, adamw", "kind = 17");

    t_case("optim/validate accepts the defaults, state only where needed");
    for (int k = 0; k < 4; k++) {
        ct_optim_config c = ct_optim_defaults(kinds[k]);
        ct_optim o;
        t_check(ct_optim_init(&o, &c, 37) == CT_OK, "%s defaults: %s", ct_optim_name(kinds[k]), ct_last_error());
        int want_m = kinds[k] == OPT_ADAM || kinds[k] == OPT_ADAMW, want_v = kinds[k] != OPT_SGD;
        t_check((o.m != NULL) == want_m && (o.v != NULL) == want_v, "%s: m %s, v %s", ct_optim_name(kinds[k]),
                o.m ? "allocated" : "NULL", o.v ? "allocated" : "NULL");
        int zero = o.step == 0;
        for (int i = 0; i < 37; i++) zero &= (!o.m || o.m[i] == 0.0f) && (!o.v || o.v[i] == 0.0f);
        t_check(zero, "%s: state must start at zero", ct_optim_name(kinds[k]));
        ct_optim_free(&o);
    }
    ct_optim_config sgdm = ct_optim_defaults(OPT_SGD);
    sgdm.momentum = 0.9f;
    ct_optim o;
    t_check(ct_optim_init(&o, &sgdm, 37) == CT_OK && o.m && !o.v, "sgd with momentum needs m only");
    ct_optim_free(&o);
    ct_optim_config d = ct_optim_defaults(OPT_RMSPROP);
    t_check(d.rho == 0.9f && d.eps == 1e-7f && d.lr == 1e-3f, "rmsprop defaults are Keras's (rho 0.9, eps 1e-7, lr 1e-3)");
    d = ct_optim_defaults(OPT_ADAMW);
    t_check(d.beta1 == 0.9f && d.beta2 == 0.999f && d.eps == 1e-8f && d.weight_decay == 0.01f, "adamw defaults");
    t_check(ct_optim_defaults(OPT_SGD).lr == 0.01f, "sgd default lr 0.01");

    t_case("optim/parse names");
    const char *names[4] = { "sgd", "rmsprop", "adam", "adamw" };
    for (int k = 0; k < 4; k++) {
        ct_optim_kind kind = OPT_SGD;
        t_check(ct_optim_parse(&kind, names[k]) == CT_OK && kind == kinds[k], "parse %s", names[k]);
        t_check(strcmp(ct_optim_name(kinds[k]), names[k]) == 0, "name of kind %d", k);
    }
    ct_optim_kind kind = OPT_ADAM;
    t_check(ct_optim_parse(&kind, "adagrad") == CT_EINVAL, "adagrad must be refused");
    const char *msg = ct_last_error();
    t_check(strstr(msg, "adagrad") && strstr(msg, "sgd") && strstr(msg, "rmsprop") && strstr(msg, "adam")
            && strstr(msg, "adamw"), "message \"%s\" must name the input and list the accepted names", msg);
    t_check(kind == OPT_ADAM, "a refused parse must leave *kind alone");
}

void suite_optim(void)
{
    test_parity_steps();
    test_parity_clip();
    test_parity_sched();
    test_quadratic();
    test_workers();
    test_validation();
}
