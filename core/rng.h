/* rng.h - ctrain's random number generator: PCG32 (M. O'Neill, "PCG: A Family of
 * Simple Fast Space-Efficient Statistically Good Algorithms for Random Number
 * Generation", 2014), the XSH-RR variant with 64-bit state and selectable stream.
 *
 * Why PCG32: the whole state is two 64-bit integers, so saving and restoring it
 * for exact resume is a plain copy; the output is identical on every platform and
 * compiler; and different `stream` values give independent sequences from one seed.
 *
 * ctrain keeps three streams per run (ct_rngs), so that, e.g., turning dropout on
 * does not change the initial weights or the order of the data.
 */
#ifndef CT_RNG_H
#define CT_RNG_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t state;  /* advances by one LCG step per draw */
    uint64_t inc;    /* odd increment: selects the stream */
} ct_rng;

enum { CT_STREAM_INIT = 1, CT_STREAM_DROPOUT = 2, CT_STREAM_DATA = 3 };

typedef struct {
    ct_rng init;     /* parameter initialisation */
    ct_rng dropout;  /* dropout masks */
    ct_rng data;     /* data order, pair sampling, crops */
} ct_rngs;

void     ct_rng_seed(ct_rng *r, uint64_t seed, uint64_t stream);
uint32_t ct_rng_u32(ct_rng *r);
uint32_t ct_rng_below(ct_rng *r, uint32_t n);   /* uniform on [0, n), unbiased; n > 0 */
float    ct_rng_uniform(ct_rng *r);             /* uniform on [0, 1), 24 random bits */
void     ct_rng_uniform_fill(ct_rng *r, float *u, size_t n);   /* u[i] = ct_rng_uniform(r), i = 0..n-1, faster */
double   ct_rng_uniform_double(ct_rng *r);      /* uniform on [0, 1), 53 random bits */
double   ct_rng_normal(ct_rng *r);              /* standard normal (Box-Muller, no cached value) */
void     ct_rng_shuffle_int(ct_rng *r, int *a, int n); /* Fisher-Yates */
/* For vector code that draws L numbers side by side: lane[k] (k < L) is the state that gives
 * the stream's k-th next draw, and s -> mult s + add (mod 2^64) moves a state L draws ahead.
 * r is not moved. */
void     ct_rng_lanes(const ct_rng *r, int L, uint64_t *lane, uint64_t *mult, uint64_t *add);
/* Moves the stream `delta` draws ahead (as delta calls of ct_rng_u32 would) in
 * O(log delta) steps: how one rank skips the numbers of the other ranks' rows. */
void     ct_rng_advance(ct_rng *r, uint64_t delta);

void     ct_rngs_seed(ct_rngs *s, uint64_t seed);

#endif
