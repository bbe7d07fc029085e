/* loss.h - losses (mean over the batch) and their accuracy metrics.
 *
 * Each *_forward returns the mean loss over the batch (accumulated in double);
 * each *_backward writes d(mean loss)/d(input), i.e. already divided by B.
 *
 * contrastive (Hadsell, Chopra & LeCun 2006; Keras's siamese example), y = 1 same:
 *     L = mean_k [ y_k d_k^2 + (1 - y_k) max(m - d_k, 0)^2 ]
 *     dL/dd_k = (2 y_k d_k - 2 (1 - y_k) max(m - d_k, 0)) / B
 *     accuracy = mean_k [ (d_k < threshold) == y_k ]   (threshold 0.5 in the seed)
 *
 * binary cross-entropy with logits z, y in {0,1}:
 *     L = mean_k [ max(z,0) - z y + log(1 + exp(-|z|)) ]      (stable form)
 *     dL/dz_k = (sigmoid(z_k) - y_k) / B
 *     accuracy = mean_k [ (z_k > 0) == y_k ]
 *
 * softmax cross-entropy, logits [B, C], integer labels in [0, C):
 *     p = softmax(z) (max-subtracted),  L = mean_k [ -log p_k,label ]
 *     dL/dz_kc = (p_kc - [c == label_k]) / B
 *     accuracy = mean_k [ argmax_c z_kc == label_k ]
 * Labels outside [0, C) are a programmer error: data loaders validate them.
 */
#ifndef CT_LOSS_H
#define CT_LOSS_H

float ct_contrastive_forward(const float *d, const float *y, int B, float margin);
void  ct_contrastive_backward(float *dd, const float *d, const float *y, int B, float margin);   /* dd [B] overwritten */
float ct_contrastive_accuracy(const float *d, const float *y, int B, float threshold);

float ct_bce_logits_forward(const float *z, const float *y, int B);
void  ct_bce_logits_backward(float *dz, const float *z, const float *y, int B);                 /* dz [B] overwritten */
float ct_bce_logits_accuracy(const float *z, const float *y, int B);

/* prob [B, C] receives the softmax, kept for backward. */
float ct_softmax_ce_forward(float *prob, const float *logits, const int *labels, int B, int C);
void  ct_softmax_ce_backward(float *dlogits, const float *prob, const int *labels, int B, int C); /* overwritten */
float ct_softmax_ce_accuracy(const float *logits, const int *labels, int B, int C);

#endif
