/* test_lock.c - two runs pointed at the same output (io/lock.h): the second
 * `ctrain train` (or `ctrain prep` on one store) refuses with one line naming the
 * first (its pid and command), writes nothing, and exits 1; a lock left by a run
 * killed with SIGKILL blocks nobody; a run that ends removes its lock file. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tests/test.h"
#include "io/lock.h"

static char tmp[64];

static const char *tpath(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, name);
    return buf[k];
}

static int exists(const char *p) { struct stat s; return stat(p, &s) == 0; }

#define RUN "train small-cnn --data synthetic --size 8 --filters 2 --samples 64 --val-samples 16 --batch 16 --threads 1"

static int one_line(const char *out) { const char *nl = strchr(out, '\n'); return nl && nl[1] == '\0'; }

static void case_held_here(void)
{
    t_case("lock/train refuses a --checkpoint or --out another run holds, naming it, and writes nothing");
    const char *ck = tpath("held.h5"), *w = tpath("held-w.h5");
    ct_path_lock l;
    ct_status st = ct_path_lock_take(&l, ck, "the test's own run", "--checkpoint");
    t_check(st == CT_OK, "take: %s", ct_last_error());
    char args[1024], out[4096], pid[32];
    snprintf(pid, sizeof pid, "pid %ld,", (long)getpid());
    snprintf(args, sizeof args, RUN " --epochs 1 --checkpoint %s", ck);
    int rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 1, "exit %d (want 1): %s", rc, out);
    t_check(one_line(out) && strstr(out, ck) && strstr(out, "in use by another run") && strstr(out, pid)
            && strstr(out, "the test's own run") && strstr(out, "--checkpoint"), "message: %s", out);
    t_check(!exists(ck), "%s was written", ck);
    ct_path_lock_release(&l);
    t_check(!exists(tpath("held.h5.lock")), "release left the lock file");

    st = ct_path_lock_take(&l, w, "the test's own run", "--out");
    snprintf(args, sizeof args, RUN " --epochs 1 --out %s", w);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 1 && one_line(out) && strstr(out, w) && strstr(out, "--out"), "--out: exit %d: %s", rc, out);
    t_check(!exists(w), "%s was written", w);
    ct_path_lock_release(&l);
}

static void case_two_runs(void)
{
    t_case("lock/two ctrain train on one --checkpoint: the second names the first; after kill -9 the stale lock blocks nobody");
    const char *ck = tpath("shared.h5"), *lk = tpath("shared.h5.lock");
    const char *bin = getenv("CTRAIN_BIN") ? getenv("CTRAIN_BIN") : "bin/ctrain";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec %s " RUN " --epochs 100000 --checkpoint %s > /dev/null 2>&1", bin, ck);
    fflush(stdout);
    pid_t first = fork();
    if (first == 0) { setenv("ASAN_OPTIONS", "detect_leaks=0", 1); execl("/bin/sh", "sh", "-c", cmd, (char *)NULL); _exit(127); }
    /* wait until the first run holds its lock (its line names its pid) */
    char want[32], line[512] = "";
    snprintf(want, sizeof want, "pid %ld,", (long)first);
    for (int i = 0; i < 600 && !strstr(line, want); i++) {
        FILE *f = fopen(lk, "r");
        line[0] = '\0';
        if (f) { if (!fgets(line, sizeof line, f)) line[0] = '\0'; fclose(f); }
        if (!strstr(line, want)) { struct timespec ts = { 0, 50000000 }; nanosleep(&ts, NULL); }
    }
    t_check(strstr(line, want) != NULL, "the first run's lock file never named it (%s)", line);
    char args[1024], out[4096];
    snprintf(args, sizeof args, RUN " --epochs 1 --checkpoint %s", ck);
    int rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 1 && one_line(out) && strstr(out, want) && strstr(out, "ctrain train small-cnn"), "second run: exit %d: %s", rc, out);
    kill(first, SIGKILL);
    int ws;
    waitpid(first, &ws, 0);
    t_check(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL, "the first run ended otherwise than by SIGKILL (status %d)", ws);
    t_check(exists(lk), "the killed run's lock file is gone (the stale case was not exercised)");
    unlink(ck);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "a run after the kill: exit %d: %.600s", rc, out);
    t_check(exists(ck), "the run after the kill wrote no checkpoint");
    t_check(!exists(lk), "the run after the kill left its lock file");
}

static void case_prep(void)
{
    t_case("lock/prep refuses a store another run is writing, naming it, and creates nothing");
    const char *store = tpath("feats.h5");
    char wav[256], cmd[1024], out[4096];
    snprintf(wav, sizeof wav, "%s/wav/id10001/vid", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp tests/fuzz/corpus/audio/seed-16k-mono.wav %s/00001.wav", wav, wav);
    t_check(system(cmd) == 0, "setup: %s", cmd);
    ct_path_lock l;
    t_check(ct_path_lock_take(&l, store, "the test's own writer", "--out") == CT_OK, "take: %s", ct_last_error());
    snprintf(cmd, sizeof cmd, "prep voxceleb --wav %s/wav --out %s --min-seconds 0.025", tmp, store);
    int rc = t_run_ctrain(cmd, out, sizeof out);
    t_check(rc == 1 && one_line(out) && strstr(out, store) && strstr(out, "the test's own writer") && strstr(out, "--out"),
            "exit %d: %s", rc, out);
    t_check(!exists(store), "%s was created", store);
    ct_path_lock_release(&l);
    rc = t_run_ctrain(cmd, out, sizeof out);
    t_check(rc == 0 && exists(store), "once released: exit %d: %.400s", rc, out);
    t_check(!exists(tpath("feats.h5.lock")), "prep left its lock file");
}

void suite_lock(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ctrain_lock_XXXXXX");
    if (!mkdtemp(tmp)) { t_case("lock/setup"); t_check(0, "mkdtemp failed"); return; }
    case_held_here();
    case_two_runs();
    case_prep();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("  could not remove %s\n", tmp);
}
