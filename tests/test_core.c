/* test_core.c - tests of core/: the PCG32 generator and its streams, the flat
 * parameter store and its initialisers, the activation arena, ct_parallel's task
 * assignment; and of io/h5.c
 * (round trips, and clear errors on missing/corrupt files and wrong shapes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "tests/test.h"
#include "core/arena.h"
#include "core/clock.h"
#include "core/interrupt.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/threads.h"
#include "io/h5.h"

static void test_rng(void)
{
    /* PCG32 reference: O'Neill's pcg32-global demo, seeded with (42, 54), prints
     * these first six outputs (0xa15c02b7 0x7b47f409 0xba1d3330 0x83d2f293 0xbfa4784b 0xcbed606e). */
    t_case("core/rng pcg32 reference sequence");
    ct_rng r;
    ct_rng_seed(&r, 42u, 54u);
    const uint32_t want[6] = { 0xa15c02b7u, 0x7b47f409u, 0xba1d3330u, 0x83d2f293u, 0xbfa4784bu, 0xcbed606eu };
    for (int i = 0; i < 6; i++) {
        uint32_t got = ct_rng_u32(&r);
        t_check(got == want[i], "draw %d: got 0x%08x want 0x%08x", i, got, want[i]);
    }

    t_case("core/rng save and restore state");
    ct_rng a, b;
    ct_rng_seed(&a, 7, CT_STREAM_DATA);
    for (int i = 0; i < 100; i++) ct_rng_u32(&a);
    b = a;   /* the whole state is two integers: saving it is a copy */
    int same = 1;
    for (int i = 0; i < 1000; i++) same &= ct_rng_u32(&a) == ct_rng_u32(&b);
    t_check(same, "a restored state continues the same sequence");

    t_case("core/rng streams are independent");
    ct_rngs s;
    ct_rngs_seed(&s, 1234);
    int equal = 0;
    for (int i = 0; i < 1000; i++) {
        uint32_t x = ct_rng_u32(&s.init), y = ct_rng_u32(&s.dropout), z = ct_rng_u32(&s.data);
        equal += (x == y) + (y == z) + (x == z);
    }
    t_check(equal == 0, "%d coincidences between streams", equal);

    t_case("core/rng uniform, below, normal moments");
    ct_rng_seed(&r, 99, 1);
    double su = 0, sn = 0, sn2 = 0;
    int n = 200000, counts[7] = { 0 }, in_range = 1;
    for (int i = 0; i < n; i++) {
        float u = ct_rng_uniform(&r);
        in_range &= (u >= 0.0f && u < 1.0f);
        su += u;
        counts[ct_rng_below(&r, 7)]++;
        double g = ct_rng_normal(&r);
        sn += g; sn2 += g * g;
    }
    t_check(in_range, "uniform outside [0,1)");
    t_check(fabs(su / n - 0.5) < 0.005, "uniform mean %.4f", su / n);
    t_check(fabs(sn / n) < 0.01 && fabs(sn2 / n - 1.0) < 0.02, "normal mean %.4f var %.4f", sn / n, sn2 / n);
    for (int k = 0; k < 7; k++) t_check(fabs(counts[k] / (double)n - 1.0 / 7) < 0.005, "below(7): bucket %d has %d", k, counts[k]);

    t_case("core/rng shuffle is a permutation");
    int perm[50], seen[50] = { 0 };
    for (int i = 0; i < 50; i++) perm[i] = i;
    ct_rng_shuffle_int(&r, perm, 50);
    int ok = 1, moved = 0;
    for (int i = 0; i < 50; i++) { ok &= perm[i] >= 0 && perm[i] < 50 && !seen[perm[i]]; if (ok) seen[perm[i]] = 1; moved += perm[i] != i; }
    t_check(ok && moved > 25, "not a shuffled permutation (moved %d)", moved);

    /* lengths below, at and above the lanes' threshold, with and without a tail,
     * filled one after another so that each call starts where the last ended */
    t_case("core/rng uniform_fill gives the same numbers as single draws, and the same state after");
    ct_rng fa, fb;
    ct_rng_seed(&fa, 9, CT_STREAM_DROPOUT);
    fb = fa;
    static const size_t lens[] = { 1, 15, 63, 64, 65, 1000, 4096, 3 };
    float fill[4096];
    int fill_ok = 1, state_ok = 1;
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
        ct_rng_uniform_fill(&fa, fill, lens[l]);
        for (size_t i = 0; i < lens[l]; i++) fill_ok &= fill[i] == ct_rng_uniform(&fb);
        state_ok &= fa.state == fb.state && fa.inc == fb.inc;
    }
    t_check(fill_ok && state_ok, "uniform_fill differs from ct_rng_uniform (%d), or leaves another state (%d)", !fill_ok, !state_ok);

    t_case("core/rng advance(n) leaves the state n draws would");
    static const uint64_t steps[] = { 0, 1, 2, 3, 16, 17, 1000, 65537, 1u << 20 };
    int adv_ok = 1;
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
        ct_rng ra, rb;
        ct_rng_seed(&ra, 123 + k, CT_STREAM_DROPOUT);
        rb = ra;
        ct_rng_advance(&ra, steps[k]);
        for (uint64_t i = 0; i < steps[k]; i++) ct_rng_u32(&rb);
        adv_ok &= ra.state == rb.state && ra.inc == rb.inc && ct_rng_u32(&ra) == ct_rng_u32(&rb);
        if (!adv_ok) { t_check(0, "advance(%llu) differs from as many draws", (unsigned long long)steps[k]); break; }
    }
}

