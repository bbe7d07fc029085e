/* model_siamese_lstm.c - the descriptor of siamese-lstm (catalog/model_table.h):
 * two utterances -> shared LSTM -> mean over time (or last hidden state) ->
 * dense embedding -> Euclidean distance -> contrastive loss
 * (models/siamese_lstm.h), trained on pairs (catalog/model_speaker.h). */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "io/weights.h"
#include "catalog/export.h"
#include "catalog/model_speaker.h"

static_assert(sizeof(lstm_recurrent) == sizeof(int) && sizeof(lstm_return) == sizeof(int), "choice options write ints");

typedef struct {
    siamese_lstm_config m;
    ct_speaker_opts data;
} lstm_cfg;

/* The model's options are kept in a run's configuration and with the model (a checkpoint's and
 * a weights file's root attributes: what eval rebuilds the model from, catalog/model_desc.h). */
#define LSTM_KEPT (CT_IN_CONFIG | CT_IN_MODEL)
/* The network's sizes and options: trained with, and given for a file that does not record them. */
#define SIZE_CMDS (CT_CMD_TRAIN | CT_CMD_EVAL | CT_CMD_IMPORT)

static const ct_opt OPTS[] = {
    { CT_OPT_HEADING, "model:", 0, 0, 0, 0, 0, NULL, CT_CMD_TRAIN, NULL, .store = CT_IN_NONE },
    { CT_OPT_INT, "--mels", "N", offsetof(lstm_cfg, m.n_mels), 0, 1, 4096, NULL, SIZE_CMDS, "features per frame", .key = "n_mels", .store = LSTM_KEPT },
    { CT_OPT_INT, "--frames", "N", offsetof(lstm_cfg, m.frames), 0, 1, 100000, NULL, CT_CMD_TRAIN, "frames per utterance crop (default 100 = 1 s)", .store = LSTM_KEPT },
    { CT_OPT_INT, "--hidden", "N", offsetof(lstm_cfg, m.hidden), 0, 1, 65536, NULL, SIZE_CMDS, "LSTM units", .store = LSTM_KEPT },
    { CT_OPT_INT, "--layers", "N", offsetof(lstm_cfg, m.layers), 0, 1, LSTM_MAX_LAYERS, NULL, SIZE_CMDS, "stacked LSTM layers", .store = LSTM_KEPT },
    { CT_OPT_INT, "--embed", "N", offsetof(lstm_cfg, m.embed), 0, 1, 65536, NULL, SIZE_CMDS, "embedding size", .store = LSTM_KEPT },
    { CT_OPT_FLOAT, "--margin", "X", offsetof(lstm_cfg, m.margin), 0, 1e-6, 1e6, NULL, CT_CMD_TRAIN, "contrastive margin", .store = LSTM_KEPT },
    { CT_OPT_CHOICE, "--recurrent", "NAME", offsetof(lstm_cfg, m.recurrent), 0, 0, 0, ct_lstm_recurrent_choices,
      SIZE_CMDS, "sigmoid or hard_sigmoid gate activation", .store = LSTM_KEPT },
    { CT_OPT_CHOICE, "--pool", "WHAT", offsetof(lstm_cfg, m.pool), 0, 0, 0, ct_lstm_pool_choices, SIZE_CMDS,
      "mean: the LSTM's mean over the utterance's frames feeds the embedding;\nlast: its last hidden state (the seed's model, far weaker: see\n"
      "docs/training.md) (default: mean to train; last for a file that\neval or import reads without it, as such files were trained)", .store = LSTM_KEPT },
    /* recorded with the model, set by no flag: the distance below which a pair is called "same" */
    { CT_OPT_FLOAT, NULL, "X", offsetof(lstm_cfg, m.threshold), 0, 0, 1e9, NULL, 0, NULL, .key = "threshold", .store = CT_IN_MODEL },
    CT_SPEAKER_OPTS(lstm_cfg, data),
    { CT_OPT_END, 0, 0, 0, 0, 0, 0, NULL, 0, NULL, .store = CT_IN_NONE }
};

