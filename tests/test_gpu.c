/* test_gpu.c - the GPU backend (cuda/) against the CPU, through the two backends
 * and their tables of operations (layers/ops.h).
 *
 * Host-side cases run in every build and on every machine: --device parsing, the
 * error a machine without a GPU (or a CPU-only build) gives, the counter-based
 * dropout RNG, the cuDNN weight-space mapping of the LSTM, argument checks.
 *
 * GPU cases are table-driven: every case is ONE function that draws its inputs
 * from a seeded stream, runs on the backend it is given and brings its outputs to
 * the host. The harness runs it on ct_cpu_backend and on a GPU backend with the
 * same seed and compares every output with the tolerance the case states. The
 * same goes for the models: a training step of each model (siamese-lstm with
 * both pools, siamese-cnn, the cnn) runs the model's one code on both backends.
 * Buffers a function must overwrite (input gradients, outputs) start as NaN, so a
 * value it forgets to write shows. With no usable GPU the GPU cases are not run
 * and not counted: each prints
 *   SKIP gpu/<name>: no NVIDIA GPU found (<reason>)
 * Tolerances (normalised max error, see tests/test.h): 1e-6 for elementwise kernels,
 * losses and optimizers; 2e-5 for sgemm and convolutions (summation order differs);
 * LSTM 2e-5 forward / 1e-4 gradients for T <= 12 and 1e-4 / 5e-4 at T = 100 (BPTT
 * sums 100 steps of differently-ordered products); a model's training step 1e-4;
 * with TF32 allowed 5e-3 (10-bit mantissas); dropout masks exactly.
 *
 * bf16 (mixed precision) cases ("bf16/..."): the GPU backend opened with math.dtype =
 * CT_BF16 against the CPU's bf16 layers on the C model of the AMX tiles
 * (ct_gemm_bf16_use_model, layers/gemm_bf16.h) AND against the FP32 GPU layers. Dense
 * and conv2d are checked element by element against the bound (2) of gemm_bf16.h,
 * scaled by each element's own S = sum_k |a_k| |b_k| (S computed by the FP32 CPU layer on
 * the absolute values of the operands); the LSTM with gemm_bf16's many-steps tolerance of
 * tests/test_lstm_bf16.c, 2^-4 of each tensor's largest entry; a short siamese-lstm
 * training through the CLI with losses within 5% of FP32's. Each prints the errors it
 * measured. Those bounds hold for an FP32 result too, so each layer's output must also
 * differ from the FP32 GPU layer's somewhere (its operands were rounded: the bf16 path
 * ran). A GPU that cannot compute bf16 (compute capability < 8.0 or cuDNN < 9.13)
 * refuses the backend: the bf16 cases are then skipped with its one-line reason.
 *
 * CT_GPU_CASES="a,b" runs only the compared cases whose name holds a or b (to narrow
 * down a failure under a sanitizer); the others are neither run nor counted. A part
 * written "-c" leaves out the cases whose name holds c: "-tf32/lstm" runs all but those.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/bf16.h"
#include "core/params.h"
#include "core/peak.h"
#include "cuda/counter_rng.h"
#include "cuda/device.h"
#include "cuda/lstm_map.h"
#include "cuda/ops_gpu.h"
#include "layers/gemm_bf16.h"
#include "layers/lstm.h"
#include "layers/ops.h"
#include "layers/pair.h"
#include "train/image_task.h"
#include "models/seq_cnn.h"
#include "models/siamese_cnn.h"
#include "models/siamese_lstm.h"
#include "io/weights.h"

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
    char line[512];
    ct_gpu_describe(NULL, NULL, line, sizeof line);
    t_check(strncmp(line, "GPU", 3) == 0, "header line: %s", line);
    if (!ct_gpu_compiled()) t_check(strstr(line, "not compiled in") != NULL, "CPU build header line: %s", line);
    /* a second attempt and an out-of-range index fail the same way, and leave nothing open */
    ct_backend be;
    memset(&be, 0xff, sizeof be);
    t_check(ct_backend_open_gpu(&be, 7, NULL) == CT_ENODEV, "gpu:7 must fail with CT_ENODEV");
    t_check(be.ops == NULL && be.dev == NULL, "a backend that failed to open must be left zeroed");
    ct_gpu sentinel, *g = &sentinel;
    t_check(ct_gpu_open(&g, 7, NULL) == CT_ENODEV && g == NULL, "gpu:7: ct_gpu_open must fail and return no context");
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
    ct_dropout_mask_ref(mask, n, p, seed, 0);
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
    CT_ASSERT(ct_lstm_params_add(ids, ps, "lstm_1", I, H, L) == CT_OK);
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
    size_t wsf = ct_lstm_wspace_loc_packed(loc, I, H, L);
    t_check(wsf == (size_t)L * 8 * H + (size_t)4 * H * I + (size_t)4 * H * H + (size_t)(L - 1) * 8 * H * H,
            "packed size %zu", wsf);
    lstm_wspace_map map;
    t_check(ct_lstm_wspace_map_make(&map, loc, wsf, &ps, &ids, I, H, L) == CT_OK, "map: %s", ct_last_error());
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

/* bf16: a layout that could map directly is still packed (the weight space is in another
 * type), and its segments copy every view to where the direct map would have put it. */
static void test_weight_map_packed(void)
{
    t_case("gpu/lstm_weight_map_packed (bf16 weight spaces)");
    const int I = 40, H = 128, L = 2;
    ct_params ps;
    lstm_ids ids;
    build_lstm_params(&ps, &ids, I, H, L);
    for (size_t i = 0; i < ps.numel; i++) ps.data[i] = (float)i;
    lstm_wspace_loc loc[LSTM_MAX_LAYERS * 8];
    size_t wsf = ct_lstm_wspace_loc_packed(loc, I, H, L);
    lstm_wspace_map direct, packed;
    t_check(ct_lstm_wspace_map_make(&direct, loc, wsf, &ps, &ids, I, H, L) == CT_OK && direct.direct == 1, "direct map: %s",
            ct_last_error());
    t_check(ct_lstm_wspace_map_make_packed(&packed, loc, wsf, &ps, &ids, I, H, L) == CT_OK, "packed map: %s", ct_last_error());
    t_check(packed.direct == 0 && packed.nseg >= 1, "packed: direct %d, %d segments", packed.direct, packed.nseg);
    float *ws = t_alloc(wsf);
    ct_lstm_wspace_pack(ws, ps.data, &packed);
    size_t bad = 0;
    for (size_t i = 0; i < wsf; i++) bad += ws[i] != ps.data[direct.base + i];
    t_check(bad == 0, "%zu of %zu weight-space elements differ from the direct map's", bad, wsf);
    memset(ps.grad, 0, ps.numel * sizeof(float));
    ct_lstm_wspace_unpack_add(ps.grad, ws, &packed);
    bad = 0;
    for (size_t i = 0; i < wsf; i++) bad += ps.grad[direct.base + i] != ps.data[direct.base + i];
    t_check(bad == 0, "unpack-add: %zu elements differ", bad);
    free(ws);
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
    size_t wsf = ct_lstm_wspace_loc_packed(loc, I, H, L);
    lstm_wspace_map map;
    t_check(ct_lstm_wspace_map_make(&map, loc, wsf, &ps, &ids, I, H, L) == CT_OK, "map: %s", ct_last_error());
    t_check(map.direct == 0 && map.why[0], "padding must force the fallback");
    t_check(map.nseg >= 1 && map.nseg <= 4 * L, "%d segments: at most one per parameter view (%d)", map.nseg, 4 * L);
    float *ws = t_alloc(wsf), *want = t_alloc(wsf);
    ct_lstm_wspace_pack(ws, ps.data, &map);
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
    ct_lstm_wspace_unpack_add(grad, ws, &map);
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
    size_t wsf = ct_lstm_wspace_loc_packed(loc, I, H, L);
    lstm_wspace_map map;
    /* biases first, then matrices: a valid layout, but not ctrain's -> fallback */
    lstm_wspace_loc re[8];
    for (int k = 0; k < 8; k++) {
        re[k] = loc[k];
        re[k].b_off = (long long)k * H;
        re[k].m_off = loc[k].m_off + 8LL * H;
    }
    t_check(ct_lstm_wspace_map_make(&map, re, wsf, &ps, &ids, I, H, L) == CT_OK && !map.direct, "biases-first must fall back");
    t_check(strstr(map.why, "layer 0") != NULL, "reason names the first difference: %s", map.why);
    /* a gap between matrices (aligned regions) -> fallback */
    lstm_wspace_loc gap[8];
    long long off = 0;
    for (int k = 0; k < 8; k++) { gap[k] = loc[k]; gap[k].m_off = off; off += loc[k].m_n + 32; }
    for (int k = 0; k < 8; k++) { gap[k].b_off = off; off += H; }
    t_check(ct_lstm_wspace_map_make(&map, gap, (size_t)off, &ps, &ids, I, H, L) == CT_OK && !map.direct, "gaps must fall back");
    /* wrong sizes, overlaps, outside the space: not an LSTM -> CT_EFORMAT */
    lstm_wspace_loc bad[8];
    memcpy(bad, loc, sizeof bad);
    bad[3].m_n = H * I + 1;
    t_check(ct_lstm_wspace_map_make(&map, bad, wsf, &ps, &ids, I, H, L) == CT_EFORMAT, "wrong matrix size must be CT_EFORMAT");
    memcpy(bad, loc, sizeof bad);
    bad[2].b_off = bad[1].b_off;
    t_check(ct_lstm_wspace_map_make(&map, bad, wsf, &ps, &ids, I, H, L) == CT_EFORMAT && strstr(ct_last_error(), "overlap"),
            "overlap must be CT_EFORMAT: %s", ct_last_error());
    t_check(ct_lstm_wspace_map_make(&map, loc, wsf - 1, &ps, &ids, I, H, L) == CT_EFORMAT, "a region past the end must be CT_EFORMAT");
    ct_params_free(&ps);
}

static void test_args(void)
{
    t_case("gpu/argument_checks");
    lstm_dims d = { .B = 4, .T = 10, .I = 3, .H = 8, .L = 1, .ret = LSTM_RETURN_LAST, .recur = LSTM_SIGMOID };
    t_check(ct_lstm_gpu_dims_check(&d) == CT_OK, "valid dims refused: %s", ct_last_error());
    d.recur = LSTM_HARD_SIGMOID;
    t_check(ct_lstm_gpu_dims_check(&d) == CT_EINVAL && strstr(ct_last_error(), "hard_sigmoid") && strstr(ct_last_error(), "--device cpu"),
            "hard_sigmoid: %s", ct_last_error());
    d.recur = LSTM_SIGMOID;
    d.L = 0;
    t_check(ct_lstm_gpu_dims_check(&d) == CT_EINVAL, "0 layers accepted");
    d.L = LSTM_MAX_LAYERS + 1;
    t_check(ct_lstm_gpu_dims_check(&d) == CT_EINVAL, "too many layers accepted");
    d.L = 1;
    d.B = 0;
    t_check(ct_lstm_gpu_dims_check(&d) == CT_EINVAL && strstr(ct_last_error(), "batch 0"), "batch 0: %s", ct_last_error());
}

/* ---- GPU cases: the harness ---- */

#define T_OUTS 32
typedef struct { char name[80]; float *v; size_t n; double tol; } t_out;   /* one output, on the host */
typedef struct { t_out o[T_OUTS]; int n; } t_outs;
typedef void (*op_case)(const ct_backend *be, ct_rng *r, t_outs *out);

static void *dalloc(const ct_backend *be, size_t bytes)
{
    void *p = NULL;
    CT_ASSERT(be->ops->mem_alloc(be, &p, bytes ? bytes : 4, "test") == CT_OK);
    return p;
}
static float *dput(const ct_backend *be, const float *host, size_t n)
{
    float *d = dalloc(be, n * sizeof(float));
    CT_ASSERT(be->ops->upload(be, d, host, n * sizeof(float)) == CT_OK);
    return d;
}
static int *dputi(const ct_backend *be, const int *host, size_t n)
{
    int *d = dalloc(be, n * sizeof(int));
    CT_ASSERT(be->ops->upload(be, d, host, n * sizeof(int)) == CT_OK);
    return d;
}
/* A buffer the function under test must overwrite: NaN until it does. */
static float *dnan(const ct_backend *be, size_t n)
{
    float *h = t_alloc(n);
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    float *d = dput(be, h, n);
    free(h);
    return d;
}
static void dfree(const ct_backend *be, void *p) { if (p) be->ops->mem_free(be, p); }
static float *rnd(size_t n, float lo, float hi, ct_rng *r) { float *x = t_alloc(n); t_fill_uniform(x, n, lo, hi, r); return x; }

/* Keeps a host copy of device array `dev` [n] as output `name`, compared with tolerance tol. */
static void keep(t_outs *o, const char *name, const ct_backend *be, const float *dev, size_t n, double tol)
{
    CT_ASSERT(o->n < T_OUTS);
    t_out *k = &o->o[o->n++];
    snprintf(k->name, sizeof k->name, "%s", name);
    k->v = t_alloc(n);
    CT_ASSERT(be->ops->download(be, k->v, dev, n * sizeof(float)) == CT_OK);
    k->n = n;
    k->tol = tol;
}
static void keep_host(t_outs *o, const char *name, const float *v, size_t n, double tol)
{
    keep(o, name, &ct_cpu_backend, v, n, tol);
}
static void keep_ints(t_outs *o, const char *name, const ct_backend *be, const int *dev, size_t n)
{
    int *h = malloc(n * sizeof(int) + 1);
    CT_ASSERT(h && be->ops->download(be, h, dev, n * sizeof(int)) == CT_OK);
    float *f = t_alloc(n);
    for (size_t i = 0; i < n; i++) f[i] = (float)h[i];
    keep_host(o, name, f, n, 0.0);
    free(h); free(f);
}

/* Runs case f on the CPU and on the GPU from the same seed and compares every output. */
/* 1 when CT_GPU_CASES is unset, or name holds one of its comma-separated parts (any
 * name when every part is an exclusion) and none of its "-" parts */
static int case_selected(const char *name)
{
    const char *sel = getenv("CT_GPU_CASES");
    if (!sel || !*sel) return 1;
    int included = 0, includes = 0;
    for (const char *p = sel; *p;) {
        size_t n = strcspn(p, ",");
        char part[128];
        snprintf(part, sizeof part, "%.*s", (int)(n < sizeof part - 1 ? n : sizeof part - 1), p);
        p += n + (p[n] == ',');
        if (part[0] == '-') {
            if (part[1] && strstr(name, part + 1)) return 0;
        } else if (*part) {
            includes++;
            if (strstr(name, part)) included = 1;
        }
    }
    return included || !includes;
}

