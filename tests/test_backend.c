/* test_backend.c - backends (layers/ops.h): opening and closing the CPU, the data
 * type a backend's plans compute in (core/dtype.h), the arena allocator on a
 * backend's memory, and every call of a model reaching the backend the model was
 * put on. Host only: the GPU backend's own cases are in test_gpu.c.
 *
 * A "spy" backend is the CPU's table with a few entries replaced by functions that
 * record the backend they were handed and then call the CPU's own entry, so its
 * results are the CPU's bit for bit.
 */
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/arena.h"
#include "core/dtype.h"
#include "layers/gemm_bf16.h"
#include "layers/ops.h"
#include "models/siamese_lstm.h"

static void test_dtype_names(void)
{
    t_case("backend/dtype names");
    t_check(!strcmp(ct_dtype_name(CT_F32), "float32"), "CT_F32: %s", ct_dtype_name(CT_F32));
    t_check(!strcmp(ct_dtype_name(CT_BF16), "bfloat16"), "CT_BF16: %s", ct_dtype_name(CT_BF16));
    t_check(!strcmp(ct_dtype_name((ct_dtype)7), "unknown"), "7: %s", ct_dtype_name((ct_dtype)7));
    const ct_math zero = { 0 };
    t_check(zero.dtype == CT_F32 && !zero.tf32 && !zero.deterministic, "a zeroed ct_math must be the default: float32");
}

static void test_open_close_cpu(void)
{
    t_case("backend/open and close the CPU");
    ct_backend be;
    memset(&be, 0xff, sizeof be);
    t_check(ct_backend_open_cpu(&be, NULL) == CT_OK, "open: %s", ct_last_error());
    t_check(be.ops == &ct_ops_cpu && be.host_memory == 1 && be.dev == NULL && !strcmp(be.name, "cpu"),
            "the CPU backend: ops %p, host_memory %d, dev %p, name %s", (const void *)be.ops, be.host_memory, be.dev, be.name);
    t_check(be.math.dtype == CT_F32 && !be.math.tf32 && !be.math.deterministic, "NULL math must give the defaults");
    ct_backend_close(&be);
    t_check(be.ops == NULL && be.name == NULL, "a closed backend is zeroed");
    ct_backend_close(&be);   /* a zeroed one is left alone */
    const ct_math m = { .deterministic = 1, .dtype = CT_BF16 };
    /* bfloat16 opens where the CPU has bf16 products; elsewhere one line names what is missing */
    ct_status st = ct_backend_open_cpu(&be, &m);
    if (ct_kernels_bf16() == CT_BF16_NONE)
        t_check(st == CT_ENODEV && strstr(ct_last_error(), "AMX-BF16") && strstr(ct_last_error(), "float32"),
                "bfloat16 on a CPU without bf16 products: %d %s", (int)st, ct_last_error());
    else
        ct_backend_close(&be);
    ct_gemm_bf16_use_model(1);   /* the tiles' model runs anywhere */
    t_check(ct_backend_open_cpu(&be, &m) == CT_OK && be.math.deterministic == 1 && be.math.dtype == CT_BF16 && be.dev,
            "the math given must be kept (and a bf16 CPU backend has its scratch context): %s", ct_last_error());
    ct_backend_close(&be);
    ct_gemm_bf16_use_model(0);
    t_check(ct_cpu_backend.ops == &ct_ops_cpu && ct_cpu_backend.math.dtype == CT_F32 && ct_cpu_backend.host_memory,
            "ct_cpu_backend: the CPU with the default math");
}

/* Plans take the data type from the backend's math: float32 everywhere; bfloat16 in the LSTM
 * and conv2d (on the tiles' model here). */
