/* image_task.c - images in memory as training batches for a classifier (see image_task.h). */
#include <stdlib.h>
#include <string.h>
#include "train/image_task.h"
#include "train/checkpoint.h"
#include "train/dist.h"

static void begin_epoch(void *ctx, int epoch)
{
    image_task *t = ctx;
    (void)epoch;
    ct_rng_shuffle_int(&t->data, t->order, (int)t->n_train);
}

static ct_status load(void *ctx, int split, long first, int n)
{
    image_task *t = ctx;
    int lo, hi;
    ct_dist_part(t->dist, n, &lo, &hi);   /* this rank's images of the batch (all of them in one process) */
    t->m->be->ops->ring_wait(t->m->be, t->ring, t->block);   /* the last batch's copy has left the (pinned) block */
    if (split == CT_SPLIT_TRAIN) ct_images_gather(t->x, t->labels, t->train, t->order, first + lo, hi - lo);
    else ct_images_gather(t->x, t->labels, t->val, NULL, first + lo, hi - lo);
    ct_seq_cnn_set_part(t->m, lo, t->dist ? n : 0, 1);   /* dropout draws as in the whole batch */
    const float *dev = t->m->be->ops->ring_put(t->m->be, t->ring, t->block, t->block_bytes);   /* the batch's one copy */
    t->dev_x = dev;
    t->dev_labels = (const int *)(dev + t->labels_off);
    return CT_OK;
}

static float forward(void *ctx, int n, int train, int *correct)
{
    image_task *t = ctx;
    return ct_seq_cnn_forward(t->m, t->dev_x, t->dev_labels, n, train, &t->dropout, correct);
}

static void backward(void *ctx, int n)
{
    image_task *t = ctx;
    ct_seq_cnn_backward(t->m, t->dev_x, t->dev_labels, n);
}

static ct_status save_state(void *ctx, hid_t f)
{
    image_task *t = ctx;
    size_t dims = (size_t)t->n_train;
    CT_TRY(ct_ckpt_write_rng(f, "data", &t->data));
    CT_TRY(ct_ckpt_write_rng(f, "dropout", &t->dropout));
    return ct_ckpt_write_i32(f, "data/order", t->order, 1, &dims);
}

/* Reads everything and checks that the order is a permutation before changing anything. */
static ct_status load_state(void *ctx, hid_t f)
{
    image_task *t = ctx;
    long n = t->n_train;
    ct_rng d, p;
    int *tmp = ct_malloc((size_t)n * sizeof(int) + 1, "order");
    unsigned char *seen = ct_calloc((size_t)n + 1, 1, "order");
    ct_status st = tmp && seen ? CT_OK : CT_ENOMEM;
    if (st == CT_OK) st = ct_ckpt_read_rng(f, "data", &d);
    if (st == CT_OK) st = ct_ckpt_read_rng(f, "dropout", &p);
    if (st == CT_OK && (st = ct_ckpt_read_i32(f, "data/order", tmp, (size_t)n)) != CT_OK)
        st = ct_fail(st, "%s (was the checkpoint made with other --samples?)", ct_last_error());
    for (long i = 0; st == CT_OK && i < n; i++) {
        if (tmp[i] < 0 || tmp[i] >= n || seen[tmp[i]]) st = ct_fail(CT_EFORMAT, "/data/order is not a permutation of the %ld samples", n);
        else seen[tmp[i]] = 1;
    }
    if (st == CT_OK) { memcpy(t->order, tmp, (size_t)n * sizeof(int)); t->data = d; t->dropout = p; }   /* all or nothing */
    free(tmp);
    free(seen);
    return st;
}

ct_status ct_image_task_init(image_task *t, seq_cnn *m, const ct_images *train, const ct_images *val, long n_train, long n_val,
                          int batch, const ct_rngs *rngs)
{
    memset(t, 0, sizeof *t);
    t->m = m;
    t->train = train;
    t->val = val;
    t->n_train = n_train;
    t->n_val = n_val;
    t->batch = batch;
    t->data = rngs->data;
    t->dropout = rngs->dropout;
    CT_ASSERT(n_train >= 1 && n_train <= train->n && (n_val == 0 || (val && n_val <= val->n)) && batch <= m->max_batch);
    size_t px = (size_t)train->c * train->h * train->w;
    t->labels_off = ((size_t)batch * px + 15) / 16 * 16;
    t->block_bytes = (t->labels_off + (size_t)batch) * sizeof(float);
    t->order = ct_malloc((size_t)n_train * sizeof *t->order, "order");
    if (m->be->ops->host_alloc(m->be, (void **)&t->block, t->block_bytes, "batch") != CT_OK) t->block = NULL;   /* pinned on the GPU */
    ct_status st = t->order && t->block ? CT_OK : CT_ENOMEM;
    if (st == CT_OK) {
        t->x = t->block;
        t->labels = (int *)(t->block + t->labels_off);
        for (long i = 0; i < n_train; i++) t->order[i] = (int)i;
        st = m->be->ops->ring_create(m->be, &t->ring, t->block_bytes);
    }
    t->state = ct_train_state_of(&m->dev, &m->dev_buffers);
    if (st != CT_OK) ct_image_task_free(t);
    return st;
}

ct_task ct_image_task_ops(image_task *t)
{
    return (ct_task){ .ctx = t, .state = &t->state, .n_train = t->n_train, .n_val = t->n_val, .dist = t->dist,
                      .begin_epoch = begin_epoch, .load = load, .forward = forward, .backward = backward,
                      .save_state = save_state, .load_state = load_state };
}

void ct_image_task_free(image_task *t)
{
    if (t->ring) t->m->be->ops->ring_free(t->m->be, t->ring);
    free(t->order);
    if (t->block) t->m->be->ops->host_free(t->m->be, t->block);
    memset(t, 0, sizeof *t);
}
