/* test_bf16.c - bfloat16 (core/bf16.h) and the bf16 products (layers/gemm_bf16.h):
 *   - the conversions: every bf16 widened, and a sweep of float bit patterns (every
 *     bf16 value's neighbourhood: ties, overflow, NaN, denormals) narrowed, scalar and
 *     AVX2, against a reference that rounds by comparing distances in double;
 *   - the tile model, one TDPBF16PS at a time, against a plain loop of the SDM's order
 *     (bit for bit), its DAZ and FTZ, and a case where the two documented orders differ;
 *   - the packing of both operands (ct_gemm_bf16_pack, ct_gemm_bf16_pack_a), plain and
 *     transposed, element by element against the layouts' definitions (every element
 *     rounded on its own with ct_bf16_from_float), over a buffer filled with garbage first,
 *     with tails in M, N and K and K past the packers' chunk of 256;
 *   - the AMX kernel through the model: against a plain loop of the same order over the
 *     whole product (bit for bit: packing, tiling, tails), and against the derived bounds
 *     (1) and (2) of gemm_bf16.h, for M, N, K with every tail;
 *   - the dispatch: what runs at each set of the chain, the refusal's message, and
 *     CTRAIN_CPU_KERNELS naming a set the CPU lacks;
 *   - the real tiles against the model bit for bit, and the AVX512-BF16 kernel against
 *     the bounds, where the CPU has them (SKIP with the reason elsewhere). */
#define _DEFAULT_SOURCE   /* setenv, unsetenv */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/bf16.h"
#include "core/threads.h"
#include "layers/gemm_bf16.h"
#include "layers/gemm_packed.h"
#include "layers/ops.h"

static float f_of(uint32_t x) { float f; memcpy(&f, &x, sizeof f); return f; }
static uint32_t bits_of(float f) { uint32_t x; memcpy(&x, &f, sizeof x); return x; }

/* ---- conversions ---- */

/* The value of a bf16 from its fields, in double: (-1)^s 2^(e-127) 1.f, or 2^-126 0.f. */
static double bf16_value(uint16_t b)
{
    const int s = b >> 15, e = (b >> 7) & 0xff, f = b & 0x7f;
    const double v = e == 0 ? ldexp(f, -126 - 7) : e == 255 ? (f ? NAN : INFINITY) : ldexp(128 + f, e - 127 - 7);
    return s ? -v : v;
}

/* Round-to-nearest-even by distances: the two bf16 neighbours of |x| (the one cut toward
 * zero, and the next one up, whose value past the largest finite is taken as 2^128, where
 * rounding overflows to infinity) compared in double, exact for these values. */
static uint16_t bf16_reference(uint32_t x)
{
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000), down = (uint16_t)((x >> 16) & 0x7fff);
    if (down == 0x7f80) return (uint16_t)(sign | down);                   /* infinity */
    const uint16_t up = (uint16_t)(down + 1);
    const double v = fabs((double)f_of(x)), lo = bf16_value(down), hi = up == 0x7f80 ? ldexp(1, 128) : bf16_value(up);
    const double dlo = v - lo, dhi = hi - v;
    const uint16_t r = dlo < dhi ? down : dhi < dlo ? up : (down & 1) ? up : down;
    return (uint16_t)(sign | r);
}

static void conversions(void)
{
    t_case("bf16/widening: all 65536 bf16 values exact (scalar and vector), round trip to the same bits");
    {
        uint16_t *all = malloc(65536 * sizeof *all), *back = malloc(65536 * sizeof *back);
        float *wide = malloc(65536 * sizeof *wide);
        for (uint32_t b = 0; b < 65536; b++) all[b] = (uint16_t)b;
        ct_floats_from_bf16s(wide, all, 65535);            /* 65535: the vector loop and a scalar tail */
        wide[65535] = ct_float_from_bf16(65535);
        int bad = 0, badtrip = 0;
        for (uint32_t b = 0; b < 65536; b++) {
            const float s = ct_float_from_bf16((uint16_t)b);
            const double ref = bf16_value((uint16_t)b);
            const int nan = isnan(ref);
            if (bits_of(s) != bits_of(wide[b]) || (nan ? !isnan(s) : (double)s != ref) || bits_of(s) != b << 16) {
                if (bad++ < 3) t_check(0, "bf16 0x%04x widened to %a (vector %a), expected %a", b, s, wide[b], ref);
            }
            /* NaNs come back quiet: the quiet bit set, sign and payload kept */
            const uint16_t expect = (uint16_t)(nan ? b | 0x40 : b);
            if (ct_bf16_from_float(s) != expect && badtrip++ < 3)
                t_check(0, "bf16 0x%04x -> float -> 0x%04x, expected 0x%04x", b, ct_bf16_from_float(s), expect);
        }
        ct_bf16s_from_floats(back, wide, 65531);
        for (uint32_t b = 65531; b < 65536; b++) back[b] = ct_bf16_from_float(wide[b]);
        for (uint32_t b = 0; b < 65536; b++)
            if (back[b] != ct_bf16_from_float(wide[b]) && badtrip++ < 6)
                t_check(0, "vector round trip of 0x%04x gave 0x%04x", b, back[b]);
        t_check(bad == 0 && badtrip == 0, "%d widenings and %d round trips wrong", bad, badtrip);
        free(all); free(back); free(wide);
    }

    t_case("bf16/narrowing: every bf16's neighbourhood of floats (ties, overflow, NaN, denormals), scalar and %s",
           ct_bf16_vectorised() == 2 ? "AVX512-BF16 (groups with a denormal: AVX2)"
           : ct_bf16_vectorised() ? "AVX2" : "scalar only: no AVX2");
    {
        /* the low halves: exact, just above, just below and at halfway, the top */
        const uint16_t lows[] = { 0x0000, 0x0001, 0x3fff, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xfffe, 0xffff };
        enum { NL = sizeof lows / sizeof lows[0], NR = 3 };
        const size_t n = (size_t)65536 * (NL + NR);
        float *src = malloc(n * sizeof *src);
        uint16_t *vec = malloc(n * sizeof *vec);
        ct_rng r;
        ct_rng_seed(&r, 16, 16);
        for (uint32_t hi = 0, i = 0; hi < 65536; hi++) {
            for (int l = 0; l < NL; l++) src[i++] = f_of(hi << 16 | lows[l]);
            for (int l = 0; l < NR; l++) src[i++] = f_of(hi << 16 | (ct_rng_u32(&r) & 0xffff));
        }
        ct_bf16s_from_floats(vec, src, n - 5);             /* the vector loop and a scalar tail */
        for (size_t i = n - 5; i < n; i++) vec[i] = ct_bf16_from_float(src[i]);
        long bad = 0, ties = 0, overflow = 0, nans = 0, denormal = 0, up = 0;
        double relmax = 0;   /* the largest relative error over normal values that stay finite */
        for (size_t i = 0; i < n; i++) {
            const uint32_t x = bits_of(src[i]), a = x & 0x7fffffffu;
            const uint16_t ref = bf16_reference(x), s = ct_bf16_from_float(src[i]);
            if ((s != ref || vec[i] != ref) && bad++ < 5)
                t_check(0, "float 0x%08x (%a): scalar 0x%04x, vector 0x%04x, reference 0x%04x", x, src[i], s, vec[i], ref);
            if (a > 0x7f800000u) nans++;
            else {
                ties += (x & 0xffff) == 0x8000;
                overflow += a < 0x7f800000u && (ref & 0x7fff) == 0x7f80;
                denormal += a != 0 && a < 0x00800000u;
                up += (ref & 0x7fff) == ((a >> 16) + 1);
                if (a >= 0x00800000u && a < 0x7f7f8000u) {
                    const double rel = fabs((double)ct_float_from_bf16(s) - src[i]) / fabs((double)src[i]);
                    if (rel > relmax) relmax = rel;
                }
            }
        }
        t_check(bad == 0, "%ld of %zu floats narrowed wrong", bad, n);
        /* the sweep does reach the cases it is for */
        /* the bound of core/bf16.h, 2^-8, holds and is nearly reached (so 2^-9 would not hold) */
        t_check(relmax <= ldexp(1, -8) && relmax > ldexp(1, -9), "largest relative error %a: not within (2^-9, 2^-8]", relmax);
        printf("  largest relative error of narrowing a normal value: %.6g = 2^%.4f\n", relmax, log2(relmax));
        t_check(ties >= 65000 && overflow >= 10 && nans >= 1000 && denormal >= 1000 && up >= 100000,
                "coverage: %ld ties, %ld overflows, %ld NaNs, %ld denormals, %ld rounded up", ties, overflow, nans, denormal, up);
        free(src); free(vec);
    }

    t_case("bf16/narrowing: named values");
    {
        const struct { uint32_t in; uint16_t out; const char *what; } v[] = {
            { 0x3f800000u, 0x3f80, "1" },
            { 0x3f808000u, 0x3f80, "1 + 2^-8: a tie, to the even 1" },
            { 0x3f818000u, 0x3f82, "1 + 3 2^-8: a tie, to the even 1 + 2^-6" },
            { 0x3f808001u, 0x3f81, "just above the tie: up" },
            { 0xbf80ffffu, 0xbf81, "negative: magnitude rounded" },
            { 0x7f7f7fffu, 0x7f7f, "just below the overflow threshold: the largest bf16" },
            { 0x7f7f8000u, 0x7f80, "the overflow threshold: infinity" },
            { 0x7f7fffffu, 0x7f80, "FLT_MAX: infinity" },
            { 0xff800000u, 0xff80, "-infinity" },
            { 0x7f800001u, 0x7fc0, "a signalling NaN with its payload in the low bits: a quiet NaN, not infinity" },
            { 0xffc00000u, 0xffc0, "the default NaN" },
            { 0x80000000u, 0x8000, "-0" },
            { 0x00008000u, 0x0000, "denormal tie: to the even 0" },
            { 0x00018000u, 0x0002, "denormal tie: to the even 2 2^-133" },
            { 0x007fffffu, 0x0080, "the largest denormal: up to the smallest normal" },
        };
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            const uint16_t got = ct_bf16_from_float(f_of(v[i].in));
            t_check(got == v[i].out, "%s: 0x%08x -> 0x%04x, expected 0x%04x", v[i].what, v[i].in, got, v[i].out);
        }
    }
}