/* ct_parallel: records which worker ran each task and in which order. */
typedef struct { int worker[100], order[100], next[8]; } parallel_log;

static void parallel_task(void *ctx, int task, int worker)
{
    parallel_log *l = ctx;
    l->worker[task] = worker;
    l->order[task] = l->next[worker]++;   /* per-worker counter: no sharing between workers */
}

static void test_parallel(void)
{
    const int cases[][2] = { { 100, 3 }, { 100, 1 }, { 2, 4 }, { 0, 2 } };   /* tasks, workers */
    for (int k = 0; k < 4; k++) {
        const int n = cases[k][0], w = cases[k][1];
        t_case("core/parallel %d tasks on %d workers: fixed assignment, each task once", n, w);
        parallel_log l;
        memset(&l, 0, sizeof l);
        for (int i = 0; i < 100; i++) l.worker[i] = -1;
        int used = ct_parallel(n, w, parallel_task, &l);
        int want = w < n ? w : (n > 0 ? n : 1);
        t_check(used == want, "workers used %d, want %d", used, want);
        int ok = 1;
        for (int i = 0; i < n; i++) ok &= l.worker[i] == i % used && l.order[i] == i / used;
        for (int i = n; i < 100; i++) ok &= l.worker[i] == -1;
        t_check(ok, "task i must run once, on worker i %% workers, as that worker's (i / workers)-th task");
    }

    t_case("core/workers: a pool of its own runs the same assignment, beside the training pool; freed with its threads joined");
    ct_workers *p = ct_workers_new();
    if (t_check(p != NULL, "ct_workers_new")) {
        int ok = 1;
        for (int round = 0; round < 3; round++) {   /* the same threads, reused */
            parallel_log l;
            memset(&l, 0, sizeof l);
            int used = ct_workers_run(p, 100, 3 + round, parallel_task, &l);
            ok &= used == 3 + round;
            for (int i = 0; i < 100; i++) ok &= l.worker[i] == i % used && l.order[i] == i / used;
        }
        parallel_log l;
        memset(&l, 0, sizeof l);
        ok &= ct_workers_run(NULL, 10, 4, parallel_task, &l) == 1;   /* no pool: all in the caller */
        for (int i = 0; i < 10; i++) ok &= l.worker[i] == 0 && l.order[i] == i;
        t_check(ok, "tasks ran on the wrong worker or in the wrong order");
        ct_workers_free(p);
        ct_workers_free(NULL);
    }
}

/* ct_parallel_seconds: the time of the outermost ct_parallel calls, on one thread too, and
 * nothing for the caller's own serial work. Sleeps, so the clock cannot miss them. */
static void sleep_ms(int ms) { struct timespec ts = { 0, ms * 1000000L }; nanosleep(&ts, NULL); }
/* Many runs back to back, the worker count changing between them (workers left out of a run
 * sleep; the others spin for the next), each run's results read by the caller at once: every
 * task of every run must have run once, and its writes must be visible when ct_parallel
 * returns. Then runs after pauses longer than the spin, so that the workers go to sleep. */
