/* export.c - `ctrain export` and `ctrain import`: ctrain weights to and from the
 * files of Keras 2 (`model.save_weights("w.h5")`) and PyTorch (a state_dict's
 * names and shapes, one HDF5 dataset per tensor).
 *
 *   ctrain export --format keras|torch run.h5 out.h5   (run.h5: a checkpoint or weights file)
 *   ctrain import --format keras|torch in.h5 out.h5 --model siamese-lstm|small-cnn [sizes]
 *
 * Name and layout mapping (ctrain stores PyTorch's layouts):
 *
 * siamese-lstm (layer k = 0, 1, ... of the stacked LSTM)
 *   ctrain                     PyTorch (nn.LSTM batch_first + nn.Linear)   Keras (LSTM -> Dense)
 *   lstm_1/w_ih_l<k> [4H, I]   lstm.weight_ih_l<k> [4H, I]                 lstm_<k+1>/kernel:0 [I, 4H] (transposed)
 *   lstm_1/w_hh_l<k> [4H, H]   lstm.weight_hh_l<k> [4H, H]                 lstm_<k+1>/recurrent_kernel:0 [H, 4H]
 *   lstm_1/b_ih_l<k> [4H]      lstm.bias_ih_l<k>                           lstm_<k+1>/bias:0 [4H] = b_ih + b_hh
 *   lstm_1/b_hh_l<k> [4H]      lstm.bias_hh_l<k>                           (import: b_ih = bias, b_hh = 0)
 *   dense_1/w [D, H]           dense.weight [D, H]                         dense_1/kernel:0 [H, D] (transposed)
 *   dense_1/b [D]              dense.bias                                  dense_1/bias:0
 *   Gate order i, f, g, o is PyTorch's and Keras's (i, f, c, o): no reordering. Keras's LSTM must
 *   use recurrent_activation='sigmoid' (ctrain's default; 'hard_sigmoid' if trained so).
 *
 * small-cnn
 *   conv2d_1/w [F, C, K, K]    conv1.weight                                conv2d_1/kernel:0 [K, K, C, F]
 *   conv2d_1/b                 conv1.bias                                  conv2d_1/bias:0
 *   batchnorm_1/gamma, beta    bn1.weight, bn1.bias                        batch_normalization_1/gamma:0, beta:0
 *   running_mean, running_var  bn1.running_mean, bn1.running_var           .../moving_mean:0, moving_variance:0
 *                              bn1.num_batches_tracked (0)
 *   dense_1/w [N, F*PH*PW]     dense.weight                                dense_1/kernel:0 [PH*PW*F, N]: transposed, and
 *                                                                          its rows reordered from ctrain's (and PyTorch's)
 *                                                                          channels-first flatten to Keras's channels-last
 *   Batchnorm epsilon is 1e-5 (PyTorch's; set epsilon=1e-5 in Keras).
 *
 * Keras files carry the root attributes layer_names, backend "tensorflow", keras_version "2.x",
 * and per layer group the attribute weight_names; each weight is the dataset <layer>/<layer>/<w>:0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "train/checkpoint.h"
#include "io/h5atomic.h"
#include "io/h5.h"
#include "io/weights.h"
#include "models/siamese_lstm.h"
#include "models/small_cnn.h"

/* ---- a small set of named float tensors ---- */
#define TS_MAX 96
typedef struct { char name[128]; int ndim; size_t dims[4]; float *data; } tensor;
typedef struct { tensor t[TS_MAX]; int n; } tensor_set;

static size_t numel(const tensor *t) { size_t n = 1; for (int i = 0; i < t->ndim; i++) n *= t->dims[i]; return n; }

static tensor *ts_add(tensor_set *s, const char *name, int ndim, const size_t *dims)
{
    if (s->n >= TS_MAX) { ct_fail(CT_EINVAL, "too many tensors"); return NULL; }
    tensor *t = &s->t[s->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%.*s", (int)sizeof t->name - 1, name);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
    t->data = ct_calloc(numel(t) + 1, sizeof(float), name);
    if (!t->data) return NULL;
    s->n++;
    return t;
}

static tensor *ts_find(tensor_set *s, const char *name)
{
    for (int i = 0; i < s->n; i++) if (!strcmp(s->t[i].name, name)) return &s->t[i];
    return NULL;
}

static void ts_free(tensor_set *s) { for (int i = 0; i < s->n; i++) free(s->t[i].data); s->n = 0; }

/* Read dataset `name` of f (any float type) into the set under `as`. */
static ct_status ts_read(tensor_set *s, hid_t f, const char *path, const char *name, const char *as)
{
    int nd; size_t dims[CT_H5_DIMS_MAX];
    if (ct_h5_shape(f, name, &nd, dims) != CT_OK || nd < 1 || nd > 4) return ct_fail(CT_EFORMAT, "%s: dataset %s is missing or not 1-4 dimensional", path, name);
    tensor *t = ts_add(s, as, nd, dims);
    if (!t) return CT_ENOMEM;
    ct_status st = ct_h5_read_f32(f, name, t->data, numel(t));
    if (st != CT_OK) return ct_fail(st, "%s: %s", path, ct_last_error());
    return CT_OK;
}

static tensor *need(tensor_set *s, const char *name, int ndim, const char *path)
{
    tensor *t = ts_find(s, name);
    if (!t || t->ndim != ndim) { ct_fail(CT_EFORMAT, "%s: %s is missing or has the wrong number of dimensions", path, name); return NULL; }
    return t;
}

/* ---- string arrays as attributes (Keras's layer_names, weight_names) ---- */
static ct_status attr_write_strings(hid_t f, const char *obj, const char *attr, char (*v)[128], int n)
{
    size_t len = 1;
    for (int i = 0; i < n; i++) if (strlen(v[i]) > len) len = strlen(v[i]);
    char *buf = ct_calloc((size_t)(n ? n : 1) * len, 1, "attribute");
    if (!buf) return CT_ENOMEM;
    for (int i = 0; i < n; i++) memcpy(buf + (size_t)i * len, v[i], strlen(v[i]));
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, len);
    H5Tset_strpad(t, H5T_STR_NULLPAD);   /* numpy's fixed-length bytes ('S') */
    hsize_t d = (hsize_t)n;
    hid_t s = n ? H5Screate_simple(1, &d, NULL) : H5Screate(H5S_NULL);
    hid_t a = H5Acreate_by_name(f, obj, attr, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : (n ? H5Awrite(a, t, buf) : 0);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s); H5Tclose(t);
    free(buf);
    if (e < 0) return ct_fail(CT_EIO, "cannot write attribute %s of %s", attr, obj);
    return CT_OK;
}

