/* mpi.c - the MPI communicator (see comm.h): every MPI call of ctrain. A build without
 * MPI (no CT_HAVE_MPI) compiles only the launcher check at the end: such a build
 * has one rank, and says so when mpirun starts several.
 *
 * Collectives never block without end: each is started non-blocking
 * (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather) and polled until it completes or until
 * *timeout_s seconds have passed; either failure marks the job broken (comm.h), and
 * closing then ends the whole job with MPI_Abort, after a message saying what was
 * waited for and what to do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/comm.h"
#include "core/clock.h"
#ifdef CT_HAVE_MPI
#include <mpi.h>
#endif

/* The launcher's view of the job, from its environment (Open MPI, MPICH's Hydra, PMIx):
 * how many ranks and which one this is, before (or without) MPI. */
static int env_int(const char *const *names, int dflt)
{
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return dflt;
}
static const char *const SIZE_ENV[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL };
static const char *const RANK_ENV[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", NULL };
static const char *const LOCAL_SIZE_ENV[] = { "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", NULL };
static const char *const LOCAL_RANK_ENV[] = { "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", NULL };

void ct_comm_launcher_view(int *rank, int *size, int *local_rank, int *local_size)
{
    *size = env_int(SIZE_ENV, 1);
    *rank = env_int(RANK_ENV, 0);
    *local_size = env_int(LOCAL_SIZE_ENV, *size);
    *local_rank = env_int(LOCAL_RANK_ENV, *rank);
    if (*size < 1) *size = 1;
}

#ifdef CT_HAVE_MPI

static int launched_by_mpi(void) { return env_int(SIZE_ENV, 0) > 0 || getenv("PMIX_RANK") != NULL; }

const char *ct_comm_mpi_describe(void)
{
    static char name[MPI_MAX_LIBRARY_VERSION_STRING + 16];
    if (!name[0]) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(v, &len);
        v[strcspn(v, ",\n")] = '\0';   /* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
        snprintf(name, sizeof name, "MPI (%s)", v);
    }
    return name;
}
int ct_comm_mpi_compiled(void) { return 1; }

/* Polls a started collective until it completes, or fails after *c->timeout_s. */
static ct_status wait_for(const ct_comm *c, MPI_Request *req, const char *what)
{
    double t0 = ct_now();
    int done = 0;
    for (;;) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return ct_comm_mark_broken(ct_fail(CT_EIO, "rank %d: MPI failed in %s: a rank has died; resume from the last "
                                               "checkpoint (--resume)", c->rank, what));
        if (done) return CT_OK;
        if (ct_now() - t0 > *c->timeout_s)
            return ct_comm_mark_broken(ct_fail(CT_EIO, "rank %d: no answer from the other ranks for %.0f s in %s: a rank has "
                                               "died or hangs, so the job is ended; see the other ranks' messages, then resume "
                                               "from the last checkpoint (--resume), or raise --dist-timeout if a step really "
                                               "takes that long", c->rank, *c->timeout_s, what));
        ct_comm_poll_pause(t0);
    }
}

/* A started collective: MPI's return checked, then the wait. */
static ct_status started(const ct_comm *c, int mpi_rc, MPI_Request *req, const char *what)
{
    if (mpi_rc != MPI_SUCCESS) return ct_fail(CT_EIO, "rank %d: MPI could not start %s", c->rank, what);
    return wait_for(c, req, what);
}

static ct_status check_count(size_t n, const char *what)
{
    if (n > (size_t)0x7fffffff) return ct_fail(CT_EINVAL, "%s: %zu elements are more than one MPI message holds", what, n);
    return CT_OK;
}

static ct_status mpi_sum_f32(ct_comm *c, float *buf, size_t n, float scale, const char *what)
{
    CT_TRY(ct_comm_refuse_if_broken());
    CT_TRY(check_count(n, what));
    if (scale != 1.0f) for (size_t i = 0; i < n; i++) buf[i] *= scale;
    MPI_Request req;
    return started(c, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req), &req, what);
}

static ct_status mpi_bcast(ct_comm *c, void *buf, size_t bytes, int root, const char *what)
{
    CT_TRY(ct_comm_refuse_if_broken());
    CT_TRY(check_count(bytes, what));
    MPI_Request req;
    return started(c, MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD, &req), &req, what);
}

static ct_status mpi_sum_f64(ct_comm *c, double *buf, size_t n, const char *what)
{
    CT_TRY(ct_comm_refuse_if_broken());
    CT_TRY(check_count(n, what));
    MPI_Request req;
    return started(c, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req), &req, what);
}

static ct_status mpi_min_int(ct_comm *c, int *value, const char *what)
{
    CT_TRY(ct_comm_refuse_if_broken());
    MPI_Request req;
    return started(c, MPI_Iallreduce(MPI_IN_PLACE, value, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req), &req, what);
}

static ct_status mpi_gather(ct_comm *c, const void *mine, void *all, size_t bytes, const char *what)
{
    CT_TRY(ct_comm_refuse_if_broken());
    CT_TRY(check_count(bytes, what));
    MPI_Request req;
    return started(c, MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &req), &req, what);
}

/* MPI_Finalize waits for every rank; a rank that failed alone, or a broken job, must
 * not leave the others waiting: MPI_Abort ends them all. */
static void mpi_close(ct_comm *c, int failed, int exit_code)
{
    fflush(stdout);
    fflush(stderr);
    if (ct_comm_broken() || (failed && c->size > 1)) MPI_Abort(MPI_COMM_WORLD, exit_code ? exit_code : 1);
    MPI_Finalize();
    free(c);
}

static const ct_comm_fns mpi_fns = {
    .name = "MPI", .device_memory = 0,
    .sum_f32 = mpi_sum_f32, .bcast = mpi_bcast,
    .sum_f64 = mpi_sum_f64, .min_int = mpi_min_int, .gather = mpi_gather,
    .close = mpi_close,
};

ct_status ct_comm_mpi_open(ct_comm **out, const double *timeout_s)
{
    *out = NULL;
    if (!launched_by_mpi()) return CT_OK;   /* a plain run: one rank, MPI never started */
    ct_comm *c = ct_calloc(1, sizeof *c, "the MPI communicator");
    if (!c) return CT_ENOMEM;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        free(c);
        return ct_fail(CT_EIO, "MPI_Init failed: check the MPI installation (mpirun --version)");
    }
    c->fns = &mpi_fns;
    c->timeout_s = timeout_s;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    int rank, size;
    ct_comm_launcher_view(&rank, &size, &c->local_rank, &c->local_size);   /* the launcher's word, unless MPI knows better: */
    MPI_Comm node;   /* the ranks that share this machine's memory */
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &c->local_rank);
        MPI_Comm_size(node, &c->local_size);
        MPI_Comm_free(&node);
    }
    *out = c;
    return CT_OK;
}

#else   /* ---- no MPI in this build: one rank ---- */

const char *ct_comm_mpi_describe(void) { return "no MPI in this build"; }
int ct_comm_mpi_compiled(void) { return 0; }

ct_status ct_comm_mpi_open(ct_comm **out, const double *timeout_s)
{
    (void)timeout_s;
    *out = NULL;
    int size = env_int(SIZE_ENV, 1);
    if (size > 1)
        return ct_fail(CT_EINVAL, "launched as %d ranks, but this ctrain was built without MPI, so each would train alone: "
                       "install Open MPI (apt-get install libopenmpi-dev openmpi-bin) and rebuild (make MPI=1)", size);
    return CT_OK;
}

#endif
