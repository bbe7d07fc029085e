/* test_gpu.c - the GPU backend (cuda/).
 *
 * Host-side cases run in every build and on every machine: --device parsing, the
 * error a machine without a GPU (or a CPU-only build) gives, the counter-based
 * dropout RNG, the cuDNN weight-space mapping of the LSTM, argument checks.
 *
 * GPU cases compare every cuda/ function with its CPU twin on the same inputs. With
 * no usable GPU they are not run and not counted: each prints
 *   SKIP gpu/<name>: no NVIDIA GPU found (<reason>)
 * Tolerances (normalised max error, see tests/test.h): 1e-6 for elementwise kernels,
 * losses and optimizers; 2e-5 for sgemm and convolutions (summation order differs);
 * LSTM 2e-5 forward / 1e-4 gradients for T <= 12 and 1e-4 / 5e-4 at T = 100 (BPTT
 * sums 100 steps of differently-ordered products); dropout masks exactly.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/params.h"
#include "cuda/counter_rng.h"
#include "cuda/device.h"
#include "cuda/lstm_map.h"
#include "layers/lstm.h"

/* ---- host side ---- */

static void test_device_parse(void)
{
    t_case("gpu/device_parse");
    int idx = 99;
    t_check(ct_gpu_parse_device("cpu", &idx) == CT_OK && idx == -1, "cpu -> -1 (got %d)", idx);
    t_check(ct_gpu_parse_device("gpu", &idx) == CT_OK && idx == 0, "gpu -> 0 (got %d)", idx);
    t_check(ct_gpu_parse_device("gpu:3", &idx) == CT_OK && idx == 3, "gpu:3 -> 3 (got %d)", idx);
    t_check(ct_gpu_parse_device("cuda:1", &idx) == CT_OK && idx == 1, "cuda:1 -> 1 (got %d)", idx);
    const char *bad[] = { "", "gpu:", "gpu:x", "gpu:-1", "gpu1", "gpu:1x", "tpu", "gpu:99999" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ct_status st = ct_gpu_parse_device(bad[i], &idx);
        t_check(st == CT_EINVAL && strstr(ct_last_error(), "gpu:N"), "'%s' must be refused naming the forms (got %d: %s)",
                bad[i], (int)st, ct_last_error());
    }
}

/* The message of a machine without a GPU: returned, not crashed, non-zero status. */
static void test_device_open_error(const char *open_msg, ct_status open_st)
{
    t_case("gpu/device_open_without_gpu");
    t_check(open_st == CT_ENODEV, "status %d, want CT_ENODEV", (int)open_st);
    if (ct_gpu_compiled())
        t_check(strstr(open_msg, "no NVIDIA GPU found (cudaGetDeviceCount: ") && strstr(open_msg, "use --device cpu"),
                "message: %s", open_msg);
    else
        t_check(strstr(open_msg, "this ctrain was built without CUDA") && strstr(open_msg, "use --device cpu"),
                "message: %s", open_msg);
    t_check(ct_gpu_current() == NULL, "no context may be left open after a failure");
    char line[512];
    ct_gpu_describe(line, sizeof line);
    t_check(strncmp(line, "GPU", 3) == 0, "header line: %s", line);
    if (!ct_gpu_compiled()) t_check(strstr(line, "not compiled in") != NULL, "CPU build header line: %s", line);
    /* a second attempt and an out-of-range index fail the same way */
    t_check(ct_gpu_open(7, NULL) == CT_ENODEV, "gpu:7 must fail with CT_ENODEV");
}

/* Independent re-implementation of the kernel's formula (cuda/counter_rng.h). */
static uint32_t ref_counter_u32(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);   /* Weyl step */
    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ull;             /* SplitMix64 finaliser */
    z ^= z >> 27; z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    uint32_t x = (uint32_t)((z ^ (z >> 18)) >> 27);        /* PCG32 XSH-RR */
    unsigned r = (unsigned)(z >> 59);
    return r ? (x >> r) | (x << (32 - r)) : x;
}

static void test_dropout_counter_rng(void)
{
    t_case("gpu/dropout_counter_rng");
    ct_rng r;
    ct_rng_seed(&r, 1234, CT_STREAM_DROPOUT);
    ct_rng copy = r;
    uint64_t seed = ct_dropout_seed_draw(&r);
    uint64_t hi = ct_rng_u32(&copy), lo = ct_rng_u32(&copy);
    t_check(seed == ((hi << 32) | lo), "seed = two stream draws, high first");
    t_check(r.state == copy.state, "the stream advances by exactly two draws");
    int bad = 0;
    for (uint64_t i = 0; i < 100000; i++) bad += ct_counter_u32(seed, i) != ref_counter_u32(seed, i);
    for (uint64_t i = 0; i < 1000; i++) bad += ct_counter_u32(~0ull - i, (uint64_t)1 << 40 | i) != ref_counter_u32(~0ull - i, (uint64_t)1 << 40 | i);
    t_check(bad == 0, "%d numbers differ from the re-implemented formula", bad);
    const size_t n = 200000;
    const float p = 0.3f;
    float *mask = t_alloc(n);
    ct_dropout_mask_ref(mask, n, p, seed);
    size_t kept = 0, wrong = 0;
    for (size_t i = 0; i < n; i++) {
        float u = (float)(ref_counter_u32(seed, i) >> 8) / 16777216.0f;
        float want = u >= p ? 1.0f / (1.0f - p) : 0.0f;
        wrong += mask[i] != want;
        kept += mask[i] != 0.0f;
    }
    t_check(wrong == 0, "%zu mask values differ from the formula", wrong);
    double rate = (double)kept / n, sigma = sqrt(0.7 * 0.3 / n);
    t_check(fabs(rate - 0.7) < 5 * sigma, "keep rate %.5f, want 0.7 +- %.5f", rate, 5 * sigma);
    /* neighbouring elements and neighbouring seeds are not correlated in the obvious way */
    size_t same = 0;
    for (size_t i = 0; i + 1 < n; i++) same += (mask[i] != 0) == (mask[i + 1] != 0);
    double pair_rate = (double)same / (n - 1);   /* independent: 0.7^2 + 0.3^2 = 0.58 */
    t_check(fabs(pair_rate - 0.58) < 0.01, "adjacent agreement %.4f, want ~0.58", pair_rate);
    free(mask);
}

