/* h5atomic.h - HDF5 files that are replaced atomically, so a crash, a full disk
 * or a read-only directory never leaves half a file where a good one was.
 * Used by weights files (io/weights.c) and checkpoints (train/checkpoint.c). */
#ifndef CT_H5ATOMIC_H
#define CT_H5ATOMIC_H
#include <hdf5.h>
#include "core/error.h"

/* Files written whole and atomically: build the HDF5 file in memory
 * (ct_h5_mem_create, checksummed metadata), then ct_h5_mem_commit takes its
 * image, closes it, writes "<path>.tmp-<pid>", fsyncs it, renames it over `path`
 * and fsyncs the directory. Every disk error (full disk, file size limit,
 * read-only directory) is therefore a plain write error reported here, and the
 * previous file at `path` stays as it was. Pass the status of the writing so far
 * as `st` (the file is closed either way); `what` names the file in messages. */
hid_t     ct_h5_mem_create(void);
ct_status ct_h5_mem_commit(hid_t f, ct_status st, const char *path, const char *what);

/* fsync a file (directory = 0) or a directory (1). */
ct_status ct_fsync_path(const char *path, int directory);

#endif
