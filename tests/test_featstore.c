/* test_featstore.c - the HDF5 feature store: write -> load round trip (features
 * bit for bit, paths, speakers, videos), appending in two runs, a writer killed
 * between batches, a torn batch repaired on reopen, and every kind of file the
 * loader must refuse (not HDF5, HDF5 but not a store, a newer format_version,
 * truncated, inconsistent offsets or indices, missing, empty) - each with a
 * message naming the file and what is wrong. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test.h"
#include "io/featstore.h"
#include "io/h5.h"

#define M 5   /* mel bands in these tests */

static char dir[64];

static const char *tmp(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

typedef struct { const char *path, *speaker, *video; int frames; } utt_spec;

static const utt_spec U[] = {
    { "id10001/vidA/00001.wav", "id10001", "vidA", 7 },
    { "id10001/vidA/00002.wav", "id10001", "vidA", 3 },
    { "id10001/vidB/00001.wav", "id10001", "vidB", 12 },
    { "id10002/vidC/00001.wav", "id10002", "vidC", 1 },
    { "id10003/vidA/00001.wav", "id10003", "vidA", 9 },   /* same video under another speaker: one videos entry */
    { "id10002/vidD/00001.wav", "id10002", "vidD", 5 },
};
#define NU ((int)(sizeof U / sizeof U[0]))

/* Deterministic features of utterance u (awkward values, so bit-exactness means something). */
static float *feats_of(int u)
{
    float *x = t_alloc((size_t)U[u].frames * M);
    ct_rng r;
    ct_rng_seed(&r, 100 + (uint64_t)u, 3);
    t_fill_uniform(x, (size_t)U[u].frames * M, -7.3f, 11.1f, &r);
    return x;
}

static int append_range(ct_featstore *w, int from, int to)
{
    int ok = 1;
    for (int u = from; u < to; u++) {
        float *x = feats_of(u);
        ok &= t_check(ct_featstore_append(w, U[u].path, U[u].speaker, U[u].video, x, U[u].frames) == CT_OK, "append %s: %s", U[u].path, ct_last_error());
        free(x);
    }
    return ok;
}

static int write_store(const char *path, int from, int to)
{
    ct_featstore *w = NULL;
    if (!t_check(ct_featstore_open(&w, path, M) == CT_OK, "open %s: %s", path, ct_last_error())) return 0;
    int ok = append_range(w, from, to);
    return t_check(ct_featstore_close(w) == CT_OK, "close: %s", ct_last_error()) && ok;
}

/* The loaded corpus holds exactly utterances [0, n) of U, in order. */
static void check_corpus(const ct_corpus *c, int n)
{
    if (!t_check(c->n_utt == n && c->n_mels == M, "n_utt %d (want %d), n_mels %d", c->n_utt, n, c->n_mels)) return;
    t_check(c->path && c->speaker_name && c->video, "optional fields not filled");
    if (!c->path || !c->speaker_name || !c->video) return;
    int bad_feats = 0;
    for (int u = 0; u < n; u++) {
        t_check(c->utt[u].frames == U[u].frames, "utt %d frames %d", u, c->utt[u].frames);
        t_check(!strcmp(c->path[u], U[u].path), "utt %d path %s, want %s", u, c->path[u], U[u].path);
        t_check(c->utt[u].speaker >= 0 && c->utt[u].speaker < c->n_speakers && !strcmp(c->speaker_name[c->utt[u].speaker], U[u].speaker),
                "utt %d speaker", u);
        float *x = feats_of(u);
        if (c->utt[u].frames == U[u].frames) bad_feats += memcmp(c->feats + c->utt[u].offset, x, (size_t)U[u].frames * M * sizeof *x) != 0;
        free(x);
        for (int v = 0; v < u; v++)   /* same video name <=> same video index */
            t_check((c->video[u] == c->video[v]) == !strcmp(U[u].video, U[v].video), "video index of %d vs %d", u, v);
    }
    t_check(bad_feats == 0, "%d utterances' features differ (must be bit-exact)", bad_feats);
}

/* Expects ct_featstore_load(path) to fail with `want` and a message naming the file and holding `what`. */
static void expect_refused(const char *path, ct_status want, const char *what)
{
    ct_corpus c;
    ct_status st = ct_featstore_load(&c, path);
    t_check(st == want, "load %s: %s, want %s (%s)", path, ct_status_name(st), ct_status_name(want), ct_last_error());
    t_check(strstr(ct_last_error(), path) != NULL, "message does not name the file: %s", ct_last_error());
    t_check(strstr(ct_last_error(), what) != NULL, "message lacks \"%s\": %s", what, ct_last_error());
    t_check(c.n_utt == 0 && !c.feats && !c.utt, "refused load left data behind");
    if (st == CT_OK) ct_corpus_free(&c);
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[8192];
    size_t n;
    int ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = 0;
    return t_check(ok, "copy %s -> %s", from, to);
}

/* Rewrites one element of an int dataset or an int root attribute, as a damaged file would have it. */
static void poke_i64(const char *file, const char *dset, hsize_t at, long long v)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, dset, H5P_DEFAULT), s = H5Dget_space(d), m = H5Screate_simple(1, (hsize_t[]){ 1 }, NULL);
    H5Sselect_hyperslab(s, H5S_SELECT_SET, &at, NULL, (hsize_t[]){ 1 }, NULL);
    t_check(f >= 0 && d >= 0 && H5Dwrite(d, H5T_NATIVE_LLONG, m, s, H5P_DEFAULT, &v) >= 0, "poke %s", dset);
    H5Sclose(m); H5Sclose(s); H5Dclose(d); H5Fclose(f);
}