static void defaults(void *vc)
{
    lstm_cfg *c = vc;
    c->m = ct_siamese_lstm_defaults();
    /* The embedding pools the mean over time by default: on corpora unlike the demo's it gives a far better
     * model (docs/training.md, "Choosing the defaults"). ct_siamese_lstm_defaults() stays the seed's exact model (the last hidden state), which
     * `ctrain time` times and --pool last reproduces. */
    c->m.pool = LSTM_RETURN_MEAN;
    ct_speaker_opts_defaults(&c->data);
    c->data.pairs = 10000;   /* with the cosine schedule and lr 3e-3 of ct_model_siamese_lstm.train: docs/training.md, "Choosing the defaults" */
}

static void time_defaults(void *vc)
{
    defaults(vc);
    ((lstm_cfg *)vc)->m = ct_siamese_lstm_defaults();   /* the seed's model */
}

static ct_status finish(void *vc, int checkpointing) { return ct_speaker_opts_check(&((lstm_cfg *)vc)->data); }

static ct_status from_meta(void *vc, const ct_ckpt_meta *meta, const char *path)
{
    lstm_cfg *c = vc;
    int n_mels = c->m.n_mels;
    /* what the checkpoint does not record takes the seed model's defaults; pool: last, as such checkpoints were trained */
    c->m = ct_siamese_lstm_defaults();
    c->m.n_mels = n_mels;
    CT_TRY(ct_opts_from_kv(OPTS, CT_IN_MODEL, c, &meta->model_cfg, path));
    return ct_opts_from_kv(OPTS, CT_IN_TRAINING, c, &meta->train_cfg, path);
}

static void describe(const void *vc, const void *net, ct_kv *kv) { ct_opts_to_kv(OPTS, CT_IN_MODEL, vc, kv); }

static ct_status data_to_meta(const void *vc, const ct_model_data *d, ct_ckpt_meta *meta)
{
    return ct_speaker_to_meta(OPTS, vc, d, meta);
}

static void set_counts(void *vc, long n_train, long n_val)
{
    lstm_cfg *c = vc;
    c->data.pairs = n_train;
    c->data.val_pairs = n_val;
}

static ct_status load_data(ct_model_data *d, const void *vc, const char *source, long seed, int batch)
{
    const lstm_cfg *c = vc;
    return ct_speaker_load(d, &c->data, source, seed, batch, c->m.n_mels, c->m.frames);
}

static ct_status task_open(ct_model_task *t, void *net, ct_model_data *d, const ct_rngs *rngs, int batch)
{
    return ct_speaker_task_open(t, ct_speaker_model_lstm(net), d, rngs);
}

static ct_status build(void *net, const void *vc, const ct_model_data *d) { return ct_siamese_lstm_build(net, &((const lstm_cfg *)vc)->m); }
static void init_weights(void *net, ct_rng *r) { ct_siamese_lstm_init_weights(net, r); }
static ct_status set_device(void *net, const ct_backend *be) { return ct_siamese_lstm_set_device(net, be); }
static ct_status plan(void *net, int batch) { return ct_siamese_lstm_plan(net, batch); }
static void net_free(void *net) { ct_siamese_lstm_free(net); }
static ct_params *params(void *net) { return &((siamese_lstm *)net)->params; }
static ct_params *buffers(void *net) { return NULL; }
static ct_prof *prof(void *net) { return &((siamese_lstm *)net)->prof; }
static speaker_model speaker(void *net) { return ct_speaker_model_lstm(net); }

static void arch_line(const void *net, char *buf, size_t cap)
{
    const siamese_lstm_config *c = &((const siamese_lstm *)net)->cfg;
    snprintf(buf, cap, "siamese-lstm %dx%d -> LSTM %d%s -> %s -> dense %d -> euclidean -> contrastive (margin %g)", c->n_mels,
             c->frames, c->hidden, c->layers > 1 ? " (stacked)" : "", c->pool == LSTM_RETURN_MEAN ? "mean over time" : "last hidden state",
             c->embed, c->margin);
}

