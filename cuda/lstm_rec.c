/* lstm_rec.c - the steps of ctrain's own GPU LSTM (cuda/lstm_rec.h), written once over an
 * engine, and the C model of its kernels: the same threads' work, one thread after another,
 * on the CPU. Host-only (no CUDA calls), so it is built and tested in every build.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/bf16.h"
#include "core/error.h"
#include "cuda/lstm_rec.h"

int ct_lstm_rec_fits(const lstm_dims *d)
{
    return d->recur == LSTM_SIGMOID && d->H >= 1 && d->H <= LSTM_REC_MAX_H && d->L >= 1 && d->L <= LSTM_MAX_LAYERS &&
           d->I >= 1 && d->B >= 1 && d->T >= 1;
}

int ct_lstm_rec_seqs(int B, int sms) { return (B + 1) / 2 <= sms ? 2 : 4; }

ct_status ct_lstm_rec_plan_make(lstm_rec_plan *p, const lstm_rec_engine *eng, const lstm_dims *d, int S)
{
    memset(p, 0, sizeof *p);
    if (!ct_lstm_rec_fits(d) || (S != 2 && S != 4) || (d->dtype != CT_F32 && d->dtype != CT_BF16))
        return ct_fail(CT_EINVAL, "ctrain's GPU LSTM: %d units, %d layers, %s, %d sequences per block is not a shape it runs", d->H,
                       d->L, d->recur == LSTM_SIGMOID ? "sigmoid" : "hard sigmoid", S);
    p->d = *d;
    p->HP = ct_lstm_rec_hp(d->H);
    p->S = S;
    p->bf16 = d->dtype == CT_BF16;
    p->eng = eng;
    const size_t BT = (size_t)d->B * d->T, H = (size_t)d->H, G = 4 * H, op = p->bf16 ? sizeof(uint16_t) : sizeof(float);
    const size_t image = (size_t)ct_lstm_rec_words(p->HP) * ct_lstm_rec_threads(p->HP) * ct_lstm_rec_word_bytes(p->bf16);
    void *ctx = eng->ctx;
#define REC_ALLOC(ptr, bytes, what) do { if (!((ptr) = eng->alloc(ctx, (bytes), (what)))) return CT_ENOMEM; } while (0)
    for (int l = 0; l < d->L; l++) {
        const size_t Il = l ? H : (size_t)d->I;
        if (p->bf16) {
            REC_ALLOC(p->xh[l], BT * Il * sizeof(uint16_t), "LSTM bf16 inputs");
            REC_ALLOC(p->wih[l], G * Il * sizeof(uint16_t), "LSTM bf16 input weights");
        }
        REC_ALLOC(p->wf[l], image, "LSTM recurrent weights (forward image)");
        REC_ALLOC(p->wb[l], image, "LSTM recurrent weights (backward image)");
        REC_ALLOC(p->y[l], BT * H * sizeof(float), "LSTM outputs");
        REC_ALLOC(p->gates[l], BT * G * sizeof(float), "LSTM gates");
        REC_ALLOC(p->cs[l], BT * H * sizeof(float), "LSTM cell states");
        REC_ALLOC(p->hprev[l], BT * H * op, "LSTM previous states");
    }
    REC_ALLOC(p->hy, (size_t)d->B * H * sizeof(float), "LSTM final states");
    REC_ALLOC(p->zx, BT * G * sizeof(float), "LSTM input projections");
    REC_ALLOC(p->dzh, BT * G * op, "LSTM gate gradients");
    REC_ALLOC(p->dyl, BT * H * sizeof(float), "LSTM output gradients");
    REC_ALLOC(p->dbpart, (size_t)d->B * G * sizeof(float), "LSTM bias gradient sums");
#undef REC_ALLOC
    return CT_OK;
}

void ct_lstm_rec_plan_free(lstm_rec_plan *p)
{
    if (!p->eng) return;
    void *ctx = p->eng->ctx;
    for (int l = 0; l < LSTM_MAX_LAYERS; l++) {
        void *mine[] = { p->xh[l], p->wih[l], p->wf[l], p->wb[l], p->y[l], p->gates[l], p->cs[l], p->hprev[l] };
        for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) if (mine[i]) p->eng->release(ctx, mine[i]);
    }
    void *shared[] = { p->hy, p->zx, p->dzh, p->dyl, p->dbpart };
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) if (shared[i]) p->eng->release(ctx, shared[i]);
    memset(p, 0, sizeof *p);
}

void ct_lstm_rec_forward(lstm_rec_plan *p, const float *x, const int *len, const lstm_weights *w, const lstm_dims *d)
{
    const lstm_rec_engine *e = p->eng;
    CT_ASSERT(d->B >= 1 && d->B <= p->d.B && d->T >= 1 && d->T <= p->d.T && d->I == p->d.I && d->H == p->d.H && d->L == p->d.L);
    const int B = d->B, T = d->T, H = d->H, G = 4 * H, BT = B * T;
    for (int l = 0; l < d->L; l++) {
        const int Il = l ? H : d->I;
        const float *in = l ? p->y[l - 1] : x;
        if (p->bf16) {
            e->to_bf16(e->ctx, p->xh[l], in, (size_t)BT * Il);
            e->to_bf16(e->ctx, p->wih[l], w[l].w_ih, (size_t)G * Il);
        }
        p->xop[l] = p->bf16 ? (const void *)p->xh[l] : (const void *)in;
        p->wop[l] = p->bf16 ? (const void *)p->wih[l] : (const void *)w[l].w_ih;
        e->pack(e->ctx, p->bf16, 0, p->wf[l], w[l].w_hh, H, p->HP);
        /* zx [BT, 4H] = op(x) op(W_ih)^T */
        e->gemm(e->ctx, p->bf16, 0, 1, BT, G, Il, p->xop[l], Il, p->wop[l], Il, 0.0f, p->zx, G);
        const lstm_rec_fwd_args a = { .B = B, .T = T, .H = H, .HP = p->HP, .S = p->S, .bf16 = p->bf16, .zx = p->zx, .b_ih = w[l].b_ih,
                                      .b_hh = w[l].b_hh, .wf = p->wf[l], .len = len, .y = p->y[l], .hy = p->hy,
                                      .gates = p->gates[l], .cs = p->cs[l], .hprev = p->hprev[l] };
        e->forward(e->ctx, &a);
    }
}

