/* eval.c - `ctrain eval MODEL`: trained weights -> the model's descriptor
 * (catalog/model_table.h), which rebuilds the network from the description its
 * weights file records -> an evaluation of its kind:
 *
 *   speaker models  ctrain eval siamese-lstm --weights run.h5 --data feats.h5 --trials veri_test.txt
 *                   every utterance of the trial list embedded once (the LSTM whole, the CNN as the
 *                   mean of its windows' embeddings), each trial scored as minus the distance, and
 *                   the trials, EER and minDCF at p_target 0.01 and 0.05 printed (train/verify.h);
 *                   --scores, --det and --json write the scores, the DET curve and the metrics
 *                   (train/verify_report.h); a warning line counts the list's speakers that the
 *                   weights file records as trained on (/train_speakers), whose EER is no test result
 *   image models    ctrain eval cnn --weights cnn.h5 --data fashion-mnist
 *                   loss, accuracy and the confusion matrix on the test set
 *
 * The old spellings --model FILE (now --weights: --model names a model type in
 * every command) and --classes A,B,... (now --class-names: --classes is a count
 * elsewhere) still work, with a note. SIGINT or SIGTERM stops the evaluation
 * after the batch in progress, and nothing is written.
 *
 * Exit status: 0 evaluated, 2 bad options, 1 a failure (its one-line message on
 * stderr), 128 + the signal when one stopped it (130 for SIGINT, 143 for SIGTERM).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/common.h"
#include "core/interrupt.h"
#include "core/threads.h"
#include "io/featstore.h"
#include "io/h5.h"
#include "io/idx.h"
#include "io/weights.h"
#include "catalog/model_image.h"
#include "train/verify.h"
#include "train/verify_report.h"

/* The command line of one evaluation. */
typedef struct {
    const char *weights, *data, *trials, *classes;
    const char *scores, *det, *json;       /* speaker models' outputs besides the text */
    int batch, max_frames, threads;
    cli_train_opts dev;                    /* --device, --tf32, --deterministic: the shared table's rows eval takes */
} eval_opts;

static void help(const ct_model_descriptor *d, int speaker)
{
    printf("usage: ctrain eval %s --weights FILE.h5%s [options]\n\n%s\n\n", d->name,
           speaker ? " --data FEATS.h5 --trials TRIALS.txt" : "", d->eval_about);
    printf("inputs:\n");
    char text[160];
    snprintf(text, sizeof text, "weights written by `ctrain train %s --out`", d->name);
    cli_help_line(stdout, "--weights FILE.h5", text);
    if (speaker) {
        cli_help_line(stdout, "--data FEATS.h5", "feature store written by `ctrain prep voxceleb`");
        cli_help_line(stdout, "--trials FILE", "trial list, VoxCeleb format: 'LABEL PATH1 PATH2' per line (1 = same speaker),\n"
                                               "paths relative to the corpus's wav/ directory");
        printf("model: the weights file describes it (sizes, options and the feature settings of its training\n"
               "data; catalog/model_desc.h), so no flag is needed, a flag that contradicts the file is refused,\n"
               "and so is a feature store made with other settings. For files written by an older ctrain,\n"
               "which record less, these give what is missing (a note names it):\n");
    }
    cli_opt_help(stdout, d->eval_opts, CT_CMD_EVAL, NULL);
    if (speaker) {
        printf("outputs, besides the text:\n");
        cli_help_line(stdout, "--scores FILE", "one line per trial: SCORE LABEL PATH1 PATH2, in the list's order; SCORE is minus\n"
                                               "the distance: higher = more likely the same speaker (NIST's convention)");
        cli_help_line(stdout, "--det FILE.svg", "the DET curve: miss rate against false-alarm rate on normal-deviate axes,\n"
                                                "with the EER and the minDCF operating points marked");
        cli_help_line(stdout, "--json FILE", "EER and its threshold, minDCF at p_target 0.01 and 0.05 with their\n"
                                             "thresholds and operating points, and the counts");
    } else {
        cli_help_line(stdout, "--class-names A,B,...", "class names (default: Fashion-MNIST's for fashion-mnist data, else digits)");
    }
    printf("evaluation:\n");
    snprintf(text, sizeof text, "%s embedded at once%s (default %d)", speaker ? "utterances (LSTM) or windows (CNN)" : "images",
             speaker ? ", sorted by length" : "", d->eval_batch);
    cli_help_line(stdout, "--batch N", text);
    if (speaker) cli_help_line(stdout, "--max-frames N", "cut longer utterances to their first N frames (default: none; every\n"
                                                         "utterance is embedded whole: by the LSTM in one pass, by the CNN\n"
                                                         "as windows averaged)");
    printf("  --threads N           CPU threads for OpenBLAS (default: all cores)\n");
    cli_train_opts dflt = { .device = "cpu" };
    cli_opt_help(stdout, ct_train_opt_table, CT_CMD_EVAL, &dflt);   /* --device, --tf32, --deterministic */
}

