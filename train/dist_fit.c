/* dist_fit.c - what the training loop asks of data-parallel training (see dist.h):
 * the checks before training, the state shared from rank 0, and per step the
 * whole batch's loss, the whole batch's gradient (one all-reduce of the flat
 * gradient buffer) and the check that every rank holds the same parameters.
 * Built on dist.c's collectives only, so it is the same with and without MPI. */
#include <stdlib.h>
#include <string.h>
#include "train/dist.h"
#include "train/checkpoint.h"

/* ---- before training ---- */

static uint64_t hash_int(uint64_t h, long long v) { return ct_hash_bytes(h, &v, sizeof v); }
static uint64_t hash_num(uint64_t h, double v) { return ct_hash_bytes(h, &v, sizeof v); }
static uint64_t hash_str(uint64_t h, const char *s) { return ct_hash_bytes(h, s, strlen(s) + 1); }

static uint64_t hash_kv(uint64_t h, const ct_kv *kv)
{
    for (int i = 0; i < kv->n; i++) {
        const ct_kv_entry *e = &kv->e[i];
        h = hash_str(h, e->key);
        h = e->type == CT_KV_STR ? hash_str(h, e->str) : e->type == CT_KV_INT ? hash_int(h, e->i) : hash_num(h, e->num);
    }
    return h;
}

uint64_t ct_dist_config_hash(const ct_task *t, int epochs, int batch, const ct_optim_config *o, const ct_sched *s,
                             const struct ct_ckpt_meta *meta)
{
    uint64_t h = CT_HASH_INIT;
    const ct_params *ps = t->state->params->host;
    h = hash_int(h, (long long)ps->numel);
    for (int i = 0; i < ps->n; i++) {   /* the layout: every parameter's name, shape and place */
        h = hash_str(h, ps->p[i].name);
        h = hash_int(h, ps->p[i].ndim);
        for (int k = 0; k < ps->p[i].ndim; k++) h = hash_int(h, ps->p[i].shape[k]);
        h = hash_int(h, (long long)ps->p[i].offset);
    }
    h = hash_int(h, t->n_train); h = hash_int(h, t->n_val); h = hash_int(h, epochs); h = hash_int(h, batch);
    h = hash_int(h, o->kind); h = hash_num(h, o->lr); h = hash_num(h, o->momentum); h = hash_int(h, o->nesterov);
    h = hash_num(h, o->rho); h = hash_num(h, o->beta1); h = hash_num(h, o->beta2); h = hash_num(h, o->eps);
    h = hash_num(h, o->weight_decay); h = hash_num(h, o->clip_norm);
    h = hash_int(h, s->kind); h = hash_num(h, s->base_lr); h = hash_int(h, s->step_size); h = hash_num(h, s->gamma);
    h = hash_int(h, s->t_max); h = hash_num(h, s->eta_min);
    if (meta) { h = hash_str(h, meta->model); h = hash_kv(h, &meta->model_cfg); h = hash_kv(h, &meta->train_cfg); }
    return h;
}

ct_status ct_dist_fit_check(ct_dist *d, const ct_task *t, int batch, uint64_t config_hash)
{
    int N = ct_dist_ranks(d);
    if (N == 1) return CT_OK;
    /* every rank sees the same numbers here: every rank fails alike, no message is lost */
    if (batch % N != 0) {
        d->agreed_failure = 1;
        return ct_fail(CT_EINVAL, "--batch %d does not divide evenly over %d ranks: --batch is the global batch, "
                       "use a multiple of %d (e.g. --batch %d)", batch, N, N, (batch + N - 1) / N * N);
    }
    long last = t->n_train % batch;
    if (last > 0 && last < N) {
        d->agreed_failure = 1;
        return ct_fail(CT_EINVAL, "the last batch of each epoch would hold %ld sample%s, fewer than the %d ranks: "
                       "choose a number of training samples whose remainder modulo --batch %d is 0 or at least %d",
                       last, last == 1 ? "" : "s", N, batch, N);
    }
    return ct_dist_check_same(d, config_hash, "the model or its training settings",
                              "start every rank with the same command line, data and checkpoint");
}

