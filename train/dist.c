/* dist.c - data-parallel training on MPI and NCCL (see dist.h). Every MPI call of
 * ctrain is in this file; a build without MPI (no CT_HAVE_MPI) compiles the
 * one-rank versions at the end, so the rest of ctrain has no #ifdefs.
 *
 * Collectives never block without end: each is started non-blocking
 * (MPI_Iallreduce, MPI_Ibcast, ...) and polled until it completes or until
 * d->timeout_s seconds have passed, which ends the job (ct_dist_finalize ->
 * MPI_Abort) with a message saying what was waited for and what to do. */
#define _GNU_SOURCE   /* dladdr: which file the NCCL library was loaded from */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "train/dist.h"
#include "core/clock.h"
#ifdef CT_HAVE_MPI
#include <mpi.h>
#endif
#ifdef CT_HAVE_NCCL
#include <dlfcn.h>
#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"   /* nccl.h declares f() for f(void) */
#include <nccl.h>
#pragma GCC diagnostic pop
#endif

void ct_dist_part(const ct_dist *d, int n, int *lo, int *hi)
{
    int r = d ? d->rank : 0, s = d ? d->size : 1;
    *lo = (int)((long)n * r / s);
    *hi = (int)((long)n * (r + 1) / s);
}

uint64_t ct_hash_bytes(uint64_t h, const void *p, size_t bytes)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++) { h ^= c[i]; h *= 1099511628211ULL; }
    return h;
}

uint64_t ct_hash_floats(const float *x, size_t n)
{
    const uint64_t prime = 1099511628211ULL;
    uint64_t lane[4] = { CT_HASH_INIT, CT_HASH_INIT ^ 1, CT_HASH_INIT ^ 2, CT_HASH_INIT ^ 3 }, w;
    size_t words = n / 2, i = 0;   /* two floats per 64-bit word */
    for (; i + 4 <= words; i += 4)
        for (int k = 0; k < 4; k++) {
            memcpy(&w, x + 2 * (i + k), sizeof w);
            lane[k] = (lane[k] ^ w) * prime;
        }
    uint64_t h = ct_hash_bytes(CT_HASH_INIT, lane, sizeof lane);
    return ct_hash_bytes(h, x + 2 * i, (n - 2 * i) * sizeof *x);   /* the floats left over */
}

int ct_dist_default_threads(const ct_dist *d, int cores)
{
    int per = d && d->local_size > 1 ? cores / d->local_size : cores;
    return per < 1 ? 1 : per;
}

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

static inline int launched_by_mpi(void) { return env_int(SIZE_ENV, 0) > 0 || getenv("PMIX_RANK") != NULL; }

static void init_from_env(ct_dist *d)
{
    memset(d, 0, sizeof *d);
    d->size = env_int(SIZE_ENV, 1);
    d->rank = env_int(RANK_ENV, 0);
    d->local_size = env_int(LOCAL_SIZE_ENV, d->size);
    d->local_rank = env_int(LOCAL_RANK_ENV, d->rank);
    d->timeout_s = CT_DIST_TIMEOUT_DEFAULT;
    d->check_every = 1;
    if (d->size < 1) d->size = 1;
}

#ifdef CT_HAVE_MPI

/* A collective that timed out leaves MPI unusable: finishing must abort the job. Its
 * message is kept: every later collective fails at once with it (refuse_if_broken). */
static int dist_broken;
static char broken_msg[1024];

static ct_status mark_broken(ct_status st)
{
    dist_broken = 1;
    snprintf(broken_msg, sizeof broken_msg, "%s", ct_last_error());
    return st;
}

const char *ct_dist_backend(void)
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
int ct_dist_compiled(void) { return 1; }

/* The hash of this program's file: equal on two ranks when they run the same build. */
static ct_status binary_hash(uint64_t *h)
{
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f) return ct_fail(CT_EIO, "cannot read /proc/self/exe to compare the ranks' binaries");
    unsigned char buf[1 << 16];
    size_t got;
    *h = CT_HASH_INIT;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) *h = ct_hash_bytes(*h, buf, got);
    fclose(f);
    return CT_OK;
}

