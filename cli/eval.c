/* eval.c - `ctrain eval MODEL`: evaluate trained weights.
 *
 *   ctrain eval siamese-lstm --model run.h5 --data feats.h5 --trials veri_test.txt
 *   ctrain eval siamese-cnn  --model run.h5 --data feats.h5 --trials veri_test.txt
 *
 * loads the weights and a feature store (written by `ctrain prep voxceleb`),
 * embeds every utterance of the trial list once (whole, up to --max-frames),
 * scores each trial as -distance between the two embeddings and prints the
 * number of trials, the EER and minDCF at p_target 0.01 and 0.05 (see
 * train/verify.h for the exact definitions; the CNN embeds an utterance as the
 * mean of its windows' embeddings). The model is rebuilt from the description
 * its weights file records (train/model_desc.h); --scores, --det and --json
 * write the scores, the DET curve and the metrics (train/verify_report.h).
 * `ctrain eval cnn` is in cli/cnn.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "core/threads.h"
#include "io/corpus.h"
#include "io/featstore.h"
#include "io/h5.h"
#include "io/trials.h"
#include "io/weights.h"
#include "train/model_desc.h"
#include "models/siamese_cnn.h"
#include "models/siamese_lstm.h"
#include "models/speaker_model.h"
#include "train/train.h"
#include "train/verify.h"
#include "train/verify_report.h"

/* What eval writes besides its text: --scores, --det, --json (train/verify_report.h). */
typedef struct { const char *scores, *det, *json; } eval_files;

static int eval_files_parse(ct_args *a, eval_files *o, ct_status *st)
{
    return ct_args_str(a, "--scores", &o->scores, st) || ct_args_str(a, "--det", &o->det, st) || ct_args_str(a, "--json", &o->json, st);
}

#define EVAL_FILES_HELP \
    "outputs, besides the text:\n" \
    "  --scores FILE         one line per trial: SCORE LABEL PATH1 PATH2, in the list's order; SCORE is minus\n" \
    "                        the distance: higher = more likely the same speaker (NIST's convention)\n" \
    "  --det FILE.svg        the DET curve: miss rate against false-alarm rate on normal-deviate axes,\n" \
    "                        with the EER and the minDCF operating points marked\n" \
    "  --json FILE           EER and its threshold, minDCF at p_target 0.01 and 0.05 with their\n" \
    "                        thresholds and operating points, and the counts\n"

/* Prints the note about settings an older weights file does not record. */
static void eval_note(const model_desc *d)
{
    char note[1024];
    if (ct_model_desc_note(d, note, sizeof note)) fprintf(stderr, "ctrain eval: note: %s\n", note);
}

static void eval_siamese_help(void)
{
    printf("usage: ctrain eval siamese-lstm --model FILE.h5 --data FEATS.h5 --trials TRIALS.txt [options]\n\n"
           "Scores a speaker-verification trial list with trained siamese-LSTM weights: every utterance of\n"
           "the list is embedded once, whole (not cropped), and a trial's score is minus the Euclidean\n"
           "distance between its two embeddings. Prints the trials scored, the equal error rate (EER) and\n"
           "the minimum detection cost (minDCF, C_miss = C_fa = 1) at p_target 0.01 and 0.05.\n\n"
           "inputs:\n"
           "  --model FILE.h5       weights written by `ctrain train siamese-lstm --out`\n"
           "  --data FEATS.h5       feature store written by `ctrain prep voxceleb`\n"
           "  --trials FILE         trial list, VoxCeleb format: 'LABEL PATH1 PATH2' per line (1 = same speaker),\n"
           "                        paths relative to the corpus's wav/ directory\n"
           "model: the weights file describes it (sizes, options and the feature settings of its training\n"
           "data; train/model_desc.h), so no flag is needed, a flag that contradicts the file is refused,\n"
           "and so is a feature store made with other settings. For files written by an older ctrain,\n"
           "which record less, these give what is missing (a note names it):\n"
           "  --mels N              features per frame (default: the feature store's)\n"
           "  --hidden N            LSTM units (default 128)\n"
           "  --layers N            stacked LSTM layers (default 1)\n"
           "  --embed N             embedding size (default 64)\n"
           "  --recurrent NAME      sigmoid or hard_sigmoid gate activation (default sigmoid)\n"
           "  --pool WHAT           last or mean (default last: files without it were trained so; `ctrain train`\n"
           "                        defaults to mean, and last is the seed's model, the one `ctrain time` times)\n"
           EVAL_FILES_HELP
           "evaluation:\n"
           "  --batch N             utterances embedded at once, sorted by length (default 32)\n"
           "  --max-frames N        longer utterances are cut to their first N frames (default 3000 = 30 s)\n"
           "  --threads N           CPU threads for OpenBLAS (default: all cores)\n"
           CLI_DEVICE_HELP);
}

