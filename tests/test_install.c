/* test_install.c - the installed library as another program meets it: runs
 * tests/install_check.sh (make install into temporary folders, the tree with the
 * public headers only, each compiling on its own, the soname, ctrain.pc, the man
 * page, make uninstall, and examples/train_small.c built with pkg-config against
 * libctrain.so and libctrain.a, examples/train_speakers.c against libctrain.so,
 * each trained, learning) and shows its lines; the case fails when the script does.
 *
 * It runs from the source tree only (it calls make), so it is skipped, saying
 * why, where there is none (the tarball of `make dist`) and in a SAN=1 build:
 * make install installs the optimised build, which `make test` checks.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test.h"

#define CASE "install/make install (the public headers only) and uninstall; examples/train_small.c (shared and static) and train_speakers.c built with pkg-config learn"

#if defined(__SANITIZE_ADDRESS__)
#define SAN_BUILD 1
#else
#define SAN_BUILD 0
#endif
#ifdef CT_HAVE_CUDA
#define CUDA_BUILD 1
#else
#define CUDA_BUILD 0
#endif

void suite_install(void)
{
    if (SAN_BUILD) {
        t_skip("%s (SAN=1: make install installs the optimised build, not this one; make test without SAN=1 runs it)", CASE);
        return;
    }
    if (access("Makefile", R_OK) != 0 || access("tests/install_check.sh", R_OK) != 0) {
        t_skip("%s (no source tree here: it runs make; make test in the source runs it)", CASE);
        return;
    }
    t_case(CASE);
    char cmd[64], line[1024];
    int failed = 0;
    snprintf(cmd, sizeof cmd, "sh tests/install_check.sh %d 2>&1", CUDA_BUILD);
    FILE *p = popen(cmd, "r");
    if (!t_check(p != NULL, "cannot run %s", cmd)) return;
    while (fgets(line, sizeof line, p)) {
        printf("  %s", line);
        if (strncmp(line, "FAILED", 6) == 0) failed++;
    }
    fflush(stdout);
    int st = pclose(p);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    t_check(rc == 0 && failed == 0, "tests/install_check.sh exited %d with %d failed check(s), shown above", rc, failed);
}
