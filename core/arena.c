/* arena.c - plan-then-allocate activation memory (see arena.h). */
#include <stdlib.h>
#include <string.h>
#include "core/arena.h"

void ct_arena_init(ct_arena *a) { memset(a, 0, sizeof *a); }

void ct_arena_plan(ct_arena *a, void **dst, size_t bytes)
{
    CT_ASSERT(a->base == NULL);   /* plan everything before allocating */
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 32;
        ct_arena_req *r = realloc(a->req, (size_t)cap * sizeof *r);
        if (!r) { a->failed = 1; return; }
        a->req = r; a->cap = cap;
    }
    *dst = NULL;
    a->req[a->n++] = (ct_arena_req){ dst, bytes };
    a->bytes += (bytes + 63) / 64 * 64;
}

ct_status ct_host_alloc(void **ptr, size_t bytes, const char *what)
{
    *ptr = ct_alloc_aligned(bytes, what);
    return *ptr ? CT_OK : CT_ENOMEM;
}

static ct_status host_alloc(const void *ctx, void **ptr, size_t bytes, const char *what)
{
    (void)ctx;
    return ct_host_alloc(ptr, bytes, what);
}

static void host_free(const void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

const ct_allocator ct_allocator_host = { host_alloc, host_free, NULL };

ct_status ct_arena_alloc(ct_arena *a) { return ct_arena_alloc_on(a, ct_allocator_host, "activations"); }

ct_status ct_arena_alloc_on(ct_arena *a, ct_allocator mem, const char *what)
{
    if (a->failed) return ct_fail(CT_ENOMEM, "out of memory while planning %s", what);
    CT_TRY(mem.alloc(mem.ctx, &a->base, a->bytes ? a->bytes : 64, what));
    a->mem = mem;
    char *p = a->base;
    for (int i = 0; i < a->n; i++) {
        *a->req[i].dst = a->req[i].bytes ? (void *)p : NULL;
        p += (a->req[i].bytes + 63) / 64 * 64;
    }
    return CT_OK;
}

void ct_arena_free(ct_arena *a)
{
    for (int i = 0; a->base && i < a->n; i++) *a->req[i].dst = NULL;
    if (a->base) a->mem.free(a->mem.ctx, a->base);
    free(a->req);
    memset(a, 0, sizeof *a);
}
