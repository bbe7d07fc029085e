/* train.c - `ctrain train MODEL`: builds the model and its data, wires them
 * into the shared training loop (models/train.h), prints the Keras-style log
 * and writes the weights.
 *
 * Models:
 *   siamese-lstm  pairs of utterances -> shared LSTM -> dense -> distance -> contrastive loss
 *   small-cnn     images -> conv/batchnorm/relu/maxpool/dropout/dense -> softmax cross-entropy
 * Data: --data synthetic generates a corpus from the seed (see io/corpus.h, io/images.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "core/rng.h"
#include "core/threads.h"
#include "io/checkpoint.h"
#include "io/corpus.h"
#include "io/featstore.h"
#include "io/trials.h"
#include "io/images.h"
#include "io/weights.h"
#include "models/siamese_lstm.h"
#include "models/small_cnn.h"
#include "models/speaker_task.h"
#include "models/train.h"

/* ---- options common to every model ---- */
typedef struct {
    const char *data, *out, *device, *optimizer, *schedule;
    int epochs, batch, threads, progress;
    long seed;
    float lr, clip_norm, weight_decay;
    int step_size; float gamma;
    /* checkpoints and callbacks (models/train.h) */
    const char *checkpoint, *resume, *save_best, *monitor, *csv, *on_nan;
    long checkpoint_every, stop_after_steps;
    int early_stopping;
} common_opts;

static int parse_common(ct_args *a, common_opts *o, ct_status *st)
{
    return ct_args_str(a, "--data", &o->data, st) || ct_args_str(a, "--out", &o->out, st)
        || ct_args_str(a, "--device", &o->device, st) || ct_args_str(a, "--optimizer", &o->optimizer, st)
        || ct_args_str(a, "--schedule", &o->schedule, st)
        || ct_args_int(a, "--epochs", &o->epochs, 1, 100000, st) || ct_args_int(a, "--batch", &o->batch, 1, 1 << 20, st)
        || ct_args_int(a, "--threads", &o->threads, 1, 1024, st) || ct_args_long(a, "--seed", &o->seed, 0, 0x7fffffffL, st)
        || ct_args_float(a, "--lr", &o->lr, 1e-12f, 1e3f, st) || ct_args_float(a, "--clip-norm", &o->clip_norm, 0, 1e9f, st)
        || ct_args_float(a, "--weight-decay", &o->weight_decay, 0, 1e3f, st)
        || ct_args_int(a, "--step-size", &o->step_size, 1, 1000000, st) || ct_args_float(a, "--gamma", &o->gamma, 0, 1, st)
        || ct_args_str(a, "--checkpoint", &o->checkpoint, st) || ct_args_long(a, "--checkpoint-every", &o->checkpoint_every, 1, 0x7fffffffL, st)
        || ct_args_str(a, "--resume", &o->resume, st) || ct_args_str(a, "--save-best", &o->save_best, st)
        || ct_args_str(a, "--monitor", &o->monitor, st) || ct_args_int(a, "--early-stopping", &o->early_stopping, 1, 1000000, st)
        || ct_args_str(a, "--csv", &o->csv, st) || ct_args_str(a, "--on-nan", &o->on_nan, st)
        || ct_args_long(a, "--stop-after-steps", &o->stop_after_steps, 1, 0x7fffffffL, st)
        || (ct_args_flag(a, "--progress") && (o->progress = 1)) || (ct_args_flag(a, "--no-progress") && !(o->progress = 0));
}

