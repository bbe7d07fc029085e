/* bench_cnn.c - training throughput of a spec CNN (default: the `cnn` model,
 * Keras's mnist_cnn on 1x28x28), for comparison with bench/cnn_torch.py (the
 * same network, batch and threads in PyTorch).
 *
 *   build/bench/bench_cnn [--threads N] [--batch B] [--repeats R] [--arch SPEC] [--layers]
 *   defaults: 2 threads, batch 128, 2 warm-up steps, median of 20 steps.
 *
 * One step = zero the gradients, forward (training mode: dropout, batch
 * statistics), softmax cross-entropy, backward, Adam update, on synthetic
 * images (uniform [0,1), random labels: the speed does not depend on the data).
 * FLOPs counted per layer (models/seq_cnn.h, ct_seq_cnn_step_flops): the conv and
 * dense matrix products, forward + weight gradient + input gradient (none for
 * the first layer); for the default spec 71.6 MFLOP per image, 21.2 of the 24.0
 * MFLOP of the forward pass in the second conv; convolutions count direct
 * convolution's FLOPs, so the Winograd layers' rate is an effective one. The
 * FP32 FMA peak and the sgemm peak (core/peak.h, same threads) are measured in
 * the same run, so the fractions of peak compare like with like on a noisy
 * machine. --layers adds a per-layer time breakdown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/blas_select.h"
#include "core/peak.h"
#include "core/rng.h"
#include "core/threads.h"
#include "layers/optim.h"
#include "models/seq_cnn.h"
#include "train/train.h"

static void usage(void)
{
    fprintf(stderr, "usage: bench_cnn [--threads N] [--batch B] [--repeats R] [--arch SPEC] [--layers]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    ct_blas_select(argv);   /* OpenBLAS on the best kernels it has for this CPU (core/blas_select.h) */
    int threads = 2, B = 128, repeats = 20, warmup = 2, layers = 0;
    const char *spec = SEQ_CNN_DEFAULT_SPEC;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--layers")) { layers = 1; continue; }
        if (a + 1 >= argc) usage();
        if (!strcmp(argv[a], "--arch")) { spec = argv[++a]; continue; }
        int *dst = NULL;
        if (!strcmp(argv[a], "--threads")) dst = &threads;
        else if (!strcmp(argv[a], "--batch")) dst = &B;
        else if (!strcmp(argv[a], "--repeats")) dst = &repeats;
        else usage();
        *dst = atoi(argv[++a]);
        if (*dst <= 0) usage();
    }
    ct_threads_set(threads);
    seq_cnn m;
    if (ct_seq_cnn_build(&m, spec, 1, 28, 28, 10) != CT_OK || ct_seq_cnn_plan(&m, B) != CT_OK) {
        fprintf(stderr, "bench_cnn: %s\n", ct_last_error());
        return 1;
    }
    ct_rngs rngs;
    ct_rngs_seed(&rngs, 1);
    ct_seq_cnn_init_weights(&m, &rngs.init);
    ct_optim_config cfg = ct_optim_defaults(OPT_ADAM);
    ct_optim o;
    if (ct_optim_init(&o, &cfg, m.params.numel) != CT_OK) { fprintf(stderr, "bench_cnn: %s\n", ct_last_error()); return 1; }
    float *x = malloc((size_t)B * 784 * sizeof *x);
    int *labels = malloc((size_t)B * sizeof *labels);
    if (!x || !labels) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < (size_t)B * 784; i++) x[i] = ct_rng_uniform(&rngs.data);
    for (int i = 0; i < B; i++) labels[i] = (int)ct_rng_below(&rngs.data, 10);

    ct_sgemm_rate pk;
    ct_fma_rate fr;
    if (ct_peak_sgemm_cpu(&pk) != CT_OK || ct_peak_fma_cpu(&fr, threads) != CT_OK) {
        fprintf(stderr, "bench_cnn: %s\n", ct_last_error());
        return 1;
    }
    double peak = pk.median, fma = fr.peak;
    double *ts = malloc((size_t)repeats * sizeof *ts), *te = malloc((size_t)repeats * sizeof *te);
    double step_sum = 0, par_sum = 0;   /* the timed training steps, and their time inside ct_parallel */
    for (int r = -warmup; r < repeats; r++) {
        if (r == 0 && layers) {
            m.prof.on = 1;
            memset(m.prof.fwd, 0, sizeof m.prof.fwd);
            memset(m.prof.bwd, 0, sizeof m.prof.bwd);
        }
        double p0 = ct_parallel_seconds();
        double t0 = ct_now();
        ct_params_zero_grad(&m.params);
        ct_seq_cnn_forward(&m, x, labels, B, 1, &rngs.dropout, NULL);
        ct_seq_cnn_backward(&m, x, labels, B);
        ct_optim_step(&o, m.params.data, m.params.grad, cfg.lr);
        double t1 = ct_now();
        if (r >= 0) { ts[r] = t1 - t0; step_sum += t1 - t0; par_sum += ct_parallel_seconds() - p0; }
    }
    m.prof.on = 0;
    for (int r = -1; r < repeats; r++) {   /* evaluation forward (validation) */
        double t0 = ct_now();
        ct_seq_cnn_forward(&m, x, labels, B, 0, NULL, NULL);
        if (r >= 0) te[r] = ct_now() - t0;
    }
    double step = ct_sort_median(ts, repeats), ev = ct_sort_median(te, repeats), best = ts[0];   /* ts sorted by ct_sort_median */
    double flops = ct_seq_cnn_step_flops(&m, B), ips = B / step, gflops = flops / step * 1e-9;
    printf("ctrain cnn  %s  on 1x28x28, batch %d, %d threads (OpenBLAS: %s, core %s)\n", spec, B, threads, ct_blas_config(),
           ct_blas_select_note());
    printf("  FP32 FMA peak (%s, best of %d) %6.1f GFLOP/s; sgemm peak (%d^3, median of %d) %6.1f GFLOP/s\n",
           ct_fma_isa_name(fr.isa), fr.repeats, fma, CT_PEAK_N, pk.repeats, peak);
    printf("  training step  %8.2f ms  %7.0f images/s  %6.1f GFLOP/s  %4.1f%% of FMA peak, %4.1f%% of sgemm peak   "
           "(median of %d; %.1f MFLOP/image)\n", 1e3 * step, ips, gflops, 100.0 * gflops / fma, 100.0 * gflops / peak, repeats,
           flops / B * 1e-6);
    printf("  best step      %8.2f ms  %7.0f images/s  %6.1f GFLOP/s  %4.1f%% of FMA peak, %4.1f%% of sgemm peak   "
           "(the least disturbed of %d)\n", 1e3 * best, B / best, flops / best * 1e-9, 100.0 * flops / best * 1e-9 / fma,
           100.0 * flops / best * 1e-9 / peak, repeats);
    printf("  eval forward   %8.2f ms  %7.0f images/s\n", 1e3 * ev, B / ev);
    /* what more threads cannot shorten: the step's time outside the worker pool (core/threads.h) */
    printf("  outside the threads %.2f ms of the training step's %.2f ms (%.1f%%; mean over %d steps)\n",
           1e3 * (step_sum - par_sum) / repeats, 1e3 * step_sum / repeats, 100.0 * (step_sum - par_sum) / step_sum, repeats);
    printf("  epoch estimate (60000 train + 10000 eval images): %.1f s\n", 60000.0 / ips + 10000.0 * ev / B);
    if (layers) {
        printf("  per layer (mean over %d steps):     forward ms  backward ms   step GFLOP/s\n", repeats);
        for (int i = 0; i < m.n; i++) {
            double f = m.prof.fwd[i] / repeats, b = m.prof.bwd[i] / repeats, fl = ct_seq_layer_step_flops(&m, i, B);
            printf("    %2d %-14s %18.2f %12.2f", i + 1, m.layer[i].text, 1e3 * f, 1e3 * b);
            if (fl > 0) printf(" %14.1f", fl / (f + b) * 1e-9);
            printf("\n");
        }
    }
    free(ts); free(te); free(x); free(labels);
    ct_optim_free(&o);
    ct_seq_cnn_free(&m);
    return 0;
}
