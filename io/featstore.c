/* featstore.c - the HDF5 feature store (layout and guarantees in featstore.h). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <pthread.h>
#include <fcntl.h>
#include <unistd.h>
#include "core/bytes.h"
#include "core/clock.h"
#include "core/half.h"
#include "io/featstore.h"
#include "io/fbank.h"
#include "io/h5.h"
#include "io/h5probe.h"
#include "io/lock.h"

#define MAKE_ONE "run `ctrain prep voxceleb --wav DIR --out FILE` to make one"

/* ---- a string -> index hash map over an array of names owned elsewhere ---- */

typedef struct { int *slot; size_t cap, n; } strmap;   /* slot[i] = index into names, or -1 */

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int map_find(const strmap *m, char *const *names, const char *key)
{
    if (m->cap == 0) return -1;
    for (size_t i = str_hash(key) & (m->cap - 1); m->slot[i] >= 0; i = (i + 1) & (m->cap - 1))
        if (!strcmp(names[m->slot[i]], key)) return m->slot[i];
    return -1;
}

static void map_place(strmap *m, char *const *names, int idx)
{
    size_t i = str_hash(names[idx]) & (m->cap - 1);
    while (m->slot[i] >= 0) i = (i + 1) & (m->cap - 1);
    m->slot[i] = idx;
    m->n++;
}

/* Adds names[idx] (not present yet), growing the table to stay at most half full. */
static ct_status map_insert(strmap *m, char *const *names, int idx)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        int *slot = ct_malloc(cap * sizeof *slot, "feature store index");
        if (!slot) return CT_ENOMEM;
        for (size_t i = 0; i < cap; i++) slot[i] = -1;
        int *old = m->slot;
        size_t old_cap = m->cap;
        m->slot = slot; m->cap = cap; m->n = 0;
        for (size_t i = 0; i < old_cap; i++) if (old[i] >= 0) map_place(m, names, old[i]);
        free(old);
    }
    map_place(m, names, idx);
    return CT_OK;
}

/* Grows *p (elements of `elem` bytes, capacity *cap) to hold at least `need`. */
static ct_status grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return CT_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return ct_fail(CT_ENOMEM, "out of memory growing the feature store's buffers (%zu entries)", c);
    *p = q;
    *cap = c;
    return CT_OK;
}

/* A growable list of owned names with its index. */
typedef struct { char **name; size_t n, cap, written; strmap map; } namelist;

static void names_free(namelist *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->name[i]);
    free(l->name);
    free(l->map.slot);
    memset(l, 0, sizeof *l);
}

/* Index of `s` in l, adding it at the end if it is new. */
static ct_status names_get(namelist *l, const char *s, int *idx)
{
    int i = map_find(&l->map, l->name, s);
    if (i >= 0) { *idx = i; return CT_OK; }
    if (l->n >= INT_MAX) return ct_fail(CT_EINVAL, "feature store: more than %d names", INT_MAX);
    CT_TRY(grow((void **)&l->name, &l->cap, l->n + 1, sizeof *l->name));
    char *copy = strdup(s);
    if (!copy) return ct_fail(CT_ENOMEM, "out of memory");
    l->name[l->n] = copy;
    ct_status st = map_insert(&l->map, l->name, (int)l->n);
    if (st != CT_OK) { free(copy); return st; }
    *idx = (int)l->n++;
    return CT_OK;
}

/* ---- HDF5 helpers for this layout ---- */

static hid_t str_type(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

/* IEEE binary16, little-endian (core/half.h): a float32 with its fields moved, as
 * HDF5 describes any floating-point format; h5py and NumPy write float16 the same way. */
static hid_t half_type(void)
{
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0) return -1;
    if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, 15) < 0) { H5Tclose(t); return -1; }
    return t;
}

/* How /feats is stored: 1 when it is binary16 in the layout above (read raw and widened
 * by core/half.h), 0 when it is float32 or any other float HDF5 converts to float32.
 * CT_EFORMAT when it is not a floating-point dataset. */
static ct_status feats_is_half(hid_t d, int *half, const char *file)
{
    hid_t t = H5Dget_type(d);
    if (t < 0 || H5Tget_class(t) != H5T_FLOAT) {
        if (t >= 0) H5Tclose(t);
        return ct_fail(CT_EFORMAT, "%s: /feats does not hold floating-point numbers; the file is damaged or not a ctrain "
                       "feature store: rebuild it with `ctrain prep voxceleb`", file);
    }
    size_t spos, epos, esize, mpos, msize;
    *half = H5Tget_size(t) == 2 && H5Tget_order(t) == H5T_ORDER_LE && H5Tget_ebias(t) == 15
            && H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0
            && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10;
    H5Tclose(t);
    return CT_OK;
}

const char *ct_feat_dtype_name(ct_feat_dtype t) { return t == CT_FEAT_FLOAT16 ? "float16" : "float32"; }

ct_status ct_feat_dtype_parse(ct_feat_dtype *t, const char *name)
{
    if (!strcmp(name, "float32")) *t = CT_FEAT_FLOAT32;
    else if (!strcmp(name, "float16")) *t = CT_FEAT_FLOAT16;
    else return ct_fail(CT_EINVAL, "--dtype %s: use float32 (4 bytes a value) or float16 (2 bytes: half the store)", name);
    return CT_OK;
}

/* Reads rows [row, row + n) of /feats (d, its dataspace fs) into dst [n, M] as float32.
 * A binary16 store (ht: half_type(), made once by the caller) is read raw into stage
 * (>= n * M values) and widened here; with ht = -1 any other float is converted by HDF5.
 * Rows only: with the chunk cache off (the streamed reader), HDF5 reads just these bytes
 * from each chunk. */
static herr_t read_rows(hid_t d, hid_t fs, hsize_t row, hsize_t n, int M, hid_t ht, uint16_t *stage, float *dst)
{
    hsize_t start[2] = { row, 0 }, count[2] = { n, (hsize_t)M };
    hid_t ms = H5Screate_simple(2, count, NULL);
    herr_t e = ms < 0 ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    if (e >= 0) e = H5Dread(d, ht >= 0 ? ht : H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, ht >= 0 ? (void *)stage : (void *)dst);
    if (e >= 0 && ht >= 0) ct_floats_from_halves(dst, stage, (size_t)n * (size_t)M);
    if (ms >= 0) H5Sclose(ms);
    return e;
}

/* An empty dataset, chunked, unlimited along axis 0; cols = 0 for 1-D. */
static ct_status create_ext(hid_t f, const char *name, hid_t type, int cols, hsize_t chunk, const char *file)
{
    int rank = cols ? 2 : 1;
    hsize_t dims[2] = { 0, (hsize_t)cols }, maxd[2] = { H5S_UNLIMITED, (hsize_t)cols }, ch[2] = { chunk, (hsize_t)cols };
    hid_t s = H5Screate_simple(rank, dims, maxd);
    hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    /* no modification times in the object headers: the same appends give the same bytes */
    herr_t e = (s < 0 || p < 0 || H5Pset_obj_track_times(p, 0) < 0) ? -1 : H5Pset_chunk(p, rank, ch);
    hid_t d = e < 0 ? -1 : H5Dcreate2(f, name, type, s, H5P_DEFAULT, p, H5P_DEFAULT);
    if (d >= 0) H5Dclose(d);
    if (p >= 0) H5Pclose(p);
    if (s >= 0) H5Sclose(s);
    if (d < 0) return ct_fail(CT_EIO, "%s: cannot create dataset /%s (disk full or not writable?)", file, name);
    return CT_OK;
}

/* Appends `rows` rows (of `cols` values; 0 = 1-D) to an extendable dataset. */
static ct_status ext_append(hid_t f, const char *name, hid_t memtype, const void *src, size_t rows, int cols, const char *file)
{
    if (rows == 0) return CT_OK;
    int rank = cols ? 2 : 1;
    hsize_t dims[2] = { 0, 0 }, start[2] = { 0, 0 }, count[2] = { rows, (hsize_t)cols };
    herr_t e = -1;
    hid_t fs = -1, ms = -1, d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d >= 0 && (fs = H5Dget_space(d)) >= 0 && H5Sget_simple_extent_ndims(fs) == rank
        && H5Sget_simple_extent_dims(fs, dims, NULL) >= 0) {
        start[0] = dims[0];
        dims[0] += rows;
        H5Sclose(fs);
        fs = -1;
        if (H5Dset_extent(d, dims) >= 0 && (fs = H5Dget_space(d)) >= 0
            && H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0
            && (ms = H5Screate_simple(rank, count, NULL)) >= 0)
            e = H5Dwrite(d, memtype, ms, fs, H5P_DEFAULT, src);
    }
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (d >= 0) H5Dclose(d);
    if (e < 0) return ct_fail(CT_EIO, "%s: cannot append %zu rows to /%s (disk full or file not writable?)", file, rows, name);
    return CT_OK;
}