typedef struct { unsigned run; unsigned char seen[64]; } stress_job;
static void stress_task(void *ctx, int task, int worker)
{
    stress_job *j = ctx;
    (void)worker;
    j->seen[task] = (unsigned char)(j->run & 0xff);
}
static void test_parallel_stress(void)
{
    t_case("core/parallel: 20,000 runs back to back and 20 after pauses, 1-4 workers, every task once and its writes seen");
    stress_job j;
    memset(&j, 0xff, sizeof j);
    int bad = 0;
    for (unsigned r = 0; r < 20020; r++) {
        if (r >= 20000) sleep_ms(1);   /* past the spin: the workers are asleep and must be woken */
        j.run = r;
        const int w = 1 + (int)(r % 7 % 4), n = 1 + (int)(r * 2654435761u % 64);
        ct_parallel(n, w, stress_task, &j);
        for (int t = 0; t < n; t++) bad += j.seen[t] != (unsigned char)(r & 0xff);
    }
    t_check(!bad, "%d tasks did not run, or their writes were not seen after ct_parallel returned", bad);
}

static void sleeping_task(void *ctx, int task, int worker)
{
    (void)worker;
    if (task == 0 && !ctx) ct_parallel(2, 2, sleeping_task, (void *)1);   /* nested once: inside the outer call's time */
    sleep_ms(20);
}

static void test_parallel_seconds(void)
{
    t_case("core/parallel_seconds counts the pool's calls (1 and 2 threads), not serial work");
    for (int threads = 1; threads <= 2; threads++) {
        ct_threads_set(threads);
        double p0 = ct_parallel_seconds(), t0 = ct_now();
        sleep_ms(30);                                   /* serial: not counted */
        double p1 = ct_parallel_seconds();
        ct_parallel(2, threads, sleeping_task, NULL);   /* 2 tasks of 20 ms, the first with 2 nested */
        double t1 = ct_now(), inside = ct_parallel_seconds() - p1;
        ct_threads_set(1);
        const double want = threads == 1 ? 0.080 : 0.060;   /* one worker: 4 sleeps; two: 3 on worker 0 */
        t_check(p1 - p0 < 0.005, "%d threads: %.1f ms counted for serial work", threads, 1e3 * (p1 - p0));
        t_check(inside >= want - 0.002 && inside <= (t1 - t0) - 0.029, "%d threads: %.1f ms counted for %.0f ms of tasks",
                threads, 1e3 * inside, 1e3 * want);
    }
}

/* ct_sgemm: split by rows of C (or by columns, when C is wider than tall) across the
 * threads, every element from one call over the whole of K. One thread is cblas_sgemm
 * itself, bit for bit; each thread count gives the same bits every time. Across thread
 * counts the bits may differ: OpenBLAS may sum a block of rows in an order that depends
 * on the block's size (which of its kernels runs), as the 130 x 70 and 128 x 128 cases
 * here show on OpenBLAS 0.3.21 (row blocks; the column splits kept the bits). Each result is still a float32 sum of the K
 * products, so it is within gamma_K sum_k |a||b| of the exact value, and two of them
 * within twice that of each other (C's old value adds one term). */