/* ---- the order of TDPBF16PS, written out plainly (gemm_bf16.h): the reference ---- */

/* a float with denormals as zero (the sign kept) */
static float daz(float f) { const uint32_t x = bits_of(f); return (x >> 23 & 0xff) == 0 ? f_of(x & 0x80000000u) : f; }
static float bf(uint16_t b) { return daz(ct_float_from_bf16(b)); }
/* one FMA / one addition of the tiles: DAZ in, round to nearest even, FTZ out */
static float ref_fma(float a, float b, float c) { return daz(fmaf(daz(a), daz(b), daz(c))); }
static float ref_add(float x, float y) { return daz(daz(x) + daz(y)); }

/* c + sum over the 16 pairs q of a tile: the two temporaries, their sum, added to c. a[2q+h]
 * and b[2q+h] are A's row and B's column over one k-block. */
static float ref_block(float c, const uint16_t *a, const uint16_t *b, int pairs)
{
    float t0 = 0, t1 = 0;
    for (int q = 0; q < pairs; q++) {
        t0 = ref_fma(bf(a[2 * q]), bf(b[2 * q]), t0);
        t1 = ref_fma(bf(a[2 * q + 1]), bf(b[2 * q + 1]), t1);
    }
    return ref_add(c, ref_add(t0, t1));
}

static uint16_t rand_bf16(ct_rng *r, int special)
{
    const uint32_t u = ct_rng_below(r, 100);
    if (special && u < 5) return (uint16_t)(ct_rng_u32(r) & 0x807f);            /* a denormal (or zero) */
    if (special && u < 10) return (uint16_t)(0x0d00 + (ct_rng_u32(r) & 0x80ff));  /* tiny: products underflow */
    if (u < 15) return 0;
    return ct_bf16_from_float((ct_rng_uniform(r) * 2 - 1) * (float)ldexp(1, (int)ct_rng_below(r, 9) - 4));
}

/* The model's TDPBF16PS computed one element at a time (vec = 0) or eight columns at a time
 * (vec = 1, AVX2): both against the instruction's order written plainly. */
static void tile_model_order(int vec)
{
    const char *how = vec ? "AVX2 rows" : "plain C rows";
    const int before_vec = ct_tile_model_vector(vec);
    t_case("bf16/tile model (%s): TDPBF16PS on tiles of every shape = the SDM's order written plainly, bit for bit", how);
    {
        ct_rng r;
        ct_rng_seed(&r, 1234, 5);
        int bad = 0;
        for (int trial = 0; trial < 60; trial++) {
            const int rows = 1 + (int)ct_rng_below(&r, 16), pairs = 1 + (int)ct_rng_below(&r, 16), cols = 1 + (int)ct_rng_below(&r, 16);
            ct_tile_config cfg = { .palette = 1 };
            cfg.rows[0] = (uint8_t)rows;  cfg.colsb[0] = (uint16_t)(4 * cols);    /* C */
            cfg.rows[3] = (uint8_t)rows;  cfg.colsb[3] = (uint16_t)(4 * pairs);   /* A */
            cfg.rows[5] = (uint8_t)pairs; cfg.colsb[5] = (uint16_t)(4 * cols);    /* B */
            ct_tile_model tm;
            t_check(ct_tile_model_config(&tm, &cfg) == CT_OK, "configuration: %s", ct_last_error());
            uint16_t A[16][32], B[16][32];
            float C[16][16], out[16][16];
            for (int i = 0; i < 16; i++)
                for (int j = 0; j < 32; j++) { A[i][j] = rand_bf16(&r, 1); B[i][j] = rand_bf16(&r, 1); }
            for (int i = 0; i < 16; i++)
                for (int j = 0; j < 16; j++) C[i][j] = trial % 3 ? (ct_rng_uniform(&r) * 2 - 1) : (float)ldexp(ct_rng_uniform(&r), -130);
            ct_tile_model_load(&tm, 0, C, sizeof C[0]);
            ct_tile_model_load(&tm, 3, A, sizeof A[0]);
            ct_tile_model_load(&tm, 5, B, sizeof B[0]);
            ct_tile_model_dpbf16ps(&tm, 0, 3, 5);
            memset(out, 0x55, sizeof out);
            ct_tile_model_store(&tm, 0, out, sizeof out[0]);
            for (int m = 0; m < 16; m++)
                for (int n = 0; n < 16; n++) {
                    uint16_t bcol[32];
                    for (int q = 0; q < pairs; q++) { bcol[2 * q] = B[q][2 * n]; bcol[2 * q + 1] = B[q][2 * n + 1]; }
                    const int inside = m < rows && n < cols;
                    const float ref = inside ? ref_block(C[m][n], A[m], bcol, pairs) : 0;
                    float got;
                    memcpy(&got, &tm.t[0][m][4 * n], 4);   /* the tile itself: zero past the rows and bytes configured */
                    if (bits_of(got) != bits_of(ref) || (inside && bits_of(out[m][n]) != bits_of(ref))) {
                        if (bad++ < 4) t_check(0, "tile %d x %d x %d pairs, C[%d][%d] = %a, reference %a", rows, cols, pairs, m, n, got, ref);
                    }
                    if (!inside && bits_of(out[m][n]) != 0x55555555u && bad++ < 4)
                        t_check(0, "TILESTORED wrote outside the %d x %d tile at [%d][%d]", rows, cols, m, n);
                }
        }
        t_check(bad == 0, "%d elements differ", bad);
    }

    t_case("bf16/tile model (%s): denormal inputs as zero, denormal results flushed, the two documented orders differ", how);
    {
        ct_tile_config cfg = { .palette = 1 };
        cfg.rows[0] = 1; cfg.colsb[0] = 4;   /* C: 1 x 1 */
        cfg.rows[1] = 1; cfg.colsb[1] = 4;   /* A: 1 row, 1 pair */
        cfg.rows[2] = 1; cfg.colsb[2] = 4;   /* B: 1 pair-row, 1 column */
        ct_tile_model tm;
        struct { uint16_t a[2], b[2]; float c; uint32_t sdm, guide; const char *what; } v[] = {
            { { 0x0001, 0x3f80 }, { 0x7f00, 0x3f80 }, 0.0f, 0x3f800000u, 0x3f800000u,
              "a denormal bf16 times 2^127 counts as 0 (DAZ), not 2^-6" },
            { { 0x0d80, 0x0000 }, { 0x3080, 0x0000 }, 0.0f, 0x00000000u, 0x00000000u,
              "2^-100 x 2^-30 = 2^-130, a denormal result: flushed to 0 (FTZ)" },
            { { 0x0d80, 0x0000 }, { 0x3080, 0x0000 }, 1.0f, 0x3f800000u, 0x3f800000u, "1 + a flushed product = 1" },
            { { 0x3380, 0x3380 }, { 0x3f80, 0x3f80 }, 1.0f, 0x3f800001u, 0x3f800000u,
              "1 + 2^-24 + 2^-24: the SDM's temporaries give 1 + 2^-23, the intrinsics guide's chain 1 (two ties to even)" },
        };
        uint32_t ccfg;
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            for (int order = 0; order < 2; order++) {
                const ct_tile_order before = ct_gemm_bf16_model_order((ct_tile_order)order);
                ct_tile_model_config(&tm, &cfg);
                ct_gemm_bf16_model_order(before);
                uint16_t a[2] = { v[i].a[0], v[i].a[1] }, b[2] = { v[i].b[0], v[i].b[1] };
                float c = v[i].c, out;
                ct_tile_model_load(&tm, 0, &c, 4);
                ct_tile_model_load(&tm, 1, a, 4);
                ct_tile_model_load(&tm, 2, b, 4);
                ct_tile_model_dpbf16ps(&tm, 0, 1, 2);
                ct_tile_model_store(&tm, 0, &out, 4);
                ccfg = order ? v[i].guide : v[i].sdm;
                t_check(bits_of(out) == ccfg, "%s (%s order): got 0x%08x, expected 0x%08x", v[i].what,
                        order ? "intrinsics guide" : "SDM", bits_of(out), ccfg);
            }
    }
    ct_tile_model_vector(before_vec);
}

