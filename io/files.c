/* files.c - mkdir -p and atomically replaced text files (see files.h). */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/files.h"
#include "io/h5atomic.h"

ct_status ct_mkdirs(const char *dir)
{
    char p[4096];
    if (!dir || !*dir) return ct_fail(CT_EINVAL, "an empty directory name");
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return ct_fail(CT_EINVAL, "%.80s...: directory name too long", dir);
    /* each parent in turn: "a/b/c" makes "a", "a/b", "a/b/c" */
    for (char *s = p + 1; ; s++) {
        int end = *s == '\0';
        if (*s == '/' || end) {
            *s = '\0';
            struct stat sb;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return ct_fail(CT_EIO, "cannot create directory %s (%s)", p, strerror(errno));
            if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
                return ct_fail(CT_EIO, "%s exists and is not a directory: choose another path", p);
            if (end) break;
            *s = '/';
        }
    }
    return CT_OK;
}

ct_status ct_file_begin(FILE **f, char *tmp, size_t cap, const char *path, const char *what)
{
    if (snprintf(tmp, cap, "%s.tmp-%ld", path, (long)getpid()) >= (int)cap)
        return ct_fail(CT_EINVAL, "%s: path too long", path);
    *f = fopen(tmp, "w");
    if (!*f) return ct_fail(CT_EIO, "%s: cannot write %s (%s; directory missing or not writable?)", path, what, strerror(errno));
    return CT_OK;
}

static ct_status commit(FILE *f, const char *tmp, const char *path, const char *what, int sync)
{
    int bad = ferror(f) || fflush(f) != 0 || (sync && fsync(fileno(f)) != 0);
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return ct_fail(CT_EIO, "%s: writing %s failed (%s; disk full?); the previous file, if any, is unchanged",
                       path, what, strerror(err));
    }
    if (!sync) return CT_OK;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    return ct_fsync_path(dirname(dir), 1);
}

ct_status ct_file_commit(FILE *f, const char *tmp, const char *path, const char *what) { return commit(f, tmp, path, what, 1); }

ct_status ct_file_commit_unsynced(FILE *f, const char *tmp, const char *path, const char *what)
{
    return commit(f, tmp, path, what, 0);
}

ct_status ct_file_write_text(const char *path, const char *text, const char *what)
{
    FILE *f;
    char tmp[4200];
    CT_TRY(ct_file_begin(&f, tmp, sizeof tmp, path, what));
    fputs(text, f);
    return ct_file_commit(f, tmp, path, what);
}