static const char *COMMON_HELP =
    "  --data synthetic      data source (a corpus generated from --seed)\n"
    "  --epochs N            epochs (default %d)\n"
    "  --batch N             batch size (default %d)\n"
    "  --optimizer NAME      sgd, rmsprop, adam or adamw (default %s)\n"
    "  --lr X                learning rate (default %g)\n"
    "  --schedule NAME       constant, step or cosine learning rate over epochs (default constant)\n"
    "  --step-size N --gamma X   step schedule: lr * gamma^(epoch / N) (defaults 10, 0.1)\n"
    "  --weight-decay X      L2 penalty (decoupled for adamw) (default 0)\n"
    "  --clip-norm X         clip the global gradient norm to X (default 0 = off)\n"
    "  --threads N           CPU threads for OpenBLAS (default: all cores)\n"
    "  --seed S              seed of every random stream (default 1)\n"
    "  --device cpu          cpu (gpu[:N] is recognised; training on the GPU is not connected yet)\n"
    "  --out FILE.h5         write the trained weights (HDF5, replaced atomically)\n"
    "  --progress, --no-progress   force the live progress bar on or off (default: on a terminal)\n"
    "checkpoints and callbacks:\n"
    "  --checkpoint FILE.h5  write a checkpoint (weights, optimizer, RNG and data state) after every epoch\n"
    "  --checkpoint-every N  ... and after every N batches\n"
    "  --resume FILE.h5      continue a run exactly where its checkpoint stopped; the model and training\n"
    "                        settings come from the file (flags given override them, e.g. --epochs)\n"
    "  --save-best FILE.h5   checkpoint of the best epoch so far by --monitor\n"
    "  --monitor NAME        val_loss (default), val_accuracy, val_eer, loss or accuracy\n"
    "  --early-stopping N    stop after N epochs without improvement of --monitor; the best weights\n"
    "                        are restored at the end\n"
    "  --csv FILE.csv        one CSV row per epoch (appended on --resume)\n"
    "  --on-nan WHAT         stop (default) or skip-batch: what a non-finite loss or gradient does\n"
    "  --stop-after-steps N  stop after N batches in total, writing the checkpoint (resume it later)\n";

static ct_status finish_common(common_opts *o, ct_fit_config *fit, ct_optim_kind default_opt)
{
    memset(fit, 0, sizeof *fit);
    CT_TRY(cli_select_device(o->device));
    if (strcmp(o->data, "synthetic") != 0)
        return ct_fail(CT_EINVAL, "--data %s: only 'synthetic' data is available in this version", o->data);
    ct_optim_kind kind = default_opt;
    if (o->optimizer) CT_TRY(ct_optim_parse(&kind, o->optimizer));
    fit->optim = ct_optim_defaults(kind);
    if (o->lr > 0) fit->optim.lr = o->lr;
    fit->optim.clip_norm = o->clip_norm;
    if (o->weight_decay > 0 || kind != OPT_ADAMW) fit->optim.weight_decay = o->weight_decay;
    fit->sched = (ct_sched){ .kind = SCHED_CONSTANT, .base_lr = fit->optim.lr, .step_size = o->step_size,
                             .gamma = o->gamma, .t_max = o->epochs, .eta_min = 0 };
    if (o->schedule) {
        if (!strcmp(o->schedule, "step")) fit->sched.kind = SCHED_STEP;
        else if (!strcmp(o->schedule, "cosine")) fit->sched.kind = SCHED_COSINE;
        else if (strcmp(o->schedule, "constant") != 0)
            return ct_fail(CT_EINVAL, "--schedule %s: use constant, step or cosine", o->schedule);
    }
    fit->epochs = o->epochs;
    fit->batch = o->batch;
    fit->progress = o->progress;
    fit->checkpoint = o->checkpoint;
    fit->checkpoint_every = o->checkpoint_every;
    fit->resume = o->resume;
    fit->save_best = o->save_best;
    fit->early_stopping = o->early_stopping;
    fit->csv = o->csv;
    fit->stop_after_steps = o->stop_after_steps;
    if (o->monitor) CT_TRY(ct_monitor_parse(&fit->monitor, o->monitor));
    if (o->on_nan) CT_TRY(ct_on_nan_parse(&fit->on_nan, o->on_nan));
    if (o->checkpoint_every && !o->checkpoint) return ct_fail(CT_EINVAL, "--checkpoint-every needs --checkpoint FILE.h5");
    ct_threads_set(o->threads);
    return CT_OK;
}

/* ---- what a checkpoint records of the run, and --resume's defaults ---- */
static void common_to_meta(ct_kv *kv, const common_opts *o, const ct_fit_config *fit)
{
    const ct_optim_config *c = &fit->optim;
    const char *sched[] = { "constant", "step", "cosine" };
    ct_kv_set_str(kv, "optimizer", ct_optim_name(c->kind));
    ct_kv_set_num(kv, "lr", c->lr);
    ct_kv_set_num(kv, "momentum", c->momentum);
    ct_kv_set_int(kv, "nesterov", c->nesterov);
    ct_kv_set_num(kv, "rho", c->rho);
    ct_kv_set_num(kv, "beta1", c->beta1);
    ct_kv_set_num(kv, "beta2", c->beta2);
    ct_kv_set_num(kv, "eps", c->eps);
    ct_kv_set_num(kv, "weight_decay", c->weight_decay);
    ct_kv_set_num(kv, "clip_norm", c->clip_norm);
    ct_kv_set_str(kv, "schedule", sched[fit->sched.kind]);
    ct_kv_set_int(kv, "step_size", fit->sched.step_size);
    ct_kv_set_num(kv, "gamma", fit->sched.gamma);
    ct_kv_set_int(kv, "t_max", fit->sched.t_max);
    ct_kv_set_num(kv, "eta_min", fit->sched.eta_min);
    ct_kv_set_int(kv, "batch", o->batch);
    ct_kv_set_int(kv, "epochs", o->epochs);
    ct_kv_set_int(kv, "seed", o->seed);
}

