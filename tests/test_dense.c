/* test_dense.c - the dense layer: parameter registration, finite-difference
 * gradient checks of din/dw/db on several shapes (batch 1, odd sizes, no bias),
 * the overwrite/accumulate contract, and parity with PyTorch's F.linear. */
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/params.h"
#include "layers/dense.h"

/* Objective for the gradient check: f = sum_{b,o} out[b,o] * wout[b,o], so that
 * df/dout = wout is the upstream gradient fed to ct_dense_backward. */
typedef struct {
    int B, in_dim, out_dim;
    float *x;     /* [B, in_dim] */
    float *w;     /* [out_dim, in_dim] */
    float *b;     /* [out_dim] or NULL */
    float *out;   /* [B, out_dim] scratch */
    float *wout;  /* [B, out_dim] fixed random weights */
} dense_ctx;

static double dense_objective(void *p)
{
    dense_ctx *c = p;
    ct_dense_forward(c->out, c->x, c->w, c->b, c->B, c->in_dim, c->out_dim);
    return t_dot(c->out, c->wout, (size_t)c->B * c->out_dim);
}

static void gradcheck_shape(int B, int in_dim, int out_dim, int bias, ct_rng *r)
{
    t_case("dense/gradcheck B=%d in=%d out=%d%s", B, in_dim, out_dim, bias ? "" : " no bias");
    size_t nx = (size_t)B * in_dim, nw = (size_t)out_dim * in_dim, no = (size_t)B * out_dim;
    dense_ctx c = { B, in_dim, out_dim, t_alloc(nx), t_alloc(nw), bias ? t_alloc(out_dim) : NULL,
                    t_alloc(no), t_alloc(no) };
    t_fill_uniform(c.x, nx, -1, 1, r);
    t_fill_uniform(c.w, nw, -1, 1, r);
    if (bias) t_fill_uniform(c.b, out_dim, -1, 1, r);
    t_fill_uniform(c.wout, no, -1, 1, r);

    float *dx = t_alloc(nx), *dw = t_alloc(nw), *db = t_alloc(out_dim);
    for (size_t i = 0; i < nx; i++) dx[i] = 1e9f;   /* din must be overwritten */
    ct_dense_backward(dx, dw, bias ? db : NULL, c.wout, c.x, c.w, B, in_dim, out_dim);

    /* f is linear in each coordinate, so central differences are exact up to
     * float rounding of the forward pass: tolerance 2e-4 (seen: <= 1.4e-5). */
    t_gradcheck("din", dense_objective, &c, c.x, dx, nx, 1e-2f, 2e-4, 0, 0);
    t_gradcheck("dw", dense_objective, &c, c.w, dw, nw, 1e-2f, 2e-4, 0, 0);
    if (bias) t_gradcheck("db", dense_objective, &c, c.b, db, out_dim, 1e-2f, 2e-4, 0, 0);

    free(c.x); free(c.w); free(c.b); free(c.out); free(c.wout); free(dx); free(dw); free(db);
}

/* din is overwritten, dw and db accumulate: two backward calls double dw, db
 * and leave din unchanged. */
static void test_accumulate(void)
{
    t_case("dense/backward overwrites din, accumulates dw db");
    enum { B = 3, I = 4, O = 2 };
    ct_rng r; ct_rng_seed(&r, 7, 1);
    float x[B * I], w[O * I], dout[B * O], dx1[B * I], dx2[B * I], dw1[O * I], db1[O];
    float dw2[O * I] = { 0 }, db2[O] = { 0 };
    t_fill_uniform(x, B * I, -1, 1, &r); t_fill_uniform(w, O * I, -1, 1, &r); t_fill_uniform(dout, B * O, -1, 1, &r);
    memset(dw1, 0, sizeof dw1); memset(db1, 0, sizeof db1);
    ct_dense_backward(dx1, dw1, db1, dout, x, w, B, I, O);
    ct_dense_backward(dx2, dw2, db2, dout, x, w, B, I, O);
    ct_dense_backward(dx2, dw2, db2, dout, x, w, B, I, O);
    for (int i = 0; i < O * I; i++) dw1[i] *= 2;
    for (int i = 0; i < O; i++) db1[i] *= 2;
    t_close("din after two calls", dx2, dx1, B * I, 0);     /* bitwise: same computation */
    t_close("dw doubled", dw2, dw1, O * I, 1e-6);            /* float rounding only */
    t_close("db doubled", db2, db1, O, 1e-6);
}

