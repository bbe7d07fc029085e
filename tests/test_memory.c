/* test_memory.c - long runs and memory limits, on the ctrain binary:
 *   - a 50-epoch run's resident memory (VmRSS, read from /proc after each epoch's
 *     log line) does not grow after the first epoch: everything a step needs is
 *     planned before it (core/arena.h), so nothing may accumulate per epoch;
 *   - under an address-space limit (ulimit -v) too small for the planned arena,
 *     `train` fails while planning, before its first epoch, with one line that
 *     says how many bytes it needed.
 * Both are skipped in the AddressSanitizer build: its quarantine holds freed
 * memory on purpose, and it reserves terabytes of address space at start. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

#define EPOCHS 50
/* The largest rise of VmRSS after epoch 10 over its value then (stdio buffers and the
 * like), and over the first epoch's. Each reading is taken at an epoch's log line; the
 * run directory's checkpoint is written after it, and the first few checkpoints raise
 * the allocator's high-water mark (glibc's mmap threshold rises to the freed file image's
 * size, so later images come from the heap): measured 2-3 MiB over epochs 1-5 with a
 * checkpoint per epoch, nothing without one, and flat from then on. */
#define FLAT_KIB 256
#define SETTLE_KIB 4096


static long rss_kib(pid_t pid)
{
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(p, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kib;
}

/* Starts `sh -c "exec CTRAIN ARGS"` with its stdout and stderr on a pipe and an
 * address-space limit (bytes, 0: none); returns the pid, the pipe in *out. */
static pid_t start(const char *args, long long as_limit, FILE **out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && exec %s %s", t_scratch_dir(), t_ctrain_bin(), args);   /* runs/ lands in the scratch folder */
    int pfd[2];
    if (pipe(pfd) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1); dup2(pfd[1], 2);
        close(pfd[0]); close(pfd[1]);
        if (as_limit > 0) {
            struct rlimit rl = { (rlim_t)as_limit, (rlim_t)as_limit };
            setrlimit(RLIMIT_AS, &rl);
        }
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    *out = fdopen(pfd[0], "r");
    return pid;
}

static int finish(pid_t pid, FILE *f)
{
    char sink[512];
    while (f && fgets(sink, sizeof sink, f)) { }
    if (f) fclose(f);
    int ws = 0;
    waitpid(pid, &ws, 0);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
}

static void case_flat(void)
{
    if (SANITIZED) {
        t_skip("memory/%d epochs: resident memory flat after the first (AddressSanitizer's quarantine keeps freed memory)", EPOCHS);
        return;
    }
    t_case("memory/%d epochs of cnn with its run directory: resident memory settles in the first epochs (within %d KiB) and is flat after epoch 10 (within %d KiB)", EPOCHS, SETTLE_KIB, FLAT_KIB);
    char args[512];
    snprintf(args, sizeof args, "train cnn --data synthetic --arch conv8k3,relu,maxpool2,flatten,dense10 --samples 512 "
             "--val-samples 64 --batch 64 --epochs %d --threads 1 --no-progress", EPOCHS);
    FILE *f = NULL;
    pid_t pid = start(args, 0, &f);
    long rss[EPOCHS] = { 0 };
    int n = 0;
    char line[512];
    while (f && n < EPOCHS && fgets(line, sizeof line, f))
        if (!strncmp(line, " - ", 3)) rss[n++] = rss_kib(pid);   /* epoch n just ended */
    int rc = finish(pid, f);
    t_check(rc == 0 && n == EPOCHS, "exit %d after %d epoch lines", rc, n);
    if (n < 2) return;
    long rise = 0;
    int worst = 1;
    if (n < 11) return;
    long settle = 0;
    for (int e = 1; e < n; e++) if (rss[e] - rss[0] > settle) settle = rss[e] - rss[0];
    for (int e = 10; e < n; e++) if (rss[e] - rss[9] > rise) { rise = rss[e] - rss[9]; worst = e; }
    printf("  VmRSS after epoch 1: %ld KiB, 2: %ld, 5: %ld, 10: %ld, %d: %ld; largest rise over epoch 1: %ld KiB, over epoch 10: %ld KiB (epoch %d)\n",
           rss[0], rss[1], rss[4], rss[9], n, rss[n - 1], settle, rise, worst + 1);
    t_check(rss[0] > 0, "VmRSS could not be read");
    t_check(settle <= SETTLE_KIB, "resident memory grew by %ld KiB over the first epoch's", settle);
    t_check(rise <= FLAT_KIB, "resident memory grew by %ld KiB after epoch 10 (epoch %d): it grows per epoch", rise, worst + 1);
}

static void case_ulimit(void)
{
    if (SANITIZED) {
        t_skip("memory/ulimit -v too small for the arena: fails while planning (AddressSanitizer needs more address space than any such limit)");
        return;
    }
    t_case("memory/ulimit -v too small for the planned arena: train fails while planning, naming the bytes it needed");
    /* batch 65536 of 28x28 images: the conv layer's output alone is 65536 x 8 x 26 x 26 floats (1.4 GB) */
    const char *args = "train cnn --data synthetic --arch conv8k3,relu,maxpool2,flatten,dense10 --samples 256 "
                       "--val-samples 64 --batch 65536 --epochs 1 --threads 1 --no-progress";
    FILE *f = NULL;
    pid_t pid = start(args, 3LL << 30, &f);   /* 3 GiB: room for the libraries (OpenBLAS's buffers, MPI), not for 5 GB of activations */
    char out[8192] = "", line[1024];
    size_t used = 0;
    while (f && fgets(line, sizeof line, f)) {
        size_t k = strlen(line);
        if (used + k < sizeof out) { memcpy(out + used, line, k + 1); used += k; }
    }
    if (f) fclose(f);
    int ws = 0;
    waitpid(pid, &ws, 0);
    int rc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    const char *msg = strstr(out, "out of memory allocating ");
    t_check(rc == 1, "exit %d (want 1): %s", rc, out);
    const char *nl = msg ? strchr(msg, '\n') : NULL;
    t_check(msg && strstr(msg, " bytes for ") && strstr(msg, "activations") && nl && nl[1] == '\0',
            "its last line is not 'out of memory allocating N bytes for ... activations ...': %s", out);
    t_check(!strstr(out, "Epoch 1/"), "it started an epoch before failing: %s", out);
    if (msg) printf("  %.*s", (int)strcspn(msg, "\n") + 1, msg);
}

void suite_memory(void)
{
    case_flat();
    case_ulimit();
}
