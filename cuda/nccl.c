/* nccl.c - the NCCL communicator (comm/comm.h): the training's float buffers summed
 * and broadcast on the GPUs, each rank's on its own GPU, queued on that GPU's compute
 * stream. Every NCCL call of ctrain is in this file; a build without NCCL (no
 * CT_HAVE_NCCL: no GPU backend, no MPI or no nccl.h) compiles the answers at the end
 * that say so.
 *
 * NCCL is started over an MPI communicator of the same ranks (ct_comm_nccl_open): the
 * ranks agree that each could load NCCL, compare their GPUs, and take rank 0's NCCL id
 * over MPI. Its waits are bounded like MPI's, by the same *timeout_s. */
#define _GNU_SOURCE   /* dladdr: which file the NCCL library was loaded from */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/comm.h"
#include "core/clock.h"
#ifdef CT_HAVE_NCCL
#include <dlfcn.h>
#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"   /* nccl.h declares f() for f(void) */
#include <nccl.h>
#pragma GCC diagnostic pop

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

int ct_comm_nccl_compiled(void) { return 1; }

ct_status ct_comm_nccl_load(void)
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

const char *ct_comm_nccl_describe(char *buf, size_t n)
{
    if (ct_comm_nccl_load() != CT_OK) snprintf(buf, n, "%s", ct_last_error());
    else snprintf(buf, n, "NCCL %d.%d.%d (%s)", nccl.version / 10000, nccl.version / 100 % 100, nccl.version % 100, nccl.path);
    return buf;
}

/* A communicator's own state (ct_comm.impl). */
typedef struct {
    ncclComm_t comm;        /* NULL once aborted */
    cudaStream_t stream;    /* where the collectives are queued: the GPU's compute stream */
} nccl_state;

static nccl_state *state_of(ct_comm *c) { return c->impl; }

/* ---- every wait bounded, as MPI's ----
 * The communicator is non-blocking (ncclConfig_t.blocking = 0): a call may return
 * ncclInProgress and go on in the background (nccl_settle waits for NCCL to take it),
 * and a collective's kernels then run on the stream (nccl_wait_stream waits for them).
 * Both poll ncclCommGetAsyncError, where a peer's or the network's failure shows, and give
 * up after *timeout_s: ncclCommAbort stops the communicator's kernels, the job is marked
 * broken, and it ends as after an MPI timeout (closing the MPI communicator aborts it). */
static ct_status nccl_fail(ct_comm *c, const char *what, const char *why)
{
    nccl_state *s = state_of(c);
    if (s->comm) nccl.CommAbort(s->comm);
    s->comm = NULL;
    return ct_comm_mark_broken(ct_fail(CT_EIO, "rank %d: NCCL failed in %s: %s; resume from the last checkpoint (--resume)",
                                       c->rank, what, why));
}

static ct_status nccl_timeout(ct_comm *c, const char *what)
{
    char why[256];
    snprintf(why, sizeof why, "no answer from the other ranks for %.0f s (a rank has died or hangs; raise --dist-timeout "
             "if a step really takes that long)", *c->timeout_s);
    return nccl_fail(c, what, why);
}

/* r: what an NCCL call on c's communicator returned. */
static ct_status nccl_settle(ct_comm *c, ncclResult_t r, double t0, const char *what)
{
    while (r == ncclInProgress) {
        if (ct_now() - t0 > *c->timeout_s) return nccl_timeout(c, what);
        ct_comm_poll_pause(t0);
        if (nccl.CommGetAsyncError(state_of(c)->comm, &r) != ncclSuccess) r = ncclInternalError;
    }
    return r == ncclSuccess ? CT_OK : nccl_fail(c, what, nccl.GetErrorString(r));
}

