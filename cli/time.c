/* time.c - `ctrain time MODEL`: the same training run (same seed, data and
 * model) on each requested device, timed epoch by epoch, as one table:
 *
 *   device epochs s/epoch median min max samples/s GFLOP/s | FMA peak, of it | sgemm peak, of it | vs cpu
 *
 * It is real training: the workload goes through ct_fit (train/train.h), the
 * loop `ctrain train` uses, and the numbers come from its per-epoch history.
 * The first epoch is the warm-up (caches, page faults, thread start-up) and is
 * left out of the statistics. With --layers each layer's forward and backward
 * time is measured inside those same training steps (the models' `prof.on`
 * switches), as `caffe time` did.
 *
 * Every device runs the same code: the model is moved to the device's table of
 * operations (layers/ops.h) and trained by ct_fit. Before training, the CPU
 * run measures the FP32 FMA peak and the OpenBLAS sgemm peak with the same
 * threads (core/peak.h); a GPU run opens the GPU and measures its cuBLAS sgemm
 * peak at the run's precision. A device that cannot run (no GPU, a CPU-only
 * build) says why and its columns read n/a: no number is made up.
 *
 * The JSON file, the SVG picture and --compare are in cli/time_report.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/time.h"
#include "core/peak.h"
#include "core/rng.h"
#include "core/threads.h"
#include "cuda/device.h"
#include "io/corpus.h"
#include "io/featstore.h"
#include "io/idx.h"
#include "io/images.h"
#include "cuda/ops_gpu.h"
#include "train/image_task.h"
#include "models/seq_cnn.h"
#include "models/siamese_cnn.h"
#include "models/siamese_lstm.h"
#include "models/speaker_model.h"
#include "train/speaker_task.h"

#define MAX_DEVICES 4

static const char *HELP =
    "usage: ctrain time MODEL [options]\n"
    "       ctrain time --compare A.json B.json [...]\n"
    "\n"
    "Times real training (the loop of `ctrain train`) of MODEL on each device with the same seed,\n"
    "data and model, and prints one table: seconds per epoch (median, min and max over the epochs\n"
    "after a warm-up epoch), training samples/s, achieved GFLOP/s, the fraction of the CPU's measured\n"
    "FP32 FMA peak and of the measured sgemm peak (both with the same threads), and the speedup over the CPU.\n"
    "\n"
    "models:\n"
    "  siamese-lstm          the seed's speaker model: 40x100 log-mels -> LSTM 128 -> last hidden state ->\n"
    "                        dense 64 -> distance -> contrastive\n"
    "  siamese-cnn           the same pairs through the CNN speaker encoder (--arch SPEC for another tower)\n"
    "  cnn                   Keras's mnist_cnn on 1x28x28 images (--arch SPEC for another network)\n"
    "\n"
    "options:\n"
    "  --device LIST         comma-separated: cpu, gpu, gpu:N (default cpu,gpu; a device that cannot run\n"
    "                        says why and its columns read n/a); --devices is the old spelling\n"
    "  --tf32                GPU: allow TensorFloat-32 matrix products and convolutions (default: pure FP32)\n"
    "  --deterministic       GPU: deterministic cuDNN convolution algorithms only\n"
    "  --protocol NAME       seed:  siamese-lstm 300,000 + 120,000 pairs, 20 epochs; cnn 60,000 + 10,000\n"
    "                               images, 12 epochs (the blog's experiment; hours on a CPU)\n"
    "                        bench: siamese-lstm 3,072 + 1,024 pairs, 4 epochs; cnn 6,000 + 1,000 images,\n"
    "                               4 epochs (about a minute per model on 2 cores; the default)\n"
    "                        smoke: a few seconds (tests)\n"
    "                        all with batch 128 (smoke 64); the options below override the protocol\n"
    "  --epochs N            epochs (the first is the warm-up, left out of the statistics)\n"
    "  --batch N             batch size (pairs or images)\n"
    "  --pairs N --val-pairs M       training and validation pairs per epoch (siamese-lstm)\n"
    "  --samples N --val-samples M   training and validation images per epoch (cnn)\n"
    "  --data WHAT           synthetic (default: generated from the seed, no dataset needed); siamese-lstm:\n"
    "                        a feature store from `ctrain prep voxceleb`; cnn: fashion-mnist or an IDX directory\n"
    "  --arch SPEC           cnn architecture (see ctrain train cnn --help)\n"
    "  --threads N           CPU threads for training and for both peaks (default: all cores)\n"
    "  --seed S              seed of the data, the weights and dropout (default 1)\n"
    "  --layers              also time every layer's forward and backward pass (ms per batch, share of\n"
    "                        the step, GFLOP/s), measured inside the same training steps\n"
    "  --json FILE.json      write the results (one file per device when several: FILE-DEVICE.json) and\n"
    "                        a picture of the per-epoch seconds and loss curves next to it (FILE.svg)\n"
    "  --verbose             show the Keras-style training log\n"
    "  --compare A.json B.json ...   print runs written by --json side by side (e.g. two machines)\n";

typedef enum { MODEL_SIAMESE, MODEL_CNN, MODEL_SIAMESE_CNN } time_model;

/* The command line. Numbers left 0 (or -1) take the protocol's value. */
typedef struct {
    const char *protocol, *devices, *data, *json, *arch;
    int epochs, batch, threads, layers, verbose, tf32, deterministic;
    long pairs, val_pairs, samples, val_samples, seed;
} time_opts;

