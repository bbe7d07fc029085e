/* threads.h - one knob for parallelism: `--threads N`, and the one pool of
 * threads that does all of ctrain's parallel work.
 *
 * ct_parallel runs independent pieces of a layer on n workers: the caller plus
 * n - 1 persistent threads that sleep on a condition variable between calls,
 * after spinning for at most 100 us in case the next call comes soon (threads.c:
 * waking a sleeping thread costs tens of microseconds, and a step is dozens of
 * calls). The pieces are a convolution's chunks of images
 * (transform, small gemm, transform), the LSTM recurrence split by sequence,
 * the row blocks of a large matrix product (ct_sgemm below), and ranges of the
 * loops around them (ct_parallel_range: activations, pooling, dropout, the
 * optimizer update, the sums of the workers' partial gradients), so that almost
 * nothing of a training step runs on one thread (ct_parallel_seconds).
 *
 * OpenBLAS itself always runs single-threaded, inside whichever worker calls
 * it. Its own thread pool would otherwise sit spinning (sched_yield) between
 * its products while ours works - two pools fighting over the same cores,
 * measured at about 15% of the CPU time of a CNN training step on 2 cores.
 * (Ours spins only between its own calls, briefly, and not at all with more
 * threads than processors.)
 *
 * Set the thread count once, before planning any memory: layers size their
 * per-worker scratch from it (conv2d_dims.workers).
 */
#ifndef CT_THREADS_H
#define CT_THREADS_H

#include <stddef.h>
#include <cblas.h>
#include "core/workers.h"

void ct_threads_set(int n);      /* n >= 1; OpenBLAS is kept at one thread */
int  ct_threads_get(void);
int  ct_cpu_count(void);         /* online processors */
const char *ct_blas_config(void);   /* OpenBLAS's own description of its build */

/* Runs fn(ctx, task, worker) for task = 0 .. n_tasks-1 on `workers` workers
 * (1 <= workers <= CT_MAX_WORKERS; worker 0 is the calling thread) and returns
 * when all are done. The assignment is fixed: worker w runs tasks w, w + workers,
 * w + 2 workers, ... in that order, so per-worker scratch and per-worker partial
 * sums are deterministic. With workers == 1 everything runs in the caller.
 * Call from one thread at a time (the training thread). A ct_parallel (or
 * ct_sgemm) inside a task runs all of its tasks in that worker. If a thread
 * cannot be started, the tasks are shared by fewer workers (the same rule with
 * the smaller count). Returns the workers used. */
int  ct_parallel(int n_tasks, int workers, void (*fn)(void *ctx, int task, int worker), void *ctx);


/* Wall seconds the training thread has spent in its (outermost) ct_parallel calls
 * since the process started, including the work of ct_parallel_range and ct_sgemm
 * that more threads would share (on one thread too). The rest of a training step's
 * time is serial: what no number of threads shortens (Amdahl's law), and what a step
 * on many cores waits for. bench_siamese and bench_cnn print it per step. */
double ct_parallel_seconds(void);

/* A share of split work must be worth waking a worker for (a sleeping thread takes
 * microseconds to start, and a share that small is mostly the start): a loop gets at
 * most one range per CT_PARALLEL_PART_ELEMS values, a product at most one block per
 * CT_SGEMM_PART_FLOPS, and neither more than the threads. On 2 threads every split
 * loop and product gets 2 shares, as before the rule; it matters on many threads: on
 * 16, the siamese LSTM's dense_1 products (4.2 MFLOP each) were cut 16 ways and that
 * layer took 0.69 ms a batch against 0.19 on 2 threads (bench/RESULTS.md, "GPU:
 * NVIDIA H200, bf16 ..., 16 threads"). */
#define CT_PARALLEL_PART_ELEMS 32768
#define CT_SGEMM_PART_FLOPS 2e6

/* Elementwise loops: fn(ctx, lo, hi) over [0, n) cut into contiguous ranges, one
 * per worker, when the loop touches at least CT_PARALLEL_MIN_ELEMS values in all
 * (`values`: n for a plain loop, n * plane size for a loop over planes), else
 * fn(ctx, 0, n) in the caller. For loops whose every item is computed on its
 * own, so the split changes nothing. */
#define CT_PARALLEL_MIN_ELEMS (2 * CT_PARALLEL_PART_ELEMS)
void ct_parallel_range(size_t n, size_t values, void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx);
/* The ranges ct_parallel_range cuts such a loop into on this thread count (1: not split). */
int  ct_parallel_range_parts(size_t n, size_t values);

/* C = alpha op(A) op(B) + beta C, row-major, exactly as cblas_sgemm(CblasRowMajor, ...).
 * A product of more than CT_SGEMM_SPLIT_FLOPS is split into ct_sgemm_parts
 * blocks of C, a grid of pr x pc (ct_sgemm_grid: the grid that copies the least of
 * the operands; on 2 threads, rows of C, or columns when C has fewer rows than
 * columns), one single-threaded cblas_sgemm each on the workers; smaller ones run
 * in the caller. Every element of C is computed by one call over the whole of K: on one
 * thread the result is cblas_sgemm's, and on a given thread count it is the same
 * every time. Across thread counts it can differ in the last bits, because
 * OpenBLAS may sum a smaller block in another order (which of its kernels runs
 * can depend on the block's size); each result is a float32 sum of the K products all the same
 * (tests/test_core.c checks the bound). */
#define CT_SGEMM_SPLIT_FLOPS (2 * CT_SGEMM_PART_FLOPS)
/* The blocks ct_sgemm splits an M x N x K product into on this thread count (1: not split). */
int  ct_sgemm_parts(int M, int N, int K);
/* The grid those blocks form: pr x pc = parts, pr <= M, pc <= N (threads.c says how it is chosen). */
void ct_sgemm_grid(int M, int N, int parts, int *pr, int *pc);
void ct_sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);

#endif