/* the CT_GPU_CASES filter itself (host only; the variable is put back as it was) */
static void test_case_filter(void)
{
    t_case("gpu/CT_GPU_CASES selects cases by parts of their names, and leaves out those of its -parts");
    const char *was = getenv("CT_GPU_CASES");
    char *keep = was ? strdup(was) : NULL;
    setenv("CT_GPU_CASES", "tf32/lstm,batchnorm_1500", 1);
    t_check(case_selected("tf32/lstm_T100") && case_selected("batchnorm_1500_channels"), "a listed part is not selected");
    t_check(!case_selected("lstm_T100") && !case_selected("dense"), "an unlisted case is selected");
    setenv("CT_GPU_CASES", "-tf32/lstm", 1);
    t_check(!case_selected("tf32/lstm_T100") && case_selected("lstm_T100") && case_selected("tf32/dense"),
            "-tf32/lstm should leave out exactly the cases holding tf32/lstm");
    setenv("CT_GPU_CASES", "lstm,-tf32", 1);
    t_check(case_selected("lstm_T100") && !case_selected("tf32/lstm_T100") && !case_selected("dense"),
            "lstm,-tf32 should select the LSTM cases but the TF32 one");
    setenv("CT_GPU_CASES", "", 1);
    t_check(case_selected("dense"), "an empty CT_GPU_CASES selects nothing");
    if (keep) setenv("CT_GPU_CASES", keep, 1);
    else unsetenv("CT_GPU_CASES");
    free(keep);
}

/* TF32 allowed on the GPU backend under test (compare sets it for the case it runs). */
static int gpu_tf32;

static void compare(const char *name, op_case f, const ct_backend *gpu, uint64_t seed)
{
    if (!case_selected(name)) return;
    t_case("gpu/%s", name);
    t_outs a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    ct_rng r1, r2;
    ct_rng_seed(&r1, seed, 77);
    r2 = r1;
    gpu_tf32 = gpu->math.tf32;   /* the tolerances of both runs are the GPU's */
    f(&ct_cpu_backend, &r1, &a);
    f(gpu, &r2, &b);
    t_check(gpu->ops->sync(gpu) == CT_OK, "queued GPU work failed: %s", ct_last_error());
    t_check(a.n == b.n && a.n > 0, "%d outputs on the CPU, %d on the GPU", a.n, b.n);
    for (int i = 0; i < a.n && i < b.n; i++) {
        t_check(a.o[i].n == b.o[i].n && !strcmp(a.o[i].name, b.o[i].name), "output %d: %s [%zu] vs %s [%zu]", i,
                a.o[i].name, a.o[i].n, b.o[i].name, b.o[i].n);
        t_close(a.o[i].name, b.o[i].v, a.o[i].v, a.o[i].n, a.o[i].tol);
    }
    for (int i = 0; i < a.n; i++) free(a.o[i].v);
    for (int i = 0; i < b.n; i++) free(b.o[i].v);
}

/* The tolerances of float32 matrix products that sum in another order: FP32, or TF32 when allowed
 * (operands rounded to 10-bit mantissas, a relative 4.9e-4 each: a whole model's step measured
 * 7.9e-4 on an H100, so 5e-3 wherever TF32 may be used). tol_fp32(t): t, or TF32's when allowed. */
static int tf32_on(void) { return gpu_tf32; }
static double tol_gemm(void) { return tf32_on() ? 5e-3 : 2e-5; }
static double tol_fp32(double t) { return tf32_on() && t < 5e-3 ? 5e-3 : t; }

/* ---- layers ---- */

static void case_dense(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const int B = 5, In = 7, O = 3;
    float *x = rnd((size_t)B * In, -1, 1, r), *w = rnd((size_t)O * In, -1, 1, r), *b = rnd(O, -1, 1, r);
    float *dout = rnd((size_t)B * O, -1, 1, r), *dw = rnd((size_t)O * In, -1, 1, r), *db = rnd(O, -1, 1, r);
    float *gx = dput(be, x, (size_t)B * In), *gw = dput(be, w, (size_t)O * In), *gb = dput(be, b, O);
    float *gdout = dput(be, dout, (size_t)B * O), *gdw = dput(be, dw, (size_t)O * In), *gdb = dput(be, db, O);
    float *gout = dnan(be, (size_t)B * O), *gdin = dnan(be, (size_t)B * In);
    be->ops->dense_forward(be, gout, gx, gw, gb, B, In, O);
    be->ops->dense_backward(be, gdin, gdw, gdb, gdout, gx, gw, B, In, O);
    keep(o, "out", be, gout, (size_t)B * O, tol_gemm());
    keep(o, "din", be, gdin, (size_t)B * In, tol_gemm());
    keep(o, "dw (accumulated)", be, gdw, (size_t)O * In, tol_gemm());
    keep(o, "db (accumulated)", be, gdb, O, 1e-6);
    be->ops->dense_backward(be, gdin, NULL, NULL, gdout, gx, gw, B, In, O);   /* input gradient alone */
    keep(o, "din without dw", be, gdin, (size_t)B * In, tol_gemm());
    void *dv[] = { gx, gw, gb, gdout, gdw, gdb, gout, gdin };
    for (size_t i = 0; i < 8; i++) dfree(be, dv[i]);
    free(x); free(w); free(b); free(dout); free(dw); free(db);
}

static void case_activation(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const size_t n = 1000;
    float *x = rnd(n, -6, 6, r), *dout = rnd(n, -1, 1, r);
    float *gx = dput(be, x, n), *gd = dput(be, dout, n), *gy = dnan(be, n), *gdx = dnan(be, n);
    void (*fw[3])(const ct_backend *, float *, const float *, size_t) = { be->ops->relu_forward, be->ops->tanh_forward,
                                                                          be->ops->sigmoid_forward };
    void (*bw[3])(const ct_backend *, float *, const float *, const float *, size_t) = { be->ops->relu_backward,
                                                                                        be->ops->tanh_backward,
                                                                                        be->ops->sigmoid_backward };
    const char *names[3] = { "relu", "tanh", "sigmoid" };
    for (int k = 0; k < 3; k++) {
        char what[64];
        fw[k](be, gy, gx, n);
        bw[k](be, gdx, gd, gy, n);
        snprintf(what, sizeof what, "%s forward", names[k]); keep(o, what, be, gy, n, 1e-6);
        snprintf(what, sizeof what, "%s backward", names[k]); keep(o, what, be, gdx, n, 1e-6);
    }
    dfree(be, gx); dfree(be, gd); dfree(be, gy); dfree(be, gdx);
    free(x); free(dout);
}

/* out = a + b, and its backward pass accumulating into gradients that already hold values */
static void case_add(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const size_t n = 1000;
    float *a = rnd(n, -2, 2, r), *b = rnd(n, -2, 2, r), *dout = rnd(n, -1, 1, r), *da = rnd(n, -1, 1, r), *db = rnd(n, -1, 1, r);
    float *ga = dput(be, a, n), *gb = dput(be, b, n), *gd = dput(be, dout, n), *gda = dput(be, da, n), *gdb = dput(be, db, n);
    float *gy = dnan(be, n);
    be->ops->add_forward(be, gy, ga, gb, n);
    keep(o, "add forward", be, gy, n, 1e-6);
    be->ops->add_forward(be, ga, ga, gb, n);   /* in place */
    keep(o, "add forward in place", be, ga, n, 1e-6);
    be->ops->add_backward(be, gda, gdb, gd, n);
    be->ops->add_backward(be, NULL, gdb, gd, n);
    keep(o, "add backward da += dout", be, gda, n, 1e-6);
    keep(o, "add backward db += dout twice", be, gdb, n, 1e-6);
    void *dv[] = { ga, gb, gd, gda, gdb, gy };
    for (size_t i = 0; i < 6; i++) dfree(be, dv[i]);
    free(a); free(b); free(dout); free(da); free(db);
}

static void case_pair(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const int B = 6, D = 37;
    float *a = rnd((size_t)B * D, -1, 1, r), *b = rnd((size_t)B * D, -1, 1, r), *dd = rnd(B, -1, 1, r);
    memcpy(b + 2 * D, a + 2 * D, D * sizeof(float));   /* pair 2: distance at the eps floor */
    float *ga = dput(be, a, (size_t)B * D), *gb = dput(be, b, (size_t)B * D), *gdd = dput(be, dd, B);
    float *gd = dnan(be, B), *gda = dnan(be, (size_t)B * D), *gdb = dnan(be, (size_t)B * D);
    be->ops->euclidean_forward(be, gd, ga, gb, B, D, CT_KERAS_EPSILON);
    be->ops->euclidean_backward(be, gda, gdb, gdd, gd, ga, gb, B, D, CT_KERAS_EPSILON);
    keep(o, "euclidean d", be, gd, B, 1e-6);
    keep(o, "euclidean da", be, gda, (size_t)B * D, 1e-6);
    keep(o, "euclidean db", be, gdb, (size_t)B * D, 1e-6);
    void *dv[] = { ga, gb, gdd, gd, gda, gdb };
    for (size_t i = 0; i < 6; i++) dfree(be, dv[i]);
    free(a); free(b); free(dd);
}

static void case_loss(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const int B = 300, C = 7;
    float *d = rnd(B, 0, 1.5f, r), *y = t_alloc(B), *logits = rnd((size_t)B * C, -3, 3, r);
    int *lab = malloc(B * sizeof(int));
    for (int k = 0; k < B; k++) { y[k] = (float)(k % 3 == 0); lab[k] = (int)ct_rng_below(r, C); }
    float *gd = dput(be, d, B), *gy = dput(be, y, B), *gl = dput(be, logits, (size_t)B * C);
    int *glab = dputi(be, lab, B);
    float *gs = dnan(be, 2), *gdd = dnan(be, B), *gprob = dnan(be, (size_t)B * C), *gdl = dnan(be, (size_t)B * C);
    be->ops->contrastive_stats(be, gs, gd, gy, B, 1.0f, 0.5f);
    keep(o, "contrastive loss and right pairs", be, gs, 2, 1e-6);
    be->ops->contrastive_backward(be, gdd, gd, gy, B, 1.0f);
    keep(o, "contrastive dd", be, gdd, B, 1e-6);
    be->ops->softmax_ce_stats(be, gs, gprob, gl, glab, B, C);
    keep(o, "softmax-ce loss and right predictions", be, gs, 2, 1e-6);
    keep(o, "softmax prob", be, gprob, (size_t)B * C, 1e-6);
    be->ops->softmax_ce_backward(be, gdl, gprob, glab, B, C);
    keep(o, "softmax dlogits", be, gdl, (size_t)B * C, 1e-6);
    void *dv[] = { gd, gy, gl, glab, gs, gdd, gprob, gdl };
    for (size_t i = 0; i < 8; i++) dfree(be, dv[i]);
    free(d); free(y); free(logits); free(lab);
}

/* dropout with a given mask: the same on both devices (their masks are drawn differently) */
static void case_dropout_apply(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const size_t n = 4099;
    float *x = rnd(n, -1, 1, r), *mask = t_alloc(n), *dout = rnd(n, -1, 1, r);
    for (size_t i = 0; i < n; i++) mask[i] = ct_rng_uniform(r) < 0.3f ? 0.0f : 1.0f / 0.7f;
    float *gx = dput(be, x, n), *gm = dput(be, mask, n), *gd = dput(be, dout, n), *gy = dnan(be, n), *gdx = dnan(be, n);
    be->ops->dropout_apply(be, gy, gm, gx, n);
    be->ops->dropout_backward(be, gdx, gd, gm, n);
    keep(o, "apply", be, gy, n, 0);
    keep(o, "backward", be, gdx, n, 0);
    ct_rng s;
    ct_rng_seed(&s, 3, CT_STREAM_DROPOUT);
    be->ops->dropout_forward(be, gy, gm, gx, n, 0.3f, 0, &s);   /* evaluation: the identity, nothing drawn */
    keep(o, "evaluation is the identity", be, gy, n, 0);
    dfree(be, gx); dfree(be, gm); dfree(be, gd); dfree(be, gy); dfree(be, gdx);
    free(x); free(mask); free(dout);
}

static void case_optim(const ct_backend *be, ct_rng *r, t_outs *o)
{
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
        ct_optim opt;
        CT_ASSERT(be->ops->optim_init(be, &opt, &cfgs[c], n) == CT_OK);
        float *gp = dput(be, p, n), *gg = dalloc(be, n * sizeof(float));
        for (int s = 0; s < 3; s++) {
            for (size_t i = 0; i < n; i++) g[i] = g0[i] * (float)(s + 1);
            CT_ASSERT(be->ops->upload(be, gg, g, n * sizeof(float)) == CT_OK);
            be->ops->optim_step(be, &opt, gp, gg, 1e-2f);
        }
        char what[64];
        snprintf(what, sizeof what, "%s config %d params", ct_optim_name(cfgs[c].kind), c);
        keep(o, what, be, gp, n, 1e-6);
        if (opt.m) { snprintf(what, sizeof what, "config %d m", c); keep(o, what, be, opt.m, n, 1e-6); }
        if (opt.v) { snprintf(what, sizeof what, "config %d v", c); keep(o, what, be, opt.v, n, 1e-6); }
        be->ops->optim_free(be, &opt);
        dfree(be, gp); dfree(be, gg);
        free(p); free(g0); free(g);
    }
    ct_optim bad;
    ct_optim_config bc = ct_optim_defaults(OPT_ADAM);
    bc.lr = -1;
    t_check(be->ops->optim_init(be, &bad, &bc, 10) == CT_EINVAL, "%s: a negative lr must be refused", be->name);
}

static void case_clip(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const size_t n = 100003;
    float *g = rnd(n, -1, 1, r), *gg = dput(be, g, n);
    float norm = be->ops->clip_grad_norm(be, gg, n, 3.0f);
    keep_host(o, "norm", &norm, 1, 1e-6);
    keep(o, "clipped", be, gg, n, 1e-6);
    dfree(be, gg);
    free(g);
}

static void case_pool(const ct_backend *be, ct_rng *r, t_outs *o)
{
    maxpool2d_dims d;
    CT_ASSERT(ct_maxpool2d_dims_make(&d, 2, 3, 9, 7, 3, 2) == CT_OK);   /* overlapping windows */
    size_t nin = (size_t)d.N * d.C * d.H * d.W, nout = (size_t)d.N * d.C * d.OH * d.OW;
    float *x = rnd(nin, -1, 1, r), *dout = rnd(nout, -1, 1, r);
    float *gx = dput(be, x, nin), *gdout = dput(be, dout, nout), *gout = dnan(be, nout), *gdin = dnan(be, nin);
    int *gam = dalloc(be, nout * sizeof(int));
    be->ops->maxpool2d_forward(be, gout, gam, gx, &d);
    be->ops->maxpool2d_backward(be, gdin, gdout, gam, &d);
    keep(o, "maxpool out", be, gout, nout, 0);
    keep_ints(o, "maxpool argmax", be, gam, nout);
    keep(o, "maxpool din", be, gdin, nin, 1e-6);
    const int N = 2, C = 3, H = 9, W = 7;   /* the same input as [N, C, H*W] and [N, C, H, W] */
    be->ops->global_avgpool_forward(be, gout, gx, N, C, H * W);
    be->ops->global_avgpool_backward(be, gdin, gdout, N, C, H * W);
    keep(o, "gap out", be, gout, (size_t)N * C, 1e-6);
    keep(o, "gap din", be, gdin, nin, 1e-6);
    be->ops->avgpool_h_forward(be, gout, gx, N, C, H, W);
    be->ops->avgpool_h_backward(be, gdin, gdout, N, C, H, W);
    keep(o, "gaph out", be, gout, (size_t)N * C * W, 1e-6);
    keep(o, "gaph din", be, gdin, nin, 1e-6);
    dfree(be, gx); dfree(be, gdout); dfree(be, gout); dfree(be, gdin); dfree(be, gam);
    free(x); free(dout);
}