static void test_sgemm_threads(void)
{
    t_case("core/split work: at most one share per CT_SGEMM_PART_FLOPS or CT_PARALLEL_PART_ELEMS, at most the threads; the products' grids");
    ct_threads_set(16);
    int ok = 1;
    ok &= ct_sgemm_parts(256, 64, 128) == 2;        /* the siamese LSTM's dense_1 at batch 128: 4.2 MFLOP */
    ok &= ct_sgemm_parts(128, 256, 64) == 2;
    ok &= ct_sgemm_parts(25600, 512, 40) == 16;     /* its input projection: 1 GFLOP */
    ok &= ct_sgemm_parts(100, 100, 150) == 1;       /* 3 MFLOP: not split */
    ok &= ct_sgemm_parts(4, 4000, 1000) == 16;      /* split by columns */
    ok &= ct_sgemm_parts(3, 3, 1000000) == 3;       /* no more blocks than rows or columns */
    ok &= ct_parallel_range_parts(1000, 65536) == 2 && ct_parallel_range_parts(1000, 40000) == 1;
    ok &= ct_parallel_range_parts(1000000, 1000000) == 16 && ct_parallel_range_parts(5, 1000000) == 5;
    /* the grids: the least packing, K (M pc + N pr); on a tie the longer side cut; 2 parts as before the grids */
    int pr, pc;
    ct_sgemm_grid(128, 128, 16, &pr, &pc);  ok &= pr == 4 && pc == 4;    /* the CNN's dense_1 on 16 threads */
    ct_sgemm_grid(256, 64, 2, &pr, &pc);    ok &= pr == 2 && pc == 1;    /* rows, as before */
    ct_sgemm_grid(128, 128, 2, &pr, &pc);   ok &= pr == 2 && pc == 1;    /* a tie: rows where M >= N */
    ct_sgemm_grid(64, 128, 2, &pr, &pc);    ok &= pr == 1 && pc == 2;
    ct_sgemm_grid(25600, 512, 16, &pr, &pc); ok &= pr == 16 && pc == 1;  /* the LSTM's input projection: rows */
    ct_sgemm_grid(4, 4000, 16, &pr, &pc);   ok &= pr == 1 && pc == 16;
    ct_sgemm_grid(3, 3, 3, &pr, &pc);       ok &= pr * pc == 3 && pr <= 3 && pc <= 3;
    ct_sgemm_grid(128, 9216, 12, &pr, &pc); ok &= pr == 1 && pc == 12;   /* dX = dY W: copying dY again is cheap */
    ct_threads_set(2);
    ok &= ct_sgemm_parts(256, 64, 128) == 2 && ct_sgemm_parts(25600, 512, 40) == 2 && ct_parallel_range_parts(1000, 65536) == 2;
    ct_threads_set(1);
    ok &= ct_sgemm_parts(25600, 512, 40) == 1 && ct_parallel_range_parts(1000000, 1000000) == 1;
    t_check(ok, "a share count differs from the rule");

    /* M, N, K: on 4 threads, 130 x 70 and 37 x 260 are cut one way, 128 x 128 into 2 x 2 blocks */
    const int shapes[][3] = { { 130, 70, 300 }, { 37, 260, 150 }, { 128, 128, 1000 }, { 3, 500, 900 } };
    for (int sh = 0; sh < 4; sh++)
        for (int tr = 0; tr < 4; tr++) {
            const int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
            const CBLAS_TRANSPOSE ta = tr & 1 ? CblasTrans : CblasNoTrans, tb = tr & 2 ? CblasTrans : CblasNoTrans;
            t_case("core/sgemm %dx%dx%d %s%s on 1-4 threads: cblas_sgemm's bits on one, repeatable, within the bound",
                   M, N, K, tr & 1 ? "A^T" : "A", tr & 2 ? " B^T" : " B");
            const int lda = ta == CblasNoTrans ? K : M, ldb = tb == CblasNoTrans ? N : K;
            float *A = t_alloc((size_t)M * K), *B = t_alloc((size_t)K * N), *C0 = t_alloc((size_t)M * N);
            float *ref = t_alloc((size_t)M * N), *C = t_alloc((size_t)M * N), *again = t_alloc((size_t)M * N);
            ct_rng r;
            ct_rng_seed(&r, 60 + sh, 4 + tr);
            t_fill_uniform(A, (size_t)M * K, -1, 1, &r);
            t_fill_uniform(B, (size_t)K * N, -1, 1, &r);
            t_fill_uniform(C0, (size_t)M * N, -1, 1, &r);
            memcpy(ref, C0, (size_t)M * N * sizeof *ref);
            cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, ref, N);
            const double gamma = (K + 1) * 0x1p-24 / (1 - (K + 1) * 0x1p-24);
            for (int threads = 1; threads <= 4; threads++) {
                ct_threads_set(threads);
                memcpy(C, C0, (size_t)M * N * sizeof *C);
                ct_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, C, N);
                memcpy(again, C0, (size_t)M * N * sizeof *C);
                ct_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, again, N);
                ct_threads_set(1);
                if (threads == 1)
                    t_check(memcmp(C, ref, (size_t)M * N * sizeof *C) == 0, "1 thread: C differs from cblas_sgemm's");
                t_check(memcmp(C, again, (size_t)M * N * sizeof *C) == 0, "%d threads: two calls differ", threads);
                size_t bad = 0;
                for (int i = 0; i < M && threads > 1; i++)
                    for (int j = 0; j < N; j++) {
                        double mag = fabs(C0[(size_t)i * N + j]);
                        for (int k = 0; k < K; k++) {
                            const float a = ta == CblasNoTrans ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i];
                            const float b = tb == CblasNoTrans ? B[(size_t)k * ldb + j] : B[(size_t)j * ldb + k];
                            mag += 0.5 * fabs((double)a * b);
                        }
                        bad += fabs((double)C[(size_t)i * N + j] - ref[(size_t)i * N + j]) > 2 * gamma * mag;
                    }
                t_check(bad == 0, "%d threads: %zu elements further from one thread's than 2 gamma_K sum |a||b|", threads, bad);
            }
            free(A); free(B); free(C0); free(ref); free(C); free(again);
        }
}

