/* checkpoint.c - exact-resume checkpoints in one HDF5 file (see checkpoint.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#include "train/checkpoint.h"
#include "io/h5.h"
#include "io/h5atomic.h"
#include "io/weights.h"


/* "<path>: <last error>" unless the message already starts with the path. */
static ct_status fail_in(ct_status st, const char *path)
{
    if (!strncmp(ct_last_error(), path, strlen(path))) return st;
    return ct_fail(st, "%s: %s", path, ct_last_error());
}

/* ---- checked, checksummed datasets and attributes ---- */

/* Chunked (chunks of at most ~1M elements) with the Fletcher-32 filter, so a
 * flipped byte in the data is reported when it is read. Empty datasets are
 * contiguous (HDF5 cannot chunk them). */
static hid_t make_dcpl(int ndim, const hsize_t *dims)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t n = 1, chunk[CT_H5_DIMS_MAX];
    for (int i = 0; i < ndim; i++) { n *= dims[i]; chunk[i] = dims[i]; }
    if (n == 0 || ndim == 0) return dcpl;
    for (int i = 0; i < ndim; i++) {          /* shrink the leading dimensions until a chunk is <= 2^20 elements */
        while (chunk[i] > 1) {
            hsize_t c = 1;
            for (int k = 0; k < ndim; k++) c *= chunk[k];
            if (c <= ((hsize_t)1 << 20)) break;
            chunk[i] = (chunk[i] + 1) / 2;
        }
    }
    H5Pset_chunk(dcpl, ndim, chunk);
    H5Pset_fletcher32(dcpl);
    return dcpl;
}

static ct_status write_ds(hid_t f, const char *name, hid_t ftype, hid_t mtype, const void *src, int ndim, const size_t *dims)
{
    CT_ASSERT(ndim >= 1 && ndim <= CT_H5_DIMS_MAX);
    hsize_t hd[CT_H5_DIMS_MAX];
    for (int i = 0; i < ndim; i++) hd[i] = dims[i];
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = make_dcpl(ndim, hd);
    hid_t s = H5Screate_simple(ndim, hd, NULL);
    hid_t d = H5Dcreate2(f, name, ftype, s, lcpl, dcpl, H5P_DEFAULT);
    herr_t e = d < 0 ? -1 : H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, src);
    if (d >= 0 && H5Dclose(d) < 0) e = -1;
    H5Sclose(s);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    if (e < 0) return ct_fail(CT_EIO, "cannot write dataset %s (disk full, file size limit or read-only?)", name);
    return CT_OK;
}

static ct_status read_ds(hid_t f, const char *name, hid_t mtype, void *dst, size_t n)
{
    int nd; size_t dims[CT_H5_DIMS_MAX];
    if (ct_h5_shape(f, name, &nd, dims) != CT_OK) return ct_fail(CT_EFORMAT, "dataset %s is missing or unreadable", name);
    size_t count = 1;
    for (int i = 0; i < nd; i++) count *= dims[i];
    if (count != n) return ct_fail(CT_EFORMAT, "dataset %s holds %zu values, expected %zu", name, count, n);
    if (n == 0) return CT_OK;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d >= 0 && ct_h5_check_stored(d, name, n) != CT_OK) { H5Dclose(d); return CT_EFORMAT; }   /* its message names the dataset */
    herr_t e = d < 0 ? -1 : H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst);
    if (d >= 0) H5Dclose(d);
    if (e < 0) return ct_fail(CT_EFORMAT, "dataset %s could not be read: checksum mismatch or corrupt file", name);
    return CT_OK;
}

ct_status ct_ckpt_write_f32(hid_t f, const char *name, const float *src, int ndim, const size_t *dims)
{ return write_ds(f, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, src, ndim, dims); }
ct_status ct_ckpt_read_f32(hid_t f, const char *name, float *dst, size_t n) { return read_ds(f, name, H5T_NATIVE_FLOAT, dst, n); }
ct_status ct_ckpt_write_i32(hid_t f, const char *name, const int *src, int ndim, const size_t *dims)
{ return write_ds(f, name, H5T_STD_I32LE, H5T_NATIVE_INT, src, ndim, dims); }
ct_status ct_ckpt_read_i32(hid_t f, const char *name, int *dst, size_t n) { return read_ds(f, name, H5T_NATIVE_INT, dst, n); }