/* The workload: the same for every device. */
typedef struct {
    time_model model;
    time_setup setup;
    int layers, verbose;
    int tf32, deterministic;      /* the GPU's options (cuda/device.h) */
    ct_fit_config fit;
    /* siamese-lstm and siamese-cnn */
    siamese_lstm_config sc;
    siamese_cnn_config ccfg;
    speaker_task_config tc;
    ct_corpus corpus;
    /* cnn */
    const char *arch;
    ct_images train, val;
} workload;

/* ---- protocols ---- */
typedef struct {
    const char *name;
    int epochs, batch;
    long pairs, val_pairs;        /* siamese-lstm */
    long samples, val_samples;    /* cnn */
} protocol;

static const protocol PROTOCOLS[] = {
    { "seed",  20, 128, 300000, 120000, 60000, 10000 },   /* cnn: Fashion-MNIST's sizes and the Keras example's 12 epochs */
    { "bench",  4, 128,   3072,   1024,  6000,  1000 },
    { "smoke",  2,  64,    256,    128,   512,   256 },
};

static const protocol *find_protocol(const char *name)
{
    for (size_t i = 0; i < sizeof PROTOCOLS / sizeof PROTOCOLS[0]; i++)
        if (!strcmp(PROTOCOLS[i].name, name)) return &PROTOCOLS[i];
    return NULL;
}

/* ---- profiling inside ct_fit: a task that forwards to the model's task and
 * switches the model's profiling (prof.on) on for the training batches after the warm-up ---- */
typedef struct {
    ct_task inner;
    ct_prof *prof;                /* the model's profiling (prof->on is switched here) */
    int profile, warmup, epoch;
    long batches, samples;        /* training batches and samples profiled */
} profiled_task;

static void prof_begin_epoch(void *ctx, int epoch)
{
    profiled_task *p = ctx;
    p->epoch = epoch;
    if (p->inner.begin_epoch) p->inner.begin_epoch(p->inner.ctx, epoch);
}

static void prof_load(void *ctx, int split, long first, int n)
{
    profiled_task *p = ctx;
    p->inner.load(p->inner.ctx, split, first, n);
}

static float prof_forward(void *ctx, int n, int train, int *correct)
{
    profiled_task *p = ctx;
    p->prof->on = p->profile && train && p->epoch >= p->warmup;   /* validation is never profiled */
    if (p->prof->on) { p->batches++; p->samples += n; }
    return p->inner.forward(p->inner.ctx, n, train, correct);
}

static void prof_backward(void *ctx, int n)
{
    profiled_task *p = ctx;
    p->inner.backward(p->inner.ctx, n);   /* timed as the forward of the same batch set it */
}

static void prof_end_epoch(void *ctx, int epoch, ct_epoch_log *log)
{
    profiled_task *p = ctx;
    p->inner.end_epoch(p->inner.ctx, epoch, log);
}

/* Trains the model's task with ct_fit (its log to stdout with --verbose, else
 * nowhere) and keeps the per-epoch history in r. */
static ct_status fit_profiled(time_run *r, const workload *w, const ct_task *inner, ct_prof *prof)
{
    profiled_task p = { .inner = *inner, .prof = prof, .profile = w->layers, .warmup = w->setup.warmup };
    ct_task t = *inner;
    t.ctx = &p;
    t.begin_epoch = prof_begin_epoch;
    t.load = prof_load;
    t.forward = prof_forward;
    t.backward = prof_backward;
    t.end_epoch = inner->end_epoch ? prof_end_epoch : NULL;
    r->hist = ct_calloc((size_t)w->setup.epochs, sizeof *r->hist, "epoch history");
    if (!r->hist) return CT_ENOMEM;
    FILE *log = w->verbose ? stdout : fopen("/dev/null", "w");
    if (!log) return ct_fail(CT_EIO, "cannot open /dev/null to discard the training log (use --verbose)");
    ct_status st = ct_fit(&t, &w->fit, r->hist, log);
    if (log != stdout) fclose(log);
    prof->on = 0;
    r->n_epochs = w->setup.epochs;
    r->prof_batches = p.batches;
    r->prof_samples = p.samples;
    return st;
}

static void add_layer(time_run *r, const char *name, double fwd_s, double bwd_s, double flops_per_sample)
{
    CT_ASSERT(r->n_layers < TIME_MAX_ROWS);   /* sized for every layer a spec can have, plus two */
    time_layer *l = &r->layer[r->n_layers++];
    snprintf(l->name, sizeof l->name, "%s", name);
    l->fwd_s = fwd_s;
    l->bwd_s = bwd_s;
    l->flops_per_sample = flops_per_sample;
}

/* ---- the models, on the device of `ops` ---- */
/* Every layer of a sequential CNN as a --layers row; `per_sample` of its images per sample
 * (2 for a siamese tower: both crops of a pair). */
static void add_seq_layers(time_run *r, const seq_cnn *m, int per_sample)
{
    for (int i = 0; i < m->n; i++) {
        const seq_layer *l = &m->layer[i];
        char name[64];
        if (l->name[0]) snprintf(name, sizeof name, "%s (%s)", l->name, l->text);
        else snprintf(name, sizeof name, "%s", l->text);
        add_layer(r, name, m->prof.fwd[i], m->prof.bwd[i], ct_seq_layer_step_flops(m, i, per_sample));
    }
}

/* The speaker pipeline (pairs, crops, background loading; train/speaker_task.h) around a
 * speaker model on its device, planned, with its weights, trained through ct_fit. */
