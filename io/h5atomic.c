/* h5atomic.c - HDF5 files written whole and atomically (see h5atomic.h): built in
 * memory with HDF5's core driver, then written to a temporary file, fsync'ed and
 * renamed over the target. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#include "core/interrupt.h"
#include "io/h5atomic.h"
#include "io/h5.h"

ct_status ct_fsync_path(const char *path, int directory)
{
    int fd = open(path, directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return ct_fail(CT_EIO, "%s: cannot open for fsync (%s)", path, strerror(errno));
    int r = fsync(fd);
    close(fd);
    if (r != 0) return ct_fail(CT_EIO, "%s: fsync failed (disk full or I/O error)", path);
    return CT_OK;
}

/* Remove "<base>.tmp-<pid>" files of processes that no longer exist (a killed run's leftovers). */
static void remove_stale_temps(const char *path)
{
    char dirbuf[4096], basebuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", path);
    snprintf(basebuf, sizeof basebuf, "%s", path);
    const char *dir = dirname(dirbuf), *base = basename(basebuf);
    char prefix[4200];
    int np = snprintf(prefix, sizeof prefix, "%s.tmp-", base);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, prefix, (size_t)np) != 0) continue;
        char *end;
        long pid = strtol(de->d_name + np, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* alive (or not ours to judge) */
        char full[8400];
        snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
        unlink(full);
    }
    closedir(d);
}

hid_t ct_h5_mem_create(void)
{
    ct_h5_quiet();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST);   /* checksummed metadata */
    H5Pset_fapl_core(fapl, (size_t)1 << 20, 0);                        /* in memory, no backing file */
    char name[64];
    static int seq;
    snprintf(name, sizeof name, "ctrain-mem-%ld-%d", (long)getpid(), seq++);
    hid_t f = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) ct_fail(CT_ENOMEM, "cannot create an HDF5 file in memory");
    return f;
}

/* Bob Jenkins's lookup3 hashlittle(), HDF5's metadata checksum (H5_checksum_lookup3). */
#define ROT32(x, k) (((x) << (k)) | ((x) >> (32 - (k))))
static uint32_t lookup3(const uint8_t *k, size_t length, uint32_t initval)
{
    uint32_t a, b, c;
    a = b = c = 0xdeadbeefu + (uint32_t)length + initval;
    while (length > 12) {
        a += k[0] + ((uint32_t)k[1] << 8) + ((uint32_t)k[2] << 16) + ((uint32_t)k[3] << 24);
        b += k[4] + ((uint32_t)k[5] << 8) + ((uint32_t)k[6] << 16) + ((uint32_t)k[7] << 24);
        c += k[8] + ((uint32_t)k[9] << 8) + ((uint32_t)k[10] << 16) + ((uint32_t)k[11] << 24);
        a -= c; a ^= ROT32(c, 4);  c += b;
        b -= a; b ^= ROT32(a, 6);  a += c;
        c -= b; c ^= ROT32(b, 8);  b += a;
        a -= c; a ^= ROT32(c, 16); c += b;
        b -= a; b ^= ROT32(a, 19); a += c;
        c -= b; c ^= ROT32(b, 4);  b += a;
        length -= 12;
        k += 12;
    }
    switch (length) {
    case 12: c += (uint32_t)k[11] << 24; /* fall through */
    case 11: c += (uint32_t)k[10] << 16; /* fall through */
    case 10: c += (uint32_t)k[9] << 8;   /* fall through */
    case 9:  c += k[8];                  /* fall through */
    case 8:  b += (uint32_t)k[7] << 24;  /* fall through */
    case 7:  b += (uint32_t)k[6] << 16;  /* fall through */
    case 6:  b += (uint32_t)k[5] << 8;   /* fall through */
    case 5:  b += k[4];                  /* fall through */
    case 4:  a += (uint32_t)k[3] << 24;  /* fall through */
    case 3:  a += (uint32_t)k[2] << 16;  /* fall through */
    case 2:  a += (uint32_t)k[1] << 8;   /* fall through */
    case 1:  a += k[0]; break;
    case 0:  return c;
    }
    c ^= b; c -= ROT32(b, 14);
    a ^= c; a -= ROT32(c, 11);
    b ^= a; b -= ROT32(a, 25);
    c ^= b; c -= ROT32(b, 16);
    a ^= c; a -= ROT32(c, 4);
    b ^= a; b -= ROT32(a, 14);
    c ^= b; c -= ROT32(b, 24);
    return c;
}

