/* test_add.c - the element-wise add of a residual connection (layers/add.h):
 * finite-difference checks of d/da and d/db, the backward pass's accumulation
 * into both inputs' gradients (and NULL for a side not wanted), and the forward
 * pass in place over either input. */
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "layers/add.h"

/* f = sum_i (a + b)_i * wout_i */
typedef struct { size_t n; float *a, *b, *out, *wout; } add_ctx;

static double add_objective(void *p)
{
    add_ctx *c = p;
    ct_add_forward(c->out, c->a, c->b, c->n);
    return t_dot(c->out, c->wout, c->n);
}

static void gradcheck_add(size_t n, ct_rng *r)
{
    t_case("add/gradcheck d/da and d/db, n=%zu", n);
    add_ctx c = { n, t_alloc(n), t_alloc(n), t_alloc(n), t_alloc(n) };
    t_fill_uniform(c.a, n, -2, 2, r);
    t_fill_uniform(c.b, n, -2, 2, r);
    t_fill_uniform(c.wout, n, -1, 1, r);
    float *da = t_alloc(n), *db = t_alloc(n);   /* zeroed: the accumulation starts from 0 */
    ct_add_backward(da, db, c.wout, n);
    /* a linear function, h = 1e-2: only rounding (~1e-7 / h) is left; tolerance 1e-4 */
    t_gradcheck("da", add_objective, &c, c.a, da, n, 1e-2f, 1e-4, 0, 0);
    t_gradcheck("db", add_objective, &c, c.b, db, n, 1e-2f, 1e-4, 0, 0);
    free(c.a); free(c.b); free(c.out); free(c.wout); free(da); free(db);
}

static void accumulation(ct_rng *r)
{
    t_case("add/backward accumulates into both gradients; NULL skips a side; forward in place");
    const size_t n = 1001;
    float *a = t_alloc(n), *b = t_alloc(n), *dout = t_alloc(n), *da = t_alloc(n), *db = t_alloc(n);
    float *want_a = t_alloc(n), *want_b = t_alloc(n), *sum = t_alloc(n);
    t_fill_uniform(a, n, -1, 1, r);
    t_fill_uniform(b, n, -1, 1, r);
    t_fill_uniform(dout, n, -1, 1, r);
    t_fill_uniform(da, n, -1, 1, r);   /* gradients already holding something */
    t_fill_uniform(db, n, -1, 1, r);
    for (size_t i = 0; i < n; i++) { want_a[i] = da[i] + dout[i]; want_b[i] = db[i] + dout[i]; sum[i] = a[i] + b[i]; }
    ct_add_backward(da, db, dout, n);
    t_close("da += dout", da, want_a, n, 0.0);
    t_close("db += dout", db, want_b, n, 0.0);
    memcpy(da, want_a, n * sizeof *da);
    ct_add_backward(NULL, db, dout, n);
    for (size_t i = 0; i < n; i++) want_b[i] += dout[i];
    t_close("db += dout again, da not given", db, want_b, n, 0.0);
    ct_add_backward(da, NULL, dout, n);
    for (size_t i = 0; i < n; i++) want_a[i] += dout[i];
    t_close("da += dout again, db not given", da, want_a, n, 0.0);
    float *out = t_alloc(n);
    ct_add_forward(out, a, b, n);
    t_close("out = a + b", out, sum, n, 0.0);
    memcpy(out, a, n * sizeof *out);
    ct_add_forward(out, out, b, n);
    t_close("in place over a", out, sum, n, 0.0);
    memcpy(out, b, n * sizeof *out);
    ct_add_forward(out, a, out, n);
    t_close("in place over b", out, sum, n, 0.0);
    free(a); free(b); free(dout); free(da); free(db); free(want_a); free(want_b); free(sum); free(out);
}

void suite_add(void)
{
    ct_rng r;
    ct_rng_seed(&r, 77, 1);
    gradcheck_add(1, &r);
    gradcheck_add(37, &r);
    gradcheck_add(4099, &r);   /* long enough to be split between the workers */
    accumulation(&r);
}
