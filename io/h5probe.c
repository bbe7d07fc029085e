/* h5probe.c - an HDF5 file's structure read in a child process first, and a dataset's
 * stated size checked against the file's storage (see h5probe.h). */
#define _DEFAULT_SOURCE   /* prctl's PR_SET_PDEATHSIG, and signal names */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <hdf5.h>
#include "io/h5probe.h"

void ct_h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

#define H5_MAX_RATIO 1032ULL   /* deflate's largest compression ratio */

ct_status ct_h5_check_stored(hid_t d, const char *name, unsigned long long elems)
{
    if (elems == 0) return CT_OK;
    hid_t t = H5Dget_type(d), p = H5Dget_create_plist(d), f = H5Iget_file_id(d);
    hsize_t file_size = 0;
    if (f < 0 || H5Fget_filesize(f, &file_size) < 0) file_size = 0;
    unsigned long long per = 1;   /* bytes per element in the file, at least */
    if (t >= 0) {
        int vlen = H5Tis_variable_str(t) > 0 || H5Tget_class(t) == H5T_VLEN;
        size_t size = H5Tget_size(t);
        per = vlen ? 4 : size > 0 ? size : 1;
    }
    int squeezed = 0;   /* a filter that can make the data smaller than it is (any but the checksum) */
    int nf = p >= 0 ? H5Pget_nfilters(p) : 0;
    for (int i = 0; i < nf; i++) {
        unsigned flags;
        size_t nv = 0;
        if (H5Pget_filter2(p, (unsigned)i, &flags, &nv, NULL, 0, NULL, NULL) != H5Z_FILTER_FLETCHER32) squeezed = 1;
    }
    /* HDF5 reads a chunked dataset a whole chunk at a time, into a buffer of the chunk's
     * size, which the file states: a chunk larger than any ctrain writes or reads is refused */
    unsigned long long chunk = 0;
    if (p >= 0 && H5Pget_layout(p) == H5D_CHUNKED) {
        hsize_t cd[H5S_MAX_RANK];
        int rank = H5Pget_chunk(p, H5S_MAX_RANK, cd);
        chunk = rank > 0 ? per : 0;
        for (int i = 0; i < rank; i++) chunk = chunk > CT_H5_CHUNK_MAX || cd[i] > CT_H5_CHUNK_MAX ? CT_H5_CHUNK_MAX + 1ULL : chunk * cd[i];
        if (rank < 0) chunk = CT_H5_CHUNK_MAX + 1ULL;
    }
    hsize_t stored = H5Dget_storage_size(d);   /* for a chunked dataset: the sizes its chunk index states */
    if (t >= 0) H5Tclose(t);
    if (p >= 0) H5Pclose(p);
    if (f >= 0) H5Fclose(f);
    if (stored > file_size)   /* HDF5 allocates for a stated chunk size before reading it */
        return ct_fail(CT_EFORMAT, "dataset %s states %llu bytes of storage in a file of %llu bytes: the file is damaged or "
                       "truncated", name, (unsigned long long)stored, (unsigned long long)file_size);
    if (chunk > CT_H5_CHUNK_MAX)
        return ct_fail(CT_EFORMAT, "dataset %s is stored in chunks of more than %d MiB, which ctrain does not read: the file "
                       "is damaged, or was written with chunks far larger than usual (rewrite it with smaller ones)", name,
                       CT_H5_CHUNK_MAX >> 20);
    unsigned long long need = elems > ~0ULL / per ? ~0ULL : elems * per;
    unsigned long long can = squeezed ? (stored > ~0ULL / H5_MAX_RATIO ? ~0ULL : stored * H5_MAX_RATIO) : stored;
    if (need > can)
        return ct_fail(CT_EFORMAT, "dataset %s declares %llu values (%llu bytes) but the file stores %llu bytes of it%s: "
                       "the file is damaged or truncated", name, elems, need, (unsigned long long)stored,
                       squeezed ? ", too few for any compression" : "");
    return CT_OK;
}

static int probe_on = 1;
void ct_h5_probe_enable(int on) { probe_on = on != 0; }

enum { READ_MAX = 16 << 20 };   /* bytes: larger attributes and string datasets are not read */

/* Read a whole attribute or dataset of `space` and file type `t` through its native
 * type, then give back what variable-length members were given. */
static void read_all(hid_t obj, int is_attr, hid_t t, hid_t space)
{
    hssize_t n = H5Sget_simple_extent_npoints(space);
    hid_t mt = H5Tget_native_type(t, H5T_DIR_ASCEND);
    size_t sz = mt < 0 ? 0 : H5Tget_size(mt);
    if (n > 0 && sz > 0 && (size_t)n <= READ_MAX / sz) {
        void *buf = calloc((size_t)n, sz);
        herr_t e = !buf ? -1 : is_attr ? H5Aread(obj, mt, buf) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        if (e >= 0 && (H5Tdetect_class(mt, H5T_VLEN) > 0 || H5Tis_variable_str(mt) > 0))
            H5Dvlen_reclaim(mt, space, H5P_DEFAULT, buf);
        free(buf);
    }
    if (mt >= 0) H5Tclose(mt);
}

