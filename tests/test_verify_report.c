/* test_verify_report.c - what `ctrain eval --scores/--det/--json` writes
 * (train/verify_report.h):
 *   - the normal quantile (probit) against known values and its inverse, erfc;
 *   - the DET points cross P_miss = P_fa exactly at the EER of train/verify.c
 *     (the marked EER point lies on the curve), the minDCF points are curve
 *     points with ct_min_dcf's values, on scores with and without ties;
 *   - the SVG is well-formed XML (python3's xml.etree) with the points marked;
 *   - `eval --scores` writes one line per trial, in the list's order, with its
 *     label and paths, and scikit-learn's ROC on that file gives ctrain's EER
 *     (tests/verify_scores_check.py; skipped, saying why, without scikit-learn);
 *     `--json` holds the EER, minDCF and counts the text reports.
 * The model is random-init weights with a complete description; nothing trains. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test.h"
#include "io/featstore.h"
#include "io/json.h"
#include "io/weights.h"
#include "catalog/model_desc.h"
#include "catalog/model_table.h"
#include "train/verify_report.h"

#define PYTHON "/usr/bin/python3"

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_probit(void)
{
    t_case("verify_report/probit: known quantiles, symmetry, and Phi(probit(p)) = p");
    struct { double p, z; } known[] = { { 0.5, 0 }, { 0.975, 1.959963984540054 }, { 0.001, -3.090232306167814 },
                                          { 1e-6, -4.753424308822899 }, { 0.4, -0.2533471031357997 }, { 0.99, 2.326347874040841 } };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        t_check(fabs(ct_probit(known[k].p) - known[k].z) < 1e-12, "probit(%g) = %.15g, want %.15g", known[k].p, ct_probit(known[k].p), known[k].z);
    for (double p = 1e-9; p < 1; p *= 1.7) {
        double z = ct_probit(p);
        if (!t_check(fabs(0.5 * erfc(-z / sqrt(2.0)) - p) <= 1e-12 * p + 1e-16 && fabs(ct_probit(1 - p) + z) < 1e-9 * (1 + fabs(z)),
                     "probit(%g) = %.15g is not the quantile", p, z)) break;
    }
    t_check(isinf(ct_probit(0)) && ct_probit(0) < 0 && isinf(ct_probit(1)) && ct_probit(1) > 0, "probit(0), probit(1) must be -inf, +inf");
}

/* Scores of n trials (label alternating), drawn from two overlapping Gaussians;
 * with quant > 0 rounded to multiples of quant (many ties, across labels too). */
static void draw_scores(float *s, int *y, int n, double quant, ct_rng *r)
{
    for (int i = 0; i < n; i++) {
        y[i] = i % 3 == 0;
        double u1 = ct_rng_uniform(r) + 1e-12, u2 = ct_rng_uniform(r);
        double g = sqrt(-2 * log(u1)) * cos(2 * 3.141592653589793 * u2);
        double v = g + (y[i] ? 1.6 : 0);
        s[i] = (float)(quant > 0 ? quant * floor(v / quant + 0.5) : v);
    }
}

