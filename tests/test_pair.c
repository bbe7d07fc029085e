/* test_pair.c - the siamese pair heads: Euclidean distance (gradient checks,
 * the eps branch's zero gradient), |a - b| (gradient checks, sign(0) = 0), the
 * learned head |a - b| -> dense(D, 1) -> BCE with logits end to end, and parity
 * of all three with PyTorch. Embeddings are one [2B, D] matrix: a = emb,
 * b = emb + B*D, as the models lay them out. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "layers/pair.h"
#include "layers/dense.h"
#include "layers/loss.h"

/* ---- Euclidean distance ---- */

/* f = sum_k d_k * wd_k */
typedef struct { int B, D; float eps; float *emb, *d, *wd; } euc_ctx;

static double euc_objective(void *p)
{
    euc_ctx *c = p;
    ct_euclidean_forward(c->d, c->emb, c->emb + (size_t)c->B * c->D, c->B, c->D, c->eps);
    return t_dot(c->d, c->wd, c->B);
}

/* Analytic gradient of the objective with respect to emb [2B, D]. */
static void euc_grad(float *demb, euc_ctx *c)
{
    size_t half = (size_t)c->B * c->D;
    ct_euclidean_forward(c->d, c->emb, c->emb + half, c->B, c->D, c->eps);
    ct_euclidean_backward(demb, demb + half, c->wd, c->d, c->emb, c->emb + half, c->B, c->D, c->eps);
}

static void gradcheck_euclidean(int B, int D, ct_rng *r)
{
    t_case("pair/euclidean/gradcheck B=%d D=%d", B, D);
    size_t n = 2 * (size_t)B * D, half = n / 2;
    euc_ctx c = { B, D, CT_KERAS_EPSILON, t_alloc(n), t_alloc(B), t_alloc(B) };
    t_fill_uniform(c.emb, n, -1, 1, r);
    t_fill_uniform(c.wd, B, -1, 1, r);
    /* keep every pair's distance >= 0.1, far from both the eps branch and the
     * kink of sqrt at 0 (h = 1e-3) */
    for (int k = 0; k < B; k++) {
        float *a = c.emb + (size_t)k * D, *b = c.emb + half + (size_t)k * D;
        double s = 0;
        for (int j = 0; j < D; j++) s += (double)(a[j] - b[j]) * (a[j] - b[j]);
        if (s < 0.01) a[0] = b[0] + 0.2f;
    }
    float *demb = t_alloc(n);
    euc_grad(demb, &c);
    /* smooth here; h = 1e-3, float forward: tolerance 2e-3 */
    t_gradcheck("da, db", euc_objective, &c, c.emb, demb, n, 1e-3f, 2e-3, 0, 0);
    free(c.emb); free(c.d); free(c.wd); free(demb);
}

static void test_eps_branch(void)
{
    t_case("pair/euclidean/eps branch gives d = sqrt(eps), zero gradient");
    enum { B = 3, D = 4 };
    /* pair 0: a == b; pair 1: s = 4 * (1e-5)^2 = 4e-10 < eps; pair 2: ordinary */
    float emb[2 * B * D] = {
        0.3f, -0.2f, 0.5f, 0.1f,    0.1f, 0.2f, 0.3f, 0.4f,     0.0f, 0.0f, 0.0f, 0.0f,    /* a */
        0.3f, -0.2f, 0.5f, 0.1f,    0.1f + 1e-5f, 0.2f + 1e-5f, 0.3f + 1e-5f, 0.4f + 1e-5f,
        0.5f, 0.5f, 0.5f, 0.5f };                                                          /* b */
    float wd[B] = { 0.7f, -0.9f, 0.4f }, d[B], demb[2 * B * D];
    euc_ctx c = { B, D, CT_KERAS_EPSILON, emb, d, wd };
    for (int i = 0; i < 2 * B * D; i++) demb[i] = 1e9f;   /* must be overwritten */
    euc_grad(demb, &c);
    float want_d[B] = { sqrtf(CT_KERAS_EPSILON), sqrtf(CT_KERAS_EPSILON), 1.0f };
    t_close("d", d, want_d, B, 1e-6);
    int nonzero = 0;
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < D; j++) nonzero += demb[k * D + j] != 0.0f || demb[B * D + k * D + j] != 0.0f;
    t_check(nonzero == 0, "%d gradient entries of the eps-branch pairs are nonzero", nonzero);
    t_check(demb[2 * D] != 0.0f, "the ordinary pair's gradient is zero");
    /* and finite differences agree: on the two eps pairs alone (a = rows 0-1,
     * b = rows 2-3 of emb2), steps of h = 1e-5 keep s <= 4 * (2e-5)^2 < eps,
     * so f does not move at all and the numeric gradient is exactly 0 */
    float emb2[4 * D], demb2[4 * D], d2[2];
    memcpy(emb2, emb, 2 * D * sizeof(float));                  /* a of pairs 0, 1 */
    memcpy(emb2 + 2 * D, emb + B * D, 2 * D * sizeof(float));  /* b of pairs 0, 1 */
    euc_ctx c2 = { 2, D, CT_KERAS_EPSILON, emb2, d2, wd };
    euc_grad(demb2, &c2);
    t_gradcheck("eps pairs", euc_objective, &c2, emb2, demb2, 4 * D, 1e-5f, 0, 0, 0);
}