void ct_lstm_rec_backward(lstm_rec_plan *p, float *dx, const lstm_grads *g, const float *dy, const float *dhy, const int *len,
                          const lstm_weights *w, const lstm_dims *d)
{
    const lstm_rec_engine *e = p->eng;
    CT_ASSERT(d->B >= 1 && d->B <= p->d.B && d->T >= 1 && d->T <= p->d.T && d->I == p->d.I && d->H == p->d.H && d->L == p->d.L);
    const int B = d->B, T = d->T, H = d->H, G = 4 * H, BT = B * T;
    for (int l = d->L - 1; l >= 0; l--) {
        const int Il = l ? H : d->I, top = l == d->L - 1;
        e->pack(e->ctx, p->bf16, 1, p->wb[l], w[l].w_hh, H, p->HP);
        const lstm_rec_bwd_args a = { .B = B, .T = T, .H = H, .HP = p->HP, .S = p->S, .bf16 = p->bf16, .dy = top ? dy : p->dyl,
                                      .dhy = top ? dhy : NULL, .gates = p->gates[l], .cs = p->cs[l], .wb = p->wb[l],
                                      .len = len, .dzh = p->dzh, .dbpart = p->dbpart };
        e->backward(e->ctx, &a);
        e->bias_grad(e->ctx, g[l].b_ih, g[l].b_hh, p->dbpart, B, G);
        /* dW_ih [4H, Il] += op(dz)^T op(x);  dW_hh [4H, H] += op(dz)^T op(h_{t-1}) */
        e->gemm(e->ctx, p->bf16, 1, 0, G, Il, BT, p->dzh, G, p->xop[l], Il, 1.0f, g[l].w_ih, Il);
        e->gemm(e->ctx, p->bf16, 1, 0, G, H, BT, p->dzh, G, p->hprev[l], H, 1.0f, g[l].w_hh, H);
        /* dx [BT, Il] = op(dz) op(W_ih) (this batch's forward's operands); below the top, the
         * layer below's dy, which overwrites this layer's own dy: its kernel has read it (and a
         * float32 plan's op(x) of this layer is the layer below's y, not dyl) */
        float *dst = l ? p->dyl : dx;
        if (dst) e->gemm(e->ctx, p->bf16, 0, 0, BT, Il, G, p->dzh, G, p->wop[l], Il, 0.0f, dst, Il);
    }
}

/* ---- the C model ---- */