/* Waits for the work queued on the communicator's stream so far (the collective's kernels). */
static ct_status nccl_wait_stream(ct_comm *c, double t0, const char *what)
{
    nccl_state *s = state_of(c);
    cudaEvent_t ev;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess || cudaEventRecord(ev, s->stream) != cudaSuccess)
        return nccl_fail(c, what, "the GPU could not record an event");
    ct_status st = CT_OK;
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) break;
        ncclResult_t a = ncclSuccess;
        if (e != cudaErrorNotReady) { st = nccl_fail(c, what, cudaGetErrorString(e)); break; }
        if (nccl.CommGetAsyncError(s->comm, &a) != ncclSuccess || (a != ncclSuccess && a != ncclInProgress)) {
            st = nccl_fail(c, what, nccl.GetErrorString(a));
            break;
        }
        if (ct_now() - t0 > *c->timeout_s) { st = nccl_timeout(c, what); break; }
        ct_comm_poll_pause(t0);
    }
    cudaEventDestroy(ev);
    return st;
}

/* ---- the collectives ---- */

/* NCCL's pre-multiplied sum: each rank's buffer times its own scale, summed, in one pass. */
static ct_status nccl_sum_f32(ct_comm *c, float *buf, size_t n, float scale, const char *what)
{
    CT_TRY(ct_comm_refuse_if_broken());
    nccl_state *s = state_of(c);
    ncclRedOp_t op;
    const double t0 = ct_now();
    CT_TRY(nccl_settle(c, nccl.RedOpCreatePreMulSum(&op, &scale, ncclFloat, ncclScalarHostImmediate, s->comm), t0, what));
    /* a failure aborts the communicator, and its operator with it */
    CT_TRY(nccl_settle(c, nccl.AllReduce(buf, buf, n, ncclFloat, op, s->comm, s->stream), t0, what));
    CT_TRY(nccl_settle(c, nccl.RedOpDestroy(op, s->comm), t0, what));
    return nccl_wait_stream(c, t0, what);
}

static ct_status nccl_bcast(ct_comm *c, void *buf, size_t bytes, int root, const char *what)
{
    CT_TRY(ct_comm_refuse_if_broken());
    nccl_state *s = state_of(c);
    const double t0 = ct_now();
    CT_TRY(nccl_settle(c, nccl.Broadcast(buf, buf, bytes, ncclUint8, root, s->comm, s->stream), t0, what));
    return nccl_wait_stream(c, t0, what);
}

/* Finishes the outstanding work, bounded like every other wait (a failure aborts it),
 * or aborts at once: a peer may never answer. */
static void nccl_close(ct_comm *c, int failed, int exit_code)
{
    (void)exit_code;
    nccl_state *s = state_of(c);
    if (s->comm && (failed || ct_comm_broken())) nccl.CommAbort(s->comm);
    else if (s->comm && nccl_settle(c, nccl.CommFinalize(s->comm), ct_now(), "closing NCCL") == CT_OK) nccl.CommDestroy(s->comm);
    free(s);
    free(c);
}

static const ct_comm_fns nccl_fns = {
    .name = "NCCL", .device_memory = 1,
    .sum_f32 = nccl_sum_f32, .bcast = nccl_bcast,
    .close = nccl_close,   /* host values go over MPI: no sum_f64, min_int or gather */
};

/* ---- the start ---- */

/* NCCL takes one GPU per rank (two ranks on one GPU: "invalid usage" at its start, naming
 * nothing): the ranks compare their GPUs' UUIDs first, and a shared one is one line naming
 * the ranks and the fix, on every rank alike. */
