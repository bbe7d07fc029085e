/* model_cnn.c - the descriptor of cnn (catalog/model_table.h): a sequential CNN
 * classifier from an architecture spec (models/seq_cnn.h; default: Keras's
 * mnist_cnn example) trained on IDX images such as Fashion-MNIST
 * (catalog/model_image.h). Its weights file records the spec as "arch", so eval
 * and export rebuild the network without being told. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "io/h5.h"
#include "io/idx.h"
#include "io/weights.h"
#include "catalog/export.h"
#include "catalog/model_image.h"

typedef struct {
    const char *arch;                /* --arch SPEC */
    char arch_buf[1024];             /* a spec recorded in a file */
    int channels, height, width, classes;   /* the images, where no data says (export, import) */
    ct_image_opts img;
} cnn_cfg;

typedef struct { const char *arch; } cnn_eval_flags;

#define CNN_DATA_HELP \
    "fashion-mnist (" CT_FASHION_MNIST_DIR ", `make deps` installs it)\nor a directory with train-images-idx3-ubyte, " \
    "train-labels-idx1-ubyte,\nt10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each optionally .gz; MNIST too)"

static const ct_opt OPTS[] = {
    { CT_OPT_HEADING, "model and data:", 0, 0, 0, 0, 0, NULL, CT_CMD_TRAIN, NULL, .store = CT_IN_NONE },
    { CT_OPT_NOTE, "--data", "NAME|DIR", 0, 0, 0, 0, NULL, CT_CMD_TRAIN,
      CNN_DATA_HELP ",\nor synthetic (1x28x28 images of 10 classes generated from --seed)", .store = CT_IN_NONE },
    { CT_OPT_STR, "--arch", "SPEC", offsetof(cnn_cfg, arch), 0, 0, 0, NULL, CT_CMD_TRAIN | CT_CMD_TIME | CT_CMD_EXPORT | CT_CMD_IMPORT,
      "layers separated by commas (default: the Keras mnist_cnn architecture)\n" SEQ_CNN_DEFAULT_SPEC "\n"
      "layers: convFkK[sS][pP] denseU maxpoolK[sS] gap gaph flatten dropoutP batchnorm\nrelu tanh sigmoid save add; the last "
      "layer must output one value per class;\na residual block is save,...,add: add sums its input and what save kept\n(the same "
      "shape; blocks nest), e.g. save,conv16k3p1,batchnorm,relu,conv16k3p1,add", .store = CT_IN_CONFIG | CT_IN_MODEL },
    { CT_OPT_INT, "--samples", "N", offsetof(cnn_cfg, img.samples), 0, 1, 1 << 30, NULL, CT_CMD_TRAIN,
      "use the first N training images (default: all)", .store = CT_IN_CONFIG },
    { CT_OPT_INT, "--val-samples", "N", offsetof(cnn_cfg, img.val_samples), 0, 0, 1 << 30, NULL, CT_CMD_TRAIN,
      "use the first N test images for validation (default: all)", .store = CT_IN_CONFIG },
    { CT_OPT_HEADING, "the images, for a file that does not record them (a weights file of `ctrain train cnn`, Keras's):",
      0, 0, 0, 0, 0, NULL, CT_CMD_EXPORT | CT_CMD_IMPORT, NULL, .store = CT_IN_NONE },
    { CT_OPT_SQUARE, "--size", "N", offsetof(cnn_cfg, height), offsetof(cnn_cfg, width), 1, 1 << 16, NULL, CT_CMD_EXPORT | CT_CMD_IMPORT,
      "image height and width", .store = CT_IN_NONE },
    { CT_OPT_INT, "--channels", "N", offsetof(cnn_cfg, channels), 0, 1, 4096, NULL, CT_CMD_EXPORT | CT_CMD_IMPORT, "image channels", .store = CT_IN_NONE },
    { CT_OPT_INT, "--classes", "N", offsetof(cnn_cfg, classes), 0, 2, 1 << 20, NULL, CT_CMD_EXPORT | CT_CMD_IMPORT, "classes", .store = CT_IN_NONE },
    /* recorded, set by no flag: the network's images and classes with the model (describe: a
     * checkpoint's root attributes, beside "arch"), and the images a run used in a checkpoint's
     * /training, 0 and -1 meaning all of them (--samples and --val-samples leave those out) */
    { CT_OPT_INT, NULL, "N", offsetof(cnn_cfg, channels), 0, 1, 1 << 30, NULL, 0, NULL, .key = "channels", .store = CT_IN_MODEL },
    { CT_OPT_INT, NULL, "N", offsetof(cnn_cfg, height), 0, 1, 1 << 30, NULL, 0, NULL, .key = "height", .store = CT_IN_MODEL },
    { CT_OPT_INT, NULL, "N", offsetof(cnn_cfg, width), 0, 1, 1 << 30, NULL, 0, NULL, .key = "width", .store = CT_IN_MODEL },
    { CT_OPT_INT, NULL, "N", offsetof(cnn_cfg, classes), 0, 1, 1 << 30, NULL, 0, NULL, .key = "classes", .store = CT_IN_MODEL },
    { CT_OPT_INT, NULL, "N", offsetof(cnn_cfg, img.samples), 0, 0, 1 << 30, NULL, 0, NULL, .key = "samples", .store = CT_IN_TRAINING },
    { CT_OPT_INT, NULL, "N", offsetof(cnn_cfg, img.val_samples), 0, -1, 1 << 30, NULL, 0, NULL, .key = "val_samples",
      .store = CT_IN_TRAINING },
    { CT_OPT_END, 0, 0, 0, 0, 0, 0, NULL, 0, NULL, .store = CT_IN_NONE }
};

