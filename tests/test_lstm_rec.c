/* test_lstm_rec.c - ctrain's own GPU LSTM (cuda/lstm_rec.h) on its C model, on any CPU:
 * the steps (lstm_rec.c) and the model of the kernels' threads, which the GPU tests check the
 * CUDA kernels against (tests/test_gpu.c, "bf16own").
 *
 *   - the weight images: every entry of W_hh lands in exactly one half-word of each image,
 *     and every other half-word is a padding zero, for hidden sizes with and without padding;
 *   - many steps against the float32 layer (layers/lstm.c) on the unrounded operands: output,
 *     dx and every parameter gradient, 1-2 layers, lengths, every return mode, hidden sizes
 *     that are and are not the kernels' (padding), batches that do not fill the last block,
 *     the siamese model's shape. As for the CPU's bf16 layer (test_lstm_bf16.c), no closed
 *     bound holds through the recurrence: the stated tolerance is 2^-4 of each tensor's
 *     largest entry, and the case prints what it measured; each case also requires the
 *     output to differ from float32's (the bf16 rounding ran);
 *   - S (sequences per block) 2 and 4 give the same bits: a sequence's sums never depend on
 *     its neighbours; the float32 model (op = identity) meets the float32 layer within 1e-5 of each
 *     tensor's largest entry (a stated tolerance: the two sum in different orders; measured
 *     1.5e-7 to 1.3e-6);
 *   - the CUDA kernels themselves (cuda/lstm_rec_kernels.cuh), run from their source on the CPU
 *     by tests/cuda_emu.cpp, against the model's kernels: the weight images, every output of the
 *     forward and the backward, and the bias sums, bit for bit (the same
 *     float operations in the same order), bf16 and float32, for each padded size (32, 64, 128:
 *     the last with part of the image in shared memory), S = 2 and 4, lengths, batches that do
 *     not fill a block; and no divergent barrier.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "tests/cuda_emu.h"
#include "cuda/lstm_rec.h"
#include "layers/lstm.h"

static void test_images(void)
{
    static const int Hs[] = { 8, 20, 32, 37, 64, 100, 128 };
    for (size_t c = 0; c < sizeof Hs / sizeof Hs[0]; c++) {
        const int H = Hs[c], HP = ct_lstm_rec_hp(H), NT = ct_lstm_rec_threads(HP), NW = ct_lstm_rec_words(HP);
        t_case("lstm_rec/weight images H=%d (padded to %d): each W_hh entry once, the rest zeros", H, HP);
        for (int backward = 0; backward < 2; backward++) {
            const size_t n = (size_t)4 * H * H;
            int *seen = calloc(n, sizeof(int));
            CT_ASSERT(seen);
            long pads = 0, bad = 0;
            for (int r = 0; r < NW; r++)
                for (int tid = 0; tid < NT; tid++) {
                    long lo, hi;
                    ct_lstm_rec_word(backward, H, HP, r, tid, &lo, &hi);
                    const long e[2] = { lo, hi };
                    for (int k = 0; k < 2; k++) {
                        if (e[k] < 0) { pads++; continue; }
                        if (e[k] >= (long)n) { bad++; continue; }
                        seen[e[k]]++;
                    }
                }
            long twice = 0, never = 0;
            for (size_t i = 0; i < n; i++) { twice += seen[i] > 1; never += seen[i] == 0; }
            t_check(bad == 0 && twice == 0 && never == 0 && pads == 2L * NW * NT - (long)n,
                    "%s image: %ld out of range, %ld twice, %ld never, %ld padding half-words (want %ld)",
                    backward ? "backward" : "forward", bad, twice, never, pads, 2L * NW * NT - (long)n);
            free(seen);
        }
    }
}

/* One layer stack's run on the model: out (as d->ret says), dx, and the gradients into ps.grad. */
typedef struct { float *out, *dx; ct_params ps; lstm_ids ids; } rec_run;