ct_status ct_dist_init(ct_dist *d)
{
    init_from_env(d);
    if (!launched_by_mpi()) return CT_OK;   /* a plain run: one rank, MPI never started */
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return ct_fail(CT_EIO, "MPI_Init failed: check the MPI installation (mpirun --version)");
    d->mpi = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    MPI_Comm node;   /* the ranks that share this machine's memory */
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &d->local_rank);
        MPI_Comm_size(node, &d->local_size);
        MPI_Comm_free(&node);
    }
    return CT_OK;
}

void ct_dist_finalize(ct_dist *d, int failed, int exit_code)
{
    ct_dist_nccl_close(d, failed);
    if (!d->mpi) return;
    fflush(stdout);
    fflush(stderr);
    if (dist_broken || (failed && d->size > 1 && !d->agreed_failure)) MPI_Abort(MPI_COMM_WORLD, exit_code ? exit_code : 1);
    MPI_Finalize();
    d->mpi = 0;
}

/* A short pause between two polls, after the first millisecond of polling: the other
 * threads get the core. */
static void poll_pause(double t0)
{
    if (ct_now() - t0 > 1e-3) {
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
}

/* Polls a started collective until it completes, or fails after d->timeout_s. */
static ct_status wait_for(const ct_dist *d, MPI_Request *req, const char *what)
{
    double t0 = ct_now(), now = t0;
    int done = 0;
    for (;;) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            return mark_broken(ct_fail(CT_EIO, "rank %d: MPI failed in %s: a rank has died; resume from the last checkpoint (--resume)", d->rank, what));
        }
        if (done) return CT_OK;
        now = ct_now();
        if (now - t0 > d->timeout_s) {
            return mark_broken(ct_fail(CT_EIO, "rank %d: no answer from the other ranks for %.0f s in %s: a rank has died or hangs, so the "
                           "job is ended; see the other ranks' messages, then resume from the last checkpoint (--resume), "
                           "or raise --dist-timeout if a step really takes that long", d->rank, d->timeout_s, what));
        }
        poll_pause(t0);
    }
}

/* After a collective timed out or failed, MPI is not asked for anything more: every later
 * collective fails at once (the job then ends), instead of waiting out another timeout. */
static ct_status refuse_if_broken(const ct_dist *d, const char *what)
{
    (void)d; (void)what;
    if (!dist_broken) return CT_OK;
    return ct_fail(CT_EIO, "%s", broken_msg);   /* the first failure's words: what the user needs to read */
}

static ct_status check_count(size_t n, const char *what)
{
    if (n > (size_t)0x7fffffff) return ct_fail(CT_EINVAL, "%s: %zu elements are more than one MPI message holds", what, n);
    return CT_OK;
}

ct_status ct_dist_sum_f64(const ct_dist *d, double *buf, int n, const char *what)
{
    if (!d || d->size == 1) return CT_OK;
    CT_TRY(refuse_if_broken(d, what));
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        return ct_fail(CT_EIO, "rank %d: MPI could not start %s", d->rank, what);
    return wait_for(d, &req, what);
}

ct_status ct_dist_sum_f32(const ct_dist *d, float *buf, size_t n, const char *what)
{
    if (!d || d->size == 1) return CT_OK;
    CT_TRY(refuse_if_broken(d, what));
    CT_TRY(check_count(n, what));
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        return ct_fail(CT_EIO, "rank %d: MPI could not start %s", d->rank, what);
    return wait_for(d, &req, what);
}

