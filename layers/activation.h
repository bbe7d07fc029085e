/* activation.h - elementwise nonlinearities: relu, tanh, sigmoid.
 *
 *   relu(x) = max(x, 0)          d/dx = 1 if out > 0 else 0 (0 at the kink, like PyTorch)
 *   tanh(x)                      d/dx = 1 - out^2
 *   sigmoid(x) = 1 / (1 + e^-x)  d/dx = out (1 - out)
 *
 * Backward passes use the forward OUTPUT, so forward may run in place
 * (out == in) and backward may run in place (din == dout). din is overwritten.
 */
#ifndef CT_ACTIVATION_H
#define CT_ACTIVATION_H
#include <stddef.h>

void ct_relu_forward(float *out, const float *in, size_t n);
void ct_relu_backward(float *din, const float *dout, const float *out, size_t n);
void ct_tanh_forward(float *out, const float *in, size_t n);
void ct_tanh_backward(float *din, const float *dout, const float *out, size_t n);
void ct_sigmoid_forward(float *out, const float *in, size_t n);
void ct_sigmoid_backward(float *din, const float *dout, const float *out, size_t n);

/* The relu's din one plane at a time, for a first convolution that takes its weight
 * gradient plane by plane and never needs din in memory (layers/conv2d.h,
 * ct_conv2d_backward_planes; ctx a ct_relu_din): din_plane [plane] = plane (n, c) of
 * ct_relu_backward(din, dout, out), bit for bit, with dout and out [N, C, plane]. */
typedef struct { const float *dout, *out; size_t plane; int C; } ct_relu_din;
void ct_relu_din_plane(const void *ctx, float *din_plane, int n, int c);

/* Scalar forms (the LSTM keeps its own vectorisable versions of the same formulas). sigmoid is computed
 * without overflow for large |x|. hard_sigmoid is Keras 2's: clip(0.2 x + 0.5, 0, 1). */
float ct_sigmoidf(float x);
float ct_hard_sigmoidf(float x);

#endif