/* Loads the feature store; --mels (if given) must match it. */
static ct_status load_store(ct_corpus *c, const char *data, int mels, double *seconds)
{
    double t0 = ct_now();
    CT_TRY(ct_featstore_load(c, data));
    *seconds = ct_now() - t0;
    if (mels && mels != c->n_mels)
        return ct_fail(CT_EINVAL, "--mels %d, but %s has %d features per frame; pass the store the model was trained on",
                       mels, data, c->n_mels);
    return CT_OK;
}

/* The part every `eval siamese-*` shares once its model is built and loaded:
 * the trial list, the header, embedding and scoring, and the report. */
static ct_status eval_trials(speaker_model *sm, const char *model_line, const ct_corpus *c, const char *data, double load_s,
                             const char *trials, int batch, int max_frames, int threads, const char *model, const eval_files *ef)
{
    ct_trial *t = NULL;
    float *scores = NULL;
    int n = 0;
    ct_verify_result r;
    ct_status st = ct_trials_load(&t, &n, trials, c);
    if (st == CT_OK && !(scores = ct_malloc((size_t)n * sizeof *scores, "trial scores"))) st = CT_ENOMEM;
    if (st == CT_OK) {
        cli_print_header(stdout, threads);
        printf("Model: %s\n", model_line);
        printf("Data: %s, %d utterances of %d speakers (loaded in %.1fs); trials: %s\n", data, c->n_utt, c->n_speakers,
               load_s, trials);
        fflush(stdout);
        st = ct_verify_trials_ex(sm, c, t, n, batch, max_frames, &r, scores);
    }
    if (st == CT_OK) {
        printf("Embedded %d utterances (batches of %d%s", r.n_utts, r.batch_used,
               sm->whole_utterances ? "" : " windows");
        if (!sm->whole_utterances) printf(" of %d frames, hop %d, averaged per utterance", sm->frames, sm->frames / 2 > 0 ? sm->frames / 2 : 1);
        if (r.n_cut) printf("; %d longer than %d frames cut to that", r.n_cut, max_frames);
        printf(") in %.1fs\n", r.seconds);
        printf("Trials: %d scored (%d same speaker, %d different)\n", r.n_trials, r.n_same, r.n_trials - r.n_same);
        printf("EER: %.2f%% (threshold %.4f)\n", 100.0 * r.eer, r.eer_threshold);
        printf("minDCF(p=0.01): %.4f\n", r.dcf01);
        printf("minDCF(p=0.05): %.4f\n", r.dcf05);
        st = ct_verify_reports_write(ef->scores, ef->det, ef->json, &r, scores, t, n, c, model, data, trials);
        if (st == CT_OK && ef->scores) printf("scores written to %s\n", ef->scores);
        if (st == CT_OK && ef->det) printf("DET curve written to %s\n", ef->det);
        if (st == CT_OK && ef->json) printf("metrics written to %s\n", ef->json);
    }
    free(t);
    free(scores);
    return st;
}

/* Exit status of an eval command: 1 with the message on failure. */
static int eval_exit(ct_status st)
{
    if (st != CT_OK) { fprintf(stderr, "ctrain eval: %s\n", ct_last_error()); return 1; }
    return 0;
}

/* --device DEV, --tf32, --deterministic (cli/cli.h); 1 if argv[a->i] was one of them. */
static int device_opt(ct_args *a, const char **device, int *tf32, int *deterministic, ct_status *st)
{
    return ct_args_str(a, "--device", device, st) || (ct_args_flag(a, "--tf32") && (*tf32 = 1))
        || (ct_args_flag(a, "--deterministic") && (*deterministic = 1));
}

