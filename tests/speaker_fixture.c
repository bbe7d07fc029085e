/* speaker_fixture.c - a small speaker-verification data set for the tests that run
 * `ctrain train siamese-lstm --trials` (tfevents, mpi): see t_speaker_data in test.h. */
#include <stdio.h>
#include <stdlib.h>
#include "tests/test.h"
#include "io/corpus.h"
#include "io/featstore.h"

/* A feature store of 12 synthetic speakers with VoxCeleb-style paths, and a trial list over the
 * last 4 speakers (every pair of their utterances), for a run that reports val_eer. */
int t_speaker_data(const char *dir, char *feats, char *trials, size_t cap)
{
    enum { SPK = 12, UTT = 6 };
    ct_corpus c = { 0 };
    ct_synth_config sc = { .speakers = SPK, .utts_per_speaker = UTT, .min_frames = 24, .max_frames = 40,
                           .n_mels = 8, .noise = 0.5f, .seed = 5 };
    if (!t_check(ct_corpus_synthetic(&c, &sc) == CT_OK, "synthetic corpus: %s", ct_last_error())) return 0;
    snprintf(feats, cap, "%s/feats.h5", dir);
    snprintf(trials, cap, "%s/trials.txt", dir);
    ct_featstore *w = NULL;
    ct_status st = ct_featstore_open(&w, feats, c.n_mels);
    char (*path)[96] = calloc((size_t)c.n_utt, sizeof *path);
    for (int u = 0; st == CT_OK && path && u < c.n_utt; u++) {
        char spk[16], vid[24];
        int s = c.utt[u].speaker % 10000;
        snprintf(spk, sizeof spk, "id1%04d", s);
        snprintf(vid, sizeof vid, "vid%08d", s * 2 + (u % UTT) / 3);
        snprintf(path[u], sizeof path[u], "%s/%s/%05d.wav", spk, vid, u % UTT + 1);
        st = ct_featstore_append(w, path[u], spk, vid, c.feats + c.utt[u].offset, c.utt[u].frames);
    }
    if (w && ct_featstore_close(w) != CT_OK && st == CT_OK) st = CT_EIO;
    FILE *f = st == CT_OK && path ? fopen(trials, "w") : NULL;
    for (int a = (SPK - 4) * UTT; f && a < SPK * UTT; a++)
        for (int b = a + 1; b < SPK * UTT; b++) fprintf(f, "%d %s %s\n", a / UTT == b / UTT, path[a], path[b]);
    int ok = f != NULL;
    if (f) ok = fclose(f) == 0;
    free(path);
    ct_corpus_free(&c);
    return t_check(st == CT_OK && ok, "writing the feature store and trials: %s", ct_last_error());
}
