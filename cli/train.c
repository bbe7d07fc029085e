/* train.c - `ctrain train MODEL`: builds the model and its data, wires them
 * into the shared training loop (train/train.h), prints the Keras-style log
 * and writes the weights.
 *
 * Models:
 *   siamese-lstm  pairs of utterances -> shared LSTM -> dense -> distance -> contrastive loss
 *   siamese-cnn   pairs of log-mel crops -> shared CNN (models/siamese_cnn.h) -> distance -> contrastive loss
 *   small-cnn     images -> conv/batchnorm/relu/maxpool/dropout/dense -> softmax cross-entropy
 * Data: --data synthetic generates a corpus from the seed (see io/corpus.h, io/images.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/common.h"
#include "core/rng.h"
#include "core/threads.h"
#include "train/checkpoint.h"
#include "io/corpus.h"
#include "io/featstore.h"
#include "io/trials.h"
#include "io/images.h"
#include "io/weights.h"
#include "train/model_desc.h"
#include "models/siamese_cnn.h"
#include "models/siamese_lstm.h"
#include "train/image_task.h"
#include "models/small_cnn.h"
#include "models/speaker_model.h"
#include "train/speaker_task.h"
#include "train/train.h"

/* ---- siamese speaker models (siamese-lstm, siamese-cnn) on a speaker corpus ----
 * Both train on the same pairs with the same options, log and checkpoints; they
 * differ only in the model they build. The shared part is a siamese_run. */
typedef struct {
    cli_train_opts o;
    ct_synth_config sc;
    speaker_task_config tc;
    const char *val_split, *trials_path;
    float val_fraction;
    ct_fit_config fit;
    ct_rngs rngs;
    ct_corpus corpus;
    ct_trial *trials;
    int n_trials, *trial_speakers;
    speaker_task s;
} siamese_run;

static void siamese_run_defaults(siamese_run *r)
{
    memset(r, 0, sizeof *r);
    r->o = (cli_train_opts){ .data = "synthetic", .device = "cpu", .epochs = 5, .batch = 128, .threads = ct_cpu_count(),
                             .seed = 1, .progress = -1, .step_size = 10, .gamma = 0.1f };
    r->sc = (ct_synth_config){ .speakers = 40, .utts_per_speaker = 12, .min_frames = 100, .max_frames = 300,
                               .n_mels = 40, .noise = 2.0f, .seed = 1 };
    r->tc = (speaker_task_config){ .pairs = 6000, .val_pairs = 2000, .val_split = CT_VAL_SPEAKERS, .val_fraction = 0.25 };
    r->val_split = "speakers";
    r->val_fraction = 0.25f;
}

/* --resume: the checkpoint's training and data options become the defaults. */
static void siamese_run_from_meta(siamese_run *r, const ct_kv *t)
{
    cli_train_from_meta(t, &r->o);
    ct_kv_int(t, "speakers", &r->sc.speakers); ct_kv_int(t, "utts", &r->sc.utts_per_speaker); ct_kv_float(t, "noise", &r->sc.noise);
    ct_kv_long(t, "pairs", &r->tc.pairs); ct_kv_long(t, "val_pairs", &r->tc.val_pairs);
    ct_kv_str(t, "val_split", &r->val_split); ct_kv_float(t, "val_fraction", &r->val_fraction);
    ct_kv_str(t, "trials", &r->trials_path);
}

/* The shared training options and the pair and data options; 1 if argv[a->i] was one. */
static int siamese_run_parse(ct_args *a, siamese_run *r, ct_status *st)
{
    return cli_parse_train_opt(a, &r->o, st)
        || ct_args_str(a, "--val-split", &r->val_split, st) || ct_args_str(a, "--trials", &r->trials_path, st)
        || ct_args_float(a, "--val-fraction", &r->val_fraction, 0.01f, 0.99f, st)
        || ct_args_int(a, "--speakers", &r->sc.speakers, 4, 1000000, st) || ct_args_int(a, "--utts", &r->sc.utts_per_speaker, 2, 100000, st)
        || ct_args_float(a, "--noise", &r->sc.noise, 0, 1e3f, st)
        || ct_args_long(a, "--pairs", &r->tc.pairs, 1, 100000000L, st) || ct_args_long(a, "--val-pairs", &r->tc.val_pairs, 0, 100000000L, st);
}

