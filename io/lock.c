/* lock.c - advisory locks on output paths (see lock.h). */
#define _DEFAULT_SOURCE   /* flock */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "io/lock.h"

/* The holder's line in an open lock file, without its newline ("" when empty). */
static void read_holder(int fd, char *buf, size_t cap)
{
    ssize_t n = pread(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

/* The command line of this process, arguments separated by spaces ("" if unknown). */
static void own_command(char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\0') n--;
    for (size_t i = 0; i < n; i++) if (buf[i] == '\0') buf[i] = ' ';
}

ct_status ct_path_lock_take(ct_path_lock *l, const char *path, const char *holder, const char *flag)
{
    char cmd[400];
    if (!holder) { own_command(cmd, sizeof cmd); holder = cmd[0] ? cmd : "an unnamed program"; }
    l->fd = -1;
    int k = snprintf(l->path, sizeof l->path, "%s.lock", path);
    if (k < 0 || (size_t)k >= sizeof l->path) return ct_fail(CT_EINVAL, "%s: path too long for its lock file", path);
    /* A run that ends removes its lock file while holding the lock; whoever opened the
     * old file before that must not take a lock on a file no longer at the path, so
     * the lock counts only once the locked file is the one the path names. */
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS || errno == ENOENT))
            return CT_OK;   /* nothing can be written beside `path`: no run can, and the writer reports it */
        if (fd < 0)
            return ct_fail(CT_EIO, "%s: cannot create the lock file %s (%s); check that its directory exists and is writable",
                           path, l->path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            char who[512];
            read_holder(fd, who, sizeof who);
            close(fd);
            if (e == EWOULDBLOCK)
                return ct_fail(CT_EINVAL, "%s is in use by another run (%s): wait for it to end or choose another %s", path,
                               who[0] ? who : "its lock file says nothing about it", flag);
            return ct_fail(CT_EIO, "%s: cannot lock %s (%s)", path, l->path, strerror(e));
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(l->path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            char line[768], when[64];
            time_t now = time(NULL);
            struct tm tm;
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm));
            int n = snprintf(line, sizeof line, "pid %ld, %s, since %s\n", (long)getpid(), holder, when);
            if (n >= (int)sizeof line) n = (int)sizeof line - 1;
            /* the description is for messages only: failing to write it does not matter */
            if (ftruncate(fd, 0) == 0 && pwrite(fd, line, (size_t)n, 0) != n) { }
            l->fd = fd;
            return CT_OK;
        }
        close(fd);   /* removed or replaced while we waited for it: open the new one */
    }
    return ct_fail(CT_EIO, "%s: the lock file %s keeps changing under us; is another program removing it?", path, l->path);
}

void ct_path_lock_release(ct_path_lock *l)
{
    if (l->fd < 0) return;
    unlink(l->path);
    close(l->fd);
    l->fd = -1;
}
