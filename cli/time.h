/* time.h - what `ctrain time` takes and measured, shared by cli/time.c (running the
 * workload on each device), cli/time_opts.c (its options), cli/time_print.c (--help, the statistics and the
 * tables), cli/time_report.c (the JSON file and the SVG picture) and
 * cli/time_compare.c (`--compare` and --baseline, which read the JSON back). */
#ifndef CT_CLI_TIME_H
#define CT_CLI_TIME_H
#include <stdio.h>
#include "core/error.h"
#include "models/seq_cnn.h"
#include "catalog/options.h"
#include "train/train.h"
#include "io/hwmon.h"

#define TIME_SCHEMA "ctrain-time/2"   /* /2: the counters, the money; /1 files still compare (those columns n/a) */
#define TIME_MAX_ROWS (SEQ_CNN_MAX_LAYERS + 2)   /* every layer, "other" and the whole step */

/* The command line of `ctrain time MODEL`, declared in time_opt_table (cli/time_opts.c). Numbers
 * left 0 (or -1) take the protocol's value. */
typedef struct {
    const char *protocol, *devices, *data, *json, *baseline;
    const char *config, *logdir;      /* --config FILE.yaml; --logdir DIR: TensorBoard files in DIR/cpu, DIR/gpu */
    const char *precisions;           /* --precision LIST: fp32, bf16 or both, each timed on every device */
    const char *price, *hardware_cost; /* --price DEVICE=PER_HOUR,...; --hardware-cost DEVICE=PRICE,... */
    const char *html;                 /* --html FILE: the report page */
    const char *electricity;          /* --electricity PER_KWH: the price of a kWh */
    float sample_hz;                  /* --sample-hz HZ: the counters' sampling rate; 0: none */
    int epochs, batch, threads, layers, verbose, tf32, deterministic;
    long pairs, val_pairs, samples, val_samples, seed;
} time_opts;
extern const ct_opt time_opt_table[];

/* What was run: the same on every device. */
typedef struct {
    const char *model;             /* "siamese-lstm", "siamese-cnn", "cnn", ... */
    const char *protocol;          /* "seed", "bench", "smoke" */
    const char *data;              /* --data as given */
    char command[1024];            /* the command line, for the record */
    char model_desc[1200];         /* one line: layers and sizes */
    char data_desc[512];           /* one line: what the samples are */
    int threads, batch, epochs;
    int ranks;                     /* data-parallel ranks (mpirun -np N; train/dist.h), each with `threads` threads */
    int warmup;                    /* leading epochs left out of the statistics (1, or 0 with --epochs 1) */
    long seed, n_train, n_val;     /* samples (pairs or images) per epoch */
    double flops_per_sample;       /* FLOPs of one training step per sample */
    const char *flops_counted;     /* what the FLOP count includes, in words */
    const char *sample_name;       /* "pairs" or "images" */
} time_setup;

/* One profiled row of --layers: totals over the profiled batches. */
typedef struct {
    char name[64];
    double fwd_s, bwd_s;           /* seconds, summed over the profiled batches */
    double flops_per_sample;       /* of this layer in one training step; 0: none counted */
} time_layer;

/* One device's run. */
typedef struct time_run {
    char device[32];               /* "cpu", "gpu", "gpu:1" */
    int precision;                 /* ct_dtype of the products: CT_F32 or CT_BF16 (--precision) */
    char label[48];                /* the run in tables and file names: the device, then " bf16" in bf16 */
    char device_desc[512];         /* CPU model and threads, or the GPU's description */
    int available;                 /* 0: nothing was timed, `why` says why */
    char why[1024];
    int n_epochs;
    ct_epoch_log *hist;            /* [n_epochs] */
    double peak, peak_best;        /* sgemm GFLOP/s (median, best); 0 when unknown */
    char peak_what[160];           /* how the sgemm peak was measured */
    double fma_peak, fma_peak_best;   /* FP32 FMA GFLOP/s (median, best), same threads; 0 when unknown */
    char fma_peak_what[160];          /* how the FMA peak was measured */
    /* over the epochs after the warm-up */
    double sec_median, sec_min, sec_max;
    double samples_per_s, gflops;
    /* --layers */
    int n_layers;
    time_layer layer[TIME_MAX_ROWS];
    long prof_batches, prof_samples;
    double prof_train_seconds;     /* training seconds of the profiled epochs */
    double prof_parallel_seconds;  /* of them, the training thread's seconds in the worker pool (a CPU run) */
    /* the counters (cli/time_hw.c), over the epochs after the warm-up */
    double sample_hz;              /* samples a second; 0: not sampled (--sample-hz 0) */
    double sampler_cpu, sampled, mark_seconds;   /* the sampling thread's CPU seconds over `sampled` wall
                                                    seconds; the epoch-end samples' seconds (NaN: none) */
    ct_hw_meter cpu_hw, gpu_hw;    /* the CPU package (every run) and the GPU (a GPU run; else its why says so) */
    double data_wait;              /* share of the training time spent waiting for data (0..1) */
    /* money; NaN: not given */
    double price_per_hour, electricity_per_kwh, hardware_cost;
} time_run;