/* a parameter store like the siamese model's: an LSTM then a dense layer */
static void build_lstm_params(ct_params *ps, lstm_ids *ids, int I, int H, int L)
{
    ct_params_init(ps);
    CT_ASSERT(lstm_params_add(ids, ps, "lstm_1", I, H, L) == CT_OK);
    int shape[2] = { 5, H };
    CT_ASSERT(ct_params_add(ps, "dense_1/w", 2, shape, ct_init_uniform(1.0f)) >= 0);
    CT_ASSERT(ct_params_alloc(ps) == CT_OK);
}

static void test_weight_map_direct(void)
{
    t_case("gpu/lstm_weight_map_direct");
    const int I = 40, H = 128, L = 2;
    ct_params ps;
    lstm_ids ids;
    build_lstm_params(&ps, &ids, I, H, L);
    lstm_wspace_loc loc[LSTM_MAX_LAYERS * 8];
    size_t wsf = lstm_wspace_loc_packed(loc, I, H, L);
    t_check(wsf == (size_t)L * 8 * H + (size_t)4 * H * I + (size_t)4 * H * H + (size_t)(L - 1) * 8 * H * H,
            "packed size %zu", wsf);
    lstm_wspace_map map;
    t_check(lstm_wspace_map_make(&map, loc, wsf, &ps, &ids, I, H, L) == CT_OK, "map: %s", ct_last_error());
    t_check(map.direct == 1, "H %% 4 == 0 must map directly (%s)", map.why);
    t_check(map.base == ps.p[ids.w_ih[0]].offset, "base %zu, want w_ih_l0's offset %zu", map.base, ps.p[ids.w_ih[0]].offset);
    /* every gate's view: base + cuDNN's offset is ctrain's row block */
    int bad = 0;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < 8; k++) {
            size_t Il = l ? H : I;
            size_t m = k < 4 ? ps.p[ids.w_ih[l]].offset + (size_t)k * H * Il : ps.p[ids.w_hh[l]].offset + (size_t)(k - 4) * H * H;
            size_t b = k < 4 ? ps.p[ids.b_ih[l]].offset + (size_t)k * H : ps.p[ids.b_hh[l]].offset + (size_t)(k - 4) * H;
            bad += map.base + (size_t)loc[l * 8 + k].m_off != m || map.base + (size_t)loc[l * 8 + k].b_off != b;
        }
    t_check(bad == 0, "%d gate views misplaced", bad);
    t_check(map.base + wsf <= ps.numel, "the weight space lies inside the buffer");
    ct_params_free(&ps);
}

static void test_weight_map_fallback(void)
{
    t_case("gpu/lstm_weight_map_fallback");
    const int I = 3, H = 6, L = 2;   /* 4H = 24 floats: ctrain pads each view to 16 floats */
    ct_params ps;
    lstm_ids ids;
    build_lstm_params(&ps, &ids, I, H, L);
    for (size_t i = 0; i < ps.numel; i++) ps.data[i] = (float)i;   /* padding too: it must not be copied */
    lstm_wspace_loc loc[LSTM_MAX_LAYERS * 8];
    size_t wsf = lstm_wspace_loc_packed(loc, I, H, L);
    lstm_wspace_map map;
    t_check(lstm_wspace_map_make(&map, loc, wsf, &ps, &ids, I, H, L) == CT_OK, "map: %s", ct_last_error());
    t_check(map.direct == 0 && map.why[0], "padding must force the fallback");
    t_check(map.nseg >= 1 && map.nseg <= 4 * L, "%d segments: at most one per parameter view (%d)", map.nseg, 4 * L);
    float *ws = t_alloc(wsf), *want = t_alloc(wsf);
    lstm_wspace_pack(ws, ps.data, &map);
    for (int l = 0; l < L; l++)   /* cuDNN order: 8 matrices then 8 biases, from the named views */
        for (int k = 0; k < 8; k++) {
            const lstm_wspace_loc *c = &loc[l * 8 + k];
            const float *wv = ps.data + (k < 4 ? ps.p[ids.w_ih[l]].offset : ps.p[ids.w_hh[l]].offset);
            const float *bv = ps.data + (k < 4 ? ps.p[ids.b_ih[l]].offset : ps.p[ids.b_hh[l]].offset);
            for (long long j = 0; j < c->m_n; j++) want[c->m_off + j] = wv[(k % 4) * c->m_n + j];
            for (long long j = 0; j < c->b_n; j++) want[c->b_off + j] = bv[(k % 4) * H + j];
        }
    t_close("packed weight space", ws, want, wsf, 0.0);
    float *grad = t_alloc(ps.numel), *gwant = t_alloc(ps.numel);
    for (size_t i = 0; i < ps.numel; i++) grad[i] = gwant[i] = 0.5f;
    for (size_t i = 0; i < wsf; i++) ws[i] = (float)(i + 1);
    lstm_wspace_unpack_add(grad, ws, &map);
    for (int s = 0; s < map.nseg; s++)
        for (size_t j = 0; j < map.seg[s].n; j++) gwant[map.seg[s].flat + j] += (float)(map.seg[s].wspace + j + 1);
    t_close("unpacked gradients (accumulated)", grad, gwant, ps.numel, 0.0);
    int pad_touched = 0;   /* the dense layer and the padding keep 0.5 */
    for (size_t i = ps.p[ps.n - 1].offset; i < ps.numel; i++) pad_touched += grad[i] != 0.5f;
    t_check(pad_touched == 0, "unpack touched %d floats outside the LSTM", pad_touched);
    free(ws); free(want); free(grad); free(gwant);
    ct_params_free(&ps);
}

