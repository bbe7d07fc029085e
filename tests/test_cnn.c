/* test_cnn.c - whole-network tests of the spec CNN (models/seq_cnn):
 *   - PyTorch parity of ONE full training step (tests/golden/cnn_step*.h5 from
 *     gen_cnn.py): loss, logits, every parameter gradient, batchnorm running
 *     statistics, and every parameter after one Adam step, for two networks that
 *     together cover conv with stride and padding, relu, tanh, sigmoid, maxpool,
 *     batchnorm, dropout (with the reference's masks), flatten, gap, dense and
 *     softmax cross-entropy, and a third with residual blocks (save ... add: two
 *     in a row, nested, on flat vectors);
 *   - a finite-difference check of d loss / d every parameter of the three networks;
 *   - train and eval modes: eval is deterministic and uses no dropout, smaller
 *     batches than planned work;
 *   - a short training run of the default `cnn` architecture on 2,000
 *     Fashion-MNIST images that must clear a stated test accuracy.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/test.h"
#include "layers/gemm_packed.h"   /* ct_kernels_get: whether the one-channel convolution runs */
#include "layers/gemm_bf16.h"     /* the tiles' C model, for the bf16 cases */
#include "layers/ops.h"
#include "io/h5.h"
#include "io/idx.h"
#include "layers/optim.h"
#include "models/seq_cnn.h"

/* Tolerances (normalised max error, see tests/test.h).
 * Parity: float32 in both, sums in another order (sgemm vs ATen); observed
 * <= 6e-7 for loss and logits and every gradient (relative to the network's
 * largest gradient, see parity(); 7e-6 relative to itself for the cancelled
 * conv bias of the gap network), tolerance 1e-5. After the Adam step
 * (update ~lr * sign(g)): observed <= 1e-7, tolerance 1e-6.
 * Finite differences: h = 2e-3 on a float32 loss of ~1.6 (rounding noise
 * ~1e-7 / 4e-3 in each numeric slope) through relu/maxpool kinks; observed
 * ~1e-4, tolerance 2e-3 (the smoke tests' whole-model tolerance). */
#define CNN_PAR_TOL    1e-5
#define CNN_ADAM_TOL   1e-6
#define CNN_GC_H       2e-3f
#define CNN_GC_TOL     2e-3

#define SPEC_MAIN "conv4k3s2p1,relu,batchnorm,conv6k3p1,relu,maxpool2,dropout0.3,flatten,dense12,tanh,dropout0.5,dense5"
#define SPEC_GAP  "conv3k2,sigmoid,batchnorm,conv5k3s2p2,tanh,gap,dense4"
/* A block of two convolutions whose add is followed by a relu (which runs after the next
 * maxpool), two blocks opened at one point and nested, and a block on flat vectors whose
 * relu, right after the save, cannot run in place. Smooth activations before each
 * batchnorm: a relu there puts many kinks within the finite-difference step. */
#define SPEC_RES  "conv4k3p1,tanh,batchnorm,save,conv4k3p1,tanh,batchnorm,conv4k3p1,add,relu,maxpool2," \
                  "save,save,conv4k3p1,tanh,add,conv4k3p1,sigmoid,add,flatten,dense12,save,relu,dense12,dropout0.3,add,dense5"

static size_t numel_of(const ct_param *p) { return p->numel; }

