/* conv2d.h - 2-D convolution (cross-correlation, as every framework), NCHW.
 *
 *   out[n, o, y, x] = b[o] + sum_{c, ky, kx} w[o, c, ky, kx] * in[n, c, y*s + ky - p, x*s + kx - p]
 *
 * with zero padding p on all sides and stride s; OH = (H + 2p - KH) / s + 1.
 * Lowered to matrix products in one of two ways:
 *  - im2col (any kernel): each image's receptive fields are unrolled into a
 *    [C*KH*KW, OH*OW] matrix (the workspace), then out_n = W [OC, C*KH*KW] x col
 *    is one cblas_sgemm per image. Backward: dW += dout_n x col^T, dcol = W^T x
 *    dout_n, and col2im scatters dcol back into din.
 *    On CPUs with AVX-512 the three products run on the register-blocked kernel
 *    of gemm_packed.h instead of cblas_sgemm ("packed"; see conv2d.c): with stride
 *    1 the column matrix is not built at all, its rows are runs of the (padded)
 *    image that the kernel reads in place; other strides write it straight into
 *    the kernel's panels.
 *  - one input channel (a first layer), stride 1, on AVX-512: no lowering at all; each
 *    output row is a sum of the taps over shifted rows of the padded image (conv2d_c1.h).
 *  - Winograd F(2x2, 3x3) (3x3 kernels, stride 1, padding <= 2, enough input
 *    channels): 16 sgemms per chunk of images on transformed 4x4 tiles, 2.25x
 *    fewer multiplications than im2col; see conv2d_winograd.c. Chosen only where
 *    the AVX-512 packed kernel is not: on a Zen 5 core packed im2col does the
 *    mnist_cnn's conv64k3 in about 0.75x Winograd's time (its transforms and
 *    small sgemms run far below the FMA peak; the 6x64 kernel near it).
 * Init: Glorot-uniform (fan_in C*KH*KW, fan_out OC*KH*KW, as Keras), zero bias.
 */
#ifndef CT_CONV2D_H
#define CT_CONV2D_H
#include <stddef.h>
#include "core/params.h"
#include "layers/pool.h"   /* maxpool2d_dims: a layer that pools its own output */

typedef struct {
    int N, C, H, W;        /* input */
    int OC, KH, KW;        /* filters */
    int stride, pad;
    int OH, OW;            /* output, filled by ct_conv2d_dims_make */
    int winograd;          /* 1: the Winograd F(2x2, 3x3) path (conv2d_winograd.h), chosen by
                              ct_conv2d_dims_make for 3x3 stride-1 kernels with padding <= 2 and at
                              least CONV2D_WINOGRAD_MIN_C input channels when `packed` is 0;
                              0: im2col + sgemm. Either may be set by hand (tests compare them). */
    int packed;            /* with winograd 0: 1 runs im2col's products on the packed kernel of
                              gemm_packed.h (chosen by ct_conv2d_dims_make where its AVX-512 version
                              runs and C*KH*KW >= CONV2D_PACKED_MIN_K; its AVX2 version, not faster
                              than Winograd on the mnist_cnn's conv64k3, is not chosen), 0 on
                              cblas_sgemm. May be cleared by hand, set only where
                              ct_gemm_packed_available(). */
    int direct1;           /* 1: one input channel, stride 1, on a CPU running ctrain's AVX-512 kernels:
                              computed directly, without a column matrix (conv2d_c1.h), in float32 and
                              in bf16; set by ct_conv2d_dims_make, may be cleared by hand (tests
                              compare it with im2col), set only where ct_conv2d_c1_fits() and the
                              kernels are AVX-512 */
    int workers;           /* threads sharing the layer's work (ct_parallel), set by ct_conv2d_dims_make
                              from ct_threads_get(); the workspace size depends on it */
} conv2d_dims;

#define CONV2D_WINOGRAD_MIN_C 8
/* The packed kernel is chosen for C*KH*KW >= this: with fewer taps (a first layer on
 * one input channel) its 6x64 tiles spend more time loading and storing than
 * multiplying, and cblas_sgemm is faster. */
#define CONV2D_PACKED_MIN_K 32

/* Fills OH/OW; fails (CT_EINVAL, naming the sizes) if the kernel does not fit the padded input. */
ct_status ct_conv2d_dims_make(conv2d_dims *d, int N, int C, int H, int W, int OC, int KH, int KW, int stride, int pad);
typedef struct { int w, b; } conv2d_ids;
/* Registers "<prefix>/w" [OC, C, KH, KW] and "<prefix>/b" [OC] (if bias; else ids->b = -1). */
ct_status ct_conv2d_params_add(conv2d_ids *ids, ct_params *ps, const char *prefix, const conv2d_dims *d, int bias);
size_t ct_conv2d_workspace_floats(const conv2d_dims *d);

/* out [N, OC, OH, OW]; in [N, C, H, W]; w [OC, C, KH, KW]; b [OC] or NULL; ws scratch.
 * stats: NULL, or [N, OC, 2]: each output plane's statistics as ct_batchnorm_plane_stats
 * gives them (layers/batchnorm.h), for a batchnorm right after; taken image by image while
 * the image's output is in the cache. */
