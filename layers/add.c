/* add.c - out = a + b and its backward pass, d a += d out, d b += d out (see add.h).
 * Both loops run over whole feature maps, so the workers share them (core/threads.h). */
#include "core/hot.h"
#include "core/threads.h"
#include "layers/add.h"

typedef struct { float *y; const float *a, *b; } add_job;

CT_HOT
static void add_range(void *ctx, size_t lo, size_t hi)
{
    const add_job *j = ctx;
    float *y = j->y;   /* locals, so that the loop vectorises */
    const float *a = j->a, *b = j->b;
    for (size_t i = lo; i < hi; i++) y[i] = a[i] + b[i];
}

/* out, a, b [n]: out = a + b */
void ct_add_forward(float *out, const float *a, const float *b, size_t n)
{
    add_job j = { out, a, b };
    ct_parallel_range(n, n, add_range, &j);
}

/* da, db, dout [n]: da += dout, db += dout (each skipped when NULL) */
void ct_add_backward(float *da, float *db, const float *dout, size_t n)
{
    if (da) { add_job j = { da, da, dout }; ct_parallel_range(n, n, add_range, &j); }
    if (db) { add_job j = { db, db, dout }; ct_parallel_range(n, n, add_range, &j); }
}
