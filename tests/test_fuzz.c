/* test_fuzz.c - the fuzz corpora as regression tests, and the defensive limits.
 *
 * Every file under tests/fuzz/corpus/TARGET/ (small valid files, the known bad
 * cases, and every input a fuzzer ever crashed on) is read by its target
 * (tests/fuzz/targets.h) as `make fuzz` reads it: the case fails on a crash or
 * sanitizer report (make test SAN=1) and on any failure whose message is not one
 * line naming the file. The json corpus goes through `ctrain time --compare`.
 *
 * Then the limits, each with the file that used to get past them: sizes read
 * from a file are checked against what the file can hold before anything is
 * allocated (an IDX header promising 47 MB in 40 bytes, a feature store
 * declaring 2^40 frames it does not store), hostile numbers read from a file
 * stay out of range instead of wrapping (a checkpoint's epoch 1e300, a
 * model's hidden = 2^32 + 128), and a spec cannot ask for more parameters than
 * CT_PARAMS_MAX. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <hdf5.h>
#include "tests/test.h"
#include "tests/fuzz/targets.h"
#include "io/featstore.h"
#include "io/h5.h"
#include "io/h5probe.h"
#include "io/idx.h"
#include "io/kv.h"
#include "models/seq_cnn.h"
#include "train/checkpoint.h"

#define CORPUS "tests/fuzz/corpus"

static char tmp[64];

static const char *tpath(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, name);
    return buf[k];
}

/* Empties dir (files only: the targets write no directories). */
static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
}

static int plain_file(const struct dirent *e) { return e->d_name[0] != '.'; }

/* ---- the corpora ---- */

static void replay(const fuzz_target *t)
{
    char dir[256], scratch[128];
    snprintf(dir, sizeof dir, CORPUS "/%s", t->name);
    snprintf(scratch, sizeof scratch, "%s/scratch", tmp);
    mkdir(scratch, 0700);
    struct dirent **list = NULL;
    int n = scandir(dir, &list, plain_file, alphasort);
    t_case("fuzz/%s: every file of %s is read without a crash; each failure is one line naming the file", t->name, dir);
    t_check(n > 0, "no corpus in %s", dir);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        clear_dir(scratch);
        long open_before = fuzz_h5_open_objects();
        if ((t->run(path, scratch) != 0 || fuzz_h5_left_open(open_before) != 0) && failed++ < 5)
            t_check(0, "%s: %s", path, fuzz_why());
        free(list[i]);
    }
    free(list);
    t_check(failed == 0, "%d of %d files broke the promise", failed, n);
    printf("  %s: %d files\n", t->name, n > 0 ? n : 0);
}

/* The json corpus through the command: an exit status below 128, and when it fails
 * one line of output that names the file. */
static void replay_json(void)
{
    struct dirent **list = NULL;
    int n = scandir(CORPUS "/json", &list, plain_file, alphasort);
    t_case("fuzz/json: every file of " CORPUS "/json through `ctrain time --compare`: no crash; each failure one line naming the file");
    t_check(n > 0, "no corpus in " CORPUS "/json");
    int failed = 0;
    for (int i = 0; i < n; i++) {
        char args[600], out[8192];
        snprintf(args, sizeof args, "time --compare '" CORPUS "/json/%s'", list[i]->d_name);
        int rc = t_run_ctrain(args, out, sizeof out);
        const char *nl = strchr(out, '\n');
        int one_line = nl && nl[1] == '\0';
        if ((rc < 0 || rc >= 128 || (rc != 0 && (!one_line || !strstr(out, list[i]->d_name)))) && failed++ < 5)
            t_check(0, "%s: exit %d, output: %.600s", list[i]->d_name, rc, out);
        free(list[i]);
    }
    free(list);
    t_check(failed == 0, "%d of %d files broke the promise", failed, n);
    printf("  json: %d files\n", n > 0 ? n : 0);
}

/* ---- the limits ---- */

