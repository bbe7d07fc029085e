/* test_speaker.c - the siamese LSTM's data pipeline (train/speaker_task.c,
 * io/corpus.c): pair balance and speaker disjointness, the pair sampler (the
 * old draw exactly, O(pairs) a draw), pairs drawn every epoch from (seed,
 * epoch) and --fixed-pairs' single draw, held-out videos,
 * determinism of the background loader, and clear errors for corpora that
 * cannot be split. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "io/corpus.h"
#include "io/trials.h"
#include "train/speaker_task.h"
#include <unistd.h>

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

/* ct_pairs_draw as it was before the pair sampler: the reference that --fixed-pairs
 * reproduces (count, start and list rebuilt on every call). */
static void old_pairs_draw(ct_pair *out, int n, const ct_corpus *c, const int *speakers, int n_speakers, ct_rng *r)
{
    int *count = calloc((size_t)c->n_speakers, sizeof *count), *start = calloc((size_t)c->n_speakers + 1, sizeof *start);
    int *list = malloc((size_t)c->n_utt * sizeof *list), *fill = calloc((size_t)c->n_speakers, sizeof *fill);
    for (int u = 0; u < c->n_utt; u++) count[c->utt[u].speaker]++;
    for (int s = 0; s < c->n_speakers; s++) start[s + 1] = start[s] + count[s];
    for (int u = 0; u < c->n_utt; u++) { int s = c->utt[u].speaker; list[start[s] + fill[s]++] = u; }
    for (int i = 0; i < n; i++) {
        int sa = speakers[ct_rng_below(r, (uint32_t)n_speakers)], sb = sa, same = (i % 2) == 0;
        if (!same) while (sb == sa) sb = speakers[ct_rng_below(r, (uint32_t)n_speakers)];
        int ua = (int)ct_rng_below(r, (uint32_t)count[sa]), ub = (int)ct_rng_below(r, (uint32_t)count[sb]);
        if (same) while (ub == ua) ub = (int)ct_rng_below(r, (uint32_t)count[sb]);
        out[i] = (ct_pair){ list[start[sa] + ua], list[start[sb] + ub], same ? 1.0f : 0.0f };
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)ct_rng_below(r, (uint32_t)i + 1);
        ct_pair t = out[i]; out[i] = out[j]; out[j] = t;
    }
    free(count); free(start); free(list); free(fill);
}

static void test_sampler(void)
{
    t_case("speaker/pair sampler: the old draw exactly; its draws read only the sampler (built once, O(pairs) a draw)");
    ct_corpus c;
    t_check(small_corpus(&c, 20, 5) == CT_OK, "corpus: %s", ct_last_error());
    int spk[15];
    for (int k = 0; k < 15; k++) spk[k] = (k * 7) % 20;
    static ct_pair p[999], q[999], r2[999];
    ct_rng a, b;
    ct_rng_seed(&a, 11, CT_STREAM_DATA);
    b = a;
    old_pairs_draw(p, 999, &c, spk, 15, &a);
    t_check(ct_pairs_draw(q, 999, &c, NULL, spk, 15, &b) == CT_OK, "draw: %s", ct_last_error());
    t_check(!memcmp(p, q, sizeof p) && a.state == b.state, "ct_pairs_draw differs from the old draw, or leaves the stream elsewhere");
    ct_pair_sampler ps;
    ct_rng_seed(&a, 12, CT_STREAM_DATA);
    b = a;
    old_pairs_draw(p, 999, &c, spk, 15, &a);
    t_check(ct_pair_sampler_init(&ps, &c, NULL, spk, 15) == CT_OK, "sampler: %s", ct_last_error());
    ct_corpus_free(&c);   /* a draw must not need the corpus any more */
    ct_pairs_sample(q, 999, &ps, &b);
    ct_pairs_sample(r2, 999, &ps, &b);
    t_check(!memcmp(p, q, sizeof p) && memcmp(q, r2, sizeof q) != 0, "a sampler's draw differs from the old draw, or repeats itself");
    ct_pair_sampler_free(&ps);

    /* VoxCeleb2's shape, 6,000 speakers of 1,000,000 utterances, without features: the sampler
     * groups them once; its draws then never look at the corpus (freed here before drawing), so
     * an epoch's draw costs O(pairs), whatever the corpus's size */
    ct_corpus big = { .n_utt = 1000000, .n_speakers = 6000 };
    big.utt = calloc((size_t)big.n_utt, sizeof *big.utt);
    int *all = malloc(6000 * sizeof *all);
    t_check(big.utt && all, "out of memory");
    if (!big.utt || !all) { free(big.utt); free(all); return; }
    for (int u = 0; u < big.n_utt; u++) big.utt[u].speaker = (int)((long)u * 6000 / big.n_utt);
    for (int k = 0; k < 6000; k++) all[k] = k;
    ct_status st = ct_pair_sampler_init(&ps, &big, NULL, all, 6000);
    t_check(st == CT_OK, "sampler over 1M utterances: %s", ct_last_error());
    ct_utt *kept = big.utt;   /* the speakers, for checking the pairs; the corpus itself is gone */
    big.utt = NULL;
    static ct_pair many[10000];
    for (int rep = 0; st == CT_OK && rep < 5; rep++) ct_pairs_sample(many, 10000, &ps, &b);
    int bad = 0;
    for (int i = 0; st == CT_OK && i < 10000; i++)
        bad += (many[i].y == 1.0f) != (kept[many[i].a].speaker == kept[many[i].b].speaker) || many[i].a == many[i].b;
    t_check(bad == 0, "%d of 10,000 pairs wrong", bad);
    ct_pair_sampler_free(&ps);
    free(kept);
    free(all);
}