static void test_params(void)
{
    t_case("core/params layout, views and names");
    ct_params ps;
    ct_params_init(&ps);
    int h1 = ct_params_add(&ps, "dense_1/w", 2, (int[]){ 3, 5 }, ct_init_glorot(5, 3));
    int h2 = ct_params_add(&ps, "dense_1/b", 1, (int[]){ 3 }, ct_init_zeros());
    int h3 = ct_params_add(&ps, "lstm_1/b_ih_l0", 1, (int[]){ 8 }, ct_init_forget_bias(1.0f));
    int h4 = ct_params_add(&ps, "lstm_1/w_hh_l0", 2, (int[]){ 8, 2 }, ct_init_orthogonal(1.0f));
    t_check(h1 == 0 && h2 == 1 && h3 == 2 && h4 == 3, "handles %d %d %d %d", h1, h2, h3, h4);
    t_check(ct_params_add(&ps, "dense_1/b", 1, (int[]){ 3 }, ct_init_zeros()) == -1 && strstr(ct_last_error(), "twice"),
            "a duplicate name is refused: %s", ct_last_error());
    t_check(ct_params_add(&ps, "bad", 2, (int[]){ 3, 0 }, ct_init_zeros()) == -1, "a zero dimension is refused");
    t_check(ct_params_alloc(&ps) == CT_OK, "alloc");
    int aligned = 1;
    for (int i = 0; i < ps.n; i++) aligned &= ps.p[i].offset % 16 == 0 && ((uintptr_t)ct_params_data(&ps, i) % 64) == 0;
    t_check(aligned, "every view starts on a 64-byte boundary");
    t_check(ps.p[1].offset >= ps.p[0].offset + 15 && ct_params_count(&ps) == 15 + 3 + 8 + 16, "offsets and count");
    t_check(ct_params_find(&ps, "lstm_1/b_ih_l0") == 2 && ct_params_find(&ps, "nope") == -1, "find by name");

    ct_rng r;
    ct_rng_seed(&r, 5, CT_STREAM_INIT);
    ct_params_initialize(&ps, &r);
    float *w = ct_params_data(&ps, h1), lim = sqrtf(6.0f / 8.0f), mx = 0;
    for (int i = 0; i < 15; i++) mx = fmaxf(mx, fabsf(w[i]));
    t_check(mx <= lim && mx > 0.5f * lim, "glorot bound %.4f vs limit %.4f", mx, lim);
    float *fb = ct_params_data(&ps, h3);
    t_check(fb[0] == 0 && fb[1] == 0 && fb[2] == 1 && fb[3] == 1 && fb[4] == 0 && fb[7] == 0, "forget bias = 1 on the f quarter only");
    float *q = ct_params_data(&ps, h4);   /* [8, 2]: two orthonormal columns */
    double g00 = 0, g01 = 0, g11 = 0;
    for (int i = 0; i < 8; i++) { g00 += q[2 * i] * q[2 * i]; g01 += q[2 * i] * q[2 * i + 1]; g11 += q[2 * i + 1] * q[2 * i + 1]; }
    double gram[4] = { g00, g01, g01, g11 }, eye[4] = { 1, 0, 0, 1 };
    float gf[4] = { (float)gram[0], (float)gram[1], (float)gram[2], (float)gram[3] };
    t_close_d("orthogonal columns W^T W = I", gf, eye, 4, 1e-5);

    /* padding floats stay zero after init, and the init is reproducible */
    int pad_zero = 1;
    for (size_t i = 15; i < ps.p[1].offset; i++) pad_zero &= ps.data[i] == 0.0f;
    t_check(pad_zero, "padding is zero");
    float first = w[0];
    ct_rng_seed(&r, 5, CT_STREAM_INIT);
    ct_params_initialize(&ps, &r);
    t_check(w[0] == first, "same seed, same weights");
    ct_params_free(&ps);

    t_case("core/params orthogonal wide matrix has orthonormal rows");
    float wide[3 * 7];
    ct_init_fill(wide, 2, (int[]){ 3, 7 }, ct_init_orthogonal(1.0f), &r);
    float gr[9]; double id3[9] = { 1, 0, 0, 0, 1, 0, 0, 0, 1 };
    for (int i = 0; i < 3; i++) for (int j = 0; j < 3; j++) {
        double s = 0;
        for (int k = 0; k < 7; k++) s += wide[i * 7 + k] * wide[j * 7 + k];
        gr[i * 3 + j] = (float)s;
    }
    t_close_d("W W^T = I", gr, id3, 9, 1e-5);
}

