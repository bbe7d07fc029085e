/* model_small_cnn.c - the descriptor of small-cnn (catalog/model_table.h): conv ->
 * batchnorm -> relu -> maxpool 2 -> dropout -> dense -> softmax cross-entropy
 * (models/small_cnn.h) on synthetic images (catalog/model_image.h). Its exports
 * keep the names of every file it ever wrote: PyTorch's conv1, bn1, dense. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "io/weights.h"
#include "models/small_cnn.h"
#include "catalog/export.h"
#include "catalog/model_image.h"

typedef struct {
    small_cnn_config m;
    ct_image_opts img;
} small_cfg;

/* The network's sizes are kept in a run's configuration and with the model (the root attributes
 * of a checkpoint and of a weights file); the images' counts and noise in the configuration and
 * a checkpoint's /training. */
#define MODEL_KEPT (CT_IN_CONFIG | CT_IN_MODEL)
#define DATA_KEPT (CT_IN_CONFIG | CT_IN_TRAINING)
#define M(field) offsetof(small_cfg, m.field)

static const ct_opt OPTS[] = {
    { CT_OPT_HEADING, "model and data:", 0, 0, 0, 0, 0, NULL, CT_CMD_TRAIN, NULL, .store = CT_IN_NONE },
    { CT_OPT_SQUARE, "--size", "N", M(height), M(width), 4, 4096, NULL, CT_CMD_TRAIN | CT_CMD_EXPORT | CT_CMD_IMPORT,
      "image height and width", .store = CT_IN_CONFIG },
    /* the image's shape as the model records it, set by --size (and the data) */
    { CT_OPT_INT, NULL, "N", M(channels), 0, 1, 4096, NULL, 0, NULL, .key = "channels", .store = CT_IN_MODEL },
    { CT_OPT_INT, NULL, "N", M(height), 0, 4, 4096, NULL, 0, NULL, .key = "height", .store = CT_IN_MODEL },
    { CT_OPT_INT, NULL, "N", M(width), 0, 4, 4096, NULL, 0, NULL, .key = "width", .store = CT_IN_MODEL },
    { CT_OPT_INT, "--filters", "N", M(filters), 0, 1, 4096, NULL, CT_CMD_TRAIN, "convolution filters", .store = MODEL_KEPT },
    { CT_OPT_INT, "--kernel", "N", M(kernel), 0, 1, 31, NULL, CT_CMD_TRAIN, "odd kernel size", .store = MODEL_KEPT },
    { CT_OPT_INT, "--classes", "N", M(classes), 0, 2, 1000, NULL, CT_CMD_TRAIN, "classes", .store = MODEL_KEPT },
    { CT_OPT_FLOAT, "--dropout", "P", M(dropout), 0, 0, 0.99, NULL, CT_CMD_TRAIN, "dropout before the dense layer", .store = MODEL_KEPT },
    { CT_OPT_INT, "--samples", "N", offsetof(small_cfg, img.samples), 0, 1, 10000000, NULL, CT_CMD_TRAIN, "training images",
      .store = DATA_KEPT },
    { CT_OPT_INT, "--val-samples", "N", offsetof(small_cfg, img.val_samples), 0, 0, 10000000, NULL, CT_CMD_TRAIN, "validation images",
      .store = DATA_KEPT },
    { CT_OPT_FLOAT, "--noise", "X", offsetof(small_cfg, img.noise), 0, 0, 100, NULL, CT_CMD_TRAIN, "noise amplitude", .store = DATA_KEPT },
    { CT_OPT_NOTE, "--data", "synthetic", 0, 0, 0, 0, NULL, CT_CMD_TRAIN, "images generated from --seed (the only data)",
      .store = CT_IN_NONE },
    { CT_OPT_END, 0, 0, 0, 0, 0, 0, NULL, 0, NULL, .store = CT_IN_NONE }
};
#undef M


static const char *const TORCH_NAMES[][2] = { { "conv2d_1", "conv1" }, { "batchnorm_1", "bn1" }, { "dense_1", "dense" }, { NULL, NULL } };

static void defaults(void *vc)
{
    small_cfg *c = vc;
    c->m = ct_small_cnn_defaults();
    c->img = (ct_image_opts){ .samples = 4000, .val_samples = 1000, .noise = 0.6f };
}

static ct_status finish(void *vc, int checkpointing) { return CT_OK; }

