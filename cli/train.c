/* train.c - `ctrain train MODEL`: the command line -> the model's descriptor
 * (train/model_table.h) -> its data, network and task -> the shared training
 * loop (train/train.h), which prints the Keras-style log -> the weights file.
 *
 * The shared options (optimizer, schedule, checkpoints, device, ...) are in
 * cli/common.c; the model's own options come from its descriptor's table.
 * --resume takes the checkpoint's settings as the defaults, then --config's
 * file (cli/config.h), then the command line: each overrides the one before.
 * The run directory (cli/run_files.h) is made once the data and the network
 * are ready, before training: the effective configuration, the command line,
 * the version, the header, and the defaults of --out, --checkpoint, --csv and
 * --logdir.
 *
 * SIGINT or SIGTERM stops the run after the step in progress: its checkpoint
 * goes to --checkpoint (the run directory's checkpoint.h5 by default), else
 * beside --out (cli_interrupt_checkpoint), one line gives the command that
 * resumes it, and --out is not written (the run is not finished). A second
 * signal exits at once (core/interrupt.h).
 *
 * Exit status: 0 trained, 2 bad options, 1 a failure while training (its
 * one-line message on stderr), 128 + the signal when one stopped it (130 for
 * SIGINT, 143 for SIGTERM).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/common.h"
#include "cli/config.h"
#include "cli/run_files.h"
#include "core/interrupt.h"
#include "core/rng.h"
#include "cuda/device.h"
#include "cuda/ops_gpu.h"
#include "core/threads.h"
#include "io/files.h"
#include "io/lock.h"
#include "train/run_dir.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: ctrain train MODEL [options]\n\nmodels:\n");
    for (int i = 0; ct_models[i]; i++) fprintf(out, "  %-14s %s\n", ct_models[i]->name, ct_models[i]->summary);
    fprintf(out, "\n`ctrain train MODEL --help` lists the model's options.\n");
}

static void help(const ct_model_descriptor *d, const void *dflt)
{
    cli_train_opts o;   /* the shared options' defaults for this model, its optimizer and learning rate */
    ct_train_opts_defaults(&o, d, 1);
    o.optimizer = ct_optim_name(d->train.optimizer);
    o.lr = d->train.lr > 0 ? d->train.lr : ct_optim_defaults(d->train.optimizer).lr;
    printf("usage: ctrain train %s [options]\n\n%s\n\n", d->name, d->about);
    cli_opt_help(stdout, d->opts, CT_CMD_TRAIN, dflt);
    printf("training:\n");
    cli_opt_help(stdout, ct_train_opt_table, CT_CMD_TRAIN, &o);
}

/* One option of `ctrain train MODEL`, shared or the model's (a cli_parse_fn, for --config too). */
typedef struct {
    const ct_model_descriptor *d;
    void *cfg;
    cli_train_opts *o;
    unsigned long long given;
} train_parse;

static int parse_one(ct_args *a, void *ctx, ct_status *st)
{
    train_parse *p = ctx;
    return cli_opt_parse(a, ct_train_opt_table, CT_CMD_TRAIN, p->o, NULL, st)
        || cli_opt_parse(a, p->d->opts, CT_CMD_TRAIN, p->cfg, &p->given, st);
}

/* Argv -> the options (o) and the model's configuration (cfg); 0 to go on, else the exit status. */
static int parse(const ct_model_descriptor *d, void *cfg, cli_train_opts *o, ct_ckpt_meta *rm, int argc, char **argv)
{
    const char *resume = NULL, *config = NULL;
    train_parse p = { d, cfg, o, 0 };
    ct_train_opts_defaults(o, d, ct_dist_default_threads(&cli_dist, ct_cpu_count()));
    d->defaults(cfg);
    ct_status st = cli_resume_meta(argc, argv, d->name, rm, &resume);
    if (st == CT_OK && resume) {   /* the checkpoint's settings are the defaults; flags override them */
        st = ct_train_opts_from_kv(&rm->train_cfg, o, resume);
        if (st == CT_OK) st = d->from_meta(cfg, rm, resume);
    }
    if (st == CT_OK) st = cli_config_find(argc, argv, &config);
    const ct_opt *const tables[] = { ct_train_opt_table, d->opts, NULL };
    if (st == CT_OK && config) st = cli_config_apply(config, "train", d->name, parse_one, &p, tables);
    ct_args a = { .argc = argc, .argv = argv };
    char see[96];
    snprintf(see, sizeof see, "ctrain train %s --help", d->name);
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            d->defaults(cfg);
            help(d, cfg);
            return -1;
        }
        if (ct_args_end(&a) || parse_one(&a, &p, &st)) continue;
        st = ct_args_unknown(&a, see);
    }
    /* the model's learning rate goes with its optimizer: another --optimizer keeps its own default rate */
    if (!(o->lr > 0) && d->train.lr > 0 && (!o->optimizer || !strcmp(o->optimizer, ct_optim_name(d->train.optimizer))))
        o->lr = d->train.lr;
    if (st == CT_OK) st = d->finish(cfg, o->checkpoint || o->save_best || !o->no_run_dir);
    if (st == CT_OK && o->fixed_pairs && d->task != CT_TASK_SPEAKER)
        st = ct_fail(CT_EINVAL, "--fixed-pairs is for the speaker models' pairs; %s trains on images", d->name);
    if (st != CT_OK) {
        if (!cli_dist.mpi || cli_dist.rank == 0) fprintf(stderr, "ctrain train: %s\n", ct_last_error());   /* ranks: see train_model */
        return 2;
    }
    return 0;
}

