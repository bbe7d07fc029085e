/* export.c - `ctrain export` and `ctrain import`: a model's weights to and from
 * the files of Keras 2 (`model.save_weights("w.h5")`) and PyTorch (a
 * state_dict, one HDF5 dataset per tensor), for every model in the table:
 *
 *   ctrain export --format keras|torch RUN.h5 --out OUT.h5   (RUN.h5: a checkpoint or weights file)
 *   ctrain import --format keras|torch IN.h5 --out OUT.h5 [--model NAME] [the model's options]
 *
 * The output used to be the second operand (`export --format keras RUN.h5 OUT.h5`);
 * that still works, with a note saying to write --out.
 *
 * The layouts are the models' (catalog/export.h: Keras's kernels, its channels-last
 * flatten, PyTorch's names); this file reads the command line and calls.
 * Exit status: 0 written, 2 bad options, 1 a failure (its one-line message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/common.h"
#include "catalog/export.h"

static int usage_error(const char *cmd, const char *msg)
{
    fprintf(stderr, "ctrain %s: %s (see ctrain %s --help)\n", cmd, msg, cmd);
    return 2;
}

/* The models' options that `cmd` (CT_CMD_EXPORT or CT_CMD_IMPORT) takes, per model. */
static void model_options_help(unsigned cmd)
{
    for (int i = 0; ct_models[i]; i++) {
        const ct_model_descriptor *d = ct_models[i];
        int any = 0;
        for (const ct_opt *o = d->opts; o->type != CT_OPT_END; o++) any |= o->type != CT_OPT_HEADING && (o->cmds & cmd);
        if (!any) continue;
        printf("%s:\n", d->name);
        void *dflt = ct_calloc(1, d->cfg_size, "configuration");
        if (dflt) d->defaults(dflt);
        cli_opt_help(stdout, d->opts, cmd, dflt);
        free(dflt);
    }
}

static void help(int import)
{
    char names[256];
    ct_model_names(names, sizeof names, 0);
    if (import)
        printf("usage: ctrain import --format keras|torch IN.h5 --out OUT.h5 [--model NAME] [options]\n\n"
               "Reads a Keras 2 save_weights file or a PyTorch state_dict written as HDF5 (one dataset per\n"
               "tensor, as `ctrain export --format torch` writes) into a ctrain weights file. A file written\n"
               "by `ctrain export` records its model, so no option is needed; for another's, the sizes are\n"
               "read from the tensors' shapes where they can be, and given below where not (a size given\n"
               "that contradicts the file is refused). Keras layers are matched in order, PyTorch tensors\n"
               "by name. Models: %s.\n\n", names);
    else
        printf("usage: ctrain export --format keras|torch RUN.h5 --out OUT.h5\n\n"
               "Writes the weights of a ctrain checkpoint or weights file (any model: the file names it) as\n"
               "  keras  a Keras 2 save_weights file (load it with model.load_weights into the model built as\n"
               "         docs/checkpoints.md describes: channels-last, batchnorm epsilon 1e-5)\n"
               "  torch  a PyTorch state_dict: one dataset per tensor, named as in the module\n"
               "         (load with {k: torch.from_numpy(f[k][()]) for k in f})\n"
               "Both record the model's description, so `ctrain import` reads them back without options.\n\n");
    printf("options of the models, where a file does not record what they give:\n");
    model_options_help(import ? CT_CMD_IMPORT : CT_CMD_EXPORT);
    printf("The name and layout mapping per model is in docs/checkpoints.md.\n");
}

/* Argv -> --format, --model, --out, the input (and the old second operand), and the other
 * options (kept for the model's table). */
typedef struct {
    const char *format, *model, *out, *pos[2];
    int npos, nrest;
    char *rest[64];
} file_args;

