/* time.c - `ctrain time MODEL`: the same training run (same seed, data and
 * model) on each requested device, timed epoch by epoch, as one table:
 *
 *   device epochs s/epoch median min max samples/s GFLOP/s | FMA peak, of it | sgemm peak, of it | vs cpu
 *
 * It is real training: the workload goes through ct_fit (train/train.h), the
 * loop `ctrain train` uses, and the numbers come from its per-epoch history.
 * The first epoch is the warm-up (caches, page faults, thread start-up) and is
 * left out of the statistics. With --per-layer each layer's forward and backward
 * time is measured inside those same training steps (the models' `prof.on`
 * switches), as `caffe time` did.
 *
 * Every device runs the same code: the model is moved to the device's table of
 * operations (layers/ops.h) and trained by ct_fit. Before training, the CPU
 * run measures the FP32 FMA peak and the OpenBLAS sgemm peak with the same
 * threads (core/peak.h); a GPU run opens the GPU and measures its cuBLAS sgemm
 * peak at the run's precision. A device that cannot run (no GPU, a CPU-only
 * build) says why and its columns read n/a: no number is made up.
 *
 * The model is the descriptor's (catalog/model_table.h): its data, network, task
 * and FLOP count; siamese-lstm times the seed's model. Its options are in
 * cli/time_opts.c, --help and the tables in cli/time_print.c, the JSON file and the SVG picture in
 * cli/time_report.c, --compare in cli/time_compare.c.
 *
 * SIGINT or SIGTERM stops the run after the training step in progress; no table
 * or file is written and the exit status is 128 + the signal (130, 143).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/common.h"
#include "cli/config.h"
#include "cli/time.h"
#include "core/interrupt.h"
#include "core/threads.h"
#include "cuda/device.h"
#include "cuda/ops_gpu.h"
#include "train/profile_fit.h"
#include "catalog/session.h"

#define MAX_DEVICES 4
#define MAX_PRECISIONS 2

/* The workload: the same for every device. */
typedef struct {
    const ct_model_descriptor *d;
    void *cfg;                    /* the model's configuration */
    ct_model_data data;
    time_setup setup;
    int layers, verbose;
    int tf32, deterministic;      /* the GPU's options (cuda/device.h) */
    const char *logdir;           /* TensorBoard's root: each device writes into its own folder */
    double sample_hz;             /* --sample-hz: the counters (cli/time_hw.c) */
    ct_fit_config fit;
    ct_session session;           /* the model: built once for its description, then opened on each device in turn */
} workload;

/* ---- protocols ---- */
typedef struct {
    const char *name;
    int epochs, batch;
    long pairs, val_pairs;        /* speaker models */
    long samples, val_samples;    /* image models */
} protocol;

static const protocol PROTOCOLS[] = {
    { "seed",  20, 128, 300000, 120000, 60000, 10000 },   /* images: Fashion-MNIST's sizes and the Keras example's 12 epochs */
    { "bench",  4, 128,   3072,   1024,  6000,  1000 },
    { "smoke",  2,  64,    256,    128,   512,   256 },
};

static const protocol *find_protocol(const char *name)
{
    for (size_t i = 0; i < sizeof PROTOCOLS / sizeof PROTOCOLS[0]; i++)
        if (!strcmp(PROTOCOLS[i].name, name)) return &PROTOCOLS[i];
    return NULL;
}

/* ---- one device ---- */
static void add_layer(void *ctx, const char *name, double fwd_s, double bwd_s, double flops_per_sample)
{
    time_run *r = ctx;
    CT_ASSERT(r->n_layers < TIME_MAX_ROWS);   /* sized for every layer a spec can have, plus two */
    time_layer *l = &r->layer[r->n_layers++];
    snprintf(l->name, sizeof l->name, "%s", name);
    l->fwd_s = fwd_s;
    l->bwd_s = bwd_s;
    l->flops_per_sample = flops_per_sample;
}

/* The model on the device of `be`, planned, with its weights and task (catalog/session.h), trained
 * by ct_fit (its log to stdout with --verbose, else nowhere); the per-epoch history and the
 * layers' times go to r. */
