/* run_files.c - the run directory of one `ctrain train` (see run_files.h). */
#define _XOPEN_SOURCE 700   /* realpath */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/config.h"
#include "cli/run_files.h"
#include "io/files.h"
#include "train/run_dir.h"

/* Whether the checkpoint `resume` lies in the directory `dir`. */
static int same_folder(const char *resume, const char *dir)
{
    char a[4096], b[4096], c[4096];
    snprintf(c, sizeof c, "%s", resume);
    if (!realpath(dirname(c), a) || !realpath(dir, b)) return 0;
    return !strcmp(a, b);
}

static ct_status redraw_curves(void *ctx, const ct_epoch_report *rep)
{
    run_files *r = ctx;
    return ct_curves_write(r->curves, r->title, rep->hist, rep->epoch + 1, r->has_val);
}

/* Which run directory (before anything is loaded, so that a directory holding another run is
 * refused at once): --run-dir, the directory of a --resume checkpoint that lies in a run
 * directory (the run goes on there), or none yet (a new runs/MODEL-DATE-TIME). */
ct_status cli_run_files_choose(run_files *r, const cli_train_opts *o)
{
    r->chosen = o->run_dir;
    if (o->no_run_dir) return CT_OK;
    if (o->resume && !r->chosen) {
        char copy[4096], marker[4200];
        snprintf(copy, sizeof copy, "%s", o->resume);
        snprintf(r->resume_dir, sizeof r->resume_dir, "%s", dirname(copy));
        snprintf(marker, sizeof marker, "%s/config.yaml", r->resume_dir);
        if (access(marker, F_OK) == 0) r->chosen = r->resume_dir;
    }
    r->continuing = o->resume && r->chosen && same_folder(o->resume, r->chosen);
    return ct_run_dir_check(r->chosen, r->continuing);
}

/* The run directory and what it holds before training starts (after the data and the
 * network are ready: a run that cannot start leaves nothing behind); the outputs not named
 * explicitly default into it. TensorBoard's folder for the device, with or without one. */
ct_status cli_run_files_open(run_files *r, const ct_model_descriptor *d, const void *cfg, cli_train_opts *o, ct_fit_config *fit,
                             int argc, char **argv)
{
    const char *logroot = o->logdir;
    char dev[32], path[4400];
    if (!o->no_run_dir) {
        CT_TRY(ct_run_dir_create(r->dir, sizeof r->dir, r->chosen, d->name, r->continuing));
        if (!o->out) { CT_TRY(ct_run_dir_path(r->out, sizeof r->out, r->dir, "weights.h5")); o->out = r->out; }
        if (!o->checkpoint) {
            CT_TRY(ct_run_dir_path(r->checkpoint, sizeof r->checkpoint, r->dir, "checkpoint.h5"));
            o->checkpoint = fit->checkpoint = r->checkpoint;
        }
        if (!o->csv) { CT_TRY(ct_run_dir_path(r->csv, sizeof r->csv, r->dir, "log.csv")); o->csv = fit->csv = r->csv; }
        if (!logroot) { CT_TRY(ct_run_dir_path(r->tensorboard, sizeof r->tensorboard, r->dir, "tensorboard")); logroot = r->tensorboard; }
        char comment[8400];
        snprintf(comment, sizeof comment, "the effective configuration of a `ctrain train %s` run (ctrain %s, commit %s);\n"
                 "repeat it with: ctrain train %s --config %s/config.yaml", d->name, CTRAIN_VERSION, cli_commit(), d->name, r->dir);
        CT_TRY(ct_run_dir_path(path, sizeof path, r->dir, "config.yaml"));
        CT_TRY(cli_train_config_write(path, comment, o, d, cfg));
        static char cmd[16384];
        char version[256], *header = NULL;
        cli_command_line(cmd, sizeof cmd - 1, "train", argc + 1, argv - 1, NULL);   /* argv[-1] is the model's name */
        strcat(cmd, "\n");
        size_t header_len = 0;
        FILE *hf = open_memstream(&header, &header_len);
        if (hf) { cli_print_header(hf, o->threads); fclose(hf); }
        snprintf(version, sizeof version, "ctrain %s\ncommit %s\n", CTRAIN_VERSION, cli_commit());
        ct_status st = header ? CT_OK : ct_fail(CT_ENOMEM, "out of memory");
        if (st == CT_OK) st = ct_run_dir_path(path, sizeof path, r->dir, "command.txt");
        if (st == CT_OK) st = ct_file_write_text(path, cmd, "the command line");
        if (st == CT_OK) st = ct_run_dir_path(path, sizeof path, r->dir, "version.txt");
        if (st == CT_OK) st = ct_file_write_text(path, version, "the version");
        if (st == CT_OK) st = ct_run_dir_path(path, sizeof path, r->dir, "header.txt");
        if (st == CT_OK) st = ct_file_write_text(path, header, "the hardware header");
        free(header);
        CT_TRY(st);
        CT_TRY(ct_run_dir_path(r->curves, sizeof r->curves, r->dir, "curves.svg"));
        snprintf(r->title, sizeof r->title, "ctrain train %s: %s", d->name, r->dir);
        fit->on_epoch = redraw_curves;
        fit->on_epoch_ctx = r;
    }
    if (logroot) {
        cli_device_folder(o->device, dev, sizeof dev);
        if (snprintf(r->logdir, sizeof r->logdir, "%s/%s", logroot, dev) >= (int)sizeof r->logdir)
            return ct_fail(CT_EINVAL, "--logdir %s: path too long", logroot);
        fit->logdir = r->logdir;
    }
    return CT_OK;
}