/* ---- speaker models: a trial list ---- */
static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* How many of the speakers the trials t[n] name are among those the weights file records as
 * trained on (/train_speakers); 0 when it records none. */
static ct_status trained_speakers_in_trials(int *count, const char *weights, const ct_trial *t, int n, const ct_corpus *c)
{
    char **trained = NULL;
    int n_trained = 0;
    *count = 0;
    CT_TRY(ct_weights_read_speakers(weights, &trained, &n_trained));
    unsigned char *named = n_trained && c->speaker_name ? ct_calloc((size_t)c->n_speakers, 1, "trial speakers") : NULL;
    if (named) {
        qsort(trained, (size_t)n_trained, sizeof *trained, compare_names);
        for (int k = 0; k < n; k++) named[c->utt[t[k].a].speaker] = named[c->utt[t[k].b].speaker] = 1;
        for (int s = 0; s < c->n_speakers; s++)
            *count += named[s] && bsearch(&c->speaker_name[s], trained, (size_t)n_trained, sizeof *trained, compare_names);
    }
    ct_status st = n_trained && c->speaker_name && !named ? CT_ENOMEM : CT_OK;
    free(named);
    ct_h5_names_free(trained, n_trained);
    return st;
}

static ct_status eval_trials(const ct_model_descriptor *d, void *net, const char *line, const ct_corpus *c, double load_s,
                             const eval_opts *o)
{
    speaker_model sm = d->speaker(net);
    ct_trial *t = NULL;
    float *scores = NULL;
    int n = 0;
    ct_verify_result r;
    int trained = 0;
    ct_status st = ct_trials_load(&t, &n, o->trials, c);
    if (st == CT_OK) st = trained_speakers_in_trials(&trained, o->weights, t, n, c);
    if (st == CT_OK && trained)
        fprintf(stderr, "warning: the trial list names %d speaker%s this model was trained on; its EER is not a test result\n",
                trained, trained == 1 ? "" : "s");
    if (st == CT_OK && !(scores = ct_malloc((size_t)n * sizeof *scores, "trial scores"))) st = CT_ENOMEM;
    if (st == CT_OK) {
        cli_print_header(stdout, o->threads);
        printf("Model: %s\n", line);
        printf("Data: %s, %d utterances of %d speakers (index read in %.1fs; the trials' utterances are read as they are "
               "embedded); trials: %s\n", o->data, c->n_utt, c->n_speakers, load_s, o->trials);
        fflush(stdout);
        st = ct_verify_trials_ex(&sm, c, t, n, o->batch, o->max_frames, &r, scores);
    }
    if (st == CT_OK) {
        printf("Embedded %d utterances (batches of %d%s", r.n_utts, r.batch_used, sm.whole_utterances ? "" : " windows");
        if (!sm.whole_utterances) printf(" of %d frames, hop %d, averaged per utterance", sm.frames, sm.frames / 2 > 0 ? sm.frames / 2 : 1);
        if (r.n_cut) printf("; %d longer than %d frames cut to that", r.n_cut, o->max_frames);
        printf(") in %.1fs\n", r.seconds);
        printf("Trials: %d scored (%d same speaker, %d different)\n", r.n_trials, r.n_same, r.n_trials - r.n_same);
        printf("EER: %.2f%% (threshold %.4f)\n", 100.0 * r.eer, r.eer_threshold);
        printf("minDCF(p=0.01): %.4f\n", r.dcf01);
        printf("minDCF(p=0.05): %.4f\n", r.dcf05);
        if (ct_interrupt_signal()) st = ct_fail(CT_EINTR, "interrupted by %s", ct_interrupt_name(ct_interrupt_signal()));
        if (st == CT_OK) st = ct_verify_reports_write(o->scores, o->det, o->json, &r, scores, t, n, c, o->weights, o->data, o->trials);
        if (st == CT_OK && o->scores) printf("scores written to %s\n", o->scores);
        if (st == CT_OK && o->det) printf("DET curve written to %s\n", o->det);
        if (st == CT_OK && o->json) printf("metrics written to %s\n", o->json);
    }
    free(t);
    free(scores);
    return st;
}

