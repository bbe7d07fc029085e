/* export.c - ctrain weights to and from Keras 2 save_weights files and PyTorch
 * state_dicts written as HDF5, driven by each model's layout (see export.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "catalog/export.h"
#include "io/h5.h"
#include "io/h5atomic.h"
#include "io/weights.h"

/* ---- layouts ---- */

ct_map *ct_layout_add(ct_layout *l, const char *layer, const char *kind, const char *name, const char *param, ct_map_op op)
{
    if (l->n >= CT_LAYOUT_MAX) { ct_fail(CT_EINVAL, "the model has more than %d tensors to export", CT_LAYOUT_MAX); return NULL; }
    ct_map *m = &l->m[l->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->layer, sizeof m->layer, "%s", layer ? layer : "");
    m->kind = kind;
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->param[0], sizeof m->param[0], "%s", param ? param : "");
    m->op = op;
    return m;
}

static const char *torch_module(const char *layer, const char *const (*names)[2])
{
    for (int i = 0; names && names[i][0]; i++) if (!strcmp(names[i][0], layer)) return names[i][1];
    return layer;
}

/* One parameter of layer l: Keras weight `kw` or PyTorch attribute `tw`, from ctrain's "<layer>/<p>". */
static ct_map *add_param(ct_layout *out, ct_format format, const seq_layer *l, const char *keras_layer, const char *kind,
                         const char *module, const char *kw, const char *tw, const char *p, ct_map_op keras_op)
{
    char name[128], param[64] = "";
    if (p) snprintf(param, sizeof param, "%.40s/%.20s", l->name, p);
    if (format == CT_FORMAT_KERAS) return ct_layout_add(out, keras_layer, kind, kw, param, keras_op);
    snprintf(name, sizeof name, "%s.%s", module, tw);
    return ct_layout_add(out, NULL, NULL, name, p ? param : NULL, keras_op == CT_MAP_COUNTER ? CT_MAP_COUNTER : CT_MAP_COPY);
}

/* Keras's rearrangement of each kind of weight: [map][0] on feature maps or a vector of
 * its own, [map][1] on a flattened map (whose order Keras, channels-last, changes). */
static const ct_map_op KERAS_OP[][2] = {
    [SEQ_EXPORT_COPY]    = { CT_MAP_COPY, CT_MAP_COPY },
    [SEQ_EXPORT_CONV]    = { CT_MAP_CONV, CT_MAP_CONV },
    [SEQ_EXPORT_DENSE]   = { CT_MAP_T, CT_MAP_FLAT_T },
    [SEQ_EXPORT_FEATURE] = { CT_MAP_COPY, CT_MAP_FLAT },
    [SEQ_EXPORT_COUNTER] = { CT_MAP_COUNTER, CT_MAP_COUNTER },
};

/* Every layer's weights as its kind's row describes them (models/seq_cnn.h: seq_export). */
ct_status ct_layout_seq_cnn(const seq_cnn *m, ct_format format, const char *const (*torch_names)[2], ct_layout *out)
{
    /* The flat vector a dense or batchnorm layer reads is the channel-major flatten of the
     * maps [fc, fh, fw] (flatten; gaph: [C, 1, W]); Keras's is channels-last: reorder. */
    int flat = 0, fc = 0, fh = 0, fw = 0;
    for (int i = 0; i < m->n; i++) {
        const seq_layer *l = &m->layer[i];
        const seq_export *x = &ct_seq_kinds[l->kind].layout;
        const char *module = torch_module(l->name, torch_names);
        if (x->keeps && flat && fh * fw > 1 && format == CT_FORMAT_KERAS)
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": Keras cannot hold this residual block: it keeps a flattened map, whose "
                           "order Keras's Flatten changes; export it with --format torch", i + 1, l->text);
        char kl[64];
        snprintf(kl, sizeof kl, "%.40s_%d", x->keras_prefix ? x->keras_prefix : "", l->number);
        for (int k = 0; k < (int)(sizeof x->w / sizeof x->w[0]) && x->w[k].torch; k++) {
            const seq_export_weight *wt = &x->w[k];
            if (!wt->keras && format == CT_FORMAT_KERAS) continue;   /* PyTorch's alone */
            ct_map_op op = KERAS_OP[wt->map][flat && l->flat_in];
            ct_map *e = add_param(out, format, l, kl, wt->keras ? x->keras_class : NULL, module, wt->keras, wt->torch, wt->param, op);
            if (!e) return CT_EINVAL;
            e->buffer = wt->buffer;
            e->c = fc; e->h = fh; e->w = fw;
        }
        if (x->view == SEQ_VIEW_FLATTEN) { flat = 1; fc = l->in_c; fh = l->in_h; fw = l->in_w; }
        else if (x->view == SEQ_VIEW_FLATTEN_W) { flat = 1; fc = l->in_c; fh = 1; fw = l->in_w; }
        else if (x->view == SEQ_VIEW_END) flat = 0;
    }
    return CT_OK;
}

