/* test_harness.c - tests of the test runner itself: CT_REQUIRE_GPU=1 turns a GPU
 * case that would SKIP into a failure (tests/test_main.c, t_skip).
 *
 * On a machine without a usable GPU (or a build without CUDA) it runs this very
 * test binary on the `gpu` suite as a subprocess, once with CT_REQUIRE_GPU=0
 * (the GPU cases SKIP, exit 0) and once with CT_REQUIRE_GPU=1 (every one of them
 * FAILs saying why, nothing is skipped, exit non-zero). Where a GPU opens there
 * is nothing to skip, so the check has nothing to show and says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test.h"
#include "cuda/device.h"

static char out0[1 << 16], out1[1 << 16];

/* Runs `CT_REQUIRE_GPU=<req> <exe> gpu`, output into buf; returns the exit status or -1. */
static int run_gpu_suite(const char *exe, const char *req, char *buf, size_t n)
{
    char quoted[4 * 4096 + 3], cmd[4 * 4096 + 64];
    size_t k = 0;
    quoted[k++] = '\'';                        /* 'path', each ' written as '\'' */
    for (const char *c = exe; *c; c++) {
        if (*c == '\'') { memcpy(quoted + k, "'\\''", 4); k += 4; }
        else quoted[k++] = *c;
    }
    quoted[k++] = '\'';
    quoted[k] = '\0';
    snprintf(cmd, sizeof cmd, "CT_REQUIRE_GPU=%s %s gpu 2>&1", req, quoted);
    FILE *p = popen(cmd, "r");
    if (!p) { buf[0] = '\0'; return -1; }
    size_t got = fread(buf, 1, n - 1, p);
    buf[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Lines of buf starting with prefix (and containing `also`, when given). */
static int count_lines(const char *buf, const char *prefix, const char *also)
{
    int n = 0;
    const char *l = buf;
    while (*l) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
        if (strncmp(line, prefix, strlen(prefix)) == 0 && (!also || strstr(line, also))) n++;
        l += len + (e != NULL);
    }
    return n;
}

void suite_harness(void)
{
    t_case("harness/CT_REQUIRE_GPU=1 makes a GPU case that would SKIP a failure");
    ct_gpu *g = NULL;
    if (ct_gpu_open(&g, 0, NULL) == CT_OK) {
        ct_gpu_close(g);
        printf("  (a GPU is open here: no GPU case skips, so there is nothing for CT_REQUIRE_GPU to turn into a failure)\n");
        return;
    }
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (!t_check(len > 0, "cannot read /proc/self/exe")) return;
    exe[len] = '\0';

    int rc0 = run_gpu_suite(exe, "0", out0, sizeof out0);
    int skips = count_lines(out0, "SKIP gpu/", NULL);
    t_check(rc0 == 0, "CT_REQUIRE_GPU=0: the gpu suite exited %d, want 0:\n%s", rc0, out0);
    t_check(skips > 0, "CT_REQUIRE_GPU=0: no GPU here, yet no GPU case was skipped:\n%s", out0);

    int rc1 = run_gpu_suite(exe, "1", out1, sizeof out1);
    int fails = count_lines(out1, "FAIL gpu/", "CT_REQUIRE_GPU=1");
    t_check(rc1 == 1, "CT_REQUIRE_GPU=1: the gpu suite exited %d, want 1", rc1);
    t_check(fails == skips, "CT_REQUIRE_GPU=1: %d cases failed for CT_REQUIRE_GPU, want the %d that skip without it:\n%s",
            fails, skips, out1);
    t_check(count_lines(out1, "SKIP ", NULL) == 0 && !strstr(out1, "skipped"), "CT_REQUIRE_GPU=1: something was still skipped:\n%s", out1);
}
