/* idx.c - the IDX reader (see idx.h). zlib's gzopen/gzread read gzip files and,
 * transparently, plain ones, so one code path serves both. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include "io/idx.h"

#define IDX_MAX_DIM (1u << 28)   /* any one dimension; far above every real dataset */

static const char *data_hint(void)
{
    return "pass --data fashion-mnist (`make deps` installs Debian's dataset-fashion-mnist) "
           "or --data DIR with the four IDX files of MNIST or Fashion-MNIST";
}

/* Reads exactly n bytes; distinguishes a short file from a decompression error. */
static ct_status read_exact(gzFile g, void *dst, size_t n, const char *path, const char *what)
{
    unsigned char *p = dst;
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        int r = gzread(g, p + got, (unsigned)want);
        if (r < 0) {
            int zerr;
            const char *msg = gzerror(g, &zerr);
            return ct_fail(CT_EFORMAT, "%s: cannot decompress (%s) while reading the %s: the file is corrupt; "
                           "download it again", path, msg, what);
        }
        if (r == 0) {
            int zerr;
            const char *msg = gzerror(g, &zerr);
            if (zerr != Z_OK && zerr != Z_BUF_ERROR)
                return ct_fail(CT_EFORMAT, "%s: cannot decompress (%s) while reading the %s: the file is corrupt; "
                               "download it again", path, msg, what);
            return ct_fail(CT_EFORMAT, "%s: truncated: the header promises %zu bytes of %s but the file ends after %zu; "
                           "download it again", path, n, what, got);
        }
        got += (size_t)r;
    }
    return CT_OK;
}

#define GZIP_MAX_RATIO 1032ULL   /* deflate's largest compression ratio */

/* Opens an IDX file, checks its magic (type 0x08, `ndim` dimensions) and reads the
 * dimensions into dims[0..ndim). *room receives the most data bytes the file can
 * hold after its header: the rest of a plain file, or 1032 times a gzip file's
 * size (deflate cannot compress more), so that a header promising more than that
 * is refused before anything is allocated for it. */
static ct_status idx_open(gzFile *out, const char *path, int ndim, uint32_t *dims, const char *kind, uint64_t *room)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ct_fail(CT_EIO, "%s: cannot open: %s; %s", path, strerror(errno), data_hint());
    if (!S_ISREG(sb.st_mode))
        return ct_fail(CT_EIO, "%s: not a regular file; %s", path, data_hint());
    gzFile g = gzopen(path, "rb");
    if (!g) return ct_fail(CT_EIO, "%s: cannot open: %s; %s", path, errno ? strerror(errno) : "out of memory", data_hint());
    gzbuffer(g, 1u << 18);
    unsigned char h[4];
    ct_status st = read_exact(g, h, 4, path, "header");
    if (st != CT_OK) { gzclose(g); return st; }
    uint32_t magic = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    uint32_t want = 0x0800u | (uint32_t)ndim;
    if (h[0] != 0 || h[1] != 0 || h[3] != ndim) {
        gzclose(g);
        return ct_fail(CT_EFORMAT, "%s: not an IDX %s file (magic number 0x%08x, expected 0x%08x); "
                       "pass the %s file (e.g. %s)", path, kind, magic, want, kind,
                       ndim == 3 ? "train-images-idx3-ubyte.gz" : "train-labels-idx1-ubyte.gz");
    }
    if (h[2] != 0x08) {
        gzclose(g);
        return ct_fail(CT_EFORMAT, "%s: IDX data type 0x%02x is not unsigned byte (0x08; magic 0x%08x, expected 0x%08x): "
                       "ctrain reads only the unsigned-byte files of MNIST and Fashion-MNIST", path, h[2], magic, want);
    }
    for (int i = 0; i < ndim; i++) {
        unsigned char b[4];
        st = read_exact(g, b, 4, path, "header");
        if (st != CT_OK) { gzclose(g); return st; }
        dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (dims[i] == 0 || dims[i] > IDX_MAX_DIM) {
            gzclose(g);
            return ct_fail(CT_EFORMAT, "%s: dimension %d of the header is %u (must be 1 to %u): the file is corrupt; "
                           "download it again", path, i, dims[i], IDX_MAX_DIM);
        }
    }
    uint64_t header = 4 + 4 * (uint64_t)ndim, size = (uint64_t)sb.st_size;
    *room = gzdirect(g) ? (size > header ? size - header : 0) : size * GZIP_MAX_RATIO;
    *out = g;
    return CT_OK;
}