static const char *SIAMESE_DATA_HELP =
    "pairs:\n"
    "  --pairs N             training pairs per epoch, half same-speaker (default %ld)\n"
    "  --val-pairs N         validation pairs (default 2000)\n"
    "  --val-split WHAT      speakers: validate on held-out speakers (default, open-set);\n"
    "                        videos: on a held-out video of each training speaker\n"
    "  --val-fraction X      share of speakers held out with --val-split speakers (default 0.25)\n"
    "  --trials FILE         a trial list in the VoxCeleb format over the feature store: its\n"
    "                        speakers become the validation speakers (never trained on) and the\n"
    "                        equal error rate on it is reported as val_eer after every epoch\n"
    "data:\n"
    "  --data FEATS.h5       a feature store written by `ctrain prep voxceleb`, or `synthetic`\n"
    "synthetic data (--data synthetic):\n"
    "  --speakers N          speakers (default 40)\n"
    "  --utts N              utterances per speaker (default 12)\n"
    "  --noise X             noise level; larger is harder (default 2)\n"
    "training:\n";

/* After parsing: the optimizer and callbacks (default optimizer `opt`) and --val-split. */
static ct_status siamese_run_finish_opts(siamese_run *r, ct_optim_kind opt)
{
    CT_TRY(cli_finish_train_opts(&r->o, &r->fit, opt));
    if (!strcmp(r->val_split, "speakers")) r->tc.val_split = CT_VAL_SPEAKERS;
    else if (!strcmp(r->val_split, "videos")) r->tc.val_split = CT_VAL_VIDEOS;
    else return ct_fail(CT_EINVAL, "--val-split %s: use speakers or videos", r->val_split);
    return CT_OK;
}

/* Loads the training corpus named by --data: "synthetic" generates one from the seed. */
static ct_status load_corpus(ct_corpus *c, const char *data, ct_synth_config *sc)
{
    if (!strcmp(data, "synthetic")) return ct_corpus_synthetic(c, sc);
    return ct_featstore_load(c, data);   /* a feature store written by `ctrain prep voxceleb` */
}

/* Seeds the streams, loads the corpus (crops of `frames` frames of `n_mels`
 * features) and the trial list, whose speakers become the validation speakers. */
static ct_status siamese_run_load(siamese_run *r, int n_mels, int frames)
{
    speaker_task_config *tc = &r->tc;
    tc->batch = r->o.batch;
    tc->seed = (uint64_t)r->o.seed;
    tc->val_fraction = r->val_fraction;
    r->sc.seed = tc->seed;
    r->sc.n_mels = n_mels;
    if (r->sc.min_frames < frames) r->sc.min_frames = frames;
    if (r->sc.max_frames < r->sc.min_frames) r->sc.max_frames = r->sc.min_frames;
    ct_rngs_seed(&r->rngs, tc->seed);
    ct_status st = load_corpus(&r->corpus, r->o.data, &r->sc);
    if (st != CT_OK || !r->trials_path) return st;
    ct_corpus *c = &r->corpus;
    st = ct_trials_load(&r->trials, &r->n_trials, r->trials_path, c);
    /* the trial speakers are the validation speakers: none of them is trained on */
    unsigned char *in_trials = st == CT_OK ? ct_calloc((size_t)c->n_speakers, 1, "trial speakers") : NULL;
    r->trial_speakers = in_trials ? ct_malloc((size_t)c->n_speakers * sizeof(int), "trial speakers") : NULL;
    if (st == CT_OK && !r->trial_speakers) st = CT_ENOMEM;
    for (int k = 0; st == CT_OK && k < r->n_trials; k++)
        in_trials[c->utt[r->trials[k].a].speaker] = in_trials[c->utt[r->trials[k].b].speaker] = 1;
    for (int sp = 0; st == CT_OK && sp < c->n_speakers; sp++)
        if (in_trials[sp]) r->trial_speakers[tc->n_val_speakers++] = sp;
    free(in_trials);
    if (st == CT_OK && tc->val_split == CT_VAL_SPEAKERS) tc->val_speakers = r->trial_speakers;
    tc->trials = r->trials;
    tc->n_trials = r->n_trials;
    tc->trial_batch = 32;
    tc->trial_max_frames = 3000;
    return st;
}

