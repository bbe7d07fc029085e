/* rng.c - PCG32 (XSH-RR, 64-bit state) and the samplers built on it; see rng.h. */
#include <math.h>
#include "core/rng.h"
#include "core/error.h"
#include "core/hot.h"

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

/* The same numbers as n calls of ct_rng_uniform, in the same order, and the same
 * state after. PCG's state moves by an affine map, s -> M s + inc (mod 2^64), so
 * L steps at once are s -> M^L s + inc (M^(L-1) + ... + M + 1): L lanes that start
 * at the states of draws 0..L-1 and each jump L steps produce draws k, k+L,
 * k+2L, ... side by side (ct_rng_lanes gives the lanes and the L-step map). The
 * lanes' loop is plain C that the compiler vectorises (GCC makes 256-bit code of
 * it); one state in a register gave about 0.5 ns a draw. Dropout, which draws one
 * number per element of a feature map, runs the same lanes in its own AVX-512 loop
 * (layers/dropout.c: keep_avx512), comparing as it draws. */
#define RNG_LANES 16

static inline float rng_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

CT_HOT
void ct_rng_uniform_fill(ct_rng *r, float *u, size_t n)
{
    ct_rng local = *r;
    size_t i = 0;
    if (n >= 4 * RNG_LANES) {
        uint64_t lane[RNG_LANES], mult, add;     /* lane k: the state that gives draw i + k; the L-step map */
        ct_rng_lanes(&local, RNG_LANES, lane, &mult, &add);
        for (; i + RNG_LANES <= n; i += RNG_LANES)
            for (int k = 0; k < RNG_LANES; k++) {   /* ct_rng_u32's output, in 64-bit lanes: so it vectorises */
                uint64_t old = lane[k];
                uint64_t x = ((old >> 18u) ^ old) >> 27u & 0xffffffffu, rot = old >> 59u;
                uint64_t out = ((x >> rot) | (x << ((32u - rot) & 31u))) & 0xffffffffu;
                u[i + k] = rng_to_unit((uint32_t)out);
                lane[k] = old * mult + add;
            }
        local.state = lane[0];                   /* the state of draw i, the next one */
    }
    for (; i < n; i++) u[i] = rng_to_unit(ct_rng_u32(&local));
    *r = local;
}

void ct_rng_lanes(const ct_rng *r, int L, uint64_t *lane, uint64_t *mult, uint64_t *add)
{
    CT_ASSERT(L >= 1);
    uint64_t s = r->state, m = 1, a = 0;
    for (int k = 0; k < L; k++) {
        lane[k] = s;
        s = s * PCG_MULT + r->inc;
        m *= PCG_MULT;
        a = a * PCG_MULT + r->inc;
    }
    *mult = m;
    *add = a;
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

/* PCG's state moves by s -> M s + inc; delta steps compose to s -> A s + C, built
 * from the binary digits of delta by squaring the one-step map (F. Brown, "Random
 * number generation with arbitrary strides", 1994; pcg32_advance in PCG's C code). */
void ct_rng_advance(ct_rng *r, uint64_t delta)
{
    uint64_t mult = PCG_MULT, add = r->inc;   /* the map of 2^k steps, k = 0, 1, ... */
    uint64_t acc_mult = 1, acc_add = 0;       /* the map of the steps taken so far */
    while (delta > 0) {
        if (delta & 1u) {
            acc_mult *= mult;
            acc_add = acc_add * mult + add;
        }
        add = (mult + 1) * add;
        mult *= mult;
        delta >>= 1u;
    }
    r->state = acc_mult * r->state + acc_add;
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