/* HDF5 1.10's file image of a version 2/3 superblock has its status flags
 * cleared but keeps the checksum computed with them set; recompute it. Then
 * check that the image opens, so a bad image is never written to disk. */
static ct_status fix_image(uint8_t *img, size_t n)
{
    static const uint8_t sig[8] = { 0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n' };
    if (n < 12 || memcmp(img, sig, 8) != 0) return ct_fail(CT_EIO, "the HDF5 file image has no superblock at offset 0");
    if (img[8] == 2 || img[8] == 3) {
        size_t end = 12 + 4 * (size_t)img[9];   /* signature..flags, then 4 addresses */
        if (end + 4 > n) return ct_fail(CT_EIO, "the HDF5 file image is too short");
        uint32_t c = lookup3(img, end, 0);
        for (int i = 0; i < 4; i++) img[end + (size_t)i] = (uint8_t)(c >> (8 * i));
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, (size_t)1 << 20, 0);
    H5Pset_file_image(fapl, img, n);
    char name[64];
    snprintf(name, sizeof name, "ctrain-check-%ld", (long)getpid());
    hid_t f = H5Fopen(name, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0) return ct_fail(CT_EIO, "the HDF5 file image built in memory does not open again (HDF5 library problem)");
    H5Fclose(f);
    return CT_OK;
}

/* Write n bytes to a new file at `path` and fsync it. */
static ct_status write_bytes(const char *path, const void *buf, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ct_fail(CT_EIO, "cannot create %s (%s)", path, strerror(errno));
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int err = w < 0 ? errno : ENOSPC;
            close(fd);
            return ct_fail(CT_EIO, "cannot write %s (%s)", path, strerror(err));
        }
        p += w;
        n -= (size_t)w;
    }
    if (fsync(fd) != 0) { int err = errno; close(fd); return ct_fail(CT_EIO, "fsync of %s failed (%s)", path, strerror(err)); }
    if (close(fd) != 0) return ct_fail(CT_EIO, "closing %s failed (%s)", path, strerror(errno));
    return CT_OK;
}

ct_status ct_h5_mem_commit(hid_t f, ct_status st, const char *path, const char *what)
{
    char tmp[4200];
    void *img = NULL;
    if (st == CT_OK && snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= (int)sizeof tmp)
        st = ct_fail(CT_EINVAL, "path too long: %s", path);
    if (st == CT_OK && H5Fflush(f, H5F_SCOPE_GLOBAL) < 0) st = ct_fail(CT_EIO, "cannot finish the HDF5 file in memory");
    ssize_t n = st == CT_OK ? H5Fget_file_image(f, NULL, 0) : -1;
    if (st == CT_OK && n <= 0) st = ct_fail(CT_EIO, "cannot take the HDF5 file's image");
    if (st == CT_OK && !(img = ct_malloc((size_t)n, "file image"))) st = CT_ENOMEM;
    if (st == CT_OK && H5Fget_file_image(f, img, (size_t)n) != n) st = ct_fail(CT_EIO, "cannot take the HDF5 file's image");
    if (f >= 0) H5Fclose(f);
    if (st == CT_OK) st = fix_image(img, (size_t)n);
    if (st == CT_OK) {
        remove_stale_temps(path);
        ct_interrupt_guard_file(tmp);   /* a second Ctrl-C while writing removes it and leaves `path` as it was */
        st = write_bytes(tmp, img, (size_t)n);
        if (st == CT_OK && rename(tmp, path) != 0) st = ct_fail(CT_EIO, "cannot rename %s to %s (%s)", tmp, path, strerror(errno));
        if (st != CT_OK) unlink(tmp);
        ct_interrupt_guard_file(NULL);
    }
    free(img);
    if (st != CT_OK)
        return ct_fail(st, "could not write %s %s, the previous %s is untouched: %s", what, path, what, ct_last_error());
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    return ct_fsync_path(dirname(dir), 1);
}

