/* cnn.c - `ctrain train cnn` and `ctrain eval cnn`: a sequential CNN built from
 * an architecture spec (models/seq_cnn.h; default: Keras's mnist_cnn) trained
 * on IDX image data (io/idx.h: Fashion-MNIST, MNIST, or any directory with the
 * four IDX files), with the shared training loop and Keras-style log, and its
 * evaluation: test accuracy and a confusion matrix with class names.
 *
 * The weights file holds the parameters and batchnorm statistics
 * (io/weights.h) and the spec as the root attribute "arch", so `eval` rebuilds
 * the same network without being told.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>
#include "cli/common.h"
#include "core/rng.h"
#include "core/threads.h"
#include "io/h5.h"
#include "io/idx.h"
#include "io/images.h"
#include "io/weights.h"
#include "layers/optim.h"
#include "models/seq_cnn.h"
#include "models/train.h"

#define CNN_MODEL_NAME "cnn"

/* ---- options: the shared training options (cli/common.h) plus these ---- */
static int parse_cnn_opt(ct_args *a, const char **arch, int *samples, int *val_samples, ct_status *st)
{
    return ct_args_str(a, "--arch", arch, st) || ct_args_int(a, "--samples", samples, 1, 1 << 30, st)
        || ct_args_int(a, "--val-samples", val_samples, 0, 1 << 30, st);
}

static const char *DATA_HELP =
    "  --data NAME|DIR       fashion-mnist (" CT_FASHION_MNIST_DIR ", `make deps` installs it)\n"
    "                        or a directory with train-images-idx3-ubyte, train-labels-idx1-ubyte,\n"
    "                        t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each optionally .gz; MNIST too)\n"
    "  --arch SPEC           layers separated by commas (default: the Keras mnist_cnn architecture)\n"
    "                        " SEQ_CNN_DEFAULT_SPEC "\n"
    "                        layers: convFkK[sS][pP] denseU maxpoolK[sS] gap flatten dropoutP batchnorm\n"
    "                        relu tanh sigmoid; the last layer must output one value per class\n";

/* ---- the task: images in memory, shuffled every epoch ---- */
typedef struct {
    seq_cnn m;
    ct_images train, val;
    int n_train, n_val;
    int *order;
    float *x;                  /* [B, C, H, W] */
    int *labels;               /* [B] */
    ct_rng data, dropout;
} cnn_task;

static void task_begin_epoch(void *ctx, int epoch)
{
    cnn_task *c = ctx;
    (void)epoch;
    ct_rng_shuffle_int(&c->data, c->order, c->n_train);
}

static void task_load(void *ctx, int split, long first, int n)
{
    cnn_task *c = ctx;
    if (split == CT_SPLIT_TRAIN) ct_images_gather(c->x, c->labels, &c->train, c->order, first, n);
    else ct_images_gather(c->x, c->labels, &c->val, NULL, first, n);
}

static float task_forward(void *ctx, int n, int train, int *correct)
{
    cnn_task *c = ctx;
    return seq_cnn_forward(&c->m, c->x, c->labels, n, train, &c->dropout, correct);
}

static void task_backward(void *ctx, int n)
{
    cnn_task *c = ctx;
    seq_cnn_backward(&c->m, c->x, c->labels, n);
}

static ct_status task_save_state(void *ctx, hid_t f)
{
    cnn_task *c = ctx;
    return cli_save_order_state(f, c->order, c->n_train, &c->data, &c->dropout);
}

static ct_status task_load_state(void *ctx, hid_t f)
{
    cnn_task *c = ctx;
    return cli_load_order_state(f, c->order, c->n_train, &c->data, &c->dropout);
}

static void task_free(cnn_task *c)
{
    seq_cnn_free(&c->m);
    ct_images_free(&c->train);
    ct_images_free(&c->val);
    free(c->order); free(c->x); free(c->labels);
}

