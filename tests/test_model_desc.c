/* test_model_desc.c - a weights file describes its model completely
 * (catalog/model_desc.h), and `ctrain eval` uses that description:
 *   - `train siamese-lstm` with non-default sizes and --recurrent hard_sigmoid
 *     writes every size, option and feature setting into the weights file and
 *     the checkpoint; `eval` with no model flags gives the EER the library
 *     computes for that model, and the same as with the right flags (the wrong
 *     gate activation gives other scores: it would have scored silently wrong);
 *   - a flag that contradicts the file is refused, naming the flag, the file's
 *     value and the fix; so is a feature store made with other settings (mel
 *     bands, frame shift, normalisation) and a model trained on synthetic data;
 *   - older files load: weights without the description (sizes from the flags)
 *     and a siamese-cnn file with only arch and frames, each with a one-line
 *     note naming what is missing; a store without the normalisation attribute
 *     loads and reads as the per-utterance normalisation.
 * The corpus is synthetic (a few speakers, 8 features per frame) in a real
 * feature store; trainings are one epoch of a few pairs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/test.h"
#include "io/featstore.h"
#include "io/h5.h"
#include "io/trials.h"
#include "io/weights.h"
#include "catalog/model_desc.h"
#include "train/verify.h"

static char tdir[64];

static void in_tdir(char *dst, size_t n, const char *name) { snprintf(dst, n, "%s/%s", tdir, name); }

/* A feature store of a synthetic corpus (12 speakers x 6 utterances, n_mels
 * features) and, if trials is not NULL, a trial list over its last 4 speakers. */
static int make_store(const char *feats, const char *trials, int n_mels)
{
    ct_synth_config sc = { .speakers = 12, .utts_per_speaker = 6, .min_frames = 14, .max_frames = 40, .n_mels = n_mels,
                           .noise = 1.0f, .seed = 9 };
    ct_corpus c;
    if (!t_check(ct_corpus_synthetic(&c, &sc) == CT_OK, "corpus: %s", ct_last_error())) return 0;
    ct_featstore *w = NULL;
    ct_status st = ct_featstore_open(&w, feats, c.n_mels);
    char path[96], spk[32], vid[32];
    for (int u = 0; st == CT_OK && u < c.n_utt; u++) {
        int s = c.utt[u].speaker, k = u % 6;
        snprintf(spk, sizeof spk, "id3%04d", s);
        snprintf(vid, sizeof vid, "v%d", k / 3);
        snprintf(path, sizeof path, "%s/%s/%05d.wav", spk, vid, k + 1);
        st = ct_featstore_append(w, path, spk, vid, c.feats + c.utt[u].offset, c.utt[u].frames);
    }
    if (w && ct_featstore_close(w) != CT_OK && st == CT_OK) st = CT_EIO;
    ct_corpus_free(&c);
    FILE *tf = trials ? fopen(trials, "w") : NULL;
    for (int s = 8; tf && s < 12; s++)
        for (int k = 0; k < 6; k++)
            for (int j = k + 1; j < 6; j++) {
                fprintf(tf, "1 id3%04d/v%d/%05d.wav id3%04d/v%d/%05d.wav\n", s, k / 3, k + 1, s, j / 3, j + 1);
                int o = s == 11 ? 8 : s + 1;
                fprintf(tf, "0 id3%04d/v%d/%05d.wav id3%04d/v%d/%05d.wav\n", s, k / 3, k + 1, o, j / 3, j + 1);
            }
    if (tf) fclose(tf);
    return t_check(st == CT_OK && (!trials || tf), "feature store / trial list: %s", ct_last_error());
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = 0;
    return t_check(ok, "copy %s to %s failed", from, to);
}

/* Replaces (or, with value NULL, deletes) a root attribute of an HDF5 file:
 * an integer when ival is used (value == NULL, del == 0), else a string. */