void ct_conv2d_forward(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d,
                       double *stats);
/* din [N, C, H, W] overwritten (NULL: not computed); dw, db accumulated (db NULL if no bias). */
void ct_conv2d_backward(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                     const float *w, const conv2d_dims *d);

/* The backward of a layer whose din is not wanted (a model's first layer), with dout
 * never in memory: plane(ctx, dout_no, n, o) makes plane [n, o] of dout (OH*OW floats) in
 * a buffer of the worker that asks, which takes it into dw and db at once. For a layer after
 * it that can make its input gradient a plane at a time (batchnorm.h,
 * ct_batchnorm_maxpool_din_plane), so that it is neither written nor read back. dw and db
 * get the bits ct_conv2d_backward (bf16 = 1: ct_conv2d_backward_bf16) gives them from those
 * planes. Each plane is asked for once, by the worker of its image (worker w: images w,
 * w + workers, ...), o in order. Only where ct_conv2d_backward_planes_fits(d): the
 * one-input-channel path (d->direct1). ws as for the layer. */
typedef void (*ct_conv2d_plane_fn)(const void *ctx, float *dout_no, int n, int o);
int  ct_conv2d_backward_planes_fits(const conv2d_dims *d);
void ct_conv2d_backward_planes(float *dw, float *db, float *ws, ct_conv2d_plane_fn plane, const void *ctx, const float *in,
                               const conv2d_dims *d, int bf16);
/* out [N, OC, OH, OW] = relu(conv(in) + b), the relu applied as each value is stored: the
 * bits of ct_conv2d_forward (bf16 = 1: ct_conv2d_forward_bf16) followed by ct_relu_forward,
 * without the convolution's own output in memory. For a first layer and the relu after it
 * (a relu's backward reads only its own output: activation.h); its backward can then be
 * ct_conv2d_backward_planes with ct_relu_din_plane. Only where
 * ct_conv2d_backward_planes_fits(d). */
void ct_conv2d_forward_relu(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d,
                            int bf16);

/* A layer whose output only a max pooling reads (maybe through a relu after it): the forward
 * pools each image's output as it is made and never writes out; pooled and argmax [N, OC, OH',
 * OW'] are what ct_maxpool2d_forward (then ct_relu_forward, argmax -1 where it zeroed a window:
 * pool.h, ct_maxpool2d_plane) gives on it, bit for bit. The backward takes the pool's gradient
 * dpooled (the relu's already applied) and argmax, and makes dout from them image by image,
 * never in memory: dw, db, din as ct_conv2d_backward on what ct_maxpool2d_backward gives, bit
 * for bit. Only where ct_conv2d_pool_fits (the packed path, stride 1; pd pools the output);
 * in bf16 the direct path has its own (conv2d_direct_bf16.h). */
int  ct_conv2d_pool_fits(const conv2d_dims *d, const maxpool2d_dims *pd);
void ct_conv2d_forward_pool(float *pooled, int *argmax, float *ws, const float *in, const float *w, const float *b,
                            const conv2d_dims *d, const maxpool2d_dims *pd, int relu);
void ct_conv2d_backward_pool(float *din, float *dw, float *db, float *ws, const float *dpooled, const int *argmax,
                             const maxpool2d_dims *pd, const float *in, const float *w, const conv2d_dims *d);

/* ---- bf16 operands, float32 sums (layers/gemm_bf16.h) ----
 * The same layer with every matrix product on ct_gemm_bf16: im2col always (d->winograd and
 * d->packed are ignored: Winograd's transforms would be rounded to bf16 too, and its error
 * is not a sum of rounded products), its operands rounded to bf16, its sums float32:
 *   forward   out_n [OC, P]  = W [OC, K] x col [K, P]  (+ b in float32)   col packed, W rounded
 *   backward  dW [OC, K]    += dout_n [OC, P] x col^T [P, K]              col^T packed, dout_n rounded
 *             dcol [K, P]    = W^T [K, OC] x dout_n [OC, P]               dout_n packed, W^T rounded
 *             din_n          = col2im(dcol) (float32 additions), db as the float32 layer's, bit for bit
 * Each element obeys gemm_bf16.h's bounds (1) and (2) with K the number of products in its
 * sum: C*KH*KW (out), N*OH*OW (dW, over the batch), OC times the taps that reach the pixel
 * (din). The callers must have checked ct_bf16_check() (or named the model). Stride-1
 * layers with input channels a multiple of 16 run, on the AMX tiles or their model, the
 * direct path of conv2d_direct_bf16.h instead: the same bounds, no column matrix.
 * Workspace, counted in floats: room for whichever of the two paths runs. */
size_t ct_conv2d_bf16_workspace_floats(const conv2d_dims *d);
/* As ct_conv2d_forward / ct_conv2d_backward, ws of ct_conv2d_bf16_workspace_floats(d). */
void ct_conv2d_forward_bf16(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d,
                            double *stats);
void ct_conv2d_backward_bf16(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                             const float *w, const conv2d_dims *d);

#endif
