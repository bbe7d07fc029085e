/* cli.h - the ctrain command-line program: subcommands and shared helpers. */
#ifndef CT_CLI_H
#define CT_CLI_H
#include <stdio.h>
#include "core/error.h"
#include "train/dist.h"

#define CTRAIN_VERSION "0.1.0"
/* The git commit of the build ("unknown" outside a git checkout) (cli/version.c). */
const char *cli_commit(void);

/* argv[0] as the program was started (cli/ctrain.c): the commands' lines that say how to run
 * something again ("resume with: bin/ctrain train ...") begin with it. */
extern const char *cli_program;

/* This process's place in a data-parallel job (train/dist.h): one rank unless `train`
 * or `time` was launched by mpirun. Only rank 0 prints to stdout. */
extern ct_dist cli_dist;
/* Whether this rank prints a failure: rank 0 prints the failures every rank knows of
 * (with the failed rank's number), a rank that failed alone prints its own. */
static inline int cli_reports(void) { return cli_dist.rank == 0 || !cli_dist.agreed_failure; }

int  cmd_train(int argc, char **argv);   /* ctrain train MODEL [options] */
int  cmd_info(int argc, char **argv);    /* ctrain info */
int  cmd_export(int argc, char **argv);  /* ctrain export --format keras|torch RUN.h5 OUT.h5 (cli/export.c) */
int  cmd_import(int argc, char **argv);  /* ctrain import --format keras|torch IN.h5 OUT.h5 --model NAME (cli/export.c) */
int  cmd_prep(int argc, char **argv);    /* ctrain prep voxceleb --wav DIR --out FILE (cli/prep.c) */
int  cmd_eval(int argc, char **argv);    /* ctrain eval MODEL [options] (cli/eval.c) */
int  cmd_time(int argc, char **argv);    /* ctrain time MODEL [options], ctrain time --compare A.json B.json (cli/time.c) */
/* --device cpu|gpu|gpu:N (cli/device.c): opens the device as the command's backend
 * (layers/ops.h), which stays open until cli_close_device. A CPU-only build, a machine without a GPU, an index that
 * does not exist: CT_ENODEV with one line saying what and what to do. tf32 and
 * deterministic are the GPU's options (cuda/device.h); they are refused on the CPU.
 * precision (a ct_dtype: --precision) is the backend's data type: bf16 where the device
 * has bf16 products, else one line naming what is missing and --precision fp32. */
struct ct_backend;
ct_status cli_open_device(const char *spec, int tf32, int deterministic, int precision, const struct ct_backend **be);
/* Closes the backend the command opened (cli_open_device, cli_time_device_open); nothing
 * when none is open. */
void cli_close_device(void);
/* The backend the command opened, or NULL. */
const struct ct_backend *cli_device(void);
/* Under mpirun, a plain "gpu" (or "cuda") means each rank's own GPU of its machine: gpu:LOCAL_RANK,
 * or gpu:0 when the launcher left each rank one visible GPU; written into buf. Any other
 * spec, or one process without MPI: spec itself. */
const char *cli_rank_device(const char *spec, char *buf, size_t cap);
/* The folder of a device's TensorBoard files under --logdir: "cpu", "gpu" (gpu:0) or "gpuN". */
void cli_device_folder(const char *spec, char *out, size_t cap);
/* `ctrain time --device LIST`: the names (cpu, gpu, gpu:N; cuda is gpu), checked, none twice, at most max. */
ct_status cli_device_list(const char *list, char names[][32], int max, int *n);
/* Opens the device named r->device for a timed run and measures its peaks with `threads` threads
 * (the CPU's FMA and sgemm peaks, a GPU's cuBLAS sgemm peak at its precision) into r. A device
 * that cannot run is not an error: r->available = 0 and r->why say why. *gpu = 1 when a GPU
 * was opened (the caller closes it: cli_close_device). */
struct time_run;
ct_status cli_time_device_open(struct time_run *r, int threads, int tf32, int deterministic, int precision,
                               const struct ct_backend **be, int *gpu);
/* --precision LIST of `ctrain time`: "fp32", "bf16" or both, comma-separated, into ct_dtype values
 * (at most max, no repeats); CT_EINVAL with one line otherwise. */
ct_status cli_precision_list(const char *list, int *out, int max, int *n);
/* The GPU line of the header: the open GPU (name, memory, compute capability, driver,
 * CUDA, cuDNN, precision), or whether the backend is compiled in. */
void cli_print_gpu_line(FILE *out);
/* The hardware/software header printed before training: CPU model, cores, threads, BLAS. */
void cli_print_header(FILE *out, int threads);

#endif