/* A batchnorm layer's inputs drawn from r and put on the device of be; outputs start as NaN. */
typedef struct { float *x, *gam, *bet, *dout, *rm, *rv, *out, *xh, *mean, *is, *din, *dg, *db; } bn_bufs;

static void bn_bufs_make(bn_bufs *g, const ct_backend *be, ct_rng *r, const batchnorm_dims *d)
{
    size_t n = (size_t)d->N * d->C * d->HW;
    float *x = rnd(n, -2, 2, r), *gam = rnd(d->C, 0.5f, 1.5f, r), *bet = rnd(d->C, -1, 1, r), *dout = rnd(n, -1, 1, r);
    float *rm = rnd(d->C, -0.1f, 0.1f, r), *rv = rnd(d->C, 0.9f, 1.1f, r), *dg = rnd(d->C, -1, 1, r), *dbt = rnd(d->C, -1, 1, r);
    *g = (bn_bufs){ .x = dput(be, x, n), .gam = dput(be, gam, d->C), .bet = dput(be, bet, d->C), .dout = dput(be, dout, n),
                    .rm = dput(be, rm, d->C), .rv = dput(be, rv, d->C), .out = dnan(be, n), .xh = dnan(be, n),
                    .mean = dnan(be, d->C), .is = dnan(be, d->C), .din = dnan(be, n), .dg = dput(be, dg, d->C),
                    .db = dput(be, dbt, d->C) };
    free(x); free(gam); free(bet); free(dout); free(rm); free(rv); free(dg); free(dbt);
}

static void bn_bufs_free(bn_bufs *g, const ct_backend *be)
{
    void *dv[] = { g->x, g->gam, g->bet, g->dout, g->rm, g->rv, g->out, g->xh, g->mean, g->is, g->din, g->dg, g->db };
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) dfree(be, dv[i]);
}

/* backward, and the three gradients kept */
static void bn_backward_keep(t_outs *o, const ct_backend *be, bn_bufs *g, const batchnorm_dims *d)
{
    size_t n = (size_t)d->N * d->C * d->HW;
    be->ops->batchnorm_backward(be, g->din, g->dg, g->db, g->dout, g->xh, g->is, g->gam, d);
    keep(o, "din", be, g->din, n, 1e-5);
    keep(o, "dgamma (accumulated)", be, g->dg, d->C, 1e-5);
    keep(o, "dbeta (accumulated)", be, g->db, d->C, 1e-5);
}

static batchnorm_dims bn_plain_dims;   /* N, C, HW of the next case_batchnorm */
static void case_batchnorm(const ct_backend *be, ct_rng *r, t_outs *o)
{
    batchnorm_dims d = { .N = bn_plain_dims.N, .C = bn_plain_dims.C, .HW = bn_plain_dims.HW, .eps = 1e-5f, .momentum = 0.1f };
    size_t n = (size_t)d.N * d.C * d.HW;
    bn_bufs g;
    bn_bufs_make(&g, be, r, &d);
    for (int train = 0; train <= 1; train++) {
        be->ops->batchnorm_forward(be, g.out, g.xh, g.mean, g.is, g.rm, g.rv, g.x, g.gam, g.bet, &d, train);
        keep(o, train ? "train out" : "eval out", be, g.out, n, 1e-6);
        keep(o, train ? "train xhat" : "eval xhat", be, g.xh, n, 1e-6);
        keep(o, train ? "train invstd" : "eval invstd", be, g.is, d.C, 1e-6);
        keep(o, train ? "running_mean after train" : "running_mean after eval", be, g.rm, d.C, 1e-6);
        keep(o, train ? "running_var after train" : "running_var after eval", be, g.rv, d.C, 1e-6);
    }
    bn_backward_keep(o, be, &g, &d);
    bn_bufs_free(&g, be);
}

/* Synchronised batchnorm (data-parallel training: ct_replica_sum) on a stand-in for three
 * ranks holding the same rows: their sum is three times this one's. Both devices run the
 * synchronised code (the CPU's is checked against one whole batch in the batchnorm suite). */
static int three_replicas(void *ctx, double *buf, int n)
{
    (void)ctx;
    for (int i = 0; i < n; i++) buf[i] *= 3.0;
    return 0;
}

static batchnorm_dims bn_synced_dims;   /* N, C, HW of the next case_batchnorm_synced */
static void case_batchnorm_synced(const ct_backend *be, ct_rng *r, t_outs *o)
{
    ct_replica_sum rs = { .sum = three_replicas, .ctx = NULL, .total_N = 3 * bn_synced_dims.N, .share = 1.0 / 3.0 };
    batchnorm_dims d = { .N = bn_synced_dims.N, .C = bn_synced_dims.C, .HW = bn_synced_dims.HW, .eps = 1e-5f, .momentum = 0.1f,
                         .sync = &rs };
    size_t n = (size_t)d.N * d.C * d.HW;
    bn_bufs g;
    bn_bufs_make(&g, be, r, &d);
    be->ops->batchnorm_forward(be, g.out, g.xh, g.mean, g.is, g.rm, g.rv, g.x, g.gam, g.bet, &d, 1);
    keep(o, "out", be, g.out, n, 1e-6);
    keep(o, "xhat", be, g.xh, n, 1e-6);
    keep(o, "mean", be, g.mean, d.C, 1e-6);
    keep(o, "invstd", be, g.is, d.C, 1e-6);
    keep(o, "running_mean", be, g.rm, d.C, 1e-6);
    keep(o, "running_var", be, g.rv, d.C, 1e-6);
    bn_backward_keep(o, be, &g, &d);
    bn_bufs_free(&g, be);
}

/* A convolution planned for N images, run on N and on fewer (another batch size: on the
 * GPU another set of descriptors and algorithms within the same workspace). */
static conv2d_dims conv_case_dims;
static void case_conv2d(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const conv2d_dims d = conv_case_dims;
    size_t nin = (size_t)d.N * d.C * d.H * d.W, nout = (size_t)d.N * d.OC * d.OH * d.OW, nw = (size_t)d.OC * d.C * d.KH * d.KW;
    float *x = rnd(nin, -1, 1, r), *w = rnd(nw, -1, 1, r), *b = rnd(d.OC, -1, 1, r), *dout = rnd(nout, -1, 1, r);
    float *dw = rnd(nw, -1, 1, r), *db = rnd(d.OC, -1, 1, r);
    void *plan = NULL;
    ct_status st = be->ops->conv2d_plan(be, &plan, &d, 1);
    t_check(st == CT_OK, "%s plan: %s", be->name, ct_last_error());
    if (st != CT_OK) { free(x); free(w); free(b); free(dout); free(dw); free(db); return; }
    float *gx = dput(be, x, nin), *gw = dput(be, w, nw), *gb = dput(be, b, d.OC), *gdout = dput(be, dout, nout);
    float *gdw = dput(be, dw, nw), *gdb = dput(be, db, d.OC), *gout = dnan(be, nout), *gdin = dnan(be, nin);
    float *gws = dalloc(be, (be->ops->conv2d_workspace_floats(be, plan) + 1) * sizeof(float));
    int Ns[2] = { d.N, d.N > 1 ? d.N - 1 : 1 };
    for (int k = 0; k < 2; k++) {
        int N = Ns[k];
        size_t no = (size_t)N * d.OC * d.OH * d.OW, ni = (size_t)N * d.C * d.H * d.W;
        char what[64];
        be->ops->conv2d_forward(be, gout, gws, gx, gw, gb, plan, N);
        be->ops->conv2d_backward(be, gdin, gdw, gdb, gws, gdout, gx, gw, plan, N);
        snprintf(what, sizeof what, "out, batch %d", N); keep(o, what, be, gout, no, tol_gemm());
        snprintf(what, sizeof what, "din, batch %d", N); keep(o, what, be, gdin, ni, tol_gemm());
        snprintf(what, sizeof what, "dw (accumulated), batch %d", N); keep(o, what, be, gdw, nw, tol_gemm());
        snprintf(what, sizeof what, "db (accumulated), batch %d", N); keep(o, what, be, gdb, d.OC, 1e-5);
    }
    be->ops->conv2d_plan_free(be, plan);
    void *dv[] = { gdw, gdb, gx, gw, gb, gdout, gout, gdin, gws };
    for (size_t i = 0; i < 9; i++) dfree(be, dv[i]);
    free(x); free(w); free(b); free(dout); free(dw); free(db);
}

/* ---- the LSTM: one configuration per case ---- */
typedef struct {
    int B, T, I, H, L;          /* the call */
    int plan_B, plan_T;         /* the plan (>= the call) */
    lstm_return ret;
    int masked;
    double tol_f, tol_b;
    int want_direct;            /* GPU: the flat buffer is cuDNN's weight space (1), is not (0), either (-1) */
} lstm_case_cfg;
static lstm_case_cfg lstm_cfg;

#ifdef CT_HAVE_CUDA
#include "cuda/conv2d.h"
#include "cuda/lstm.h"
static int lstm_plan_direct(const void *plan, char *why, size_t n) { const lstm_gpu *p = plan; snprintf(why, n, "%s", p->map.why); return p->map.direct; }
#endif

static void case_lstm(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const lstm_case_cfg *c = &lstm_cfg;
    lstm_dims pd = { .B = c->plan_B, .T = c->plan_T, .I = c->I, .H = c->H, .L = c->L, .ret = c->ret, .recur = LSTM_SIGMOID };
    lstm_dims d = pd;
    d.B = c->B;
    d.T = c->T;
    ct_params ps;
    lstm_ids ids;
    ct_params_init(&ps);
    CT_ASSERT(ct_lstm_params_add(&ids, &ps, "lstm", c->I, c->H, c->L) == CT_OK && ct_params_alloc(&ps) == CT_OK);
    ct_params_initialize(&ps, r);
    size_t nx = (size_t)d.B * d.T * d.I, nout = d.ret == LSTM_RETURN_SEQUENCE ? (size_t)d.B * d.T * d.H : (size_t)d.B * d.H;
    float *x = rnd(nx, -1, 1, r), *dout = rnd(nout, -1, 1, r);
    int *len = NULL;
    if (c->masked) {
        len = malloc(d.B * sizeof(int));
        for (int b = 0; b < d.B; b++) len[b] = b == 0 ? d.T : 1 + (int)ct_rng_below(r, d.T);
    }
    float *gp = dput(be, ps.data, ps.numel), *gg = dalloc(be, ps.numel * sizeof(float));
    float *gx = dput(be, x, nx), *gdout = dput(be, dout, nout), *gout = dnan(be, nout), *gdx = dnan(be, nx);
    int *glen = len ? dputi(be, len, d.B) : NULL;
    void *plan = NULL;
    ct_status st = be->ops->lstm_plan(be, &plan, &pd, &ps, &ids, gp);
    t_check(st == CT_OK, "%s plan: %s", be->name, ct_last_error());
    if (st == CT_OK) {
#ifdef CT_HAVE_CUDA
        if (!be->host_memory) {
            char why[256];
            int direct = lstm_plan_direct(plan, why, sizeof why);
            t_check(c->want_direct < 0 || direct == c->want_direct, "weight space %s, expected %s (%s)", direct ? "direct" : "packed",
                    c->want_direct ? "direct" : "packed", why);
        }
#endif
        be->ops->lstm_forward(be, gout, plan, gx, glen, len, gp, &d);
        be->ops->lstm_backward(be, gdx, gg, plan, gdout, gx, glen, len, gp, &d);
#ifdef CT_HAVE_CUDA
        if (!be->host_memory) {   /* the algorithm that ran (cuDNN's persistent kernel refuses masked batches) */
            printf("  LSTM algorithm: %s, weight space %s\n", ct_lstm_gpu_algo(plan),
                   lstm_plan_direct(plan, (char[256]){ 0 }, 256) ? "direct" : "packed");
            t_check(((const lstm_gpu *)plan)->own == be->math.lstm_own, "the plan runs %s, the backend asks for %s",
                    ct_lstm_gpu_algo(plan), be->math.lstm_own ? "ctrain's own kernels" : "cuDNN's");
        }
#endif
        keep(o, "out", be, gout, nout, c->tol_f);
        keep(o, "dx", be, gdx, nx, c->tol_b);
        keep(o, "parameter gradients", be, gg, ps.numel, c->tol_b);
        /* accumulation: the same step again (cuDNN's backward changes the reserve space,
         * so backward needs its own forward) doubles the gradients */
        be->ops->lstm_forward(be, gout, plan, gx, glen, len, gp, &d);
        be->ops->lstm_backward(be, gdx, gg, plan, gdout, gx, glen, len, gp, &d);
        keep(o, "gradients after a second step (accumulated)", be, gg, ps.numel, c->tol_b);
        be->ops->lstm_plan_free(be, plan);
    }
    void *dv[] = { gp, gg, gx, gdout, gout, gdx, glen };
    for (size_t i = 0; i < 7; i++) dfree(be, dv[i]);
    free(x); free(dout); free(len);
    ct_params_free(&ps);
}

/* ---- memory and the batch ring ---- */
static void case_memory(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const size_t n = 3001;
    float *a = rnd(n, -1, 1, r), *b = rnd(n, -1, 1, r), *c = rnd(n, -1, 1, r);
    float *ga = dput(be, a, n), *gb = dnan(be, n);
    be->ops->copy(be, gb, ga, n * sizeof(float));
    keep(o, "copy", be, gb, n, 0);
    be->ops->zero(be, gb + 7, 100 * sizeof(float));
    keep(o, "zero inside", be, gb, n, 0);
    void *ring = NULL;
    CT_ASSERT(be->ops->ring_create(be, &ring, n * sizeof(float)) == CT_OK);
    const float *src[3] = { a, b, c };
    const float *slot[3];
    for (int k = 0; k < 3; k++) {   /* three batches through two slots; each is read before the next put */
        slot[k] = be->ops->ring_put(be, ring, src[k], n * sizeof(float));
        char what[32];
        snprintf(what, sizeof what, "ring batch %d", k);
        keep(o, what, be, slot[k], n, 0);
        t_check(!memcmp(o->o[o->n - 1].v, src[k], n * sizeof(float)), "%s: ring batch %d is not the host block", be->name, k);
    }
    if (!be->host_memory) t_check(slot[0] == slot[2] && slot[0] != slot[1], "the ring alternates two device slots");
    /* a block from host_alloc (pinned on the GPU) is copied from where it lies: rewritten
     * after ring_wait, each batch still arrives whole */
    float *pin = NULL;
    CT_ASSERT(be->ops->host_alloc(be, (void **)&pin, n * sizeof(float), "a test batch") == CT_OK);
    for (int k = 0; k < 3; k++) {
        be->ops->ring_wait(be, ring, pin);
        memcpy(pin, src[k], n * sizeof(float));
        const float *dev = be->ops->ring_put(be, ring, pin, n * sizeof(float));
        char what[40];
        snprintf(what, sizeof what, "ring batch %d from a pinned block", k);
        keep(o, what, be, dev, n, 0);
        t_check(!memcmp(o->o[o->n - 1].v, src[k], n * sizeof(float)), "%s: pinned ring batch %d is not the host block", be->name, k);
    }
    be->ops->ring_wait(be, ring, pin);
    be->ops->host_free(be, pin);
    be->ops->ring_free(be, ring);
    dfree(be, ga); dfree(be, gb);
    free(a); free(b); free(c);
}