/* Reads a 1-D array of fixed- or variable-length strings; *n = count (0 if absent or empty). */
static ct_status attr_read_strings(hid_t f, const char *obj, const char *attr, char (*v)[128], int max, int *n)
{
    *n = 0;
    if (H5Aexists_by_name(f, obj, attr, H5P_DEFAULT) <= 0) return ct_fail(CT_EFORMAT, "attribute %s of %s is missing", attr, obj);
    hid_t a = H5Aopen_by_name(f, obj, attr, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Aget_type(a), s = H5Aget_space(a);
    hssize_t cnt = H5Sget_simple_extent_npoints(s);
    ct_status st = CT_OK;
    if (cnt <= 0) { /* empty (Keras writes an empty float array for layers without weights) */ }
    else if (H5Tget_class(t) != H5T_STRING) st = ct_fail(CT_EFORMAT, "attribute %s of %s is not a list of strings", attr, obj);
    else if (cnt > max) st = ct_fail(CT_EFORMAT, "attribute %s of %s has %lld entries (at most %d)", attr, obj, (long long)cnt, max);
    else if (cnt > 0 && H5Tis_variable_str(t) > 0) {
        char **p = ct_calloc((size_t)cnt, sizeof *p, "attribute");
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        if (!p || H5Aread(a, mt, p) < 0) st = ct_fail(CT_EFORMAT, "attribute %s of %s cannot be read", attr, obj);
        for (hssize_t i = 0; st == CT_OK && i < cnt; i++) snprintf(v[i], 128, "%s", p[i] ? p[i] : "");
        if (p && st == CT_OK) H5Dvlen_reclaim(mt, s, H5P_DEFAULT, p);
        free(p);
        H5Tclose(mt);
    } else if (cnt > 0) {
        size_t len = H5Tget_size(t);
        char *buf = ct_calloc((size_t)cnt * len + 1, 1, "attribute");
        if (!buf || H5Aread(a, t, buf) < 0) st = ct_fail(CT_EFORMAT, "attribute %s of %s cannot be read", attr, obj);
        for (hssize_t i = 0; st == CT_OK && i < cnt; i++)
            snprintf(v[i], 128, "%.*s", (int)(len < 127 ? len : 127), buf + (size_t)i * len);
        free(buf);
    }
    if (st == CT_OK) *n = (int)(cnt > 0 ? cnt : 0);
    H5Sclose(s); H5Tclose(t); H5Aclose(a);
    return st;
}

/* ---- reading a ctrain file (checkpoint or weights) ---- */
typedef struct {
    char model[64];
    int layers;            /* siamese: stacked LSTM layers */
    int ph, pw;            /* small-cnn: pooled height and width */
} src_info;

static ct_status read_ctrain(tensor_set *s, src_info *info, const char *path, int size_override)
{
    hid_t f;
    CT_TRY(ct_h5_open(&f, path));
    ct_status st = CT_OK;
    char model[64] = "";
    hid_t a = H5Aexists_by_name(f, "/", "model", H5P_DEFAULT) > 0 ? H5Aopen_by_name(f, "/", "model", H5P_DEFAULT, H5P_DEFAULT) : -1;
    if (a >= 0) {
        hid_t t = H5Aget_type(a);
        if (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) <= 0 && H5Tget_size(t) < sizeof model) H5Aread(a, t, model);
        H5Tclose(t); H5Aclose(a);
    }
    if (!model[0]) st = ct_fail(CT_EFORMAT, "%s: not a ctrain checkpoint or weights file (no 'model' attribute)", path);
    snprintf(info->model, sizeof info->model, "%s", model);
    char name[160], as[160];
    if (st == CT_OK && !strcmp(model, "siamese-lstm")) {
        info->layers = 0;
        for (int k = 0; k < LSTM_MAX_LAYERS && st == CT_OK; k++) {
            snprintf(name, sizeof name, "model/lstm_1/w_ih_l%d", k);
            if (!ct_h5_exists(f, name)) break;
            const char *p[4] = { "w_ih", "w_hh", "b_ih", "b_hh" };
            for (int j = 0; j < 4 && st == CT_OK; j++) {
                snprintf(name, sizeof name, "model/lstm_1/%s_l%d", p[j], k);
                st = ts_read(s, f, path, name, name + 6);
            }
            info->layers++;
        }
        if (st == CT_OK && info->layers == 0) st = ct_fail(CT_EFORMAT, "%s: no /model/lstm_1/w_ih_l0", path);
        if (st == CT_OK) st = ts_read(s, f, path, "model/dense_1/w", "dense_1/w");
        if (st == CT_OK) st = ts_read(s, f, path, "model/dense_1/b", "dense_1/b");
    } else if (st == CT_OK && !strcmp(model, "small-cnn")) {
        const char *p[] = { "model/conv2d_1/w", "model/conv2d_1/b", "model/batchnorm_1/gamma", "model/batchnorm_1/beta",
                            "state/batchnorm_1/running_mean", "state/batchnorm_1/running_var", "model/dense_1/w", "model/dense_1/b" };
        for (int j = 0; j < 8 && st == CT_OK; j++) {
            snprintf(as, sizeof as, "%s", strchr(p[j], '/') + 1);
            st = ts_read(s, f, path, p[j], as);
        }
        double h = 0, w = 0;
        if (size_override > 0) h = w = size_override;
        else if (ct_h5_attr_read_double(f, "/", "height", &h) != CT_OK || ct_h5_attr_read_double(f, "/", "width", &w) != CT_OK) h = w = 0;
        if (st == CT_OK) {
            tensor *cw = ts_find(s, "conv2d_1/w"), *dw = ts_find(s, "dense_1/w");
            size_t F = cw->dims[0], flat = dw->ndim == 2 ? dw->dims[1] : 0;
            if (h > 0) { info->ph = (int)h / 2; info->pw = (int)w / 2; }
            else { info->ph = info->pw = (int)lround(sqrt((double)flat / (double)F)); }   /* a weights file: square images */
            if ((size_t)info->ph * (size_t)info->pw * F != flat)
                st = ct_fail(CT_EFORMAT, "%s: dense_1/w has %zu inputs, not filters x pooled height x width = %zu x %d x %d; "
                             "pass --size", path, flat, F, info->ph, info->pw);
        }
    } else if (st == CT_OK && !strcmp(model, "siamese-cnn")) {
        st = ct_fail(CT_EINVAL, "%s: exporting a siamese-cnn is not supported yet (siamese-lstm and small-cnn can be exported); "
                     "its weights are plain HDF5 datasets under /model and /state, readable with h5py", path);
    } else if (st == CT_OK) {
        st = ct_fail(CT_EINVAL, "%s: model '%s' cannot be exported (siamese-lstm and small-cnn can)", path, model);
    }
    ct_h5_close(f);
    return st;
}