static void test_arena(void)
{
    t_case("core/arena plans then allocates once");
    ct_arena a;
    ct_arena_init(&a);
    float *x = (float *)1, *y = (float *)1;
    int *idx = (int *)1;
    ct_arena_floats(&a, &x, 100);
    ct_arena_ints(&a, &idx, 3);
    ct_arena_floats(&a, &y, 17);
    t_check(x == NULL && y == NULL && idx == NULL, "pointers are NULL until allocation");
    t_check(ct_arena_alloc(&a) == CT_OK, "alloc");
    t_check(x && y && idx, "pointers filled in");
    t_check((char *)idx >= (char *)(x + 100) && (char *)y >= (char *)(idx + 3), "regions do not overlap");
    t_check((uintptr_t)x % 64 == 0 && (uintptr_t)y % 64 == 0 && (uintptr_t)idx % 64 == 0, "64-byte aligned");
    int zero = 1;
    for (int i = 0; i < 100; i++) zero &= x[i] == 0.0f;
    for (int i = 0; i < 17; i++) y[i] = 1.0f;
    t_check(zero, "memory starts zeroed");
    ct_arena_free(&a);
    t_check(x == NULL && y == NULL, "freeing clears the pointers");
}

static void test_error(void)
{
    t_case("core/error messages wrap the previous message");
    ct_fail(CT_EIO, "inner %d", 42);
    ct_status st = ct_fail(CT_EFORMAT, "outer (%s) done", ct_last_error());
    t_check(st == CT_EFORMAT && strcmp(ct_last_error(), "outer (inner 42) done") == 0, "got \"%s\"", ct_last_error());
    t_check(strcmp(ct_status_name(CT_ENODEV), "device not available") == 0, "status names");
}

/* In a child: the handler installed, a guarded file, then one or two signals. Returns the
 * child's exit status (or -1); *flag: the signal the child saw after the first one. */