/* Reads the root string attribute "arch" into buf. */
static ct_status read_arch(const char *path, char *buf, size_t cap)
{
    hid_t f;
    CT_TRY(ct_h5_open(&f, path));
    ct_status st = ct_h5_attr_read_str(f, "/", "arch", buf, cap);
    ct_h5_close(f);
    if (st != CT_OK)
        return ct_fail(st, "%s: %s (not written by `ctrain train cnn`?); pass the architecture with --arch SPEC", path, ct_last_error());
    return CT_OK;
}

static void describe_model(const seq_cnn *m)
{
    printf("Model: cnn %dx%dx%d -> %s -> softmax cross-entropy, %zu parameters, %.1f MFLOP per image per training step\n",
           m->in_c, m->in_h, m->in_w, m->spec, ct_params_count(&m->params), seq_cnn_step_flops(m, 1) / 1e6);
}

int train_cnn(int argc, char **argv)
{
    cli_train_opts o = { .data = "fashion-mnist", .device = "cpu", .epochs = 12, .batch = 128, .threads = ct_cpu_count(),
                         .seed = 1, .progress = -1, .step_size = 10, .gamma = 0.1f };
    const char *arch = SEQ_CNN_DEFAULT_SPEC;
    int samples = 0, val_samples = -1;
    ct_args a = { argc, 0, argv };
    static ct_ckpt_meta rm, meta;
    int resuming = 0;
    ct_status st = cli_resume_meta(argc, argv, CNN_MODEL_NAME, &rm, &resuming);
    if (st == CT_OK && resuming) {   /* the checkpoint's settings are the defaults; flags override them */
        cli_train_from_meta(&rm.train_cfg, &o);
        ct_kv_str(&rm.model_cfg, "arch", &arch);
        ct_kv_int(&rm.train_cfg, "samples", &samples);
        ct_kv_int(&rm.train_cfg, "val_samples", &val_samples);
    }
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            printf("usage: ctrain train cnn [options]\n\n"
                   "Trains a sequential CNN image classifier (softmax cross-entropy) on IDX image data;\n"
                   "validation is the test set.\n\n"
                   "model and data:\n%s"
                   "  --samples N           use the first N training images (default: all)\n"
                   "  --val-samples N       use the first N test images for validation (default: all)\n"
                   "training:\n", DATA_HELP);
            printf(CLI_TRAIN_HELP, 12, 128, "adam", 1e-3, "constant");
            return 0;
        }
        if (cli_parse_train_opt(&a, &o, &st) || parse_cnn_opt(&a, &arch, &samples, &val_samples, &st)) continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain train cnn --help)", argv[a.i]);
    }
    ct_fit_config fit;
    if (st == CT_OK) st = cli_finish_train_opts(&o, &fit, OPT_ADAM);
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 2; }

    cnn_task c;
    memset(&c, 0, sizeof c);
    const char *dir = ct_idx_data_dir(o.data);
    st = ct_idx_load_dir(&c.train, &c.val, dir);
    if (st == CT_OK) {
        c.n_train = samples > 0 && samples < c.train.n ? samples : c.train.n;
        c.n_val = val_samples >= 0 && val_samples < c.val.n ? val_samples : c.val.n;
        st = seq_cnn_build(&c.m, arch, c.train.c, c.train.h, c.train.w, c.train.classes);
        if (st != CT_OK) st = ct_fail(st, "--arch: %s", ct_last_error());
    }
    if (st == CT_OK) st = seq_cnn_plan(&c.m, o.batch);
    if (st == CT_OK) {
        c.order = ct_malloc((size_t)c.n_train * sizeof *c.order, "order");
        c.x = ct_malloc((size_t)o.batch * c.train.c * c.train.h * c.train.w * sizeof *c.x, "batch");
        c.labels = ct_malloc((size_t)o.batch * sizeof *c.labels, "batch");
        if (!c.order || !c.x || !c.labels) st = CT_ENOMEM;
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); task_free(&c); return 1; }
    for (int i = 0; i < c.n_train; i++) c.order[i] = i;
    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)o.seed);
    c.data = rngs.data;
    c.dropout = rngs.dropout;
    seq_cnn_init_weights(&c.m, &rngs.init);

    cli_print_header(stdout, o.threads);
    describe_model(&c.m);
    printf("Data: %s (%s), %d training and %d test images of %dx%dx%d, %d classes; %s lr %g, batch %d\n",
           o.data, dir, c.n_train, c.n_val, c.train.c, c.train.h, c.train.w, c.train.classes,
           ct_optim_name(fit.optim.kind), fit.optim.lr, o.batch);
    fflush(stdout);
    ct_task task = { .ctx = &c, .params = &c.m.params, .buffers = &c.m.buffers, .n_train = c.n_train, .n_val = c.n_val,
                     .begin_epoch = task_begin_epoch, .load = task_load, .forward = task_forward, .backward = task_backward,
                     .save_state = task_save_state, .load_state = task_load_state };
    snprintf(meta.model, sizeof meta.model, CNN_MODEL_NAME);
    ct_kv_set_str(&meta.model_cfg, "arch", c.m.spec);
    ct_kv_set_int(&meta.model_cfg, "channels", c.train.c);
    ct_kv_set_int(&meta.model_cfg, "height", c.train.h);
    ct_kv_set_int(&meta.model_cfg, "width", c.train.w);
    ct_kv_set_int(&meta.model_cfg, "classes", c.train.classes);
    cli_train_to_meta(&meta.train_cfg, &o, &fit);
    ct_kv_set_str(&meta.train_cfg, "data", o.data);
    ct_kv_set_int(&meta.train_cfg, "samples", samples);
    ct_kv_set_int(&meta.train_cfg, "val_samples", val_samples);
    fit.meta = &meta;
    fit.rngs = &rngs;
    st = ct_fit(&task, &fit, NULL, stdout);
    const char *attrs[] = { "arch", c.m.spec, NULL };
    if (st == CT_OK && o.out) st = ct_weights_save_attrs(o.out, CNN_MODEL_NAME, &c.m.params, &c.m.buffers, attrs);
    if (st == CT_OK && o.out) printf("weights written to %s\n", o.out);
    task_free(&c);
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 1; }
    return 0;
}

