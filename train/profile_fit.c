/* profile_fit.c - a task that forwards to the model's task and switches the
 * model's profiling on for the training batches after the warm-up (see
 * profile_fit.h). */
#include "train/profile_fit.h"
#include "core/threads.h"

typedef struct {
    ct_task inner;
    ct_prof *prof;
    ct_profile_counts *pc;
    int epoch;
} profiled_task;

static void prof_begin_epoch(void *ctx, int epoch)
{
    profiled_task *p = ctx;
    p->epoch = epoch;
    if (p->inner.begin_epoch) p->inner.begin_epoch(p->inner.ctx, epoch);
}

static ct_status prof_load(void *ctx, int split, long first, int n)
{
    profiled_task *p = ctx;
    return p->inner.load(p->inner.ctx, split, first, n);
}

/* The pool's seconds from one training batch's forward to the next one's (its backward,
 * the optimizer, the next load), closed at the first validation batch and at the epoch's end. */
static void prof_close_interval(ct_profile_counts *pc)
{
    if (pc->mark >= 0) pc->parallel_seconds += ct_parallel_seconds() - pc->mark;
    pc->mark = -1;
}

static float prof_forward(void *ctx, int n, int train, int *correct)
{
    profiled_task *p = ctx;
    p->prof->on = p->pc->profile && train && p->epoch >= p->pc->warmup;   /* validation is never profiled */
    if (p->prof->on) { p->pc->batches++; p->pc->samples += n; }
    prof_close_interval(p->pc);
    if (p->prof->on) p->pc->mark = ct_parallel_seconds();
    return p->inner.forward(p->inner.ctx, n, train, correct);
}

static void prof_backward(void *ctx, int n)
{
    profiled_task *p = ctx;
    p->inner.backward(p->inner.ctx, n);   /* timed as the forward of the same batch set it */
}

static void prof_end_epoch(void *ctx, int epoch, ct_epoch_log *log)
{
    profiled_task *p = ctx;
    prof_close_interval(p->pc);
    p->inner.end_epoch(p->inner.ctx, epoch, log);
}

ct_status ct_fit_profiled(const ct_task *inner, ct_prof *prof, ct_profile_counts *pc, const ct_fit_config *cfg,
                          ct_epoch_log *hist, FILE *out)
{
    profiled_task p = { .inner = *inner, .prof = prof, .pc = pc };
    pc->batches = pc->samples = 0;
    pc->parallel_seconds = 0;
    pc->mark = -1;
    ct_task t = *inner;
    t.ctx = &p;
    t.begin_epoch = prof_begin_epoch;
    t.load = prof_load;
    t.forward = prof_forward;
    t.backward = prof_backward;
    t.end_epoch = inner->end_epoch ? prof_end_epoch : NULL;
    t.save_state = t.load_state = NULL;   /* not checkpointed: its state would be the inner context's */
    ct_status st = ct_fit(&t, cfg, hist, out);
    prof_close_interval(pc);   /* a task without end_epoch: the last batch's interval */
    prof->on = 0;
    return st;
}