/* ---- layout conversions ---- */
static void transpose2(float *dst, const float *src, size_t rows, size_t cols)   /* src [rows, cols] -> dst [cols, rows] */
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
}

/* ctrain [O, I, KH, KW] <-> Keras [KH, KW, I, O] */
static void conv_to_keras(float *dst, const float *src, size_t O, size_t I, size_t KH, size_t KW, int back)
{
    for (size_t o = 0; o < O; o++)
        for (size_t i = 0; i < I; i++)
            for (size_t y = 0; y < KH; y++)
                for (size_t x = 0; x < KW; x++) {
                    size_t c = ((o * I + i) * KH + y) * KW + x, k = ((y * KW + x) * I + i) * O + o;
                    if (back) dst[c] = src[k]; else dst[k] = src[c];
                }
}

/* ctrain dense [N, F*PH*PW] (channels-first flatten) <-> Keras kernel [PH*PW*F, N] (channels-last) */
static void dense_to_keras(float *dst, const float *src, size_t N, size_t F, size_t PH, size_t PW, int back)
{
    size_t flat = F * PH * PW;
    for (size_t n = 0; n < N; n++)
        for (size_t f = 0; f < F; f++)
            for (size_t y = 0; y < PH; y++)
                for (size_t x = 0; x < PW; x++) {
                    size_t c = n * flat + (f * PH + y) * PW + x, k = ((y * PW + x) * F + f) * N + n;
                    if (back) dst[c] = src[k]; else dst[k] = src[c];
                }
}

/* ---- writing ---- */
static ct_status write_tensor(hid_t f, const char *name, const tensor *t)
{
    return ct_h5_write_f32(f, name, t->data, t->ndim, t->dims);
}

typedef struct { char name[128]; char w[6][128]; int nw; tensor_set *src; int idx[6]; } keras_layer;

