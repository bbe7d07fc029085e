/* cuda_emu.cpp - CUDA's execution model on the CPU, enough to run ctrain's own GPU kernels from
 * their source (tests/cuda_emu.h says what it shows and what it cannot). C++ because the kernels
 * are templates; no C++ library is used (no exceptions, no RTTI, no thread-safe statics), so the
 * test program still links as C.
 *
 * The names the kernels use and what they are here:
 *   threadIdx, blockIdx         thread-local: set when each thread of a block starts
 *   blockDim, gridDim           the launch's, set before its threads start
 *   __shared__ (static arrays)  static: every thread of the running block sees the same array;
 *                               the blocks run one after another, so one copy serves them all
 *   dynamic shared memory       one buffer per launch, filled with 0xFF (NaN) before each block,
 *                               so that a read before a write shows
 *   __syncthreads()             a barrier of the block's threads (mutex and condition variable)
 *   __shfl_xor_sync(m, v, k)    the thread writes v into its slot of an exchange array, waits at
 *                               a barrier, and reads the slot of thread tid ^ k. Two arrays are
 *                               used in turn: a thread can write the one after next only once
 *                               every thread has passed the barrier that ends its reads
 *   bf16 conversions, bit casts core/bf16.h and memcpy: the same bits as CUDA's
 *   float2                      a struct of two floats, 8-byte aligned as CUDA's
 */
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern "C" {
#include "core/bf16.h"
}
#include "tests/cuda_emu.h"

struct emu_dim3 { unsigned x, y, z; };
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim, gridDim;
static unsigned char *emu_smem;

#define EMU_MAX_THREADS 1024

/* the running block */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned n, arrived, exited, gen;
    int diverged;
    float xchg[2][EMU_MAX_THREADS];
} blk = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, { { 0 } } };
static thread_local unsigned shuffles;

static void release_locked(void)
{
    blk.arrived = 0;
    blk.gen++;
    pthread_cond_broadcast(&blk.cv);
}

static void __syncthreads(void)
{
    pthread_mutex_lock(&blk.mu);
    if (blk.exited) blk.diverged = 1;   /* a thread has left: it will never reach this barrier */
    const unsigned gen = blk.gen;
    if (++blk.arrived + blk.exited == blk.n) release_locked();
    else
        while (gen == blk.gen) pthread_cond_wait(&blk.cv, &blk.mu);
    pthread_mutex_unlock(&blk.mu);
}

static float __shfl_xor_sync(unsigned mask, float v, int lane_mask)
{
    (void)mask;
    const unsigned k = shuffles++ & 1u, t = threadIdx.x;
    blk.xchg[k][t] = v;
    __syncthreads();
    return blk.xchg[k][t ^ (unsigned)lane_mask];
}

static inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
struct __attribute__((aligned(8))) float2 { float x, y; };   /* CUDA's vector type: 8-byte aligned */
static inline float2 make_float2(float x, float y) { float2 v = { x, y }; return v; }
struct __nv_bfloat16 { uint16_t x; };
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { __nv_bfloat16 b = { ct_bf16_from_float(f) }; return b; }
static inline float __bfloat162float(__nv_bfloat16 b) { return ct_float_from_bf16(b.x); }
static inline uint16_t __bfloat16_as_ushort(__nv_bfloat16 b) { return b.x; }

#define __global__
#define __device__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define CT_DYNAMIC_SHARED(type, name) type *name = (type *)emu_smem
#include "cuda/lstm_rec_kernels.cuh"

/* ---- launches ---- */

typedef void (*emu_body)(const void *args);
typedef struct { emu_body body; const void *args; unsigned tid, bid; } emu_thread_arg;

static void *emu_thread(void *p)
{
    const emu_thread_arg *a = (const emu_thread_arg *)p;
    threadIdx = emu_dim3{ a->tid, 0, 0 };
    blockIdx = emu_dim3{ a->bid, 0, 0 };
    shuffles = 0;
    a->body(a->args);
    pthread_mutex_lock(&blk.mu);
    blk.exited++;
    if (blk.arrived) {   /* others wait at a barrier this thread never reached */
        blk.diverged = 1;
        if (blk.arrived + blk.exited == blk.n) release_locked();
    }
    pthread_mutex_unlock(&blk.mu);
    return NULL;
}