static void common_from_meta(const ct_kv *kv, common_opts *o)
{
    ct_kv_str(kv, "optimizer", &o->optimizer);
    ct_kv_float(kv, "lr", &o->lr);
    ct_kv_float(kv, "weight_decay", &o->weight_decay);
    ct_kv_float(kv, "clip_norm", &o->clip_norm);
    ct_kv_str(kv, "schedule", &o->schedule);
    ct_kv_int(kv, "step_size", &o->step_size);
    ct_kv_float(kv, "gamma", &o->gamma);
    ct_kv_int(kv, "batch", &o->batch);
    ct_kv_int(kv, "epochs", &o->epochs);
    ct_kv_long(kv, "seed", &o->seed);
    ct_kv_str(kv, "data", &o->data);
}

/* With --resume anywhere on the command line, read the checkpoint's configuration
 * (it becomes the defaults; the flags parsed afterwards override it). */
static ct_status resume_meta(int argc, char **argv, const char *model, ct_ckpt_meta *meta, int *found)
{
    *found = 0;
    for (int i = 0; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--resume") != 0) continue;
        CT_TRY(ct_ckpt_read_meta(argv[i + 1], meta));
        if (strcmp(meta->model, model) != 0)
            return ct_fail(CT_EINVAL, "%s is a checkpoint of model %s, not %s: resume it with `ctrain train %s --resume %s`",
                           argv[i + 1], meta->model, model, meta->model, argv[i + 1]);
        *found = 1;
    }
    return CT_OK;
}

/* ---- siamese-lstm on a speaker corpus ---- */
/* Loads the training corpus named by --data: "synthetic" generates one from the seed. */
static ct_status load_corpus(ct_corpus *c, const char *data, ct_synth_config *sc)
{
    if (!strcmp(data, "synthetic")) return ct_corpus_synthetic(c, sc);
    return ct_featstore_load(c, data);   /* a feature store written by `ctrain prep voxceleb` */
}