/* ---- image models: the test set ---- */
static const char *FASHION_NAMES[10] = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                         "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" };
static const char *DIGIT_NAMES[10] = { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9" };

/* The class names: --class-names "a,b,c" (exactly n, pointers into buf), else Fashion-MNIST's or digits. */
static ct_status class_names(char *buf, const char **names, int n, const eval_opts *o, const char *dir)
{
    const char **src = (!strcmp(o->data, "fashion-mnist") || strstr(dir, "fashion")) ? FASHION_NAMES : DIGIT_NAMES;
    for (int k = 0; k < CT_IDX_CLASSES; k++) names[k] = src[k];
    if (!buf) return n <= CT_IDX_CLASSES ? CT_OK : ct_fail(CT_EINVAL, "the data has %d classes: name them with --class-names", n);
    int k = 0;
    for (char *s = buf;; k++) {
        char *e = strchr(s, ',');
        if (e) *e = 0;
        if (!*s) return ct_fail(CT_EINVAL, "--class-names: class name %d is empty", k + 1);
        if (k < n) names[k] = s;
        if (!e) { k++; break; }
        s = e + 1;
    }
    if (k != n) return ct_fail(CT_EINVAL, "--class-names: %d names given, but the data has %d classes", k, n);
    return CT_OK;
}

static ct_status eval_images(const ct_model_descriptor *d, void *net, const char *line, const ct_model_data *data, const eval_opts *o)
{
    const ct_images *test = &data->val;
    const int C = test->classes;
    const char *names[64];
    char *buf = o->classes ? ct_malloc(strlen(o->classes) + 1, "class names") : NULL;
    long *confusion = ct_calloc((size_t)C * C, sizeof *confusion, "confusion matrix"), right = 0;
    ct_status st = confusion && (buf || !o->classes) ? CT_OK : CT_ENOMEM;
    if (buf) strcpy(buf, o->classes);
    if (st == CT_OK && C > 64) st = ct_fail(CT_EINVAL, "the data has %d classes; eval prints at most 64", C);
    if (st == CT_OK) st = class_names(buf, names, C, o, data->dir);
    double loss = 0, t0 = ct_now();
    if (st == CT_OK) {
        cli_print_header(stdout, o->threads);
        printf("Model: %s\n", line);
        printf("Data: %s (%s), %d test images\n", o->data, data->dir, test->n);
        fflush(stdout);
        st = ct_image_evaluate(d->classifier(net), test, o->batch, &loss, &right, confusion);
    }
    if (st == CT_OK) {
        printf("test loss: %.4f - test accuracy: %.4f (%ld/%d) - %.1fs\n", loss, (double)right / test->n, right, test->n, ct_now() - t0);
        printf("\nConfusion matrix (rows: true class, columns: predicted class)\n");
        int w = 0;
        for (int k = 0; k < C; k++) if ((int)strlen(names[k]) > w) w = (int)strlen(names[k]);
        printf("%*s", w + 4, "");
        for (int j = 0; j < C; j++) printf(" %5d", j);
        printf("   recall\n");
        for (int k = 0; k < C; k++) {
            long row = 0;
            for (int j = 0; j < C; j++) row += confusion[(size_t)k * C + j];
            printf("%2d %-*s ", k, w, names[k]);
            for (int j = 0; j < C; j++) printf(" %5ld", confusion[(size_t)k * C + j]);
            printf("   %.4f\n", row ? (double)confusion[(size_t)k * C + k] / row : 0.0);
        }
    }
    free(confusion);
    free(buf);
    return st;
}

/* The weights file's network on the device, then its evaluation. */
static ct_status evaluate(const ct_model_descriptor *d, void *cfg, void *flags, unsigned long long given, const eval_opts *o,
                          const ct_backend *be)
{
    static ct_model_data data;
    int speaker = d->task == CT_TASK_SPEAKER, built = 0;
    char note[1024] = "", line[2048], arch[1600];
    double load_s = 0;
    void *net = ct_calloc(1, d->net_size, "network");
    if (!net) return CT_ENOMEM;
    ct_status st = d->eval_config(cfg, o->weights, flags, given, o->data, note, sizeof note);
    if (st == CT_OK && note[0]) fprintf(stderr, "ctrain eval: note: %s\n", note);
    if (st == CT_OK) {
        load_s = ct_now();
        /* a feature store is streamed: only the utterances the trials name are read */
        st = speaker ? ct_featstore_stream(&data.corpus, o->data) : ct_image_load_test(&data, o->data);
        load_s = ct_now() - load_s;
    }
    if (st == CT_OK && (st = d->build(net, cfg, &data)) == CT_OK) built = 1;
    if (st == CT_OK && speaker && d->speaker(net).n_mels != data.corpus.n_mels)
        st = ct_fail(CT_EINVAL, "--mels %d, but %s has %d features per frame; pass the store the model was trained on",
                     d->speaker(net).n_mels, o->data, data.corpus.n_mels);
    if (st == CT_OK) st = ct_weights_load(o->weights, d->name, d->params(net), d->buffers(net));
    if (st == CT_OK) st = d->set_device(net, be);   /* copies the loaded weights there */
    if (st == CT_OK && !speaker) st = d->plan(net, o->batch);
    if (st == CT_OK) {
        d->arch_line(net, arch, sizeof arch);
        snprintf(line, sizeof line, "%s: %s, %zu parameters", o->weights, arch, ct_params_count(d->params(net)));
        st = speaker ? eval_trials(d, net, line, &data.corpus, load_s, o) : eval_images(d, net, line, &data, o);
    }
    if (built) d->free(net);
    free(net);
    ct_model_data_free(&data);
    return st;
}

static int eval_model(const ct_model_descriptor *d, int argc, char **argv)
{
    int speaker = d->task == CT_TASK_SPEAKER;
    eval_opts o = { .data = speaker ? NULL : "fashion-mnist", .batch = d->eval_batch, .max_frames = INT_MAX,
                    .threads = ct_cpu_count(), .dev = { .device = "cpu" } };
    unsigned long long given = 0;
    void *cfg = ct_calloc(1, d->cfg_size, "configuration"), *flags = ct_calloc(1, d->eval_flags_size + 1, "flags");
    ct_args a = { .argc = argc, .argv = argv };
    ct_status st = cfg && flags ? CT_OK : CT_ENOMEM;
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) { help(d, speaker); free(cfg); free(flags); return 0; }
        if (ct_args_end(&a)) continue;
        ct_args_renamed(&a, "eval", "--model", "--weights");
        if (!speaker) ct_args_renamed(&a, "eval", "--classes", "--class-names");
        if (ct_args_str(&a, "--weights", &o.weights, &st) || ct_args_str(&a, "--data", &o.data, &st)
            || (speaker && (ct_args_str(&a, "--trials", &o.trials, &st) || ct_args_str(&a, "--scores", &o.scores, &st)
                            || ct_args_str(&a, "--det", &o.det, &st) || ct_args_str(&a, "--json", &o.json, &st)
                            || ct_args_int(&a, "--max-frames", &o.max_frames, 1, 1 << 24, &st)))
            || (!speaker && ct_args_str(&a, "--class-names", &o.classes, &st))
            || ct_args_int(&a, "--batch", &o.batch, 1, 1 << 16, &st) || ct_args_int(&a, "--threads", &o.threads, 1, 1024, &st)
            || cli_opt_parse(&a, ct_train_opt_table, CT_CMD_EVAL, &o.dev, NULL, &st)
            || cli_opt_parse(&a, d->eval_opts, CT_CMD_EVAL, flags, &given, &st))
            continue;
        char see[96];
        snprintf(see, sizeof see, "ctrain eval %s --help", d->name);
        st = ct_args_unknown(&a, see);
    }
    if (st == CT_OK && !o.weights && !speaker)
        st = ct_fail(CT_EINVAL, "--weights FILE.h5 is required (the weights written by `ctrain train %s --out`)", d->name);
    if (st == CT_OK && (!o.weights || !o.data || !o.trials) && speaker)
        st = ct_fail(CT_EINVAL, "missing %s (see ctrain eval %s --help)",
                     !o.weights ? "--weights FILE.h5" : !o.data ? "--data FEATS.h5" : "--trials FILE", d->name);
    const ct_backend *be = NULL;
    if (st == CT_OK) st = cli_open_device(o.dev.device, o.dev.tf32, o.dev.deterministic, o.dev.precision, &be);
    if (st != CT_OK) { fprintf(stderr, "ctrain eval: %s\n", ct_last_error()); free(cfg); free(flags); return 2; }
    ct_threads_set(o.threads);
    ct_interrupt_install();
    d->defaults(cfg);
    st = evaluate(d, cfg, flags, given, &o, be);
    free(cfg);
    free(flags);
    if (st == CT_EINTR) {
        fprintf(stderr, "ctrain eval: %s; nothing written\n", ct_last_error());
        return 128 + ct_interrupt_signal();
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain eval: %s\n", ct_last_error()); return 1; }
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    char names[256];
    ct_model_names(names, sizeof names, 1);
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        FILE *out = argc < 1 ? stderr : stdout;
        fprintf(out, "usage: ctrain eval MODEL [options]\n\nmodels:\n");
        for (int i = 0; ct_models[i]; i++)
            if (ct_models[i]->eval_config)
                fprintf(out, "  %-14s %s\n", ct_models[i]->name, ct_models[i]->task == CT_TASK_SPEAKER
                        ? "EER and minDCF on a speaker-verification trial list" : "loss, accuracy and confusion matrix on its test set");
        fprintf(out, "\n`ctrain eval MODEL --help` lists the model's options.\n");
        return argc < 1 ? 2 : 0;
    }
    const ct_model_descriptor *d = ct_model_find(argv[0]);
    if (!d || !d->eval_config) {
        fprintf(stderr, "ctrain eval: %s model '%s' (models: %s)\n", d ? "no evaluation for" : "unknown", argv[0], names);
        return 2;
    }
    return eval_model(d, argc - 1, argv + 1);
}
