/* test_flatten.c - flatten [N, C, H, W] -> [N, C*H*W]: the layout contract
 * (element (n,c,h,w) lands at n*CHW + (c*H + h)*W + w), the gradient check,
 * in-place use, and parity with torch.flatten(x, 1). */
#include <stdlib.h>
#include "tests/test.h"
#include "layers/flatten.h"

typedef struct { size_t n; float *x, *out, *wout; } flat_ctx;

static double flat_objective(void *p)
{
    flat_ctx *c = p;
    ct_flatten_forward(c->out, c->x, c->n);
    return t_dot(c->out, c->wout, c->n);
}

static void test_shape(int N, int C, int H, int W, ct_rng *r)
{
    size_t n = (size_t)N * C * H * W;
    t_case("flatten/layout and gradcheck N=%d C=%d H=%d W=%d", N, C, H, W);
    flat_ctx c = { n, t_alloc(n), t_alloc(n), t_alloc(n) };
    float *dx = t_alloc(n);
    /* x[n,c,h,w] = a code of its index, so the layout can be checked exactly */
    for (int in = 0; in < N; in++)
        for (int ic = 0; ic < C; ic++)
            for (int ih = 0; ih < H; ih++)
                for (int iw = 0; iw < W; iw++)
                    c.x[(((size_t)in * C + ic) * H + ih) * W + iw] = (float)(((in * 16 + ic) * 16 + ih) * 16 + iw);
    ct_flatten_forward(c.out, c.x, n);
    size_t bad = 0, chw = (size_t)C * H * W;
    for (int in = 0; in < N; in++)
        for (int ic = 0; ic < C; ic++)
            for (int ih = 0; ih < H; ih++)
                for (int iw = 0; iw < W; iw++)
                    bad += c.out[in * chw + ((size_t)ic * H + ih) * W + iw] != (float)(((in * 16 + ic) * 16 + ih) * 16 + iw);
    t_check(bad == 0, "%zu elements out of place", bad);
    t_fill_uniform(c.x, n, -1, 1, r);
    t_fill_uniform(c.wout, n, -1, 1, r);
    ct_flatten_backward(dx, c.wout, n);
    /* identity: exact up to float rounding, tolerance 2e-4 */
    t_gradcheck("din", flat_objective, &c, c.x, dx, n, 1e-2f, 2e-4, 0, 0);
    /* in place */
    float *y = t_alloc(n);
    ct_flatten_forward(y, c.x, n);
    ct_flatten_forward(c.x, c.x, n);
    ct_flatten_backward(c.wout, c.wout, n);
    t_close("in-place forward", c.x, y, n, 0);
    t_close("in-place backward", c.wout, dx, n, 0);
    free(c.x); free(c.out); free(c.wout); free(dx); free(y);
}

static void test_parity(void)
{
    t_case("flatten/parity torch");
    hid_t f = t_golden_open("flatten.h5");
    size_t n = (size_t)(t_golden_attr(f, "N") * t_golden_attr(f, "C") * t_golden_attr(f, "H") * t_golden_attr(f, "W"));
    if (f < 0 || n == 0) return;
    float *x = t_golden(f, "x", n), *dout = t_golden(f, "dout", n);
    float *ref_out = t_golden(f, "out", n), *ref_dx = t_golden(f, "dx", n);
    float *out = t_alloc(n), *dx = t_alloc(n);
    ct_flatten_forward(out, x, n);
    ct_flatten_backward(dx, dout, n);
    /* a copy: exact */
    t_close("out", out, ref_out, n, 0);
    t_close("dx", dx, ref_dx, n, 0);
    free(x); free(dout); free(ref_out); free(ref_dx); free(out); free(dx);
    H5Fclose(f);
}

void suite_flatten(void)
{
    ct_rng r; ct_rng_seed(&r, 2024, 14);
    test_shape(1, 1, 1, 1, &r);
    test_shape(2, 3, 4, 5, &r);
    test_shape(3, 1, 7, 2, &r);
    test_parity();
}