static ct_status attr_write_int(hid_t f, const char *attr, int v, const char *file)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, attr, H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_INT, &v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    if (e < 0) return ct_fail(CT_EIO, "%s: cannot write attribute %s", file, attr);
    return CT_OK;
}

/* Root integer attribute; CT_EFORMAT naming the file if missing or not an integer. */
static ct_status attr_read_int(hid_t f, const char *attr, int *v, const char *file)
{
    if (H5Aexists(f, attr) <= 0)
        return ct_fail(CT_EFORMAT, "%s: attribute %s is missing: not a complete ctrain feature store; " MAKE_ONE, file, attr);
    hid_t a = H5Aopen(f, attr, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    herr_t e = (t < 0 || H5Tget_class(t) != H5T_INTEGER) ? -1 : H5Aread(a, H5T_NATIVE_INT, v);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    if (e < 0) return ct_fail(CT_EFORMAT, "%s: attribute %s is not an integer; " MAKE_ONE, file, attr);
    return CT_OK;
}

/* Root string attribute `format` == "ctrain-features" (fixed or variable length). */
static int has_format(hid_t f)
{
    if (H5Aexists(f, "format") <= 0) return 0;
    hid_t a = H5Aopen(f, "format", H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a);
    int ok = 0;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING) {
        if (H5Tis_variable_str(t) > 0) {
            hid_t m = str_type();
            char *s = NULL;
            if (H5Aread(a, m, &s) >= 0 && s) { ok = !strcmp(s, CT_FEATSTORE_FORMAT); H5free_memory(s); }
            H5Tclose(m);
        } else {
            size_t n = H5Tget_size(t);
            char buf[64] = { 0 };
            if (n > 0 && n < sizeof buf) {
                hid_t m = H5Tcopy(H5T_C_S1);
                H5Tset_size(m, n);
                if (H5Aread(a, m, buf) >= 0) ok = !strcmp(buf, CT_FEATSTORE_FORMAT);
                H5Tclose(m);
            }
        }
    }
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return ok;
}

/* Checks the root attributes; *n_mels receives the file's band count. */
static ct_status check_header(hid_t f, const char *file, int *n_mels)
{
    if (!has_format(f))
        return ct_fail(CT_EFORMAT, "%s: not a ctrain feature store: " MAKE_ONE " (the file has no format = \"" CT_FEATSTORE_FORMAT "\" attribute)", file);
    int v, rate, shift, len;
    CT_TRY(attr_read_int(f, "format_version", &v, file));
    if (v != CT_FEATSTORE_VERSION)
        return ct_fail(CT_EFORMAT, "%s: feature store format_version %d, but this ctrain reads version %d; %s",
                       file, v, CT_FEATSTORE_VERSION,
                       v > CT_FEATSTORE_VERSION ? "it was written by a newer ctrain: upgrade ctrain, or rebuild the store with this one's `ctrain prep voxceleb`"
                                                : "rebuild the store with `ctrain prep voxceleb`");
    CT_TRY(attr_read_int(f, "n_mels", n_mels, file));
    CT_TRY(attr_read_int(f, "sample_rate", &rate, file));
    CT_TRY(attr_read_int(f, "frame_shift_ms", &shift, file));
    CT_TRY(attr_read_int(f, "frame_length_ms", &len, file));
    if (*n_mels < 1 || *n_mels > 4096)
        return ct_fail(CT_EFORMAT, "%s: n_mels = %d is not a band count; the file is damaged: rebuild it with `ctrain prep voxceleb`", file, *n_mels);
    if (rate != CT_FBANK_RATE || shift != CT_FBANK_FRAME_SHIFT_MS || len != CT_FBANK_FRAME_LENGTH_MS)
        return ct_fail(CT_EFORMAT, "%s: features at %d Hz with %d ms frames every %d ms; this ctrain makes and reads %d Hz, %d ms, %d ms: "
                       "rebuild the store with `ctrain prep voxceleb`", file, rate, len, shift, CT_FBANK_RATE,
                       CT_FBANK_FRAME_LENGTH_MS, CT_FBANK_FRAME_SHIFT_MS);
    return CT_OK;
}

/* Length along axis 0 of dataset `name`, which must have rank 1 (cols = 0) or be [*, cols]. */
static ct_status dset_len(hid_t f, const char *name, int cols, hsize_t *len, const char *file)
{
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0)
        return ct_fail(CT_EFORMAT, "%s: dataset /%s is missing: not a complete ctrain feature store; " MAKE_ONE, file, name);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t s = d < 0 ? -1 : H5Dget_space(d);
    int rank = s < 0 ? -1 : H5Sget_simple_extent_ndims(s);
    hsize_t dims[2] = { 0, 0 };
    int ok = rank == (cols ? 2 : 1) && H5Sget_simple_extent_dims(s, dims, NULL) >= 0 && (!cols || dims[1] == (hsize_t)cols);
    /* every row it declares must be in the file: a reader allocates for them */
    unsigned long long per_row = (unsigned long long)(cols ? cols : 1);
    unsigned long long values = dims[0] > ~0ULL / per_row ? ~0ULL : (unsigned long long)dims[0] * per_row;
    ct_status stored = ok ? ct_h5_check_stored(d, name, values) : CT_OK;
    if (s >= 0) H5Sclose(s);
    if (d >= 0) H5Dclose(d);
    if (!ok) {
        if (cols) return ct_fail(CT_EFORMAT, "%s: /%s should be [frames, %d] (n_mels columns) but has another shape; the file is damaged: rebuild it", file, name, cols);
        return ct_fail(CT_EFORMAT, "%s: /%s should be a 1-D dataset; the file is damaged: rebuild it", file, name);
    }
    if (stored != CT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        return ct_fail(CT_EFORMAT, "%s: %s; rebuild it with `ctrain prep voxceleb`", file, msg);
    }
    *len = dims[0];
    return CT_OK;
}

static ct_status set_len(hid_t f, const char *name, hsize_t n, int cols, const char *file)
{
    hsize_t dims[2] = { n, (hsize_t)cols };
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    herr_t e = d < 0 ? -1 : H5Dset_extent(d, dims);
    if (d >= 0) H5Dclose(d);
    if (e < 0) return ct_fail(CT_EIO, "%s: cannot trim /%s back to %llu rows", file, name, (unsigned long long)n);
    return CT_OK;
}

/* Reads the first n values of a 1-D dataset (or all of a 2-D one, n = 0) as `memtype` into dst. */
static ct_status read_prefix(hid_t f, const char *name, hid_t memtype, void *dst, hsize_t n, const char *file)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), fs = -1, ms = -1;
    herr_t e = -1;
    hsize_t start = 0;
    if (d >= 0 && n == 0) e = H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst);
    else if (d >= 0 && (fs = H5Dget_space(d)) >= 0 && H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &n, NULL) >= 0
             && (ms = H5Screate_simple(1, &n, NULL)) >= 0)
        e = H5Dread(d, memtype, ms, fs, H5P_DEFAULT, dst);
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (d >= 0) H5Dclose(d);
    if (e < 0) return ct_fail(CT_EFORMAT, "%s: dataset /%s cannot be read (wrong type, or a truncated or corrupt file); rebuild it", file, name);
    return CT_OK;
}

