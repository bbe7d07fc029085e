/* train.c - `ctrain train MODEL`: the command line -> the model's descriptor
 * (catalog/model_table.h) -> its data, network and task -> the shared training
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
#include "catalog/session.h"

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

/* The header, the model and data lines, the run's description for its checkpoints, and
 * the training (catalog/session.h). */
static ct_status fit(ct_session *s, const cli_train_opts *o, ct_fit_config *fit, ct_ckpt_meta *meta, const char *run_dir)
{
    char line[2048];
    cli_print_header(stdout, o->threads);
    if (run_dir[0]) printf("Run directory: %s\n", run_dir);
    if (cli_dist.mpi)
        printf("Ranks: %d (%s), batch %d = %d x %d per rank, gradients summed by one all-reduce per step\n", cli_dist.size,
               ct_dist_backend(), o->batch, cli_dist.size, o->batch / cli_dist.size);
    s->d->train_line(s->net, line, sizeof line);
    printf("Model: %s\n", line);
    if (s->d->data_line) s->d->data_line(s->data, &s->task, fit, stdout);
    ct_train_opts_to_kv(&meta->train_cfg, o, fit);
    return ct_session_fit(s, fit, meta, NULL, NULL, stdout);
}

/* The run directory (cli/run_files.h), made once the model is open: the session's `ready` step. */
typedef struct {
    run_files *rf;
    const ct_model_descriptor *d;
    const void *cfg;
    cli_train_opts *o;
    ct_fit_config *fit;
    int argc;
    char **argv;
} run_dir_step;

static ct_status open_run_dir(void *ctx, const ct_session *s)
{
    run_dir_step *r = ctx;
    r->rf->has_val = s->task.task.n_val > 0;
    return cli_run_files_open(r->rf, r->d, r->cfg, r->o, r->fit, r->argc, r->argv);
}

static int train_model(const ct_model_descriptor *d, int argc, char **argv)
{
    static cli_train_opts o;
    static ct_ckpt_meta rm, meta;
    static ct_model_data data;
    static run_files rf;
    static char command[16384], interrupt_path[4096];
    ct_fit_config fitc;
    void *cfg = ct_calloc(1, d->cfg_size, "configuration");
    if (!cfg) { fprintf(stderr, "ctrain train: %s\n", ct_last_error()); return 1; }
    int rc = parse(d, cfg, &o, &rm, argc, argv);
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
    if (rc >= 0) {   /* every rank took the options, or every rank stops (rank 0 says why) */
        int failed = rc != 0;
        st = ct_session_agree_setup(&cli_dist, failed ? CT_EINVAL : CT_OK);
        if (st != CT_OK && cli_dist.rank == 0 && !failed) fprintf(stderr, "ctrain train: %s\n", ct_last_error());   /* another rank's */
        if (st != CT_OK) rc = 2;
    }
    if (rc != 0) { free(cfg); return rc < 0 ? 0 : rc; }
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
    ct_session s;
    st = ct_session_lock_outputs(&cli_dist, locks, outputs, flags, 3, holder);
    if (st == CT_OK) st = ct_session_init(&s, d, cfg, &data, &cli_dist);
    if (st != CT_OK) {
        if (cli_reports()) fprintf(stderr, "ctrain train: %s\n", ct_last_error());
        for (int i = 0; i < 3; i++) ct_path_lock_release(&locks[i]);
        free(cfg);
        return 1;
    }

    run_dir_step rd = { &rf, d, cfg, &o, &fitc, argc, argv };
    ct_session_config sc = { .be = o.be, .gpu_stream = ct_backend_gpu_stream(o.be), .seed = o.seed, .batch = o.batch,
                             .source = o.data, .fixed_pairs = o.fixed_pairs,
                             .dist_options = 1, .sync_batchnorm = o.sync_batchnorm, .dist_check_every = o.dist_check_every,
                             .dist_timeout = o.dist_timeout, .ready = open_run_dir, .ready_ctx = &rd };
    st = ct_session_open(&s, &sc);
    if (st == CT_OK && cli_dist.mpi && cli_dist.rank != 0 && rank0_run_dir) {   /* rank 0's run directory's files, by name only */
        if (!fitc.checkpoint) fitc.checkpoint = "checkpoint.h5 of rank 0's run directory";
        if (!fitc.csv) fitc.csv = "log.csv of rank 0's run directory";
        if (!o.out) o.out = "weights.h5 of rank 0's run directory";
    }
    if (st == CT_OK) st = fit(&s, &o, &fitc, &meta, rf.dir);
    if (st == CT_OK && o.out) st = ct_session_save(&s, o.out, &meta.model_cfg);
    if (st == CT_OK && o.out) printf("weights written to %s\n", o.out);
    ct_session_close(&s, st != CT_OK);   /* NCCL aborted when the run failed */
    ct_session_free(&s);
    ct_model_data_free(&data);
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
