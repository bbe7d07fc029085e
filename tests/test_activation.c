/* test_activation.c - relu, tanh, sigmoid: finite-difference gradient checks
 * (inputs kept away from relu's kink, and a run with kink detection), relu's
 * derivative 0 at 0, sigmoid without overflow, hard sigmoid, in-place use, and
 * parity with torch.relu/tanh/sigmoid and their autograd gradients. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "layers/activation.h"

typedef void (*act_fwd)(float *out, const float *in, size_t n);
typedef void (*act_bwd)(float *din, const float *dout, const float *out, size_t n);

static const struct { const char *name; act_fwd fwd; act_bwd bwd; } acts[] = {
    { "relu", ct_relu_forward, ct_relu_backward },
    { "tanh", ct_tanh_forward, ct_tanh_backward },
    { "sigmoid", ct_sigmoid_forward, ct_sigmoid_backward },
};

/* f = sum_i act(x)_i * wout_i */
typedef struct { act_fwd fwd; size_t n; float *x, *out, *wout; } act_ctx;

static double act_objective(void *p)
{
    act_ctx *c = p;
    c->fwd(c->out, c->x, c->n);
    return t_dot(c->out, c->wout, c->n);
}

static void gradcheck_act(int a, size_t n, int at_kinks, ct_rng *r)
{
    t_case("activation/%s/gradcheck n=%zu%s", acts[a].name, n, at_kinks ? " (kink detection)" : "");
    act_ctx c = { acts[a].fwd, n, t_alloc(n), t_alloc(n), t_alloc(n) };
    t_fill_uniform(c.x, n, -3, 3, r);
    for (size_t i = 0; i < n; i++) {
        if (at_kinks && i % 9 == 0)
            c.x[i] = 0.0f;   /* exactly on relu's kink: detected and skipped by t_gradcheck */
        else if (fabsf(c.x[i]) < 0.05f)
            c.x[i] = c.x[i] < 0 ? -0.05f : 0.05f;   /* |x| >= 0.05, well beyond h = 1e-3 */
    }
    t_fill_uniform(c.wout, n, -1, 1, r);
    float *dx = t_alloc(n);
    acts[a].fwd(c.out, c.x, n);
    acts[a].bwd(dx, c.wout, c.out, n);
    /* smooth functions, h = 1e-3, float forward: tolerance 2e-3 (truncation
     * O(h^2) plus rounding ~1e-7/h) */
    t_gradcheck("din", act_objective, &c, c.x, dx, n, 1e-3f, 2e-3, 0, at_kinks);
    free(c.x); free(c.out); free(c.wout); free(dx);
}

static void test_special_values(void)
{
    t_case("activation/relu derivative 0 at 0, sigmoid stable at large |x|");
    float x[3] = { 0.0f, -0.0f, 1.0f }, y[3], g[3] = { 1, 1, 1 }, dx[3];
    ct_relu_forward(y, x, 3);
    ct_relu_backward(dx, g, y, 3);
    t_check(dx[0] == 0.0f && dx[1] == 0.0f && dx[2] == 1.0f, "relu'(0) = %g, relu'(-0) = %g, relu'(1) = %g", dx[0], dx[1], dx[2]);
    float big[6] = { 100.0f, -100.0f, 1000.0f, -1000.0f, 88.8f, -88.8f }, s[6];
    ct_sigmoid_forward(s, big, 6);
    for (int i = 0; i < 6; i++)
        t_check(isfinite(s[i]) && s[i] >= 0.0f && s[i] <= 1.0f, "sigmoid(%g) = %g", big[i], s[i]);
    t_check(s[0] == 1.0f && s[2] == 1.0f, "sigmoid(+large) = %g, %g, want 1", s[0], s[2]);
    t_check(s[1] > 0.0f && s[1] < 1e-40f, "sigmoid(-100) = %g, want 3.7e-44", s[1]);
    t_check(s[3] == 0.0f, "sigmoid(-1000) = %g, want 0", s[3]);
    t_check(fabsf(ct_sigmoidf(0.0f) - 0.5f) == 0.0f, "sigmoid(0) = %g", ct_sigmoidf(0.0f));
    /* sigmoid(-x) = 1 - sigmoid(x) */
    double worst = 0;
    for (float v = -20.0f; v <= 20.0f; v += 0.37f) {
        double e = fabs((double)ct_sigmoidf(-v) - (1.0 - (double)ct_sigmoidf(v)));
        if (e > worst) worst = e;
    }
    t_check(worst < 1e-7, "sigmoid symmetry error %g", worst);

    t_case("activation/hard_sigmoid clip(0.2x + 0.5, 0, 1)");
    float hx[5] = { -10.0f, -2.5f, 0.0f, 1.0f, 10.0f }, want[5] = { 0.0f, 0.0f, 0.5f, 0.7f, 1.0f }, got[5];
    for (int i = 0; i < 5; i++) got[i] = ct_hard_sigmoidf(hx[i]);
    t_close("hard_sigmoid", got, want, 5, 1e-7);   /* exact up to rounding of 0.2 */
}

static void test_in_place(ct_rng *r)
{
    t_case("activation/in place forward and backward");
    enum { N = 33 };
    for (int a = 0; a < 3; a++) {
        float x[N], g[N], y[N], dx[N], buf[N], gbuf[N];
        t_fill_uniform(x, N, -2, 2, r);
        t_fill_uniform(g, N, -1, 1, r);
        acts[a].fwd(y, x, N);
        acts[a].bwd(dx, g, y, N);
        memcpy(buf, x, sizeof buf);
        memcpy(gbuf, g, sizeof gbuf);
        acts[a].fwd(buf, buf, N);          /* out == in */
        acts[a].bwd(gbuf, gbuf, buf, N);   /* din == dout */
        t_close(acts[a].name, buf, y, N, 0);
        t_close(acts[a].name, gbuf, dx, N, 0);
    }
}

static void test_parity(void)
{
    t_case("activation/parity torch");
    hid_t f = t_golden_open("activation.h5");
    size_t n = (size_t)t_golden_attr(f, "n");
    if (f < 0 || n == 0) return;
    float *x = t_golden(f, "x", n), *dout = t_golden(f, "dout", n);
    float *y = t_alloc(n), *dx = t_alloc(n);
    char name[64];
    for (int a = 0; a < 3; a++) {
        snprintf(name, sizeof name, "%s_out", acts[a].name);
        float *ref_y = t_golden(f, name, n);
        snprintf(name, sizeof name, "%s_dx", acts[a].name);
        float *ref_dx = t_golden(f, name, n);
        acts[a].fwd(y, x, n);
        acts[a].bwd(dx, dout, y, n);
        /* same float32 formulas; libm's tanhf/expf vs PyTorch's may differ by an
         * ulp or two: 1e-6 */
        snprintf(name, sizeof name, "%s out", acts[a].name);
        t_close(name, y, ref_y, n, 1e-6);
        snprintf(name, sizeof name, "%s dx", acts[a].name);
        t_close(name, dx, ref_dx, n, 1e-6);
        free(ref_y); free(ref_dx);
    }
    free(x); free(dout); free(y); free(dx);
    H5Fclose(f);
}

void suite_activation(void)
{
    ct_rng r; ct_rng_seed(&r, 2024, 12);
    const size_t sizes[3] = { 1, 7, 64 };
    for (int a = 0; a < 3; a++)
        for (int s = 0; s < 3; s++) gradcheck_act(a, sizes[s], 0, &r);
    gradcheck_act(0, 50, 1, &r);
    test_special_values();
    test_in_place(&r);
    test_parity();
}
