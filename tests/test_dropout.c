/* test_dropout.c - inverted dropout: gradient check of out = in * mask, parity
 * with PyTorch for a given keep-mask, and the statistics of ct_dropout_forward's
 * masks (kept fraction, scale, eval identity, determinism per stream state). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/threads.h"
#include "layers/dropout.h"
#include "layers/gemm_packed.h"

/* f = sum_i (in * mask)_i * wout_i */
typedef struct { size_t n; float *x, *mask, *out, *wout; } drop_ctx;

static double drop_objective(void *p)
{
    drop_ctx *c = p;
    ct_dropout_apply(c->out, c->mask, c->x, c->n);
    return t_dot(c->out, c->wout, c->n);
}

static void gradcheck_dropout(size_t n, float p, ct_rng *r)
{
    t_case("dropout/gradcheck n=%zu p=%.2f", n, p);
    drop_ctx c = { n, t_alloc(n), t_alloc(n), t_alloc(n), t_alloc(n) };
    t_fill_uniform(c.x, n, -1, 1, r);
    t_fill_uniform(c.wout, n, -1, 1, r);
    ct_rng dr; ct_rng_seed(&dr, 5, CT_STREAM_DROPOUT);
    ct_dropout_forward(c.out, c.mask, c.x, n, p, 1, &dr);   /* draws the mask */
    float *dx = t_alloc(n);
    ct_dropout_backward(dx, c.wout, c.mask, n);
    /* linear in x: exact up to float rounding, tolerance 2e-4 */
    t_gradcheck("din", drop_objective, &c, c.x, dx, n, 1e-2f, 2e-4, 0, 0);
    free(c.x); free(c.mask); free(c.out); free(c.wout); free(dx);
}

static void test_statistics(void)
{
    enum { N = 200000 };
    const float p = 0.3f, scale = 1.0f / (1.0f - p);
    float *x = t_alloc(N), *out = t_alloc(N), *mask = t_alloc(N), *mask2 = t_alloc(N);
    ct_rng r; ct_rng_seed(&r, 1, 77);
    t_fill_uniform(x, N, 0.5f, 1.5f, &r);   /* nonzero, so out == 0 means dropped */

    t_case("dropout/forward keeps 1-p, scales by 1/(1-p)");
    ct_rng dr; ct_rng_seed(&dr, 42, CT_STREAM_DROPOUT);
    ct_dropout_forward(out, mask, x, N, p, 1, &dr);
    size_t kept = 0, bad = 0;
    for (size_t i = 0; i < N; i++) {
        if (mask[i] != 0.0f) {
            kept++;
            if (mask[i] != scale || out[i] != x[i] * scale) bad++;
        } else if (out[i] != 0.0f) bad++;
    }
    double frac = (double)kept / N;
    /* binomial: sd = sqrt(p(1-p)/N) ~ 1.0e-3; allow 5 sd */
    t_check(fabs(frac - (1.0 - p)) < 5e-3, "kept fraction %.5f, want %.2f", frac, 1.0 - p);
    t_check(bad == 0, "%zu elements not scaled by 1/(1-p) = %g (or dropped but nonzero)", bad, scale);

    t_case("dropout/eval mode and p=0 are the identity, draw nothing");
    for (int mode = 0; mode < 2; mode++) {
        ct_rng er; ct_rng_seed(&er, 42, CT_STREAM_DROPOUT);
        ct_rng before = er;
        for (size_t i = 0; i < N; i++) mask2[i] = -7.0f;
        if (mode == 0) ct_dropout_forward(out, mask2, x, N, p, 0, &er);
        else           ct_dropout_forward(out, mask2, x, N, 0.0f, 1, &er);
        t_close(mode == 0 ? "eval out" : "p=0 out", out, x, N, 0);
        t_check(er.state == before.state && er.inc == before.inc, "mode %d drew random numbers", mode);
        t_check(mask2[0] == -7.0f && mask2[N - 1] == -7.0f, "mode %d touched the mask", mode);
    }
    memcpy(out, x, N * sizeof *out);
    ct_dropout_forward(out, mask2, out, N, p, 0, &dr);   /* in place, eval */
    t_close("eval in place", out, x, N, 0);

    t_case("dropout/same seed same mask, different stream state different mask");
    ct_rng a; ct_rng_seed(&a, 42, CT_STREAM_DROPOUT);
    ct_dropout_forward(out, mask2, x, N, p, 1, &a);
    t_check(memcmp(mask, mask2, N * sizeof *mask) == 0, "the same seed and stream gave a different mask");
    /* `a` has advanced: its next mask must differ; so must another seed's */
    ct_dropout_forward(out, mask2, x, N, p, 1, &a);
    size_t same = 0;
    for (size_t i = 0; i < N; i++) same += mask[i] == mask2[i];
    t_check(same < N - N / 10, "advanced stream state: %zu of %d mask entries equal", same, N);
    ct_rng b; ct_rng_seed(&b, 43, CT_STREAM_DROPOUT);
    ct_dropout_forward(out, mask2, x, N, p, 1, &b);
    same = 0;
    for (size_t i = 0; i < N; i++) same += mask[i] == mask2[i];
    /* independent masks agree on p^2 + (1-p)^2 = 58% of entries */
    t_check(same < N - N / 10, "another seed: %zu of %d mask entries equal", same, N);
    /* in place in training mode equals out-of-place */
    ct_rng c1; ct_rng_seed(&c1, 9, CT_STREAM_DROPOUT);
    ct_rng c2 = c1;
    ct_dropout_forward(out, mask, x, N, p, 1, &c1);
    memcpy(mask2, x, N * sizeof *mask2);           /* reuse mask2 as the in-place buffer */
    float *m3 = t_alloc(N);
    ct_dropout_forward(mask2, m3, mask2, N, p, 1, &c2);
    t_close("train in place", mask2, out, N, 0);
    free(m3);
    free(x); free(out); free(mask); free(mask2);
}