static int eval_siamese(int argc, char **argv)
{
    siamese_lstm_config mc;
    model_desc_lstm_flags fl = { 0 };   /* given or not: the weights file decides (train/model_desc.h) */
    eval_files ef = { 0 };
    const char *model = NULL, *data = NULL, *trials = NULL, *device = "cpu";
    int batch = 32, max_frames = 3000, threads = ct_cpu_count(), tf32 = 0, deterministic = 0;
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) { eval_siamese_help(); return 0; }
        if (ct_args_str(&a, "--model", &model, &st) || ct_args_str(&a, "--data", &data, &st)
            || ct_args_str(&a, "--trials", &trials, &st) || ct_args_str(&a, "--recurrent", &fl.recurrent, &st)
            || ct_args_str(&a, "--pool", &fl.pool, &st) || eval_files_parse(&a, &ef, &st)
            || ct_args_int(&a, "--mels", &fl.mels, 1, 4096, &st) || ct_args_int(&a, "--hidden", &fl.hidden, 1, 65536, &st)
            || ct_args_int(&a, "--layers", &fl.layers, 1, LSTM_MAX_LAYERS, &st) || ct_args_int(&a, "--embed", &fl.embed, 1, 65536, &st)
            || ct_args_int(&a, "--batch", &batch, 1, 1 << 16, &st) || ct_args_int(&a, "--max-frames", &max_frames, 1, 1 << 24, &st)
            || ct_args_int(&a, "--threads", &threads, 1, 1024, &st) || device_opt(&a, &device, &tf32, &deterministic, &st))
            continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain eval siamese-lstm --help)", argv[a.i]);
    }
    if (st == CT_OK && (!model || !data || !trials))
        st = ct_fail(CT_EINVAL, "missing %s (see ctrain eval siamese-lstm --help)",
                     !model ? "--model FILE.h5" : !data ? "--data FEATS.h5" : "--trials FILE");
    const ct_ops *ops = NULL;
    if (st == CT_OK) st = cli_open_device(device, tf32, deterministic, &ops);
    if (st != CT_OK) { fprintf(stderr, "ctrain eval: %s\n", ct_last_error()); return 2; }
    ct_threads_set(threads);

    ct_corpus c = { 0 };
    siamese_lstm m = { 0 };
    static model_desc d;
    int built = 0, store_mels = 0;
    double load_s = 0;
    st = ct_model_desc_read(&d, model, "siamese-lstm");
    if (st == CT_OK) st = ct_model_desc_check_store(&d, data, &store_mels);
    if (st == CT_OK) st = ct_model_desc_lstm_config(&d, &fl, store_mels, &mc);
    if (st == CT_OK) eval_note(&d);
    if (st == CT_OK) st = load_store(&c, data, mc.n_mels, &load_s);
    if (st == CT_OK) { st = ct_siamese_lstm_build(&m, &mc); built = 1; }
    if (st == CT_OK) st = ct_weights_load(model, "siamese-lstm", &m.params, NULL);
    if (st == CT_OK) st = ct_siamese_lstm_set_device(&m, ops);   /* copies the loaded weights there */
    if (st == CT_OK) {
        char line[512];
        snprintf(line, sizeof line, "siamese-lstm %s: %d mels -> LSTM %d%s -> %s -> dense %d, %zu parameters", model, mc.n_mels,
                 mc.hidden, mc.layers > 1 ? " (stacked)" : "", mc.pool == LSTM_RETURN_MEAN ? "mean over time" : "last hidden state",
                 mc.embed, ct_params_count(&m.params));
        speaker_model sm = ct_speaker_model_lstm(&m);
        st = eval_trials(&sm, line, &c, data, load_s, trials, batch, max_frames, threads, model, &ef);
    }
    if (built) ct_siamese_lstm_free(&m);
    ct_corpus_free(&c);
    return eval_exit(st);
}

static void eval_siamese_cnn_help(void)
{
    printf("usage: ctrain eval siamese-cnn --model FILE.h5 --data FEATS.h5 --trials TRIALS.txt [options]\n\n"
           "Scores a speaker-verification trial list with trained siamese-CNN weights. The CNN sees crops of a\n"
           "fixed number of frames, so every utterance of the list is cut into windows of that many frames\n"
           "(hop half a window, the last one aligned to the utterance's end; a shorter utterance is one\n"
           "zero-padded window), each window is embedded (batchnorm with its running statistics) and the\n"
           "utterance's embedding is the mean of its windows'. A trial's score is minus the Euclidean\n"
           "distance between its two embeddings. Prints the trials scored, the equal error rate (EER) and\n"
           "the minimum detection cost (minDCF, C_miss = C_fa = 1) at p_target 0.01 and 0.05.\n\n"
           "inputs:\n"
           "  --model FILE.h5       weights written by `ctrain train siamese-cnn --out` (they record the\n"
           "                        architecture and the window length)\n"
           "  --data FEATS.h5       feature store written by `ctrain prep voxceleb`\n"
           "  --trials FILE         trial list, VoxCeleb format: 'LABEL PATH1 PATH2' per line (1 = same speaker),\n"
           "                        paths relative to the corpus's wav/ directory\n"
           "  --mels N              features per frame (default: the weights file's, or the store's for files\n"
           "                        written by an older ctrain); a store made with other feature settings than\n"
           "                        the model's training data is refused\n"
           EVAL_FILES_HELP
           "evaluation:\n"
           "  --batch N             windows embedded at once (default 128)\n"
           "  --max-frames N        longer utterances are cut to their first N frames (default 3000 = 30 s)\n"
           "  --threads N           CPU threads for OpenBLAS (default: all cores)\n"
           CLI_DEVICE_HELP);
}