static ct_status fit_speaker(time_run *r, const workload *w, const speaker_model *sm, ct_rngs *rngs)
{
    speaker_task s;
    memset(&s, 0, sizeof s);
    ct_status st = ct_speaker_task_init(&s, &w->tc, &w->corpus, sm, rngs, stderr);
    if (st != CT_OK) return st;
    ct_task t = ct_speaker_task_ops(&s);
    st = fit_profiled(r, w, &t, sm->prof);
    ct_speaker_task_free(&s);
    return st;
}

/* siamese-lstm: the seed's model. */
static ct_status fit_siamese(time_run *r, const workload *w, const ct_ops *ops)
{
    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)w->setup.seed);
    siamese_lstm m;
    memset(&m, 0, sizeof m);
    ct_status st = ct_siamese_lstm_build(&m, &w->sc);
    int built = st == CT_OK;
    if (st == CT_OK) {
        ct_siamese_lstm_init_weights(&m, &rngs.init);
        st = ct_siamese_lstm_set_device(&m, ops);
    }
    if (st == CT_OK) st = ct_siamese_lstm_plan(&m, w->setup.batch);
    speaker_model sm = ct_speaker_model_lstm(&m);
    if (st == CT_OK) st = fit_speaker(r, w, &sm, &rngs);
    for (int p = 0; st == CT_OK && w->layers && p < SIAMESE_LSTM_PARTS; p++)
        add_layer(r, ct_siamese_lstm_part_name((siamese_lstm_part)p), m.prof.fwd[p], m.prof.bwd[p],
                  ct_siamese_lstm_part_flops(&w->sc, (siamese_lstm_part)p, 1));
    if (built) ct_siamese_lstm_free(&m);
    return st;
}

/* siamese-cnn: the same pipeline with the CNN tower (models/siamese_cnn.h). */
static ct_status fit_siamese_cnn(time_run *r, const workload *w, const ct_ops *ops)
{
    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)w->setup.seed);
    static siamese_cnn m;   /* large: the tower's layer table */
    memset(&m, 0, sizeof m);
    ct_status st = ct_siamese_cnn_build(&m, &w->ccfg);
    int built = st == CT_OK;
    if (st == CT_OK) {
        ct_siamese_cnn_init_weights(&m, &rngs.init);
        st = ct_siamese_cnn_set_device(&m, ops);
    }
    if (st == CT_OK) st = ct_siamese_cnn_plan(&m, w->setup.batch);
    speaker_model sm = ct_speaker_model_cnn(&m);
    if (st == CT_OK) st = fit_speaker(r, w, &sm, &rngs);
    if (st == CT_OK && w->layers) add_seq_layers(r, &m.enc, 2);
    if (built) ct_siamese_cnn_free(&m);
    return st;
}

/* cnn: images in memory, reshuffled every epoch (train/image_task.h). */
static ct_status fit_cnn(time_run *r, const workload *w, const ct_ops *ops)
{
    const ct_images *tr = &w->train;
    const time_setup *s = &w->setup;
    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)s->seed);
    static seq_cnn m;   /* large: the layer table */
    memset(&m, 0, sizeof m);
    ct_status st = ct_seq_cnn_build(&m, w->arch, tr->c, tr->h, tr->w, tr->classes);
    if (st != CT_OK) return ct_fail(st, "--arch: %s", ct_last_error());
    ct_seq_cnn_init_weights(&m, &rngs.init);
    st = ct_seq_cnn_set_device(&m, ops);
    if (st == CT_OK) st = ct_seq_cnn_plan(&m, s->batch);
    image_task c;
    int have_task = 0;
    if (st == CT_OK && (st = ct_image_task_init(&c, &m, tr, &w->val, s->n_train, s->n_val, s->batch, &rngs)) == CT_OK) have_task = 1;
    if (st == CT_OK) {
        ct_task t = ct_image_task_ops(&c);
        st = fit_profiled(r, w, &t, &m.prof);
    }
    if (st == CT_OK && w->layers) add_seq_layers(r, &m, 1);
    if (have_task) ct_image_task_free(&c);
    ct_seq_cnn_free(&m);
    return st;
}

/* ---- devices ---- */
/* Marks the run unavailable with the reason; this is a result, not an error. */
static ct_status unavailable(time_run *r, const char *why)
{
    r->available = 0;
    snprintf(r->why, sizeof r->why, "%s", why);
    return CT_OK;
}

