/* flatten.h - [N, C, H, W] -> [N, C*H*W].
 *
 * In NCHW row-major memory this is the identity on the bytes: element
 * (n, c, h, w) is already at n*CHW + (c*H + h)*W + w, exactly where flatten
 * puts it, which is also the order PyTorch's torch.flatten(x, 1) uses. So a
 * model normally just reuses the pointer; these functions exist for models that
 * keep separate buffers, and to state (and test) the layout contract.
 */
#ifndef CT_FLATTEN_H
#define CT_FLATTEN_H
#include <stddef.h>

void ct_flatten_forward(float *out, const float *in, size_t n);    /* n = N*C*H*W */
void ct_flatten_backward(float *din, const float *dout, size_t n); /* din overwritten */

#endif
