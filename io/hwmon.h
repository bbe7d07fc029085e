/* hwmon.h - the machine's energy, power and temperature counters, sampled by a thread
 * while `ctrain time` trains, and the figures people choose hardware by: joules,
 * average and peak watts, the highest temperature and, for a GPU, how busy it was.
 *
 * The CPU's counters are read from sysfs, where Linux puts them:
 *   RAPL package energy   /sys/class/powercap/intel-rapl:N/energy_uj (microjoules; the
 *                         counter wraps to 0 at max_energy_range_uj). AMD's Zen CPUs show
 *                         their package zones there too. Only the package zones
 *                         (name "package-N") are summed: their sub-zones (core, uncore,
 *                         dram) and "psys" overlap them.
 *   temperature           /sys/class/hwmon/hwmonN with name k10temp (AMD: Tdie, else Tctl)
 *                         or coretemp (Intel: "Package id N"), temp*_input in millidegrees C.
 * CTRAIN_SYSFS_ROOT, when set, replaces /sys (tests build a fake tree of counters).
 * A counter that is not there (a VM has neither folder; since Linux 5.10 energy_uj is
 * readable by root only) is NaN in every sample and its figures are NaN, with the reason
 * in words: a missing counter is never guessed.
 *
 * The GPU's counters come from the caller (the CLI reads NVML, cuda/nvml.h): the sampler
 * calls its read function, which fills the gpu_ fields of a sample (NaN where the GPU has
 * no such counter).
 *
 * The sampler is a thread that reads every counter `hz` times a second into a growing
 * array of samples; ct_hw_sampler_mark takes one more sample at once (an epoch's end) and
 * returns its index, so that the figures of any stretch [mark a, mark b] come from the
 * counters at exactly its two ends. Reading the counters costs microseconds a few times a
 * second on a thread of its own (docs/hardware-report.md shows a run with and without it).
 */
#ifndef CT_IO_HWMON_H
#define CT_IO_HWMON_H
#include <stddef.h>
#include <pthread.h>
#include "core/error.h"

#define CT_HW_MAX_ZONES 8      /* RAPL package zones (sockets) */
#define CT_HW_MAX_TEMPS 8      /* CPU temperature sensors (one per package) */
#define CT_HW_PATH 512

/* The CPU's counters found under sysfs. */
typedef struct {
    int n_zones;
    char zone_path[CT_HW_MAX_ZONES][CT_HW_PATH];   /* .../energy_uj */
    char zone_name[CT_HW_MAX_ZONES][32];           /* "package-0" */
    double zone_max_uj[CT_HW_MAX_ZONES];           /* max_energy_range_uj; 0: unknown (a wrap cannot be undone) */
    char energy_why[512];                          /* n_zones 0: why there is no energy counter */
    int n_temps;
    char temp_path[CT_HW_MAX_TEMPS][CT_HW_PATH];   /* .../tempK_input */
    char temp_what[128];                           /* "k10temp Tctl", "coretemp Package id 0" */
    char temp_why[512];                            /* n_temps 0: why there is no thermometer */
} ct_hw;

/* One reading of every counter. NaN: not read (no such counter, or the read failed). */
typedef struct {
    double t;                          /* seconds (core/clock.h ct_now) */
    double cpu_uj[CT_HW_MAX_ZONES];    /* each RAPL package zone's energy counter, microjoules */
    double cpu_temp_c;                 /* the hottest CPU sensor, degrees C */
    double gpu_w;                      /* GPU board power, watts */
    double gpu_mj;                     /* GPU energy counter, millijoules since the driver loaded */
    double gpu_temp_c;                 /* GPU core temperature, degrees C */
    double gpu_busy, gpu_mem_busy;     /* percent of the last sample period a kernel ran / memory was read or written */
    double gpu_sm_mhz, gpu_mem_mhz;    /* clocks */
} ct_hw_sample;

/* The figures of one meter (the CPU package, or a GPU) over a stretch of samples. NaN: not
 * measured, and the matching _why says why. */
typedef struct {
    double seconds;                    /* the stretch's wall time */
    double joules, avg_w, peak_w;      /* energy; joules / seconds; the highest power between two samples */
    char energy_how[128];              /* how the joules were measured */
    char energy_why[512];
    double max_temp_c;
    char temp_why[512];
    double busy_pct, mem_busy_pct;     /* GPU: mean utilisation over the samples */
    double sm_mhz;                     /* GPU: mean SM clock */
    char busy_why[512];
    int n_samples;                     /* samples in the stretch, both ends included */
} ct_hw_meter;

/* Finds the CPU's counters ($CTRAIN_SYSFS_ROOT or /sys); never fails: what is missing is
 * recorded with its reason. */
void ct_hw_open(ct_hw *hw);
/* The CPU's side of a sample at time t (the gpu_ fields are set to NaN). */
void ct_hw_read_cpu(const ct_hw *hw, double t, ct_hw_sample *s);
/* The sysfs root in use: $CTRAIN_SYSFS_ROOT or "/sys". */
const char *ct_hw_sysfs_root(void);

/* The figures of samples [lo, hi] (indices, both included): the CPU package's (RAPL and
 * hwmon), and the GPU's (gpu_why: why there is none, or NULL when the samples hold it). */
void ct_hw_cpu_meter(const ct_hw *hw, const ct_hw_sample *s, size_t lo, size_t hi, ct_hw_meter *m);
void ct_hw_gpu_meter(const char *gpu_why, const ct_hw_sample *s, size_t lo, size_t hi, ct_hw_meter *m);
/* A GPU's joules and average watts need a stretch at least this long: NVML averages a recent
 * GPU's power over 1 s, and over 0.12 s of epochs an H200's energy counter gave 427 W average
 * against a highest reading of 109 W. Shorter: n/a, saying so. */
#define CT_HW_GPU_MIN_SECONDS 1.0
/* A meter with nothing measured, every _why set to why. */
void ct_hw_meter_none(ct_hw_meter *m, const char *why);

/* The GPU's side of a sample (NULL: no GPU). */
typedef void (*ct_hw_gpu_read)(void *ctx, ct_hw_sample *s);

typedef struct {
    ct_hw hw;
    ct_hw_gpu_read gpu;
    void *gpu_ctx;
    double period;                     /* seconds between the thread's samples */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, stop;
    ct_hw_sample *s;                   /* [n] of [cap], in time order */
    size_t n, cap;
    /* what sampling cost, for the record (set by ct_hw_sampler_stop) */
    double started, wall_seconds;      /* ct_now() at the start; seconds from the start to the stop */
    double cpu_seconds;                /* the sampling thread's own CPU time (CLOCK_THREAD_CPUTIME_ID) */
    double mark_seconds;               /* wall time the callers spent in ct_hw_sampler_mark */
} ct_hw_sampler;

/* Opens the CPU's counters and starts the thread, `hz` samples a second (hz <= 0: no thread;
 * marks still sample). */
ct_status ct_hw_sampler_start(ct_hw_sampler *sp, double hz, ct_hw_gpu_read gpu, void *gpu_ctx);
/* One sample now; its index (SIZE_MAX when out of memory: the sample is lost). */
size_t    ct_hw_sampler_mark(ct_hw_sampler *sp);
/* Stops the thread (the samples stay; wall_seconds and cpu_seconds set) / frees the samples. */
void      ct_hw_sampler_stop(ct_hw_sampler *sp);
void      ct_hw_sampler_free(ct_hw_sampler *sp);

#endif