/* Starts the data pipeline for model sm (built, planned, weights initialised),
 * prints the header, the "Model: <model_line>" and data lines, records the
 * training options in meta (whose model name and model_cfg the caller filled)
 * and trains. */
static ct_status siamese_run_fit(siamese_run *r, const speaker_model *sm, const char *model_line, ct_ckpt_meta *meta)
{
    CT_TRY(ct_speaker_task_init(&r->s, &r->tc, &r->corpus, sm, &r->rngs, stderr));
    const cli_train_opts *o = &r->o;
    cli_print_header(stdout, o->threads);
    printf("Model: %s\n", model_line);
    printf("Data: %s, %d utterances of %d speakers; validation on %s (%d training, %d validation speakers); "
           "%s lr %g, batch %d pairs\n", o->data, r->corpus.n_utt, r->corpus.n_speakers,
           r->tc.val_split == CT_VAL_SPEAKERS ? (r->trials ? "the trial list's speakers" : "held-out speakers") : "held-out videos",
           r->s.n_train_speakers, r->s.n_val_speakers, ct_optim_name(r->fit.optim.kind), r->fit.optim.lr, o->batch);
    if (r->trials) printf("Trials: %s, %d trials; val_eer after every epoch\n", r->trials_path, r->n_trials);
    ct_task task = ct_speaker_task_ops(&r->s);
    CT_TRY(ct_model_desc_features(&meta->model_cfg, o->data));   /* what eval checks a feature store against */
    ct_kv *kt = &meta->train_cfg;
    cli_train_to_meta(kt, o, &r->fit);
    ct_kv_set_str(kt, "data", o->data); ct_kv_set_int(kt, "speakers", r->sc.speakers); ct_kv_set_int(kt, "utts", r->sc.utts_per_speaker);
    ct_kv_set_num(kt, "noise", r->sc.noise); ct_kv_set_int(kt, "pairs", r->tc.pairs); ct_kv_set_int(kt, "val_pairs", r->tc.val_pairs);
    ct_kv_set_str(kt, "val_split", r->val_split); ct_kv_set_num(kt, "val_fraction", r->val_fraction);
    if (r->trials_path) ct_kv_set_str(kt, "trials", r->trials_path);
    r->fit.meta = meta;
    r->fit.rngs = &r->rngs;
    return ct_fit(&task, &r->fit, NULL, stdout);
}

static void siamese_run_free(siamese_run *r)
{
    ct_speaker_task_free(&r->s);
    ct_corpus_free(&r->corpus);
    free(r->trials);
    free(r->trial_speakers);
}

/* The end of a run: report a failure (exit 1) or success (exit 0). */
static int siamese_run_exit(ct_status st)
{
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 1; }
    return 0;
}

/* siamese-lstm's training defaults, chosen by measurement on corpora unlike the demo's (README,
 * "Choosing the defaults"): a larger learning rate with a cosine schedule, and 10,000 pairs x 6
 * epochs, beat RMSprop's lr 1e-3 and 6,000 x 5 there. siamese-cnn keeps the shared ones. */
#define LSTM_DEFAULT_PAIRS    10000L
#define LSTM_DEFAULT_EPOCHS   6
#define LSTM_DEFAULT_LR       3e-3
#define LSTM_DEFAULT_SCHEDULE "cosine"