static ct_status check_gpus_distinct(ct_comm *over)
{
    struct cudaDeviceProp prop;
    int dev = -1;
    ct_status st = CT_OK;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();
        st = ct_fail(CT_ENODEV, "rank %d: the CUDA runtime names no current GPU", over->rank);
    }
    unsigned char mine[16];
    unsigned char *all = st == CT_OK ? ct_malloc((size_t)over->size * sizeof mine, "GPU ids") : NULL;   /* [size][16] */
    if (st == CT_OK && !all) st = CT_ENOMEM;
    st = ct_comm_agree(over, st);   /* every rank goes on to the gather, or none */
    if (st != CT_OK) { free(all); return st; }
    memcpy(mine, prop.uuid.bytes, sizeof mine);
    st = ct_comm_gather(over, mine, all, sizeof mine, "comparing the ranks' GPUs");
    for (int i = 0; st == CT_OK && i < over->size; i++)
        for (int j = i + 1; st == CT_OK && j < over->size; j++)
            if (!memcmp(all + (size_t)i * sizeof mine, all + (size_t)j * sizeof mine, sizeof mine)) {
                st = ct_fail(CT_EINVAL, "ranks %d and %d are on one GPU, %s: NCCL needs a GPU of its own for each rank; start at "
                             "most as many ranks on a machine as it has GPUs, or give each rank its own with CUDA_VISIBLE_DEVICES",
                             i, j, prop.name);
                over->agreed_failure = 1;   /* every rank gathered the same ids and stops on the same pair */
            }
    free(all);
    return st;
}

/* Makes the communicator once every rank holds rank 0's id. */
static ct_status nccl_start(ct_comm *c, ncclUniqueId id)
{
    nccl_state *s = state_of(c);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;   /* every wait polled, under --dist-timeout (nccl_settle) */
    ncclResult_t r = nccl.CommInitRankConfig(&s->comm, c->size, id, c->rank, &cfg);
    ct_status st = CT_OK;
    if (r == ncclInProgress && s->comm) st = nccl_settle(c, r, ct_now(), "starting NCCL (ncclCommInitRankConfig)");
    else if (r != ncclSuccess) {
        if (s->comm) nccl.CommAbort(s->comm);   /* a half-made communicator: its resources go */
        s->comm = NULL;
        st = ct_fail(CT_EIO, "NCCL could not start: %s", nccl.GetErrorString(r));
    }
    if (st != CT_OK)
        st = ct_fail(st, "%s (is each rank on its own GPU? --device gpu picks the rank's GPU on its machine)", ct_last_error());
    return st;
}

ct_status ct_comm_nccl_open(ct_comm **out, ct_comm *over, struct CUstream_st *stream)
{
    *out = NULL;
    CT_TRY(ct_comm_refuse_if_broken());
    CT_TRY(ct_comm_agree(over, ct_comm_nccl_load()));   /* every rank, or none: the others must not wait */
    CT_TRY(check_gpus_distinct(over));
    ncclUniqueId id;
    ct_status st = CT_OK;
    if (over->rank == 0 && nccl.GetUniqueId(&id) != ncclSuccess) st = ct_fail(CT_EIO, "NCCL could not make its id (ncclGetUniqueId)");
    CT_TRY(ct_comm_agree(over, st));
    CT_TRY(ct_comm_bcast(over, &id, sizeof id, 0, "the NCCL id"));
    ct_comm *c = ct_calloc(1, sizeof *c, "the NCCL communicator");
    nccl_state *s = c ? ct_calloc(1, sizeof *s, "the NCCL communicator") : NULL;
    if (!s) st = CT_ENOMEM;
    if (st == CT_OK) {
        *c = (ct_comm){ .fns = &nccl_fns, .rank = over->rank, .size = over->size, .local_rank = over->local_rank,
                        .local_size = over->local_size, .timeout_s = over->timeout_s, .impl = s };
        s->stream = stream;
        st = nccl_start(c, id);
    }
    if (st == CT_OK) *out = c;
    else { free(s); free(c); }
    return ct_comm_agree(over, st);
}

#else   /* ---- no NCCL in this build ---- */

int ct_comm_nccl_compiled(void) { return 0; }
ct_status ct_comm_nccl_load(void)
{
    return ct_fail(CT_ENODEV, "this ctrain was built without NCCL (make NCCL=1 with nccl.h, the GPU backend and MPI)");
}
const char *ct_comm_nccl_describe(char *buf, size_t n) { snprintf(buf, n, "no NCCL in this build"); return buf; }
ct_status ct_comm_nccl_open(ct_comm **out, ct_comm *over, struct CUstream_st *stream)
{
    (void)over; (void)stream;
    *out = NULL;
    return ct_comm_nccl_load();
}

#endif