static ct_status from_meta(void *vc, const ct_ckpt_meta *meta, const char *path)
{
    CT_TRY(ct_opts_from_kv(OPTS, CT_IN_MODEL, vc, &meta->model_cfg, path));
    return ct_opts_from_kv(OPTS, CT_IN_TRAINING, vc, &meta->train_cfg, path);
}

/* The configuration of the network (its layers say it all). */
static small_cnn_config config_of(const seq_cnn *m)
{
    small_cnn_config c = { .channels = m->in_c, .height = m->in_h, .width = m->in_w, .filters = m->layer[0].filters,
                           .kernel = m->layer[0].kernel, .classes = m->classes, .dropout = 0 };
    for (int i = 0; i < m->n; i++) if (m->layer[i].kind == SEQ_DROPOUT) c.dropout = m->layer[i].p;
    return c;
}

static void describe(const void *vc, const void *net, ct_kv *km)
{
    small_cfg c = *(const small_cfg *)vc;
    c.m = config_of(net);   /* the network's own sizes */
    ct_opts_to_kv(OPTS, CT_IN_MODEL, &c, km);
}

static ct_status data_to_meta(const void *vc, const ct_model_data *d, ct_ckpt_meta *meta)
{
    ct_opts_to_kv(OPTS, CT_IN_TRAINING, vc, &meta->train_cfg);
    return CT_OK;
}

static void set_counts(void *vc, long n_train, long n_val)
{
    small_cfg *c = vc;
    c->img.samples = (int)n_train;
    c->img.val_samples = (int)n_val;
}

static ct_status load_data(ct_model_data *d, const void *vc, const char *source, long seed, int batch)
{
    const small_cfg *c = vc;
    const ct_image_shape shape = { c->m.channels, c->m.height, c->m.width, c->m.classes, 1, "small-cnn" };
    return ct_image_load(d, &c->img, source, seed, &shape);
}

static ct_status task_open(ct_model_task *t, void *net, ct_model_data *d, const ct_rngs *rngs, int batch)
{
    return ct_image_task_open(t, net, d, rngs, batch);
}

static ct_status build(void *net, const void *vc, const ct_model_data *d) { return ct_small_cnn_build(net, &((const small_cfg *)vc)->m); }
static void init_weights(void *net, ct_rng *r) { ct_seq_cnn_init_weights(net, r); }
static ct_status set_device(void *net, const ct_backend *be) { return ct_seq_cnn_set_device(net, be); }
static ct_status plan(void *net, int batch) { return ct_seq_cnn_plan(net, batch); }
static void net_free(void *net) { ct_seq_cnn_free(net); }
static ct_params *params(void *net) { return &((seq_cnn *)net)->params; }
static ct_params *buffers(void *net) { return &((seq_cnn *)net)->buffers; }
static ct_prof *prof(void *net) { return &((seq_cnn *)net)->prof; }
static seq_cnn *classifier(void *net) { return net; }
static double step_flops(const void *net) { return ct_seq_cnn_step_flops(net, 1); }
static void layer_rows(const void *net, ct_row_fn row, void *ctx) { ct_model_seq_rows(net, 1, row, ctx); }

static void arch_line(const void *net, char *buf, size_t cap)
{
    small_cnn_config mc = config_of(net);
    snprintf(buf, cap, "small-cnn %dx%dx%d -> conv%dk%d -> batchnorm -> relu -> maxpool2 -> dropout %g -> dense %d",
             mc.channels, mc.height, mc.width, mc.filters, mc.kernel, mc.dropout, mc.classes);
}

static void train_line(const void *net, char *buf, size_t cap)
{
    char a[512];
    arch_line(net, a, sizeof a);
    snprintf(buf, cap, "%s, %zu parameters", a, ct_params_count(&((const seq_cnn *)net)->params));
}

static ct_status save(void *net, const char *path, const ct_kv *desc, const char *const *speakers, int n_speakers)
{
    seq_cnn *m = net;
    return ct_weights_save(path, "small-cnn", &m->params, &m->buffers);
}

/* The sizes from the file's tensors: the convolution's kernel [F, C, K, K] and the dense layer's
 * [classes, F * H/2 * W/2]; the image size from --size, the description, or square. */
