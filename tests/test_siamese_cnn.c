/* test_siamese_cnn.c - the CNN speaker encoder (models/siamese_cnn.h) as a
 * whole model and through the command line:
 *   - PyTorch parity of ONE full training step (tests/golden/siamese_cnn_step.h5
 *     from gen_siamese_cnn.py): embeddings, distances, loss, every parameter
 *     gradient, the batchnorm running statistics (over both towers' 2B crops) and
 *     every parameter after one RMSprop step;
 *   - a finite-difference check of d loss / d every parameter;
 *   - embedding whole utterances by windows (train/verify.h): the window count,
 *     and ct_embed_utterances against the mean of each window embedded alone;
 *   - a short training run on synthetic speakers that must clear a stated
 *     held-out pair accuracy, and is bit-identical with the same seed;
 *   - `ctrain train siamese-cnn` / `ctrain eval siamese-cnn` on a feature store:
 *     checkpoint + resume == one run, eval prints the library's EER, files and
 *     checkpoints of the other speaker model are refused with a clear message,
 *     an export imported back is exact, bad --arch / --embed are explained.
 * The command-line cases run $CTRAIN_BIN (default bin/ctrain). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "tests/test.h"
#include "core/interrupt.h"
#include "io/corpus.h"
#include "io/featstore.h"
#include "io/h5.h"
#include "io/trials.h"
#include "io/weights.h"
#include "layers/optim.h"
#include "models/siamese_cnn.h"
#include "models/speaker_model.h"
#include "train/verify.h"

/* Tolerances (normalised max error, see tests/test.h).
 * Parity: float32 in both, sums in another order (sgemm vs ATen); every
 * gradient is held to SCNN_PAR_TOL of the model's largest gradient (as in
 * test_cnn.c). Three gradients are exactly zero by construction (each conv bias
 * is removed by the batchnorm after it, the dense bias cancels in emb_a - emb_b)
 * and hold only rounding noise; RMSprop turns noise into a full step of +-lr
 * times its sign, so their `after` values are not compared - their gradients
 * must be below SCNN_ZERO_GRAD of the largest one, in torch and here.
 * Finite differences: h = 2e-3 on a float32 loss of ~0.2, through relu and
 * max-pool kinks; tolerance 2e-3 as the other whole-model checks. Window
 * embeddings: the same float computation in another batch size, 1e-5. */
#define SCNN_PAR_TOL    1e-5
#define SCNN_STEP_TOL   1e-6
#define SCNN_ZERO_GRAD  1e-6
#define SCNN_GC_H       2e-3f
#define SCNN_GC_TOL     2e-3
#define SCNN_EMB_TOL    1e-5

/* ---- PyTorch parity of one training step ---- */
#define GOLDEN_SPEC "conv3k3p1,batchnorm,relu,maxpool2,conv4k3p1,batchnorm,relu,gaph,dense5"   /* gen_siamese_cnn.py's */

static void load_into(ct_params *ps, hid_t f, const char *group)
{
    char name[160];
    for (int i = 0; i < ps->n; i++) {
        snprintf(name, sizeof name, "%s/%s", group, ps->p[i].name);
        float *v = t_golden(f, name, ps->p[i].numel);
        memcpy(ct_params_data(ps, i), v, ps->p[i].numel * sizeof *v);
        free(v);
    }
}

static double max_abs(const float *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
    return m;
}