/* Builds the Keras tensors of each layer (names "<layer>/<w>:0") from a ctrain set. */
static ct_status to_keras(tensor_set *out, keras_layer *L, int *nl, tensor_set *s, const src_info *info, const char *path)
{
    *nl = 0;
    char name[160];
    if (!strcmp(info->model, "siamese-lstm")) {
        for (int k = 0; k < info->layers; k++) {
            char key[64];
            snprintf(key, sizeof key, "lstm_1/w_ih_l%d", k);
            tensor *wih = need(s, key, 2, path);
            snprintf(key, sizeof key, "lstm_1/w_hh_l%d", k);
            tensor *whh = need(s, key, 2, path);
            snprintf(key, sizeof key, "lstm_1/b_ih_l%d", k);
            tensor *bih = need(s, key, 1, path);
            snprintf(key, sizeof key, "lstm_1/b_hh_l%d", k);
            tensor *bhh = need(s, key, 1, path);
            if (!wih || !whh || !bih || !bhh) return CT_EFORMAT;
            keras_layer *l = &L[(*nl)++];
            snprintf(l->name, sizeof l->name, "lstm_%d", k + 1);
            const char *wn[3] = { "kernel:0", "recurrent_kernel:0", "bias:0" };
            l->nw = 3;
            size_t G = wih->dims[0], I = wih->dims[1], H = whh->dims[1];
            size_t d0[2] = { I, G }, d1[2] = { H, G }, d2[1] = { G };
            for (int j = 0; j < 3; j++) {
                snprintf(l->w[j], 128, "%.63s/%.63s", l->name, wn[j]);
                tensor *t = ts_add(out, l->w[j], j < 2 ? 2 : 1, j == 0 ? d0 : j == 1 ? d1 : d2);
                if (!t) return CT_ENOMEM;
                if (j == 0) transpose2(t->data, wih->data, G, I);
                else if (j == 1) transpose2(t->data, whh->data, G, H);
                else for (size_t i = 0; i < G; i++) t->data[i] = bih->data[i] + bhh->data[i];
            }
        }
    } else {
        tensor *cw = need(s, "conv2d_1/w", 4, path), *cb = need(s, "conv2d_1/b", 1, path);
        tensor *g = need(s, "batchnorm_1/gamma", 1, path), *b = need(s, "batchnorm_1/beta", 1, path);
        tensor *rm = need(s, "batchnorm_1/running_mean", 1, path), *rv = need(s, "batchnorm_1/running_var", 1, path);
        if (!cw || !cb || !g || !b || !rm || !rv) return CT_EFORMAT;
        keras_layer *l = &L[(*nl)++];
        snprintf(l->name, sizeof l->name, "conv2d_1");
        l->nw = 2;
        size_t kd[4] = { cw->dims[2], cw->dims[3], cw->dims[1], cw->dims[0] };
        snprintf(l->w[0], 128, "conv2d_1/kernel:0");
        snprintf(l->w[1], 128, "conv2d_1/bias:0");
        tensor *t = ts_add(out, l->w[0], 4, kd);
        if (!t) return CT_ENOMEM;
        conv_to_keras(t->data, cw->data, cw->dims[0], cw->dims[1], cw->dims[2], cw->dims[3], 0);
        if (!(t = ts_add(out, l->w[1], 1, cb->dims))) return CT_ENOMEM;
        memcpy(t->data, cb->data, numel(cb) * sizeof(float));
        l = &L[(*nl)++];
        snprintf(l->name, sizeof l->name, "batch_normalization_1");
        l->nw = 4;
        tensor *bn[4] = { g, b, rm, rv };
        const char *bnn[4] = { "gamma:0", "beta:0", "moving_mean:0", "moving_variance:0" };
        for (int j = 0; j < 4; j++) {
            snprintf(l->w[j], 128, "batch_normalization_1/%s", bnn[j]);
            if (!(t = ts_add(out, l->w[j], 1, bn[j]->dims))) return CT_ENOMEM;
            memcpy(t->data, bn[j]->data, numel(bn[j]) * sizeof(float));
        }
    }
    tensor *dw = need(s, "dense_1/w", 2, path), *db = need(s, "dense_1/b", 1, path);
    if (!dw || !db) return CT_EFORMAT;
    keras_layer *l = &L[(*nl)++];
    snprintf(l->name, sizeof l->name, "dense_1");
    l->nw = 2;
    snprintf(l->w[0], 128, "dense_1/kernel:0");
    snprintf(l->w[1], 128, "dense_1/bias:0");
    size_t kd[2] = { dw->dims[1], dw->dims[0] };
    tensor *t = ts_add(out, l->w[0], 2, kd);
    if (!t) return CT_ENOMEM;
    if (!strcmp(info->model, "small-cnn")) {
        size_t F = ts_find(s, "conv2d_1/w")->dims[0];
        dense_to_keras(t->data, dw->data, dw->dims[0], F, (size_t)info->ph, (size_t)info->pw, 0);
    } else {
        transpose2(t->data, dw->data, dw->dims[0], dw->dims[1]);
    }
    if (!(t = ts_add(out, l->w[1], 1, db->dims))) return CT_ENOMEM;
    memcpy(t->data, db->data, numel(db) * sizeof(float));
    (void)name;
    return CT_OK;
}

/* ctrain name -> PyTorch state_dict name */
static void torch_name(char *dst, size_t n, const char *src)
{
    int k;
    char p[8];
    if (sscanf(src, "lstm_1/%2[wb]_%*[ih]_l%d", p, &k) == 2) {
        const char *kind = strstr(src, "_ih_") ? "ih" : "hh";
        snprintf(dst, n, "lstm.%s_%s_l%d", p[0] == 'w' ? "weight" : "bias", kind, k);
        return;
    }
    static const char *map[][2] = { { "dense_1/w", "dense.weight" }, { "dense_1/b", "dense.bias" },
                                    { "conv2d_1/w", "conv1.weight" }, { "conv2d_1/b", "conv1.bias" },
                                    { "batchnorm_1/gamma", "bn1.weight" }, { "batchnorm_1/beta", "bn1.bias" },
                                    { "batchnorm_1/running_mean", "bn1.running_mean" }, { "batchnorm_1/running_var", "bn1.running_var" } };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(src, map[i][0])) { snprintf(dst, n, "%s", map[i][1]); return; }
    snprintf(dst, n, "%s", src);
}

