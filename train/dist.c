/* dist.c - data-parallel training's collectives (see dist.h), on the communicator
 * interface (comm/comm.h): MPI's for the host, NCCL's for the GPU's buffers. This file
 * calls no MPI or NCCL function itself, and has no #ifdef: a build without MPI has no
 * communicator, so one rank, and every collective here returns at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train/dist.h"

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

/* ---- the job ---- */

ct_status ct_dist_init(ct_dist *d)
{
    memset(d, 0, sizeof *d);
    ct_comm_launcher_view(&d->rank, &d->size, &d->local_rank, &d->local_size);   /* who says what when the start fails */
    d->timeout_s = CT_DIST_TIMEOUT_DEFAULT;
    d->check_every = 1;
    CT_TRY(ct_comm_mpi_open(&d->comm, &d->timeout_s));   /* the communicator reads d->timeout_s at each wait */
    if (!d->comm) return CT_OK;   /* one process */
    d->mpi = 1;
    d->rank = d->comm->rank;
    d->size = d->comm->size;
    d->local_rank = d->comm->local_rank;
    d->local_size = d->comm->local_size;
    return CT_OK;
}

ct_status ct_dist_start(ct_dist *d)
{
    ct_status st = ct_dist_init(d);
    if (st != CT_OK) {   /* every rank fails alike here: rank 0 says why */
        d->agreed_failure = 1;
        return st;
    }
    if (d->rank != 0 && !freopen("/dev/null", "w", stdout))   /* only rank 0 prints */
        return ct_fail(CT_EIO, "rank %d: cannot silence its output (/dev/null)", d->rank);
    return ct_dist_check_binary(d);
}

void ct_dist_finalize(ct_dist *d, int failed, int exit_code)
{
    ct_dist_nccl_close(d, failed);
    if (!d->comm) return;
    /* a failure every rank knows of lets each finish on its own; one alone ends the job */
    int alone = failed && !d->agreed_failure && !d->comm->agreed_failure;
    ct_comm_close(d->comm, alone, exit_code);
    d->comm = NULL;
    d->mpi = 0;
}

const char *ct_dist_backend(void) { return ct_comm_mpi_describe(); }
int ct_dist_compiled(void) { return ct_comm_mpi_compiled(); }

/* An agreement or comparison of the communicator that every rank stopped on alike:
 * recorded on d too (cli_reports: only rank 0 then prints it). */
static ct_status note_agreed(const ct_dist *d, ct_status st)
{
    if (d->comm->agreed_failure) ((ct_dist *)d)->agreed_failure = 1;
    return st;
}

/* ---- collectives on the host ---- */

ct_status ct_dist_sum_f64(const ct_dist *d, double *buf, int n, const char *what)
{
    if (!d || d->size == 1) return CT_OK;
    return ct_comm_sum_f64(d->comm, buf, (size_t)n, what);
}

ct_status ct_dist_sum_f32(const ct_dist *d, float *buf, size_t n, const char *what)
{
    if (!d || d->size == 1) return CT_OK;
    return ct_comm_sum_f32(d->comm, buf, n, 1.0f, what);
}

ct_status ct_dist_bcast(const ct_dist *d, void *buf, size_t bytes, const char *what)
{
    if (!d || d->size == 1 || bytes == 0) return CT_OK;
    return ct_comm_bcast(d->comm, buf, bytes, 0, what);
}

ct_status ct_dist_agree(const ct_dist *d, ct_status st)
{
    if (!d || d->size == 1) return st;
    return note_agreed(d, ct_comm_agree(d->comm, st));
}

ct_status ct_dist_check_same(const ct_dist *d, uint64_t hash, const char *what, const char *fix)
{
    if (!d || d->size == 1) return CT_OK;
    return note_agreed(d, ct_comm_check_same(d->comm, hash, what, fix));
}

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

ct_status ct_dist_check_binary(const ct_dist *d)
{
    if (!d || d->size == 1) return CT_OK;
    uint64_t h = 0;
    ct_status st = binary_hash(&h);
    CT_TRY(ct_dist_agree(d, st));
    return ct_dist_check_same(d, h, "the ctrain binary", "run the same build of ctrain on every machine");
}

/* ---- collectives on the device's buffers ---- */

/* NCCL carries them when it was started for a GPU; the CPU's are host memory, which MPI
 * takes as they are; a GPU without NCCL copies them to the host and back. */
ct_status ct_dist_sum_device(ct_dist *d, const ct_backend *be, float *buf, size_t n, float scale, const char *what)
{
    if (!d || !d->comm) return CT_OK;
    if (d->gpu_comm && !be->host_memory) {   /* also with one rank: what gpu-check's NCCL step runs */
        CT_TRY(be->ops->sync(be));   /* the gradients are complete */
        return ct_comm_sum_f32(d->gpu_comm, buf, n, scale, what);
    }
    if (d->size == 1) return CT_OK;
    if (be->host_memory) return ct_comm_sum_f32(d->comm, buf, n, scale, what);
    float *host = ct_malloc(n * sizeof *host + 1, "all-reduce staging");
    if (!host) return CT_ENOMEM;
    ct_status st = be->ops->download(be, host, buf, n * sizeof *host);
    if (st == CT_OK) st = ct_comm_sum_f32(d->comm, host, n, scale, what);
    if (st == CT_OK) st = be->ops->upload(be, buf, host, n * sizeof *host);
    free(host);
    return st;
}

ct_status ct_dist_bcast_device(ct_dist *d, const ct_backend *be, float *buf, size_t n, const char *what)
{
    if (!d || d->size == 1 || n == 0) return CT_OK;
    if (d->gpu_comm && !be->host_memory) {
        CT_TRY(be->ops->sync(be));
        return ct_comm_bcast(d->gpu_comm, buf, n * sizeof *buf, 0, what);
    }
    if (be->host_memory) return ct_dist_bcast(d, buf, n * sizeof *buf, what);
    float *host = ct_malloc(n * sizeof *host, "broadcast staging");
    if (!host) return CT_ENOMEM;
    ct_status st = be->ops->download(be, host, buf, n * sizeof *host);
    if (st == CT_OK) st = ct_dist_bcast(d, host, n * sizeof *host, what);
    if (st == CT_OK) st = be->ops->upload(be, buf, host, n * sizeof *host);
    free(host);
    return st;
}

ct_status ct_dist_nccl_open(ct_dist *d, const ct_backend *be, struct CUstream_st *stream)
{
    if (!d || !d->comm || be->host_memory || d->gpu_comm || !ct_comm_nccl_compiled()) return CT_OK;
    return note_agreed(d, ct_comm_nccl_open(&d->gpu_comm, d->comm, stream));
}

void ct_dist_nccl_close(ct_dist *d, int failed)
{
    if (!d || !d->gpu_comm) return;
    ct_comm_close(d->gpu_comm, failed, 0);
    d->gpu_comm = NULL;
}