static void test_plan_dtype(void)
{
    t_case("backend/plans compute in the backend's data type, and refuse one it cannot compute");
    ct_params ps;
    ct_params_init(&ps);
    lstm_ids ids;
    CT_ASSERT(ct_lstm_params_add(&ids, &ps, "lstm", 3, 4, 1) == CT_OK && ct_params_alloc(&ps) == CT_OK);
    const lstm_dims ld = { .B = 2, .T = 5, .I = 3, .H = 4, .L = 1, .ret = LSTM_RETURN_LAST };
    conv2d_dims cd;
    CT_ASSERT(ct_conv2d_dims_make(&cd, 2, 1, 6, 6, 2, 3, 3, 1, 1) == CT_OK);
    ct_gemm_bf16_use_model(1);
    for (int k = 0; k < 2; k++) {
        const ct_math m = { .dtype = k ? CT_BF16 : CT_F32 };
        ct_backend be;
        CT_ASSERT(ct_backend_open_cpu(&be, &m) == CT_OK);
        void *lp = (void *)&ps, *cp = (void *)&ps;   /* not NULL: a refusal must leave NULL */
        ct_status sl = be.ops->lstm_plan(&be, &lp, &ld, &ps, &ids, ps.data);
        char lmsg[512];
        snprintf(lmsg, sizeof lmsg, "%s", sl == CT_OK ? "" : ct_last_error());
        ct_status sc = be.ops->conv2d_plan(&be, &cp, &cd, 1);
        const char *cmsg = sc == CT_OK ? "" : ct_last_error();
        if (k == 0) {
            t_check(sl == CT_OK && lp != NULL, "float32 LSTM plan: %d %s", (int)sl, lmsg);
            t_check(sc == CT_OK && cp != NULL, "float32 conv2d plan: %d %s", (int)sc, cmsg);
            t_check(be.ops->conv2d_workspace_floats(&be, cp) == ct_conv2d_workspace_floats(&cd),
                    "the CPU conv2d plan's workspace must be the layer's");
        } else {
            t_check(sl == CT_OK && lp != NULL, "bfloat16 LSTM plan: %d %s", (int)sl, lmsg);
            t_check(sc == CT_OK && cp != NULL, "bfloat16 conv2d plan: %d %s", (int)sc, cmsg);
            t_check(sc != CT_OK || be.ops->conv2d_workspace_floats(&be, cp) == ct_conv2d_bf16_workspace_floats(&cd),
                    "the CPU bf16 conv2d plan's workspace must be the bf16 layer's");
            t_check(ct_backend_check_dtype(&be, "a test") == CT_OK, "ct_backend_check_dtype: %s", ct_last_error());
        }
        if (sl == CT_OK) be.ops->lstm_plan_free(&be, lp);
        if (sc == CT_OK) be.ops->conv2d_plan_free(&be, cp);
        ct_backend_close(&be);
    }
    ct_gemm_bf16_use_model(0);
    /* a backend whose math asks for a type it has no kernels for: one line naming it */
    ct_backend fake = ct_cpu_backend;
    fake.math.dtype = CT_BF16;
    if (ct_kernels_bf16() == CT_BF16_NONE)
        t_check(ct_backend_check_dtype(&fake, "a test") == CT_ENODEV && strstr(ct_last_error(), "a test on the cpu in bfloat16"),
                "ct_backend_check_dtype: %s", ct_last_error());
    fake.math.dtype = (ct_dtype)7;
    t_check(ct_backend_check_dtype(&fake, "a test") == CT_EINVAL && strstr(ct_last_error(), "a test on the cpu"),
            "ct_backend_check_dtype, an unknown type: %s", ct_last_error());
    ct_params_free(&ps);
}

/* ---- the spy backend ---- */

static ct_ops spy_ops;
static const ct_backend *spy_seen;   /* the backend the last spied entry was handed */
static int spy_calls, spy_wrong;     /* spied calls; those handed another backend than spy_expect */
static const ct_backend *spy_expect;

static void spy_note(const ct_backend *be)
{
    spy_calls++;
    spy_seen = be;
    if (be != spy_expect) spy_wrong++;
}

static ct_status spy_mem_alloc(const ct_backend *be, void **ptr, size_t bytes, const char *what)
{
    spy_note(be);
    return ct_ops_cpu.mem_alloc(be, ptr, bytes, what);
}

static void spy_mem_free(const ct_backend *be, void *ptr)
{
    spy_note(be);
    ct_ops_cpu.mem_free(be, ptr);
}

static void spy_dense_forward(const ct_backend *be, float *out, const float *in, const float *w, const float *b, int B,
                              int in_dim, int out_dim)
{
    spy_note(be);
    ct_ops_cpu.dense_forward(be, out, in, w, b, B, in_dim, out_dim);
}

static void spy_lstm_forward(const ct_backend *be, float *out, void *plan, const float *x, const int *len,
                             const int *len_host, const float *params, const lstm_dims *d)
{
    spy_note(be);
    ct_ops_cpu.lstm_forward(be, out, plan, x, len, len_host, params, d);
}