static int eval_siamese_cnn(int argc, char **argv)
{
    const char *model = NULL, *data = NULL, *trials = NULL, *device = "cpu";
    int batch = 128, max_frames = 3000, threads = ct_cpu_count(), mels = 0, tf32 = 0, deterministic = 0;
    eval_files ef = { 0 };
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) { eval_siamese_cnn_help(); return 0; }
        if (ct_args_str(&a, "--model", &model, &st) || ct_args_str(&a, "--data", &data, &st)
            || ct_args_str(&a, "--trials", &trials, &st) || ct_args_int(&a, "--mels", &mels, 1, 4096, &st)
            || eval_files_parse(&a, &ef, &st)
            || ct_args_int(&a, "--batch", &batch, 1, 1 << 16, &st) || ct_args_int(&a, "--max-frames", &max_frames, 1, 1 << 24, &st)
            || ct_args_int(&a, "--threads", &threads, 1, 1024, &st) || device_opt(&a, &device, &tf32, &deterministic, &st))
            continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain eval siamese-cnn --help)", argv[a.i]);
    }
    if (st == CT_OK && (!model || !data || !trials))
        st = ct_fail(CT_EINVAL, "missing %s (see ctrain eval siamese-cnn --help)",
                     !model ? "--model FILE.h5" : !data ? "--data FEATS.h5" : "--trials FILE");
    const ct_ops *ops = NULL;
    if (st == CT_OK) st = cli_open_device(device, tf32, deterministic, &ops);
    if (st != CT_OK) { fprintf(stderr, "ctrain eval: %s\n", ct_last_error()); return 2; }
    ct_threads_set(threads);

    ct_corpus c = { 0 };
    static siamese_cnn m;   /* large: the tower's layer table */
    memset(&m, 0, sizeof m);
    siamese_cnn_config mc;
    static model_desc d;
    int built = 0, store_mels = 0;
    double load_s = 0;
    st = ct_model_desc_read(&d, model, "siamese-cnn");   /* the spec, the window length, the feature settings */
    if (st == CT_OK) st = ct_model_desc_check_store(&d, data, &store_mels);
    if (st == CT_OK) st = ct_model_desc_cnn_config(&d, mels, store_mels, &mc);
    if (st == CT_OK) eval_note(&d);
    if (st == CT_OK) st = load_store(&c, data, mc.n_mels, &load_s);
    if (st == CT_OK) { st = ct_siamese_cnn_build(&m, &mc); built = st == CT_OK; }
    if (st == CT_OK) st = ct_weights_load(model, "siamese-cnn", &m.enc.params, &m.enc.buffers);
    if (st == CT_OK) st = ct_siamese_cnn_set_device(&m, ops);   /* copies the loaded weights there */
    if (st == CT_OK) {
        char line[1536];
        snprintf(line, sizeof line, "siamese-cnn %s: %dx%d -> %s, %zu parameters", model, mc.frames, mc.n_mels, m.cfg.spec,
                 ct_params_count(&m.enc.params));
        speaker_model sm = ct_speaker_model_cnn(&m);
        st = eval_trials(&sm, line, &c, data, load_s, trials, batch, max_frames, threads, model, &ef);
    }
    if (built) ct_siamese_cnn_free(&m);
    ct_corpus_free(&c);
    return eval_exit(st);
}

int cmd_eval(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        FILE *out = argc < 1 ? stderr : stdout;
        fprintf(out, "usage: ctrain eval MODEL [options]\n\nmodels:\n"
                     "  siamese-lstm   EER and minDCF on a speaker-verification trial list\n"
                     "  siamese-cnn    the same for the CNN speaker encoder\n"
                     "  cnn            loss, accuracy and confusion matrix of a trained CNN on its test set\n\n"
                     "`ctrain eval MODEL --help` lists the model's options.\n");
        return argc < 1 ? 2 : 0;
    }
    if (!strcmp(argv[0], "siamese-lstm")) return eval_siamese(argc - 1, argv + 1);
    if (!strcmp(argv[0], "siamese-cnn")) return eval_siamese_cnn(argc - 1, argv + 1);
    if (!strcmp(argv[0], "cnn")) return eval_cnn(argc - 1, argv + 1);
    fprintf(stderr, "ctrain eval: unknown model '%s' (models: siamese-lstm, siamese-cnn, cnn)\n", argv[0]);
    return 2;
}
