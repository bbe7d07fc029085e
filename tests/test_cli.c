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
#include "io/weights.h"
#include "cuda/device.h"
#include "layers/gemm_packed.h"

static int matches(const char *text, const char *pattern)
{
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE | REG_NOSUB) != 0) return 0;
    int ok = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
}

/* Runs `$CTRAIN_BIN ARGS` with stdout into out and stderr thrown away. */
static int run_stdout_only(const char *args, char *out, size_t n)
{
    const char *bin = getenv("CTRAIN_BIN");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", bin ? bin : "bin/ctrain", args);
    FILE *p = popen(cmd, "r");
    if (!p) { out[0] = '\0'; return -1; }
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* One grammar: --name=VALUE in every command, "--", the old spellings with their note,
 * progress bars only on stderr. `weights` is a siamese-lstm weights file. */
static void grammar(const char *weights)
{
    static char out[1 << 16];
    char args[1024], a[256], b[256], dashed[256];
    snprintf(a, sizeof a, "%s.a.h5", weights);
    snprintf(b, sizeof b, "%s.b.h5", weights);

    t_case("cli/every command takes --name=VALUE");
    snprintf(args, sizeof args, "train small-cnn --samples=64 --val-samples=0 --epochs=1 --batch=16 --threads=1 --out=%s", a);
    int rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && exists(a) && strstr(out, "Train on 64 samples"), "train (exit %d): %s", rc, out);
    snprintf(args, sizeof args, "export --format=torch --out=%s %s", b, weights);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && exists(b) && strstr(out, "PyTorch weights of siamese-lstm"), "export (exit %d): %s", rc, out);
    snprintf(args, sizeof args, "import --format=torch --model=siamese-lstm --hidden=8 --out=%s %s", a, b);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "written to"), "import (exit %d): %s", rc, out);
    struct { const char *args, *expect; } eq[] = {   /* the value reached its option: the message quotes it */
        { "eval cnn --weights=/nonexistent/w.h5 --threads=1", "/nonexistent/w.h5" },
        { "eval siamese-lstm --weights=/nonexistent/w.h5 --data=/nonexistent/f.h5 --trials=t.txt", "/nonexistent/" },
        { "time cnn --protocol=fast", "--protocol fast: use seed, bench or smoke" },
        { "time cnn --epochs=0", "--epochs: '0' is not an integer" },
        { "prep voxceleb --wav=/nonexistent-wav --out=/tmp/x.h5", "--wav /nonexistent-wav" },
        { "train siamese-lstm --recurrent=relu", "use sigmoid or hard_sigmoid" },
        { "info --threads=0", "--threads: '0' is not an integer" },
        { "train small-cnn --tf32=yes", "--tf32 takes no value" },
    };
    for (size_t i = 0; i < sizeof eq / sizeof eq[0]; i++) {
        rc = t_run_ctrain(eq[i].args, out, sizeof out);
        t_check(rc > 0 && rc < 128 && strstr(out, eq[i].expect), "`ctrain %s` (exit %d) lacks \"%s\": %s", eq[i].args, rc, eq[i].expect, out);
    }
    rc = t_run_ctrain("info --threads=1 --no-peak", out, sizeof out);
    t_check(rc == 0 && strstr(out, "1 thread used"), "info --threads=1 (exit %d): %s", rc, out);

    t_case("cli/-- ends the options: a file named like an option, an option after it refused");
    snprintf(dashed, sizeof dashed, "/tmp/-ctrain-dashed-%ld.h5", (long)getpid());
    snprintf(args, sizeof args, "export --format torch --out %s -- %s", dashed, weights);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && exists(dashed), "export ... -- FILE (exit %d): %s", rc, out);
    snprintf(args, sizeof args, "export --format keras --out %s -- %s", b, dashed);   /* the input's name begins with '-' */
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 1 && strstr(out, dashed), "the word after -- is read as the input file (exit %d): %s", rc, out);
    rc = t_run_ctrain("train small-cnn --samples 64 -- --epochs 2", out, sizeof out);
    t_check(rc == 2 && strstr(out, "unexpected argument '--epochs'"), "an option after -- (exit %d): %s", rc, out);
    rc = t_run_ctrain("time cnn --protocol smoke -- extra", out, sizeof out);
    t_check(rc == 2 && strstr(out, "unexpected argument 'extra'"), "time ... -- extra (exit %d): %s", rc, out);
    rc = t_run_ctrain("info -- --no-peak", out, sizeof out);
    t_check(rc == 2 && strstr(out, "unexpected argument '--no-peak'"), "info -- --no-peak (exit %d): %s", rc, out);
    unlink(dashed);

    t_case("cli/old spellings still work and say the new one in one line");
    rc = t_run_ctrain("eval cnn --model /nonexistent/w.h5 --threads 1", out, sizeof out);
    t_check(rc == 1 && strstr(out, "ctrain eval: note: --model is now spelled --weights") && strstr(out, "/nonexistent/w.h5"),
            "eval --model (exit %d): %s", rc, out);
    rc = t_run_ctrain("eval cnn --model=/nonexistent/w.h5 --classes a,b", out, sizeof out);
    t_check(rc == 1 && strstr(out, "--classes is now spelled --class-names") && strstr(out, "/nonexistent/w.h5"),
            "eval --model=FILE --classes (exit %d): %s", rc, out);
    unlink(b);
    snprintf(args, sizeof args, "export --format torch %s %s", weights, b);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && exists(b) && strstr(out, "ctrain export: note: the output as a second file is the old form"), "export IN OUT (exit %d): %s", rc, out);
    snprintf(args, sizeof args, "import --format torch %s %s --model siamese-lstm --hidden 8", b, a);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "ctrain import: note: the output as a second file"), "import IN OUT (exit %d): %s", rc, out);
    snprintf(args, sizeof args, "export --format torch %s %s --out %s", weights, b, a);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 2 && strstr(out, "given twice"), "an output given both ways (exit %d): %s", rc, out);

    t_case("cli/the progress bar goes to stderr, only when asked or on a terminal");
    snprintf(args, sizeof args, "train small-cnn --samples 64 --val-samples 0 --epochs 1 --batch 16 --threads 1 --progress --no-run-dir");
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "ETA") && strstr(out, "samples/s"), "--progress draws the bar (exit %d): %s", rc, out);
    rc = run_stdout_only(args, out, sizeof out);
    t_check(rc == 0 && !strstr(out, "ETA") && !strchr(out, '\r') && strstr(out, "Epoch 1/1"), "stdout holds no bar (exit %d): %s", rc, out);
    if (access("/usr/bin/script", X_OK) == 0) {   /* util-linux's script: the command on a pseudo-terminal */
        const char *bin = getenv("CTRAIN_BIN");
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "/usr/bin/script -qec '%s train small-cnn --samples 64 --val-samples 0 --epochs 1 --batch 16 "
                 "--threads 1 --no-run-dir' /dev/null 2>&1", bin ? bin : "bin/ctrain");
        FILE *p = popen(cmd, "r");
        size_t got = p ? fread(out, 1, sizeof out - 1, p) : 0;
        out[got] = '\0';
        int st = p ? pclose(p) : -1;
        t_check(st == 0 && strstr(out, "ETA") && strchr(out, '\r'), "on a terminal the bar is drawn by default (exit %d): %s", st, out);
    } else {
        printf("  (/usr/bin/script not found: the bar on a terminal is not checked)\n");
    }
    unlink(a); unlink(b);
}