static int set_attr(const char *file, const char *name, const char *value, int ival, int del)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    if (!t_check(f >= 0, "cannot open %s for writing", file)) return 0;
    int ok = 1;
    if (H5Aexists(f, name) > 0) ok = H5Adelete(f, name) >= 0;
    if (ok && !del) {
        if (value) ok = ct_h5_attr_write_str(f, "/", name, value) == CT_OK;
        else {
            hid_t s = H5Screate(H5S_SCALAR), a = H5Acreate2(f, name, H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT);
            ok = a >= 0 && H5Awrite(a, H5T_NATIVE_INT, &ival) >= 0;
            if (a >= 0) H5Aclose(a);
            H5Sclose(s);
        }
    }
    ok = H5Fclose(f) >= 0 && ok;
    return t_check(ok, "could not change attribute %s of %s", name, file);
}

/* The EER a run printed, in percent (-1 if none). */
static double printed_eer(const char *out)
{
    const char *e = strstr(out, "EER: ");
    return e ? atof(e + 5) : -1;
}

/* The library's EER of the weights at `wpath` built as mc, on the store and trial list. */
static double library_eer(const siamese_lstm_config *mc, const char *wpath, const char *feats, const char *trials, float *scores)
{
    siamese_lstm m;
    ct_corpus c = { 0 };
    ct_trial *t = NULL;
    int n = 0;
    ct_verify_result r = { 0 };
    ct_status st = ct_siamese_lstm_build(&m, mc);
    if (st == CT_OK) st = ct_weights_load(wpath, "siamese-lstm", &m.params, NULL);
    if (st == CT_OK) st = ct_featstore_load(&c, feats);
    if (st == CT_OK) st = ct_trials_load(&t, &n, trials, &c);
    speaker_model sm = ct_speaker_model_lstm(&m);
    if (st == CT_OK) st = ct_verify_trials_ex(&sm, &c, t, n, 32, 3000, &r, scores);
    t_check(st == CT_OK, "library evaluation: %s", ct_last_error());
    free(t);
    ct_corpus_free(&c);
    ct_siamese_lstm_free(&m);
    return st == CT_OK ? 100.0 * r.eer : -1;
}

#define N_TRIALS 120   /* make_store's trial list */