static void run_model(rec_run *o, const lstm_dims *d, int S, const float *params, const float *x, const int *len,
                      const float *dout)
{
    const int B = d->B, T = d->T, H = d->H;
    ct_params_init(&o->ps);
    CT_ASSERT(ct_lstm_params_add(&o->ids, &o->ps, "lstm", d->I, H, d->L) == CT_OK && ct_params_alloc(&o->ps) == CT_OK);
    memcpy(o->ps.data, params, o->ps.numel * sizeof(float));
    lstm_weights w[LSTM_MAX_LAYERS];
    lstm_grads g[LSTM_MAX_LAYERS];
    ct_lstm_params_view(w, g, &o->ps, &o->ids);
    lstm_rec_plan p;
    t_check(ct_lstm_rec_plan_make(&p, &ct_lstm_rec_model, d, S) == CT_OK, "plan: %s", ct_last_error());
    const size_t no = (size_t)B * H * (d->ret == LSTM_RETURN_SEQUENCE ? T : 1);
    o->out = calloc(no, sizeof(float));
    o->dx = calloc((size_t)B * T * d->I, sizeof(float));
    float *dy = calloc((size_t)B * T * H, sizeof(float));
    CT_ASSERT(o->out && o->dx && dy);
    ct_lstm_rec_forward(&p, x, len, w, d);
    const float *y = p.y[d->L - 1];
    switch (d->ret) {
    case LSTM_RETURN_LAST: memcpy(o->out, p.hy, no * sizeof(float)); break;
    case LSTM_RETURN_SEQUENCE: memcpy(o->out, y, no * sizeof(float)); break;
    case LSTM_RETURN_MEAN:
        for (int b = 0; b < B; b++)
            for (int u = 0; u < H; u++) {
                const int Lb = len ? len[b] : T;
                float s = 0.0f;
                for (int t = 0; t < Lb; t++) s += y[((size_t)b * T + t) * H + u];
                o->out[(size_t)b * H + u] = s / (float)Lb;
            }
        for (int b = 0; b < B; b++)
            for (int t = 0; t < (len ? len[b] : T); t++)
                for (int u = 0; u < H; u++) dy[((size_t)b * T + t) * H + u] = dout[(size_t)b * H + u] / (float)(len ? len[b] : T);
        break;
    }
    ct_lstm_rec_backward(&p, o->dx, g, d->ret == LSTM_RETURN_SEQUENCE ? dout : d->ret == LSTM_RETURN_MEAN ? dy : NULL,
                         d->ret == LSTM_RETURN_LAST ? dout : NULL, len, w, d);
    ct_lstm_rec_plan_free(&p);
    free(dy);
}

static void rec_run_free(rec_run *o) { free(o->out); free(o->dx); ct_params_free(&o->ps); }

