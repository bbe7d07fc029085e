/* model_image.c - the data side of the image models' descriptors: IDX or
 * synthetic images held in memory, the image task, and the evaluation of a
 * classifier on a test set (see model_image.h). */
#include <stdlib.h>
#include <string.h>
#include "catalog/model_image.h"
#include "core/interrupt.h"
#include "io/idx.h"

static void set_shape(ct_model_data *d, const ct_images *im)
{
    d->c = im->c; d->h = im->h; d->w = im->w; d->classes = im->classes;
}

ct_status ct_image_load(ct_model_data *d, const ct_image_opts *o, const char *source, long seed, const ct_image_shape *shape)
{
    memset(d, 0, sizeof *d);
    d->source = source;
    if (!strcmp(source, "synthetic")) {
        d->n_train = o->samples > 0 ? o->samples : 60000;     /* "all": as many as Fashion-MNIST has */
        d->n_val = o->val_samples >= 0 ? o->val_samples : 10000;
        CT_TRY(ct_images_synthetic(&d->train, (int)d->n_train, shape->classes, shape->h, shape->w, o->noise, (uint64_t)seed));
        if (d->n_val > 0)
            CT_TRY(ct_images_synthetic(&d->val, (int)d->n_val, shape->classes, shape->h, shape->w, o->noise, (uint64_t)seed + 7919));
        set_shape(d, &d->train);
        return CT_OK;
    }
    if (shape->synthetic_only)
        return ct_fail(CT_EINVAL, "--data %s: %s trains on synthetic images only (--data synthetic); "
                       "for image files use `ctrain train cnn --data DIR`", source, shape->name);
    d->dir = ct_idx_data_dir(source);
    CT_TRY(ct_idx_load_dir(&d->train, &d->val, d->dir));
    d->n_train = o->samples > 0 && o->samples < d->train.n ? o->samples : d->train.n;
    d->n_val = o->val_samples >= 0 && o->val_samples < d->val.n ? o->val_samples : d->val.n;
    set_shape(d, &d->train);
    return CT_OK;
}

ct_status ct_image_load_test(ct_model_data *d, const char *source)
{
    memset(d, 0, sizeof *d);
    d->source = source;
    d->dir = ct_idx_data_dir(source);
    CT_TRY(ct_idx_load_split(&d->val, d->dir, 1));
    d->n_val = d->val.n;
    set_shape(d, &d->val);
    return CT_OK;
}

void ct_image_data_line(const ct_model_data *d, const ct_model_task *t, const ct_fit_config *fit, FILE *out)
{
    fprintf(out, "Data: %s (%s), %ld training and %ld test images of %dx%dx%d, %d classes; %s lr %g, batch %d\n",
            d->source, d->dir ? d->dir : "generated from the seed", d->n_train, d->n_val, d->c, d->h, d->w, d->classes,
            ct_optim_name(fit->optim.kind), fit->optim.lr, fit->batch);
    fflush(out);
}

void ct_image_data_summary(const ct_model_data *d, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s: %dx%dx%d images, %d classes", d->source, d->c, d->h, d->w, d->classes);
}

ct_status ct_image_task_open(ct_model_task *t, seq_cnn *m, ct_model_data *d, const ct_rngs *rngs, int batch)
{
    memset(t, 0, sizeof *t);
    CT_TRY(ct_image_task_init(&t->c, m, &d->train, &d->val, d->n_train, d->n_val, batch, rngs));
    t->open = 2;
    t->task = ct_image_task_ops(&t->c);
    return CT_OK;
}

ct_status ct_image_evaluate(seq_cnn *m, const ct_images *test, int batch, double *loss, long *right, long *confusion)
{
    const ct_backend *be = m->be;
    const int C = test->classes;
    size_t px = (size_t)test->c * test->h * test->w;
    float *logits = ct_malloc((size_t)batch * C * sizeof *logits, "logits");   /* [batch, classes] on the host */
    float *x_dev = NULL;                                                        /* the batch on the device */
    int *labels_dev = NULL;
    ct_status st = logits ? CT_OK : CT_ENOMEM;
    if (st == CT_OK && !be->host_memory) {
        st = be->ops->mem_alloc(be, (void **)&x_dev, (size_t)batch * px * sizeof *x_dev, "test images");
        if (st == CT_OK) st = be->ops->mem_alloc(be, (void **)&labels_dev, (size_t)batch * sizeof *labels_dev, "test labels");
    }
    memset(confusion, 0, (size_t)C * C * sizeof *confusion);
    double loss_sum = 0;
    *right = 0;
    for (int first = 0; st == CT_OK && first < test->n; first += batch) {
        int n = test->n - first < batch ? test->n - first : batch;
        int correct = 0;
        const float *x = ct_ops_stage(be, x_dev, test->x + (size_t)first * px, (size_t)n * px * sizeof *x);
        const int *labels = ct_ops_stage(be, labels_dev, test->labels + first, (size_t)n * sizeof *labels);
        float l = ct_seq_cnn_forward(m, x, labels, n, 0, NULL, &correct);
        loss_sum += (double)l * n;
        *right += correct;
        if (be->ops->download(be, logits, m->logits, (size_t)n * C * sizeof *logits) != CT_OK) ct_device_fatal("%s", ct_last_error());
        for (int k = 0; k < n; k++) {
            const float *z = logits + (size_t)k * C;
            int best = 0;
            for (int j = 1; j < C; j++) if (z[j] > z[best]) best = j;
            confusion[(size_t)test->labels[first + k] * C + best]++;
        }
        if (ct_interrupt_signal()) st = ct_fail(CT_EINTR, "interrupted by %s", ct_interrupt_name(ct_interrupt_signal()));
    }
    *loss = test->n ? loss_sum / test->n : 0;
    if (x_dev) be->ops->mem_free(be, x_dev);
    if (labels_dev) be->ops->mem_free(be, labels_dev);
    free(logits);
    return st;
}
