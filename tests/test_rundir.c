/* test_rundir.c - repeating runs: `--config FILE` and the run directory
 * (train/run_dir.h, cli/config.h), through the command line:
 *   - a run directory holds the effective configuration, the command line, the
 *     version and commit, the header, the CSV log, the checkpoint, the weights,
 *     the TensorBoard files and the curves;
 *   - a run started from its saved config.yaml reproduces it bit for bit
 *     (`h5diff -q` on the weights, or every dataset compared through HDF5 where
 *     h5diff is not installed; the same log lines and CSV rows but for the
 *     seconds), for an image model and a speaker model;
 *   - the command line wins over the file; explicit --out, --csv, --checkpoint
 *     and --logdir win over the run directory; another run's directory is
 *     refused, a checkpoint's own directory continues;
 *   - bad files are refused with FILE:LINE:COLUMN and the key, before training;
 *   - `ctrain time --config`. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <hdf5.h>
#include "tests/test.h"

static char out[1 << 17], out2[1 << 17];
static char dir[] = "/tmp/ctrain_rundir_XXXXXX";

static const char *dpath(const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[8][1 << 15];
    static int k;
    k = (k + 1) % 8;
    size_t n = fread(buf[k], 1, sizeof buf[k] - 1, f);
    buf[k][n] = '\0';
    fclose(f);
    return buf[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!t_check(f != NULL, "cannot write %s", path)) return;
    fputs(text, f);
    fclose(f);
}

/* The files of a directory whose names start with prefix. */
static int count_files(const char *d, const char *prefix)
{
    DIR *dd = opendir(d);
    int n = 0;
    struct dirent *de;
    while (dd && (de = readdir(dd))) n += de->d_name[0] != '.' && !strncmp(de->d_name, prefix, strlen(prefix));
    if (dd) closedir(dd);
    return n;
}

/* The Keras epoch lines of a log with their seconds masked ("loss: ..." onwards), one per line. */
static void epoch_lines(const char *log, char *dst, size_t cap)
{
    dst[0] = '\0';
    for (const char *p = strstr(log, "\n - "); p; p = strstr(p + 1, "\n - ")) {
        const char *l = strstr(p, "loss: "), *e = strchr(p + 1, '\n');
        if (!l || (e && l > e)) continue;
        size_t len = e ? (size_t)(e - l) : strlen(l), used = strlen(dst);
        if (used + len + 2 < cap) { memcpy(dst + used, l, len); dst[used + len] = '\n'; dst[used + len + 1] = '\0'; }
    }
}

/* The CSV rows without the three seconds columns. */
static void csv_numbers(const char *csv, char *dst, size_t cap)
{
    dst[0] = '\0';
    for (const char *p = csv; p && *p; ) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int commas = 0;
        size_t keep = len;
        for (size_t i = 0; i < len; i++)
            if (p[i] == ',' && ++commas == 6) { keep = i; break; }
        size_t used = strlen(dst);
        if (used + keep + 2 < cap) { memcpy(dst + used, p, keep); dst[used + keep] = '\n'; dst[used + keep + 1] = '\0'; }
        p = e ? e + 1 : NULL;
    }
}

/* config.yaml without its comment lines. */
static void config_body(const char *path, char *dst, size_t cap)
{
    const char *t = slurp(path);
    dst[0] = '\0';
    for (const char *p = t; p && *p; ) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p + 1) : strlen(p), used = strlen(dst);
        if (*p != '#' && used + len + 1 < cap) { memcpy(dst + used, p, len); dst[used + len] = '\0'; }
        p = e ? e + 1 : NULL;
    }
}

/* ---- the same weights: h5diff -q, or dataset by dataset where h5diff is not installed ---- */
typedef struct { int n; char names[64][128]; } name_list;

static herr_t collect(hid_t loc, const char *name, const H5O_info_t *info, void *op)
{
    name_list *l = op;
    (void)loc;
    if (info->type == H5O_TYPE_DATASET && l->n < 64) snprintf(l->names[l->n++], 128, "%s", name);
    return 0;
}

