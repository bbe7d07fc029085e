/* dist.h - data-parallel training across processes (MPI) and GPUs (NCCL).
 *
 *   mpirun -np N ctrain train MODEL ...
 *
 * starts N copies of ctrain, the ranks 0..N-1. Each rank holds the whole model
 * and trains on its part of every batch; the batch of --batch is the GLOBAL
 * batch, and rank r takes rows [n r / N, n (r + 1) / N) of each batch of n
 * (ct_dist_part). One training step on N ranks:
 *
 *   rank r:  load its rows -> forward -> backward           (gradient of its rows' mean loss)
 *            g_r *= n_r / n                                  (its share of the global mean)
 *   all:     g = sum_r g_r                                   (ONE all-reduce of the flat gradient
 *                                                             buffer, core/params.h)
 *            norm, clipping and the optimizer step on g      (the same on every rank)
 *
 * so every rank applies the same update and holds the same parameters after
 * every step; ct_fit checks that with a hash of the parameters across ranks
 * (ct_dist_check_params). The gradient equals the one process's gradient of the
 * whole batch up to the order of the floating-point sums.
 *
 * The data is sharded, not duplicated: every rank draws the same global order
 * and crops from the seed (it draws the random numbers of every row of the
 * batch and keeps its own rows), and dropout draws each element's number where
 * the whole batch would (ct_rng_advance over the other ranks' rows), so N ranks
 * reproduce the single-process run with the same global batch.
 *
 * Batchnorm: each rank normalises with its own rows' statistics (as PyTorch's
 * DistributedDataParallel does); the running statistics are broadcast from rank
 * 0 after every step, so every rank keeps rank 0's, as DDP does by default.
 *
 * The ranks talk through communicators (comm/comm.h): MPI's for everything on the
 * host, NCCL's for the GPU's buffers when the ranks train on GPUs (the gradient
 * all-reduce, the batchnorm statistics' broadcast). This file and train/dist.c see
 * only that interface: no MPI, NCCL or CUDA header.
 *
 * Failures never hang: every collective, MPI's and NCCL's, waits at most `timeout_s`
 * seconds (--dist-timeout) for the other ranks, then says so and ends the whole job
 * (MPI_Abort); after one has failed, the others fail at once. A rank that fails before training (its data unreadable, say)
 * tells the others at the first collective (ct_dist_agree), and every rank
 * exits with that rank's one-line message.
 *
 * Without MPI (a build without it, or a plain `ctrain train` outside mpirun)
 * there is one rank and every function here does nothing; the rest of ctrain
 * never tests for MPI. A build without MPI launched by mpirun with N > 1 says so
 * and exits (ct_dist_init).
 */
#ifndef CT_DIST_H
#define CT_DIST_H
#include <stddef.h>
#include <stdint.h>
#include "comm/comm.h"
#include "core/error.h"
#include "layers/ops.h"
#include "train/task.h"

struct ct_ckpt_meta;   /* train/checkpoint.h */

typedef struct ct_dist {
    int rank, size;              /* this process, of `size` ranks (1: a single process) */
    int local_rank, local_size;  /* on this machine */
    double timeout_s;            /* how long a collective waits for the other ranks */
    int mpi;                     /* MPI was started by ct_dist_init */
    int agreed_failure;          /* every rank knows of the failure (ct_dist_agree): each may finish alone */
    long check_every;            /* compare a hash of the parameters across ranks every N steps (0: never) */
    ct_comm *comm;               /* the ranks over MPI (NULL: one process, MPI not started) */
    ct_comm *gpu_comm;           /* the ranks' GPUs over NCCL (NULL: none; GPU buffers then go through the host) */
} ct_dist;

/* Default of --dist-timeout, in seconds. */
#define CT_DIST_TIMEOUT_DEFAULT 300.0

/* Starts MPI when launched by mpirun (or another MPI launcher) and fills d; one rank
 * otherwise. Fails in a build without MPI launched with N > 1 ranks. */
ct_status ct_dist_init(ct_dist *d);
/* A command that runs as the ranks of a job (train, time) joins it here, once: ct_dist_init,
 * then every rank but rank 0 sends its stdout to /dev/null (only rank 0 prints), and every
 * rank checks that they all run the same binary (ct_dist_check_binary). A failure of the
 * start itself is every rank's alike (d->agreed_failure: rank 0 reports it). */
ct_status ct_dist_start(ct_dist *d);
/* Ends NCCL (ct_dist_nccl_close), then MPI: MPI_Finalize, or MPI_Abort(exit_code) when
 * a collective failed or `failed` (a rank that fails alone must not leave the others
 * waiting). */
void      ct_dist_finalize(ct_dist *d, int failed, int exit_code);
/* "MPI (Open MPI v4.1.4)", "no MPI in this build", ... for headers and --help. */
const char *ct_dist_backend(void);
int       ct_dist_compiled(void);                  /* 1: this build has MPI */

/* This rank's rows [*lo, *hi) of a batch of n rows (d NULL: all of them). */
void      ct_dist_part(const ct_dist *d, int n, int *lo, int *hi);
static inline int ct_dist_is_root(const ct_dist *d) { return !d || d->rank == 0; }
static inline int ct_dist_ranks(const ct_dist *d) { return d ? d->size : 1; }

