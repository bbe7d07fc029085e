/* comm.h - the collectives that data-parallel training is built on: a communicator
 * is a table of functions and its implementation's state, so that train/ asks for
 * an all-reduce or a broadcast without knowing whether MPI or NCCL carries it.
 *
 *   implementation   file          buffers         made by
 *   MPI              comm/mpi.c    host memory     ct_comm_mpi_open   (the job's ranks)
 *   NCCL             cuda/nccl.c   GPU memory      ct_comm_nccl_open  (over an MPI communicator)
 *
 * A communicator joins the `size` ranks of one job; every rank calls the same
 * collectives in the same order, each with the same counts. Each collective is in
 * place: `buf` is this rank's contribution before and the result after.
 *
 *   all-reduce   buf[i] = sum over the ranks r of scale_r * buf_r[i]   (floats; scale 1 for doubles)
 *   broadcast    buf = rank root's buf
 *   minimum      *value = the least of the ranks' values
 *   gather       all[r] = rank r's `mine`, in rank order, on every rank
 *   agreement    every rank learns whether any rank failed, and the first one's message (ct_comm_agree)
 *
 * MPI carries everything, the statuses and hashes of the training's bookkeeping
 * included. NCCL carries the float buffers that live on the GPU (the gradient
 * all-reduce, the batchnorm statistics' broadcast); it starts over an MPI
 * communicator (its id and the ranks' checks go over MPI) and carries no host values
 * (double sums, minimum, gather, and the agreement built on them): those ask MPI.
 *
 * Never a hang: every wait of every collective is bounded by *timeout_s seconds.
 * A collective that fails or times out leaves the job broken (ct_comm_broken): its
 * message is kept, every later collective on any communicator of this process fails
 * at once with it, and closing ends the whole job (MPI_Abort) rather than waiting
 * for ranks that will not answer.
 *
 * Without MPI (a build without it, or a process not started by mpirun) there is no
 * communicator: ct_comm_mpi_open gives NULL, and the caller has one rank
 * (train/dist.h does the single-process bookkeeping). */
#ifndef CT_COMM_H
#define CT_COMM_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

typedef struct ct_comm ct_comm;

/* The table an implementation fills. Each entry's `what` names the collective in a
 * failure or timeout message ("the gradient all-reduce"). */
typedef struct ct_comm_fns {
    const char *name;     /* "MPI", "NCCL" */
    int device_memory;    /* 1: buffers are device pointers of the GPU the communicator was opened for */

    /* ---- the training's buffers: every implementation ---- */
    /* buf [n]: the sum over the ranks of scale * buf, each rank with its own scale. */
    ct_status (*sum_f32)(ct_comm *c, float *buf, size_t n, float scale, const char *what);
    /* bytes of buf from rank root to every rank. */
    ct_status (*bcast)(ct_comm *c, void *buf, size_t bytes, int root, const char *what);

    /* ---- host values (statuses, hashes, metrics): MPI; NULL for NCCL ---- */
    /* buf [n]: the sum over the ranks. */
    ct_status (*sum_f64)(ct_comm *c, double *buf, size_t n, const char *what);
    /* *value: the least of the ranks' values. */
    ct_status (*min_int)(ct_comm *c, int *value, const char *what);
    /* all [size * bytes]: every rank's `bytes` of mine, rank 0's first. */
    ct_status (*gather)(ct_comm *c, const void *mine, void *all, size_t bytes, const char *what);

    /* Ends the communicator and frees c. failed: at once, without waiting for the
     * other ranks (MPI: MPI_Abort(exit_code), which ends the whole job; NCCL: its
     * kernels aborted). Also at once, whatever `failed`, when the job is broken. */
    void (*close)(ct_comm *c, int failed, int exit_code);
} ct_comm_fns;

struct ct_comm {
    const ct_comm_fns *fns;
    int rank, size;            /* this process, of `size` ranks */
    int local_rank, local_size;   /* the same among the ranks on this machine (sharing its memory) */
    const double *timeout_s;   /* how long a wait may last, in seconds: read at every wait, so its
                                  owner (--dist-timeout, set after the start) may change it */
    int agreed_failure;        /* a failure every rank knows of (ct_comm_agree, ct_comm_check_same):
                                  each may close on its own, without ending the job */
    void *impl;                /* the implementation's own state */
};