static void poke_attr(const char *file, const char *attr, int v)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT), a = H5Aopen(f, attr, H5P_DEFAULT);
    t_check(f >= 0 && a >= 0 && H5Awrite(a, H5T_NATIVE_INT, &v) >= 0, "poke attribute %s", attr);
    H5Aclose(a); H5Fclose(f);
}

static void grow_dataset(const char *file, const char *dset, hsize_t by)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, dset, H5P_DEFAULT), s = H5Dget_space(d);
    hsize_t n;
    H5Sget_simple_extent_dims(s, &n, NULL);
    n += by;
    t_check(f >= 0 && d >= 0 && H5Dset_extent(d, &n) >= 0, "extend %s", dset);
    H5Sclose(s); H5Dclose(d); H5Fclose(f);
}

void suite_featstore(void)
{
    snprintf(dir, sizeof dir, "/tmp/ctrain_featstore_XXXXXX");
    if (!mkdtemp(dir)) { t_case("featstore/temp dir"); t_check(0, "mkdtemp failed"); return; }
    ct_corpus c;

    t_case("featstore/write then load: features bit-exact, paths, speakers, videos");
    if (write_store(tmp("one.h5"), 0, NU)) {
        if (t_check(ct_featstore_load(&c, tmp("one.h5")) == CT_OK, "load: %s", ct_last_error())) {
            check_corpus(&c, NU);
            t_check(c.n_speakers == 3 && !strcmp(c.speaker_name[0], "id10001") && !strcmp(c.speaker_name[2], "id10003"), "speakers");
            int n_videos = 0;
            for (int u = 0; u < c.n_utt; u++) if (c.video[u] + 1 > n_videos) n_videos = c.video[u] + 1;
            t_check(n_videos == 4, "%d videos, want 4 (vidA shared by two speakers)", n_videos);
            t_check(c.utt[0].offset == 0 && c.utt[1].offset == 7 * M && c.utt[5].offset == (size_t)(7 + 3 + 12 + 1 + 9) * M, "offsets (in floats)");
            ct_corpus_free(&c);
        }
        hid_t f;
        if (t_check(ct_h5_open(&f, tmp("one.h5")) == CT_OK, "%s", ct_last_error())) {
            double v = 0, m = 0, rate = 0, shift = 0, len = 0;
            ct_h5_attr_read_double(f, "/", "format_version", &v);
            ct_h5_attr_read_double(f, "/", "n_mels", &m);
            ct_h5_attr_read_double(f, "/", "sample_rate", &rate);
            ct_h5_attr_read_double(f, "/", "frame_shift_ms", &shift);
            ct_h5_attr_read_double(f, "/", "frame_length_ms", &len);
            t_check(v == 1 && m == M && rate == 16000 && shift == 10 && len == 25, "root attributes %g %g %g %g %g", v, m, rate, shift, len);
            ct_h5_close(f);
        }
    }

    t_case("featstore/has() knows stored and queued paths; a duplicate is refused");
    ct_featstore *w = NULL;
    if (copy_file(tmp("one.h5"), tmp("has.h5")) && t_check(ct_featstore_open(&w, tmp("has.h5"), M) == CT_OK, "%s", ct_last_error())) {
        t_check(ct_featstore_n_utt(w) == NU, "n_utt %d", ct_featstore_n_utt(w));
        t_check(ct_featstore_has(w, U[3].path) && !ct_featstore_has(w, "id10009/x/00001.wav"), "has()");
        float x[M] = { 0 };
        t_check(ct_featstore_append(w, U[2].path, "id10001", "vidB", x, 1) == CT_EINVAL && strstr(ct_last_error(), "already stored"),
                "duplicate accepted: %s", ct_last_error());
        t_check(ct_featstore_append(w, "id10009/x/00001.wav", "id10009", "x", x, 1) == CT_OK && ct_featstore_has(w, "id10009/x/00001.wav"),
                "queued path not known");
        ct_featstore_close(w);
    }

    t_case("featstore/append in two runs gives the same store as one run");
    if (write_store(tmp("two.h5"), 0, 2) && write_store(tmp("two.h5"), 2, NU)) {
        if (t_check(ct_featstore_load(&c, tmp("two.h5")) == CT_OK, "load: %s", ct_last_error())) {
            check_corpus(&c, NU);
            t_check(c.n_speakers == 3, "%d speakers", c.n_speakers);
            ct_corpus_free(&c);
        }
    }

    t_case("featstore/reopening with another n_mels is refused");
    w = NULL;
    t_check(ct_featstore_open(&w, tmp("two.h5"), M + 1) == CT_EINVAL && !w, "opened with other n_mels");
    t_check(strstr(ct_last_error(), "--mels 5") != NULL, "message: %s", ct_last_error());

    t_case("featstore/a writer killed between batches leaves every flushed batch readable");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        ct_featstore *cw = NULL;
        if (ct_featstore_open(&cw, tmp("killed.h5"), M) != CT_OK) _exit(3);
        for (int u = 0; u < 3; u++) {
            float *x = feats_of(u);
            if (ct_featstore_append(cw, U[u].path, U[u].speaker, U[u].video, x, U[u].frames) != CT_OK) _exit(4);
            free(x);
            if (u == 1 && ct_featstore_flush(cw) != CT_OK) _exit(5);
        }
        raise(SIGKILL);
        _exit(6);
    }
    int wst = 0;
    waitpid(pid, &wst, 0);
    t_check(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL, "child did not die by SIGKILL (status %d)", wst);
    if (t_check(ct_featstore_load(&c, tmp("killed.h5")) == CT_OK, "load after kill: %s", ct_last_error())) {
        check_corpus(&c, 2);
        ct_corpus_free(&c);
    }
    if (write_store(tmp("killed.h5"), 2, NU) && t_check(ct_featstore_load(&c, tmp("killed.h5")) == CT_OK, "%s", ct_last_error())) {
        check_corpus(&c, NU);
        ct_corpus_free(&c);
    }

    t_case("featstore/a torn batch (utt_* of unequal length) is refused by load and trimmed by reopen");
    if (copy_file(tmp("one.h5"), tmp("torn.h5"))) {
        grow_dataset(tmp("torn.h5"), "utt_offset", 1);
        grow_dataset(tmp("torn.h5"), "utt_frames", 1);
        grow_dataset(tmp("torn.h5"), "feats", 40);
        expect_refused(tmp("torn.h5"), CT_EFORMAT, "different lengths");
        w = NULL;
        t_check(ct_featstore_open(&w, tmp("torn.h5"), M) == CT_OK, "reopen: %s", ct_last_error());
        t_check(ct_featstore_close(w) == CT_OK, "close: %s", ct_last_error());
        if (t_check(ct_featstore_load(&c, tmp("torn.h5")) == CT_OK, "load after repair: %s", ct_last_error())) {
            check_corpus(&c, NU);
            ct_corpus_free(&c);
        }
        int nd; size_t dims[CT_H5_DIMS_MAX];
        hid_t f;
        if (ct_h5_open(&f, tmp("torn.h5")) == CT_OK) {
            t_check(ct_h5_shape(f, "feats", &nd, dims) == CT_OK && dims[0] == 7 + 3 + 12 + 1 + 9 + 5, "feats not trimmed: %zu rows", dims[0]);
            ct_h5_close(f);
        }
    }

    t_case("featstore/an HDF5 file that is not a store is refused (load and append)");
    hid_t f;
    if (t_check(ct_h5_create(&f, tmp("other.h5")) == CT_OK, "%s", ct_last_error())) {
        float x[4] = { 1, 2, 3, 4 };
        ct_h5_write_f32(f, "feats", x, 1, (size_t[]){ 4 });
        ct_h5_close(f);
        expect_refused(tmp("other.h5"), CT_EFORMAT, "not a ctrain feature store: run `ctrain prep voxceleb");
        w = NULL;
        t_check(ct_featstore_open(&w, tmp("other.h5"), M) == CT_EFORMAT && !w, "appending to a foreign HDF5 file was allowed");
        t_check(strstr(ct_last_error(), "left as it is") != NULL, "message: %s", ct_last_error());
        struct stat sb;
        t_check(stat(tmp("other.h5"), &sb) == 0 && ct_h5_open(&f, tmp("other.h5")) == CT_OK && ct_h5_exists(f, "feats") && !ct_h5_exists(f, "utt_path"),
                "the foreign file was modified");
        ct_h5_close(f);
    }

    t_case("featstore/a newer format_version is refused");
    if (copy_file(tmp("one.h5"), tmp("v2.h5"))) {
        poke_attr(tmp("v2.h5"), "format_version", 2);
        expect_refused(tmp("v2.h5"), CT_EFORMAT, "format_version 2");
        expect_refused(tmp("v2.h5"), CT_EFORMAT, "newer ctrain");
    }

    t_case("featstore/a truncated file is refused");
    struct stat sb;
    if (copy_file(tmp("one.h5"), tmp("trunc.h5")) && t_check(stat(tmp("trunc.h5"), &sb) == 0, "stat")) {
        t_check(truncate(tmp("trunc.h5"), sb.st_size / 2) == 0, "truncate");
        expect_refused(tmp("trunc.h5"), CT_EFORMAT, "truncated or corrupt");
    }

    t_case("featstore/inconsistent offsets, frames and indices are refused");
    if (copy_file(tmp("one.h5"), tmp("bad.h5"))) {
        poke_i64(tmp("bad.h5"), "utt_offset", 4, 1000);
        expect_refused(tmp("bad.h5"), CT_EFORMAT, "inconsistent sizes: utterance 4 has utt_offset 1000");
    }
    if (copy_file(tmp("one.h5"), tmp("bad2.h5"))) {
        poke_i64(tmp("bad2.h5"), "utt_frames", 5, 6);   /* one frame past the end of feats */
        expect_refused(tmp("bad2.h5"), CT_EFORMAT, "inconsistent sizes: utterance 5");
    }
    if (copy_file(tmp("one.h5"), tmp("bad3.h5"))) {
        poke_i64(tmp("bad3.h5"), "utt_speaker", 0, 3);
        expect_refused(tmp("bad3.h5"), CT_EFORMAT, "speaker 3");
    }
    if (copy_file(tmp("one.h5"), tmp("bad4.h5"))) {
        poke_i64(tmp("bad4.h5"), "utt_offset", 0, -1);
        expect_refused(tmp("bad4.h5"), CT_EFORMAT, "utt_offset -1");
    }

    t_case("featstore/missing file, a text file, an empty store");
    expect_refused(tmp("missing.h5"), CT_EIO, "No such file");
    FILE *tf = fopen(tmp("text.h5"), "w");
    if (t_check(tf != NULL, "create text.h5")) { fputs("not hdf5\n", tf); fclose(tf); }
    expect_refused(tmp("text.h5"), CT_EFORMAT, "not a readable HDF5 file");
    if (write_store(tmp("empty.h5"), 0, 0)) expect_refused(tmp("empty.h5"), CT_EFORMAT, "holds no utterances");

    const char *names[] = { "one.h5", "has.h5", "two.h5", "killed.h5", "torn.h5", "other.h5", "v2.h5", "trunc.h5", "bad.h5", "bad2.h5",
                            "bad3.h5", "bad4.h5", "text.h5", "empty.h5" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tmp(names[i]));
    rmdir(dir);
}