static int train_siamese(int argc, char **argv)
{
    common_opts o = { .data = "synthetic", .device = "cpu", .epochs = 5, .batch = 128, .threads = ct_cpu_count(),
                      .seed = 1, .progress = -1, .step_size = 10, .gamma = 0.1f };
    siamese_lstm_config mc = siamese_lstm_defaults();
    ct_synth_config sc = { .speakers = 40, .utts_per_speaker = 12, .min_frames = 100, .max_frames = 300,
                           .n_mels = 40, .noise = 2.0f, .seed = 1 };
    speaker_task_config tc = { .pairs = 6000, .val_pairs = 2000, .val_split = CT_VAL_SPEAKERS, .val_fraction = 0.25 };
    const char *recurrent = "sigmoid", *val_split = "speakers", *trials_path = NULL;
    float val_fraction = 0.25f;
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    static ct_ckpt_meta rm, meta;
    int resuming = 0;
    st = resume_meta(argc, argv, "siamese-lstm", &rm, &resuming);
    if (resuming) {
        const ct_kv *m = &rm.model_cfg, *t = &rm.train_cfg;
        common_from_meta(t, &o);
        ct_kv_int(m, "n_mels", &mc.n_mels); ct_kv_int(m, "frames", &mc.frames); ct_kv_int(m, "hidden", &mc.hidden);
        ct_kv_int(m, "layers", &mc.layers); ct_kv_int(m, "embed", &mc.embed); ct_kv_float(m, "margin", &mc.margin);
        ct_kv_float(m, "threshold", &mc.threshold); ct_kv_str(m, "recurrent", &recurrent);
        ct_kv_int(t, "speakers", &sc.speakers); ct_kv_int(t, "utts", &sc.utts_per_speaker); ct_kv_float(t, "noise", &sc.noise);
        ct_kv_long(t, "pairs", &tc.pairs); ct_kv_long(t, "val_pairs", &tc.val_pairs);
        ct_kv_str(t, "val_split", &val_split); ct_kv_float(t, "val_fraction", &val_fraction);
    }
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            printf("usage: ctrain train siamese-lstm [options]\n\n"
                   "Trains the siamese LSTM speaker-verification model: two utterances -> shared LSTM ->\n"
                   "last hidden state -> dense embedding -> Euclidean distance -> contrastive loss.\n\n"
                   "model:\n"
                   "  --mels N              features per frame (default 40)\n"
                   "  --frames N            frames per utterance crop (default 100 = 1 s)\n"
                   "  --hidden N            LSTM units (default 128)\n"
                   "  --layers N            stacked LSTM layers (default 1)\n"
                   "  --embed N             embedding size (default 64)\n"
                   "  --margin X            contrastive margin (default 1)\n"
                   "  --recurrent NAME      sigmoid or hard_sigmoid gate activation (default sigmoid)\n"
                   "pairs:\n"
                   "  --pairs N             training pairs per epoch, half same-speaker (default 6000)\n"
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
                   "training:\n");
            printf(COMMON_HELP, 5, 128, "rmsprop", 1e-3);
            return 0;
        }
        if (parse_common(&a, &o, &st)) continue;
        if (ct_args_int(&a, "--mels", &mc.n_mels, 1, 4096, &st) || ct_args_int(&a, "--frames", &mc.frames, 1, 100000, &st)
            || ct_args_int(&a, "--hidden", &mc.hidden, 1, 65536, &st) || ct_args_int(&a, "--layers", &mc.layers, 1, LSTM_MAX_LAYERS, &st)
            || ct_args_int(&a, "--embed", &mc.embed, 1, 65536, &st) || ct_args_float(&a, "--margin", &mc.margin, 1e-6f, 1e6f, &st)
            || ct_args_str(&a, "--recurrent", &recurrent, &st) || ct_args_str(&a, "--val-split", &val_split, &st)
            || ct_args_str(&a, "--trials", &trials_path, &st)
            || ct_args_float(&a, "--val-fraction", &val_fraction, 0.01f, 0.99f, &st)
            || ct_args_int(&a, "--speakers", &sc.speakers, 4, 1000000, &st) || ct_args_int(&a, "--utts", &sc.utts_per_speaker, 2, 100000, &st)
            || ct_args_float(&a, "--noise", &sc.noise, 0, 1e3f, &st)
            || ct_args_long(&a, "--pairs", &tc.pairs, 1, 100000000L, &st) || ct_args_long(&a, "--val-pairs", &tc.val_pairs, 0, 100000000L, &st))
            continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain train siamese-lstm --help)", argv[a.i]);
    }
    const char *data = o.data;
    o.data = "synthetic";   /* finish_common checks the device and optimizer; the corpus is loaded here */
    ct_fit_config fit;
    if (st == CT_OK) st = finish_common(&o, &fit, OPT_RMSPROP);
    if (st == CT_OK) {
        if (!strcmp(recurrent, "sigmoid")) mc.recurrent = LSTM_SIGMOID;
        else if (!strcmp(recurrent, "hard_sigmoid")) mc.recurrent = LSTM_HARD_SIGMOID;
        else st = ct_fail(CT_EINVAL, "--recurrent %s: use sigmoid or hard_sigmoid", recurrent);
    }
    if (st == CT_OK) {
        if (!strcmp(val_split, "speakers")) tc.val_split = CT_VAL_SPEAKERS;
        else if (!strcmp(val_split, "videos")) tc.val_split = CT_VAL_VIDEOS;
        else st = ct_fail(CT_EINVAL, "--val-split %s: use speakers or videos", val_split);
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 2; }

    tc.batch = o.batch;
    tc.seed = (uint64_t)o.seed;
    tc.val_fraction = val_fraction;
    sc.seed = tc.seed;
    sc.n_mels = mc.n_mels;
    if (sc.min_frames < mc.frames) sc.min_frames = mc.frames;
    if (sc.max_frames < sc.min_frames) sc.max_frames = sc.min_frames;
    ct_rngs rngs;
    ct_rngs_seed(&rngs, tc.seed);
    ct_corpus corpus = { 0 };
    siamese_lstm m = { 0 };
    speaker_task s = { 0 };
    ct_trial *trials = NULL;
    int n_trials = 0, *trial_speakers = NULL;
    st = load_corpus(&corpus, data, &sc);
    if (st == CT_OK && trials_path) {
        st = ct_trials_load(&trials, &n_trials, trials_path, &corpus);
        /* the trial speakers are the validation speakers: none of them is trained on */
        unsigned char *in_trials = st == CT_OK ? ct_calloc((size_t)corpus.n_speakers, 1, "trial speakers") : NULL;
        trial_speakers = in_trials ? ct_malloc((size_t)corpus.n_speakers * sizeof(int), "trial speakers") : NULL;
        if (st == CT_OK && !trial_speakers) st = CT_ENOMEM;
        for (int k = 0; st == CT_OK && k < n_trials; k++)
            in_trials[corpus.utt[trials[k].a].speaker] = in_trials[corpus.utt[trials[k].b].speaker] = 1;
        for (int sp = 0; st == CT_OK && sp < corpus.n_speakers; sp++)
            if (in_trials[sp]) trial_speakers[tc.n_val_speakers++] = sp;
        free(in_trials);
        if (st == CT_OK && tc.val_split == CT_VAL_SPEAKERS) tc.val_speakers = trial_speakers;
        tc.trials = trials;
        tc.n_trials = n_trials;
        tc.trial_batch = 32;
        tc.trial_max_frames = 3000;
    }
    if (st == CT_OK) st = siamese_lstm_build(&m, &mc);
    if (st == CT_OK) st = siamese_lstm_plan(&m, o.batch);
    if (st == CT_OK) st = speaker_task_init(&s, &tc, &corpus, &m, &rngs.data, stderr);
    if (st == CT_OK) {
        siamese_lstm_init_weights(&m, &rngs.init);
        cli_print_header(stdout, o.threads);
        printf("Model: siamese-lstm %dx%d -> LSTM %d%s -> dense %d -> euclidean -> contrastive (margin %g), %zu parameters\n",
               mc.n_mels, mc.frames, mc.hidden, mc.layers > 1 ? " (stacked)" : "", mc.embed, mc.margin, ct_params_count(&m.params));
        printf("Data: %s, %d utterances of %d speakers; validation on %s (%d training, %d validation speakers); "
               "%s lr %g, batch %d pairs\n", data, corpus.n_utt, corpus.n_speakers,
               tc.val_split == CT_VAL_SPEAKERS ? (trials ? "the trial list's speakers" : "held-out speakers") : "held-out videos",
               s.n_train_speakers, s.n_val_speakers, ct_optim_name(fit.optim.kind), fit.optim.lr, o.batch);
        if (trials) printf("Trials: %s, %d trials; val_eer after every epoch\n", trials_path, n_trials);
        ct_task task = speaker_task_ops(&s);
        snprintf(meta.model, sizeof meta.model, "siamese-lstm");
        ct_kv *km = &meta.model_cfg, *kt = &meta.train_cfg;
        ct_kv_set_int(km, "n_mels", mc.n_mels); ct_kv_set_int(km, "frames", mc.frames); ct_kv_set_int(km, "hidden", mc.hidden);
        ct_kv_set_int(km, "layers", mc.layers); ct_kv_set_int(km, "embed", mc.embed); ct_kv_set_num(km, "margin", mc.margin);
        ct_kv_set_num(km, "threshold", mc.threshold); ct_kv_set_str(km, "recurrent", recurrent);
        common_to_meta(kt, &o, &fit);
        ct_kv_set_str(kt, "data", data); ct_kv_set_int(kt, "speakers", sc.speakers); ct_kv_set_int(kt, "utts", sc.utts_per_speaker);
        ct_kv_set_num(kt, "noise", sc.noise); ct_kv_set_int(kt, "pairs", tc.pairs); ct_kv_set_int(kt, "val_pairs", tc.val_pairs);
        ct_kv_set_str(kt, "val_split", val_split); ct_kv_set_num(kt, "val_fraction", val_fraction);
        if (trials_path) ct_kv_set_str(kt, "trials", trials_path);
        fit.meta = &meta;
        fit.rngs = &rngs;
        st = ct_fit(&task, &fit, NULL, stdout);
    }
    if (st == CT_OK && o.out) st = ct_weights_save(o.out, "siamese-lstm", &m.params, NULL);
    if (st == CT_OK && o.out) printf("weights written to %s\n", o.out);
    speaker_task_free(&s);
    siamese_lstm_free(&m);
    ct_corpus_free(&corpus);
    free(trials);
    free(trial_speakers);
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 1; }
    return 0;
}