/* How many of names[n] are "id1NNNN" with NNNN in [lo, hi]; -1 if one is not such a name or repeats. */
static int count_ids(char **names, int n, int lo, int hi)
{
    int count = 0, seen[10000] = { 0 };
    for (int k = 0; k < n; k++) {
        int id = -1;
        if (sscanf(names[k], "id1%4d", &id) != 1 || id < 0 || id > 9999 || seen[id]++) return -1;
        count += id >= lo && id <= hi;
    }
    return count;
}

/* --exclude-trials keeps a test list's speakers out of training and validation; the weights and
 * the checkpoint record the training speakers; eval warns when its list names one of them. The
 * data: 12 speakers id10000..id10011, the trial list over id10008..id10011 (t_speaker_data). */
static void exclude_trials(char *out, size_t cap)
{
    char dir[] = "/tmp/ctrain_excl_XXXXXX", feats[256], trials[256], none[300], w1[300], w2[300], ck[300], args[2048];
    if (!t_check(mkdtemp(dir) != NULL, "mkdtemp") || !t_speaker_data(dir, feats, trials, sizeof feats)) return;
    snprintf(none, sizeof none, "%s/other.txt", dir);
    snprintf(w1, sizeof w1, "%s/w1.h5", dir);
    snprintf(w2, sizeof w2, "%s/w2.h5", dir);
    snprintf(ck, sizeof ck, "%s/ck.h5", dir);
    const char *base = "train siamese-lstm --mels 8 --frames 20 --hidden 8 --embed 4 --pairs 64 --val-pairs 32 --batch 16 "
                       "--epochs 1 --threads 1 --no-run-dir --no-progress";

    t_case("cli/train --exclude-trials: the list's speakers in neither split; the weights and checkpoint record the training speakers");
    snprintf(args, sizeof args, "%s --data %s --exclude-trials %s --out %s --checkpoint %s", base, feats, trials, w1, ck);
    int rc = t_run_ctrain(args, out, cap), ntr = -1, nva = -1;
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(strstr(out, "Excluded: 4 speakers (24 utterances) named by") != NULL, "no line saying what was excluded: %s", out);
    const char *d = strstr(out, "validation speakers)");
    while (d && d > out && d[-1] != '(') d--;
    t_check(d && sscanf(d, "%d training, %d validation", &ntr, &nva) == 2 && ntr + nva == 8,
            "training + validation speakers should be the 8 not excluded (%d + %d): %s", ntr, nva, out);
    char **names = NULL;
    int n = 0;
    t_check(ct_weights_read_speakers(w1, &names, &n) == CT_OK && n == ntr && count_ids(names, n, 0, 7) == ntr,
            "the weights should record the %d training speakers, all of id10000..id10007, once each (%d recorded): %s",
            ntr, n, ct_last_error());
    char **ck_names = NULL;
    int nck = 0;
    t_check(ct_weights_read_speakers(ck, &ck_names, &nck) == CT_OK && nck == n, "the checkpoint records %d speakers, the weights %d", nck, n);
    for (int k = 0; k < n && k < nck; k++) t_check(!strcmp(names[k], ck_names[k]), "checkpoint and weights differ: %s, %s", names[k], ck_names[k]);
    ct_h5_names_free(names, n);
    ct_h5_names_free(ck_names, nck);

    t_case("cli/eval warns, with the count, when its trial list names speakers the model was trained on; silent otherwise");
    snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1", w1, feats, trials);
    rc = t_run_ctrain(args, out, cap);
    t_check(rc == 0 && strstr(out, "EER: ") && !strstr(out, "warning"), "eval of a model that never saw the list's speakers: exit %d: %s", rc, out);
    snprintf(args, sizeof args, "%s --data %s --out %s", base, feats, w2);
    rc = t_run_ctrain(args, out, cap);
    t_check(rc == 0, "exit %d: %s", rc, out);
    int trained = -1;
    if (ct_weights_read_speakers(w2, &names, &n) == CT_OK) trained = count_ids(names, n, 8, 11);
    t_check(trained > 0,
            "without --exclude-trials some of the list's 4 speakers are trained on (%d of %d recorded)", trained, n);
    ct_h5_names_free(names, n);
    snprintf(args, sizeof args, "eval siamese-lstm --weights %s --data %s --trials %s --threads 1", w2, feats, trials);
    rc = t_run_ctrain(args, out, cap);
    char want[160];
    snprintf(want, sizeof want, "warning: the trial list names %d speaker%s this model was trained on; its EER is not a test result",
             trained, trained == 1 ? "" : "s");
    t_check(rc == 0 && strstr(out, want) && strstr(out, "EER: "), "eval should say \"%s\": exit %d: %s", want, rc, out);

    t_case("cli/train --exclude-trials: a list naming no speaker of the store is one warning; without names, one error");
    FILE *f = fopen(none, "w");
    if (f) { fputs("1 id19998/a/00001.wav id19998/b/00002.wav\n0 id19998/a/00001.wav id19999/c/00001.wav\n", f); fclose(f); }
    snprintf(args, sizeof args, "%s --data %s --exclude-trials %s", base, feats, none);
    rc = t_run_ctrain(args, out, cap);
    t_check(rc == 0 && strstr(out, "names no speaker of") && !strstr(out, "Excluded:"), "exit %d: %s", rc, out);
    snprintf(args, sizeof args, "%s --speakers 12 --utts 4 --mels 8 --exclude-trials %s", base, trials);
    rc = t_run_ctrain(args, out, cap);
    t_check(rc == 1 && strstr(out, "no speaker names"), "synthetic data with --exclude-trials: exit %d: %s", rc, out);
    unlink(feats); unlink(trials); unlink(none); unlink(w1); unlink(w2); unlink(ck);
    rmdir(dir);
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
        { "eval siamese-lstm --weights w.h5 --data f.h5 --trials t.txt --device gpu", NULL },
        { "eval siamese-cnn --weights w.h5 --data f.h5 --trials t.txt --device gpu", NULL },
        { "eval cnn --weights w.h5 --device gpu", NULL },
        { "train siamese-lstm --device gpu:x", "expected cpu, gpu, gpu:N" },
        { "train cnn --device tpu", "--device tpu: unknown device" },
        { "train small-cnn --device cpu --tf32", "--tf32 applies to the GPU" },
        { "eval cnn --weights w.h5 --device cpu --deterministic", "--deterministic applies to the GPU" },
        { "train siamese-lstm --data /nonexistent/feats.h5", "/nonexistent/feats.h5" },
        { "train siamese-lstm --hidden", "needs a value" },
        { "train siamese-lstm --bogus 1", "unknown option '--bogus'" },
        { "train siamese-lstm --recurrent relu", "use sigmoid or hard_sigmoid" },
        { "train small-cnn --kernel 4", "must be odd" },
        { "info extra", "unexpected argument" },
    };
    int have_gpu = ct_gpu_visible() > 0;   /* the missing-GPU rows (expect NULL) need a machine without one */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (!bad[i].expect && have_gpu) continue;
        rc = t_run_ctrain(bad[i].args, out, sizeof out);
        t_check(rc > 0 && rc != 134, "`ctrain %s` exited %d", bad[i].args, rc);
        const char *expect = bad[i].expect ? bad[i].expect
                           : ct_gpu_compiled() ? "no NVIDIA GPU found" : "built without CUDA";
        t_check(strstr(out, expect) != NULL, "`ctrain %s`: message lacks \"%s\": %s", bad[i].args, expect, out);
    }

    t_case("cli/CTRAIN_CPU_KERNELS: the set in use is in the header; a bad value is one line and exit 2");
    const char *had = getenv("CTRAIN_CPU_KERNELS");
    char kernels_before[64];
    snprintf(kernels_before, sizeof kernels_before, "%s", had ? had : "");
    setenv("CTRAIN_CPU_KERNELS", "sse", 1);
    rc = t_run_ctrain("info --no-peak", out, sizeof out);
    t_check(rc == 2 && strstr(out, "CTRAIN_CPU_KERNELS=sse: use avx512, avx2 or blas") && strchr(out, '\n') == out + strlen(out) - 1,
            "CTRAIN_CPU_KERNELS=sse ctrain info (exit %d): %s", rc, out);
    setenv("CTRAIN_CPU_KERNELS", "blas", 1);
    rc = t_run_ctrain("info --no-peak", out, sizeof out);
    t_check(rc == 0 && strstr(out, "ctrain's own kernels: none (OpenBLAS)"), "CTRAIN_CPU_KERNELS=blas ctrain info (exit %d): %s", rc, out);
    unsetenv("CTRAIN_CPU_KERNELS");
    rc = t_run_ctrain("info --no-peak", out, sizeof out);
    const char *widest = ct_kernels_name(ct_kernels_cpu());
    char line[96];
    snprintf(line, sizeof line, "ctrain's own kernels: %s\n", widest);
    t_check(rc == 0 && strstr(out, line), "ctrain info should name %s (exit %d): %s", widest, rc, out);
    if (ct_kernels_cpu() == CT_KERNELS_AVX512) {
        setenv("CTRAIN_CPU_KERNELS", "avx2", 1);
        rc = t_run_ctrain("info --no-peak", out, sizeof out);
        t_check(rc == 0 && strstr(out, "ctrain's own kernels: AVX2 (CTRAIN_CPU_KERNELS; the CPU runs wider ones)"),
                "CTRAIN_CPU_KERNELS=avx2 ctrain info (exit %d): %s", rc, out);
    } else if (ct_kernels_cpu() < CT_KERNELS_AVX512) {
        setenv("CTRAIN_CPU_KERNELS", "avx512", 1);
        rc = t_run_ctrain("info --no-peak", out, sizeof out);
        t_check(rc == 2 && strstr(out, "this CPU cannot run them"), "CTRAIN_CPU_KERNELS=avx512 on a narrower CPU (exit %d): %s", rc, out);
    }
    if (kernels_before[0]) setenv("CTRAIN_CPU_KERNELS", kernels_before, 1);
    else unsetenv("CTRAIN_CPU_KERNELS");

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
    t_check(matches(out, "^ - [0-9]\\.[0-9]s - [0-9]+(ms|us)/step - loss: [0-9]\\.[0-9]{4} - accuracy: [0-9]\\.[0-9]{4} - "
                         "val_loss: [0-9]\\.[0-9]{4} - val_accuracy: [0-9]\\.[0-9]{4}$"),
            "no Keras epoch line with one decimal below 10 s and the time per step: %s", out);
    t_check(!strchr(out, '\r') && !strstr(out, "ETA"), "a progress bar was drawn although stderr is not a terminal: %s", out);
    t_check(matches(out, "^CPU: .*threads? used; ctrain's own kernels: [A-Za-z0-9 ()-]+$") && matches(out, "^BLAS: "), "no hardware header: %s", out);
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

    grammar(path);
    exclude_trials(out, sizeof out);

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