static void parity(const char *file, const char *spec, int N, int C, int H, int W, int classes)
{
    t_case("cnn/parity torch: one training step + Adam, %s (%s)", spec, file);
    hid_t f = t_golden_open(file);
    if (f < 0) return;
    t_check((int)t_golden_attr(f, "N") == N && (int)t_golden_attr(f, "classes") == classes, "golden sizes differ");
    float lr = (float)t_golden_attr(f, "lr");
    seq_cnn m;
    if (!t_check(ct_seq_cnn_build(&m, spec, C, H, W, classes) == CT_OK && ct_seq_cnn_plan(&m, N) == CT_OK,
                 "build: %s", ct_last_error())) { ct_h5_close(f); return; }
    ct_rng r;
    ct_rng_seed(&r, 1, 1);
    ct_seq_cnn_init_weights(&m, &r);             /* buffers: running mean 0, var 1; parameters overwritten below */
    char name[160];
    for (int i = 0; i < m.params.n; i++) {
        snprintf(name, sizeof name, "init/%s", m.params.p[i].name);
        float *v = t_golden(f, name, numel_of(&m.params.p[i]));
        memcpy(ct_params_data(&m.params, i), v, numel_of(&m.params.p[i]) * sizeof *v);
        free(v);
    }
    for (int i = 0; i < m.n; i++) {
        if (m.layer[i].kind != SEQ_DROPOUT) continue;
        snprintf(name, sizeof name, "mask/L%d", i);
        size_t n = (size_t)N * ct_seq_layer_out_size(&m.layer[i]);
        float *v = t_golden(f, name, n);
        memcpy(m.layer[i].mask, v, n * sizeof *v);
        free(v);
    }
    m.given_masks = 1;
    size_t nx = (size_t)N * C * H * W;
    float *x = t_golden(f, "x", nx), *logits_ref = t_golden(f, "logits", (size_t)N * classes), *loss_ref = t_golden(f, "loss", 1);
    int *labels = t_golden_i32(f, "labels", (size_t)N);

    ct_params_zero_grad(&m.params);
    float loss = ct_seq_cnn_forward(&m, x, labels, N, 1, NULL, NULL);
    t_close("loss", &loss, loss_ref, 1, CNN_PAR_TOL);
    t_close("logits", m.logits, logits_ref, (size_t)N * classes, CNN_PAR_TOL);
    ct_seq_cnn_backward(&m, x, labels, N);
    /* Gradients: each tensor's error is held to CNN_PAR_TOL of the NETWORK's largest
     * gradient. A tensor whose gradient is small by cancellation (a conv bias under
     * a batchnorm: ~5e-4 against 0.26 elsewhere) keeps only rounding noise of the
     * large terms it was formed from, so its tolerance relative to itself is scaled
     * by gmax / max|its gradient|. */
    float *gref[64] = { 0 };
    double gmax = 0, tmax[64] = { 0 };
    for (int i = 0; i < m.params.n && i < 64; i++) {
        snprintf(name, sizeof name, "grad/%s", m.params.p[i].name);
        gref[i] = t_golden(f, name, numel_of(&m.params.p[i]));
        for (size_t j = 0; j < numel_of(&m.params.p[i]); j++) tmax[i] = fmax(tmax[i], fabs(gref[i][j]));
        gmax = fmax(gmax, tmax[i]);
    }
    for (int i = 0; i < m.params.n && i < 64; i++) {
        snprintf(name, sizeof name, "grad/%s", m.params.p[i].name);
        double scale = tmax[i] > 0 && gmax / tmax[i] > 1 ? gmax / tmax[i] : 1;
        t_close(name, ct_params_grad(&m.params, i), gref[i], numel_of(&m.params.p[i]), CNN_PAR_TOL * scale);
        free(gref[i]);
    }
    for (int i = 0; i < m.buffers.n; i++) {
        snprintf(name, sizeof name, "buffers/%s", m.buffers.p[i].name);
        float *v = t_golden(f, name, numel_of(&m.buffers.p[i]));
        t_close(name, ct_params_data(&m.buffers, i), v, numel_of(&m.buffers.p[i]), CNN_PAR_TOL);
        free(v);
    }
    ct_optim_config cfg = ct_optim_defaults(OPT_ADAM);
    cfg.lr = lr;
    ct_optim o;
    if (t_check(ct_optim_init(&o, &cfg, m.params.numel) == CT_OK, "optim: %s", ct_last_error())) {
        ct_optim_step(&o, m.params.data, m.params.grad, lr);
        for (int i = 0; i < m.params.n; i++) {
            snprintf(name, sizeof name, "after/%s", m.params.p[i].name);
            float *v = t_golden(f, name, numel_of(&m.params.p[i]));
            t_close(name, ct_params_data(&m.params, i), v, numel_of(&m.params.p[i]), CNN_ADAM_TOL);
            free(v);
        }
        ct_optim_free(&o);
    }
    free(x); free(logits_ref); free(loss_ref); free(labels);
    ct_h5_close(f);
    ct_seq_cnn_free(&m);
}

/* ---- finite differences over every parameter ---- */
typedef struct { seq_cnn *m; const float *x; const int *labels; int N; } loss_ctx;

static double loss_of(void *p)
{
    loss_ctx *c = p;
    return ct_seq_cnn_forward(c->m, c->x, c->labels, c->N, 1, NULL, NULL);
}

