/* pair.c - siamese pair heads: Euclidean distance and absolute difference
 * between the two embeddings of each pair (see pair.h).
 */
#include <math.h>
#include "layers/pair.h"

/* s_k = sum_j (a_kj - b_kj)^2, accumulated in double */
static double sq_dist(const float *a, const float *b, int D)
{
    double s = 0.0;
    for (int j = 0; j < D; j++) {
        double t = (double)a[j] - (double)b[j];
        s += t * t;
    }
    return s;
}

/* d [B] = sqrt(max(s, eps)); a, b [B, D] */
void ct_euclidean_forward(float *d, const float *a, const float *b, int B, int D, float eps)
{
    for (int k = 0; k < B; k++) {
        double s = sq_dist(a + (size_t)k * D, b + (size_t)k * D, D);
        d[k] = (float)sqrt(s > (double)eps ? s : (double)eps);
    }
}

/* Backward of d = sqrt(max(s, eps)), s = sum_j (a_j - b_j)^2:
 *   s > eps:  dd/da_j = (1 / (2 sqrt(s))) * 2 (a_j - b_j) = (a_j - b_j) / d
 *   s <= eps: d is the constant sqrt(eps), so dd/da_j = 0
 *   dd/db_j = -dd/da_j
 * and by the chain rule da_j = dd * dd/da_j. s is recomputed (exactly as in
 * forward) to know which branch the max took. */
void ct_euclidean_backward(float *da, float *db, const float *dd, const float *d, const float *a, const float *b,
                        int B, int D, float eps)
{
    for (int k = 0; k < B; k++) {
        const float *ak = a + (size_t)k * D, *bk = b + (size_t)k * D;
        float *dak = da + (size_t)k * D, *dbk = db + (size_t)k * D;
        float g = sq_dist(ak, bk, D) > (double)eps ? dd[k] / d[k] : 0.0f;
        for (int j = 0; j < D; j++) {
            float t = g * (ak[j] - bk[j]);
            dak[j] = t;
            dbk[j] = -t;
        }
    }
}

/* out [n] = |a - b| */
void ct_absdiff_forward(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = fabsf(a[i] - b[i]);
}

/* Backward of out = |a - b|:
 *   da = dout * sign(a - b)   (sign(0) = 0, as PyTorch's abs)
 *   db = -da
 * (written through a temporary so that da may alias dout). */
void ct_absdiff_backward(float *da, float *db, const float *dout, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float t = a[i] - b[i];
        float sgn = (float)((t > 0.0f) - (t < 0.0f));
        float g = dout[i] * sgn;
        da[i] = g;
        db[i] = -g;
    }
}
