/* train.c - the shared training loop, Keras-style log, checkpoints and callbacks (see train.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/interrupt.h"
#include "io/tfevents.h"
#include "train/train.h"
#include "train/checkpoint.h"
#include "train/dist.h"

/* The live bar, on stderr: it is redrawn in place and never belongs in a log. */
static void progress(FILE *out, long done, long total, double elapsed, double loss, double acc)
{
    int width = 30, filled = total ? (int)(width * done / total) : width;
    double rate = elapsed > 0 ? done / elapsed : 0, eta = rate > 0 ? (total - done) / rate : 0;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : (i == filled ? '>' : '.');
    bar[width] = '\0';
    fprintf(out, "\r%*ld/%ld [%s] - ETA: %4.0fs - %6.0f samples/s - loss: %.4f - accuracy: %.4f",
            (int)snprintf(NULL, 0, "%ld", total), done, total, bar, eta, rate, loss, acc);
    fflush(out);
}

/* The signal that stops training (0: none), the same on every rank of a data-parallel
 * job: a signal that reached any rank (mpirun forwards it to all, but not at the same
 * instant) is recorded on all of them at this point, so that they stop after the same
 * step. One small all-reduce per call under MPI; nothing in one process. */
static int fit_signal(const ct_dist *d)
{
    if (ct_dist_ranks(d) > 1) {
        int sig = ct_interrupt_signal();
        double seen[2] = { sig == SIGINT, sig != 0 && sig != SIGINT };   /* [SIGINT, SIGTERM] on how many ranks */
        if (ct_dist_sum_f64(d, seen, 2, "agreeing on a stop over the ranks") == CT_OK && !sig && (seen[0] > 0 || seen[1] > 0))
            ct_interrupt_note(seen[1] > 0 ? SIGTERM : SIGINT);
    }
    return ct_interrupt_signal();
}

ct_status ct_evaluate(const ct_task *t, int split, int batch, double *loss, double *accuracy)
{
    long n = split == CT_SPLIT_TRAIN ? t->n_train : t->n_val;
    double sums[2] = { 0, 0 };   /* [sum of losses, right predictions] */
    for (long first = 0; first < n && !fit_signal(t->dist); first += batch) {   /* a signal abandons it (ct_fit) */
        int b = (int)(n - first < batch ? n - first : batch), correct = 0, lo, hi;
        ct_dist_part(t->dist, b, &lo, &hi);   /* this rank's rows (all of them in one process) */
        CT_TRY(ct_dist_agree(t->dist, t->load(t->ctx, split, first, b)));
        if (hi == lo) continue;
        sums[0] += (double)t->forward(t->ctx, hi - lo, 0, &correct) * (hi - lo);
        sums[1] += correct;
    }
    CT_TRY(ct_dist_sum_f64(t->dist, sums, 2, "summing the validation metrics over the ranks"));
    *loss = n ? sums[0] / n : 0;
    *accuracy = n ? sums[1] / n : 0;
    return CT_OK;
}


/* ---- the monitored value (Keras's ModelCheckpoint / EarlyStopping "monitor") ---- */
static int monitor_is_max(ct_monitor m) { return m == CT_MONITOR_VAL_ACCURACY || m == CT_MONITOR_ACCURACY; }

static double monitor_value(ct_monitor m, const ct_epoch_log *l)
{
    switch (m) {
    case CT_MONITOR_VAL_ACCURACY: return l->val_accuracy;
    case CT_MONITOR_VAL_EER:      return l->val_eer;
    case CT_MONITOR_LOSS:         return l->loss;
    case CT_MONITOR_ACCURACY:     return l->accuracy;
    default:                      return l->val_loss;
    }
}

/* ---- CSV log (Keras's CSVLogger): a header, then one row per epoch ---- */
static void csv_header(FILE *f)
{
    fputs("epoch", f);
    for (int k = 0; k < CT_EPOCH_FIELDS; k++) fprintf(f, ",%s", ct_epoch_fields[k].name);
    fputc('\n', f);
}

/* A new run truncates the file; a resumed run keeps the header and the rows of
 * the epochs the checkpoint holds (dropping rows written after it), then appends. */
