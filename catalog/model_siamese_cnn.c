/* model_siamese_cnn.c - the descriptor of siamese-cnn (catalog/model_table.h):
 * two log-mel crops -> shared CNN tower from a spec (models/siamese_cnn.h) ->
 * Euclidean distance -> contrastive loss, trained on the speaker models' pairs
 * (catalog/model_speaker.h). Exports hold the tower: the head has no weights. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "io/weights.h"
#include "catalog/export.h"
#include "catalog/model_speaker.h"

typedef struct {
    siamese_cnn_config m;      /* m.spec: --arch, or the default body ending in dense<--embed> (finish) */
    const char *arch;          /* --arch SPEC, or arch_buf */
    int embed;                 /* --embed: 0 = what the spec outputs (64 for the default spec) */
    char arch_buf[1024];       /* a spec recorded in a file */
    ct_speaker_opts data;
} scnn_cfg;

/* Kept in a run's configuration and with the model (a checkpoint's and a weights file's root
 * attributes, beside the spec and the embedding size the network reports: describe). */
#define SCNN_KEPT (CT_IN_CONFIG | CT_IN_MODEL)

static const ct_opt OPTS[] = {
    { CT_OPT_HEADING, "model:", 0, 0, 0, 0, 0, NULL, CT_CMD_TRAIN, NULL, .store = CT_IN_NONE },
    { CT_OPT_STR, "--arch", "SPEC", offsetof(scnn_cfg, arch), 0, 0, 0, NULL, CT_CMD_TRAIN | CT_CMD_TIME | CT_CMD_IMPORT,
      "the tower, layers separated by commas (models/seq_cnn.h); default\n" SIAMESE_CNN_DEFAULT_SPEC "\n"
      "layers: convFkK[sS][pP] denseU maxpoolK[sS] gap gaph flatten dropoutP\nbatchnorm relu tanh sigmoid save add; gaph = mean over time; "
      "the last layer's\noutput is the embedding; save,...,add is a residual block (add sums its input\nand what save kept)", .store = SCNN_KEPT },
    { CT_OPT_INT, "--mels", "N", offsetof(scnn_cfg, m.n_mels), 0, 1, 4096, NULL, CT_CMD_TRAIN | CT_CMD_EVAL | CT_CMD_IMPORT,
      "features per frame (eval: a weights file that does not record it takes the\nstore's)", .key = "n_mels", .store = SCNN_KEPT },
    { CT_OPT_INT, "--frames", "N", offsetof(scnn_cfg, m.frames), 0, 1, 100000, NULL, CT_CMD_TRAIN | CT_CMD_IMPORT,
      "frames per utterance crop (default 100 = 1 s)", .store = SCNN_KEPT },
    { CT_OPT_INT, "--embed", "N", offsetof(scnn_cfg, embed), 0, 1, 65536, NULL, CT_CMD_TRAIN,
      "embedding size: the default spec's last dense layer (default 64); with\n--arch it must equal the spec's output", .store = CT_IN_CONFIG },
    { CT_OPT_FLOAT, "--margin", "X", offsetof(scnn_cfg, m.margin), 0, 1e-6, 1e6, NULL, CT_CMD_TRAIN, "contrastive margin", .store = SCNN_KEPT },
    /* recorded with the model, set by no flag: the distance below which a pair is called "same" */
    { CT_OPT_FLOAT, NULL, "X", offsetof(scnn_cfg, m.threshold), 0, 0, 1e9, NULL, 0, NULL, .key = "threshold", .store = CT_IN_MODEL },
    /* recorded with the model, set by no flag: the embedding size the tower outputs (--embed is the
     * option, 0 when not given) */
    { CT_OPT_INT, NULL, "N", offsetof(scnn_cfg, m.embed), 0, 1, 1 << 30, NULL, 0, NULL, .key = "embed", .store = CT_IN_MODEL },
    CT_SPEAKER_OPTS(scnn_cfg, data),
    { CT_OPT_END, 0, 0, 0, 0, 0, 0, NULL, 0, NULL, .store = CT_IN_NONE }
};


static void defaults(void *vc)
{
    scnn_cfg *c = vc;
    memset(c, 0, sizeof *c);
    c->m = ct_siamese_cnn_defaults();
    ct_speaker_opts_defaults(&c->data);
}

static ct_status finish(void *vc, int checkpointing)
{
    scnn_cfg *c = vc;
    siamese_cnn_config *mc = &c->m;
    mc->embed = c->embed;
    if (c->arch && strlen(c->arch) >= sizeof mc->spec)
        return ct_fail(CT_EINVAL, "--arch: the spec is longer than %zu characters", sizeof mc->spec - 1);
    if (c->arch) snprintf(mc->spec, sizeof mc->spec, "%s", c->arch);
    else snprintf(mc->spec, sizeof mc->spec, "%s,dense%d", SIAMESE_CNN_DEFAULT_BODY, c->embed ? c->embed : 64);
    size_t kv_max = sizeof ((ct_kv_entry *)0)->str;
    if (strlen(mc->spec) >= kv_max && checkpointing)
        return ct_fail(CT_EINVAL, "--arch: a checkpoint records specs of up to %zu characters, this one has %zu; shorten it "
                       "or train without checkpoints (no --checkpoint or --save-best, and --no-run-dir: a run directory keeps one)",
                       kv_max - 1, strlen(mc->spec));
    return ct_speaker_opts_check(&c->data);
}

