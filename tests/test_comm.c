/* test_comm.c - the communicator interface (comm/comm.h) itself, on MPI's implementation
 * across 2 ranks, run from the mpi suite (tests/test_dist.c).
 *
 * The mpi suite starts this test binary under `mpirun -np 2` with CT_COMM_TEST set;
 * each rank then runs the rank's cases below instead of the suite (t_comm_rank) and
 * prints its PASS/FAIL lines, which the suite's case reads back:
 *
 *   - every collective of the table, with values whose results are exact in float:
 *     the all-reduce with a different scale on each rank, the double sum, a
 *     broadcast from rank 1, the minimum, the gather in rank order;
 *   - the agreement: CT_OK when no rank failed; else the first failed rank's status
 *     and message on both ranks, prefixed "rank 1: " when it is rank 1's;
 *   - the comparison: equal values pass, different ones name rank 1 on both ranks;
 *   - a timeout: rank 1 never answers, rank 0's sum gives up after its 1 s bound
 *     naming what it waited for, every later collective fails at once with that
 *     message, and closing the broken job ends it (MPI_Abort with the exit code).
 *
 * Without MPI in the build, the same open says in one line that the build cannot run
 * several ranks. */
#define _XOPEN_SOURCE 700   /* realpath */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test.h"
#include "comm/comm.h"
#include "core/clock.h"

/* ---- in a rank ---- */

static double timeout_s = 60;   /* the communicator's bound, read at every wait */

static void rank_collectives(ct_comm *c)
{
    const int r = c->rank;
    t_case("comm/rank %d: sum_f32 with each rank's own scale", r);
    float f[5];
    for (int i = 0; i < 5; i++) f[i] = (float)((r + 1) * (i + 1));   /* rank 0: 1..5, rank 1: 2..10 */
    ct_status st = ct_comm_sum_f32(c, f, 5, r == 0 ? 0.25f : 0.75f, "the scaled sum");
    t_check(st == CT_OK, "%s", ct_last_error());
    for (int i = 0; i < 5; i++) t_check(f[i] == 1.75f * (float)(i + 1), "[%d] = %g, want %g", i, f[i], 1.75 * (i + 1));

    t_case("comm/rank %d: sum_f64", r);
    double d[3] = { r, 10.0 * r, 0.5 };
    st = ct_comm_sum_f64(c, d, 3, "the double sum");
    t_check(st == CT_OK && d[0] == 1.0 && d[1] == 10.0 && d[2] == 1.0, "%s: %g %g %g", ct_last_error(), d[0], d[1], d[2]);

    t_case("comm/rank %d: bcast from rank 1", r);
    char text[32];
    snprintf(text, sizeof text, "from rank %d", r);
    st = ct_comm_bcast(c, text, sizeof text, 1, "the broadcast");
    t_check(st == CT_OK && !strcmp(text, "from rank 1"), "%s: '%s'", ct_last_error(), text);

    t_case("comm/rank %d: min_int", r);
    int v = r == 0 ? 7 : 3;
    st = ct_comm_min_int(c, &v, "the minimum");
    t_check(st == CT_OK && v == 3, "%s: %d", ct_last_error(), v);

    t_case("comm/rank %d: gather in rank order", r);
    uint64_t mine = 100u * (uint64_t)r + 1, all[2] = { 0, 0 };
    st = ct_comm_gather(c, &mine, all, sizeof mine, "the gather");
    t_check(st == CT_OK && all[0] == 1 && all[1] == 101, "%s: %llu %llu", ct_last_error(),
            (unsigned long long)all[0], (unsigned long long)all[1]);
}

static void rank_agreement(ct_comm *c)
{
    const int r = c->rank;
    t_case("comm/rank %d: agree: every rank well is CT_OK", r);
    ct_status st = ct_comm_agree(c, CT_OK);
    t_check(st == CT_OK && !c->agreed_failure, "%d: %s", (int)st, ct_last_error());

    t_case("comm/rank %d: agree: rank 1's failure, with its message, on both ranks", r);
    st = ct_comm_agree(c, r == 1 ? ct_fail(CT_EIO, "disk full") : CT_OK);
    t_check(st == CT_EIO && !strcmp(ct_last_error(), "rank 1: disk full") && c->agreed_failure, "%d: '%s'", (int)st, ct_last_error());

    t_case("comm/rank %d: agree: both failed, rank 0's is the one, in its own words", r);
    st = ct_comm_agree(c, r == 0 ? ct_fail(CT_EINVAL, "bad option") : ct_fail(CT_EIO, "disk full"));
    t_check(st == CT_EINVAL && !strcmp(ct_last_error(), "bad option"), "%d: '%s'", (int)st, ct_last_error());

    t_case("comm/rank %d: check_same: equal values pass, different ones name rank 1", r);
    st = ct_comm_check_same(c, 42, "the answer", "ask again");
    t_check(st == CT_OK, "equal: %s", ct_last_error());
    st = ct_comm_check_same(c, 42 + (uint64_t)r, "the answer", "ask again");
    t_check(st == CT_EINVAL && !strcmp(ct_last_error(), "the answer differs between rank 0 and rank 1: ask again"),
            "different: %d: '%s'", (int)st, ct_last_error());
}