static void test_many_steps(void)
{
    static const struct { int B, T, I, H, L; lstm_return ret; int len; } cs[] = {
        { 8, 20, 40, 32, 1, LSTM_RETURN_LAST, 1 },
        { 5, 12, 7, 20, 2, LSTM_RETURN_SEQUENCE, 1 },   /* padding (20 -> 32), a part-filled block */
        { 6, 30, 16, 16, 2, LSTM_RETURN_MEAN, 0 },
        { 9, 25, 11, 37, 1, LSTM_RETURN_MEAN, 1 },      /* H odd: a pair half in the padding */
        { 3, 1, 5, 8, 1, LSTM_RETURN_LAST, 0 },          /* one step */
        { 16, 100, 40, 128, 1, LSTM_RETURN_LAST, 1 }, /* the siamese model's layer */
        { 6, 40, 24, 64, 1, LSTM_RETURN_SEQUENCE, 1 },
    };
    for (size_t k = 0; k < 2 * sizeof cs / sizeof cs[0]; k++) {
        const size_t c = k / 2;
        const int bf16 = k % 2 == 0;
        const double tol = bf16 ? 1.0 / 16 : 1e-5;
        const int B = cs[c].B, T = cs[c].T, I = cs[c].I, H = cs[c].H, L = cs[c].L;
        t_case("lstm_rec/many steps, %s, against the float32 layer B=%d T=%d I=%d H=%d L=%d ret=%d len=%s (tolerance %s)",
               bf16 ? "bf16" : "float32", B, T, I, H, L, (int)cs[c].ret, cs[c].len ? "yes" : "no", bf16 ? "2^-4" : "1e-5");
        lstm_dims d = { B, T, I, H, L, cs[c].ret, LSTM_SIGMOID, CT_F32, 0 };
        ct_rng rng;
        ct_rng_seed(&rng, 900 + c, 0);
        ct_params ps;
        lstm_ids ids;
        ct_params_init(&ps);
        CT_ASSERT(ct_lstm_params_add(&ids, &ps, "lstm", I, H, L) == CT_OK && ct_params_alloc(&ps) == CT_OK);
        const size_t np = ps.numel, nx = (size_t)B * T * I, no = (size_t)B * H * (cs[c].ret == LSTM_RETURN_SEQUENCE ? T : 1);
        float *x = malloc(nx * sizeof(float)), *dout = malloc(no * sizeof(float));
        CT_ASSERT(x && dout);
        t_fill_uniform(ps.data, np, -0.3f, 0.3f, &rng);
        t_fill_uniform(x, nx, -1.5f, 1.5f, &rng);
        t_fill_uniform(dout, no, -1.0f, 1.0f, &rng);
        int len[64];
        for (int b = 0; b < B; b++) len[b] = cs[c].len ? 1 + (int)ct_rng_below(&rng, (unsigned)T) : T;
        const int *lp = cs[c].len ? len : NULL;
        /* the float32 layer */
        lstm_weights w[LSTM_MAX_LAYERS];
        lstm_grads g[LSTM_MAX_LAYERS];
        ct_lstm_params_view(w, g, &ps, &ids);
        float *cache = calloc(ct_lstm_cache_floats(&d), sizeof(float)), *ws = calloc(ct_lstm_workspace_floats(&d), sizeof(float));
        float *out = calloc(no, sizeof(float)), *dx = calloc(nx, sizeof(float));
        CT_ASSERT(cache && ws && out && dx);
        ct_lstm_forward(out, cache, x, lp, w, &d);
        ct_lstm_backward(dx, g, ws, dout, cache, x, lp, w, &d);
        /* the model with S = 4 and S = 2 */
        rec_run m4, m2;
        lstm_dims dm = d;
        dm.dtype = bf16 ? CT_BF16 : CT_F32;
        run_model(&m4, &dm, 4, ps.data, x, lp, dout);
        run_model(&m2, &dm, 2, ps.data, x, lp, dout);
        const double eo = t_close("out", m4.out, out, no, tol), ex = t_close("dx", m4.dx, dx, nx, tol);
        double eg = 0;
        lstm_weights mw[LSTM_MAX_LAYERS];
        lstm_grads mg[LSTM_MAX_LAYERS];
        ct_lstm_params_view(mw, mg, &m4.ps, &m4.ids);
        for (int l = 0; l < L; l++) {
            const int Il = l ? H : I;
            const double e[4] = { t_close("dW_ih", mg[l].w_ih, g[l].w_ih, (size_t)4 * H * Il, tol),
                                  t_close("dW_hh", mg[l].w_hh, g[l].w_hh, (size_t)4 * H * H, tol),
                                  t_close("db_ih", mg[l].b_ih, g[l].b_ih, (size_t)4 * H, tol),
                                  t_close("db_hh", mg[l].b_hh, g[l].b_hh, (size_t)4 * H, tol) };
            for (int q = 0; q < 4; q++) if (!(e[q] <= eg)) eg = e[q];
        }
        if (bf16) t_check(eo > 0, "the output equals float32's bit for bit: the bf16 rounding did not run");
        printf("     measured: out %.3g, dx %.3g, parameter gradients %.3g of their largest entries\n", eo, ex, eg);
        t_check(memcmp(m4.out, m2.out, no * sizeof(float)) == 0 && memcmp(m4.dx, m2.dx, nx * sizeof(float)) == 0 &&
                memcmp(m4.ps.grad, m2.ps.grad, m4.ps.numel * sizeof(float)) == 0,
                "S = 4 and S = 2 differ: a sequence's sums depend on its block");
        rec_run_free(&m4); rec_run_free(&m2);
        free(cache); free(ws); free(out); free(dx); free(x); free(dout);
        ct_params_free(&ps);
    }
}