static void train_line(const void *net, char *buf, size_t cap)
{
    char a[512];
    arch_line(net, a, sizeof a);
    snprintf(buf, cap, "%s, %zu parameters", a, ct_params_count(&((const siamese_lstm *)net)->params));
}

static double step_flops(const void *net) { return ct_siamese_lstm_step_flops(&((const siamese_lstm *)net)->cfg, 1); }

static void layer_rows(const void *net, ct_row_fn row, void *ctx)
{
    const siamese_lstm *m = net;
    for (int p = 0; p < SIAMESE_LSTM_PARTS; p++)
        row(ctx, ct_siamese_lstm_part_name((siamese_lstm_part)p), m->prof.fwd[p], m->prof.bwd[p],
            ct_siamese_lstm_part_flops(&m->cfg, (siamese_lstm_part)p, 1));
}

static ct_status save(void *net, const char *path, const ct_kv *desc, const char *const *speakers, int n_speakers)
{
    /* the model's description (catalog/model_desc.h) beside the weights: eval rebuilds the model from it */
    return ct_weights_save_speakers(path, "siamese-lstm", &((siamese_lstm *)net)->params, NULL, desc, NULL, speakers, n_speakers);
}

/* `ctrain eval`: the model the weights file records; its flags (the rows eval takes, parsed
 * into `flags`, a configuration) only fill in what an older file does not record, and one that
 * contradicts the file is refused (ct_opts_from_file). */
static ct_status eval_config(void *vc, const char *weights, const void *flags, unsigned long long given, const char *data,
                             char *note, size_t cap)
{
    lstm_cfg *c = vc;
    static model_desc d;
    int store_mels = 0;
    CT_TRY(ct_model_desc_read(&d, weights, "siamese-lstm"));
    CT_TRY(ct_model_desc_check_store(&d, data, &store_mels));
    /* not recorded and not given: the seed model's defaults (pool last: what files without it were
     * trained with), the feature store's mel bands */
    c->m = ct_siamese_lstm_defaults();
    c->m.n_mels = store_mels;
    for (int i = 0; OPTS[i].type != CT_OPT_END && i < 64; i++)
        if ((given >> i) & 1) ct_opt_copy(&OPTS[i], c, flags);
    CT_TRY(ct_opts_from_file(OPTS, CT_IN_MODEL, CT_CMD_EVAL, c, given, &d.kv, d.path, d.missing, sizeof d.missing));
    if (!ct_model_desc_note(&d, note, cap)) note[0] = '\0';
    return CT_OK;
}

/* ---- export and import ---- */

/* The sizes of the file's tensors: stacked layers, features, units, embedding (0 when not found). */
static void file_sizes(const ct_src *s, int *layers, int *mels, int *hidden, int *embed)
{
    size_t d[4];
    *layers = *mels = *hidden = *embed = 0;
    if (s->format == CT_FORMAT_KERAS) {   /* LSTM layers (kernel [I, 4H], recurrent_kernel [H, 4H], bias), then a Dense */
        for (int i = 0; i < s->n_layers; i++) {
            const ct_src_layer *l = &s->layer[i];
            if (l->nw == 3 && l->ndim[0] == 2 && l->ndim[1] == 2) {
                if (*layers == 0) *mels = (int)l->dims[0][0];
                *hidden = (int)l->dims[1][0];
                (*layers)++;
            } else if (l->nw == 2 && l->ndim[0] == 2) *embed = (int)l->dims[0][1];
        }
        return;
    }
    const char *ih = s->format == CT_FORMAT_TORCH ? "lstm.weight_ih_l%d" : "model/lstm_1/w_ih_l%d";
    char name[64];
    for (;; (*layers)++) {
        snprintf(name, sizeof name, ih, *layers);
        if (ct_src_dims(s, name, d) != 2) break;
        if (*layers == 0) *mels = (int)d[1];
    }
    if (ct_src_dims(s, s->format == CT_FORMAT_TORCH ? "lstm.weight_hh_l0" : "model/lstm_1/w_hh_l0", d) == 2) *hidden = (int)d[1];
    if (ct_src_dims(s, s->format == CT_FORMAT_TORCH ? "dense.weight" : "model/dense_1/w", d) == 2) *embed = (int)d[0];
}