static ct_status csv_open(FILE **fp, const char *path, int resume, int epochs_done)
{
    FILE *old = resume ? fopen(path, "r") : NULL;
    if (old) {
        char tmp[4200], line[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
        FILE *w = fopen(tmp, "w");
        if (!w) { fclose(old); return ct_fail(CT_EIO, "--csv %s: cannot write %s", path, tmp); }
        int first = 1, header = 0;
        while (fgets(line, sizeof line, old)) {
            if (first && !strncmp(line, "epoch,", 6)) { fputs(line, w); header = 1; }
            else if (atoi(line) >= 1 && atoi(line) <= epochs_done) fputs(line, w);
            first = 0;
        }
        if (!header) { rewind(w); csv_header(w); }   /* empty or foreign file: start afresh */
        fclose(old);
        if (fclose(w) != 0 || rename(tmp, path) != 0) { unlink(tmp); return ct_fail(CT_EIO, "--csv %s: cannot rewrite the file", path); }
        *fp = fopen(path, "a");
    } else {
        *fp = fopen(path, "w");
        if (*fp) csv_header(*fp);
    }
    if (!*fp || fflush(*fp) != 0) return ct_fail(CT_EIO, "--csv %s: cannot write the file (directory missing or not writable?)", path);
    return CT_OK;
}

static ct_status csv_row(FILE *f, const char *path, int epoch, const ct_epoch_log *l)
{
    fprintf(f, "%d", epoch + 1);
    for (int k = 0; k < CT_EPOCH_FIELDS; k++) {
        const ct_epoch_field *c = &ct_epoch_fields[k];
        double v = ct_epoch_get(l, c);
        if ((c->flags & CT_EPOCH_OPTIONAL) && v < 0) fputc(',', f);   /* not computed: an empty cell */
        else fprintf(f, c->flags & CT_EPOCH_TIME ? ",%.3f" : ",%.6f", v);
    }
    fputc('\n', f);
    if (fflush(f) != 0) return ct_fail(CT_EIO, "--csv %s: write failed (disk full?)", path);
    return CT_OK;
}

/* ---- TensorBoard: one event per epoch, step = the epoch's number (1, 2, ...) ---- */
/* Whether field f of l is a scalar of the epoch's event. */
static int on_tensorboard(const ct_epoch_field *f, const ct_epoch_log *l, int has_val)
{
    if (!f->tag) return 0;
    if (f->flags & CT_EPOCH_OPTIONAL) return ct_epoch_get(l, f) >= 0;   /* computed (val_eer: a trial list) */
    return has_val || !(f->flags & CT_EPOCH_VAL);
}

/* The metrics, the learning rate, the times, the throughput. */
int ct_epoch_scalars(const ct_epoch_report *r, int has_val, const char **tags, float *values)
{
    const ct_epoch_log *l = &r->hist[r->epoch];
    int n = 0;
    for (int times = 0; times <= 1; times++) {
        for (int k = 0; k < CT_EPOCH_FIELDS; k++) {
            const ct_epoch_field *f = &ct_epoch_fields[k];
            if (!(f->flags & CT_EPOCH_TIME) != !times || !on_tensorboard(f, l, has_val)) continue;
            tags[n] = f->tag;
            values[n++] = (float)ct_epoch_get(l, f);
        }
        if (!times) { tags[n] = "learning_rate"; values[n++] = (float)r->lr; }
    }
    tags[n] = "samples_per_second";
    values[n++] = (float)r->samples_per_s;
    return n;
}

/* ---- one run of ct_fit ---- */
typedef struct {
    const ct_task *t;
    const ct_fit_config *cfg;
    FILE *out, *csv;
    ct_tfevents tb;                /* TensorBoard's event file (tb.f NULL without logdir) */
    int bar;                       /* draw the progress bar (on stderr) */
    ct_train_state *st;            /* the task's weights, gradients and optimizer */
    ct_params *params, *buffers;   /* their host copies (buffers NULL when the model has none) */
    ct_epoch_log *hist;            /* [epochs] */
    ct_ckpt_progress prog;         /* what the next checkpoint records */
    float *best_p, *best_s;        /* best epoch's weights (early stopping) */
    char last_good[4400];          /* the last checkpoint written or resumed from, for messages */
    int start_epoch, epochs_done;
    long start_step, steps_per_epoch;
    /* the epoch being trained */
    double t0, sum_loss, sum_correct;
    long seen, skipped, steps_run;   /* steps_run: batches of this epoch trained by this call (for ms/step) */
    long steps_total;                /* batches trained by this call of ct_fit */
    long trained;                    /* samples this process trains in the epoch (fewer when resumed inside it) */
    double data_s;                   /* seconds of the epoch spent in the task's load() */
    float lr;
} fit_run;

static ct_status save_to_file(fit_run *r, const char *path)
{
    CT_TRY(ct_train_state_to_host(r->st));
    ct_ckpt c = { .meta = r->cfg->meta, .params = r->params, .state = r->buffers, .opt = ct_train_state_host_optim(r->st),
                  .prog = r->prog, .hist = r->hist, .hist_cap = r->cfg->epochs, .best_params = r->best_p,
                  .best_state = r->best_s, .task = r->t, .rngs = r->cfg->rngs };
    CT_TRY(ct_ckpt_save(path, &c));
    if (r->cfg->checkpoint && !strcmp(path, r->cfg->checkpoint)) {
        if (r->prog.step) snprintf(r->last_good, sizeof r->last_good, "%s (epoch %d, after batch %ld)", path, r->prog.epoch + 1, r->prog.step);
        else snprintf(r->last_good, sizeof r->last_good, "%s (end of epoch %d)", path, r->prog.epoch);
    }
    return CT_OK;
}

/* Only rank 0 writes files (every rank holds the same state); every rank learns whether it worked. */
static ct_status save_to(fit_run *r, const char *path)
{
    return ct_dist_agree(r->t->dist, ct_dist_is_root(r->t->dist) ? save_to_file(r, path) : CT_OK);
}

static const char *last_good(const fit_run *r)
{
    return r->last_good[0] ? r->last_good : "none (write one with --checkpoint FILE)";
}

/* The best epoch's weights: kept on the host (early stopping restores them at the end). */
static ct_status snapshot_best(fit_run *r)
{
    CT_TRY(ct_train_state_to_host(r->st));
    memcpy(r->best_p, r->params->data, r->params->numel * sizeof(float));
    if (r->buffers && r->buffers->numel) memcpy(r->best_s, r->buffers->data, r->buffers->numel * sizeof(float));
    return CT_OK;
}

static ct_status restore_best(fit_run *r)
{
    memcpy(r->params->data, r->best_p, r->params->numel * sizeof(float));
    if (r->buffers && r->buffers->numel) memcpy(r->buffers->data, r->best_s, r->buffers->numel * sizeof(float));
    return ct_train_state_to_device(r->st);
}

/* The configuration's own contradictions, before anything is allocated. */
static ct_status fit_check(const ct_task *t, const ct_fit_config *cfg)
{
    if (cfg->epochs < 1 || cfg->batch < 1) return ct_fail(CT_EINVAL, "--epochs and --batch must be at least 1");
    if (t->n_train < 1) return ct_fail(CT_EINVAL, "no training samples");
    if ((cfg->checkpoint || cfg->save_best || cfg->resume) && (!cfg->meta || !t->save_state || !t->load_state))
        return ct_fail(CT_EINVAL, "this model cannot write or resume checkpoints (--checkpoint, --save-best, --resume)");
    int val_monitor = cfg->monitor == CT_MONITOR_VAL_LOSS || cfg->monitor == CT_MONITOR_VAL_ACCURACY || cfg->monitor == CT_MONITOR_VAL_EER;
    if ((cfg->save_best || cfg->early_stopping) && val_monitor && t->n_val < 1)
        return ct_fail(CT_EINVAL, "--monitor %s needs validation data (or use --monitor loss)", ct_monitor_name(cfg->monitor));
    if (cfg->checkpoint_every && !cfg->checkpoint) return ct_fail(CT_EINVAL, "--checkpoint-every needs --checkpoint FILE");
    return CT_OK;
}

/* Reads the checkpoint of cfg->resume: weights, optimizer state, progress, history, the
 * task's data state; then sends weights and optimizer state to the device. */
static ct_status fit_resume(fit_run *r)
{
    const ct_fit_config *cfg = r->cfg;
    ct_ckpt c = { .meta = cfg->meta, .params = r->params, .state = r->buffers, .opt = ct_train_state_host_optim(r->st),
                  .prog = r->prog, .hist = r->hist, .hist_cap = cfg->epochs, .best_params = r->best_p,
                  .best_state = r->best_s, .task = r->t, .rngs = cfg->rngs };
    CT_TRY(ct_dist_agree(r->t->dist, ct_ckpt_load(cfg->resume, &c)));   /* every rank reads it */
    CT_TRY(ct_dist_share_state(r->t->dist, r->st));   /* ... and takes rank 0's weights */
    CT_TRY(ct_train_state_to_device(r->st));   /* the loaded weights and optimizer state */
    r->prog = c.prog;
    if (r->prog.monitor != (int)cfg->monitor) {   /* another monitor: its best starts afresh */
        r->prog.monitor = (int)cfg->monitor;
        r->prog.best = NAN; r->prog.best_epoch = -1; r->prog.wait = 0;
    }
    if (r->best_p && r->prog.best_epoch < 0) CT_TRY(snapshot_best(r));   /* no best yet: the resumed weights */
    r->start_epoch = r->prog.epoch;
    r->start_step = r->prog.step;
    if (r->start_step) {
        snprintf(r->last_good, sizeof r->last_good, "%s (epoch %d, after batch %ld)", cfg->resume, r->start_epoch + 1, r->start_step);
        fprintf(r->out, "Resuming from %s: epoch %d, after batch %ld\n", cfg->resume, r->start_epoch + 1, r->start_step);
    } else {
        snprintf(r->last_good, sizeof r->last_good, "%s (end of epoch %d)", cfg->resume, r->start_epoch);
        fprintf(r->out, "Resuming from %s: %d epoch%s done\n", cfg->resume, r->start_epoch, r->start_epoch == 1 ? "" : "s");
    }
    return CT_OK;
}

/* Everything a run holds: the optimizer, the history, the best weights' room, where it
 * starts (a checkpoint's position or the beginning) and the CSV log. */
static ct_status fit_start(fit_run *r)
{
    const ct_fit_config *cfg = r->cfg;
    size_t ns = r->buffers ? r->buffers->numel : 0;
    r->hist = ct_calloc((size_t)cfg->epochs, sizeof *r->hist, "history");
    if (!r->hist) return CT_ENOMEM;
    if (cfg->early_stopping) {
        r->best_p = ct_malloc(r->params->numel * sizeof(float) + 1, "best weights");
        r->best_s = ct_malloc(ns * sizeof(float) + 1, "best weights");
        if (!r->best_p || !r->best_s) return CT_ENOMEM;
    }
    r->prog.monitor = (int)cfg->monitor;
    r->prog.best = NAN;
    r->prog.best_epoch = -1;
    if (cfg->resume) CT_TRY(fit_resume(r));
    else {
        CT_TRY(ct_dist_share_state(r->t->dist, r->st));   /* every rank starts from rank 0's weights */
        CT_TRY(ct_train_state_to_device(r->st));   /* the weights as initialised on the host */
    }
    r->epochs_done = r->start_epoch;
    r->steps_per_epoch = (r->t->n_train + cfg->batch - 1) / cfg->batch;
    if (cfg->csv && ct_dist_is_root(r->t->dist))
        CT_TRY(ct_dist_agree(r->t->dist, csv_open(&r->csv, cfg->csv, cfg->resume != NULL, r->start_epoch)));
    else if (cfg->csv)
        CT_TRY(ct_dist_agree(r->t->dist, CT_OK));   /* rank 0 alone writes the CSV */
    if (cfg->logdir && ct_dist_is_root(r->t->dist)) CT_TRY(ct_tfevents_open(&r->tb, cfg->logdir, r->start_epoch + 1));
    return CT_OK;
}

/* The progress a checkpoint taken after `step` batches of epoch e records. */
static void fit_mark(fit_run *r, int epoch, long step)
{
    r->prog.epoch = epoch; r->prog.step = step; r->prog.lr = r->lr;
    r->prog.sum_loss = r->sum_loss; r->prog.sum_correct = r->sum_correct; r->prog.seen = r->seen; r->prog.skipped = r->skipped;
}

/* One epoch's batches (from the checkpoint's batch when resuming inside it). *stopped: a
 * --stop-after-steps stop inside the epoch (1) or a signal after a step (2). */
static ct_status fit_train_epoch(fit_run *r, int e, int *stopped)
{
    const ct_task *t = r->t;
    const ct_fit_config *cfg = r->cfg;
    FILE *out = r->out;
    double last_draw = 0;
    long step = 0;
    r->t0 = ct_now();
    r->sum_loss = r->sum_correct = 0;
    r->seen = r->skipped = r->steps_run = 0;
    r->data_s = 0;
    r->lr = ct_sched_lr(&cfg->sched, e);
    if (e == r->start_epoch && r->start_step > 0) {   /* resumed inside this epoch: the order is the checkpoint's */
        r->sum_loss = r->prog.sum_loss; r->sum_correct = r->prog.sum_correct; r->seen = r->prog.seen; r->skipped = r->prog.skipped;
        step = r->start_step;
    } else if (t->begin_epoch) {
        t->begin_epoch(t->ctx, e);
    }
    r->trained = t->n_train - step * cfg->batch;
    for (long first = step * cfg->batch; first < t->n_train; first += cfg->batch, step++) {
        int b = (int)(t->n_train - first < cfg->batch ? t->n_train - first : cfg->batch), correct = 0, lo, hi;
        ct_dist_part(t->dist, b, &lo, &hi);   /* this rank's rows of the batch (all of them in one process) */
        double load_t0 = ct_now();
        ct_status loaded = t->load(t->ctx, CT_SPLIT_TRAIN, first, b);
        r->data_s += ct_now() - load_t0;   /* the step waits here for its data (not for the other ranks, below) */
        ct_status ls = ct_dist_agree(t->dist, loaded);
        if (ls != CT_OK) {   /* the data cannot be read: stop before this batch changes the weights */
            if (r->bar) fprintf(stderr, "\n");
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            return ct_fail(ls, "%s; training stopped at epoch %d, batch %ld. Last good checkpoint: %s", msg, e + 1, step + 1, last_good(r));
        }
        ct_train_state_zero_grad(r->st);
        float loss = t->forward(t->ctx, hi - lo, 1, &correct);
        CT_TRY(ct_dist_batch_loss(t->dist, &loss, &correct, hi - lo, b));   /* the whole batch's, on every rank */
        int bad = !isfinite(loss);
        if (bad && cfg->on_nan == CT_NAN_STOP) {
            if (r->bar) fprintf(stderr, "\n");
            return ct_fail(CT_ENUMERIC, "the loss became %s at epoch %d, batch %ld (samples %ld-%ld); training stopped. "
                           "Last good checkpoint: %s. Lower the learning rate (--lr), clip gradients (--clip-norm) "
                           "or skip such batches (--on-nan skip-batch)",
                           isnan(loss) ? "NaN" : "infinite", e + 1, step + 1, first, first + b - 1, last_good(r));
        }
        if (!bad) {
            t->backward(t->ctx, hi - lo);
            CT_TRY(ct_dist_batch_grad(t->dist, r->st, hi - lo, b));   /* the whole batch's gradient, on every rank */
            if (cfg->on_nan == CT_NAN_SKIP_BATCH) bad = !isfinite(ct_train_state_grad_norm(r->st));
        }
        if (bad) r->skipped++;
        else {
            ct_train_state_step(r->st, r->lr);
            CT_TRY(ct_dist_after_step(t->dist, r->st, (long)e * r->steps_per_epoch + step + 1));
            r->sum_loss += (double)loss * b; r->sum_correct += correct; r->seen += b;
        }
        r->steps_run++;
        r->steps_total++;
        double now = ct_now();
        if (r->bar && (now - last_draw > 0.1 || first + b >= t->n_train)) {
            progress(stderr, first + b, t->n_train, now - r->t0, r->seen ? r->sum_loss / r->seen : 0,
                     r->seen ? r->sum_correct / r->seen : 0);
            last_draw = now;
        }
        long global = (long)e * r->steps_per_epoch + step + 1;
        int last_batch = first + b >= t->n_train;
        int stop_here = cfg->stop_after_steps > 0 && global >= cfg->stop_after_steps;
        if (fit_signal(t->dist)) {   /* the step is done: stop here (after the last batch, the epoch's close stops it) */
            fit_mark(r, e, step + 1);
            *stopped = 2;
            return CT_OK;
        }
        if (!last_batch && cfg->checkpoint && ((cfg->checkpoint_every > 0 && global % cfg->checkpoint_every == 0) || stop_here)) {
            fit_mark(r, e, step + 1);
            CT_TRY(save_to(r, cfg->checkpoint));
        }
        if (!last_batch && stop_here) {
            if (r->bar) fprintf(stderr, "\n");
            fprintf(out, "Stopped after %ld batches (--stop-after-steps)%s%s\n", global,
                    cfg->checkpoint ? "; continue with --resume " : "", cfg->checkpoint ? cfg->checkpoint : "");
            *stopped = 1;
            return CT_OK;
        }
    }
    return CT_OK;
}

/* Seconds as the epoch line prints them: one decimal below 10 s (0.8s), whole seconds above (54s). */
static void print_seconds(FILE *out, double s)
{
    if (s < 9.95) fprintf(out, "%.1fs", s);
    else fprintf(out, "%.0fs", s);
}

/* The training time per batch, as Keras prints it: whole milliseconds, microseconds below 1 ms. */
static void print_step_time(FILE *out, double train_seconds, long steps)
{
    double ms = steps > 0 ? 1e3 * train_seconds / (double)steps : 0;
    if (ms >= 1 || steps == 0) fprintf(out, "%.0fms/step", ms);
    else fprintf(out, "%.0fus/step", 1e3 * ms);
}

/* Validation, the task's own metrics (val_eer) and the Keras line of epoch e, into *log.
 * A signal meanwhile (*interrupted = 1) abandons them: nothing is printed or recorded. */
static ct_status fit_close_epoch(fit_run *r, int e, ct_epoch_log *log, int *interrupted)
{
    const ct_task *t = r->t;
    FILE *out = r->out;
    double t1 = ct_now(), vl = 0, va = 0;
    if (t->n_val > 0) CT_TRY(ct_evaluate(t, CT_SPLIT_VAL, r->cfg->batch, &vl, &va));
    double t2 = ct_now();
    if (r->bar) fprintf(stderr, "\r\033[K");
    if ((*interrupted = fit_signal(r->t->dist) != 0)) return CT_OK;
    if (!isfinite(vl))
        return ct_fail(CT_ENUMERIC, "the validation loss became %s at the end of epoch %d; training stopped. Last good checkpoint: %s. "
                       "Lower the learning rate (--lr) or clip gradients (--clip-norm)", isnan(vl) ? "NaN" : "infinite", e + 1, last_good(r));
    *log = (ct_epoch_log){ .seconds = t2 - r->t0, .train_seconds = t1 - r->t0, .val_seconds = t2 - t1,
                           .loss = r->seen ? r->sum_loss / r->seen : NAN, .accuracy = r->seen ? r->sum_correct / r->seen : NAN,
                           .val_loss = vl, .val_accuracy = va, .val_eer = -1.0, .data_seconds = r->data_s };
    if (t->end_epoch) {
        t->end_epoch(t->ctx, e, log);
        log->seconds = ct_now() - r->t0;   /* the epoch's seconds include whatever end_epoch evaluated */
        if ((*interrupted = fit_signal(r->t->dist) != 0)) return CT_OK;
    }
    fprintf(out, " - ");
    print_seconds(out, log->seconds);
    fprintf(out, " - ");
    print_step_time(out, log->train_seconds, r->steps_run);
    fprintf(out, " - loss: %.4f - accuracy: %.4f", log->loss, log->accuracy);
    if (t->n_val > 0) fprintf(out, " - val_loss: %.4f - val_accuracy: %.4f", log->val_loss, log->val_accuracy);
    if (log->val_eer >= 0) fprintf(out, " - val_eer: %.4f", log->val_eer);
    fprintf(out, "\n");
    if (r->skipped) fprintf(out, "Skipped %ld batch%s of epoch %d: non-finite loss or gradient (--on-nan skip-batch)\n",
                            r->skipped, r->skipped == 1 ? "" : "es", e + 1);
    fflush(out);
    r->hist[e] = *log;
    r->epochs_done = e + 1;
    return CT_OK;
}

/* The monitored value (Keras's ModelCheckpoint(save_best_only) and EarlyStopping): *improved
 * when epoch e is the best so far, whose weights are then kept. */
static ct_status fit_monitor(fit_run *r, int e, const ct_epoch_log *log, int *improved)
{
    const ct_fit_config *cfg = r->cfg;
    *improved = 0;
    if (!cfg->save_best && !cfg->early_stopping) return CT_OK;
    double v = monitor_value(cfg->monitor, log), best = r->prog.best;
    if (cfg->monitor == CT_MONITOR_VAL_EER && v < 0)
        return ct_fail(CT_EINVAL, "--monitor val_eer: this run computes no val_eer (it needs a trial list, --trials)");
    *improved = isfinite(v) && (r->prog.best_epoch < 0 || (monitor_is_max(cfg->monitor) ? v > best : v < best));
    if (!*improved) {
        r->prog.wait++;
        if (cfg->save_best) fprintf(r->out, "Epoch %d: %s did not improve from %.5f\n", e + 1, ct_monitor_name(cfg->monitor), r->prog.best);
        return CT_OK;
    }
    if (cfg->save_best) {
        char prev[32];
        if (r->prog.best_epoch < 0) snprintf(prev, sizeof prev, "%s", monitor_is_max(cfg->monitor) ? "-inf" : "inf");
        else snprintf(prev, sizeof prev, "%.5f", best);
        fprintf(r->out, "Epoch %d: %s improved from %s to %.5f, saving model to %s\n", e + 1, ct_monitor_name(cfg->monitor),
                prev, v, cfg->save_best);
    }
    r->prog.best = v;
    r->prog.best_epoch = e;
    r->prog.wait = 0;
    return r->best_p ? snapshot_best(r) : CT_OK;
}

/* After epoch e: the CSV row, the checkpoints, TensorBoard's event and the on_epoch
 * callback (the checkpoints first: they are what a full disk must not cost); *stop when
 * early stopping or --stop-after-steps ends the run here. */
static ct_status fit_after_epoch(fit_run *r, int e, const ct_epoch_log *log, int improved, int *stop)
{
    const ct_fit_config *cfg = r->cfg;
    ct_epoch_report rep = { .epoch = e, .hist = r->hist, .lr = r->lr,
                            .samples_per_s = log->train_seconds > 0 ? r->trained / log->train_seconds : 0 };
    if (r->csv) CT_TRY(csv_row(r->csv, cfg->csv, e, log));
    r->sum_loss = r->sum_correct = 0;
    r->seen = r->skipped = 0;
    fit_mark(r, e + 1, 0);
    if (improved && cfg->save_best) CT_TRY(save_to(r, cfg->save_best));
    if (cfg->checkpoint) CT_TRY(save_to(r, cfg->checkpoint));
    const char *tags[CT_EPOCH_TAGS_MAX + CT_EPOCH_EXTRA_MAX];
    float values[CT_EPOCH_TAGS_MAX + CT_EPOCH_EXTRA_MAX];
    int n = r->tb.f ? ct_epoch_scalars(&rep, r->t->n_val > 0, tags, values) : 0, extra = 0;
    if (cfg->epoch_scalars) extra = cfg->epoch_scalars(cfg->epoch_scalars_ctx, &rep, tags + n, values + n, CT_EPOCH_EXTRA_MAX);
    if (r->tb.f) {
        n += extra;
        CT_TRY(ct_tfevents_scalars(&r->tb, e + 1, ct_tfevents_now(), tags, values, n));
        CT_TRY(ct_tfevents_flush(&r->tb));
    }
    if (cfg->on_epoch) CT_TRY(cfg->on_epoch(cfg->on_epoch_ctx, &rep));
    if (cfg->early_stopping && r->prog.wait >= cfg->early_stopping) {
        fprintf(r->out, "Epoch %d: early stopping (%s has not improved for %d epochs)\n", e + 1, ct_monitor_name(cfg->monitor),
                r->prog.wait);
        *stop = 1;
    } else if (cfg->stop_after_steps > 0 && (long)(e + 1) * r->steps_per_epoch >= cfg->stop_after_steps && e + 1 < cfg->epochs) {
        fprintf(r->out, "Stopped after %ld batches (--stop-after-steps)%s%s\n", (long)(e + 1) * r->steps_per_epoch,
                cfg->checkpoint ? "; continue with --resume " : "", cfg->checkpoint ? cfg->checkpoint : "");
        *stop = 1;
    }
    return CT_OK;
}

/* A signal stopped the run at r->prog's position: its checkpoint, one line saying where
 * and how to resume, and CT_EINTR. */
static ct_status fit_interrupted(fit_run *r)
{
    const ct_fit_config *cfg = r->cfg;
    const char *path = cfg->checkpoint ? cfg->checkpoint : cfg->interrupt_checkpoint;
    const char *name = ct_interrupt_name(ct_interrupt_signal());
    char where[128];
    if (r->prog.step) snprintf(where, sizeof where, "after batch %ld of epoch %d", r->prog.step, r->prog.epoch + 1);
    else snprintf(where, sizeof where, "at the end of epoch %d", r->prog.epoch);
    if (r->bar) fprintf(stderr, "\n");
    if (r->steps_total == 0) {   /* nothing trained yet (the signal came while loading): nothing new to save */
        if (cfg->resume && cfg->command)
            fprintf(r->out, "Interrupted by %s before the first batch; %s is unchanged; resume with: %s --resume %s\n", name,
                    cfg->resume, cfg->command, cfg->resume);
        else fprintf(r->out, "Interrupted by %s before the first batch; nothing trained, nothing written\n", name);
    } else if (path && cfg->meta && r->t->save_state) {
        ct_status st = save_to(r, path);
        if (st != CT_OK) {
            fprintf(r->out, "Interrupted by %s %s; the checkpoint could not be written\n", name, where);
            fflush(r->out);
            return st;
        }
        if (cfg->command) fprintf(r->out, "Interrupted by %s %s; checkpoint written to %s; resume with: %s --resume %s\n",
                                  name, where, path, cfg->command, path);
        else fprintf(r->out, "Interrupted by %s %s; checkpoint written to %s\n", name, where, path);
    } else {
        fprintf(r->out, "Interrupted by %s %s; no checkpoint written\n", name, where);
    }
    fflush(r->out);
    return ct_fail(CT_EINTR, "interrupted by %s", name);
}

ct_status ct_fit(const ct_task *t, const ct_fit_config *cfg, ct_epoch_log *hist_out, FILE *out)
{
    CT_TRY(fit_check(t, cfg));
    CT_TRY(ct_dist_fit_check(t->dist, t, cfg->batch,
                             ct_dist_config_hash(t, cfg->epochs, cfg->batch, &cfg->optim, &cfg->sched, cfg->meta)));
    fit_run r;
    memset(&r, 0, sizeof r);
    r.t = t;
    r.cfg = cfg;
    r.out = out;
    r.st = t->state;
    r.params = t->state->params->host;
    r.buffers = t->state->buffers ? t->state->buffers->host : NULL;
    CT_TRY(ct_train_state_begin(r.st, &cfg->optim));
    ct_status st = fit_start(&r);
    int stop = st != CT_OK;
    r.bar = cfg->progress < 0 ? isatty(STDERR_FILENO) : cfg->progress;
    if (st != CT_OK) {
        /* nothing trained */
    } else if (r.start_epoch >= cfg->epochs) {
        fprintf(out, "%s already holds %d epochs (--epochs %d): nothing to train; raise --epochs to continue\n",
                cfg->resume, r.start_epoch, cfg->epochs);
        stop = 1;
    } else if (cfg->early_stopping && r.prog.wait >= cfg->early_stopping) {
        fprintf(out, "Early stopping had already stopped this run (%s has not improved for %d epochs)\n",
                ct_monitor_name(cfg->monitor), r.prog.wait);
        stop = 1;
    } else {
        fprintf(out, "Train on %ld samples, validate on %ld samples\n", t->n_train, t->n_val);
    }
    for (int e = r.start_epoch; e < cfg->epochs && !stop; e++) {
        if (fit_signal(r.t->dist)) {   /* between epochs (or before the first batch): r.prog is this position */
            st = fit_interrupted(&r);
            break;
        }
        fprintf(out, "Epoch %d/%d\n", e + 1, cfg->epochs);
        fflush(out);
        ct_epoch_log log;
        int improved = 0, interrupted = 0;
        st = fit_train_epoch(&r, e, &stop);
        if (st == CT_OK && !stop) st = fit_close_epoch(&r, e, &log, &interrupted);
        if (st == CT_OK && interrupted) fit_mark(&r, e, r.steps_per_epoch);   /* after the last batch: validate again on resume */
        if (st == CT_OK && (interrupted || stop == 2)) {
            st = fit_interrupted(&r);
            break;
        }
        if (st == CT_OK && !stop) st = fit_monitor(&r, e, &log, &improved);
        if (st == CT_OK && !stop) st = fit_after_epoch(&r, e, &log, improved, &stop);
        if (st != CT_OK) break;
    }
    if (st == CT_OK && cfg->early_stopping && r.prog.best_epoch >= 0 && (st = restore_best(&r)) == CT_OK) {
        fprintf(out, "Restoring model weights from the end of the best epoch: %d (%s %.4f)\n", r.prog.best_epoch + 1,
                ct_monitor_name(cfg->monitor), r.prog.best);
    }
    if (st == CT_OK) st = ct_train_state_to_host(r.st);   /* the caller reads the trained weights there */
    fflush(out);
    if (hist_out && r.hist) memcpy(hist_out, r.hist, (size_t)r.epochs_done * sizeof *r.hist);
    if (r.csv) fclose(r.csv);
    ct_tfevents_close(&r.tb);
    ct_train_state_end(r.st);
    free(r.hist); free(r.best_p); free(r.best_s);
    return st;
}
