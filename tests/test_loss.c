/* test_loss.c - contrastive, BCE with logits and softmax cross-entropy:
 * finite-difference gradient checks (several batch sizes, two margins),
 * behaviour at the margin and at saturated logits, every accuracy metric on
 * hand-computed cases, and parity with PyTorch (F.binary_cross_entropy_with_logits,
 * F.cross_entropy, and the contrastive formula written in torch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "layers/loss.h"

/* The objective of every check is the mean loss itself, returned as a float:
 * its rounding (~6e-8 L) divided by h = 1e-2 stays near 1e-5 of the gradient. */
#define LOSS_H 1e-2f

typedef struct { int B, C; float margin; float *x, *y, *prob; int *labels; } loss_ctx;

static double contrastive_objective(void *p) { loss_ctx *c = p; return ct_contrastive_forward(c->x, c->y, c->B, c->margin); }
static double bce_objective(void *p)         { loss_ctx *c = p; return ct_bce_logits_forward(c->x, c->y, c->B); }
static double softmax_objective(void *p)     { loss_ctx *c = p; return ct_softmax_ce_forward(c->prob, c->x, c->labels, c->B, c->C); }

static void random_labels01(float *y, int B, ct_rng *r)
{
    for (int k = 0; k < B; k++) y[k] = (float)ct_rng_below(r, 2);
}

static void gradcheck_contrastive(int B, float margin, ct_rng *r)
{
    t_case("loss/contrastive/gradcheck B=%d margin=%g", B, margin);
    loss_ctx c = { B, 1, margin, t_alloc(B), t_alloc(B), NULL, NULL };
    t_fill_uniform(c.x, B, 0.0f, 2.0f * margin, r);
    for (int k = 0; k < B; k++)   /* |d - m| >= 0.05, so m - d keeps its sign over +-h */
        if (fabsf(c.x[k] - margin) < 0.05f) c.x[k] = margin + (c.x[k] < margin ? -0.05f : 0.05f);
    random_labels01(c.y, B, r);
    if (B > 1) c.y[0] = 0.0f, c.y[1] = 1.0f;   /* both terms present */
    float *dd = t_alloc(B);
    ct_contrastive_backward(dd, c.x, c.y, B, margin);
    /* piecewise quadratic, so central differences are exact but for rounding
     * (seen up to ~8e-5 at B = 32): tolerance 5e-4 */
    t_gradcheck("dd", contrastive_objective, &c, c.x, dd, B, LOSS_H, 5e-4, 0, 0);
    free(c.x); free(c.y); free(dd);
}

static void gradcheck_bce(int B, ct_rng *r)
{
    t_case("loss/bce_logits/gradcheck B=%d", B);
    loss_ctx c = { B, 1, 0, t_alloc(B), t_alloc(B), NULL, NULL };
    t_fill_uniform(c.x, B, -4.0f, 4.0f, r);
    random_labels01(c.y, B, r);
    float *dz = t_alloc(B);
    ct_bce_logits_backward(dz, c.x, c.y, B);
    /* smooth: O(h^2) truncation (~1e-5 relative) plus rounding: tolerance 1e-3 */
    t_gradcheck("dz", bce_objective, &c, c.x, dz, B, LOSS_H, 1e-3, 0, 0);
    free(c.x); free(c.y); free(dz);
}

static void gradcheck_softmax(int B, int C, ct_rng *r)
{
    t_case("loss/softmax_ce/gradcheck B=%d C=%d", B, C);
    size_t n = (size_t)B * C;
    loss_ctx c = { B, C, 0, t_alloc(n), NULL, t_alloc(n), calloc((size_t)B, sizeof(int)) };
    t_fill_uniform(c.x, n, -3.0f, 3.0f, r);
    for (int k = 0; k < B; k++) c.labels[k] = (int)ct_rng_below(r, (uint32_t)C);
    float *dz = t_alloc(n);
    ct_softmax_ce_forward(c.prob, c.x, c.labels, B, C);
    ct_softmax_ce_backward(dz, c.prob, c.labels, B, C);
    /* smooth: tolerance 1e-3 as for BCE */
    t_gradcheck("dlogits", softmax_objective, &c, c.x, dz, n, LOSS_H, 1e-3, 0, 0);
    free(c.x); free(c.prob); free(c.labels); free(dz);
}