static ct_status write_int64_scalar(hid_t f, const char *name, long long v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(f, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = d < 0 ? -1 : H5Dwrite(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
    return e < 0 ? ct_fail(CT_EIO, "cannot write %s", name) : CT_OK;
}

static ct_status write_export(const char *format, tensor_set *s, const src_info *info, const char *src, const char *dst)
{
    hid_t f = ct_h5_mem_create();
    if (f < 0) return CT_ENOMEM;
    ct_status st = CT_OK;
    if (!strcmp(format, "torch")) {
        char name[160];
        for (int i = 0; i < s->n && st == CT_OK; i++) {
            torch_name(name, sizeof name, s->t[i].name);
            st = write_tensor(f, name, &s->t[i]);
        }
        if (st == CT_OK && !strcmp(info->model, "small-cnn")) st = write_int64_scalar(f, "bn1.num_batches_tracked", 0);
        if (st == CT_OK) st = ct_h5_attr_write_str(f, "/", "format", "pytorch-state-dict");
        if (st == CT_OK) st = ct_h5_attr_write_str(f, "/", "model", info->model);
    } else {
        static tensor_set k;
        keras_layer L[LSTM_MAX_LAYERS + 4];
        int nl = 0;
        k.n = 0;
        st = to_keras(&k, L, &nl, s, info, src);
        char names[LSTM_MAX_LAYERS + 4][128];
        for (int i = 0; i < nl; i++) snprintf(names[i], 128, "%.127s", L[i].name);
        if (st == CT_OK) st = attr_write_strings(f, "/", "layer_names", names, nl);
        if (st == CT_OK) st = ct_h5_attr_write_str(f, "/", "backend", "tensorflow");
        if (st == CT_OK) st = ct_h5_attr_write_str(f, "/", "keras_version", "2.x");
        for (int i = 0; i < nl && st == CT_OK; i++) {
            hid_t g = H5Gcreate2(f, L[i].name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            if (g < 0) { st = ct_fail(CT_EIO, "cannot create group %s", L[i].name); break; }
            H5Gclose(g);
            st = attr_write_strings(f, L[i].name, "weight_names", L[i].w, L[i].nw);
            for (int j = 0; j < L[i].nw && st == CT_OK; j++) {
                char name[300];
                snprintf(name, sizeof name, "%s/%s", L[i].name, L[i].w[j]);
                st = write_tensor(f, name, ts_find(&k, L[i].w[j]));
            }
        }
        ts_free(&k);
    }
    return ct_h5_mem_commit(f, st, dst, "file");
}

static int usage_error(const char *cmd, const char *msg)
{
    fprintf(stderr, "ctrain %s: %s (see ctrain %s --help)\n", cmd, msg, cmd);
    return 2;
}

int cmd_export(int argc, char **argv)
{
    const char *format = NULL, *pos[2] = { NULL, NULL };
    int npos = 0, size = 0;
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            printf("usage: ctrain export --format keras|torch RUN.h5 OUT.h5\n\n"
                   "Writes a ctrain checkpoint's or weights file's weights as\n"
                   "  keras  a Keras 2 save_weights file (load it with model.load_weights)\n"
                   "  torch  a PyTorch state_dict: one dataset per tensor, named as in the module\n"
                   "         (load with {k: torch.from_numpy(f[k][()]) for k in f})\n"
                   "options:\n"
                   "  --size N   small-cnn from a weights file with non-square images: the image size\n"
                   "The name mapping per model is in docs/checkpoints.md.\n");
            return 0;
        }
        if (ct_args_str(&a, "--format", &format, &st) || ct_args_int(&a, "--size", &size, 2, 1 << 20, &st)) continue;
        if (argv[a.i][0] == '-' || npos == 2) return usage_error("export", npos == 2 ? "too many arguments" : "unknown option");
        pos[npos++] = argv[a.i++];
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain export: %s\n", ct_last_error()); return 2; }
    if (!format || (strcmp(format, "keras") && strcmp(format, "torch"))) return usage_error("export", "--format keras or --format torch is required");
    if (npos != 2) return usage_error("export", "give the input RUN.h5 and the output OUT.h5");
    static tensor_set s;
    src_info info = { 0 };
    s.n = 0;
    st = read_ctrain(&s, &info, pos[0], size);
    if (st == CT_OK) st = write_export(format, &s, &info, pos[0], pos[1]);
    ts_free(&s);
    if (st != CT_OK) { fprintf(stderr, "ctrain export: %s\n", ct_last_error()); return 1; }
    printf("%s weights of %s written to %s\n", !strcmp(format, "keras") ? "Keras" : "PyTorch", info.model, pos[1]);
    return 0;
}

/* ---- import ---- */

/* Reads a Keras save_weights file: the weights of each layer in layer_names order. */
static ct_status read_keras(tensor_set *s, keras_layer *L, int *nl, int max, const char *path)
{
    hid_t f;
    CT_TRY(ct_h5_open(&f, path));
    static char names[64][128];
    int n = 0;
    ct_status st = attr_read_strings(f, "/", "layer_names", names, 64, &n);
    if (st != CT_OK) st = ct_fail(CT_EFORMAT, "%s: not a Keras weights file (no layer_names attribute)", path);
    *nl = 0;
    for (int i = 0; i < n && st == CT_OK; i++) {
        keras_layer l;
        memset(&l, 0, sizeof l);
        snprintf(l.name, sizeof l.name, "%.*s", (int)sizeof l.name - 1, names[i]);
        st = attr_read_strings(f, names[i], "weight_names", l.w, 6, &l.nw);
        if (st != CT_OK) { st = ct_fail(st, "%s: %s", path, ct_last_error()); break; }
        if (l.nw == 0) continue;   /* a layer without weights (Input, Flatten, ...) */
        if (*nl >= max) { st = ct_fail(CT_EFORMAT, "%s: more layers with weights than the model has", path); break; }
        for (int j = 0; j < l.nw && st == CT_OK; j++) {
            char name[300];
            snprintf(name, sizeof name, "%s/%s", l.name, l.w[j]);
            l.idx[j] = s->n;
            st = ts_read(s, f, path, name, name);
        }
        L[(*nl)++] = l;
    }
    ct_h5_close(f);
    return st;
}

static tensor *kw(tensor_set *s, const keras_layer *l, int j) { return &s->t[l->idx[j]]; }

/* Fill parameter `name` of ps from src (same number of elements; shape checked by the caller's layout). */
static ct_status put(ct_params *ps, const char *name, const float *src, size_t n, const char *path, const char *from)
{
    int h = ct_params_find(ps, name);
    if (h < 0) return ct_fail(CT_EINVAL, "internal: no parameter %s", name);
    if (ps->p[h].numel != n)
        return ct_fail(CT_EFORMAT, "%s: %s has %zu values but the model's %s needs %zu; check the sizes", path, from, n, name, ps->p[h].numel);
    memcpy(ct_params_data(ps, h), src, n * sizeof(float));
    return CT_OK;
}

int cmd_import(int argc, char **argv)
{
    const char *format = NULL, *model = NULL, *pos[2] = { NULL, NULL };
    int npos = 0, mels = 0, hidden = 0, layers = 0, embed = 0, size = 0;
    ct_args a = { argc, 0, argv };
    ct_status st = CT_OK;
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) {
            printf("usage: ctrain import --format keras|torch IN.h5 OUT.h5 --model siamese-lstm|small-cnn [sizes]\n\n"
                   "Reads a Keras 2 save_weights file or a PyTorch state_dict written as HDF5 (one dataset\n"
                   "per tensor, as `ctrain export --format torch` writes) into a ctrain weights file.\n"
                   "The sizes are read from the weights' shapes; given, they are checked:\n"
                   "  siamese-lstm: --mels N --hidden N --layers N --embed N\n"
                   "  small-cnn:    --size N (image height and width; default: square, from the dense layer)\n"
                   "The name mapping per model is in docs/checkpoints.md.\n");
            return 0;
        }
        if (ct_args_str(&a, "--format", &format, &st) || ct_args_str(&a, "--model", &model, &st)
            || ct_args_int(&a, "--mels", &mels, 1, 1 << 20, &st) || ct_args_int(&a, "--hidden", &hidden, 1, 1 << 20, &st)
            || ct_args_int(&a, "--layers", &layers, 1, LSTM_MAX_LAYERS, &st) || ct_args_int(&a, "--embed", &embed, 1, 1 << 20, &st)
            || ct_args_int(&a, "--size", &size, 2, 1 << 20, &st))
            continue;
        if (argv[a.i][0] == '-' || npos == 2) return usage_error("import", npos == 2 ? "too many arguments" : "unknown option");
        pos[npos++] = argv[a.i++];
    }
    if (st != CT_OK) { fprintf(stderr, "ctrain import: %s\n", ct_last_error()); return 2; }
    if (!format || (strcmp(format, "keras") && strcmp(format, "torch"))) return usage_error("import", "--format keras or --format torch is required");
    if (!model || (strcmp(model, "siamese-lstm") && strcmp(model, "small-cnn"))) return usage_error("import", "--model siamese-lstm or --model small-cnn is required");
    if (npos != 2) return usage_error("import", "give the input IN.h5 and the output OUT.h5");
    const char *path = pos[0];
    static tensor_set s;
    s.n = 0;
    keras_layer L[LSTM_MAX_LAYERS + 4];
    int nl = 0, is_keras = !strcmp(format, "keras"), siam = !strcmp(model, "siamese-lstm");
    siamese_lstm sm;
    static seq_cnn cm;   /* the small-cnn (large: the layer table) */
    memset(&sm, 0, sizeof sm);
    memset(&cm, 0, sizeof cm);
    int built = 0;
    /* 1. read the file into tensors with ctrain's names and layouts */
    static tensor_set c;
    c.n = 0;
    if (is_keras) {
        st = read_keras(&s, L, &nl, LSTM_MAX_LAYERS + 4, path);
        int want_min = siam ? 2 : 3;
        if (st == CT_OK && (nl < want_min || (!siam && nl != 3)))
            st = ct_fail(CT_EFORMAT, "%s: %d layers with weights; a %s has %s", path, nl, model, siam ? "LSTM layer(s) then a Dense" : "Conv2D, BatchNormalization, Dense");
        for (int i = 0; st == CT_OK && siam && i < nl - 1; i++) {
            if (L[i].nw != 3 || kw(&s, &L[i], 0)->ndim != 2 || kw(&s, &L[i], 1)->ndim != 2) { st = ct_fail(CT_EFORMAT, "%s: layer %s is not an LSTM (kernel, recurrent_kernel, bias)", path, L[i].name); break; }
            tensor *k = kw(&s, &L[i], 0), *r = kw(&s, &L[i], 1), *b = kw(&s, &L[i], 2);
            size_t I = k->dims[0], G = k->dims[1], H = r->dims[0];
            char nm[64];
            size_t d2[2] = { G, I }, dh[2] = { G, H }, d1[1] = { G };
            snprintf(nm, sizeof nm, "lstm_1/w_ih_l%d", i); tensor *t = ts_add(&c, nm, 2, d2); if (!t) { st = CT_ENOMEM; break; } transpose2(t->data, k->data, I, G);
            snprintf(nm, sizeof nm, "lstm_1/w_hh_l%d", i); t = ts_add(&c, nm, 2, dh); if (!t) { st = CT_ENOMEM; break; } transpose2(t->data, r->data, H, G);
            snprintf(nm, sizeof nm, "lstm_1/b_ih_l%d", i); t = ts_add(&c, nm, 1, d1); if (!t) { st = CT_ENOMEM; break; } memcpy(t->data, b->data, numel(b) * sizeof(float));
            snprintf(nm, sizeof nm, "lstm_1/b_hh_l%d", i); t = ts_add(&c, nm, 1, d1); if (!t) { st = CT_ENOMEM; break; }   /* zero */
            if (numel(b) != G || r->dims[1] != G) st = ct_fail(CT_EFORMAT, "%s: layer %s has inconsistent shapes", path, L[i].name);
        }
        if (st == CT_OK && !siam) {
            if (L[0].nw != 2 || kw(&s, &L[0], 0)->ndim != 4) st = ct_fail(CT_EFORMAT, "%s: layer %s is not a Conv2D", path, L[0].name);
            else if (L[1].nw != 4) st = ct_fail(CT_EFORMAT, "%s: layer %s is not a BatchNormalization (gamma, beta, moving_mean, moving_variance)", path, L[1].name);
            if (st == CT_OK) {
                tensor *k = kw(&s, &L[0], 0);
                size_t od[4] = { k->dims[3], k->dims[2], k->dims[0], k->dims[1] };
                tensor *t = ts_add(&c, "conv2d_1/w", 4, od);
                if (!t) st = CT_ENOMEM;
                else conv_to_keras(t->data, k->data, od[0], od[1], od[2], od[3], 1);
                const char *bn[5] = { "conv2d_1/b", "batchnorm_1/gamma", "batchnorm_1/beta", "batchnorm_1/running_mean", "batchnorm_1/running_var" };
                for (int j = 0; j < 5 && st == CT_OK; j++) {
                    tensor *src = j == 0 ? kw(&s, &L[0], 1) : kw(&s, &L[1], j - 1);
                    if (!(t = ts_add(&c, bn[j], 1, src->dims))) st = CT_ENOMEM;
                    else memcpy(t->data, src->data, numel(src) * sizeof(float));
                }
            }
        }
        if (st == CT_OK) {
            keras_layer *d = &L[nl - 1];
            tensor *k = d->nw == 2 ? kw(&s, d, 0) : NULL, *b = d->nw == 2 ? kw(&s, d, 1) : NULL;
            if (!k || k->ndim != 2) st = ct_fail(CT_EFORMAT, "%s: layer %s is not a Dense (kernel, bias)", path, d->name);
            else {
                size_t od[2] = { k->dims[1], k->dims[0] };
                tensor *t = ts_add(&c, "dense_1/w", 2, od), *tb = t ? ts_add(&c, "dense_1/b", 1, b->dims) : NULL;
                if (!t || !tb) st = CT_ENOMEM;
                else {
                    memcpy(tb->data, b->data, numel(b) * sizeof(float));
                    if (siam) transpose2(t->data, k->data, k->dims[0], k->dims[1]);
                    else {
                        size_t F = ts_find(&c, "conv2d_1/w")->dims[0], flat = k->dims[0];
                        size_t ph = size ? (size_t)size / 2 : (size_t)lround(sqrt((double)flat / (double)F)), pw = ph;
                        if (ph * pw * F != flat) st = ct_fail(CT_EFORMAT, "%s: the Dense kernel has %zu inputs, not %zu x %zu x %zu: pass --size", path, flat, F, ph, pw);
                        else dense_to_keras(t->data, k->data, od[0], F, ph, pw, 1);
                    }
                }
            }
        }
    } else {
        hid_t f;
        st = ct_h5_open(&f, path);
        if (st == CT_OK) {
            char tn[160], cn[160];
            if (siam) {
                for (int k = 0; k < LSTM_MAX_LAYERS && st == CT_OK; k++) {
                    snprintf(tn, sizeof tn, "lstm.weight_ih_l%d", k);
                    if (!ct_h5_exists(f, tn)) { if (k == 0) st = ct_fail(CT_EFORMAT, "%s: no dataset lstm.weight_ih_l0: not a siamese-lstm state_dict", path); break; }
                    const char *p[4] = { "w_ih", "w_hh", "b_ih", "b_hh" };
                    for (int j = 0; j < 4 && st == CT_OK; j++) {
                        snprintf(cn, sizeof cn, "lstm_1/%s_l%d", p[j], k);
                        torch_name(tn, sizeof tn, cn);
                        st = ts_read(&c, f, path, tn, cn);
                    }
                }
            } else {
                const char *p[6] = { "conv2d_1/w", "conv2d_1/b", "batchnorm_1/gamma", "batchnorm_1/beta", "batchnorm_1/running_mean", "batchnorm_1/running_var" };
                for (int j = 0; j < 6 && st == CT_OK; j++) { torch_name(tn, sizeof tn, p[j]); st = ts_read(&c, f, path, tn, p[j]); }
            }
            if (st == CT_OK) st = ts_read(&c, f, path, "dense.weight", "dense_1/w");
            if (st == CT_OK) st = ts_read(&c, f, path, "dense.bias", "dense_1/b");
            ct_h5_close(f);
        }
    }
    /* 2. the model's layout, from the shapes (and the size flags, which must agree) */
    if (st == CT_OK && siam) {
        siamese_lstm_config mc = ct_siamese_lstm_defaults();
        tensor *w0 = need(&c, "lstm_1/w_ih_l0", 2, path), *hh = need(&c, "lstm_1/w_hh_l0", 2, path), *dw = need(&c, "dense_1/w", 2, path);
        int nlayers = 0;
        char nm[64];
        for (; nlayers < LSTM_MAX_LAYERS; nlayers++) { snprintf(nm, sizeof nm, "lstm_1/w_ih_l%d", nlayers); if (!ts_find(&c, nm)) break; }
        if (!w0 || !hh || !dw) st = CT_EFORMAT;
        else {
            mc.n_mels = (int)w0->dims[1]; mc.hidden = (int)hh->dims[1]; mc.layers = nlayers; mc.embed = (int)dw->dims[0];
            if ((mels && mels != mc.n_mels) || (hidden && hidden != mc.hidden) || (layers && layers != mc.layers) || (embed && embed != mc.embed))
                st = ct_fail(CT_EINVAL, "%s holds a siamese-lstm with --mels %d --hidden %d --layers %d --embed %d, not the sizes given",
                             path, mc.n_mels, mc.hidden, mc.layers, mc.embed);
        }
        if (st == CT_OK) { st = ct_siamese_lstm_build(&sm, &mc); built = 1; }
    } else if (st == CT_OK) {
        small_cnn_config mc = ct_small_cnn_defaults();
        tensor *cw = need(&c, "conv2d_1/w", 4, path), *dw = need(&c, "dense_1/w", 2, path);
        if (!cw || !dw) st = CT_EFORMAT;
        else {
            mc.filters = (int)cw->dims[0]; mc.channels = (int)cw->dims[1]; mc.kernel = (int)cw->dims[2]; mc.classes = (int)dw->dims[0];
            int ph = (int)lround(sqrt((double)dw->dims[1] / (double)mc.filters));
            mc.height = mc.width = size ? size : 2 * ph;
            st = ct_small_cnn_build(&cm, &mc);
            built = 1;
        }
    }
    /* 3. every parameter, with its shape checked */
    ct_params *ps = siam ? &sm.params : &cm.params, *bs = siam ? NULL : &cm.buffers;
    for (int i = 0; st == CT_OK && i < c.n; i++) {
        tensor *t = &c.t[i];
        ct_params *dst = strstr(t->name, "running_") ? bs : ps;
        int h = ct_params_find(dst, t->name);
        if (h < 0) { st = ct_fail(CT_EFORMAT, "%s: %s does not belong to a %s of these sizes", path, t->name, model); break; }
        int same = t->ndim == dst->p[h].ndim;
        for (int k = 0; same && k < t->ndim; k++) same = t->dims[k] == (size_t)dst->p[h].shape[k];
        if (!same) { st = ct_fail(CT_EFORMAT, "%s: %s has another shape than the model's (check the sizes)", path, t->name); break; }
        st = put(dst, t->name, t->data, numel(t), path, t->name);
    }
    int filled = 0;
    for (int i = 0; st == CT_OK && i < ps->n; i++) filled += ts_find(&c, ps->p[i].name) != NULL;
    if (st == CT_OK && filled != ps->n) st = ct_fail(CT_EFORMAT, "%s: %d of the model's %d parameters are missing", path, ps->n - filled, ps->n);
    if (st == CT_OK) st = ct_weights_save(pos[1], model, ps, bs);
    if (built && siam) ct_siamese_lstm_free(&sm);
    if (built && !siam) ct_seq_cnn_free(&cm);
    ts_free(&s);
    ts_free(&c);
    if (st != CT_OK) { fprintf(stderr, "ctrain import: %s\n", ct_last_error()); return 1; }
    printf("%s weights of a %s written to %s\n", is_keras ? "Keras" : "PyTorch", model, pos[1]);
    return 0;
}