/* Opens the device, measures its peak and trains the workload on it. */
static ct_status run_device(time_run *r, const workload *w)
{
    int index = -1;
    CT_TRY(ct_gpu_parse_device(r->device, &index));
    const ct_ops *ops;
    ct_sgemm_rate peak;
    if (index < 0) {
        char cpu[256];
        cli_cpu_model(cpu, sizeof cpu);
        snprintf(r->device_desc, sizeof r->device_desc, "%s, %d of %d logical cores", cpu, w->setup.threads, ct_cpu_count());
        CT_TRY(ct_peak_sgemm_cpu(&peak));
        snprintf(r->peak_what, sizeof r->peak_what, "OpenBLAS sgemm %d^3, %d thread%s, median of %d", CT_PEAK_N,
                 w->setup.threads, w->setup.threads == 1 ? "" : "s", peak.repeats);
        ct_fma_rate fma;
        CT_TRY(ct_peak_fma_cpu(&fma, w->setup.threads));
        r->fma_peak = fma.peak;
        r->fma_peak_best = fma.best;
        snprintf(r->fma_peak_what, sizeof r->fma_peak_what, "FP32 FMA loop, %s, %d thread%s, best of %d (median %.1f)",
                 ct_fma_isa_name(fma.isa), fma.threads, fma.threads == 1 ? "" : "s", fma.repeats, fma.median);
        ops = &ct_ops_cpu;
    } else {
        ct_gpu_options opt = { .tf32 = w->tf32, .deterministic = w->deterministic };
        if (ct_gpu_open(index, &opt) != CT_OK) return unavailable(r, ct_last_error());
        ct_gpu_describe(r->device_desc, sizeof r->device_desc);
        /* the peak at the run's precision: TF32 tensor cores when they are allowed */
        ct_status st = ct_sgemm_rate_gpu(&peak, CT_PEAK_N, w->tf32, CT_PEAK_REPEATS);
        if (st != CT_OK) { ct_gpu_close(); return st; }
        snprintf(r->peak_what, sizeof r->peak_what, "cuBLAS sgemm %d^3 (%s), median of %d", CT_PEAK_N,
                 w->tf32 ? "TF32 allowed" : "FP32, no TF32", peak.repeats);
        ops = ct_ops_gpu();
    }
    r->peak = peak.median;
    r->peak_best = peak.best;
    r->available = 1;
    ct_status st = w->model == MODEL_SIAMESE_CNN ? fit_siamese_cnn(r, w, ops)
                 : w->model == MODEL_SIAMESE ? fit_siamese(r, w, ops) : fit_cnn(r, w, ops);
    if (index >= 0) ct_gpu_close();
    return st;
}

/* Splits --device into names, checking each (cpu, gpu, gpu:N, cuda:N) and refusing repeats. */
static ct_status parse_devices(const char *list, char names[][32], int *n)
{
    *n = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= 32) return ct_fail(CT_EINVAL, "--device %s: expected a comma-separated list such as cpu,gpu", list);
        if (*n == MAX_DEVICES) return ct_fail(CT_EINVAL, "--device %s: at most %d devices", list, MAX_DEVICES);
        memcpy(names[*n], p, len);
        names[*n][len] = '\0';
        int index;
        if (ct_gpu_parse_device(names[*n], &index) != CT_OK) return CT_EINVAL;   /* its message names the value */
        if (!strcmp(names[*n], "cuda")) snprintf(names[*n], 32, "gpu");
        for (int k = 0; k < *n; k++)
            if (!strcmp(names[k], names[*n])) return ct_fail(CT_EINVAL, "--device %s: %s is listed twice", list, names[k]);
        (*n)++;
        if (!p[len]) return CT_OK;
        p += len + 1;
    }
}

/* ---- the workload ---- */
static const char *FLOPS_SIAMESE =
    "matrix products only (models/siamese_lstm.h): LSTM forward 2*S*T*4H*(I+H) per layer and dense 2*S*H*D "
    "with S = 2 sequences per pair, backward twice the forward (input and weight gradients) less the first LSTM "
    "layer's input gradient, which training does not compute; gate nonlinearities, distance, loss and "
    "optimizer are not counted";
static const char *FLOPS_CNN =
    "matrix products only (models/seq_cnn.h): conv 2*N*F*OH*OW*C*K*K and dense 2*N*in*out forward, the same "
    "again for the weight gradient and for the input gradient (none for the first layer); activations, pooling, "
    "batchnorm, dropout, loss and optimizer are not counted. Convolutions count the FLOPs of direct convolution; "
    "3x3 stride-1 layers run Winograd F(2x2,3x3), whose products do 2.25x fewer, so their rate is an effective one "
    "and can exceed the sgemm peak";

static ct_status build_siamese(workload *w, const time_opts *o)
{
    time_setup *s = &w->setup;
    w->sc = ct_siamese_lstm_defaults();
    ct_synth_config synth = { .speakers = 40, .utts_per_speaker = 12, .min_frames = 100, .max_frames = 300,
                              .n_mels = w->sc.n_mels, .noise = 2.0f, .seed = (uint64_t)o->seed };
    if (!strcmp(o->data, "synthetic")) CT_TRY(ct_corpus_synthetic(&w->corpus, &synth));
    else CT_TRY(ct_featstore_load(&w->corpus, o->data));
    if (w->corpus.n_mels != w->sc.n_mels)
        return ct_fail(CT_EINVAL, "--data %s has %d features per frame; the timed model takes %d log-mels", o->data,
                       w->corpus.n_mels, w->sc.n_mels);
    w->tc = (speaker_task_config){ .pairs = s->n_train, .val_pairs = s->n_val, .batch = s->batch,
                                   .val_split = CT_VAL_SPEAKERS, .val_fraction = 0.25, .seed = (uint64_t)o->seed };
    snprintf(s->model_desc, sizeof s->model_desc, "siamese-lstm %dx%d -> LSTM %d -> last hidden state -> dense %d -> "
             "euclidean -> contrastive (margin %g), RMSprop lr %g", w->sc.n_mels, w->sc.frames, w->sc.hidden, w->sc.embed,
             w->sc.margin, w->fit.optim.lr);
    snprintf(s->data_desc, sizeof s->data_desc, "%s: %d utterances of %d speakers, 25%% of the speakers held out for "
             "validation", o->data, w->corpus.n_utt, w->corpus.n_speakers);
    s->flops_per_sample = ct_siamese_lstm_step_flops(&w->sc, 1);
    s->flops_counted = FLOPS_SIAMESE;
    s->sample_name = "pairs";
    if (w->model == MODEL_SIAMESE_CNN) {   /* the same pairs through the CNN tower */
        w->ccfg = ct_siamese_cnn_defaults();
        if (o->arch) snprintf(w->ccfg.spec, sizeof w->ccfg.spec, "%s", o->arch);
        static siamese_cnn m;
        ct_status st = ct_siamese_cnn_build(&m, &w->ccfg);
        if (st != CT_OK) return ct_fail(st, "--arch: %s", ct_last_error());
        s->flops_per_sample = ct_siamese_cnn_step_flops(&m, 1);
        ct_siamese_cnn_free(&m);
        snprintf(s->model_desc, sizeof s->model_desc, "siamese-cnn %dx%d -> %s -> euclidean -> contrastive (margin %g), "
                 "RMSprop lr %g", w->ccfg.n_mels, w->ccfg.frames, w->ccfg.spec, w->ccfg.margin, w->fit.optim.lr);
        s->flops_counted = FLOPS_CNN;
    }
    return CT_OK;
}