static void test_lstm(const char *feats, const char *trials)
{
    static char out[1 << 16], out2[1 << 16];
    char w[256], ck[256], old[256], args[2048], feats6[256], shifted[256], unnorm[256], oldstore[256], synth[256];
    in_tdir(w, sizeof w, "w.h5"); in_tdir(ck, sizeof ck, "ck.h5"); in_tdir(old, sizeof old, "old.h5");
    in_tdir(feats6, sizeof feats6, "feats6.h5"); in_tdir(shifted, sizeof shifted, "shifted.h5");
    in_tdir(unnorm, sizeof unnorm, "unnorm.h5"); in_tdir(oldstore, sizeof oldstore, "oldstore.h5"); in_tdir(synth, sizeof synth, "synth.h5");

    t_case("model_desc/train siamese-lstm records every size, option and feature setting");
    snprintf(args, sizeof args, "train siamese-lstm --data %s --mels 8 --frames 12 --hidden 10 --layers 2 --embed 5 --margin 2 "
             "--recurrent hard_sigmoid --pool last --pairs 64 --val-pairs 32 --batch 16 --epochs 1 --threads 1 --no-progress "
             "--lr 3e-3 --checkpoint %s --out %s", feats, ck, w);
    int rc = t_run_ctrain(args, out, sizeof out);
    if (!t_check(rc == 0, "training (exit %d): %s", rc, out)) return;
    static model_desc d;
    t_check(ct_model_desc_read(&d, w, "siamese-lstm") == CT_OK, "read: %s", ct_last_error());
    const char *want_int[][2] = { { "n_mels", "8" }, { "frames", "12" }, { "hidden", "10" }, { "layers", "2" }, { "embed", "5" },
                                  { "sample_rate", "16000" }, { "frame_length_ms", "25" }, { "frame_shift_ms", "10" } };
    for (size_t k = 0; k < sizeof want_int / sizeof want_int[0]; k++) {
        int v = -1;
        t_check(ct_kv_int(&d.kv, want_int[k][0], &v) && v == atoi(want_int[k][1]), "weights attribute %s = %d, want %s",
                want_int[k][0], v, want_int[k][1]);
    }
    const char *want_str[][2] = { { "model", "siamese-lstm" }, { "recurrent", "hard_sigmoid" }, { "pool", "last" },
                                  { "features", "log-mel" }, { "normalization", CT_FEATSTORE_NORMALIZATION } };
    for (size_t k = 0; k < sizeof want_str / sizeof want_str[0]; k++) {
        const char *v = NULL;
        t_check(ct_kv_str(&d.kv, want_str[k][0], &v) && !strcmp(v, want_str[k][1]), "weights attribute %s = %s, want %s",
                want_str[k][0], v ? v : "(missing)", want_str[k][1]);
    }
    float margin = 0;
    t_check(ct_kv_float(&d.kv, "margin", &margin) && margin == 2.0f, "margin %g, want 2", margin);
    static ct_ckpt_meta meta;
    t_check(ct_ckpt_read_meta(ck, &meta) == CT_OK, "checkpoint: %s", ct_last_error());
    const char *s = NULL;
    int v = 0;
    t_check(ct_kv_str(&meta.model_cfg, "recurrent", &s) && !strcmp(s, "hard_sigmoid") && ct_kv_str(&meta.model_cfg, "features", &s)
            && !strcmp(s, "log-mel") && ct_kv_int(&meta.model_cfg, "frame_shift_ms", &v) && v == 10
            && ct_kv_int(&meta.model_cfg, "hidden", &v) && v == 10, "the checkpoint's model configuration lacks the description");

    t_case("model_desc/eval needs no model flags: the same EER as the library and as with the right flags");
    siamese_lstm_config mc = ct_siamese_lstm_defaults();
    mc.n_mels = 8; mc.frames = 12; mc.hidden = 10; mc.layers = 2; mc.embed = 5; mc.margin = 2; mc.recurrent = LSTM_HARD_SIGMOID;
    float *right = t_alloc(N_TRIALS), *wrong = t_alloc(N_TRIALS);
    double ref = library_eer(&mc, w, feats, trials, right);
    snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1", w, feats, trials);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && !strstr(out, "note:"), "eval without flags (exit %d): %s", rc, out);
    t_check(fabs(printed_eer(out) - ref) < 0.006, "eval without flags: EER %g%%, library %g%%: %s", printed_eer(out), ref, out);
    double eer_new = printed_eer(out);
    snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1 --mels 8 --hidden 10 --layers 2 "
             "--embed 5 --recurrent hard_sigmoid --pool last", w, feats, trials);
    rc = t_run_ctrain(args, out2, sizeof out2);
    t_check(rc == 0 && printed_eer(out2) == printed_eer(out) && strstr(out2, "Trials: 120 scored"),
            "eval with the right flags (exit %d): %s", rc, out2);
    mc.recurrent = LSTM_SIGMOID;   /* what eval built before the file said otherwise: other scores */
    library_eer(&mc, w, feats, trials, wrong);
    double diff = 0;
    for (int k = 0; k < N_TRIALS; k++) diff = fmax(diff, fabs((double)right[k] - wrong[k]));
    t_check(diff > 1e-4, "the gate activation should change the scores (max difference %g)", diff);
    free(right); free(wrong);

    t_case("model_desc/eval refuses a flag that contradicts the weights file");
    struct { const char *flag, *says; } bad[] = {
        { "--recurrent sigmoid", "recurrent = hard_sigmoid" }, { "--hidden 16", "hidden = 10" }, { "--layers 1", "layers = 2" },
        { "--embed 6", "embed = 5" }, { "--pool mean", "pool = last" }, { "--mels 6", "n_mels = 8" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1 %s", w, feats, trials, bad[k].flag);
        rc = t_run_ctrain(args, out, sizeof out);
        char flag[32], fix[48];
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(bad[k].flag, " "), bad[k].flag);
        snprintf(fix, sizeof fix, "leave %s out", flag);
        t_check(rc == 1 && strstr(out, bad[k].flag) && strstr(out, bad[k].says) && strstr(out, w) && strstr(out, fix)
                && !strstr(out, "Trials:"), "`eval %s` (exit %d): %s", bad[k].flag, rc, out);
    }

    t_case("model_desc/eval refuses a feature store made otherwise than the training data");
    if (make_store(feats6, NULL, 6)) {
        snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1", w, feats6, trials);
        rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc == 1 && strstr(out, feats6) && strstr(out, "n_mels = 8") && strstr(out, "--mels 8"), "6-mel store (exit %d): %s", rc, out);
    }
    if (copy_file(feats, shifted) && set_attr(shifted, "frame_shift_ms", NULL, 20, 0)) {
        snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1", w, shifted, trials);
        rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc == 1 && strstr(out, "frame_shift_ms = 20") && strstr(out, "frame_shift_ms = 10") && strstr(out, "ctrain prep"),
                "store with another frame shift (exit %d): %s", rc, out);
    }
    if (copy_file(feats, unnorm) && set_attr(unnorm, "normalization", "none", 0, 0)) {
        snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1", w, unnorm, trials);
        rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc == 1 && strstr(out, "normalization = none") && strstr(out, "normalization = " CT_FEATSTORE_NORMALIZATION),
                "store with another normalisation (exit %d): %s", rc, out);
    }
    snprintf(args, sizeof args, "train siamese-lstm --data synthetic --speakers 6 --utts 4 --mels 8 --frames 12 --hidden 4 --embed 3 "
             "--pairs 32 --val-pairs 16 --batch 16 --epochs 1 --threads 1 --no-progress --out %s", synth);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "synthetic training (exit %d): %s", rc, out);
    snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1", synth, feats, trials);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 1 && strstr(out, "synthetic features") && strstr(out, synth), "synthetic model on a store (exit %d): %s", rc, out);

    t_case("model_desc/old weights files load with the missing settings from the flags and a note");
    siamese_lstm m;
    mc.recurrent = LSTM_HARD_SIGMOID;
    int ok = t_check(ct_siamese_lstm_build(&m, &mc) == CT_OK && ct_weights_load(w, "siamese-lstm", &m.params, NULL) == CT_OK,
                     "load: %s", ct_last_error());
    if (ok) t_check(ct_weights_save(old, "siamese-lstm", &m.params, NULL) == CT_OK, "save: %s", ct_last_error());   /* as before */
    if (ok) ct_siamese_lstm_free(&m);
    snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1 --hidden 10 --layers 2 --embed 5 "
             "--recurrent hard_sigmoid", old, feats, trials);
    rc = t_run_ctrain(args, out2, sizeof out2);
    const char *note = strstr(out2, "note: ");
    char line[1024] = "";
    if (note) snprintf(line, sizeof line, "%.*s", (int)strcspn(note, "\n"), note);
    t_check(rc == 0 && printed_eer(out2) == eer_new, "old file with the right flags: EER %g%%, the new file %g%% (exit %d): %s",
            printed_eer(out2), eer_new, rc, out2);
    t_check(note && strstr(line, old) && strstr(line, "hidden") && strstr(line, "layers") && strstr(line, "embed")
            && strstr(line, "recurrent") && strstr(line, "pool") && strstr(line, "n_mels") && strstr(line, "feature settings")
            && strstr(line, "older ctrain"), "the note should name what is missing: %s", line);
    /* a store written before the normalisation was recorded loads, and reads as what prep always did */
    if (copy_file(feats, oldstore) && set_attr(oldstore, "normalization", NULL, 0, 1)) {
        ct_featstore_settings fs;
        t_check(ct_featstore_read_settings(oldstore, &fs) == CT_OK && !fs.normalization_recorded
                && !strcmp(fs.normalization, CT_FEATSTORE_NORMALIZATION) && fs.n_mels == 8, "old store settings: %s", ct_last_error());
        snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1", w, oldstore, trials);
        rc = t_run_ctrain(args, out2, sizeof out2);
        t_check(rc == 0 && printed_eer(out2) == eer_new, "old store (exit %d): %s", rc, out2);
    }
    const char *files[] = { w, ck, old, feats6, shifted, unnorm, oldstore, synth };
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) unlink(files[k]);
}