static void test_parity(void)
{
    t_case("siamese_cnn/parity torch: one training step + RMSprop (siamese_cnn_step.h5)");
    hid_t f = t_golden_open("siamese_cnn_step.h5");
    if (f < 0) return;
    int B = (int)t_golden_attr(f, "B"), T = (int)t_golden_attr(f, "T"), I = (int)t_golden_attr(f, "I");
    float lr = (float)t_golden_attr(f, "lr");
    siamese_cnn_config cfg = ct_siamese_cnn_defaults();
    cfg.n_mels = I; cfg.frames = T; cfg.embed = 0; cfg.margin = (float)t_golden_attr(f, "margin");
    snprintf(cfg.spec, sizeof cfg.spec, "%s", GOLDEN_SPEC);
    siamese_cnn m;
    if (!t_check(ct_siamese_cnn_build(&m, &cfg) == CT_OK && ct_siamese_cnn_plan(&m, B) == CT_OK, "build: %s", ct_last_error())) {
        ct_h5_close(f); return;
    }
    ct_rng r;
    ct_rng_seed(&r, 1, 1);
    ct_siamese_cnn_init_weights(&m, &r);        /* running mean 0, var 1; the weights come from the file */
    ct_params *P = &m.enc.params;
    load_into(P, f, "init");
    int D = m.cfg.embed;
    float *x = t_golden(f, "x", (size_t)2 * B * T * I), *y = t_golden(f, "y", (size_t)B);
    float *emb_ref = t_golden(f, "emb", (size_t)2 * B * D), *dist_ref = t_golden(f, "dist", (size_t)B);
    float *loss_ref = t_golden(f, "loss", 1);
    ct_params_zero_grad(P);
    float loss = ct_siamese_cnn_forward(&m, x, y, B, 1, NULL, NULL);
    t_close("loss", &loss, loss_ref, 1, SCNN_PAR_TOL);
    t_close("embeddings [2B, D]", m.enc.logits, emb_ref, (size_t)2 * B * D, SCNN_PAR_TOL);
    t_close("distances [B]", m.head.dist, dist_ref, (size_t)B, SCNN_PAR_TOL);
    ct_siamese_cnn_backward(&m, x, y, B);

    char name[160];
    float *gref[32] = { 0 };
    double gmax = 0;
    for (int i = 0; i < P->n && i < 32; i++) {
        snprintf(name, sizeof name, "grad/%s", P->p[i].name);
        gref[i] = t_golden(f, name, P->p[i].numel);
        gmax = fmax(gmax, max_abs(gref[i], P->p[i].numel));
    }
    int zero_by_construction[32] = { 0 };
    for (int i = 0; i < P->n && i < 32; i++) {
        size_t n = P->p[i].numel;
        double ref = max_abs(gref[i], n), got = max_abs(ct_params_grad(P, i), n);
        if (ref < SCNN_ZERO_GRAD * gmax) {   /* a conv bias before batchnorm, the dense bias before the distance */
            zero_by_construction[i] = 1;
            t_check(got < SCNN_ZERO_GRAD * gmax, "%s: gradient %g should be zero (torch: %g)", P->p[i].name, got, ref);
            continue;
        }
        snprintf(name, sizeof name, "grad/%s", P->p[i].name);
        t_close(name, ct_params_grad(P, i), gref[i], n, SCNN_PAR_TOL * (gmax / ref));
    }
    int n_zero = 0;
    for (int i = 0; i < P->n && i < 32; i++) { n_zero += zero_by_construction[i]; free(gref[i]); }
    t_check(n_zero == 3, "%d gradients are zero by construction, expected 3 (two conv biases, the dense bias)", n_zero);
    for (int i = 0; i < m.enc.buffers.n; i++) {
        snprintf(name, sizeof name, "buffers/%s", m.enc.buffers.p[i].name);
        float *v = t_golden(f, name, m.enc.buffers.p[i].numel);
        t_close(name, ct_params_data(&m.enc.buffers, i), v, m.enc.buffers.p[i].numel, SCNN_PAR_TOL);
        free(v);
    }
    ct_optim_config oc = ct_optim_defaults(OPT_RMSPROP);   /* rho 0.9, eps 1e-7: torch's alpha, eps */
    oc.lr = lr;
    ct_optim o;
    if (t_check(ct_optim_init(&o, &oc, P->numel) == CT_OK, "optim: %s", ct_last_error())) {
        ct_optim_step(&o, P->data, P->grad, lr);
        for (int i = 0; i < P->n && i < 32; i++) {
            if (zero_by_construction[i]) continue;
            snprintf(name, sizeof name, "after/%s", P->p[i].name);
            float *v = t_golden(f, name, P->p[i].numel);
            t_close(name, ct_params_data(P, i), v, P->p[i].numel, SCNN_STEP_TOL);
            free(v);
        }
        ct_optim_free(&o);
    }
    free(x); free(y); free(emb_ref); free(dist_ref); free(loss_ref);
    ct_h5_close(f);
    ct_siamese_cnn_free(&m);
}

/* ---- finite differences over every parameter ---- */
typedef struct { siamese_cnn *m; const float *x, *y; int B; } loss_ctx;

static double loss_of(void *p)
{
    loss_ctx *c = p;
    return ct_siamese_cnn_forward(c->m, c->x, c->y, c->B, 1, NULL, NULL);
}

