/* params.c - the flat parameter store and the weight initialisers (see params.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/params.h"
#include "core/threads.h"

#define CT_ALIGN_FLOATS 16   /* 64 bytes */

void ct_params_init(ct_params *ps) { memset(ps, 0, sizeof *ps); }

void ct_params_free(ct_params *ps)
{
    free(ps->p);
    free(ps->data);
    free(ps->grad);
    memset(ps, 0, sizeof *ps);
}

int ct_params_add(ct_params *ps, const char *name, int ndim, const int *shape, ct_init init)
{
    CT_ASSERT(ps->data == NULL);   /* all parameters are registered before the buffers exist */
    if (ndim < 1 || ndim > CT_DIMS_MAX) { ct_fail(CT_EINVAL, "parameter %s: %d dimensions (1..%d allowed)", name, ndim, CT_DIMS_MAX); return -1; }
    if (strlen(name) >= CT_NAME_MAX) { ct_fail(CT_EINVAL, "parameter name too long (max %d): %s", CT_NAME_MAX - 1, name); return -1; }
    if (ct_params_find(ps, name) >= 0) { ct_fail(CT_EINVAL, "parameter %s registered twice; give each layer a distinct name", name); return -1; }
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0) { ct_fail(CT_EINVAL, "parameter %s: dimension %d is %d, must be positive", name, i, shape[i]); return -1; }
        numel = numel > CT_PARAMS_MAX ? numel : numel * (size_t)shape[i];   /* stops growing once too large */
    }
    if (ps->numel + numel > CT_PARAMS_MAX) {
        ct_fail(CT_EINVAL, "parameter %s makes the model too large: more than %zu parameters (%zu MiB) in all; "
                "use smaller layers", name, CT_PARAMS_MAX, CT_PARAMS_MAX * sizeof(float) >> 20);
        return -1;
    }
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 16;
        ct_param *np = realloc(ps->p, (size_t)cap * sizeof *np);
        if (!np) { ct_fail(CT_ENOMEM, "out of memory registering parameter %s", name); return -1; }
        ps->p = np; ps->cap = cap;
    }
    ct_param *p = &ps->p[ps->n];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    p->numel = numel;
    p->offset = ps->numel;
    p->init = init;
    ps->numel += (numel + CT_ALIGN_FLOATS - 1) / CT_ALIGN_FLOATS * CT_ALIGN_FLOATS;
    return ps->n++;
}

ct_status ct_params_alloc(ct_params *ps)
{
    CT_ASSERT(ps->data == NULL);
    size_t bytes = (ps->numel ? ps->numel : 1) * sizeof(float);
    ps->data = ct_alloc_aligned(bytes, "parameters");
    if (!ps->data) return CT_ENOMEM;
    ps->grad = ct_alloc_aligned(bytes, "gradients");
    if (!ps->grad) { free(ps->data); ps->data = NULL; return CT_ENOMEM; }
    return CT_OK;
}

float *ct_params_data(const ct_params *ps, int h) { CT_ASSERT(h >= 0 && h < ps->n && ps->data); return ps->data + ps->p[h].offset; }
float *ct_params_grad(const ct_params *ps, int h) { CT_ASSERT(h >= 0 && h < ps->n && ps->grad); return ps->grad + ps->p[h].offset; }

int ct_params_find(const ct_params *ps, const char *name)
{
    for (int i = 0; i < ps->n; i++)
        if (strcmp(ps->p[i].name, name) == 0) return i;
    return -1;
}

/* one contiguous range of the gradient buffer per worker (a few MB for the CNN: on many
 * cores one thread's memset would be a serial part of every step) */
static void zero_range(void *ctx, size_t lo, size_t hi) { memset((float *)ctx + lo, 0, (hi - lo) * sizeof(float)); }

void ct_params_zero_grad(ct_params *ps) { ct_parallel_range(ps->numel, ps->numel, zero_range, ps->grad); }

size_t ct_params_count(const ct_params *ps)
{
    size_t n = 0;
    for (int i = 0; i < ps->n; i++) n += ps->p[i].numel;
    return n;
}

