/* pool.h - max pooling and global average pooling, NCHW.
 *
 * maxpool2d: window K x K, stride s, no padding, floor mode (PyTorch's and
 * Keras's 'valid'): OH = (H - K) / s + 1. Forward records the flat input index
 * of each window's maximum (first one on ties, as PyTorch); backward routes each
 * output gradient to that input, so din is zero elsewhere.
 *
 * global average pooling: out[n, c] = mean over the H*W positions of in[n, c].
 *
 * average pooling over H: out[n, c, w] = mean over the H rows of in[n, c, :, w].
 * For a log-mel image [1, T, I] (time is H, mel bands are W) this is the mean
 * over time that keeps the frequency axis: [C, H, W] -> [C, W], read flat as
 * [C*W] values per sample (channel-major, as flatten would).
 */
#ifndef CT_POOL_H
#define CT_POOL_H
#include "core/error.h"

typedef struct { int N, C, H, W, K, stride, OH, OW; } maxpool2d_dims;

/* Fills OH/OW; fails (CT_EINVAL) if the window is larger than the input. */
ct_status ct_maxpool2d_dims_make(maxpool2d_dims *d, int N, int C, int H, int W, int K, int stride);
/* out [N, C, OH, OW]; argmax [N, C, OH, OW] (index into in); in [N, C, H, W]. */
void ct_maxpool2d_forward(float *out, int *argmax, const float *in, const maxpool2d_dims *d);
/* din [N, C, H, W] overwritten. */
void ct_maxpool2d_backward(float *din, const float *dout, const int *argmax, const maxpool2d_dims *d);

/* One plane [n, c] of the two above, for kernels that pool a map they have just made
 * (layers/batchnorm.h: ct_batchnorm_maxpool_forward): outp, amp [OH, OW]; inp, dinp [H, W]
 * (dinp overwritten); base = the plane's flat index in [N, C, H, W], (n C + c) H W, which
 * the argmax values carry. relu = 1: a relu after the pool, in the same pass: outp =
 * relu(max), and where the maximum is not above 0 the argmax is -1, which the backward
 * skips (the relu's gradient there is 0: the relu's and the pool's backward in one). */
void ct_maxpool2d_plane(float *outp, int *amp, const float *inp, int base, const maxpool2d_dims *d, int relu);
void ct_maxpool2d_plane_backward(float *dinp, const float *doutp, const int *amp, int base, const maxpool2d_dims *d);

/* The same for all C planes of image n, for a layer that makes one image's map at a time and
 * pools it there (conv2d.h, ct_conv2d_forward_pool): pooled and argmax are the whole batch's
 * [N, C, OH, OW], written at image n from in_n [C, H, W]; din_n [C, H, W] is made from the
 * batch's dout and argmax at image n. Only where ct_maxpool2d_image_fits: d pools maps
 * [N, C, H, W], and their flat indices fit the argmax's int. */
int  ct_maxpool2d_image_fits(const maxpool2d_dims *d, int N, int C, int H, int W);
void ct_maxpool2d_image(float *pooled, int *argmax, const float *in_n, int n, const maxpool2d_dims *d, int relu);
void ct_maxpool2d_image_backward(float *din_n, const float *dout, const int *argmax, int n, const maxpool2d_dims *d);

/* out [N, C]; in [N, C, HW]. */
void ct_global_avgpool_forward(float *out, const float *in, int N, int C, int HW);
/* din [N, C, HW] overwritten; dout [N, C]. */
void ct_global_avgpool_backward(float *din, const float *dout, int N, int C, int HW);

/* out [N, C, W]; in [N, C, H, W]. */
void ct_avgpool_h_forward(float *out, const float *in, int N, int C, int H, int W);
/* din [N, C, H, W] overwritten; dout [N, C, W]. */
void ct_avgpool_h_backward(float *din, const float *dout, int N, int C, int H, int W);

/* One plane of the mean over H, for kernels that pool a map they have just made (layers/
 * batchnorm.h: ct_batchnorm_avgpool_h_forward): o [W] from x [H, W]; dx [H, W] overwritten
 * from g [W]. With H = HW and W = 1 they are the global average pooling's plane. */
void ct_avgpool_h_plane(float *o, const float *x, int H, int W);
void ct_avgpool_h_plane_backward(float *dx, const float *g, int H, int W);

#endif