/* Reads n strings of a 1-D string dataset into a new array of strdup'd strings. */
static ct_status read_strings(hid_t f, const char *name, size_t n, char ***out, const char *file)
{
    *out = NULL;
    char **raw = ct_calloc(n ? n : 1, sizeof *raw, name), **copy = ct_calloc(n ? n : 1, sizeof *copy, name);
    if (!raw || !copy) { free(raw); free(copy); return CT_ENOMEM; }
    ct_status st = CT_OK;
    hid_t m = str_type();
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t t = d < 0 ? -1 : H5Dget_type(d);
    hid_t s = d < 0 ? -1 : H5Dget_space(d);
    if (t < 0 || H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) <= 0)
        st = ct_fail(CT_EFORMAT, "%s: /%s should hold variable-length strings; the file is damaged or not a ctrain feature store: rebuild it", file, name);
    else if (n > 0 && H5Dread(d, m, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0)
        st = ct_fail(CT_EFORMAT, "%s: dataset /%s cannot be read (a truncated or corrupt file); rebuild it", file, name);
    else {
        for (size_t i = 0; i < n && st == CT_OK; i++) {
            if (!raw[i] || !raw[i][0]) st = ct_fail(CT_EFORMAT, "%s: /%s[%zu] is empty (an interrupted write?); rebuild the store", file, name, i);
            else if (!(copy[i] = strdup(raw[i]))) st = ct_fail(CT_ENOMEM, "out of memory reading /%s", name);
        }
        if (n > 0) H5Dvlen_reclaim(m, s, H5P_DEFAULT, raw);
    }
    if (s >= 0) H5Sclose(s);
    if (t >= 0) H5Tclose(t);
    if (d >= 0) H5Dclose(d);
    H5Tclose(m);
    free(raw);
    if (st != CT_OK) {
        for (size_t i = 0; i < n; i++) free(copy[i]);
        free(copy);
        return st;
    }
    *out = copy;
    return CT_OK;
}

static void free_strings(char **s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) free(s[i]);
    free(s);
}

/* What a store holds, read and checked (everything but feats and the strings). */
typedef struct {
    int n_mels;
    hsize_t n_utt, n_frames, n_speakers, n_videos;
    int64_t *offset;
    int *frames, *speaker, *video;
} store_index;

static void index_free(store_index *x)
{
    free(x->offset); free(x->frames); free(x->speaker); free(x->video);
    memset(x, 0, sizeof *x);
}

static const char *utt_sets[4] = { "utt_offset", "utt_frames", "utt_speaker", "utt_video" };

/* Reads and checks the index of an open store; want_mels > 0 requires that band
 * count. repair: REPAIR_NONE refuses datasets of unequal length; REPAIR_CHECK accepts
 * them and checks everything else without writing (on a file open read-only);
 * REPAIR_TRIM (the file open for writing) also trims: utt_* datasets of unequal
 * length (a batch cut short) are trimmed to the shortest, and feats to the last
 * frame used, once everything else has been checked; without, that is an error.
 * On failure the file is left as it was. */
enum { REPAIR_NONE, REPAIR_CHECK, REPAIR_TRIM };

static ct_status index_read(store_index *x, hid_t f, const char *file, int repair, int want_mels)
{
    memset(x, 0, sizeof *x);
    CT_TRY(check_header(f, file, &x->n_mels));
    if (want_mels > 0 && x->n_mels != want_mels)
        return ct_fail(CT_EINVAL, "%s: this store holds %d mel bands, not %d: use --mels %d to add to it, or another --out",
                       file, x->n_mels, want_mels, x->n_mels);
    hsize_t len[5];
    CT_TRY(dset_len(f, "feats", x->n_mels, &x->n_frames, file));
    for (int k = 0; k < 4; k++) CT_TRY(dset_len(f, utt_sets[k], 0, &len[k], file));
    CT_TRY(dset_len(f, "utt_path", 0, &len[4], file));
    CT_TRY(dset_len(f, "speakers", 0, &x->n_speakers, file));
    CT_TRY(dset_len(f, "videos", 0, &x->n_videos, file));
    hsize_t n = len[0];
    int same = 1;
    for (int k = 1; k < 5; k++) { if (len[k] != len[0]) same = 0; if (len[k] < n) n = len[k]; }
    if (!same && !repair)
        return ct_fail(CT_EFORMAT, "%s: the per-utterance datasets have different lengths (utt_offset %llu, utt_frames %llu, "
                       "utt_speaker %llu, utt_video %llu, utt_path %llu): a write was interrupted; run `ctrain prep voxceleb` "
                       "with the same --out to repair it, or rebuild it", file, (unsigned long long)len[0], (unsigned long long)len[1],
                       (unsigned long long)len[2], (unsigned long long)len[3], (unsigned long long)len[4]);
    if (n > (hsize_t)INT_MAX) return ct_fail(CT_EFORMAT, "%s: %llu utterances, more than this ctrain handles", file, (unsigned long long)n);
    x->n_utt = n;
    size_t m = n ? (size_t)n : 1;
    x->offset = ct_malloc(m * sizeof *x->offset, "utt_offset");
    x->frames = ct_malloc(m * sizeof *x->frames, "utt_frames");
    x->speaker = ct_malloc(m * sizeof *x->speaker, "utt_speaker");
    x->video = ct_malloc(m * sizeof *x->video, "utt_video");
    if (!x->offset || !x->frames || !x->speaker || !x->video) { index_free(x); return CT_ENOMEM; }
    ct_status st = CT_OK;
    if (n > 0) {
        if ((st = read_prefix(f, "utt_offset", H5T_NATIVE_INT64, x->offset, n, file)) != CT_OK
            || (st = read_prefix(f, "utt_frames", H5T_NATIVE_INT, x->frames, n, file)) != CT_OK
            || (st = read_prefix(f, "utt_speaker", H5T_NATIVE_INT, x->speaker, n, file)) != CT_OK
            || (st = read_prefix(f, "utt_video", H5T_NATIVE_INT, x->video, n, file)) != CT_OK) { index_free(x); return st; }
    }
    int64_t end_max = 0;
    for (size_t u = 0; u < (size_t)n; u++) {
        int64_t o = x->offset[u], fr = x->frames[u];
        if (fr < 1 || o < 0 || (uint64_t)o + (uint64_t)fr > (uint64_t)x->n_frames) {
            st = ct_fail(CT_EFORMAT, "%s: inconsistent sizes: utterance %zu has utt_offset %lld and utt_frames %lld, but feats holds "
                         "%llu frames; the file is damaged: rebuild it with `ctrain prep voxceleb`", file, u, (long long)o,
                         (long long)fr, (unsigned long long)x->n_frames);
            break;
        }
        if (x->speaker[u] < 0 || (hsize_t)x->speaker[u] >= x->n_speakers || x->video[u] < 0 || (hsize_t)x->video[u] >= x->n_videos) {
            st = ct_fail(CT_EFORMAT, "%s: inconsistent sizes: utterance %zu has speaker %d and video %d, but the store lists %llu "
                         "speakers and %llu videos; the file is damaged: rebuild it with `ctrain prep voxceleb`", file, u,
                         x->speaker[u], x->video[u], (unsigned long long)x->n_speakers, (unsigned long long)x->n_videos);
            break;
        }
        if (o + fr > end_max) end_max = o + fr;
    }
    for (int k = 0; k < 5 && st == CT_OK && repair == REPAIR_TRIM; k++)
        if (len[k] != n) st = set_len(f, k < 4 ? utt_sets[k] : "utt_path", n, 0, file);
    if (st == CT_OK && repair == REPAIR_TRIM && (hsize_t)end_max < x->n_frames) {
        st = set_len(f, "feats", (hsize_t)end_max, x->n_mels, file);
        x->n_frames = (hsize_t)end_max;
    }
    if (st != CT_OK) index_free(x);
    return st;
}

/* ---- the writer ---- */

struct ct_featstore {
    hid_t f;
    ct_path_lock lock;                 /* held while open: two writers never interleave (io/lock.h) */
    char *file;
    int n_mels, broken;
    int half;                          /* /feats holds binary16: the queue is narrowed at each flush */
    namelist path, speakers, videos;   /* every utterance / speaker / video, stored or queued */
    int64_t n_frames;                  /* rows in feats, stored + queued */
    /* the queue: utterances path.written .. path.n-1 */
    float *q_feats;
    uint16_t *q_half;                  /* [q_rows, n_mels] the queue as binary16, when half */
    size_t q_rows, q_rows_cap, q_half_cap, q_cap;
    int64_t *q_offset;
    int *q_frames, *q_speaker, *q_video;
};

static void writer_free(ct_featstore *w)
{
    if (!w) return;
    ct_path_lock_release(&w->lock);
    names_free(&w->path); names_free(&w->speakers); names_free(&w->videos);
    free(w->q_feats); free(w->q_half); free(w->q_offset); free(w->q_frames); free(w->q_speaker); free(w->q_video);
    free(w->file);
    free(w);
}