static ct_status fit_model(time_run *r, workload *w, const ct_backend *be)
{
    ct_session *s = &w->session;
    ct_profile_counts pc = { .profile = w->layers, .warmup = w->setup.warmup };
    r->hist = ct_calloc((size_t)w->setup.epochs, sizeof *r->hist, "epoch history");
    if (!r->hist) return CT_ENOMEM;
    ct_session_config sc = { .be = be, .gpu_stream = ct_backend_gpu_stream(be), .seed = w->setup.seed, .batch = w->setup.batch };
    ct_status st = ct_session_open(s, &sc);
    FILE *log = w->verbose ? stdout : fopen("/dev/null", "w");
    if (st == CT_OK && !log) st = ct_fail(CT_EIO, "cannot open /dev/null to discard the training log (use --verbose)");
    ct_fit_config fit = w->fit;
    char dev[32], logdir[4200];
    if (w->logdir) {   /* DIR/cpu, DIR/gpu, DIR/cpu-bf16: TensorBoard overlays the devices' runs */
        cli_device_folder(r->device, dev, sizeof dev);
        if (r->precision == CT_BF16) strncat(dev, "-bf16", sizeof dev - strlen(dev) - 1);
        if (snprintf(logdir, sizeof logdir, "%s/%s", w->logdir, dev) >= (int)sizeof logdir && st == CT_OK)
            st = ct_fail(CT_EINVAL, "--logdir %s: path too long", w->logdir);
        fit.logdir = logdir;
    }
    static time_hw hw;   /* the counters, sampled while the device trains */
    if (st == CT_OK) st = time_hw_begin(&hw, r, &w->setup, w->sample_hz);
    fit.epoch_scalars = time_hw_epoch;
    fit.epoch_scalars_ctx = &hw;
    if (st == CT_OK) {
        st = ct_session_fit(s, &fit, NULL, &pc, r->hist, log);
        r->n_epochs = w->setup.epochs;
        time_hw_end(&hw, r, &w->setup);
    }
    if (log && log != stdout) fclose(log);
    r->n_epochs = w->setup.epochs;
    r->prof_batches = pc.batches;
    r->prof_samples = pc.samples;
    r->prof_parallel_seconds = pc.parallel_seconds;
    if (st == CT_OK && w->layers) w->d->layer_rows(s->net, add_layer, r);
    ct_session_close(s, st != CT_OK);
    return st;
}

/* Opens the device, measures its peaks (cli/device.c) and trains the workload on it. */
static ct_status run_device(time_run *r, workload *w)
{
    const ct_backend *be = NULL;
    int gpu = 0;
    ct_status st = cli_time_device_open(r, w->setup.threads, w->tf32, w->deterministic, r->precision, &be, &gpu);
    /* every rank runs this device, or none: a rank without it would leave the others waiting */
    if (!ct_session_device_everywhere(&cli_dist, st, r->available, r->why)) {   /* some rank cannot: unavailable to the job */
        if (st == CT_OK && r->available && gpu) cli_close_device();
        r->available = 0;
        st = CT_OK;
        snprintf(r->why, sizeof r->why, "%s", ct_last_error());
    }
    if (st != CT_OK || !r->available) return st;
    int N = w->setup.ranks;
    if (N > 1) {   /* the job's peaks: every rank measured its own with its threads, at the same time */
        r->fma_peak *= N; r->peak *= N;   /* the descriptions below the table stay rank 0's own */
    }
    st = fit_model(r, w, be);
    cli_close_device();
    return st;
}

/* ---- the workload ---- */
static const char *optim_display(ct_optim_kind k)
{
    return k == OPT_RMSPROP ? "RMSprop" : k == OPT_ADAM ? "Adam" : k == OPT_ADAMW ? "AdamW" : "SGD";
}

