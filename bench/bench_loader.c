/* bench_loader.c - how fast the batch loader alone reads a feature store: the
 * training batches of the seed protocol (pairs of 100-frame crops, batch 128)
 * built from a store streamed from its file, with no model. Prints the time per
 * batch (median and mean) and the pairs per second the loader could feed, which
 * is the ceiling on a training run streamed from that store: an H200 trains the
 * siamese LSTM at about 77,000 pairs/s (a batch every 1.7 ms), so a loader
 * slower than that leaves the GPU waiting (bench/RESULTS.md, "the loader").
 * Whether the file is in the page cache is the caller's business (bench/scale.sh
 * and scripts/gpu-store.sh drop it for a cold run).
 *
 * READERS threads read each batch's crops at once (ct_pairs_batch_pool, as
 * `--loader-threads` does in training).
 *
 *   usage: bench_loader STORE [BATCHES] [READERS] [BATCH] [FRAMES]
 *          defaults 400 batches, 1 reader, 128 pairs, 100 frames
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/clock.h"
#include "core/rng.h"
#include "core/threads.h"
#include "io/corpus.h"
#include "io/featstore.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: bench_loader STORE [BATCHES] [READERS] [BATCH] [FRAMES]\n"); return 2; }
    int batches = argc > 2 ? atoi(argv[2]) : 400, readers = argc > 3 ? atoi(argv[3]) : 1;
    int B = argc > 4 ? atoi(argv[4]) : 128, T = argc > 5 ? atoi(argv[5]) : 100;
    if (batches < 1 || B < 1 || T < 1 || readers < 1 || readers > CT_LOADER_MAX_READERS) {
        fprintf(stderr, "bench_loader: BATCHES, BATCH and FRAMES must be >= 1, READERS 1 to %d\n", CT_LOADER_MAX_READERS);
        return 2;
    }
    ct_workers *pool = readers > 1 ? ct_workers_new() : NULL;
    ct_corpus c;
    double t_open = ct_now();
    if (ct_featstore_stream(&c, argv[1]) != CT_OK) { fprintf(stderr, "bench_loader: %s\n", ct_last_error()); return 1; }
    t_open = ct_now() - t_open;
    int *spk = malloc(sizeof *spk * (size_t)c.n_speakers);
    ct_pair *pairs = malloc(sizeof *pairs * (size_t)batches * (size_t)B);
    float *x = malloc(sizeof *x * 2 * (size_t)B * (size_t)T * (size_t)c.n_mels), *y = malloc(sizeof *y * (size_t)B);   /* [2B, T, I], [B] */
    int *len = malloc(sizeof *len * 2 * (size_t)B);   /* [2B] */
    double *ms = malloc(sizeof *ms * (size_t)batches);
    if (!spk || !pairs || !x || !y || !len || !ms) { fprintf(stderr, "bench_loader: out of memory\n"); return 1; }
    for (int s = 0; s < c.n_speakers; s++) spk[s] = s;
    ct_rng r, crop;
    ct_rng_seed(&r, 1, 1);
    ct_rng_seed(&crop, 1, 2);
    if (ct_pairs_draw(pairs, batches * B, &c, NULL, spk, c.n_speakers, &r) != CT_OK) {
        fprintf(stderr, "bench_loader: %s\n", ct_last_error());
        return 1;
    }
    double t0 = ct_now();
    for (int k = 0; k < batches; k++) {
        double t = ct_now();
        if (ct_pairs_batch_pool(x, len, y, pairs + (size_t)k * B, B, 0, B, &c, T, &crop, pool, readers) != CT_OK) {
            fprintf(stderr, "bench_loader: batch %d: %s\n", k, ct_last_error());
            return 1;
        }
        ms[k] = 1e3 * (ct_now() - t);
    }
    double wall = ct_now() - t0, mean = 1e3 * wall / batches;
    ct_featstore_stats st = { 0, 0, 0 };
    ct_featstore_stats_of(&c, &st);
    qsort(ms, (size_t)batches, sizeof *ms, cmp_double);
    printf("loader: %s: %d utterances of %d speakers, opened in %.2f s; crops read %s\n", argv[1], c.n_utt, c.n_speakers, t_open,
           st.direct ? "with pread through the chunk map" : "through H5Dread");
    printf("loader: %d batches of %d pairs (%d-frame crops), %d reader%s: median %.3f ms, mean %.3f ms, p90 %.3f ms per batch; "
           "%.0f pairs/s; %llu reads, %.1f MB/s\n",
           batches, B, T, readers, readers > 1 ? "s" : "", ms[batches / 2], mean, ms[batches * 9 / 10], (double)batches * B / wall, st.reads, st.bytes / wall / 1e6);
    free(spk); free(pairs); free(x); free(y); free(len); free(ms);
    ct_workers_free(pool);
    ct_corpus_free(&c);
    return 0;
}
