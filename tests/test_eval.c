/* test_eval.c - evaluating a trial list with the siamese LSTM (train/verify.h)
 * and `ctrain eval siamese-lstm` end to end, on a small in-memory corpus and
 * random-init weights saved to a file (nothing is trained):
 *   - the EER and minDCF come out finite and in range, and do not depend on how
 *     the utterances are batched;
 *   - an utterance embedded alone equals the same utterance padded inside a
 *     batch of longer ones (the lengths reach the LSTM: padding changes nothing);
 *   - utterances longer than max_frames are cut and counted; a SIGTERM stops the
 *     embedding (CT_EINTR);
 *   - the CLI on a feature store prints the same EER, and a model-size mismatch
 *     or a path missing from the store gives a clear error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <signal.h>
#include "tests/test.h"
#include "core/interrupt.h"
#include "io/featstore.h"
#include "io/trials.h"
#include "io/weights.h"
#include "train/verify.h"

#define SPK 6
#define UTT 5

static int make_corpus(ct_corpus *c)
{
    ct_synth_config sc = { .speakers = SPK, .utts_per_speaker = UTT, .min_frames = 12, .max_frames = 60,
                           .n_mels = 8, .noise = 1.0f, .seed = 11 };
    if (!t_check(ct_corpus_synthetic(c, &sc) == CT_OK, "synthetic corpus: %s", ct_last_error())) return 0;
    c->path = calloc((size_t)c->n_utt, sizeof *c->path);
    c->speaker_name = calloc((size_t)c->n_speakers, sizeof *c->speaker_name);
    c->video = calloc((size_t)c->n_utt, sizeof *c->video);
    for (int s = 0; s < SPK; s++) {
        char b[32];
        snprintf(b, sizeof b, "id1%04d", s);
        c->speaker_name[s] = strdup(b);
    }
    for (int u = 0; u < c->n_utt; u++) {
        char b[64];
        int s = c->utt[u].speaker;
        snprintf(b, sizeof b, "id1%04d/vid%08d/%05d.wav", s, s * 2 + (u % UTT) / 3, u % UTT + 1);
        c->path[u] = strdup(b);
        c->video[u] = s * 2 + (u % UTT) / 3;
    }
    return 1;
}

/* Every pair of distinct utterances of the first `spk` speakers. */
static int all_pairs(ct_trial *t, int spk)
{
    int n = 0;
    for (int a = 0; a < spk * UTT; a++)
        for (int b = a + 1; b < spk * UTT; b++) t[n++] = (ct_trial){ a, b, a / UTT == b / UTT };
    return n;
}

static siamese_lstm_config model_config(void)
{
    siamese_lstm_config mc = ct_siamese_lstm_defaults();
    mc.n_mels = 8; mc.frames = 20; mc.hidden = 12; mc.layers = 2; mc.embed = 6;
    return mc;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!t_check(f != NULL, "cannot write %s", path)) return;
    fputs(text, f);
    fclose(f);
}