static ct_status build_cnn(workload *w, const time_opts *o)
{
    time_setup *s = &w->setup;
    w->arch = o->arch ? o->arch : SEQ_CNN_DEFAULT_SPEC;
    if (!strcmp(o->data, "synthetic")) {
        CT_TRY(ct_images_synthetic(&w->train, (int)s->n_train, CT_IDX_CLASSES, 28, 28, 0.6f, (uint64_t)o->seed));
        if (s->n_val > 0) CT_TRY(ct_images_synthetic(&w->val, (int)s->n_val, CT_IDX_CLASSES, 28, 28, 0.6f, (uint64_t)o->seed + 7919));
    } else {
        CT_TRY(ct_idx_load_dir(&w->train, &w->val, ct_idx_data_dir(o->data)));
        if (s->n_train > w->train.n) s->n_train = w->train.n;   /* the whole set when the protocol asks for more */
        if (s->n_val > w->val.n) s->n_val = w->val.n;
    }
    seq_cnn m;
    ct_status st = ct_seq_cnn_build(&m, w->arch, w->train.c, w->train.h, w->train.w, w->train.classes);
    if (st != CT_OK) return ct_fail(st, "--arch: %s", ct_last_error());
    s->flops_per_sample = ct_seq_cnn_step_flops(&m, 1);
    ct_seq_cnn_free(&m);
    snprintf(s->model_desc, sizeof s->model_desc, "cnn %dx%dx%d -> %s -> softmax cross-entropy, Adam lr %g",
             w->train.c, w->train.h, w->train.w, w->arch, w->fit.optim.lr);
    snprintf(s->data_desc, sizeof s->data_desc, "%s: %dx%dx%d images, %d classes", o->data, w->train.c, w->train.h,
             w->train.w, w->train.classes);
    s->flops_counted = FLOPS_CNN;
    s->sample_name = "images";
    return CT_OK;
}

/* Applies the protocol and the overriding options, then builds the data. */
static ct_status build_workload(workload *w, const time_opts *o, int argc, char **argv)
{
    time_setup *s = &w->setup;
    const protocol *p = find_protocol(o->protocol);
    if (!p) return ct_fail(CT_EINVAL, "--protocol %s: use seed, bench or smoke", o->protocol);
    int siamese = w->model != MODEL_CNN;
    if (siamese && (o->samples >= 0 || o->val_samples >= 0))
        return ct_fail(CT_EINVAL, "--samples and --val-samples are for cnn; the speaker models take --pairs N --val-pairs M");
    if (!siamese && (o->pairs >= 0 || o->val_pairs >= 0))
        return ct_fail(CT_EINVAL, "--pairs and --val-pairs are for the speaker models; cnn takes --samples N --val-samples M");
    if (w->model == MODEL_SIAMESE && o->arch)
        return ct_fail(CT_EINVAL, "--arch is for cnn and siamese-cnn; siamese-lstm times the seed's model");
    s->model = w->model == MODEL_SIAMESE ? "siamese-lstm" : w->model == MODEL_SIAMESE_CNN ? "siamese-cnn" : "cnn";
    s->protocol = p->name;
    s->data = o->data;
    s->epochs = o->epochs > 0 ? o->epochs : p->epochs;
    s->batch = o->batch > 0 ? o->batch : p->batch;
    s->threads = o->threads;
    s->seed = o->seed;
    s->warmup = s->epochs > 1 ? 1 : 0;
    long n_train = siamese ? o->pairs : o->samples, n_val = siamese ? o->val_pairs : o->val_samples;
    s->n_train = n_train >= 0 ? n_train : siamese ? p->pairs : p->samples;
    s->n_val = n_val >= 0 ? n_val : siamese ? p->val_pairs : p->val_samples;
    size_t k = 0;
    k += (size_t)snprintf(s->command, sizeof s->command, "ctrain time");
    for (int i = 0; i < argc && k < sizeof s->command; i++)
        k += (size_t)snprintf(s->command + k, sizeof s->command - k, " %s", argv[i]);
    /* the optimizer of `ctrain train MODEL`: RMSprop lr 1e-3 for the speaker model, Adam lr 1e-3 for the cnn */
    memset(&w->fit, 0, sizeof w->fit);
    w->fit.optim = ct_optim_defaults(siamese ? OPT_RMSPROP : OPT_ADAM);
    w->fit.sched = (ct_sched){ .kind = SCHED_CONSTANT, .base_lr = w->fit.optim.lr, .t_max = s->epochs };
    w->fit.epochs = s->epochs;
    w->fit.batch = s->batch;
    w->fit.progress = 0;
    w->layers = o->layers;
    w->tf32 = o->tf32;
    w->deterministic = o->deterministic;
    w->verbose = o->verbose;
    return siamese ? build_siamese(w, o) : build_cnn(w, o);
}