static void test_parity(void)
{
    t_case("dropout/parity torch (given mask)");
    hid_t f = t_golden_open("dropout.h5");
    size_t n = (size_t)t_golden_attr(f, "n");
    float p = (float)t_golden_attr(f, "p");
    if (f < 0 || n == 0) return;
    float *x = t_golden(f, "x", n), *keep = t_golden(f, "keep", n), *dout = t_golden(f, "dout", n);
    float *ref_out = t_golden(f, "out", n), *ref_dx = t_golden(f, "dx", n);
    float *mask = t_alloc(n), *out = t_alloc(n), *dx = t_alloc(n);
    for (size_t i = 0; i < n; i++) mask[i] = keep[i] * (1.0f / (1.0f - p));   /* dropout.h's scaled mask */
    ct_dropout_apply(out, mask, x, n);
    ct_dropout_backward(dx, dout, mask, n);
    /* torch computes x * keep / (1-p), we x * (keep * (1/(1-p))): one rounding apart, 1e-6 */
    t_close("out", out, ref_out, n, 1e-6);
    t_close("dx", dx, ref_dx, n, 1e-6);
    free(x); free(keep); free(dout); free(ref_out); free(ref_dx); free(mask); free(out); free(dx);
    H5Fclose(f);
}

/* A part of a larger batch (data-parallel training) gets the whole batch's masks for its
 * rows, and leaves the stream where the whole batch's call leaves it. */
static void test_part(void)
{
    t_case("dropout/a part of a batch draws the whole batch's masks for its rows (1 and 2 segments, p = 0)");
    enum { PER = 37, ROWS = 6 };
    const float ps[2] = { 0.3f, 0.0f };
    for (int k = 0; k < 2; k++)
        for (int S = 1; S <= 2; S++) {
            const size_t N = (size_t)S * ROWS * PER;
            float x[2 * ROWS * PER], whole[2 * ROWS * PER], wmask[2 * ROWS * PER];
            ct_rng r; ct_rng_seed(&r, 5, 1);
            t_fill_uniform(x, N, -1, 1, &r);
            ct_rng a; ct_rng_seed(&a, 77, CT_STREAM_DROPOUT);
            ct_rng start = a;
            ct_dropout_forward(whole, wmask, x, N, ps[k], 1, &a);
            const int firsts[3] = { 0, 2, 5 }, ns[3] = { 2, 3, 1 };   /* three parts that tile the rows */
            for (int q = 0; q < 3; q++) {
                const int first = firsts[q], n = ns[q];
                float in[2 * ROWS * PER], out[2 * ROWS * PER], mask[2 * ROWS * PER];
                for (int s = 0; s < S; s++)
                    memcpy(in + (size_t)s * n * PER, x + ((size_t)s * ROWS + first) * PER, (size_t)n * PER * sizeof *in);
                ct_rng b = start;
                ct_dropout_forward_part(out, mask, in, PER, S, n, first, ROWS, ps[k], &b);
                t_check(b.state == a.state && b.inc == a.inc, "p %g, %d segments, rows [%d, %d): the stream ends elsewhere",
                        ps[k], S, first, first + n);
                for (int s = 0; s < S; s++) {
                    const size_t at = ((size_t)s * ROWS + first) * PER, m = (size_t)n * PER;
                    t_close("out", out + (size_t)s * m, whole + at, m, 0);
                    if (ps[k] > 0) t_close("mask", mask + (size_t)s * m, wmask + at, m, 0);
                }
            }
        }
}

/* The mask is cut into one range per worker, each from its own jump of the stream:
 * on 2 and 3 workers mask, output, backward and the stream's final state must be
 * the one-worker call's, bit for bit. N is above the split size and not a multiple
 * of 2, 3 or the fill's 16 lanes, so every worker has a ragged start and end. */
