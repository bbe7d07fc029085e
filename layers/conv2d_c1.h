/* conv2d_c1.h - conv2d for an input of one channel (a first layer on a spectrogram or a
 * grey image), stride 1, computed directly on AVX-512 without a column matrix: each
 * output row is 16 positions at a time, a sum of the kernel's taps over shifted rows of
 * the padded image. conv2d.c calls these functions image by image, on its own workers,
 * where conv2d_dims.direct1 is set (ct_conv2d_dims_make: one input channel, stride 1,
 * padding below the kernel's size, a CPU running ctrain's AVX-512 kernels).
 *
 * Why: with C = 1 the column matrix has K = KH*KW rows (9 for 3x3), a product far too
 * thin for a matrix kernel (the siamese-cnn's conv16k3p1 ran at 40 GFLOP/s on im2col), while
 * the layer's real cost is writing its output once. Here the image stays in L1 and
 * every output value is written once. conv2d_c1.c has the math and the layouts.
 *
 * `round` = 1 is the layer in bf16 (conv2d.h, "bf16 operands"): the image, the filters
 * and dout are rounded to bf16 (to nearest even, core/bf16.h) before they are multiplied;
 * a product of two bf16 values is exact in float32, and the sums are float32 FMAs, so
 * every element obeys gemm_bf16.h's bounds like the tiles' sums. round = 0: float32.
 */
#ifndef CT_CONV2D_C1_H
#define CT_CONV2D_C1_H
#include <stddef.h>
#include "layers/conv2d.h"

/* Kernels of up to 7x7 (49 taps). */
#define CT_CONV2D_C1_MAX_TAPS 49

/* The shape allows it: one input channel, stride 1, padding <= KH-1 and <= KW-1, at most
 * CT_CONV2D_C1_MAX_TAPS taps. */
int    ct_conv2d_c1_fits(const conv2d_dims *d);
/* Floats of one worker's scratch: the padded image, and one output plane (forward) or,
 * where din is wanted, dout's padded planes and the flipped filters (backward). */
size_t ct_conv2d_c1_worker_floats(const conv2d_dims *d, int with_din);

/* out_n [OC, OH, OW] = conv(in_n [H, W]) + b (b may be NULL), and with relu = 1 a relu
 * over it (activation.h's values: y > 0 ? y : 0); scratch of ct_conv2d_c1_worker_floats(d, 0).
 * A large batch's planes are made in scratch and then streamed into out_n past the caches.
 * stats_n: NULL, or [OC, 2], each plane's statistics (ct_batchnorm_plane_stats), taken
 * before the plane leaves the cache. */
void ct_conv2d_c1_forward_image(float *out_n, float *scratch, const float *in_n, const float *w, const float *b,
                                const conv2d_dims *d, int round, int relu, double *stats_n);
/* One image's share of the backward:
 *   dw_n [OC, KH*KW] = sum over positions of dout_n x the shifted image (overwritten),
 *   din_n [H, W]     = the transposed correlation (overwritten; NULL: not computed).
 * scratch of ct_conv2d_c1_worker_floats(d, din_n != NULL); dw_n must not lie in it. */
void ct_conv2d_c1_backward_image(float *dw_n, float *din_n, float *scratch, const float *dout_n, const float *in_n,
                                 const float *w, const conv2d_dims *d, int round);
/* The same dW_n in its parts, for dout's planes made one at a time and never stored
 * (conv2d.c, ct_conv2d_backward_planes): ct_conv2d_c1_pad_image pads (and rounds) in_n
 * into scratch and returns the padded image; ct_conv2d_c1_plane_buffer is where in scratch
 * one plane of dout [OH, OW] may be made after it; ct_conv2d_c1_dw_plane gives dW_no [KH*KW]
 * of one output channel o from its plane dout_o, the bits of row o of
 * ct_conv2d_c1_backward_image's dw_n. */
float *ct_conv2d_c1_pad_image(float *scratch, const float *in_n, const conv2d_dims *d, int round);
/* dst [n] = src [n], the 64-byte-aligned middle with non-temporal stores (lines not read into
 * the cache first), for a layer's large output made a block at a time in the cache (also
 * conv2d_direct_bf16.c's). AVX-512 only: where ct_kernels_get() is AVX-512. The caller orders
 * the stores (_mm_sfence) before another thread reads them. */
void   ct_conv2d_c1_stream_copy(float *dst, const float *src, size_t n);
float *ct_conv2d_c1_plane_buffer(float *scratch, const conv2d_dims *d);
void   ct_conv2d_c1_dw_plane(float *dw_no, const float *dout_o, const float *img, const conv2d_dims *d, int round);

#endif