static void test_weight_map_other_layouts(void)
{
    t_case("gpu/lstm_weight_map_other_layouts");
    const int I = 8, H = 8, L = 1;
    ct_params ps;
    lstm_ids ids;
    build_lstm_params(&ps, &ids, I, H, L);
    lstm_wspace_loc loc[8];
    size_t wsf = lstm_wspace_loc_packed(loc, I, H, L);
    lstm_wspace_map map;
    /* biases first, then matrices: a valid layout, but not ctrain's -> fallback */
    lstm_wspace_loc re[8];
    for (int k = 0; k < 8; k++) {
        re[k] = loc[k];
        re[k].b_off = (long long)k * H;
        re[k].m_off = loc[k].m_off + 8LL * H;
    }
    t_check(lstm_wspace_map_make(&map, re, wsf, &ps, &ids, I, H, L) == CT_OK && !map.direct, "biases-first must fall back");
    t_check(strstr(map.why, "layer 0") != NULL, "reason names the first difference: %s", map.why);
    /* a gap between matrices (aligned regions) -> fallback */
    lstm_wspace_loc gap[8];
    long long off = 0;
    for (int k = 0; k < 8; k++) { gap[k] = loc[k]; gap[k].m_off = off; off += loc[k].m_n + 32; }
    for (int k = 0; k < 8; k++) { gap[k].b_off = off; off += H; }
    t_check(lstm_wspace_map_make(&map, gap, (size_t)off, &ps, &ids, I, H, L) == CT_OK && !map.direct, "gaps must fall back");
    /* wrong sizes, overlaps, outside the space: not an LSTM -> CT_EFORMAT */
    lstm_wspace_loc bad[8];
    memcpy(bad, loc, sizeof bad);
    bad[3].m_n = H * I + 1;
    t_check(lstm_wspace_map_make(&map, bad, wsf, &ps, &ids, I, H, L) == CT_EFORMAT, "wrong matrix size must be CT_EFORMAT");
    memcpy(bad, loc, sizeof bad);
    bad[2].b_off = bad[1].b_off;
    t_check(lstm_wspace_map_make(&map, bad, wsf, &ps, &ids, I, H, L) == CT_EFORMAT && strstr(ct_last_error(), "overlap"),
            "overlap must be CT_EFORMAT: %s", ct_last_error());
    t_check(lstm_wspace_map_make(&map, loc, wsf - 1, &ps, &ids, I, H, L) == CT_EFORMAT, "a region past the end must be CT_EFORMAT");
    ct_params_free(&ps);
}

static void test_args(void)
{
    t_case("gpu/argument_checks");
    lstm_dims d = { .B = 4, .T = 10, .I = 3, .H = 8, .L = 1, .ret = LSTM_RETURN_LAST, .recur = LSTM_SIGMOID };
    t_check(lstm_gpu_dims_check(&d) == CT_OK, "valid dims refused: %s", ct_last_error());
    d.recur = LSTM_HARD_SIGMOID;
    t_check(lstm_gpu_dims_check(&d) == CT_EINVAL && strstr(ct_last_error(), "hard_sigmoid") && strstr(ct_last_error(), "--device cpu"),
            "hard_sigmoid: %s", ct_last_error());
    d.recur = LSTM_SIGMOID;
    d.L = 0;
    t_check(lstm_gpu_dims_check(&d) == CT_EINVAL, "0 layers accepted");
    d.L = LSTM_MAX_LAYERS + 1;
    t_check(lstm_gpu_dims_check(&d) == CT_EINVAL, "too many layers accepted");
    d.L = 1;
    d.B = 0;
    t_check(lstm_gpu_dims_check(&d) == CT_EINVAL && strstr(ct_last_error(), "batch 0"), "batch 0: %s", ct_last_error());
}

/* ---- GPU cases ---- */

static const char *const gpu_cases[] = {
    "dense", "activation", "pair", "loss", "dropout", "optim", "clip_grad_norm", "lstm_fallback_layout",
    "lstm_stacked_masked", "lstm_T100", "lstm_return_modes", "conv2d", "pool", "batchnorm",
    "siamese_two_steps", "params_roundtrip",
};

#ifdef CT_HAVE_CUDA
#include "cuda/activation.h"
#include "cuda/batchnorm.h"
#include "cuda/conv2d.h"
#include "cuda/dense.h"
#include "cuda/kernels.h"
#include "cuda/lstm.h"
#include "cuda/pool.h"
#include "cuda/siamese_lstm_gpu.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/loss.h"
#include "layers/optim.h"
#include "layers/pair.h"
#include "layers/pool.h"
#include "models/siamese_lstm.h"

static void *dev_copy(const void *host, size_t bytes)
{
    void *d = NULL;
    CT_ASSERT(ct_gpu_malloc(&d, bytes ? bytes : 4, "test") == CT_OK);
    if (host && bytes) CT_ASSERT(ct_gpu_upload(d, host, bytes) == CT_OK);
    return d;
}
static float *devf(const float *host, size_t n) { return dev_copy(host, n * sizeof(float)); }
static float *hostf(const float *dev, size_t n)
{
    float *h = t_alloc(n);
    CT_ASSERT(ct_gpu_download(h, dev, n * sizeof(float)) == CT_OK);
    return h;
}
static float *rnd(size_t n, float lo, float hi, ct_rng *r) { float *x = t_alloc(n); t_fill_uniform(x, n, lo, hi, r); return x; }
/* compares a device array with a host reference */
static void close_dev(const char *what, const float *dev, const float *ref, size_t n, double tol)
{
    float *h = hostf(dev, n);
    t_close(what, h, ref, n, tol);
    free(h);
}

static void gpu_dense(ct_rng *r)
{
    t_case("gpu/dense");
    const int B = 5, In = 7, O = 3;
    float *x = rnd((size_t)B * In, -1, 1, r), *w = rnd((size_t)O * In, -1, 1, r), *b = rnd(O, -1, 1, r);
    float *dout = rnd((size_t)B * O, -1, 1, r), *dw = rnd((size_t)O * In, -1, 1, r), *db = rnd(O, -1, 1, r);
    float *out = t_alloc((size_t)B * O), *din = t_alloc((size_t)B * In);
    float *gx = devf(x, (size_t)B * In), *gw = devf(w, (size_t)O * In), *gb = devf(b, O), *gdout = devf(dout, (size_t)B * O);
    float *gdw = devf(dw, (size_t)O * In), *gdb = devf(db, O), *gout = devf(NULL, (size_t)B * O), *gdin = devf(NULL, (size_t)B * In);
    dense_forward(out, x, w, b, B, In, O);
    dense_backward(din, dw, db, dout, x, w, B, In, O);
    dense_forward_gpu(gout, gx, gw, gb, B, In, O);
    dense_backward_gpu(gdin, gdw, gdb, gdout, gx, gw, B, In, O);
    close_dev("out", gout, out, (size_t)B * O, 2e-5);
    close_dev("din", gdin, din, (size_t)B * In, 2e-5);
    close_dev("dw (accumulated)", gdw, dw, (size_t)O * In, 2e-5);
    close_dev("db (accumulated)", gdb, db, O, 2e-5);
    void *dv[] = { gx, gw, gb, gdout, gdw, gdb, gout, gdin };
    for (size_t i = 0; i < 8; i++) ct_gpu_free(dv[i]);
    free(x); free(w); free(b); free(dout); free(dw); free(db); free(out); free(din);
}

