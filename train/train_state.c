/* train_state.c - the device side of training (task.h: ct_train_state): the
 * optimizer on the model's device, the gradients zeroed, measured and applied there,
 * and the copies between the device and the host that checkpoints, best-weight
 * snapshots, exports and data-parallel ranks read. */
#include "train/task.h"

ct_train_state ct_train_state_of(ct_dparams *params, ct_dparams *buffers)
{
    return (ct_train_state){ .be = params->be, .params = params, .buffers = buffers };
}

ct_status ct_train_state_begin(ct_train_state *s, const ct_optim_config *cfg)
{
    size_t n = s->params->host->numel;
    CT_TRY(s->be->ops->optim_init(s->be, &s->opt, cfg, n));
    s->has_opt = 1;
    if (s->be->host_memory) return CT_OK;
    ct_status st = ct_optim_init(&s->host_opt, cfg, n);   /* where checkpoints read and write the state */
    if (st != CT_OK) ct_train_state_end(s);
    return st;
}

void ct_train_state_end(ct_train_state *s)
{
    if (!s->has_opt) return;
    s->be->ops->optim_free(s->be, &s->opt);
    if (!s->be->host_memory) ct_optim_free(&s->host_opt);
    s->has_opt = 0;
}

void ct_train_state_zero_grad(ct_train_state *s)
{
    s->be->ops->zero(s->be, s->params->grad, s->params->host->numel * sizeof(float));
}

float ct_train_state_grad_norm(ct_train_state *s)
{
    return s->be->ops->clip_grad_norm(s->be, s->params->grad, s->params->host->numel, 0);
}

void ct_train_state_step(ct_train_state *s, float lr)
{
    s->be->ops->optim_step(s->be, &s->opt, s->params->data, s->params->grad, lr);
}

ct_optim *ct_train_state_host_optim(ct_train_state *s) { return s->be->host_memory ? &s->opt : &s->host_opt; }

ct_status ct_train_state_to_host(ct_train_state *s)
{
    CT_TRY(ct_dparams_to_host(s->params));
    if (s->buffers) CT_TRY(ct_dparams_to_host(s->buffers));
    if (!s->has_opt || s->be->host_memory) return CT_OK;
    size_t bytes = s->opt.n * sizeof(float);
    if (s->opt.m) CT_TRY(s->be->ops->download(s->be, s->host_opt.m, s->opt.m, bytes));
    if (s->opt.v) CT_TRY(s->be->ops->download(s->be, s->host_opt.v, s->opt.v, bytes));
    s->host_opt.step = s->opt.step;
    return CT_OK;
}

ct_status ct_train_state_to_device(ct_train_state *s)
{
    CT_TRY(ct_dparams_to_device(s->params));
    if (s->buffers) CT_TRY(ct_dparams_to_device(s->buffers));
    if (!s->has_opt || s->be->host_memory) return CT_OK;
    size_t bytes = s->opt.n * sizeof(float);
    if (s->opt.m) CT_TRY(s->be->ops->upload(s->be, s->opt.m, s->host_opt.m, bytes));
    if (s->opt.v) CT_TRY(s->be->ops->upload(s->be, s->opt.v, s->host_opt.v, bytes));
    s->opt.step = s->host_opt.step;
    return CT_OK;
}