static void test_gradcheck(void)
{
    const char *spec = "conv3k3p1,batchnorm,relu,maxpool2,conv4k3s2p1,batchnorm,tanh,gaph,dense4";
    t_case("siamese_cnn/gradcheck every parameter (%s, B=3 pairs, 9x7 crops, margin 2)", spec);
    siamese_cnn_config cfg = ct_siamese_cnn_defaults();
    cfg.n_mels = 7; cfg.frames = 9; cfg.embed = 4; cfg.margin = 2.0f;
    snprintf(cfg.spec, sizeof cfg.spec, "%s", spec);
    siamese_cnn m;
    if (!t_check(ct_siamese_cnn_build(&m, &cfg) == CT_OK && ct_siamese_cnn_plan(&m, 3) == CT_OK, "build: %s", ct_last_error())) return;
    ct_rng r;
    ct_rng_seed(&r, 41, 1);
    ct_siamese_cnn_init_weights(&m, &r);
    ct_params *P = &m.enc.params;
    for (int i = 0; i < P->n; i++)   /* batchnorm gamma/beta away from 1/0, so every path is exercised */
        if (strstr(P->p[i].name, "batchnorm")) t_fill_uniform(ct_params_data(P, i), P->p[i].numel, 0.5f, 1.5f, &r);
    int B = 3;
    float x[2 * 3 * 9 * 7], y[3] = { 1, 0, 0 };
    t_fill_uniform(x, sizeof x / sizeof *x, -1, 1, &r);
    loss_ctx c = { &m, x, y, B };
    ct_params_zero_grad(P);
    ct_siamese_cnn_forward(&m, x, y, B, 1, NULL, NULL);
    ct_siamese_cnn_backward(&m, x, y, B);
    t_check(m.head.dist[1] < cfg.margin && m.head.dist[2] < cfg.margin, "different-speaker distances %g, %g should be inside "
            "the margin, so its hinge is checked too", m.head.dist[1], m.head.dist[2]);
    double *num = calloc(P->numel, sizeof *num);
    float *ana = t_alloc(P->numel), *g = t_alloc(P->numel);
    memcpy(g, P->grad, P->numel * sizeof *g);
    size_t k = 0;
    for (int i = 0; i < P->n; i++)
        for (size_t j = 0; j < P->p[i].numel; j++, k++) {
            float *v = P->data + P->p[i].offset + j, saved = *v;
            *v = saved + SCNN_GC_H; double fp = loss_of(&c);
            *v = saved - SCNN_GC_H; double fm = loss_of(&c);
            *v = saved;
            num[k] = (fp - fm) / (((double)(saved + SCNN_GC_H) - saved) + (saved - (double)(saved - SCNN_GC_H)));
            ana[k] = g[P->p[i].offset + j];
        }
    t_close_d("d loss / d every parameter", ana, num, k, SCNN_GC_TOL);
    free(num); free(ana); free(g);
    ct_siamese_cnn_free(&m);
}

