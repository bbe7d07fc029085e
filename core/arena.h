/* arena.h - activation memory planned up front.
 *
 * A model knows, from its configuration and the batch size, every buffer its
 * forward and backward passes will need (activations, caches, scratch). It
 * *plans* them first - each ct_arena_plan call records "I need n elements, put
 * the pointer here" - and ct_arena_alloc then makes ONE allocation and fills in
 * every recorded pointer. Nothing is allocated inside the training step.
 *
 *     ct_arena a; ct_arena_init(&a);
 *     ct_arena_floats(&a, &acts.h, (size_t)B * H);      // acts.h is still NULL here
 *     ct_arena_ints(&a, &acts.argmax, n);
 *     if (ct_arena_alloc(&a) != CT_OK) ...;              // now acts.h points into the block
 *
 * A new batch size means a new plan (ct_arena_free, then plan again).
 * Each region starts on a 64-byte boundary; the whole block is zeroed.
 *
 * The block lives on the model's device: ct_arena_alloc_on takes the device's
 * allocator (layers/ops.h: ct_backend_mem(be)), so a GPU model plans exactly as
 * a CPU model does and gets device pointers. ct_arena_alloc is the host allocator.
 */
#ifndef CT_ARENA_H
#define CT_ARENA_H
#include <stddef.h>
#include "core/error.h"

typedef struct {
    void **dst;      /* where to store the region's address */
    size_t bytes;
} ct_arena_req;

/* Where memory comes from: host memory (ct_allocator_host) or a device's. ctx is
 * the allocator's own state (a device's backend), handed back to both functions. */
typedef struct {
    ct_status (*alloc)(const void *ctx, void **ptr, size_t bytes, const char *what);   /* zeroed; CT_ENOMEM with a message */
    void      (*free)(const void *ctx, void *ptr);
    const void *ctx;
} ct_allocator;

/* Host memory: 64-byte aligned and zeroed (ct_alloc_aligned), released with free(). */
ct_status ct_host_alloc(void **ptr, size_t bytes, const char *what);
extern const ct_allocator ct_allocator_host;   /* ct_host_alloc and free(), no ctx */

typedef struct {
    ct_arena_req *req;
    int n, cap;
    size_t bytes;    /* total planned, alignment included */
    void *base;      /* the one allocation, NULL until ct_arena_alloc */
    ct_allocator mem;          /* where base came from */
    int failed;      /* a plan call ran out of memory; reported by ct_arena_alloc */
} ct_arena;

void      ct_arena_init(ct_arena *a);
void      ct_arena_plan(ct_arena *a, void **dst, size_t bytes);
ct_status ct_arena_alloc(ct_arena *a);                                   /* host memory */
ct_status ct_arena_alloc_on(ct_arena *a, ct_allocator mem, const char *what);
void      ct_arena_free(ct_arena *a);

static inline void ct_arena_floats(ct_arena *a, float **dst, size_t n) { ct_arena_plan(a, (void **)dst, n * sizeof(float)); }
static inline void ct_arena_ints(ct_arena *a, int **dst, size_t n)     { ct_arena_plan(a, (void **)dst, n * sizeof(int)); }

#endif