/* ---- |a - b| ---- */

typedef struct { size_t n; float *a, *b, *out, *wout; } abs_ctx;

static double abs_objective(void *p)
{
    abs_ctx *c = p;
    ct_absdiff_forward(c->out, c->a, c->b, c->n);
    return t_dot(c->out, c->wout, c->n);
}

static void gradcheck_absdiff(size_t n, ct_rng *r)
{
    t_case("pair/absdiff/gradcheck n=%zu", n);
    abs_ctx c = { n, t_alloc(n), t_alloc(n), t_alloc(n), t_alloc(n) };
    t_fill_uniform(c.a, n, -1, 1, r);
    t_fill_uniform(c.b, n, -1, 1, r);
    for (size_t i = 0; i < n; i++)   /* |a - b| >= 0.05: away from the kink (h = 1e-3) */
        if (fabsf(c.a[i] - c.b[i]) < 0.05f) c.a[i] = c.b[i] + (c.a[i] < c.b[i] ? -0.05f : 0.05f);
    t_fill_uniform(c.wout, n, -1, 1, r);
    float *da = t_alloc(n), *db = t_alloc(n);
    ct_absdiff_backward(da, db, c.wout, c.a, c.b, n);
    /* piecewise linear: exact up to rounding, tolerance 2e-4 */
    t_gradcheck("da", abs_objective, &c, c.a, da, n, 1e-3f, 2e-4, 0, 0);
    t_gradcheck("db", abs_objective, &c, c.b, db, n, 1e-3f, 2e-4, 0, 0);
    free(c.a); free(c.b); free(c.out); free(c.wout); free(da); free(db);
}

static void test_absdiff_tie(void)
{
    t_case("pair/absdiff sign(0) = 0 at a == b");
    float a[3] = { 0.5f, -0.25f, 1.0f }, b[3] = { 0.5f, -0.25f, 0.0f }, g[3] = { 1, 1, 1 }, da[3], db[3];
    ct_absdiff_backward(da, db, g, a, b, 3);
    t_check(da[0] == 0 && db[0] == 0 && da[1] == 0 && db[1] == 0, "gradient at a == b: %g %g %g %g", da[0], db[0], da[1], db[1]);
    t_check(da[2] == 1 && db[2] == -1, "gradient at a > b: %g %g", da[2], db[2]);
}

/* ---- the learned head: L = bce_logits(dense(|a - b|), y) ---- */

typedef struct {
    int B, D;
    float *emb;   /* [2B, D] */
    float *w;     /* [1, D] */
    float *b;     /* [1] */
    float *y;     /* [B] */
    float *h;     /* [B, D] |a - b| */
    float *z;     /* [B] logits */
} head_ctx;