/* ---- models: a training step through the model's one code ---- */

/* Two SGD-with-momentum steps (the update is linear in the gradient, so float rounding
 * cannot flip it) through the device's batch ring, as speaker_task trains. */
static siamese_lstm_config slstm_cfg;
static void case_siamese_lstm(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const siamese_lstm_config cfg = slstm_cfg;
    const int B = 4;
    siamese_lstm m;
    CT_ASSERT(ct_siamese_lstm_build(&m, &cfg) == CT_OK);
    ct_siamese_lstm_init_weights(&m, r);
    ct_status st = ct_siamese_lstm_set_device(&m, be);
    if (st == CT_OK) st = ct_siamese_lstm_plan(&m, B + 2);   /* planned larger than the batch */
    t_check(st == CT_OK, "%s: %s", be->name, ct_last_error());
    if (st != CT_OK) { ct_siamese_lstm_free(&m); return; }
    ct_train_state ts = ct_train_state_of(&m.dev, NULL);
    ct_optim_config oc = ct_optim_defaults(OPT_SGD);
    oc.lr = 0.1f; oc.momentum = 0.9f;
    CT_ASSERT(ct_train_state_begin(&ts, &oc) == CT_OK);
    size_t nx = (size_t)2 * B * cfg.frames * cfg.n_mels, y_off = nx, len_off = nx + B;
    float *block = t_alloc(len_off + 2 * B);   /* x | y | len, as speaker_task packs a batch */
    void *ring = NULL;
    CT_ASSERT(be->ops->ring_create(be, &ring, (len_off + 2 * B) * sizeof(float)) == CT_OK);
    const float y[2][4] = { { 1, 0, 1, 0 }, { 0, 0, 1, 1 } };
    const int len[2][8] = { { 12, 5, 12, 9, 1, 12, 7, 12 }, { 12, 12, 12, 12, 3, 4, 5, 6 } };
    float losses[2], corrects[2];
    for (int s = 0; s < 2; s++) {
        t_fill_uniform(block, nx, -1, 1, r);
        memcpy(block + y_off, y[s], sizeof y[s]);
        memcpy(block + len_off, len[s], sizeof len[s]);
        const float *dev = be->ops->ring_put(be, ring, block, (len_off + 2 * B) * sizeof(float));
        const int *dlen = (const int *)(dev + len_off);
        int correct = 0;
        ct_train_state_zero_grad(&ts);
        losses[s] = ct_siamese_lstm_forward(&m, dev, dlen, len[s], dev + y_off, B, 1, &correct);
        corrects[s] = (float)correct;
        ct_siamese_lstm_backward(&m, dev, dlen, len[s], dev + y_off, B);
        if (s == 0) keep(o, "gradients, step 1", be, m.dev.grad, m.params.numel, 1e-4);
        ct_train_state_step(&ts, oc.lr);
    }
    keep_host(o, "losses", losses, 2, 1e-5);
    keep_host(o, "right pairs", corrects, 2, 0);
    CT_ASSERT(ct_train_state_to_host(&ts) == CT_OK);
    keep_host(o, "parameters after two steps", m.params.data, m.params.numel, 1e-4);
    keep_host(o, "momentum after two steps", ct_train_state_host_optim(&ts)->m, m.params.numel, 1e-4);
    /* whole utterances of different lengths, host in and out (evaluation) */
    const int S = 3, T = 17, lens[3] = { 17, 4, 11 };
    float *xe = rnd((size_t)S * T * cfg.n_mels, -1, 1, r), *emb = t_alloc((size_t)S * cfg.embed);
    CT_ASSERT(ct_siamese_lstm_plan_embed(&m, S, T + 3) == CT_OK);
    ct_siamese_lstm_embed(&m, emb, xe, lens, S, T);
    keep_host(o, "embeddings", emb, (size_t)S * cfg.embed, 1e-4);
    ct_train_state_end(&ts);
    be->ops->ring_free(be, ring);
    ct_siamese_lstm_free(&m);
    free(block); free(xe); free(emb);
}

static siamese_cnn_config scnn_cfg;
static void case_siamese_cnn(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const int B = 3;
    static siamese_cnn m;
    CT_ASSERT(ct_siamese_cnn_build(&m, &scnn_cfg) == CT_OK);
    ct_siamese_cnn_init_weights(&m, r);
    ct_status st = ct_siamese_cnn_set_device(&m, be);
    if (st == CT_OK) st = ct_siamese_cnn_plan(&m, B + 1);
    t_check(st == CT_OK, "%s: %s", be->name, ct_last_error());
    if (st != CT_OK) { ct_siamese_cnn_free(&m); return; }
    ct_train_state ts = ct_train_state_of(&m.enc.dev, &m.enc.dev_buffers);
    ct_optim_config oc = ct_optim_defaults(OPT_SGD);
    oc.lr = 0.05f; oc.momentum = 0.9f;
    CT_ASSERT(ct_train_state_begin(&ts, &oc) == CT_OK);
    size_t nx = (size_t)2 * B * scnn_cfg.frames * scnn_cfg.n_mels;
    float *x = t_alloc(nx), y[3] = { 1, 0, 1 }, losses[2];
    for (int s = 0; s < 2; s++) {
        t_fill_uniform(x, nx, -1, 1, r);
        float *gx = dput(be, x, nx), *gy = dput(be, y, B);
        ct_train_state_zero_grad(&ts);
        losses[s] = ct_siamese_cnn_forward(&m, gx, gy, B, 1, NULL, NULL);
        ct_siamese_cnn_backward(&m, gx, gy, B);
        if (s == 0) keep(o, "gradients, step 1", be, m.enc.dev.grad, m.enc.params.numel, tol_fp32(1e-4));
        ct_train_state_step(&ts, oc.lr);
        dfree(be, gx); dfree(be, gy);
    }
    keep_host(o, "losses", losses, 2, tol_fp32(1e-5));
    CT_ASSERT(ct_train_state_to_host(&ts) == CT_OK);
    keep_host(o, "parameters after two steps", m.enc.params.data, m.enc.params.numel, tol_fp32(1e-4));
    keep_host(o, "batchnorm running statistics", m.enc.buffers.data, m.enc.buffers.numel, tol_fp32(1e-5));
    const int S = 5;   /* more windows than the training plan holds: the plan grows */
    float *xe = rnd((size_t)S * scnn_cfg.frames * scnn_cfg.n_mels, -1, 1, r), *emb = t_alloc((size_t)S * m.cfg.embed);
    CT_ASSERT(ct_siamese_cnn_plan_embed(&m, 2 * (B + 1) + 1) == CT_OK);
    ct_siamese_cnn_embed(&m, emb, xe, S);
    keep_host(o, "embeddings (running statistics)", emb, (size_t)S * m.cfg.embed, tol_fp32(1e-4));
    ct_train_state_end(&ts);
    ct_siamese_cnn_free(&m);
    free(x); free(xe); free(emb);
}

/* The classifier with dropout: both devices apply the same masks (seq_cnn.given_masks). */
static const char *cnn_case_spec;   /* on 2x10x9 images, 5 classes */
static void case_cnn(const ct_backend *be, ct_rng *r, t_outs *o)
{
    const int N = 6, C = 5;
    static seq_cnn m;
    CT_ASSERT(ct_seq_cnn_build(&m, cnn_case_spec, 2, 10, 9, C) == CT_OK);
    ct_seq_cnn_init_weights(&m, r);
    ct_status st = ct_seq_cnn_set_device(&m, be);
    if (st == CT_OK) st = ct_seq_cnn_plan(&m, N + 2);
    t_check(st == CT_OK, "%s: %s", be->name, ct_last_error());
    if (st != CT_OK) { ct_seq_cnn_free(&m); return; }
    m.given_masks = 1;
    ct_train_state ts = ct_train_state_of(&m.dev, &m.dev_buffers);
    /* Adam with eps 1e-3, not 1e-8: conv6k3p1's bias feeds a batchnorm, so its gradient is 0 in
     * exact arithmetic and rounding noise (2.6e-8 here against a largest gradient of 1.19) on
     * either device; with eps 1e-8 the first step turns that noise's sign into a full +-lr move
     * (the two devices then differ by 2 lr: 3.1e-3 measured on an H100), with 1e-3 into ~3e-8. */
    ct_optim_config oc = ct_optim_defaults(OPT_ADAM);
    oc.eps = 1e-3f;
    CT_ASSERT(ct_train_state_begin(&ts, &oc) == CT_OK);
    size_t px = 2 * 10 * 9;
    float *x = t_alloc((size_t)N * px), losses[2], corrects[2];
    int labels[6];
    for (int s = 0; s < 2; s++) {
        t_fill_uniform(x, (size_t)N * px, -1, 1, r);
        for (int k = 0; k < N; k++) labels[k] = (int)ct_rng_below(r, C);
        for (int i = 0; i < m.n; i++) {   /* this step's masks, the same on both devices */
            seq_layer *l = &m.layer[i];
            if (l->kind != SEQ_DROPOUT) continue;
            size_t nm = (size_t)N * ct_seq_layer_out_size(l);
            float *mask = t_alloc(nm);
            for (size_t j = 0; j < nm; j++) mask[j] = ct_rng_uniform(r) < l->p ? 0.0f : 1.0f / (1.0f - l->p);
            CT_ASSERT(be->ops->upload(be, l->mask, mask, nm * sizeof(float)) == CT_OK);
            free(mask);
        }
        float *gx = dput(be, x, (size_t)N * px);
        int *gl = dputi(be, labels, N), correct = 0;
        ct_train_state_zero_grad(&ts);
        losses[s] = ct_seq_cnn_forward(&m, gx, gl, N, 1, NULL, &correct);
        corrects[s] = (float)correct;
        if (s == 0) keep(o, "logits, step 1", be, m.logits, (size_t)N * C, 1e-5);
        ct_seq_cnn_backward(&m, gx, gl, N);
        if (s == 0) keep(o, "gradients, step 1", be, m.dev.grad, m.params.numel, 1e-4);
        ct_train_state_step(&ts, 1e-3f);
        dfree(be, gx); dfree(be, gl);
    }
    keep_host(o, "losses", losses, 2, 1e-5);
    keep_host(o, "right predictions", corrects, 2, 0);
    CT_ASSERT(ct_train_state_to_host(&ts) == CT_OK);
    keep_host(o, "parameters after two Adam steps", m.params.data, m.params.numel, 1e-4);
    keep_host(o, "batchnorm running statistics", m.buffers.data, m.buffers.numel, 1e-5);
    ct_train_state_end(&ts);
    ct_seq_cnn_free(&m);
    free(x);
}

/* ---- GPU-only checks ---- */

/* the GPU's own dropout masks: the counter-based scheme, reproduced on the host */
static void gpu_dropout_masks(const ct_backend *gpu, ct_rng *r)
{
    t_case("gpu/dropout_masks");
    const size_t n = 4099;
    const float p = 0.3f;
    float *x = rnd(n, -1, 1, r), *mask = t_alloc(n), *out = t_alloc(n);
    float *gx = dput(gpu, x, n), *gm = dnan(gpu, n), *go = dnan(gpu, n);
    ct_rng s1, s2;
    ct_rng_seed(&s1, 99, CT_STREAM_DROPOUT);
    s2 = s1;
    gpu->ops->dropout_forward(gpu, go, gm, gx, n, p, 1, &s1);
    uint64_t seed = ct_dropout_seed_draw(&s2);
    t_check(s1.state == s2.state, "the GPU call advanced the stream by two draws");
    ct_dropout_mask_ref(mask, n, p, seed, 0);
    for (size_t i = 0; i < n; i++) out[i] = x[i] * mask[i];
    float *h = t_alloc(n);
    CT_ASSERT(gpu->ops->download(gpu, h, gm, n * sizeof(float)) == CT_OK);
    t_close("mask (exact)", h, mask, n, 0);
    CT_ASSERT(gpu->ops->download(gpu, h, go, n * sizeof(float)) == CT_OK);
    t_close("out", h, out, n, 0);
    dfree(gpu, gx); dfree(gpu, gm); dfree(gpu, go);
    free(x); free(mask); free(out); free(h);

    /* a part of a larger batch (data-parallel training): the whole batch's masks for its
     * rows, one seed for the whole call (segments s of `rows` rows, this part's rows
     * [first, first + k) of each) */
    t_case("gpu/dropout_masks of a part of a batch = the whole batch's");
    enum { PER = 301, ROWS = 5, S = 2 };
    const size_t N = (size_t)S * ROWS * PER;
    x = rnd(N, -1, 1, r);
    float *whole = t_alloc(N), *part = t_alloc(N);
    gx = dput(gpu, x, N); gm = dnan(gpu, N); go = dnan(gpu, N);
    ct_rng_seed(&s1, 7, CT_STREAM_DROPOUT);
    ct_rng start = s1;
    gpu->ops->dropout_forward(gpu, go, gm, gx, N, p, 1, &s1);
    CT_ASSERT(gpu->ops->download(gpu, whole, gm, N * sizeof(float)) == CT_OK);
    const int first = 3, k = 2;
    const size_t m = (size_t)k * PER;
    float *pin = t_alloc(S * m);
    for (int sg = 0; sg < S; sg++) memcpy(pin + sg * m, x + ((size_t)sg * ROWS + first) * PER, m * sizeof(float));
    float *gpin = dput(gpu, pin, S * m), *gpm = dnan(gpu, S * m), *gpo = dnan(gpu, S * m);
    s2 = start;
    gpu->ops->dropout_forward_part(gpu, gpo, gpm, gpin, PER, S, k, first, ROWS, p, &s2);
    t_check(s1.state == s2.state, "the part's call advanced the stream as the whole batch's");
    CT_ASSERT(gpu->ops->download(gpu, part, gpm, S * m * sizeof(float)) == CT_OK);
    for (int sg = 0; sg < S; sg++) t_close("part's mask (exact)", part + sg * m, whole + ((size_t)sg * ROWS + first) * PER, m, 0);
    CT_ASSERT(gpu->ops->download(gpu, part, gpo, S * m * sizeof(float)) == CT_OK);
    for (size_t i = 0; i < S * m; i++) pin[i] *= whole[(i / m * ROWS + first) * PER + i % m];
    t_close("part's out", part, pin, S * m, 0);
    dfree(gpu, gx); dfree(gpu, gm); dfree(gpu, go); dfree(gpu, gpin); dfree(gpu, gpm); dfree(gpu, gpo);
    free(x); free(whole); free(part); free(pin);
}