/* ---- collectives (each a no-op with one rank; `what` names it in a timeout message) ---- */
/* buf [n] on the host: the element-wise sum over the ranks, in place. */
ct_status ct_dist_sum_f64(const ct_dist *d, double *buf, int n, const char *what);
/* The same for host floats. */
ct_status ct_dist_sum_f32(const ct_dist *d, float *buf, size_t n, const char *what);
/* buf [n] on the device of be: buf = sum_r scale_r * buf_r (NCCL on GPUs when built with it,
 * else through the host). */
ct_status ct_dist_sum_device(ct_dist *d, const ct_backend *be, float *buf, size_t n, float scale, const char *what);
/* bytes of host memory from rank 0 to every rank. */
ct_status ct_dist_bcast(const ct_dist *d, void *buf, size_t bytes, const char *what);
/* n floats on the device of be from rank 0 to every rank. */
ct_status ct_dist_bcast_device(ct_dist *d, const ct_backend *be, float *buf, size_t n, const char *what);

/* Every rank's status: CT_OK when every rank's `st` is CT_OK; else the first failed
 * rank's status, with its message on every rank (prefixed "rank K: " when K > 0). */
ct_status ct_dist_agree(const ct_dist *d, ct_status st);
/* Fails (on every rank) when `hash` differs between ranks, naming the first rank
 * whose value differs from rank 0's: "<what> differs between rank 0 and rank K: <fix>". */
ct_status ct_dist_check_same(const ct_dist *d, uint64_t hash, const char *what, const char *fix);
/* Fails when this binary (the file of /proc/self/exe) is not the same on every rank. */
ct_status ct_dist_check_binary(const ct_dist *d);

/* FNV-1a over bytes, continuing from h (start with CT_HASH_INIT). */
#define CT_HASH_INIT 14695981039346656037ULL
uint64_t  ct_hash_bytes(uint64_t h, const void *p, size_t bytes);
/* A hash of n floats' bits for comparing large buffers across ranks: FNV-1a's step on 64-bit
 * words in four independent lanes (a byte at a time, 1.2 M floats take milliseconds). */
uint64_t  ct_hash_floats(const float *x, size_t n);

/* For ct_replica_sum (layers/batchnorm.h): buf [n] summed over the ranks; ctx is the ct_dist.
 * Returns non-zero when the ranks stopped answering (the next step's collective then fails). */
int       ct_dist_sum_cb(void *ctx, double *buf, int n);

/* Threads each rank should use by default: the machine's cores over the ranks on it. */
int       ct_dist_default_threads(const ct_dist *d, int cores);

/* Starts NCCL for this rank's GPU, over d->comm (comm/comm.h: ct_comm_nccl_open), also
 * for one rank under mpirun; its collectives are queued on `stream`, the GPU's compute
 * stream. Nothing (CT_OK) for the CPU (be->host_memory), a process not started by
 * mpirun, or a build without NCCL: the GPU's buffers then go through the host. Every
 * wait is bounded by timeout_s like MPI's (a timeout aborts it and ends the job). */
ct_status ct_dist_nccl_open(ct_dist *d, const ct_backend *be, struct CUstream_st *stream);
/* Ends NCCL (before the GPU closes): its outstanding work finished and the communicator
 * destroyed, or aborted when `failed` or after a failed collective. */
void      ct_dist_nccl_close(ct_dist *d, int failed);

/* ---- what the training loop (train/train.c) asks ---- */
/* Before training: --batch divides evenly over the ranks, the last batch of an epoch
 * (n_train % batch) gives every rank a row, and every rank trains the same model
 * with the same settings (config_hash: ct_dist_config_hash). */
ct_status ct_dist_fit_check(ct_dist *d, const ct_task *t, int batch, uint64_t config_hash);
/* A hash of what must be equal on every rank: the parameters' names and shapes, the
 * batch, epochs, optimizer and schedule, the sample counts and the model's description. */
uint64_t  ct_dist_config_hash(const ct_task *t, int epochs, int batch, const ct_optim_config *optim, const ct_sched *sched,
                              const struct ct_ckpt_meta *meta);
/* The host copies of the parameters, buffers and optimizer state from rank 0 to every
 * rank (at the start, and after every rank has read the same --resume checkpoint). */
ct_status ct_dist_share_state(ct_dist *d, ct_train_state *s);
/* A batch of n rows, n_local of them on this rank: *loss (this rank's mean) becomes the
 * whole batch's mean, *correct the whole batch's count. */
ct_status ct_dist_batch_loss(ct_dist *d, float *loss, int *correct, int n_local, int n);
/* After backward: this rank's gradient (of its rows' mean loss) becomes the whole
 * batch's, sum_r (n_r / n) g_r, on every rank. */
ct_status ct_dist_batch_grad(ct_dist *d, ct_train_state *s, int n_local, int n);
/* After the optimizer's step number `step` (counted over the run): rank 0's buffers
 * (batchnorm statistics) to every rank, and every d->check_every steps the parameters'
 * hash compared across ranks (a difference fails the run, naming the step). */
ct_status ct_dist_after_step(ct_dist *d, ct_train_state *s, long step);

#endif