static float bfv(float f) { return ct_float_from_bf16(ct_bf16_from_float(f)); }   /* f rounded to bf16, as a float */
static float opv(int bf16, float f) { return bf16 ? bfv(f) : f; }                  /* op(f), as a float */
/* word i of an image: its lower and upper entry */
static float word_lo(int bf16, const void *image, size_t i)
{
    return bf16 ? ct_float_from_bf16((uint16_t)(((const uint32_t *)image)[i] & 0xFFFFu)) : ((const float *)image)[2 * i];
}
static float word_hi(int bf16, const void *image, size_t i)
{
    return bf16 ? ct_float_from_bf16((uint16_t)(((const uint32_t *)image)[i] >> 16)) : ((const float *)image)[2 * i + 1];
}
/* element i of an operand array (bf16 bits or floats), as a float; and stored */
static float op_get(int bf16, const void *a, size_t i) { return bf16 ? ct_float_from_bf16(((const uint16_t *)a)[i]) : ((const float *)a)[i]; }
static void op_put(int bf16, void *a, size_t i, float v)
{
    if (bf16) ((uint16_t *)a)[i] = ct_bf16_from_float(v);
    else ((float *)a)[i] = v;
}
static float sigm(float z) { return 1.0f / (1.0f + expf(-z)); }

static void *model_alloc(void *ctx, size_t bytes, const char *what)
{
    (void)ctx;
    return ct_calloc(1, bytes ? bytes : 1, what);
}
static void model_release(void *ctx, void *p) { (void)ctx; free(p); }
static void model_to_bf16(void *ctx, uint16_t *dst, const float *src, size_t n) { (void)ctx; ct_bf16s_from_floats(dst, src, n); }

static void model_pack(void *ctx, int bf16, int backward, void *image, const float *w_hh, int H, int HP)
{
    (void)ctx;
    const int NT = ct_lstm_rec_threads(HP), NW = ct_lstm_rec_words(HP);
    for (int r = 0; r < NW; r++)
        for (int tid = 0; tid < NT; tid++) {
            long lo, hi;
            ct_lstm_rec_word(backward, H, HP, r, tid, &lo, &hi);
            const size_t i = (size_t)r * NT + tid;
            if (bf16) {
                const uint32_t a = lo >= 0 ? ct_bf16_from_float(w_hh[lo]) : 0, b = hi >= 0 ? ct_bf16_from_float(w_hh[hi]) : 0;
                ((uint32_t *)image)[i] = a | b << 16;
            } else {
                ((float *)image)[2 * i] = lo >= 0 ? w_hh[lo] : 0.0f;
                ((float *)image)[2 * i + 1] = hi >= 0 ? w_hh[hi] : 0.0f;
            }
        }
}

/* float32 sums of the operands' products, k in order, each added by a fused multiply-add (as
 * cuBLAS does; a product of two bf16 is exact in float32 anyway) */
static void model_gemm(void *ctx, int bf16, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                       float beta, float *C, int ldc)
{
    (void)ctx;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) {
                const float a = op_get(bf16, A, ta ? (size_t)k * lda + m : (size_t)m * lda + k);
                const float b = op_get(bf16, B, tb ? (size_t)n * ldb + k : (size_t)k * ldb + n);
                s = fmaf(a, b, s);
            }
            float *c = &C[(size_t)m * ldc + n];
            *c = beta == 0.0f ? s : beta * *c + s;
        }
}

/* The four lanes' partial sums of one group, as the two shuffles (xor 1, then xor 2) leave them in every lane. */
static float lanes_sum(const float *part, size_t stride) { return (part[0] + part[stride]) + (part[2 * stride] + part[3 * stride]); }

#define MODEL_S 4   /* the largest S */

