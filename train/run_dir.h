/* run_dir.h - a training run's directory: everything needed to watch, repeat
 * and continue one run, in one place (`ctrain train --run-dir DIR`, by default
 * runs/MODEL-YYYYMMDD-HHMMSS):
 *
 *   config.yaml      the effective configuration: every setting that decides the result,
 *                    as `ctrain train MODEL --config` reads it (run it again with
 *                    `ctrain train MODEL --config DIR/config.yaml`)
 *   command.txt      the command line as given
 *   version.txt      ctrain's version and the git commit it was built from
 *   header.txt       the hardware and software header of the log
 *   log.csv          one row per epoch                      (unless --csv names another file)
 *   checkpoint.h5    the checkpoint after every epoch       (unless --checkpoint)
 *   weights.h5       the trained weights                    (unless --out)
 *   tensorboard/cpu  TensorBoard's event files              (unless --logdir; gpu/ on a GPU)
 *   curves.svg       loss and accuracy per epoch, redrawn after every epoch
 *
 * Every file is replaced atomically (io/files.h, io/h5atomic.h). */
#ifndef CT_RUN_DIR_H
#define CT_RUN_DIR_H
#include "core/error.h"
#include "train/train.h"

/* A directory for a new run. With `dir` given: that directory, created if missing and
 * refused if it already holds another run's config.yaml (unless `continuing`: a run
 * resumed from a checkpoint there). Without: runs/MODEL-YYYYMMDD-HHMMSS in the working
 * directory (local time), with -2, -3, ... appended when that exists. The path goes to
 * out[cap]. */
ct_status ct_run_dir_create(char *out, size_t cap, const char *dir, const char *model, int continuing);
/* The check of ct_run_dir_create alone, to refuse a directory before a run loads its data
 * (dir NULL: nothing to check). */
ct_status ct_run_dir_check(const char *dir, int continuing);
/* out[cap] = "DIR/name". */
ct_status ct_run_dir_path(char *out, size_t cap, const char *dir, const char *name);
/* The training curves of epochs [0, n) as an SVG picture: loss and accuracy (training solid,
 * validation dashed when has_val), and the validation EER when the run computes it. */
ct_status ct_curves_write(const char *path, const char *title, const ct_epoch_log *hist, int n, int has_val);

#endif