/* The figures a run is compared by, from a run (time_figures_of) or a file (cli/time_compare.c):
 * the device's own meter (the CPU package for a CPU run, the GPU for a GPU run), the money.
 * NaN: not known; the why strings say why. */
typedef struct {
    const char *label, *host, *model, *protocol, *precision;   /* label: "cpu", "gpu bf16" */
    const char *file;              /* --compare: the file's name; NULL for a run */
    double sec_median, samples_per_s, gflops, n_train;
    double epochs;                 /* of the protocol: a whole run */
    double joules_per_epoch, avg_w, peak_w, samples_per_joule, max_temp_c, gpu_busy_pct, data_wait;
    double cpu_avg_w;              /* the CPU package's average power during a GPU run (the host's part) */
    char energy_why[512], temp_why[512], busy_why[512];
    char energy_how[128];
    double price_per_hour, electricity_per_kwh, hardware_cost;
    double rent_per_epoch, rent_per_run, power_per_epoch, power_per_run, break_even_hours;
    char money_why[512];           /* why break_even_hours is NaN, when it is */
} time_figures;

/* The figures of run r (cli/time_hw.c). */
void      time_figures_of(const time_run *r, const time_setup *s, time_figures *f);
/* The money of f from its seconds, joules and prices (sets the rent_, power_ and break_even fields). */
void      time_money(time_figures *f);

/* The counters of one device's run: the sampler, the GPU's NVML handle, the marks at the
 * epochs' ends (cli/time_hw.c). */
typedef struct {
    ct_hw_sampler sp;
    struct ct_nvml *gpu;
    char gpu_why[512];             /* why the GPU has no counters (a CPU run: "not a GPU run") */
    int sampling;                  /* 0: --sample-hz 0 */
    size_t start, *marks;          /* the sample before training and at each epoch's end [epochs] */
    int n_marks, warmup;
    long n_train;
    int gpu_run;
} time_hw;

/* Starts sampling before device r's training (hz 0: nothing sampled). */
ct_status time_hw_begin(time_hw *h, const time_run *r, const time_setup *s, double hz);
/* ct_fit_config.epoch_scalars: marks the epoch's end; the epoch's power, energy and
 * temperature as TensorBoard scalars. */
int       time_hw_epoch(void *ctx, const ct_epoch_report *rep, const char **tags, float *values, int max);
/* Stops sampling; the figures of the epochs after the warm-up into r. */
void      time_hw_end(time_hw *h, time_run *r, const time_setup *s);
/* --price, --electricity, --hardware-cost: into every run of a device named (a device the
 * run does not time, or a price that is not a number, is an error naming it). */
ct_status time_parse_money(const time_opts *o, char devices[][32], int n_dev, time_run *runs, int n_runs);
/* The report page: the table and charts of n sets of figures (cli/time_html.c). */
ct_status time_write_html(const char *path, const char *title, const time_figures *f, int n);
/* --html FILE of `ctrain time MODEL`: the runs' figures. */
ct_status time_write_run_html(const char *path, const time_setup *s, const time_run *runs, int n);

/* `ctrain time --help`, from the model table. */
void      time_help(FILE *out);
/* The models whose option `flag` `ctrain time` takes (NULL: the image models), in alphabetical
 * order: "cnn and siamese-cnn". */
void      time_models_with(const char *flag, char *buf, size_t cap);
/* Median, min and max of the epoch seconds after the warm-up; samples/s and GFLOP/s of their training parts. */
ct_status time_summarise(time_run *r, const time_setup *s);
/* The main table of the runs on n devices, and one run's --layers table. */
void      time_print_table(const time_setup *s, const time_run *runs, int n);
void      time_print_layers(const time_setup *s, const time_run *r);
/* The counters' table (joules, watts, temperature, GPU busy, data wait) and the money, with each n/a's reason once. */
void      time_print_hw(const time_setup *s, const time_run *runs, int n);
/* --json FILE: one JSON file per device (FILE-DEVICE.json when several) and FILE.svg. */
ct_status time_write_outputs(const char *json, const time_setup *s, const time_run *runs, int n);
/* ms per profiled training step outside the worker threads (a CPU run with --per-layer), else -1. */
double    time_serial_ms(const time_run *r);
/* The JSON file of one device's run (schema in cli/time_report.c). */
ct_status time_write_json(const char *path, const time_setup *s, const time_run *r);
/* Per-epoch seconds per device and the loss curves, side by side. */
ct_status time_write_svg(const char *path, const time_setup *s, const time_run *runs, int n_runs);
/* --baseline FILE.json: the training samples/s, ranks and threads of a run of the same
 * workload (model, protocol, batch, samples) that `ctrain time --json` wrote. */
ct_status time_read_baseline(const char *path, const time_setup *s, double *samples_per_s, double *ranks, double *threads);
/* --baseline: the scaling efficiency of this run (N ranks) against a run of the same
 * workload, normally one rank on as many cores: one line per device timed. */
typedef struct { const char *path; double samples_per_s, ranks, threads; } time_baseline;
void      time_print_scaling(const time_baseline *b, const time_setup *s, const time_run *runs, int n);
/* `ctrain time --compare A.json B.json ... [--html FILE.html]`: returns the exit status. */
int       time_compare(int n, char **paths, const char *html);

#endif
