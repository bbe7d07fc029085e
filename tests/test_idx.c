/* test_idx.c - tests of io/idx: good IDX files written by the test (gzip and
 * plain) read back exactly; every kind of bad file (wrong magic, wrong type
 * byte, zero dimension, truncated data, truncated gzip stream, trailing bytes,
 * image/label count mismatch, label out of range, missing file, garbage that is
 * not gzip) gives the right status and a message naming the file; and the real
 * Fashion-MNIST from Debian's dataset-fashion-mnist loads with 60000/10000
 * balanced, in-range labels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>
#include "tests/test.h"
#include "io/idx.h"

static char tmpdir[256];

static const char *tpath(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void put_u32(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

/* Writes bytes as a plain or gzip file. */
static void write_bytes(const char *path, const unsigned char *b, size_t n, int gz)
{
    if (gz) {
        gzFile g = gzopen(path, "wb");
        if (!g) { t_check(0, "cannot create %s", path); return; }
        if (n) t_check(gzwrite(g, b, (unsigned)n) == (int)n, "gzwrite %s", path);
        t_check(gzclose(g) == Z_OK, "gzclose %s", path);
    } else {
        FILE *f = fopen(path, "wb");
        if (!f) { t_check(0, "cannot create %s", path); return; }
        if (n) t_check(fwrite(b, 1, n, f) == n, "fwrite %s", path);
        t_check(fclose(f) == 0, "fclose %s", path);
    }
}

/* An image file of n images rows x cols with pixel (i, k) = (7 i + k) % 256;
 * `cut` bytes removed from the end, `extra` bytes appended; magic and type overridable. */
static void write_images(const char *path, int n, int rows, int cols, int gz, size_t cut, size_t extra,
                         unsigned char type, unsigned char ndim)
{
    size_t px = (size_t)n * rows * cols, len = 16 + px + extra;
    unsigned char *b = calloc(len, 1);
    b[2] = type; b[3] = ndim;
    put_u32(b + 4, (unsigned)n); put_u32(b + 8, (unsigned)rows); put_u32(b + 12, (unsigned)cols);
    for (size_t i = 0; i < px; i++) b[16 + i] = (unsigned char)((7 * (i / (size_t)(rows * cols)) + i % (size_t)(rows * cols)) % 256);
    for (size_t i = 0; i < extra; i++) b[16 + px + i] = 0xab;
    write_bytes(path, b, len - cut, gz);
    free(b);
}

static void write_labels(const char *path, int n, int gz, int bad_index, unsigned char bad_value)
{
    unsigned char *b = calloc(8 + (size_t)n, 1);
    b[2] = 0x08; b[3] = 0x01;
    put_u32(b + 4, (unsigned)n);
    for (int i = 0; i < n; i++) b[8 + i] = (unsigned char)(i % 10);
    if (bad_index >= 0) b[8 + bad_index] = bad_value;
    write_bytes(path, b, 8 + (size_t)n, gz);
    free(b);
}

static void check_good(const char *what, int gz)
{
    t_case("idx/reads a good %s image file and label file exactly", what);
    const char *pi = tpath(gz ? "good-images.gz" : "good-images"), *pl = tpath(gz ? "good-labels.gz" : "good-labels");
    write_images(pi, 13, 5, 3, gz, 0, 0, 0x08, 3);
    write_labels(pl, 13, gz, -1, 0);
    ct_images im;
    ct_status st = ct_idx_load(&im, pi, pl, 10);
    if (!t_check(st == CT_OK, "load: %s", ct_last_error())) return;
    t_check(im.n == 13 && im.c == 1 && im.h == 5 && im.w == 3 && im.classes == 10, "shape n=%d c=%d h=%d w=%d classes=%d",
            im.n, im.c, im.h, im.w, im.classes);
    int bad = 0;
    for (int i = 0; i < 13; i++)
        for (int k = 0; k < 15; k++)
            if (im.x[i * 15 + k] != (float)((7 * i + k) % 256) * (1.0f / 255.0f)) bad++;
    t_check(bad == 0, "%d pixels differ from byte/255", bad);
    for (int i = 0; i < 13; i++) bad += im.labels[i] != i % 10;
    t_check(bad == 0, "labels differ");
    ct_images_free(&im);
}

/* A loader call must fail with `want` and a message containing the file's path and `phrase`. */
static void expect_fail(ct_status st, ct_status want, const char *path, const char *phrase)
{
    const char *msg = ct_last_error();
    t_check(st == want, "status %s, want %s (message: %s)", ct_status_name(st), ct_status_name(want), msg);
    t_check(strstr(msg, path) != NULL, "message \"%s\" does not name the file %s", msg, path);
    t_check(strstr(msg, phrase) != NULL, "message \"%s\" does not say \"%s\"", msg, phrase);
}

