/* conv2d_winograd.h - the Winograd F(2x2, 3x3) path of layers/conv2d for 3x3,
 * stride-1 kernels (padding 0, 1 or 2). ct_conv2d_forward / ct_conv2d_backward call
 * it when conv2d_dims.winograd is set; see conv2d_winograd.c for the algorithm.
 * Same arguments and conventions as conv2d.h (no bias gradient here: the caller
 * sums db itself).
 */
#ifndef CT_CONV2D_WINOGRAD_H
#define CT_CONV2D_WINOGRAD_H
#include <stddef.h>
#include "layers/conv2d.h"

int    ct_conv2d_winograd_ok(const conv2d_dims *d);             /* 3x3, stride 1, padding <= 2 */
size_t ct_conv2d_winograd_workspace_floats(const conv2d_dims *d);
/* out [N, OC, OH, OW] = conv(in) + b (b may be NULL). */
void ct_conv2d_winograd_forward(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d);
/* dw [OC, C, 3, 3] += dL/dw; din [N, C, H, W] overwritten (NULL: not computed). */
void ct_conv2d_winograd_backward(float *din, float *dw, float *ws, const float *dout, const float *in, const float *w,
                              const conv2d_dims *d);

#endif
