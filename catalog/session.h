/* session.h - one model opened for training on one device: the setup that
 * `ctrain train` and `ctrain time` share, and the whole of a data-parallel
 * job's agreement around it, so that a command parses its options, calls these
 * and prints.
 *
 * A session goes through these steps, each one call:
 *
 *   ct_session_build   the network built from its configuration and data, in host
 *                      memory, not yet initialised: its description and its FLOPs
 *                      per step can be read (`ctrain time`'s "Model:" line)
 *   ct_session_open    the data loaded (unless the caller loaded it), the network
 *                      built (unless ct_session_build did), its weights drawn from the
 *                      seed, put on the device and planned for the batch, the task
 *                      opened; under mpirun every rank agrees that all of this worked,
 *                      on the options that decide which collectives run, opens NCCL on
 *                      the device, then runs the command's `ready` step (its run
 *                      directory) and agrees on it too
 *   ct_session_fit     ct_fit, or ct_fit_profiled with per-layer timing; every rank
 *                      agrees on how it ended (a NaN loss, a signal)
 *   ct_session_save    rank 0 writes the weights file; every rank learns whether it could
 *   ct_session_close   NCCL, the task and the network; a closed session can be opened
 *                      again (`ctrain time`'s next device)
 *
 * With one process (no mpirun, or dist NULL) every agreement is nothing.
 * Before any session the command joins the job once (ct_dist_start, train/dist.h), and
 * locks the files its run will write with ct_session_lock_outputs; every rank agrees on the
 * command's own setup with ct_session_agree_setup, and on each device `ctrain time` opens
 * with ct_session_device_everywhere, so that the command makes no agreement of its own.
 */
#ifndef CT_SESSION_H
#define CT_SESSION_H
#include <stdio.h>
#include "core/rng.h"
#include "io/lock.h"
#include "layers/ops.h"
#include "models/profile.h"
#include "train/checkpoint.h"
#include "train/dist.h"
#include "catalog/model_table.h"
#include "train/profile_fit.h"
#include "train/train.h"

typedef struct ct_session ct_session;

/* How ct_session_open opens the model. */
typedef struct {
    const ct_backend *be;                /* the device */
    struct CUstream_st *gpu_stream;      /* the GPU's compute stream (cuda/ops_gpu.h: ct_backend_gpu_stream), where
                                            NCCL queues its collectives; NULL on the CPU */
    long seed;                           /* the weights' and the data's random streams (s->rngs) */
    int batch;
    /* ---- the data: loaded here when `source` is set, else the caller's s->data as it is ---- */
    const char *source;                  /* --data */
    int fixed_pairs;                     /* speaker models: the same pairs every epoch */
    /* ---- a data-parallel job (dist of ct_session_init) ---- */
    int dist_options;                    /* 1: the three below are this run's (train's options); 0: the job's stay */
    int sync_batchnorm;                  /* batchnorm's training statistics over the whole batch */
    long dist_check_every;               /* compare a hash of the parameters across ranks every N steps (0: never) */
    double dist_timeout;                 /* seconds a collective waits for the other ranks */
    /* The command's own step once the model is open (its run directory), on every rank; its
     * status is agreed like the rest. NULL: none. */
    ct_status (*ready)(void *ctx, const ct_session *s);
    void *ready_ctx;
} ct_session_config;

struct ct_session {
    const ct_model_descriptor *d;
    const void *cfg;                     /* the model's configuration */
    ct_model_data *data;                 /* the caller's: loaded by ct_session_open or before it */
    ct_dist *dist;                       /* the job (train/dist.h); NULL: one process */
    void *net;                           /* the network, d->net_size bytes */
    int built, open;                     /* the network is built; it is on the device with its task */
    ct_rngs rngs;                        /* seeded by ct_session_open: init drew the weights; checkpoints save them */
    ct_model_task task;                  /* what ct_fit trains */
    const ct_backend *be;                /* the device of the open session */
};

/* A session of model d with configuration cfg (kept, not copied) over `data` (the caller's
 * memory; ct_session_open may load it), in job `dist` (NULL: one process). Allocates the
 * network's memory; fails only when there is none. */
ct_status ct_session_init(ct_session *s, const ct_model_descriptor *d, const void *cfg, ct_model_data *data, ct_dist *dist);
/* The network built (host memory, weights not drawn): for its description before any device. */
ct_status ct_session_build(ct_session *s);
/* See above. On every rank of a job it must be called by every rank (it agrees); on failure the
 * session holds nothing but may be opened again. The failure is every rank's. */
ct_status ct_session_open(ct_session *s, const ct_session_config *c);
/* ct_fit of the open session's task (with pc->profile, ct_fit_profiled and pc's counts): the
 * log to `out`, hist [fit->epochs] (may be NULL). fit->rngs is set to the session's streams;
 * with meta, the model's name, description and data are recorded in it (meta->train_cfg
 * as the caller filled it, then the data's settings) and fit->meta points to it. Every rank
 * agrees on the result. */
ct_status ct_session_fit(ct_session *s, ct_fit_config *fit, ct_ckpt_meta *meta, ct_profile_counts *pc, ct_epoch_log *hist,
                         FILE *out);
/* The trained weights into `path` with the description `desc` (and a speaker model's
 * speakers) on rank 0; every rank learns whether it worked. */
ct_status ct_session_save(ct_session *s, const char *path, const ct_kv *desc);
/* NCCL (aborted when `failed`), the task and the network; the session can be opened again. */
void      ct_session_close(ct_session *s, int failed);
/* ct_session_close, and the network's memory. */
void      ct_session_free(ct_session *s);

/* The files a run writes (paths [n], NULL: none; a path given twice is locked once) locked on
 * rank 0, which alone writes them, for `holder` (io/lock.h); flags name the options in the
 * message. Every rank learns whether it worked. */
ct_status ct_session_lock_outputs(const ct_dist *dist, ct_path_lock *locks, const char *const *paths, const char *const *flags,
                                  int n, const char *holder);

/* ---- a job's agreements outside a session (catalog/session_job.c); with one process (dist
 * NULL, or no mpirun) they agree on nothing ---- */
/* The command's own setup on this rank (its options taken, its run's files chosen, its workload
 * built), st: CT_OK when it worked on every rank; else a failure on every rank, this rank's own
 * or the one that says another rank's failed. With one process, st. */
ct_status ct_session_agree_setup(const ct_dist *dist, ct_status st);
/* Whether every rank has the device it opened for `ctrain time`: this rank's opening (st) and
 * whether it has the device (available 0: `why` says why not). 1 when every rank has it (always
 * with one process); 0 when some rank has not, every rank alike, the reason in ct_last_error(). */
int       ct_session_device_everywhere(const ct_dist *dist, ct_status st, int available, const char *why);

#endif
