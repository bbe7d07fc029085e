/* activation.c - relu, tanh, sigmoid and their backward passes (see activation.h).
 *
 * Every backward pass is written in terms of the forward OUTPUT y, which is all
 * it needs, so both passes may run in place:
 *   relu:    y = max(x, 0)       dx = dy * [y > 0]
 *   tanh:    y = tanh(x)         dx = dy * (1 - y^2)
 *   sigmoid: y = 1/(1 + e^-x)    dx = dy * y (1 - y)
 */
#include <math.h>
#include "core/hot.h"
#include "core/threads.h"
#include "layers/activation.h"

/* sigmoid without overflow: with e = exp(-|x|) in (0, 1],
 *   x >= 0: 1 / (1 + e)         x < 0: e / (1 + e)  (= e^x / (1 + e^x))
 * so exp never sees a large positive argument. */
float ct_sigmoidf(float x)
{
    float e = expf(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    return x >= 0.0f ? r : e * r;
}

/* Keras 2's piecewise-linear sigmoid: clip(0.2 x + 0.5, 0, 1). */
float ct_hard_sigmoidf(float x)
{
    float y = 0.2f * x + 0.5f;
    return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
}

/* relu runs over whole feature maps, so its loops are shared by the workers
 * (core/threads.h: ct_parallel_range; every element is computed on its own). */
typedef struct { float *y; const float *a, *b; } relu_job;

CT_HOT
static void relu_forward_range(void *ctx, size_t lo, size_t hi)
{
    const relu_job *j = ctx;
    float *y = j->y;   /* locals: a store through j->y could otherwise change *j, and the loop would not vectorise */
    const float *x = j->a;
    for (size_t i = lo; i < hi; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* out, in [n] */
void ct_relu_forward(float *out, const float *in, size_t n)
{
    relu_job j = { out, in, NULL };
    ct_parallel_range(n, n, relu_forward_range, &j);
}

CT_HOT
static void relu_din(float *dx, const float *dy, const float *y, size_t n)   /* dy may be dx */
{
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

static void relu_backward_range(void *ctx, size_t lo, size_t hi)
{
    const relu_job *j = ctx;
    relu_din(j->y + lo, j->a + lo, j->b + lo, hi - lo);
}

/* dx = dy * [y > 0]  (the kink at 0 gets derivative 0, as in PyTorch) */
void ct_relu_backward(float *din, const float *dout, const float *out, size_t n)
{
    relu_job j = { din, dout, out };
    ct_parallel_range(n, n, relu_backward_range, &j);
}

/* On the worker that asks (the convolution's): the same loop on one plane. */
void ct_relu_din_plane(const void *ctx, float *din_plane, int n, int c)
{
    const ct_relu_din *r = ctx;
    const size_t at = ((size_t)n * r->C + (size_t)c) * r->plane;
    relu_din(din_plane, r->dout + at, r->out + at, r->plane);
}

void ct_tanh_forward(float *out, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = tanhf(in[i]);
}

/* d tanh(x)/dx = 1 - tanh(x)^2 = 1 - y^2 */
void ct_tanh_backward(float *din, const float *dout, const float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) din[i] = dout[i] * (1.0f - out[i] * out[i]);
}

void ct_sigmoid_forward(float *out, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = ct_sigmoidf(in[i]);
}

/* d sigmoid(x)/dx = e^-x / (1 + e^-x)^2 = y (1 - y) */
void ct_sigmoid_backward(float *din, const float *dout, const float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) din[i] = dout[i] * out[i] * (1.0f - out[i]);
}
