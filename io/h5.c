/* h5.c - checked HDF5 helpers (see h5.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/h5.h"

ct_status ct_h5_open(hid_t *f, const char *path)
{
    ct_h5_quiet();
    FILE *probe = fopen(path, "rb");
    if (!probe) return ct_fail(CT_EIO, "%s: cannot open (%s); check the path", path, strerror(errno));
    fclose(probe);
    CT_TRY(ct_h5_probe(path));   /* damage that crashes or hangs libhdf5 itself: one line (io/h5probe.h) */
    *f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*f < 0) return ct_fail(CT_EFORMAT, "%s: not a readable HDF5 file (truncated or corrupt)", path);
    return CT_OK;
}

ct_status ct_h5_create(hid_t *f, const char *path)
{
    ct_h5_quiet();
    *f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (*f < 0) return ct_fail(CT_EIO, "%s: cannot create the file (directory missing or not writable?)", path);
    return CT_OK;
}

void ct_h5_close(hid_t f) { if (f >= 0) H5Fclose(f); }

int ct_h5_exists(hid_t f, const char *name)
{
    /* check each path component so a missing parent group is not an error */
    char buf[512];
    size_t len = strlen(name);
    if (len == 0 || len >= sizeof buf) return 0;
    memcpy(buf, name, len + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (H5Lexists(f, buf, H5P_DEFAULT) <= 0) return 0;
            if (c == '\0') return 1;
            *p = c;
        }
    }
}

ct_status ct_h5_shape(hid_t f, const char *name, int *ndim, size_t dims[CT_H5_DIMS_MAX])
{
    if (!ct_h5_exists(f, name)) return ct_fail(CT_EFORMAT, "dataset %s is missing from the file", name);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return ct_fail(CT_EFORMAT, "%s is not a readable dataset", name);
    hid_t s = H5Dget_space(d);
    int nd = H5Sget_simple_extent_ndims(s);
    hsize_t hd[CT_H5_DIMS_MAX];
    ct_status st = CT_OK;
    if (nd < 0 || nd > CT_H5_DIMS_MAX) st = ct_fail(CT_EFORMAT, "dataset %s has %d dimensions (at most %d supported)", name, nd, CT_H5_DIMS_MAX);
    else {
        H5Sget_simple_extent_dims(s, hd, NULL);
        *ndim = nd;
        for (int i = 0; i < nd; i++) dims[i] = (size_t)hd[i];
    }
    H5Sclose(s);
    H5Dclose(d);
    return st;
}

static ct_status read_typed(hid_t f, const char *name, void *dst, size_t n, hid_t memtype)
{
    int nd; size_t dims[CT_H5_DIMS_MAX];
    CT_TRY(ct_h5_shape(f, name, &nd, dims));
    size_t count = 1;
    for (int i = 0; i < nd; i++) count *= dims[i];
    if (count != n) return ct_fail(CT_EFORMAT, "dataset %s holds %zu elements, expected %zu (wrong shape)", name, count, n);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return ct_fail(CT_EFORMAT, "%s is not a readable dataset", name);
    ct_status st = ct_h5_check_stored(d, name, n);
    if (st != CT_OK) { H5Dclose(d); return st; }
    herr_t e = H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst);
    H5Dclose(d);
    if (e < 0) return ct_fail(CT_EFORMAT, "dataset %s could not be read (corrupt file or non-numeric type)", name);
    return CT_OK;
}

ct_status ct_h5_read_f32(hid_t f, const char *name, float *dst, size_t n) { return read_typed(f, name, dst, n, H5T_NATIVE_FLOAT); }
ct_status ct_h5_read_i32(hid_t f, const char *name, int *dst, size_t n)   { return read_typed(f, name, dst, n, H5T_NATIVE_INT); }

