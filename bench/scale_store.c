/* scale_store.c - writes a VoxCeleb-sized feature store for `make bench-scale`
 * (bench/scale.sh) through ctrain's own store writer, with no audio: SPEAKERS
 * speakers, utterances of 4-12 s (400-1,200 frames, VoxCeleb's typical lengths),
 * until the store holds GIB gibibytes of features. Each speaker's frames are its
 * own band profile plus noise, normalised per utterance as prep's are, so the
 * model has something to learn; the numbers measured are the reader's, not the
 * content's.
 *
 *   usage: scale_store OUT.h5 GIB [SPEAKERS] [float32|float16]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/rng.h"
#include "io/featstore.h"

#define MELS 40

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: scale_store OUT.h5 GIB [SPEAKERS] [float32|float16]\n"); return 2; }
    double gib = atof(argv[2]);
    int speakers = argc > 3 ? atoi(argv[3]) : 5994;
    ct_feat_dtype dtype = CT_FEAT_FLOAT32;
    if (argc > 4 && ct_feat_dtype_parse(&dtype, argv[4]) != CT_OK) { fprintf(stderr, "scale_store: %s\n", ct_last_error()); return 2; }
    if (!(gib > 0) || speakers < 2) { fprintf(stderr, "scale_store: GIB > 0 and SPEAKERS >= 2\n"); return 2; }
    size_t bytes_per_value = dtype == CT_FEAT_FLOAT16 ? 2 : 4;
    unsigned long long target = (unsigned long long)(gib * 1073741824.0), written = 0;
    ct_featstore *w = NULL;
    if (ct_featstore_open_dtype(&w, argv[1], MELS, dtype) != CT_OK) { fprintf(stderr, "scale_store: %s\n", ct_last_error()); return 1; }
    if (ct_featstore_n_utt(w) > 0) { fprintf(stderr, "scale_store: %s exists; remove it first\n", argv[1]); ct_featstore_close(w); return 1; }
    float *x = malloc(sizeof *x * 1200 * MELS);                         /* [frames, MELS] one utterance */
    float *profile = malloc(sizeof *profile * (size_t)speakers * MELS);  /* [speakers, MELS] */
    if (!x || !profile) { fprintf(stderr, "scale_store: out of memory\n"); return 1; }
    ct_rng r;
    ct_rng_seed(&r, 2018, 1);
    ct_rng_uniform_fill(&r, profile, (size_t)speakers * MELS);
    ct_status st = CT_OK;
    long u = 0;
    for (; written < target && st == CT_OK; u++) {
        int s = (int)(u % speakers), frames = 400 + (int)ct_rng_below(&r, 801);
        ct_rng_uniform_fill(&r, x, (size_t)frames * MELS);
        for (int m = 0; m < MELS; m++) {   /* profile + noise, then zero mean and unit variance per band */
            double sum = 0, sq = 0;
            for (int t = 0; t < frames; t++) { float v = x[t * MELS + m] + 2 * profile[s * MELS + m]; x[t * MELS + m] = v; sum += v; sq += (double)v * v; }
            double mean = sum / frames, sd = sq / frames - mean * mean > 1e-12 ? sqrt(sq / frames - mean * mean) : 1;
            for (int t = 0; t < frames; t++) x[t * MELS + m] = (float)((x[t * MELS + m] - mean) / sd);
        }
        char spk[16], vid[24], path[64];
        snprintf(spk, sizeof spk, "id%05d", 10000 + s);
        snprintf(vid, sizeof vid, "v%07ld", u / 8);
        snprintf(path, sizeof path, "%s/%s/%05ld.wav", spk, vid, u % 100000);
        st = ct_featstore_append(w, path, spk, vid, x, frames);
        if (st == CT_OK && u % 64 == 63) st = ct_featstore_flush(w);
        written += (unsigned long long)frames * MELS * bytes_per_value;
    }
    if (st == CT_OK) st = ct_featstore_close(w);
    else ct_featstore_close(w);
    free(x); free(profile);
    if (st != CT_OK) { fprintf(stderr, "scale_store: %s\n", ct_last_error()); return 1; }
    printf("%s: %ld utterances of %d speakers, %.2f GiB of %s features\n", argv[1], u, speakers, written / 1073741824.0,
           ct_feat_dtype_name(dtype));
    return 0;
}