/* One TDPBF16PS on random full tiles (infinities, denormals and tiny values among them),
 * in the given order and row code; the C tile after it is written to out. */
static void tile_dp_random(int seed, int order, int vec, float out[16][16])
{
    ct_rng r;
    ct_rng_seed(&r, (uint64_t)seed, 9);
    ct_tile_config cfg = { .palette = 1 };
    for (int t = 0; t < 3; t++) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
    uint16_t A[16][32], B[16][32];
    float C[16][16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 32; j++) {
            A[i][j] = ct_rng_below(&r, 500) ? rand_bf16(&r, 1) : 0x7f80;   /* now and then +inf */
            B[i][j] = rand_bf16(&r, 1);
        }
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) C[i][j] = (j + seed) % 4 ? (ct_rng_uniform(&r) * 2 - 1) : (float)ldexp(ct_rng_uniform(&r), -128);
    const ct_tile_order before = ct_gemm_bf16_model_order((ct_tile_order)order);
    const int before_vec = ct_tile_model_vector(vec);
    ct_tile_model tm;
    ct_tile_model_config(&tm, &cfg);
    ct_tile_model_load(&tm, 0, C, sizeof C[0]);
    ct_tile_model_load(&tm, 1, A, sizeof A[0]);
    ct_tile_model_load(&tm, 2, B, sizeof B[0]);
    ct_tile_model_dpbf16ps(&tm, 0, 1, 2);
    ct_tile_model_store(&tm, 0, out, sizeof out[0]);
    ct_tile_model_vector(before_vec);
    ct_gemm_bf16_model_order(before);
}

static void tile_model(void)
{
    tile_model_order(0);
    if (ct_kernels_cpu() >= CT_KERNELS_AVX2) {
        tile_model_order(1);
        t_case("bf16/tile model: the AVX2 rows = the plain C rows, bit for bit, both orders, 400 random tiles");
        int bad = 0;
        for (int seed = 0; seed < 200; seed++)
            for (int order = 0; order < 2; order++) {
                float plain[16][16], vec[16][16];
                tile_dp_random(seed, order, 0, plain);
                tile_dp_random(seed, order, 1, vec);
                if (memcmp(plain, vec, sizeof plain) && bad++ < 3) t_check(0, "tile %d (%s order) differs", seed, order ? "guide" : "SDM");
            }
        t_check(bad == 0, "%d of 400 tiles differ", bad);
    } else
        t_skip("bf16/tile model (AVX2 rows): this CPU has no AVX2 and FMA, only the plain C rows run here");

    t_case("bf16/tile model: configurations the instruction faults on are refused");
    {
        ct_tile_model tm;
        ct_tile_config bad = { .palette = 0 };
        t_check(ct_tile_model_config(&tm, &bad) == CT_EINVAL, "palette 0 accepted");
        bad.palette = 1; bad.rows[2] = 17; bad.colsb[2] = 64;
        t_check(ct_tile_model_config(&tm, &bad) == CT_EINVAL, "17 rows accepted");
        bad.rows[2] = 16; bad.colsb[2] = 65;
        t_check(ct_tile_model_config(&tm, &bad) == CT_EINVAL, "65 bytes per row accepted");
        bad.colsb[2] = 64; bad.rows[9] = 1; bad.colsb[9] = 4;
        t_check(ct_tile_model_config(&tm, &bad) == CT_EINVAL && strstr(ct_last_error(), "8 tiles"), "tile 9 configured: %s", ct_last_error());
        bad.rows[9] = 0; bad.colsb[9] = 0;
        t_check(ct_tile_model_config(&tm, &bad) == CT_OK, "a good configuration refused: %s", ct_last_error());
        t_check(sizeof(ct_tile_config) == 64, "the configuration is %zu bytes, LDTILECFG reads 64", sizeof(ct_tile_config));
    }
}

/* ---- the products ---- */

typedef struct {
    int M, N, K, trans_a, trans_b, acc, lda, ldb, ldc;
    float *A, *B, *C0;          /* op(A) [M, K], op(B) [K, N] as stored; C's old values [M, ldc] */
    uint16_t *bp, *work;
} product;

static float opA(const product *p, int i, int k) { return p->trans_a ? p->A[(size_t)k * p->lda + i] : p->A[(size_t)i * p->lda + k]; }
static float opB(const product *p, int k, int j) { return p->trans_b ? p->B[(size_t)j * p->ldb + k] : p->B[(size_t)k * p->ldb + j]; }

static void product_make(product *p, int M, int N, int K, int trans_a, int trans_b, int acc, ct_rng *r)
{
    *p = (product){ M, N, K, trans_a, trans_b, acc, (trans_a ? M : K) + 3, (trans_b ? K : N) + 5, N + 2, NULL, NULL, NULL, NULL, NULL };
    const size_t na = (size_t)(trans_a ? K : M) * p->lda, nb = (size_t)(trans_b ? N : K) * p->ldb, nc = (size_t)M * p->ldc;
    p->A = t_alloc(na); p->B = t_alloc(nb); p->C0 = t_alloc(nc);
    t_fill_uniform(p->A, na, -1, 1, r);
    t_fill_uniform(p->B, nb, -1, 1, r);
    t_fill_uniform(p->C0, nc, -1, 1, r);
    p->bp = malloc(ct_gemm_bf16_pack_elems(K, N) * sizeof *p->bp);
    p->work = malloc(ct_gemm_bf16_work_elems(M, K) * sizeof *p->work);
    ct_gemm_bf16_pack(p->bp, p->B, p->ldb, trans_b, K, N);
}

