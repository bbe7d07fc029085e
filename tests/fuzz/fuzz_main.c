/* fuzz_main.c - the libFuzzer entry of one fuzz target (tests/fuzz/targets.h):
 * built once per target with -DFUZZ_TARGET="name" (`make fuzz`). Each input is
 * written to a file in a private temporary directory and read by the target; a
 * failure whose message breaks the promise (one line naming the file) aborts, so
 * libFuzzer keeps it as a crash like any other. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "tests/fuzz/targets.h"
#include "io/h5.h"
#include "io/h5probe.h"

#ifndef FUZZ_TARGET
#error "build with -DFUZZ_TARGET=\"name\""
#endif

static char tmp[64], scratch[96], input[128];   /* the input in tmp, the target's files in tmp/scratch */
static fuzz_fn run;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* At exit: the input, whatever the target left in scratch/, and both directories. */
static void remove_tmp(void)
{
    DIR *d = opendir(scratch);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", scratch, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(scratch);
    unlink(input);
    rmdir(tmp);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    if (!strcmp(FUZZ_TARGET, "json")) run = fuzz_json;
    else {
        const fuzz_target *t = fuzz_target_find(FUZZ_TARGET);
        if (!t) { fprintf(stderr, "fuzz: no target %s\n", FUZZ_TARGET); exit(2); }
        run = t->run;
    }
    snprintf(tmp, sizeof tmp, "/tmp/ctrain-fuzz-XXXXXX");
    if (!mkdtemp(tmp)) { perror("fuzz: mkdtemp"); exit(2); }
    snprintf(input, sizeof input, "%s/input-" FUZZ_TARGET, tmp);
    snprintf(scratch, sizeof scratch, "%s/scratch", tmp);
    if (mkdir(scratch, 0700) != 0) { perror("fuzz: mkdir"); exit(2); }
    atexit(remove_tmp);
    ct_h5_quiet();
    ct_h5_probe_enable(0);   /* the readers meet every input in this process: that is what is fuzzed */
    /* what the readers print on success (time --compare's table) is not the fuzzer's business */
    if (!freopen("/dev/null", "w", stdout)) exit(2);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(input, "wb");
    if (!f) { perror("fuzz: writing the input"); abort(); }
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
    long open_before = fuzz_h5_open_objects();
    if (run(input, scratch) != 0 || fuzz_h5_left_open(open_before) != 0) {
        fprintf(stderr, "fuzz %s: broken promise: %s\n", FUZZ_TARGET, fuzz_why());
        abort();
    }
    return 0;
}