/* Create every missing group on the way to `name`'s parent. */
static ct_status make_parents(hid_t f, const char *name)
{
    char buf[512];
    size_t len = strlen(name);
    if (len >= sizeof buf) return ct_fail(CT_EINVAL, "HDF5 path too long: %s", name);
    memcpy(buf, name, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (H5Lexists(f, buf, H5P_DEFAULT) <= 0) {
            hid_t g = H5Gcreate2(f, buf, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            if (g < 0) return ct_fail(CT_EIO, "cannot create HDF5 group %s", buf);
            H5Gclose(g);
        }
        *p = '/';
    }
    return CT_OK;
}

static ct_status write_typed(hid_t f, const char *name, const void *src, int ndim, const size_t *dims,
                             hid_t filetype, hid_t memtype)
{
    CT_ASSERT(ndim >= 1 && ndim <= CT_H5_DIMS_MAX);
    CT_TRY(make_parents(f, name));
    hsize_t hd[CT_H5_DIMS_MAX];
    for (int i = 0; i < ndim; i++) hd[i] = dims[i];
    hid_t s = H5Screate_simple(ndim, hd, NULL);
    hid_t d = H5Dcreate2(f, name, filetype, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = d < 0 ? -1 : H5Dwrite(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, src);
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
    if (e < 0) return ct_fail(CT_EIO, "cannot write dataset %s (disk full or read-only?)", name);
    return CT_OK;
}

ct_status ct_h5_write_names(hid_t f, const char *name, const char *const *names, int n)
{
    size_t width = 2;   /* the longest name and its NUL */
    for (int k = 0; k < n; k++) if (strlen(names[k]) + 1 > width) width = strlen(names[k]) + 1;
    if (width > CT_H5_NAME_MAX) return ct_fail(CT_EINVAL, "dataset %s: a name of %zu bytes is too long", name, width - 1);
    char *buf = ct_calloc((size_t)n * width + 1, 1, "names");   /* [n, width] */
    hid_t t = H5Tcopy(H5T_C_S1);
    if (!buf || t < 0 || H5Tset_size(t, width) < 0 || H5Tset_strpad(t, H5T_STR_NULLPAD) < 0) {
        free(buf);
        if (t >= 0) H5Tclose(t);
        return buf ? ct_fail(CT_EIO, "dataset %s: cannot make its string type", name) : CT_ENOMEM;
    }
    for (int k = 0; k < n; k++) memcpy(buf + (size_t)k * width, names[k], strlen(names[k]));
    size_t dims[1] = { (size_t)n };
    ct_status st = write_typed(f, name, buf, 1, dims, t, t);
    H5Tclose(t);
    free(buf);
    return st;
}

void ct_h5_names_free(char **names, int n)
{
    for (int k = 0; names && k < n; k++) free(names[k]);
    free(names);
}

ct_status ct_h5_read_names(hid_t f, const char *name, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    int nd; size_t dims[CT_H5_DIMS_MAX];
    CT_TRY(ct_h5_shape(f, name, &nd, dims));
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), t = d < 0 ? -1 : H5Dget_type(d);
    size_t width = t < 0 ? 0 : H5Tget_size(t);
    ct_status st = CT_OK;
    if (nd != 1 || dims[0] > 0x7fffffff || t < 0 || H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) > 0
        || width < 1 || width > CT_H5_NAME_MAX)
        st = ct_fail(CT_EFORMAT, "dataset %s is not a list of fixed-length names", name);
    if (st == CT_OK) st = ct_h5_check_stored(d, name, dims[0]);
    char *buf = NULL, **out = NULL;
    if (st == CT_OK && (!(buf = ct_malloc(dims[0] * width + 1, "names")) || !(out = ct_calloc(dims[0] + 1, sizeof *out, "names"))))
        st = CT_ENOMEM;
    hid_t mt = st == CT_OK ? H5Tcopy(H5T_C_S1) : -1;
    if (st == CT_OK && (mt < 0 || H5Tset_size(mt, width) < 0 || H5Tset_strpad(mt, H5T_STR_NULLPAD) < 0
                        || H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0))
        st = ct_fail(CT_EFORMAT, "dataset %s could not be read (corrupt file)", name);
    for (size_t k = 0; st == CT_OK && k < dims[0]; k++) {
        out[k] = ct_malloc(width + 1, "names");
        if (!out[k]) { st = CT_ENOMEM; break; }
        memcpy(out[k], buf + k * width, width);
        out[k][width] = '\0';
    }
    if (mt >= 0) H5Tclose(mt);
    if (t >= 0) H5Tclose(t);
    if (d >= 0) H5Dclose(d);
    free(buf);
    if (st != CT_OK) { ct_h5_names_free(out, (int)dims[0]); return st; }
    *names = out;
    *n = (int)dims[0];
    return CT_OK;
}