static void product_free(product *p) { free(p->A); free(p->B); free(p->C0); free(p->bp); free(p->work); }

/* C for a run: the old values when accumulating, NaN when overwriting (they must not be
 * read); the slack columns past N hold the old values and must stay. */
static float *product_c(const product *p)
{
    float *C = t_alloc((size_t)p->M * p->ldc);
    for (size_t i = 0; i < (size_t)p->M * p->ldc; i++) C[i] = p->acc || (int)(i % p->ldc) >= p->N ? p->C0[i] : NAN;
    return C;
}

static float *product_run(const product *p, ct_bf16_kernels which)
{
    float *C = product_c(p);
    ct_gemm_bf16_on(which, p->M, p->N, p->K, p->A, p->lda, p->trans_a, p->bp, p->work, C, p->ldc, p->acc);
    return C;
}

static void product_name(char *s, size_t n, const product *p)
{
    snprintf(s, n, "M %d N %d K %d, A%s B%s, %s", p->M, p->N, p->K, p->trans_a ? "^T" : "", p->trans_b ? "^T" : "", p->acc ? "C +=" : "C =");
}

static double worst1, worst2;   /* the largest error / its bound, (1) and (2), over the products checked */

/* Checks C [M, ldc] of one run against the plain loop of the tiles' order over the whole
 * product (exact: same bits), when exact; and always against the bounds (1) and (2). Returns
 * the number of elements out of line. */
static int product_check(const product *p, const float *C, int exact, const char *who)
{
    const double u = ldexp(1, -24), ud = ldexp(1, -53), K = p->K;
    const double gK = K * u / (1 - K * u), gKd = K * ud / (1 - K * ud);
    const double b2 = ldexp(1, -7) + ldexp(1, -16) + gK * pow(1 + ldexp(1, -8), 2);   /* bound (2)'s factor */
    int bad = 0;
    char name[96];
    product_name(name, sizeof name, p);
    const int Kp = (p->K + 31) / 32 * 32;
    uint16_t *arow = malloc((size_t)Kp * sizeof *arow), *bcol = malloc((size_t)Kp * sizeof *bcol);
    for (int i = 0; i < p->M; i++) {
        for (int k = 0; k < Kp; k++) arow[k] = k < p->K ? ct_bf16_from_float(opA(p, i, k)) : 0;
        for (int j = 0; j < p->ldc; j++) {
            const float got = C[(size_t)i * p->ldc + j], old = p->C0[(size_t)i * p->ldc + j];
            if (j >= p->N) {   /* slack: untouched */
                if (bits_of(got) != bits_of(old) && bad++ < 3) t_check(0, "%s %s: C[%d][%d] past N written", who, name, i, j);
                continue;
            }
            for (int k = 0; k < Kp; k++) bcol[k] = k < p->K ? ct_bf16_from_float(opB(p, k, j)) : 0;
            if (exact) {       /* the tiles' order: k-blocks of 32 in turn, each through its two temporaries */
                float c = p->acc ? old : 0.0f;
                for (int kb = 0; kb < Kp; kb += 32) c = ref_block(c, arow + kb, bcol + kb, 16);
                if (bits_of(c) != bits_of(got) && bad++ < 3)
                    t_check(0, "%s %s: C[%d][%d] = %a, the plain loop of the tiles' order %a", who, name, i, j, got, c);
            }
            double s_round = 0, abs_round = 0, s = 0, abs_ = 0;   /* sums in double: rounded operands, and the originals */
            for (int k = 0; k < p->K; k++) {
                const double ar = ct_float_from_bf16(arow[k]), br = ct_float_from_bf16(bcol[k]);
                const double a = opA(p, i, k), b = opB(p, k, j);
                s_round += ar * br; abs_round += fabs(ar * br);
                s += a * b; abs_ += fabs(a * b);
            }
            const double c_old = p->acc ? old : 0;
            s_round += c_old; s += c_old;
            const double bound1 = (gK + gKd) * (abs_round + fabs(c_old));                      /* (1), plus the double sum's own */
            const double bound2 = b2 * abs_ + gK * fabs(c_old) + gKd * (abs_ + fabs(c_old));   /* (2), likewise */
            const double e1 = fabs(got - s_round), e2 = fabs(got - s);
            if (!(e1 <= bound1) && bad++ < 3) t_check(0, "%s %s: C[%d][%d] off the same-operand product by %.3g > bound (1) %.3g", who, name, i, j, e1, bound1);
            if (!(e2 <= bound2) && bad++ < 3) t_check(0, "%s %s: C[%d][%d] off the float32-operand product by %.3g > bound (2) %.3g", who, name, i, j, e2, bound2);
            if (bound1 > 0 && e1 / bound1 > worst1) worst1 = e1 / bound1;
            if (bound2 > 0 && e2 / bound2 > worst2) worst2 = e2 / bound2;
        }
    }
    free(arow); free(bcol);
    return bad;
}

static const int TAILS[] = { 1, 15, 16, 17, 31, 33 };
static const int KS[] = { 1, 2, 17, 32, 33, 67 };

/* Every M x N of the tails, K cycling through KS, both layouts, accumulate and overwrite:
 * on one implementation, against the plain loop (exact) and the bounds. */
static void products_on(ct_bf16_kernels which, int exact)
{
    ct_rng r;
    ct_rng_seed(&r, 2018, 2019);
    int bad = 0, runs = 0;
    worst1 = worst2 = 0;
    const int nt = (int)(sizeof TAILS / sizeof TAILS[0]), nk = (int)(sizeof KS / sizeof KS[0]);
    for (int mi = 0; mi < nt; mi++)
        for (int ni = 0; ni <= nt; ni++)
            for (int acc = 0; acc < 2; acc++) {
                const int M = TAILS[mi], N = ni < nt ? TAILS[ni] : 69, K = KS[(mi + 2 * ni + acc) % nk];
                product p;
                product_make(&p, M, N, K, (mi + ni) % 2, (mi + ni + acc) % 3 == 0, acc, &r);
                float *C = product_run(&p, which);
                bad += product_check(&p, C, exact, ct_bf16_kernels_name(which));
                runs++;
                free(C);
                product_free(&p);
            }
    const int big[][3] = { { 64, 512, 128 }, { 70, 100, 300 }, { 33, 47, 1 } };   /* an LSTM step's shape; K past 256; K of 1 */
    for (size_t s = 0; s < sizeof big / sizeof big[0]; s++)
        for (int acc = 0; acc < 2; acc++) {
            product p;
            product_make(&p, big[s][0], big[s][1], big[s][2], acc, !acc, acc, &r);
            float *C = product_run(&p, which);
            bad += product_check(&p, C, exact, ct_bf16_kernels_name(which));
            runs++;
            free(C);
            product_free(&p);
        }
    t_check(bad == 0, "%d elements out of line in %d products", bad, runs);
    printf("  %d products on %s: largest error / bound %.3f for (1), %.3f for (2)\n", runs, ct_bf16_kernels_name(which), worst1, worst2);
}