/* Configurations the GPU cannot run, and its memory running out: one clear message. */
static void gpu_refusals(const ct_backend *gpu)
{
    t_case("gpu/refusals");
    siamese_lstm_config cfg = ct_siamese_lstm_defaults();
    cfg.n_mels = 4; cfg.frames = 5; cfg.hidden = 8; cfg.embed = 3;
    cfg.recurrent = LSTM_HARD_SIGMOID;
    siamese_lstm m;
    CT_ASSERT(ct_siamese_lstm_build(&m, &cfg) == CT_OK);
    ct_status st = ct_siamese_lstm_set_device(&m, gpu);
    if (st == CT_OK) st = ct_siamese_lstm_plan(&m, 2);
    t_check(st == CT_EINVAL && strstr(ct_last_error(), "hard_sigmoid") && strstr(ct_last_error(), "--device cpu"),
            "hard_sigmoid on the GPU: status %d: %s", (int)st, ct_last_error());
    ct_siamese_lstm_free(&m);
    /* compute-sanitizer reports the failed cudaMalloc as an error: CT_GPU_TEST_NO_OOM=1 leaves it out */
    if (getenv("CT_GPU_TEST_NO_OOM")) return;
    void *p = NULL;
    st = gpu->ops->mem_alloc(gpu, &p, (size_t)1 << 50, "a test buffer");
    t_check(st == CT_ENOMEM && p == NULL && strstr(ct_last_error(), "a test buffer") && strstr(ct_last_error(), "MiB free"),
            "out of memory: status %d: %s", (int)st, ct_last_error());
}

/* Training continued on the other device from a checkpoint: the result is the CPU's own
 * run's to float rounding (siamese-lstm: no dropout, so the two devices draw nothing apart). */
static void gpu_resume_across_devices(void)
{
    t_case("gpu/resume_across_devices");
    static char out[16384];
    char args[1024], dir[] = "/tmp/ctrain-gpu-resume-XXXXXX";
    if (!mkdtemp(dir)) { t_check(0, "mkdtemp"); return; }
    const char *common = "train siamese-lstm --speakers 8 --utts 4 --pairs 64 --val-pairs 32 --batch 16 --hidden 16 --embed 8 "
                         "--frames 20 --threads 1 --optimizer sgd --lr 0.05 --no-progress";
    const char *order[2][2] = { { "gpu", "cpu" }, { "cpu", "gpu" } };
    snprintf(args, sizeof args, "%s --epochs 2 --device cpu --out %s/cpu.h5", common, dir);
    int rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "the CPU run: exit %d: %s", rc, out);
    for (int k = 0; k < 2 && rc == 0; k++) {
        snprintf(args, sizeof args, "%s --epochs 1 --device %s --checkpoint %s/ck%d.h5", common, order[k][0], dir, k);
        rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc == 0, "epoch 1 on %s: exit %d: %s", order[k][0], rc, out);
        snprintf(args, sizeof args, "%s --epochs 2 --device %s --resume %s/ck%d.h5 --out %s/w%d.h5", common, order[k][1], dir, k, dir, k);
        if (rc == 0) rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc == 0, "epoch 2 on %s: exit %d: %s", order[k][1], rc, out);
        if (rc != 0) break;
        ct_params a, b;
        siamese_lstm_config cfg = ct_siamese_lstm_defaults();
        cfg.hidden = 16; cfg.embed = 8; cfg.frames = 20;
        siamese_lstm ma, mb;
        CT_ASSERT(ct_siamese_lstm_build(&ma, &cfg) == CT_OK && ct_siamese_lstm_build(&mb, &cfg) == CT_OK);
        snprintf(args, sizeof args, "%s/cpu.h5", dir);
        ct_status s1 = ct_weights_load(args, "siamese-lstm", &ma.params, NULL);
        snprintf(args, sizeof args, "%s/w%d.h5", dir, k);
        ct_status s2 = ct_weights_load(args, "siamese-lstm", &mb.params, NULL);
        t_check(s1 == CT_OK && s2 == CT_OK, "loading the weights: %s", ct_last_error());
        a = ma.params; b = mb.params;
        if (s1 == CT_OK && s2 == CT_OK) {
            char what[64];
            snprintf(what, sizeof what, "weights, %s then %s vs the CPU", order[k][0], order[k][1]);
            t_close(what, b.data, a.data, a.numel, 1e-3);
        }
        ct_siamese_lstm_free(&ma);
        ct_siamese_lstm_free(&mb);
    }
    snprintf(args, sizeof args, "rm -rf %s", dir);
    if (system(args) != 0) t_check(0, "could not remove %s", dir);
}

/* ---- which cases run ---- */

static const char *const gpu_cases[] = {
    "dense", "activation", "add", "pair", "loss", "ct_dropout_apply", "optim", "clip_grad_norm", "pool", "batchnorm",
    "batchnorm_synced", "batchnorm_synced_2500_channels", "batchnorm_channel_split_large_maps",
    "batchnorm_channel_split_small_maps", "batchnorm_1500_channels", "conv2d_im2col", "conv2d_winograd_shape", "lstm_fallback_layout", "lstm_stacked_masked", "lstm_T100", "lstm_T100_full_length",
    "lstm_smaller_batch_and_steps", "lstm_return_sequence", "lstm_return_mean", "lstm_batch1_T1", "memory_and_ring",
    "siamese_lstm_step_last", "siamese_lstm_step_mean", "siamese_cnn_step", "cnn_step", "cnn_step_residual", "dropout_masks", "dropout_masks of a part of a batch = the whole batch's", "refusals",
    "deterministic/conv2d_im2col", "deterministic/cnn_step", "tf32/dense", "tf32/conv2d_im2col", "tf32/lstm_T100",
    "tf32/siamese_cnn_step", "resume_across_devices",
    "own32/lstm_stacked_masked", "own32/lstm_T100", "own32/lstm_T100_full_length", "own32/lstm_smaller_batch_and_steps",
    "own32/lstm_return_sequence", "own32/lstm_return_mean", "own32/lstm_batch1_T1", "own32/recurrence_against_model",
    "own32/kernels_against_model",
};

static void set_lstm(int B, int T, int I, int H, int L, int plan_B, int plan_T, lstm_return ret, int masked, double tf, double tb, int direct)
{
    lstm_cfg = (lstm_case_cfg){ .B = B, .T = T, .I = I, .H = H, .L = L, .plan_B = plan_B, .plan_T = plan_T, .ret = ret,
                                .masked = masked, .tol_f = tf, .tol_b = tb, .want_direct = direct };
}

static void conv_cases(const ct_backend *gpu, const char *prefix)
{
    char name[64];
    CT_ASSERT(ct_conv2d_dims_make(&conv_case_dims, 5, 3, 9, 8, 4, 3, 3, 2, 1) == CT_OK);   /* strided: im2col on the CPU */
    snprintf(name, sizeof name, "%sconv2d_im2col", prefix);
    compare(name, case_conv2d, gpu, 11);
    if (*prefix) return;
    CT_ASSERT(ct_conv2d_dims_make(&conv_case_dims, 4, 8, 12, 11, 16, 3, 3, 1, 1) == CT_OK);
    conv_case_dims.winograd = 1;   /* Winograd on the CPU (forced: CPUs with AVX-512 pick packed im2col) */
    compare("conv2d_winograd_shape", case_conv2d, gpu, 12);
}

/* ---- bf16 (mixed precision): the GPU's bf16 layers against the CPU's bf16 layers (tile
 * model) and against the FP32 GPU layers ----
 *
 * Tolerances, from layers/gemm_bf16.h (u = 2^-24, gamma_K = K u / (1 - K u), S = sum_k |a_k||b_k|
 * of the element, K the longest sum of the case):
 *   against the FP32 GPU layer: bound (2), (2^-7 + 2^-16 + gamma_K (1 + 2^-8)^2) S, for the
 *     bf16 result, plus gamma_K S for the FP32 reference's own sums;
 *   against the CPU's bf16 layer (the same bf16-rounded operands, only the sums differ):
 *     bound (1) for each, gamma_{K+1} (1 + 2^-8)^2 S for the CPU and twice that for the GPU
 *     (tensor cores may align the addends by truncation: up to 2u per addition);
 *   conv2d adds cuDNN's bf16 output (forward out, din, and dw before it is added into the
 *     FP32 dw): one rounding to bf16, 2^-8 of the result, at most 2^-8 (1 + bound (2)) S;
 *   every element also gets 1e-6 of the tensor's largest entry (the bias and the
 *     accumulation into dw are FP32 additions on both sides).
 * The biases' gradients are FP32 sums on both sides (normalised 1e-5). */

static double bf16_gamma(double K) { const double u = ldexp(1.0, -24); return K * u / (1.0 - K * u); }
static double bf16_bound2(double K) { return ldexp(1.0, -7) + ldexp(1.0, -16) + bf16_gamma(K) * (1 + ldexp(1.0, -8)) * (1 + ldexp(1.0, -8)); }

/* |got - ref| <= coef S + 1e-6 max|ref| element by element; prints the largest share of the bound used */
static void bf16_within(const char *what, const float *got, const float *ref, const float *S, size_t n, double coef)
{
    double big = 0, worst = 0, norm = 0;
    for (size_t i = 0; i < n; i++) big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - ref[i]), lim = coef * S[i] + 1e-6 * big;
        if (!isfinite(got[i]) || e > lim) { if (!bad) first = i; bad++; }
        if (lim > 0 && e / lim > worst) worst = e / lim;
        if (e > norm) norm = e;
    }
    printf("     %-44s largest error %.3g of the bound (%.3g S); normalised %.3g\n", what, worst, coef, big > 0 ? norm / big : norm);
    t_check(bad == 0, "%s: %zu of %zu elements past the bound (first [%zu]: %g, reference %g, S %g)", what, bad, n, first,
            (double)got[first], (double)ref[first], (double)S[first]);
}

/* The bf16 layer's result is not the FP32 layer's bit for bit: its operands were rounded, so
 * the bf16 path ran (every bound above also holds for an FP32 result, which they cannot tell apart). */
static void bf16_ran(const char *what, const float *g16, const float *g32, size_t n)
{
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += g16[i] != g32[i];
    t_check(differ > 0, "%s: all %zu elements equal the FP32 GPU layer's bit for bit: the bf16 path did not run", what, n);
}

static float *dget(const ct_backend *be, const float *dev, size_t n)
{
    float *h = t_alloc(n);
    CT_ASSERT(be->ops->download(be, h, dev, n * sizeof(float)) == CT_OK);
    return h;
}
static float *absdup(const float *x, size_t n) { float *a = t_alloc(n); for (size_t i = 0; i < n; i++) a[i] = fabsf(x[i]); return a; }

typedef struct { float *v[4]; } bf16_res;   /* out, din, dw, db: host copies */
static void bf16_res_free(bf16_res *r) { for (int i = 0; i < 4; i++) free(r->v[i]); }

/* dense forward and backward on be: out, din, dw (accumulated onto dw0), db (onto db0) */
static void dense_run(const ct_backend *be, bf16_res *r, int B, int In, int O, const float *x, const float *w, const float *b,
                      const float *dout, const float *dw0, const float *db0)
{
    float *gx = dput(be, x, (size_t)B * In), *gw = dput(be, w, (size_t)O * In), *gb = b ? dput(be, b, O) : NULL;
    float *gdout = dput(be, dout, (size_t)B * O), *gdw = dput(be, dw0, (size_t)O * In), *gdb = dput(be, db0, O);
    float *gout = dnan(be, (size_t)B * O), *gdin = dnan(be, (size_t)B * In);
    be->ops->dense_forward(be, gout, gx, gw, gb, B, In, O);
    be->ops->dense_backward(be, gdin, gdw, gdb, gdout, gx, gw, B, In, O);
    t_check(be->ops->sync(be) == CT_OK, "%s: queued work failed: %s", be->name, ct_last_error());
    r->v[0] = dget(be, gout, (size_t)B * O);
    r->v[1] = dget(be, gdin, (size_t)B * In);
    r->v[2] = dget(be, gdw, (size_t)O * In);
    r->v[3] = dget(be, gdb, O);
    void *dv[] = { gx, gw, gb, gdout, gdw, gdb, gout, gdin };
    for (size_t i = 0; i < 8; i++) dfree(be, dv[i]);
}

static void bf16_dense(const ct_backend *g16, const ct_backend *cpu16, const ct_backend *g32, int B, int In, int O, uint64_t seed)
{
    char name[64];
    snprintf(name, sizeof name, "bf16/dense_%dx%dx%d", B, In, O);
    if (!case_selected(name)) return;
    t_case("gpu/%s", name);
    ct_rng r;
    ct_rng_seed(&r, seed, 77);
    const size_t nx = (size_t)B * In, nw = (size_t)O * In, no = (size_t)B * O;
    float *x = rnd(nx, -1, 1, &r), *w = rnd(nw, -1, 1, &r), *b = rnd(O, -1, 1, &r), *dout = rnd(no, -1, 1, &r);
    float *dw0 = rnd(nw, -1, 1, &r), *db0 = rnd(O, -1, 1, &r), *zw = t_alloc(nw), *zb = t_alloc(O);
    memset(zw, 0, nw * sizeof(float));
    memset(zb, 0, O * sizeof(float));
    bf16_res a, c, f, S;
    dense_run(g16, &a, B, In, O, x, w, b, dout, dw0, db0);
    dense_run(cpu16, &c, B, In, O, x, w, b, dout, dw0, db0);
    dense_run(g32, &f, B, In, O, x, w, b, dout, dw0, db0);
    float *ax = absdup(x, nx), *aw = absdup(w, nw), *ad = absdup(dout, no);
    dense_run(&ct_cpu_backend, &S, B, In, O, ax, aw, NULL, ad, zw, zb);   /* S of out, din, dw */
    const double K = In > B ? (In > O ? In : O) : (B > O ? B : O);
    const double to_fp32 = bf16_bound2(K) + bf16_gamma(K);
    const double to_cpu = 3 * bf16_gamma(K + 1) * (1 + ldexp(1.0, -8)) * (1 + ldexp(1.0, -8));
    const char *what[3] = { "out", "din", "dw (accumulated)" };
    const size_t n[3] = { no, nx, nw };
    for (int k = 0; k < 3; k++) {
        char w1[64], w2[64];
        snprintf(w1, sizeof w1, "%s vs the CPU's bf16", what[k]);
        snprintf(w2, sizeof w2, "%s vs the GPU's FP32", what[k]);
        bf16_within(w1, a.v[k], c.v[k], S.v[k], n[k], to_cpu);
        bf16_within(w2, a.v[k], f.v[k], S.v[k], n[k], to_fp32);
    }
    bf16_ran("out", a.v[0], f.v[0], no);
    t_close("db (accumulated, FP32) vs the GPU's FP32", a.v[3], f.v[3], O, 1e-5);
    bf16_res_free(&a); bf16_res_free(&c); bf16_res_free(&f); bf16_res_free(&S);
    free(x); free(w); free(b); free(dout); free(dw0); free(db0); free(zw); free(zb); free(ax); free(aw); free(ad);
}

