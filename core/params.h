/* params.h - the parameter store: every trainable number of a model in ONE
 * contiguous float buffer, the gradients in a second buffer with the same layout.
 *
 * A model registers each parameter once, by name and shape, while it is being
 * built (ct_params_add returns a handle); ct_params_alloc then makes the two
 * buffers in one go, and each parameter is a named view (offset + shape) into
 * them. Because the layout is shared:
 *   - the optimizer step is one flat loop over `numel` floats (optimizer state
 *     uses the same layout, see layers/optim.h),
 *   - zeroing gradients is one memset,
 *   - a checkpoint is a walk over ps->p[0..n) writing named datasets.
 *
 *   buffer:  | dense_1/w ........ | dense_1/b | pad | lstm_1/w_ih ...
 *             ^ offset 0            ^ offset 4096      ^ each view starts on a
 *                                                        64-byte boundary
 *
 * Padding floats between views are always zero in both buffers, so the flat
 * optimizer loop leaves them at zero.
 *
 * Non-trainable state that must still be saved (batchnorm running statistics)
 * lives in a second ct_params of the model (its `grad` is allocated but unused).
 */
#ifndef CT_PARAMS_H
#define CT_PARAMS_H
#include <stddef.h>
#include "core/error.h"
#include "core/rng.h"

#define CT_NAME_MAX 64
#define CT_DIMS_MAX 4
/* The most floats one store may hold (512 MiB each for values and gradients): a
 * hundred times the largest model here, and a bound on what a size read from a
 * file (a checkpoint's hidden, a spec's conv65536k9) can make ctrain allocate. */
#define CT_PARAMS_MAX ((size_t)1 << 27)

typedef enum {
    CT_INIT_ZEROS,
    CT_INIT_CONST,           /* every element = value */
    CT_INIT_GLOROT_UNIFORM,  /* U(-l, l), l = sqrt(6 / (fan_in + fan_out)) (Keras default) */
    CT_INIT_HE_UNIFORM,      /* U(-l, l), l = sqrt(6 / fan_in) */
    CT_INIT_UNIFORM,         /* U(-value, value) */
    CT_INIT_ORTHOGONAL,      /* shape[0] x (numel/shape[0]) matrix with orthonormal columns
                                (or rows, whichever is fewer), times `value` (gain) */
    CT_INIT_FORGET_BIAS      /* LSTM bias [4H] in gate order i,f,g,o: f = value, others 0 */
} ct_init_kind;

typedef struct {
    ct_init_kind kind;
    float value;
    int fan_in, fan_out;
} ct_init;

typedef struct {
    char name[CT_NAME_MAX];   /* "layer/param", e.g. "lstm_1/w_ih" */
    int ndim;
    int shape[CT_DIMS_MAX];   /* row-major, PyTorch's layout for the same parameter */
    size_t offset;            /* first float of this view in data/grad */
    size_t numel;
    ct_init init;
} ct_param;

typedef struct {
    ct_param *p;     /* [n] the named views, in registration order */
    int n, cap;
    size_t numel;    /* floats in each buffer, padding included */
    float *data;     /* [numel] values, NULL until ct_params_alloc */
    float *grad;     /* [numel] gradients, same layout */
} ct_params;

void      ct_params_init(ct_params *ps);
void      ct_params_free(ct_params *ps);
/* Register a parameter; returns its handle (index into ps->p), or -1 with
 * ct_last_error set (duplicate name, bad shape, more than CT_PARAMS_MAX floats in
 * all, out of memory). */
int       ct_params_add(ct_params *ps, const char *name, int ndim, const int *shape, ct_init init);
ct_status ct_params_alloc(ct_params *ps);            /* both buffers, zeroed */
float    *ct_params_data(const ct_params *ps, int h);
float    *ct_params_grad(const ct_params *ps, int h);
int       ct_params_find(const ct_params *ps, const char *name);   /* -1 if absent */
/* Fill every parameter from its init spec, in registration order, drawing from r. */
void      ct_params_initialize(ct_params *ps, ct_rng *r);
void      ct_params_zero_grad(ct_params *ps);
size_t    ct_params_count(const ct_params *ps);      /* trainable numbers, padding excluded */

/* Initialisers, usable on any float array (also by tests). */
ct_init   ct_init_zeros(void);
ct_init   ct_init_const(float v);
ct_init   ct_init_glorot(int fan_in, int fan_out);
ct_init   ct_init_he(int fan_in);
ct_init   ct_init_uniform(float limit);
ct_init   ct_init_orthogonal(float gain);
ct_init   ct_init_forget_bias(float v);
void      ct_init_fill(float *x, int ndim, const int *shape, ct_init init, ct_rng *r);

#endif
