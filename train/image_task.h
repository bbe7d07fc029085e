/* image_task.h - the training data of an image classifier (models/seq_cnn.h:
 * `cnn`, `small-cnn`) wired into the shared training loop (train/train.h):
 * images held in memory, the training images reshuffled every epoch, and each
 * batch (images and labels) gathered into one host block that reaches the
 * model's device with one copy (be->ops->ring_put; nothing is copied on the CPU).
 *
 * With several ranks (dist, train/dist.h) each loads only its images of each
 * batch; the order is drawn alike on every rank.
 *
 * Exact resume (ct_task.save_state / load_state): /rng/data, /rng/dropout and
 * /data/order, the epoch's order of the training images.
 */
#ifndef CT_IMAGE_TASK_H
#define CT_IMAGE_TASK_H
#include "core/rng.h"
#include "io/images.h"
#include "models/seq_cnn.h"
#include "train/train.h"

typedef struct {
    seq_cnn *m;                     /* the classifier, on its device, planned for `batch` (not owned) */
    const ct_images *train, *val;   /* not owned; val may be NULL when n_val is 0 */
    long n_train, n_val;            /* the first n of each are used */
    int batch;
    int *order;                     /* [n_train] this epoch's order */
    float *block;                   /* host: x [batch, C, H, W] | labels [batch] (ints) */
    float *x;                       /* view: [batch, C, H, W] */
    int *labels;                    /* view: [batch] */
    size_t labels_off, block_bytes; /* the block's layout (offset in floats) */
    void *ring;                     /* the device's batch slots */
    const float *dev_x;             /* the current batch on the device */
    const int *dev_labels;
    ct_rng data, dropout;           /* sample order; dropout masks */
    ct_train_state state;           /* the model's weights and optimizer, for ct_fit */
    struct ct_dist *dist;           /* data-parallel: each batch's images of this rank (train/dist.h); NULL: all */
} image_task;

/* The data stream starts from rngs->data, the dropout stream from rngs->dropout. */
ct_status ct_image_task_init(image_task *t, seq_cnn *m, const ct_images *train, const ct_images *val, long n_train, long n_val,
                          int batch, const ct_rngs *rngs);
ct_task   ct_image_task_ops(image_task *t);
void      ct_image_task_free(image_task *t);

#endif
