/* files.h - small file-system helpers for the files a run leaves behind: a
 * directory made with its parents (mkdir -p), and text files replaced
 * atomically, so a reader (a browser showing the curves, a user copying the
 * configuration) never sees half a file and a failed write leaves the old one.
 *
 *   FILE *f;
 *   char tmp[4200];
 *   CT_TRY(ct_file_begin(&f, tmp, sizeof tmp, "run/curves.svg", "the curves"));
 *   fprintf(f, ...);
 *   CT_TRY(ct_file_commit_unsynced(f, tmp, "run/curves.svg", "the curves"));
 *
 * The HDF5 files (weights, checkpoints) have their own atomic path: io/h5atomic.h. */
#ifndef CT_FILES_H
#define CT_FILES_H
#include <stdio.h>
#include "core/error.h"

/* Creates `dir` and any missing parent (mode 0777 before the umask); an existing directory is fine. */
ct_status ct_mkdirs(const char *dir);
/* Opens "<path>.tmp-<pid>" for writing (its name in tmp[cap]); `what` names the file in messages. */
ct_status ct_file_begin(FILE **f, char *tmp, size_t cap, const char *path, const char *what);
/* Flushes, fsyncs and closes f, then renames tmp over path and fsyncs the directory; on any
 * error tmp is removed and the file at path stays as it was. */
ct_status ct_file_commit(FILE *f, const char *tmp, const char *path, const char *what);
/* The same without the two fsyncs, for a file rewritten often whose loss in a crash costs
 * nothing (the curves redrawn after every epoch): readers still never see half a file. */
ct_status ct_file_commit_unsynced(FILE *f, const char *tmp, const char *path, const char *what);
/* Writes `text` to path atomically (ct_file_begin + ct_file_commit). */
ct_status ct_file_write_text(const char *path, const char *text, const char *what);

#endif