/* ---- window-averaged utterance embeddings ---- */
static void test_windows(void)
{
    t_case("siamese_cnn/windows per utterance: hop T/2, the last one at the end, a short utterance is one");
    struct { int frames, T, want; } w[] = { { 7, 10, 1 }, { 10, 10, 1 }, { 11, 10, 2 }, { 15, 10, 2 }, { 16, 10, 3 },
                                           { 20, 10, 3 }, { 3, 1, 3 }, { 5, 2, 4 } };
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        t_check(ct_utt_windows(w[i].frames, w[i].T) == w[i].want, "%d frames, T = %d: %d windows, want %d",
                w[i].frames, w[i].T, ct_utt_windows(w[i].frames, w[i].T), w[i].want);

    t_case("siamese_cnn/embedding an utterance = the mean of its windows embedded alone (batchnorm running statistics)");
    ct_synth_config sc = { .speakers = 4, .utts_per_speaker = 3, .min_frames = 4, .max_frames = 37, .n_mels = 5,
                           .noise = 1.0f, .seed = 7 };
    ct_corpus c;
    if (!t_check(ct_corpus_synthetic(&c, &sc) == CT_OK, "corpus: %s", ct_last_error())) return;
    siamese_cnn_config cfg = ct_siamese_cnn_defaults();
    cfg.n_mels = 5; cfg.frames = 10; cfg.embed = 6;
    snprintf(cfg.spec, sizeof cfg.spec, "conv4k3p1,batchnorm,relu,maxpool2,gaph,dense6");
    siamese_cnn m;
    if (!t_check(ct_siamese_cnn_build(&m, &cfg) == CT_OK && ct_siamese_cnn_plan(&m, 4) == CT_OK, "build: %s", ct_last_error())) {
        ct_corpus_free(&c); return;
    }
    ct_rng r;
    ct_rng_seed(&r, 8, 1);
    ct_siamese_cnn_init_weights(&m, &r);
    float xb[8 * 10 * 5], yb[4] = { 1, 0, 1, 0 };
    t_fill_uniform(xb, sizeof xb / sizeof *xb, -2, 3, &r);
    ct_siamese_cnn_forward(&m, xb, yb, 4, 1, NULL, NULL);   /* running statistics away from their 0/1 start */
    int n = c.n_utt, utts[12], short_ones = 0, long_ones = 0, max_frames = 30;
    for (int u = 0; u < n; u++) {
        utts[u] = n - 1 - u;   /* any order */
        short_ones += c.utt[u].frames < 10;
        long_ones += c.utt[u].frames > max_frames;
    }
    t_check(short_ones > 0 && long_ones > 0, "the corpus should hold utterances shorter than a window (%d) and longer than "
            "max_frames (%d)", short_ones, long_ones);
    speaker_model sm = ct_speaker_model_cnn(&m);
    float *emb3 = t_alloc((size_t)n * 6), *emb1 = t_alloc((size_t)n * 6);
    double *ref = calloc((size_t)n * 6, sizeof *ref);
    int used = 0;
    t_check(ct_embed_utterances(&sm, &c, utts, n, 3, max_frames, emb3, &used) == CT_OK && used == 3, "embed (batch 3): %s",
            ct_last_error());
    t_check(ct_embed_utterances(&sm, &c, utts, n, 1, max_frames, emb1, &used) == CT_OK && used == 1, "embed (batch 1): %s",
            ct_last_error());
    /* the direct computation: every window cut out by hand, embedded alone, averaged in double */
    float win[10 * 5], e[6];
    for (int k = 0; k < n; k++) {
        const ct_utt *u = &c.utt[utts[k]];
        int f = u->frames < max_frames ? u->frames : max_frames, nw = 0;
        for (int start = 0;; start += 5) {
            int s0 = start + 10 > f ? (f > 10 ? f - 10 : 0) : start, len = f < 10 ? f : 10;
            memset(win, 0, sizeof win);
            memcpy(win, c.feats + u->offset + (size_t)s0 * 5, (size_t)len * 5 * sizeof *win);
            ct_siamese_cnn_embed(&m, e, win, 1);
            for (int d = 0; d < 6; d++) ref[k * 6 + d] += e[d];
            nw++;
            if (s0 + 10 >= f) break;
        }
        t_check(nw == ct_utt_windows(f, 10), "utterance %d (%d frames): %d windows by hand, %d by ct_utt_windows",
                utts[k], f, nw, ct_utt_windows(f, 10));
        for (int d = 0; d < 6; d++) ref[k * 6 + d] /= nw;
    }
    t_close_d("windows averaged, batch 3", emb3, ref, (size_t)n * 6, SCNN_EMB_TOL);
    t_close_d("windows averaged, batch 1", emb1, ref, (size_t)n * 6, SCNN_EMB_TOL);
    t_check(ct_embed_utterances(&sm, &c, utts, n, 3, 0, emb3, NULL) == CT_EINVAL, "max_frames 0 must be refused");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {   /* a child: the signal flag stays set for good */
        ct_interrupt_install();
        raise(SIGTERM);
        _exit(ct_embed_utterances(&sm, &c, utts, n, 3, max_frames, emb3, NULL) == CT_EINTR ? 0 : 1);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    t_check(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "a SIGTERM should stop the windows' embedding with CT_EINTR (status %d)", ws);
    free(emb3); free(emb1); free(ref);
    ct_siamese_cnn_free(&m);
    ct_corpus_free(&c);
}

/* ---- a short training run ---- */
/* B pairs of the given speakers, half same-speaker, as crops x [2B, T, I] and labels y [B]. */
static void draw_batch(float *x, float *y, int B, const ct_corpus *c, const int *spk, int n_spk, int T, ct_rng *r)
{
    ct_pair p[64];
    int len[128];
    CT_ASSERT(B <= 64);
    ct_pairs_draw(p, B, c, NULL, spk, n_spk, r);
    ct_pairs_batch(x, len, y, p, B, c, T, r);
}

/* Trains a small siamese CNN with RMSprop on synthetic speakers; returns the last
 * batch loss and the held-out pair accuracy (evaluation mode); copies the weights
 * and running statistics to out [*nout] if out is not NULL. */
static void cnn_train(int steps, float *final_loss, float *val_acc, float *out, size_t *nout)
{
    siamese_cnn_config cfg = ct_siamese_cnn_defaults();
    cfg.n_mels = 8; cfg.frames = 20; cfg.embed = 8;
    snprintf(cfg.spec, sizeof cfg.spec, "conv8k3p1,batchnorm,relu,conv16k3p1,batchnorm,relu,gaph,dense8");
    ct_synth_config sc = { .speakers = 16, .utts_per_speaker = 6, .min_frames = 20, .max_frames = 30,
                           .n_mels = 8, .noise = 0.5f, .seed = 11 };
    ct_corpus corpus;
    siamese_cnn m;
    int B = 32, spk_tr[16], spk_va[16], ntr, nva;
    ct_rngs rngs;
    ct_rngs_seed(&rngs, 11);
    t_check(ct_corpus_synthetic(&corpus, &sc) == CT_OK, "corpus: %s", ct_last_error());
    t_check(ct_corpus_split(spk_tr, &ntr, spk_va, &nva, &corpus, 0.25, &rngs.data) == CT_OK, "split");
    t_check(ct_siamese_cnn_build(&m, &cfg) == CT_OK && ct_siamese_cnn_plan(&m, B) == CT_OK, "build: %s", ct_last_error());
    ct_siamese_cnn_init_weights(&m, &rngs.init);
    ct_optim_config oc = ct_optim_defaults(OPT_RMSPROP);
    oc.lr = 3e-3f;
    ct_optim opt;
    t_check(ct_optim_init(&opt, &oc, m.enc.params.numel) == CT_OK, "optim");
    size_t crop = (size_t)cfg.frames * cfg.n_mels;
    float *x = t_alloc(2 * (size_t)B * crop), y[32];   /* [2B, T, I], [B] */
    float loss = 0;
    for (int s = 0; s < steps; s++) {
        draw_batch(x, y, B, &corpus, spk_tr, ntr, cfg.frames, &rngs.data);
        ct_params_zero_grad(&m.enc.params);
        loss = ct_siamese_cnn_forward(&m, x, y, B, 1, &rngs.dropout, NULL);
        ct_siamese_cnn_backward(&m, x, y, B);
        ct_optim_step(&opt, m.enc.params.data, m.enc.params.grad, oc.lr);
    }
    int correct = 0, total = 0;
    for (int k = 0; k < 8; k++, total += B) {   /* held-out speakers, evaluation mode */
        int right = 0;
        draw_batch(x, y, B, &corpus, spk_va, nva, cfg.frames, &rngs.data);
        ct_siamese_cnn_forward(&m, x, y, B, 0, NULL, &right);
        correct += right;
    }
    *final_loss = loss;
    *val_acc = (float)correct / total;
    if (out) {
        memcpy(out, m.enc.params.data, m.enc.params.numel * sizeof *out);
        memcpy(out + m.enc.params.numel, m.enc.buffers.data, m.enc.buffers.numel * sizeof *out);
        *nout = m.enc.params.numel + m.enc.buffers.numel;
    }
    free(x);
    ct_optim_free(&opt);
    ct_siamese_cnn_free(&m);
    ct_corpus_free(&corpus);
}

static void test_trains(void)
{
    /* Chance: accuracy 0.5. Measured with seed 11: after 200 steps the batch loss
     * is 0.013 and the held-out accuracy 0.906 (256 pairs of 4 unseen speakers,
     * batchnorm in evaluation mode). The thresholds leave room for another BLAS
     * summation order, not for a broken model. */
    t_case("siamese_cnn/trains on synthetic speakers (200 steps: loss < 0.10, held-out accuracy > 0.85)");
    float loss, acc;
    cnn_train(200, &loss, &acc, NULL, NULL);
    printf("  final batch loss %.4f, held-out pair accuracy %.4f\n", loss, acc);
    t_check(loss < 0.10f, "loss %.4f not below 0.10", loss);
    t_check(acc > 0.85f, "held-out accuracy %.4f not above 0.85", acc);

    t_case("siamese_cnn/same seed gives bit-identical weights and running statistics");
    float *w1 = t_alloc(100000), *w2 = t_alloc(100000);
    size_t n1 = 0, n2 = 0;
    cnn_train(20, &loss, &acc, w1, &n1);
    cnn_train(20, &loss, &acc, w2, &n2);
    t_check(n1 == n2 && n1 > 0 && memcmp(w1, w2, n1 * sizeof *w1) == 0, "two runs with seed 11 differ");
    free(w1); free(w2);
}

/* ---- the command line ---- */
static char tdir[64];

/* dst = tdir/name */
static const char *in_tdir(char *dst, size_t cap, const char *name)
{
    snprintf(dst, cap, "%s/%s", tdir, name);
    return dst;
}

/* A feature store of 12 synthetic speakers (6 utterances each, 14-40 frames of 6
 * mels) and a trial list over the last 4 of them; returns 0 on failure. */
static int make_store(const char *feats, const char *trials)
{
    ct_synth_config sc = { .speakers = 12, .utts_per_speaker = 6, .min_frames = 14, .max_frames = 40, .n_mels = 6,
                           .noise = 1.0f, .seed = 5 };
    ct_corpus c;
    if (!t_check(ct_corpus_synthetic(&c, &sc) == CT_OK, "corpus: %s", ct_last_error())) return 0;
    ct_featstore *w = NULL;
    ct_status st = ct_featstore_open(&w, feats, c.n_mels);
    FILE *tf = fopen(trials, "w");
    char path[96], spk[32], vid[32];
    for (int u = 0; st == CT_OK && u < c.n_utt; u++) {
        int s = c.utt[u].speaker, k = u % 6;
        snprintf(spk, sizeof spk, "id2%04d", s);
        snprintf(vid, sizeof vid, "v%d", k / 3);
        snprintf(path, sizeof path, "%s/%s/%05d.wav", spk, vid, k + 1);
        st = ct_featstore_append(w, path, spk, vid, c.feats + c.utt[u].offset, c.utt[u].frames);
    }
    if (w && ct_featstore_close(w) != CT_OK && st == CT_OK) st = CT_EIO;
    /* trials: utterance k of a speaker against utterance k' of the same (1) or the next speaker (0) */
    for (int s = 8; tf && s < 12; s++)
        for (int k = 0; k < 6; k++)
            for (int j = k + 1; j < 6; j++) {
                fprintf(tf, "1 id2%04d/v%d/%05d.wav id2%04d/v%d/%05d.wav\n", s, k / 3, k + 1, s, j / 3, j + 1);
                int o = s == 11 ? 8 : s + 1;
                fprintf(tf, "0 id2%04d/v%d/%05d.wav id2%04d/v%d/%05d.wav\n", s, k / 3, k + 1, o, j / 3, j + 1);
            }
    if (tf) fclose(tf);
    ct_corpus_free(&c);
    return t_check(st == CT_OK && tf != NULL, "feature store / trial list: %s", ct_last_error());
}

/* The per-epoch log lines of a run, with the seconds and the time per step masked
 * (" - 0.8s - 12ms/step - loss: ..." -> " - X - loss: ..."). */
static void epoch_lines(const char *out, char *dst, size_t n)
{
    dst[0] = '\0';
    for (const char *p = strstr(out, "\n - "); p; p = strstr(p + 1, "\n - ")) {
        const char *e = strchr(p + 1, '\n'), *q = strstr(p + 1, " - loss: ");
        if (!q || (e && q > e)) continue;
        size_t used = strlen(dst), len = e ? (size_t)(e - q) : strlen(q);
        snprintf(dst + used, n - used, " - X%.*s\n", (int)len, q);
    }
}

/* Loads a siamese-cnn weights file into a fresh model (the spec from the file's "arch"). */
static int load_weights(siamese_cnn *m, const char *path, const char *spec, int frames, int mels)
{
    siamese_cnn_config cfg = ct_siamese_cnn_defaults();
    cfg.n_mels = mels; cfg.frames = frames; cfg.embed = 0;
    snprintf(cfg.spec, sizeof cfg.spec, "%s", spec);
    return t_check(ct_siamese_cnn_build(m, &cfg) == CT_OK
                   && ct_weights_load(path, "siamese-cnn", &m->enc.params, &m->enc.buffers) == CT_OK,
                   "load %s: %s", path, ct_last_error());
}

/* Every tensor of a equal bit for bit to b's (the padding between them is not compared). */
static int same_tensors(const ct_params *a, const ct_params *b)
{
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->p[i].numel != b->p[i].numel
            || memcmp(a->data + a->p[i].offset, b->data + b->p[i].offset, a->p[i].numel * sizeof(float)) != 0) return 0;
    return 1;
}