static double head_objective(void *p)
{
    head_ctx *c = p;
    size_t half = (size_t)c->B * c->D;
    ct_absdiff_forward(c->h, c->emb, c->emb + half, half);
    ct_dense_forward(c->z, c->h, c->w, c->b, c->B, c->D, 1);
    return ct_bce_logits_forward(c->z, c->y, c->B);
}

/* demb [2B, D] overwritten; dw [1, D], db [1] accumulated. */
static void head_backward(float *demb, float *dw, float *db, head_ctx *c, float *dz, float *dh)
{
    size_t half = (size_t)c->B * c->D;
    ct_bce_logits_backward(dz, c->z, c->y, c->B);
    ct_dense_backward(dh, dw, db, dz, c->h, c->w, c->B, c->D, 1);
    ct_absdiff_backward(demb, demb + half, dh, c->emb, c->emb + half, half);
}

static head_ctx head_alloc(int B, int D)
{
    head_ctx c = { B, D, t_alloc(2 * (size_t)B * D), t_alloc(D), t_alloc(1), t_alloc(B),
                   t_alloc((size_t)B * D), t_alloc(B) };
    return c;
}

static void head_free(head_ctx *c)
{
    free(c->emb); free(c->w); free(c->b); free(c->y); free(c->h); free(c->z);
}

static void gradcheck_head(int B, int D, ct_rng *r)
{
    t_case("pair/head absdiff-dense-bce/gradcheck B=%d D=%d", B, D);
    head_ctx c = head_alloc(B, D);
    size_t n = 2 * (size_t)B * D, half = n / 2;
    t_fill_uniform(c.emb, n, -1, 1, r);
    for (size_t i = 0; i < half; i++)   /* |a - b| >= 0.05, away from the kink (h = 5e-3) */
        if (fabsf(c.emb[i] - c.emb[half + i]) < 0.05f) c.emb[i] = c.emb[half + i] + 0.05f;
    t_fill_uniform(c.w, D, -2, 2, r);
    t_fill_uniform(c.b, 1, -0.5f, 0.5f, r);
    for (int k = 0; k < B; k++) c.y[k] = (float)(ct_rng_below(r, 2));
    float *demb = t_alloc(n), *dw = t_alloc(D), *db = t_alloc(1), *dz = t_alloc(B), *dh = t_alloc(half);
    head_objective(&c);
    head_backward(demb, dw, db, &c, dz, dh);
    /* the objective is the float mean loss itself: rounding ~6e-8 L / h plus
     * O(h^2) truncation; h = 5e-3, tolerance 2e-3 */
    t_gradcheck("demb", head_objective, &c, c.emb, demb, n, 5e-3f, 2e-3, 0, 0);
    t_gradcheck("dw", head_objective, &c, c.w, dw, D, 5e-3f, 2e-3, 0, 0);
    t_gradcheck("db", head_objective, &c, c.b, db, 1, 5e-3f, 2e-3, 0, 0);
    head_free(&c);
    free(demb); free(dw); free(db); free(dz); free(dh);
}

/* ---- PyTorch parity ---- */

