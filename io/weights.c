/* weights.c - atomic HDF5 weight files (see weights.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/weights.h"
#include "io/h5.h"
#include "io/h5atomic.h"

static ct_status write_group(hid_t f, const char *group, const ct_params *ps)
{
    char name[256];
    for (int i = 0; ps && i < ps->n; i++) {
        const ct_param *p = &ps->p[i];
        size_t dims[CT_DIMS_MAX];
        for (int k = 0; k < p->ndim; k++) dims[k] = (size_t)p->shape[k];
        snprintf(name, sizeof name, "%s/%s", group, p->name);
        CT_TRY(ct_h5_write_f32(f, name, ps->data + p->offset, p->ndim, dims));
    }
    return CT_OK;
}

ct_status ct_weights_save_attrs(const char *path, const char *model, const ct_params *params, const ct_params *state,
                               const char *const *str_attrs)
{
    hid_t f = ct_h5_mem_create();   /* built in memory, then written and renamed in one go */
    if (f < 0) return CT_ENOMEM;
    ct_status st = ct_h5_attr_write_str(f, "/", "format", "ctrain-weights");
    if (st == CT_OK) st = ct_h5_attr_write_double(f, "/", "format_version", 1);
    if (st == CT_OK) st = ct_h5_attr_write_str(f, "/", "model", model);
    for (int k = 0; st == CT_OK && str_attrs && str_attrs[k]; k += 2)
        st = ct_h5_attr_write_str(f, "/", str_attrs[k], str_attrs[k + 1]);
    if (st == CT_OK) st = write_group(f, "model", params);
    if (st == CT_OK && state && state->n) st = write_group(f, "state", state);
    return ct_h5_mem_commit(f, st, path, "weights file");
}

ct_status ct_weights_save_kv(const char *path, const char *model, const ct_params *params, const ct_params *state,
                             const ct_kv *desc, const char *const *str_attrs)
{
    return ct_weights_save_speakers(path, model, params, state, desc, str_attrs, NULL, 0);
}

ct_status ct_weights_read_speakers(const char *path, char ***speakers, int *n)
{
    hid_t f;
    *speakers = NULL;
    *n = 0;
    CT_TRY(ct_h5_open(&f, path));
    ct_status st = ct_h5_exists(f, "train_speakers") ? ct_h5_read_names(f, "train_speakers", speakers, n) : CT_OK;
    ct_h5_close(f);
    return st == CT_OK ? CT_OK : ct_fail(st, "%s: %s", path, ct_last_error());
}

ct_status ct_weights_save_speakers(const char *path, const char *model, const ct_params *params, const ct_params *state,
                                   const ct_kv *desc, const char *const *str_attrs, const char *const *speakers, int n_speakers)
{
    hid_t f = ct_h5_mem_create();   /* built in memory, then written and renamed in one go */
    if (f < 0) return CT_ENOMEM;
    ct_kv d = { 0 };
    for (int i = 0; desc && i < desc->n; i++) {
        const char *key = desc->e[i].key;
        int skip = !strcmp(key, "format") || !strcmp(key, "format_version") || !strcmp(key, "model");   /* the file's own */
        for (int k = 0; !skip && str_attrs && str_attrs[k]; k += 2) skip = !strcmp(key, str_attrs[k]);  /* written whole below */
        if (!skip) d.e[d.n++] = desc->e[i];
    }
    ct_status st = ct_h5_attr_write_str(f, "/", "format", "ctrain-weights");
    if (st == CT_OK) st = ct_h5_attr_write_double(f, "/", "format_version", 1);
    if (st == CT_OK) st = ct_h5_attr_write_str(f, "/", "model", model);
    if (st == CT_OK) st = ct_kv_write_h5(f, "/", &d);
    for (int k = 0; st == CT_OK && str_attrs && str_attrs[k]; k += 2)
        st = ct_h5_attr_write_str(f, "/", str_attrs[k], str_attrs[k + 1]);
    if (st == CT_OK) st = write_group(f, "model", params);
    if (st == CT_OK && state && state->n) st = write_group(f, "state", state);
    if (st == CT_OK && speakers) st = ct_h5_write_names(f, "train_speakers", speakers, n_speakers);
    return ct_h5_mem_commit(f, st, path, "weights file");
}