/* ---- the tensors of a layout entry ---- */

/* The file's dimensions of entry e whose ctrain parameter has shape[ndim]; returns the file's ndim. */
static int file_dims(const ct_map *e, int ndim, const int *shape, size_t *dims)
{
    switch (e->op) {
    case CT_MAP_COUNTER: return 0;
    case CT_MAP_T: case CT_MAP_FLAT_T: dims[0] = (size_t)shape[1]; dims[1] = (size_t)shape[0]; return 2;
    case CT_MAP_CONV:
        dims[0] = (size_t)shape[2]; dims[1] = (size_t)shape[3]; dims[2] = (size_t)shape[1]; dims[3] = (size_t)shape[0];
        return 4;
    default:
        for (int k = 0; k < ndim; k++) dims[k] = (size_t)shape[k];
        return ndim;
    }
}

/* Flat index in Keras's channels-last order of ctrain's channel-major index (f, y, x) of [c, h, w]. */
static size_t keras_flat(const ct_map *e, size_t f, size_t y, size_t x) { return (y * (size_t)e->w + x) * (size_t)e->c + f; }

/* ctrain -> file (back = 0) or file -> ctrain (back = 1) for one entry; p: the parameter's
 * values (p2: the second one of CT_MAP_SUM), t: the file's tensor. */
static void convert(const ct_map *e, const int *shape, float *p, float *p2, float *t, size_t numel, int back)
{
    size_t C = (size_t)e->c, H = (size_t)e->h, W = (size_t)e->w;
    switch (e->op) {
    case CT_MAP_COPY:
        if (back) memcpy(p, t, numel * sizeof *p); else memcpy(t, p, numel * sizeof *p);
        break;
    case CT_MAP_SUM:
        for (size_t i = 0; i < numel; i++) {
            if (back) { p[i] = t[i]; p2[i] = 0; }
            else t[i] = p[i] + p2[i];
        }
        break;
    case CT_MAP_T: {
        size_t R = (size_t)shape[0], K = (size_t)shape[1];   /* p [R, K], t [K, R] */
        for (size_t r = 0; r < R; r++)
            for (size_t c = 0; c < K; c++) {
                if (back) p[r * K + c] = t[c * R + r]; else t[c * R + r] = p[r * K + c];
            }
        break;
    }
    case CT_MAP_CONV: {
        size_t O = (size_t)shape[0], I = (size_t)shape[1], KH = (size_t)shape[2], KW = (size_t)shape[3];
        for (size_t o = 0; o < O; o++)
            for (size_t i = 0; i < I; i++)
                for (size_t y = 0; y < KH; y++)
                    for (size_t x = 0; x < KW; x++) {
                        size_t a = ((o * I + i) * KH + y) * KW + x, b = ((y * KW + x) * I + i) * O + o;
                        if (back) p[a] = t[b]; else t[b] = p[a];
                    }
        break;
    }
    case CT_MAP_FLAT_T: {
        size_t U = (size_t)shape[0], F = (size_t)shape[1];   /* p [U, C*H*W], t [H*W*C, U] */
        for (size_t u = 0; u < U; u++)
            for (size_t f = 0; f < C; f++)
                for (size_t y = 0; y < H; y++)
                    for (size_t x = 0; x < W; x++) {
                        size_t a = u * F + (f * H + y) * W + x, b = keras_flat(e, f, y, x) * U + u;
                        if (back) p[a] = t[b]; else t[b] = p[a];
                    }
        break;
    }
    case CT_MAP_FLAT:
        for (size_t f = 0; f < C; f++)
            for (size_t y = 0; y < H; y++)
                for (size_t x = 0; x < W; x++) {
                    size_t a = (f * H + y) * W + x, b = keras_flat(e, f, y, x);
                    if (back) p[a] = t[b]; else t[b] = p[a];
                }
        break;
    case CT_MAP_COUNTER: break;
    }
}