void ct_params_initialize(ct_params *ps, ct_rng *r)
{
    for (int i = 0; i < ps->n; i++)
        ct_init_fill(ps->data + ps->p[i].offset, ps->p[i].ndim, ps->p[i].shape, ps->p[i].init, r);
}

ct_init ct_init_zeros(void)              { return (ct_init){ CT_INIT_ZEROS, 0, 0, 0 }; }
ct_init ct_init_const(float v)           { return (ct_init){ CT_INIT_CONST, v, 0, 0 }; }
ct_init ct_init_glorot(int fi, int fo)   { return (ct_init){ CT_INIT_GLOROT_UNIFORM, 0, fi, fo }; }
ct_init ct_init_he(int fi)               { return (ct_init){ CT_INIT_HE_UNIFORM, 0, fi, 0 }; }
ct_init ct_init_uniform(float limit)     { return (ct_init){ CT_INIT_UNIFORM, limit, 0, 0 }; }
ct_init ct_init_orthogonal(float gain)   { return (ct_init){ CT_INIT_ORTHOGONAL, gain, 0, 0 }; }
ct_init ct_init_forget_bias(float v)     { return (ct_init){ CT_INIT_FORGET_BIAS, v, 0, 0 }; }

/* Orthogonal init for an R x C matrix (row-major): draw a Gaussian matrix and
 * orthonormalise its columns (if R >= C) or rows (if R < C) with modified
 * Gram-Schmidt in double precision. This is what Keras's Orthogonal does through
 * a QR decomposition; QR's Q and Gram-Schmidt's basis are the same up to signs. */
static void init_orthogonal(float *x, int R, int C, float gain, ct_rng *r)
{
    int tall = R >= C;
    int nvec = tall ? C : R, len = tall ? R : C;   /* orthonormalise nvec vectors of length len */
    double *v = malloc((size_t)nvec * (size_t)len * sizeof *v);
    CT_ASSERT(v != NULL);
    for (size_t i = 0; i < (size_t)nvec * (size_t)len; i++) v[i] = ct_rng_normal(r);
    for (int k = 0; k < nvec; k++) {
        double *vk = v + (size_t)k * len;
        for (int j = 0; j < k; j++) {
            double *vj = v + (size_t)j * len, dot = 0;
            for (int i = 0; i < len; i++) dot += vk[i] * vj[i];
            for (int i = 0; i < len; i++) vk[i] -= dot * vj[i];
        }
        double nrm = 0;
        for (int i = 0; i < len; i++) nrm += vk[i] * vk[i];
        nrm = sqrt(nrm);
        for (int i = 0; i < len; i++) vk[i] /= nrm;
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            x[(size_t)i * C + j] = (float)(gain * (tall ? v[(size_t)j * len + i] : v[(size_t)i * len + j]));
    free(v);
}

void ct_init_fill(float *x, int ndim, const int *shape, ct_init init, ct_rng *r)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    float limit = 0;
    switch (init.kind) {
    case CT_INIT_ZEROS:
        memset(x, 0, n * sizeof *x);
        return;
    case CT_INIT_CONST:
        for (size_t i = 0; i < n; i++) x[i] = init.value;
        return;
    case CT_INIT_FORGET_BIAS: {
        CT_ASSERT(n % 4 == 0);
        size_t H = n / 4;
        for (size_t i = 0; i < n; i++) x[i] = (i >= H && i < 2 * H) ? init.value : 0.0f;
        return;
    }
    case CT_INIT_ORTHOGONAL:
        init_orthogonal(x, shape[0], (int)(n / (size_t)shape[0]), init.value, r);
        return;
    case CT_INIT_GLOROT_UNIFORM: limit = sqrtf(6.0f / (float)(init.fan_in + init.fan_out)); break;
    case CT_INIT_HE_UNIFORM:     limit = sqrtf(6.0f / (float)init.fan_in); break;
    case CT_INIT_UNIFORM:        limit = init.value; break;
    }
    for (size_t i = 0; i < n; i++) x[i] = (2.0f * ct_rng_uniform(r) - 1.0f) * limit;
}