/* A speaker task over a 12-speaker corpus (no training): for looking at its pairs. */
static ct_status pairs_task(speaker_task *s, ct_corpus *c, siamese_lstm *m, int fixed, uint64_t seed)
{
    siamese_lstm_config mc = ct_siamese_lstm_defaults();
    mc.n_mels = 6; mc.frames = 10; mc.hidden = 8; mc.embed = 4;
    ct_rngs rngs;
    ct_rngs_seed(&rngs, seed);
    speaker_task_config tc = { .pairs = 200, .val_pairs = 40, .batch = 16, .val_split = CT_VAL_SPEAKERS, .val_fraction = 0.25,
                               .seed = seed, .fixed_pairs = fixed };
    CT_TRY(ct_siamese_lstm_build(m, &mc));
    speaker_model sm = ct_speaker_model_lstm(m);
    return ct_speaker_task_init(s, &tc, c, &sm, &rngs, NULL);
}

static void test_epoch_pairs(void)
{
    t_case("speaker/pairs every epoch: new ones each epoch, a function of (seed, epoch) only; --fixed-pairs: one draw, reshuffled");
    ct_corpus c;
    t_check(small_corpus(&c, 12, 6) == CT_OK, "corpus: %s", ct_last_error());
    siamese_lstm m1, m2;
    speaker_task a, b;
    t_check(pairs_task(&a, &c, &m1, 0, 7) == CT_OK && pairs_task(&b, &c, &m2, 0, 7) == CT_OK, "tasks: %s", ct_last_error());
    ct_task ta = ct_speaker_task_ops(&a), tb = ct_speaker_task_ops(&b);
    static ct_pair e[3][200], val0[40];
    memcpy(val0, a.pairs[1], sizeof val0);
    int same_speaker = 0, train_only = 1;
    unsigned char is_train[12] = { 0 };
    for (int k = 0; k < a.sampler.n_speakers; k++) is_train[a.sampler.speakers[k]] = 1;
    for (int ep = 0; ep < 3; ep++) {
        ta.begin_epoch(ta.ctx, ep);
        memcpy(e[ep], a.pairs[0], sizeof e[ep]);
        for (int i = 0; i < 200; i++) {
            same_speaker += e[ep][i].y == 1.0f;
            train_only &= is_train[c.utt[e[ep][i].a].speaker] && is_train[c.utt[e[ep][i].b].speaker];
        }
    }
    t_check(memcmp(e[0], e[1], sizeof e[0]) != 0 && memcmp(e[1], e[2], sizeof e[1]) != 0, "an epoch repeated the pairs of the one before");
    t_check(same_speaker == 300 && train_only, "%d of 600 pairs same-speaker (want 300), or a pair outside the training speakers", same_speaker);
    t_check(!memcmp(val0, a.pairs[1], sizeof val0), "the validation pairs changed between epochs");
    tb.begin_epoch(tb.ctx, 2);   /* straight to epoch 2: the same pairs as after epochs 0 and 1 */
    t_check(!memcmp(e[2], b.pairs[0], sizeof e[2]), "epoch 2's pairs depend on the epochs before it");
    tb.begin_epoch(tb.ctx, 0);
    t_check(!memcmp(e[0], b.pairs[0], sizeof e[0]), "epoch 0's pairs, drawn again, differ");
    ct_speaker_task_free(&b);
    ct_siamese_lstm_free(&m2);
    t_check(pairs_task(&b, &c, &m2, 0, 8) == CT_OK, "task: %s", ct_last_error());
    tb = ct_speaker_task_ops(&b);
    tb.begin_epoch(tb.ctx, 0);
    t_check(memcmp(e[0], b.pairs[0], sizeof e[0]) != 0, "seeds 7 and 8 drew the same pairs");
    ct_speaker_task_free(&a); ct_speaker_task_free(&b);
    ct_siamese_lstm_free(&m1); ct_siamese_lstm_free(&m2);

    /* --fixed-pairs: after the split, the old draw from the data stream, then only the order changes */
    ct_rngs rngs;
    ct_rngs_seed(&rngs, 7);
    int tr[12], va[12], ntr, nva;
    t_check(ct_corpus_split(tr, &ntr, va, &nva, &c, 0.25, &rngs.data) == CT_OK, "split");
    static ct_pair want[200];
    old_pairs_draw(want, 200, &c, tr, ntr, &rngs.data);
    t_check(pairs_task(&a, &c, &m1, 1, 7) == CT_OK, "task: %s", ct_last_error());
    ta = ct_speaker_task_ops(&a);
    t_check(!memcmp(want, a.pairs[0], sizeof want), "--fixed-pairs: the pairs are not the old draw's");
    int order0[200];
    memcpy(order0, a.order, sizeof order0);
    ta.begin_epoch(ta.ctx, 0);
    ta.begin_epoch(ta.ctx, 1);
    t_check(!memcmp(want, a.pairs[0], sizeof want) && memcmp(order0, a.order, sizeof order0) != 0,
            "--fixed-pairs: the pairs changed, or their order did not");
    ct_speaker_task_free(&a);
    ct_siamese_lstm_free(&m1);
    ct_corpus_free(&c);
}