static void bad_images(const char *name, int gz, size_t cut, size_t extra, unsigned char type, unsigned char ndim,
                       int rows, ct_status want, const char *phrase)
{
    t_case("idx/rejects %s", name);
    const char *pi = tpath("bad-images"), *pl = tpath("bad-labels");
    write_images(pi, 4, rows, 6, gz, cut, extra, type, ndim);
    write_labels(pl, 4, 0, -1, 0);
    ct_images im;
    ct_status st = ct_idx_load(&im, pi, pl, 10);
    expect_fail(st, want, pi, phrase);
    t_check(im.x == NULL && im.labels == NULL && im.n == 0, "failed load must leave the set empty");
}

static void test_dir(void)
{
    t_case("idx/load_dir reads the four standard files (mixed .gz and plain)");
    char sub[300];
    snprintf(sub, sizeof sub, "%s/dataset", tmpdir);
    t_check(mkdir(sub, 0700) == 0, "mkdir %s", sub);
    char p[4][400];
    snprintf(p[0], sizeof p[0], "%s/train-images-idx3-ubyte.gz", sub);
    snprintf(p[1], sizeof p[1], "%s/train-labels-idx1-ubyte", sub);
    snprintf(p[2], sizeof p[2], "%s/t10k-images-idx3-ubyte", sub);
    snprintf(p[3], sizeof p[3], "%s/t10k-labels-idx1-ubyte.gz", sub);
    write_images(p[0], 20, 4, 4, 1, 0, 0, 0x08, 3);
    write_labels(p[1], 20, 0, -1, 0);
    write_images(p[2], 7, 4, 4, 0, 0, 0, 0x08, 3);
    write_labels(p[3], 7, 1, -1, 0);
    ct_images tr, te;
    ct_status st = ct_idx_load_dir(&tr, &te, sub);
    if (t_check(st == CT_OK, "load_dir: %s", ct_last_error())) {
        t_check(tr.n == 20 && te.n == 7 && tr.h == 4 && te.w == 4, "train %d test %d", tr.n, te.n);
        ct_images_free(&tr); ct_images_free(&te);
    }

    t_case("idx/load_dir names the missing file and how to get the data");
    remove(p[3]);
    st = ct_idx_load_dir(&tr, &te, sub);
    expect_fail(st, CT_EIO, "t10k-labels-idx1-ubyte", "make deps");
    t_check(strstr(ct_last_error(), sub) != NULL, "message \"%s\" does not name the directory", ct_last_error());
    t_check(tr.x == NULL && te.x == NULL, "failed load_dir must leave both sets empty");

    t_case("idx/load_dir rejects test images of another size than the training images");
    write_labels(p[3], 7, 1, -1, 0);
    write_images(p[2], 7, 5, 4, 0, 0, 0, 0x08, 3);
    st = ct_idx_load_dir(&tr, &te, sub);
    expect_fail(st, CT_EFORMAT, p[2], "5x4");
    t_check(tr.x == NULL && te.x == NULL, "failed load_dir must leave both sets empty");
    for (int i = 0; i < 4; i++) remove(p[i]);
    rmdir(sub);

    t_case("idx/load_dir of a missing directory names it");
    st = ct_idx_load_dir(&tr, &te, "/nonexistent/ctrain-data");
    expect_fail(st, CT_EIO, "/nonexistent/ctrain-data", "not found");
}

