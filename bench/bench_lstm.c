/* bench_lstm.c - times one training step of the speaker model's LSTM
 * (forward + backward through time) in ctrain, for comparison with
 * bench/lstm_torch.py (the same shape in PyTorch).
 *
 *   build/bench/bench_lstm [--threads N] [--batch B] [--steps T] [--input I]
 *                          [--hidden H] [--layers L] [--repeats R] [--plain]
 *                          [--ceiling] [--bf16 [--units-outer]]
 *   defaults: 2 threads, B=256 sequences, T=100 frames, I=40 features, H=128
 *   units, L=1 layer, return last, sigmoid; 2 warm-up steps, median of 10.
 *   --plain: the forward step as two packed products and a cell loop instead
 *   of the fused kernel (layers/lstm_fused.h), to measure what fusing gives.
 *   --bf16: the layer in mixed precision (layers/lstm.c, "bf16"): its products on
 *   the CPU's bf16 kernels (AMX tiles, vdpbf16ps, or the C model of the tiles with
 *   CTRAIN_BF16_MODEL=1); with AMX, the forward step is the tiles' fused step
 *   (layers/lstm_bf16.h) and --plain its two products and cell loop; --units-outer
 *   runs the fused step's other loop order (lstm_bf16.h, "Order"). Prints each
 *   phase's rate as a share of the bf16 peak measured beside it (ct_bf16_peak).
 *   --ceiling: then the same step as training runs it (no dx: the model's
 *   first layer needs none) beside its matrix products alone, timed the same
 *   way on the same workers and shapes: the forward's [x_t | h_{t-1}] W^T in
 *   the fused step's own tiles with the cell left out (ct_lstm_fused_products),
 *   a fresh output per step as the fused step writes its gates; the
 *   backward's dz_t W_hh, dz_t^T h_{t-1} and
 *   x_t^T dz_t per step, as lstm.c calls them. What is left between the two
 *   is the cell (activations, the cell update and their derivatives) and the
 *   traffic of the forward's saved rows: work that counts no FLOP. The
 *   products' time bounds the step from below; with the FP32 FMA peak
 *   measured beside it, it says what share of the peak any LSTM of this
 *   shape can reach on this CPU with the cell for free (bench/RESULTS.md).
 *
 * FLOPs counted (the matrix products only; the elementwise gate work is not
 * counted, though it is timed):
 *   forward   2 * B * T * 4H * (I + H)     input projection + recurrent products
 *   backward  2 * forward                  dW_ih, dx, dW_hh, dh_{t-1}
 * per layer (I replaced by H above the first). A step is forward + backward,
 * 3 * forward in all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>
#include "core/blas_select.h"
#include "core/params.h"
#include "core/peak.h"
#include "core/rng.h"
#include "core/threads.h"
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"
#include "layers/lstm.h"   /* after <cblas.h>: it removes complex.h's macro I */
#include "layers/lstm_fused.h"
#include "layers/lstm_bf16.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_lstm [--threads N] [--batch B] [--steps T] [--input I] [--hidden H] [--layers L] [--repeats R] [--plain] [--ceiling] [--bf16 [--units-outer]]\n");
    exit(2);
}

/* ---- --ceiling: the step's matrix products alone ---- */

/* The operands of the products, laid out as lstm.c's forward cache and workspace lay theirs out:
 * time-major rows, one share of the batch per worker. */
typedef struct {
    int B, T, Il, H, parts;
    const float *wf;    /* [W_ih | W_hh] packed per unit block, as the fused step packs it */
    float *Z;           /* [T][B][4H] the forward's outputs, fresh rows every step */
    const float *X;     /* [T][B][Il] */
    const float *Hs;    /* [T][B][H] h_{t-1} of each step */
    const float *wh;    /* W_hh packed as the backward packs it: [4H, H] */
    float *dz;          /* [parts][ceil(B/parts)][4H] one step's gate gradients per worker */
    float *dh;          /* [B][H] */
    float *dw;          /* [parts][4H * H + Il * 4H] each worker's dW_hh and dW_ih^T */
    float *pk;          /* [parts][packed h_{t-1} of its rows] */
    size_t dz_floats, dw_floats, pk_floats;
} ceiling_job;

