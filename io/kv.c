/* kv.c - configuration as named values, and as the attributes of an HDF5 object (see kv.h). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/kv.h"
#include "io/h5.h"

static ct_kv_entry *kv_slot(ct_kv *kv, const char *key)
{
    for (int i = 0; i < kv->n; i++)
        if (!strcmp(kv->e[i].key, key)) return &kv->e[i];
    CT_ASSERT(kv->n < CT_KV_MAX && strlen(key) < sizeof kv->e[0].key);
    ct_kv_entry *e = &kv->e[kv->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    return e;
}

void ct_kv_set_int(ct_kv *kv, const char *key, long long v) { ct_kv_entry *e = kv_slot(kv, key); e->type = CT_KV_INT; e->i = v; e->num = (double)v; }
/* v as a long long, saturated (NaN reads as LLONG_MIN): a number from a file may be any double,
 * and converting one outside the range is undefined. */
static long long sat_llong(double v)
{
    if (!(v > (double)LLONG_MIN)) return LLONG_MIN;
    return v >= (double)LLONG_MAX ? LLONG_MAX : (long long)v;
}

/* The entry as an int, saturated, so that a value out of range stays out of range (a
 * file's hidden = 4294967424 must not read as 128). */
static int sat_int(const ct_kv_entry *e)
{
    long long v = e->type == CT_KV_INT ? e->i : sat_llong(e->num);
    return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v;
}

void ct_kv_set_num(ct_kv *kv, const char *key, double v)    { ct_kv_entry *e = kv_slot(kv, key); e->type = CT_KV_NUM; e->num = v; e->i = sat_llong(v); }
void ct_kv_set_str(ct_kv *kv, const char *key, const char *s)
{
    ct_kv_entry *e = kv_slot(kv, key);
    e->type = CT_KV_STR;
    snprintf(e->str, sizeof e->str, "%s", s ? s : "");
}

const ct_kv_entry *ct_kv_get(const ct_kv *kv, const char *key)
{
    for (int i = 0; i < kv->n; i++)
        if (!strcmp(kv->e[i].key, key)) return &kv->e[i];
    return NULL;
}

int ct_kv_int(const ct_kv *kv, const char *key, int *dst)
{
    const ct_kv_entry *e = ct_kv_get(kv, key);
    if (!e || e->type == CT_KV_STR) return 0;
    *dst = sat_int(e);
    return 1;
}

int ct_kv_long(const ct_kv *kv, const char *key, long *dst)
{
    const ct_kv_entry *e = ct_kv_get(kv, key);
    if (!e || e->type == CT_KV_STR) return 0;
    *dst = e->type == CT_KV_INT ? (long)e->i : (long)sat_llong(e->num);
    return 1;
}

int ct_kv_float(const ct_kv *kv, const char *key, float *dst)
{
    const ct_kv_entry *e = ct_kv_get(kv, key);
    if (!e || e->type == CT_KV_STR) return 0;
    *dst = e->type == CT_KV_INT ? (float)e->i : (float)e->num;
    return 1;
}

int ct_kv_str(const ct_kv *kv, const char *key, const char **dst)
{
    const ct_kv_entry *e = ct_kv_get(kv, key);
    if (!e || e->type != CT_KV_STR) return 0;
    *dst = e->str;
    return 1;
}

/* ---- as HDF5 attributes ---- */
static ct_status attr_write(hid_t f, const char *obj, const char *key, hid_t ftype, hid_t mtype, const void *v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    if (H5Aexists_by_name(f, obj, key, H5P_DEFAULT) > 0) H5Adelete_by_name(f, obj, key, H5P_DEFAULT);
    hid_t a = H5Acreate_by_name(f, obj, key, ftype, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, mtype, v);
    if (a >= 0 && H5Aclose(a) < 0) e = -1;
    H5Sclose(s);
    if (e < 0) return ct_fail(CT_EIO, "cannot write attribute %s of %s", key, obj);
    return CT_OK;
}
static ct_status attr_int(hid_t f, const char *obj, const char *key, long long v) { return attr_write(f, obj, key, H5T_STD_I64LE, H5T_NATIVE_LLONG, &v); }
static ct_status attr_num(hid_t f, const char *obj, const char *key, double v)    { return attr_write(f, obj, key, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v); }