static void model_forward(void *ctx, const lstm_rec_fwd_args *a)
{
    (void)ctx;
    const int B = a->B, T = a->T, H = a->H, HP = a->HP, S = a->S, G = 4 * H, NT = ct_lstm_rec_threads(HP), np = HP / 8;
    float *hbuf = ct_calloc((size_t)2 * S * HP, sizeof(float), "LSTM model state");         /* [2][S][HP] shared memory */
    float *part = ct_calloc((size_t)NT * 4 * S, sizeof(float), "LSTM model sums");           /* [NT][4][S] each thread's sums */
    float *h = ct_calloc((size_t)S * HP, sizeof(float), "LSTM model state"), *c = ct_calloc((size_t)S * HP, sizeof(float), "LSTM model state");
    CT_ASSERT(hbuf && part && h && c && S <= MODEL_S);
    for (int b0 = 0; b0 < B; b0 += S) {
        memset(hbuf, 0, (size_t)2 * S * HP * sizeof(float));
        memset(h, 0, (size_t)S * HP * sizeof(float));
        memset(c, 0, (size_t)S * HP * sizeof(float));
        for (int t = 0; t < T; t++) {
            const float *hb = hbuf + (size_t)(t & 1) * S * HP;
            float *hn = hbuf + (size_t)((t + 1) & 1) * S * HP;
            for (int tid = 0; tid < NT; tid++) {   /* each thread's quarter of the k, all four gates, S sequences */
                const int kq = tid % LSTM_REC_LANES;
                float acc[4][MODEL_S] = { { 0 } };
                for (int kk = 0; kk < np; kk++) {
                    const int pk = LSTM_REC_LANES * kk + kq;
                    for (int q = 0; q < 4; q++) {
                        const size_t wi = (size_t)(q * np + kk) * NT + tid;
                        const float w0 = word_lo(a->bf16, a->wf, wi), w1 = word_hi(a->bf16, a->wf, wi);
                        for (int s = 0; s < S; s++) {
                            acc[q][s] = fmaf(w0, hb[s * HP + 2 * pk], acc[q][s]);
                            acc[q][s] = fmaf(w1, hb[s * HP + 2 * pk + 1], acc[q][s]);
                        }
                    }
                }
                for (int q = 0; q < 4; q++)
                    for (int s = 0; s < S; s++) part[((size_t)tid * 4 + q) * S + s] = acc[q][s];
            }
            for (int u = 0; u < HP; u++)   /* the cells: lane s of unit u's group */
                for (int s = 0; s < S; s++) {
                    const int b = b0 + s;
                    float *hs = &h[s * HP + u], *cv = &c[s * HP + u];
                    if (b >= B || u >= H) { hn[s * HP + u] = 0.0f; continue; }
                    const size_t row = (size_t)b * T + t;
                    const int L = a->len ? a->len[b] : T;
                    op_put(a->bf16, a->hprev, row * H + u, hb[s * HP + u]);   /* exact: hb holds op(h) */
                    if (t < L) {
                        float z[4];
                        for (int q = 0; q < 4; q++) {
                            const float sum = lanes_sum(&part[((size_t)(u * LSTM_REC_LANES) * 4 + q) * S + s], (size_t)4 * S);
                            z[q] = (a->zx[row * G + q * H + u] + (a->b_ih[q * H + u] + a->b_hh[q * H + u])) + sum;
                        }
                        const float i = sigm(z[0]), f = sigm(z[1]), g = tanhf(z[2]), o = sigm(z[3]);
                        *cv = fmaf(f, *cv, i * g);
                        *hs = o * tanhf(*cv);
                        const float gv[4] = { i, f, g, o };
                        for (int q = 0; q < 4; q++) a->gates[row * G + q * H + u] = gv[q];
                        a->cs[row * H + u] = *cv;
                        a->y[row * H + u] = *hs;
                    } else {   /* padded: the state carried, the output 0 */
                        for (int q = 0; q < 4; q++) a->gates[row * G + q * H + u] = 0.0f;
                        a->cs[row * H + u] = 0.0f;
                        a->y[row * H + u] = 0.0f;
                    }
                    hn[s * HP + u] = opv(a->bf16, *hs);
                }
        }
        for (int s = 0; s < S && b0 + s < B; s++)
            for (int u = 0; u < H; u++) a->hy[(size_t)(b0 + s) * H + u] = h[s * HP + u];
    }
    free(hbuf); free(part); free(h); free(c);
}