static void gpu_activation(ct_rng *r)
{
    t_case("gpu/activation");
    const size_t n = 1000;
    float *x = rnd(n, -6, 6, r), *dout = rnd(n, -1, 1, r), *y = t_alloc(n), *dx = t_alloc(n);
    float *gx = devf(x, n), *gd = devf(dout, n), *gy = devf(NULL, n), *gdx = devf(NULL, n);
    void (*fc[3])(float *, const float *, size_t) = { relu_forward, tanh_forward, sigmoid_forward };
    void (*bc[3])(float *, const float *, const float *, size_t) = { relu_backward, tanh_backward, sigmoid_backward };
    void (*fg[3])(float *, const float *, size_t) = { relu_forward_gpu, tanh_forward_gpu, sigmoid_forward_gpu };
    void (*bg[3])(float *, const float *, const float *, size_t) = { relu_backward_gpu, tanh_backward_gpu, sigmoid_backward_gpu };
    const char *names[3] = { "relu", "tanh", "sigmoid" };
    for (int k = 0; k < 3; k++) {
        char what[64];
        fc[k](y, x, n); bc[k](dx, dout, y, n);
        fg[k](gy, gx, n); bg[k](gdx, gd, gy, n);
        snprintf(what, sizeof what, "%s forward", names[k]); close_dev(what, gy, y, n, 1e-6);
        snprintf(what, sizeof what, "%s backward", names[k]); close_dev(what, gdx, dx, n, 1e-6);
    }
    ct_gpu_free(gx); ct_gpu_free(gd); ct_gpu_free(gy); ct_gpu_free(gdx);
    free(x); free(dout); free(y); free(dx);
}

static void gpu_pair(ct_rng *r)
{
    t_case("gpu/pair");
    const int B = 6, D = 37;
    float *a = rnd((size_t)B * D, -1, 1, r), *b = rnd((size_t)B * D, -1, 1, r), *dd = rnd(B, -1, 1, r);
    memcpy(b + 2 * D, a + 2 * D, D * sizeof(float));   /* pair 2: distance at the eps floor */
    float *d = t_alloc(B), *da = t_alloc((size_t)B * D), *db = t_alloc((size_t)B * D);
    float *ga = devf(a, (size_t)B * D), *gb = devf(b, (size_t)B * D), *gdd = devf(dd, B), *gd = devf(NULL, B);
    float *gda = devf(NULL, (size_t)B * D), *gdb = devf(NULL, (size_t)B * D);
    euclidean_forward(d, a, b, B, D, CT_KERAS_EPSILON);
    euclidean_backward(da, db, dd, d, a, b, B, D, CT_KERAS_EPSILON);
    euclidean_forward_gpu(gd, ga, gb, B, D, CT_KERAS_EPSILON);
    euclidean_backward_gpu(gda, gdb, gdd, gd, ga, gb, B, D, CT_KERAS_EPSILON);
    close_dev("euclidean d", gd, d, B, 1e-6);
    close_dev("euclidean da", gda, da, (size_t)B * D, 1e-6);
    close_dev("euclidean db", gdb, db, (size_t)B * D, 1e-6);
    size_t n = (size_t)B * D;
    float *dout = rnd(n, -1, 1, r), *out = t_alloc(n);
    float *gdout = devf(dout, n), *gout = devf(NULL, n);
    absdiff_forward(out, a, b, n);
    absdiff_backward(da, db, dout, a, b, n);
    absdiff_forward_gpu(gout, ga, gb, n);
    absdiff_backward_gpu(gda, gdb, gdout, ga, gb, n);
    close_dev("absdiff out", gout, out, n, 0);
    close_dev("absdiff da", gda, da, n, 0);
    close_dev("absdiff db", gdb, db, n, 0);
    void *dv[] = { ga, gb, gdd, gd, gda, gdb, gdout, gout };
    for (size_t i = 0; i < 8; i++) ct_gpu_free(dv[i]);
    free(a); free(b); free(dd); free(d); free(da); free(db); free(dout); free(out);
}

static void gpu_loss(ct_rng *r)
{
    t_case("gpu/loss");
    const int B = 300, C = 7;
    float *d = rnd(B, 0, 1.5f, r), *y = t_alloc(B), *z = rnd(B, -4, 4, r), *logits = rnd((size_t)B * C, -3, 3, r);
    int *lab = malloc(B * sizeof(int));
    for (int k = 0; k < B; k++) { y[k] = (float)(k % 3 == 0); lab[k] = (int)ct_rng_below(r, C); }
    float *gd = devf(d, B), *gy = devf(y, B), *gz = devf(z, B), *gl = devf(logits, (size_t)B * C);
    int *glab = dev_copy(lab, B * sizeof(int));
    float *g1 = devf(NULL, (size_t)B * C), *g2 = devf(NULL, (size_t)B * C), *h1 = t_alloc((size_t)B * C), *h2 = t_alloc((size_t)B * C);
    float v, w;
    v = contrastive_forward(d, y, B, 1.0f); w = contrastive_forward_gpu(gd, gy, B, 1.0f); t_close("contrastive loss", &w, &v, 1, 1e-6);
    v = contrastive_accuracy(d, y, B, 0.5f); w = contrastive_accuracy_gpu(gd, gy, B, 0.5f); t_close("contrastive accuracy", &w, &v, 1, 0);
    contrastive_backward(h1, d, y, B, 1.0f); contrastive_backward_gpu(g1, gd, gy, B, 1.0f); close_dev("contrastive dd", g1, h1, B, 1e-6);
    v = bce_logits_forward(z, y, B); w = bce_logits_forward_gpu(gz, gy, B); t_close("bce loss", &w, &v, 1, 1e-6);
    v = bce_logits_accuracy(z, y, B); w = bce_logits_accuracy_gpu(gz, gy, B); t_close("bce accuracy", &w, &v, 1, 0);
    bce_logits_backward(h1, z, y, B); bce_logits_backward_gpu(g1, gz, gy, B); close_dev("bce dz", g1, h1, B, 1e-6);
    v = softmax_ce_forward(h1, logits, lab, B, C); w = softmax_ce_forward_gpu(g1, gl, glab, B, C); t_close("softmax-ce loss", &w, &v, 1, 1e-6);
    close_dev("softmax prob", g1, h1, (size_t)B * C, 1e-6);
    softmax_ce_backward(h2, h1, lab, B, C); softmax_ce_backward_gpu(g2, g1, glab, B, C); close_dev("softmax dlogits", g2, h2, (size_t)B * C, 1e-6);
    v = softmax_ce_accuracy(logits, lab, B, C); w = softmax_ce_accuracy_gpu(gl, glab, B, C); t_close("softmax accuracy", &w, &v, 1, 0);
    float stats[2], *gs = devf(NULL, 2);
    contrastive_stats_gpu(gs, gd, gy, B, 1.0f, 0.5f);
    CT_ASSERT(ct_gpu_download(stats, gs, sizeof stats) == CT_OK);
    float want[2] = { contrastive_forward(d, y, B, 1.0f), contrastive_accuracy(d, y, B, 0.5f) * B };
    t_close("contrastive stats", stats, want, 2, 1e-6);
    void *dv[] = { gd, gy, gz, gl, glab, g1, g2, gs };
    for (size_t i = 0; i < 8; i++) ct_gpu_free(dv[i]);
    free(d); free(y); free(z); free(logits); free(lab); free(h1); free(h2);
}