ct_status ct_h5_write_f32(hid_t f, const char *name, const float *src, int ndim, const size_t *dims)
{ return write_typed(f, name, src, ndim, dims, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT); }
ct_status ct_h5_write_i32(hid_t f, const char *name, const int *src, int ndim, const size_t *dims)
{ return write_typed(f, name, src, ndim, dims, H5T_STD_I32LE, H5T_NATIVE_INT); }

ct_status ct_h5_attr_read_double(hid_t f, const char *obj, const char *attr, double *v)
{
    if (H5Aexists_by_name(f, obj, attr, H5P_DEFAULT) <= 0)
        return ct_fail(CT_EFORMAT, "attribute %s of %s is missing", attr, obj);
    hid_t a = H5Aopen_by_name(f, obj, attr, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Aread(a, H5T_NATIVE_DOUBLE, v);
    if (a >= 0) H5Aclose(a);
    if (e < 0) return ct_fail(CT_EFORMAT, "attribute %s of %s is not a number", attr, obj);
    return CT_OK;
}

ct_status ct_h5_attr_write_double(hid_t f, const char *obj, const char *attr, double v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate_by_name(f, obj, attr, H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    if (e < 0) return ct_fail(CT_EIO, "cannot write attribute %s of %s", attr, obj);
    return CT_OK;
}

ct_status ct_h5_attr_write_str(hid_t f, const char *obj, const char *attr, const char *str)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(str) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate_by_name(f, obj, attr, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, t, str);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
    if (e < 0) return ct_fail(CT_EIO, "cannot write attribute %s of %s", attr, obj);
    return CT_OK;
}

ct_status ct_h5_attr_read_str(hid_t f, const char *obj, const char *attr, char *buf, size_t cap)
{
    if (H5Aexists_by_name(f, obj, attr, H5P_DEFAULT) <= 0)
        return ct_fail(CT_EFORMAT, "attribute %s of %s is missing", attr, obj);
    hid_t a = H5Aopen_by_name(f, obj, attr, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1;
    ct_status st = CT_OK;
    if (t < 0 || H5Tget_class(t) != H5T_STRING) {
        st = ct_fail(CT_EFORMAT, "attribute %s of %s is not a string", attr, obj);
    } else if (H5Tis_variable_str(t) > 0) {
        char *s = NULL;
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        if (H5Aread(a, mt, &s) < 0 || !s) st = ct_fail(CT_EFORMAT, "attribute %s of %s cannot be read", attr, obj);
        else if (strlen(s) >= cap) st = ct_fail(CT_EFORMAT, "attribute %s of %s is too long", attr, obj);
        else memcpy(buf, s, strlen(s) + 1);
        if (s) H5free_memory(s);
        H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(t);
        if (n + 1 > cap) st = ct_fail(CT_EFORMAT, "attribute %s of %s is too long", attr, obj);
        else {
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, n + 1);
            H5Tset_strpad(mt, H5T_STR_NULLTERM);
            memset(buf, 0, cap);
            if (H5Aread(a, mt, buf) < 0) st = ct_fail(CT_EFORMAT, "attribute %s of %s cannot be read", attr, obj);
            H5Tclose(mt);
        }
    }
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return st;
}
