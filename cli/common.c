/* common.c - what the commands share (see common.h): opening the device of a
 * training run, --resume's checkpoint, and the parsing and help of options
 * from their tables (catalog/options.h): the models' and the shared training
 * options (catalog/train_opts.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/common.h"
#include "core/threads.h"
#include "cuda/device.h"

/* The process's MPI rank and job (one rank without mpirun), set up by main (cli/ctrain.c). */
ct_dist cli_dist = { .size = 1, .local_size = 1, .timeout_s = CT_DIST_TIMEOUT_DEFAULT, .check_every = 1 };
/* argv[0] as the program was run, for the command lines ctrain prints and records. */
const char *cli_program = "ctrain";

ct_status cli_finish_train_opts(cli_train_opts *o, ct_fit_config *fit, ct_optim_kind default_opt)
{
    memset(fit, 0, sizeof *fit);
    /* A resumed run computes what the uninterrupted one would: on a GPU it keeps the checkpoint's
     * precision and algorithm choice (without --deterministic, cuDNN may pick convolution
     * algorithms that sum in a different order every run); on the CPU they mean nothing. */
    int gpu_index = -1;
    CT_TRY(ct_gpu_parse_device(o->device, &gpu_index));
    if (gpu_index >= 0) {
        o->tf32 |= o->ckpt_tf32;
        o->deterministic |= o->ckpt_deterministic;
    }
    CT_TRY(cli_open_device(o->device, o->tf32, o->deterministic, o->precision, &o->be));
    CT_TRY(ct_train_opts_fit(o, fit, default_opt));
    ct_threads_set(o->threads);
    return CT_OK;
}

/* With --resume anywhere on the command line, read the checkpoint's configuration
 * (it becomes the defaults; the flags parsed afterwards override it). */
ct_status cli_resume_meta(int argc, char **argv, const char *model, ct_ckpt_meta *meta, const char **path)
{
    *path = NULL;
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *file = !strncmp(argv[i], "--resume=", 9) ? argv[i] + 9
                         : !strcmp(argv[i], "--resume") && i + 1 < argc ? argv[i + 1] : NULL;
        if (!file) continue;
        CT_TRY(ct_ckpt_read_meta(file, meta));
        if (strcmp(meta->model, model) != 0)
            return ct_fail(CT_EINVAL, "%s is a checkpoint of model %s, not %s: resume it with `ctrain train %s --resume %s`",
                           file, meta->model, model, meta->model, file);
        *path = file;
    }
    return CT_OK;
}

/* ---- the help of options, from their tables (cli/args.c parses them) ---- */

static int takes(const ct_opt *o, unsigned cmd) { return cmd == 0 || (o->cmds & cmd); }

void cli_help_line(FILE *out, const char *left, const char *text)
{
    int n = fprintf(out, "  %-21s ", left);
    for (const char *p = text; *p; p++) {
        fputc(*p, out);
        if (*p == '\n') fprintf(out, "%*s", n, "");
    }
    fputc('\n', out);
}

void cli_opt_help(FILE *out, const ct_opt *opts, unsigned cmd, const void *dflt)
{
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &opts[i];
        if (!takes(o, cmd)) continue;
        if (o->type == CT_OPT_HEADING) { fprintf(out, "%s\n", o->flag); continue; }
        if (!o->help || !o->flag) continue;
        char left[64], text[1400], def[1200] = "";
        if (o->type == CT_OPT_BOOL) snprintf(left, sizeof left, "%s%s%s", o->flag, o->off_flag ? ", " : "", o->off_flag ? o->off_flag : "");
        else snprintf(left, sizeof left, "%s %s", o->flag, o->arg);
        /* a switch's default goes without saying; a value out of range is "not given" */
        int show = dflt && o->type != CT_OPT_BOOL && o->type != CT_OPT_NOTE && !strstr(o->help, "(default");
        if (!show || !ct_opt_format(o, dflt, def, sizeof def)) def[0] = '\0';
        else if (o->type == CT_OPT_FLOAT) snprintf(def, sizeof def, "%g", (double)*(const float *)((const char *)dflt + o->off));
        snprintf(text, sizeof text, def[0] ? "%s (default %.60s)" : "%s", o->help, def);
        cli_help_line(out, left, text);
    }
}

/* ---- the command line, again ---- */

/* Appends word to buf, quoted for a POSIX shell when it needs it. */
static void append_word(char *buf, size_t cap, const char *word)
{
    size_t k = strlen(buf);
    int plain = word[0] != '\0';
    for (const char *p = word; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%", *p)) plain = 0;
    if (k && k + 1 < cap) buf[k++] = ' ';
    if (plain) { snprintf(buf + k, cap - k, "%s", word); return; }
    if (k + 1 < cap) buf[k++] = '\'';
    for (const char *p = word; *p && k + 5 < cap; p++) {
        if (*p == '\'') { memcpy(buf + k, "'\\''", 4); k += 4; }
        else buf[k++] = *p;
    }
    if (k + 1 < cap) buf[k++] = '\'';
    buf[k < cap ? k : cap - 1] = '\0';
}

void cli_command_line(char *buf, size_t cap, const char *command, int argc, char **argv, const char *drop)
{
    buf[0] = '\0';
    append_word(buf, cap, cli_program);
    append_word(buf, cap, command);
    size_t nd = drop ? strlen(drop) : 0;
    for (int i = 0; i < argc; i++) {
        if (drop && !strcmp(argv[i], "--")) drop = NULL;   /* operands from here on */
        if (drop && !strcmp(argv[i], drop)) { i++; continue; }
        if (drop && !strncmp(argv[i], drop, nd) && argv[i][nd] == '=') continue;
        append_word(buf, cap, argv[i]);
    }
}

void cli_interrupt_checkpoint(char *buf, size_t cap, const char *model, const char *out)
{
    if (!out) { snprintf(buf, cap, "ctrain-%s-interrupted.h5", model); return; }
    size_t n = strlen(out);
    if (n > 3 && !strcmp(out + n - 3, ".h5")) n -= 3;
    snprintf(buf, cap, "%.*s-interrupted.h5", (int)n, out);
}