/* After the data: the file must end here. */
static ct_status idx_close_at_end(gzFile g, const char *path, size_t expected)
{
    unsigned char extra[4096];
    size_t n_extra = 0;
    int r;
    while ((r = gzread(g, extra, sizeof extra)) > 0) n_extra += (size_t)r;
    int zerr;
    const char *msg = gzerror(g, &zerr);
    ct_status st = CT_OK;
    if (r < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR))
        st = ct_fail(CT_EFORMAT, "%s: cannot decompress (%s) after the data: the file is corrupt; download it again", path, msg);
    else if (n_extra > 0)
        st = ct_fail(CT_EFORMAT, "%s: %zu trailing bytes after the %zu bytes the header describes: the file is corrupt "
                     "or not an IDX file; download it again", path, n_extra, expected);
    gzclose(g);
    return st;
}

ct_status ct_idx_read_images(ct_images *im, const char *path)
{
    memset(im, 0, sizeof *im);
    uint32_t dims[3] = { 0 };
    gzFile g;
    uint64_t room = 0;
    CT_TRY(idx_open(&g, path, 3, dims, "images", &room));
    uint64_t n = dims[0], rows = dims[1], cols = dims[2], bytes = n * rows * cols;
    if (n > INT32_MAX || rows * cols > (1u << 24) || bytes > ((uint64_t)1 << 34)) {
        gzclose(g);
        return ct_fail(CT_EFORMAT, "%s: header says %llu images of %llux%llu pixels, too large to be MNIST-like data; "
                       "check the file", path, (unsigned long long)n, (unsigned long long)rows, (unsigned long long)cols);
    }
    if (bytes > room) {
        gzclose(g);
        return ct_fail(CT_EFORMAT, "%s: truncated: the header promises %llu images of %llux%llu pixels (%llu bytes) but the "
                       "file can hold at most %llu; download it again", path, (unsigned long long)n,
                       (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)bytes, (unsigned long long)room);
    }
    unsigned char *raw = ct_malloc((size_t)bytes, "IDX image bytes");
    float *x = raw ? ct_malloc((size_t)bytes * sizeof *x, "images") : NULL;
    if (!raw || !x) { free(raw); gzclose(g); return CT_ENOMEM; }
    ct_status st = read_exact(g, raw, (size_t)bytes, path, "pixel data");
    if (st != CT_OK) { free(raw); free(x); gzclose(g); return st; }
    st = idx_close_at_end(g, path, (size_t)bytes);
    if (st != CT_OK) { free(raw); free(x); return st; }
    for (size_t i = 0; i < (size_t)bytes; i++) x[i] = raw[i] * (1.0f / 255.0f);
    free(raw);
    im->n = (int)n; im->c = 1; im->h = (int)rows; im->w = (int)cols;
    im->x = x;
    return CT_OK;
}

ct_status ct_idx_read_labels(int **labels, int *n_out, const char *path)
{
    *labels = NULL; *n_out = 0;
    uint32_t dims[1] = { 0 };
    gzFile g;
    uint64_t room = 0;
    CT_TRY(idx_open(&g, path, 1, dims, "labels", &room));
    size_t n = dims[0];
    if (n > room) {
        gzclose(g);
        return ct_fail(CT_EFORMAT, "%s: truncated: the header promises %zu labels but the file can hold at most %llu; "
                       "download it again", path, n, (unsigned long long)room);
    }
    unsigned char *raw = ct_malloc(n, "IDX label bytes");
    int *lab = raw ? ct_malloc(n * sizeof *lab, "labels") : NULL;
    if (!raw || !lab) { free(raw); gzclose(g); return CT_ENOMEM; }
    ct_status st = read_exact(g, raw, n, path, "labels");
    if (st != CT_OK) { free(raw); free(lab); gzclose(g); return st; }
    st = idx_close_at_end(g, path, n);
    if (st != CT_OK) { free(raw); free(lab); return st; }
    for (size_t i = 0; i < n; i++) lab[i] = raw[i];
    free(raw);
    *labels = lab; *n_out = (int)n;
    return CT_OK;
}

