/* loss.c - contrastive, binary cross-entropy with logits, softmax cross-entropy,
 * and their accuracy metrics (see loss.h for the formulas).
 *
 * Losses are means over the batch, summed in double; backward passes write
 * d(mean loss)/d(input), i.e. already divided by B.
 */
#include <math.h>
#include "core/error.h"
#include "layers/loss.h"

/* ---- contrastive: d [B] distances, y [B] in {0,1} (1 = same) ---- */

float ct_contrastive_forward(const float *d, const float *y, int B, float margin)
{
    double sum = 0.0;
    for (int k = 0; k < B; k++) {
        double dk = d[k], yk = y[k];
        double gap = margin - dk > 0.0 ? margin - dk : 0.0;   /* max(m - d, 0) */
        sum += yk * dk * dk + (1.0 - yk) * gap * gap;
    }
    return (float)(sum / B);
}

/* L_k = y d^2 + (1 - y) max(m - d, 0)^2
 *   dL_k/dd = 2 y d - 2 (1 - y) max(m - d, 0)      (the max contributes 0 for d >= m)
 * divided by B for the mean. */
void ct_contrastive_backward(float *dd, const float *d, const float *y, int B, float margin)
{
    const float inv_b = 1.0f / (float)B;
    for (int k = 0; k < B; k++) {
        float gap = margin - d[k] > 0.0f ? margin - d[k] : 0.0f;
        dd[k] = (2.0f * y[k] * d[k] - 2.0f * (1.0f - y[k]) * gap) * inv_b;
    }
}

/* fraction of pairs predicted "same" (d < threshold) exactly when y = 1 */
float ct_contrastive_accuracy(const float *d, const float *y, int B, float threshold)
{
    int hit = 0;
    for (int k = 0; k < B; k++) hit += (d[k] < threshold) == (y[k] > 0.5f);
    return (float)((double)hit / B);
}

/* ---- binary cross-entropy with logits: z [B], y [B] in {0,1} ---- */

/* -y log s(z) - (1-y) log(1 - s(z)) rewritten without overflow:
 *   = max(z, 0) - z y + log(1 + exp(-|z|)) */
float ct_bce_logits_forward(const float *z, const float *y, int B)
{
    double sum = 0.0;
    for (int k = 0; k < B; k++) {
        double zk = z[k];
        sum += (zk > 0.0 ? zk : 0.0) - zk * y[k] + log1p(exp(-fabs(zk)));
    }
    return (float)(sum / B);
}

/* dL_k/dz = sigmoid(z) - y, divided by B. sigmoid as in activation.c:
 * e = exp(-|z|), s = 1/(1+e) for z >= 0, e/(1+e) for z < 0. */
void ct_bce_logits_backward(float *dz, const float *z, const float *y, int B)
{
    const float inv_b = 1.0f / (float)B;
    for (int k = 0; k < B; k++) {
        float e = expf(-fabsf(z[k]));
        float r = 1.0f / (1.0f + e);
        float s = z[k] >= 0.0f ? r : e * r;
        dz[k] = (s - y[k]) * inv_b;
    }
}

/* predicted class 1 exactly when z > 0 (sigmoid(z) > 0.5) */
float ct_bce_logits_accuracy(const float *z, const float *y, int B)
{
    int hit = 0;
    for (int k = 0; k < B; k++) hit += (z[k] > 0.0f) == (y[k] > 0.5f);
    return (float)((double)hit / B);
}

/* ---- softmax cross-entropy: logits [B, C], labels [B] ---- */

/* prob [B, C] = softmax of each row, max-subtracted so exp never overflows:
 *   p_c = exp(z_c - m) / sum_c' exp(z_c' - m),  m = max_c z_c
 * and -log p_label = log(sum_c exp(z_c - m)) - (z_label - m), in double. */
float ct_softmax_ce_forward(float *prob, const float *logits, const int *labels, int B, int C)
{
    double loss = 0.0;
    for (int k = 0; k < B; k++) {
        const float *z = logits + (size_t)k * C;
        float *p = prob + (size_t)k * C;
        int label = labels[k];
        CT_ASSERT(label >= 0 && label < C);
        float m = z[0];
        for (int c = 1; c < C; c++) m = z[c] > m ? z[c] : m;
        double sum = 0.0;
        for (int c = 0; c < C; c++) {
            p[c] = expf(z[c] - m);
            sum += p[c];
        }
        float inv = (float)(1.0 / sum);
        for (int c = 0; c < C; c++) p[c] *= inv;
        loss += log(sum) - ((double)z[label] - m);
    }
    return (float)(loss / B);
}

/* dL/dz_kc = (p_kc - [c == label_k]) / B   (softmax and log-likelihood combined) */
void ct_softmax_ce_backward(float *dlogits, const float *prob, const int *labels, int B, int C)
{
    const float inv_b = 1.0f / (float)B;
    for (int k = 0; k < B; k++) {
        const float *p = prob + (size_t)k * C;
        float *g = dlogits + (size_t)k * C;
        CT_ASSERT(labels[k] >= 0 && labels[k] < C);
        for (int c = 0; c < C; c++) g[c] = p[c] * inv_b;
        g[labels[k]] -= inv_b;
    }
}

/* argmax of each row (the first one on ties, like torch.argmax) against the label */
float ct_softmax_ce_accuracy(const float *logits, const int *labels, int B, int C)
{
    int hit = 0;
    for (int k = 0; k < B; k++) {
        const float *z = logits + (size_t)k * C;
        int best = 0;
        for (int c = 1; c < C; c++) if (z[c] > z[best]) best = c;
        hit += best == labels[k];
    }
    return (float)((double)hit / B);
}
