/* counter_rng.h - the counter-based random numbers of GPU dropout, shared by the
 * kernel (cuda/kernels.cu) and the host reference (the same inline code), so the
 * two cannot drift apart.
 *
 * The CPU dropout draws one number per element from the sequential dropout stream,
 * which a GPU cannot do in parallel. The GPU scheme is counter-based:
 *
 *   1. once per dropout call, on the host, a 64-bit step seed is drawn from the
 *      dropout stream:  seed = (u32 << 32) | u32   (two ct_rng_u32 draws, high first),
 *      so the stream advances by exactly two draws per call, whatever n is;
 *   2. element i's 64-bit PCG state is the SplitMix64 finaliser of
 *      seed + (i + 1) * 0x9E3779B97F4A7C15 (Weyl sequence: distinct for every i);
 *   3. its 32-bit number is PCG32's XSH-RR output permutation of that state
 *      (exactly the permutation ct_rng_u32 applies in core/rng.c);
 *   4. u_i = (x >> 8) * 2^-24 in [0, 1) as ct_rng_uniform; keep iff u_i >= p.
 *
 * So a run is reproducible from its seed, any element's mask can be recomputed
 * alone (no state to carry between threads), and the result does not depend on
 * the launch configuration. A part of a larger batch (data-parallel training) draws the
 * same seed and numbers its elements by their place in the whole batch, so its masks are
 * the whole batch's. GPU masks differ from the CPU's (a different but
 * equally seeded scheme); the parity test compares the GPU mask with
 * ct_dropout_mask_ref below.
 */
#ifndef CT_CUDA_COUNTER_RNG_H
#define CT_CUDA_COUNTER_RNG_H
#include <stddef.h>
#include <stdint.h>
#include "cuda/hd.h"
#ifdef __cplusplus
extern "C" {
#endif
#include "core/rng.h"
#ifdef __cplusplus
}
#endif


static inline CT_HD uint64_t ct_counter_state(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1u) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline CT_HD uint32_t ct_counter_u32(uint64_t seed, uint64_t i)
{
    uint64_t s = ct_counter_state(seed, i);
    uint32_t xorshifted = (uint32_t)(((s >> 18u) ^ s) >> 27u);
    uint32_t rot = (uint32_t)(s >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
}

static inline CT_HD float ct_counter_uniform(uint64_t seed, uint64_t i)
{
    return (float)(ct_counter_u32(seed, i) >> 8) * (1.0f / 16777216.0f);
}

/* mask value of element i: 1/(1-p) if kept, else 0 */
static inline CT_HD float ct_counter_mask(uint64_t seed, uint64_t i, float p, float scale)
{
    return ct_counter_uniform(seed, i) >= p ? scale : 0.0f;
}

/* Step 1 of the scheme: the per-call seed, drawn on the host from the dropout stream. */
static inline uint64_t ct_dropout_seed_draw(ct_rng *r)
{
    uint64_t hi = ct_rng_u32(r);
    return (hi << 32) | (uint64_t)ct_rng_u32(r);
}

/* Host reference of the GPU mask: mask[i] = ct_counter_mask(seed, base + i, p, 1/(1-p)),
 * base = the index of mask[0] in the whole call (0 but for a part of a larger batch). */
static inline void ct_dropout_mask_ref(float *mask, size_t n, float p, uint64_t seed, uint64_t base)
{
    const float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) mask[i] = ct_counter_mask(seed, base + i, p, scale);
}

#endif