ct_status ct_weights_save(const char *path, const char *model, const ct_params *params, const ct_params *state)
{
    return ct_weights_save_attrs(path, model, params, state, NULL);
}

ct_status ct_params_check_h5(hid_t f, const char *path, const char *group, const ct_params *ps, const char *fix)
{
    char name[256];
    for (int i = 0; ps && i < ps->n; i++) {
        const ct_param *p = &ps->p[i];
        int nd; size_t dims[CT_H5_DIMS_MAX];
        snprintf(name, sizeof name, "%s/%s", group, p->name);
        if (ct_h5_shape(f, name, &nd, dims) != CT_OK)
            return ct_fail(CT_EFORMAT, "%s: parameter %s is missing: the file holds another model or another configuration", path, name);
        int same = nd == p->ndim;
        for (int k = 0; same && k < nd; k++) same = dims[k] == (size_t)p->shape[k];
        if (!same) {
            char got[96] = "", want[96] = "";
            for (int k = 0; k < nd; k++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%zu", k ? ", " : "", dims[k]);
            for (int k = 0; k < p->ndim; k++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", k ? ", " : "", p->shape[k]);
            return ct_fail(CT_EFORMAT, "%s: parameter %s is [%s] in the file but [%s] in this model; %s", path, name, got, want, fix);
        }
    }
    return CT_OK;
}

static ct_status read_group(hid_t f, const char *path, const char *group, ct_params *ps)
{
    char name[256];
    CT_TRY(ct_params_check_h5(f, path, group, ps, "pass the sizes the model was trained with"));
    for (int i = 0; ps && i < ps->n; i++) {
        snprintf(name, sizeof name, "%s/%s", group, ps->p[i].name);
        ct_status st = ct_h5_read_f32(f, name, ps->data + ps->p[i].offset, ps->p[i].numel);
        if (st != CT_OK) return ct_fail(st, "%s: %s", path, ct_last_error());   /* h5.c's message names the dataset only */
    }
    return CT_OK;
}

ct_status ct_weights_load(const char *path, const char *model, ct_params *params, ct_params *state)
{
    hid_t f;
    CT_TRY(ct_h5_open(&f, path));
    /* a file that names its model (weights files and checkpoints do) must name this one */
    char stored[64];
    if (H5Aexists_by_name(f, "/", "model", H5P_DEFAULT) > 0 && ct_h5_attr_read_str(f, "/", "model", stored, sizeof stored) == CT_OK
        && strcmp(stored, model) != 0) {
        ct_h5_close(f);
        return ct_fail(CT_EFORMAT, "%s holds the weights of model %s, not %s; pass a file written by `ctrain train %s`",
                       path, stored, model, model);
    }
    /* read into copies first, so a failure half way leaves the model's weights untouched */
    ct_params p2 = *params, s2 = state ? *state : (ct_params){ 0 };
    ct_status st = CT_OK;
    p2.data = ct_malloc(params->numel * sizeof(float) + 1, "weights");
    s2.data = state ? ct_malloc(state->numel * sizeof(float) + 1, "weights") : NULL;
    if (!p2.data || (state && !s2.data)) st = CT_ENOMEM;
    if (st == CT_OK) {
        memcpy(p2.data, params->data, params->numel * sizeof(float));
        if (state) memcpy(s2.data, state->data, state->numel * sizeof(float));
        st = read_group(f, path, "model", &p2);
    }
    if (st == CT_OK && state && state->n) st = read_group(f, path, "state", &s2);
    if (st == CT_OK) {
        memcpy(params->data, p2.data, params->numel * sizeof(float));
        if (state) memcpy(state->data, s2.data, state->numel * sizeof(float));
    }
    free(p2.data);
    free(s2.data);
    ct_h5_close(f);
    return st;
}