static int train_siamese(int argc, char **argv)
{
    static siamese_run r;
    siamese_run_defaults(&r);
    r.tc.pairs = LSTM_DEFAULT_PAIRS;
    r.o.epochs = LSTM_DEFAULT_EPOCHS;
    r.o.schedule = LSTM_DEFAULT_SCHEDULE;
    siamese_lstm_config mc = ct_siamese_lstm_defaults();
    /* The embedding pools the mean over time by default: on corpora unlike the demo's it gives a far better
     * model (README). ct_siamese_lstm_defaults() stays the seed's exact model (the last hidden state), which
     * `ctrain time` times and --pool last reproduces. */
    const char *recurrent = "sigmoid", *pool = "mean";
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    static ct_ckpt_meta rm, meta;
    int resuming = 0;
    st = cli_resume_meta(argc, argv, "siamese-lstm", &rm, &resuming);
    if (resuming) {
        const ct_kv *m = &rm.model_cfg;
        siamese_run_from_meta(&r, &rm.train_cfg);
        pool = "last";   /* a checkpoint that does not record it was trained so */
        ct_kv_int(m, "n_mels", &mc.n_mels); ct_kv_int(m, "frames", &mc.frames); ct_kv_int(m, "hidden", &mc.hidden);
        ct_kv_int(m, "layers", &mc.layers); ct_kv_int(m, "embed", &mc.embed); ct_kv_float(m, "margin", &mc.margin);
        ct_kv_float(m, "threshold", &mc.threshold); ct_kv_str(m, "recurrent", &recurrent); ct_kv_str(m, "pool", &pool);
    }
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            printf("usage: ctrain train siamese-lstm [options]\n\n"
                   "Trains the siamese LSTM speaker-verification model: two utterances -> shared LSTM ->\n"
                   "mean over time -> dense embedding -> Euclidean distance -> contrastive loss. The seed\n"
                   "experiment's exact model, which `ctrain time siamese-lstm` times, embeds the LSTM's last\n"
                   "hidden state instead: --pool last.\n\n"
                   "model:\n"
                   "  --mels N              features per frame (default 40)\n"
                   "  --frames N            frames per utterance crop (default 100 = 1 s)\n"
                   "  --hidden N            LSTM units (default 128)\n"
                   "  --layers N            stacked LSTM layers (default 1)\n"
                   "  --embed N             embedding size (default 64)\n"
                   "  --margin X            contrastive margin (default 1)\n"
                   "  --recurrent NAME      sigmoid or hard_sigmoid gate activation (default sigmoid)\n"
                   "  --pool WHAT           mean: the LSTM's mean over the utterance's frames feeds the embedding\n"
                   "                        (default); last: its last hidden state (the seed's model, far weaker:\n"
                   "                        see the README)\n");
            printf(SIAMESE_DATA_HELP, LSTM_DEFAULT_PAIRS);
            printf(CLI_TRAIN_HELP, LSTM_DEFAULT_EPOCHS, 128, "rmsprop", LSTM_DEFAULT_LR, LSTM_DEFAULT_SCHEDULE);
            return 0;
        }
        if (siamese_run_parse(&a, &r, &st)) continue;
        if (ct_args_int(&a, "--mels", &mc.n_mels, 1, 4096, &st) || ct_args_int(&a, "--frames", &mc.frames, 1, 100000, &st)
            || ct_args_int(&a, "--hidden", &mc.hidden, 1, 65536, &st) || ct_args_int(&a, "--layers", &mc.layers, 1, LSTM_MAX_LAYERS, &st)
            || ct_args_int(&a, "--embed", &mc.embed, 1, 65536, &st) || ct_args_float(&a, "--margin", &mc.margin, 1e-6f, 1e6f, &st)
            || ct_args_str(&a, "--recurrent", &recurrent, &st) || ct_args_str(&a, "--pool", &pool, &st))
            continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain train siamese-lstm --help)", argv[a.i]);
    }
    if (!(r.o.lr > 0) && (!r.o.optimizer || !strcmp(r.o.optimizer, "rmsprop")))
        r.o.lr = (float)LSTM_DEFAULT_LR;   /* another --optimizer keeps its own default rate */
    if (st == CT_OK) st = siamese_run_finish_opts(&r, OPT_RMSPROP);
    if (st == CT_OK) {
        if (!strcmp(recurrent, "sigmoid")) mc.recurrent = LSTM_SIGMOID;
        else if (!strcmp(recurrent, "hard_sigmoid")) mc.recurrent = LSTM_HARD_SIGMOID;
        else st = ct_fail(CT_EINVAL, "--recurrent %s: use sigmoid or hard_sigmoid", recurrent);
    }
    if (st == CT_OK) {
        if (!strcmp(pool, "last")) mc.pool = LSTM_RETURN_LAST;
        else if (!strcmp(pool, "mean")) mc.pool = LSTM_RETURN_MEAN;
        else st = ct_fail(CT_EINVAL, "--pool %s: use last or mean", pool);
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 2; }

    siamese_lstm m = { 0 };
    st = siamese_run_load(&r, mc.n_mels, mc.frames);
    if (st == CT_OK) st = ct_siamese_lstm_build(&m, &mc);
    if (st == CT_OK) {
        ct_siamese_lstm_init_weights(&m, &r.rngs.init);
        st = ct_siamese_lstm_set_device(&m, r.o.ops);
    }
    if (st == CT_OK) st = ct_siamese_lstm_plan(&m, r.o.batch);
    if (st == CT_OK) {
        char line[512];
        snprintf(line, sizeof line, "siamese-lstm %dx%d -> LSTM %d%s -> %s -> dense %d -> euclidean -> contrastive (margin %g), "
                 "%zu parameters", mc.n_mels, mc.frames, mc.hidden, mc.layers > 1 ? " (stacked)" : "",
                 mc.pool == LSTM_RETURN_MEAN ? "mean over time" : "last hidden state", mc.embed, mc.margin,
                 ct_params_count(&m.params));
        snprintf(meta.model, sizeof meta.model, "siamese-lstm");
        ct_model_desc_lstm(&meta.model_cfg, &mc);
        speaker_model sm = ct_speaker_model_lstm(&m);
        st = siamese_run_fit(&r, &sm, line, &meta);
    }
    /* the model's description (train/model_desc.h) beside the weights: eval rebuilds the model from it */
    if (st == CT_OK && r.o.out) st = ct_weights_save_kv(r.o.out, "siamese-lstm", &m.params, NULL, &meta.model_cfg, NULL);
    if (st == CT_OK && r.o.out) printf("weights written to %s\n", r.o.out);
    siamese_run_free(&r);
    ct_siamese_lstm_free(&m);
    return siamese_run_exit(st);
}