static void gradcheck(const char *spec, int N, int C, int H, int W, int classes, uint64_t seed)
{
    t_case("cnn/gradcheck every parameter, %s (N=%d, %dx%dx%d)", spec, N, C, H, W);
    seq_cnn m;
    if (!t_check(ct_seq_cnn_build(&m, spec, C, H, W, classes) == CT_OK && ct_seq_cnn_plan(&m, N) == CT_OK,
                 "build: %s", ct_last_error())) return;
    ct_rng r;
    ct_rng_seed(&r, seed, 1);
    ct_seq_cnn_init_weights(&m, &r);
    /* batchnorm gamma/beta away from their 1/0 init, so every path is exercised */
    for (int i = 0; i < m.params.n; i++)
        if (strstr(m.params.p[i].name, "batchnorm"))
            t_fill_uniform(ct_params_data(&m.params, i), m.params.p[i].numel, 0.5f, 1.5f, &r);
    size_t nx = (size_t)N * C * H * W;
    float *x = t_alloc(nx);
    t_fill_uniform(x, nx, 0, 1, &r);
    int *labels = calloc((size_t)N, sizeof *labels);
    for (int i = 0; i < N; i++) labels[i] = (int)ct_rng_below(&r, (uint32_t)classes);
    ct_seq_cnn_forward(&m, x, labels, N, 1, &r, NULL);   /* draws the dropout masks once ... */
    m.given_masks = 1;                                 /* ... and keeps them for every evaluation below */
    ct_params_zero_grad(&m.params);
    ct_seq_cnn_forward(&m, x, labels, N, 1, NULL, NULL);
    ct_seq_cnn_backward(&m, x, labels, N);
    float *g = t_alloc(m.params.numel);
    memcpy(g, m.params.grad, m.params.numel * sizeof *g);
    /* numeric gradient of the whole parameter vector, compared in one t_close
     * (normalised by the network's largest gradient) */
    double *num = calloc(m.params.numel, sizeof *num);
    float *ana = t_alloc(m.params.numel);
    loss_ctx c = { &m, x, labels, N };
    size_t k = 0;
    for (int i = 0; i < m.params.n; i++) {
        const ct_param *p = &m.params.p[i];
        for (size_t j = 0; j < p->numel; j++, k++) {
            float *v = m.params.data + p->offset + j, saved = *v;
            *v = saved + CNN_GC_H; double fp = loss_of(&c);
            *v = saved - CNN_GC_H; double fm = loss_of(&c);
            *v = saved;
            num[k] = (fp - fm) / (((double)(saved + CNN_GC_H) - saved) + (saved - (double)(saved - CNN_GC_H)));
            ana[k] = g[p->offset + j];
        }
    }
    t_close_d("d loss / d every parameter", ana, num, k, CNN_GC_TOL);
    free(num); free(ana); free(g); free(x); free(labels);
    ct_seq_cnn_free(&m);
}

static void modes(void)
{
    t_case("cnn/eval mode is deterministic and drops nothing; batches smaller than planned");
    seq_cnn m;
    if (!t_check(ct_seq_cnn_build(&m, SPEC_MAIN, 2, 10, 9, 5) == CT_OK && ct_seq_cnn_plan(&m, 6) == CT_OK, "build: %s", ct_last_error()))
        return;
    ct_rng r;
    ct_rng_seed(&r, 9, 1);
    ct_seq_cnn_init_weights(&m, &r);
    float *x = t_alloc(6 * 180), *l1 = t_alloc(30), *l2 = t_alloc(30), *l3 = t_alloc(30);
    t_fill_uniform(x, 6 * 180, 0, 1, &r);
    int labels[6] = { 0, 1, 2, 3, 4, 0 };
    ct_seq_cnn_forward(&m, x, labels, 6, 1, &r, NULL);                       /* updates running stats */
    ct_seq_cnn_forward(&m, x, labels, 6, 0, NULL, NULL); memcpy(l1, m.logits, 30 * sizeof *l1);
    ct_seq_cnn_forward(&m, x, labels, 6, 0, NULL, NULL); memcpy(l2, m.logits, 30 * sizeof *l2);
    t_close("two eval forwards", l2, l1, 30, 0.0);
    ct_seq_cnn_forward(&m, x, labels, 2, 0, NULL, NULL); memcpy(l3, m.logits, 10 * sizeof *l3);
    t_close("eval on the first 2 samples = the first 2 rows of batch 6", l3, l1, 10, 1e-6);
    ct_seq_cnn_forward(&m, x, labels, 6, 1, &r, NULL);
    float d = 0;
    for (int i = 0; i < 30; i++) d = fmaxf(d, fabsf(m.logits[i] - l1[i]));
    t_check(d > 1e-3f, "a training forward (dropout, batch statistics) should differ from eval; max diff %g", d);
    free(x); free(l1); free(l2); free(l3);
    ct_seq_cnn_free(&m);
}

/* A relu right before a maxpool runs after it, on the pooled map (models/seq_cnn.c): the
 * same network with the relu run where the spec puts it must give the same loss, logits
 * and gradients, bit for bit. Inputs mostly negative, so that some pooling windows hold
 * no positive value (their gradient is 0 either way) and ties at 0 occur. */