static ct_status create_store(hid_t f, int n_mels, int half, const char *file)
{
    CT_TRY(ct_h5_attr_write_str(f, "/", "format", CT_FEATSTORE_FORMAT));
    CT_TRY(attr_write_int(f, "format_version", CT_FEATSTORE_VERSION, file));
    CT_TRY(attr_write_int(f, "n_mels", n_mels, file));
    CT_TRY(attr_write_int(f, "sample_rate", CT_FBANK_RATE, file));
    CT_TRY(attr_write_int(f, "frame_shift_ms", CT_FBANK_FRAME_SHIFT_MS, file));
    CT_TRY(attr_write_int(f, "frame_length_ms", CT_FBANK_FRAME_LENGTH_MS, file));
    CT_TRY(ct_h5_attr_write_str(f, "/", "normalization", CT_FEATSTORE_NORMALIZATION));
    CT_TRY(ct_h5_attr_write_str(f, "/", "dtype", half ? "float16" : "float32"));   /* for people; /feats's type is what counts */
    hid_t s = str_type(), ft = half ? half_type() : H5Tcopy(H5T_IEEE_F32LE);
    ct_status st = CT_OK;
    if ((st = create_ext(f, "feats", ft, n_mels, CT_FEATSTORE_CHUNK_FRAMES, file)) != CT_OK
        || (st = create_ext(f, "utt_offset", H5T_STD_I64LE, 0, 4096, file)) != CT_OK
        || (st = create_ext(f, "utt_frames", H5T_STD_I32LE, 0, 4096, file)) != CT_OK
        || (st = create_ext(f, "utt_speaker", H5T_STD_I32LE, 0, 4096, file)) != CT_OK
        || (st = create_ext(f, "utt_video", H5T_STD_I32LE, 0, 4096, file)) != CT_OK
        || (st = create_ext(f, "utt_path", s, 0, 1024, file)) != CT_OK
        || (st = create_ext(f, "speakers", s, 0, 1024, file)) != CT_OK
        || (st = create_ext(f, "videos", s, 0, 1024, file)) != CT_OK) { }
    H5Tclose(s);
    if (ft >= 0) H5Tclose(ft);
    if (st == CT_OK && H5Fflush(f, H5F_SCOPE_LOCAL) < 0) st = ct_fail(CT_EIO, "%s: cannot write the new store (disk full?)", file);
    return st;
}

/* Fills a names list from a string dataset of n entries. */
static ct_status names_load(namelist *l, hid_t f, const char *name, size_t n, const char *file)
{
    char **s;
    CT_TRY(read_strings(f, name, n, &s, file));
    ct_status st = CT_OK;
    for (size_t i = 0; i < n && st == CT_OK; i++) {
        int idx;
        st = names_get(l, s[i], &idx);
        if (st == CT_OK && (size_t)idx != i)
            st = ct_fail(CT_EFORMAT, "%s: /%s lists \"%s\" twice; the file is damaged: rebuild it", file, name, s[i]);
    }
    free_strings(s, n);
    l->written = l->n;
    return st;
}

/* The last error's message, with the promise that the store was not touched: for the
 * failures found before it is opened for writing. */
static ct_status left_as_is(ct_status st)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    return ct_fail(st, "%s (the file was left as it is; choose another --out, or delete it)", msg);
}

ct_status ct_featstore_open(ct_featstore **out, const char *path, int n_mels)
{
    return ct_featstore_open_dtype(out, path, n_mels, CT_FEAT_DEFAULT);
}

/* The element type of an existing store's /feats: float16 or float32. */
static ct_status store_dtype(hid_t f, ct_feat_dtype *t, const char *file)
{
    hid_t d = H5Dopen2(f, "feats", H5P_DEFAULT);
    if (d < 0) return ct_fail(CT_EFORMAT, "%s: dataset /feats cannot be opened; the file is damaged: rebuild it", file);
    int half = 0;
    ct_status st = feats_is_half(d, &half, file);
    H5Dclose(d);
    *t = half ? CT_FEAT_FLOAT16 : CT_FEAT_FLOAT32;
    return st;
}

ct_status ct_featstore_open_dtype(ct_featstore **out, const char *path, int n_mels, ct_feat_dtype dtype)
{
    *out = NULL;
    ct_h5_quiet();
    if (n_mels < 1 || n_mels > 4096) return ct_fail(CT_EINVAL, "feature store: n_mels = %d out of range", n_mels);
    ct_featstore *w = ct_calloc(1, sizeof *w, "feature store");
    if (!w) return CT_ENOMEM;
    w->f = -1;
    w->lock.fd = -1;
    w->n_mels = n_mels;
    if (!(w->file = strdup(path))) { free(w); return ct_fail(CT_ENOMEM, "out of memory"); }
    struct stat sb;
    ct_status st = ct_path_lock_take(&w->lock, path, NULL, "--out");
    if (st != CT_OK) { writer_free(w); return st; }
    if (stat(path, &sb) != 0 && errno == ENOENT) {
        w->half = dtype == CT_FEAT_FLOAT16;
        st = ct_h5_create(&w->f, path);
        if (st == CT_OK) st = create_store(w->f, n_mels, w->half, path);
    } else {
        FILE *probe = fopen(path, "r+b");
        if (!probe) st = ct_fail(CT_EIO, "%s: cannot open for appending (%s); check the path and its permissions", path, strerror(errno));
        else {
            fclose(probe);
            /* Checked read-only first: HDF5 cannot always close a damaged file it opened for
             * writing (its flush fails, and the file stays open until exit, where HDF5 crashes). */
            st = ct_h5_probe(path);
            hid_t ro = st == CT_OK ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
            if (st != CT_OK)
                st = left_as_is(st);
            else if (ro < 0)
                st = ct_fail(CT_EFORMAT, "%s: exists but is not a readable HDF5 file (truncated or corrupt?), so it is not a ctrain "
                             "feature store that can be appended to; delete it or choose another --out", path);
            else {
                store_index chk;
                ct_feat_dtype have = CT_FEAT_FLOAT32;
                ct_status cst = index_read(&chk, ro, path, REPAIR_CHECK, n_mels);
                if (cst == CT_OK) { index_free(&chk); cst = store_dtype(ro, &have, path); }
                if (cst == CT_OK && dtype != CT_FEAT_DEFAULT && have != dtype)
                    cst = ct_fail(CT_EINVAL, "%s: this store holds %s features, not %s: use --dtype %s to add to it, or another --out",
                                  path, ct_feat_dtype_name(have), ct_feat_dtype_name(dtype), ct_feat_dtype_name(have));
                w->half = have == CT_FEAT_FLOAT16;
                H5Fclose(ro);
                if (cst != CT_OK)
                    st = left_as_is(cst);
                else if ((w->f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT)) < 0)
                    st = ct_fail(CT_EIO, "%s: cannot open the feature store for appending; check its permissions", path);
            }
        }
        store_index x;
        ct_status ist = st == CT_OK ? index_read(&x, w->f, path, REPAIR_TRIM, n_mels) : st;
        if (st == CT_OK && ist != CT_OK) {
            st = left_as_is(ist);
        } else if (st == CT_OK) {
            st = names_load(&w->path, w->f, "utt_path", (size_t)x.n_utt, path);
            if (st == CT_OK) st = names_load(&w->speakers, w->f, "speakers", (size_t)x.n_speakers, path);
            if (st == CT_OK) st = names_load(&w->videos, w->f, "videos", (size_t)x.n_videos, path);
            w->n_frames = (int64_t)x.n_frames;
            index_free(&x);
            if (st == CT_OK && H5Fflush(w->f, H5F_SCOPE_LOCAL) < 0) st = ct_fail(CT_EIO, "%s: cannot write (disk full?)", path);
        }
    }
    if (st != CT_OK) {
        if (w->f >= 0) H5Fclose(w->f);
        writer_free(w);
        return st;
    }
    *out = w;
    return CT_OK;
}

int ct_featstore_n_utt(const ct_featstore *w) { return (int)w->path.n; }

int ct_featstore_has(const ct_featstore *w, const char *rel_path) { return map_find(&w->path.map, w->path.name, rel_path) >= 0; }