static void products(void)
{
    t_case("bf16/AMX kernel through the tile model = the plain loop of the tiles' order (bit for bit), within bounds "
           "(1) and (2): M, N in {1, 15, 16, 17, 31, 33, 69}, K with tails, both layouts, C += and C =");
    products_on(CT_BF16_MODEL, 1);

    t_case("bf16/the bounds are tight enough to catch a wrong kernel: one operand pair dropped fails bound (1)");
    {
        /* the check must be able to fail: a product missing its last k (what an off-by-one
         * in the packing would do) is out of bound (1) for nearly every element */
        ct_rng r;
        ct_rng_seed(&r, 7, 7);
        product p;
        product_make(&p, 17, 33, 33, 0, 0, 0, &r);
        uint16_t *bq = malloc(ct_gemm_bf16_pack_elems(32, 33) * sizeof *bq);
        ct_gemm_bf16_pack(bq, p.B, p.ldb, 0, 32, 33);   /* the same B, K one short */
        float *C = product_c(&p);
        ct_gemm_bf16_on(CT_BF16_MODEL, 17, 33, 32, p.A, p.lda, 0, bq, p.work, C, p.ldc, 0);
        /* count, without failing the case, the elements the full-K check rejects */
        int out = 0;
        const double gK = 33 * ldexp(1, -24) / (1 - 33 * ldexp(1, -24));
        for (int i = 0; i < 17; i++)
            for (int j = 0; j < 33; j++) {
                double s = 0, a = 0;
                for (int k = 0; k < 33; k++) {
                    const double x = ct_float_from_bf16(ct_bf16_from_float(opA(&p, i, k))) * ct_float_from_bf16(ct_bf16_from_float(opB(&p, k, j)));
                    s += x; a += fabs(x);
                }
                out += fabs(C[(size_t)i * p.ldc + j] - s) > 2 * gK * a;
            }
        t_check(out > 17 * 33 * 9 / 10, "only %d of %d elements of a product one k short are outside bound (1)", out, 17 * 33);
        free(C); free(bq);
        product_free(&p);
    }
}

/* ---- dispatch and refusal ---- */

static int cpuinfo_has(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[8192];
    int has = 0;
    while (!has && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            for (char *t = strtok(strchr(line, ':') ? strchr(line, ':') + 1 : line, " \t\n"); t; t = strtok(NULL, " \t\n"))
                if (!strcmp(t, flag)) { has = 1; break; }
            break;
        }
    fclose(f);
    return has;
}

static void dispatch(void)
{
    const ct_kernels cpu = ct_kernels_cpu_all(), saved = ct_kernels_get_all();
    const char *env = getenv("CTRAIN_CPU_KERNELS");
    char *env_saved = env ? strdup(env) : NULL;

    t_case("bf16/dispatch: the chain as the CPU reports it (%s; /proc/cpuinfo: avx512_bf16 %s, amx_bf16 %s)", ct_kernels_name(cpu),
           cpuinfo_has("avx512_bf16") ? "yes" : "no", cpuinfo_has("amx_bf16") ? "yes" : "no");
    t_check((cpu >= CT_KERNELS_AVX512BF16) == cpuinfo_has("avx512_bf16"), "CPUID and /proc/cpuinfo disagree on AVX512-BF16");
    t_check(cpu < CT_KERNELS_AMX || cpuinfo_has("amx_bf16"), "AMX in the chain but not in /proc/cpuinfo");
    t_check(cpu == CT_KERNELS_AMX || !cpuinfo_has("amx_bf16") || ct_kernels_amx_refusal()[0],
            "/proc/cpuinfo has amx_bf16, the chain stops short of AMX, and no reason is given");
    t_check(ct_kernels_cpu() == (cpu > CT_KERNELS_AVX512 ? CT_KERNELS_AVX512 : cpu), "ct_kernels_cpu() is not the FP32 part of the chain");

    t_case("bf16/dispatch: every set of the chain up to this CPU's, through ct_kernels_set: bf16 on AMX, AVX512-BF16 or refused, "
           "float32 kernels never above AVX-512");
    for (int k = CT_KERNELS_BLAS; k <= (int)cpu; k++) {
        ct_kernels_set((ct_kernels)k);
        const ct_bf16_kernels b = ct_kernels_bf16();
        const ct_bf16_kernels want = k == CT_KERNELS_AMX ? CT_BF16_AMX : k == CT_KERNELS_AVX512BF16 ? CT_BF16_AVX512BF16 : CT_BF16_NONE;
        t_check(b == want, "set %s: bf16 on %s, expected %s", ct_kernels_name((ct_kernels)k), ct_bf16_kernels_name(b), ct_bf16_kernels_name(want));
        t_check(ct_kernels_get() == (k > CT_KERNELS_AVX512 ? CT_KERNELS_AVX512 : (ct_kernels)k), "set %s: float32 kernels %s",
                ct_kernels_name((ct_kernels)k), ct_kernels_name(ct_kernels_get()));
        const ct_status st = ct_bf16_check();
        if (want == CT_BF16_NONE) {
            const char *msg = ct_last_error();
            t_check(st == CT_ENODEV && strstr(msg, "AMX-BF16") && strstr(msg, "AVX512-BF16") && !strchr(msg, '\n'),
                    "set %s: the refusal should be CT_ENODEV, one line naming AMX-BF16 and AVX512-BF16: %s", ct_kernels_name((ct_kernels)k), msg);
            t_check(cpu < CT_KERNELS_AVX512BF16 ? strstr(msg, "has neither") != NULL : strstr(msg, "leave out") != NULL,
                    "set %s: the refusal should say whether the CPU lacks them or the set leaves them out: %s", ct_kernels_name((ct_kernels)k), msg);
        } else
            t_check(st == CT_OK, "set %s: bf16 refused: %s", ct_kernels_name((ct_kernels)k), ct_last_error());
    }
    ct_kernels_set(saved);

    t_case("bf16/dispatch: CTRAIN_CPU_KERNELS=avx2 refuses bf16 naming the missing sets; amx and avx512bf16 on a CPU without "
           "them are refused naming what the CPU lacks");
    {
        setenv("CTRAIN_CPU_KERNELS", "avx2", 1);
        const ct_status st = ct_kernels_init();
        if (cpu >= CT_KERNELS_AVX2) {
            t_check(st == CT_OK && ct_kernels_get_all() == CT_KERNELS_AVX2, "CTRAIN_CPU_KERNELS=avx2: %s", ct_last_error());
            t_check(ct_kernels_bf16() == CT_BF16_NONE && ct_bf16_check() == CT_ENODEV && strstr(ct_last_error(), "AMX-BF16") &&
                    strstr(ct_last_error(), "AVX512-BF16"), "bf16 under CTRAIN_CPU_KERNELS=avx2: %s", ct_last_error());
            printf("  refusal: %s\n", ct_last_error());
        }
        const char *words[] = { "avx512bf16", "amx" };
        const char *names[] = { "AVX512-BF16", "AMX-BF16" };
        for (int w = 0; w < 2; w++) {
            setenv("CTRAIN_CPU_KERNELS", words[w], 1);
            const ct_status s = ct_kernels_init();
            if ((int)cpu >= CT_KERNELS_AVX512BF16 + w) {
                t_check(s == CT_OK && ct_kernels_get_all() == (ct_kernels)(CT_KERNELS_AVX512BF16 + w), "CTRAIN_CPU_KERNELS=%s: %s", words[w], ct_last_error());
            } else {
                t_check((s == CT_EINVAL || s == CT_ENODEV) && strstr(ct_last_error(), names[w]) && strstr(ct_last_error(), "CTRAIN_CPU_KERNELS"),
                        "CTRAIN_CPU_KERNELS=%s on a CPU without %s: %s", words[w], names[w], ct_last_error());
                t_check(ct_kernels_get_all() == cpu, "after the refusal the CPU's widest set should run");
                printf("  refusal: %s\n", ct_last_error());
            }
        }
        if (env_saved) setenv("CTRAIN_CPU_KERNELS", env_saved, 1); else unsetenv("CTRAIN_CPU_KERNELS");
        (void)ct_kernels_init();
        ct_kernels_set(saved);
    }
    free(env_saved);
}

/* ---- the real instructions, where the CPU has them ---- */

/* AVX512-BF16 without AMX runs bf16 by default only where vdpbf16ps multiplies at least
 * CT_BF16_AVX512_MIN_RATIO times as fast as the FMA (gemm_bf16.h). The CPU is played through
 * ct_kernels_set_as_cpu and the rates given (ct_bf16_avx512_rates_set), so the decision and its
 * refusal are tested on either side of the threshold; this CPU's own rates are measured too. */
