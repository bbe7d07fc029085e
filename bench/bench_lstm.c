/* bench_lstm.c - times one training step of the speaker model's LSTM
 * (forward + backward through time) in ctrain, for comparison with
 * bench/lstm_torch.py (the same shape in PyTorch).
 *
 *   build/bench/bench_lstm [--threads N] [--batch B] [--steps T] [--input I]
 *                          [--hidden H] [--layers L] [--repeats R] [--plain]
 *   defaults: 2 threads, B=256 sequences, T=100 frames, I=40 features, H=128
 *   units, L=1 layer, return last, sigmoid; 2 warm-up steps, median of 10.
 *   --plain: the forward step as two packed products and a cell loop instead
 *   of the fused kernel (layers/lstm_fused.h), to measure what fusing gives.
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
#include "layers/lstm.h"   /* after <cblas.h>: it removes complex.h's macro I */
#include "layers/lstm_fused.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_lstm [--threads N] [--batch B] [--steps T] [--input I] [--hidden H] [--layers L] [--repeats R] [--plain]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    ct_blas_select(argv);   /* OpenBLAS on the best kernels it has for this CPU (core/blas_select.h) */
    int threads = 2, B = 256, T = 100, I = 40, H = 128, L = 1, repeats = 10, warmup = 2, plain = 0;
    for (int a = 1; a < argc; a++) {
        int *dst = NULL;
        if (!strcmp(argv[a], "--plain")) { ct_lstm_set_fused(0); plain = 1; continue; }
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

    lstm_dims d = { B, T, I, H, L, LSTM_RETURN_LAST, LSTM_SIGMOID };
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
    double *ts = malloc((size_t)repeats * sizeof *ts);
    for (int r = -warmup; r < repeats; r++) {
        double t0 = now_s();
        ct_lstm_forward(out, cache, x, NULL, w, &d);
        double t1 = now_s();
        ct_lstm_backward(dx, g, ws, dout, cache, x, NULL, w, &d);
        double t2 = now_s();
        if (r >= 0) { tf[r] = t1 - t0; tb[r] = t2 - t1; ts[r] = t2 - t0; }
    }
    double mf = ct_sort_median(tf, repeats), mb = ct_sort_median(tb, repeats), msum = ct_sort_median(ts, repeats);

    printf("ctrain LSTM  B=%d T=%d I=%d H=%d L=%d ret=last sigmoid, %d threads, %s forward step (OpenBLAS: %s)\n",
           B, T, I, H, L, threads, plain || !ct_lstm_fused_ok(H) ? "plain" : "fused", ct_blas_config());
    printf("  cache %.1f MB, workspace %.1f MB\n", ncache * 4e-6, nws * 4e-6);
    printf("  forward   %8.2f ms  %6.1f GFLOP/s\n", 1e3 * mf, flops_fwd / mf * 1e-9);
    printf("  backward  %8.2f ms  %6.1f GFLOP/s\n", 1e3 * mb, flops_bwd / mb * 1e-9);
    printf("  step      %8.2f ms  %6.1f GFLOP/s   (median of %d; FLOPs = 3 x 2*B*T*4H*(I+H) = %.2f GFLOP)\n",
           1e3 * msum, (flops_fwd + flops_bwd) / msum * 1e-9, repeats, (flops_fwd + flops_bwd) * 1e-9);

    free(tf); free(tb); free(ts);
    free(x); free(dx); free(out); free(dout); free(cache); free(ws);
    ct_params_free(&ps);
    return 0;
}
