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
#include "train/image_task.h"
#include "models/seq_cnn.h"
#include "train/train.h"

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
           m->in_c, m->in_h, m->in_w, m->spec, ct_params_count(&m->params), ct_seq_cnn_step_flops(m, 1) / 1e6);
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

    static seq_cnn m;   /* large: the layer table */
    memset(&m, 0, sizeof m);
    ct_images train, val;
    memset(&train, 0, sizeof train);
    memset(&val, 0, sizeof val);
    image_task c;
    memset(&c, 0, sizeof c);
    int have_task = 0, n_train = 0, n_val = 0;
    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)o.seed);
    const char *dir = ct_idx_data_dir(o.data);
    st = ct_idx_load_dir(&train, &val, dir);
    if (st == CT_OK) {
        n_train = samples > 0 && samples < train.n ? samples : train.n;
        n_val = val_samples >= 0 && val_samples < val.n ? val_samples : val.n;
        st = ct_seq_cnn_build(&m, arch, train.c, train.h, train.w, train.classes);
        if (st != CT_OK) st = ct_fail(st, "--arch: %s", ct_last_error());
    }
    if (st == CT_OK) {
        ct_seq_cnn_init_weights(&m, &rngs.init);
        st = ct_seq_cnn_set_device(&m, o.ops);
    }
    if (st == CT_OK) st = ct_seq_cnn_plan(&m, o.batch);
    if (st == CT_OK && (st = ct_image_task_init(&c, &m, &train, &val, n_train, n_val, o.batch, &rngs)) == CT_OK) have_task = 1;
    if (st == CT_OK) {
        cli_print_header(stdout, o.threads);
        describe_model(&m);
        printf("Data: %s (%s), %d training and %d test images of %dx%dx%d, %d classes; %s lr %g, batch %d\n",
               o.data, dir, n_train, n_val, train.c, train.h, train.w, train.classes,
               ct_optim_name(fit.optim.kind), fit.optim.lr, o.batch);
        fflush(stdout);
        ct_task task = ct_image_task_ops(&c);
        snprintf(meta.model, sizeof meta.model, CNN_MODEL_NAME);
        ct_kv_set_str(&meta.model_cfg, "arch", m.spec);
        ct_kv_set_int(&meta.model_cfg, "channels", train.c);
        ct_kv_set_int(&meta.model_cfg, "height", train.h);
        ct_kv_set_int(&meta.model_cfg, "width", train.w);
        ct_kv_set_int(&meta.model_cfg, "classes", train.classes);
        cli_train_to_meta(&meta.train_cfg, &o, &fit);
        ct_kv_set_str(&meta.train_cfg, "data", o.data);
        ct_kv_set_int(&meta.train_cfg, "samples", samples);
        ct_kv_set_int(&meta.train_cfg, "val_samples", val_samples);
        fit.meta = &meta;
        fit.rngs = &rngs;
        st = ct_fit(&task, &fit, NULL, stdout);
    }
    const char *attrs[] = { "arch", m.spec, NULL };
    if (st == CT_OK && o.out) st = ct_weights_save_attrs(o.out, CNN_MODEL_NAME, &m.params, &m.buffers, attrs);
    if (st == CT_OK && o.out) printf("weights written to %s\n", o.out);
    if (have_task) ct_image_task_free(&c);
    ct_seq_cnn_free(&m);
    ct_images_free(&train);
    ct_images_free(&val);
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
    const char *model = NULL, *data = "fashion-mnist", *arch = NULL, *classes = NULL, *device = "cpu";
    int batch = 500, threads = ct_cpu_count(), tf32 = 0, deterministic = 0;
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
                   "  --threads N           CPU threads for OpenBLAS (default: all cores)\n"
                   CLI_DEVICE_HELP, DATA_HELP);
            return 0;
        }
        if (ct_args_str(&a, "--model", &model, &st) || ct_args_str(&a, "--data", &data, &st)
            || ct_args_str(&a, "--arch", &arch, &st) || ct_args_str(&a, "--classes", &classes, &st)
            || ct_args_int(&a, "--batch", &batch, 1, 1 << 16, &st) || ct_args_int(&a, "--threads", &threads, 1, 1024, &st)
            || ct_args_str(&a, "--device", &device, &st) || (ct_args_flag(&a, "--tf32") && (tf32 = 1))
            || (ct_args_flag(&a, "--deterministic") && (deterministic = 1)))
            continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain eval cnn --help)", argv[a.i]);
    }
    if (st == CT_OK && !model) st = ct_fail(CT_EINVAL, "--model FILE.h5 is required (the weights written by `ctrain train cnn --out`)");
    const ct_ops *ops = NULL;
    if (st == CT_OK) st = cli_open_device(device, tf32, deterministic, &ops);
    if (st != CT_OK) { fprintf(stderr, "ctrain eval: %s\n", ct_last_error()); return 2; }
    ct_threads_set(threads);

    char spec[1024];
    if (arch) snprintf(spec, sizeof spec, "%s", arch);
    else st = read_arch(model, spec, sizeof spec);
    const char *dir = ct_idx_data_dir(data);
    ct_images test;
    memset(&test, 0, sizeof test);
    static seq_cnn m;   /* large: the layer table */
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
        st = ct_seq_cnn_build(&m, spec, test.c, test.h, test.w, test.classes);
        if (st != CT_OK) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            st = ct_fail(st, "%s: %s", arch ? "--arch" : model, msg);
        } else built = 1;
    }
    if (st == CT_OK) st = ct_weights_load(model, CNN_MODEL_NAME, &m.params, &m.buffers);
    if (st == CT_OK) st = ct_seq_cnn_set_device(&m, ops);   /* copies the loaded weights there */
    if (st == CT_OK) st = ct_seq_cnn_plan(&m, batch);
    long *confusion = NULL;
    float *logits = NULL, *x_dev = NULL;   /* logits [batch, classes] on the host; the batch on the device */
    int *labels_dev = NULL;
    if (st == CT_OK) {
        confusion = ct_calloc((size_t)test.classes * test.classes, sizeof *confusion, "confusion matrix");
        logits = ct_malloc((size_t)batch * test.classes * sizeof *logits, "logits");
        if (!confusion || !logits) st = CT_ENOMEM;
    }
    size_t px = (size_t)test.c * test.h * test.w;
    if (st == CT_OK && !ops->host_memory) {
        st = ops->mem.alloc((void **)&x_dev, (size_t)batch * px * sizeof *x_dev, "test images");
        if (st == CT_OK) st = ops->mem.alloc((void **)&labels_dev, (size_t)batch * sizeof *labels_dev, "test labels");
    }
    if (st != CT_OK) {
        fprintf(stderr, "ctrain eval: %s\n", ct_last_error());
        if (x_dev) ops->mem.free(x_dev);
        if (labels_dev) ops->mem.free(labels_dev);
        if (built) ct_seq_cnn_free(&m);
        ct_images_free(&test); free(names_buf); free(confusion); free(logits);
        return 1;
    }
    cli_print_header(stdout, threads);
    printf("Model: %s, cnn %dx%dx%d -> %s, %zu parameters\n", model, m.in_c, m.in_h, m.in_w, m.spec, ct_params_count(&m.params));
    printf("Data: %s (%s), %d test images\n", data, dir, test.n);
    fflush(stdout);
    const int C = test.classes;
    double loss_sum = 0;
    long right = 0;
    double t0 = ct_now();
    for (int first = 0; first < test.n; first += batch) {
        int n = test.n - first < batch ? test.n - first : batch;
        int correct = 0;
        const float *x = ct_ops_stage(ops, x_dev, test.x + (size_t)first * px, (size_t)n * px * sizeof *x);
        const int *labels = ct_ops_stage(ops, labels_dev, test.labels + first, (size_t)n * sizeof *labels);
        float loss = ct_seq_cnn_forward(&m, x, labels, n, 0, NULL, &correct);
        loss_sum += (double)loss * n;
        right += correct;
        if (ops->download(logits, m.logits, (size_t)n * C * sizeof *logits) != CT_OK) ct_device_fatal("%s", ct_last_error());
        for (int k = 0; k < n; k++) {
            const float *z = logits + (size_t)k * C;
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
    free(logits);
    free(names_buf);
    if (x_dev) ops->mem.free(x_dev);
    if (labels_dev) ops->mem.free(labels_dev);
    ct_seq_cnn_free(&m);
    ct_images_free(&test);
    return 0;
}