/* ---- small-cnn on synthetic images ---- */
typedef struct {
    small_cnn m;
    ct_images train, val;
    int *order;
    float *x;                  /* [B, C, H, W] */
    int *labels;               /* [B] */
    ct_rng data, dropout;
} cnn_task;

static void cnn_begin_epoch(void *ctx, int epoch)
{
    cnn_task *c = ctx;
    (void)epoch;
    ct_rng_shuffle_int(&c->data, c->order, c->train.n);
}

static void cnn_load(void *ctx, int split, long first, int n)
{
    cnn_task *c = ctx;
    const ct_images *im = split == CT_SPLIT_TRAIN ? &c->train : &c->val;
    size_t px = (size_t)im->c * im->h * im->w;
    for (int k = 0; k < n; k++) {
        long i = split == CT_SPLIT_TRAIN ? c->order[first + k] : first + k;
        memcpy(c->x + k * px, im->x + (size_t)i * px, px * sizeof(float));
        c->labels[k] = im->labels[i];
    }
}

static float cnn_forward(void *ctx, int n, int train, int *correct)
{
    cnn_task *c = ctx;
    return small_cnn_forward(&c->m, c->x, c->labels, n, train, &c->dropout, correct);
}

static void cnn_backward(void *ctx, int n)
{
    cnn_task *c = ctx;
    small_cnn_backward(&c->m, c->x, c->labels, n);
}