#define SPEC "conv4k3p1,batchnorm,relu,maxpool2,conv6k3p1,batchnorm,relu,gaph,dense5"

static void test_cnn(const char *feats, const char *trials)
{
    static char out[1 << 16], out2[1 << 16];
    char w[256], old[256], args[2048];
    in_tdir(w, sizeof w, "cnn.h5"); in_tdir(old, sizeof old, "cnn_old.h5");

    t_case("model_desc/siamese-cnn: the weights record the model; eval refuses a contradicting --mels");
    snprintf(args, sizeof args, "train siamese-cnn --data %s --arch " SPEC " --frames 16 --mels 8 --margin 1.5 --pairs 32 "
             "--val-pairs 16 --batch 16 --epochs 1 --threads 1 --no-progress --out %s", feats, w);
    int rc = t_run_ctrain(args, out, sizeof out);
    if (!t_check(rc == 0, "training (exit %d): %s", rc, out)) return;
    static model_desc d;
    int v = 0;
    const char *s = NULL;
    float margin = 0;
    t_check(ct_model_desc_read(&d, w, "siamese-cnn") == CT_OK, "read: %s", ct_last_error());
    t_check(ct_kv_int(&d.kv, "frames", &v) && v == 16 && ct_kv_int(&d.kv, "n_mels", &v) && v == 8 && ct_kv_int(&d.kv, "embed", &v)
            && v == 5 && ct_kv_float(&d.kv, "margin", &margin) && margin == 1.5f && ct_kv_str(&d.kv, "arch", &s) && !strcmp(s, SPEC)
            && ct_kv_str(&d.kv, "features", &s) && !strcmp(s, "log-mel") && ct_kv_int(&d.kv, "frame_length_ms", &v) && v == 25,
            "siamese-cnn weights attributes incomplete");
    snprintf(args, sizeof args, "eval siamese-cnn --weights %s --data %s --trials %s --threads 1", w, feats, trials);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && !strstr(out, "note:") && printed_eer(out) >= 0, "eval (exit %d): %s", rc, out);
    snprintf(args, sizeof args, "eval siamese-cnn --weights %s --data %s --trials %s --threads 1 --mels 6", w, feats, trials);
    rc = t_run_ctrain(args, out2, sizeof out2);
    t_check(rc == 1 && strstr(out2, "--mels 6") && strstr(out2, "n_mels = 8") && strstr(out2, "leave --mels out"),
            "contradicting --mels (exit %d): %s", rc, out2);

    t_case("model_desc/siamese-cnn: an older weights file (arch and frames only) loads with a note");
    siamese_cnn m;
    siamese_cnn_config mc = ct_siamese_cnn_defaults();
    mc.n_mels = 8; mc.frames = 16; mc.embed = 0;
    snprintf(mc.spec, sizeof mc.spec, "%s", SPEC);
    if (t_check(ct_siamese_cnn_build(&m, &mc) == CT_OK && ct_weights_load(w, "siamese-cnn", &m.enc.params, &m.enc.buffers) == CT_OK,
                "load: %s", ct_last_error())) {
        const char *attrs[] = { "arch", SPEC, "frames", "16", NULL };   /* what train wrote before */
        t_check(ct_weights_save_attrs(old, "siamese-cnn", &m.enc.params, &m.enc.buffers, attrs) == CT_OK, "save: %s", ct_last_error());
        ct_siamese_cnn_free(&m);
    }
    snprintf(args, sizeof args, "eval siamese-cnn --weights %s --data %s --trials %s --threads 1", old, feats, trials);
    rc = t_run_ctrain(args, out2, sizeof out2);
    t_check(rc == 0 && printed_eer(out2) == printed_eer(out) && strstr(out2, "note: ") && strstr(out2, "n_mels")
            && strstr(out2, "feature settings"), "old siamese-cnn file (exit %d): %s", rc, out2);
    unlink(w);
    unlink(old);
}

void suite_model_desc(void)
{
    snprintf(tdir, sizeof tdir, "/tmp/ctrain_desc_XXXXXX");
    if (!t_check(mkdtemp(tdir) != NULL, "mkdtemp failed")) return;
    char feats[256], trials[256];
    in_tdir(feats, sizeof feats, "feats.h5");
    in_tdir(trials, sizeof trials, "trials.txt");
    if (make_store(feats, trials, 8)) {
        test_lstm(feats, trials);
        test_cnn(feats, trials);
    }
    unlink(feats);
    unlink(trials);
    rmdir(tdir);
}
