/* prefetch.h - prepare the next batch on a background thread while the current
 * one trains (double buffering).
 *
 * A task owns two input buffers ("slots"). It asks for a batch to be filled into
 * a slot with ct_prefetch_request (returns at once; one background thread runs
 * the task's fill function), and blocks in ct_prefetch_wait until that slot is
 * ready. Requests are served strictly in order, so anything the fill function
 * draws from an RNG is drawn in the same order as a synchronous loader would:
 * results are identical with or without the thread.
 *
 *    main thread:  [train batch k from slot 0      ][train batch k+1 from slot 1]
 *    loader:       [fill k+1 -> slot 1]               [fill k+2 -> slot 0]
 */
#ifndef CT_PREFETCH_H
#define CT_PREFETCH_H
#include <pthread.h>
#include "core/error.h"

typedef void (*ct_fill_fn)(void *ctx, int slot, int split, long first, int n);

typedef struct {
    int split, n;
    long first;
    int state;          /* 0 free, 1 requested, 2 ready */
} ct_prefetch_job;

typedef struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ct_fill_fn fill;
    void *ctx;
    ct_prefetch_job slot[2];
    int queue[2], queued; /* slots requested and not yet started, in request order */
    int stop, running;
} ct_prefetch;

ct_status ct_prefetch_start(ct_prefetch *p, ct_fill_fn fill, void *ctx);
void      ct_prefetch_request(ct_prefetch *p, int slot, int split, long first, int n);
void      ct_prefetch_wait(ct_prefetch *p, int slot);
/* Slot holding (or about to hold) exactly this batch, or -1. */
int       ct_prefetch_find(ct_prefetch *p, int split, long first, int n);
void      ct_prefetch_release(ct_prefetch *p, int slot);   /* the slot may be refilled */
int       ct_prefetch_busy(ct_prefetch *p, int slot);      /* requested or ready (not yet released) */
void      ct_prefetch_stop(ct_prefetch *p);

#endif