static int train_siamese_cnn(int argc, char **argv)
{
    static siamese_run r;
    siamese_run_defaults(&r);
    siamese_cnn_config mc = ct_siamese_cnn_defaults();
    const char *arch = NULL;
    int embed = 0;   /* --embed: 0 = what the spec outputs (64 for the default spec) */
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    static ct_ckpt_meta rm, meta;
    int resuming = 0;
    st = cli_resume_meta(argc, argv, "siamese-cnn", &rm, &resuming);
    if (resuming) {
        const ct_kv *m = &rm.model_cfg;
        siamese_run_from_meta(&r, &rm.train_cfg);
        ct_kv_int(m, "n_mels", &mc.n_mels); ct_kv_int(m, "frames", &mc.frames); ct_kv_str(m, "arch", &arch);
        ct_kv_float(m, "margin", &mc.margin); ct_kv_float(m, "threshold", &mc.threshold);
    }
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            printf("usage: ctrain train siamese-cnn [options]\n\n"
                   "Trains a CNN speaker encoder in the siamese set-up: two log-mel crops (images of frames x\n"
                   "mels) -> shared CNN (conv, batchnorm, relu, maxpool, mean over time, dense embedding) ->\n"
                   "Euclidean distance -> contrastive loss. Batchnorm's statistics are taken over both sides\n"
                   "of every pair in the batch; validation and evaluation use its running statistics.\n\n"
                   "model:\n"
                   "  --arch SPEC           the tower, layers separated by commas (models/seq_cnn.h); default\n"
                   "                        " SIAMESE_CNN_DEFAULT_SPEC "\n"
                   "                        layers: convFkK[sS][pP] denseU maxpoolK[sS] gap gaph flatten dropoutP\n"
                   "                        batchnorm relu tanh sigmoid; gaph = mean over time; the last layer's\n"
                   "                        output is the embedding\n"
                   "  --mels N              features per frame (default 40)\n"
                   "  --frames N            frames per utterance crop (default 100 = 1 s)\n"
                   "  --embed N             embedding size: the default spec's last dense layer (default 64); with\n"
                   "                        --arch it must equal the spec's output\n"
                   "  --margin X            contrastive margin (default 1)\n");
            printf(SIAMESE_DATA_HELP, 6000L);
            printf(CLI_TRAIN_HELP, 5, 128, "rmsprop", 1e-3, "constant");
            return 0;
        }
        if (siamese_run_parse(&a, &r, &st)) continue;
        if (ct_args_str(&a, "--arch", &arch, &st) || ct_args_int(&a, "--mels", &mc.n_mels, 1, 4096, &st)
            || ct_args_int(&a, "--frames", &mc.frames, 1, 100000, &st) || ct_args_int(&a, "--embed", &embed, 1, 65536, &st)
            || ct_args_float(&a, "--margin", &mc.margin, 1e-6f, 1e6f, &st))
            continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain train siamese-cnn --help)", argv[a.i]);
    }
    if (st == CT_OK) st = siamese_run_finish_opts(&r, OPT_RMSPROP);
    if (st == CT_OK) {
        mc.embed = embed;
        if (arch && strlen(arch) >= sizeof mc.spec) st = ct_fail(CT_EINVAL, "--arch: the spec is longer than %zu characters", sizeof mc.spec - 1);
        else if (arch) snprintf(mc.spec, sizeof mc.spec, "%s", arch);
        else snprintf(mc.spec, sizeof mc.spec, "%s,dense%d", SIAMESE_CNN_DEFAULT_BODY, embed ? embed : 64);
    }
    if (st == CT_OK && strlen(mc.spec) >= sizeof meta.model_cfg.e[0].str && (r.o.checkpoint || r.o.save_best))
        st = ct_fail(CT_EINVAL, "--arch: a checkpoint records specs of up to %zu characters, this one has %zu; shorten it "
                     "or train without --checkpoint/--save-best", sizeof meta.model_cfg.e[0].str - 1, strlen(mc.spec));
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 2; }

    static siamese_cnn m;   /* large: the tower's layer table */
    memset(&m, 0, sizeof m);
    st = siamese_run_load(&r, mc.n_mels, mc.frames);
    if (st == CT_OK) st = ct_siamese_cnn_build(&m, &mc);
    if (st == CT_OK) {
        ct_siamese_cnn_init_weights(&m, &r.rngs.init);
        st = ct_siamese_cnn_set_device(&m, r.o.ops);
    }
    if (st == CT_OK) st = ct_siamese_cnn_plan(&m, r.o.batch);
    if (st == CT_OK) {
        char line[1536];
        snprintf(line, sizeof line, "siamese-cnn %dx%d -> %s -> euclidean -> contrastive (margin %g), %zu parameters, "
                 "%.1f MFLOP per pair", mc.frames, mc.n_mels, m.cfg.spec, mc.margin, ct_params_count(&m.enc.params),
                 ct_siamese_cnn_step_flops(&m, 1) * 1e-6);
        snprintf(meta.model, sizeof meta.model, "siamese-cnn");
        ct_model_desc_cnn(&meta.model_cfg, &m.cfg);
        speaker_model sm = ct_speaker_model_cnn(&m);
        st = siamese_run_fit(&r, &sm, line, &meta);
    }
    /* the model's description (train/model_desc.h): eval rebuilds the tower from "arch" and embeds
     * windows of "frames" frames; the spec is written whole besides (a ct_kv string holds 159 characters) */
    const char *attrs[] = { "arch", m.cfg.spec, NULL };
    if (st == CT_OK && r.o.out) st = ct_weights_save_kv(r.o.out, "siamese-cnn", &m.enc.params, &m.enc.buffers, &meta.model_cfg, attrs);
    if (st == CT_OK && r.o.out) printf("weights written to %s\n", r.o.out);
    siamese_run_free(&r);
    ct_siamese_cnn_free(&m);
    return siamese_run_exit(st);
}