static void gpu_dropout(ct_rng *r)
{
    t_case("gpu/dropout");
    const size_t n = 4099;
    const float p = 0.3f;
    float *x = rnd(n, -1, 1, r), *mask = t_alloc(n), *out = t_alloc(n);
    float *gx = devf(x, n), *gm = devf(NULL, n), *go = devf(NULL, n);
    ct_rng s1, s2;
    ct_rng_seed(&s1, 99, CT_STREAM_DROPOUT);
    s2 = s1;
    dropout_forward_gpu(go, gm, gx, n, p, 1, &s1);
    uint64_t seed = ct_dropout_seed_draw(&s2);
    t_check(s1.state == s2.state, "the GPU call advanced the stream by two draws");
    ct_dropout_mask_ref(mask, n, p, seed);
    dropout_apply(out, mask, x, n);
    close_dev("mask (exact)", gm, mask, n, 0);
    close_dev("out", go, out, n, 0);
    dropout_backward_gpu(go, gx, gm, n);
    close_dev("backward", go, out, n, 0);
    uint64_t before = s1.state;
    dropout_forward_gpu(go, gm, gx, n, p, 0, &s1);
    t_check(s1.state == before, "evaluation draws nothing");
    close_dev("eval identity", go, x, n, 0);
    ct_gpu_free(gx); ct_gpu_free(gm); ct_gpu_free(go);
    free(x); free(mask); free(out);
}

static void gpu_optim(ct_rng *r)
{
    t_case("gpu/optim");
    const size_t n = 5000;
    ct_optim_config cfgs[7];
    cfgs[0] = ct_optim_defaults(OPT_SGD);
    cfgs[1] = ct_optim_defaults(OPT_SGD); cfgs[1].momentum = 0.9f; cfgs[1].weight_decay = 0.01f;
    cfgs[2] = cfgs[1]; cfgs[2].nesterov = 1;
    cfgs[3] = ct_optim_defaults(OPT_RMSPROP); cfgs[3].weight_decay = 0.001f;
    cfgs[4] = ct_optim_defaults(OPT_ADAM); cfgs[4].weight_decay = 0.01f;
    cfgs[5] = ct_optim_defaults(OPT_ADAMW);
    cfgs[6] = ct_optim_defaults(OPT_ADAM); cfgs[6].clip_norm = 0.5f;
    for (int c = 0; c < 7; c++) {
        float *p = rnd(n, -1, 1, r), *g0 = rnd(n, -1, 1, r), *g = t_alloc(n);
        ct_optim o;
        ct_optim_gpu og;
        CT_ASSERT(ct_optim_init(&o, &cfgs[c], n) == CT_OK);
        t_check(ct_optim_init_gpu(&og, &cfgs[c], n) == CT_OK, "init: %s", ct_last_error());
        float *gp = devf(p, n), *gg = devf(NULL, n);
        for (int s = 0; s < 3; s++) {
            for (size_t i = 0; i < n; i++) g[i] = g0[i] * (float)(s + 1);
            CT_ASSERT(ct_gpu_upload(gg, g, n * sizeof(float)) == CT_OK);
            ct_optim_step(&o, p, g, 1e-2f);
            ct_optim_step_gpu(&og, gp, gg, 1e-2f);
        }
        char what[64];
        snprintf(what, sizeof what, "%s config %d params", ct_optim_name(cfgs[c].kind), c);
        close_dev(what, gp, p, n, 1e-6);
        if (o.m) { snprintf(what, sizeof what, "config %d m", c); close_dev(what, og.m, o.m, n, 1e-6); }
        if (o.v) { snprintf(what, sizeof what, "config %d v", c); close_dev(what, og.v, o.v, n, 1e-6); }
        ct_optim_free(&o); ct_optim_free_gpu(&og);
        ct_gpu_free(gp); ct_gpu_free(gg);
        free(p); free(g0); free(g);
    }
    ct_optim_gpu bad;
    ct_optim_config bc = ct_optim_defaults(OPT_ADAM);
    bc.lr = -1;
    t_check(ct_optim_init_gpu(&bad, &bc, 10) == CT_EINVAL, "negative lr must be refused as on the CPU");
}

static void gpu_clip(ct_rng *r)
{
    t_case("gpu/clip_grad_norm");
    const size_t n = 100003;
    float *g = rnd(n, -1, 1, r);
    float *gg = devf(g, n);
    float want = ct_clip_grad_norm(g, n, 3.0f), got = ct_clip_grad_norm_gpu(gg, n, 3.0f);
    t_close("norm", &got, &want, 1, 1e-6);
    close_dev("clipped", gg, g, n, 1e-6);
    ct_gpu_free(gg);
    free(g);
}

