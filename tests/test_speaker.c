/* test_speaker.c - the siamese LSTM's data pipeline (train/speaker_task.c,
 * io/corpus.c): pair balance and speaker disjointness, held-out videos,
 * determinism of the background loader, and clear errors for corpora that
 * cannot be split. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "io/corpus.h"
#include "train/speaker_task.h"

static ct_status small_corpus(ct_corpus *c, int speakers, int utts)
{
    ct_synth_config sc = { .speakers = speakers, .utts_per_speaker = utts, .min_frames = 12, .max_frames = 20,
                           .n_mels = 6, .noise = 0.5f, .seed = 4 };
    return ct_corpus_synthetic(c, &sc);
}

static void test_pairs(void)
{
    t_case("speaker/pairs: half same, speakers disjoint between splits, deterministic");
    ct_corpus c;
    t_check(small_corpus(&c, 20, 5) == CT_OK, "corpus: %s", ct_last_error());
    int tr[20], va[20], ntr, nva;
    ct_rng r;
    ct_rng_seed(&r, 9, CT_STREAM_DATA);
    t_check(ct_corpus_split(tr, &ntr, va, &nva, &c, 0.25, &r) == CT_OK && ntr == 15 && nva == 5, "split 15/5");
    int is_val[20] = { 0 };
    for (int k = 0; k < nva; k++) is_val[va[k]] = 1;
    for (int k = 0; k < ntr; k++) t_check(!is_val[tr[k]], "speaker %d in both splits", tr[k]);
    ct_pair p[1000], q[1000];
    ct_rng r1 = r, r2 = r;
    t_check(ct_pairs_draw(p, 1000, &c, NULL, tr, ntr, &r1) == CT_OK, "draw: %s", ct_last_error());
    ct_pairs_draw(q, 1000, &c, NULL, tr, ntr, &r2);
    t_check(memcmp(p, q, sizeof p) == 0, "same RNG state, different pairs");
    int same = 0, bad = 0;
    for (int i = 0; i < 1000; i++) {
        int sa = c.utt[p[i].a].speaker, sb = c.utt[p[i].b].speaker;
        same += p[i].y == 1.0f;
        bad += (p[i].y == 1.0f) != (sa == sb) || p[i].a == p[i].b || is_val[sa] || is_val[sb];
    }
    t_check(same == 500, "%d of 1000 pairs same-speaker, want exactly 500", same);
    t_check(bad == 0, "%d pairs with a wrong label, a repeated utterance or a validation speaker", bad);
    ct_corpus_free(&c);
}

static void test_unusable(void)
{
    t_case("speaker/a speaker with one utterance is left out with a warning; too few speakers is an error");
    ct_corpus c;
    t_check(small_corpus(&c, 6, 3) == CT_OK, "corpus");
    /* make speaker 2 own a single utterance: give its other two to speaker 3 */
    int moved = 0;
    for (int u = 0; u < c.n_utt && moved < 2; u++) if (c.utt[u].speaker == 2) { c.utt[u].speaker = 3; moved++; }
    int spk[6] = { 0, 1, 2, 3, 4, 5 }, n = 6;
    FILE *w = tmpfile();
    ct_usable_speakers(spk, &n, &c, NULL, w);
    char msg[512] = "";
    if (w) { rewind(w); size_t got = fread(msg, 1, sizeof msg - 1, w); msg[got] = '\0'; fclose(w); }
    t_check(n == 5 && strstr(msg, "speaker 2 has 1 usable utterance"), "kept %d, warning: %s", n, msg);
    ct_pair p[4];
    ct_rng r;
    ct_rng_seed(&r, 1, 1);
    t_check(ct_pairs_draw(p, 4, &c, NULL, (int[]){ 2, 3 }, 2, &r) == CT_EINVAL && strstr(ct_last_error(), "speaker 2"),
            "drawing from a one-utterance speaker: %s", ct_last_error());
    t_check(ct_pairs_draw(p, 4, &c, NULL, (int[]){ 3 }, 1, &r) == CT_EINVAL && strstr(ct_last_error(), "at least 2 speakers"),
            "one speaker: %s", ct_last_error());
    int tr[6], va[6], ntr, nva;
    ct_corpus tiny;
    t_check(small_corpus(&tiny, 3, 3) == CT_OK, "corpus");
    t_check(ct_corpus_split(tr, &ntr, va, &nva, &tiny, 0.25, &r) == CT_EINVAL && strstr(ct_last_error(), "3 speakers cannot be split"),
            "3 speakers: %s", ct_last_error());
    ct_corpus_free(&tiny);
    ct_corpus_free(&c);
}

static void test_videos(void)
{
    t_case("speaker/held-out videos: one video per speaker goes to validation");
    ct_corpus c;
    t_check(small_corpus(&c, 5, 6) == CT_OK, "corpus");
    c.video = malloc((size_t)c.n_utt * sizeof *c.video);
    for (int u = 0; u < c.n_utt; u++) c.video[u] = c.utt[u].speaker * 3 + (u % 3);   /* 3 videos per speaker */
    unsigned char val[30];
    ct_rng r;
    ct_rng_seed(&r, 2, 1);
    t_check(ct_corpus_split_videos(val, &c, &r) == CT_OK, "split: %s", ct_last_error());
    for (int s = 0; s < 5; s++) {
        int held_videos = 0, seen[3] = { 0 };
        for (int u = 0; u < c.n_utt; u++)
            if (c.utt[u].speaker == s && val[u] && !seen[c.video[u] % 3]) { seen[c.video[u] % 3] = 1; held_videos++; }
        t_check(held_videos == 1, "speaker %d: %d held-out videos", s, held_videos);
    }
    free(c.video);
    c.video = NULL;
    t_check(ct_corpus_split_videos(val, &c, &r) == CT_EINVAL && strstr(ct_last_error(), "video ids"), "no video ids: %s", ct_last_error());
    ct_corpus_free(&c);
}