ct_status ct_featstore_append(ct_featstore *w, const char *rel_path, const char *speaker, const char *video,
                              const float *feats, int frames)
{
    if (w->broken) return ct_fail(CT_EIO, "%s: an earlier write failed; the store cannot take more utterances", w->file);
    if (frames < 1) return ct_fail(CT_EINVAL, "%s: utterance %s has no frames", w->file, rel_path);
    if (!rel_path[0] || !speaker[0] || !video[0]) return ct_fail(CT_EINVAL, "%s: an utterance needs a path, a speaker and a video name", w->file);
    if (ct_featstore_has(w, rel_path)) return ct_fail(CT_EINVAL, "%s: %s is already stored", w->file, rel_path);
    size_t q = w->path.n - w->path.written;
    CT_TRY(grow((void **)&w->q_feats, &w->q_rows_cap, (w->q_rows + (size_t)frames) * (size_t)w->n_mels, sizeof *w->q_feats));
    size_t cap = w->q_cap;
    CT_TRY(grow((void **)&w->q_offset, &cap, q + 1, sizeof *w->q_offset));
    cap = w->q_cap; CT_TRY(grow((void **)&w->q_frames, &cap, q + 1, sizeof *w->q_frames));
    cap = w->q_cap; CT_TRY(grow((void **)&w->q_speaker, &cap, q + 1, sizeof *w->q_speaker));
    cap = w->q_cap; CT_TRY(grow((void **)&w->q_video, &cap, q + 1, sizeof *w->q_video));
    w->q_cap = cap;
    int s, v, p;
    CT_TRY(names_get(&w->speakers, speaker, &s));
    CT_TRY(names_get(&w->videos, video, &v));
    CT_TRY(names_get(&w->path, rel_path, &p));
    memcpy(w->q_feats + w->q_rows * (size_t)w->n_mels, feats, (size_t)frames * (size_t)w->n_mels * sizeof *feats);
    w->q_offset[q] = w->n_frames;
    w->q_frames[q] = frames;
    w->q_speaker[q] = s;
    w->q_video[q] = v;
    w->q_rows += (size_t)frames;
    w->n_frames += frames;
    return CT_OK;
}

ct_status ct_featstore_flush(ct_featstore *w)
{
    if (w->broken) return ct_fail(CT_EIO, "%s: an earlier write failed; the store cannot take more utterances", w->file);
    size_t q = w->path.n - w->path.written;
    hid_t s = str_type(), ht = -1;
    ct_status st = CT_OK;
    const void *rows = w->q_feats;
    if (w->half && w->q_rows > 0) {   /* narrowed here, rounding to nearest even (core/half.h), and written as they are */
        size_t nv = w->q_rows * (size_t)w->n_mels;
        st = grow((void **)&w->q_half, &w->q_half_cap, nv, sizeof *w->q_half);
        if (st == CT_OK) { ct_halves_from_floats(w->q_half, w->q_feats, nv); rows = w->q_half; }
        if (st == CT_OK && (ht = half_type()) < 0) st = ct_fail(CT_EIO, "%s: HDF5 cannot make the float16 type", w->file);
    }
    if (st != CT_OK
        || (st = ext_append(w->f, "feats", w->half ? ht : H5T_NATIVE_FLOAT, rows, w->q_rows, w->n_mels, w->file)) != CT_OK
        || (st = ext_append(w->f, "speakers", s, w->speakers.name + w->speakers.written, w->speakers.n - w->speakers.written, 0, w->file)) != CT_OK
        || (st = ext_append(w->f, "videos", s, w->videos.name + w->videos.written, w->videos.n - w->videos.written, 0, w->file)) != CT_OK
        || (st = ext_append(w->f, "utt_offset", H5T_NATIVE_INT64, w->q_offset, q, 0, w->file)) != CT_OK
        || (st = ext_append(w->f, "utt_frames", H5T_NATIVE_INT, w->q_frames, q, 0, w->file)) != CT_OK
        || (st = ext_append(w->f, "utt_speaker", H5T_NATIVE_INT, w->q_speaker, q, 0, w->file)) != CT_OK
        || (st = ext_append(w->f, "utt_video", H5T_NATIVE_INT, w->q_video, q, 0, w->file)) != CT_OK
        || (st = ext_append(w->f, "utt_path", s, w->path.name + w->path.written, q, 0, w->file)) != CT_OK) { }
    H5Tclose(s);
    if (ht >= 0) H5Tclose(ht);
    if (st == CT_OK && H5Fflush(w->f, H5F_SCOPE_LOCAL) < 0)
        st = ct_fail(CT_EIO, "%s: cannot flush the feature store to disk (disk full?)", w->file);
    if (st != CT_OK) { w->broken = 1; return st; }
    w->path.written = w->path.n;
    w->speakers.written = w->speakers.n;
    w->videos.written = w->videos.n;
    w->q_rows = 0;
    return CT_OK;
}

ct_status ct_featstore_close(ct_featstore *w)
{
    if (!w) return CT_OK;
    ct_status st = w->broken ? CT_EIO : ct_featstore_flush(w);
    if (w->broken && st == CT_EIO) st = ct_fail(CT_EIO, "%s: an earlier write failed; the store holds only what was flushed before it", w->file);
    if (H5Fclose(w->f) < 0 && st == CT_OK) st = ct_fail(CT_EIO, "%s: closing the feature store failed (disk full?)", w->file);
    writer_free(w);
    return st;
}

/* ---- the reader ---- */

ct_status ct_featstore_read_settings(const char *path, ct_featstore_settings *s)
{
    memset(s, 0, sizeof *s);
    ct_h5_quiet();
    FILE *probe = fopen(path, "rb");
    if (!probe) return ct_fail(CT_EIO, "%s: cannot open the feature store (%s); check the path, or " MAKE_ONE, path, strerror(errno));
    fclose(probe);
    CT_TRY(ct_h5_probe(path));   /* damage that crashes or hangs libhdf5 itself (io/h5probe.h) */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return ct_fail(CT_EFORMAT, "%s: not a readable HDF5 file (truncated or corrupt), so not a ctrain feature store; " MAKE_ONE, path);
    ct_status st = has_format(f) ? CT_OK
                 : ct_fail(CT_EFORMAT, "%s: not a ctrain feature store: " MAKE_ONE " (the file has no format = \"" CT_FEATSTORE_FORMAT "\" attribute)", path);
    if (st == CT_OK) st = attr_read_int(f, "n_mels", &s->n_mels, path);
    if (st == CT_OK) st = attr_read_int(f, "sample_rate", &s->sample_rate, path);
    if (st == CT_OK) st = attr_read_int(f, "frame_length_ms", &s->frame_length_ms, path);
    if (st == CT_OK) st = attr_read_int(f, "frame_shift_ms", &s->frame_shift_ms, path);
    htri_t has_norm = st == CT_OK ? H5Aexists(f, "normalization") : 0;
    if (has_norm < 0) st = ct_fail(CT_EFORMAT, "%s: the attributes cannot be read (corrupt file?); rebuild it with `ctrain prep voxceleb`", path);
    if (st == CT_OK && has_norm > 0) {
        if (ct_h5_attr_read_str(f, "/", "normalization", s->normalization, sizeof s->normalization) != CT_OK)
            st = ct_fail(CT_EFORMAT, "%s: attribute normalization is not a string of at most %zu characters; the file is damaged: "
                         "rebuild it with `ctrain prep voxceleb`", path, sizeof s->normalization - 1);
        s->normalization_recorded = 1;
    } else if (st == CT_OK) {
        snprintf(s->normalization, sizeof s->normalization, "%s", CT_FEATSTORE_NORMALIZATION);   /* the only kind prep made */
    }
    H5Fclose(f);
    return st;
}

/* Opens the store at `path` read-only and fills everything of *c but the frames:
 * utt[] (offsets in floats, as in memory), video[], path[], speaker_name[]. *f
 * stays open for the frames; *half says how they are stored. On failure c is empty. */
