/* h5probe.h - read an HDF5 file's whole structure in a child process before ctrain
 * opens it, so that a file damaged in one of the ways that crash or hang libhdf5
 * itself ends in one line and exit status 1 instead of a segmentation fault or a run
 * that never starts. Below every reader (io/h5.h includes this header), with the two
 * checks that need nothing else of ctrain's: HDF5's error printing silenced, and a
 * dataset's stated size held against what the file stores (ct_h5_check_stored).
 *
 * ctrain checks what it reads (sizes against the file, shapes, types: io/h5.h), but
 * some damage is met inside libhdf5 before any of that can look: a link table whose
 * decoding frees a wild pointer, a global heap whose free space has size 0 and is
 * walked forever (docs/robustness.md lists the inputs). The probe forks; the child
 * opens the file read-only and walks what the readers may touch - every group's
 * links, every object's attributes (read in full), every dataset's layout and the
 * contents of its variable-length strings, but not the bulk numbers of the other
 * datasets - and reports back through a pipe. A child that crashed or ran past the
 * time limit (CTRAIN_H5_TIMEOUT seconds, default 60) makes the probe fail, naming
 * the file; anything else, an ordinary HDF5 error included, lets the caller go on
 * and report it in its own words.
 *
 * The child never returns into ctrain (it ends with _exit, so nothing of the
 * parent's - open files, stdio buffers, GPU or MPI state - is flushed or closed
 * twice), writes nothing to the terminal, and the parent's threads are not copied.
 * Where fork is not possible, the probe is skipped.
 */
#ifndef CT_H5PROBE_H
#define CT_H5PROBE_H
#include <hdf5.h>
#include "core/error.h"

/* Silence HDF5's own error printing (its stack dumps), so users see ctrain's one line. */
void ct_h5_quiet(void);

/* Whether the open dataset d (called `name` in messages) really stores `elems`
 * elements. HDF5 reads the parts of a dataset that were never written as fill
 * values, so a file of a few hundred bytes can declare a dataset of any size:
 * what its layout says is stored (at most the file's size; with a compression
 * filter, at most 1032 times that, deflate's limit) must hold elems elements of
 * its type (4 bytes at least per variable-length string), in chunks of at most
 * CT_H5_CHUNK_MAX bytes. CT_EFORMAT naming the dataset and both sizes otherwise. Readers call it before allocating for a size
 * read from a file. */
ct_status ct_h5_check_stored(hid_t d, const char *name, unsigned long long elems);
/* The largest chunk ct_h5_check_stored lets through (HDF5 allocates a whole chunk to
 * read any of it): 64 MiB, four times the feature store's largest (1024 x 4096 floats). */
#define CT_H5_CHUNK_MAX (64 << 20)

/* CT_OK, or CT_EFORMAT when libhdf5 crashed or hung reading path's structure. */
ct_status ct_h5_probe(const char *path);

/* The machinery with the reading given: walk(path) runs in the child, under the
 * same time limit, and its crash or overrun is reported as the probe's. */
ct_status ct_h5_probe_run(const char *path, void (*walk)(const char *path));

/* On by default. The fuzz targets switch it off: they run the readers on hostile
 * files in their own process on purpose, to find what the readers do. */
void ct_h5_probe_enable(int on);

#endif