static void relu_after_pool(void)
{
    const char *spec = "conv4k3,relu,maxpool2,conv4k3p1,batchnorm,relu,maxpool2s1,flatten,dense5";
    t_case("cnn/relu moved after the maxpool it precedes: loss, logits and every gradient bit for bit (%s)", spec);
    seq_cnn a, b;
    if (!t_check(ct_seq_cnn_build(&a, spec, 1, 10, 9, 5) == CT_OK && ct_seq_cnn_plan(&a, 6) == CT_OK &&
                 ct_seq_cnn_build(&b, spec, 1, 10, 9, 5) == CT_OK && ct_seq_cnn_plan(&b, 6) == CT_OK, "build: %s", ct_last_error()))
        return;
    int moved = 0;
    for (int i = 0; i < b.n; i++) { moved += a.layer[i].relu_after_pool; b.layer[i].relu_after_pool = 0; }
    t_check(moved == 4, "the two relu,maxpool pairs should be marked (%d layers marked)", moved);
    ct_rng r;
    ct_rng_seed(&r, 33, 1);
    ct_seq_cnn_init_weights(&a, &r);
    memcpy(b.params.data, a.params.data, a.params.numel * sizeof *a.params.data);
    memcpy(b.buffers.data, a.buffers.data, a.buffers.numel * sizeof *a.buffers.data);
    float *x = t_alloc(6 * 90);
    t_fill_uniform(x, 6 * 90, -1.0f, 0.3f, &r);
    int labels[6] = { 0, 1, 2, 3, 4, 0 };
    float la = ct_seq_cnn_forward(&a, x, labels, 6, 1, NULL, NULL), lb = ct_seq_cnn_forward(&b, x, labels, 6, 1, NULL, NULL);
    t_check(la == lb, "loss %.9g with the relu moved, %.9g without", la, lb);
    t_close("logits", a.logits, b.logits, 30, 0.0);
    ct_params_zero_grad(&a.params);
    ct_params_zero_grad(&b.params);
    ct_seq_cnn_backward(&a, x, labels, 6);
    ct_seq_cnn_backward(&b, x, labels, 6);
    t_close("parameter gradients", a.params.grad, b.params.grad, a.params.numel, 0.0);
    t_close("running statistics", a.buffers.data, b.buffers.data, a.buffers.numel, 0.0);
    free(x);
    ct_seq_cnn_free(&a);
    ct_seq_cnn_free(&b);
}

/* Two models of one spec with the same weights, buffers and batch x [N, 1, H, W] (labels
 * 0 1 2 3 4 0), for tests that run one with a fast path and the other without. 0 if the
 * build failed (the case has failed then). */
enum { TWIN_N = 6 };
static int twin_models(seq_cnn *a, seq_cnn *b, float **x, const char *spec, int H, int W, uint64_t seed)
{
    if (!t_check(ct_seq_cnn_build(a, spec, 1, H, W, 5) == CT_OK && ct_seq_cnn_plan(a, TWIN_N) == CT_OK &&
                 ct_seq_cnn_build(b, spec, 1, H, W, 5) == CT_OK && ct_seq_cnn_plan(b, TWIN_N) == CT_OK, "build: %s", ct_last_error()))
        return 0;
    ct_rng r;
    ct_rng_seed(&r, seed, 1);
    ct_seq_cnn_init_weights(a, &r);
    t_fill_uniform(a->params.data, a->params.numel, -0.5f, 0.5f, &r);   /* gamma and beta away from 1 and 0 too */
    memcpy(b->params.data, a->params.data, a->params.numel * sizeof *a->params.data);
    memcpy(b->buffers.data, a->buffers.data, a->buffers.numel * sizeof *a->buffers.data);
    *x = t_alloc((size_t)TWIN_N * H * W);
    t_fill_uniform(*x, (size_t)TWIN_N * H * W, -1.0f, 1.0f, &r);
    return 1;
}

/* One training step of both twins: loss, logits, parameter gradients and running statistics
 * within tol (0: bit for bit), then a plain gradient step on each, so that the next starts
 * elsewhere. */
static void twin_step(seq_cnn *a, seq_cnn *b, const float *x, int step, double tol)
{
    static const int labels[TWIN_N] = { 0, 1, 2, 3, 4, 0 };
    float la = ct_seq_cnn_forward(a, x, labels, TWIN_N, 1, NULL, NULL), lb = ct_seq_cnn_forward(b, x, labels, TWIN_N, 1, NULL, NULL);
    t_check(fabsf(la - lb) <= (float)tol * fabsf(lb), "step %d: loss %.9g and %.9g", step, la, lb);
    t_close("logits", a->logits, b->logits, TWIN_N * 5, tol);
    ct_params_zero_grad(&a->params);
    ct_params_zero_grad(&b->params);
    ct_seq_cnn_backward(a, x, labels, TWIN_N);
    ct_seq_cnn_backward(b, x, labels, TWIN_N);
    t_close("parameter gradients", a->params.grad, b->params.grad, a->params.numel, tol);
    t_close("running statistics", a->buffers.data, b->buffers.data, a->buffers.numel, tol);
    for (size_t k = 0; k < a->params.numel; k++) {
        a->params.data[k] -= 0.1f * a->params.grad[k];
        b->params.data[k] -= 0.1f * b->params.grad[k];
    }
}