/* The protocol and the options that override it, the data, and the model's size and FLOPs. */
static ct_status build_workload(workload *w, const time_opts *o, int argc, char **argv)
{
    const ct_model_descriptor *d = w->d;
    time_setup *s = &w->setup;
    const protocol *p = find_protocol(o->protocol);
    if (!p) return ct_fail(CT_EINVAL, "--protocol %s: use seed, bench or smoke", o->protocol);
    int speaker = d->task == CT_TASK_SPEAKER;
    char names[128];
    time_models_with(NULL, names, sizeof names);
    if (speaker && (o->samples >= 0 || o->val_samples >= 0))
        return ct_fail(CT_EINVAL, "--samples and --val-samples are for %s; the speaker models take --pairs N --val-pairs M", names);
    if (!speaker && (o->pairs >= 0 || o->val_pairs >= 0))
        return ct_fail(CT_EINVAL, "--pairs and --val-pairs are for the speaker models; %s takes --samples N --val-samples M", d->name);
    s->model = d->name;
    s->protocol = p->name;
    s->data = o->data;
    s->epochs = o->epochs > 0 ? o->epochs : p->epochs;
    s->batch = o->batch > 0 ? o->batch : p->batch;
    s->threads = o->threads;
    s->ranks = cli_dist.size;
    s->seed = o->seed;
    s->warmup = s->epochs > 1 ? 1 : 0;
    long n_train = speaker ? o->pairs : o->samples, n_val = speaker ? o->val_pairs : o->val_samples;
    d->set_counts(w->cfg, n_train >= 0 ? n_train : speaker ? p->pairs : p->samples, n_val >= 0 ? n_val : speaker ? p->val_pairs : p->val_samples);
    size_t k = 0;
    k += (size_t)snprintf(s->command, sizeof s->command, "ctrain time");
    for (int i = 0; i < argc && k < sizeof s->command; i++)
        k += (size_t)snprintf(s->command + k, sizeof s->command - k, " %s", argv[i]);
    /* the optimizer of `ctrain train MODEL` at its default rate, constant */
    memset(&w->fit, 0, sizeof w->fit);
    w->fit.optim = ct_optim_defaults(d->train.optimizer);
    w->fit.sched = (ct_sched){ .kind = SCHED_CONSTANT, .base_lr = w->fit.optim.lr, .t_max = s->epochs };
    w->fit.epochs = s->epochs;
    w->fit.batch = s->batch;
    w->fit.progress = 0;
    w->layers = o->layers;
    w->tf32 = o->tf32;
    w->deterministic = o->deterministic;
    w->verbose = o->verbose;
    w->logdir = o->logdir;
    w->sample_hz = o->sample_hz;
    CT_TRY(d->finish(w->cfg, 0));
    CT_TRY(d->load_data(&w->data, w->cfg, o->data, o->seed, s->batch));
    s->n_train = w->data.n_train;   /* the whole set when the protocol asks for more than the data has */
    s->n_val = w->data.n_val;
    /* the network, built once: its description here, then the first device's run opens it */
    CT_TRY(ct_session_init(&w->session, d, w->cfg, &w->data, &cli_dist));
    CT_TRY(ct_session_build(&w->session));
    char arch[1100];
    d->arch_line(w->session.net, arch, sizeof arch);
    snprintf(s->model_desc, sizeof s->model_desc, "%s, %s lr %g", arch, optim_display(d->train.optimizer), w->fit.optim.lr);
    s->flops_per_sample = d->step_flops(w->session.net);
    d->data_summary(&w->data, s->data_desc, sizeof s->data_desc);
    s->flops_counted = d->flops_counted;
    s->sample_name = d->sample_name;
    return CT_OK;
}

/* ---- the command ---- */
typedef struct {
    time_opts *o;
    workload *w;
    unsigned long long given;
} time_parse;

/* One option of `ctrain time MODEL` (a cli_parse_fn, for --config too). */
static int parse_one(ct_args *a, void *ctx, ct_status *st)
{
    time_parse *p = ctx;
    time_opts *o = p->o;
    ct_args_renamed(a, "time", "--devices", "--device");     /* the same comma list */
    ct_args_renamed(a, "time", "--layers", "--per-layer");   /* --layers is the LSTM's depth in train */
    return cli_opt_parse(a, time_opt_table, CT_CMD_TIME, o, NULL, st)
        || cli_opt_parse(a, p->w->d->opts, CT_CMD_TIME, p->w->cfg, &p->given, st);
}

static ct_status parse_options(time_opts *o, workload *w, int argc, char **argv, int *help)
{
    ct_args a = { .argc = argc, .argv = argv };
    time_parse p = { .o = o, .w = w };
    const char *config = NULL;
    ct_status st = cli_config_find(argc, argv, &config);
    const ct_opt *const tables[] = { time_opt_table, w->d->opts, NULL };
    if (st == CT_OK && config) st = cli_config_apply(config, "time", w->d->name, parse_one, &p, tables);
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) { *help = 1; return CT_OK; }
        if (ct_args_end(&a)) continue;
        if (parse_one(&a, &p, &st))
            continue;
        char who[128], flag[64];
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(argv[a.i], "="), argv[a.i]);   /* --arch=SPEC: --arch */
        time_models_with(a.operands ? "" : flag, who, sizeof who);
        if (who[0]) st = ct_fail(CT_EINVAL, "%s is for %s; %s times its own model (see ctrain time --help)", flag, who, w->d->name);
        else st = ct_args_unknown(&a, "ctrain time --help");
    }
    return st;
}

