/* flatten.c - [N, C, H, W] -> [N, C*H*W] (see flatten.h).
 *
 * In row-major NCHW memory flattening moves nothing: both passes are copies
 * (and nothing at all when the buffers are the same).
 */
#include <string.h>
#include "layers/flatten.h"

/* out [N, C*H*W], in [N, C, H, W]; n = N*C*H*W */
void ct_flatten_forward(float *out, const float *in, size_t n)
{
    if (out != in) memmove(out, in, n * sizeof *out);
}

/* The layout is unchanged, so the gradient passes straight through: din = dout. */
void ct_flatten_backward(float *din, const float *dout, size_t n)
{
    if (din != dout) memmove(din, dout, n * sizeof *din);
}