static int interrupt_child(const char *guarded, int second, int *flag)
{
    int pfd[2];
    if (pipe(pfd) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        ct_interrupt_install();
        FILE *f = fopen(guarded, "w");
        if (f) { fputs("half a checkpoint", f); fclose(f); }
        ct_interrupt_guard_file(guarded);
        raise(SIGINT);                        /* the first: recorded, nothing else happens */
        int seen = ct_interrupt_signal();
        if (write(pfd[1], &seen, sizeof seen) != (ssize_t)sizeof seen) _exit(3);
        if (second) raise(SIGTERM);           /* the second: the guarded file removed, _exit(143) */
        _exit(0);
    }
    close(pfd[1]);
    *flag = 0;
    if (read(pfd[0], flag, sizeof *flag) != (ssize_t)sizeof *flag) *flag = -1;
    close(pfd[0]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static void test_interrupt(void)
{
    t_case("core/SIGINT is recorded; a second signal removes the file being written and exits 128 + signal at once");
    char path[64];
    snprintf(path, sizeof path, "/tmp/ctrain_interrupt_%ld.tmp", (long)getpid());
    int flag = 0, rc = interrupt_child(path, 0, &flag);
    t_check(rc == 0 && flag == SIGINT, "one signal: the child should go on (exit %d) and see SIGINT (saw %d)", rc, flag);
    t_check(access(path, F_OK) == 0, "one signal must not remove the guarded file");
    rc = interrupt_child(path, 1, &flag);
    t_check(rc == 128 + SIGTERM && flag == SIGINT, "two signals: exit %d (143 expected), first seen %d", rc, flag);
    t_check(access(path, F_OK) != 0, "the second signal should have removed %s", path);
    unlink(path);
    t_check(!strcmp(ct_interrupt_name(SIGINT), "SIGINT") && !strcmp(ct_interrupt_name(SIGTERM), "SIGTERM"), "names");
}

void suite_core(void)
{
    test_error();
    test_rng();
    test_params();
    test_arena();
    test_parallel();
    test_parallel_stress();
    test_parallel_seconds();
    test_sgemm_threads();
    test_interrupt();
}

void suite_h5(void)
{
    char path[] = "/tmp/ctrain_h5_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);

    t_case("h5/round trip floats, ints, attributes, nested groups");
    hid_t f;
    float w[6] = { 1, -2, 3.5f, 4, 5, 6e-8f };
    int lab[3] = { 7, 0, -1 };
    t_check(ct_h5_create(&f, path) == CT_OK, "create: %s", ct_last_error());
    t_check(ct_h5_write_f32(f, "model/dense_1/w", w, 2, (size_t[]){ 2, 3 }) == CT_OK, "write f32: %s", ct_last_error());
    t_check(ct_h5_write_i32(f, "labels", lab, 1, (size_t[]){ 3 }) == CT_OK, "write i32");
    t_check(ct_h5_attr_write_double(f, "/", "epoch", 3.0) == CT_OK, "write attr");
    t_check(ct_h5_attr_write_str(f, "/", "model", "siamese-lstm") == CT_OK, "write str attr");
    ct_h5_close(f);
    float w2[6] = { 0 };
    int lab2[3] = { 0 }, nd = 0;
    size_t dims[CT_H5_DIMS_MAX];
    double ep = 0;
    t_check(ct_h5_open(&f, path) == CT_OK, "open: %s", ct_last_error());
    t_check(ct_h5_exists(f, "model/dense_1/w") && !ct_h5_exists(f, "model/nope/w"), "exists");
    t_check(ct_h5_shape(f, "model/dense_1/w", &nd, dims) == CT_OK && nd == 2 && dims[0] == 2 && dims[1] == 3, "shape");
    t_check(ct_h5_read_f32(f, "model/dense_1/w", w2, 6) == CT_OK && memcmp(w, w2, sizeof w) == 0, "floats round trip exactly");
    t_check(ct_h5_read_i32(f, "labels", lab2, 3) == CT_OK && memcmp(lab, lab2, sizeof lab) == 0, "ints round trip");
    t_check(ct_h5_attr_read_double(f, "/", "epoch", &ep) == CT_OK && ep == 3.0, "attribute");

    t_case("h5/errors name the problem");
    t_check(ct_h5_read_f32(f, "model/dense_1/w", w2, 5) == CT_EFORMAT && strstr(ct_last_error(), "expected 5"),
            "wrong size is refused: %s", ct_last_error());
    t_check(ct_h5_read_f32(f, "missing", w2, 1) == CT_EFORMAT && strstr(ct_last_error(), "missing"),
            "a missing dataset is named: %s", ct_last_error());
    t_check(ct_h5_attr_read_double(f, "/", "nope", &ep) == CT_EFORMAT, "missing attribute");
    ct_h5_close(f);
    t_check(ct_h5_open(&f, "/nonexistent/dir/x.h5") == CT_EIO && strstr(ct_last_error(), "/nonexistent/dir/x.h5"),
            "a missing file is named: %s", ct_last_error());

    /* a truncated file and a file of garbage are refused, not crashed on */
    FILE *fp = fopen(path, "r+b");
    long full = 0;
    if (fp) { fseek(fp, 0, SEEK_END); full = ftell(fp); fclose(fp); }
    t_check(full > 100 && truncate(path, full / 3) == 0, "truncate the file");
    t_check(ct_h5_open(&f, path) != CT_OK || (ct_h5_read_f32(f, "model/dense_1/w", w2, 6) != CT_OK && (ct_h5_close(f), 1)),
            "a truncated file gives an error");
    fp = fopen(path, "wb");
    if (fp) { fputs("this is not an HDF5 file at all\n", fp); fclose(fp); }
    t_check(ct_h5_open(&f, path) == CT_EFORMAT && strstr(ct_last_error(), "not a readable HDF5 file"),
            "garbage is refused: %s", ct_last_error());
    unlink(path);
}