static void free_workload(workload *w)
{
    ct_corpus_free(&w->corpus);
    ct_images_free(&w->train);
    ct_images_free(&w->val);
}

/* ---- statistics and tables ---- */
/* Median, min and max of the epoch seconds after the warm-up; samples/s and GFLOP/s of their training parts. */
static ct_status summarise(time_run *r, const time_setup *s)
{
    int first = r->n_epochs > s->warmup ? s->warmup : 0, k = r->n_epochs - first;
    if (k < 1) return CT_OK;   /* no epoch trained: nothing to summarise */
    double *sec = ct_malloc((size_t)k * sizeof *sec, "epoch seconds"), train = 0;
    if (!sec) return CT_ENOMEM;
    for (int e = first; e < r->n_epochs; e++) {
        sec[e - first] = r->hist[e].seconds;
        train += r->hist[e].train_seconds;
    }
    r->sec_median = ct_sort_median(sec, k);
    r->sec_min = sec[0];
    r->sec_max = sec[k - 1];
    free(sec);
    r->prof_train_seconds = train;
    r->samples_per_s = train > 0 ? (double)s->n_train * k / train : 0;
    r->gflops = r->samples_per_s * s->flops_per_sample / 1e9;
    return CT_OK;
}

/* Prints text broken at spaces into lines of at most 100 characters. */
static void print_wrapped(const char *text)
{
    const int width = 100;
    while (*text) {
        int n = (int)strlen(text);
        if (n > width) {
            n = width;
            while (n > 0 && text[n] != ' ') n--;
            if (n == 0) n = width;
        }
        printf("%.*s\n", n, text);
        text += n;
        while (*text == ' ') text++;
    }
}

/* One row of the main table: all cells already formatted; fma and sgemm: the peak and the fraction of it. */
static void table_row(const char *dev, const char *epochs, const char *med, const char *mn, const char *mx,
                      const char *sps, const char *gf, const char *fma[2], const char *sgemm[2], const char *speed)
{
    printf("%-8s %7s %9s %9s %9s %12s %9s %9s %8s %10s %8s %8s\n", dev, epochs, med, mn, mx, sps, gf, fma[0], fma[1],
           sgemm[0], sgemm[1], speed);
}

/* The peak and achieved's fraction of it, or n/a. */
static void peak_cells(char peak[32], char frac[32], double gflops, double p, int available)
{
    if (p > 0) snprintf(peak, 32, "%.1f", p); else snprintf(peak, 32, "n/a");
    if (p > 0 && available) snprintf(frac, 32, "%.0f%%", 100 * gflops / p); else snprintf(frac, 32, "n/a");
}

static void print_table(const time_setup *s, const time_run *runs, int n)
{
    const time_run *cpu = NULL;
    for (int i = 0; i < n; i++) if (!strcmp(runs[i].device, "cpu") && runs[i].available) cpu = &runs[i];
    printf("\n%-8s %7s %29s %12s %9s %18s %19s %8s\n", "", "", "seconds per epoch", "training", "", "FP32 FMA peak",
           "sgemm peak", "");
    const char *head_fma[2] = { "GFLOP/s", "of peak" }, *head_sgemm[2] = { "GFLOP/s", "of sgemm" };
    table_row("device", "epochs", "median", "min", "max", "samples/s", "GFLOP/s", head_fma, head_sgemm, "vs cpu");
    for (int i = 0; i < n; i++) {
        const time_run *r = &runs[i];
        char c[9][32], fp[32], ff[32], sp[32], sf[32];
        const char *na = "n/a";
        peak_cells(fp, ff, r->gflops, r->fma_peak, r->available);
        peak_cells(sp, sf, r->gflops, r->peak, r->available);
        const char *fma[2] = { fp, ff }, *sgemm[2] = { sp, sf };
        if (!r->available) {   /* the peaks may have been measured even so */
            table_row(r->device, na, na, na, na, na, na, fma, sgemm, na);
            continue;
        }
        int first = r->n_epochs > s->warmup ? s->warmup : 0;
        if (r->n_epochs - first > 1) snprintf(c[0], sizeof c[0], "%d-%d", first + 1, r->n_epochs);
        else snprintf(c[0], sizeof c[0], "%d", r->n_epochs);
        snprintf(c[1], sizeof c[1], "%.2f", r->sec_median);
        snprintf(c[2], sizeof c[2], "%.2f", r->sec_min);
        snprintf(c[3], sizeof c[3], "%.2f", r->sec_max);
        snprintf(c[4], sizeof c[4], "%.1f", r->samples_per_s);
        snprintf(c[5], sizeof c[5], "%.1f", r->gflops);
        if (cpu && cpu->samples_per_s > 0) snprintf(c[8], sizeof c[8], "%.2fx", r->samples_per_s / cpu->samples_per_s);
        else snprintf(c[8], sizeof c[8], "%s", na);
        table_row(r->device, c[0], c[1], c[2], c[3], c[4], c[5], fma, sgemm, c[8]);
    }
    printf("\n");
    for (int i = 0; i < n; i++) {
        if (!runs[i].available) printf("%s: unavailable: %s\n", runs[i].device, runs[i].why);
        else printf("%s: %s; FMA peak: %s (best %.1f); sgemm peak: %s (best %.1f)\n", runs[i].device, runs[i].device_desc,
                    runs[i].fma_peak_what, runs[i].fma_peak_best, runs[i].peak_what, runs[i].peak_best);
    }
    char text[2048];
    if (s->warmup == 0) snprintf(text, sizeof text, "Statistics over the single epoch (no warm-up epoch left out: use --epochs 2 or more).");
    else if (s->epochs == 2) snprintf(text, sizeof text, "Statistics over epoch 2; epoch 1 is the warm-up and is left out.");
    else snprintf(text, sizeof text, "Statistics over epochs 2-%d; epoch 1 is the warm-up and is left out.", s->epochs);
    print_wrapped(text);
    snprintf(text, sizeof text, "Seconds per epoch: wall time of training and validation (%ld + %ld %s). Samples/s and "
             "GFLOP/s: the training part only (forward, backward, optimizer and data loading). FLOPs: %.1f M per %s per "
             "training step, counting %s.", s->n_train, s->n_val, s->sample_name, s->flops_per_sample / 1e6,
             !strcmp(s->sample_name, "pairs") ? "pair" : "image", s->flops_counted);
    print_wrapped(text);
}

