/* run_dir.c - a run's directory and its curves (see run_dir.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "io/files.h"
#include "io/svg.h"
#include "train/run_dir.h"

ct_status ct_run_dir_path(char *out, size_t cap, const char *dir, const char *name)
{
    if (snprintf(out, cap, "%s/%s", dir, name) >= (int)cap) return ct_fail(CT_EINVAL, "%s/%s: path too long", dir, name);
    return CT_OK;
}

ct_status ct_run_dir_check(const char *dir, int continuing)
{
    char cfg[4400];
    if (!dir) return CT_OK;
    if (!*dir) return ct_fail(CT_EINVAL, "--run-dir needs a directory name");
    CT_TRY(ct_run_dir_path(cfg, sizeof cfg, dir, "config.yaml"));
    if (!continuing && access(cfg, F_OK) == 0)
        return ct_fail(CT_EINVAL, "--run-dir %s already holds a run (%s): choose another directory, or continue that run "
                       "with --resume %s/checkpoint.h5", dir, cfg, dir);
    return CT_OK;
}

ct_status ct_run_dir_create(char *out, size_t cap, const char *dir, const char *model, int continuing)
{
    if (dir) {
        CT_TRY(ct_run_dir_check(dir, continuing));
        CT_TRY(ct_mkdirs(dir));
        if (snprintf(out, cap, "%s", dir) >= (int)cap) return ct_fail(CT_EINVAL, "--run-dir %s: path too long", dir);
        return CT_OK;
    }
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    if (ct_mkdirs("runs") != CT_OK)
        return ct_fail(CT_EIO, "%s: choose the run directory with --run-dir DIR, or train without one (--no-run-dir)", ct_last_error());
    for (int k = 1; k < 1000; k++) {   /* a new directory: -2, -3, ... when runs start within the same second */
        int len = k == 1 ? snprintf(out, cap, "runs/%s-%s", model, stamp) : snprintf(out, cap, "runs/%s-%s-%d", model, stamp, k);
        if (len >= (int)cap) return ct_fail(CT_EINVAL, "run directory name too long");
        if (mkdir(out, 0777) == 0) return CT_OK;
        if (errno != EEXIST)
            return ct_fail(CT_EIO, "cannot create the run directory %s (%s); choose one with --run-dir DIR, or train without one "
                           "(--no-run-dir)", out, strerror(errno));
    }
    return ct_fail(CT_EIO, "runs/%s-%s: no free run directory name; choose one with --run-dir DIR", model, stamp);
}

ct_status ct_curves_write(const char *path, const char *title, const ct_epoch_log *hist, int n, int has_val)
{
    double *x = ct_malloc(6 * ((size_t)n + 1) * sizeof(double), "curves");
    if (!x) return CT_ENOMEM;
    double *loss = x + n + 1, *vloss = loss + n + 1, *acc = vloss + n + 1, *vacc = acc + n + 1, *eer = vacc + n + 1;
    int has_eer = 0;
    for (int e = 0; e < n; e++) {
        x[e] = e + 1;
        loss[e] = hist[e].loss;
        vloss[e] = hist[e].val_loss;
        acc[e] = hist[e].accuracy;
        vacc[e] = hist[e].val_accuracy;
        eer[e] = hist[e].val_eer >= 0 ? hist[e].val_eer : NAN;   /* not computed: a gap */
        if (hist[e].val_eer >= 0) has_eer = 1;
    }
    ct_svg_series ls[2] = { { "loss", x, loss, n, 0, 0 }, { "val_loss", x, vloss, n, 1, 1 } };
    ct_svg_series as[2] = { { "accuracy", x, acc, n, 0, 0 }, { "val_accuracy", x, vacc, n, 1, 1 } };
    ct_svg_series es[1] = { { "val_eer", x, eer, n, 1, 2 } };
    ct_svg_chart charts[3] = {
        { "Loss", "epoch", "loss", ls, has_val ? 2 : 1, 1, 0 },
        { "Accuracy", "epoch", "accuracy", as, has_val ? 2 : 1, 1, 0 },
        { "Validation equal error rate", "epoch", "EER", es, 1, 1, 1 },
    };
    FILE *f;
    char tmp[4200];
    ct_status st = ct_file_begin(&f, tmp, sizeof tmp, path, "the training curves");
    if (st == CT_OK) {
        ct_svg_render(f, title, charts, has_eer ? 3 : 2);
        st = ct_file_commit_unsynced(f, tmp, path, "the training curves");
    }
    free(x);
    return st;
}
