/* threads.h - one knob for parallelism: `--threads N`.
 *
 * Most of ctrain's parallel work is OpenBLAS's: every matrix product goes
 * through cblas_sgemm, and ct_threads_set(n) sets OpenBLAS's thread count.
 *
 * Where a layer is a long series of small, independent pieces (a convolution
 * over a batch of images: transform, small gemm, transform, per chunk of
 * images), splitting the gemms across threads leaves the transforms serial and
 * the other core waiting. ct_parallel runs such pieces on n workers instead:
 * the caller plus n - 1 persistent threads that sleep on a condition variable
 * between calls (they never spin). For the duration of the call OpenBLAS is set
 * to one thread, so each worker's gemms run in that worker and there are never
 * two thread pools competing for the same cores; the count is restored after.
 *
 * Set the thread count once, before planning any memory: layers size their
 * per-worker scratch from it (conv2d_dims.workers).
 */
#ifndef CT_THREADS_H
#define CT_THREADS_H

void ct_threads_set(int n);      /* n >= 1 */
int  ct_threads_get(void);
int  ct_cpu_count(void);         /* online processors */
const char *ct_blas_config(void);   /* OpenBLAS's own description of its build */

#define CT_MAX_WORKERS 64
/* Runs fn(ctx, task, worker) for task = 0 .. n_tasks-1 on `workers` workers
 * (1 <= workers <= CT_MAX_WORKERS; worker 0 is the calling thread) and returns
 * when all are done. The assignment is fixed: worker w runs tasks w, w + workers,
 * w + 2 workers, ... in that order, so per-worker scratch and per-worker partial
 * sums are deterministic. With workers == 1 everything runs in the caller.
 * Call from one thread at a time (the training thread); fn must not call
 * ct_parallel. If a thread cannot be started, the tasks are shared by fewer
 * workers (the same rule with the smaller count). Returns the workers used. */
int  ct_parallel(int n_tasks, int workers, void (*fn)(void *ctx, int task, int worker), void *ctx);

#endif
