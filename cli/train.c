/* train.c - `ctrain train MODEL`: the command line -> the model's descriptor
 * (train/model_table.h) -> its data, network and task -> the shared training
 * loop (train/train.h), which prints the Keras-style log -> the weights file.
 *
 * The shared options (optimizer, schedule, checkpoints, device, ...) are in
 * cli/common.c; the model's own options come from its descriptor's table.
 * --resume takes the checkpoint's settings as the defaults (flags given after
 * override them). Exit status: 0 trained, 2 bad options, 1 a failure while
 * training (its one-line message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/common.h"
#include "core/rng.h"
#include "io/lock.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: ctrain train MODEL [options]\n\nmodels:\n");
    for (int i = 0; ct_models[i]; i++) fprintf(out, "  %-14s %s\n", ct_models[i]->name, ct_models[i]->summary);
    fprintf(out, "\n`ctrain train MODEL --help` lists the model's options.\n");
}

static void help(const ct_model_descriptor *d, const void *dflt)
{
    float lr = d->train.lr > 0 ? d->train.lr : ct_optim_defaults(d->train.optimizer).lr;
    printf("usage: ctrain train %s [options]\n\n%s\n\n", d->name, d->about);
    cli_opt_help(stdout, d->opts, CT_CMD_TRAIN, dflt);
    printf("training:\n");
    printf(CLI_TRAIN_HELP, d->train.epochs, d->train.batch, ct_optim_name(d->train.optimizer), (double)lr, d->train.schedule);
}

/* Argv -> the options (o) and the model's configuration (cfg); 0 to go on, else the exit status. */
static int parse(const ct_model_descriptor *d, void *cfg, cli_train_opts *o, ct_ckpt_meta *rm, int argc, char **argv)
{
    const char *resume = NULL;
    unsigned long long given = 0;
    cli_train_defaults(o, d);
    d->defaults(cfg);
    ct_status st = cli_resume_meta(argc, argv, d->name, rm, &resume);
    if (st == CT_OK && resume) {   /* the checkpoint's settings are the defaults; flags override them */
        cli_train_from_meta(&rm->train_cfg, o);
        st = d->from_meta(cfg, rm, resume);
    }
    ct_args a = { argc, 0, argv };
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            d->defaults(cfg);
            help(d, cfg);
            return -1;
        }
        if (cli_parse_train_opt(&a, o, &st) || cli_opt_parse(&a, d->opts, CT_CMD_TRAIN, cfg, &given, &st)) continue;
        st = ct_fail(CT_EINVAL, "unknown option '%s' (see ctrain train %s --help)", argv[a.i], d->name);
    }
    /* the model's learning rate goes with its optimizer: another --optimizer keeps its own default rate */
    if (!(o->lr > 0) && d->train.lr > 0 && (!o->optimizer || !strcmp(o->optimizer, ct_optim_name(d->train.optimizer))))
        o->lr = d->train.lr;
    if (st == CT_OK) st = d->finish(cfg, o->checkpoint || o->save_best);
    if (st != CT_OK) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 2; }
    return 0;
}

/* The header, the model and data lines, the checkpoints' description of the run, and ct_fit. */
static ct_status fit(const ct_model_descriptor *d, const void *cfg, void *net, const ct_model_data *data, ct_model_task *t,
                     const cli_train_opts *o, ct_fit_config *fit, ct_ckpt_meta *meta, const ct_rngs *rngs)
{
    char line[2048];
    cli_print_header(stdout, o->threads);
    d->train_line(net, line, sizeof line);
    printf("Model: %s\n", line);
    if (d->data_line) d->data_line(data, t, fit, stdout);
    snprintf(meta->model, sizeof meta->model, "%s", d->name);
    d->describe(cfg, net, &meta->model_cfg);
    cli_train_to_meta(&meta->train_cfg, o, fit);
    CT_TRY(d->data_to_meta(cfg, data, meta));
    fit->meta = meta;
    fit->rngs = rngs;
    return ct_fit(&t->task, fit, NULL, stdout);
}

static int train_model(const ct_model_descriptor *d, int argc, char **argv)
{
    static cli_train_opts o;
    static ct_ckpt_meta rm, meta;
    static ct_model_data data;
    ct_model_task task = { 0 };
    ct_fit_config fitc;
    void *cfg = ct_calloc(1, d->cfg_size, "configuration"), *net = ct_calloc(1, d->net_size, "network");
    if (!cfg || !net) { free(cfg); free(net); fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 1; }
    int rc = parse(d, cfg, &o, &rm, argc, argv), have_net = 0;
    ct_status st = CT_OK;
    if (rc == 0 && (st = cli_finish_train_opts(&o, &fitc, d->train.optimizer)) != CT_OK) {
        fprintf(stderr, "ctrain train: %s\n", ct_last_error());
        rc = 2;
    }
    if (rc != 0) { free(cfg); free(net); return rc < 0 ? 0 : rc; }

    /* The files this run writes are its own until it ends: a second run pointed at
     * one of them refuses, naming this one (io/lock.h). */
    ct_path_lock locks[3];
    const char *outputs[3] = { o.checkpoint, o.out, o.save_best }, *flags[3] = { "--checkpoint", "--out", "--save-best" };
    char holder[512];
    int n = snprintf(holder, sizeof holder, "ctrain train %s", d->name);
    for (int i = 0; i < argc && n > 0 && (size_t)n < sizeof holder; i++) n += snprintf(holder + n, sizeof holder - (size_t)n, " %s", argv[i]);
    for (int i = 0; i < 3; i++) {
        locks[i].fd = -1;
        int dup = 0;
        for (int k = 0; k < i; k++) dup |= outputs[k] && outputs[i] && !strcmp(outputs[k], outputs[i]);
        if (st == CT_OK && outputs[i] && !dup) st = ct_path_lock_take(&locks[i], outputs[i], holder, flags[i]);
    }
    if (st != CT_OK) {
        fprintf(stderr, "ctrain train: %s\n", ct_last_error());
        for (int i = 0; i < 3; i++) ct_path_lock_release(&locks[i]);
        free(cfg); free(net);
        return 1;
    }

    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)o.seed);
    st = d->load_data(&data, cfg, o.data, o.seed, o.batch);
    if (st == CT_OK && (st = ct_model_net_open(d, net, cfg, &data, &rngs.init, o.ops, o.batch)) == CT_OK) have_net = 1;
    if (st == CT_OK) st = d->task_open(&task, net, &data, &rngs, o.batch);
    if (st == CT_OK) st = fit(d, cfg, net, &data, &task, &o, &fitc, &meta, &rngs);
    if (st == CT_OK && o.out) st = d->save(net, o.out, &meta.model_cfg);
    if (st == CT_OK && o.out) printf("weights written to %s\n", o.out);
    ct_model_task_close(&task);
    if (have_net) d->free(net);
    ct_model_data_free(&data);
    free(net);
    free(cfg);
    if (st != CT_OK) fprintf(stderr, "ctrain train: %s\n", ct_last_error());
    for (int i = 0; i < 3; i++) ct_path_lock_release(&locks[i]);
    return st != CT_OK;
}

int cmd_train(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    const ct_model_descriptor *d = ct_model_find(argv[0]);
    if (!d) {
        char names[256];
        ct_model_names(names, sizeof names, 0);
        fprintf(stderr, "ctrain train: unknown model '%s' (models: %s)\n", argv[0], names);
        return 2;
    }
    return train_model(d, argc - 1, argv + 1);
}