static void test_params_add(void)
{
    t_case("dense/params_add names, shapes, init, no-bias, duplicate");
    ct_params ps; ct_params_init(&ps);
    dense_ids a, b;
    t_check(ct_dense_params_add(&a, &ps, "fc1", 5, 3, 1) == CT_OK, "fc1: %s", ct_last_error());
    t_check(ct_dense_params_add(&b, &ps, "fc2", 3, 1, 0) == CT_OK, "fc2: %s", ct_last_error());
    t_check(b.b == -1, "no bias: ids.b = %d, want -1", b.b);
    t_check(a.w >= 0 && a.b >= 0 && b.w >= 0, "handles %d %d %d", a.w, a.b, b.w);
    if (a.w >= 0 && a.b >= 0) {
        const ct_param *pw = &ps.p[a.w], *pb = &ps.p[a.b];
        t_check(strcmp(pw->name, "fc1/w") == 0 && strcmp(pb->name, "fc1/b") == 0, "names %s %s", pw->name, pb->name);
        t_check(pw->ndim == 2 && pw->shape[0] == 3 && pw->shape[1] == 5, "w shape [%d, %d]", pw->shape[0], pw->shape[1]);
        t_check(pb->ndim == 1 && pb->shape[0] == 3, "b shape [%d]", pb->shape[0]);
        t_check(pw->init.kind == CT_INIT_GLOROT_UNIFORM && pw->init.fan_in == 5 && pw->init.fan_out == 3,
                "w init kind %d fan_in %d fan_out %d", pw->init.kind, pw->init.fan_in, pw->init.fan_out);
        t_check(pb->init.kind == CT_INIT_ZEROS, "b init kind %d", pb->init.kind);
    }
    t_check(ct_params_count(&ps) == 5 * 3 + 3 + 3, "count %zu", ct_params_count(&ps));
    dense_ids c;
    t_check(ct_dense_params_add(&c, &ps, "fc1", 5, 3, 1) != CT_OK, "a duplicate name must fail");
    t_check(strstr(ct_last_error(), "fc1/w") != NULL, "message names the parameter: %s", ct_last_error());
    ct_params_free(&ps);
}

static void test_parity(void)
{
    t_case("dense/parity torch");
    hid_t f = t_golden_open("dense.h5");
    int B = (int)t_golden_attr(f, "B"), I = (int)t_golden_attr(f, "in_dim"), O = (int)t_golden_attr(f, "out_dim");
    if (f < 0 || B <= 0) return;
    float *x = t_golden(f, "x", (size_t)B * I), *w = t_golden(f, "w", (size_t)O * I), *b = t_golden(f, "b", O);
    float *dout = t_golden(f, "dout", (size_t)B * O), *ref_out = t_golden(f, "out", (size_t)B * O);
    float *ref_dx = t_golden(f, "dx", (size_t)B * I), *ref_dw = t_golden(f, "dw", (size_t)O * I);
    float *ref_db = t_golden(f, "db", O);
    float *out = t_alloc((size_t)B * O), *dx = t_alloc((size_t)B * I), *dw = t_alloc((size_t)O * I), *db = t_alloc(O);
    ct_dense_forward(out, x, w, b, B, I, O);
    ct_dense_backward(dx, dw, db, dout, x, w, B, I, O);
    /* same float32 math, only the summation order may differ: 1e-5 */
    t_close("out", out, ref_out, (size_t)B * O, 1e-5);
    t_close("dx", dx, ref_dx, (size_t)B * I, 1e-5);
    t_close("dw", dw, ref_dw, (size_t)O * I, 1e-5);
    t_close("db", db, ref_db, O, 1e-5);
    free(x); free(w); free(b); free(dout); free(ref_out); free(ref_dx); free(ref_dw); free(ref_db);
    free(out); free(dx); free(dw); free(db);
    H5Fclose(f);
}

void suite_dense(void)
{
    ct_rng r; ct_rng_seed(&r, 2024, 11);
    gradcheck_shape(1, 3, 5, 1, &r);
    gradcheck_shape(4, 7, 2, 1, &r);
    gradcheck_shape(5, 1, 1, 1, &r);
    gradcheck_shape(3, 17, 9, 1, &r);
    gradcheck_shape(2, 6, 3, 0, &r);
    /* shapes drawn from the fixed seed */
    for (int k = 0; k < 3; k++)
        gradcheck_shape(1 + (int)ct_rng_below(&r, 8), 1 + (int)ct_rng_below(&r, 20), 1 + (int)ct_rng_below(&r, 12), 1, &r);
    test_accumulate();
    test_params_add();
    test_parity();
}