int cmd_time(int argc, char **argv)
{
    if (argc < 1) { time_help(stderr); return 2; }
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) { time_help(stdout); return 0; }
    if (!strcmp(argv[0], "--compare")) {   /* --compare A.json [--] B.json ...: every word a file, but the first "--" */
        char **files = argv + 1;
        int n = argc - 1;
        for (int i = 0; i < n; i++)
            if (!strcmp(files[i], "--")) {
                memmove(files + i, files + i + 1, (size_t)(n - i - 1) * sizeof *files);
                n--;
                break;
            }
        const char *html = NULL;
        for (int i = 0; i < n; i++)   /* --html FILE.html (or --html=FILE.html) anywhere among the files */
            if (!strcmp(files[i], "--html") || !strncmp(files[i], "--html=", 7)) {
                int eq = files[i][6] == '=', take = eq ? 1 : 2;
                if (!eq && i + 1 >= n) { fprintf(stderr, "ctrain time --compare: --html needs a file name\n"); return 2; }
                html = eq ? files[i] + 7 : files[i + 1];
                if (!*html) { fprintf(stderr, "ctrain time --compare: --html needs a file name\n"); return 2; }
                memmove(files + i, files + i + take, (size_t)(n - i - take) * sizeof *files);
                n -= take;
                break;
            }
        if (n < 1) { fprintf(stderr, "ctrain time: --compare needs at least one FILE.json written by `ctrain time --json`\n"); return 2; }
        return time_compare(n, files, html);
    }
    static workload w;   /* large: the per-device runs */
    memset(&w, 0, sizeof w);
    if (!(w.d = ct_model_find(argv[0]))) {
        char names[256];
        ct_model_names(names, sizeof names, 0);
        fprintf(stderr, "ctrain time: unknown model '%s' (models: %s; see ctrain time --help)\n", argv[0], names);
        return 2;
    }
    if (!(w.cfg = ct_calloc(1, w.d->cfg_size, "configuration"))) { fprintf(stderr, "ctrain time: %s\n", ct_last_error()); return 1; }
    (w.d->time_defaults ? w.d->time_defaults : w.d->defaults)(w.cfg);
    time_opts o = { .protocol = "bench", .devices = "cpu,gpu", .precisions = "fp32", .data = "synthetic",
                    .threads = ct_dist_default_threads(&cli_dist, ct_cpu_count()), .seed = 1,
                    .pairs = -1, .val_pairs = -1, .samples = -1, .val_samples = -1,
                    .sample_hz = 4 };
    int help_asked = 0, n_dev = 0, n_prec = 0, precisions[MAX_PRECISIONS];
    char devices[MAX_DEVICES][32];
    ct_status st = parse_options(&o, &w, argc - 1, argv + 1, &help_asked);
    if (help_asked) { time_help(stdout); free(w.cfg); return 0; }
    if (st == CT_OK) st = cli_device_list(o.devices, devices, MAX_DEVICES, &n_dev);
    if (st == CT_OK) st = cli_precision_list(o.precisions, precisions, MAX_PRECISIONS, &n_prec);
    for (int i = 0; st == CT_OK && i < n_dev; i++) {   /* under mpirun, "gpu" is each rank's own GPU: gpu:LOCAL_RANK */
        char own[32];
        const char *dev = cli_rank_device(devices[i], own, sizeof own);
        if (dev == own) memcpy(devices[i], own, sizeof own);
    }
    if (st == CT_OK && o.json && !*o.json) st = ct_fail(CT_EINVAL, "--json needs a file name");
    if (st == CT_OK && o.logdir && !*o.logdir) st = ct_fail(CT_EINVAL, "--logdir needs a directory name");
    if (st == CT_OK && o.html && !*o.html) st = ct_fail(CT_EINVAL, "--html needs a file name");
    static time_run runs[MAX_DEVICES * MAX_PRECISIONS];
    memset(runs, 0, sizeof runs);
    int timed = 0, n_runs = n_dev * n_prec;
    for (int i = 0; st == CT_OK && i < n_runs; i++) {   /* each device in each precision, the precisions side by side */
        time_run *r = &runs[i];
        snprintf(r->device, sizeof r->device, "%.31s", devices[i / n_prec]);
        r->precision = precisions[i % n_prec];
        snprintf(r->label, sizeof r->label, "%.31s%s", r->device, r->precision == CT_BF16 ? " bf16" : "");
    }
    if (st == CT_OK) st = time_parse_money(&o, devices, n_dev, runs, n_runs);
    if (st == CT_OK) ct_interrupt_install();   /* from here a signal stops the run cleanly */
    if (st == CT_OK) st = build_workload(&w, &o, argc, argv);
    time_baseline base = { .path = o.baseline };
    if (st == CT_OK && o.baseline) st = time_read_baseline(o.baseline, &w.setup, &base.samples_per_s, &base.ranks, &base.threads);
    if (st == CT_OK && cli_dist.size > 1 && w.setup.batch % cli_dist.size != 0)
        st = ct_fail(CT_EINVAL, "--batch %d does not divide evenly over %d ranks: --batch is the global batch, use a multiple of %d",
                     w.setup.batch, cli_dist.size, cli_dist.size);
    st = ct_session_agree_setup(&cli_dist, st);   /* every rank stops, or none */
    if (st != CT_OK) {
        if (cli_dist.rank == 0) fprintf(stderr, "ctrain time: %s\n", ct_last_error());
        ct_session_free(&w.session);
        ct_model_data_free(&w.data);
        free(w.cfg);
        return 2;
    }
    ct_threads_set(o.threads);
    const time_setup *s = &w.setup;
    cli_print_header(stdout, o.threads);
    printf("Model: %s, %.1f MFLOP per %.*s per training step\n", s->model_desc, s->flops_per_sample / 1e6,
           (int)strlen(s->sample_name) - 1, s->sample_name);
    if (cli_dist.mpi)
        printf("Ranks: %d (%s), %d thread%s each; batch %d = %d x %d per rank\n", s->ranks, ct_dist_backend(), s->threads,
               s->threads == 1 ? "" : "s", s->batch, s->ranks, s->batch / s->ranks);
    printf("Data: %s\n", s->data_desc);
    printf("Protocol: %s: %d epochs of %ld training + %ld validation %s, batch %d, seed %ld; devices %s; precision %s\n",
           s->protocol, s->epochs, s->n_train, s->n_val, s->sample_name, s->batch, s->seed, o.devices, o.precisions);
    fflush(stdout);

    for (int i = 0; i < n_runs && st == CT_OK; i++) {
        time_run *r = &runs[i];
        st = run_device(r, &w);
        if (st == CT_OK && r->available && (st = time_summarise(r, s)) == CT_OK) timed++;
        if (st == CT_OK && r->available) printf("%s: %d epochs trained\n", r->label, r->n_epochs);
        fflush(stdout);
    }
    n_dev = n_runs;   /* the tables and files below: one row per run */
    if (st == CT_OK) {
        time_print_table(s, runs, n_dev);
        time_print_hw(s, runs, n_dev);
        for (int i = 0; i < n_dev; i++) time_print_layers(s, &runs[i]);
        if (o.baseline) time_print_scaling(&base, s, runs, n_dev);
        if (o.json && ct_dist_is_root(&cli_dist)) st = time_write_outputs(o.json, s, runs, n_dev);   /* rank 0 writes */
        if (st == CT_OK && o.html && ct_dist_is_root(&cli_dist)) st = time_write_run_html(o.html, s, runs, n_dev);
    }
    for (int i = 0; i < n_dev; i++) free(runs[i].hist);
    ct_session_free(&w.session);
    ct_model_data_free(&w.data);
    free(w.cfg);
    fflush(stdout);
    if (st == CT_EINTR) {
        if (cli_reports()) fprintf(stderr, "ctrain time: %s; no table or file written\n", ct_last_error());
        return 128 + ct_interrupt_signal();
    }
    if (st != CT_OK) {
        if (cli_reports()) fprintf(stderr, "ctrain time: %s\n", ct_last_error());
        return 1;
    }
    if (!timed) { fprintf(stderr, "ctrain time: no device could be timed (see above)\n"); return 1; }
    return 0;
}