/* The header, the model and data lines, the checkpoints' description of the run, and ct_fit. */
static ct_status fit(const ct_model_descriptor *d, const void *cfg, void *net, const ct_model_data *data, ct_model_task *t,
                     const cli_train_opts *o, ct_fit_config *fit, ct_ckpt_meta *meta, const ct_rngs *rngs, const char *run_dir)
{
    char line[2048];
    cli_print_header(stdout, o->threads);
    if (run_dir[0]) printf("Run directory: %s\n", run_dir);
    if (cli_dist.mpi)
        printf("Ranks: %d (%s), batch %d = %d x %d per rank, gradients summed by one all-reduce per step\n", cli_dist.size,
               ct_dist_backend(), o->batch, cli_dist.size, o->batch / cli_dist.size);
    d->train_line(net, line, sizeof line);
    printf("Model: %s\n", line);
    if (d->data_line) d->data_line(data, t, fit, stdout);
    snprintf(meta->model, sizeof meta->model, "%s", d->name);
    d->describe(cfg, net, &meta->model_cfg);
    ct_train_opts_to_kv(&meta->train_cfg, o, fit);
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
    static run_files rf;
    static char command[16384], interrupt_path[4096];
    ct_model_task task = { 0 };
    ct_fit_config fitc;
    void *cfg = ct_calloc(1, d->cfg_size, "configuration"), *net = ct_calloc(1, d->net_size, "network");
    if (!cfg || !net) { free(cfg); free(net); fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 1; }
    int rc = parse(d, cfg, &o, &rm, argc, argv), have_net = 0;
    ct_status st = CT_OK;
    static char rank_gpu[32];
    const char *device_spec = o.device;   /* as given: what the run's config.yaml records */
    if (rc == 0 && o.device) o.device = cli_rank_device(o.device, rank_gpu, sizeof rank_gpu);   /* each rank on its own GPU */
    if (rc == 0 && (st = cli_finish_train_opts(&o, &fitc, d->train.optimizer)) != CT_OK) {
        if (!cli_dist.mpi || cli_dist.rank == 0) fprintf(stderr, "ctrain train: %s\n", ct_last_error());
        rc = 2;
    }
    o.device = device_spec;   /* the device is open; "gpu", not rank 0's gpu:0, so that the config replays under mpirun */
    /* Rank 0 alone makes the run directory. The others take the same code paths with its
     * checkpoint's name (they never write it: train/train.c saves on rank 0 only). */
    const int rank0_run_dir = !o.no_run_dir;
    if (rc == 0 && cli_dist.mpi && cli_dist.rank != 0) o.no_run_dir = 1;
    if (rc == 0 && (st = cli_run_files_choose(&rf, &o)) != CT_OK) {
        fprintf(stderr, "ctrain train: %s\n", ct_last_error());
        rc = 2;
    }
    if (cli_dist.mpi && rc >= 0) {   /* every rank took the options, or every rank stops (rank 0 says why) */
        int failed = rc != 0;
        st = ct_dist_agree(&cli_dist, failed ? CT_EINVAL : CT_OK);
        if (st != CT_OK && cli_dist.rank == 0 && !failed) fprintf(stderr, "ctrain train: %s\n", ct_last_error());   /* another rank's */
        if (st != CT_OK) rc = 2;
    }
    if (rc != 0) { free(cfg); free(net); return rc < 0 ? 0 : rc; }
    cli_command_line(command, sizeof command, "train", argc + 1, argv - 1, "--resume");   /* argv[-1] is the model's name */
    cli_interrupt_checkpoint(interrupt_path, sizeof interrupt_path, d->name, o.out);
    fitc.command = command;
    fitc.interrupt_checkpoint = interrupt_path;
    ct_interrupt_install();

    /* The files this run writes are its own until it ends: a second run pointed at
     * one of them refuses, naming this one (io/lock.h). */
    ct_path_lock locks[3];
    const char *outputs[3] = { o.checkpoint, o.out, o.save_best }, *flags[3] = { "--checkpoint", "--out", "--save-best" };
    char holder[512];
    int n = snprintf(holder, sizeof holder, "ctrain train %s", d->name);
    for (int i = 0; i < argc && n > 0 && (size_t)n < sizeof holder; i++) n += snprintf(holder + n, sizeof holder - (size_t)n, " %s", argv[i]);
    for (int i = 0; i < 3; i++) {   /* rank 0 alone writes them, so rank 0 alone locks them */
        locks[i].fd = -1;
        int dup = 0;
        for (int k = 0; k < i; k++) dup |= outputs[k] && outputs[i] && !strcmp(outputs[k], outputs[i]);
        if (st == CT_OK && outputs[i] && !dup && ct_dist_is_root(&cli_dist)) st = ct_path_lock_take(&locks[i], outputs[i], holder, flags[i]);
    }
    if (cli_dist.mpi) st = ct_dist_agree(&cli_dist, st);
    if (st != CT_OK) {
        if (cli_reports()) fprintf(stderr, "ctrain train: %s\n", ct_last_error());
        for (int i = 0; i < 3; i++) ct_path_lock_release(&locks[i]);
        free(cfg); free(net);
        return 1;
    }

    ct_rngs rngs;
    ct_rngs_seed(&rngs, (uint64_t)o.seed);
    data.ranks_here = cli_dist.mpi ? cli_dist.local_size : 1;   /* they share the machine's memory */
    st = d->load_data(&data, cfg, o.data, o.seed, o.batch);
    data.tc.fixed_pairs = o.fixed_pairs;
    if (st == CT_OK && (st = ct_model_net_open(d, net, cfg, &data, &rngs.init, o.be, o.batch)) == CT_OK) have_net = 1;
    if (st == CT_OK) st = d->task_open(&task, net, &data, &rngs, o.batch);
    if (cli_dist.mpi) {   /* one of several ranks: each trains on its part of every batch */
        cli_dist.timeout_s = o.dist_timeout;
        cli_dist.check_every = o.dist_check_every;
        if (st == CT_OK) ct_model_task_set_dist(&task, &cli_dist, o.sync_batchnorm);
        st = ct_dist_agree(&cli_dist, st);   /* a rank that could not read its data stops every rank */
        uint64_t h = ct_hash_bytes(ct_hash_bytes(CT_HASH_INIT, &o.sync_batchnorm, sizeof o.sync_batchnorm),
                                   &o.dist_check_every, sizeof o.dist_check_every);   /* they decide which collectives run */
        if (st == CT_OK) st = ct_dist_check_same(&cli_dist, h, "--sync-batchnorm or --dist-check-every", "give every rank the same options");
        if (st == CT_OK) st = ct_dist_nccl_open(&cli_dist, o.be, ct_backend_gpu_stream(o.be));
    }
    rf.has_val = task.task.n_val > 0;
    if (st == CT_OK) st = cli_run_files_open(&rf, d, cfg, &o, &fitc, argc, argv);
    if (cli_dist.mpi) st = ct_dist_agree(&cli_dist, st);   /* rank 0's run directory is ready, or every rank stops */
    if (st == CT_OK && cli_dist.mpi && cli_dist.rank != 0 && rank0_run_dir) {   /* rank 0's run directory's files, by name only */
        if (!fitc.checkpoint) fitc.checkpoint = "checkpoint.h5 of rank 0's run directory";
        if (!fitc.csv) fitc.csv = "log.csv of rank 0's run directory";
        if (!o.out) o.out = "weights.h5 of rank 0's run directory";
    }
    if (st == CT_OK) st = fit(d, cfg, net, &data, &task, &o, &fitc, &meta, &rngs, rf.dir);
    if (cli_dist.mpi) st = ct_dist_agree(&cli_dist, st);   /* a stop every rank made alike (a NaN loss): one message */
    const speaker_task *s = d->task == CT_TASK_SPEAKER && task.open ? &task.s : NULL;   /* the speakers trained on */
    if (st == CT_OK && o.out && ct_dist_is_root(&cli_dist))   /* rank 0 writes */
        st = d->save(net, o.out, &meta.model_cfg, s ? s->train_names : NULL, s ? s->n_train_speakers : 0);
    if (cli_dist.mpi && o.out) st = ct_dist_agree(&cli_dist, st);
    if (st == CT_OK && o.out) printf("weights written to %s\n", o.out);
    ct_model_task_close(&task);
    if (have_net) d->free(net);
    ct_model_data_free(&data);
    free(net);
    free(cfg);
    for (int i = 0; i < 3; i++) ct_path_lock_release(&locks[i]);
    if (ct_interrupt_signal()) {   /* stopped (its line said how to resume), or finished while stopping */
        if (st != CT_OK && st != CT_EINTR && cli_reports()) fprintf(stderr, "ctrain train: %s\n", ct_last_error());
        return st == CT_OK ? 0 : 128 + ct_interrupt_signal();
    }
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