/* One LSTM configuration, GPU vs CPU: out, dx and every parameter gradient. */
static void lstm_case(ct_rng *r, int B, int T, int I, int H, int L, lstm_return ret, int masked, double tol_f, double tol_b,
                      int want_direct)
{
    lstm_dims d = { .B = B, .T = T, .I = I, .H = H, .L = L, .ret = ret, .recur = LSTM_SIGMOID };
    ct_params ps;
    lstm_ids ids;
    ct_params_init(&ps);
    CT_ASSERT(lstm_params_add(&ids, &ps, "lstm", I, H, L) == CT_OK && ct_params_alloc(&ps) == CT_OK);
    ct_params_initialize(&ps, r);
    for (size_t i = 0; i < ps.numel; i++) ps.grad[i] = 0.0f;
    size_t nx = (size_t)B * T * I, nout = ret == LSTM_RETURN_SEQUENCE ? (size_t)B * T * H : (size_t)B * H;
    float *x = rnd(nx, -1, 1, r), *dout = rnd(nout, -1, 1, r), *out = t_alloc(nout), *dx = t_alloc(nx);
    int *len = NULL;
    if (masked) {
        len = malloc(B * sizeof(int));
        for (int b = 0; b < B; b++) len[b] = b == 0 ? T : 1 + (int)ct_rng_below(r, T);
    }
    float *cache = t_alloc(lstm_cache_floats(&d)), *ws = t_alloc(lstm_workspace_floats(&d));
    lstm_weights lw[LSTM_MAX_LAYERS];
    lstm_grads lg[LSTM_MAX_LAYERS];
    lstm_params_view(lw, lg, &ps, &ids);
    lstm_forward(out, cache, x, len, lw, &d);
    lstm_backward(dx, lg, ws, dout, cache, x, len, lw, &d);

    float *gp = devf(ps.data, ps.numel), *gg = devf(NULL, ps.numel), *gx = devf(x, nx), *gdout = devf(dout, nout);
    float *gout = devf(NULL, nout), *gdx = devf(NULL, nx);
    int *glen = len ? dev_copy(len, B * sizeof(int)) : NULL;
    lstm_gpu plan;
    ct_status st = lstm_plan_gpu(&plan, &d, &ps, &ids, gp);
    t_check(st == CT_OK, "plan: %s", ct_last_error());
    if (st == CT_OK) {
        t_check(plan.map.direct == want_direct, "weight space %s, expected %s (%s)", plan.map.direct ? "direct" : "packed",
                want_direct ? "direct" : "packed", plan.map.why);
        lstm_forward_gpu(gout, &plan, gx, glen, len, gp, &d);
        lstm_backward_gpu(gdx, gg, &plan, gdout, gx, glen, len, gp, &d);
        t_check(ct_gpu_sync() == CT_OK, "sync: %s", ct_last_error());
        close_dev("out", gout, out, nout, tol_f);
        close_dev("dx", gdx, dx, nx, tol_b);
        close_dev("parameter gradients", gg, ps.grad, ps.numel, tol_b);
        /* accumulation: a second backward doubles the gradients */
        lstm_backward_gpu(gdx, gg, &plan, gdout, gx, glen, len, gp, &d);
        for (size_t i = 0; i < ps.numel; i++) ps.grad[i] *= 2.0f;
        close_dev("gradients accumulate", gg, ps.grad, ps.numel, tol_b);
        lstm_plan_free_gpu(&plan);
    }
    void *dv[] = { gp, gg, gx, gdout, gout, gdx, glen };
    for (size_t i = 0; i < 7; i++) ct_gpu_free(dv[i]);
    free(x); free(dout); free(out); free(dx); free(len); free(cache); free(ws);
    ct_params_free(&ps);
}

static void gpu_lstm(ct_rng *r)
{
    t_case("gpu/lstm_fallback_layout");          /* H = 6: ctrain pads, cuDNN does not -> packed */
    lstm_case(r, 3, 5, 4, 6, 1, LSTM_RETURN_LAST, 0, 2e-5, 1e-4, 0);
    t_case("gpu/lstm_stacked_masked");
    lstm_case(r, 5, 12, 7, 16, 2, LSTM_RETURN_LAST, 1, 2e-5, 1e-4, 1);
    t_case("gpu/lstm_T100");                     /* the seed's sizes: 40 mels, 100 frames, 128 units */
    lstm_case(r, 16, 100, 40, 128, 1, LSTM_RETURN_LAST, 1, 1e-4, 5e-4, 1);
    t_case("gpu/lstm_return_modes");
    lstm_case(r, 4, 9, 5, 8, 2, LSTM_RETURN_SEQUENCE, 1, 2e-5, 1e-4, 1);
    lstm_case(r, 4, 9, 5, 8, 1, LSTM_RETURN_MEAN, 1, 2e-5, 1e-4, 1);
    lstm_case(r, 1, 1, 3, 4, 1, LSTM_RETURN_LAST, 0, 2e-5, 1e-4, 1);   /* batch 1, T = 1 */
}

static void gpu_conv2d(ct_rng *r)
{
    t_case("gpu/conv2d");
    conv2d_dims d;
    CT_ASSERT(conv2d_dims_make(&d, 2, 3, 9, 8, 4, 3, 3, 2, 1) == CT_OK);
    size_t nin = (size_t)d.N * d.C * d.H * d.W, nout = (size_t)d.N * d.OC * d.OH * d.OW, nw = (size_t)d.OC * d.C * d.KH * d.KW;
    float *x = rnd(nin, -1, 1, r), *w = rnd(nw, -1, 1, r), *b = rnd(d.OC, -1, 1, r), *dout = rnd(nout, -1, 1, r);
    float *dw = rnd(nw, -1, 1, r), *db = rnd(d.OC, -1, 1, r), *out = t_alloc(nout), *din = t_alloc(nin);
    float *ws = t_alloc(conv2d_workspace_floats(&d));
    conv2d_forward(out, ws, x, w, b, &d);
    float *gdw = devf(dw, nw), *gdb = devf(db, d.OC);
    conv2d_backward(din, dw, db, ws, dout, x, w, &d);
    conv2d_gpu_plan p;
    t_check(conv2d_plan_gpu(&p, &d, 1) == CT_OK, "plan: %s", ct_last_error());
    float *gx = devf(x, nin), *gw = devf(w, nw), *gb = devf(b, d.OC), *gdout = devf(dout, nout);
    float *gout = devf(NULL, nout), *gdin = devf(NULL, nin), *gws = devf(NULL, conv2d_workspace_floats_gpu(&p) + 1);
    conv2d_forward_gpu(gout, gws, gx, gw, gb, &p);
    conv2d_backward_gpu(gdin, gdw, gdb, gws, gdout, gx, gw, &p);
    close_dev("out", gout, out, nout, 2e-5);
    close_dev("din", gdin, din, nin, 2e-5);
    close_dev("dw (accumulated)", gdw, dw, nw, 2e-5);
    close_dev("db (accumulated)", gdb, db, d.OC, 2e-5);
    conv2d_plan_free_gpu(&p);
    void *dv[] = { gdw, gdb, gx, gw, gb, gdout, gout, gdin, gws };
    for (size_t i = 0; i < 9; i++) ct_gpu_free(dv[i]);
    free(x); free(w); free(b); free(dout); free(dw); free(db); free(out); free(din); free(ws);
}