/* ---- the collectives: c's table (one rank is a valid job; an entry c lacks is a
 * programmer error) ---- */
ct_status ct_comm_sum_f32(ct_comm *c, float *buf, size_t n, float scale, const char *what);
ct_status ct_comm_bcast(ct_comm *c, void *buf, size_t bytes, int root, const char *what);
ct_status ct_comm_sum_f64(ct_comm *c, double *buf, size_t n, const char *what);
ct_status ct_comm_min_int(ct_comm *c, int *value, const char *what);
ct_status ct_comm_gather(ct_comm *c, const void *mine, void *all, size_t bytes, const char *what);
/* Ends c (NULL: nothing); see ct_comm_fns.close. */
void      ct_comm_close(ct_comm *c, int failed, int exit_code);

/* ---- built on the table, for a communicator on host memory (MPI) ---- */
/* Every rank's status: CT_OK when every rank's `st` is CT_OK; else the first failed
 * rank's status, with its message on every rank (prefixed "rank K: " when K > 0), and
 * c->agreed_failure set. After the job broke: `st`, asking nothing of the others. */
ct_status ct_comm_agree(ct_comm *c, ct_status st);
/* Fails (on every rank alike, c->agreed_failure set) when `value` differs between
 * ranks, naming the first rank whose value differs from rank 0's:
 * "<what> differs between rank 0 and rank K: <fix>". */
ct_status ct_comm_check_same(ct_comm *c, uint64_t value, const char *what, const char *fix);

/* ---- the job's state, shared by the implementations ---- */
/* Marks the job broken after a failed collective, keeping the message ct_fail just set;
 * returns st. */
ct_status ct_comm_mark_broken(ct_status st);
int       ct_comm_broken(void);
/* CT_OK, or (after the job broke) CT_EIO with the first failure's message. */
ct_status ct_comm_refuse_if_broken(void);
/* A short pause between two polls of a wait that began at t0 (ct_now()), once it has
 * lasted a millisecond: the rank's other threads get the core. */
void      ct_comm_poll_pause(double t0);

/* ---- the implementations ---- */
/* MPI (comm/mpi.c). Started when this process was launched by mpirun (or another MPI
 * launcher): *out = the job's ranks. Otherwise *out = NULL: one process. A build
 * without MPI launched as N > 1 ranks fails, saying so. timeout_s: see struct ct_comm. */
ct_status   ct_comm_mpi_open(ct_comm **out, const double *timeout_s);
int         ct_comm_mpi_compiled(void);      /* 1: this build has MPI */
/* The job as the launcher's environment describes it (Open MPI, MPICH's Hydra, PMIx),
 * before or without MPI: rank 0 of 1 when not launched by one. */
void        ct_comm_launcher_view(int *rank, int *size, int *local_rank, int *local_size);
const char *ct_comm_mpi_describe(void);      /* "MPI (Open MPI v4.1.4)", "no MPI in this build" */

/* NCCL (cuda/nccl.c, beside the GPU code), for the GPU that is current in this thread's
 * CUDA runtime: its collectives are queued on `stream` (that GPU's compute stream: they
 * follow the work queued there) and waited for, under *over->timeout_s. Starts over
 * `over`, an MPI communicator of the same ranks: every rank loads NCCL, the ranks check
 * that no two share a GPU, and rank 0's NCCL id goes to the others; each step agreed,
 * so every rank fails alike. A build without NCCL: CT_ENODEV saying so. */
struct CUstream_st;
ct_status   ct_comm_nccl_open(ct_comm **out, ct_comm *over, struct CUstream_st *stream);
int         ct_comm_nccl_compiled(void);     /* 1: this build has NCCL */
/* NCCL is not linked: libnccl.so.2 is loaded when a GPU job first needs it ($CTRAIN_NCCL
 * when set, else the loader's search, else the folder the build found it in), so a GPU
 * build runs without NCCL installed. CT_ENODEV with what to do when it is missing or
 * older than 2.14. Loads once; later calls return at once. */
ct_status   ct_comm_nccl_load(void);
/* "NCCL 2.28.3 (/usr/local/cuda/lib64/libnccl.so.2)", or why it could not be loaded. */
const char *ct_comm_nccl_describe(char *buf, size_t n);

#endif
