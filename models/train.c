/* train.c - the shared training loop and Keras-style log (see train.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "models/train.h"

double ct_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

void ct_evaluate(const ct_task *t, int split, int batch, double *loss, double *accuracy)
{
    long n = split == CT_SPLIT_TRAIN ? t->n_train : t->n_val;
    double sl = 0, sc = 0;
    for (long first = 0; first < n; first += batch) {
        int b = (int)(n - first < batch ? n - first : batch), correct = 0;
        t->load(t->ctx, split, first, b);
        sl += (double)t->forward(t->ctx, b, 0, &correct) * b;
        sc += correct;
    }
    *loss = n ? sl / n : 0;
    *accuracy = n ? sc / n : 0;
}

ct_status ct_fit(const ct_task *t, const ct_fit_config *cfg, ct_epoch_log *hist, FILE *out)
{
    if (cfg->epochs < 1 || cfg->batch < 1) return ct_fail(CT_EINVAL, "--epochs and --batch must be at least 1");
    if (t->n_train < 1) return ct_fail(CT_EINVAL, "no training samples");
    ct_optim opt;
    CT_TRY(ct_optim_init(&opt, &cfg->optim, t->params->numel));
    int bar = cfg->progress < 0 ? isatty(fileno(out)) : cfg->progress;
    fprintf(out, "Train on %ld samples, validate on %ld samples\n", t->n_train, t->n_val);
    ct_status st = CT_OK;
    for (int e = 0; e < cfg->epochs && st == CT_OK; e++) {
        fprintf(out, "Epoch %d/%d\n", e + 1, cfg->epochs);
        fflush(out);
        double t0 = ct_now(), sl = 0, sc = 0, last_draw = 0;
        float lr = ct_sched_lr(&cfg->sched, e);
        if (t->begin_epoch) t->begin_epoch(t->ctx, e);
        long seen = 0, step = 0;
        for (long first = 0; first < t->n_train; first += cfg->batch, step++) {
            int b = (int)(t->n_train - first < cfg->batch ? t->n_train - first : cfg->batch), correct = 0;
            t->load(t->ctx, CT_SPLIT_TRAIN, first, b);
            ct_params_zero_grad(t->params);
            float loss = t->forward(t->ctx, b, 1, &correct);
            if (!isfinite(loss)) {
                if (bar) fprintf(out, "\n");
                st = ct_fail(CT_ENUMERIC, "the loss became %s at epoch %d, batch %ld (samples %ld-%ld); training stopped. "
                             "Lower the learning rate (--lr) or clip gradients (--clip-norm)",
                             isnan(loss) ? "NaN" : "infinite", e + 1, step + 1, first, first + b - 1);
                break;
            }
            t->backward(t->ctx, b);
            ct_optim_step(&opt, t->params->data, t->params->grad, lr);
            sl += (double)loss * b; sc += correct; seen += b;
            double now = ct_now();
            if (bar && (now - last_draw > 0.1 || seen == t->n_train)) {
                progress(out, seen, t->n_train, now - t0, sl / seen, sc / seen);
                last_draw = now;
            }
        }
        if (st != CT_OK) break;
        double t1 = ct_now(), vl = 0, va = 0;
        if (t->n_val > 0) ct_evaluate(t, CT_SPLIT_VAL, cfg->batch, &vl, &va);
        double t2 = ct_now();
        if (bar) fprintf(out, "\r\033[K");
        if (!isfinite(vl)) {
            st = ct_fail(CT_ENUMERIC, "the validation loss became %s at the end of epoch %d; training stopped. "
                         "Lower the learning rate (--lr) or clip gradients (--clip-norm)", isnan(vl) ? "NaN" : "infinite", e + 1);
            break;
        }
        ct_epoch_log log = { t2 - t0, t1 - t0, t2 - t1, sl / seen, sc / seen, vl, va, -1.0 };
        if (t->end_epoch) {
            t->end_epoch(t->ctx, e, &log);
            log.seconds = ct_now() - t0;   /* the epoch's seconds include whatever end_epoch evaluated */
        }
        fprintf(out, " - %.0fs - loss: %.4f - accuracy: %.4f", log.seconds, log.loss, log.accuracy);
        if (t->n_val > 0) fprintf(out, " - val_loss: %.4f - val_accuracy: %.4f", log.val_loss, log.val_accuracy);
        if (log.val_eer >= 0) fprintf(out, " - val_eer: %.4f", log.val_eer);
        fprintf(out, "\n");
        fflush(out);
        if (hist) hist[e] = log;
    }
    ct_optim_free(&opt);
    return st;
}