static void gpu_pool(ct_rng *r)
{
    t_case("gpu/pool");
    maxpool2d_dims d;
    CT_ASSERT(maxpool2d_dims_make(&d, 2, 3, 9, 7, 3, 2) == CT_OK);   /* overlapping windows */
    size_t nin = (size_t)d.N * d.C * d.H * d.W, nout = (size_t)d.N * d.C * d.OH * d.OW;
    float *x = rnd(nin, -1, 1, r), *dout = rnd(nout, -1, 1, r), *out = t_alloc(nout), *din = t_alloc(nin);
    int *am = malloc(nout * sizeof(int)), *gam_h = malloc(nout * sizeof(int));
    maxpool2d_forward(out, am, x, &d);
    maxpool2d_backward(din, dout, am, &d);
    float *gx = devf(x, nin), *gdout = devf(dout, nout), *gout = devf(NULL, nout), *gdin = devf(NULL, nin);
    int *gam = dev_copy(NULL, nout * sizeof(int));
    maxpool2d_forward_gpu(gout, gam, gx, &d);
    maxpool2d_backward_gpu(gdin, gdout, gam, &d);
    close_dev("maxpool out", gout, out, nout, 0);
    close_dev("maxpool din", gdin, din, nin, 1e-6);
    CT_ASSERT(ct_gpu_download(gam_h, gam, nout * sizeof(int)) == CT_OK);
    t_check(memcmp(gam_h, am, nout * sizeof(int)) == 0, "argmax differs");
    const int N = 2, C = 3, HW = 63;
    global_avgpool_forward(out, x, N, C, HW);
    global_avgpool_backward(din, dout, N, C, HW);
    global_avgpool_forward_gpu(gout, gx, N, C, HW);
    global_avgpool_backward_gpu(gdin, gdout, N, C, HW);
    close_dev("avgpool out", gout, out, (size_t)N * C, 1e-6);
    close_dev("avgpool din", gdin, din, (size_t)N * C * HW, 1e-6);
    void *dv[] = { gx, gdout, gout, gdin, gam };
    for (size_t i = 0; i < 5; i++) ct_gpu_free(dv[i]);
    free(x); free(dout); free(out); free(din); free(am); free(gam_h);
}

static void gpu_batchnorm(ct_rng *r)
{
    t_case("gpu/batchnorm");
    batchnorm_dims d = { .N = 4, .C = 3, .HW = 5, .eps = 1e-5f, .momentum = 0.1f };
    size_t n = (size_t)d.N * d.C * d.HW;
    float *x = rnd(n, -2, 2, r), *gam = rnd(d.C, 0.5f, 1.5f, r), *bet = rnd(d.C, -1, 1, r), *dout = rnd(n, -1, 1, r);
    float *rm = rnd(d.C, -0.1f, 0.1f, r), *rv = rnd(d.C, 0.9f, 1.1f, r);
    float *out = t_alloc(n), *xh = t_alloc(n), *mean = t_alloc(d.C), *is = t_alloc(d.C), *din = t_alloc(n);
    float *dg = rnd(d.C, -1, 1, r), *dbt = rnd(d.C, -1, 1, r);
    float *g_x = devf(x, n), *g_gam = devf(gam, d.C), *g_bet = devf(bet, d.C), *g_dout = devf(dout, n), *g_rm = devf(rm, d.C);
    float *g_rv = devf(rv, d.C), *g_out = devf(NULL, n), *g_xh = devf(NULL, n), *g_mean = devf(NULL, d.C), *g_is = devf(NULL, d.C);
    float *g_din = devf(NULL, n), *g_dg = devf(dg, d.C), *g_db = devf(dbt, d.C);
    for (int train = 1; train >= 0; train--) {
        batchnorm_forward(out, xh, mean, is, rm, rv, x, gam, bet, &d, train);
        batchnorm_forward_gpu(g_out, g_xh, g_mean, g_is, g_rm, g_rv, g_x, g_gam, g_bet, &d, train);
        close_dev(train ? "train out" : "eval out", g_out, out, n, 1e-6);
        close_dev("xhat", g_xh, xh, n, 1e-6);
        close_dev("mean", g_mean, mean, d.C, 1e-6);
        close_dev("invstd", g_is, is, d.C, 1e-6);
        close_dev("running_mean", g_rm, rm, d.C, 1e-6);
        close_dev("running_var", g_rv, rv, d.C, 1e-6);
    }
    batchnorm_forward(out, xh, mean, is, rm, rv, x, gam, bet, &d, 1);
    batchnorm_forward_gpu(g_out, g_xh, g_mean, g_is, g_rm, g_rv, g_x, g_gam, g_bet, &d, 1);
    batchnorm_backward(din, dg, dbt, dout, xh, is, gam, &d);
    batchnorm_backward_gpu(g_din, g_dg, g_db, g_dout, g_xh, g_is, g_gam, &d);
    close_dev("din", g_din, din, n, 1e-5);
    close_dev("dgamma (accumulated)", g_dg, dg, d.C, 1e-5);
    close_dev("dbeta (accumulated)", g_db, dbt, d.C, 1e-5);
    void *dv[] = { g_x, g_gam, g_bet, g_dout, g_rm, g_rv, g_out, g_xh, g_mean, g_is, g_din, g_dg, g_db };
    for (size_t i = 0; i < 13; i++) ct_gpu_free(dv[i]);
    free(x); free(gam); free(bet); free(dout); free(rm); free(rv); free(out); free(xh); free(mean); free(is); free(din);
    free(dg); free(dbt);
}

/* Two training steps of the siamese model, GPU vs CPU (SGD with momentum, so the
 * update is linear in the gradient and float rounding cannot flip it), the second
 * batch uploaded while the first is still being trained (the double buffer). */