static const ct_opt EVAL_OPTS[] = {
    { CT_OPT_STR, "--arch", "SPEC", offsetof(cnn_eval_flags, arch), 0, 0, 0, NULL, CT_CMD_EVAL,
      "layers separated by commas (default: the \"arch\" recorded in the weights file)", .store = CT_IN_NONE },
    { CT_OPT_NOTE, "--data", "NAME|DIR", 0, 0, 0, 0, NULL, CT_CMD_EVAL, CNN_DATA_HELP " (default fashion-mnist)", .store = CT_IN_NONE },
    { CT_OPT_END, 0, 0, 0, 0, 0, 0, NULL, 0, NULL, .store = CT_IN_NONE }
};

static void defaults(void *vc)
{
    cnn_cfg *c = vc;
    memset(c, 0, sizeof *c);
    c->arch = SEQ_CNN_DEFAULT_SPEC;
    c->channels = 1; c->height = c->width = 28; c->classes = CT_IDX_CLASSES;
    c->img = (ct_image_opts){ .samples = 0, .val_samples = -1, .noise = 0.6f };
}

static ct_status finish(void *vc, int checkpointing) { return CT_OK; }

static void keep_arch(cnn_cfg *c, const char *arch)
{
    snprintf(c->arch_buf, sizeof c->arch_buf, "%s", arch);
    c->arch = c->arch_buf;
}

static ct_status from_meta(void *vc, const ct_ckpt_meta *meta, const char *path)
{
    cnn_cfg *c = vc;
    CT_TRY(ct_opts_from_kv(OPTS, CT_IN_MODEL, c, &meta->model_cfg, path));
    if (c->arch != c->arch_buf) keep_arch(c, c->arch);   /* the recorded spec points into meta */
    return ct_opts_from_kv(OPTS, CT_IN_TRAINING, c, &meta->train_cfg, path);
}