/* The parameter(s) of entry e in the network: values, shape. */
typedef struct { ct_param *p; float *v, *v2; } param_ref;

static ct_status find_param(const ct_map *e, ct_params *ps, ct_params *bs, param_ref *r)
{
    ct_params *s = e->buffer ? bs : ps;
    int h = s ? ct_params_find(s, e->param[0]) : -1;
    if (h < 0) return ct_fail(CT_EINVAL, "internal: the layout names %s, which the model does not have", e->param[0]);
    r->p = &s->p[h];
    r->v = ct_params_data(s, h);
    r->v2 = NULL;
    if (e->op == CT_MAP_SUM) {
        int h2 = ct_params_find(s, e->param[1]);
        if (h2 < 0) return ct_fail(CT_EINVAL, "internal: the layout names %s, which the model does not have", e->param[1]);
        r->v2 = ct_params_data(s, h2);
    }
    if ((e->op == CT_MAP_FLAT_T && (size_t)e->c * e->h * e->w != (size_t)r->p->shape[1])
        || (e->op == CT_MAP_FLAT && (size_t)e->c * e->h * e->w != r->p->numel))
        return ct_fail(CT_EINVAL, "internal: %s does not read a flatten of [%d, %d, %d]", e->param[0], e->c, e->h, e->w);
    return CT_OK;
}