void suite_eval(void)
{
    ct_corpus c = { 0 };
    if (!make_corpus(&c)) return;
    siamese_lstm_config mc = model_config();
    siamese_lstm m0, m;
    ct_rng r;
    ct_rng_seed(&r, 5, CT_STREAM_INIT);
    char dir[] = "/tmp/ctrain_eval_XXXXXX";
    if (!t_check(mkdtemp(dir) != NULL, "mkdtemp failed")) { ct_corpus_free(&c); return; }
    char wpath[128], fpath[128], tpath[128], bad_tpath[128];
    snprintf(wpath, sizeof wpath, "%s/w.h5", dir);
    snprintf(fpath, sizeof fpath, "%s/feats.h5", dir);
    snprintf(tpath, sizeof tpath, "%s/trials.txt", dir);
    snprintf(bad_tpath, sizeof bad_tpath, "%s/bad_trials.txt", dir);

    /* random-init weights, saved and loaded back into a second model */
    t_check(ct_siamese_lstm_build(&m0, &mc) == CT_OK, "build: %s", ct_last_error());
    ct_siamese_lstm_init_weights(&m0, &r);
    t_check(ct_weights_save(wpath, "siamese-lstm", &m0.params, NULL) == CT_OK, "save: %s", ct_last_error());
    ct_siamese_lstm_free(&m0);
    t_check(ct_siamese_lstm_build(&m, &mc) == CT_OK, "build: %s", ct_last_error());
    t_check(ct_weights_load(wpath, "siamese-lstm", &m.params, NULL) == CT_OK, "load: %s", ct_last_error());
    speaker_model sm = ct_speaker_model_lstm(&m);   /* what ct_verify_trials evaluates */
    /* the file names its model: loading it as another model is refused and changes nothing */
    float w0 = m.params.data[0];
    t_check(ct_weights_load(wpath, "cnn", &m.params, NULL) == CT_EFORMAT
            && strstr(ct_last_error(), "holds the weights of model siamese-lstm, not cnn") && m.params.data[0] == w0,
            "a siamese-lstm file loaded as cnn: %s", ct_last_error());

    ct_trial *t = malloc((size_t)SPK * UTT * SPK * UTT / 2 * sizeof *t);
    int n = all_pairs(t, 4);   /* speakers 0..3: 190 trials, 40 same-speaker */
    float *s1 = t_alloc((size_t)n), *s7 = t_alloc((size_t)n);

    t_case("eval/verify trials: finite EER and minDCF in range");
    double eer = -1, d01 = -1, d05 = -1;
    ct_status st = ct_verify_trials(&sm, &c, t, n, 7, 3000, &eer, &d01, &d05);
    t_check(st == CT_OK, "ct_verify_trials: %s", ct_last_error());
    t_check(isfinite(eer) && eer >= 0 && eer <= 1, "EER %g not in [0, 1]", eer);
    t_check(isfinite(d01) && d01 >= 0 && d01 <= 1 && isfinite(d05) && d05 >= 0 && d05 <= 1,
            "minDCF %g %g not in [0, 1]", d01, d05);

    t_case("eval/verify trials: scores do not depend on the batching");
    ct_verify_result r1, r7;
    st = ct_verify_trials_ex(&sm, &c, t, n, 1, 3000, &r1, s1);
    t_check(st == CT_OK, "batch 1: %s", ct_last_error());
    st = ct_verify_trials_ex(&sm, &c, t, n, 7, 3000, &r7, s7);
    t_check(st == CT_OK, "batch 7: %s", ct_last_error());
    t_close("scores, batch 7 vs 1", s7, s1, (size_t)n, 1e-6);
    t_check(r7.n_trials == n && r7.n_same == 40 && r7.n_utts == 4 * UTT && r7.n_cut == 0 && r7.batch_used == 7,
            "result: %d trials, %d same, %d utts, %d cut, batch %d", r7.n_trials, r7.n_same, r7.n_utts, r7.n_cut, r7.batch_used);
    t_check(r7.eer == eer && r7.dcf01 == d01 && r7.dcf05 == d05, "ct_verify_trials and _ex disagree");
    for (int k = 0; k < n; k++)
        if (!t_check(s1[k] <= 0, "score %d = %g: scores are minus distances", k, s1[k])) break;

    t_case("eval/verify trials: utterances longer than max_frames are cut and counted");
    {
        int want = 0;
        for (int u = 0; u < 4 * UTT; u++) want += c.utt[u].frames > 30;
        ct_verify_result rc;
        st = ct_verify_trials_ex(&sm, &c, t, n, 5, 30, &rc, NULL);
        t_check(st == CT_OK && rc.n_cut == want && want > 0, "cut %d, want %d (> 0): %s", rc.n_cut, want, ct_last_error());
    }

    t_case("eval/verify trials: a SIGTERM stops the embedding after the batch in progress (CT_EINTR)");
    {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {   /* a child: the signal flag stays set for good */
            ct_interrupt_install();
            raise(SIGTERM);
            ct_verify_result rs;
            ct_status s2 = ct_verify_trials_ex(&sm, &c, t, n, 7, 3000, &rs, NULL);
            _exit(s2 == CT_EINTR && strstr(ct_last_error(), "interrupted by SIGTERM") ? 0 : 1);
        }
        int ws = 0;
        waitpid(pid, &ws, 0);
        t_check(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the child should get CT_EINTR from ct_verify_trials_ex (status %d)", ws);
    }

    t_case("eval/embedding: padding inside a batch changes nothing");
    {
        int I = mc.n_mels, D = mc.embed;
        int shortest = 0, l0 = 0, l2 = 0;
        for (int u = 0; u < c.n_utt; u++) if (c.utt[u].frames < c.utt[shortest].frames) shortest = u;
        int longest = 0;
        for (int u = 0; u < c.n_utt; u++) if (c.utt[u].frames > c.utt[longest].frames) longest = u;
        int other = (longest + 1) % c.n_utt;
        int T = c.utt[longest].frames, Ts = c.utt[shortest].frames;
        t_check(Ts < T, "corpus lengths %d..%d", Ts, T);
        l0 = T; l2 = c.utt[other].frames;
        float *x1 = t_alloc((size_t)Ts * I), *x3 = t_alloc((size_t)3 * T * I);
        float *e1 = t_alloc((size_t)D), *e3 = t_alloc((size_t)3 * D);
        memcpy(x1, c.feats + c.utt[shortest].offset, (size_t)Ts * I * sizeof(float));
        memcpy(x3, c.feats + c.utt[longest].offset, (size_t)l0 * I * sizeof(float));
        memcpy(x3 + (size_t)T * I, c.feats + c.utt[shortest].offset, (size_t)Ts * I * sizeof(float));
        memcpy(x3 + (size_t)2 * T * I, c.feats + c.utt[other].offset, (size_t)l2 * I * sizeof(float));
        /* the padding is garbage, not zeros: the lengths alone must keep it out */
        for (int k = Ts * I; k < T * I; k++) x3[(size_t)T * I + k] = 3.0f + 0.01f * (float)(k % 7);
        int len1[1] = { Ts }, len3[3] = { l0, Ts, l2 };
        t_check(ct_siamese_lstm_plan_embed(&m, 3, T) == CT_OK, "plan: %s", ct_last_error());
        ct_siamese_lstm_embed(&m, e1, x1, len1, 1, Ts);
        ct_siamese_lstm_embed(&m, e3, x3, len3, 3, T);
        t_close("embedding alone vs padded in a batch", e3 + D, e1, (size_t)D, 1e-6);
        free(x1); free(x3); free(e1); free(e3);
    }

    t_case("eval/verify trials: errors");
    {
        ct_trial same[2] = { { 0, 1, 1 }, { 2, 3, 1 } };
        st = ct_verify_trials(&sm, &c, same, 2, 4, 3000, &eer, NULL, NULL);
        t_check(st == CT_EINVAL && strstr(ct_last_error(), "different-speaker"), "only same-speaker trials: %s %s",
                ct_status_name(st), ct_last_error());
        ct_trial out_of_range[1] = { { 0, c.n_utt, 0 } };
        st = ct_verify_trials(&sm, &c, out_of_range, 1, 4, 3000, &eer, NULL, NULL);
        t_check(st == CT_EINVAL, "index out of range: %s", ct_status_name(st));
        siamese_lstm_config mc9 = mc;
        mc9.n_mels = 9;
        siamese_lstm m9;
        t_check(ct_siamese_lstm_build(&m9, &mc9) == CT_OK, "build: %s", ct_last_error());
        speaker_model sm9 = ct_speaker_model_lstm(&m9);
        st = ct_verify_trials(&sm9, &c, t, n, 4, 3000, &eer, NULL, NULL);
        t_check(st == CT_EINVAL && strstr(ct_last_error(), "--mels"), "n_mels mismatch: %s %s", ct_status_name(st), ct_last_error());
        ct_siamese_lstm_free(&m9);
    }

    t_case("eval/cli: ctrain eval siamese-lstm on a feature store");
    {
        ct_featstore *w = NULL;
        st = ct_featstore_open(&w, fpath, c.n_mels);
        t_check(st == CT_OK, "featstore open: %s", ct_last_error());
        for (int u = 0; st == CT_OK && u < c.n_utt; u++) {
            char vid[32];
            snprintf(vid, sizeof vid, "vid%08d", c.video[u]);
            st = ct_featstore_append(w, c.path[u], c.speaker_name[c.utt[u].speaker], vid, c.feats + c.utt[u].offset,
                                     c.utt[u].frames);
            t_check(st == CT_OK, "featstore append: %s", ct_last_error());
        }
        if (w) t_check(ct_featstore_close(w) == CT_OK, "featstore close: %s", ct_last_error());
        size_t cap = (size_t)n * 96 + 1;
        char *text = malloc(cap), *p = text;
        for (int k = 0; k < n; k++) p += sprintf(p, "%d %s %s\n", t[k].label, c.path[t[k].a], c.path[t[k].b]);
        write_text(tpath, text);
        free(text);
        /* the reference: the same trials on the corpus as the store gives it back */
        ct_corpus cs = { 0 };
        ct_trial *ts = NULL;
        int ns = 0;
        double ref_eer = -1, ref01 = -1, ref05 = -1;
        st = ct_featstore_load(&cs, fpath);
        if (t_check(st == CT_OK, "featstore load: %s", ct_last_error())) {
            st = ct_trials_load(&ts, &ns, tpath, &cs);
            t_check(st == CT_OK && ns == n, "trials load: %d: %s", ns, ct_last_error());
            if (st == CT_OK) st = ct_verify_trials(&sm, &cs, ts, ns, 4, 3000, &ref_eer, &ref01, &ref05);
            t_check(st == CT_OK, "verify: %s", ct_last_error());
        }
        static char out[1 << 16];
        char args[1024];
        snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --hidden 12 --layers 2 --embed 6 "
                 "--threads 1 --batch 4", wpath, fpath, tpath);
        int rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc == 0, "`ctrain %s` exited %d: %s", args, rc, out);
        t_check(!strstr(out, "warning"), "weights without a record of their training speakers: a warning: %s", out);
        char want[64];
        snprintf(want, sizeof want, "Trials: %d scored (40 same speaker, %d different)", n, n - 40);
        t_check(strstr(out, want) != NULL, "output lacks \"%s\": %s", want, out);
        const char *e = strstr(out, "EER: ");
        double got = e ? atof(e + 5) : -1;
        t_check(e && fabs(got - 100 * ref_eer) < 0.006, "CLI EER %g%%, library %g%%: %s", got, 100 * ref_eer, out);
        const char *d = strstr(out, "minDCF(p=0.01): ");
        t_check(d && fabs(atof(d + 16) - ref01) < 6e-5, "CLI minDCF(0.01) vs %g: %s", ref01, out);
        d = strstr(out, "minDCF(p=0.05): ");
        t_check(d && fabs(atof(d + 16) - ref05) < 6e-5, "CLI minDCF(0.05) vs %g: %s", ref05, out);

        /* a model of another size: the weights file's own error */
        snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --hidden 16 --layers 2 --embed 6",
                 wpath, fpath, tpath);
        rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc != 0 && rc != 134 && strstr(out, "in the file but") && strstr(out, "in this model") && strstr(out, wpath),
                "size mismatch: exit %d: %s", rc, out);
        /* a path that is not in the store */
        write_text(bad_tpath, "1 id10000/vid00000000/00001.wav id10000/vid00000000/00002.wav\n"
                              "0 id10000/vid00000000/00001.wav id19999/nowhere/00001.wav\n");
        snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --hidden 12 --layers 2 --embed 6",
                 wpath, fpath, bad_tpath);
        rc = t_run_ctrain(args, out, sizeof out);
        char where[160];
        snprintf(where, sizeof where, "%s:2:", bad_tpath);
        t_check(rc != 0 && rc != 134 && strstr(out, where) && strstr(out, "id19999/nowhere/00001.wav"),
                "missing path: exit %d: %s", rc, out);
        /* missing required options and --help */
        rc = t_run_ctrain("eval siamese-lstm --weights x.h5", out, sizeof out);
        t_check(rc == 2 && strstr(out, "missing --data"), "missing --data: exit %d: %s", rc, out);
        rc = t_run_ctrain("eval siamese-lstm --help", out, sizeof out);
        t_check(rc == 0 && strstr(out, "--trials") && strstr(out, "--max-frames"), "--help: exit %d: %s", rc, out);
        free(ts);
        ct_corpus_free(&cs);
    }

    unlink(wpath); unlink(fpath); unlink(tpath); unlink(bad_tpath);
    rmdir(dir);
    free(s1); free(s7); free(t);
    ct_siamese_lstm_free(&m);
    ct_corpus_free(&c);
}