static void describe(const void *vc, const void *net, ct_kv *kv)
{
    const seq_cnn *m = net;
    cnn_cfg c = *(const cnn_cfg *)vc;   /* the network's own spec and sizes */
    c.arch = m->spec;
    c.channels = m->in_c; c.height = m->in_h; c.width = m->in_w; c.classes = m->classes;
    ct_opts_to_kv(OPTS, CT_IN_MODEL, &c, kv);   /* arch, channels, height, width, classes */
}

static ct_status data_to_meta(const void *vc, const ct_model_data *d, ct_ckpt_meta *meta)
{
    ct_opts_to_kv(OPTS, CT_IN_TRAINING, vc, &meta->train_cfg);   /* samples, val_samples */
    return CT_OK;
}

static void set_counts(void *vc, long n_train, long n_val)
{
    cnn_cfg *c = vc;
    c->img.samples = (int)n_train;
    c->img.val_samples = (int)n_val;
}

static ct_status load_data(ct_model_data *d, const void *vc, const char *source, long seed, int batch)
{
    const ct_image_shape synthetic = { 1, 28, 28, CT_IDX_CLASSES, 0, "cnn" };
    return ct_image_load(d, &((const cnn_cfg *)vc)->img, source, seed, &synthetic);
}

static ct_status task_open(ct_model_task *t, void *net, ct_model_data *d, const ct_rngs *rngs, int batch)
{
    return ct_image_task_open(t, net, d, rngs, batch);
}

static ct_status build(void *net, const void *vc, const ct_model_data *d)
{
    const cnn_cfg *c = vc;
    ct_status st = d ? ct_seq_cnn_build(net, c->arch, d->c, d->h, d->w, d->classes)
                     : ct_seq_cnn_build(net, c->arch, c->channels, c->height, c->width, c->classes);
    if (st != CT_OK) return ct_fail(st, "--arch: %s", ct_last_error());
    return CT_OK;
}

static void init_weights(void *net, ct_rng *r) { ct_seq_cnn_init_weights(net, r); }
static ct_status set_device(void *net, const ct_backend *be) { return ct_seq_cnn_set_device(net, be); }
static ct_status plan(void *net, int batch) { return ct_seq_cnn_plan(net, batch); }
static void net_free(void *net) { ct_seq_cnn_free(net); }
static ct_params *params(void *net) { return &((seq_cnn *)net)->params; }
static ct_params *buffers(void *net) { return &((seq_cnn *)net)->buffers; }
static ct_prof *prof(void *net) { return &((seq_cnn *)net)->prof; }
static seq_cnn *classifier(void *net) { return net; }
static double step_flops(const void *net) { return ct_seq_cnn_step_flops(net, 1); }

static void arch_line(const void *net, char *buf, size_t cap)
{
    const seq_cnn *m = net;
    snprintf(buf, cap, "cnn %dx%dx%d -> %s -> softmax cross-entropy", m->in_c, m->in_h, m->in_w, m->spec);
}

static void train_line(const void *net, char *buf, size_t cap)
{
    char a[1200];
    arch_line(net, a, sizeof a);
    snprintf(buf, cap, "%s, %zu parameters, %.1f MFLOP per image per training step", a, ct_params_count(&((const seq_cnn *)net)->params),
             step_flops(net) / 1e6);
}

static void layer_rows(const void *net, ct_row_fn row, void *ctx) { ct_model_seq_rows(net, 1, row, ctx); }

static ct_status save(void *net, const char *path, const ct_kv *desc, const char *const *speakers, int n_speakers)
{
    seq_cnn *m = net;
    const char *attrs[] = { "arch", m->spec, NULL };   /* eval rebuilds the network from it */
    return ct_weights_save_attrs(path, "cnn", &m->params, &m->buffers, attrs);
}

/* The root attribute "arch" of `path` (whole: it may be longer than a ct_kv string). */
static ct_status read_arch(const char *path, hid_t f, cnn_cfg *c)
{
    ct_status st = ct_h5_attr_read_str(f, "/", "arch", c->arch_buf, sizeof c->arch_buf);
    if (st != CT_OK)
        return ct_fail(st, "%s: %s (not written by `ctrain train cnn`?); pass the architecture with --arch SPEC", path, ct_last_error());
    c->arch = c->arch_buf;
    return CT_OK;
}

