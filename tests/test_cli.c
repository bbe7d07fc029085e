/* test_cli.c - the ctrain command line as a user meets it: help lists only
 * what exists, bad input gives a clear message and a non-zero exit (never a
 * crash), a short training run prints Keras's log format and writes a weights
 * file that HDF5 can read. The binary is $CTRAIN_BIN (set by tests/run.sh). */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test.h"
#include "io/h5.h"
#include "cuda/device.h"

static int matches(const char *text, const char *pattern)
{
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE | REG_NOSUB) != 0) return 0;
    int ok = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
}

void suite_cli(void)
{
    static char out[1 << 16];
    int rc;

    t_case("cli/help lists the commands that exist");
    rc = t_run_ctrain("--help", out, sizeof out);
    t_check(rc == 0, "exit %d", rc);
    t_check(strstr(out, "train MODEL") && strstr(out, "info"), "help text: %s", out);
    rc = t_run_ctrain("train --help", out, sizeof out);
    t_check(rc == 0 && strstr(out, "siamese-lstm") && strstr(out, "small-cnn"), "train --help (exit %d): %s", rc, out);
    rc = t_run_ctrain("train siamese-lstm --help", out, sizeof out);
    t_check(rc == 0 && strstr(out, "--hidden") && strstr(out, "--threads"), "siamese-lstm --help (exit %d)", rc);

    t_case("cli/bad input gives a clear error and a non-zero exit");
    struct { const char *args, *expect; } bad[] = {
        { "frobnicate", "unknown command 'frobnicate'" },
        { "train resnet", "unknown model 'resnet'" },
        { "train siamese-lstm --epochs 0", "--epochs: '0' is not an integer in [1," },
        { "train siamese-lstm --batch abc", "--batch: 'abc' is not an integer" },
        { "train siamese-lstm --lr nan", "--lr: 'nan' is not a number" },
        { "train siamese-lstm --optimizer adagrad", "adagrad" },
        { "train siamese-lstm --device gpu", NULL },   /* message depends on the build: checked below */
        { "train siamese-cnn --device gpu", NULL },
        { "train cnn --device gpu:0 --samples 64", NULL },
        { "train small-cnn --device cuda", NULL },
        { "eval siamese-lstm --model w.h5 --data f.h5 --trials t.txt --device gpu", NULL },
        { "eval siamese-cnn --model w.h5 --data f.h5 --trials t.txt --device gpu", NULL },
        { "eval cnn --model w.h5 --device gpu", NULL },
        { "train siamese-lstm --device gpu:x", "expected cpu, gpu, gpu:N" },
        { "train cnn --device tpu", "--device tpu: unknown device" },
        { "train small-cnn --device cpu --tf32", "--tf32 applies to the GPU" },
        { "eval cnn --model w.h5 --device cpu --deterministic", "--deterministic applies to the GPU" },
        { "train siamese-lstm --data /nonexistent/feats.h5", "/nonexistent/feats.h5" },
        { "train siamese-lstm --hidden", "needs a value" },
        { "train siamese-lstm --bogus 1", "unknown option '--bogus'" },
        { "train siamese-lstm --recurrent relu", "use sigmoid or hard_sigmoid" },
        { "train small-cnn --kernel 4", "must be odd" },
        { "info extra", "unexpected argument" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = t_run_ctrain(bad[i].args, out, sizeof out);
        t_check(rc > 0 && rc != 134, "`ctrain %s` exited %d", bad[i].args, rc);
        const char *expect = bad[i].expect ? bad[i].expect
                           : ct_gpu_compiled() ? "no NVIDIA GPU found" : "built without CUDA";
        t_check(strstr(out, expect) != NULL, "`ctrain %s`: message lacks \"%s\": %s", bad[i].args, expect, out);
    }

    t_case("cli/train siamese-lstm prints the Keras log and writes readable weights");
    char path[] = "/tmp/ctrain_cli_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    char args[512];
    snprintf(args, sizeof args, "train siamese-lstm --speakers 12 --utts 4 --pairs 64 --val-pairs 32 --epochs 2 "
             "--batch 16 --frames 10 --mels 6 --hidden 8 --embed 4 --threads 1 --out %s", path);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(matches(out, "^Train on 64 samples, validate on 32 samples$"), "no 'Train on' line: %s", out);
    t_check(matches(out, "^Epoch 1/2$") && matches(out, "^Epoch 2/2$"), "no 'Epoch k/2' lines: %s", out);
    t_check(matches(out, "^ - [0-9]+s - loss: [0-9]\\.[0-9]{4} - accuracy: [0-9]\\.[0-9]{4} - "
                         "val_loss: [0-9]\\.[0-9]{4} - val_accuracy: [0-9]\\.[0-9]{4}$"), "no Keras epoch line: %s", out);
    t_check(matches(out, "^CPU: .*threads? used$") && matches(out, "^BLAS: "), "no hardware header: %s", out);
    hid_t f;
    int nd = 0;
    size_t dims[CT_H5_DIMS_MAX];
    t_check(ct_h5_open(&f, path) == CT_OK, "weights file: %s", ct_last_error());
    if (f >= 0) {
        t_check(ct_h5_shape(f, "model/lstm_1/w_ih_l0", &nd, dims) == CT_OK && nd == 2 && dims[0] == 32 && dims[1] == 6,
                "model/lstm_1/w_ih_l0 should be [32, 6]");
        t_check(ct_h5_shape(f, "model/dense_1/w", &nd, dims) == CT_OK && nd == 2 && dims[0] == 4 && dims[1] == 8,
                "model/dense_1/w should be [4, 8]");
        ct_h5_close(f);
    }

    t_case("cli/an unwritable --out fails clearly and leaves no temp file");
    rc = t_run_ctrain("train small-cnn --samples 64 --val-samples 0 --epochs 1 --threads 1 --out /nonexistent-dir/w.h5", out, sizeof out);
    t_check(rc == 1 && strstr(out, "/nonexistent-dir/w.h5"), "exit %d: %s", rc, out);

    t_case("cli/an existing weights file survives a failed run");
    /* the same path, now with a run that fails before writing: the old file must be untouched */
    FILE *fp = fopen(path, "rb");
    long before = 0;
    if (fp) { fseek(fp, 0, SEEK_END); before = ftell(fp); fclose(fp); }
    snprintf(args, sizeof args, "train siamese-lstm --optimizer sgd --lr 1000 --speakers 12 --utts 4 --pairs 64 --val-pairs 32 --epochs 3 "
             "--batch 16 --frames 10 --mels 6 --hidden 8 --embed 4 --threads 1 --out %s", path);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 1 && strstr(out, "loss became") && strstr(out, "--lr"), "a diverging run must stop with a NaN message (exit %d): %s", rc, out);
    fp = fopen(path, "rb");
    long after = -1;
    if (fp) { fseek(fp, 0, SEEK_END); after = ftell(fp); fclose(fp); }
    t_check(before > 0 && after == before, "weights file changed size %ld -> %ld", before, after);
    unlink(path);
}