/* ---- small-cnn on synthetic images (a seq_cnn, trained as an image task: train/image_task.h) ---- */
static int train_small_cnn(int argc, char **argv)
{
    cli_train_opts o = { .data = "synthetic", .device = "cpu", .epochs = 5, .batch = 64, .threads = ct_cpu_count(),
                      .seed = 1, .progress = -1, .step_size = 10, .gamma = 0.1f };
    small_cnn_config mc = ct_small_cnn_defaults();
    int n_train = 4000, n_val = 1000;
    float noise = 0.6f;
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    static ct_ckpt_meta rm, meta;
    int resuming = 0;
    st = cli_resume_meta(argc, argv, "small-cnn", &rm, &resuming);
    if (resuming) {
        const ct_kv *m = &rm.model_cfg, *t = &rm.train_cfg;
        cli_train_from_meta(t, &o);
        ct_kv_int(m, "channels", &mc.channels); ct_kv_int(m, "height", &mc.height); ct_kv_int(m, "width", &mc.width);
        ct_kv_int(m, "filters", &mc.filters); ct_kv_int(m, "kernel", &mc.kernel); ct_kv_int(m, "classes", &mc.classes);
        ct_kv_float(m, "dropout", &mc.dropout);
        ct_kv_int(t, "samples", &n_train); ct_kv_int(t, "val_samples", &n_val); ct_kv_float(t, "noise", &noise);
    }
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            printf("usage: ctrain train small-cnn [options]\n\n"
                   "Trains a small image classifier: conv -> batchnorm -> relu -> maxpool 2 -> dropout -> dense\n"
                   "-> softmax cross-entropy, on synthetic images (one oriented bar per class, with noise).\n\n"
                   "model and data:\n"
                   "  --size N              image height and width (default 12)\n"
                   "  --filters N           convolution filters (default 8)\n"
                   "  --kernel N            odd kernel size (default 3)\n"
                   "  --classes N           classes (default 4)\n"
                   "  --dropout P           dropout before the dense layer (default 0.25)\n"
                   "  --samples N           training images (default 4000)\n"
                   "  --val-samples N       validation images (default 1000)\n"
                   "  --noise X             noise amplitude (default 0.6)\n"
                   "training:\n");
            printf("  --data synthetic      images generated from --seed\n");
            printf(CLI_TRAIN_HELP, 5, 64, "adam", 1e-3, "constant");
            return 0;
        }
        if (cli_parse_train_opt(&a, &o, &st)) continue;
        int size = 0;
        if (ct_args_int(&a, "--size", &size, 4, 4096, &st)) { if (st == CT_OK) mc.height = mc.width = size; continue; }
        if (ct_args_int(&a, "--filters", &mc.filters, 1, 4096, &st) || ct_args_int(&a, "--kernel", &mc.kernel, 1, 31, &st)
            || ct_args_int(&a, "--classes", &mc.classes, 2, 1000, &st) || ct_args_float(&a, "--dropout", &mc.dropout, 0, 0.99f, &st)
            || ct_args_int(&a, "--samples", &n_train, 1, 10000000, &st) || ct_args_int(&a, "--val-samples", &n_val, 0, 10000000, &st)
            || ct_args_float(&a, "--noise", &noise, 0, 100, &st))
            continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain train small-cnn --help)", argv[a.i]);
    }
    ct_fit_config fit;
    if (st == CT_OK) st = cli_finish_train_opts(&o, &fit, OPT_ADAM);
    if (st == CT_OK && strcmp(o.data, "synthetic") != 0)
        st = ct_fail(CT_EINVAL, "--data %s: small-cnn trains on synthetic images only (--data synthetic); "
                     "for image files use `ctrain train cnn --data DIR`", o.data);
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 2; }

    static seq_cnn m;   /* large: the layer table */
    ct_images train = { 0 }, val = { 0 };
    image_task c = { 0 };
    int have_task = 0;
    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)o.seed);
    st = ct_images_synthetic(&train, n_train, mc.classes, mc.height, mc.width, noise, (uint64_t)o.seed);
    if (st == CT_OK && n_val > 0) st = ct_images_synthetic(&val, n_val, mc.classes, mc.height, mc.width, noise, (uint64_t)o.seed + 7919);
    memset(&m, 0, sizeof m);
    if (st == CT_OK) st = ct_small_cnn_build(&m, &mc);
    if (st == CT_OK) {
        ct_seq_cnn_init_weights(&m, &rngs.init);
        st = ct_seq_cnn_set_device(&m, o.ops);
    }
    if (st == CT_OK) st = ct_seq_cnn_plan(&m, o.batch);
    if (st == CT_OK && (st = ct_image_task_init(&c, &m, &train, &val, n_train, n_val, o.batch, &rngs)) == CT_OK) have_task = 1;
    if (st == CT_OK) {
        cli_print_header(stdout, o.threads);
        printf("Model: small-cnn %dx%dx%d -> conv%dk%d -> batchnorm -> relu -> maxpool2 -> dropout %g -> dense %d, %zu parameters\n",
               mc.channels, mc.height, mc.width, mc.filters, mc.kernel, mc.dropout, mc.classes, ct_params_count(&m.params));
        ct_task task = ct_image_task_ops(&c);
        snprintf(meta.model, sizeof meta.model, "small-cnn");
        ct_kv *km = &meta.model_cfg, *kt = &meta.train_cfg;
        ct_kv_set_int(km, "channels", mc.channels); ct_kv_set_int(km, "height", mc.height); ct_kv_set_int(km, "width", mc.width);
        ct_kv_set_int(km, "filters", mc.filters); ct_kv_set_int(km, "kernel", mc.kernel); ct_kv_set_int(km, "classes", mc.classes);
        ct_kv_set_num(km, "dropout", mc.dropout);
        cli_train_to_meta(kt, &o, &fit);
        ct_kv_set_str(kt, "data", o.data); ct_kv_set_int(kt, "samples", n_train); ct_kv_set_int(kt, "val_samples", n_val);
        ct_kv_set_num(kt, "noise", noise);
        fit.meta = &meta;
        fit.rngs = &rngs;
        st = ct_fit(&task, &fit, NULL, stdout);
    }
    if (st == CT_OK && o.out) st = ct_weights_save(o.out, "small-cnn", &m.params, &m.buffers);
    if (st == CT_OK && o.out) printf("weights written to %s\n", o.out);
    if (have_task) ct_image_task_free(&c);
    ct_seq_cnn_free(&m);
    ct_images_free(&train); ct_images_free(&val);
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 1; }
    return 0;
}