/* conv2d forward and backward at the planned batch on be (host results as dense_run's) */
static void conv_run(const ct_backend *be, bf16_res *r, const conv2d_dims *d, const float *x, const float *w, const float *b,
                     const float *dout, const float *dw0, const float *db0)
{
    const size_t nin = (size_t)d->N * d->C * d->H * d->W, nout = (size_t)d->N * d->OC * d->OH * d->OW,
                 nw = (size_t)d->OC * d->C * d->KH * d->KW;
    memset(r, 0, sizeof *r);
    void *plan = NULL;
    ct_status st = be->ops->conv2d_plan(be, &plan, d, b != NULL);
    t_check(st == CT_OK, "%s conv2d plan: %s", be->name, ct_last_error());
    if (st != CT_OK) {   /* results of NaN: every comparison then fails, after the plan's own message */
        const size_t ns[4] = { nout, nin, nw, (size_t)d->OC };
        for (int i = 0; i < 4; i++) { r->v[i] = t_alloc(ns[i]); for (size_t j = 0; j < ns[i]; j++) r->v[i][j] = NAN; }
        return;
    }
    float *gx = dput(be, x, nin), *gw = dput(be, w, nw), *gb = b ? dput(be, b, d->OC) : NULL, *gdout = dput(be, dout, nout);
    float *gdw = dput(be, dw0, nw), *gdb = dput(be, db0, d->OC), *gout = dnan(be, nout), *gdin = dnan(be, nin);
    float *gws = dalloc(be, (be->ops->conv2d_workspace_floats(be, plan) + 1) * sizeof(float));
    be->ops->conv2d_forward(be, gout, gws, gx, gw, gb, plan, d->N);
    be->ops->conv2d_backward(be, gdin, gdw, b ? gdb : NULL, gws, gdout, gx, gw, plan, d->N);
    t_check(be->ops->sync(be) == CT_OK, "%s: queued work failed: %s", be->name, ct_last_error());
#ifdef CT_HAVE_CUDA
    if (!be->host_memory) {   /* the algorithms the bounds were met (or missed) with: FFT and Winograd ones round differently */
        const conv2d_gpu_shape *s = ct_conv2d_shape_gpu(plan, d->N);
        if (s)
            printf("     cuDNN algorithms (%s): forward %d, backward data %d, backward filter %d (cudnnConvolution*Algo_t)\n",
                   be->math.dtype == CT_BF16 ? "bf16" : "FP32", s->algo[CONV2D_GPU_FWD], s->algo[CONV2D_GPU_BWD_DATA],
                   s->algo[CONV2D_GPU_BWD_FILTER]);
    }
#endif
    r->v[0] = dget(be, gout, nout);
    r->v[1] = dget(be, gdin, nin);
    r->v[2] = dget(be, gdw, nw);
    r->v[3] = dget(be, gdb, d->OC);
    be->ops->conv2d_plan_free(be, plan);
    void *dv[] = { gx, gw, gb, gdout, gdw, gdb, gout, gdin, gws };
    for (size_t i = 0; i < 9; i++) dfree(be, dv[i]);
}

static void bf16_conv(const ct_backend *g16, const ct_backend *cpu16, const ct_backend *g32, const char *label,
                      int N, int C, int H, int W, int OC, int KH, int KW, int stride, int pad, uint64_t seed)
{
    char name[64];
    snprintf(name, sizeof name, "bf16/conv2d_%s", label);
    if (!case_selected(name)) return;
    t_case("gpu/%s", name);
    conv2d_dims d;
    CT_ASSERT(ct_conv2d_dims_make(&d, N, C, H, W, OC, KH, KW, stride, pad) == CT_OK);
    d.winograd = 0;   /* the FP32 CPU layer that computes S: im2col, so S is the plain sum of |a||b| */
    ct_rng r;
    ct_rng_seed(&r, seed, 77);
    const size_t nin = (size_t)N * C * H * W, nout = (size_t)N * OC * d.OH * d.OW, nw = (size_t)OC * C * KH * KW;
    float *x = rnd(nin, -1, 1, &r), *w = rnd(nw, -1, 1, &r), *b = rnd(OC, -1, 1, &r), *dout = rnd(nout, -1, 1, &r);
    float *dw0 = rnd(nw, -1, 1, &r), *db0 = rnd(OC, -1, 1, &r), *zw = t_alloc(nw), *zb = t_alloc(OC);
    memset(zw, 0, nw * sizeof(float));
    memset(zb, 0, OC * sizeof(float));
    bf16_res a, c, f, S;
    conv_run(g16, &a, &d, x, w, b, dout, dw0, db0);
    conv_run(cpu16, &c, &d, x, w, b, dout, dw0, db0);
    conv_run(g32, &f, &d, x, w, b, dout, dw0, db0);
    float *ax = absdup(x, nin), *aw = absdup(w, nw), *ad = absdup(dout, nout);
    conv_run(&ct_cpu_backend, &S, &d, ax, aw, NULL, ad, zw, zb);   /* S of out, din, dw */
    double K = (double)C * KH * KW;
    if ((double)N * d.OH * d.OW > K) K = (double)N * d.OH * d.OW;
    if ((double)OC * KH * KW > K) K = (double)OC * KH * KW;
    const double out_round = ldexp(1.0, -8) * (1 + bf16_bound2(K));
    const double to_fp32 = bf16_bound2(K) + bf16_gamma(K) + out_round;
    const double to_cpu = 3 * bf16_gamma(K + 1) * (1 + ldexp(1.0, -8)) * (1 + ldexp(1.0, -8)) + out_round;
    const char *what[3] = { "out", "din", "dw (accumulated)" };
    const size_t n[3] = { nout, nin, nw };
    for (int k = 0; k < 3; k++) {
        char w1[64], w2[64];
        snprintf(w1, sizeof w1, "%s vs the CPU's bf16", what[k]);
        snprintf(w2, sizeof w2, "%s vs the GPU's FP32", what[k]);
        bf16_within(w1, a.v[k], c.v[k], S.v[k], n[k], to_cpu);
        bf16_within(w2, a.v[k], f.v[k], S.v[k], n[k], to_fp32);
    }
    bf16_ran("out", a.v[0], f.v[0], nout);
    t_close("db (accumulated, FP32) vs the GPU's FP32", a.v[3], f.v[3], OC, 1e-5);
    bf16_res_free(&a); bf16_res_free(&c); bf16_res_free(&f); bf16_res_free(&S);
    free(x); free(w); free(b); free(dout); free(dw0); free(db0); free(zw); free(zb); free(ax); free(aw); free(ad);
}

/* An LSTM case (case_lstm, lstm_cfg) on the bf16 GPU, the bf16 CPU and the FP32 GPU from the
 * same seed; every output compared with the case's tolerance (2^-4: test_lstm_bf16.c's). */
static void bf16_lstm(const char *name, const ct_backend *g16, const ct_backend *cpu16, const ct_backend *g32, uint64_t seed)
{
    if (!case_selected(name)) return;
    t_case("gpu/%s", name);
    t_outs o[3];
    const ct_backend *be[3] = { g16, cpu16, g32 };
    const char *who[3] = { "", "the CPU's bf16", "the GPU's FP32" };
    for (int k = 0; k < 3; k++) {
        memset(&o[k], 0, sizeof o[k]);
        ct_rng r;
        ct_rng_seed(&r, seed, 77);
        gpu_tf32 = 0;
        case_lstm(be[k], &r, &o[k]);
        t_check(be[k]->ops->sync(be[k]) == CT_OK, "%s: queued work failed: %s", be[k]->name, ct_last_error());
    }
    for (int k = 1; k < 3; k++) {
        t_check(o[0].n == o[k].n && o[0].n > 0, "%d outputs vs %d", o[0].n, o[k].n);
        for (int i = 0; i < o[0].n && i < o[k].n; i++) {
            char what[128];
            snprintf(what, sizeof what, "%.80s vs %.20s", o[0].o[i].name, who[k]);
            const double e = t_close(what, o[0].o[i].v, o[k].o[i].v, o[k].o[i].n, o[k].o[i].tol);
            printf("     %-60s normalised error %.3g (tolerance %.3g)\n", what, e, o[k].o[i].tol);
        }
    }
    if (o[0].n > 0 && o[2].n > 0 && o[0].o[0].n == o[2].o[0].n) bf16_ran(o[0].o[0].name, o[0].o[0].v, o[2].o[0].v, o[0].o[0].n);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < o[k].n; i++) free(o[k].o[i].v);
}

/* The LSTM cases, named PREFIX/lstm_...: layers, lengths, every return mode, a call smaller
 * than the plan; tolerance 2^-4 of each tensor's largest entry. */
static void bf16_lstm_cases(const char *prefix, const ct_backend *g16, const ct_backend *cpu16, const ct_backend *g32)
{
    const double t4 = 0.0625;
    static const struct { const char *name; int B, T, I, H, L, plan_B, plan_T; lstm_return ret; int masked; uint64_t seed; } cs[] = {
        { "lstm_stacked_masked", 5, 12, 7, 16, 2, 5, 12, LSTM_RETURN_LAST, 1, 21 },
        { "lstm_T100", 16, 100, 40, 128, 1, 16, 100, LSTM_RETURN_LAST, 1, 22 },
        { "lstm_T100_full_length", 16, 100, 40, 128, 1, 16, 100, LSTM_RETURN_LAST, 0, 28 },
        { "lstm_return_sequence", 4, 9, 5, 8, 2, 4, 9, LSTM_RETURN_SEQUENCE, 1, 24 },
        { "lstm_return_mean", 4, 9, 5, 8, 1, 4, 9, LSTM_RETURN_MEAN, 1, 25 },
        { "lstm_smaller_batch_and_steps", 5, 9, 7, 16, 1, 64, 30, LSTM_RETURN_LAST, 1, 23 },
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        char name[96];
        snprintf(name, sizeof name, "%s/%s", prefix, cs[c].name);
        set_lstm(cs[c].B, cs[c].T, cs[c].I, cs[c].H, cs[c].L, cs[c].plan_B, cs[c].plan_T, cs[c].ret, cs[c].masked, t4, t4, -1);
        bf16_lstm(name, g16, cpu16, g32, cs[c].seed);
    }
}

/* siamese-lstm trained 4 epochs on the GPU in bf16 and in FP32 from the same seed: every
 * epoch's loss and val_loss within 5% of FP32's (the CPU's bf16 training test's tolerance). */
static void bf16_training(int own)
{
    const char *name = own ? "bf16own/training_siamese_lstm" : "bf16/training_siamese_lstm";
    if (!case_selected(name)) return;
    t_case("gpu/%s (--precision bf16 against fp32 on the GPU, losses within 5%%)", name);
    static char out[2][1 << 15];
    const char *base = "train siamese-lstm --data synthetic --pairs 512 --val-pairs 128 --batch 64 --hidden 32 --embed 16 "
                       "--frames 40 --speakers 10 --utts 6 --threads 2 --no-run-dir --no-progress --epochs 4 --device gpu";
    char args[1024];
    snprintf(args, sizeof args, "%s --precision fp32", base);
    const int rc0 = t_run_ctrain(args, out[0], sizeof out[0]);
    snprintf(args, sizeof args, "%s --precision bf16", base);
    const char *algo = getenv("CTRAIN_LSTM_ALGO");
    char before[64];
    snprintf(before, sizeof before, "%s", algo ? algo : "");
    if (own) setenv("CTRAIN_LSTM_ALGO", "ctrain", 1);   /* the bf16 run on ctrain's own LSTM kernels */
    const int rc1 = t_run_ctrain(args, out[1], sizeof out[1]);
    if (own && algo) setenv("CTRAIN_LSTM_ALGO", before, 1);
    else if (own) unsetenv("CTRAIN_LSTM_ALGO");
    if (own) t_check(strstr(out[1], "ctrain's own kernels") != NULL, "the bf16 run does not say it ran ctrain's own LSTM kernels:\n%s", out[1]);
    t_check(rc0 == 0 && rc1 == 0, "exit %d and %d:\n%s\n%s", rc0, rc1, out[0], out[1]);
    t_check(strstr(out[1], "bf16") != NULL, "the bf16 run's output does not name bf16:\n%s", out[1]);
    double l[2][8], v[2][8];
    const int n0 = t_epoch_losses(out[0], l[0], v[0], 8), n1 = t_epoch_losses(out[1], l[1], v[1], 8);
    t_check(n0 == 4 && n1 == 4, "4 epoch lines each: %d, %d", n0, n1);
    double worst = 0;
    for (int e = 0; e < n0 && e < n1; e++) {
        const double dl = fabs(l[1][e] - l[0][e]) / l[0][e], dv = fabs(v[1][e] - v[0][e]) / v[0][e];
        if (dl > worst) worst = dl;
        if (dv > worst) worst = dv;
        t_check(dl <= 0.05 && dv <= 0.05, "epoch %d: loss %.5f vs %.5f, val_loss %.5f vs %.5f", e + 1, l[1][e], l[0][e], v[1][e],
                v[0][e]);
    }
    printf("     largest relative difference of a loss: %.3g (tolerance 0.05)\n", worst);
}

static const char *const bf16_cases[] = {
    "bf16/dense_37x130x67", "bf16/dense_256x128x64", "bf16/conv2d_im2col", "bf16/conv2d_stride1", "bf16/lstm_stacked_masked",
    "bf16/lstm_T100", "bf16/lstm_T100_full_length", "bf16/lstm_return_sequence", "bf16/lstm_return_mean",
    "bf16/lstm_smaller_batch_and_steps", "bf16/training_siamese_lstm", "bf16/peak",
    "bf16own/recurrence_against_model", "bf16own/kernels_against_model", "bf16own/lstm_stacked_masked", "bf16own/lstm_T100", "bf16own/lstm_T100_full_length",
    "bf16own/lstm_return_sequence", "bf16own/lstm_return_mean", "bf16own/lstm_smaller_batch_and_steps", "bf16own/training_siamese_lstm",
};