ct_status ct_idx_load(ct_images *im, const char *images_path, const char *labels_path, int classes)
{
    memset(im, 0, sizeof *im);
    if (classes < 2 || classes > 256) return ct_fail(CT_EINVAL, "IDX data: %d classes; need 2 to 256", classes);
    ct_images tmp;
    CT_TRY(ct_idx_read_images(&tmp, images_path));
    int *labels = NULL, n = 0;
    ct_status st = ct_idx_read_labels(&labels, &n, labels_path);
    if (st != CT_OK) { ct_images_free(&tmp); return st; }
    if (n != tmp.n) {
        st = ct_fail(CT_EFORMAT, "%s: %d labels, but %s holds %d images: the two files do not belong together; "
                     "use the label file of the same split", labels_path, n, images_path, tmp.n);
    }
    for (int i = 0; st == CT_OK && i < n; i++)
        if (labels[i] >= classes)
            st = ct_fail(CT_EFORMAT, "%s: label %d of item %d is out of range (%d classes: labels 0 to %d); "
                         "the file is corrupt or not from a %d-class dataset", labels_path, labels[i], i, classes,
                         classes - 1, classes);
    if (st != CT_OK) { free(labels); ct_images_free(&tmp); return st; }
    tmp.labels = labels;
    tmp.classes = classes;
    *im = tmp;
    return CT_OK;
}

/* dir/name.gz if it exists, else dir/name if it exists, else an error naming both. */
static ct_status find_file(char *out, size_t cap, const char *dir, const char *name)
{
    struct stat sb;
    int k = snprintf(out, cap, "%s/%s.gz", dir, name);
    if (k < 0 || (size_t)k >= cap) return ct_fail(CT_EINVAL, "data directory path too long: %s", dir);
    if (stat(out, &sb) == 0) return CT_OK;
    snprintf(out, cap, "%s/%s", dir, name);
    if (stat(out, &sb) == 0) return CT_OK;
    if (stat(dir, &sb) != 0)
        return ct_fail(CT_EIO, "%s: data directory not found (needed for %s); %s", dir, name, data_hint());
    return ct_fail(CT_EIO, "%s/%s.gz: not found (nor %s/%s); the directory must hold the four IDX files "
                   "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte "
                   "(each optionally .gz); %s", dir, name, dir, name, data_hint());
}

ct_status ct_idx_load_dir(ct_images *train, ct_images *test, const char *dir)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    char p[4][1024];
    static const char *names[4] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" };
    for (int i = 0; i < 4; i++) CT_TRY(find_file(p[i], sizeof p[i], dir, names[i]));
    CT_TRY(ct_idx_load(train, p[0], p[1], CT_IDX_CLASSES));
    ct_status st = ct_idx_load(test, p[2], p[3], CT_IDX_CLASSES);
    if (st == CT_OK && (test->h != train->h || test->w != train->w))
        st = ct_fail(CT_EFORMAT, "%s: test images are %dx%d but the training images (%s) are %dx%d; "
                     "use the files of one dataset", p[2], test->h, test->w, p[0], train->h, train->w);
    if (st != CT_OK) { ct_images_free(train); ct_images_free(test); }
    return st;
}

ct_status ct_idx_load_split(ct_images *im, const char *dir, int test)
{
    memset(im, 0, sizeof *im);
    char pi[1024], pl[1024];
    CT_TRY(find_file(pi, sizeof pi, dir, test ? "t10k-images-idx3-ubyte" : "train-images-idx3-ubyte"));
    CT_TRY(find_file(pl, sizeof pl, dir, test ? "t10k-labels-idx1-ubyte" : "train-labels-idx1-ubyte"));
    return ct_idx_load(im, pi, pl, CT_IDX_CLASSES);
}

const char *ct_idx_data_dir(const char *data)
{
    return !strcmp(data, "fashion-mnist") ? CT_FASHION_MNIST_DIR : data;
}