ct_status ct_kv_write_h5(hid_t f, const char *obj, const ct_kv *kv)
{
    for (int i = 0; i < kv->n; i++) {
        const ct_kv_entry *e = &kv->e[i];
        if (e->type == CT_KV_INT) CT_TRY(attr_int(f, obj, e->key, e->i));
        else if (e->type == CT_KV_NUM && fabs(e->num) <= FLT_MAX && (double)(float)e->num == e->num) {   /* a float setting: stored as float32, so it reads back as 0.001, not 0.0010000000474974513 */
            float v = (float)e->num;
            CT_TRY(attr_write(f, obj, e->key, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &v));
        } else if (e->type == CT_KV_NUM) CT_TRY(attr_num(f, obj, e->key, e->num));
        else CT_TRY(ct_h5_attr_write_str(f, obj, e->key, e->str));
    }
    return CT_OK;
}

/* Read one attribute of any numeric or string type into a kv entry. */
static ct_status attr_read_entry(hid_t a, const char *key, ct_kv *kv)
{
    hid_t t = H5Aget_type(a), s = H5Aget_space(a);
    ct_status st = CT_OK;
    H5T_class_t cls = H5Tget_class(t);
    hssize_t n = H5Sget_simple_extent_npoints(s);
    if (n != 1) { /* arrays are not configuration values: skip */ }
    else if (cls == H5T_INTEGER) {
        long long v;
        if (H5Aread(a, H5T_NATIVE_LLONG, &v) < 0) st = ct_fail(CT_EFORMAT, "attribute %s could not be read", key);
        else ct_kv_set_int(kv, key, v);
    } else if (cls == H5T_FLOAT) {
        double v;
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0) st = ct_fail(CT_EFORMAT, "attribute %s could not be read", key);
        else ct_kv_set_num(kv, key, v);
    } else if (cls == H5T_STRING) {
        if (H5Tis_variable_str(t) > 0) {
            char *p = NULL;
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            if (H5Aread(a, mt, &p) < 0 || !p) st = ct_fail(CT_EFORMAT, "attribute %s could not be read", key);
            else ct_kv_set_str(kv, key, p);
            if (p) H5free_memory(p);
            H5Tclose(mt);
        } else if (H5Tget_size(t) > CT_KV_STR_MAX) {
            st = ct_fail(CT_EFORMAT, "attribute %s is a string of %zu bytes, more than a setting can be (%d)", key,
                         H5Tget_size(t), CT_KV_STR_MAX);
        } else {
            size_t len = H5Tget_size(t);
            char *buf = ct_calloc(len + 1, 1, "attribute");
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, len + 1);
            if (!buf) st = CT_ENOMEM;
            else if (H5Aread(a, mt, buf) < 0) st = ct_fail(CT_EFORMAT, "attribute %s could not be read", key);
            else ct_kv_set_str(kv, key, buf);
            free(buf);
            H5Tclose(mt);
        }
    }
    H5Sclose(s);
    H5Tclose(t);
    return st;
}

typedef struct { ct_kv *kv; ct_status st; } kv_iter;
static herr_t kv_visit(hid_t loc, const char *name, const H5A_info_t *info, void *op)
{
    kv_iter *it = op;
    (void)info;
    if (it->kv->n >= CT_KV_MAX || strlen(name) >= sizeof it->kv->e[0].key) return 0;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) { it->st = ct_fail(CT_EFORMAT, "attribute %s could not be opened", name); return -1; }
    it->st = attr_read_entry(a, name, it->kv);
    H5Aclose(a);
    return it->st == CT_OK ? 0 : -1;
}

ct_status ct_kv_read_h5(hid_t f, const char *obj, ct_kv *kv)
{
    kv->n = 0;
    if (strcmp(obj, "/") != 0 && !ct_h5_exists(f, obj)) return ct_fail(CT_EFORMAT, "group %s is missing", obj);
    hid_t o = H5Oopen(f, obj, H5P_DEFAULT);
    if (o < 0) return ct_fail(CT_EFORMAT, "group %s could not be opened", obj);
    kv_iter it = { kv, CT_OK };
    hsize_t idx = 0;
    herr_t e = H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, &idx, kv_visit, &it);
    H5Oclose(o);
    if (it.st != CT_OK) return it.st;
    if (e < 0) return ct_fail(CT_EFORMAT, "the attributes of %s could not be read", obj);
    return CT_OK;
}