static void dims_text(char *buf, size_t cap, int nd, const size_t *dims)
{
    buf[0] = '\0';
    for (int k = 0; k < nd; k++) snprintf(buf + strlen(buf), cap - strlen(buf), "%s%zu", k ? ", " : "", dims[k]);
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

/* A 1-D array of fixed- or variable-length strings; *n = count (0 if empty). */
static ct_status attr_read_strings(hid_t f, const char *obj, const char *attr, char (*v)[128], int max, int *n)
{
    *n = 0;
    if (H5Aexists_by_name(f, obj, attr, H5P_DEFAULT) <= 0) return ct_fail(CT_EFORMAT, "attribute %s of %s is missing", attr, obj);
    hid_t a = H5Aopen_by_name(f, obj, attr, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Aget_type(a), s = H5Aget_space(a);
    hssize_t cnt = H5Sget_simple_extent_npoints(s);
    ct_status st = CT_OK;
    if (cnt <= 0) { /* empty: Keras writes an empty float array for a layer without weights */ }
    else if (H5Tget_class(t) != H5T_STRING) st = ct_fail(CT_EFORMAT, "attribute %s of %s is not a list of strings", attr, obj);
    else if (cnt > max) st = ct_fail(CT_EFORMAT, "attribute %s of %s has %lld entries (at most %d)", attr, obj, (long long)cnt, max);
    else if (H5Tis_variable_str(t) <= 0 && H5Tget_size(t) > CT_KV_STR_MAX)
        st = ct_fail(CT_EFORMAT, "attribute %s of %s holds strings of %zu bytes (at most %d)", attr, obj, H5Tget_size(t), CT_KV_STR_MAX);
    else if (H5Tis_variable_str(t) > 0) {
        char **p = ct_calloc((size_t)cnt, sizeof *p, "attribute");
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        if (!p || H5Aread(a, mt, p) < 0) st = ct_fail(CT_EFORMAT, "attribute %s of %s cannot be read", attr, obj);
        for (hssize_t i = 0; st == CT_OK && i < cnt; i++) snprintf(v[i], 128, "%s", p[i] ? p[i] : "");
        if (p && st == CT_OK) H5Dvlen_reclaim(mt, s, H5P_DEFAULT, p);
        free(p);
        H5Tclose(mt);
    } else {
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

/* ---- the source file ---- */

int ct_src_dims(const ct_src *s, const char *name, size_t dims[4])
{
    int nd;
    size_t d[CT_H5_DIMS_MAX];
    if (!ct_h5_exists(s->f, name) || ct_h5_shape(s->f, name, &nd, d) != CT_OK || nd < 1 || nd > 4) return 0;
    for (int k = 0; k < nd; k++) dims[k] = d[k];
    return nd;
}

/* The Keras layers with weights, in layer_names order. */
static ct_status read_keras_layers(ct_src *s)
{
    static char names[256][128];
    int n = 0;
    if (attr_read_strings(s->f, "/", "layer_names", names, 256, &n) != CT_OK)
        return ct_fail(CT_EFORMAT, "%s: not a Keras weights file (no layer_names attribute); a PyTorch state_dict is --format torch",
                       s->path);
    s->n_layers = 0;
    for (int i = 0; i < n; i++) {
        ct_src_layer l;
        memset(&l, 0, sizeof l);
        snprintf(l.name, sizeof l.name, "%.127s", names[i]);
        if (attr_read_strings(s->f, names[i], "weight_names", l.w, 8, &l.nw) != CT_OK)
            return ct_fail(CT_EFORMAT, "%s: %s", s->path, ct_last_error());
        if (l.nw == 0) continue;   /* a layer without weights (Input, Flatten, ...) */
        if (s->n_layers == CT_SRC_LAYERS) return ct_fail(CT_EFORMAT, "%s: more than %d layers with weights", s->path, CT_SRC_LAYERS);
        for (int j = 0; j < l.nw; j++) {
            char ds[300];
            snprintf(ds, sizeof ds, "%s/%s", l.name, l.w[j]);
            if (!(l.ndim[j] = ct_src_dims(s, ds, l.dims[j])))
                return ct_fail(CT_EFORMAT, "%s: weight %s of layer %s is missing or not 1-4 dimensional", s->path, l.w[j], l.name);
        }
        s->layer[s->n_layers++] = l;
    }
    return CT_OK;
}

/* Opens `path` as `format`; `model` (may be NULL) is the model it should describe. */
static ct_status src_open(ct_src *s, const char *path, ct_format format, const char *model)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    s->format = format;
    s->f = -1;
    CT_TRY(ct_h5_open(&s->f, path));
    ct_status st = ct_kv_read_h5(s->f, "/", &s->kv);
    if (st != CT_OK) return ct_fail(st, "%s: the root attributes cannot be read (%s)", path, ct_last_error());
    const char *m = NULL;
    s->described = model && ct_kv_str(&s->kv, "model", &m) && !strcmp(m, model);
    if (format == CT_FORMAT_KERAS) CT_TRY(read_keras_layers(s));
    return CT_OK;
}

static void src_close(ct_src *s)
{
    if (s->f >= 0) ct_h5_close(s->f);
    s->f = -1;
}

/* ---- the network of a file ---- */

typedef struct {
    const ct_model_descriptor *d;
    void *net;
    int built;
    ct_params *ps, *bs;
    ct_layout layout;
    ct_kv desc;
} file_net;

/* The configuration from the file (and the options given), the network built, its layout. */
static ct_status net_open(file_net *n, const ct_model_descriptor *d, void *cfg, unsigned long long given, const ct_src *src,
                          ct_format format)
{
    memset(n, 0, sizeof *n);
    n->d = d;
    CT_TRY(d->file_config(cfg, src, given));
    CT_TRY(d->finish(cfg, 0));
    n->net = ct_calloc(1, d->net_size, "network");
    if (!n->net) return CT_ENOMEM;
    CT_TRY(d->build(n->net, cfg, NULL));
    n->built = 1;
    n->ps = d->params(n->net);
    n->bs = d->buffers(n->net);
    CT_TRY(d->layout(n->net, format, &n->layout));
    /* the description written with the weights: the network's, then what else the file recorded (features) */
    d->describe(cfg, n->net, &n->desc);
    static const char *const own[] = { "format", "format_version", "model", "backend", "keras_version", NULL };
    for (int i = 0; src->described && i < src->kv.n; i++) {
        const ct_kv_entry *e = &src->kv.e[i];
        int skip = ct_kv_get(&n->desc, e->key) != NULL;
        for (int k = 0; own[k]; k++) skip |= !strcmp(e->key, own[k]);
        if (skip) continue;
        if (e->type == CT_KV_INT) ct_kv_set_int(&n->desc, e->key, e->i);
        else if (e->type == CT_KV_NUM) ct_kv_set_num(&n->desc, e->key, e->num);
        else ct_kv_set_str(&n->desc, e->key, e->str);
    }
    return CT_OK;
}

static void net_close(file_net *n)
{
    if (n->built) n->d->free(n->net);
    free(n->net);
    n->net = NULL;
}

/* ---- writing ---- */

static ct_status write_int64_scalar(hid_t f, const char *name, long long v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(f, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = d < 0 ? -1 : H5Dwrite(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
    return e < 0 ? ct_fail(CT_EIO, "cannot write %s", name) : CT_OK;
}

/* Entry e's tensor at `name` of f. */
static ct_status write_entry(hid_t f, const char *name, const ct_map *e, ct_params *ps, ct_params *bs)
{
    if (e->op == CT_MAP_COUNTER) return write_int64_scalar(f, name, 0);
    param_ref r;
    CT_TRY(find_param(e, ps, bs, &r));
    size_t dims[4];
    int nd = file_dims(e, r.p->ndim, r.p->shape, dims);
    float *t = ct_malloc(r.p->numel * sizeof *t + 1, "tensor");
    if (!t) return CT_ENOMEM;
    convert(e, r.p->shape, r.v, r.v2, t, r.p->numel, 0);
    ct_status st = ct_h5_write_f32(f, name, t, nd, dims);
    free(t);
    return st;
}

/* The description attributes shared by both formats. */
static ct_status write_description(hid_t f, const file_net *n)
{
    CT_TRY(ct_h5_attr_write_str(f, "/", "model", n->d->name));
    CT_TRY(ct_kv_write_h5(f, "/", &n->desc));
    if (n->layout.arch) {   /* whole: a ct_kv string holds 159 characters */
        if (H5Aexists(f, "arch") > 0 && H5Adelete(f, "arch") < 0) return ct_fail(CT_EIO, "cannot replace attribute arch");
        CT_TRY(ct_h5_attr_write_str(f, "/", "arch", n->layout.arch));
    }
    return CT_OK;
}

static ct_status write_torch(hid_t f, const file_net *n)
{
    for (int i = 0; i < n->layout.n; i++) CT_TRY(write_entry(f, n->layout.m[i].name, &n->layout.m[i], n->ps, n->bs));
    CT_TRY(ct_h5_attr_write_str(f, "/", "format", "pytorch-state-dict"));
    return write_description(f, n);
}

static ct_status write_keras(hid_t f, const file_net *n)
{
    static char layers[CT_LAYOUT_MAX][128], weights[8][128];
    int nl = 0;
    const ct_layout *l = &n->layout;
    for (int i = 0; i < l->n; i++)
        if (nl == 0 || strcmp(layers[nl - 1], l->m[i].layer)) snprintf(layers[nl++], 128, "%s", l->m[i].layer);
    CT_TRY(attr_write_strings(f, "/", "layer_names", layers, nl));
    CT_TRY(ct_h5_attr_write_str(f, "/", "backend", "tensorflow"));
    CT_TRY(ct_h5_attr_write_str(f, "/", "keras_version", "2.x"));
    for (int g = 0, i = 0; g < nl; g++) {
        hid_t grp = H5Gcreate2(f, layers[g], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (grp < 0) return ct_fail(CT_EIO, "cannot create group %s", layers[g]);
        H5Gclose(grp);
        int nw = 0;
        for (; i < l->n && !strcmp(l->m[i].layer, layers[g]); i++) {
            if (nw == 8) return ct_fail(CT_EINVAL, "internal: layer %s has more than 8 weights", layers[g]);
            char name[300];
            snprintf(weights[nw++], 128, "%.60s/%.60s", layers[g], l->m[i].name);
            snprintf(name, sizeof name, "%.127s/%.127s", layers[g], weights[nw - 1]);
            CT_TRY(write_entry(f, name, &l->m[i], n->ps, n->bs));
        }
        CT_TRY(attr_write_strings(f, layers[g], "weight_names", weights, nw));
    }
    return write_description(f, n);
}

ct_status ct_export_model(const char *src, const ct_model_descriptor **d)
{
    hid_t f;
    CT_TRY(ct_h5_open(&f, src));
    char model[64] = "";
    ct_status st = CT_OK;
    if (H5Aexists_by_name(f, "/", "model", H5P_DEFAULT) <= 0 || ct_h5_attr_read_str(f, "/", "model", model, sizeof model) != CT_OK)
        st = ct_fail(CT_EINVAL, "%s: not a ctrain checkpoint or weights file (no 'model' attribute)", src);
    ct_h5_close(f);
    CT_TRY(st);
    if (!(*d = ct_model_find(model))) return ct_fail(CT_EINVAL, "%s holds a model '%s' this ctrain does not know", src, model);
    return CT_OK;
}

ct_status ct_model_export(const ct_model_descriptor *d, void *cfg, unsigned long long given, const char *src, ct_format format,
                          const char *dst)
{
    static ct_src s;
    static file_net n;
    memset(&n, 0, sizeof n);
    ct_status st = src_open(&s, src, CT_FORMAT_CTRAIN, d->name);
    if (st == CT_OK) st = net_open(&n, d, cfg, given, &s, format);
    src_close(&s);
    if (st == CT_OK) st = ct_weights_load(src, d->name, n.ps, n.bs);
    if (st == CT_OK) {
        hid_t f = ct_h5_mem_create();
        if (f < 0) st = CT_ENOMEM;
        else st = ct_h5_mem_commit(f, format == CT_FORMAT_KERAS ? write_keras(f, &n) : write_torch(f, &n), dst, "file");
    }
    net_close(&n);
    return st;
}

/* ---- reading ---- */

/* Entry e from the file's tensor `name` (which must have the model's dimensions). */
static ct_status read_entry(const ct_src *s, const char *name, const ct_map *e, ct_params *ps, ct_params *bs, const char *fix)
{
    param_ref r;
    CT_TRY(find_param(e, ps, bs, &r));
    size_t want[4], got[4];
    int nd = file_dims(e, r.p->ndim, r.p->shape, want), gd = ct_src_dims(s, name, got);
    if (!gd) return ct_fail(CT_EFORMAT, "%s: %s is missing; %s", s->path, name, fix);
    int same = gd == nd;
    for (int k = 0; same && k < nd; k++) same = got[k] == want[k];
    if (!same) {
        char a[96], b[96];
        dims_text(a, sizeof a, gd, got);
        dims_text(b, sizeof b, nd, want);
        return ct_fail(CT_EFORMAT, "%s: %s is [%s] in the file but [%s] in this model; %s", s->path, name, a, b, fix);
    }
    float *t = ct_malloc(r.p->numel * sizeof *t + 1, "tensor");
    if (!t) return CT_ENOMEM;
    ct_status st = ct_h5_read_f32(s->f, name, t, r.p->numel);
    if (st != CT_OK) st = ct_fail(st, "%s: %s", s->path, ct_last_error());   /* h5.c's message names the dataset only */
    if (st == CT_OK) convert(e, r.p->shape, r.v, r.v2, t, r.p->numel, 1);
    free(t);
    return st;
}

/* Every dataset of a state_dict file must be one of the layout's. */
typedef struct { const ct_layout *l; char extra[128]; } extra_ctx;

static herr_t find_extra(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    extra_ctx *x = data;
    for (int i = 0; i < x->l->n; i++) if (!strcmp(x->l->m[i].name, name)) return 0;
    snprintf(x->extra, sizeof x->extra, "%s", name);
    return 1;
}

static ct_status read_torch(const ct_src *s, file_net *n, const char *fix)
{
    extra_ctx x = { &n->layout, "" };
    H5Literate(s->f, H5_INDEX_NAME, H5_ITER_INC, NULL, find_extra, &x);
    if (x.extra[0])
        return ct_fail(CT_EFORMAT, "%s: %s is not a tensor of a %s of these sizes; %s", s->path, x.extra, n->d->name, fix);
    for (int i = 0; i < n->layout.n; i++)
        if (n->layout.m[i].op != CT_MAP_COUNTER) CT_TRY(read_entry(s, n->layout.m[i].name, &n->layout.m[i], n->ps, n->bs, fix));
    return CT_OK;
}

/* Keras: the file's layers with weights, in order, are the layout's layers, whatever their names. */
static ct_status read_keras(const ct_src *s, file_net *n, const char *fix)
{
    const ct_layout *l = &n->layout;
    char kinds[512] = "";
    int ng = 0;
    for (int i = 0; i < l->n; i++)
        if (i == 0 || strcmp(l->m[i].layer, l->m[i - 1].layer)) {
            snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s", ng ? ", " : "", l->m[i].kind);
            ng++;
        }
    if (s->n_layers != ng)
        return ct_fail(CT_EFORMAT, "%s: %d layers with weights; a %s of these sizes has %d (%s)", s->path, s->n_layers, n->d->name, ng, kinds);
    for (int g = 0, i = 0; g < ng; g++) {
        const ct_src_layer *fl = &s->layer[g];
        int first = i, nw = 0;
        while (i < l->n && !strcmp(l->m[i].layer, l->m[first].layer)) { i++; nw++; }
        if (fl->nw != nw)
            return ct_fail(CT_EFORMAT, "%s: layer %d (%s) is not a %s like the model's %s: it has %d weights, not %d; %s",
                           s->path, g + 1, fl->name, l->m[first].kind, l->m[first].layer, fl->nw, nw, fix);
        for (int j = 0; j < nw; j++) {
            const ct_map *e = &l->m[first + j];
            param_ref r;
            CT_TRY(find_param(e, n->ps, n->bs, &r));
            size_t want[4];
            int nd = file_dims(e, r.p->ndim, r.p->shape, want), same = fl->ndim[j] == nd;
            for (int k = 0; same && k < nd; k++) same = fl->dims[j][k] == want[k];
            if (!same) {
                char a[96], b[96];
                dims_text(a, sizeof a, fl->ndim[j], fl->dims[j]);
                dims_text(b, sizeof b, nd, want);
                return ct_fail(CT_EFORMAT, "%s: layer %d (%s) is not a %s like the model's %s: its %s is [%s], not [%s]; %s",
                               s->path, g + 1, fl->name, e->kind, e->layer, fl->w[j], a, b, fix);
            }
            char name[300];
            snprintf(name, sizeof name, "%s/%s", fl->name, fl->w[j]);
            CT_TRY(read_entry(s, name, e, n->ps, n->bs, fix));
        }
    }
    return CT_OK;
}

ct_status ct_model_import(const ct_model_descriptor *d, void *cfg, unsigned long long given, ct_format format, const char *src,
                          const char *dst)
{
    static ct_src s;
    static file_net n;
    memset(&n, 0, sizeof n);
    char fix[256];
    snprintf(fix, sizeof fix, "check --model and the sizes (see ctrain import --help)");
    ct_status st = src_open(&s, src, format, d->name);
    if (st == CT_OK) st = net_open(&n, d, cfg, given, &s, format);
    if (st == CT_OK) st = format == CT_FORMAT_KERAS ? read_keras(&s, &n, fix) : read_torch(&s, &n, fix);
    src_close(&s);
    if (st == CT_OK) st = d->save(n.net, dst, &n.desc, NULL, 0);   /* an import: no record of the training speakers */
    net_close(&n);
    return st;
}