static void model_backward(void *ctx, const lstm_rec_bwd_args *a)
{
    (void)ctx;
    const int B = a->B, T = a->T, H = a->H, HP = a->HP, S = a->S, G = 4 * H, NT = ct_lstm_rec_threads(HP), NW = ct_lstm_rec_words(HP);
    float *dzs = ct_calloc((size_t)S * 4 * HP, sizeof(float), "LSTM model gradients");    /* [S][4 HP] shared memory */
    float *dhrec = ct_calloc((size_t)S * HP, sizeof(float), "LSTM model gradients");      /* [S][HP] shared memory */
    float *part = ct_calloc((size_t)NT * S, sizeof(float), "LSTM model sums");            /* [NT][S] */
    float *dc = ct_calloc((size_t)S * HP, sizeof(float), "LSTM model gradients"), *pass = ct_calloc((size_t)S * HP, sizeof(float), "LSTM model gradients");
    float *dbs = ct_calloc((size_t)S * 4 * HP, sizeof(float), "LSTM model gradients");    /* [S][4][HP] each thread's bias sums */
    CT_ASSERT(dzs && dhrec && part && dc && pass && dbs && S <= MODEL_S);
    for (int b0 = 0; b0 < B; b0 += S) {
        memset(dhrec, 0, (size_t)S * HP * sizeof(float));
        memset(dc, 0, (size_t)S * HP * sizeof(float));
        memset(dbs, 0, (size_t)S * 4 * HP * sizeof(float));
        for (int s = 0; s < S; s++)
            for (int u = 0; u < HP; u++)
                pass[s * HP + u] = a->dhy && b0 + s < B && u < H ? a->dhy[(size_t)(b0 + s) * H + u] : 0.0f;
        for (int t = T - 1; t >= 0; t--) {
            for (int u = 0; u < HP; u++)   /* phase A: thread (u, s) */
                for (int s = 0; s < S; s++) {
                    const int b = b0 + s;
                    float *dz_s = &dzs[s * 4 * HP];
                    if (b >= B || u >= H) { for (int q = 0; q < 4; q++) dz_s[q * HP + u] = 0.0f; continue; }
                    const size_t row = (size_t)b * T + t;
                    const int L = a->len ? a->len[b] : T;
                    float dz[4] = { 0, 0, 0, 0 };
                    if (t < L) {
                        const float dh = ((a->dy ? a->dy[row * H + u] : 0.0f) + dhrec[s * HP + u]) + pass[s * HP + u];
                        pass[s * HP + u] = 0.0f;
                        const float *gt = &a->gates[row * G];
                        const float i = gt[u], f = gt[H + u], g = gt[2 * H + u], o = gt[3 * H + u];
                        const float cv = a->cs[row * H + u], cp = t ? a->cs[(row - 1) * H + u] : 0.0f, tc = tanhf(cv);
                        const float dct = dc[s * HP + u] + dh * o * (1.0f - tc * tc);
                        dz[0] = dct * g * (i * (1.0f - i));
                        dz[1] = dct * cp * (f * (1.0f - f));
                        dz[2] = dct * i * (1.0f - g * g);
                        dz[3] = dh * tc * (o * (1.0f - o));
                        dc[s * HP + u] = dct * f;
                    } else {
                        pass[s * HP + u] += dhrec[s * HP + u];
                    }
                    for (int q = 0; q < 4; q++) {
                        dbs[(s * 4 + q) * HP + u] += dz[q];
                        op_put(a->bf16, a->dzh, row * G + q * H + u, dz[q]);
                        dz_s[q * HP + u] = opv(a->bf16, dz[q]);
                    }
                }
            for (int tid = 0; tid < NT; tid++) {   /* phase B: thread (k, jq), a quarter of the 4 HP rows */
                const int jq = tid % LSTM_REC_LANES;
                float acc[MODEL_S] = { 0 };
                for (int r = 0; r < NW; r++) {
                    const int pj = LSTM_REC_LANES * r + jq;
                    const size_t wi = (size_t)r * NT + tid;
                    const float w0 = word_lo(a->bf16, a->wb, wi), w1 = word_hi(a->bf16, a->wb, wi);
                    for (int s = 0; s < S; s++) {
                        acc[s] = fmaf(w0, dzs[s * 4 * HP + 2 * pj], acc[s]);
                        acc[s] = fmaf(w1, dzs[s * 4 * HP + 2 * pj + 1], acc[s]);
                    }
                }
                for (int s = 0; s < S; s++) part[(size_t)tid * S + s] = acc[s];
            }
            for (int k = 0; k < HP; k++)
                for (int s = 0; s < S; s++) dhrec[s * HP + k] = lanes_sum(&part[(size_t)k * LSTM_REC_LANES * S + s], (size_t)S);
        }
        for (int s = 0; s < S && b0 + s < B; s++)
            for (int q = 0; q < 4; q++)
                for (int u = 0; u < H; u++) a->dbpart[(size_t)(b0 + s) * G + q * H + u] = dbs[(s * 4 + q) * HP + u];
    }
    free(dzs); free(dhrec); free(part); free(dc); free(pass); free(dbs);
}

static void model_bias_grad(void *ctx, float *db_ih, float *db_hh, const float *part, int B, int n)
{
    (void)ctx;
    for (int j = 0; j < n; j++) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += part[(size_t)b * n + j];
        db_ih[j] += s;
        db_hh[j] += s;
    }
}

const lstm_rec_engine ct_lstm_rec_model = {
    .ctx = NULL, .alloc = model_alloc, .release = model_release, .to_bf16 = model_to_bf16, .pack = model_pack,
    .gemm = model_gemm, .forward = model_forward, .backward = model_backward, .bias_grad = model_bias_grad,
};