static ct_status file_config(void *vc, const ct_src *s, unsigned long long given)
{
    small_cfg *c = vc;
    small_cnn_config *m = &c->m;
    size_t cw[4], dw[4];
    int ok;
    if (s->format == CT_FORMAT_KERAS) {
        const ct_src_layer *conv = &s->layer[0], *dense = &s->layer[s->n_layers > 0 ? s->n_layers - 1 : 0];
        if (s->n_layers < 2 || conv->nw != 2 || conv->ndim[0] != 4)
            return ct_fail(CT_EFORMAT, "%s: layer %s is not a Conv2D (kernel [K, K, C, F], bias): a small-cnn has Conv2D, "
                           "BatchNormalization, Dense", s->path, s->n_layers ? conv->name : "1");
        if (dense->nw != 2 || dense->ndim[0] != 2)
            return ct_fail(CT_EFORMAT, "%s: layer %s is not a Dense (kernel, bias): a small-cnn has Conv2D, BatchNormalization, Dense",
                           s->path, dense->name);
        cw[0] = conv->dims[0][3]; cw[1] = conv->dims[0][2]; cw[2] = conv->dims[0][0];
        dw[0] = dense->dims[0][1]; dw[1] = dense->dims[0][0];
        ok = 1;
    } else {
        int torch = s->format == CT_FORMAT_TORCH;
        ok = ct_src_dims(s, torch ? "conv1.weight" : "model/conv2d_1/w", cw) == 4 && ct_src_dims(s, torch ? "dense.weight" : "model/dense_1/w", dw) == 2;
        if (!ok)
            return ct_fail(CT_EFORMAT, "%s has no %s: not a small-cnn %s; check --model", s->path,
                           torch ? "conv1.weight [F, C, K, K] and dense.weight" : "/model/conv2d_1/w and /model/dense_1/w",
                           torch ? "state_dict" : "file");
    }
    m->filters = (int)cw[0]; m->channels = (int)cw[1]; m->kernel = (int)cw[2]; m->classes = (int)dw[0];
    if (s->described) {
        small_cfg rec = *c;
        CT_TRY(ct_opts_from_kv(OPTS, CT_IN_MODEL, &rec, &s->kv, s->path));
        m->dropout = rec.m.dropout;
        if (!ct_opt_given(OPTS, given, "--size")) { m->height = rec.m.height; m->width = rec.m.width; }
    }
    size_t flat = dw[1], F = cw[0];
    if (!ct_opt_given(OPTS, given, "--size") && !(s->described && ct_kv_get(&s->kv, "height")))
        m->height = m->width = 2 * (int)lround(sqrt((double)flat / (double)F));   /* a weights file: square images */
    if ((size_t)(m->height / 2) * (size_t)(m->width / 2) * F != flat)
        return ct_fail(CT_EFORMAT, "%s: the dense layer has %zu inputs, not filters x pooled height x width = %zu x %d x %d; pass --size",
                       s->path, flat, F, m->height / 2, m->width / 2);
    return CT_OK;
}

static ct_status layout(const void *net, ct_format f, ct_layout *out)
{
    out->n = 0;
    out->arch = NULL;   /* the description holds the sizes */
    return ct_layout_seq_cnn(net, f, TORCH_NAMES, out);
}

const ct_model_descriptor ct_model_small_cnn = {
    .name = "small-cnn",
    .summary = "image classification (softmax cross-entropy)",
    .about = "Trains a small image classifier: conv -> batchnorm -> relu -> maxpool 2 -> dropout -> dense\n"
             "-> softmax cross-entropy, on synthetic images (one oriented bar per class, with noise).",
    .task = CT_TASK_IMAGE,
    .cfg_size = sizeof(small_cfg), .net_size = sizeof(seq_cnn),
    .opts = OPTS,
    .train = { .epochs = 5, .batch = 64, .optimizer = OPT_ADAM, .lr = 0, .schedule = "constant", .data = "synthetic" },
    .defaults = defaults, .finish = finish, .from_meta = from_meta, .describe = describe, .data_to_meta = data_to_meta,
    .set_counts = set_counts,
    .load_data = load_data, .data_line = NULL, .data_summary = ct_image_data_summary, .task_open = task_open,
    .build = build, .init_weights = init_weights, .set_device = set_device, .plan = plan, .free = net_free, .params = params,
    .buffers = buffers, .prof = prof, .arch_line = arch_line, .train_line = train_line, .step_flops = step_flops,
    .sample_name = "images", .flops_counted = CT_MODEL_SEQ_FLOPS, .layer_rows = layer_rows, .save = save,
    .classifier = classifier,
    .file_config = file_config, .layout = layout,
};