static int split_args(const char *cmd, int argc, char **argv, file_args *f, int *help_asked)
{
    memset(f, 0, sizeof *f);
    ct_status st = CT_OK;
    ct_args a = { .argc = argc, .argv = argv };
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) { *help_asked = 1; return 0; }
        if (ct_args_end(&a) || ct_args_str(&a, "--format", &f->format, &st) || ct_args_str(&a, "--out", &f->out, &st)
            || (!strcmp(cmd, "import") && ct_args_str(&a, "--model", &f->model, &st)))
            continue;
        const char *word = argv[a.i];
        if (ct_args_operand(&a, &f->pos[f->npos < 2 ? f->npos : 1])) {
            if (++f->npos > 2) return usage_error(cmd, "too many arguments: give the input file, and the output with --out");
            continue;
        }
        if (strchr(word, '=') && f->nrest + 1 <= 64) {   /* a model's option as --name=VALUE */
            f->rest[f->nrest++] = argv[a.i++];
        } else if (a.i + 1 < argc && f->nrest + 2 <= 64) {   /* a model's option and its value */
            f->rest[f->nrest++] = argv[a.i++];
            f->rest[f->nrest++] = argv[a.i++];
        } else {
            char see[64];
            snprintf(see, sizeof see, "ctrain %s --help", cmd);
            st = ct_args_unknown(&a, see);
        }
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain %s: %s\n", cmd, ct_last_error()); return 2; }
    if (f->npos == 2 && f->out) return usage_error(cmd, "the output is given twice: by --out and as a second file");
    if (f->npos == 2) {   /* the old form: IN OUT */
        f->out = f->pos[1];
        f->npos = 1;
        ct_args_note(cmd, "the output as a second file is the old form: write it with --out OUT.h5");
    }
    if (!f->format || (strcmp(f->format, "keras") && strcmp(f->format, "torch")))
        return usage_error(cmd, "--format keras or --format torch is required");
    return 0;
}

/* The model's configuration: its defaults, then the options kept in f. */
static int model_config(const char *cmd, unsigned which, const ct_model_descriptor *d, const file_args *f, void *cfg,
                        unsigned long long *given)
{
    d->defaults(cfg);
    ct_args a = { .argc = f->nrest, .argv = (char **)f->rest };
    ct_status st = CT_OK;
    while (a.i < a.argc && st == CT_OK) {
        if (cli_opt_parse(&a, d->opts, which, cfg, given, &st)) continue;
        fprintf(stderr, "ctrain %s: %s is not an option of %s here (see ctrain %s --help)\n", cmd, a.argv[a.i], d->name, cmd);
        return 2;
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain %s: %s\n", cmd, ct_last_error()); return 2; }
    return 0;
}

static int run(int import, int argc, char **argv)
{
    const char *cmd = import ? "import" : "export";
    file_args f;
    int help_asked = 0, rc = split_args(cmd, argc, argv, &f, &help_asked);
    if (help_asked) { help(import); return 0; }
    if (rc) return rc;
    if (f.npos != 1 || !f.out)
        return usage_error(cmd, import ? "give the input IN.h5 and the output --out OUT.h5" : "give the input RUN.h5 and the output --out OUT.h5");
    char names[256], msg[640];
    ct_model_names(names, sizeof names, 0);
    if (import && f.model && !ct_model_find(f.model)) {
        snprintf(msg, sizeof msg, "--model %s: no such model; one of %s", f.model, names);
        return usage_error(cmd, msg);
    }
    /* The model: import's --model, else the one the file records (ctrain export writes it) */
    const ct_model_descriptor *d = import && f.model ? ct_model_find(f.model) : NULL;
    ct_status st = d ? CT_OK : ct_export_model(f.pos[0], &d);
    if (st == CT_EINVAL && import) {   /* whole, but not ctrain's: the model must be named */
        snprintf(msg, sizeof msg, "%s; give --model NAME (one of %s)", ct_last_error(), names);
        return usage_error(cmd, msg);
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain %s: %s\n", cmd, ct_last_error()); return 1; }
    unsigned long long given = 0;
    void *cfg = ct_calloc(1, d->cfg_size, "configuration");
    if (!cfg) { fprintf(stderr, "ctrain %s: %s\n", cmd, ct_last_error()); return 1; }
    if ((rc = model_config(cmd, import ? CT_CMD_IMPORT : CT_CMD_EXPORT, d, &f, cfg, &given))) { free(cfg); return rc; }
    ct_format format = !strcmp(f.format, "keras") ? CT_FORMAT_KERAS : CT_FORMAT_TORCH;
    st = import ? ct_model_import(d, cfg, given, format, f.pos[0], f.out) : ct_model_export(d, cfg, given, f.pos[0], format, f.out);
    free(cfg);
    if (st != CT_OK) { fprintf(stderr, "ctrain %s: %s\n", cmd, ct_last_error()); return 1; }
    if (import) printf("%s weights of a %s written to %s\n", format == CT_FORMAT_KERAS ? "Keras" : "PyTorch", d->name, f.out);
    else printf("%s weights of %s written to %s\n", format == CT_FORMAT_KERAS ? "Keras" : "PyTorch", d->name, f.out);
    return 0;
}

int cmd_export(int argc, char **argv) { return run(0, argc, argv); }
int cmd_import(int argc, char **argv) { return run(1, argc, argv); }
