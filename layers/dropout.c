/* dropout.c - inverted dropout (see dropout.h).
 *
 * Forward draws one uniform number per element from the dropout RNG stream, in
 * element order, so a given stream state always gives the same mask; the mask
 * holds the scale itself (0 or 1/(1-p)), so forward and backward are the same
 * elementwise product.
 *
 * Threads: element i's mask is draw i of the stream, so the elements can be cut
 * into one contiguous range per worker (core/threads.h: ct_parallel_range); the
 * worker of [lo, hi) starts from a copy of the stream moved lo draws ahead
 * (ct_rng_advance, O(log lo)), and the caller's stream is moved n draws ahead
 * at the end. The mask is therefore the same, bit for bit, on any number of
 * threads as the one-thread loop gives, and the stream ends in the same state.
 */
#include <string.h>
#include "core/error.h"
#include "core/threads.h"
#include "layers/dropout.h"

typedef struct {
    float *out, *mask;
    const float *in;
    float p, scale;
    ct_rng start;   /* the stream at draw 0 of this call */
} dropout_job;

/* draws lo .. hi-1 into mask[lo, hi), then out = in * mask there */
static void dropout_forward_range(void *ctx, size_t lo, size_t hi)
{
    const dropout_job *j = ctx;
    ct_rng r = j->start;
    ct_rng_advance(&r, lo);
    float *mask = j->mask;
    ct_rng_uniform_fill(&r, mask + lo, hi - lo);   /* one uniform per element, then keep it when >= p */
    for (size_t i = lo; i < hi; i++) mask[i] = mask[i] >= j->p ? j->scale : 0.0f;
    for (size_t i = lo; i < hi; i++) j->out[i] = j->in[i] * mask[i];
}

/* out = in * mask over [lo, hi) (in = dout, out = din for the backward pass) */
typedef struct { float *out; const float *mask, *in; } apply_job;

static void dropout_apply_range(void *ctx, size_t lo, size_t hi)
{
    const apply_job *j = ctx;
    for (size_t i = lo; i < hi; i++) j->out[i] = j->in[i] * j->mask[i];
}

/* out, mask, in [n] */
void ct_dropout_forward(float *out, float *mask, const float *in, size_t n, float p, int train, ct_rng *rng)
{
    CT_ASSERT(p >= 0.0f && p < 1.0f);
    if (!train || p == 0.0f) {   /* identity: no mask, no random draws */
        if (out != in) memcpy(out, in, n * sizeof *out);
        return;
    }
    dropout_job j = { .out = out, .mask = mask, .in = in, .p = p, .scale = 1.0f / (1.0f - p), .start = *rng };
    ct_parallel_range(n, n, dropout_forward_range, &j);
    ct_rng_advance(rng, n);   /* where n draws in one loop leave the stream */
}

/* out, mask, in [S * n, per]: the rows [first, first + n) of each of S segments of `rows` rows */
void ct_dropout_forward_part(float *out, float *mask, const float *in, size_t per, int S, int n, int first, int rows,
                             float p, ct_rng *rng)
{
    CT_ASSERT(S >= 1 && n >= 0 && first >= 0 && first + n <= rows);
    if (p == 0.0f) { ct_dropout_forward(out, mask, in, (size_t)S * n * per, p, 1, rng); return; }   /* draws nothing */
    for (int s = 0; s < S; s++) {
        const size_t off = (size_t)s * n * per;
        ct_rng_advance(rng, (uint64_t)first * per);                 /* the rows before this part's */
        ct_dropout_forward(out + off, mask + off, in + off, (size_t)n * per, p, 1, rng);
        ct_rng_advance(rng, (uint64_t)(rows - first - n) * per);    /* and those after them */
    }
}

/* out = in * mask */
void ct_dropout_apply(float *out, const float *mask, const float *in, size_t n)
{
    apply_job j = { .out = out, .mask = mask, .in = in };
    ct_parallel_range(n, n, dropout_apply_range, &j);
}

/* out = in * mask is linear in `in` with diagonal Jacobian mask, so
 *   din = dout * mask */
void ct_dropout_backward(float *din, const float *dout, const float *mask, size_t n)
{
    ct_dropout_apply(din, mask, dout, n);
}