static void test_det(const char *dir)
{
    t_case("verify_report/DET: the curve crosses miss = false alarm at verify.c's EER; minDCF points on it");
    ct_rng r;
    ct_rng_seed(&r, 3, CT_STREAM_DATA);
    const double quants[] = { 0, 0.25, 1.0 };
    const int sizes[] = { 3001, 40, 7 };
    for (int q = 0; q < 3; q++) {
        int n = sizes[q];
        float *s = t_alloc((size_t)n);
        int *y = calloc((size_t)n, sizeof *y);
        draw_scores(s, y, n, quants[q], &r);
        double eer, thr, dcf[2];
        ct_det d;
        if (!t_check(ct_eer(s, y, n, &eer, &thr) == CT_OK && ct_min_dcf(s, y, n, 0.01, 1, 1, &dcf[0], NULL) == CT_OK
                     && ct_min_dcf(s, y, n, 0.05, 1, 1, &dcf[1], NULL) == CT_OK && ct_det_build(&d, s, y, n) == CT_OK,
                     "metrics: %s", ct_last_error())) { free(s); free(y); continue; }
        int mono = d.n >= 2 && d.pfa[0] == 0 && d.pmiss[0] == 1 && d.pfa[d.n - 1] == 1 && d.pmiss[d.n - 1] == 0;
        for (int k = 1; k < d.n; k++) mono = mono && d.pfa[k] >= d.pfa[k - 1] && d.pmiss[k] <= d.pmiss[k - 1];
        t_check(mono, "quant %g: the DET points must run from (0, 1) to (1, 0) monotonically", quants[q]);
        /* the crossing, found from the curve's own points */
        int j = 0;
        while (j + 1 < d.n && d.pmiss[j + 1] - d.pfa[j + 1] > 0) j++;
        double d0 = d.pmiss[j] - d.pfa[j], d1 = d.pmiss[j + 1] - d.pfa[j + 1], t = d0 / (d0 - d1);
        double cross = d.pfa[j] + t * (d.pfa[j + 1] - d.pfa[j]);
        t_check(j == d.eer_index && fabs(cross - eer) < 1e-12 && d.eer == eer && d.eer_threshold == thr,
                "quant %g: the curve crosses at %.15g (segment %d), verify.c's EER is %.15g (segment %d)", quants[q], cross, j, eer, d.eer_index);
        /* (EER, EER) is on the segment between points j and j+1 */
        double ax = d.pfa[j], ay = d.pmiss[j], bx = d.pfa[j + 1], by = d.pmiss[j + 1];
        double crossp = (bx - ax) * (eer - ay) - (by - ay) * (eer - ax);
        t_check(fabs(crossp) < 1e-12 && eer >= fmin(ax, bx) - 1e-12 && eer <= fmax(ax, bx) + 1e-12,
                "quant %g: the EER point (%g, %g) is off the segment (%g, %g)-(%g, %g)", quants[q], eer, eer, ax, ay, bx, by);
        for (int k = 0; k < 2; k++) {
            int on = 0;
            for (int i = 0; i < d.n; i++) on = on || (d.pfa[i] == d.dcf_pfa[k] && d.pmiss[i] == d.dcf_pmiss[k]);
            double p = d.p_target[k], val = (d.dcf_pmiss[k] * p + d.dcf_pfa[k] * (1 - p)) / fmin(p, 1 - p);
            t_check(on && d.dcf[k] == dcf[k] && fabs(val - dcf[k]) < 1e-12, "quant %g: minDCF(%g) %g at (%g, %g), verify.c's %g",
                    quants[q], p, d.dcf[k], d.dcf_pfa[k], d.dcf_pmiss[k], dcf[k]);
        }
        if (q == 0) {
            char svg[256], cmd[1024];
            snprintf(svg, sizeof svg, "%s/det.svg", dir);
            t_check(ct_det_svg_write(svg, &d, "a <test> & \"title\"") == CT_OK, "svg: %s", ct_last_error());
            snprintf(cmd, sizeof cmd, PYTHON " -c \"import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
                     "t = ' '.join(x.text or '' for x in r.iter('{http://www.w3.org/2000/svg}text')); "
                     "sys.exit(0 if 'EER' in t and 'minDCF(p=0.01)' in t and '40' in t and '0.1' in t "
                     "and len(list(r.iter('{http://www.w3.org/2000/svg}polyline'))) == 1 else 1)\" %s >/dev/null 2>&1", svg);
            int rc = sh(cmd);
            t_check(rc == 0, "%s: not well-formed or lacks its labels (python3 exit %d)", svg, rc);
            unlink(svg);
        }
        ct_det_free(&d);
        free(s);
        free(y);
    }
}