static void test_excluded(void)
{
    t_case("speaker/excluded speakers (a test list's): in no training pair of any epoch, no validation pair, not recorded");
    ct_corpus c;
    t_check(small_corpus(&c, 12, 6) == CT_OK, "corpus: %s", ct_last_error());
    c.speaker_name = calloc(12, sizeof *c.speaker_name);
    for (int k = 0; k < 12; k++) { char b[16]; snprintf(b, sizeof b, "id1%04d", k); c.speaker_name[k] = strdup(b); }
    char path[] = "/tmp/ctrain_excl_trials_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f) { fputs("1 id10002/v/00001.wav id10002/v/00002.wav\n0 id10005/v/00001.wav id10011/w/00003.wav\n"
                   "0 id10005/v/00001.wav id19999/x/00001.wav\n", f); fclose(f); }
    unsigned char named[12];
    int n_named = -1;
    t_check(ct_trials_speakers(named, &n_named, path, &c) == CT_OK && n_named == 3 && named[2] && named[5] && named[11],
            "the list names id10002, id10005, id10011 (and id19999, not in the corpus): %d named: %s", n_named, ct_last_error());
    unlink(path);
    for (int split = 0; split < 2; split++) {
        if (split == CT_VAL_VIDEOS) {
            c.video = malloc((size_t)c.n_utt * sizeof *c.video);
            for (int u = 0; u < c.n_utt; u++) c.video[u] = c.utt[u].speaker * 2 + (u % 2);
        }
        siamese_lstm_config mc = ct_siamese_lstm_defaults();
        mc.n_mels = 6; mc.frames = 10; mc.hidden = 8; mc.embed = 4;
        siamese_lstm m;
        speaker_task s;
        ct_rngs rngs;
        ct_rngs_seed(&rngs, 5);
        speaker_task_config tc = { .pairs = 300, .val_pairs = 100, .batch = 16, .val_split = (ct_val_split)split,
                                   .val_fraction = 0.25, .seed = 5, .excluded = named };
        t_check(ct_siamese_lstm_build(&m, &mc) == CT_OK, "build");
        speaker_model sm = ct_speaker_model_lstm(&m);
        t_check(ct_speaker_task_init(&s, &tc, &c, &sm, &rngs, NULL) == CT_OK, "task: %s", ct_last_error());
        ct_task t = ct_speaker_task_ops(&s);
        int bad = 0, seen[12] = { 0 };
        for (int ep = 0; ep < 3; ep++) {
            t.begin_epoch(t.ctx, ep);
            for (int i = 0; i < 300; i++) {
                int sa = c.utt[s.pairs[0][i].a].speaker, sb = c.utt[s.pairs[0][i].b].speaker;
                bad += named[sa] + named[sb];
                seen[sa] = seen[sb] = 1;
            }
        }
        for (int i = 0; i < 100; i++) bad += named[c.utt[s.pairs[1][i].a].speaker] + named[c.utt[s.pairs[1][i].b].speaker];
        int listed_ok = s.train_names != NULL && s.n_train_speakers == (split == CT_VAL_SPEAKERS ? 7 : 9);
        for (int k = 0; listed_ok && k < s.n_train_speakers; k++) {
            int id = atoi(s.train_names[k] + 3);
            listed_ok = !named[id] && seen[id] && !strcmp(s.train_names[k], c.speaker_name[s.sampler.speakers[k]]);
        }
        t_check(bad == 0, "split %d: %d pair sides on an excluded speaker", split, bad);
        t_check(listed_ok, "split %d: the recorded names are not the %d training speakers (%d recorded)", split,
                split == CT_VAL_SPEAKERS ? 7 : 9, s.n_train_speakers);
        ct_speaker_task_free(&s);
        ct_siamese_lstm_free(&m);
    }
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
    test_sampler();
    test_epoch_pairs();
    test_excluded();
    test_unusable();
    test_videos();
    test_task_determinism();
}
