/* bench_siamese.c - training throughput of the siamese LSTM speaker model with
 * the seed's shapes: batch 128 pairs (256 sequences) x 100 frames x 40 log-mels
 * -> LSTM 128 -> dense 64 -> distance -> contrastive loss, RMSprop.
 *
 * Times whole training steps (forward, backward, optimizer update) and
 * validation steps (forward only) on random inputs, and from them the seconds
 * one epoch of the seed protocol (300,000 training + 120,000 validation pairs)
 * would take. Prints GFLOP/s counted by ct_siamese_lstm_step_flops and, if given
 * --peak, the fraction of that peak (`make bench` passes the FP32 FMA peak of
 * bench_sgemm, core/peak.h).
 *
 *   build/bench/bench_siamese [--threads N] [--steps S] [--batch B] [--peak GFLOPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/blas_select.h"
#include "core/peak.h"
#include "core/rng.h"
#include "core/threads.h"
#include "layers/optim.h"
#include "models/siamese_lstm.h"
#include "train/train.h"

int main(int argc, char **argv)
{
    ct_blas_select(argv);   /* OpenBLAS on the best kernels it has for this CPU (core/blas_select.h) */
    int threads = 2, steps = 20, B = 128;
    double peak = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) B = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--peak") && i + 1 < argc) peak = atof(argv[++i]);
        else { fprintf(stderr, "usage: bench_siamese [--threads N] [--steps S] [--batch B] [--peak GFLOPS]\n"); return 2; }
    }
    if (threads < 1 || steps < 1 || B < 1) { fprintf(stderr, "bench_siamese: values must be >= 1\n"); return 2; }
    ct_threads_set(threads);
    siamese_lstm_config cfg = ct_siamese_lstm_defaults();
    siamese_lstm m;
    if (ct_siamese_lstm_build(&m, &cfg) != CT_OK || ct_siamese_lstm_plan(&m, B) != CT_OK) {
        fprintf(stderr, "bench_siamese: %s\n", ct_last_error());
        return 1;
    }
    ct_rng r;
    ct_rng_seed(&r, 1, 1);
    ct_siamese_lstm_init_weights(&m, &r);
    size_t nx = 2 * (size_t)B * cfg.frames * cfg.n_mels;
    float *x = malloc(nx * sizeof *x), *y = malloc((size_t)B * sizeof *y);
    for (size_t i = 0; i < nx; i++) x[i] = 2.0f * ct_rng_uniform(&r) - 1.0f;
    for (int k = 0; k < B; k++) y[k] = (float)(k % 2);
    ct_optim_config oc = ct_optim_defaults(OPT_RMSPROP);
    ct_optim opt;
    if (ct_optim_init(&opt, &oc, m.params.numel) != CT_OK) { fprintf(stderr, "%s\n", ct_last_error()); return 1; }

    double *ts = malloc((size_t)steps * sizeof *ts), *tv = malloc((size_t)steps * sizeof *tv);
    double step_sum = 0, par_sum = 0;   /* the timed training steps, and their time inside ct_parallel */
    for (int s = -2; s < steps; s++) {   /* two warm-up steps */
        double p0 = ct_parallel_seconds();
        double t0 = ct_now();
        ct_params_zero_grad(&m.params);
        ct_siamese_lstm_forward(&m, x, NULL, NULL, y, B, 1, NULL);
        ct_siamese_lstm_backward(&m, x, NULL, NULL, y, B);
        ct_optim_step(&opt, m.params.data, m.params.grad, oc.lr);
        double t1 = ct_now();
        if (s >= 0) { step_sum += t1 - t0; par_sum += ct_parallel_seconds() - p0; }
        ct_siamese_lstm_forward(&m, x, NULL, NULL, y, B, 0, NULL);   /* validation: no backward follows */
        double t2 = ct_now();
        if (s >= 0) { ts[s] = t1 - t0; tv[s] = t2 - t1; }
    }
    double step = ct_sort_median(ts, steps), val = ct_sort_median(tv, steps), flops = ct_siamese_lstm_step_flops(&cfg, B);
    double epoch = 300000.0 / B * step + 120000.0 / B * val;
    printf("ctrain   siamese-lstm B=%d pairs, %d threads: train step %.1f ms (min %.1f), %.0f pairs/s, %.1f GFLOP/s%s",
           B, threads, 1e3 * step, 1e3 * ts[0], B / step, flops / step / 1e9, peak > 0 ? "" : "\n");
    if (peak > 0) printf(" = %.0f%% of %.0f\n", 100.0 * flops / step / 1e9 / peak, peak);
    printf("ctrain   validation step %.1f ms; seed-protocol epoch (300k train + 120k val pairs): %.0f s\n", 1e3 * val, epoch);
    /* what more threads cannot shorten: the step's time outside the worker pool (core/threads.h) */
    printf("ctrain   training step outside the threads: %.2f ms of %.1f ms (%.1f%%; mean over %d steps)\n",
           1e3 * (step_sum - par_sum) / steps, 1e3 * step_sum / steps, 100.0 * (step_sum - par_sum) / step_sum, steps);
    free(x); free(y); free(ts); free(tv);
    ct_optim_free(&opt);
    ct_siamese_lstm_free(&m);
    return 0;
}