/* A feature store (8 speakers x 6 utterances of 8 features) and a trial list over all of them. */
static int make_store(const char *feats, const char *trials)
{
    ct_synth_config sc = { .speakers = 8, .utts_per_speaker = 6, .min_frames = 14, .max_frames = 40, .n_mels = 8,
                           .noise = 1.0f, .seed = 4 };
    ct_corpus c;
    if (!t_check(ct_corpus_synthetic(&c, &sc) == CT_OK, "corpus: %s", ct_last_error())) return 0;
    ct_featstore *w = NULL;
    ct_status st = ct_featstore_open(&w, feats, c.n_mels);
    char path[96], spk[32], vid[32];
    for (int u = 0; st == CT_OK && u < c.n_utt; u++) {
        snprintf(spk, sizeof spk, "id4%04d", c.utt[u].speaker);
        snprintf(vid, sizeof vid, "v%d", u % 2);
        snprintf(path, sizeof path, "%s/%s/%05d.wav", spk, vid, u % 6 + 1);
        st = ct_featstore_append(w, path, spk, vid, c.feats + c.utt[u].offset, c.utt[u].frames);
    }
    if (w && ct_featstore_close(w) != CT_OK && st == CT_OK) st = CT_EIO;
    ct_corpus_free(&c);
    FILE *tf = fopen(trials, "w");
    for (int s = 0; tf && s < 8; s++)
        for (int k = 0; k < 6; k++)
            for (int j = k + 1; j < 6; j++) {
                fprintf(tf, "1 id4%04d/v%d/%05d.wav id4%04d/v%d/%05d.wav\n", s, k % 2, k + 1, s, j % 2, j + 1);
                fprintf(tf, "0 id4%04d/v%d/%05d.wav id4%04d/v%d/%05d.wav\n", s, k % 2, k + 1, (s + 1 + k) % 8, j % 2, j + 1);
            }
    if (tf) fclose(tf);
    return t_check(st == CT_OK && tf, "feature store / trial list: %s", ct_last_error());
}

#define N_TRIALS 240