static int emu_launch(unsigned grid, unsigned block, size_t smem, emu_body body, const void *args, char *why, size_t n)
{
    if (block < 1 || block > EMU_MAX_THREADS || grid < 1) {
        snprintf(why, n, "launch of %u blocks of %u threads: not a launch CUDA makes", grid, block);
        return -1;
    }
    gridDim = emu_dim3{ grid, 1, 1 };
    blockDim = emu_dim3{ block, 1, 1 };
    emu_smem = (unsigned char *)malloc(smem ? smem : 1);
    pthread_t *th = (pthread_t *)malloc(block * sizeof(pthread_t));
    emu_thread_arg *ta = (emu_thread_arg *)malloc(block * sizeof(emu_thread_arg));
    if (!emu_smem || !th || !ta) {
        free(emu_smem); free(th); free(ta);
        snprintf(why, n, "out of memory");
        return -1;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20);
    int rc = 0;
    for (unsigned b = 0; b < grid && rc == 0; b++) {
        memset(emu_smem, 0xFF, smem ? smem : 1);
        blk.n = block;
        blk.arrived = blk.exited = 0;
        blk.diverged = 0;
        unsigned started = 0;
        for (unsigned t = 0; t < block; t++) {
            ta[t] = emu_thread_arg{ body, args, t, b };
            if (pthread_create(&th[t], &attr, emu_thread, &ta[t]) != 0) break;
            started++;
        }
        if (started < block) {   /* the started threads would wait for the rest: count the missing ones as gone */
            pthread_mutex_lock(&blk.mu);
            blk.exited += block - started;
            blk.diverged = 1;
            if (blk.arrived && blk.arrived + blk.exited == blk.n) release_locked();
            pthread_mutex_unlock(&blk.mu);
            snprintf(why, n, "could not start %u threads", block);
            rc = -1;
        }
        for (unsigned t = 0; t < started; t++) pthread_join(th[t], NULL);
        if (rc == 0 && blk.diverged) {
            snprintf(why, n, "block %u of %u: a divergent barrier (threads left the kernel while others waited at one)", b, grid);
            rc = -1;
        }
    }
    pthread_attr_destroy(&attr);
    free(emu_smem); free(th); free(ta);
    emu_smem = NULL;
    return rc;
}

template <typename P, int HP, int S> static void fwd_body(const void *p) { rec_forward_kernel<P, HP, S>(*(const lstm_rec_fwd_args *)p); }
template <typename P, int HP, int S> static void bwd_body(const void *p) { rec_backward_kernel<P, HP, S>(*(const lstm_rec_bwd_args *)p); }
#define EMU_BY_SIZE(fn, P, HPv, Sv) ((HPv) == 32 ? ((Sv) == 2 ? fn<P, 32, 2> : fn<P, 32, 4>) \
                                     : (HPv) == 64 ? ((Sv) == 2 ? fn<P, 64, 2> : fn<P, 64, 4>) : ((Sv) == 2 ? fn<P, 128, 2> : fn<P, 128, 4>))
#define EMU_INSTANCE(fn, bf16, HPv, Sv) ((bf16) ? EMU_BY_SIZE(fn, rec_bf16, HPv, Sv) : EMU_BY_SIZE(fn, rec_f32, HPv, Sv))
template <typename P> static size_t smem_for(int HP)
{
    return HP == 128 ? rec_words<P, 128>::smem : HP == 64 ? rec_words<P, 64>::smem : rec_words<P, 32>::smem;
}
static size_t smem_of(int bf16, int HP) { return bf16 ? smem_for<rec_bf16>(HP) : smem_for<rec_f32>(HP); }
static int shape_ok(int HP, int S, char *why, size_t n)
{
    if ((HP == 32 || HP == 64 || HP == 128) && (S == 2 || S == 4)) return 1;
    snprintf(why, n, "no kernel for HP = %d, S = %d", HP, S);
    return 0;
}

extern "C" int ct_emu_rec_forward(const lstm_rec_fwd_args *a, char *why, size_t n)
{
    if (!shape_ok(a->HP, a->S, why, n)) return -1;
    return emu_launch((unsigned)((a->B + a->S - 1) / a->S), 4u * a->HP, smem_of(a->bf16, a->HP), EMU_INSTANCE(fwd_body, a->bf16, a->HP, a->S),
                      a, why, n);
}

extern "C" int ct_emu_rec_backward(const lstm_rec_bwd_args *a, char *why, size_t n)
{
    if (!shape_ok(a->HP, a->S, why, n)) return -1;
    return emu_launch((unsigned)((a->B + a->S - 1) / a->S), 4u * a->HP, smem_of(a->bf16, a->HP), EMU_INSTANCE(bwd_body, a->bf16, a->HP, a->S),
                      a, why, n);
}

typedef struct { int bf16, backward; void *image; const float *w; int H, HP; } pack_args;
static void pack_body(const void *p)
{
    const pack_args *a = (const pack_args *)p;
    pack_kernel(a->bf16, a->backward, a->image, a->w, a->H, a->HP);
}
extern "C" int ct_emu_rec_pack(int bf16, int backward, void *image, const float *w_hh, int H, int HP, unsigned grid, unsigned block,
                               char *why, size_t n)
{
    const pack_args a = { bf16, backward, image, w_hh, H, HP };
    return emu_launch(grid, block, 0, pack_body, &a, why, n);
}

typedef struct { float *db_ih, *db_hh; const float *part; int B, cols; } bias_args;
static void bias_body(const void *p)
{
    const bias_args *a = (const bias_args *)p;
    bias_grad_kernel(a->db_ih, a->db_hh, a->part, a->B, a->cols);
}
extern "C" int ct_emu_bias_grad(float *db_ih, float *db_hh, const float *part, int B, int cols, unsigned grid, unsigned block,
                                char *why, size_t n)
{
    const bias_args a = { db_ih, db_hh, part, B, cols };
    return emu_launch(grid, block, 0, bias_body, &a, why, n);
}
