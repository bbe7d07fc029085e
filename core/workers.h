/* workers.h - a pool of worker threads of its own, for a thread other than the
 * training thread that has independent work to share: the batch loader reading
 * a batch's crops at once (io/corpus.h, ct_pairs_batch_pool). The same rules as
 * ct_parallel (core/threads.h), which runs the training thread's pool: worker 0
 * is the caller, workers 1 .. n-1 are threads of the pool that sleep between
 * runs, worker w runs tasks w, w + workers, ... in that order.
 *
 * Its own header, apart from threads.h, so that code with no business with
 * BLAS (threads.h includes cblas.h) can use a pool. Implemented in threads.c.
 */
#ifndef CT_WORKERS_H
#define CT_WORKERS_H

#define CT_MAX_WORKERS 64

typedef struct ct_workers ct_workers;

/* A pool with no threads yet (they start on first need); NULL when out of memory. */
ct_workers *ct_workers_new(void);
/* Runs fn(ctx, task, worker) for task = 0 .. n_tasks-1 on `workers` workers (1 <=
 * workers <= CT_MAX_WORKERS) and returns when all are done, with the workers used.
 * p NULL: every task in the caller. One caller at a time per pool. */
int      ct_workers_run(ct_workers *p, int n_tasks, int workers, void (*fn)(void *ctx, int task, int worker), void *ctx);
/* Stops and joins the pool's threads, and frees it (NULL is allowed). */
void     ct_workers_free(ct_workers *p);

#endif
