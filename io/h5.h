/* h5.h - small, checked helpers over the HDF5 C API: open/create files, read and
 * write whole float/int datasets with their shapes, and scalar attributes.
 *
 * Every call checks what HDF5 returns; failures come back as a ct_status with a
 * message naming the file and the dataset (HDF5's own error stack printing is
 * switched off by ct_h5_quiet so users see one clear line, not a stack dump).
 */
#ifndef CT_H5_H
#define CT_H5_H
#include <stddef.h>
#include <hdf5.h>
#include "core/error.h"
#include "io/h5probe.h"   /* ct_h5_quiet, ct_h5_check_stored: the checks below every reader */

#define CT_H5_DIMS_MAX 8

ct_status ct_h5_open(hid_t *f, const char *path);              /* read-only; clear error if missing/corrupt */
ct_status ct_h5_create(hid_t *f, const char *path);            /* truncates */
void      ct_h5_close(hid_t f);

int       ct_h5_exists(hid_t f, const char *name);             /* dataset or group at path `name` */
/* Shape of a dataset: *ndim and dims[0..ndim). */
ct_status ct_h5_shape(hid_t f, const char *name, int *ndim, size_t dims[CT_H5_DIMS_MAX]);
/* Read a whole dataset converted to float/int; it must hold exactly n elements,
 * stored in the file (ct_h5_check_stored). */
ct_status ct_h5_read_f32(hid_t f, const char *name, float *dst, size_t n);
ct_status ct_h5_read_i32(hid_t f, const char *name, int *dst, size_t n);
/* Write a dataset, creating the intermediate groups of `name` ("a/b/c"). */
ct_status ct_h5_write_f32(hid_t f, const char *name, const float *src, int ndim, const size_t *dims);
ct_status ct_h5_write_i32(hid_t f, const char *name, const int *src, int ndim, const size_t *dims);
/* A list of names as a 1-D dataset of fixed-length, NUL-padded strings [n] (h5py reads
 * bytes), each at most CT_H5_NAME_MAX - 1 bytes. Read back malloc'd: *names [*n], each
 * string and the array freed with ct_h5_names_free. */
#define CT_H5_NAME_MAX 4096
ct_status ct_h5_write_names(hid_t f, const char *name, const char *const *names, int n);
ct_status ct_h5_read_names(hid_t f, const char *name, char ***names, int *n);
void      ct_h5_names_free(char **names, int n);
/* Scalar attributes on the object at `obj` ("/" for the file). */
ct_status ct_h5_attr_read_double(hid_t f, const char *obj, const char *attr, double *v);
ct_status ct_h5_attr_write_double(hid_t f, const char *obj, const char *attr, double v);
ct_status ct_h5_attr_write_str(hid_t f, const char *obj, const char *attr, const char *s);
/* A string attribute (fixed-length or variable-length) into buf[cap]. CT_EFORMAT
 * naming the attribute if it is missing, not a string, or longer than cap - 1. */
ct_status ct_h5_attr_read_str(hid_t f, const char *obj, const char *attr, char *buf, size_t cap);

#endif