static ct_status open_index(ct_corpus *c, const char *path, hid_t *fout, int *half, hsize_t *n_frames)
{
    memset(c, 0, sizeof *c);
    *fout = -1;
    ct_h5_quiet();
    FILE *probe = fopen(path, "rb");
    if (!probe) return ct_fail(CT_EIO, "%s: cannot open the feature store (%s); check the path, or " MAKE_ONE, path, strerror(errno));
    fclose(probe);
    CT_TRY(ct_h5_probe(path));
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return ct_fail(CT_EFORMAT, "%s: not a readable HDF5 file (truncated or corrupt), so not a ctrain feature store; "
                       "run `ctrain prep voxceleb --wav DIR --out %s` to make one", path, path);
    store_index x;
    ct_status st = index_read(&x, f, path, REPAIR_NONE, 0);
    if (st != CT_OK) { H5Fclose(f); return st; }
    if (x.n_utt == 0) {
        index_free(&x);
        H5Fclose(f);
        return ct_fail(CT_EFORMAT, "%s: the feature store holds no utterances; run `ctrain prep voxceleb` on a directory with audio", path);
    }
    hid_t d = H5Dopen2(f, "feats", H5P_DEFAULT);
    st = d < 0 ? ct_fail(CT_EFORMAT, "%s: dataset /feats cannot be opened; the file is damaged: rebuild it", path) : feats_is_half(d, half, path);
    if (d >= 0) H5Dclose(d);
    int M = x.n_mels, n = (int)x.n_utt;
    c->n_utt = n;
    c->n_mels = M;
    c->n_speakers = (int)x.n_speakers;
    c->utt = ct_calloc((size_t)n, sizeof *c->utt, "corpus utterances");
    c->video = ct_malloc((size_t)n * sizeof *c->video, "corpus videos");
    if (st == CT_OK && (!c->utt || !c->video)) st = CT_ENOMEM;
    if (st == CT_OK) st = read_strings(f, "utt_path", (size_t)n, &c->path, path);
    if (st == CT_OK) {
        st = read_strings(f, "speakers", x.n_speakers, &c->speaker_name, path);
        if (st != CT_OK) c->n_speakers = 0;
    }
    if (st == CT_OK) {
        for (int u = 0; u < n; u++) {
            c->utt[u].speaker = x.speaker[u];
            c->utt[u].frames = x.frames[u];
            c->utt[u].offset = (size_t)x.offset[u] * (size_t)M;
            c->video[u] = x.video[u];
        }
    }
    *n_frames = x.n_frames;
    index_free(&x);
    if (st != CT_OK) {
        if (!c->path) c->n_utt = 0;   /* ct_corpus_free walks path[0..n_utt) */
        ct_corpus_free(c);
        memset(c, 0, sizeof *c);
        H5Fclose(f);
        return st;
    }
    *fout = f;
    return CT_OK;
}

#define LOAD_BLOCK_ROWS 65536   /* rows read (and, for float16, widened) at a time while loading */

/* Reads every frame of the open store into c->feats. */
static ct_status load_frames(ct_corpus *c, hid_t f, int half, hsize_t n_frames, const char *path)
{
    size_t M = (size_t)c->n_mels, total = (size_t)n_frames * M;
    c->feats = ct_malloc((total ? total : 1) * sizeof *c->feats, "features (the whole store is loaded into memory; "
                         "--data-memory smaller than the store streams it instead)");
    uint16_t *stage = half ? ct_malloc((size_t)LOAD_BLOCK_ROWS * M * sizeof *stage, "feature store reader") : NULL;
    if (!c->feats || (half && !stage)) { free(stage); return CT_ENOMEM; }
    hid_t d = H5Dopen2(f, "feats", H5P_DEFAULT), fs = d < 0 ? -1 : H5Dget_space(d), ht = half ? half_type() : -1;
    herr_t e = fs < 0 || (half && ht < 0) ? -1 : 0;
    for (hsize_t row = 0; e >= 0 && row < n_frames; row += LOAD_BLOCK_ROWS) {
        hsize_t n = n_frames - row < LOAD_BLOCK_ROWS ? n_frames - row : LOAD_BLOCK_ROWS;
        e = read_rows(d, fs, row, n, (int)M, ht, stage, c->feats + (size_t)row * M);
    }
    if (ht >= 0) H5Tclose(ht);
    if (fs >= 0) H5Sclose(fs);
    if (d >= 0) H5Dclose(d);
    free(stage);
    if (e < 0) return ct_fail(CT_EFORMAT, "%s: dataset /feats cannot be read (a truncated or corrupt file); rebuild it", path);
    return CT_OK;
}

static ct_status stream_frames(ct_corpus *c, hid_t f, int half, const char *path);

/* The store at `path` into *c, its frames loaded (stream 0) or streamed (stream 1). */
static ct_status open_store(ct_corpus *c, const char *path, int stream)
{
    hid_t f;
    int half;
    hsize_t n_frames;
    CT_TRY(open_index(c, path, &f, &half, &n_frames));
    ct_status st = stream ? stream_frames(c, f, half, path) : load_frames(c, f, half, n_frames, path);
    if (!stream) H5Fclose(f);   /* a streamed corpus's source keeps it open (and closes it on failure) */
    if (st != CT_OK) ct_corpus_free(c);
    return st;
}

ct_status ct_featstore_load(ct_corpus *c, const char *path) { return open_store(c, path, 0); }

/* ---- the streamed reader: frames read from the file as batches ask for them ---- */

/* Where /feats's chunks lie in the file, so that a crop is one pread(2) of its bytes
 * and no HDF5 call (see stream_frames). n_chunks = 0: every read goes through H5Dread. */
typedef struct {
    unsigned long long *addr;    /* [n_chunks] byte offset in the file of chunk k: rows [k * chunk_rows, (k + 1) * chunk_rows) */
    unsigned long long n_chunks, chunk_rows;
    size_t row_bytes;            /* one row as stored: n_mels * 4 (float32) or * 2 (float16) */
} chunk_map;

typedef struct {
    ct_frame_source base;        /* first member: the corpus holds &base */
    pthread_mutex_t mu;          /* H5Dread one at a time: the dataspace and the stage are shared */
    hid_t f, d, fs;              /* the store; /feats opened without a chunk cache; its dataspace */
    hid_t ht;                    /* the binary16 type when /feats holds float16 (made once), else -1 */
    int n_mels;
    const ct_utt *utt;           /* the corpus's utterances [n_utt] (offsets in floats) */
    char *const *path;           /* and their paths, for messages */
    uint16_t *stage;             /* [stage_cap] float16 values read raw by H5Dread, before widening */
    size_t stage_cap;
    char *file;
    int fd;                      /* HDF5's descriptor of the file, -1 if unknown */
    long long size;              /* the file's size when it was opened */
    chunk_map map;               /* the direct path (n_chunks > 0), which needs no lock */
    char map_why[200];           /* why there is no chunk map ("" when there is one, or nothing to read) */
    int hints_left;              /* crops still to announce (source_hint); re-armed by reads from the disk */
    unsigned window_reads, window_slow;   /* reads, and slow ones in the current window (note_read) */
    ct_featstore_stats stats;    /* updated atomically */
} store_source;

/* 1 when the file is now shorter than when it was opened (cut while training ran: HDF5
 * would read the missing bytes as zeros). */
static int source_shrank(const store_source *s, long long *now)
{
    struct stat sb;
    if (s->fd < 0 || fstat(s->fd, &sb) != 0) return 0;
    *now = (long long)sb.st_size;
    return *now < s->size;
}

static ct_status truncated_error(const store_source *s, int u, int first, int n, long long now)
{
    return ct_fail(CT_EIO, "%s: cannot read utterance %s (frames %d-%d): the file was truncated from %lld to %lld bytes while "
                   "it was read; rebuild it with `ctrain prep voxceleb`", s->file, s->path[u], first, first + n - 1, s->size, now);
}

#define DIRECT_STAGE_VALUES 8192   /* float16 values widened at a time (16 kB on the stack) */
/* Whether reads come from the disk: a read slower than DISK_READ_SECONDS probably did (a
 * cached 16 kB crop takes 2-6 us, a disk 100 us and more, but a busy machine delays a
 * few cached reads too); when more than DISK_READS_PER_WINDOW of a window of
 * READ_WINDOW reads were that slow, the next HINT_CROPS crops are announced. */
#define DISK_READ_SECONDS 50e-6
#define READ_WINDOW 256
#define DISK_READS_PER_WINDOW 8
#define HINT_CROPS 4096