#define CLI_SPEC "conv4k3p1,batchnorm,relu,maxpool2,conv8k3p1,batchnorm,relu,gaph,dense6"

static void test_cli(void)
{
    static char out1[1 << 16], out2[1 << 16], out3[1 << 16], la[8192], lb[8192];
    char args[2048], base[1024];
    snprintf(tdir, sizeof tdir, "/tmp/ctrain_scnn_XXXXXX");
    if (!t_check(mkdtemp(tdir) != NULL, "mkdtemp failed")) return;
    t_case("siamese_cnn/cli: help, bad --arch and --embed give clear errors");
    int rc = t_run_ctrain("train siamese-cnn --help", out1, sizeof out1);
    t_check(rc == 0 && strstr(out1, "--arch") && strstr(out1, "gaph") && strstr(out1, "--trials"), "help (exit %d): %s", rc, out1);
    rc = t_run_ctrain("train --help", out1, sizeof out1);
    t_check(rc == 0 && strstr(out1, "siamese-cnn"), "train --help lists siamese-cnn (exit %d): %s", rc, out1);
    rc = t_run_ctrain("train siamese-cnn --arch conv4k3,relu --frames 10 --mels 6 --speakers 8 --utts 4 --threads 1", out1, sizeof out1);
    t_check(rc > 0 && rc != 134 && strstr(out1, "must end in a flat embedding"), "non-flat spec (exit %d): %s", rc, out1);
    rc = t_run_ctrain("train siamese-cnn --arch conv4k3,gaph,dense6 --embed 5 --frames 10 --mels 6 --speakers 8 --utts 4 --threads 1",
                      out1, sizeof out1);
    t_check(rc > 0 && rc != 134 && strstr(out1, "--embed 5") && strstr(out1, "dense5"), "embed mismatch (exit %d): %s", rc, out1);
    rc = t_run_ctrain("train siamese-cnn --arch conv4k3,gapx,dense6 --frames 10 --mels 6 --threads 1", out1, sizeof out1);
    t_check(rc > 0 && rc != 134 && strstr(out1, "layer 2 \"gapx\""), "unknown layer (exit %d): %s", rc, out1);

    char feats[256], trials[256], one[256], part[256], resumed[256], lstm_ck[256], lstm[256], exported[256];
    in_tdir(feats, sizeof feats, "feats.h5"); in_tdir(trials, sizeof trials, "trials.txt");
    in_tdir(one, sizeof one, "one.h5"); in_tdir(part, sizeof part, "part.h5"); in_tdir(resumed, sizeof resumed, "resumed.h5");
    in_tdir(lstm_ck, sizeof lstm_ck, "lstm_ck.h5"); in_tdir(lstm, sizeof lstm, "lstm.h5");
    in_tdir(exported, sizeof exported, "export.h5");
    if (!make_store(feats, trials)) return;
    snprintf(base, sizeof base, "train siamese-cnn --data %s --trials %s --arch " CLI_SPEC " --frames 16 --mels 6 "
             "--pairs 96 --val-pairs 32 --batch 16 --threads 1 --no-progress --lr 3e-3", feats, trials);

    t_case("siamese_cnn/cli: train with --trials prints val_eer; stop after 1 epoch + resume == one run");
    snprintf(args, sizeof args, "%s --epochs 3 --out %s", base, one);
    rc = t_run_ctrain(args, out1, sizeof out1);
    t_check(rc == 0 && strstr(out1, "Model: siamese-cnn 16x6") && strstr(out1, "Epoch 3/3") && strstr(out1, "val_eer: "),
            "one run (exit %d): %s", rc, out1);
    snprintf(args, sizeof args, "%s --epochs 1 --checkpoint %s", base, part);
    rc = t_run_ctrain(args, out2, sizeof out2);
    t_check(rc == 0, "first part (exit %d): %s", rc, out2);
    snprintf(args, sizeof args, "train siamese-cnn --resume %s --epochs 3 --threads 1 --no-progress --checkpoint %s --out %s",
             part, part, resumed);
    rc = t_run_ctrain(args, out3, sizeof out3);
    t_check(rc == 0 && strstr(out3, "Resuming from"), "resumed run (exit %d): %s", rc, out3);
    epoch_lines(out1, la, sizeof la);
    epoch_lines(out2, lb, sizeof lb);
    epoch_lines(out3, lb + strlen(lb), sizeof lb - strlen(lb));
    t_check(!strcmp(la, lb) && strlen(la) > 60, "log lines differ:\none run:\n%sstopped and resumed:\n%s", la, lb);
    siamese_cnn m1, m2;
    if (load_weights(&m1, one, CLI_SPEC, 16, 6)) {
        if (load_weights(&m2, resumed, CLI_SPEC, 16, 6)) {
            t_check(same_tensors(&m1.enc.params, &m2.enc.params), "weights of the resumed run differ from one run");
            t_check(m1.enc.buffers.n == 4 && same_tensors(&m1.enc.buffers, &m2.enc.buffers),
                    "batchnorm running statistics of the resumed run differ from one run");
            ct_siamese_cnn_free(&m2);
        }

        t_case("siamese_cnn/cli: eval siamese-cnn prints the EER the library computes");
        snprintf(args, sizeof args, "eval siamese-cnn --weights %s --data %s --trials %s --threads 1", one, feats, trials);
        rc = t_run_ctrain(args, out1, sizeof out1);
        ct_corpus c = { 0 };
        ct_trial *t = NULL;
        int n = 0;
        double eer = -1;
        speaker_model sm = ct_speaker_model_cnn(&m1);
        ct_status st = ct_featstore_load(&c, feats);
        if (st == CT_OK) st = ct_trials_load(&t, &n, trials, &c);
        if (st == CT_OK) st = ct_verify_trials(&sm, &c, t, n, 128, 3000, &eer, NULL, NULL);
        t_check(st == CT_OK, "library: %s", ct_last_error());
        char want[64];
        snprintf(want, sizeof want, "EER: %.2f%%", 100.0 * eer);
        t_check(rc == 0 && strstr(out1, want) && strstr(out1, "Trials: 120 scored (60 same speaker, 60 different)")
                && strstr(out1, "windows"), "eval (exit %d) should print \"%s\": %s", rc, want, out1);
        free(t);
        ct_corpus_free(&c);
        ct_siamese_cnn_free(&m1);
    }

    t_case("siamese_cnn/cli: files of the other speaker model are refused with a clear message");
    snprintf(args, sizeof args, "train siamese-lstm --data %s --frames 16 --mels 6 --hidden 4 --embed 3 --pairs 32 --val-pairs 16 "
             "--batch 16 --epochs 1 --threads 1 --no-progress --checkpoint %s --out %s", feats, lstm_ck, lstm);
    rc = t_run_ctrain(args, out1, sizeof out1);
    t_check(rc == 0, "siamese-lstm run (exit %d): %s", rc, out1);
    snprintf(args, sizeof args, "eval siamese-cnn --weights %s --data %s --trials %s --threads 1", lstm, feats, trials);
    rc = t_run_ctrain(args, out1, sizeof out1);
    t_check(rc == 1 && strstr(out1, "model siamese-lstm, not siamese-cnn"), "lstm weights in eval siamese-cnn (exit %d): %s", rc, out1);
    snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --hidden 4 --embed 3 --threads 1",
             one, feats, trials);
    rc = t_run_ctrain(args, out1, sizeof out1);
    t_check(rc == 1 && strstr(out1, "siamese-cnn") && strstr(out1, "not siamese-lstm"), "cnn weights in eval siamese-lstm (exit %d): %s",
            rc, out1);
    snprintf(args, sizeof args, "train siamese-cnn --resume %s --epochs 2 --threads 1", lstm_ck);
    rc = t_run_ctrain(args, out1, sizeof out1);
    t_check(rc > 0 && rc != 134 && strstr(out1, "is a checkpoint of model siamese-lstm, not siamese-cnn"),
            "resume an lstm checkpoint as siamese-cnn (exit %d): %s", rc, out1);
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --epochs 2 --threads 1", part);
    rc = t_run_ctrain(args, out1, sizeof out1);
    t_check(rc > 0 && rc != 134 && strstr(out1, "is a checkpoint of model siamese-cnn, not siamese-lstm"),
            "resume a cnn checkpoint as siamese-lstm (exit %d): %s", rc, out1);

    t_case("siamese_cnn/cli: a checkpoint exported for PyTorch and imported back gives the tower's weights");
    snprintf(args, sizeof args, "export --format torch %s --out %s", part, exported);
    rc = t_run_ctrain(args, out1, sizeof out1);
    t_check(rc == 0 && strstr(out1, "PyTorch weights of siamese-cnn"), "export (exit %d): %s", rc, out1);
    snprintf(args, sizeof args, "import --format torch %s --out %s --model siamese-cnn", exported, lstm);
    rc = t_run_ctrain(args, out2, sizeof out2);
    static siamese_cnn a, b;
    siamese_cnn_config sc = ct_siamese_cnn_defaults();
    sc.frames = 16; sc.n_mels = 6; sc.embed = 0;
    snprintf(sc.spec, sizeof sc.spec, "%s", CLI_SPEC);
    int ok = rc == 0 && ct_siamese_cnn_build(&a, &sc) == CT_OK && ct_siamese_cnn_build(&b, &sc) == CT_OK
             && ct_weights_load(part, "siamese-cnn", &a.enc.params, &a.enc.buffers) == CT_OK
             && ct_weights_load(lstm, "siamese-cnn", &b.enc.params, &b.enc.buffers) == CT_OK;
    t_check(ok && !memcmp(a.enc.params.data, b.enc.params.data, a.enc.params.numel * sizeof(float))
            && !memcmp(a.enc.buffers.data, b.enc.buffers.data, a.enc.buffers.numel * sizeof(float)),
            "import (exit %d): %s %s", rc, out2, ct_last_error());
    ct_siamese_cnn_free(&a);
    ct_siamese_cnn_free(&b);
    unlink(exported);

    const char *files[] = { feats, trials, one, part, resumed, lstm_ck, lstm };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) unlink(files[i]);
    rmdir(tdir);
}

void suite_siamese_cnn(void)
{
    test_parity();
    test_gradcheck();
    test_windows();
    test_trains();
    test_cli();
}