static void gpu_siamese(ct_rng *r)
{
    t_case("gpu/siamese_two_steps");
    siamese_lstm_config cfg = siamese_lstm_defaults();
    cfg.n_mels = 8; cfg.frames = 12; cfg.hidden = 16; cfg.embed = 8;
    const int B = 4;
    siamese_lstm cpu, host;
    CT_ASSERT(siamese_lstm_build(&cpu, &cfg) == CT_OK && siamese_lstm_build(&host, &cfg) == CT_OK);
    siamese_lstm_init_weights(&cpu, r);
    memcpy(host.params.data, cpu.params.data, cpu.params.numel * sizeof(float));
    CT_ASSERT(siamese_lstm_plan(&cpu, B) == CT_OK);
    ct_optim_config oc = ct_optim_defaults(OPT_SGD);
    oc.lr = 0.1f; oc.momentum = 0.9f;
    ct_optim o;
    CT_ASSERT(ct_optim_init(&o, &oc, cpu.params.numel) == CT_OK);
    siamese_lstm_gpu g;
    ct_status st = siamese_lstm_gpu_create(&g, &host, B, &oc);
    t_check(st == CT_OK, "create: %s", ct_last_error());
    if (st != CT_OK) { siamese_lstm_gpu_free(&g); ct_optim_free(&o); siamese_lstm_free(&cpu); siamese_lstm_free(&host); return; }
    size_t nx = (size_t)2 * B * cfg.frames * cfg.n_mels;
    float *x[2] = { rnd(nx, -1, 1, r), rnd(nx, -1, 1, r) }, y[2][4] = { { 1, 0, 1, 0 }, { 0, 0, 1, 1 } };
    int len[2][8] = { { 12, 5, 12, 9, 1, 12, 7, 12 }, { 12, 12, 12, 12, 3, 4, 5, 6 } };
    float cpu_loss[2];
    int cpu_correct[2];
    for (int s = 0; s < 2; s++) {
        ct_params_zero_grad(&cpu.params);
        cpu_loss[s] = siamese_lstm_forward(&cpu, x[s], len[s], y[s], B, &cpu_correct[s]);
        siamese_lstm_backward(&cpu, x[s], len[s], y[s], B);
        if (s == 0) {   /* keep step 1's gradient to compare */
            memcpy(host.params.grad, cpu.params.grad, cpu.params.numel * sizeof(float));
        }
        ct_optim_step(&o, cpu.params.data, cpu.params.grad, oc.lr);
    }
    float *grad1 = t_alloc(cpu.params.numel);
    memcpy(grad1, host.params.grad, cpu.params.numel * sizeof(float));
    int correct;
    siamese_lstm_upload_gpu(&g, x[0], len[0], y[0], B);
    float l0 = siamese_lstm_forward_gpu(&g, B, &correct);
    t_close("loss, step 1", &l0, &cpu_loss[0], 1, 1e-5);
    t_check(correct == cpu_correct[0], "correct %d vs %d", correct, cpu_correct[0]);
    siamese_lstm_upload_gpu(&g, x[1], len[1], y[1], B);   /* next batch while batch 1 is still needed */
    siamese_lstm_backward_gpu(&g, 0 + B);
    t_check(siamese_lstm_gpu_download_grad(&g) == CT_OK, "download: %s", ct_last_error());
    t_close("gradients, step 1", host.params.grad, grad1, cpu.params.numel, 1e-4);
    siamese_lstm_step_gpu(&g, oc.lr);
    float l1 = siamese_lstm_forward_gpu(&g, B, &correct);
    t_close("loss, step 2", &l1, &cpu_loss[1], 1, 1e-4);
    siamese_lstm_backward_gpu(&g, B);
    siamese_lstm_step_gpu(&g, oc.lr);
    t_check(siamese_lstm_gpu_download_params(&g) == CT_OK, "download: %s", ct_last_error());
    t_close("parameters after two steps", host.params.data, cpu.params.data, cpu.params.numel, 1e-4);
    siamese_lstm_gpu_free(&g);
    ct_optim_free(&o);
    siamese_lstm_free(&cpu);
    siamese_lstm_free(&host);
    free(x[0]); free(x[1]); free(grad1);
}

static void gpu_params_roundtrip(ct_rng *r)
{
    t_case("gpu/params_roundtrip");
    siamese_lstm_config cfg = siamese_lstm_defaults();
    cfg.n_mels = 5; cfg.frames = 4; cfg.hidden = 12; cfg.embed = 3; cfg.layers = 2;
    siamese_lstm m;
    CT_ASSERT(siamese_lstm_build(&m, &cfg) == CT_OK);
    siamese_lstm_init_weights(&m, r);
    size_t n = m.params.numel;
    float *orig = t_alloc(n);
    memcpy(orig, m.params.data, n * sizeof(float));
    siamese_lstm_gpu g;
    ct_status st = siamese_lstm_gpu_create(&g, &m, 2, NULL);   /* uploads */
    t_check(st == CT_OK, "create: %s", ct_last_error());
    if (st == CT_OK) {
        memset(m.params.data, 0, n * sizeof(float));
        t_check(siamese_lstm_gpu_download_params(&g) == CT_OK, "download");
        t_check(memcmp(m.params.data, orig, n * sizeof(float)) == 0, "device -> host is not bit-identical");
        for (size_t i = 0; i < n; i++) m.params.data[i] = orig[i] * 0.5f;   /* "load a checkpoint" */
        t_check(siamese_lstm_gpu_upload_params(&g) == CT_OK, "upload");
        memset(m.params.data, 0, n * sizeof(float));
        t_check(siamese_lstm_gpu_download_params(&g) == CT_OK, "download");
        int bad = 0;
        for (size_t i = 0; i < n; i++) bad += m.params.data[i] != orig[i] * 0.5f;
        t_check(bad == 0, "%d floats changed in host -> device -> host", bad);
    }
    siamese_lstm_gpu_free(&g);
    siamese_lstm_free(&m);
    free(orig);
}

static void run_gpu_cases(void)
{
    ct_rng r;
    ct_rng_seed(&r, 20240611, 77);
    char line[512];
    ct_gpu_describe(line, sizeof line);
    printf("  %s\n", line);
    gpu_dense(&r); gpu_activation(&r); gpu_pair(&r); gpu_loss(&r); gpu_dropout(&r); gpu_optim(&r); gpu_clip(&r);
    gpu_lstm(&r); gpu_conv2d(&r); gpu_pool(&r); gpu_batchnorm(&r); gpu_siamese(&r); gpu_params_roundtrip(&r);
}
#endif /* CT_HAVE_CUDA */

void suite_gpu(void)
{
    test_device_parse();
    test_dropout_counter_rng();
    test_weight_map_direct();
    test_weight_map_fallback();
    test_weight_map_other_layouts();
    test_args();
    ct_gpu_options opt = { .tf32 = 0, .deterministic = 1 };
    ct_status st = ct_gpu_open(0, &opt);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", st == CT_OK ? "" : ct_last_error());
    if (st != CT_OK) {
        test_device_open_error(msg, st);
        int has_prefix = strncmp(msg, "no NVIDIA GPU found", 19) == 0;   /* a CUDA build says it already */
        for (size_t i = 0; i < sizeof gpu_cases / sizeof gpu_cases[0]; i++)
            t_skip(has_prefix ? "gpu/%s: %s" : "gpu/%s: no NVIDIA GPU found (%s)", gpu_cases[i], msg);
        return;
    }
#ifdef CT_HAVE_CUDA
    run_gpu_cases();
#endif
    ct_gpu_close();
}
