/* threads.c - the thread count for OpenBLAS, and the pools of sleeping workers:
 * ct_parallel's, the training thread's, and those ct_workers_new makes (see threads.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <cblas.h>
#include "core/threads.h"
#include "core/clock.h"
#include "core/error.h"

static int ct_nthreads = 1;

void ct_threads_set(int n)
{
    CT_ASSERT(n >= 1);
    ct_nthreads = n;
    openblas_set_num_threads(1);   /* our workers share the work (threads.h) */
}

int ct_threads_get(void) { return ct_nthreads; }

int ct_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

const char *ct_blas_config(void) { return openblas_get_config(); }

/* ---- pools of sleeping workers: the training pool (ct_parallel) and any other (ct_workers) ----
 * A run is published under the pool's mutex (the job, then generation + 1, then a broadcast on
 * `go`); each worker runs its share and counts `pending` down, the last one signalling `done`.
 * Waking a thread asleep on a condition variable takes the kernel, and on a virtual machine the
 * host too: measured 60-100 us per run on the 2-vCPU KVM guest of bench/RESULTS.md, against
 * 0.7-1 us for a worker that had not gone to sleep - and a training step is dozens of runs with a little
 * serial work between them. So the training pool's threads first SPIN for a while: a worker that
 * has finished its share watches `generation` for the next run, and the training thread that has
 * finished its own watches `pending`, for up to CT_SPIN_SECONDS each, reading the atomics
 * without the lock and pausing between reads; only then do they sleep on the condition variable
 * as before. A spin is bounded, so a pool left idle sleeps (and OpenBLAS's own pool, which spun
 * on sched_yield beside ours, stays at one thread: threads.h). Where the pool has more threads
 * than the machine has processors, a spinning thread would keep one that has work off its core,
 * so nobody spins. The other pools (ct_workers_new: the loader's readers, which run beside
 * training) never spin. */
#define CT_SPIN_SECONDS 100e-6

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Spins until *gen differs from `seen` (gen given: a worker waiting for the next run) or
 * *pending is 0 (gen NULL: the caller waiting for its workers), for at most CT_SPIN_SECONDS;
 * the caller then takes the mutex and waits on the condition as usual. */
static void spin_wait(const _Atomic unsigned long *gen, unsigned long seen, const _Atomic int *pending)
{
    const double t0 = ct_now();
    for (unsigned k = 1;; k++) {
        if (gen ? atomic_load_explicit(gen, memory_order_acquire) != seen : atomic_load_explicit(pending, memory_order_acquire) == 0) return;
        cpu_pause();
        if (k % 64 == 0 && ct_now() - t0 > CT_SPIN_SECONDS) return;
    }
}

typedef struct { struct ct_workers *pool; int id; } worker_arg;   /* what a worker thread is started with */

struct ct_workers {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t thread[CT_MAX_WORKERS];   /* workers 1 .. started */
    worker_arg arg[CT_MAX_WORKERS];     /*   and their arguments */
    int started;                  /* threads running worker_main */
    int joinable, stop;           /* a ct_workers_new pool: its threads are joined by ct_workers_free */
    int spin;                     /* the training pool: spin before sleeping, where there are cores for it */
    _Atomic unsigned long generation;   /* bumped once per run (under mu; read without it while spinning) */
    _Atomic int pending;          /* threads of this run that have not finished (likewise) */
    void (*fn)(void *ctx, int task, int worker);
    void *ctx;
    int n_tasks, workers;
};

/* The training thread's pool: its threads are detached and live as long as the process. */
static ct_workers training = { .mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER,
                               .spin = 1 };

/* Whether `threads` threads of a pool may spin: no more of them than processors. */
static int may_spin(const ct_workers *p, int threads)
{
    static int cpus;
    if (!cpus) cpus = ct_cpu_count();
    return p->spin && threads <= cpus;
}

static _Thread_local int inside_task;   /* set while this thread runs a task of any pool */

static void run_share(int worker, int n_tasks, int workers, void (*fn)(void *, int, int), void *ctx)
{
    inside_task = 1;
    for (int t = worker; t < n_tasks; t += workers) fn(ctx, t, worker);
    inside_task = 0;
}