/* The configuration that the weights file or checkpoint `path` records in its root attributes kv:
 * the spec and the window length (it must record them), and the rows recorded CT_IN_MODEL, which
 * a flag given (bit i of `given`, its value in `flags`) must agree with; what it does not record
 * takes the flag or the default (n_mels: `mels`) and is named in `missing`. */
static ct_status recorded(scnn_cfg *c, const scnn_cfg *flags, unsigned long long given, const char *path, const ct_kv *kv,
                          int mels, char *missing, size_t cap)
{
    c->m = ct_siamese_cnn_defaults();
    c->m.n_mels = mels;
    for (int i = 0; OPTS[i].type != CT_OPT_END && i < 64; i++)
        if ((given >> i) & 1) ct_opt_copy(&OPTS[i], c, flags);
    CT_TRY(ct_model_desc_cnn_arch(path, kv, c->m.spec, sizeof c->m.spec));
    CT_TRY(ct_opts_from_file(OPTS, CT_IN_MODEL, CT_CMD_EVAL, c, given, kv, path, missing, cap));
    snprintf(c->arch_buf, sizeof c->arch_buf, "%s", c->m.spec);
    c->arch = c->arch_buf;
    c->embed = c->m.embed = 0;   /* whatever the recorded spec outputs */
    return CT_OK;
}

static ct_status from_meta(void *vc, const ct_ckpt_meta *meta, const char *path)
{
    scnn_cfg *c = vc;
    char missing[512] = "";
    CT_TRY(recorded(c, c, 0, path, &meta->model_cfg, c->m.n_mels, missing, sizeof missing));
    return ct_opts_from_kv(OPTS, CT_IN_TRAINING, c, &meta->train_cfg, path);
}

static void describe(const void *vc, const void *net, ct_kv *kv)
{
    static scnn_cfg c;
    const siamese_cnn_config *m = &((const siamese_cnn *)net)->cfg;
    c = *(const scnn_cfg *)vc;
    c.m = *m;                                   /* the network's own: the embedding size it outputs */
    c.arch = m->spec;                           /* a ct_kv holds 159 characters: the weights file gets the whole spec besides */
    ct_opts_to_kv(OPTS, CT_IN_MODEL, &c, kv);   /* arch, n_mels, frames, margin, threshold, embed */
}

static ct_status data_to_meta(const void *vc, const ct_model_data *d, ct_ckpt_meta *meta)
{
    return ct_speaker_to_meta(OPTS, vc, d, meta);
}

static void set_counts(void *vc, long n_train, long n_val)
{
    scnn_cfg *c = vc;
    c->data.pairs = n_train;
    c->data.val_pairs = n_val;
}

static ct_status load_data(ct_model_data *d, const void *vc, const char *source, long seed, int batch)
{
    const scnn_cfg *c = vc;
    return ct_speaker_load(d, &c->data, source, seed, batch, c->m.n_mels, c->m.frames);
}

static ct_status task_open(ct_model_task *t, void *net, ct_model_data *d, const ct_rngs *rngs, int batch)
{
    return ct_speaker_task_open(t, ct_speaker_model_cnn(net), d, rngs);
}

static ct_status build(void *net, const void *vc, const ct_model_data *d) { return ct_siamese_cnn_build(net, &((const scnn_cfg *)vc)->m); }
static void init_weights(void *net, ct_rng *r) { ct_siamese_cnn_init_weights(net, r); }
static ct_status set_device(void *net, const ct_backend *be) { return ct_siamese_cnn_set_device(net, be); }
static ct_status plan(void *net, int batch) { return ct_siamese_cnn_plan(net, batch); }
static void net_free(void *net) { ct_siamese_cnn_free(net); }
static ct_params *params(void *net) { return &((siamese_cnn *)net)->enc.params; }
static ct_params *buffers(void *net) { return &((siamese_cnn *)net)->enc.buffers; }
static ct_prof *prof(void *net) { return &((siamese_cnn *)net)->enc.prof; }
static speaker_model speaker(void *net) { return ct_speaker_model_cnn(net); }

static void arch_line(const void *net, char *buf, size_t cap)
{
    const siamese_cnn_config *c = &((const siamese_cnn *)net)->cfg;
    snprintf(buf, cap, "siamese-cnn %dx%d -> %s -> euclidean -> contrastive (margin %g)", c->frames, c->n_mels, c->spec, c->margin);
}

static double step_flops(const void *net) { return ct_siamese_cnn_step_flops(net, 1); }