/* Two models of one spec on backend be, planned for TWIN_N images of 1 x H x W, the second
 * with every layer alone (unfused); 0 if a build failed (the case has failed then). */
static int twin_build_on(seq_cnn *a, seq_cnn *b, const char *spec, ct_backend *be, int H, int W)
{
    if (!t_check(ct_seq_cnn_build(a, spec, 1, H, W, 5) == CT_OK && ct_seq_cnn_set_device(a, be) == CT_OK &&
                 ct_seq_cnn_plan(a, TWIN_N) == CT_OK && ct_seq_cnn_build(b, spec, 1, H, W, 5) == CT_OK &&
                 ct_seq_cnn_set_device(b, be) == CT_OK && ct_seq_cnn_plan(b, TWIN_N) == CT_OK, "build: %s", ct_last_error()))
        return 0;
    b->unfused = 1;
    return 1;
}

/* The twins in evaluation: loss and logits bit for bit; then both models and x freed. */
static void twin_evaluate_free(seq_cnn *a, seq_cnn *b, float *x, int N)
{
    static const int labels[TWIN_N] = { 0, 1, 2, 3, 4, 0 };
    const float la = ct_seq_cnn_forward(a, x, labels, N, 0, NULL, NULL), lb = ct_seq_cnn_forward(b, x, labels, N, 0, NULL, NULL);
    t_check(la == lb, "evaluation: loss %.9g in one pass, %.9g one by one", la, lb);
    t_close("evaluation logits", a->logits, b->logits, (size_t)N * 5, 0.0);
    free(x);
    ct_seq_cnn_free(a);
    ct_seq_cnn_free(b);
}

/* A batchnorm and the maxpool after it (through a relu run after the pool, or directly), or
 * the average pooling after it (gaph or gap, through a relu between, or directly), run as
 * one on the CPU (ops->batchnorm_maxpool_*, ops->batchnorm_avgpool_h_*, models/seq_cnn.c):
 * loss, logits, every gradient and the running statistics must be those of the layers run
 * one by one, bit for bit, in training and in evaluation. The first spec has both maxpool
 * forms, an overlapping window (3, stride 2) and a batchnorm that feeds no pool. */
static void bn_pool_pairs(const char *spec, int want_pairs, int conv_by_pool)
{
    t_case("cnn/batchnorm and the pool after it as one: loss, logits, gradients, running statistics bit for bit (%s)", spec);
    seq_cnn a, b;
    float *x;
    if (!twin_models(&a, &b, &x, spec, 14, 11, 34)) return;
    b.unfused = 1;
    /* the first convolution's dW and db from the pair's din plane by plane (one input channel on AVX-512) */
    const int want_conv = conv_by_pool && ct_kernels_get() == CT_KERNELS_AVX512;
    int pairs = 0;
    for (int i = 0; i < a.n; i++) pairs += a.layer[i].pool_of_bn != 0;
    t_check(pairs == want_pairs, "%d batchnorm,pool pairs should be marked (%d marked)", want_pairs, pairs);
    for (int step = 0; step < 2; step++) {
        twin_step(&a, &b, x, step, 0.0);
        int ran = 0;
        for (int i = 0; i < a.n; i++) ran += a.layer[i].bn_pool_ran + 2 * b.layer[i].bn_pool_ran;
        t_check(ran == want_pairs, "every pair should run as one in the first model and none in the second (%d)", ran);
        t_check(a.layer[0].dw_by_pool == want_conv && !b.layer[0].dw_by_pool,
                "the first convolution's backward should %srun in the pool's (%d, %d)", want_conv ? "" : "not ",
                a.layer[0].dw_by_pool, b.layer[0].dw_by_pool);
    }
    twin_evaluate_free(&a, &b, x, TWIN_N);
}

/* In bf16, a convolution on the direct path with the maxpool after it (through a relu run after
 * the pool, or directly) runs that pool in its own forward and writes no output of its own
 * (ops->conv2d_forward_pool, models/seq_cnn.c conv_pool_of): loss, logits, gradients bit for bit
 * against the same model with every layer alone, over two training steps and in evaluation, on
 * the tiles' C model (any CPU) and on the CPU's own AMX tiles where it has them. The second
 * convolution (16 input channels) takes the direct path; the first (one) does not. */