static void test_cli(const char *dir)
{
    static char out[1 << 16];
    char feats[256], trials[256], w[256], scores[256], json[256], det[256], args[2048], cmd[1024];
    snprintf(feats, sizeof feats, "%s/feats.h5", dir); snprintf(trials, sizeof trials, "%s/trials.txt", dir);
    snprintf(w, sizeof w, "%s/w.h5", dir); snprintf(scores, sizeof scores, "%s/scores.txt", dir);
    snprintf(json, sizeof json, "%s/m.json", dir); snprintf(det, sizeof det, "%s/det.svg", dir);
    if (!make_store(feats, trials)) return;
    /* random-init weights, described as `ctrain train` describes them */
    siamese_lstm_config mc = ct_siamese_lstm_defaults();
    mc.n_mels = 8; mc.frames = 12; mc.hidden = 9; mc.embed = 4; mc.pool = LSTM_RETURN_MEAN;
    siamese_lstm m;
    ct_rng r;
    ct_rng_seed(&r, 2, CT_STREAM_INIT);
    static ct_kv kv;
    kv.n = 0;
    const ct_model_descriptor *d = ct_model_find("siamese-lstm");   /* its description, from its option table */
    void *cfg = calloc(1, d->cfg_size);
    if (!t_check(cfg != NULL, "out of memory")) return;
    d->defaults(cfg);
    const char *set[][2] = { { "n_mels", "8" }, { "frames", "12" }, { "hidden", "9" }, { "embed", "4" }, { "pool", "mean" } };
    for (size_t k = 0; k < sizeof set / sizeof set[0]; k++)
        t_check(ct_opt_set(ct_opts_find_key(d->opts, set[k][0]), cfg, set[k][1], set[k][0]) == CT_OK, "%s", ct_last_error());
    d->describe(cfg, NULL, &kv);
    free(cfg);
    ct_status st = ct_siamese_lstm_build(&m, &mc);
    if (st == CT_OK) {
        ct_siamese_lstm_init_weights(&m, &r);
        st = ct_model_desc_features(&kv, feats);
    }
    if (st == CT_OK) st = ct_weights_save_kv(w, "siamese-lstm", &m.params, NULL, &kv, NULL);
    if (!t_check(st == CT_OK, "weights: %s", ct_last_error())) return;
    ct_siamese_lstm_free(&m);

    t_case("verify_report/eval --scores: one line per trial, in order, with its label and paths");
    snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1 --scores %s --json %s --det %s",
             w, feats, trials, scores, json, det);
    int rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "scores written to") && strstr(out, "DET curve written to") && strstr(out, "metrics written to"),
            "eval (exit %d): %s", rc, out);
    const char *e = strstr(out, "EER: ");
    double eer_pct = e ? atof(e + 5) : -1;
    FILE *fs = fopen(scores, "r"), *ft = fopen(trials, "r");
    int lines = 0, good = fs && ft;
    char ls[512], lt[512];
    while (good && fgets(ls, sizeof ls, fs)) {
        float sc;
        int label, tl, used = 0;
        char a[128], b[128], ta[128], tb[128];
        good = fgets(lt, sizeof lt, ft) && sscanf(ls, "%f %d %127s %127s%n", &sc, &label, a, b, &used) == 4 && ls[used] == '\n'
               && sscanf(lt, "%d %127s %127s", &tl, ta, tb) == 3 && label == tl && !strcmp(a, ta) && !strcmp(b, tb) && sc <= 0;
        lines += good;
    }
    if (fs) fclose(fs);
    if (ft) fclose(ft);
    t_check(good && lines == N_TRIALS, "%s: %d good lines of %d trials (last: %s)", scores, lines, N_TRIALS, ls);

    t_case("verify_report/eval --json: EER, minDCF and counts as printed");
    json_t *root = NULL;
    if (t_check(ct_json_load(&root, json) == CT_OK, "json: %s", ct_last_error())) {
        const json_t *je = json_object_get(root, "eer"), *jn = json_object_get(root, "n_trials"), *js = json_object_get(root, "n_same");
        const json_t *jd = json_object_get(root, "min_dcf"), *jt = json_object_get(root, "eer_threshold");
        t_check(json_is_number(je) && json_is_number(jn) && json_is_number(js) && json_is_number(jt) && json_is_array(jd)
                && json_array_size(jd) == 2 && fabs(100 * json_number_value(je) - eer_pct) < 0.006
                && json_number_value(jn) == N_TRIALS && json_number_value(js) == N_TRIALS / 2, "json content: %s", out);
        const char *d1 = strstr(out, "minDCF(p=0.01): ");
        const json_t *v = json_object_get(json_array_get(jd, 0), "value"), *p = json_object_get(json_array_get(jd, 0), "p_target");
        t_check(d1 && json_is_number(v) && json_is_number(p) && json_number_value(p) == 0.01
                && fabs(json_number_value(v) - atof(d1 + 16)) < 6e-5, "json minDCF(0.01) vs %s", d1 ? d1 : "(none)");

        snprintf(cmd, sizeof cmd, PYTHON " tests/verify_scores_check.py %s %.17g 2>&1", scores, json_is_number(je) ? json_number_value(je) : -1.0);
        FILE *pp = popen(cmd, "r");
        char msg[512] = "";
        size_t got = pp ? fread(msg, 1, sizeof msg - 1, pp) : 0;
        msg[got] = '\0';
        int st2 = pp ? pclose(pp) : -1;
        rc = st2 >= 0 && WIFEXITED(st2) ? WEXITSTATUS(st2) : -1;
        if (rc == 2 || rc == 127) {
            msg[strcspn(msg, "\n")] = '\0';
            t_skip("verify_report/scikit-learn EER: %s", rc == 127 ? PYTHON " is missing" : msg);
        } else {
            t_case("verify_report/the scores file gives ctrain's EER under scikit-learn's ROC");
            t_check(rc == 0, "scikit-learn disagrees (exit %d): %s", rc, msg);
        }
        json_decref(root);
    }
    unlink(feats); unlink(trials); unlink(w); unlink(scores); unlink(json); unlink(det);
}

void suite_verify_report(void)
{
    char dir[] = "/tmp/ctrain_report_XXXXXX";
    if (!t_check(mkdtemp(dir) != NULL, "mkdtemp failed")) return;
    test_probit();
    test_det(dir);
    test_cli(dir);
    rmdir(dir);
}