/* ---- eval ---- */
static const char *FASHION_NAMES[10] = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                         "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" };
static const char *DIGIT_NAMES[10] = { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9" };

/* Splits "a,b,c" into exactly n names (pointers into buf). */
static ct_status parse_classes(char *buf, const char **names, int n)
{
    int k = 0;
    char *s = buf;
    for (;;) {
        char *e = strchr(s, ',');
        if (e) *e = 0;
        if (!*s) return ct_fail(CT_EINVAL, "--classes: class name %d is empty", k + 1);
        if (k < n) names[k] = s;
        k++;
        if (!e) break;
        s = e + 1;
    }
    if (k != n) return ct_fail(CT_EINVAL, "--classes: %d names given, but the data has %d classes", k, n);
    return CT_OK;
}

int eval_cnn(int argc, char **argv)
{
    const char *model = NULL, *data = "fashion-mnist", *arch = NULL, *classes = NULL;
    int batch = 500, threads = ct_cpu_count();
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            printf("usage: ctrain eval cnn --model FILE.h5 [options]\n\n"
                   "Evaluates a CNN trained by `ctrain train cnn` on the test set: loss, accuracy, and the\n"
                   "confusion matrix (rows: true class, columns: predicted class).\n\n"
                   "  --model FILE.h5       weights written by `ctrain train cnn --out`\n%s"
                   "                        (default: the \"arch\" recorded in the weights file)\n"
                   "  --classes A,B,...     class names (default: Fashion-MNIST's for fashion-mnist data, else digits)\n"
                   "  --batch N             evaluation batch size (default 500)\n"
                   "  --threads N           CPU threads for OpenBLAS (default: all cores)\n", DATA_HELP);
            return 0;
        }
        if (ct_args_str(&a, "--model", &model, &st) || ct_args_str(&a, "--data", &data, &st)
            || ct_args_str(&a, "--arch", &arch, &st) || ct_args_str(&a, "--classes", &classes, &st)
            || ct_args_int(&a, "--batch", &batch, 1, 1 << 16, &st) || ct_args_int(&a, "--threads", &threads, 1, 1024, &st))
            continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain eval cnn --help)", argv[a.i]);
    }
    if (st == CT_OK && !model) st = ct_fail(CT_EINVAL, "--model FILE.h5 is required (the weights written by `ctrain train cnn --out`)");
    if (st != CT_OK) { fprintf(stderr, "ctrain eval: %s\n", ct_last_error()); return 2; }
    ct_threads_set(threads);

    char spec[1024];
    if (arch) snprintf(spec, sizeof spec, "%s", arch);
    else st = read_arch(model, spec, sizeof spec);
    const char *dir = ct_idx_data_dir(data);
    ct_images test;
    memset(&test, 0, sizeof test);
    seq_cnn m;
    memset(&m, 0, sizeof m);
    int built = 0;
    char *names_buf = NULL;
    const char *names[CT_IDX_CLASSES];
    if (st == CT_OK) st = ct_idx_load_split(&test, dir, 1);
    if (st == CT_OK) {
        const char **src = (!strcmp(data, "fashion-mnist") || strstr(dir, "fashion")) ? FASHION_NAMES : DIGIT_NAMES;
        for (int k = 0; k < CT_IDX_CLASSES; k++) names[k] = src[k];
        if (classes) {
            names_buf = ct_malloc(strlen(classes) + 1, "class names");
            if (!names_buf) st = CT_ENOMEM;
            else { strcpy(names_buf, classes); st = parse_classes(names_buf, names, test.classes); }
        }
    }
    if (st == CT_OK) {
        st = seq_cnn_build(&m, spec, test.c, test.h, test.w, test.classes);
        if (st != CT_OK) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            st = ct_fail(st, "%s: %s", arch ? "--arch" : model, msg);
        } else built = 1;
    }
    if (st == CT_OK) st = seq_cnn_plan(&m, batch);
    if (st == CT_OK) st = ct_weights_load(model, CNN_MODEL_NAME, &m.params, &m.buffers);
    long *confusion = NULL;
    if (st == CT_OK) {
        confusion = ct_calloc((size_t)test.classes * test.classes, sizeof *confusion, "confusion matrix");
        if (!confusion) st = CT_ENOMEM;
    }
    if (st != CT_OK) {
        fprintf(stderr, "ctrain eval: %s\n", ct_last_error());
        if (built) seq_cnn_free(&m);
        ct_images_free(&test); free(names_buf);
        return 1;
    }
    cli_print_header(stdout, threads);
    printf("Model: %s, cnn %dx%dx%d -> %s, %zu parameters\n", model, m.in_c, m.in_h, m.in_w, m.spec, ct_params_count(&m.params));
    printf("Data: %s (%s), %d test images\n", data, dir, test.n);
    fflush(stdout);
    const int C = test.classes;
    size_t px = (size_t)test.c * test.h * test.w;
    double loss_sum = 0;
    long right = 0;
    double t0 = ct_now();
    for (int first = 0; first < test.n; first += batch) {
        int n = test.n - first < batch ? test.n - first : batch;
        int correct = 0;
        float loss = seq_cnn_forward(&m, test.x + (size_t)first * px, test.labels + first, n, 0, NULL, &correct);
        loss_sum += (double)loss * n;
        right += correct;
        for (int k = 0; k < n; k++) {
            const float *z = m.logits + (size_t)k * C;
            int best = 0;
            for (int j = 1; j < C; j++) if (z[j] > z[best]) best = j;
            confusion[(size_t)test.labels[first + k] * C + best]++;
        }
    }
    double secs = ct_now() - t0;
    printf("test loss: %.4f - test accuracy: %.4f (%ld/%d) - %.1fs\n", loss_sum / test.n, (double)right / test.n, right, test.n, secs);
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
    free(confusion);
    free(names_buf);
    seq_cnn_free(&m);
    ct_images_free(&test);
    return 0;
}