static void test_parity(void)
{
    t_case("pair/euclidean and absdiff/parity torch");
    hid_t f = t_golden_open("pair.h5");
    int B = (int)t_golden_attr(f, "B"), D = (int)t_golden_attr(f, "D");
    size_t n = (size_t)t_golden_attr(f, "n"), half = (size_t)B * D;
    if (f < 0 || B <= 0) return;
    float *emb = t_golden(f, "emb", 2 * half), *dd = t_golden(f, "dd", B);
    float *ref_d = t_golden(f, "d", B), *ref_demb = t_golden(f, "demb", 2 * half);
    float *d = t_alloc(B), *demb = t_alloc(2 * half);
    ct_euclidean_forward(d, emb, emb + half, B, D, CT_KERAS_EPSILON);
    ct_euclidean_backward(demb, demb + half, dd, d, emb, emb + half, B, D, CT_KERAS_EPSILON);
    /* torch sums the squares in float32, we in double: 1e-6 */
    t_close("d", d, ref_d, B, 1e-6);
    t_close("demb", demb, ref_demb, 2 * half, 1e-6);
    t_check(demb[2 * D] == 0.0f && demb[half + 2 * D] == 0.0f, "pair 2 (a == b) must have zero gradient");

    float *a = t_golden(f, "abs_a", n), *b = t_golden(f, "abs_b", n), *dout = t_golden(f, "abs_dout", n);
    float *ref_out = t_golden(f, "abs_out", n), *ref_da = t_golden(f, "abs_da", n), *ref_db = t_golden(f, "abs_db", n);
    float *out = t_alloc(n), *da = t_alloc(n), *db = t_alloc(n);
    ct_absdiff_forward(out, a, b, n);
    ct_absdiff_backward(da, db, dout, a, b, n);
    /* exact operations (subtract, abs, sign times dout): 0 */
    t_close("abs out", out, ref_out, n, 0);
    t_close("abs da", da, ref_da, n, 0);
    t_close("abs db", db, ref_db, n, 0);
    free(emb); free(dd); free(ref_d); free(ref_demb); free(d); free(demb);
    free(a); free(b); free(dout); free(ref_out); free(ref_da); free(ref_db); free(out); free(da); free(db);
    H5Fclose(f);

    t_case("pair/head absdiff-dense-bce/parity torch");
    f = t_golden_open("pair_head.h5");
    B = (int)t_golden_attr(f, "B"); D = (int)t_golden_attr(f, "D");
    if (f < 0 || B <= 0) return;
    half = (size_t)B * D;
    head_ctx c = head_alloc(B, D);
    free(c.emb); free(c.w); free(c.b); free(c.y);
    c.emb = t_golden(f, "emb", 2 * half); c.w = t_golden(f, "w", D);
    c.b = t_golden(f, "b", 1); c.y = t_golden(f, "y", B);
    float *ref_h = t_golden(f, "h", half), *ref_z = t_golden(f, "z", B);
    float *ref_demb2 = t_golden(f, "demb", 2 * half), *ref_dw = t_golden(f, "dw", D), *ref_db2 = t_golden(f, "db", 1);
    float ref_loss = (float)t_golden_attr(f, "loss"), ref_acc = (float)t_golden_attr(f, "acc");
    float *demb2 = t_alloc(2 * half), *dw = t_alloc(D), *db2 = t_alloc(1), *dz = t_alloc(B), *dh = t_alloc(half);
    float loss = (float)head_objective(&c);
    head_backward(demb2, dw, db2, &c, dz, dh);
    float acc = ct_bce_logits_accuracy(c.z, c.y, B);
    /* float32 throughout except our double loss sum: 1e-5 */
    t_close("h", c.h, ref_h, half, 0);
    t_close("z", c.z, ref_z, B, 1e-5);
    t_close("loss", &loss, &ref_loss, 1, 1e-5);
    t_close("demb", demb2, ref_demb2, 2 * half, 1e-5);
    t_close("dw", dw, ref_dw, D, 1e-5);
    t_close("db", db2, ref_db2, 1, 1e-5);
    t_close("accuracy", &acc, &ref_acc, 1, 0);
    head_free(&c);
    free(ref_h); free(ref_z); free(ref_demb2); free(ref_dw); free(ref_db2);
    free(demb2); free(dw); free(db2); free(dz); free(dh);
    H5Fclose(f);
}

void suite_pair(void)
{
    ct_rng r; ct_rng_seed(&r, 2024, 15);
    gradcheck_euclidean(1, 1, &r);
    gradcheck_euclidean(1, 8, &r);
    gradcheck_euclidean(3, 5, &r);
    gradcheck_euclidean(6, 17, &r);
    for (int k = 0; k < 2; k++)   /* shapes drawn from the fixed seed */
        gradcheck_euclidean(1 + (int)ct_rng_below(&r, 9), 1 + (int)ct_rng_below(&r, 24), &r);
    test_eps_branch();
    gradcheck_absdiff(1, &r);
    gradcheck_absdiff(9, &r);
    gradcheck_absdiff(100, &r);
    test_absdiff_tie();
    gradcheck_head(1, 1, &r);
    gradcheck_head(1, 6, &r);
    gradcheck_head(5, 3, &r);
    gradcheck_head(9, 13, &r);
    test_parity();
}