/* A call smaller than the plan (fewer sequences, fewer steps) gives what a plan of its own size gives. */
static void test_smaller_call(void)
{
    for (int bf16 = 0; bf16 < 2; bf16++) {
    t_case("lstm_rec/a call smaller than the plan equals a plan of its size, bit for bit (%s)", bf16 ? "bf16" : "float32");
    const ct_dtype dt = bf16 ? CT_BF16 : CT_F32;
    const lstm_dims big = { 7, 15, 7, 20, 2, LSTM_RETURN_LAST, LSTM_SIGMOID, dt, 0 }, d = { 5, 12, 7, 20, 2, LSTM_RETURN_LAST, LSTM_SIGMOID, dt, 0 };
    ct_rng rng;
    ct_rng_seed(&rng, 990, 0);
    ct_params ps;
    lstm_ids ids;
    ct_params_init(&ps);
    CT_ASSERT(ct_lstm_params_add(&ids, &ps, "lstm", d.I, d.H, d.L) == CT_OK && ct_params_alloc(&ps) == CT_OK);
    t_fill_uniform(ps.data, ps.numel, -0.3f, 0.3f, &rng);
    lstm_weights w[LSTM_MAX_LAYERS];
    lstm_grads g[LSTM_MAX_LAYERS];
    ct_lstm_params_view(w, g, &ps, &ids);
    const size_t nx = (size_t)d.B * d.T * d.I, no = (size_t)d.B * d.H;
    float x[5 * 12 * 7], dout[5 * 20], dx[2][5 * 12 * 7], out[2][5 * 20];
    t_fill_uniform(x, nx, -1.5f, 1.5f, &rng);
    t_fill_uniform(dout, no, -1.0f, 1.0f, &rng);
    const int len[5] = { 12, 3, 7, 1, 9 };
    float *grads[2];
    for (int k = 0; k < 2; k++) {
        lstm_rec_plan p;
        t_check(ct_lstm_rec_plan_make(&p, &ct_lstm_rec_model, k ? &big : &d, 2) == CT_OK, "plan: %s", ct_last_error());
        memset(ps.grad, 0, ps.numel * sizeof(float));
        ct_lstm_rec_forward(&p, x, len, w, &d);
        memcpy(out[k], p.hy, no * sizeof(float));
        ct_lstm_rec_backward(&p, dx[k], g, NULL, dout, len, w, &d);
        grads[k] = malloc(ps.numel * sizeof(float));
        CT_ASSERT(grads[k]);
        memcpy(grads[k], ps.grad, ps.numel * sizeof(float));
        ct_lstm_rec_plan_free(&p);
    }
    t_check(memcmp(out[0], out[1], sizeof out[0]) == 0 && memcmp(dx[0], dx[1], sizeof dx[0]) == 0 &&
            memcmp(grads[0], grads[1], ps.numel * sizeof(float)) == 0, "the larger plan gave other results");
    free(grads[0]); free(grads[1]);
    ct_params_free(&ps);
    }
}

static void test_refusals(void)
{
    t_case("lstm_rec/shapes it does not run are refused at plan time");
    lstm_rec_plan p;
    const lstm_dims big = { 4, 5, 3, 129, 1, LSTM_RETURN_LAST, LSTM_SIGMOID, CT_F32, 0 };
    const lstm_dims hard = { 4, 5, 3, 16, 1, LSTM_RETURN_LAST, LSTM_HARD_SIGMOID, CT_F32, 0 };
    t_check(!ct_lstm_rec_fits(&big) && ct_lstm_rec_plan_make(&p, &ct_lstm_rec_model, &big, 4) == CT_EINVAL, "H = 129 accepted");
    t_check(!ct_lstm_rec_fits(&hard) && ct_lstm_rec_plan_make(&p, &ct_lstm_rec_model, &hard, 4) == CT_EINVAL, "hard sigmoid accepted");
    const lstm_dims ok = { 4, 5, 3, 128, 1, LSTM_RETURN_LAST, LSTM_SIGMOID, CT_F32, 0 };
    t_check(ct_lstm_rec_fits(&ok) && ct_lstm_rec_plan_make(&p, &ct_lstm_rec_model, &ok, 3) == CT_EINVAL, "S = 3 accepted");
    t_check(ct_lstm_rec_seqs(256, 132) == 2 && ct_lstm_rec_seqs(256, 100) == 4 && ct_lstm_rec_seqs(1, 1) == 2, "S chosen: %d %d %d",
            ct_lstm_rec_seqs(256, 132), ct_lstm_rec_seqs(256, 100), ct_lstm_rec_seqs(1, 1));
}

