/* session.c - one model opened for training on one device, and a data-parallel
 * job's agreement around it (see session.h). */
#include <stdlib.h>
#include <string.h>
#include "catalog/session.h"

ct_status ct_session_init(ct_session *s, const ct_model_descriptor *d, const void *cfg, ct_model_data *data, ct_dist *dist)
{
    memset(s, 0, sizeof *s);
    s->d = d;
    s->cfg = cfg;
    s->data = data;
    s->dist = dist;
    s->net = ct_calloc(1, d->net_size, "network");
    return s->net ? CT_OK : CT_ENOMEM;
}

ct_status ct_session_build(ct_session *s)
{
    if (s->built) return CT_OK;
    memset(s->net, 0, s->d->net_size);
    CT_TRY(s->d->build(s->net, s->cfg, s->data));
    s->built = 1;
    return CT_OK;
}

/* Whether this process is one rank of several (the job's agreements run). */
static int in_job(const ct_session *s) { return s->dist && s->dist->mpi; }

/* The data (when c->source), the network on the device planned for the batch, the task. */
static ct_status open_model(ct_session *s, const ct_session_config *c)
{
    const ct_model_descriptor *d = s->d;
    if (c->source) {
        s->data->ranks_here = in_job(s) ? s->dist->local_size : 1;   /* they share the machine's memory */
        ct_status st = d->load_data(s->data, s->cfg, c->source, c->seed, c->batch);
        s->data->tc.fixed_pairs = c->fixed_pairs;
        CT_TRY(st);
    }
    CT_TRY(ct_session_build(s));
    d->init_weights(s->net, &s->rngs.init);
    ct_status st = d->set_device(s->net, c->be);
    if (st == CT_OK) st = d->plan(s->net, c->batch);
    if (st == CT_OK) st = d->task_open(&s->task, s->net, s->data, &s->rngs, c->batch);
    if (st != CT_OK) {   /* the network holds no memory */
        d->free(s->net);
        s->built = 0;
        return st;
    }
    s->be = c->be;
    s->open = 1;
    return CT_OK;
}

ct_status ct_session_open(ct_session *s, const ct_session_config *c)
{
    ct_rngs_seed(&s->rngs, (uint64_t)c->seed);
    ct_status st = open_model(s, c);
    if (in_job(s)) {   /* one of several ranks: each trains on its part of every batch */
        ct_dist *d = s->dist;
        if (c->dist_options) {
            d->timeout_s = c->dist_timeout;
            d->check_every = c->dist_check_every;
        }
        if (st == CT_OK) ct_model_task_set_dist(&s->task, d, c->dist_options && c->sync_batchnorm);
        st = ct_dist_agree(d, st);   /* a rank that could not read its data stops every rank */
        if (c->dist_options) {   /* they decide which collectives run */
            uint64_t h = ct_hash_bytes(ct_hash_bytes(CT_HASH_INIT, &c->sync_batchnorm, sizeof c->sync_batchnorm),
                                       &c->dist_check_every, sizeof c->dist_check_every);
            if (st == CT_OK) st = ct_dist_check_same(d, h, "--sync-batchnorm or --dist-check-every", "give every rank the same options");
        }
        if (st == CT_OK) st = ct_dist_nccl_open(d, c->be, c->gpu_stream);
    }
    if (c->ready) {
        if (st == CT_OK) st = c->ready(c->ready_ctx, s);
        if (in_job(s)) st = ct_dist_agree(s->dist, st);   /* rank 0's step is done, or every rank stops */
    }
    if (st != CT_OK) ct_session_close(s, 1);
    return st;
}

ct_status ct_session_fit(ct_session *s, ct_fit_config *fit, ct_ckpt_meta *meta, ct_profile_counts *pc, ct_epoch_log *hist,
                         FILE *out)
{
    ct_status st = CT_OK;
    if (meta) {   /* what every checkpoint records of the run */
        snprintf(meta->model, sizeof meta->model, "%s", s->d->name);
        s->d->describe(s->cfg, s->net, &meta->model_cfg);
        st = s->d->data_to_meta(s->cfg, s->data, meta);
        fit->meta = meta;
    }
    fit->rngs = &s->rngs;
    if (st == CT_OK) {
        if (pc && pc->profile) st = ct_fit_profiled(&s->task.task, s->d->prof(s->net), pc, fit, hist, out);
        else st = ct_fit(&s->task.task, fit, hist, out);
    }
    if (in_job(s)) st = ct_dist_agree(s->dist, st);   /* a stop every rank made alike (a NaN loss): one message */
    return st;
}

ct_status ct_session_save(ct_session *s, const char *path, const ct_kv *desc)
{
    const speaker_task *sp = s->d->task == CT_TASK_SPEAKER && s->task.open ? &s->task.s : NULL;   /* the speakers trained on */
    ct_status st = CT_OK;
    if (ct_dist_is_root(s->dist))   /* rank 0 writes */
        st = s->d->save(s->net, path, desc, sp ? sp->train_names : NULL, sp ? sp->n_train_speakers : 0);
    if (in_job(s)) st = ct_dist_agree(s->dist, st);
    return st;
}

void ct_session_close(ct_session *s, int failed)
{
    if (s->dist) ct_dist_nccl_close(s->dist, failed);   /* its communicator belongs to this device */
    ct_model_task_close(&s->task);
    if (s->built) s->d->free(s->net);
    s->built = s->open = 0;
    s->be = NULL;
}

void ct_session_free(ct_session *s)
{
    ct_session_close(s, 0);
    free(s->net);
    s->net = NULL;
}

ct_status ct_session_lock_outputs(const ct_dist *dist, ct_path_lock *locks, const char *const *paths, const char *const *flags,
                                  int n, const char *holder)
{
    ct_status st = CT_OK;
    for (int i = 0; i < n; i++) {   /* rank 0 alone writes them, so rank 0 alone locks them */
        locks[i].fd = -1;
        int dup = 0;
        for (int k = 0; k < i; k++) dup |= paths[k] && paths[i] && !strcmp(paths[k], paths[i]);
        if (st == CT_OK && paths[i] && !dup && ct_dist_is_root(dist)) st = ct_path_lock_take(&locks[i], paths[i], holder, flags[i]);
    }
    if (dist && dist->mpi) st = ct_dist_agree(dist, st);
    return st;
}