static int given_flag(unsigned long long given, const char *flag) { return ct_opt_given(OPTS, given, flag); }

static ct_status file_config(void *vc, const ct_src *s, unsigned long long given)
{
    lstm_cfg *c = vc;
    int layers, mels, hidden, embed;
    file_sizes(s, &layers, &mels, &hidden, &embed);
    if (!layers || !hidden || !embed)
        return ct_fail(CT_EFORMAT, "%s holds no LSTM layers and dense layer of a siamese-lstm (%s): check --model", s->path,
                       s->format == CT_FORMAT_KERAS ? "LSTM layers, then a Dense" : s->format == CT_FORMAT_TORCH ?
                       "lstm.weight_ih_l0, ..., dense.weight" : "/model/lstm_1/w_ih_l0, ..., /model/dense_1/w");
    /* the sizes are the shapes'; a size flag must agree */
    if ((given_flag(given, "--mels") && c->m.n_mels != mels) || (given_flag(given, "--hidden") && c->m.hidden != hidden)
        || (given_flag(given, "--layers") && c->m.layers != layers) || (given_flag(given, "--embed") && c->m.embed != embed))
        return ct_fail(CT_EINVAL, "%s holds a siamese-lstm with --mels %d --hidden %d --layers %d --embed %d, not the sizes given",
                       s->path, mels, hidden, layers, embed);
    /* the rest from the recorded description (a flag given must agree); a file without one was
     * trained with the last hidden state */
    if (s->described) {
        static lstm_cfg flags;
        char missing[512] = "";
        flags = *c;
        c->m = ct_siamese_lstm_defaults();
        for (int i = 0; OPTS[i].type != CT_OPT_END && i < 64; i++)
            if ((given >> i) & 1) ct_opt_copy(&OPTS[i], c, &flags);
        CT_TRY(ct_opts_from_file(OPTS, CT_IN_MODEL, CT_CMD_IMPORT, c, given, &s->kv, s->path, missing, sizeof missing));
    } else if (!given_flag(given, "--pool")) c->m.pool = LSTM_RETURN_LAST;
    c->m.n_mels = mels; c->m.hidden = hidden; c->m.layers = layers; c->m.embed = embed;
    return CT_OK;
}

/* Keras: LSTM layers lstm_<k+1>, then dense_1; PyTorch: nn.LSTM `lstm` (batch_first) and nn.Linear `dense`. */
static ct_status layout(const void *net, ct_format f, ct_layout *out)
{
    const siamese_lstm *m = net;
    char layer[64], name[128], p[4][64];
    out->n = 0;
    out->arch = NULL;
    for (int k = 0; k < m->cfg.layers; k++) {
        const char *part[4] = { "w_ih", "w_hh", "b_ih", "b_hh" }, *torch[4] = { "weight_ih", "weight_hh", "bias_ih", "bias_hh" };
        for (int j = 0; j < 4; j++) snprintf(p[j], sizeof p[j], "lstm_1/%s_l%d", part[j], k);
        if (f == CT_FORMAT_TORCH) {
            for (int j = 0; j < 4; j++) {
                snprintf(name, sizeof name, "lstm.%s_l%d", torch[j], k);
                if (!ct_layout_add(out, NULL, NULL, name, p[j], CT_MAP_COPY)) return CT_EINVAL;
            }
            continue;
        }
        snprintf(layer, sizeof layer, "lstm_%d", k + 1);
        ct_map *e[3] = { ct_layout_add(out, layer, "LSTM", "kernel:0", p[0], CT_MAP_T),
                         ct_layout_add(out, layer, "LSTM", "recurrent_kernel:0", p[1], CT_MAP_T),
                         ct_layout_add(out, layer, "LSTM", "bias:0", p[2], CT_MAP_SUM) };
        if (!e[0] || !e[1] || !e[2]) return CT_EINVAL;
        snprintf(e[2]->param[1], sizeof e[2]->param[1], "%s", p[3]);
    }
    int keras = f == CT_FORMAT_KERAS;
    if (!ct_layout_add(out, keras ? "dense_1" : NULL, "Dense", keras ? "kernel:0" : "dense.weight", "dense_1/w", keras ? CT_MAP_T : CT_MAP_COPY)
        || !ct_layout_add(out, keras ? "dense_1" : NULL, "Dense", keras ? "bias:0" : "dense.bias", "dense_1/b", CT_MAP_COPY))
        return CT_EINVAL;
    return CT_OK;
}