static void avx512_pays(void)
{
    if (ct_kernels_cpu_all() < CT_KERNELS_AVX512BF16) {
        t_case("bf16/dispatch: AVX512-BF16 without AMX only where vdpbf16ps outruns the FMA");
        t_skip("this CPU has no AVX512-BF16 (its widest are %s)", ct_kernels_name(ct_kernels_cpu_all()));
        return;
    }
    const char *env = getenv("CTRAIN_CPU_KERNELS");
    char *env_saved = env ? strdup(env) : NULL;
    unsetenv("CTRAIN_CPU_KERNELS");

    t_case("bf16/dispatch: this CPU's vdpbf16ps and FMA rates on one core, measured");
    double b = 0, f = 0;
    t_check(ct_bf16_avx512_rates(&b, &f) == CT_OK && b > 0 && f > 0 && b / f > 0.05 && b / f < 20,
            "rates %g and %g GFLOP/s: %s", b, f, ct_last_error());
    printf("  vdpbf16ps %.0f GFLOP/s, FMA %.0f GFLOP/s: %.2fx (bf16 by default from %.2fx)\n", b, f, b / f, CT_BF16_AVX512_MIN_RATIO);

    t_case("bf16/dispatch: AVX512-BF16 as the CPU's widest, by default: refused below %.2fx the FMA's rate, run from it; "
           "chosen (ct_kernels_set, CTRAIN_CPU_KERNELS=avx512bf16), run at any rate", CT_BF16_AVX512_MIN_RATIO);
    const struct { double bf16, fma; int runs; } cases[] = {
        { 100, 200, 0 }, { 124, 100, 0 }, { 125, 100, 1 }, { 200, 100, 1 }, { 1, 1000, 0 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ct_bf16_avx512_rates_set(cases[c].bf16, cases[c].fma);
        double ub = 0, uf = 0;
        ct_bf16_avx512_rates_used(&ub, &uf);
        t_check(ub == cases[c].bf16 && uf == cases[c].fma, "the rates the dispatch goes by: %g and %g, set %g and %g", ub, uf,
                cases[c].bf16, cases[c].fma);
        ct_kernels_set_as_cpu(CT_KERNELS_AVX512BF16);
        const ct_bf16_kernels k = ct_kernels_bf16();
        const ct_status st = ct_bf16_check();
        const char *msg = ct_last_error();
        if (cases[c].runs)
            t_check(k == CT_BF16_AVX512BF16 && st == CT_OK, "rates %g and %g: bf16 on %s (%s), expected AVX512-BF16",
                    cases[c].bf16, cases[c].fma, ct_bf16_kernels_name(k), st == CT_OK ? "accepted" : msg);
        else {
            char ratio[32];
            snprintf(ratio, sizeof ratio, "%.2fx", cases[c].bf16 / cases[c].fma);
            t_check(k == CT_BF16_NONE && st == CT_ENODEV && strstr(msg, "VDPBF16PS") && strstr(msg, ratio) &&
                    strstr(msg, "--precision fp32") && strstr(msg, "CTRAIN_CPU_KERNELS=avx512bf16") && !strchr(msg, '\n'),
                    "rates %g and %g: expected one line refusing bf16 with the ratio %s, float32 and the way to run it: %s %s",
                    cases[c].bf16, cases[c].fma, ratio, ct_bf16_kernels_name(k), msg);
            if (c == 0) {
                printf("  refusal: %s\n", msg);
                ct_backend be;   /* the backend refuses to open, with the same line */
                const ct_math m = { .dtype = CT_BF16 };
                const ct_status so = ct_backend_open_cpu(&be, &m);
                t_check(so == CT_ENODEV && strstr(ct_last_error(), "VDPBF16PS"), "a bf16 backend opened where bf16 does not pay: %s",
                        so == CT_OK ? "opened" : ct_last_error());
                if (so == CT_OK) ct_backend_close(&be);
            }
        }
        ct_kernels_set(CT_KERNELS_AVX512BF16);   /* chosen: runs whatever the rates */
        t_check(ct_kernels_bf16() == CT_BF16_AVX512BF16 && ct_bf16_check() == CT_OK, "rates %g and %g, AVX512-BF16 chosen: bf16 on %s",
                cases[c].bf16, cases[c].fma, ct_bf16_kernels_name(ct_kernels_bf16()));
    }
    ct_bf16_avx512_rates_set(100, 200);
    setenv("CTRAIN_CPU_KERNELS", "avx512bf16", 1);
    t_check(ct_kernels_init() == CT_OK && ct_kernels_chosen() && ct_kernels_bf16() == CT_BF16_AVX512BF16,
            "CTRAIN_CPU_KERNELS=avx512bf16 at 0.5x: bf16 on %s", ct_bf16_kernels_name(ct_kernels_bf16()));
    unsetenv("CTRAIN_CPU_KERNELS");

    t_case("bf16/dispatch: AVX512-BF16 as the CPU's widest with this CPU's own rates: the decision the threshold gives");
    ct_bf16_avx512_rates_set(0, 0);   /* measured (once per process) */
    ct_kernels_set_as_cpu(CT_KERNELS_AVX512BF16);
    double mb = 0, mf = 0;
    (void)ct_bf16_avx512_rates(&mb, &mf);
    const int runs = ct_kernels_bf16() == CT_BF16_AVX512BF16;
    printf("  as the widest set here: bf16 %s\n", runs ? "runs" : "refused");
    /* away from the threshold (a tenth either side) the two measurements must agree */
    t_check(fabs(mb / mf / CT_BF16_AVX512_MIN_RATIO - 1) < 0.1 || runs == (mb / mf >= CT_BF16_AVX512_MIN_RATIO),
            "measured %.2fx, and bf16 %s", mb / mf, runs ? "runs" : "is refused");

    if (env_saved) setenv("CTRAIN_CPU_KERNELS", env_saved, 1);
    free(env_saved);
    (void)ct_kernels_init();   /* the chain as before: the CPU's widest, or the environment's */
}

static void real_instructions(void)
{
    const ct_kernels cpu = ct_kernels_cpu_all();
    if (cpu >= CT_KERNELS_AMX) {
        t_case("bf16/real AMX tiles = the tile model, bit for bit (every tail), and within the bounds");
        ct_rng r;
        ct_rng_seed(&r, 99, 3);
        int bad = 0, guide = 0, runs = 0;
        const int nt = (int)(sizeof TAILS / sizeof TAILS[0]);
        for (int mi = 0; mi < nt; mi++)
            for (int ni = 0; ni < nt; ni++)
                for (int acc = 0; acc < 2; acc++) {
                    product p;
                    product_make(&p, TAILS[mi], TAILS[ni], KS[(mi + ni + acc) % 6], mi % 2, ni % 2, acc, &r);
                    float *real = product_run(&p, CT_BF16_AMX), *model = product_run(&p, CT_BF16_MODEL);
                    int diff = memcmp(real, model, (size_t)p.M * p.ldc * sizeof *real) != 0;
                    if (diff) {   /* which reading of the instruction does the hardware follow? */
                        const ct_tile_order before = ct_gemm_bf16_model_order(CT_TILE_ORDER_INTRINSICS_GUIDE);
                        float *g = product_run(&p, CT_BF16_MODEL);
                        ct_gemm_bf16_model_order(before);
                        guide += memcmp(real, g, (size_t)p.M * p.ldc * sizeof *real) == 0;
                        free(g);
                    }
                    bad += diff;
                    bad += product_check(&p, real, 0, "AMX-BF16");
                    runs++;
                    free(real); free(model); product_free(&p);
                }
        t_check(bad == 0, "%d of %d products differ from the model (%d of them match the intrinsics guide's order instead) or "
                "break the bounds", bad, runs, guide);
    } else {
        const char *why = ct_kernels_amx_refusal();
        const char *req = getenv("CT_REQUIRE_AMX");   /* the GPU machine's check: its Xeon has AMX, so a skip is a failure */
        if (req && !strcmp(req, "1")) {
            t_case("bf16/real AMX tiles = the tile model, bit for bit (CT_REQUIRE_AMX=1)");
            t_check(0, "the real tiles did not run: %s", cpuinfo_has("amx_bf16") && why[0] ? why : "this CPU has no AMX-BF16 (no amx_bf16 in /proc/cpuinfo)");
        } else
            t_skip("bf16/real AMX tiles = the tile model, bit for bit: %s", cpuinfo_has("amx_bf16") && why[0] ? why
                   : "this CPU has no AMX-BF16 (no amx_bf16 in /proc/cpuinfo); the model ran the kernel's packing and tiling above");
    }
    if (cpu >= CT_KERNELS_AVX512BF16) {
        t_case("bf16/AVX512-BF16 kernel within the bounds (1) and (2): every tail, both layouts, C += and C =");
        products_on(CT_BF16_AVX512BF16, 0);
    } else
        t_skip("bf16/AVX512-BF16 kernel within the bounds: this CPU has no AVX512-BF16 (no avx512_bf16 in /proc/cpuinfo)");
}

/* ---- packing against the layouts' definitions (gemm_bf16.h, "Layouts") ---- */

static void packing(void)
{
    static const struct { int K, N; } bs[] = { { 1, 1 }, { 31, 16 }, { 33, 17 }, { 64, 40 }, { 300, 33 }, { 513, 5 }, { 7, 300 } };
    for (size_t c = 0; c < sizeof bs / sizeof bs[0]; c++)
        for (int trans = 0; trans < 2; trans++) {
            const int K = bs[c].K, N = bs[c].N, ld = (trans ? K : N) + 3;   /* a leading dimension past the row */
            const int Kp = (K + 31) / 32 * 32, P = (N + 31) / 32 * 2;
            t_case("bf16/pack B: K=%d N=%d%s, against the definition", K, N, trans ? " (B^T given)" : "");
            ct_rng rng;
            ct_rng_seed(&rng, 40 + c, trans);
            const size_t nb = (size_t)(trans ? N : K) * ld, np = ct_gemm_bf16_pack_elems(K, N);
            float *b = malloc(nb * sizeof *b);
            uint16_t *bp = malloc(np * sizeof *bp);
            t_fill_uniform(b, nb, -3, 3, &rng);
            memset(bp, 0xAA, np * sizeof *bp);
            ct_gemm_bf16_pack(bp, b, ld, trans, K, N);
            size_t bad = 0;
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Kp / 2; q++)
                    for (int j = 0; j < 16; j++)
                        for (int h = 0; h < 2; h++) {
                            const int k = 2 * q + h, n = 16 * p + j;
                            const uint16_t want = k < K && n < N ? ct_bf16_from_float(trans ? b[(size_t)n * ld + k] : b[(size_t)k * ld + n]) : 0;
                            bad += bp[(((size_t)p * (Kp / 2) + q) * 16 + j) * 2 + h] != want;
                        }
            t_check(np == (size_t)P * Kp * 16 && !bad, "%zu of %zu packed elements differ from the definition", bad, np);
            /* the same, a part at a time (ct_gemm_bf16_pack_rows / _cols): parts of uneven sizes,
             * the last one cut short by K or N, into a buffer of garbage */
            /* the same B rounded first, then packed a part at a time (ct_gemm_bf16_pack_rows_bf16 /
             * _cols_bf16): parts of uneven sizes, the last one cut short by K or N, into garbage */
            t_case("bf16/pack B in parts from bf16: K=%d N=%d%s, the same bits as whole", K, N,
                   trans ? " (B^T given, 16-column parts)" : " (row parts)");
            uint16_t *bq = malloc(np * sizeof *bq), *bh = malloc(nb * sizeof *bh);
            ct_bf16s_from_floats(bh, b, nb);
            memset(bq, 0x55, np * sizeof *bq);
            int parts = 0;
            if (!trans)
                for (int k0 = 0, step = 2; k0 < K; k0 += step, step = step == 2 ? 6 : step == 6 ? 16 : 2, parts++)
                    ct_gemm_bf16_pack_rows_bf16(bq, bh + (size_t)k0 * ld, ld, k0, K - k0 < step ? K - k0 : step, K, N);
            else
                for (int n0 = 0, step = 16; n0 < N; n0 += step, step = step == 16 ? 32 : 16, parts++)
                    ct_gemm_bf16_pack_cols_bf16(bq, bh + (size_t)n0 * ld, ld, n0, N - n0 < step ? N - n0 : step, K, N);
            size_t differ = 0;
            for (size_t i = 0; i < np; i++) differ += bq[i] != bp[i];
            t_check(!differ, "%zu of %zu elements packed in %d parts differ from the whole packing", differ, np, parts);
            free(b); free(bp); free(bq); free(bh);
        }
    /* B packed from its packing as an A (ct_gemm_bf16_pack_from_a): the same bits as from the floats */
    for (size_t c = 0; c < sizeof bs / sizeof bs[0]; c++) {
        const int K = bs[c].K, N = bs[c].N, ld = N + 7;
        t_case("bf16/pack B from its A packing: K=%d N=%d, the same bits as from the floats", K, N);
        ct_rng rng;
        ct_rng_seed(&rng, 50 + c, 0);
        const size_t nb = (size_t)K * ld, np = ct_gemm_bf16_pack_elems(K, N), nw = ct_gemm_bf16_work_elems(K, N);
        float *b = malloc(nb * sizeof *b);
        uint16_t *bp = malloc(np * sizeof *bp), *bq = malloc(np * sizeof *bq), *w = malloc(nw * sizeof *w);
        t_fill_uniform(b, nb, -3, 3, &rng);
        b[nb / 2] = NAN; b[nb / 3] = 1e-40f;   /* a NaN and a subnormal move like any other value */
        memset(bq, 0x55, np * sizeof *bq);
        ct_gemm_bf16_pack(bp, b, ld, 0, K, N);
        ct_gemm_bf16_pack_a(w, b, ld, 0, K, N);
        ct_gemm_bf16_pack_from_a(bq, w, K, N);
        size_t differ = 0;
        for (size_t i = 0; i < np; i++) differ += bq[i] != bp[i];
        t_check(!differ, "%zu of %zu elements differ", differ, np);
        free(b); free(bp); free(bq); free(w);
    }
    /* B assembled from segments of padded rows (ct_gemm_bf16_pack_segment, the LSTM's window of
     * steps): kc rows of each segment given, the rest of its ks rows zeros, into garbage; the same
     * bits as packing the whole B with those zero rows written out */
    static const struct { int kc, ks, segs, N; } gs[] = { { 16, 32, 4, 128 }, { 7, 32, 3, 40 }, { 32, 32, 2, 48 }, { 33, 64, 2, 17 }, { 1, 32, 5, 16 } };
    for (size_t c = 0; c < sizeof gs / sizeof gs[0]; c++) {
        const int kc = gs[c].kc, ks = gs[c].ks, N = gs[c].N, K = ks * gs[c].segs, ld = N + 5;
        t_case("bf16/pack B in segments of %d rows padded to %d, %d of them, N=%d: the same bits as the padded B whole",
               kc, ks, gs[c].segs, N);
        ct_rng rng;
        ct_rng_seed(&rng, 60 + c, 0);
        const size_t nb = (size_t)K * ld, np = ct_gemm_bf16_pack_elems(K, N);
        float *b = calloc(nb, sizeof *b);
        uint16_t *bp = malloc(np * sizeof *bp), *bq = malloc(np * sizeof *bq);
        for (int k = 0; k < K; k++)
            if (k % ks < kc) t_fill_uniform(b + (size_t)k * ld, (size_t)N, -3, 3, &rng);
        ct_gemm_bf16_pack(bp, b, ld, 0, K, N);
        memset(bq, 0x55, np * sizeof *bq);
        for (int k0 = 0; k0 < K; k0 += ks) ct_gemm_bf16_pack_segment(bq, b + (size_t)k0 * ld, ld, k0, kc, k0 + ks, K, N);
        size_t differ = 0;
        for (size_t i = 0; i < np; i++) differ += bq[i] != bp[i];
        t_check(!differ, "%zu of %zu elements differ", differ, np);
        free(b); free(bp); free(bq);
    }
    static const struct { int M, K; } as[] = { { 1, 1 }, { 15, 31 }, { 17, 33 }, { 33, 257 }, { 128, 128 }, { 40, 600 } };
    for (size_t c = 0; c < sizeof as / sizeof as[0]; c++)
        for (int trans = 0; trans < 2; trans++) {
            const int M = as[c].M, K = as[c].K, ld = (trans ? M : K) + 5;
            const int Mp = (M + 31) / 32 * 32, Kp = (K + 31) / 32 * 32;
            t_case("bf16/pack A: M=%d K=%d%s, against the definition", M, K, trans ? " (A^T given)" : "");
            ct_rng rng;
            ct_rng_seed(&rng, 60 + c, trans);
            const size_t na = (size_t)(trans ? K : M) * ld, nw = ct_gemm_bf16_work_elems(M, K);
            float *a = malloc(na * sizeof *a);
            uint16_t *w = malloc(nw * sizeof *w);
            t_fill_uniform(a, na, -3, 3, &rng);
            memset(w, 0xAA, nw * sizeof *w);
            ct_gemm_bf16_pack_a(w, a, ld, trans, M, K);
            size_t bad = 0;
            for (int i = 0; i < Mp; i++)
                for (int k = 0; k < Kp; k++) {
                    const uint16_t want = i < M && k < K ? ct_bf16_from_float(trans ? a[(size_t)k * ld + i] : a[(size_t)i * ld + k]) : 0;
                    bad += w[(size_t)i * Kp + k] != want;
                }
            t_check(nw == (size_t)Mp * Kp && !bad, "%zu of %zu packed elements differ from the definition", bad, nw);
            free(a); free(w);
        }
    /* A packed, then transposed in place of packing A^T from the floats (the LSTM backward's dz_t),
     * as the packing itself (wt's rows Kt apart) and as columns 32 .. 32+Kt-1 of a wider one (rows
     * Kt + 64 apart: the LSTM's window of steps), whose other columns must be left as they were */
    static const struct { int M, K; } ts[] = { { 1, 1 }, { 7, 9 }, { 8, 8 }, { 17, 33 }, { 33, 257 }, { 40, 600 }, { 130, 70 }, { 128, 512 } };
    for (size_t c = 0; c < sizeof ts / sizeof ts[0]; c++)
        for (int wide = 0; wide < 2; wide++) {
            const int M = ts[c].M, K = ts[c].K, ld = K + 3;
            const int Mt = (K + 31) / 32 * 32, Kt = (M + 31) / 32 * 32;   /* A^T [K, M] packed: [Mt][Kt] */
            const int ldt = wide ? Kt + 64 : Kt, off = wide ? 32 : 0;
            t_case("bf16/pack A then transpose: M=%d K=%d, %s, against the definition of A^T's packing", M, K,
                   wide ? "into columns of a wider matrix" : "alone");
            ct_rng rng;
            ct_rng_seed(&rng, 80 + c, 0);
            const size_t na = (size_t)M * ld, nw = ct_gemm_bf16_work_elems(M, K), nt = (size_t)Mt * ldt;
            float *a = malloc(na * sizeof *a);
            uint16_t *w = malloc(nw * sizeof *w), *wt = malloc(nt * sizeof *wt);
            t_fill_uniform(a, na, -3, 3, &rng);
            a[na / 2] = NAN;                    /* moved, not rounded again: a NaN stays the NaN packing made */
            a[na / 3] = 1e-39f;                 /* a subnormal */
            memset(w, 0xAA, nw * sizeof *w);
            memset(wt, 0x55, nt * sizeof *wt);
            ct_gemm_bf16_pack_a(w, a, ld, 0, M, K);
            ct_gemm_bf16_transpose_a(wt + off, ldt, w, M, K);
            size_t bad = 0;
            for (int i = 0; i < Mt; i++)
                for (int k = 0; k < ldt; k++) {
                    const int kk = k - off;   /* the column of A^T's packing, or outside it */
                    const uint16_t want = kk < 0 || kk >= Kt ? 0x5555 : i < K && kk < M ? ct_bf16_from_float(a[(size_t)kk * ld + i]) : 0;
                    bad += wt[(size_t)i * ldt + k] != want;
                }
            t_check(nt == (wide ? (size_t)Mt * ldt : ct_gemm_bf16_work_elems(K, M)) && !bad,
                    "%zu of %zu elements differ from A^T's packing (or were written outside it)", bad, nt);
            free(a); free(w); free(wt);
        }
}