ct_status ct_dist_bcast(const ct_dist *d, void *buf, size_t bytes, const char *what)
{
    if (!d || d->size == 1 || bytes == 0) return CT_OK;
    CT_TRY(refuse_if_broken(d, what));
    CT_TRY(check_count(bytes, what));
    MPI_Request req;
    if (MPI_Ibcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        return ct_fail(CT_EIO, "rank %d: MPI could not start %s", d->rank, what);
    return wait_for(d, &req, what);
}

static ct_status bcast_from(const ct_dist *d, void *buf, int bytes, int root, const char *what)
{
    CT_TRY(refuse_if_broken(d, what));
    MPI_Request req;
    if (MPI_Ibcast(buf, bytes, MPI_BYTE, root, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        return ct_fail(CT_EIO, "rank %d: MPI could not start %s", d->rank, what);
    return wait_for(d, &req, what);
}

ct_status ct_dist_agree(const ct_dist *d, ct_status st)
{
    if (!d || d->size == 1 || dist_broken) return st;   /* after a timeout nothing more is asked of MPI */
    char msg[1024];
    if (st != CT_OK) snprintf(msg, sizeof msg, "%s", ct_last_error());
    int mine = st != CT_OK ? d->rank : d->size, first = d->size;
    MPI_Request req;
    if (MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        return ct_fail(CT_EIO, "rank %d: MPI could not start the ranks' agreement", d->rank);
    CT_TRY(wait_for(d, &req, "the ranks' agreement on how the start went"));
    if (first == d->size) return CT_OK;
    int code = (int)st;
    CT_TRY(bcast_from(d, msg, sizeof msg, first, "the failed rank's message"));
    CT_TRY(bcast_from(d, &code, sizeof code, first, "the failed rank's message"));
    ((ct_dist *)d)->agreed_failure = 1;   /* every rank knows: each can finish on its own */
    if (first == 0) return ct_fail((ct_status)code, "%s", msg);   /* rank 0 prints: its own words */
    return ct_fail((ct_status)code, "rank %d: %s", first, msg);
}

ct_status ct_dist_check_same(const ct_dist *d, uint64_t hash, const char *what, const char *fix)
{
    if (!d || d->size == 1) return CT_OK;
    CT_TRY(refuse_if_broken(d, what));
    uint64_t *all = ct_malloc((size_t)d->size * sizeof *all, "hashes");
    if (!all) return CT_ENOMEM;
    MPI_Request req;
    ct_status st = CT_OK;
    if (MPI_Iallgather(&hash, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        st = ct_fail(CT_EIO, "rank %d: MPI could not start comparing %s", d->rank, what);
    char tag[160];
    snprintf(tag, sizeof tag, "comparing %s across ranks", what);
    if (st == CT_OK) st = wait_for(d, &req, tag);
    for (int r = 1; st == CT_OK && r < d->size; r++)
        if (all[r] != all[0]) {
            st = ct_fail(CT_EINVAL, "%s differs between rank 0 and rank %d: %s", what, r, fix);
            ((ct_dist *)d)->agreed_failure = 1;   /* every rank gathered the same hashes and stops on the same rank */
        }
    free(all);
    return st;
}

ct_status ct_dist_check_binary(const ct_dist *d)
{
    if (!d || d->size == 1) return CT_OK;
    uint64_t h = 0;
    ct_status st = binary_hash(&h);
    CT_TRY(ct_dist_agree(d, st));
    return ct_dist_check_same(d, h, "the ctrain binary", "run the same build of ctrain on every machine");
}

#ifdef CT_HAVE_NCCL
/* ---- NCCL, loaded when a job first needs it ----
 * The build compiles against nccl.h but does not link libnccl (a 200 MB library that
 * single-GPU work never uses): the functions below are found with dlopen/dlsym when
 * a GPU rank starts NCCL, so a GPU build runs on machines without NCCL, and a job of
 * GPU ranks there stops with one line saying what to install. */
static struct {
    void *lib;                     /* dlopen's handle (NULL: not loaded) */
    char path[512];                /* the file it came from */
    int version;                   /* ncclGetVersion: 22803 for 2.28.3 */
    __typeof__(ncclGetVersion) *GetVersion;
    __typeof__(ncclGetErrorString) *GetErrorString;
    __typeof__(ncclGetUniqueId) *GetUniqueId;
    __typeof__(ncclCommInitRankConfig) *CommInitRankConfig;
    __typeof__(ncclCommGetAsyncError) *CommGetAsyncError;
    __typeof__(ncclCommFinalize) *CommFinalize;
    __typeof__(ncclCommDestroy) *CommDestroy;
    __typeof__(ncclCommAbort) *CommAbort;
    __typeof__(ncclRedOpCreatePreMulSum) *RedOpCreatePreMulSum;
    __typeof__(ncclRedOpDestroy) *RedOpDestroy;
    __typeof__(ncclAllReduce) *AllReduce;
    __typeof__(ncclBroadcast) *Broadcast;
} nccl;

/* Where libnccl is looked for: $CTRAIN_NCCL alone when set; else the loader's own search
 * (LD_LIBRARY_PATH, the system's folders), then the folder this build found it in. */
#ifndef CT_NCCL_LIBDIR
#define CT_NCCL_LIBDIR "/usr/local/cuda/lib64"
#endif
#define NCCL_MIN_VERSION 21400   /* 2.14: ncclCommInitRankConfig, non-blocking communicators, ncclCommFinalize */

ct_status ct_dist_nccl_load(void)
{
    if (nccl.lib) return CT_OK;
    const char *user = getenv("CTRAIN_NCCL");
    const int chosen = user && *user;
    const char *tries[] = { chosen ? user : "libnccl.so.2", chosen ? NULL : CT_NCCL_LIBDIR "/libnccl.so.2", NULL };
    char err[400] = "";
    void *lib = NULL;
    for (int i = 0; !lib && tries[i]; i++) {
        lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
        const char *e = lib ? NULL : dlerror();   /* valid until the next dl call: copied now */
        if (e && i == 0) snprintf(err, sizeof err, "%s", e);
    }
    if (!lib)
        return ct_fail(CT_ENODEV, "NCCL, which GPU ranks need for their gradients, could not be loaded (%s%s): install it "
                       "(Debian: libnccl2; pip: nvidia-nccl-cu13) and put its folder on LD_LIBRARY_PATH, or set "
                       "CTRAIN_NCCL=/path/to/libnccl.so.2", err, chosen ? "" : "; nor from " CT_NCCL_LIBDIR);
    const struct { void **fn; const char *name; } need[] = {
        { (void **)&nccl.GetVersion, "ncclGetVersion" }, { (void **)&nccl.GetErrorString, "ncclGetErrorString" },
        { (void **)&nccl.GetUniqueId, "ncclGetUniqueId" }, { (void **)&nccl.CommInitRankConfig, "ncclCommInitRankConfig" },
        { (void **)&nccl.CommGetAsyncError, "ncclCommGetAsyncError" }, { (void **)&nccl.CommFinalize, "ncclCommFinalize" },
        { (void **)&nccl.CommDestroy, "ncclCommDestroy" }, { (void **)&nccl.CommAbort, "ncclCommAbort" },
        { (void **)&nccl.RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum" }, { (void **)&nccl.RedOpDestroy, "ncclRedOpDestroy" },
        { (void **)&nccl.AllReduce, "ncclAllReduce" }, { (void **)&nccl.Broadcast, "ncclBroadcast" },
    };
    Dl_info info;
    void *any = dlsym(lib, "ncclGetVersion");
    snprintf(nccl.path, sizeof nccl.path, "%s", any && dladdr(any, &info) && info.dli_fname ? info.dli_fname : "libnccl.so.2");
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        *need[i].fn = dlsym(lib, need[i].name);
        if (!*need[i].fn) {
            dlclose(lib);
            return ct_fail(CT_ENODEV, "%s has no %s: NCCL 2.14 or newer is needed", nccl.path, need[i].name);
        }
    }
    if (nccl.GetVersion(&nccl.version) != ncclSuccess || nccl.version < NCCL_MIN_VERSION) {
        dlclose(lib);
        return ct_fail(CT_ENODEV, "%s is NCCL %d.%d.%d: 2.14 or newer is needed", nccl.path, nccl.version / 10000,
                       nccl.version / 100 % 100, nccl.version % 100);
    }
    nccl.lib = lib;
    return CT_OK;
}

const char *ct_dist_nccl_describe(char *buf, size_t n)
{
    if (ct_dist_nccl_load() != CT_OK) snprintf(buf, n, "%s", ct_last_error());
    else snprintf(buf, n, "NCCL %d.%d.%d (%s)", nccl.version / 10000, nccl.version / 100 % 100, nccl.version % 100, nccl.path);
    return buf;
}

/* ---- NCCL: the same bound on every wait as MPI's ----
 * The communicator is non-blocking (ncclConfig_t.blocking = 0): a call may return
 * ncclInProgress and go on in the background (nccl_settle waits for NCCL to take it),
 * and a collective's kernels then run on the stream (nccl_wait_stream waits for them).
 * Both poll ncclCommGetAsyncError, where a peer's or the network's failure shows, and give
 * up after d->timeout_s: ncclCommAbort stops the communicator's kernels, and the job
 * ends as after an MPI timeout (ct_dist_finalize -> MPI_Abort). */
static ct_status nccl_fail(ct_dist *d, ncclComm_t comm, const char *what, const char *why)
{
    if (comm) nccl.CommAbort(comm);
    if ((ncclComm_t)d->nccl == comm) d->nccl = NULL;
    return mark_broken(ct_fail(CT_EIO, "rank %d: NCCL failed in %s: %s; resume from the last checkpoint (--resume)", d->rank, what, why));
}

static ct_status nccl_timeout(ct_dist *d, ncclComm_t comm, const char *what)
{
    char why[256];
    snprintf(why, sizeof why, "no answer from the other ranks for %.0f s (a rank has died or hangs; raise --dist-timeout "
             "if a step really takes that long)", d->timeout_s);
    return nccl_fail(d, comm, what, why);
}

/* r: what an NCCL call on comm returned. */
static ct_status nccl_settle(ct_dist *d, ncclComm_t comm, ncclResult_t r, double t0, const char *what)
{
    while (r == ncclInProgress) {
        if (ct_now() - t0 > d->timeout_s) return nccl_timeout(d, comm, what);
        poll_pause(t0);
        if (nccl.CommGetAsyncError(comm, &r) != ncclSuccess) r = ncclInternalError;
    }
    return r == ncclSuccess ? CT_OK : nccl_fail(d, comm, what, nccl.GetErrorString(r));
}

/* Waits for the work queued on `stream` so far (the collective's kernels). */
static ct_status nccl_wait_stream(ct_dist *d, ncclComm_t comm, cudaStream_t stream, double t0, const char *what)
{
    cudaEvent_t ev;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess || cudaEventRecord(ev, stream) != cudaSuccess)
        return nccl_fail(d, comm, what, "the GPU could not record an event");
    ct_status st = CT_OK;
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) break;
        ncclResult_t a = ncclSuccess;
        if (e != cudaErrorNotReady) { st = nccl_fail(d, comm, what, cudaGetErrorString(e)); break; }
        if (nccl.CommGetAsyncError(comm, &a) != ncclSuccess || (a != ncclSuccess && a != ncclInProgress)) {
            st = nccl_fail(d, comm, what, nccl.GetErrorString(a));
            break;
        }
        if (ct_now() - t0 > d->timeout_s) { st = nccl_timeout(d, comm, what); break; }
        poll_pause(t0);
    }
    cudaEventDestroy(ev);
    return st;
}
#endif

/* buf on the device of be: scale, then the sum over the ranks. */
ct_status ct_dist_sum_device(ct_dist *d, const ct_backend *be, float *buf, size_t n, float scale, const char *what)
{
    if (!d || !d->mpi) return CT_OK;
#ifdef CT_HAVE_NCCL
    if (d->nccl && !be->host_memory) {
        CT_TRY(refuse_if_broken(d, what));
        ncclComm_t comm = (ncclComm_t)d->nccl;
        ncclRedOp_t op;
        CT_TRY(be->ops->sync(be));   /* the gradients are complete */
        const double t0 = ct_now();
        CT_TRY(nccl_settle(d, comm, nccl.RedOpCreatePreMulSum(&op, &scale, ncclFloat, ncclScalarHostImmediate, comm), t0, what));
        ct_status st = nccl_settle(d, comm, nccl.AllReduce(buf, buf, n, ncclFloat, op, comm, 0), t0, what);
        if (st != CT_OK) return st;   /* the communicator is aborted, and its operator with it */
        CT_TRY(nccl_settle(d, comm, nccl.RedOpDestroy(op, comm), t0, what));
        return nccl_wait_stream(d, comm, 0, t0, what);
    }
#endif
    if (d->size == 1) return CT_OK;
    if (be->host_memory) {   /* the CPU: MPI on the buffer itself */
        if (scale != 1.0f) for (size_t i = 0; i < n; i++) buf[i] *= scale;
        return ct_dist_sum_f32(d, buf, n, what);
    }
    float *host = ct_malloc(n * sizeof *host + 1, "all-reduce staging");   /* a GPU without NCCL: through the host */
    if (!host) return CT_ENOMEM;
    ct_status st = be->ops->download(be, host, buf, n * sizeof *host);
    if (st == CT_OK && scale != 1.0f) for (size_t i = 0; i < n; i++) host[i] *= scale;
    if (st == CT_OK) st = ct_dist_sum_f32(d, host, n, what);
    if (st == CT_OK) st = be->ops->upload(be, buf, host, n * sizeof *host);
    free(host);
    return st;
}

ct_status ct_dist_bcast_device(ct_dist *d, const ct_backend *be, float *buf, size_t n, const char *what)
{
    if (!d || d->size == 1 || n == 0) return CT_OK;
#ifdef CT_HAVE_NCCL
    if (d->nccl && !be->host_memory) {
        CT_TRY(refuse_if_broken(d, what));
        ncclComm_t comm = (ncclComm_t)d->nccl;
        CT_TRY(be->ops->sync(be));
        const double t0 = ct_now();
        CT_TRY(nccl_settle(d, comm, nccl.Broadcast(buf, buf, n, ncclFloat, 0, comm, 0), t0, what));
        return nccl_wait_stream(d, comm, 0, t0, what);
    }
#endif
    if (be->host_memory) return ct_dist_bcast(d, buf, n * sizeof *buf, what);
    float *host = ct_malloc(n * sizeof *host, "broadcast staging");
    if (!host) return CT_ENOMEM;
    ct_status st = be->ops->download(be, host, buf, n * sizeof *host);
    if (st == CT_OK) st = ct_dist_bcast(d, host, n * sizeof *host, what);
    if (st == CT_OK) st = be->ops->upload(be, buf, host, n * sizeof *host);
    free(host);
    return st;
}

#ifdef CT_HAVE_NCCL
int ct_dist_nccl_compiled(void) { return 1; }

/* NCCL takes one GPU per rank (two ranks on one GPU: "invalid usage" at its start, naming
 * nothing): the ranks compare their GPUs' UUIDs first, and a shared one is one line naming
 * the ranks and the fix, on every rank alike. */
static ct_status check_gpus_distinct(ct_dist *d)
{
    /* the rank's GPU, as the CUDA runtime has it current (cuda/device.c opened it) */
    struct cudaDeviceProp prop;
    int dev = -1;
    ct_status st = CT_OK;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();
        st = ct_fail(CT_ENODEV, "rank %d: the CUDA runtime names no current GPU", d->rank);
    }
    unsigned char mine[16];
    unsigned char *all = st == CT_OK ? ct_malloc((size_t)d->size * sizeof mine, "GPU ids") : NULL;   /* [size][16] */
    if (st == CT_OK && !all) st = CT_ENOMEM;
    st = ct_dist_agree(d, st);   /* every rank goes on to the gather, or none */
    if (st != CT_OK) { free(all); return st; }
    memcpy(mine, prop.uuid.bytes, sizeof mine);
    MPI_Request req;
    if (MPI_Iallgather(mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        st = ct_fail(CT_EIO, "rank %d: MPI could not start comparing the ranks' GPUs", d->rank);
    if (st == CT_OK) st = wait_for(d, &req, "comparing the ranks' GPUs");
    for (int i = 0; st == CT_OK && i < d->size; i++)
        for (int j = i + 1; st == CT_OK && j < d->size; j++)
            if (!memcmp(all + (size_t)i * sizeof mine, all + (size_t)j * sizeof mine, sizeof mine)) {
                st = ct_fail(CT_EINVAL, "ranks %d and %d are on one GPU, %s: NCCL needs a GPU of its own for each rank; start at "
                             "most as many ranks on a machine as it has GPUs, or give each rank its own with CUDA_VISIBLE_DEVICES",
                             i, j, prop.name);
                d->agreed_failure = 1;   /* every rank gathered the same ids and stops on the same pair */
            }
    free(all);
    return st;
}

ct_status ct_dist_nccl_open(ct_dist *d, const ct_backend *be)
{
    if (!d || !d->mpi || be->host_memory || d->nccl) return CT_OK;
    CT_TRY(refuse_if_broken(d, "starting NCCL"));
    CT_TRY(ct_dist_agree(d, ct_dist_nccl_load()));   /* every rank, or none: the others must not wait */
    CT_TRY(check_gpus_distinct(d));
    ncclUniqueId id;
    ct_status st = CT_OK;
    if (d->rank == 0 && nccl.GetUniqueId(&id) != ncclSuccess) st = ct_fail(CT_EIO, "NCCL could not make its id (ncclGetUniqueId)");
    CT_TRY(ct_dist_agree(d, st));
    CT_TRY(ct_dist_bcast(d, &id, sizeof id, "the NCCL id"));
    ncclComm_t comm = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;   /* every wait polled, under --dist-timeout (nccl_settle) */
    ncclResult_t r = nccl.CommInitRankConfig(&comm, d->size, id, d->rank, &cfg);
    if (r == ncclInProgress && comm) st = nccl_settle(d, comm, r, ct_now(), "starting NCCL (ncclCommInitRankConfig)");
    else if (r != ncclSuccess) {
        if (comm) nccl.CommAbort(comm);   /* a half-made communicator: its resources go */
        st = ct_fail(CT_EIO, "NCCL could not start: %s", nccl.GetErrorString(r));
    }
    if (st != CT_OK)
        st = ct_fail(st, "%s (is each rank on its own GPU? --device gpu picks the rank's GPU on its machine)", ct_last_error());
    if (st == CT_OK) d->nccl = comm;
    return ct_dist_agree(d, st);
}

void ct_dist_nccl_close(ct_dist *d, int failed)
{
    if (!d || !d->nccl) return;
    ncclComm_t comm = (ncclComm_t)d->nccl;
    d->nccl = NULL;
    if (failed || dist_broken) { nccl.CommAbort(comm); return; }   /* a peer may never answer */
    /* finish the outstanding work, bounded like every other wait (a failure aborts it) */
    if (nccl_settle(d, comm, nccl.CommFinalize(comm), ct_now(), "closing NCCL") == CT_OK) nccl.CommDestroy(comm);
}
#else
int ct_dist_nccl_compiled(void) { return 0; }
ct_status ct_dist_nccl_load(void) { return ct_fail(CT_ENODEV, "this ctrain was built without NCCL (make NCCL=1 with nccl.h)"); }
const char *ct_dist_nccl_describe(char *buf, size_t n) { snprintf(buf, n, "no NCCL in this build"); return buf; }
ct_status ct_dist_nccl_open(ct_dist *d, const ct_backend *be) { (void)d; (void)be; return CT_OK; }
void ct_dist_nccl_close(ct_dist *d, int failed) { (void)d; (void)failed; }
#endif

#else   /* ---- no MPI in this build: one rank ---- */

const char *ct_dist_backend(void) { return "no MPI in this build"; }
int ct_dist_compiled(void) { return 0; }
int ct_dist_nccl_compiled(void) { return 0; }
ct_status ct_dist_nccl_load(void) { return ct_fail(CT_ENODEV, "this ctrain was built without MPI, so without NCCL"); }
const char *ct_dist_nccl_describe(char *buf, size_t n) { snprintf(buf, n, "no NCCL in this build"); return buf; }

ct_status ct_dist_init(ct_dist *d)
{
    init_from_env(d);
    if (d->size > 1)
        return ct_fail(CT_EINVAL, "launched as %d ranks, but this ctrain was built without MPI, so each would train alone: "
                       "install Open MPI (apt-get install libopenmpi-dev openmpi-bin) and rebuild (make MPI=1)", d->size);
    return CT_OK;
}
void ct_dist_finalize(ct_dist *d, int failed, int exit_code) { (void)d; (void)failed; (void)exit_code; }
ct_status ct_dist_sum_f64(const ct_dist *d, double *buf, int n, const char *what) { (void)d; (void)buf; (void)n; (void)what; return CT_OK; }
ct_status ct_dist_sum_f32(const ct_dist *d, float *buf, size_t n, const char *what) { (void)d; (void)buf; (void)n; (void)what; return CT_OK; }
ct_status ct_dist_sum_device(ct_dist *d, const ct_backend *be, float *buf, size_t n, float scale, const char *what)
{ (void)d; (void)be; (void)buf; (void)n; (void)scale; (void)what; return CT_OK; }
ct_status ct_dist_bcast(const ct_dist *d, void *buf, size_t bytes, const char *what) { (void)d; (void)buf; (void)bytes; (void)what; return CT_OK; }
ct_status ct_dist_bcast_device(ct_dist *d, const ct_backend *be, float *buf, size_t n, const char *what)
{ (void)d; (void)be; (void)buf; (void)n; (void)what; return CT_OK; }
ct_status ct_dist_agree(const ct_dist *d, ct_status st) { (void)d; return st; }
ct_status ct_dist_check_same(const ct_dist *d, uint64_t hash, const char *what, const char *fix)
{ (void)d; (void)hash; (void)what; (void)fix; return CT_OK; }
ct_status ct_dist_check_binary(const ct_dist *d) { (void)d; return CT_OK; }
ct_status ct_dist_nccl_open(ct_dist *d, const ct_backend *be) { (void)d; (void)be; return CT_OK; }
void ct_dist_nccl_close(ct_dist *d, int failed) { (void)d; (void)failed; }

#endif