ct_status ct_ckpt_write_rng(hid_t f, const char *stream, const ct_rng *r)
{
    char name[128];
    snprintf(name, sizeof name, "rng/%s", stream);
    uint64_t v[2] = { r->state, r->inc };
    size_t dims[1] = { 2 };
    return write_ds(f, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, v, 1, dims);
}

ct_status ct_ckpt_read_rng(hid_t f, const char *stream, ct_rng *r)
{
    char name[128];
    snprintf(name, sizeof name, "rng/%s", stream);
    uint64_t v[2];
    CT_TRY(read_ds(f, name, H5T_NATIVE_UINT64, v, 2));
    if ((v[1] & 1) == 0) return ct_fail(CT_EFORMAT, "%s: not a PCG32 state (its increment must be odd)", name);
    r->state = v[0];
    r->inc = v[1];
    return CT_OK;
}

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


static ct_status write_params(hid_t f, const char *group, const ct_params *ps, const float *data)
{
    char name[256];
    for (int i = 0; ps && i < ps->n; i++) {
        const ct_param *p = &ps->p[i];
        size_t dims[CT_DIMS_MAX];
        for (int k = 0; k < p->ndim; k++) dims[k] = (size_t)p->shape[k];
        snprintf(name, sizeof name, "%s/%s", group, p->name);
        CT_TRY(ct_ckpt_write_f32(f, name, data + p->offset, p->ndim, dims));
    }
    return CT_OK;
}