static void spy_euclidean_forward(const ct_backend *be, float *d, const float *a, const float *b, int B, int D, float eps)
{
    spy_note(be);
    ct_ops_cpu.euclidean_forward(be, d, a, b, B, D, eps);
}

static void spy_open(ct_backend *be)
{
    spy_ops = ct_ops_cpu;
    spy_ops.mem_alloc = spy_mem_alloc;
    spy_ops.mem_free = spy_mem_free;
    spy_ops.dense_forward = spy_dense_forward;
    spy_ops.lstm_forward = spy_lstm_forward;
    spy_ops.euclidean_forward = spy_euclidean_forward;
    CT_ASSERT(ct_backend_open_cpu(be, NULL) == CT_OK);
    be->ops = &spy_ops;
    spy_expect = be;
    spy_seen = NULL;
    spy_calls = spy_wrong = 0;
}

static void test_arena_on_backend(void)
{
    t_case("backend/an arena allocates through its backend's memory");
    ct_backend be;
    spy_open(&be);
    ct_arena a;
    ct_arena_init(&a);
    float *x = NULL;
    int *n = NULL;
    ct_arena_floats(&a, &x, 100);
    ct_arena_ints(&a, &n, 3);
    t_check(ct_arena_alloc_on(&a, ct_backend_mem(&be), "test buffers") == CT_OK, "alloc: %s", ct_last_error());
    t_check(spy_calls == 1 && spy_seen == &be, "one allocation through the backend (%d calls)", spy_calls);
    int zero = x && n;
    for (int i = 0; zero && i < 100; i++) zero = x[i] == 0.0f;
    t_check(zero && n[2] == 0, "the arena's memory must be zeroed and its pointers set");
    ct_arena_free(&a);
    t_check(spy_calls == 2 && spy_wrong == 0, "the free must go through the same backend (%d calls, %d wrong)", spy_calls,
            spy_wrong);
    ct_backend_close(&be);
}

/* A model's step on the spy backend: every spied entry is handed the model's backend, and
 * the loss is the plain CPU backend's bit for bit. */
static void test_model_calls_its_backend(void)
{
    t_case("backend/a model hands its own backend to every call");
    siamese_lstm_config cfg = ct_siamese_lstm_defaults();
    cfg.n_mels = 4; cfg.frames = 6; cfg.hidden = 8; cfg.embed = 3;
    const int B = 3;
    ct_rng r;
    ct_rng_seed(&r, 5, 1);
    float *x = t_alloc((size_t)2 * B * cfg.frames * cfg.n_mels);
    t_fill_uniform(x, (size_t)2 * B * cfg.frames * cfg.n_mels, -1, 1, &r);
    const float y[3] = { 1, 0, 1 };
    float loss[2];
    ct_backend spy;
    spy_open(&spy);
    for (int k = 0; k < 2; k++) {
        siamese_lstm m;
        CT_ASSERT(ct_siamese_lstm_build(&m, &cfg) == CT_OK);
        ct_rng init;
        ct_rng_seed(&init, 9, 2);
        ct_siamese_lstm_init_weights(&m, &init);
        ct_status st = ct_siamese_lstm_set_device(&m, k ? &spy : &ct_cpu_backend);
        if (st == CT_OK) st = ct_siamese_lstm_plan(&m, B);
        t_check(st == CT_OK, "plan: %s", ct_last_error());
        int correct = 0;
        loss[k] = st == CT_OK ? ct_siamese_lstm_forward(&m, x, NULL, NULL, y, B, 1, &correct) : -1.0f;
        ct_siamese_lstm_free(&m);
    }
    t_check(spy_calls >= 4 && spy_wrong == 0,
            "the model's calls (arena, LSTM, dense, distance) must each be handed its backend: %d calls, %d with another",
            spy_calls, spy_wrong);
    t_check(memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0, "the spy backend's loss %.9g must be the CPU's %.9g bit for bit",
            loss[1], loss[0]);
    ct_backend_close(&spy);
    free(x);
}

void suite_backend(void)
{
    test_dtype_names();
    test_open_close_cpu();
    test_plan_dtype();
    test_arena_on_backend();
    test_model_calls_its_backend();
}
