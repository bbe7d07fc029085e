/* conv2d_direct_bf16.h - conv2d's bf16 path without im2col, for stride-1 layers whose
 * input channels are a multiple of 16, on the AMX tiles (or their C model): the tile
 * products read the image and the output gradient where they lie, one tap at a time,
 * and write out and din without a col2im. ct_conv2d_forward_bf16 and
 * ct_conv2d_backward_bf16 (conv2d.h) call it when ct_conv2d_direct_bf16_runs says so;
 * conv2d_direct_bf16.c has the layouts and the math. Same arguments and conventions as
 * conv2d.h; db is summed image by image as the float32 layer sums it (ct_conv2d_bias_sum, below),
 * while each image's dout is in the cache: the same bits.
 */
#ifndef CT_CONV2D_DIRECT_BF16_H
#define CT_CONV2D_DIRECT_BF16_H
#include <stddef.h>
#include "layers/conv2d.h"
#include "layers/pool.h"

/* The bias gradient's share of one image and output channel: the sum of row [P] (dout_n's
 * row o) as every CPU path of conv2d forms it - 16 running sums, then their sum - so that
 * db += these, image by image in order, has the same bits on every path. */
static inline float ct_conv2d_bias_sum(const float *row, int P)
{
    float s[16] = { 0 };   /* 16 running sums (one vector), added at the end */
    int i = 0;
    for (; i + 16 <= P; i += 16)
        for (int l = 0; l < 16; l++) s[l] += row[i + l];
    for (; i < P; i++) s[0] += row[i];
    float t = 0.0f;
    for (int l = 0; l < 16; l++) t += s[l];
    return t;
}

/* The shape allows it: stride 1, input channels a multiple of 16. */
int    ct_conv2d_direct_bf16_fits(const conv2d_dims *d);
/* It runs now: the shape fits and the bf16 products are the AMX tiles or their C model
 * (an AVX512-BF16 CPU keeps the im2col path). */
int    ct_conv2d_direct_bf16_runs(const conv2d_dims *d);
/* Floats of workspace (0 where the shape does not fit). */
size_t ct_conv2d_direct_bf16_workspace_floats(const conv2d_dims *d);
/* out [N, OC, OH, OW] = conv(in) + b (b may be NULL); stats as ct_conv2d_forward's. */
void ct_conv2d_direct_bf16_forward(float *out, float *ws, const float *in, const float *w, const float *b,
                                   const conv2d_dims *d, double *stats);
/* The layer, then a max pooling over its output (relu = 1: and a relu after the pool), without
 * that output in memory: each image's result is pooled from the worker's stage into pooled and
 * argmax [N, OC, OH', OW'], what ct_maxpool2d_forward (then ct_relu_forward) gives on out
 * (argmax indexes out [N, OC, OH, OW]; -1 where the relu zeroed a window, as
 * ct_maxpool2d_plane), bit for bit. Needs ct_conv2d_direct_bf16_pool_fits: the layer runs
 * here, and pd pools its output. The backward is the layer's, unchanged (it reads in, not out). */
int  ct_conv2d_direct_bf16_pool_fits(const conv2d_dims *d, const maxpool2d_dims *pd);
void ct_conv2d_direct_bf16_forward_pool(float *pooled, int *argmax, float *ws, const float *in, const float *w,
                                        const float *b, const conv2d_dims *d, const maxpool2d_dims *pd, int relu);
/* dw [OC, C, KH, KW] += dL/dw; db [OC] += dL/db (NULL: not computed); din [N, C, H, W]
 * overwritten (NULL: not computed). */
void ct_conv2d_direct_bf16_backward(float *din, float *dw, float *db, float *ws, const float *dout, const float *in, const float *w,
                                    const conv2d_dims *d);
/* The same backward for a layer whose output a max pooling took (ct_conv2d_direct_bf16_forward_pool;
 * pool_fits): dout is what ct_maxpool2d_backward makes from the pool's gradient dpooled and
 * argmax [N, OC, OH', OW'] (with a relu after the pool: its gradient already applied to
 * dpooled, and -1 in argmax where it zeroed a window), made image by image in the worker's
 * stage and never in memory: the same bits. */
void ct_conv2d_direct_bf16_backward_pool(float *din, float *dw, float *db, float *ws, const float *dpooled, const int *argmax,
                                         const maxpool2d_dims *pd, const float *in, const float *w, const conv2d_dims *d);
/* A layer's out (forward) or din (backward) of `bytes` or more for the batch is copied from
 * each worker's stage with non-temporal stores (on AVX-512); below, plainly. 16 MB unless the
 * tests set another, to run both copies on small shapes: the values are the same. */
void ct_conv2d_direct_bf16_stream_from(size_t bytes);

#endif