#ifdef CT_HAVE_CUDA
/* ctrain's own LSTM kernels (cuda/lstm_rec_kernels.cuh) on the GPU against their C model
 * (cuda/lstm_rec.c), bf16 and float32.
 *
 * Tolerances. The two differ by float32 rounding alone: CUDA's expf and tanhf are within 2 ulp
 * of glibc's, the compiler fuses some multiply-adds, and (own_vs_model) cuBLAS sums the
 * products over all steps in another order; each about 1e-7 relative. In float32 that stays
 * small through the recurrence: 1e-4 of each tensor's largest entry. In bf16, where such a
 * difference moves h or dz across a bf16 rounding boundary, that value moves by 2^-8 of itself
 * and the recurrence carries it on: 2^-7, a sixteenth of the bf16 tolerance against float32.
 * An indexing error is of the order of the values themselves. The cases print what they
 * measured; S = 2 and S = 4 (sequences per block) must give the same bits. */
static float *op_as_floats(int bf16, const void *h, size_t n)
{
    float *f = t_alloc(n);
    if (bf16) ct_floats_from_bf16s(f, (const uint16_t *)h, n);
    else memcpy(f, h, n * sizeof(float));
    return f;
}
static double own_tol(int bf16) { return bf16 ? 1.0 / 128 : 1e-4; }

/* The two recurrent kernels alone (no cuBLAS: racecheck runs this case) against the model's,
 * on the same inputs: the forward from the same zx, biases, weight image and lengths (h, the
 * final h, the kept gates and c, op(h_{t-1})); the backward from the MODEL's kept gates and c,
 * so that it starts from the same values (op(dz) and the bias sums). */
static void own_recurrence(const ct_backend *gpu, int bf16)
{
    const char *name = bf16 ? "bf16own/recurrence_against_model" : "own32/recurrence_against_model";
    if (!case_selected(name)) return;
    static const struct { int B, T, H; } cs[] = { { 9, 30, 37 }, { 16, 100, 128 }, { 5, 7, 64 }, { 3, 12, 20 } };
    ct_gpu *g = gpu->dev;
    const double tol = own_tol(bf16);
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int B = cs[c].B, T = cs[c].T, H = cs[c].H, G = 4 * H, HP = ct_lstm_rec_hp(H);
        t_case("gpu/%s B=%d T=%d H=%d (tolerance %.3g)", name, B, T, H, tol);
        ct_rng rng;
        ct_rng_seed(&rng, 3200 + c, 0);
        const size_t BT = (size_t)B * T, op = bf16 ? 2 : 4;
        const size_t ibytes = (size_t)ct_lstm_rec_words(HP) * ct_lstm_rec_threads(HP) * ct_lstm_rec_word_bytes(bf16);
        float *zx = rnd(BT * G, -2, 2, &rng), *bih = rnd(G, -0.5f, 0.5f, &rng), *bhh = rnd(G, -0.5f, 0.5f, &rng);
        float *whh = rnd((size_t)G * H, -0.3f, 0.3f, &rng), *dy = rnd(BT * H, -1, 1, &rng), *dhy = rnd((size_t)B * H, -1, 1, &rng);
        int len[16];
        for (int b = 0; b < B; b++) len[b] = b ? 1 + (int)ct_rng_below(&rng, (unsigned)T) : T;
        void *wf = malloc(ibytes), *wb = malloc(ibytes), *hprev = calloc(BT * H, op), *dzh = calloc(BT * G, op);
        float *y = t_alloc(BT * H), *hy = t_alloc((size_t)B * H), *gates = t_alloc(BT * G), *cst = t_alloc(BT * H), *dbpart = t_alloc((size_t)B * G);
        CT_ASSERT(wf && wb && hprev && dzh);
        ct_lstm_rec_model.pack(NULL, bf16, 0, wf, whh, H, HP);
        ct_lstm_rec_model.pack(NULL, bf16, 1, wb, whh, H, HP);
        lstm_rec_fwd_args fa = { B, T, H, HP, 2, bf16, zx, bih, bhh, wf, len, y, hy, gates, cst, hprev };
        ct_lstm_rec_model.forward(NULL, &fa);
        lstm_rec_bwd_args ba = { B, T, H, HP, 2, bf16, dy, dhy, gates, cst, wb, len, dzh, dbpart };
        ct_lstm_rec_model.backward(NULL, &ba);
        float *got[2][7] = { { NULL } };
        for (int k = 0; k < 2; k++) {
            const int S = k ? 4 : 2;
            float *gzx = dput(gpu, zx, BT * G), *gbih = dput(gpu, bih, G), *gbhh = dput(gpu, bhh, G);
            float *gy = dalloc(gpu, BT * H * 4), *ghy = dalloc(gpu, (size_t)B * H * 4), *ggates = dalloc(gpu, BT * G * 4);
            float *gcs = dalloc(gpu, BT * H * 4), *gdb = dalloc(gpu, (size_t)B * G * 4), *gdy = dput(gpu, dy, BT * H);
            float *gdhy = dput(gpu, dhy, (size_t)B * H), *mgates = dput(gpu, gates, BT * G), *mcs = dput(gpu, cst, BT * H);
            void *ghprev = dalloc(gpu, BT * H * op), *gdzh = dalloc(gpu, BT * G * op), *gwf = dalloc(gpu, ibytes), *gwb = dalloc(gpu, ibytes);
            int *glen = dputi(gpu, len, B);
            t_check(ct_gpu_upload(g, gwf, wf, ibytes) == CT_OK && ct_gpu_upload(g, gwb, wb, ibytes) == CT_OK, "upload: %s", ct_last_error());
            lstm_rec_fwd_args gf = { B, T, H, HP, S, bf16, gzx, gbih, gbhh, gwf, glen, gy, ghy, ggates, gcs, ghprev };
            ct_lstm_rec_gpu.forward((void *)gpu, &gf);
            lstm_rec_bwd_args gbk = { B, T, H, HP, S, bf16, gdy, gdhy, mgates, mcs, gwb, glen, gdzh, gdb };
            ct_lstm_rec_gpu.backward((void *)gpu, &gbk);
            t_check(ct_gpu_sync(g) == CT_OK, "queued work failed: %s", ct_last_error());
            void *h = malloc(BT * G * op);
            CT_ASSERT(h);
            got[k][0] = dget(gpu, gy, BT * H);
            got[k][1] = dget(gpu, ghy, (size_t)B * H);
            got[k][2] = dget(gpu, ggates, BT * G);
            got[k][3] = dget(gpu, gcs, BT * H);
            CT_ASSERT(ct_gpu_download(g, h, ghprev, BT * H * op) == CT_OK);
            got[k][4] = op_as_floats(bf16, h, BT * H);
            CT_ASSERT(ct_gpu_download(g, h, gdzh, BT * G * op) == CT_OK);
            got[k][5] = op_as_floats(bf16, h, BT * G);
            got[k][6] = dget(gpu, gdb, (size_t)B * G);
            free(h);
            void *mine[] = { gzx, gbih, gbhh, gy, ghy, ggates, gcs, gdb, gdy, gdhy, mgates, mcs, ghprev, gdzh, gwf, gwb, glen };
            for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) dfree(gpu, mine[i]);
        }
        float *mh = op_as_floats(bf16, hprev, BT * H), *mdz = op_as_floats(bf16, dzh, BT * G);
        const float *ref[7] = { y, hy, gates, cst, mh, mdz, dbpart };
        const size_t n[7] = { BT * H, (size_t)B * H, BT * G, BT * H, BT * H, BT * G, (size_t)B * G };
        const char *what[7] = { "h", "final h", "kept gates", "c", "op(h_{t-1})", "op(dz)", "bias sums" };
        for (int i = 0; i < 7; i++) {
            const double e = t_close(what[i], got[0][i], ref[i], n[i], tol);
            printf("     %-14s against the model: normalised error %.3g\n", what[i], e);
            t_check(!memcmp(got[0][i], got[1][i], n[i] * sizeof(float)), "%s: S = 2 and S = 4 differ", what[i]);
        }
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 7; i++) free(got[k][i]);
        free(mh); free(mdz); free(zx); free(bih); free(bhh); free(whh); free(dy); free(dhy); free(wf); free(wb);
        free(y); free(hy); free(gates); free(cst); free(dbpart); free(hprev); free(dzh);
    }
}

/* The whole layer through the steps both share (cuda/lstm_rec.c), the kernels and cuBLAS on
 * the GPU against the model, from the same data: the weight images bit for bit (the same index
 * function, the same rounding), and the layer's h sequence, final h, dx and gradients within
 * own_tol. gpu: the backend of the precision (its cuBLAS handle: float32 without TF32). */
static void own_vs_model(const ct_backend *gpu, int bf16)
{
    const char *name = bf16 ? "bf16own/kernels_against_model" : "own32/kernels_against_model";
    if (!case_selected(name)) return;
    static const struct { int B, T, I, H, L, masked; } cs[] = {
        { 5, 12, 7, 20, 2, 1 }, { 16, 100, 40, 128, 1, 1 }, { 9, 25, 11, 37, 1, 1 }, { 6, 40, 24, 64, 1, 0 }, { 130, 20, 8, 128, 1, 1 },
    };
    ct_gpu *g = gpu->dev;
    const double tol = own_tol(bf16);
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int B = cs[c].B, T = cs[c].T, I = cs[c].I, H = cs[c].H, L = cs[c].L;
        t_case("gpu/%s B=%d T=%d I=%d H=%d L=%d len=%s (tolerance %.3g)", name, B, T, I, H, L, cs[c].masked ? "yes" : "no", tol);
        const lstm_dims d = { B, T, I, H, L, LSTM_RETURN_SEQUENCE, LSTM_SIGMOID, bf16 ? CT_BF16 : CT_F32, 0 };
        ct_rng rng;
        ct_rng_seed(&rng, 3100 + c, 0);
        ct_params ps;
        lstm_ids ids;
        ct_params_init(&ps);
        CT_ASSERT(ct_lstm_params_add(&ids, &ps, "lstm", I, H, L) == CT_OK && ct_params_alloc(&ps) == CT_OK);
        ct_params_initialize(&ps, &rng);
        const size_t nx = (size_t)B * T * I, ny = (size_t)B * T * H, nh = (size_t)B * H;
        float *x = rnd(nx, -1, 1, &rng), *dy = rnd(ny, -1, 1, &rng), *dhy = rnd(nh, -1, 1, &rng);
        int len[160];
        for (int b = 0; b < B; b++) len[b] = cs[c].masked && b ? 1 + (int)ct_rng_below(&rng, (unsigned)T) : T;
        /* the model */
        lstm_weights w[LSTM_MAX_LAYERS];
        lstm_grads gr[LSTM_MAX_LAYERS];
        ct_lstm_params_view(w, gr, &ps, &ids);
        lstm_rec_plan pm;
        t_check(ct_lstm_rec_plan_make(&pm, &ct_lstm_rec_model, &d, 2) == CT_OK, "model plan: %s", ct_last_error());
        float *mdx = calloc(nx, sizeof(float));
        CT_ASSERT(mdx);
        ct_lstm_rec_forward(&pm, x, len, w, &d);
        ct_lstm_rec_backward(&pm, mdx, gr, dy, dhy, len, w, &d);
        /* the kernels, with S = 2 and 4 */
        float *got[2][4] = { { NULL } };
        void *img[2] = { NULL, NULL };
        const size_t ibytes = (size_t)ct_lstm_rec_words(pm.HP) * ct_lstm_rec_threads(pm.HP) * ct_lstm_rec_word_bytes(bf16);
        for (int k = 0; k < 2; k++) {
            lstm_rec_engine e = ct_lstm_rec_gpu;
            e.ctx = (void *)gpu;
            lstm_rec_plan pg;
            ct_status st = ct_lstm_rec_plan_make(&pg, &e, &d, k ? 4 : 2);
            t_check(st == CT_OK, "GPU plan: %s", ct_last_error());
            if (st != CT_OK) continue;
            float *gp = dput(gpu, ps.data, ps.numel), *gg = dalloc(gpu, ps.numel * sizeof(float));
            float *gx = dput(gpu, x, nx), *gdy = dput(gpu, dy, ny), *gdhy = dput(gpu, dhy, nh), *gdx = dalloc(gpu, nx * sizeof(float));
            int *glen = dputi(gpu, len, B);
            ct_params dev = ps;
            dev.data = gp;
            dev.grad = gg;
            lstm_weights dw[LSTM_MAX_LAYERS];
            lstm_grads dg[LSTM_MAX_LAYERS];
            ct_lstm_params_view(dw, dg, &dev, &ids);
            ct_lstm_rec_forward(&pg, gx, glen, dw, &d);
            ct_lstm_rec_backward(&pg, gdx, dg, gdy, gdhy, glen, dw, &d);
            t_check(ct_gpu_sync(g) == CT_OK, "queued work failed: %s", ct_last_error());
            got[k][0] = dget(gpu, pg.y[L - 1], ny);
            got[k][1] = dget(gpu, pg.hy, nh);
            got[k][2] = dget(gpu, gdx, nx);
            got[k][3] = dget(gpu, gg, ps.numel);
            if (k == 0) {
                img[0] = malloc(ibytes);
                img[1] = malloc(ibytes);
                CT_ASSERT(img[0] && img[1]);
                t_check(ct_gpu_download(g, img[0], pg.wf[0], ibytes) == CT_OK && ct_gpu_download(g, img[1], pg.wb[0], ibytes) == CT_OK,
                        "download: %s", ct_last_error());
            }
            ct_lstm_rec_plan_free(&pg);
            void *mine[] = { gp, gg, gx, gdy, gdhy, gdx, glen };
            for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) dfree(gpu, mine[i]);
        }
        if (img[0]) {
            /* pm.wb[0] was packed by the model's backward, pm.wf[0] by its forward, from the same weights */
            t_check(!memcmp(img[0], pm.wf[0], ibytes), "the forward weight image differs from the model's");
            t_check(!memcmp(img[1], pm.wb[0], ibytes), "the backward weight image differs from the model's");
        }
        if (got[0][0] && got[1][0]) {
            const float *ref[4] = { pm.y[L - 1], pm.hy, mdx, ps.grad };
            const size_t n[4] = { ny, nh, nx, ps.numel };
            const char *what[4] = { "h sequence", "final h", "dx", "parameter gradients" };
            for (int i = 0; i < 4; i++) {
                const double e = t_close(what[i], got[0][i], ref[i], n[i], tol);
                printf("     %-20s against the model: normalised error %.3g (tolerance %.3g)\n", what[i], e, tol);
                t_check(!memcmp(got[0][i], got[1][i], n[i] * sizeof(float)), "%s: S = 2 and S = 4 differ", what[i]);
            }
        }
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 4; i++) free(got[k][i]);
        free(img[0]); free(img[1]);
        ct_lstm_rec_plan_free(&pm);
        free(x); free(dy); free(dhy); free(mdx);
        ct_params_free(&ps);
    }
}
#endif

/* `time`'s "of peak" for a bf16 GPU run: the bf16 product (GemmEx, float32 accumulation) runs
 * and outpaces plain FP32 sgemm of the same size, as bf16 tensor cores do on every GPU that
 * bf16 opens on (compute capability 8.0 and later). */