static void *worker_main(void *arg)
{
    const worker_arg a = *(const worker_arg *)arg;
    ct_workers *p = a.pool;
    unsigned long seen = 0;
    int spin = 0;   /* whether the last run's threads may spin: this one took part in it */
    for (;;) {
        if (spin) spin_wait(&p->generation, seen, NULL);
        pthread_mutex_lock(&p->mu);
        while (p->generation == seen && !p->stop) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        if (a.id >= p->workers) { pthread_mutex_unlock(&p->mu); spin = 0; continue; }   /* not needed this time */
        int n = p->n_tasks, w = p->workers;
        void (*fn)(void *, int, int) = p->fn;
        void *ctx = p->ctx;
        spin = may_spin(p, w);
        pthread_mutex_unlock(&p->mu);
        run_share(a.id, n, w, fn, ctx);
        pthread_mutex_lock(&p->mu);
        if (atomic_fetch_sub(&p->pending, 1) == 1) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static double parallel_seconds;   /* wall time of the training thread's outermost ct_parallel calls */

double ct_parallel_seconds(void) { return parallel_seconds; }

int ct_parallel(int n_tasks, int workers, void (*fn)(void *ctx, int task, int worker), void *ctx)
{
    if (inside_task) return ct_workers_run(&training, n_tasks, workers, fn, ctx);
    const double t0 = ct_now();
    const int used = ct_workers_run(&training, n_tasks, workers, fn, ctx);
    parallel_seconds += ct_now() - t0;
    return used;
}

int ct_workers_run(ct_workers *p, int n_tasks, int workers, void (*fn)(void *ctx, int task, int worker), void *ctx)
{
    CT_ASSERT(workers >= 1 && workers <= CT_MAX_WORKERS && n_tasks >= 0);
    if (workers > n_tasks) workers = n_tasks > 0 ? n_tasks : 1;
    if (inside_task || !p) {   /* nested (or no pool): this thread runs everything itself */
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return 1;
    }
    pthread_mutex_lock(&p->mu);
    while (p->started < workers - 1) {   /* start sleeping workers on first need */
        pthread_t t;
        pthread_attr_t a;
        worker_arg *arg = &p->arg[p->started + 1];
        *arg = (worker_arg){ p, p->started + 1 };
        pthread_attr_init(&a);
        if (!p->joinable) pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &a, worker_main, arg);
        pthread_attr_destroy(&a);
        if (rc != 0) break;   /* fewer helpers: the tasks are shared among the threads there are */
        p->thread[++p->started] = t;
    }
    const int helpers = workers - 1 < p->started ? workers - 1 : p->started;
    if (helpers == 0) {
        pthread_mutex_unlock(&p->mu);
        run_share(0, n_tasks, 1, fn, ctx);
        return 1;
    }
    workers = helpers + 1;
    p->fn = fn; p->ctx = ctx; p->n_tasks = n_tasks; p->workers = workers;
    atomic_store(&p->pending, helpers);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    run_share(0, n_tasks, workers, fn, ctx);
    if (may_spin(p, workers)) spin_wait(NULL, 0, &p->pending);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return workers;
}

ct_workers *ct_workers_new(void)
{
    ct_workers *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->joinable = 1;
    return p;
}

void ct_workers_free(ct_workers *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int k = 1; k <= p->started; k++) pthread_join(p->thread[k], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p);
}

/* ---- ct_parallel_range ---- */

typedef struct {
    size_t n;
    int parts;
    void (*fn)(void *ctx, size_t lo, size_t hi);
    void *ctx;
} range_job;

static void range_part(void *ctx, int part, int worker)
{
    const range_job *j = ctx;
    (void)worker;
    j->fn(j->ctx, j->n * (size_t)part / (size_t)j->parts, j->n * (size_t)(part + 1) / (size_t)j->parts);
}

/* At most `threads` shares (and CT_MAX_WORKERS), at most one per `per` of `work`, at least one. */
static int shares(int threads, double work, double per)
{
    int parts = threads < CT_MAX_WORKERS ? threads : CT_MAX_WORKERS;
    double worth = work / per;
    if (worth < parts) parts = worth >= 1 ? (int)worth : 1;
    return parts;
}

int ct_parallel_range_parts(size_t n, size_t values)
{
    if (n < 2 || values < CT_PARALLEL_MIN_ELEMS) return 1;
    int parts = shares(ct_nthreads, (double)values, CT_PARALLEL_PART_ELEMS);
    return (size_t)parts > n ? (int)n : parts;
}