int cmd_train(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        FILE *out = argc < 1 ? stderr : stdout;
        fprintf(out, "usage: ctrain train MODEL [options]\n\nmodels:\n"
                     "  siamese-lstm   speaker verification on utterance pairs (contrastive loss)\n"
                     "  siamese-cnn    the same with a CNN speaker encoder on log-mel crops\n"
                     "  small-cnn      image classification (softmax cross-entropy)\n"
                     "  cnn            CNN from an architecture spec on Fashion-MNIST/MNIST (default: Keras mnist_cnn)\n\n"
                     "`ctrain train MODEL --help` lists the model's options.\n");
        return argc < 1 ? 2 : 0;
    }
    if (!strcmp(argv[0], "siamese-lstm")) return train_siamese(argc - 1, argv + 1);
    if (!strcmp(argv[0], "siamese-cnn")) return train_siamese_cnn(argc - 1, argv + 1);
    if (!strcmp(argv[0], "small-cnn")) return train_small_cnn(argc - 1, argv + 1);
    if (!strcmp(argv[0], "cnn")) return train_cnn(argc - 1, argv + 1);
    fprintf(stderr, "ctrain train: unknown model '%s' (models: siamese-lstm, siamese-cnn, small-cnn, cnn)\n", argv[0]);
    return 2;
}