static ct_status eval_config(void *vc, const char *weights, const void *vflags, unsigned long long given, const char *data,
                             char *note, size_t cap)
{
    cnn_cfg *c = vc;
    const cnn_eval_flags *f = vflags;
    note[0] = '\0';
    if (f->arch) { keep_arch(c, f->arch); return CT_OK; }
    hid_t h;
    CT_TRY(ct_h5_open(&h, weights));
    ct_status st = read_arch(weights, h, c);
    ct_h5_close(h);
    return st;
}

/* A recorded integer setting; an option given must agree with it. */
static ct_status recorded_int(const ct_src *s, unsigned long long given, const char *key, const char *flag, int *v)
{
    int file;
    if (!ct_kv_int(&s->kv, key, &file)) return CT_OK;
    if (ct_opt_given(OPTS, given, flag) && *v != file)
        return ct_fail(CT_EINVAL, "%s %d contradicts %s, which records %s = %d: leave %s out", flag, *v, s->path, key, file, flag);
    *v = file;
    return CT_OK;
}

static ct_status file_config(void *vc, const ct_src *s, unsigned long long given)
{
    cnn_cfg *c = vc;
    if (!s->described) return CT_OK;   /* Keras's or PyTorch's file: the default network or the options' */
    if (!ct_opt_given(OPTS, given, "--arch")) CT_TRY(read_arch(s->path, s->f, c));
    CT_TRY(recorded_int(s, given, "channels", "--channels", &c->channels));
    CT_TRY(recorded_int(s, given, "height", "--size", &c->height));
    CT_TRY(recorded_int(s, given, "width", "--size", &c->width));
    return recorded_int(s, given, "classes", "--classes", &c->classes);
}

static ct_status layout(const void *net, ct_format f, ct_layout *out)
{
    out->n = 0;
    out->arch = ((const seq_cnn *)net)->spec;
    return ct_layout_seq_cnn(net, f, NULL, out);
}

const ct_model_descriptor ct_model_cnn = {
    .name = "cnn",
    .summary = "CNN from an architecture spec on Fashion-MNIST/MNIST (default: Keras mnist_cnn)",
    .about = "Trains a sequential CNN image classifier (softmax cross-entropy) on IDX image data;\n"
             "validation is the test set.",
    .task = CT_TASK_IMAGE,
    .cfg_size = sizeof(cnn_cfg), .net_size = sizeof(seq_cnn),
    .opts = OPTS,
    .train = { .epochs = 12, .batch = 128, .optimizer = OPT_ADAM, .lr = 0, .schedule = "constant", .data = "fashion-mnist" },
    .defaults = defaults, .finish = finish, .from_meta = from_meta, .describe = describe, .data_to_meta = data_to_meta,
    .set_counts = set_counts,
    .load_data = load_data, .data_line = ct_image_data_line, .data_summary = ct_image_data_summary, .task_open = task_open,
    .build = build, .init_weights = init_weights, .set_device = set_device, .plan = plan, .free = net_free, .params = params,
    .buffers = buffers, .prof = prof, .arch_line = arch_line, .train_line = train_line, .step_flops = step_flops,
    .sample_name = "images", .flops_counted = CT_MODEL_SEQ_FLOPS, .layer_rows = layer_rows, .save = save,
    .eval_about = "Evaluates a CNN trained by `ctrain train cnn` on the test set: loss, accuracy, and the\n"
                  "confusion matrix (rows: true class, columns: predicted class).",
    .eval_opts = EVAL_OPTS, .eval_flags_size = sizeof(cnn_eval_flags), .eval_batch = 500, .eval_config = eval_config,
    .classifier = classifier,
    .file_config = file_config, .layout = layout,
};
