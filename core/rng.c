/* rng.c - PCG32 (XSH-RR, 64-bit state) and the samplers built on it; see rng.h. */
#include <math.h>
#include "core/rng.h"
#include "core/error.h"

#define PCG_MULT 6364136223846793005ULL

uint32_t ct_rng_u32(ct_rng *r)
{
    uint64_t old = r->state;
    r->state = old * PCG_MULT + r->inc;
    /* output permutation: xorshift high bits, then a random rotation */
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
}

void ct_rng_seed(ct_rng *r, uint64_t seed, uint64_t stream)
{
    r->state = 0u;
    r->inc = (stream << 1u) | 1u;
    ct_rng_u32(r);
    r->state += seed;
    ct_rng_u32(r);
}

uint32_t ct_rng_below(ct_rng *r, uint32_t n)
{
    CT_ASSERT(n > 0);
    /* reject the low values that would make the modulo biased */
    uint32_t threshold = (uint32_t)(-n) % n;
    for (;;) {
        uint32_t x = ct_rng_u32(r);
        if (x >= threshold) return x % n;
    }
}

float ct_rng_uniform(ct_rng *r) { return (float)(ct_rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

/* The same numbers as n calls of ct_rng_uniform, with the state kept in a local
 * copy (a register) instead of being stored and reloaded for every draw. */
void ct_rng_uniform_fill(ct_rng *r, float *u, size_t n)
{
    ct_rng local = *r;
    for (size_t i = 0; i < n; i++) u[i] = (float)(ct_rng_u32(&local) >> 8) * (1.0f / 16777216.0f);
    *r = local;
}

double ct_rng_uniform_double(ct_rng *r)
{
    uint64_t hi = ct_rng_u32(r) >> 5, lo = ct_rng_u32(r) >> 6;   /* 27 + 26 bits */
    return (double)(hi * 67108864ULL + lo) * (1.0 / 9007199254740992.0);
}

double ct_rng_normal(ct_rng *r)
{
    /* Box-Muller; u1 in (0, 1] so the log is finite */
    double u1 = 1.0 - ct_rng_uniform_double(r);
    double u2 = ct_rng_uniform_double(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void ct_rng_shuffle_int(ct_rng *r, int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)ct_rng_below(r, (uint32_t)i + 1);
        int t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

void ct_rngs_seed(ct_rngs *s, uint64_t seed)
{
    ct_rng_seed(&s->init, seed, CT_STREAM_INIT);
    ct_rng_seed(&s->dropout, seed, CT_STREAM_DROPOUT);
    ct_rng_seed(&s->data, seed, CT_STREAM_DATA);
}
