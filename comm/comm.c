/* comm.c - what every communicator shares (see comm.h): the calls through its table,
 * the agreement and the comparison built on the host collectives, and the job's
 * broken state that a failed collective leaves behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "comm/comm.h"
#include "core/clock.h"

/* ---- the table ---- */

ct_status ct_comm_sum_f32(ct_comm *c, float *buf, size_t n, float scale, const char *what)
{
    CT_ASSERT(c && c->fns->sum_f32);
    return c->fns->sum_f32(c, buf, n, scale, what);
}

ct_status ct_comm_bcast(ct_comm *c, void *buf, size_t bytes, int root, const char *what)
{
    CT_ASSERT(c && c->fns->bcast && root >= 0 && root < c->size);
    return c->fns->bcast(c, buf, bytes, root, what);
}

ct_status ct_comm_sum_f64(ct_comm *c, double *buf, size_t n, const char *what)
{
    CT_ASSERT(c && c->fns->sum_f64);
    return c->fns->sum_f64(c, buf, n, what);
}

ct_status ct_comm_min_int(ct_comm *c, int *value, const char *what)
{
    CT_ASSERT(c && c->fns->min_int);
    return c->fns->min_int(c, value, what);
}

ct_status ct_comm_gather(ct_comm *c, const void *mine, void *all, size_t bytes, const char *what)
{
    CT_ASSERT(c && c->fns->gather);
    return c->fns->gather(c, mine, all, bytes, what);
}

void ct_comm_close(ct_comm *c, int failed, int exit_code)
{
    if (c) c->fns->close(c, failed, exit_code);
}

/* ---- the job's state ---- */

/* A collective that failed or timed out leaves its communicator unusable, and the job
 * with it: nothing more is asked of the other ranks, and its message is kept, because
 * the first failure's words are what the user needs to read. One job per process, so
 * one state. */
static int job_broken;
static char broken_msg[1024];

ct_status ct_comm_mark_broken(ct_status st)
{
    job_broken = 1;
    snprintf(broken_msg, sizeof broken_msg, "%s", ct_last_error());
    return st;
}

int ct_comm_broken(void) { return job_broken; }

ct_status ct_comm_refuse_if_broken(void)
{
    if (!job_broken) return CT_OK;
    return ct_fail(CT_EIO, "%s", broken_msg);
}

void ct_comm_poll_pause(double t0)
{
    if (ct_now() - t0 > 1e-3) {
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
}

/* ---- agreement and comparison, on the host collectives ---- */

/* Each rank offers its own number when it failed and `size` when not: the least is the
 * first failed rank, whose message and status then go to every rank. */
ct_status ct_comm_agree(ct_comm *c, ct_status st)
{
    if (job_broken) return st;   /* after a timeout nothing more is asked of the others */
    char msg[1024];
    if (st != CT_OK) snprintf(msg, sizeof msg, "%s", ct_last_error());
    int first = st != CT_OK ? c->rank : c->size;
    CT_TRY(ct_comm_min_int(c, &first, "the ranks' agreement on how the start went"));
    if (first == c->size) return CT_OK;
    int code = (int)st;
    CT_TRY(ct_comm_bcast(c, msg, sizeof msg, first, "the failed rank's message"));
    CT_TRY(ct_comm_bcast(c, &code, sizeof code, first, "the failed rank's message"));
    c->agreed_failure = 1;   /* every rank knows: each can finish on its own */
    if (first == 0) return ct_fail((ct_status)code, "%s", msg);   /* rank 0 prints: its own words */
    return ct_fail((ct_status)code, "rank %d: %s", first, msg);
}

ct_status ct_comm_check_same(ct_comm *c, uint64_t value, const char *what, const char *fix)
{
    CT_TRY(ct_comm_refuse_if_broken());
    uint64_t *all = ct_malloc((size_t)c->size * sizeof *all, "hashes");
    if (!all) return CT_ENOMEM;
    char tag[160];
    snprintf(tag, sizeof tag, "comparing %s across ranks", what);
    ct_status st = ct_comm_gather(c, &value, all, sizeof value, tag);
    for (int r = 1; st == CT_OK && r < c->size; r++)
        if (all[r] != all[0]) {
            st = ct_fail(CT_EINVAL, "%s differs between rank 0 and rank %d: %s", what, r, fix);
            c->agreed_failure = 1;   /* every rank gathered the same values and stops on the same rank */
        }
    free(all);
    return st;
}