void ct_parallel_range(size_t n, size_t values, void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx)
{
    /* too small to split: here. One thread: one part, through ct_parallel all the same, so
     * that ct_parallel_seconds counts it as the parallel work it is on more threads */
    if (n < 2 || inside_task || values < CT_PARALLEL_MIN_ELEMS) { fn(ctx, 0, n); return; }
    const int parts = ct_parallel_range_parts(n, values);
    range_job j = { .n = n, .parts = parts, .fn = fn, .ctx = ctx };
    ct_parallel(parts, parts, range_part, &j);
}

/* ---- ct_sgemm ---- */

typedef struct {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K, lda, ldb, ldc, pr, pc;
    float alpha, beta;
    const float *A, *B;
    float *C;
} sgemm_job;

/* Block `part` of C on the pr x pc grid: rows [r0, r1) of op(A) by columns [c0, c1) of op(B). */
static void sgemm_part(void *ctx, int part, int worker)
{
    const sgemm_job *j = ctx;
    (void)worker;
    const int i = part / j->pc, k = part % j->pc;
    const int r0 = (int)((long)j->M * i / j->pr), r1 = (int)((long)j->M * (i + 1) / j->pr);
    const int c0 = (int)((long)j->N * k / j->pc), c1 = (int)((long)j->N * (k + 1) / j->pc);
    if (r1 <= r0 || c1 <= c0) return;
    /* rows r0.. of op(A): A + r0*lda when not transposed, A + r0 when transposed ([K, M] stored);
     * columns c0.. of op(B): B + c0 when not transposed ([K, N]), B + c0*ldb when transposed ([N, K]) */
    const float *A = j->ta == CblasNoTrans ? j->A + (size_t)r0 * j->lda : j->A + r0;
    const float *B = j->tb == CblasNoTrans ? j->B + c0 : j->B + (size_t)c0 * j->ldb;
    cblas_sgemm(CblasRowMajor, j->ta, j->tb, r1 - r0, c1 - c0, j->K, j->alpha, A, j->lda, B, j->ldb,
                j->beta, j->C + (size_t)r0 * j->ldc + c0, j->ldc);
}

/* The grid of a split product: pr x pc = parts blocks, pr <= M, pc <= N. Each block's cblas_sgemm
 * copies ("packs") its rows of op(A) and its columns of op(B), K (M pc + N pr) floats over all the
 * blocks, so the grid with the least of that is taken: a split by rows alone packs the whole of
 * op(B) once per block - on 16 threads, the Keras CNN's dense_1 forward (128 x 9216 times 9216 x
 * 128) packed its 4.7 MB of weights 16 times per step; 4 x 4 blocks pack them 4 times and the
 * input 4 times. On a tie the longer side is cut (on 2 threads: rows where M >= N, as always). */
void ct_sgemm_grid(int M, int N, int parts, int *pr, int *pc)
{
    double best = -1;
    *pr = M >= N ? parts : 1;
    *pc = M >= N ? 1 : parts;
    for (int c = 1; c <= parts; c++) {
        const int r = parts / c;
        if (r * c != parts || r > M || c > N) continue;
        const double cost = (double)M * c + (double)N * r;
        if (best < 0 || cost < best || (cost == best && (M >= N ? r > *pr : c > *pc))) { best = cost; *pr = r; *pc = c; }
    }
}

int ct_sgemm_parts(int M, int N, int K)
{
    const double flops = 2.0 * M * N * K;
    if (flops < CT_SGEMM_SPLIT_FLOPS) return 1;
    const int parts = shares(ct_nthreads, flops, CT_SGEMM_PART_FLOPS), n = M >= N ? M : N;
    return parts < n ? parts : n;
}

void ct_sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
    if (inside_task || 2.0 * M * N * K < CT_SGEMM_SPLIT_FLOPS) {   /* one thread: one block, as ct_parallel_range */
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    sgemm_job j = { .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
                    .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C };
    const int parts = ct_sgemm_parts(M, N, K);
    ct_sgemm_grid(M, N, parts, &j.pr, &j.pc);
    ct_parallel(parts, parts, sgemm_part, &j);
}