/* ---- the threads: the same bits on 1, 2 and 3 (gemm_bf16.c, "sharing the work") ----
 * Products and packings large enough to be shared out, with tails in every dimension, both
 * layouts of each operand, C = and C +=, on the tile model (and the CPU's own kernel where it
 * has one): the packed B, the packed A and C against one thread's, bit for bit. */
static void threads_same_bits(void)
{
    static const struct { int M, N, K; } sh[] = { { 128, 260, 600 }, { 70, 130, 1000 }, { 33, 200, 2100 } };   /* every M K and K N past CT_PARALLEL_MIN_ELEMS */
    const int threads_before = ct_threads_get();
    for (int kernel = 0; kernel < 2; kernel++) {
        const ct_bf16_kernels which = kernel ? ct_kernels_bf16() : CT_BF16_MODEL;
        if (kernel && which == CT_BF16_NONE) {
            t_skip("bf16/threads on the CPU's own kernel: this CPU has no bf16 kernel (the tile model ran the same cases)");
            continue;
        }
        for (size_t c = 0; c < sizeof sh / sizeof sh[0]; c++)
            for (int layout = 0; layout < 4; layout++) {
                const int ta = layout & 1, tb = layout >> 1, acc = (int)c % 2;
                ct_rng rng;
                ct_rng_seed(&rng, 90 + c, (uint64_t)layout);
                product p;
                product_make(&p, sh[c].M, sh[c].N, sh[c].K, ta, tb, acc, &rng);
                t_case("bf16/threads %s: M %d N %d K %d, A%s B%s, %s: packing and product the same on 1, 2 and 3 threads",
                       ct_bf16_kernels_name(which), p.M, p.N, p.K, ta ? "^T" : "", tb ? "^T" : "", acc ? "C +=" : "C =");
                const size_t np = ct_gemm_bf16_pack_elems(p.K, p.N), nw = ct_gemm_bf16_work_elems(p.M, p.K);
                uint16_t *bp1 = NULL, *w1 = NULL;
                float *C1 = NULL;
                int differ = 0;
                for (int threads = 1; threads <= 3; threads++) {
                    ct_threads_set(threads);
                    memset(p.bp, 0x55, np * sizeof *p.bp);
                    memset(p.work, 0x55, nw * sizeof *p.work);
                    ct_gemm_bf16_pack(p.bp, p.B, p.ldb, tb, p.K, p.N);
                    float *C = product_run(&p, which);
                    if (threads == 1) {
                        bp1 = malloc(np * sizeof *bp1); w1 = malloc(nw * sizeof *w1);
                        memcpy(bp1, p.bp, np * sizeof *bp1); memcpy(w1, p.work, nw * sizeof *w1);
                        C1 = C;
                        continue;
                    }
                    if (memcmp(bp1, p.bp, np * sizeof *bp1)) differ |= 1;
                    if (memcmp(w1, p.work, nw * sizeof *w1)) differ |= 2;
                    if (memcmp(C1, C, (size_t)p.M * p.ldc * sizeof *C)) differ |= 4;
                    free(C);
                }
                ct_threads_set(threads_before);
                t_check(!differ, "on 2 or 3 threads:%s%s%s differ from 1 thread's", differ & 1 ? " packed B" : "",
                        differ & 2 ? " packed A" : "", differ & 4 ? " C" : "");
                free(bp1); free(w1); free(C1);
                product_free(&p);
            }
    }
}

void suite_bf16(void)
{
    conversions();
    packing();
    tile_model();
    products();
    threads_same_bits();
    dispatch();
    avx512_pays();
    real_instructions();
}