static void test_real(void)
{
    t_case("idx/real Fashion-MNIST (" CT_FASHION_MNIST_DIR "): 60000/10000 images 28x28, balanced labels in range");
    if (access(CT_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0 &&
        access(CT_FASHION_MNIST_DIR "/train-images-idx3-ubyte", R_OK) != 0) {
        t_check(0, "Fashion-MNIST not found in %s: `make deps` installs Debian's dataset-fashion-mnist", CT_FASHION_MNIST_DIR);
        return;
    }
    ct_images tr, te;
    ct_status st = ct_idx_load_dir(&tr, &te, ct_idx_data_dir("fashion-mnist"));
    if (!t_check(st == CT_OK, "load: %s", ct_last_error())) return;
    t_check(tr.n == 60000 && te.n == 10000, "train %d, test %d images; want 60000, 10000", tr.n, te.n);
    t_check(tr.c == 1 && tr.h == 28 && tr.w == 28 && te.h == 28 && te.w == 28, "image size %dx%dx%d", tr.c, tr.h, tr.w);
    long count[2][10] = { { 0 } };
    int out_of_range = 0;
    for (int s = 0; s < 2; s++) {
        const ct_images *im = s ? &te : &tr;
        for (int i = 0; i < im->n; i++) {
            if (im->labels[i] < 0 || im->labels[i] >= 10) out_of_range++;
            else count[s][im->labels[i]]++;
        }
    }
    t_check(out_of_range == 0, "%d labels out of range", out_of_range);
    for (int k = 0; k < 10; k++)
        t_check(count[0][k] == 6000 && count[1][k] == 1000, "class %d: %ld train, %ld test; want 6000, 1000", k, count[0][k], count[1][k]);
    float lo = 1, hi = 0;
    double sum = 0;
    for (size_t i = 0; i < (size_t)tr.n * 784; i++) {
        if (tr.x[i] < lo) lo = tr.x[i];
        if (tr.x[i] > hi) hi = tr.x[i];
        sum += tr.x[i];
    }
    double mean = sum / ((double)tr.n * 784);
    /* Fashion-MNIST's pixel mean is 0.2860 (72.94 / 255) */
    t_check(lo == 0.0f && hi == 1.0f && mean > 0.28 && mean < 0.29, "pixels in [%g, %g], mean %.4f; want [0, 1], mean 0.286", lo, hi, mean);
    ct_images_free(&tr); ct_images_free(&te);
}

void suite_idx(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ctrain-idx-XXXXXX");
    if (!mkdtemp(tmpdir)) { t_case("idx/temporary directory"); t_check(0, "mkdtemp failed"); return; }

    check_good("gzip", 1);
    check_good("plain", 0);

    bad_images("a wrong magic number (3 dimensions expected, 2 given)", 1, 0, 0, 0x08, 2, 5, CT_EFORMAT, "magic");
    bad_images("a wrong data type byte (0x0D float instead of 0x08 unsigned byte)", 0, 0, 0, 0x0d, 3, 5, CT_EFORMAT, "data type 0x0d");
    bad_images("a zero dimension in the header", 1, 0, 0, 0x08, 3, 0, CT_EFORMAT, "dimension 1");
    bad_images("truncated image data (gzip)", 1, 7, 0, 0x08, 3, 5, CT_EFORMAT, "truncated");
    bad_images("truncated image data (plain)", 0, 1, 0, 0x08, 3, 5, CT_EFORMAT, "truncated");
    bad_images("a truncated header", 0, 4 * 5 * 6 + 3, 0, 0x08, 3, 5, CT_EFORMAT, "truncated");
    bad_images("trailing bytes after the image data (gzip)", 1, 0, 3, 0x08, 3, 5, CT_EFORMAT, "3 trailing bytes");
    bad_images("trailing bytes after the image data (plain)", 0, 0, 1, 0x08, 3, 5, CT_EFORMAT, "1 trailing bytes");

    {
        t_case("idx/rejects a gzip stream cut in the middle");
        const char *pi = tpath("cut.gz"), *pl = tpath("cut-labels");
        write_images(pi, 50, 28, 28, 1, 0, 0, 0x08, 3);
        write_labels(pl, 50, 0, -1, 0);
        FILE *f = fopen(pi, "rb");
        unsigned char buf[1 << 16];
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f) fclose(f);
        write_bytes(pi, buf, n / 2, 0);
        ct_images im;
        expect_fail(ct_idx_load(&im, pi, pl, 10), CT_EFORMAT, pi, "download it again");
    }
    {
        t_case("idx/rejects an image/label count mismatch");
        const char *pi = tpath("n-images"), *pl = tpath("n-labels");
        write_images(pi, 6, 3, 3, 0, 0, 0, 0x08, 3);
        write_labels(pl, 5, 1, -1, 0);
        ct_images im;
        expect_fail(ct_idx_load(&im, pi, pl, 10), CT_EFORMAT, pl, "5 labels");
        t_check(strstr(ct_last_error(), pi) != NULL, "message \"%s\" should also name the image file", ct_last_error());
    }
    {
        t_case("idx/rejects a label out of range (10 with 10 classes, 3 with 3 classes)");
        const char *pi = tpath("r-images"), *pl = tpath("r-labels");
        write_images(pi, 6, 3, 3, 0, 0, 0, 0x08, 3);
        write_labels(pl, 6, 0, 4, 10);
        ct_images im;
        expect_fail(ct_idx_load(&im, pi, pl, 10), CT_EFORMAT, pl, "label 10 of item 4 is out of range");
        write_labels(pl, 6, 0, -1, 0);   /* labels 0..5 */
        expect_fail(ct_idx_load(&im, pi, pl, 3), CT_EFORMAT, pl, "label 3 of item 3 is out of range");
    }
    {
        t_case("idx/rejects a missing file, naming it");
        const char *pi = tpath("no-such-images.gz"), *pl = tpath("r-labels");
        ct_images im;
        expect_fail(ct_idx_load(&im, pi, pl, 10), CT_EIO, pi, "cannot open");
    }
    {
        t_case("idx/rejects garbage that is neither gzip nor IDX");
        const char *pi = tpath("garbage.gz"), *pl = tpath("r-labels");
        const char *text = "<html>404 Not Found</html>\n";
        write_bytes(pi, (const unsigned char *)text, strlen(text), 0);
        ct_images im;
        expect_fail(ct_idx_load(&im, pi, pl, 10), CT_EFORMAT, pi, "magic");
    }
    {
        t_case("idx/rejects a label file passed as the image file");
        const char *pl = tpath("r-labels");
        ct_images im;
        expect_fail(ct_idx_read_images(&im, pl), CT_EFORMAT, pl, "not an IDX images file");
    }
    test_dir();
    test_real();

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
}