static void conv_pool_pairs(const char *spec, int want_pools)
{
    for (int real = 0; real <= 1; real++) {
        ct_gemm_bf16_use_model(!real);
        if (real && ct_kernels_bf16() != CT_BF16_AMX) { ct_gemm_bf16_use_model(0); break; }
        t_case("cnn/bf16: a convolution with the maxpool after it in one pass = the layers, bit for bit (%s, %s)", spec,
               real ? "AMX tiles" : "the tiles' C model");
        const ct_math mth = { .dtype = CT_BF16 };
        ct_backend be;
        if (!t_check(ct_backend_open_cpu(&be, &mth) == CT_OK, "bf16 backend: %s", ct_last_error())) break;
        seq_cnn a, b;
        enum { N = TWIN_N, H = 14, W = 11 };
        if (twin_build_on(&a, &b, spec, &be, H, W)) {
            ct_rng r;
            ct_rng_seed(&r, 36, 1);
            ct_seq_cnn_init_weights(&a, &r);
            memcpy(b.params.data, a.params.data, a.params.numel * sizeof *a.params.data);
            float *x = t_alloc((size_t)N * H * W);
            t_fill_uniform(x, (size_t)N * H * W, -1.0f, 1.0f, &r);
            for (int step = 0; step < 2; step++) {
                twin_step(&a, &b, x, step, 0.0);
                int pools = 0;
                for (int i = 0; i < a.n; i++) pools += a.layer[i].pool_in_conv + 2 * b.layer[i].pool_in_conv;
                t_check(pools == want_pools, "%d pools should run in their convolution in the first model, none in the "
                        "second (%d)", want_pools, pools);
            }
            twin_evaluate_free(&a, &b, x, N);
        }
        ct_backend_close(&be);
    }
    ct_gemm_bf16_use_model(0);
}

/* In float32, a convolution on the packed path (AVX-512) with the maxpool after it (through a
 * relu run after the pool, or directly) pools its output as it makes it, and its backward makes
 * its dout from the pool's gradient (ops->conv2d_forward_pool, conv2d_backward_pool): loss,
 * logits and gradients bit for bit against the same model with every layer alone, over two
 * training steps and in evaluation. */
static void conv_pool_pairs_f32(const char *spec, int want_pools)
{
    t_case("cnn/float32: a convolution with the maxpool after it in one pass = the layers, bit for bit (%s)", spec);
    seq_cnn a, b;
    float *x;
    if (!twin_models(&a, &b, &x, spec, 14, 11, 38)) return;
    b.unfused = 1;
    const int want = ct_kernels_get() == CT_KERNELS_AVX512 ? want_pools : 0;   /* the packed path */
    for (int step = 0; step < 2; step++) {
        twin_step(&a, &b, x, step, 0.0);
        int pools = 0;
        for (int i = 0; i < a.n; i++) pools += a.layer[i].pool_in_conv + 2 * b.layer[i].pool_in_conv;
        t_check(pools == want, "%d pools should run in their convolution in the first model, none in the second (%d)", want, pools);
    }
    twin_evaluate_free(&a, &b, x, TWIN_N);
}

/* The first convolution (one input channel, on AVX-512) runs the relu right after it, and its
 * backward takes the relu's din plane by plane (ops->conv2d_forward_relu, conv2d_backward_relu;
 * models/seq_cnn.c conv_relu_of): loss, logits and gradients bit for bit against the same
 * model with every layer alone, over two training steps and in evaluation, in float32 and in
 * bf16 (on the tiles' C model). (A relu right before a maxpool runs after the pool instead:
 * models/seq_cnn.c, plan_in_place.) */
static void conv_relu_pairs(const char *spec, int bf16)
{
    t_case("cnn/%s: the first convolution with the relu after it in one pass = the layers, bit for bit (%s)",
           bf16 ? "bf16" : "float32", spec);
    if (bf16) ct_gemm_bf16_use_model(1);
    const ct_math mth = { .dtype = bf16 ? CT_BF16 : CT_F32 };
    ct_backend be;
    if (!t_check(ct_backend_open_cpu(&be, &mth) == CT_OK, "backend: %s", ct_last_error())) { ct_gemm_bf16_use_model(0); return; }
    seq_cnn a, b;
    enum { N = TWIN_N, H = 14, W = 11 };
    if (twin_build_on(&a, &b, spec, &be, H, W)) {
        const int want = ct_kernels_get() == CT_KERNELS_AVX512;   /* the one-channel path */
        ct_rng r;
        ct_rng_seed(&r, 37, 1);
        ct_seq_cnn_init_weights(&a, &r);
        t_fill_uniform(a.params.data, a.params.numel, -0.5f, 0.5f, &r);   /* biases away from 0: some outputs cut, some not */
        memcpy(b.params.data, a.params.data, a.params.numel * sizeof *a.params.data);
        memcpy(b.buffers.data, a.buffers.data, a.buffers.numel * sizeof *a.buffers.data);
        float *x = t_alloc((size_t)N * H * W);
        t_fill_uniform(x, (size_t)N * H * W, -1.0f, 1.0f, &r);
        for (int step = 0; step < 2; step++) {
            twin_step(&a, &b, x, step, 0.0);
            t_check(a.layer[1].relu_in_conv == want && !b.layer[1].relu_in_conv,
                    "the relu should %srun in the first convolution of the first model, and never in the second (%d, %d)",
                    want ? "" : "not ", a.layer[1].relu_in_conv, b.layer[1].relu_in_conv);
        }
        twin_evaluate_free(&a, &b, x, N);
    }
    ct_backend_close(&be);
    ct_gemm_bf16_use_model(0);
}

