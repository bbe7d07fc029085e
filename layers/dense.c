/* dense.c - fully connected layer on OpenBLAS: out = in W^T + b (see dense.h).
 *
 * All three products are one sgemm each (ct_sgemm: split across the threads when large); the bias is a broadcast add
 * (forward) and a column sum (backward). Row-major throughout, w in PyTorch's
 * Linear layout [out_dim, in_dim].
 */
#include <stdio.h>
#include <cblas.h>
#include "core/threads.h"
#include "layers/dense.h"
#include "layers/gemm_bf16.h"

ct_status ct_dense_params_add(dense_ids *ids, ct_params *ps, const char *prefix, int in_dim, int out_dim, int bias)
{
    char name[2 * CT_NAME_MAX];   /* longer than CT_NAME_MAX so ct_params_add reports a too-long name */
    int wshape[2] = { out_dim, in_dim };
    snprintf(name, sizeof name, "%s/w", prefix);
    ids->w = ct_params_add(ps, name, 2, wshape, ct_init_glorot(in_dim, out_dim));
    if (ids->w < 0) return CT_EINVAL;   /* message already set by ct_params_add */
    ids->b = -1;
    if (bias) {
        int bshape[1] = { out_dim };
        snprintf(name, sizeof name, "%s/b", prefix);
        ids->b = ct_params_add(ps, name, 1, bshape, ct_init_zeros());
        if (ids->b < 0) return CT_EINVAL;
    }
    return CT_OK;
}

/* out [B, out_dim] = in [B, in_dim] . w^T [in_dim, out_dim]  (+ b [out_dim] on every row) */
void ct_dense_forward(float *out, const float *in, const float *w, const float *b, int B, int in_dim, int out_dim)
{
    float beta = 0.0f;
    if (b) {
        /* start every row from the bias, then let sgemm add the product (beta = 1) */
        for (int r = 0; r < B; r++) {
            float *o = out + (size_t)r * out_dim;
            for (int j = 0; j < out_dim; j++) o[j] = b[j];
        }
        beta = 1.0f;
    }
    ct_sgemm(CblasNoTrans, CblasTrans, B, out_dim, in_dim,
                1.0f, in, in_dim, w, in_dim, beta, out, out_dim);
}

/* Backward of out = in W^T + b, with dout = dL/dout [B, out_dim]:
 *
 *   din[b, i]  = sum_o dout[b, o] w[o, i]     din = dout . W        (overwritten)
 *   dw[o, i]  += sum_b dout[b, o] in[b, i]    dW += dout^T . in     (accumulated)
 *   db[o]     += sum_b dout[b, o]             column sums of dout   (accumulated)
 */
void ct_dense_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                    int B, int in_dim, int out_dim)
{
    if (din)   /* din [B, in_dim] = dout [B, out_dim] . w [out_dim, in_dim] */
        ct_sgemm(CblasNoTrans, CblasNoTrans, B, in_dim, out_dim,
                    1.0f, dout, out_dim, w, in_dim, 0.0f, din, in_dim);
    if (dw)    /* dw [out_dim, in_dim] += dout^T [out_dim, B] . in [B, in_dim] */
        ct_sgemm(CblasTrans, CblasNoTrans, out_dim, in_dim, B,
                    1.0f, dout, out_dim, in, in_dim, 1.0f, dw, in_dim);
    if (db) {  /* db [out_dim] += sum over the batch of dout's rows */
        for (int r = 0; r < B; r++) {
            const float *g = dout + (size_t)r * out_dim;
            for (int j = 0; j < out_dim; j++) db[j] += g[j];
        }
    }
}

/* ---- bf16 operands (layers/gemm_bf16.h): the same products, B packed, A rounded as packed ----
 * scratch holds the packed B operand, then the work buffer of the rounded A operand. */
static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

size_t ct_dense_bf16_scratch_elems(int B, int in_dim, int out_dim)
{
    size_t pack = max3(ct_gemm_bf16_pack_elems(in_dim, out_dim),    /* forward: w^T [in_dim, out_dim] */
                       ct_gemm_bf16_pack_elems(out_dim, in_dim),    /* din: w [out_dim, in_dim] */
                       ct_gemm_bf16_pack_elems(B, in_dim));         /* dw: in [B, in_dim] */
    size_t work = max3(ct_gemm_bf16_work_elems(B, in_dim), ct_gemm_bf16_work_elems(B, out_dim),
                       ct_gemm_bf16_work_elems(out_dim, B));
    return (pack + 31) / 32 * 32 + work;
}

static uint16_t *work_of(uint16_t *scratch, int B, int in_dim, int out_dim)
{
    size_t pack = max3(ct_gemm_bf16_pack_elems(in_dim, out_dim), ct_gemm_bf16_pack_elems(out_dim, in_dim),
                       ct_gemm_bf16_pack_elems(B, in_dim));
    return scratch + (pack + 31) / 32 * 32;
}

void ct_dense_forward_bf16(float *out, const float *in, const float *w, const float *b, int B, int in_dim, int out_dim,
                           uint16_t *scratch)
{
    ct_gemm_bf16_pack(scratch, w, in_dim, 1, in_dim, out_dim);   /* w^T [in_dim, out_dim] */
    ct_gemm_bf16(B, out_dim, in_dim, in, in_dim, 0, scratch, work_of(scratch, B, in_dim, out_dim), out, out_dim, 0);
    if (b)
        for (int r = 0; r < B; r++) {
            float *o = out + (size_t)r * out_dim;
            for (int j = 0; j < out_dim; j++) o[j] += b[j];
        }
}

void ct_dense_backward_bf16(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                            int B, int in_dim, int out_dim, uint16_t *scratch)
{
    uint16_t *work = work_of(scratch, B, in_dim, out_dim);
    if (din) {  /* din [B, in_dim] = dout [B, out_dim] . w [out_dim, in_dim] */
        ct_gemm_bf16_pack(scratch, w, in_dim, 0, out_dim, in_dim);
        ct_gemm_bf16(B, in_dim, out_dim, dout, out_dim, 0, scratch, work, din, in_dim, 0);
    }
    if (dw) {   /* dw [out_dim, in_dim] += dout^T [out_dim, B] . in [B, in_dim] */
        ct_gemm_bf16_pack(scratch, in, in_dim, 0, B, in_dim);
        ct_gemm_bf16(out_dim, in_dim, B, dout, out_dim, 1, scratch, work, dw, in_dim, 1);
    }
    if (db)
        for (int r = 0; r < B; r++) {
            const float *g = dout + (size_t)r * out_dim;
            for (int j = 0; j < out_dim; j++) db[j] += g[j];
        }
}
