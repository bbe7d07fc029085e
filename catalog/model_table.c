/* model_table.c - the table of models and what every descriptor's caller does
 * the same way: opening a network on a device, closing a task, freeing data
 * (see model_table.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "catalog/model_table.h"
#include "train/dist.h"

extern const ct_model_descriptor ct_model_siamese_lstm, ct_model_siamese_cnn, ct_model_small_cnn, ct_model_cnn;

const ct_model_descriptor *const ct_models[] = { &ct_model_siamese_lstm, &ct_model_siamese_cnn, &ct_model_small_cnn,
                                                 &ct_model_cnn, NULL };

const ct_model_descriptor *ct_model_find(const char *name)
{
    for (int i = 0; ct_models[i]; i++) if (!strcmp(ct_models[i]->name, name)) return ct_models[i];
    return NULL;
}

void ct_model_names(char *buf, size_t cap, int with_eval)
{
    buf[0] = '\0';
    for (int i = 0; ct_models[i]; i++) {
        if (with_eval && !ct_models[i]->eval_config) continue;
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", ct_models[i]->name);
    }
}

ct_status ct_model_net_open(const ct_model_descriptor *d, void *net, const void *cfg, const ct_model_data *data,
                            ct_rng *init, const ct_backend *be, int batch)
{
    memset(net, 0, d->net_size);
    CT_TRY(d->build(net, cfg, data));
    d->init_weights(net, init);
    ct_status st = d->set_device(net, be);
    if (st == CT_OK) st = d->plan(net, batch);
    if (st != CT_OK) d->free(net);
    return st;
}

void ct_model_task_set_dist(ct_model_task *t, struct ct_dist *dist, int sync_batchnorm)
{
    if (t->open == 1) {
        t->s.cfg.dist = dist;
        if (sync_batchnorm && t->s.m.sync_batchnorm) t->s.m.sync_batchnorm(t->s.m.ctx, ct_dist_sum_cb, dist);
    }
    if (t->open == 2) {
        t->c.dist = dist;
        if (sync_batchnorm) ct_seq_cnn_sync_batchnorm(t->c.m, ct_dist_sum_cb, dist);
    }
    t->task.dist = dist;
}

void ct_model_task_close(ct_model_task *t)
{
    if (t->open == 1) ct_speaker_task_free(&t->s);
    if (t->open == 2) ct_image_task_free(&t->c);
    t->open = 0;
}

void ct_model_seq_rows(const seq_cnn *m, int per_sample, ct_row_fn row, void *ctx)
{
    for (int i = 0; i < m->n; i++) {
        const seq_layer *l = &m->layer[i];
        char name[64];
        if (ct_seq_cnn_conv_dw_by_pool(m, i) && m->layer[i + 1].bn_pool_ran)   /* its backward makes the batchnorm's din */
            snprintf(name, sizeof name, "%s (%s, %s din)", l->name, l->text, m->layer[i + 1].name);
        else if (l->kind == SEQ_CONV && i + 1 < m->n && m->layer[i + 1].relu_in_conv)   /* it runs the relu after it */
            snprintf(name, sizeof name, "%s (%s, %s)", l->name, l->text, m->layer[i + 1].text);
        else if (l->relu_in_conv)   /* its time is the convolution's */
            snprintf(name, sizeof name, "%s (with %s)", l->text, m->layer[i - 1].name);
        else if (l->name[0]) snprintf(name, sizeof name, "%s (%s)", l->name, l->text);
        else if (l->pool_in_conv || (l->relu_after_pool && i + 1 < m->n && m->layer[i + 1].pool_in_conv)) {
            const int c = l->pool_in_conv ? i - 1 - (m->layer[i - 1].kind == SEQ_RELU) : i - 1;   /* its time is the conv's */
            const int pool = l->pool_in_conv ? i : i + 1;   /* the backward too where the convolution's takes the pool's gradient */
            snprintf(name, sizeof name, m->layer[pool].pool_in_conv && m->be->ops->conv2d_backward_pool ? "%s (with %s)"
                     : "%s (forward with %s)", l->text, m->layer[c].name);
        }
        else if (l->bn_of_pool && m->layer[l->bn_of_pool - 1].bn_pool_ran)   /* its time is in the batchnorm's row */
            snprintf(name, sizeof name, "%s (with %s)", l->text, m->layer[l->bn_of_pool - 1].name);
        else if ((l->relu_in_bn_pool || l->relu_after_pool) && i > 0 && m->layer[i - 1].bn_pool_ran)   /* likewise */
            snprintf(name, sizeof name, "%s (with %s)", l->text, m->layer[i - 1].name);
        else snprintf(name, sizeof name, "%s", l->text);
        row(ctx, name, m->prof.fwd[i], m->prof.bwd[i], ct_seq_layer_step_flops(m, i, per_sample));
    }
}

void ct_model_data_free(ct_model_data *d)
{
    ct_corpus_free(&d->corpus);
    free(d->trials);
    free(d->trial_speakers);
    free(d->excluded);
    ct_images_free(&d->train);
    ct_images_free(&d->val);
    d->trials = NULL;
    d->trial_speakers = NULL;
    d->excluded = NULL;
}