static void test_edges(void)
{
    t_case("loss/contrastive at d = margin: zero loss and gradient for y = 0");
    float d[2] = { 1.0f, 1.5f }, y[2] = { 0.0f, 0.0f }, dd[2];
    float L = ct_contrastive_forward(d, y, 2, 1.0f);
    ct_contrastive_backward(dd, d, y, 2, 1.0f);
    t_check(L == 0.0f && dd[0] == 0.0f && dd[1] == 0.0f, "loss %g, dd %g %g", L, dd[0], dd[1]);
    /* hand values: y = 1, d = 0.5: L = 0.25, dL/dd = 1.0; y = 0, d = 0.25, m = 1: L = 0.5625, dL/dd = -1.5 */
    float d2[2] = { 0.5f, 0.25f }, y2[2] = { 1.0f, 0.0f }, dd2[2], want_dd[2] = { 1.0f / 2, -1.5f / 2 };
    float L2 = ct_contrastive_forward(d2, y2, 2, 1.0f), want_L = (0.25f + 0.5625f) / 2;
    ct_contrastive_backward(dd2, d2, y2, 2, 1.0f);
    t_close("hand loss", &L2, &want_L, 1, 1e-7);
    t_close("hand dd", dd2, want_dd, 2, 1e-7);

    t_case("loss/bce_logits stable at |z| = 100");
    float z[4] = { 100.0f, -100.0f, 100.0f, -100.0f }, yb[4] = { 0.0f, 1.0f, 1.0f, 0.0f }, dz[4];
    float Lb = ct_bce_logits_forward(z, yb, 4), want_b = (100.0f + 100.0f) / 4;   /* the last two are ~e^-100 */
    ct_bce_logits_backward(dz, z, yb, 4);
    float want_dz[4] = { 0.25f, -0.25f, 0.0f, 0.0f };
    t_close("loss", &Lb, &want_b, 1, 1e-7);
    t_close("dz", dz, want_dz, 4, 1e-7);

    t_case("loss/softmax_ce stable at logits 1000");
    float lg[6] = { 1000.0f, 0.0f, -1000.0f, 1000.0f, 1000.0f, 0.0f }, prob[6], dl[6];
    int lab[2] = { 0, 1 };
    float Ls = ct_softmax_ce_forward(prob, lg, lab, 2, 3), want_s = (0.0f + logf(2.0f)) / 2;
    ct_softmax_ce_backward(dl, prob, lab, 2, 3);
    float want_p[6] = { 1, 0, 0, 0.5f, 0.5f, 0 }, want_dl[6] = { 0, 0, 0, 0.25f, -0.25f, 0 };
    t_close("loss", &Ls, &want_s, 1, 1e-7);
    t_close("prob", prob, want_p, 6, 1e-7);
    t_close("dlogits", dl, want_dl, 6, 1e-7);
}

static void test_accuracy_by_hand(void)
{
    t_case("loss/accuracy metrics on hand-computed cases");
    /* contrastive, threshold 0.5: predicted same = {1, 0, 1, 0}, y = {1, 0, 0, 1} -> 2/4 */
    float d[4] = { 0.1f, 0.7f, 0.3f, 0.9f }, y[4] = { 1, 0, 0, 1 };
    float a = ct_contrastive_accuracy(d, y, 4, 0.5f), want = 0.5f;
    t_close("contrastive", &a, &want, 1, 0);
    /* d exactly at the threshold counts as "different" (d < threshold is strict) */
    float dt[1] = { 0.5f }, yt[1] = { 0 };
    a = ct_contrastive_accuracy(dt, yt, 1, 0.5f); want = 1.0f;
    t_close("contrastive at threshold", &a, &want, 1, 0);
    /* bce: predicted 1 iff z > 0: {1, 0, 0, 1, 1} vs y {1, 0, 1, 0, 1} -> 3/5 */
    float z[5] = { 2.0f, -1.0f, 0.0f, 0.5f, 3.0f }, yb[5] = { 1, 0, 1, 0, 1 };
    a = ct_bce_logits_accuracy(z, yb, 5); want = 0.6f;
    t_close("bce", &a, &want, 1, 0);
    /* softmax: argmax {1 (first of a tie), 0, 2} vs labels {1, 0, 1} -> 2/3 */
    float lg[9] = { 1, 3, 3,   5, 0, 0,   0, 0, 1 };
    int lab[3] = { 1, 0, 1 };
    a = ct_softmax_ce_accuracy(lg, lab, 3, 3); want = 2.0f / 3.0f;
    t_close("softmax", &a, &want, 1, 0);
}