static void ceiling_forward(void *ctx, int part, int worker)
{
    const ceiling_job *j = ctx;
    const int b0 = (int)((long)j->B * part / j->parts), b1 = (int)((long)j->B * (part + 1) / j->parts);
    const int G = 4 * j->H;
    (void)worker;
    for (int t = 0; t < j->T; t++) {   /* z_t [b0:b1, 4H] = [x_t | h_{t-1}] W^T, the fused step's tiles without the cell */
        size_t r = (size_t)t * j->B + b0;
        ct_lstm_fused_products(b1 - b0, j->Il, j->H, j->X + r * j->Il, t > 0 ? j->Hs + r * j->H : NULL, j->wf, j->Z + r * G);
    }
}

static void ceiling_backward(void *ctx, int part, int worker)
{
    const ceiling_job *j = ctx;
    const int b0 = (int)((long)j->B * part / j->parts), b1 = (int)((long)j->B * (part + 1) / j->parts);
    const int rows = b1 - b0, H = j->H, Il = j->Il, G = 4 * H;
    float *dz = j->dz + (size_t)part * j->dz_floats, *dwh = j->dw + (size_t)part * j->dw_floats, *dwi = dwh + (size_t)G * H;
    float *pk = j->pk + (size_t)part * j->pk_floats;
    (void)worker;
    for (int t = j->T - 1; t >= 0; t--) {   /* lstm.c's products of step t, in its order */
        size_t r = (size_t)t * j->B + b0;
        if (t > 0) {
            ct_gemm_packed(rows, H, G, dz, G, 0, j->wh, j->dh + (size_t)b0 * H, H, 1);   /* dh_{t-1} += dz_t W_hh */
            ct_gemm_pack(pk, j->Hs + r * H, H, 0, rows, H);                              /* dW_hh += dz_t^T h_{t-1} */
            ct_gemm_packed(G, H, rows, dz, G, 1, pk, dwh, H, 1);
        }
        ct_gemm_rowmajor(Il, G, rows, j->X + r * Il, Il, 1, dz, G, dwi, G, 1);           /* dW_ih^T += x_t^T dz_t */
    }
}

static double ceiling_time(ceiling_job *j, void (*fn)(void *, int, int), int repeats, int warmup)
{
    double *v = malloc((size_t)repeats * sizeof *v);
    if (!v) return -1;
    for (int r = -warmup; r < repeats; r++) {
        double t0 = now_s();
        ct_parallel(j->parts, j->parts, fn, j);
        if (r >= 0) v[r] = now_s() - t0;
    }
    double m = ct_sort_median(v, repeats);
    free(v);
    return m;
}

static void ceiling_row(const char *name, double s, double flops, double peak, int seqs)
{
    printf("  %-34s %8.2f ms  %6.1f GFLOP/s  %5.1f%% of the FMA peak  %7.0f sequences/s\n", name, 1e3 * s,
           flops / s * 1e-9, 100 * flops / s * 1e-9 / peak, seqs / s);
}

/* The step as training runs it (backward without dx) and its products alone; fwd_s is the
 * forward just measured (the same call training makes). 0, or 1 when something failed. */