static void bf16_peak(const ct_backend *g16)
{
    if (!case_selected("bf16/peak")) return;
    t_case("gpu/bf16/peak (cuBLAS GemmEx bf16 %d^3 against FP32 sgemm of the same size)", CT_PEAK_N);
    ct_sgemm_rate b = { 0 }, f = { 0 };
    const ct_status sb = ct_gemm_rate_gpu_bf16(g16->dev, &b, CT_PEAK_N, 3);
    t_check(sb == CT_OK, "bf16 rate: %s", ct_last_error());
    const ct_status sf = ct_sgemm_rate_gpu(g16->dev, &f, CT_PEAK_N, 0, 3);
    t_check(sf == CT_OK, "FP32 rate: %s", ct_last_error());
    printf("     bf16 %.0f GFLOP/s, FP32 %.0f GFLOP/s (medians of 3)\n", b.median, f.median);
    if (sb == CT_OK && sf == CT_OK) t_check(b.median > 1.5 * f.median, "bf16 %.0f GFLOP/s is not above 1.5x FP32's %.0f", b.median, f.median);
    t_check(ct_gemm_rate_gpu_bf16(g16->dev, &b, 0, 3) == CT_EINVAL, "n = 0 accepted");
}

/* The bf16 cases on GPU 0 opened in bf16 (the FP32 GPU backend g32 beside it). */
static void run_bf16_cases(const ct_backend *g32)
{
    const ct_math m16 = { .dtype = CT_BF16 };
    ct_backend g16, cpu16;
    if (ct_backend_open_gpu(&g16, 0, &m16) != CT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ct_last_error());
        for (size_t i = 0; i < sizeof bf16_cases / sizeof bf16_cases[0]; i++)
            if (case_selected(bf16_cases[i])) t_skip("gpu/%s: %s", bf16_cases[i], why);
        return;
    }
    char line[512];
    ct_gpu_describe(g16.dev, &g16.math, line, sizeof line);
    printf("  %s\n", line);
    ct_gemm_bf16_use_model(1);   /* the CPU's bf16 products on the tile model: any CPU */
    if (ct_backend_open_cpu(&cpu16, &m16) != CT_OK) {
        t_case("gpu/bf16 (the CPU's bf16 backend on the tile model)");
        t_check(0, "the CPU's bf16 backend: %s", ct_last_error());
        ct_gemm_bf16_use_model(0);
        ct_backend_close(&g16);
        return;
    }
    bf16_dense(&g16, &cpu16, g32, 37, 130, 67, 40);     /* odd sizes: the products' tails */
    bf16_dense(&g16, &cpu16, g32, 256, 128, 64, 41);    /* the seed model's head */
    bf16_conv(&g16, &cpu16, g32, "im2col", 5, 3, 9, 8, 4, 3, 3, 2, 1, 42);
    bf16_conv(&g16, &cpu16, g32, "stride1", 4, 8, 12, 11, 16, 3, 3, 1, 1, 43);
    bf16_lstm_cases("bf16", &g16, &cpu16, g32);
    bf16_peak(&g16);
    ct_backend_close(&cpu16);
    ct_gemm_bf16_use_model(0);
    ct_backend_close(&g16);
    bf16_training(0);
}

#ifdef CT_HAVE_CUDA
/* ctrain's own LSTM kernels (cuda/lstm_rec.h), last: a fault on the GPU there (they have not run on
 * one before) would leave the device unusable for every case after it. The float32 layer cases
 * against the CPU as the FP32 ones above, the bf16 ones as bf16/..., the kernels against their
 * C model in both precisions, and a bf16 training. */
static void run_own_cases(const ct_backend *g32)
{
    const ct_math m32 = { .lstm_own = 1 }, m16 = { .dtype = CT_BF16, .lstm_own = 1 }, c16 = { .dtype = CT_BF16 };
    ct_backend o32, o16, cpu16;
    if (ct_backend_open_gpu(&o32, 0, &m32) == CT_OK) {   /* it opened before, as the suite's backend */
        /* the float32 LSTM cases of run_gpu_cases, at their tolerances */
        static const struct { const char *name; int B, T, I, H, L, pB, pT; lstm_return ret; int masked; double tf, tb; uint64_t seed; } cs[] = {
            { "own32/lstm_stacked_masked", 5, 12, 7, 16, 2, 5, 12, LSTM_RETURN_LAST, 1, 2e-5, 1e-4, 21 },
            { "own32/lstm_T100", 16, 100, 40, 128, 1, 16, 100, LSTM_RETURN_LAST, 1, 1e-4, 5e-4, 22 },
            { "own32/lstm_T100_full_length", 16, 100, 40, 128, 1, 16, 100, LSTM_RETURN_LAST, 0, 1e-4, 5e-4, 28 },
            { "own32/lstm_smaller_batch_and_steps", 5, 9, 7, 16, 1, 64, 30, LSTM_RETURN_LAST, 1, 2e-5, 1e-4, 23 },
            { "own32/lstm_return_sequence", 4, 9, 5, 8, 2, 4, 9, LSTM_RETURN_SEQUENCE, 1, 2e-5, 1e-4, 24 },
            { "own32/lstm_return_mean", 4, 9, 5, 8, 1, 4, 9, LSTM_RETURN_MEAN, 1, 2e-5, 1e-4, 25 },
            { "own32/lstm_batch1_T1", 1, 1, 3, 4, 1, 1, 1, LSTM_RETURN_LAST, 0, 2e-5, 1e-4, 26 },
        };
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            set_lstm(cs[c].B, cs[c].T, cs[c].I, cs[c].H, cs[c].L, cs[c].pB, cs[c].pT, cs[c].ret, cs[c].masked, cs[c].tf, cs[c].tb, -1);
            compare(cs[c].name, case_lstm, &o32, cs[c].seed);
        }
        own_recurrence(&o32, 0);
        own_vs_model(&o32, 0);
        ct_backend_close(&o32);
    }
    if (ct_backend_open_gpu(&o16, 0, &m16) == CT_OK) {   /* run_bf16_cases reported a failure to open it */
        ct_gemm_bf16_use_model(1);
        if (ct_backend_open_cpu(&cpu16, &c16) == CT_OK) {
            bf16_lstm_cases("bf16own", &o16, &cpu16, g32);
            ct_backend_close(&cpu16);
        }
        ct_gemm_bf16_use_model(0);
        own_recurrence(&o16, 1);
        own_vs_model(&o16, 1);
        ct_backend_close(&o16);
        bf16_training(1);
    }
}
#endif

static void run_gpu_cases(const ct_backend *gpu)
{
    char line[512];
    ct_gpu_describe(gpu->dev, &gpu->math, line, sizeof line);
    printf("  %s\n", line);
    compare("dense", case_dense, gpu, 1);
    compare("activation", case_activation, gpu, 2);
    compare("add", case_add, gpu, 36);
    compare("pair", case_pair, gpu, 3);
    compare("loss", case_loss, gpu, 4);
    compare("ct_dropout_apply", case_dropout_apply, gpu, 5);
    compare("optim", case_optim, gpu, 6);
    compare("clip_grad_norm", case_clip, gpu, 7);
    compare("pool", case_pool, gpu, 8);
    bn_plain_dims = (batchnorm_dims){ .N = 4, .C = 3, .HW = 5 };
    compare("batchnorm", case_batchnorm, gpu, 9);
    /* each channel split between blocks (cuda/batchnorm.cu): uneven shares of maps larger than a
     * block (3 blocks per channel), of maps smaller than one (7 per channel, HW = 49), and more
     * channels than one chunk of partial sums (1,500) */
    bn_plain_dims = (batchnorm_dims){ .N = 3, .C = 3, .HW = 5000 };
    compare("batchnorm_channel_split_large_maps", case_batchnorm, gpu, 11);
    bn_plain_dims = (batchnorm_dims){ .N = 600, .C = 2, .HW = 49 };
    compare("batchnorm_channel_split_small_maps", case_batchnorm, gpu, 12);
    bn_plain_dims = (batchnorm_dims){ .N = 2, .C = 1500, .HW = 3 };
    compare("batchnorm_1500_channels", case_batchnorm, gpu, 13);
    bn_synced_dims = (batchnorm_dims){ .N = 4, .C = 5, .HW = 7 };
    compare("batchnorm_synced", case_batchnorm_synced, gpu, 10);
    bn_synced_dims = (batchnorm_dims){ .N = 2, .C = 2500, .HW = 3 };   /* more channels than one chunk of the sums */
    compare("batchnorm_synced_2500_channels", case_batchnorm_synced, gpu, 10);
    conv_cases(gpu, "");
    set_lstm(3, 5, 4, 6, 1, 3, 5, LSTM_RETURN_LAST, 0, 2e-5, 1e-4, 0);   /* H = 6: ctrain pads, cuDNN does not -> packed */
    compare("lstm_fallback_layout", case_lstm, gpu, 20);
    /* two layers: cuDNN 9.14 puts every layer's matrices before the biases, ctrain keeps each
     * layer's together (packed); another cuDNN may not: either layout is accepted there */
    set_lstm(5, 12, 7, 16, 2, 5, 12, LSTM_RETURN_LAST, 1, 2e-5, 1e-4, -1);
    compare("lstm_stacked_masked", case_lstm, gpu, 21);
    set_lstm(16, 100, 40, 128, 1, 16, 100, LSTM_RETURN_LAST, 1, 1e-4, 5e-4, 1);   /* the seed's sizes */
    compare("lstm_T100", case_lstm, gpu, 22);
    set_lstm(16, 100, 40, 128, 1, 16, 100, LSTM_RETURN_LAST, 0, 1e-4, 5e-4, 1);   /* unmasked: cuDNN's persistent kernel */
    compare("lstm_T100_full_length", case_lstm, gpu, 28);
    set_lstm(5, 9, 7, 16, 1, 64, 30, LSTM_RETURN_LAST, 1, 2e-5, 1e-4, 1);   /* planned for more: cuDNN's sizes re-queried */
    compare("lstm_smaller_batch_and_steps", case_lstm, gpu, 23);
    set_lstm(4, 9, 5, 8, 2, 4, 9, LSTM_RETURN_SEQUENCE, 1, 2e-5, 1e-4, -1);
    compare("lstm_return_sequence", case_lstm, gpu, 24);
    set_lstm(4, 9, 5, 8, 1, 4, 9, LSTM_RETURN_MEAN, 1, 2e-5, 1e-4, 1);
    compare("lstm_return_mean", case_lstm, gpu, 25);
    set_lstm(1, 1, 3, 4, 1, 1, 1, LSTM_RETURN_LAST, 0, 2e-5, 1e-4, 1);
    compare("lstm_batch1_T1", case_lstm, gpu, 26);

    compare("memory_and_ring", case_memory, gpu, 27);
    slstm_cfg = ct_siamese_lstm_defaults();
    slstm_cfg.n_mels = 8; slstm_cfg.frames = 12; slstm_cfg.hidden = 16; slstm_cfg.embed = 8;
    compare("siamese_lstm_step_last", case_siamese_lstm, gpu, 30);
    slstm_cfg.pool = LSTM_RETURN_MEAN; slstm_cfg.layers = 2;
    compare("siamese_lstm_step_mean", case_siamese_lstm, gpu, 31);
    scnn_cfg = ct_siamese_cnn_defaults();
    scnn_cfg.n_mels = 10; scnn_cfg.frames = 16; scnn_cfg.embed = 0;
    snprintf(scnn_cfg.spec, sizeof scnn_cfg.spec, "conv4k3p1,batchnorm,relu,maxpool2,conv8k3p1,batchnorm,relu,gaph,dense6");
    compare("siamese_cnn_step", case_siamese_cnn, gpu, 32);
    cnn_case_spec = "conv4k3,relu,conv6k3p1,batchnorm,relu,maxpool2,dropout0.25,flatten,dense12,tanh,dropout0.5,dense5";
    compare("cnn_step", case_cnn, gpu, 33);
    cnn_case_spec = "conv4k3p1,relu,batchnorm,save,conv4k3p1,tanh,batchnorm,conv4k3p1,add,relu,maxpool2,save,conv4k3p1,tanh,add,"
                    "flatten,dense12,save,relu,dense12,dropout0.5,add,dense5";   /* residual blocks: the skip buffers */
    compare("cnn_step_residual", case_cnn, gpu, 35);
    cnn_case_spec = "conv4k3,relu,conv6k3p1,batchnorm,relu,maxpool2,dropout0.25,flatten,dense12,tanh,dropout0.5,dense5";
    ct_rng r;
    ct_rng_seed(&r, 34, 77);
    gpu_dropout_masks(gpu, &r);
    gpu_refusals(gpu);
    /* the deterministic algorithms, then TF32 (looser tolerances: 10-bit mantissas) */
    /* the deterministic algorithms, then TF32: each a backend of its own on the same GPU */
    const ct_math det = { .deterministic = 1 }, tf32 = { .tf32 = 1 };
    ct_backend other;
    if (ct_backend_open_gpu(&other, 0, &det) == CT_OK) {
        conv_cases(&other, "deterministic/");
        compare("deterministic/cnn_step", case_cnn, &other, 33);
        ct_backend_close(&other);
    }
    if (ct_backend_open_gpu(&other, 0, &tf32) == CT_OK) {
        compare("tf32/dense", case_dense, &other, 1);
        conv_cases(&other, "tf32/");
        set_lstm(16, 100, 40, 128, 1, 16, 100, LSTM_RETURN_LAST, 1, 5e-3, 5e-3, 1);
        compare("tf32/lstm_T100", case_lstm, &other, 22);
        compare("tf32/siamese_cnn_step", case_siamese_cnn, &other, 32);
        ct_backend_close(&other);
    }
    gpu_resume_across_devices();
    run_bf16_cases(gpu);
#ifdef CT_HAVE_CUDA
    run_own_cases(gpu);
#endif
}

void suite_gpu(void)
{
    test_device_parse();
    test_case_filter();
    test_dropout_counter_rng();
    test_weight_map_direct();
    test_weight_map_packed();
    test_weight_map_fallback();
    test_weight_map_other_layouts();
    test_args();
    static ct_backend gpu_be;
    ct_status st = ct_backend_open_gpu(&gpu_be, 0, NULL);   /* training's defaults: FP32, algorithms free to be non-deterministic */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", st == CT_OK ? "" : ct_last_error());
    const ct_backend *gpu = st == CT_OK ? &gpu_be : NULL;
    if (!gpu) {
        test_device_open_error(msg, st);
        int has_prefix = strncmp(msg, "no NVIDIA GPU found", 19) == 0;   /* a CUDA build says it already */
        for (size_t i = 0; i < sizeof gpu_cases / sizeof gpu_cases[0]; i++)
            t_skip(has_prefix ? "gpu/%s: %s" : "gpu/%s: no NVIDIA GPU found (%s)", gpu_cases[i], msg);
        for (size_t i = 0; i < sizeof bf16_cases / sizeof bf16_cases[0]; i++)
            t_skip(has_prefix ? "gpu/%s: %s" : "gpu/%s: no NVIDIA GPU found (%s)", bf16_cases[i], msg);
        return;
    }
    run_gpu_cases(gpu);
    ct_backend_close(&gpu_be);
}