/* Exact resume: the data and dropout streams and this epoch's order. */
static ct_status cnn_save_state(void *ctx, hid_t f)
{
    cnn_task *c = ctx;
    size_t n = (size_t)c->train.n;
    CT_TRY(ct_ckpt_write_rng(f, "data", &c->data));
    CT_TRY(ct_ckpt_write_rng(f, "dropout", &c->dropout));
    return ct_ckpt_write_i32(f, "data/order", c->order, 1, &n);
}

static ct_status cnn_load_state(void *ctx, hid_t f)
{
    cnn_task *c = ctx;
    int n = c->train.n;
    ct_rng data, dropout;
    int *order = ct_malloc((size_t)n * sizeof(int) + 1, "order");
    unsigned char *seen = ct_calloc((size_t)n + 1, 1, "order");
    ct_status st = order && seen ? CT_OK : CT_ENOMEM;
    if (st == CT_OK) st = ct_ckpt_read_rng(f, "data", &data);
    if (st == CT_OK) st = ct_ckpt_read_rng(f, "dropout", &dropout);
    if (st == CT_OK && (st = ct_ckpt_read_i32(f, "data/order", order, (size_t)n)) != CT_OK)
        st = ct_fail_around(st, NULL, " (was the checkpoint made with other --samples?)");
    for (int i = 0; st == CT_OK && i < n; i++) {
        if (order[i] < 0 || order[i] >= n || seen[order[i]]) st = ct_fail(CT_EFORMAT, "/data/order is not a permutation of the %d samples", n);
        else seen[order[i]] = 1;
    }
    if (st == CT_OK) { memcpy(c->order, order, (size_t)n * sizeof(int)); c->data = data; c->dropout = dropout; }
    free(order);
    free(seen);
    return st;
}