static void *read_raw(hid_t f, const char *name, size_t *bytes)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    *bytes = (size_t)H5Sget_simple_extent_npoints(sp) * H5Tget_size(t);
    void *b = malloc(*bytes + 1);
    if (b && *bytes && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) < 0) { free(b); b = NULL; }
    H5Sclose(sp); H5Tclose(t); H5Dclose(d);
    return b;
}

static int datasets_same(const char *a, const char *b)
{
    hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
    static name_list la, lb;
    la.n = lb.n = 0;
    int same = fa >= 0 && fb >= 0;
    if (same) {
        H5Ovisit2(fa, H5_INDEX_NAME, H5_ITER_INC, collect, &la, H5O_INFO_BASIC);
        H5Ovisit2(fb, H5_INDEX_NAME, H5_ITER_INC, collect, &lb, H5O_INFO_BASIC);
        same = la.n == lb.n && la.n > 0;
    }
    for (int i = 0; same && i < la.n; i++) {
        size_t ba = 0, bb = 0;
        void *x = read_raw(fa, la.names[i], &ba), *y = read_raw(fb, la.names[i], &bb);
        same = x && y && ba == bb && !memcmp(x, y, ba);
        free(x); free(y);
    }
    if (fa >= 0) H5Fclose(fa);
    if (fb >= 0) H5Fclose(fb);
    return same;
}