const ct_model_descriptor ct_model_siamese_lstm = {
    .name = "siamese-lstm",
    .summary = "speaker verification on utterance pairs (contrastive loss)",
    .about = "Trains the siamese LSTM speaker-verification model: two utterances -> shared LSTM ->\n"
             "mean over time -> dense embedding -> Euclidean distance -> contrastive loss. The seed\n"
             "experiment's exact model, which `ctrain time siamese-lstm` times, embeds the LSTM's last\n"
             "hidden state instead: --pool last.",
    .task = CT_TASK_SPEAKER,
    .cfg_size = sizeof(lstm_cfg), .net_size = sizeof(siamese_lstm),
    .opts = OPTS,
    /* chosen by measurement on corpora unlike the demo's (docs/training.md, "Choosing the defaults"): a larger learning
     * rate with a cosine schedule, and 10,000 pairs x 6 epochs, beat RMSprop's lr 1e-3 and 6,000 x 5 there */
    .train = { .epochs = 6, .batch = 128, .optimizer = OPT_RMSPROP, .lr = 3e-3f, .schedule = "cosine", .data = "synthetic" },
    .defaults = defaults, .time_defaults = time_defaults, .finish = finish, .from_meta = from_meta, .describe = describe,
    .data_to_meta = data_to_meta, .set_counts = set_counts,
    .load_data = load_data, .data_line = ct_speaker_data_line, .data_summary = ct_speaker_data_summary, .task_open = task_open,
    .build = build, .init_weights = init_weights, .set_device = set_device, .plan = plan, .free = net_free, .params = params,
    .buffers = buffers, .prof = prof, .arch_line = arch_line, .train_line = train_line, .step_flops = step_flops,
    .sample_name = "pairs",
    .flops_counted = "matrix products only (models/siamese_lstm.h): LSTM forward 2*S*T*4H*(I+H) per layer and dense 2*S*H*D "
                     "with S = 2 sequences per pair, backward twice the forward (input and weight gradients) less the first LSTM "
                     "layer's input gradient, which training does not compute; gate nonlinearities, distance, loss and "
                     "optimizer are not counted",
    .layer_rows = layer_rows, .save = save,
    .eval_about = "Scores a speaker-verification trial list with trained siamese-LSTM weights: every utterance of\n"
                  "the list is embedded once, whole (not cropped), and a trial's score is minus the Euclidean\n"
                  "distance between its two embeddings. Prints the trials scored, the equal error rate (EER) and\n"
                  "the minimum detection cost (minDCF, C_miss = C_fa = 1) at p_target 0.01 and 0.05.",
    .eval_opts = OPTS, .eval_flags_size = sizeof(lstm_cfg), .eval_batch = 32, .eval_config = eval_config,
    .speaker = speaker,
    .file_config = file_config, .layout = layout,
};
