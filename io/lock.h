/* lock.h - an advisory lock on a file a run writes (a checkpoint, a weights file,
 * a feature store: `ctrain train` locks its --checkpoint, --out and --save-best,
 * ct_featstore_open the store for as long as it is open), so that two runs pointed at the same path do not interleave
 * their writes: the second refuses, naming the first.
 *
 * The lock is flock(2) on a companion file "<path>.lock", which holds one line
 * describing its holder: "pid 4242, ctrain train cnn --checkpoint run.h5, since
 * 2026-11-23 09:00:00 UTC". The kernel drops a flock when its process ends, however
 * it ends, so a lock left by a killed run (kill -9, a crash, a power cut) blocks
 * nobody: the next run takes it at once and rewrites the line. A run that ends
 * normally removes the file. Advisory: only ctrain honours it.
 */
#ifndef CT_LOCK_H
#define CT_LOCK_H
#include "core/error.h"

#define CT_LOCK_PATH_MAX 4096

typedef struct {
    int fd;                          /* -1: not held */
    char path[CT_LOCK_PATH_MAX];     /* "<path>.lock" */
} ct_path_lock;

/* Takes the lock on `path` without waiting. `holder` describes this run for whoever
 * finds the lock taken ("ctrain train cnn --checkpoint run.h5"; NULL: the process's
 * command line, from /proc/self/cmdline); `flag` names the
 * option that chose the path ("--checkpoint") in the message. CT_EINVAL when
 * another process holds it: "run.h5 is in use by another run (pid 4242, ctrain
 * train ..., since ...): wait for it to end or choose another --checkpoint";
 * CT_EIO when the lock file cannot be created for another reason than a directory
 * that is missing, not writable or read-only: there nothing can be written, by this
 * run or another, so no lock is taken (l->fd stays -1) and the writer's own error
 * says what is wrong with the path. */
ct_status ct_path_lock_take(ct_path_lock *l, const char *path, const char *holder, const char *flag);
/* Removes the lock file and drops the lock (a lock not held is allowed). */
void      ct_path_lock_release(ct_path_lock *l);

#endif