/* pread(2) of exactly `bytes`, across short reads and signals. 0, or -1 with errno (0 at the end of the file). */
static int pread_all(int fd, void *buf, size_t bytes, unsigned long long at)
{
    char *p = buf;
    while (bytes > 0) {
        ssize_t got = pread(fd, p, bytes, (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) { if (got == 0) errno = 0; return -1; }
        p += got; at += (unsigned long long)got; bytes -= (size_t)got;
    }
    return 0;
}

static void note_read(store_source *s, double seconds)
{
    if (seconds > DISK_READ_SECONDS) __atomic_add_fetch(&s->window_slow, 1, __ATOMIC_RELAXED);
    if (__atomic_add_fetch(&s->window_reads, 1, __ATOMIC_RELAXED) % READ_WINDOW == 0
        && __atomic_exchange_n(&s->window_slow, 0, __ATOMIC_RELAXED) >= DISK_READS_PER_WINDOW)
        __atomic_store_n(&s->hints_left, HINT_CROPS, __ATOMIC_RELAXED);
}

/* Frames [first, first + n) of utterance u through the chunk map: one pread per chunk the
 * rows touch (a 100-frame crop: one, or two at a chunk's edge), straight into dst for
 * float32, through a small stage for float16. Any thread, any number at once. */
static ct_status direct_read(store_source *s, int u, int first, int n, float *dst)
{
    const chunk_map *m = &s->map;
    const size_t M = (size_t)s->n_mels, rb = m->row_bytes;
    const int half = s->ht >= 0;
    uint16_t stage[DIRECT_STAGE_VALUES];
    unsigned long long row = s->utt[u].offset / M + (unsigned long long)first;
    for (size_t done = 0; done < (size_t)n;) {
        unsigned long long r = row + done, k = r / m->chunk_rows, within = r % m->chunk_rows;
        size_t take = (size_t)n - done;
        if (take > m->chunk_rows - within) take = (size_t)(m->chunk_rows - within);
        if (half && take > DIRECT_STAGE_VALUES / M) take = DIRECT_STAGE_VALUES / M;
        void *buf = half ? (void *)stage : (void *)(dst + done * M);
        const double t0 = ct_now();
        errno = 0;   /* a chunk beyond the map: "the file ends before them" */
        if (k >= m->n_chunks || pread_all(s->fd, buf, take * rb, m->addr[k] + within * rb) != 0) {
            int e = errno;
            long long now = 0;
            if (source_shrank(s, &now)) return truncated_error(s, u, first, n, now);
            return ct_fail(CT_EIO, "%s: cannot read utterance %s (frames %d-%d): %s; the file is damaged, truncated or gone: "
                           "rebuild it with `ctrain prep voxceleb`", s->file, s->path[u], first, first + n - 1,
                           e ? strerror(e) : "the file ends before them");
        }
        note_read(s, ct_now() - t0);
        if (half) ct_floats_from_halves(dst + done * M, stage, take * M);
        done += take;
    }
    return CT_OK;
}

static ct_status source_read(ct_frame_source *src, int u, int first, int n, float *dst)
{
    store_source *s = (store_source *)src;
    const ct_utt *ut = &s->utt[u];
    if (first < 0 || n < 0 || first + n > ut->frames)
        return ct_fail(CT_EINVAL, "%s: frames %d-%d of %s asked for, but it has %d", s->file, first, first + n - 1, s->path[u], ut->frames);
    size_t M = (size_t)s->n_mels, values = (size_t)n * M;
    ct_status st = CT_OK;
    if (s->map.n_chunks > 0) {
        st = direct_read(s, u, first, n, dst);
    } else {
        pthread_mutex_lock(&s->mu);
        if (s->ht >= 0 && values > s->stage_cap) {
            uint16_t *g = realloc(s->stage, values * sizeof *g);
            if (g) { s->stage = g; s->stage_cap = values; }
            else st = ct_fail(CT_ENOMEM, "out of memory reading %s", s->file);
        }
        long long now = 0;
        if (st == CT_OK && source_shrank(s, &now))
            st = truncated_error(s, u, first, n, now);
        else if (st == CT_OK && read_rows(s->d, s->fs, (hsize_t)(ut->offset / M) + (hsize_t)first, (hsize_t)n, s->n_mels, s->ht,
                                          s->stage, dst) < 0)
            st = ct_fail(CT_EIO, "%s: cannot read utterance %s (frames %d-%d): the file is damaged, truncated or gone; "
                         "rebuild it with `ctrain prep voxceleb`", s->file, s->path[u], first, first + n - 1);
        pthread_mutex_unlock(&s->mu);
    }
    if (st == CT_OK) {
        __atomic_add_fetch(&s->stats.reads, 1ULL, __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->stats.bytes, (unsigned long long)values * (s->ht >= 0 ? 2 : 4), __ATOMIC_RELAXED);
    }
    return st;
}

/* The frames a batch will read next: the kernel starts reading them from the disk now,
 * all at once, so a batch's crops wait for about one disk round trip, not one each.
 * With the file in the page cache an announcement only costs a system call (a third of
 * a warm batch's time on a 2-core VM), so they stop after HINT_CROPS crops, and
 * start again when reads come from the disk (note_read). */
static void source_hint(ct_frame_source *src, int u, int first, int n)
{
    store_source *s = (store_source *)src;
    const chunk_map *m = &s->map;
    if (m->n_chunks == 0 || n <= 0 || first < 0 || first + n > s->utt[u].frames) return;
    if (__atomic_load_n(&s->hints_left, __ATOMIC_RELAXED) <= 0) return;
    __atomic_sub_fetch(&s->hints_left, 1, __ATOMIC_RELAXED);
    unsigned long long row = s->utt[u].offset / (size_t)s->n_mels + (unsigned long long)first;
    for (unsigned long long r = row; r < row + (unsigned long long)n;) {
        unsigned long long k = r / m->chunk_rows, within = r % m->chunk_rows, take = row + (unsigned long long)n - r;
        if (k >= m->n_chunks) return;
        if (take > m->chunk_rows - within) take = m->chunk_rows - within;
        posix_fadvise(s->fd, (off_t)(m->addr[k] + within * m->row_bytes), (off_t)(take * m->row_bytes), POSIX_FADV_WILLNEED);
        r += take;
    }
}

/* The chunk map of /feats (rows_used rows), when the direct path can read it exactly as
 * H5Dread would: the file is plain (HDF5's default POSIX driver, no user block), /feats is
 * chunked with no filters (no compression), its type is little-endian float32 or the
 * binary16 above on a little-endian machine, every chunk holding the rows in use is
 * allocated and lies inside the file, and there are at most CT_FEATSTORE_MAP_MAX_CHUNKS
 * chunks. Otherwise the map stays empty and reads go through H5Dread (a store compressed
 * with h5repack, say).
 *
 * HDF5 1.10 finds a chunk's address by walking its chunk index from the start (its
 * H5Dget_chunk_info_by_coord; the one-pass H5Dchunk_iter came in 1.14), so mapping N
 * chunks visits N^2 / 2 index entries: 1,639 chunks (a 2 GiB store) took 0.02 s, and
 * the cap's 32,768 take about 400 times that. */
static void map_chunks(store_source *s, unsigned long long rows_used, int half)
{
    const uint16_t one = 1;
    unsigned char little;
    memcpy(&little, &one, 1);
    hid_t fapl = H5Fget_access_plist(s->f), fcpl = H5Fget_create_plist(s->f), dcpl = H5Dget_create_plist(s->d);
    hid_t t = H5Dget_type(s->d);
    hsize_t ub = 1, chunk[2] = { 0, 0 };
    const char *why = NULL;
    if (!little) why = "this machine is not little-endian";
    else if (fapl < 0 || fcpl < 0 || dcpl < 0 || t < 0 || s->fd < 0) why = "HDF5 could not describe the file";
    else if (H5Pget_driver(fapl) != H5FD_SEC2 || H5Pget_userblock(fcpl, &ub) < 0 || ub != 0)
        why = "the file is not a plain POSIX one (another HDF5 driver, or a user block)";
    else if (H5Pget_layout(dcpl) != H5D_CHUNKED || H5Pget_chunk(dcpl, 2, chunk) != 2 || chunk[0] == 0 || chunk[1] != (hsize_t)s->n_mels)
        why = "/feats is not stored in chunks of whole rows";
    else if (H5Pget_nfilters(dcpl) != 0) why = "/feats is compressed or filtered";
    else if (half ? s->n_mels > DIRECT_STAGE_VALUES : H5Tequal(t, H5T_IEEE_F32LE) <= 0)   /* a float16 row must fit the stage */
        why = "/feats holds neither little-endian float32 nor float16 rows ctrain reads directly";
    if (fapl >= 0) H5Pclose(fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (t >= 0) H5Tclose(t);
    if (why) { snprintf(s->map_why, sizeof s->map_why, "%s", why); return; }
    if (rows_used == 0) return;
    chunk_map m = { .chunk_rows = chunk[0], .row_bytes = (size_t)s->n_mels * (half ? 2 : 4) };
    m.n_chunks = (rows_used + m.chunk_rows - 1) / m.chunk_rows;
    if (m.n_chunks > CT_FEATSTORE_MAP_MAX_CHUNKS) {
        snprintf(s->map_why, sizeof s->map_why, "/feats has %llu chunks, more than the %d ctrain maps (`h5repack -l "
                 "/feats:CHUNK=%dx%d` gives it fewer)", m.n_chunks, CT_FEATSTORE_MAP_MAX_CHUNKS, CT_FEATSTORE_CHUNK_FRAMES, s->n_mels);
        return;
    }
    const unsigned long long chunk_bytes = m.chunk_rows * m.row_bytes;
    if (!(m.addr = malloc(m.n_chunks * sizeof *m.addr))) {   /* the H5Dread path needs no more memory */
        snprintf(s->map_why, sizeof s->map_why, "no memory for the chunk map");
        return;
    }
    for (unsigned long long k = 0; k < m.n_chunks; k++) {
        hsize_t at[2] = { k * m.chunk_rows, 0 }, size = 0;
        haddr_t addr = HADDR_UNDEF;
        unsigned mask = 0;
        unsigned long long used = (k + 1 == m.n_chunks ? rows_used - k * m.chunk_rows : m.chunk_rows) * m.row_bytes;
        if (H5Dget_chunk_info_by_coord(s->d, at, &mask, &addr, &size) < 0 || addr == HADDR_UNDEF || mask != 0
            || size != chunk_bytes || (unsigned long long)addr + used > (unsigned long long)s->size) {
            snprintf(s->map_why, sizeof s->map_why, "chunk %llu of /feats is not allocated, is filtered, or does not lie inside "
                     "the file", k);
            free(m.addr);
            return;
        }
        m.addr[k] = (unsigned long long)addr;
    }
    s->map = m;
}

static void source_close(ct_frame_source *src)
{
    store_source *s = (store_source *)src;
    if (s->ht >= 0) H5Tclose(s->ht);
    if (s->fs >= 0) H5Sclose(s->fs);
    if (s->d >= 0) H5Dclose(s->d);
    if (s->f >= 0) H5Fclose(s->f);
    pthread_mutex_destroy(&s->mu);
    free(s->map.addr);
    free(s->stage);
    free(s->file);
    free(s);
}

/* Makes c's frames read from the open store f (which the source takes over). */
static ct_status stream_frames(ct_corpus *c, hid_t f, int half, const char *path)
{
    store_source *s = ct_calloc(1, sizeof *s, "feature store reader");
    if (!s) { H5Fclose(f); return CT_ENOMEM; }
    s->base = (ct_frame_source){ source_read, source_close, source_hint };
    s->f = f;
    s->d = s->fs = s->ht = -1;
    s->n_mels = c->n_mels;
    s->utt = c->utt;
    s->path = c->path;
    pthread_mutex_init(&s->mu, NULL);
    /* No chunk cache: a read of a few rows then moves exactly those bytes (HDF5 reads the
     * part of an uncompressed chunk it needs when the chunk does not fit its cache);
     * with the default cache each crop would read its whole chunk. */
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl >= 0 && H5Pset_chunk_cache(dapl, 0, 0, 1.0) >= 0) s->d = H5Dopen2(f, "feats", dapl);
    if (dapl >= 0) H5Pclose(dapl);
    if (s->d >= 0) s->fs = H5Dget_space(s->d);
    if (half) s->ht = half_type();
    s->file = strdup(path);
    if (s->fs < 0 || (half && s->ht < 0) || !s->file) {
        source_close(&s->base);
        return ct_fail(CT_EFORMAT, "%s: dataset /feats cannot be opened for reading; the file is damaged: rebuild it", path);
    }
    /* Crops are read at random places: tell the kernel not to read ahead of them. */
    int *fd = NULL;
    struct stat sb;
    s->fd = -1;
    if (H5Fget_vfd_handle(f, H5P_DEFAULT, (void **)&fd) >= 0 && fd && fstat(*fd, &sb) == 0) {
        s->fd = *fd;
        s->size = (long long)sb.st_size;
        posix_fadvise(s->fd, 0, 0, POSIX_FADV_RANDOM);
    }
    unsigned long long rows_used = 0;   /* the rows of /feats the index points into */
    for (int u = 0; u < c->n_utt; u++) {
        unsigned long long end = c->utt[u].offset / (size_t)c->n_mels + (unsigned long long)c->utt[u].frames;
        if (end > rows_used) rows_used = end;
    }
    map_chunks(s, rows_used, half);
    s->hints_left = HINT_CROPS;   /* a file just opened is likely not in the page cache */
    c->source = &s->base;
    return CT_OK;
}

ct_status ct_featstore_stream(ct_corpus *c, const char *path) { return open_store(c, path, 1); }

int ct_featstore_stats_of(const ct_corpus *c, ct_featstore_stats *out)
{
    if (!c->source || c->source->read != source_read) return 0;
    store_source *s = (store_source *)c->source;
    out->reads = __atomic_load_n(&s->stats.reads, __ATOMIC_RELAXED);
    out->bytes = __atomic_load_n(&s->stats.bytes, __ATOMIC_RELAXED);
    out->direct = s->map.n_chunks > 0;
    return 1;
}

/* What streaming keeps in memory per utterance: its ct_utt, video, path (a pointer and
 * the string, about 40 bytes in VoxCeleb), and what HDF5 keeps of the index. */
#define STREAM_BYTES_PER_UTT (sizeof(ct_utt) + sizeof(int) + sizeof(char *) + 48)

ct_status ct_featstore_open_corpus(ct_corpus *c, const char *path, size_t budget, int ranks_here, size_t batch_bytes,
                                   ct_featstore_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->budget_given = budget > 0;
    plan->ranks_here = ranks_here > 1 ? ranks_here : 1;
    plan->budget = budget > 0 ? budget : ct_mem_available() / 2 / (size_t)plan->ranks_here;
    hid_t f;
    int half;
    hsize_t n_frames;
    CT_TRY(open_index(c, path, &f, &half, &n_frames));
    plan->dtype = half ? CT_FEAT_FLOAT16 : CT_FEAT_FLOAT32;
    plan->feat_bytes = (unsigned long long)n_frames * (unsigned long long)c->n_mels * sizeof(float);
    plan->index_bytes = (unsigned long long)c->n_utt * STREAM_BYTES_PER_UTT;
    plan->streamed = plan->feat_bytes + plan->index_bytes > plan->budget;
    ct_status st = CT_OK;
    if (plan->streamed && plan->index_bytes + batch_bytes > plan->budget) {
        char b[32], i[32], t[32], g[32];
        st = ct_fail(CT_EINVAL, "--data-memory %s is too small to stream %s: its index takes %s and the loader's batches %s; "
                     "give at least %s", ct_bytes_format(b, sizeof b, (double)plan->budget), path,
                     ct_bytes_format(i, sizeof i, (double)plan->index_bytes), ct_bytes_format(t, sizeof t, (double)batch_bytes),
                     ct_bytes_format(g, sizeof g, (double)(plan->index_bytes + batch_bytes) * 1.01 + 1));
        H5Fclose(f);
    } else if (plan->streamed) {
        st = stream_frames(c, f, half, path);
        if (st == CT_OK) snprintf(plan->no_map_why, sizeof plan->no_map_why, "%s", ((store_source *)c->source)->map_why);
    } else {
        st = load_frames(c, f, half, n_frames, path);
        H5Fclose(f);
    }
    if (st != CT_OK) ct_corpus_free(c);
    return st;
}

const char *ct_featstore_plan_line(const ct_featstore_plan *p, char *buf, size_t cap)
{
    char fb[32], bb[32], ib[32];
    ct_bytes_format(fb, sizeof fb, (double)p->feat_bytes);
    ct_bytes_format(bb, sizeof bb, (double)p->budget);
    char dflt[96] = "";
    if (!p->budget_given && p->ranks_here > 1) snprintf(dflt, sizeof dflt, ", half the memory available over %d ranks", p->ranks_here);
    else if (!p->budget_given) snprintf(dflt, sizeof dflt, ", half the memory available");
    if (p->streamed)
        snprintf(buf, cap, "streamed from the file (%s features, more than the %s budget of --data-memory%s; %s index in memory)%s%s",
                 fb, bb, dflt, ct_bytes_format(ib, sizeof ib, (double)p->index_bytes),
                 p->no_map_why[0] ? "; crops read through HDF5, one at a time: " : "", p->no_map_why);
    else
        snprintf(buf, cap, "loaded into memory (%s, within the %s budget of --data-memory%s)", fb, bb, dflt);
    return buf;
}