static ct_status write_all(hid_t f, const ct_ckpt *c)
{
    const ct_ckpt_meta *m = c->meta;
    CT_TRY(ct_h5_attr_write_str(f, "/", "format", CT_CKPT_FORMAT));
    CT_TRY(attr_int(f, "/", "format_version", CT_CKPT_VERSION));
    CT_TRY(ct_h5_attr_write_str(f, "/", "model", m->model));
    CT_TRY(ct_kv_write_h5(f, "/", &m->model_cfg));
    hid_t g = H5Gcreate2(f, "training", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return ct_fail(CT_EIO, "cannot create group /training");
    H5Gclose(g);
    CT_TRY(ct_kv_write_h5(f, "training", &m->train_cfg));

    CT_TRY(write_params(f, "model", c->params, c->params->data));
    if (c->state && c->state->n) CT_TRY(write_params(f, "state", c->state, c->state->data));

    size_t n = c->params->numel;
    const ct_optim *o = c->opt;
    float *zeros = NULL;
    if (!o->m || !o->v) {
        zeros = ct_calloc(n + 1, sizeof(float), "optimizer state");
        if (!zeros) return CT_ENOMEM;
    }
    ct_status st = ct_ckpt_write_f32(f, "optimizer/m", o->m ? o->m : zeros, 1, &n);
    if (st == CT_OK) st = ct_ckpt_write_f32(f, "optimizer/v", o->v ? o->v : zeros, 1, &n);
    free(zeros);
    CT_TRY(st);
    CT_TRY(ct_h5_attr_write_str(f, "optimizer", "kind", ct_optim_name(o->cfg.kind)));
    CT_TRY(attr_int(f, "optimizer", "step", o->step));

    g = H5Gcreate2(f, "progress", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return ct_fail(CT_EIO, "cannot create group /progress");
    H5Gclose(g);
    const ct_ckpt_progress *p = &c->prog;
    CT_TRY(attr_int(f, "progress", "epoch", p->epoch));
    CT_TRY(attr_int(f, "progress", "step", p->step));
    CT_TRY(attr_int(f, "progress", "schedule_t", p->epoch));
    CT_TRY(attr_num(f, "progress", "lr", p->lr));
    CT_TRY(attr_num(f, "progress", "sum_loss", p->sum_loss));
    CT_TRY(attr_num(f, "progress", "sum_correct", p->sum_correct));
    CT_TRY(attr_int(f, "progress", "seen", p->seen));
    CT_TRY(attr_int(f, "progress", "skipped", p->skipped));
    CT_TRY(ct_h5_attr_write_str(f, "progress", "monitor", ct_monitor_name((ct_monitor)p->monitor)));
    CT_TRY(attr_num(f, "progress", "best", p->best));
    CT_TRY(attr_int(f, "progress", "best_epoch", p->best_epoch));
    CT_TRY(attr_int(f, "progress", "wait", p->wait));

    double *col = ct_malloc(((size_t)p->epoch + 1) * sizeof(double), "history");
    if (!col) return CT_ENOMEM;
    for (int k = 0; k < CT_EPOCH_FIELDS && st == CT_OK; k++) {
        char name[64];
        for (int e = 0; e < p->epoch; e++) col[e] = ct_epoch_get(&c->hist[e], &ct_epoch_fields[k]);
        snprintf(name, sizeof name, "history/%s", ct_epoch_fields[k].name);
        size_t dims[1] = { (size_t)p->epoch };
        st = write_ds(f, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, col, 1, dims);
    }
    free(col);
    CT_TRY(st);

    if (c->task && c->task->save_state) CT_TRY(c->task->save_state(c->task->ctx, f));
    if (c->rngs) {
        if (!ct_h5_exists(f, "rng/init")) CT_TRY(ct_ckpt_write_rng(f, "init", &c->rngs->init));
        if (!ct_h5_exists(f, "rng/dropout")) CT_TRY(ct_ckpt_write_rng(f, "dropout", &c->rngs->dropout));
        if (!ct_h5_exists(f, "rng/data")) CT_TRY(ct_ckpt_write_rng(f, "data", &c->rngs->data));
    }
    if (c->best_params) {
        CT_TRY(write_params(f, "best/model", c->params, c->best_params));
        if (c->state && c->state->n && c->best_state) CT_TRY(write_params(f, "best/state", c->state, c->best_state));
    }
    return CT_OK;
}

ct_status ct_ckpt_save(const char *path, const ct_ckpt *c)
{
    hid_t f = ct_h5_mem_create();
    if (f < 0) return CT_ENOMEM;
    return ct_h5_mem_commit(f, write_all(f, c), path, "checkpoint");
}

/* ---- reading ---- */

/* Opens a checkpoint and checks format and version. */
static ct_status open_checked(const char *path, hid_t *fp)
{
    hid_t f;
    CT_TRY(ct_h5_open(&f, path));
    ct_kv root = { 0 };
    ct_status st = ct_kv_read_h5(f, "/", &root);
    const char *fmt = NULL;
    int version = 0;
    if (st != CT_OK) {
        st = ct_fail(CT_EFORMAT, "%s: not a readable checkpoint (truncated or corrupt): %s", path, ct_last_error());
    }
    else if (!ct_kv_str(&root, "format", &fmt))
        st = ct_fail(CT_EFORMAT, "%s: not a ctrain checkpoint (no 'format' attribute)", path);
    else if (!strcmp(fmt, "ctrain-weights"))
        st = ct_fail(CT_EFORMAT, "%s is a weights file, not a checkpoint: resume from a file written by --checkpoint", path);
    else if (strcmp(fmt, CT_CKPT_FORMAT) != 0)
        st = ct_fail(CT_EFORMAT, "%s: format '%s' is not a ctrain checkpoint", path, fmt);
    else if (!ct_kv_int(&root, "format_version", &version) || version < 1)
        st = ct_fail(CT_EFORMAT, "%s: missing or invalid format_version", path);
    else if (version > CT_CKPT_VERSION)
        st = ct_fail(CT_EFORMAT, "%s was written by a newer ctrain (checkpoint format_version %d; this ctrain reads up to %d): "
                     "upgrade ctrain to resume it", path, version, CT_CKPT_VERSION);
    if (st != CT_OK) { ct_h5_close(f); return st; }
    *fp = f;
    return CT_OK;
}

ct_status ct_ckpt_read_meta(const char *path, ct_ckpt_meta *meta)
{
    hid_t f;
    CT_TRY(open_checked(path, &f));
    memset(meta, 0, sizeof *meta);
    ct_status st = ct_kv_read_h5(f, "/", &meta->model_cfg);
    const char *model = NULL;
    if (st == CT_OK && !ct_kv_str(&meta->model_cfg, "model", &model)) st = ct_fail(CT_EFORMAT, "%s: the 'model' attribute is missing", path);
    if (st == CT_OK) snprintf(meta->model, sizeof meta->model, "%.63s", model);
    if (st == CT_OK) st = ct_kv_read_h5(f, "training", &meta->train_cfg);
    ct_h5_close(f);
    if (st != CT_OK) return fail_in(st, path);
    return CT_OK;
}

static ct_status read_params(hid_t f, const char *path, const char *group, const ct_params *ps, float *dst)
{
    char name[256];
    CT_TRY(ct_params_check_h5(f, path, group, ps, "resume with the sizes it was trained with (or leave the size flags out)"));
    for (int i = 0; i < ps->n; i++) {
        snprintf(name, sizeof name, "%s/%s", group, ps->p[i].name);
        ct_status st = ct_ckpt_read_f32(f, name, dst + ps->p[i].offset, ps->p[i].numel);
        if (st != CT_OK) return fail_in(st, path);
    }
    return CT_OK;
}

static ct_status attr_get(const ct_kv *kv, const char *path, const char *key, double *v)
{
    const ct_kv_entry *e = ct_kv_get(kv, key);
    if (!e || e->type == CT_KV_STR) return ct_fail(CT_EFORMAT, "%s: /progress attribute %s is missing", path, key);
    *v = e->type == CT_KV_INT ? (double)e->i : e->num;
    return CT_OK;
}

ct_status ct_ckpt_load(const char *path, ct_ckpt *c)
{
    hid_t f;
    CT_TRY(open_checked(path, &f));
    ct_kv root = { 0 }, prog = { 0 }, optk = { 0 };
    ct_status st = ct_kv_read_h5(f, "/", &root);
    const char *model = NULL;
    if (st == CT_OK && !ct_kv_str(&root, "model", &model)) st = ct_fail(CT_EFORMAT, "%s: the 'model' attribute is missing", path);
    if (st == CT_OK && strcmp(model, c->meta->model) != 0)
        st = ct_fail(CT_EINVAL, "%s is a checkpoint of model %s, not %s: resume it with `ctrain train %s --resume %s`",
                     path, model, c->meta->model, model, path);
    size_t np = c->params->numel, ns = c->state ? c->state->numel : 0;
    int nh = 0;
    float *p2 = NULL, *s2 = NULL, *m2 = NULL, *v2 = NULL, *bp = NULL, *bs = NULL;
    double *col = NULL;
    ct_epoch_log *h2 = NULL;
    ct_ckpt_progress pr = { 0 };
    long step = 0;
    int have_best = 0;
    if (st == CT_OK) {
        p2 = ct_malloc(np * sizeof(float) + 1, "checkpoint");
        s2 = ct_malloc(ns * sizeof(float) + 1, "checkpoint");
        m2 = ct_malloc(np * sizeof(float) + 1, "checkpoint");
        v2 = ct_malloc(np * sizeof(float) + 1, "checkpoint");
        if (!p2 || !s2 || !m2 || !v2) st = CT_ENOMEM;
    }
    if (st == CT_OK) {   /* padding and anything not in the file keep their current values */
        memcpy(p2, c->params->data, np * sizeof(float));
        if (ns) memcpy(s2, c->state->data, ns * sizeof(float));
        st = read_params(f, path, "model", c->params, p2);
    }
    if (st == CT_OK && ns && c->state->n) st = read_params(f, path, "state", c->state, s2);
    if (st == CT_OK) {
        int nd; size_t dims[CT_H5_DIMS_MAX];
        if (ct_h5_shape(f, "optimizer/m", &nd, dims) != CT_OK || nd != 1 || dims[0] != np)
            st = ct_fail(CT_EFORMAT, "%s: /optimizer/m is missing or does not match this model's %zu-float layout", path, np);
    }
    if (st == CT_OK) st = ct_ckpt_read_f32(f, "optimizer/m", m2, np);
    if (st == CT_OK) st = ct_ckpt_read_f32(f, "optimizer/v", v2, np);
    if (st == CT_OK) st = ct_kv_read_h5(f, "optimizer", &optk);
    const char *kind = NULL;
    if (st == CT_OK && (!ct_kv_str(&optk, "kind", &kind) || !ct_kv_long(&optk, "step", &step)))
        st = ct_fail(CT_EFORMAT, "%s: /optimizer lacks its kind or step", path);
    if (st == CT_OK && strcmp(kind, ct_optim_name(c->opt->cfg.kind)) != 0)
        st = ct_fail(CT_EINVAL, "%s: the optimizer state is %s's but this run uses %s; leave --optimizer out to continue with %s",
                     path, kind, ct_optim_name(c->opt->cfg.kind), kind);
    if (st == CT_OK) st = ct_kv_read_h5(f, "progress", &prog);
    if (st == CT_OK) {
        double v[11];
        const char *keys[11] = { "epoch", "step", "lr", "sum_loss", "sum_correct", "seen", "skipped", "best", "best_epoch", "wait", "schedule_t" };
        for (int k = 0; k < 11 && st == CT_OK; k++) st = attr_get(&prog, path, keys[k], &v[k]);
        /* counters first checked as numbers: converting one out of range would be undefined */
        static const int counter[] = { 0, 1, 5, 6, 8, 9 };
        for (int k = 0; k < 6 && st == CT_OK; k++) {
            double x = v[counter[k]], lo = counter[k] == 8 ? -1 : 0;
            if (!(x >= lo && x <= 1e15) || (x > (double)INT_MAX && (counter[k] == 0 || counter[k] >= 8)))
                st = ct_fail(CT_EFORMAT, "%s: /progress attribute %s = %g is not a possible count; the file is damaged", path,
                             keys[counter[k]], x);
        }
        if (st == CT_OK) {
            pr.epoch = (int)v[0]; pr.step = (long)v[1]; pr.lr = v[2]; pr.sum_loss = v[3]; pr.sum_correct = v[4];
            pr.seen = (long)v[5]; pr.skipped = (long)v[6]; pr.best = v[7]; pr.best_epoch = (int)v[8]; pr.wait = (int)v[9];
            const char *mon = NULL;
            ct_monitor mm = CT_MONITOR_VAL_LOSS;
            if (ct_kv_str(&prog, "monitor", &mon) && ct_monitor_parse(&mm, mon) == CT_OK) pr.monitor = (int)mm;
            if (pr.epoch < 0 || pr.step < 0 || pr.epoch > 10000000) st = ct_fail(CT_EFORMAT, "%s: /progress holds an impossible position", path);
        }
        nh = pr.epoch;
    }
    if (st == CT_OK && nh > c->hist_cap)
        st = ct_fail(CT_EINVAL, "%s already holds %d finished epochs, more than the %d of this run: raise --epochs", path, nh, c->hist_cap);
    if (st == CT_OK) {
        h2 = ct_calloc((size_t)nh + 1, sizeof *h2, "history");
        col = ct_malloc(((size_t)nh + 1) * sizeof(double), "history");
        if (!h2 || !col) st = CT_ENOMEM;
    }
    for (int k = 0; k < CT_EPOCH_FIELDS && st == CT_OK; k++) {
        char name[64];
        snprintf(name, sizeof name, "history/%s", ct_epoch_fields[k].name);
        int optional = ct_epoch_fields[k].flags & CT_EPOCH_OPTIONAL;
        if (ct_h5_exists(f, name)) st = read_ds(f, name, H5T_NATIVE_DOUBLE, col, (size_t)nh);
        else for (int e = 0; e < nh; e++) col[e] = optional ? -1 : NAN;   /* a field newer than the file */
        for (int e = 0; st == CT_OK && e < nh; e++) *ct_epoch_at(&h2[e], &ct_epoch_fields[k]) = col[e];
    }
    if (st == CT_OK && c->best_params && ct_h5_exists(f, "best/model")) {
        bp = ct_malloc(np * sizeof(float) + 1, "checkpoint");
        bs = ct_malloc(ns * sizeof(float) + 1, "checkpoint");
        if (!bp || !bs) st = CT_ENOMEM;
        if (st == CT_OK) {
            memcpy(bp, p2, np * sizeof(float));
            memcpy(bs, s2, ns * sizeof(float));
            st = read_params(f, path, "best/model", c->params, bp);
        }
        if (st == CT_OK && ns && c->state->n && c->best_state) st = read_params(f, path, "best/state", c->state, bs);
        have_best = st == CT_OK;
    }
    if (st != CT_OK) st = fail_in(st, path);
    /* the task's state last: it checks everything before it changes anything, and
     * nothing after it can fail, so the load is all or nothing */
    if (st == CT_OK && c->task && c->task->load_state) {
        st = c->task->load_state(c->task->ctx, f);
        if (st != CT_OK) st = fail_in(st, path);
    }
    if (st == CT_OK) {
        memcpy(c->params->data, p2, np * sizeof(float));
        if (ns) memcpy(c->state->data, s2, ns * sizeof(float));
        if (c->opt->m) memcpy(c->opt->m, m2, np * sizeof(float));
        if (c->opt->v) memcpy(c->opt->v, v2, np * sizeof(float));
        c->opt->step = step;
        c->prog = pr;
        if (nh) memcpy(c->hist, h2, (size_t)nh * sizeof *h2);
        if (have_best) {
            memcpy(c->best_params, bp, np * sizeof(float));
            if (c->best_state && ns) memcpy(c->best_state, bs, ns * sizeof(float));
        }
    }
    free(p2); free(s2); free(m2); free(v2); free(bp); free(bs); free(col); free(h2);
    ct_h5_close(f);
    return st;
}

/* ---- verification: read every dataset ---- */
typedef struct { ct_status st; const char *path; } verify_ctx;
static herr_t verify_visit(hid_t loc, const char *name, const H5O_info_t *info, void *op)
{
    verify_ctx *v = op;
    if (info->type != H5O_TYPE_DATASET) return 0;
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) { v->st = ct_fail(CT_EFORMAT, "%s: dataset %s cannot be opened", v->path, name); return -1; }
    hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    hid_t mt = t < 0 ? -1 : H5Tget_native_type(t, H5T_DIR_DEFAULT);
    hssize_t n = H5Sget_simple_extent_npoints(s);
    size_t sz = mt < 0 ? 0 : H5Tget_size(mt);
    herr_t e = 0;
    if (n < 0 || mt < 0 || sz == 0) e = -1;
    else if (n > 0) {
        /* the values it declares must be in the file before they are given memory */
        if (ct_h5_check_stored(d, name, (unsigned long long)n) != CT_OK) {
            v->st = ct_fail(CT_EFORMAT, "%s: %s", v->path, ct_last_error());
            H5Tclose(mt); H5Sclose(s); H5Tclose(t); H5Dclose(d);
            return -1;
        }
        void *buf = (size_t)n <= SIZE_MAX / sz ? malloc((size_t)n * sz) : NULL;
        e = buf ? H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) : -1;
        if (buf && e >= 0 && H5Tdetect_class(mt, H5T_VLEN) > 0) H5Dvlen_reclaim(mt, s, H5P_DEFAULT, buf);
        else if (buf && e >= 0 && H5Tis_variable_str(mt) > 0) H5Dvlen_reclaim(mt, s, H5P_DEFAULT, buf);
        free(buf);
    }
    if (mt >= 0) H5Tclose(mt);
    H5Sclose(s); H5Tclose(t); H5Dclose(d);
    if (e < 0) { v->st = ct_fail(CT_EFORMAT, "%s: dataset %s cannot be read (checksum mismatch or corrupt)", v->path, name); return -1; }
    return 0;
}