static int same_bits(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

static void test_emulated_kernels(void)
{
    static const struct { int B, T, H; } cs[] = { { 5, 6, 20 }, { 7, 5, 37 }, { 5, 4, 64 }, { 5, 3, 128 }, { 3, 2, 100 } };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int k = 0; k < 4; k++) {
            const int S = k % 2 ? 4 : 2, bf16 = k < 2;
            const int B = cs[c].B, T = cs[c].T, H = cs[c].H, G = 4 * H, HP = ct_lstm_rec_hp(H);
            t_case("lstm_rec/the CUDA kernels run on the CPU equal the model bit for bit: %s B=%d T=%d H=%d (HP %d) S=%d",
                   bf16 ? "bf16" : "float32", B, T, H, HP, S);
            ct_rng rng;
            ct_rng_seed(&rng, 1000 + c, (uint64_t)k);
            const size_t BT = (size_t)B * T, op = bf16 ? 2 : 4;
            const size_t ibytes = (size_t)ct_lstm_rec_words(HP) * ct_lstm_rec_threads(HP) * ct_lstm_rec_word_bytes(bf16);
            float *zx = t_alloc(BT * G), *bih = t_alloc(G), *bhh = t_alloc(G), *whh = t_alloc((size_t)G * H);
            float *dy = t_alloc(BT * H), *dhy = t_alloc((size_t)B * H);
            t_fill_uniform(zx, BT * G, -2, 2, &rng);
            t_fill_uniform(bih, G, -0.5f, 0.5f, &rng);
            t_fill_uniform(bhh, G, -0.5f, 0.5f, &rng);
            t_fill_uniform(whh, (size_t)G * H, -0.3f, 0.3f, &rng);
            t_fill_uniform(dy, BT * H, -1, 1, &rng);
            t_fill_uniform(dhy, (size_t)B * H, -1, 1, &rng);
            int len[8];
            for (int b = 0; b < B; b++) len[b] = b ? 1 + (int)ct_rng_below(&rng, (unsigned)T) : T;
            /* [0] the model, [1] the kernels */
            void *wf[2], *wb[2], *hprev[2], *dzh[2];
            float *y[2], *hy[2], *gates[2], *cst[2], *dbp[2];
            for (int m = 0; m < 2; m++) {
                wf[m] = calloc(ibytes, 1);
                wb[m] = calloc(ibytes, 1);
                hprev[m] = calloc(BT * H, op);
                dzh[m] = calloc(BT * G, op);
                CT_ASSERT(wf[m] && wb[m] && hprev[m] && dzh[m]);
                y[m] = t_alloc(BT * H); hy[m] = t_alloc((size_t)B * H); gates[m] = t_alloc(BT * G); cst[m] = t_alloc(BT * H);
                dbp[m] = t_alloc((size_t)B * G);
            }
            char why[256] = "";
            ct_lstm_rec_model.pack(NULL, bf16, 0, wf[0], whh, H, HP);
            ct_lstm_rec_model.pack(NULL, bf16, 1, wb[0], whh, H, HP);
            int ok = ct_emu_rec_pack(bf16, 0, wf[1], whh, H, HP, 3, 64, why, sizeof why) == 0 &&
                     ct_emu_rec_pack(bf16, 1, wb[1], whh, H, HP, 3, 64, why, sizeof why) == 0;
            t_check(ok, "pack: %s", why);
            t_check(same_bits(wf[0], wf[1], ibytes) && same_bits(wb[0], wb[1], ibytes), "the weight images differ");
            for (int m = 0; m < 2; m++) {   /* [0] the model, [1] the kernels */
                const lstm_rec_fwd_args fa = { B, T, H, HP, S, bf16, zx, bih, bhh, wf[0], len, y[m], hy[m], gates[m], cst[m], hprev[m] };
                if (m == 0) ct_lstm_rec_model.forward(NULL, &fa);
                else t_check(ct_emu_rec_forward(&fa, why, sizeof why) == 0, "forward: %s", why);
                /* both backwards from the model's kept gates and c */
                const lstm_rec_bwd_args ba = { B, T, H, HP, S, bf16, dy, dhy, gates[0], cst[0], wb[0], len, dzh[m], dbp[m] };
                if (m == 0) ct_lstm_rec_model.backward(NULL, &ba);
                else t_check(ct_emu_rec_backward(&ba, why, sizeof why) == 0, "backward: %s", why);
            }
            t_check(same_bits(y[0], y[1], BT * H * 4), "h differs");
            t_check(same_bits(hy[0], hy[1], (size_t)B * H * 4), "the final h differs");
            t_check(same_bits(gates[0], gates[1], BT * G * 4), "the kept gates differ");
            t_check(same_bits(cst[0], cst[1], BT * H * 4), "c differs");
            t_check(same_bits(hprev[0], hprev[1], BT * H * op), "op(h_{t-1}) differs");
            t_check(same_bits(dzh[0], dzh[1], BT * G * op), "op(dz) differs");
            t_check(same_bits(dbp[0], dbp[1], (size_t)B * G * 4), "the bias sums differ");
            /* the bias gradient kernel */
            float *g0 = t_alloc(2 * (size_t)G), *g1 = t_alloc(2 * (size_t)G);
            ct_lstm_rec_model.bias_grad(NULL, g0, g0 + G, dbp[0], B, G);
            t_check(ct_emu_bias_grad(g1, g1 + G, dbp[0], B, G, 2, 64, why, sizeof why) == 0, "bias_grad: %s", why);
            t_check(same_bits(g0, g1, 2 * (size_t)G * 4), "the bias gradients differ");
            free(g0); free(g1);
            for (int m = 0; m < 2; m++) {
                free(wf[m]); free(wb[m]); free(hprev[m]); free(dzh[m]); free(y[m]); free(hy[m]); free(gates[m]); free(cst[m]); free(dbp[m]);
            }
            free(zx); free(bih); free(bhh); free(whh); free(dy); free(dhy);
        }
}

void suite_lstm_rec(void)
{
    test_images();
    test_many_steps();
    test_smaller_call();
    test_refusals();
    test_emulated_kernels();
}