/* A convolution right before a batchnorm takes its output planes' statistics as it writes
 * them, and the batchnorm uses them instead of reading its input (models/seq_cnn.c,
 * conv_feeds_stats): in training only, for every such pair. Against the same model with
 * every batchnorm reading its input (bn_own_stats), over two training steps: the
 * statistics differ by at most 1 ulp (the one-channel path merges blocks of rows:
 * tests/test_batchnorm.c), which moves each normalised value by about 1e-7 of itself;
 * loss, logits, gradients and running statistics within 1e-5 leave a hundredfold growth
 * of that through the model. The first convolution (one channel) and the second (six) take
 * different paths. */
static void conv_bn_stats(void)
{
    const char *spec = "conv6k3p1,batchnorm,relu,maxpool2,conv5k3p1,batchnorm,relu,conv4k3,flatten,dense5";
    t_case("cnn/convolutions hand their batchnorms the statistics: the batchnorms' own within 1e-5 (%s)", spec);
    seq_cnn a, b;
    float *x;
    if (!twin_models(&a, &b, &x, spec, 24, 21, 35)) return;
    b.bn_own_stats = 1;
    for (int step = 0; step < 2; step++) {
        twin_step(&a, &b, x, step, 1e-5);
        int ran = 0;
        for (int i = 0; i < a.n; i++) ran += a.layer[i].stats_ran + 4 * b.layer[i].stats_ran;
        t_check(ran == 2, "both convolutions before a batchnorm should take the statistics in the first model and none "
                "in the second (%d)", ran);
    }
    static const int labels[TWIN_N] = { 0, 1, 2, 3, 4, 0 };
    ct_seq_cnn_forward(&a, x, labels, TWIN_N, 0, NULL, NULL);
    int ran = 0;
    for (int i = 0; i < a.n; i++) ran += a.layer[i].stats_ran;
    t_check(ran == 0, "in evaluation no convolution should take the statistics (%d did)", ran);
    free(x);
    ct_seq_cnn_free(&a);
    ct_seq_cnn_free(&b);
}