static void put_u32(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static void case_idx_sizes(void)
{
    t_case("fuzz/limits: an IDX header promising more than the file can hold is refused before allocating (plain and gzip)");
    /* 40 bytes: a header for 60000 images of 28x28 (47 MB) and 24 bytes of pixels */
    unsigned char b[40] = { 0, 0, 0x08, 3 };
    put_u32(b + 4, 60000); put_u32(b + 8, 28); put_u32(b + 12, 28);
    const char *p = tpath("huge-images-idx3-ubyte");
    FILE *f = fopen(p, "wb");
    t_check(f && fwrite(b, 1, sizeof b, f) == sizeof b && fclose(f) == 0, "write %s", p);
    ct_images im;
    ct_status st = ct_idx_read_images(&im, p);
    t_check(st == CT_EFORMAT && strstr(ct_last_error(), "can hold at most 24") && strstr(ct_last_error(), p),
            "plain: status %s, message: %s", ct_status_name(st), ct_last_error());
    /* gzip: 2^28 labels in a file of a few dozen bytes (deflate cannot compress 1032:1) */
    unsigned char h[8] = { 0, 0, 0x08, 1 };
    put_u32(h + 4, 1u << 28);
    const char *g = tpath("huge-labels-idx1-ubyte.gz");
    gzFile z = gzopen(g, "wb");
    t_check(z && gzwrite(z, h, sizeof h) == (int)sizeof h && gzclose(z) == Z_OK, "write %s", g);
    int *labels = NULL, n = 0;
    st = ct_idx_read_labels(&labels, &n, g);
    t_check(st == CT_EFORMAT && strstr(ct_last_error(), "268435456 labels") && strstr(ct_last_error(), g),
            "gzip: status %s, message: %s", ct_status_name(st), ct_last_error());
    free(labels);
}

static void case_featstore_sizes(void)
{
    t_case("fuzz/limits: a feature store declaring 2^40 frames it does not store is refused before allocating");
    const char *p = tpath("declared.h5");
    unlink(p);
    ct_featstore *w = NULL;
    ct_status st = ct_featstore_open(&w, p, 4);
    t_check(st == CT_OK, "create: %s", ct_last_error());
    if (st != CT_OK) return;
    float x[4 * 3] = { 0 };
    t_check(ct_featstore_append(w, "id1/v/1.wav", "id1", "v", x, 3) == CT_OK, "append");
    t_check(ct_featstore_close(w) == CT_OK, "close: %s", ct_last_error());
    /* feats grows to 2^40 rows on paper (chunks never written) and utt_frames claims them */
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t dims[2] = { (hsize_t)1 << 40, 4 };
    hid_t d = H5Dopen2(f, "feats", H5P_DEFAULT);
    t_check(f >= 0 && d >= 0 && H5Dset_extent(d, dims) >= 0, "grow feats");
    H5Dclose(d);
    H5Fclose(f);
    struct stat sb;
    int found = stat(p, &sb) == 0;   /* (before t_check: its arguments are evaluated in any order) */
    /* its one chunk of CT_FEATSTORE_CHUNK_FRAMES rows and the index, not 2^40 rows (16 TiB) */
    t_check(found && sb.st_size < 64 << 20, "the file stays small (%lld bytes)", found ? (long long)sb.st_size : -1LL);
    ct_corpus c;
    st = ct_featstore_load(&c, p);
    t_check(st == CT_EFORMAT && strstr(ct_last_error(), "declares") && strstr(ct_last_error(), p),
            "status %s, message: %s", ct_status_name(st), ct_last_error());
    if (st == CT_OK) ct_corpus_free(&c);
}

static void case_checkpoint_numbers(void)
{
    t_case("fuzz/limits: a checkpoint whose epoch is 1e300 is refused as damaged (no out-of-range conversion)");
    /* the smallest file ct_ckpt_verify reads: format, version and a /progress group */
    const char *p = tpath("epoch.h5");
    hid_t f;
    t_check(ct_h5_create(&f, p) == CT_OK, "create %s", p);
    ct_kv root = { 0 }, prog = { 0 };
    ct_kv_set_str(&root, "format", CT_CKPT_FORMAT);
    ct_kv_set_int(&root, "format_version", 1);
    ct_kv_set_str(&root, "model", "small-cnn");
    ct_kv_set_num(&prog, "epoch", 1e300);
    ct_kv_set_int(&prog, "step", 0);
    hid_t g = H5Gcreate2(f, "progress", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
    t_check(ct_kv_write_h5(f, "/", &root) == CT_OK && ct_kv_write_h5(f, "progress", &prog) == CT_OK, "write attributes");
    ct_h5_close(f);
    int epoch = -1;
    long step = -1;
    ct_status st = ct_ckpt_verify(p, &epoch, &step);
    t_check(st == CT_EFORMAT && strstr(ct_last_error(), "impossible position") && strstr(ct_last_error(), p),
            "status %s, message: %s", ct_status_name(st), ct_last_error());

    t_case("fuzz/limits: numbers read from a file saturate instead of wrapping (hidden = 2^32 + 128 is not 128)");
    ct_kv kv = { 0 };
    int v = 0;
    long l = 0;
    ct_kv_set_int(&kv, "hidden", 4294967424LL);
    t_check(ct_kv_int(&kv, "hidden", &v) && v == 2147483647, "2^32 + 128 as an int: %d", v);
    ct_kv_set_num(&kv, "embed", -1e300);
    t_check(ct_kv_int(&kv, "embed", &v) && v == -2147483647 - 1, "-1e300 as an int: %d", v);
    ct_kv_set_num(&kv, "frames", NAN);
    t_check(ct_kv_long(&kv, "frames", &l) && l < 0, "NaN as a long: %ld", l);
}

static void case_spec_size(void)
{
    t_case("fuzz/limits: a spec asking for 2^32 weights is refused with the limit (no allocation)");
    static seq_cnn m;
    ct_status st = ct_seq_cnn_build(&m, "conv65536k1,conv65536k1,gap,dense10", 1, 28, 28, 10);
    t_check(st == CT_EINVAL && strstr(ct_last_error(), "too large"), "status %s, message: %s", ct_status_name(st), ct_last_error());
    if (st == CT_OK) ct_seq_cnn_free(&m);
    st = ct_seq_cnn_build(&m, "conv32k3,relu,gap,dense10", 1, 28, 28, 10);
    t_check(st == CT_OK, "a small spec still builds: %s", ct_last_error());
    if (st == CT_OK) ct_seq_cnn_free(&m);
}

static void case_prep_damaged_store(void)
{
    t_case("fuzz/limits: prep --out on a damaged store: exit 1, one line naming it, the file unchanged (it used to crash at exit)");
    /* a damaged store HDF5 could not close once opened for writing: the process crashed in
     * HDF5's exit handler (status 139) after printing its message */
    const char *src = CORPUS "/featstore/crash-damaged-store-left-open-for-writing.h5";
    char store[256], wav[256], cmd[1024], out[4096];
    snprintf(store, sizeof store, "%s/damaged.h5", tmp);
    snprintf(wav, sizeof wav, "%s/wav/id10001/vid", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp " CORPUS "/audio/seed-16k-mono.wav %s/00001.wav && cp %s %s", wav, wav, src, store);
    t_check(system(cmd) == 0, "setup: %s", cmd);
    snprintf(cmd, sizeof cmd, "prep voxceleb --wav %s/wav --out %s --min-seconds 0.025", tmp, store);
    int rc = t_run_ctrain(cmd, out, sizeof out);
    const char *nl = strchr(out, '\n');
    t_check(rc == 1 && nl && nl[1] == '\0' && strstr(out, store) && strstr(out, "left as it is"), "exit %d: %s", rc, out);
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", src, store);
    t_check(system(cmd) == 0, "the damaged store was changed");
    snprintf(cmd, sizeof cmd, "rm -rf %s/wav %s", tmp, store);
    if (system(cmd) != 0) printf("  could not clean up %s\n", tmp);
}

/* Stand-ins for libhdf5 reading a damaged file: one dies, one never ends. */
static void walk_killed(const char *path) { (void)path; raise(SIGKILL); }
static void walk_forever(const char *path) { (void)path; for (;;) pause(); }

static void case_h5_probe(void)
{
    t_case("fuzz/limits: an HDF5 file that makes libhdf5 loop forever: one line after CTRAIN_H5_TIMEOUT s, exit 1 (it used to hang)");
    /* a global heap whose free-space object has size 0: H5HG_read walks it forever when a
     * variable-length string attribute is read (docs/robustness.md) */
    const char *hang = tpath("hang-H5HG_read-zero-size-free-object.h5");   /* the commands run elsewhere: an absolute path */
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "cp tests/fuzz/hdf5/hang-H5HG_read-zero-size-free-object.h5 %s", hang);
    t_check(system(cmd) == 0, "setup: %s", cmd);
    setenv("CTRAIN_H5_TIMEOUT", "2", 1);
    snprintf(cmd, sizeof cmd, "train siamese-lstm --data %s --epochs 1", hang);
    int rc = t_run_ctrain(cmd, out, sizeof out);
    const char *nl = strchr(out, '\n');
    t_check(rc == 1 && nl && nl[1] == '\0' && strstr(out, hang) && strstr(out, "did not finish") && strstr(out, "in 2 s"),
            "exit %d: %s", rc, out);
    snprintf(cmd, sizeof cmd, "import --format torch %s --model cnn --out %s", hang, tpath("imported.h5"));
    rc = t_run_ctrain(cmd, out, sizeof out);
    t_check(rc == 1 && strstr(out, "did not finish"), "import: exit %d: %s", rc, out);

    t_case("h5probe: a reader that dies or overruns in the child is one line naming the file; the caller goes on otherwise");
    const char *good = tpath("probe-good.h5");
    hid_t f;
    t_check(ct_h5_create(&f, good) == CT_OK, "create %s", good);
    ct_h5_close(f);
    ct_status st = ct_h5_probe_run(good, walk_killed);
    t_check(st == CT_EFORMAT && strstr(ct_last_error(), good) && strstr(ct_last_error(), "crashed") && strstr(ct_last_error(), "signal 9"),
            "killed: status %s, message: %s", ct_status_name(st), ct_last_error());
    setenv("CTRAIN_H5_TIMEOUT", "1", 1);
    st = ct_h5_probe_run(good, walk_forever);
    t_check(st == CT_EFORMAT && strstr(ct_last_error(), "did not finish") && strstr(ct_last_error(), "in 1 s"),
            "overrun: status %s, message: %s", ct_status_name(st), ct_last_error());
    t_check(ct_h5_probe(good) == CT_OK, "a whole file: %s", ct_last_error());
    const char *text = tpath("probe-not-hdf5.h5");
    FILE *tf = fopen(text, "w");
    if (tf) { fputs("not HDF5\n", tf); fclose(tf); }
    t_check(ct_h5_probe(text) == CT_OK, "a file that is not HDF5 is left to the caller: %s", ct_last_error());
    setenv("CTRAIN_H5_TIMEOUT", "soon", 1);
    st = ct_h5_probe(good);
    t_check(st == CT_EINVAL && strstr(ct_last_error(), "CTRAIN_H5_TIMEOUT=soon"), "status %s, message: %s", ct_status_name(st), ct_last_error());
    unsetenv("CTRAIN_H5_TIMEOUT");
    unlink(good);
    unlink(text);
    unlink(hang);
}

void suite_fuzz(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ctrain_fuzz_XXXXXX");
    if (!mkdtemp(tmp)) { t_case("fuzz/setup"); t_check(0, "mkdtemp failed"); return; }
    ct_h5_quiet();
    for (int i = 0; fuzz_targets[i].name; i++) replay(&fuzz_targets[i]);
    replay_json();
    case_idx_sizes();
    case_featstore_sizes();
    case_checkpoint_numbers();
    case_spec_size();
    case_prep_damaged_store();
    case_h5_probe();
    char scratch[128];
    snprintf(scratch, sizeof scratch, "%s/scratch", tmp);
    clear_dir(scratch);
    rmdir(scratch);
    clear_dir(tmp);
    rmdir(tmp);
}