static int train_small_cnn(int argc, char **argv)
{
    common_opts o = { .data = "synthetic", .device = "cpu", .epochs = 5, .batch = 64, .threads = ct_cpu_count(),
                      .seed = 1, .progress = -1, .step_size = 10, .gamma = 0.1f };
    small_cnn_config mc = small_cnn_defaults();
    int n_train = 4000, n_val = 1000;
    float noise = 0.6f;
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    static ct_ckpt_meta rm, meta;
    int resuming = 0;
    st = resume_meta(argc, argv, "small-cnn", &rm, &resuming);
    if (resuming) {
        const ct_kv *m = &rm.model_cfg, *t = &rm.train_cfg;
        common_from_meta(t, &o);
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
            printf(COMMON_HELP, 5, 64, "adam", 1e-3);
            return 0;
        }
        if (parse_common(&a, &o, &st)) continue;
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
    if (st == CT_OK) st = finish_common(&o, &fit, OPT_ADAM);
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 2; }

    cnn_task c = { 0 };
    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)o.seed);
    c.data = rngs.data;
    c.dropout = rngs.dropout;
    st = ct_images_synthetic(&c.train, n_train, mc.classes, mc.height, mc.width, noise, (uint64_t)o.seed);
    if (st == CT_OK && n_val > 0) st = ct_images_synthetic(&c.val, n_val, mc.classes, mc.height, mc.width, noise, (uint64_t)o.seed + 7919);
    if (st == CT_OK) st = small_cnn_build(&c.m, &mc);
    if (st == CT_OK) st = small_cnn_plan(&c.m, o.batch);
    if (st == CT_OK) {
        c.order = ct_malloc((size_t)n_train * sizeof(int), "order");
        c.x = ct_malloc((size_t)o.batch * mc.height * mc.width * sizeof(float), "batch");
        c.labels = ct_malloc((size_t)o.batch * sizeof(int), "batch");
        if (!c.order || !c.x || !c.labels) st = CT_ENOMEM;
    }
    if (st == CT_OK) {
        for (int i = 0; i < n_train; i++) c.order[i] = i;
        small_cnn_init_weights(&c.m, &rngs.init);
        cli_print_header(stdout, o.threads);
        printf("Model: small-cnn %dx%dx%d -> conv%dk%d -> batchnorm -> relu -> maxpool2 -> dropout %g -> dense %d, %zu parameters\n",
               mc.channels, mc.height, mc.width, mc.filters, mc.kernel, mc.dropout, mc.classes, ct_params_count(&c.m.params));
        ct_task task = { &c, &c.m.params, n_train, n_val, cnn_begin_epoch, cnn_load, cnn_forward, cnn_backward, NULL,
                         &c.m.buffers, cnn_save_state, cnn_load_state };
        snprintf(meta.model, sizeof meta.model, "small-cnn");
        ct_kv *km = &meta.model_cfg, *kt = &meta.train_cfg;
        ct_kv_set_int(km, "channels", mc.channels); ct_kv_set_int(km, "height", mc.height); ct_kv_set_int(km, "width", mc.width);
        ct_kv_set_int(km, "filters", mc.filters); ct_kv_set_int(km, "kernel", mc.kernel); ct_kv_set_int(km, "classes", mc.classes);
        ct_kv_set_num(km, "dropout", mc.dropout);
        common_to_meta(kt, &o, &fit);
        ct_kv_set_str(kt, "data", o.data); ct_kv_set_int(kt, "samples", n_train); ct_kv_set_int(kt, "val_samples", n_val);
        ct_kv_set_num(kt, "noise", noise);
        fit.meta = &meta;
        fit.rngs = &rngs;
        st = ct_fit(&task, &fit, NULL, stdout);
    }
    if (st == CT_OK && o.out) st = ct_weights_save(o.out, "small-cnn", &c.m.params, &c.m.buffers);
    if (st == CT_OK && o.out) printf("weights written to %s\n", o.out);
    small_cnn_free(&c.m);
    ct_images_free(&c.train); ct_images_free(&c.val);
    free(c.order); free(c.x); free(c.labels);
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 1; }
    return 0;
}

int cmd_train(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        FILE *out = argc < 1 ? stderr : stdout;
        fprintf(out, "usage: ctrain train MODEL [options]\n\nmodels:\n"
                     "  siamese-lstm   speaker verification on utterance pairs (contrastive loss)\n"
                     "  small-cnn      image classification (softmax cross-entropy)\n"
                     "  cnn            CNN from an architecture spec on Fashion-MNIST/MNIST (default: Keras mnist_cnn)\n\n"
                     "`ctrain train MODEL --help` lists the model's options.\n");
        return argc < 1 ? 2 : 0;
    }
    if (!strcmp(argv[0], "siamese-lstm")) return train_siamese(argc - 1, argv + 1);
    if (!strcmp(argv[0], "small-cnn")) return train_small_cnn(argc - 1, argv + 1);
    if (!strcmp(argv[0], "cnn")) return train_cnn(argc - 1, argv + 1);
    fprintf(stderr, "ctrain train: unknown model '%s' (models: siamese-lstm, small-cnn, cnn)\n", argv[0]);
    return 2;
}