/* One epoch through the speaker task and the training loop; returns the weights. */
static float *train_once(ct_val_split split, size_t *n)
{
    ct_corpus c;
    small_corpus(&c, 12, 6);
    if (split == CT_VAL_VIDEOS) {
        c.video = malloc((size_t)c.n_utt * sizeof *c.video);
        for (int u = 0; u < c.n_utt; u++) c.video[u] = c.utt[u].speaker * 2 + (u % 2);
    }
    siamese_lstm_config mc = ct_siamese_lstm_defaults();
    mc.n_mels = 6; mc.frames = 10; mc.hidden = 8; mc.embed = 4;
    siamese_lstm m;
    speaker_task s;
    ct_rngs rngs;
    ct_rngs_seed(&rngs, 3);
    speaker_task_config tc = { .pairs = 100, .val_pairs = 40, .batch = 16, .val_split = split, .val_fraction = 0.25, .seed = 3 };
    t_check(ct_siamese_lstm_build(&m, &mc) == CT_OK && ct_siamese_lstm_plan(&m, 16) == CT_OK, "build");
    speaker_model sm = ct_speaker_model_lstm(&m);
    t_check(ct_speaker_task_init(&s, &tc, &c, &sm, &rngs, NULL) == CT_OK, "task: %s", ct_last_error());
    ct_siamese_lstm_init_weights(&m, &rngs.init);
    ct_task task = ct_speaker_task_ops(&s);
    ct_fit_config fit = { .epochs = 2, .batch = 16, .optim = ct_optim_defaults(OPT_RMSPROP), .progress = 0 };
    fit.sched = (ct_sched){ .kind = SCHED_CONSTANT, .base_lr = fit.optim.lr };
    FILE *devnull = fopen("/dev/null", "w");
    ct_epoch_log hist[2];
    t_check(ct_fit(&task, &fit, hist, devnull ? devnull : stdout) == CT_OK, "fit: %s", ct_last_error());
    if (devnull) fclose(devnull);
    t_check(hist[1].val_accuracy >= 0 && hist[1].val_accuracy <= 1 && hist[1].seconds > 0, "history");
    *n = m.params.numel;
    float *w = malloc(*n * sizeof *w);
    memcpy(w, m.params.data, *n * sizeof *w);
    ct_speaker_task_free(&s);
    ct_siamese_lstm_free(&m);
    ct_corpus_free(&c);
    return w;
}

static void test_task_determinism(void)
{
    t_case("speaker/task: two runs with the background loader give bit-identical weights (speaker and video splits)");
    for (int split = 0; split < 2; split++) {
        size_t n1, n2;
        float *a = train_once((ct_val_split)split, &n1), *b = train_once((ct_val_split)split, &n2);
        t_check(n1 == n2 && memcmp(a, b, n1 * sizeof *a) == 0, "split %d: runs differ", split);
        free(a); free(b);
    }
}

/* Data-parallel training: the parts of a batch that N ranks load (ct_pairs_batch_part) are
 * the rows of the whole batch, crops included, and leave the crop stream where the whole
 * batch leaves it. T = 14 < max_frames: most utterances get a random crop. */
static void test_batch_parts(void)
{
    t_case("speaker/pairs_batch_part: 2 and 3 ranks' parts are the whole batch's rows and leave the same crop stream");
    ct_corpus c;
    t_check(small_corpus(&c, 10, 4) == CT_OK, "corpus: %s", ct_last_error());
    enum { B = 7, T = 14, I = 6 };
    int spk[10];
    for (int k = 0; k < 10; k++) spk[k] = k;
    ct_pair p[B];
    ct_rng r, whole_r;
    ct_rng_seed(&r, 5, CT_STREAM_DATA);
    t_check(ct_pairs_draw(p, B, &c, NULL, spk, 10, &r) == CT_OK, "draw: %s", ct_last_error());
    static float x[2 * B * T * I], xp[2 * B * T * I];
    int len[2 * B], lenp[2 * B];
    float y[B], yp[B];
    ct_rng_seed(&whole_r, 6, 0xc40bULL);
    ct_rng start = whole_r;
    ct_pairs_batch(x, len, y, p, B, &c, T, &whole_r);
    int ok = 1;
    for (int N = 2; N <= 3; N++)
        for (int rank = 0; rank < N; rank++) {
            int lo = B * rank / N, hi = B * (rank + 1) / N, n = hi - lo;
            ct_rng part_r = start;
            ct_pairs_batch_part(xp, lenp, yp, p, B, lo, hi, &c, T, &part_r);
            ok &= part_r.state == whole_r.state;
            for (int j = 0; j < n; j++) {
                ok &= yp[j] == y[lo + j] && lenp[j] == len[lo + j] && lenp[n + j] == len[B + lo + j];
                ok &= !memcmp(xp + (size_t)j * T * I, x + (size_t)(lo + j) * T * I, T * I * sizeof(float));
                ok &= !memcmp(xp + (size_t)(n + j) * T * I, x + (size_t)(B + lo + j) * T * I, T * I * sizeof(float));
            }
        }
    t_check(ok, "a rank's part differs from the whole batch's rows, or leaves another crop stream");
    ct_corpus_free(&c);
}

void suite_speaker(void)
{
    test_batch_parts();
    test_pairs();
    test_unusable();
    test_videos();
    test_task_determinism();
}