static void layer_row(const char *name, const char *fwd, const char *bwd, double total_ms, double share, const char *gf)
{
    printf("%-28s %10s %10s %10.3f %7.1f%% %9s\n", name, fwd, bwd, total_ms, 100 * share, gf);
}

static void print_layers(const time_setup *s, const time_run *r)
{
    if (!r->available || r->n_layers == 0) return;
    double nb = (double)r->prof_batches;
    if (nb < 1) { printf("\n%s: no batch was profiled (use --epochs 2 or more: the first epoch is the warm-up)\n", r->device); return; }
    double step_ms = 1e3 * r->prof_train_seconds / nb, sum_ms = 0;
    printf("\nLayers on %s: ms per training batch (mean over %ld batches of up to %d %s, the epochs after the warm-up)\n",
           r->device, r->prof_batches, s->batch, s->sample_name);
    printf("%-28s %10s %10s %10s %8s %9s\n", "layer", "forward", "backward", "total", "share", "GFLOP/s");
    for (int i = 0; i < r->n_layers; i++) {
        const time_layer *l = &r->layer[i];
        double f = 1e3 * l->fwd_s / nb, b = 1e3 * l->bwd_s / nb;
        char fs[32], bs[32], gs[32];
        snprintf(fs, sizeof fs, "%.3f", f);
        snprintf(bs, sizeof bs, "%.3f", b);
        if (l->flops_per_sample > 0 && l->fwd_s + l->bwd_s > 0)
            snprintf(gs, sizeof gs, "%.1f", l->flops_per_sample * (double)r->prof_samples / (l->fwd_s + l->bwd_s) / 1e9);
        else snprintf(gs, sizeof gs, "-");
        layer_row(l->name, fs, bs, f + b, step_ms > 0 ? (f + b) / step_ms : 0, gs);
        sum_ms += f + b;
    }
    layer_row("other (optimizer, data)", "", "", step_ms - sum_ms, step_ms > 0 ? (step_ms - sum_ms) / step_ms : 0, "");
    char gs[32];
    snprintf(gs, sizeof gs, "%.1f", step_ms > 0 ? s->flops_per_sample * (double)r->prof_samples / nb / (step_ms * 1e-3) / 1e9 : 0);
    layer_row("training step", "", "", step_ms, 1, gs);
}

/* FILE.json -> FILE-DEVICE.json when several devices are timed; the picture is FILE.svg. */
static void output_path(char *buf, size_t n, const char *json, const char *device, const char *ext)
{
    size_t len = strlen(json);
    int has_ext = len > 5 && !strcmp(json + len - 5, ".json");
    int base = (int)(has_ext ? len - 5 : len);
    if (device) {
        char dev[32];
        snprintf(dev, sizeof dev, "%.31s", device);
        for (char *c = dev; *c; c++) if (*c == ':') *c = '-';
        snprintf(buf, n, "%.*s-%s%s", base, json, dev, ext);
    } else {
        snprintf(buf, n, "%.*s%s", base, json, ext);
    }
}

static ct_status write_outputs(const char *json, const time_setup *s, const time_run *runs, int n)
{
    char path[4200];
    for (int i = 0; i < n; i++) {
        if (!runs[i].available) { printf("%s: nothing timed, no JSON written\n", runs[i].device); continue; }
        if (n == 1) snprintf(path, sizeof path, "%s", json);
        else output_path(path, sizeof path, json, runs[i].device, ".json");
        CT_TRY(time_write_json(path, s, &runs[i]));
        printf("results written to %s\n", path);
    }
    output_path(path, sizeof path, json, NULL, ".svg");
    CT_TRY(time_write_svg(path, s, runs, n));
    printf("picture written to %s\n", path);
    return CT_OK;
}