/* The host copies of rank 0's state to every rank. */
ct_status ct_dist_share_state(ct_dist *d, ct_train_state *s)
{
    if (ct_dist_ranks(d) == 1) return CT_OK;
    ct_params *p = s->params->host;
    CT_TRY(ct_dist_bcast(d, p->data, p->numel * sizeof(float), "sharing rank 0's parameters"));
    if (s->buffers && s->buffers->host->numel)
        CT_TRY(ct_dist_bcast(d, s->buffers->host->data, s->buffers->host->numel * sizeof(float), "sharing rank 0's batchnorm statistics"));
    if (!s->has_opt) return CT_OK;
    ct_optim *o = ct_train_state_host_optim(s);
    if (o->m) CT_TRY(ct_dist_bcast(d, o->m, o->n * sizeof(float), "sharing rank 0's optimizer state"));
    if (o->v) CT_TRY(ct_dist_bcast(d, o->v, o->n * sizeof(float), "sharing rank 0's optimizer state"));
    return ct_dist_bcast(d, &o->step, sizeof o->step, "sharing rank 0's optimizer state");
}

int ct_dist_sum_cb(void *ctx, double *buf, int n)
{
    return ct_dist_sum_f64(ctx, buf, n, "synchronising batchnorm statistics") != CT_OK;
}

/* ---- every step ---- */

ct_status ct_dist_batch_loss(ct_dist *d, float *loss, int *correct, int n_local, int n)
{
    if (ct_dist_ranks(d) == 1) return CT_OK;
    double sums[2] = { n_local > 0 ? (double)*loss * n_local : 0.0, (double)*correct };   /* [sum of losses, right predictions] */
    CT_TRY(ct_dist_sum_f64(d, sums, 2, "summing the batch's loss over the ranks"));
    *loss = (float)(sums[0] / n);
    *correct = (int)sums[1];
    return CT_OK;
}

ct_status ct_dist_batch_grad(ct_dist *d, ct_train_state *s, int n_local, int n)
{
    if (!d || !d->mpi) return CT_OK;
    /* each rank's gradient is of its own rows' mean: weighted by its share of the batch,
     * the sum over the ranks is the gradient of the whole batch's mean */
    return ct_dist_sum_device(d, s->be, s->params->grad, s->params->host->numel, (float)n_local / (float)n,
                              "the gradient all-reduce");
}

ct_status ct_dist_after_step(ct_dist *d, ct_train_state *s, long step)
{
    if (ct_dist_ranks(d) == 1) return CT_OK;
    if (s->buffers && s->buffers->host->numel)   /* rank 0's batchnorm statistics, as DDP's broadcast_buffers */
        CT_TRY(ct_dist_bcast_device(d, s->be, s->buffers->data, s->buffers->host->numel, "broadcasting rank 0's batchnorm statistics"));
    if (d->check_every <= 0 || step % d->check_every != 0) return CT_OK;
    const ct_params *p = s->params->host;
    if (!s->be->host_memory) CT_TRY(ct_dparams_to_host(s->params));   /* a GPU: its values, to hash them */
    /* Testing hook (tests/test_dist.c): CT_DIST_TEST_DIVERGE=STEP makes the last rank move one
     * parameter by one unit in the last place after that step, which the comparison must catch. */
    const char *diverge = getenv("CT_DIST_TEST_DIVERGE");
    if (diverge && atol(diverge) == step && d->rank == d->size - 1) {
        uint32_t bits;
        memcpy(&bits, &p->data[0], sizeof bits);
        bits ^= 1u;
        memcpy(&p->data[0], &bits, sizeof bits);
    }
    uint64_t h = ct_hash_floats(p->data, p->numel);
    char what[96];
    snprintf(what, sizeof what, "the parameters' hash after step %ld", step);
    return ct_dist_check_same(d, h, what, "the ranks have diverged (mixed hardware or libraries?); "
                              "report it, and resume from the last checkpoint");
}