ct_status ct_ckpt_verify(const char *path, int *epoch, long *step)
{
    hid_t f;
    CT_TRY(open_checked(path, &f));
    ct_kv prog = { 0 };
    ct_status st = ct_kv_read_h5(f, "progress", &prog);
    double e = 0, s = 0;
    if (st == CT_OK) st = attr_get(&prog, path, "epoch", &e);
    if (st == CT_OK) st = attr_get(&prog, path, "step", &s);
    if (st == CT_OK) {
        verify_ctx v = { CT_OK, path };
        herr_t r = H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, verify_visit, &v, H5O_INFO_BASIC);
        if (v.st != CT_OK) st = v.st;
        else if (r < 0) st = ct_fail(CT_EFORMAT, "%s: the file's structure cannot be read (corrupt)", path);
    }
    ct_h5_close(f);
    if (st == CT_OK && !(e >= 0 && e <= 10000000 && s >= 0 && s <= 1e15))
        st = ct_fail(CT_EFORMAT, "%s: /progress holds an impossible position (epoch %g, step %g); the file is damaged", path, e, s);
    if (st != CT_OK) st = fail_in(st, path);
    if (st == CT_OK) {
        if (epoch) *epoch = (int)e;
        if (step) *step = (long)s;
    }
    return st;
}