static void test_parity(void)
{
    hid_t f = t_golden_open("loss.h5");
    if (f < 0) return;
    /* losses are summed in double here, by torch in float32: 1e-6 relative on
     * the scalar loss; gradients are the same float32 formulas: 1e-6 */

    t_case("loss/contrastive/parity torch");
    enum { BC = 9, BB = 11, BS = 6, CS = 5 };
    float *d = t_golden(f, "c_d", BC), *y = t_golden(f, "c_y", BC), dd[BC];
    const float margins[2] = { 1.0f, 2.0f };
    const char *tags[2] = { "m1", "m2" };
    char name[32];
    for (int m = 0; m < 2; m++) {
        snprintf(name, sizeof name, "c_loss_%s", tags[m]);
        float ref_L = (float)t_golden_attr(f, name);
        snprintf(name, sizeof name, "c_dd_%s", tags[m]);
        float *ref_dd = t_golden(f, name, BC);
        float L = ct_contrastive_forward(d, y, BC, margins[m]);
        ct_contrastive_backward(dd, d, y, BC, margins[m]);
        snprintf(name, sizeof name, "loss margin %g", margins[m]);
        t_close(name, &L, &ref_L, 1, 1e-6);
        snprintf(name, sizeof name, "dd margin %g", margins[m]);
        t_close(name, dd, ref_dd, BC, 1e-6);
        free(ref_dd);
    }
    float acc = ct_contrastive_accuracy(d, y, BC, 0.5f), ref_acc = (float)t_golden_attr(f, "c_acc");
    t_close("accuracy", &acc, &ref_acc, 1, 0);
    free(d); free(y);

    t_case("loss/bce_logits/parity torch");
    float *z = t_golden(f, "b_z", BB), *yb = t_golden(f, "b_y", BB), *ref_dz = t_golden(f, "b_dz", BB), dz[BB];
    float L = ct_bce_logits_forward(z, yb, BB), ref_L = (float)t_golden_attr(f, "b_loss");
    ct_bce_logits_backward(dz, z, yb, BB);
    t_close("loss", &L, &ref_L, 1, 1e-6);
    t_close("dz", dz, ref_dz, BB, 1e-6);
    acc = ct_bce_logits_accuracy(z, yb, BB); ref_acc = (float)t_golden_attr(f, "b_acc");
    t_close("accuracy", &acc, &ref_acc, 1, 0);
    free(z); free(yb); free(ref_dz);

    t_case("loss/softmax_ce/parity torch F.cross_entropy");
    float *lg = t_golden(f, "s_logits", BS * CS), *ref_p = t_golden(f, "s_prob", BS * CS);
    float *ref_dl = t_golden(f, "s_dlogits", BS * CS), prob[BS * CS], dl[BS * CS];
    int *lab = t_golden_i32(f, "s_labels", BS);
    L = ct_softmax_ce_forward(prob, lg, lab, BS, CS); ref_L = (float)t_golden_attr(f, "s_loss");
    ct_softmax_ce_backward(dl, prob, lab, BS, CS);
    t_close("loss", &L, &ref_L, 1, 1e-6);
    t_close("prob", prob, ref_p, BS * CS, 1e-6);
    t_close("dlogits", dl, ref_dl, BS * CS, 1e-6);
    acc = ct_softmax_ce_accuracy(lg, lab, BS, CS); ref_acc = (float)t_golden_attr(f, "s_acc");
    t_close("accuracy", &acc, &ref_acc, 1, 0);
    free(lg); free(ref_p); free(ref_dl); free(lab);
    H5Fclose(f);
}

void suite_loss(void)
{
    ct_rng r; ct_rng_seed(&r, 2024, 16);
    const int batches[4] = { 1, 2, 7, 32 };
    for (int i = 0; i < 4; i++) {
        gradcheck_contrastive(batches[i], 1.0f, &r);
        gradcheck_contrastive(batches[i], 2.0f, &r);
        gradcheck_bce(batches[i], &r);
    }
    gradcheck_softmax(1, 2, &r);
    gradcheck_softmax(4, 5, &r);
    gradcheck_softmax(7, 11, &r);
    gradcheck_softmax(1 + (int)ct_rng_below(&r, 16), 2 + (int)ct_rng_below(&r, 20), &r);   /* drawn from the seed */
    test_edges();
    test_accuracy_by_hand();
    test_parity();
}