static herr_t visit_attr(hid_t obj, const char *name, const H5A_info_t *info, void *op)
{
    (void)info; (void)op;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a), s = H5Aget_space(a);
    if (t >= 0 && s >= 0) read_all(a, 1, t, s);
    if (s >= 0) H5Sclose(s);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return 0;
}

static herr_t visit_link(hid_t g, const char *name, const H5L_info_t *info, void *op)
{
    (void)g; (void)name; (void)info; (void)op;
    return 0;
}

/* One object: its attributes; a group's links listed as the readers list them; a
 * dataset's layout, and its contents when they are variable-length. */
static herr_t visit_object(hid_t root, const char *name, const H5O_info_t *info, void *op)
{
    (void)op;
    hid_t o = H5Oopen(root, name, H5P_DEFAULT);
    if (o < 0) return 0;
    H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, NULL, visit_attr, NULL);
    if (info->type == H5O_TYPE_GROUP) {
        H5Literate(o, H5_INDEX_NAME, H5_ITER_INC, NULL, visit_link, NULL);
    } else if (info->type == H5O_TYPE_DATASET) {
        /* opening it decoded its layout and filters; the storage size walks a chunked one's index */
        hid_t t = H5Dget_type(o), s = H5Dget_space(o);
        hssize_t n = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
        (void)H5Dget_storage_size(o);
        if (t >= 0 && s >= 0 && n > 0 && (H5Tis_variable_str(t) > 0 || H5Tdetect_class(t, H5T_VLEN) > 0) &&
            ct_h5_check_stored(o, name, (unsigned long long)n) == CT_OK)
            read_all(o, 0, t, s);
        if (s >= 0) H5Sclose(s);
        if (t >= 0) H5Tclose(t);
    }
    H5Oclose(o);
    return 0;
}

/* What the child reads: the links from the root, the root's attributes, then every object. */
static void walk_structure(const char *path)
{
    ct_h5_quiet();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return;   /* not HDF5 at all: the caller's own open says so */
    H5Literate(f, H5_INDEX_NAME, H5_ITER_INC, NULL, visit_link, NULL);
    H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_INC, NULL, visit_attr, NULL);
    H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, visit_object, NULL, H5O_INFO_BASIC);
    H5Fclose(f);
}

/* The child: walk the file, then say "done" with one byte. Never returns. */
static _Noreturn void child(const char *path, void (*walk)(const char *), int out, unsigned seconds)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a parent killed outright takes the child with it */
#endif
    /* the parent's handlers must not run here: its SIGINT handler removes its temporary file */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    alarm(seconds);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) { dup2(null, 1); dup2(null, 2); }   /* libhdf5's or a sanitizer's reports are not ctrain's output */
    walk(path);
    char done = 'k';
    ssize_t w = write(out, &done, 1);
    (void)w;
    _exit(0);
}

static unsigned timeout_seconds(ct_status *st)
{
    const char *e = getenv("CTRAIN_H5_TIMEOUT");
    *st = CT_OK;
    if (!e || !*e) return 60;
    char *end;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (errno || *end || v < 1 || v > 86400) {
        *st = ct_fail(CT_EINVAL, "CTRAIN_H5_TIMEOUT=%s: give whole seconds from 1 to 86400 (how long reading an HDF5 file's structure may take)", e);
        return 0;
    }
    return (unsigned)v;
}

ct_status ct_h5_probe(const char *path) { return probe_on ? ct_h5_probe_run(path, walk_structure) : CT_OK; }

ct_status ct_h5_probe_run(const char *path, void (*walk)(const char *path))
{
    ct_status st;
    unsigned seconds = timeout_seconds(&st);
    if (st != CT_OK) return st;
    int fd[2];
    if (pipe(fd) != 0) return CT_OK;   /* no probe: the caller reads the file as before */
    /* a program another thread starts must not hold the write end open: the read below waits for its last holder */
    fcntl(fd[0], F_SETFD, FD_CLOEXEC);
    fcntl(fd[1], F_SETFD, FD_CLOEXEC);
    pid_t pid = fork();
    if (pid < 0) { close(fd[0]); close(fd[1]); return CT_OK; }
    if (pid == 0) { close(fd[0]); child(path, walk, fd[1], seconds); }
    close(fd[1]);
    char done = 0;
    ssize_t r;
    do r = read(fd[0], &done, 1); while (r < 0 && errno == EINTR);
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (r == 1 && done == 'k') return CT_OK;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        return ct_fail(CT_EFORMAT, "%s: libhdf5 did not finish reading the file's structure in %u s (a damaged file can make it "
                       "loop forever): regenerate the file or copy it again from its source (CTRAIN_H5_TIMEOUT=SECONDS allows longer)",
                       path, seconds);
    if (WIFSIGNALED(status))
        return ct_fail(CT_EFORMAT, "%s: libhdf5 crashed reading the file's structure (signal %d, %s): the file is damaged; "
                       "regenerate it or copy it again from its source", path, WTERMSIG(status), strsignal(WTERMSIG(status)));
    return ct_fail(CT_EFORMAT, "%s: libhdf5 failed reading the file's structure (it stopped with status %d): the file is damaged; "
                   "regenerate it or copy it again from its source", path, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}