static int run_ceiling(const lstm_dims *d, const lstm_weights *w, const lstm_grads *g, const float *x, float *out,
                       const float *dout, float *cache, float *ws, int repeats, int warmup, double fwd_s)
{
    if (d->L != 1) {
        fprintf(stderr, "bench_lstm --ceiling: measures one layer: leave out --layers or give 1\n");
        return 2;
    }
    if (!ct_lstm_fused_ok(d->H)) {   /* the CPU's kernels, not the user's input: said, and not a failure */
        printf("\nThe step against its products alone: not measured here (it compares the fused forward step, which runs with "
               "ctrain's AVX-512 kernels and H a multiple of 16; kernels in use: %s, H = %d)\n", ct_kernels_name(ct_kernels_get()), d->H);
        return 0;
    }
    const int B = d->B, T = d->T, Il = d->I, H = d->H, K = Il + H, G = 4 * H, parts = B < ct_threads_get() ? B : ct_threads_get();
    const size_t TB = (size_t)T * B;
    ct_fma_rate fr;
    if (ct_peak_fma_cpu(&fr, ct_threads_get()) != CT_OK) { fprintf(stderr, "bench_lstm: %s\n", ct_last_error()); return 1; }

    /* the step as trained: the forward (timed above), the backward without dx */
    double *v = malloc((size_t)repeats * sizeof *v);
    if (!v) { fprintf(stderr, "bench_lstm: out of memory for the timings\n"); return 1; }
    for (int r = -warmup; r < repeats; r++) {
        ct_lstm_forward(out, cache, x, NULL, w, d);
        double t0 = now_s();
        ct_lstm_backward(NULL, g, ws, dout, cache, x, NULL, w, d);
        if (r >= 0) v[r] = now_s() - t0;
    }
    double bwd_s = ct_sort_median(v, repeats);
    free(v);

    ceiling_job j = { .B = B, .T = T, .Il = Il, .H = H, .parts = parts };
    int rows_max = (B + parts - 1) / parts;
    j.dz_floats = (size_t)rows_max * G;
    j.dw_floats = (size_t)G * H + (size_t)Il * G;
    j.pk_floats = ct_gemm_pack_floats(rows_max, H);
    float *wf = ct_alloc_aligned(ct_lstm_fused_pack_floats(Il, H) * sizeof(float), "packed W");
    float *Z = ct_alloc_aligned(TB * G * sizeof(float), "z"), *X = ct_alloc_aligned(TB * Il * sizeof(float), "x");
    float *Hs = ct_alloc_aligned(TB * H * sizeof(float), "h"), *wh = ct_alloc_aligned(ct_gemm_pack_floats(G, H) * sizeof(float), "packed W_hh");
    float *dz = ct_alloc_aligned((size_t)parts * j.dz_floats * sizeof(float), "dz"), *dh = ct_alloc_aligned((size_t)B * H * sizeof(float), "dh");
    float *dw = ct_alloc_aligned((size_t)parts * j.dw_floats * sizeof(float), "dW"), *pk = ct_alloc_aligned((size_t)parts * j.pk_floats * sizeof(float), "packed h");
    int st = 1;
    if (wf && Z && X && Hs && wh && dz && dh && dw && pk) {
        ct_rng rng;
        ct_rng_seed(&rng, 2, CT_STREAM_INIT);
        for (size_t i = 0; i < TB * Il; i++) X[i] = ct_rng_uniform(&rng) - 0.5f;
        for (size_t i = 0; i < TB * H; i++) Hs[i] = ct_rng_uniform(&rng) - 0.5f;
        for (size_t i = 0; i < (size_t)parts * j.dz_floats; i++) dz[i] = 1e-3f * (ct_rng_uniform(&rng) - 0.5f);
        ct_lstm_fused_pack(wf, w->w_ih, w->w_hh, Il, H);
        ct_gemm_pack(wh, w->w_hh, H, 0, G, H);
        j.wf = wf; j.Z = Z; j.X = X; j.Hs = Hs; j.wh = wh; j.dz = dz; j.dh = dh; j.dw = dw; j.pk = pk;
        double pf = ceiling_time(&j, ceiling_forward, repeats, warmup), pb = ceiling_time(&j, ceiling_backward, repeats, warmup);
        if (pf < 0 || pb < 0) {
            fprintf(stderr, "bench_lstm: out of memory for the timings\n");
            goto done;
        }
        double ff = 2.0 * B * T * G * K, fb = 2.0 * B * T * G * K + 2.0 * B * (T - 1) * G * H;   /* backward: dW_ih, dW_hh, dh; no dx */
        printf("\nThe step as training runs it (no dx) against its matrix products alone; %d threads, FP32 FMA peak %.1f GFLOP/s (%s, best of %d):\n",
               ct_threads_get(), fr.peak, ct_fma_isa_name(fr.isa), fr.repeats);
        ceiling_row("forward, fused step", fwd_s, ff, fr.peak, B);
        ceiling_row("forward, products alone", pf, ff, fr.peak, B);
        ceiling_row("backward, as trained", bwd_s, fb, fr.peak, B);
        ceiling_row("backward, products alone", pb, fb, fr.peak, B);
        ceiling_row("step, as trained", fwd_s + bwd_s, ff + fb, fr.peak, B);
        ceiling_row("step, products alone", pf + pb, ff + fb, fr.peak, B);
        printf("  the cell and the saved rows' traffic: %.2f ms of the forward, %.2f ms of the backward (%.0f%% of the step)\n",
               1e3 * (fwd_s - pf), 1e3 * (bwd_s - pb), 100 * (fwd_s + bwd_s - pf - pb) / (fwd_s + bwd_s));
        st = 0;
    } else {
        fprintf(stderr, "bench_lstm: %s\n", ct_last_error());
    }
done:
    free(wf); free(Z); free(X); free(Hs); free(wh); free(dz); free(dh); free(dw); free(pk);
    return st;
}

