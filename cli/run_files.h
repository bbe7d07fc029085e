/* run_files.h - the run directory of one `ctrain train` (train/run_dir.h makes the folder):
 * which one, and what goes in it before training starts (the effective configuration,
 * the command line, the version, the hardware header; the defaults of --out,
 * --checkpoint, --csv and --logdir) and after every epoch (the curves). */
#ifndef CT_CLI_RUN_FILES_H
#define CT_CLI_RUN_FILES_H
#include "cli/common.h"

typedef struct {
    char dir[4096];
    char out[4400], checkpoint[4400], csv[4400], tensorboard[4400], logdir[4500], curves[4400];
    char title[4200];
    int has_val;                 /* the task validates: the curves draw val_loss and val_accuracy */
    const char *chosen;          /* --run-dir, the resumed checkpoint's run directory, or NULL: a new one */
    char resume_dir[4096];
    int continuing;              /* chosen is the resumed checkpoint's directory */
} run_files;

/* Which run directory, before anything is loaded (a directory holding another run is
 * refused at once): --run-dir, the directory of a --resume checkpoint that lies in a run
 * directory (the run goes on there), or none yet (a new runs/MODEL-DATE-TIME). */
ct_status cli_run_files_choose(run_files *r, const cli_train_opts *o);
/* The run directory and what it holds before training starts (call it once the data and
 * the network are ready: a run that cannot start leaves nothing behind); the outputs not
 * named explicitly default into it (o and fit are updated), and fit's on_epoch redraws the
 * curves. TensorBoard's folder for the device, with or without a run directory. argv is
 * `ctrain train MODEL`'s after the model's name. */
ct_status cli_run_files_open(run_files *r, const ct_model_descriptor *d, const void *cfg, cli_train_opts *o, ct_fit_config *fit,
                             int argc, char **argv);

#endif