/* ---- a short real training run ---- */
static void train_fashion(void)
{
    /* The default `cnn` spec (Keras mnist_cnn), Adam lr 1e-3, batch 64, 3 epochs
     * over the first 2,000 training images, tested on the first 2,000 test images.
     * Measured: test accuracy 0.800 (seed 1); threshold 0.72 leaves a margin for
     * other BLAS builds' rounding. Takes ~5 s (~10 s under ASan). */
    const int n_train = 2000, n_test = 2000, epochs = 3, B = 64;
    const double threshold = 0.72;
    t_case("cnn/train default cnn on 2,000 Fashion-MNIST images, %d epochs: test accuracy > %.2f", epochs, threshold);
    if (access(CT_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0 &&
        access(CT_FASHION_MNIST_DIR "/train-images-idx3-ubyte", R_OK) != 0) {
        t_check(0, "Fashion-MNIST not found in %s: `make deps` installs Debian's dataset-fashion-mnist", CT_FASHION_MNIST_DIR);
        return;
    }
    ct_images tr, te;
    if (!t_check(ct_idx_load_dir(&tr, &te, CT_FASHION_MNIST_DIR) == CT_OK, "load: %s", ct_last_error())) return;
    seq_cnn m;
    if (!t_check(ct_seq_cnn_build(&m, SEQ_CNN_DEFAULT_SPEC, 1, 28, 28, 10) == CT_OK && ct_seq_cnn_plan(&m, B) == CT_OK,
                 "build: %s", ct_last_error())) { ct_images_free(&tr); ct_images_free(&te); return; }
    ct_rngs rngs;
    ct_rngs_seed(&rngs, 1);
    ct_seq_cnn_init_weights(&m, &rngs.init);
    ct_optim_config cfg = ct_optim_defaults(OPT_ADAM);
    ct_optim o;
    t_check(ct_optim_init(&o, &cfg, m.params.numel) == CT_OK, "optim: %s", ct_last_error());
    int *order = calloc((size_t)n_train, sizeof *order), *lab = calloc((size_t)B, sizeof *lab);
    float *xb = t_alloc((size_t)B * 784);
    for (int i = 0; i < n_train; i++) order[i] = i;
    double first_loss = 0, last_loss = 0;
    for (int e = 0; e < epochs; e++) {
        ct_rng_shuffle_int(&rngs.data, order, n_train);
        double sum = 0;
        int seen = 0;
        for (int s = 0; s < n_train; s += B) {
            int n = n_train - s < B ? n_train - s : B;
            for (int k = 0; k < n; k++) {
                memcpy(xb + (size_t)k * 784, tr.x + (size_t)order[s + k] * 784, 784 * sizeof *xb);
                lab[k] = tr.labels[order[s + k]];
            }
            ct_params_zero_grad(&m.params);
            float loss = ct_seq_cnn_forward(&m, xb, lab, n, 1, &rngs.dropout, NULL);
            ct_seq_cnn_backward(&m, xb, lab, n);
            ct_optim_step(&o, m.params.data, m.params.grad, cfg.lr);
            sum += (double)loss * n;
            seen += n;
        }
        if (e == 0) first_loss = sum / seen;
        last_loss = sum / seen;
    }
    int right = 0;
    for (int s = 0; s < n_test; s += B) {
        int n = n_test - s < B ? n_test - s : B, correct = 0;
        ct_seq_cnn_forward(&m, te.x + (size_t)s * 784, te.labels + s, n, 0, NULL, &correct);
        right += correct;
    }
    double acc = (double)right / n_test;
    printf("  trained %d epochs: training loss %.4f -> %.4f, test accuracy %.4f\n", epochs, first_loss, last_loss, acc);
    t_check(last_loss < first_loss, "training loss did not fall: %.4f -> %.4f", first_loss, last_loss);
    t_check(acc > threshold, "test accuracy %.4f <= %.2f", acc, threshold);
    ct_optim_free(&o);
    free(order); free(lab); free(xb);
    ct_seq_cnn_free(&m);
    ct_images_free(&tr); ct_images_free(&te);
}

void suite_cnn(void)
{
    parity("cnn_step.h5", SPEC_MAIN, 4, 2, 10, 9, 5);
    parity("cnn_step_gap.h5", SPEC_GAP, 3, 3, 7, 8, 4);
    parity("cnn_step_res.h5", SPEC_RES, 4, 2, 8, 8, 5);
    gradcheck(SPEC_MAIN, 4, 2, 10, 9, 5, 21);
    gradcheck(SPEC_GAP, 3, 3, 7, 8, 4, 22);
    gradcheck(SPEC_RES, 4, 2, 8, 8, 5, 23);
    modes();
    relu_after_pool();
    bn_pool_pairs("conv4k3p1,batchnorm,relu,maxpool2,conv6k3p1,batchnorm,maxpool3s2,conv4k1,batchnorm,relu,flatten,dense5", 2, 1);
    bn_pool_pairs("conv4k3p1,batchnorm,relu,maxpool2,conv6k3p1,batchnorm,relu,gaph,dense5", 2, 1);
    bn_pool_pairs("conv5k3p1,batchnorm,gap,dense5", 1, 0);
    bn_pool_pairs("conv5k3p1,batchnorm,relu,gap,dense5", 1, 0);
    bn_pool_pairs("conv5k3p1,batchnorm,maxpool2,conv4k3p1,batchnorm,relu,maxpool2,flatten,dense5", 2, 1);
    conv_bn_stats();
    conv_pool_pairs("conv16k3p1,relu,maxpool2,conv8k3p1,relu,maxpool2,flatten,dense5", 1);
    conv_pool_pairs("conv16k3p1,maxpool2,conv16k3p1,maxpool2,flatten,dense5", 1);
    conv_pool_pairs_f32("conv8k3,relu,conv16k3,relu,maxpool2,flatten,dense5", 1);     /* the mnist_cnn's form */
    conv_pool_pairs_f32("conv8k3p1,relu,conv12k3p1,maxpool3s2,conv8k3,maxpool2,flatten,dense5", 2);
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        conv_relu_pairs("conv8k3,relu,conv6k3,relu,maxpool2,flatten,dense5", bf16);   /* the mnist_cnn's form */
        conv_relu_pairs("conv8k3p1,relu,batchnorm,maxpool2,flatten,dense5", bf16);              /* before a batchnorm's chain */
    }
    train_fashion();
}
