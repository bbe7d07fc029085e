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
    if (st != CT_OK) {
        if (!cli_dist.mpi || cli_dist.rank == 0) fprintf(stderr, "ctrain train: %s\n", ct_last_error());   /* ranks: see train_model */
        return 2;
    }
    return 0;
}

/* The header, the model and data lines, the checkpoints' description of the run, and ct_fit. */
static ct_status fit(const ct_model_descriptor *d, const void *cfg, void *net, const ct_model_data *data, ct_model_task *t,
                     const cli_train_opts *o, ct_fit_config *fit, ct_ckpt_meta *meta, const ct_rngs *rngs)
{
    char line[2048];
    cli_print_header(stdout, o->threads);
    if (cli_dist.mpi)
        printf("Ranks: %d (%s), batch %d = %d x %d per rank, gradients summed by one all-reduce per step\n", cli_dist.size,
               ct_dist_backend(), o->batch, cli_dist.size, o->batch / cli_dist.size);
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
    static char rank_gpu[32];
    if (rc == 0 && cli_dist.mpi && o.device && !strcmp(o.device, "gpu")) {   /* each rank on its own GPU of its machine */
        snprintf(rank_gpu, sizeof rank_gpu, "gpu:%d", cli_dist.local_rank);
        o.device = rank_gpu;
    }
    if (rc == 0 && (st = cli_finish_train_opts(&o, &fitc, d->train.optimizer)) != CT_OK) {
        if (!cli_dist.mpi || cli_dist.rank == 0) fprintf(stderr, "ctrain train: %s\n", ct_last_error());
        rc = 2;
    }
    if (cli_dist.mpi && rc >= 0) {   /* every rank took the options, or every rank stops (rank 0 says why) */
        int failed = rc != 0;
        st = ct_dist_agree(&cli_dist, failed ? CT_EINVAL : CT_OK);
        if (st != CT_OK && cli_dist.rank == 0 && !failed) fprintf(stderr, "ctrain train: %s\n", ct_last_error());   /* another rank's */
        if (st != CT_OK) rc = 2;
    }
    if (rc != 0) { free(cfg); free(net); return rc < 0 ? 0 : rc; }

    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)o.seed);
    st = d->load_data(&data, cfg, o.data, o.seed, o.batch);
    if (st == CT_OK && (st = ct_model_net_open(d, net, cfg, &data, &rngs.init, o.ops, o.batch)) == CT_OK) have_net = 1;
    if (st == CT_OK) st = d->task_open(&task, net, &data, &rngs, o.batch);
    if (cli_dist.mpi) {   /* one of several ranks: each trains on its part of every batch */
        cli_dist.timeout_s = o.dist_timeout;
        cli_dist.check_every = o.dist_check_every;
        if (st == CT_OK) ct_model_task_set_dist(&task, &cli_dist, o.sync_batchnorm);
        st = ct_dist_agree(&cli_dist, st);   /* a rank that could not read its data stops every rank */
        uint64_t h = ct_hash_bytes(ct_hash_bytes(CT_HASH_INIT, &o.sync_batchnorm, sizeof o.sync_batchnorm),
                                   &o.dist_check_every, sizeof o.dist_check_every);   /* they decide which collectives run */
        if (st == CT_OK) st = ct_dist_check_same(&cli_dist, h, "--sync-batchnorm or --dist-check-every", "give every rank the same options");
        if (st == CT_OK) st = ct_dist_nccl_open(&cli_dist, o.ops);
    }
    if (st == CT_OK) st = fit(d, cfg, net, &data, &task, &o, &fitc, &meta, &rngs);
    if (cli_dist.mpi) st = ct_dist_agree(&cli_dist, st);   /* a stop every rank made alike (a NaN loss): one message */
    if (st == CT_OK && o.out && ct_dist_is_root(&cli_dist)) st = d->save(net, o.out, &meta.model_cfg);   /* rank 0 writes */
    if (cli_dist.mpi && o.out) st = ct_dist_agree(&cli_dist, st);
    if (st == CT_OK && o.out) printf("weights written to %s\n", o.out);
    ct_model_task_close(&task);
    if (have_net) d->free(net);
    ct_model_data_free(&data);
    free(net);
    free(cfg);
    if (st != CT_OK) {
        if (cli_reports()) fprintf(stderr, "ctrain train: %s\n", ct_last_error());
        return 1;
    }
    return 0;
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