static void test_workers(void)
{
    enum { N = 100003 };
    const float p = 0.25f;
    float *x = t_alloc(N), *dout = t_alloc(N), *ref = NULL;
    ct_rng r; ct_rng_seed(&r, 8, 21);
    t_fill_uniform(x, N, -1, 1, &r);
    t_fill_uniform(dout, N, -1, 1, &r);
    ct_rng ref_end = { 0, 0 };
    for (int threads = 1; threads <= 3; threads++) {
        if (threads > 1) t_case("dropout/%d workers draw the one-worker mask and leave the stream where it does", threads);
        float *o = t_alloc(3 * (size_t)N);   /* out, mask, din */
        ct_rng dr; ct_rng_seed(&dr, 42, CT_STREAM_DROPOUT);
        ct_rng_advance(&dr, 5);              /* a stream already in use */
        ct_threads_set(threads);
        ct_dropout_forward(o, o + N, x, N, p, 1, &dr);
        ct_dropout_backward(o + 2 * (size_t)N, dout, o + N, N);
        ct_threads_set(1);
        if (!ref) { ref = o; ref_end = dr; continue; }
        t_check(memcmp(o, ref, 3 * (size_t)N * sizeof *o) == 0, "out, mask or din differ from one worker's");
        t_check(dr.state == ref_end.state && dr.inc == ref_end.inc, "the stream ends elsewhere than one worker's");
        free(o);
    }
    t_case("dropout/the split mask is the serial draws: mask[i] from draw i");
    ct_rng s; ct_rng_seed(&s, 42, CT_STREAM_DROPOUT);
    ct_rng_advance(&s, 5);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) {
        float u = ct_rng_uniform(&s), want = u >= p ? 1.0f / (1.0f - p) : 0.0f;
        bad += ref[N + i] != want;
    }
    t_check(bad == 0, "%zu of %d mask values are not those of draw i", bad, N);
    t_check(s.state == ref_end.state, "the stream ends elsewhere than N single draws leave it");
    free(ref); free(x); free(dout);
}

/* The forward's draws on every kernel set this CPU has: AVX-512 makes 16 draws side by side
 * from the stream's lanes, the others draw into the mask first; out, mask and where the stream
 * ends must be the same bits, and mask[i] draw i's. Lengths: below 16, a multiple of 16, and
 * ragged at both ends of 1-3 workers' ranges; in holds a NaN and an infinity (kept or dropped:
 * in * mask either way). */
static void test_kernel_sets(void)
{
    static const size_t lens[] = { 7, 16, 4096, 100003 };
    const float p = 0.4f;
    const ct_kernels saved = ct_kernels_set(ct_kernels_get()), widest = ct_kernels_cpu();
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
        const size_t n = lens[l];
        float *x = t_alloc(n), *ref = t_alloc(2 * n), *o = t_alloc(2 * n);
        ct_rng r; ct_rng_seed(&r, 77, 5);
        t_fill_uniform(x, n, -1, 1, &r);
        x[n / 2] = NAN;
        x[n - 1] = INFINITY;
        ct_rng ref_end = { 0, 0 };
        for (int k = CT_KERNELS_BLAS; k <= (int)widest; k++)
            for (int threads = 1; threads <= 3; threads++) {
                ct_kernels_set((ct_kernels)k);
                ct_threads_set(threads);
                ct_rng d; ct_rng_seed(&d, 9, CT_STREAM_DROPOUT);
                ct_rng_advance(&d, 3);
                float *dst = k == CT_KERNELS_BLAS && threads == 1 ? ref : o;
                ct_dropout_forward(dst, dst + n, x, n, p, 1, &d);
                ct_threads_set(1);
                if (dst == ref) {   /* the plain loop on one thread, checked draw by draw */
                    ref_end = d;
                    t_case("dropout/n = %zu: the plain forward's mask[i] is draw i's, out in * mask", n);
                    ct_rng s; ct_rng_seed(&s, 9, CT_STREAM_DROPOUT);
                    ct_rng_advance(&s, 3);
                    size_t bad = 0;
                    for (size_t i = 0; i < n; i++) {
                        const float want = ct_rng_uniform(&s) >= p ? 1.0f / (1.0f - p) : 0.0f, out = x[i] * want;
                        bad += memcmp(&ref[n + i], &want, sizeof want) != 0 || memcmp(&ref[i], &out, sizeof out) != 0;
                    }
                    t_check(bad == 0, "%zu of %zu elements differ from draw i's", bad, n);
                    continue;
                }
                t_case("dropout/n = %zu, %s kernels, %d worker(s): the plain forward's bits", n, ct_kernels_name((ct_kernels)k), threads);
                t_check(memcmp(o, ref, 2 * n * sizeof *o) == 0, "out or mask differ from the plain loop's");
                t_check(d.state == ref_end.state, "the stream ends elsewhere than the plain loop leaves it");
            }
        free(x); free(ref); free(o);
    }
    ct_kernels_set(saved);
}

void suite_dropout(void)
{
    ct_rng r; ct_rng_seed(&r, 2024, 13);
    gradcheck_dropout(1, 0.5f, &r);
    gradcheck_dropout(17, 0.3f, &r);
    gradcheck_dropout(256, 0.1f, &r);
    test_statistics();
    test_part();
    test_workers();
    test_kernel_sets();
    test_parity();
}