/* Rank 1 never answers; rank 0 gives up after 1 s and ends the job. */
static void rank_timeout(ct_comm *c)
{
    if (c->rank == 1) {
        sleep(60);   /* rank 0's MPI_Abort ends this process long before */
        return;
    }
    t_case("comm/rank 0: a rank that never answers: the sum gives up after the bound, naming it");
    timeout_s = 1;
    double t0 = ct_now();
    double d[1] = { 1 };
    ct_status st = ct_comm_sum_f64(c, d, 1, "the lonely sum");
    double waited = ct_now() - t0;
    t_check(st == CT_EIO && strstr(ct_last_error(), "no answer from the other ranks for 1 s in the lonely sum")
            && strstr(ct_last_error(), "--dist-timeout"), "%d: %s", (int)st, ct_last_error());
    t_check(waited >= 1.0 && waited < 10.0, "waited %.1f s with a 1 s bound", waited);
    t_check(ct_comm_broken(), "the job is not marked broken");

    t_case("comm/rank 0: after the timeout every collective fails at once, with the first failure's message");
    t0 = ct_now();
    float f[1] = { 1 };
    st = ct_comm_sum_f32(c, f, 1, 1.0f, "a later sum");
    t_check(st == CT_EIO && strstr(ct_last_error(), "in the lonely sum") && ct_now() - t0 < 0.5, "%d: %s", (int)st, ct_last_error());
    st = ct_comm_agree(c, CT_OK);   /* asks nothing of the others: its own status */
    t_check(st == CT_OK, "agree after the timeout: %d", (int)st);

    t_case("comm/rank 0: closing the broken job ends it (MPI_Abort 7)");
    fflush(stdout);
    ct_comm_close(c, 0, 7);
    t_check(0, "ct_comm_close returned on a broken job");
}

int t_comm_rank(void)
{
    const char *mode = getenv("CT_COMM_TEST");
    if (!mode || !*mode) return 0;
    ct_comm *c = NULL;
    t_case("comm/a rank: ct_comm_mpi_open joins the job");
    ct_status st = ct_comm_mpi_open(&c, &timeout_s);
    if (!t_check(st == CT_OK && c, "%s", ct_last_error())) return 1;
    t_check(c->size == 2 && c->rank >= 0 && c->rank < 2 && c->local_size == 2 && c->local_rank == c->rank
            && !strcmp(c->fns->name, "MPI") && !c->fns->device_memory,
            "rank %d of %d, local %d of %d, %s", c->rank, c->size, c->local_rank, c->local_size, c->fns->name);
    if (!strcmp(mode, "timeout")) rank_timeout(c);
    else { rank_collectives(c); rank_agreement(c); }
    t_case("comm/rank %d: closing", c->rank);
    ct_comm_close(c, 0, 0);
    return 1;
}

/* ---- the suite's side ---- */

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* Runs `CT_COMM_TEST=mode mpirun -np 2 THIS-BINARY mpi`; its output in out, the exit status. */
static int run_ranks(const char *mpirun, const char *mode, char *out, size_t n)
{
    char self[4096], cmd[8192];
    if (!realpath("/proc/self/exe", self)) { snprintf(out, n, "cannot resolve /proc/self/exe"); return -1; }
    snprintf(cmd, sizeof cmd, "cd '%s' && CT_COMM_TEST=%s timeout 120 %s -np 2 '%s' mpi 2>&1", t_scratch_dir(), mode, mpirun, self);
    FILE *p = popen(cmd, "r");
    if (!p) { out[0] = '\0'; return -1; }
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void t_comm_cases(const char *mpirun)
{
    static char out[1 << 16];
    t_case("mpi/comm: the MPI communicator's collectives, agreement and comparison on 2 ranks");
    int rc = run_ranks(mpirun, "collectives", out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(count(out, "PASS comm/rank ") == 2 * 10 && count(out, "PASS comm/a rank") == 2 && !strstr(out, "FAIL"),
            "each rank's 11 cases pass (%d + %d PASS lines): %s", count(out, "PASS comm/rank "), count(out, "PASS comm/a rank"), out);

    t_case("mpi/comm: a rank that never answers: the other times out, and closing ends the job");
    double t0 = ct_now();
    rc = run_ranks(mpirun, "timeout", out, sizeof out);
    double took = ct_now() - t0;
    t_check(rc == 7, "mpirun exit %d, want MPI_Abort's 7: %s", rc, out);
    t_check(took < 40, "the job took %.0f s: rank 1's 60 s sleep was not ended by the abort", took);
    t_check(strstr(out, "PASS comm/rank 0: a rank that never answers") && strstr(out, "PASS comm/rank 0: after the timeout")
            && !strstr(out, "FAIL"), "rank 0's cases: %s", out);
}

void t_comm_without_mpi(void)
{
    t_case("mpi/comm: a build without MPI launched as 2 ranks says so in one line");
    const char *old = getenv("OMPI_COMM_WORLD_SIZE");
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    ct_comm *c = (ct_comm *)1;
    ct_status st = ct_comm_mpi_open(&c, &timeout_s);
    if (old) setenv("OMPI_COMM_WORLD_SIZE", old, 1); else unsetenv("OMPI_COMM_WORLD_SIZE");
    t_check(st == CT_EINVAL && !c && strstr(ct_last_error(), "built without MPI") && strstr(ct_last_error(), "make MPI=1"),
            "%d: %s", (int)st, ct_last_error());
    t_case("mpi/comm: a build without MPI, not launched by mpirun, has no communicator (one process)");
    c = (ct_comm *)1;
    st = ct_comm_mpi_open(&c, &timeout_s);
    t_check(st == CT_OK && !c, "%d: %s", (int)st, ct_last_error());
}