static void train_line(const void *net, char *buf, size_t cap)
{
    char a[1400];
    arch_line(net, a, sizeof a);
    snprintf(buf, cap, "%s, %zu parameters, %.1f MFLOP per pair", a, ct_params_count(&((const siamese_cnn *)net)->enc.params),
             step_flops(net) * 1e-6);
}

static void layer_rows(const void *net, ct_row_fn row, void *ctx) { ct_model_seq_rows(&((const siamese_cnn *)net)->enc, 2, row, ctx); }

static ct_status save(void *net, const char *path, const ct_kv *desc, const char *const *speakers, int n_speakers)
{
    /* eval rebuilds the tower from "arch" and embeds windows of "frames" frames; the spec is written
     * whole besides the description (a ct_kv string holds 159 characters) */
    siamese_cnn *m = net;
    const char *attrs[] = { "arch", m->cfg.spec, NULL };
    return ct_weights_save_speakers(path, "siamese-cnn", &m->enc.params, &m->enc.buffers, desc, attrs, speakers, n_speakers);
}

static ct_status eval_config(void *vc, const char *weights, const void *flags, unsigned long long given, const char *data,
                             char *note, size_t cap)
{
    static model_desc d;
    int store_mels = 0;
    CT_TRY(ct_model_desc_read(&d, weights, "siamese-cnn"));   /* the spec, the window length, the feature settings */
    CT_TRY(ct_model_desc_check_store(&d, data, &store_mels));
    CT_TRY(recorded(vc, flags, given, d.path, &d.kv, store_mels, d.missing, sizeof d.missing));
    if (!ct_model_desc_note(&d, note, cap)) note[0] = '\0';
    return CT_OK;
}

static ct_status file_config(void *vc, const ct_src *s, unsigned long long given)
{
    static scnn_cfg flags;
    scnn_cfg *c = vc;
    char missing[512] = "";
    if (!s->described) return CT_OK;   /* a tower of the default spec, or the options' */
    flags = *c;
    return recorded(c, &flags, given, s->path, &s->kv, c->m.n_mels, missing, sizeof missing);
}

/* The tower's layers (catalog/export.h); the distance and the loss on top have no weights. */
static ct_status layout(const void *net, ct_format f, ct_layout *out)
{
    const siamese_cnn *m = net;
    out->n = 0;
    out->arch = m->cfg.spec;
    return ct_layout_seq_cnn(&m->enc, f, NULL, out);
}

const ct_model_descriptor ct_model_siamese_cnn = {
    .name = "siamese-cnn",
    .summary = "the same with a CNN speaker encoder on log-mel crops",
    .about = "Trains a CNN speaker encoder in the siamese set-up: two log-mel crops (images of frames x\n"
             "mels) -> shared CNN (conv, batchnorm, relu, maxpool, mean over time, dense embedding) ->\n"
             "Euclidean distance -> contrastive loss. Batchnorm's statistics are taken over both sides\n"
             "of every pair in the batch; validation and evaluation use its running statistics.",
    .task = CT_TASK_SPEAKER,
    .cfg_size = sizeof(scnn_cfg), .net_size = sizeof(siamese_cnn),
    .opts = OPTS,
    .train = { .epochs = 5, .batch = 128, .optimizer = OPT_RMSPROP, .lr = 0, .schedule = "constant", .data = "synthetic" },
    .defaults = defaults, .finish = finish, .from_meta = from_meta, .describe = describe, .data_to_meta = data_to_meta,
    .set_counts = set_counts,
    .load_data = load_data, .data_line = ct_speaker_data_line, .data_summary = ct_speaker_data_summary, .task_open = task_open,
    .build = build, .init_weights = init_weights, .set_device = set_device, .plan = plan, .free = net_free, .params = params,
    .buffers = buffers, .prof = prof, .arch_line = arch_line, .train_line = train_line, .step_flops = step_flops,
    .sample_name = "pairs", .flops_counted = CT_MODEL_SEQ_FLOPS, .layer_rows = layer_rows, .save = save,
    .eval_about = "Scores a speaker-verification trial list with trained siamese-CNN weights. The CNN sees crops of a\n"
                  "fixed number of frames, so every utterance of the list is cut into windows of that many frames\n"
                  "(hop half a window, the last one aligned to the utterance's end; a shorter utterance is one\n"
                  "zero-padded window), each window is embedded (batchnorm with its running statistics) and the\n"
                  "utterance's embedding is the mean of its windows'. A trial's score is minus the Euclidean\n"
                  "distance between its two embeddings. Prints the trials scored, the equal error rate (EER) and\n"
                  "the minimum detection cost (minDCF, C_miss = C_fa = 1) at p_target 0.01 and 0.05.",
    .eval_opts = OPTS, .eval_flags_size = sizeof(scnn_cfg), .eval_batch = 128, .eval_config = eval_config,
    .speaker = speaker,
    .file_config = file_config, .layout = layout,
};
