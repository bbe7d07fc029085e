/* model_image.h - what the two image models (cnn, small-cnn) share in their
 * descriptors (catalog/model_table.h): the image counts, loading IDX data
 * (Fashion-MNIST, MNIST, any directory of the four IDX files) or synthetic
 * images, the image task (train/image_task.h) and a test set's evaluation. */
#ifndef CT_MODEL_IMAGE_H
#define CT_MODEL_IMAGE_H
#include "catalog/model_table.h"

/* The data options of an image model: a member of its configuration. */
typedef struct {
    int samples;          /* training images per epoch; 0: all of an IDX set */
    int val_samples;      /* validation images; -1: all of an IDX test set */
    float noise;          /* synthetic images: noise amplitude */
} ct_image_opts;

/* How synthetic images look (--data synthetic): one oriented bar per class, with noise. */
typedef struct { int c, h, w, classes; int synthetic_only; const char *name; } ct_image_shape;

/* Loads --data: `synthetic` (images of `shape`, from the seed) or an IDX directory
 * (`fashion-mnist` is Debian's); shape.synthetic_only refuses anything else. */
ct_status ct_image_load(ct_model_data *data, const ct_image_opts *o, const char *source, long seed, const ct_image_shape *shape);
/* The test split of an IDX directory (--data as for training) into data->val, its shape into data. */
ct_status ct_image_load_test(ct_model_data *data, const char *source);
void      ct_image_data_line(const ct_model_data *data, const ct_model_task *task, const ct_fit_config *fit, FILE *out);
void      ct_image_data_summary(const ct_model_data *data, char *buf, size_t cap);
ct_status ct_image_task_open(ct_model_task *t, seq_cnn *m, ct_model_data *data, const ct_rngs *rngs, int batch);

/* A classifier on its device, planned for `batch`, over a test set: the mean loss, the right
 * predictions and the confusion matrix [classes, classes] (rows: true class, zeroed here). */
ct_status ct_image_evaluate(seq_cnn *m, const ct_images *test, int batch, double *loss, long *right, long *confusion);

#endif