int main(int argc, char **argv)
{
    ct_blas_select(argv);   /* OpenBLAS on the best kernels it has for this CPU (core/blas_select.h) */
    int threads = 2, B = 256, T = 100, I = 40, H = 128, L = 1, repeats = 10, warmup = 2, plain = 0, ceiling = 0, bf16 = 0, units_outer = 0;
    for (int a = 1; a < argc; a++) {
        int *dst = NULL;
        if (!strcmp(argv[a], "--plain")) { ct_lstm_set_fused(0); plain = 1; continue; }
        if (!strcmp(argv[a], "--ceiling")) { ceiling = 1; continue; }
        if (!strcmp(argv[a], "--bf16")) { bf16 = 1; continue; }
        if (!strcmp(argv[a], "--units-outer")) { units_outer = 1; ct_lstm_set_bf16_rows_outer(0); continue; }
        if (!strcmp(argv[a], "--threads")) dst = &threads;
        else if (!strcmp(argv[a], "--batch")) dst = &B;
        else if (!strcmp(argv[a], "--steps")) dst = &T;
        else if (!strcmp(argv[a], "--input")) dst = &I;
        else if (!strcmp(argv[a], "--hidden")) dst = &H;
        else if (!strcmp(argv[a], "--layers")) dst = &L;
        else if (!strcmp(argv[a], "--repeats")) dst = &repeats;
        else usage();
        if (++a >= argc) usage();
        *dst = atoi(argv[a]);
        if (*dst <= 0) usage();
    }
    ct_threads_set(threads);
    if (bf16 && ct_bf16_check() != CT_OK) { fprintf(stderr, "bench_lstm: --bf16: %s\n", ct_last_error()); return 2; }
    if (units_outer && !bf16) { fprintf(stderr, "bench_lstm: --units-outer is the bf16 fused step's loop order: add --bf16\n"); return 2; }
    if (bf16 && ceiling) { fprintf(stderr, "bench_lstm: --ceiling measures the float32 step: leave out --bf16\n"); return 2; }

    ct_params ps;
    ct_params_init(&ps);
    lstm_ids ids;
    if (ct_lstm_params_add(&ids, &ps, "lstm", I, H, L) != CT_OK || ct_params_alloc(&ps) != CT_OK) {
        fprintf(stderr, "bench_lstm: %s\n", ct_last_error());
        return 1;
    }
    ct_rng rng;
    ct_rng_seed(&rng, 1, CT_STREAM_INIT);
    ct_params_initialize(&ps, &rng);
    lstm_weights w[LSTM_MAX_LAYERS];
    lstm_grads g[LSTM_MAX_LAYERS];
    ct_lstm_params_view(w, g, &ps, &ids);

    lstm_dims d = { B, T, I, H, L, LSTM_RETURN_LAST, LSTM_SIGMOID, bf16 ? CT_BF16 : CT_F32, 0 };
    size_t nx = (size_t)B * T * I, nout = (size_t)B * H;
    size_t ncache = ct_lstm_cache_floats(&d), nws = ct_lstm_workspace_floats(&d);
    float *x = ct_alloc_aligned(nx * sizeof(float), "x"), *dx = ct_alloc_aligned(nx * sizeof(float), "dx");
    float *out = ct_alloc_aligned(nout * sizeof(float), "out"), *dout = ct_alloc_aligned(nout * sizeof(float), "dout");
    float *cache = ct_alloc_aligned(ncache * sizeof(float), "cache"), *ws = ct_alloc_aligned(nws * sizeof(float), "ws");
    if (!x || !dx || !out || !dout || !cache || !ws) { fprintf(stderr, "bench_lstm: %s\n", ct_last_error()); return 1; }
    for (size_t i = 0; i < nx; i++) x[i] = 2.0f * ct_rng_uniform(&rng) - 1.0f;
    for (size_t i = 0; i < nout; i++) dout[i] = 2.0f * ct_rng_uniform(&rng) - 1.0f;

    double flops_fwd = 0;
    for (int l = 0; l < L; l++) flops_fwd += 2.0 * B * T * 4.0 * H * ((l ? H : I) + H);
    double flops_bwd = 2 * flops_fwd;

    double *tf = malloc((size_t)repeats * sizeof *tf), *tb = malloc((size_t)repeats * sizeof *tb);
    double *ts = malloc((size_t)repeats * sizeof *ts), *te = malloc((size_t)repeats * sizeof *te);
    if (!tf || !tb || !ts || !te) { fprintf(stderr, "bench_lstm: out of memory for the timings\n"); return 1; }
    lstm_dims de = d;
    de.forward_only = 1;   /* evaluation's forward: no backward after it, no gates kept */
    for (int r = -warmup; r < repeats; r++) {
        double t0 = now_s();
        ct_lstm_forward(out, cache, x, NULL, w, &d);
        double t1 = now_s();
        ct_lstm_backward(dx, g, ws, dout, cache, x, NULL, w, &d);
        double t2 = now_s();
        ct_lstm_forward(out, cache, x, NULL, w, &de);
        double t3 = now_s();
        if (r >= 0) { tf[r] = t1 - t0; tb[r] = t2 - t1; ts[r] = t2 - t0; te[r] = t3 - t2; }
    }
    double mf = ct_sort_median(tf, repeats), mb = ct_sort_median(tb, repeats), msum = ct_sort_median(ts, repeats);
    double me = ct_sort_median(te, repeats);

    const int fused = !plain && (bf16 ? ct_lstm_bf16_fused_ok(H) : ct_lstm_fused_ok(H));
    printf("ctrain LSTM  B=%d T=%d I=%d H=%d L=%d ret=last sigmoid, %d threads, %s, %s forward step (OpenBLAS: %s)\n",
           B, T, I, H, L, threads, bf16 ? ct_bf16_kernels_name(ct_kernels_bf16()) : "float32",
           !fused ? "plain" : bf16 && units_outer ? "fused (unit blocks outside)" : bf16 ? "fused (rows outside)" : "fused",
           ct_blas_config());
    printf("  cache %.1f MB, workspace %.1f MB\n", ncache * 4e-6, nws * 4e-6);
    printf("  forward   %8.2f ms  %6.1f GFLOP/s\n", 1e3 * mf, flops_fwd / mf * 1e-9);
    printf("  backward  %8.2f ms  %6.1f GFLOP/s\n", 1e3 * mb, flops_bwd / mb * 1e-9);
    printf("  step      %8.2f ms  %6.1f GFLOP/s   (median of %d; FLOPs = 3 x 2*B*T*4H*(I+H) = %.2f GFLOP)\n",
           1e3 * msum, (flops_fwd + flops_bwd) / msum * 1e-9, repeats, (flops_fwd + flops_bwd) * 1e-9);
    printf("  evaluation forward %8.2f ms  %6.1f GFLOP/s   (forward only: no gates kept for a backward)\n", 1e3 * me,
           flops_fwd / me * 1e-9);
    if (bf16) {   /* the products' rate against what the bf16 instruction alone does on these threads */
        double peak = 0;
        char what[160];
        if (ct_bf16_peak(threads, &peak, what, sizeof what) != CT_OK)
            printf("  bf16 peak: %s\n", ct_last_error());
        else if (peak <= 0)
            printf("  %s\n", what);
        else
            printf("  bf16 peak %.0f GFLOP/s (%s): forward %.1f%%, backward %.1f%%, step %.1f%% of it\n", peak, what,
                   100 * flops_fwd / mf * 1e-9 / peak, 100 * flops_bwd / mb * 1e-9 / peak,
                   100 * (flops_fwd + flops_bwd) / msum * 1e-9 / peak);
    }

    int st = 0;
    if (ceiling && plain) { fprintf(stderr, "bench_lstm: --ceiling compares the fused forward step: leave out --plain\n"); st = 2; }
    else if (ceiling) st = run_ceiling(&d, w, g, x, out, dout, cache, ws, repeats, warmup, mf);

    free(tf); free(tb); free(ts); free(te);
    free(x); free(dx); free(out); free(dout); free(cache); free(ws);
    ct_params_free(&ps);
    return st;
}