/* ---- the command ---- */
static ct_status parse_options(time_opts *o, int argc, char **argv, int *help)
{
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) { *help = 1; return CT_OK; }
        if (ct_args_str(&a, "--devices", &o->devices, &st)) {   /* the old spelling */
            if (st == CT_OK) fprintf(stderr, "ctrain time: note: --devices is now spelled --device (the same comma list)\n");
            continue;
        }
        if (ct_args_str(&a, "--protocol", &o->protocol, &st) || ct_args_str(&a, "--device", &o->devices, &st)
            || ct_args_str(&a, "--data", &o->data, &st) || ct_args_str(&a, "--json", &o->json, &st)
            || ct_args_str(&a, "--arch", &o->arch, &st)
            || ct_args_int(&a, "--epochs", &o->epochs, 1, 100000, &st) || ct_args_int(&a, "--batch", &o->batch, 1, 1 << 16, &st)
            || ct_args_int(&a, "--threads", &o->threads, 1, 1024, &st) || ct_args_long(&a, "--seed", &o->seed, 0, 0x7fffffffL, &st)
            || ct_args_long(&a, "--pairs", &o->pairs, 1, 100000000L, &st) || ct_args_long(&a, "--val-pairs", &o->val_pairs, 0, 100000000L, &st)
            || ct_args_long(&a, "--samples", &o->samples, 1, 100000000L, &st)
            || ct_args_long(&a, "--val-samples", &o->val_samples, 0, 100000000L, &st)
            || (ct_args_flag(&a, "--layers") && (o->layers = 1)) || (ct_args_flag(&a, "--verbose") && (o->verbose = 1))
            || (ct_args_flag(&a, "--tf32") && (o->tf32 = 1)) || (ct_args_flag(&a, "--deterministic") && (o->deterministic = 1)))
            continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain time --help)", argv[a.i]);
    }
    return st;
}

int cmd_time(int argc, char **argv)
{
    if (argc < 1) { fputs(HELP, stderr); return 2; }
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) { fputs(HELP, stdout); return 0; }
    if (!strcmp(argv[0], "--compare")) {
        if (argc < 2) { fprintf(stderr, "ctrain time: --compare needs at least one FILE.json written by `ctrain time --json`\n"); return 2; }
        return time_compare(argc - 1, argv + 1);
    }
    static workload w;   /* large: the model's spec, the per-device runs */
    memset(&w, 0, sizeof w);
    if (!strcmp(argv[0], "siamese-lstm")) w.model = MODEL_SIAMESE;
    else if (!strcmp(argv[0], "siamese-cnn")) w.model = MODEL_SIAMESE_CNN;
    else if (!strcmp(argv[0], "cnn")) w.model = MODEL_CNN;
    else {
        fprintf(stderr, "ctrain time: unknown model '%s' (models: siamese-lstm, siamese-cnn, cnn; see ctrain time --help)\n", argv[0]);
        return 2;
    }
    time_opts o = { .protocol = "bench", .devices = "cpu,gpu", .data = "synthetic", .threads = ct_cpu_count(), .seed = 1,
                    .pairs = -1, .val_pairs = -1, .samples = -1, .val_samples = -1 };
    int help = 0, n_dev = 0;
    char devices[MAX_DEVICES][32];
    ct_status st = parse_options(&o, argc - 1, argv + 1, &help);
    if (help) { fputs(HELP, stdout); return 0; }
    if (st == CT_OK) st = parse_devices(o.devices, devices, &n_dev);
    if (st == CT_OK && o.json && !*o.json) st = ct_fail(CT_EINVAL, "--json needs a file name");
    if (st == CT_OK) st = build_workload(&w, &o, argc, argv);
    if (st != CT_OK) {
        fprintf(stderr, "ctrain time: %s\n", ct_last_error());
        free_workload(&w);
        return 2;
    }
    ct_threads_set(o.threads);
    const time_setup *s = &w.setup;
    cli_print_header(stdout, o.threads);
    printf("Model: %s, %.1f MFLOP per %s per training step\n", s->model_desc, s->flops_per_sample / 1e6,
           w.model == MODEL_CNN ? "image" : "pair");
    printf("Data: %s\n", s->data_desc);
    printf("Protocol: %s: %d epochs of %ld training + %ld validation %s, batch %d, seed %ld; devices %s\n",
           s->protocol, s->epochs, s->n_train, s->n_val, s->sample_name, s->batch, s->seed, o.devices);
    fflush(stdout);

    static time_run runs[MAX_DEVICES];
    memset(runs, 0, sizeof runs);
    int timed = 0;
    for (int i = 0; i < n_dev && st == CT_OK; i++) {
        snprintf(runs[i].device, sizeof runs[i].device, "%.31s", devices[i]);
        st = run_device(&runs[i], &w);
        if (st == CT_OK && runs[i].available && (st = summarise(&runs[i], s)) == CT_OK) timed++;
        if (st == CT_OK && runs[i].available) printf("%s: %d epochs trained\n", runs[i].device, runs[i].n_epochs);
        fflush(stdout);
    }
    if (st == CT_OK) {
        print_table(s, runs, n_dev);
        for (int i = 0; i < n_dev; i++) print_layers(s, &runs[i]);
        if (o.json) st = write_outputs(o.json, s, runs, n_dev);
    }
    for (int i = 0; i < n_dev; i++) free(runs[i].hist);
    free_workload(&w);
    fflush(stdout);
    if (st != CT_OK) { fprintf(stderr, "ctrain time: %s\n", ct_last_error()); return 1; }
    if (!timed) { fprintf(stderr, "ctrain time: no device could be timed (see above)\n"); return 1; }
    return 0;
}