static int h5diff_same(const char *a, const char *b)
{
    char cmd[2600];
    if (system("command -v h5diff >/dev/null 2>&1") != 0) {   /* a machine without Debian's hdf5-tools */
        printf("  (h5diff not found: %s and %s compared dataset by dataset instead)\n", a, b);
        return datasets_same(a, b);
    }
    snprintf(cmd, sizeof cmd, "h5diff -q '%s' '%s' >/dev/null 2>&1", a, b);
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Trains `args` into run directory A, then again from A/config.yaml into B: the same weights
 * (h5diff -q), the same epoch lines and CSV numbers, the same effective configuration. */
static void repeat_run(const char *model, const char *args, const char *a, const char *b)
{
    static char cmd[4096], l1[8192], l2[8192], c1[8192], c2[8192];
    snprintf(cmd, sizeof cmd, "train %s %s --run-dir %s", model, args, dpath(a));
    int rc = t_run_ctrain(cmd, out, sizeof out);
    if (!t_check(rc == 0, "`ctrain %s` exited %d: %s", cmd, rc, out)) return;
    char cfg[600];
    snprintf(cfg, sizeof cfg, "%s/config.yaml", dpath(a));
    snprintf(cmd, sizeof cmd, "train %s --config %s --run-dir %s", model, cfg, dpath(b));
    rc = t_run_ctrain(cmd, out2, sizeof out2);
    if (!t_check(rc == 0, "`ctrain %s` exited %d: %s", cmd, rc, out2)) return;
    char wa[600], wb[600];
    snprintf(wa, sizeof wa, "%s/weights.h5", dpath(a));
    snprintf(wb, sizeof wb, "%s/weights.h5", dpath(b));
    t_check(h5diff_same(wa, wb), "h5diff -q %s %s: the weights differ", wa, wb);
    epoch_lines(out, l1, sizeof l1);
    epoch_lines(out2, l2, sizeof l2);
    t_check(l1[0] && !strcmp(l1, l2), "the epoch lines differ:\n%s---\n%s", l1, l2);
    snprintf(wa, sizeof wa, "%s/log.csv", dpath(a));
    snprintf(wb, sizeof wb, "%s/log.csv", dpath(b));
    csv_numbers(slurp(wa), l1, sizeof l1);
    csv_numbers(slurp(wb), l2, sizeof l2);
    t_check(strchr(l1, '\n') && !strcmp(l1, l2), "the CSV logs differ:\n%s---\n%s", l1, l2);
    snprintf(wb, sizeof wb, "%s/config.yaml", dpath(b));
    config_body(cfg, c1, sizeof c1);
    config_body(wb, c2, sizeof c2);
    t_check(c1[0] && !strcmp(c1, c2), "the effective configurations differ:\n%s---\n%s", c1, c2);
}

#define SMALL "--samples 256 --val-samples 64 --epochs 2 --batch 64 --threads 1 --seed 4"
#define LSTM  "--speakers 12 --utts 4 --pairs 128 --val-pairs 32 --epochs 2 --batch 32 --frames 10 --mels 6 --hidden 8 " \
              "--embed 4 --threads 1 --pool last --recurrent hard_sigmoid --lr 0.004"

void suite_rundir(void)
{
    if (!t_check(mkdtemp(dir) != NULL, "mkdtemp failed")) return;
    char args[2048];
    int rc;

    t_case("rundir/a run directory holds the configuration, command, version, header, log, checkpoint, weights, TensorBoard, curves");
    snprintf(args, sizeof args, "train small-cnn " SMALL " --run-dir %s", dpath("one"));
    rc = t_run_ctrain(args, out, sizeof out);
    if (t_check(rc == 0, "exit %d: %s", rc, out)) {
        const char *files[] = { "config.yaml", "command.txt", "version.txt", "header.txt", "log.csv", "checkpoint.h5", "weights.h5",
                                "curves.svg" };
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            char p[600];
            snprintf(p, sizeof p, "%s/%s", dpath("one"), files[i]);
            t_check(exists(p), "%s is missing", p);
        }
        char p[600], want[2400];
        snprintf(want, sizeof want, "Run directory: %s\n", dpath("one"));
        t_check(strstr(out, want) != NULL, "the log does not name the run directory: %s", out);
        snprintf(p, sizeof p, "%s/command.txt", dpath("one"));
        snprintf(want, sizeof want, "ctrain %s\n", args);   /* the program as it was run, then the words */
        const char *t = slurp(p);
        size_t tl = t ? strlen(t) : 0, wl = strlen(want) - strlen("ctrain");
        t_check(t && tl >= wl && !strcmp(t + tl - wl, want + strlen("ctrain")) && strstr(t, "ctrain"),
                "command.txt: '%s', expected '...%s'", t ? t : "", want);
        snprintf(p, sizeof p, "%s/version.txt", dpath("one"));
        t = slurp(p);
        t_check(t && !strncmp(t, "ctrain ", 7) && strstr(t, "\ncommit ") && !strstr(t, "commit \n"), "version.txt: %s", t ? t : "");
        snprintf(p, sizeof p, "%s/header.txt", dpath("one"));
        t = slurp(p);
        t_check(t && strstr(t, "CPU: ") && strstr(t, "BLAS: "), "header.txt: %s", t ? t : "");
        snprintf(p, sizeof p, "%s/log.csv", dpath("one"));
        t = slurp(p);
        t_check(t && !strncmp(t, "epoch,loss", 10) && strstr(t, "\n1,") && strstr(t, "\n2,"), "log.csv: %s", t ? t : "");
        snprintf(p, sizeof p, "%s/curves.svg", dpath("one"));
        t = slurp(p);
        t_check(t && strstr(t, "<svg") && strstr(t, "</svg>") && strstr(t, "val_loss") && strstr(t, "Accuracy"), "curves.svg: %.200s", t ? t : "");
        snprintf(p, sizeof p, "%s/config.yaml", dpath("one"));
        t = slurp(p);
        t_check(t && strstr(t, "\nmodel: small-cnn\n") && strstr(t, "\nepochs: 2\n") && strstr(t, "\nsamples: 256\n")
                && strstr(t, "\nseed: 4\n") && !strstr(t, "weights.h5") && !strstr(t, "\nout:"), "config.yaml:\n%s", t ? t : "");
        snprintf(p, sizeof p, "%s/tensorboard/cpu", dpath("one"));
        t_check(count_files(p, "events.out.tfevents.") == 1, "no TensorBoard file in %s", p);
    }

    t_case("rundir/a run repeated from its config.yaml is bit for bit the same (small-cnn, siamese-lstm)");
    repeat_run("small-cnn", SMALL " --optimizer adam --schedule cosine --dropout 0.25", "cnn-a", "cnn-b");
    repeat_run("siamese-lstm", LSTM, "lstm-a", "lstm-b");

    t_case("rundir/a key given on the command line wins over the configuration file");
    write_text(dpath("over.yaml"), "# a hand-written configuration\nepochs: 3\nlr: 0.02\noptimizer: sgd\nsamples: 128\nval-samples: 0\n"
               "threads: 1\n");
    snprintf(args, sizeof args, "train small-cnn --config %s --epochs 1 --run-dir %s", dpath("over.yaml"), dpath("over"));
    rc = t_run_ctrain(args, out, sizeof out);
    if (t_check(rc == 0, "exit %d: %s", rc, out)) {
        t_check(strstr(out, "Epoch 1/1") && !strstr(out, "Epoch 1/3") && strstr(out, "Train on 128 samples"), "not 1 epoch of 128: %s", out);
        char p[600];
        snprintf(p, sizeof p, "%s/config.yaml", dpath("over"));
        const char *t = slurp(p);
        t_check(t && strstr(t, "\nepochs: 1\n") && strstr(t, "\nlr: 0.0199999996\n") && strstr(t, "\noptimizer: sgd\n"),
                "effective configuration:\n%s", t ? t : "");
    }

    t_case("rundir/bad configuration files: FILE:LINE:COLUMN and the key, exit 2, nothing trained, no run directory");
    {
        struct { const char *text, *expect; } bad[] = {
            { "epochs: 2\nlr: [0.1, 0.2]\n", ":2:5: 'lr' must be a single value, not a list" },
            { "epochs: 2\nbatch:\n  size: 3\n", ":3:3: 'batch' must be a single value, not a nested mapping" },
            { "threads: 1\nepochs: 0\n", ":2:9: epochs: option --epochs: '0' is not an integer in [1," },
            { "threads: 1\nbogus: 3\n", ":2:1: unknown key 'bogus'" },
            { "epochs: 2\n  lr: 0.1\n", ":2:5: YAML syntax error: mapping values are not allowed in this context" },
            { "epochs: 2\nlr: \"0.1\n", ":3:1: YAML syntax error: found unexpected end of stream while scanning a quoted scalar" },
            { "model: cnn\n", ":1:8: this configuration is for model cnn, not small-cnn" },
            { "tf32: maybe\n", ":1:7: tf32: 'maybe' is not true or false" },
            { "epochs: 1\nepochs: 2\n", ":2:1: 'epochs' is given twice (first on line 1)" },
            { "resume: run.h5\n", ":1:1: 'resume' cannot be set in a configuration file" },
            { "- epochs: 1\n", ":1:1: expected `key: value` lines, found a list" },
            { "dropout: 2\n", ":1:10: dropout: option --dropout: '2' is not a number in [0, 0.99]" },
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char f[64], want[512];
            snprintf(f, sizeof f, "bad%zu.yaml", i);
            write_text(dpath(f), bad[i].text);
            snprintf(args, sizeof args, "train small-cnn --config %s --samples 64 --val-samples 0 --epochs 1 --run-dir %s", dpath(f),
                     dpath("never"));
            rc = t_run_ctrain(args, out, sizeof out);
            snprintf(want, sizeof want, "%s%s", dpath(f), bad[i].expect);
            t_check(rc == 2 && strstr(out, want) && !strstr(out, "Epoch 1/"), "%s: exit %d, expected \"%s\": %s", f, rc, want, out);
        }
        snprintf(args, sizeof args, "train small-cnn --config %s", dpath("missing.yaml"));
        rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc == 2 && strstr(out, "missing.yaml: cannot read the configuration"), "a missing file: exit %d: %s", rc, out);
        t_check(!exists(dpath("never")), "a refused run made its run directory");
        snprintf(args, sizeof args, "train siamese-lstm --data %s --run-dir %s", dpath("missing.h5"), dpath("never"));
        rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc == 1 && strstr(out, "missing.h5") && !exists(dpath("never")), "data that cannot load: exit %d, run directory %s: %s",
                rc, exists(dpath("never")) ? "made" : "not made", out);
    }

    t_case("rundir/explicit --out, --csv, --checkpoint and --logdir win over the run directory");
    snprintf(args, sizeof args, "train small-cnn " SMALL " --run-dir %s --out %s --csv %s --checkpoint %s --logdir %s", dpath("expl"),
             dpath("w.h5"), dpath("l.csv"), dpath("c.h5"), dpath("tb"));
    rc = t_run_ctrain(args, out, sizeof out);
    if (t_check(rc == 0, "exit %d: %s", rc, out)) {
        char p[600];
        t_check(exists(dpath("w.h5")) && exists(dpath("l.csv")) && exists(dpath("c.h5")) && count_files(dpath("tb/cpu"), "events") == 1,
                "an explicit output is missing");
        const char *inside[] = { "weights.h5", "log.csv", "checkpoint.h5", "tensorboard" };
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "%s/%s", dpath("expl"), inside[i]);
            t_check(!exists(p), "%s was written although an explicit path was given", p);
        }
        snprintf(p, sizeof p, "%s/config.yaml", dpath("expl"));
        t_check(exists(p), "the run directory has no config.yaml");
    }

    t_case("rundir/another run's directory is refused; --resume of its checkpoint continues there");
    snprintf(args, sizeof args, "train small-cnn " SMALL " --run-dir %s", dpath("one"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 2 && strstr(out, "already holds a run") && !strstr(out, "Epoch 1/"), "exit %d: %s", rc, out);
    snprintf(args, sizeof args, "train small-cnn --resume %s/checkpoint.h5 --epochs 3", dpath("one"));
    rc = t_run_ctrain(args, out, sizeof out);
    if (t_check(rc == 0 && strstr(out, "Resuming from") && strstr(out, "Epoch 3/3"), "exit %d: %s", rc, out)) {
        char p[600], want[700];
        snprintf(want, sizeof want, "Run directory: %s\n", dpath("one"));
        t_check(strstr(out, want) != NULL, "not continued in %s: %s", dpath("one"), out);
        snprintf(p, sizeof p, "%s/log.csv", dpath("one"));
        const char *t = slurp(p);
        t_check(t && strstr(t, "\n3,"), "log.csv lacks epoch 3: %s", t ? t : "");
        snprintf(p, sizeof p, "%s/tensorboard/cpu", dpath("one"));
        t_check(count_files(p, "events.out.tfevents.") == 2, "the resumed run should add an event file to %s", p);
        snprintf(p, sizeof p, "%s/config.yaml", dpath("one"));
        t = slurp(p);
        t_check(t && strstr(t, "\nepochs: 3\n"), "config.yaml is not the resumed run's:\n%s", t ? t : "");
    }

    t_case("rundir/without --run-dir: runs/MODEL-DATE-TIME in the working directory, a new one per run");
    {
        char runs[600];
        snprintf(runs, sizeof runs, "%s/runs", t_scratch_dir());
        int before = count_files(runs, "small-cnn-");
        rc = t_run_ctrain("train small-cnn --samples 64 --val-samples 0 --epochs 1 --threads 1", out, sizeof out);
        t_check(rc == 0 && strstr(out, "Run directory: runs/small-cnn-2"), "exit %d: %s", rc, out);
        rc = t_run_ctrain("train small-cnn --samples 64 --val-samples 0 --epochs 1 --threads 1", out2, sizeof out2);
        t_check(rc == 0, "exit %d: %s", rc, out2);
        t_check(count_files(runs, "small-cnn-") == before + 2, "%d run directories in %s, expected %d", count_files(runs, "small-cnn-"),
                runs, before + 2);
        rc = t_run_ctrain("train small-cnn --samples 64 --val-samples 0 --epochs 1 --threads 1 --no-run-dir", out, sizeof out);
        t_check(rc == 0 && !strstr(out, "Run directory") && count_files(runs, "small-cnn-") == before + 2, "--no-run-dir: exit %d: %s", rc, out);
    }

    t_case("rundir/ctrain time --config: the file's protocol and epochs, the command line's device");
    write_text(dpath("time.yaml"), "protocol: smoke\nepochs: 2\ndevice: gpu\nthreads: 1\nverbose: false\n");
    snprintf(args, sizeof args, "time small-cnn --config %s --device cpu", dpath("time.yaml"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "Protocol: smoke: 2 epochs") && strstr(out, "devices cpu; precision fp32\n"), "exit %d: %s", rc, out);
    write_text(dpath("time-bad.yaml"), "protocol: smoke\nhidden: 3\n");
    snprintf(args, sizeof args, "time small-cnn --config %s", dpath("time-bad.yaml"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 2 && strstr(out, "time-bad.yaml:2:1: unknown key 'hidden'"), "exit %d: %s", rc, out);

    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    if (system(args) != 0) printf("  note: could not remove %s\n", dir);
}
