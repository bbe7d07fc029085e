/* kv.h - configuration as named values (a model's sizes, a run's options) and
 * their form in files: the scalar attributes of an HDF5 object. Checkpoints keep
 * a run's two tables this way (train/checkpoint.h), weights files their model's
 * description (catalog/model_desc.h). */
#ifndef CT_KV_H
#define CT_KV_H
#include <hdf5.h>
#include "core/error.h"

#define CT_KV_MAX 64
typedef enum { CT_KV_INT, CT_KV_NUM, CT_KV_STR } ct_kv_type;
typedef struct {
    char key[40];
    ct_kv_type type;
    long long i;
    double num;
    char str[160];
} ct_kv_entry;
typedef struct { int n; ct_kv_entry e[CT_KV_MAX]; } ct_kv;
/* The longest fixed-length string attribute read (64 KiB; a ct_kv keeps its first
 * 159 bytes): a longer one is a damaged file, refused before anything is allocated. */
#define CT_KV_STR_MAX 65536

void ct_kv_set_int(ct_kv *kv, const char *key, long long v);
void ct_kv_set_num(ct_kv *kv, const char *key, double v);
void ct_kv_set_str(ct_kv *kv, const char *key, const char *s);
const ct_kv_entry *ct_kv_get(const ct_kv *kv, const char *key);   /* NULL if absent */
/* Copy a value into *dst if the key is present (numbers convert); return 1 if copied. */
/* int and long saturate: a number out of their range reads as their minimum or maximum. */
int  ct_kv_int(const ct_kv *kv, const char *key, int *dst);
int  ct_kv_long(const ct_kv *kv, const char *key, long *dst);
int  ct_kv_float(const ct_kv *kv, const char *key, float *dst);
int  ct_kv_str(const ct_kv *kv, const char *key, const char **dst);   /* points into kv */

/* Named values as the scalar attributes of object `obj` ("/" or a group path) of an
 * open file: written (replacing attributes of the same name), and read back
 * (every scalar attribute; integers, floats and strings; arrays are skipped).
 * Weights files carry their model's description this way too (catalog/model_desc.h). */
ct_status ct_kv_write_h5(hid_t f, const char *obj, const ct_kv *kv);
ct_status ct_kv_read_h5(hid_t f, const char *obj, ct_kv *kv);

#endif
