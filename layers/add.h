/* add.h - the element-wise sum of two tensors of the same shape, the join of a
 * residual connection (out = f(x) + x, ResNet's skip):
 *
 *   out = a + b                 d a = d out,  d b = d out
 *
 * The gradient reaches both inputs unchanged. Each input's gradient ACCUMULATES
 * (+=): where a branch rejoins the path it left, the gradients arriving along the
 * two ways sum (the saved activation of a residual block gets the block's output
 * gradient on top of the one back through the block). da or db may be NULL (that
 * side is not wanted); neither may be dout itself.
 *
 * out may be a or b (forward in place). All arrays hold n floats.
 */
#ifndef CT_ADD_H
#define CT_ADD_H
#include <stddef.h>

void ct_add_forward(float *out, const float *a, const float *b, size_t n);
void ct_add_backward(float *da, float *db, const float *dout, size_t n);

#endif
