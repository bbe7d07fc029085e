/* kernels.cu - ctrain's own kernels: pair heads, losses and accuracies, dropout,
 * optimizers and global-norm clipping (see kernels.h; the math is in the CPU
 * headers layers/pair.h, loss.h, dropout.h, optim.h), and the float32 <-> bf16
 * conversions of mixed precision.
 *
 * Reductions: one block of CT_THREADS threads, each thread summing a strided slice
 * in double, then a tree in shared memory - fixed order, so deterministic.
 */
#include <math.h>
#include <string.h>
#include <cuda_bf16.h>
#include "cuda/check.h"
#include "cuda/reduce.cuh"
#include "cuda/counter_rng.h"
#include "cuda/kernels.h"

static_assert(CT_GPU_SCRATCH_PARTIALS + CT_OPTIM_GPU_PARTIALS <= CT_GPU_SCRATCH, "the context's scratch holds the norm's partial sums");
static_assert(CT_OPTIM_GPU_PARTIALS <= CT_THREADS, "clip_coef reads one partial sum per thread of a block");


/* Reads `count` doubles of g's scratch back to the host (synchronises). */
static const double *scratch_read(ct_gpu *g, int count)
{
    CT_CUDA_CHECK(cudaMemcpyAsync(g->host_scratch, g->scratch, (size_t)count * sizeof(double), cudaMemcpyDeviceToHost, g->stream));
    CT_CUDA_CHECK(cudaStreamSynchronize(g->stream));
    return g->host_scratch;
}

/* ==== bf16 conversions ==== */

static_assert(sizeof(__nv_bfloat16) == sizeof(uint16_t), "a bf16 is held as a uint16_t");

__global__ static void bf16_from_float_kernel(__nv_bfloat16 *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ static void float_from_bf16_kernel(float *dst, const __nv_bfloat16 *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __bfloat162float(src[i]);
}

__global__ static void float_add_bf16_kernel(float *dst, const __nv_bfloat16 *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] += __bfloat162float(src[i]);
}

extern "C" void ct_bf16_from_float_gpu(const ct_backend *be, uint16_t *dst, const float *src, size_t n)
{
    if (!n) return;
    bf16_from_float_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>((__nv_bfloat16 *)dst, src, n);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_float_from_bf16_gpu(const ct_backend *be, float *dst, const uint16_t *src, size_t n)
{
    if (!n) return;
    float_from_bf16_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(dst, (const __nv_bfloat16 *)src, n);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_float_add_bf16_gpu(const ct_backend *be, float *dst, const uint16_t *src, size_t n)
{
    if (!n) return;
    float_add_bf16_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(dst, (const __nv_bfloat16 *)src, n);
    CT_LAUNCH_CHECK();
}

/* ==== pair heads ==== */

/* one warp per pair: s = sum_j (a_j - b_j)^2 in double, lanes in a fixed order */
__global__ static void euclidean_fwd_kernel(float *d, const float *a, const float *b, int B, int D, float eps)
{
    int k = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (k >= B) return;
    const float *ak = a + (size_t)k * D, *bk = b + (size_t)k * D;
    double s = 0.0;
    for (int j = lane; j < D; j += 32) { double t = (double)ak[j] - (double)bk[j]; s += t * t; }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) d[k] = (float)sqrt(s > (double)eps ? s : (double)eps);
}

__global__ static void euclidean_bwd_kernel(float *da, float *db, const float *dd, const float *d, const float *a,
                                            const float *b, int B, int D, float eps)
{
    int k = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (k >= B) return;
    const float *ak = a + (size_t)k * D, *bk = b + (size_t)k * D;
    double s = 0.0;
    for (int j = lane; j < D; j += 32) { double t = (double)ak[j] - (double)bk[j]; s += t * t; }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);   /* every lane gets s */
    float gk = s > (double)eps ? dd[k] / d[k] : 0.0f;
    for (int j = lane; j < D; j += 32) {
        float t = gk * (ak[j] - bk[j]);
        da[(size_t)k * D + j] = t;
        db[(size_t)k * D + j] = -t;
    }
}

extern "C" void ct_euclidean_forward_gpu(const ct_backend *be, float *d, const float *a, const float *b, int B, int D,
                                         float eps)
{
    euclidean_fwd_kernel<<<(B + 7) / 8, 256, 0, ct_gpu_stream(be)>>>(d, a, b, B, D, eps);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_euclidean_backward_gpu(const ct_backend *be, float *da, float *db, const float *dd, const float *d,
                                          const float *a, const float *b, int B, int D, float eps)
{
    euclidean_bwd_kernel<<<(B + 7) / 8, 256, 0, ct_gpu_stream(be)>>>(da, db, dd, d, a, b, B, D, eps);
    CT_LAUNCH_CHECK();
}

/* ==== losses ====
 * The *_reduce kernels run as ONE block and write to `out`:
 * out[0] = mean loss, out[1] = number of right predictions. */

__global__ static void contrastive_reduce(float *out, const float *d, const float *y, int B, float margin, float threshold)
{
    __shared__ double sh[CT_THREADS];
    double loss = 0.0, hit = 0.0;
    for (int k = threadIdx.x; k < B; k += blockDim.x) {
        double dk = d[k], yk = y[k];
        double gap = margin - dk > 0.0 ? margin - dk : 0.0;
        loss += yk * dk * dk + (1.0 - yk) * gap * gap;
        hit += (d[k] < threshold) == (y[k] > 0.5f);
    }
    loss = ct_block_sum(loss, sh);
    hit = ct_block_sum(hit, sh);
    if (threadIdx.x == 0) { out[0] = (float)(loss / B); out[1] = (float)hit; }
}

__global__ static void contrastive_bwd_kernel(float *dd, const float *d, const float *y, int B, float margin)
{
    const float inv_b = 1.0f / (float)B;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < B; k += gridDim.x * blockDim.x) {
        float gap = margin - d[k] > 0.0f ? margin - d[k] : 0.0f;
        dd[k] = (2.0f * y[k] * d[k] - 2.0f * (1.0f - y[k]) * gap) * inv_b;
    }
}

extern "C" void ct_contrastive_stats_gpu(const ct_backend *be, float *stats, const float *d, const float *y, int B,
                                         float margin, float threshold)
{
    contrastive_reduce<<<1, CT_THREADS, 0, ct_gpu_stream(be)>>>(stats, d, y, B, margin, threshold);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_contrastive_backward_gpu(const ct_backend *be, float *dd, const float *d, const float *y, int B,
                                            float margin)
{
    contrastive_bwd_kernel<<<ct_gpu_blocks((size_t)B, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(dd, d, y, B, margin);
    CT_LAUNCH_CHECK();
}

/* softmax cross-entropy in ONE block: thread t takes rows t, t + blockDim.x, ... (C is a
 * class count: small), writes their softmax and sums their loss terms in double; the block
 * sum gives stats[0] = mean loss, stats[1] = right predictions. No scratch memory. */
__global__ static void softmax_ce_stats_kernel(float *stats, float *prob, const float *logits, const int *labels, int B, int C)
{
    __shared__ double sh[CT_THREADS];
    double loss = 0.0, hit = 0.0;
    for (int k = threadIdx.x; k < B; k += blockDim.x) {
        const float *z = logits + (size_t)k * C;
        int label = labels[k], arg = 0;
        float m = z[0];
        for (int c = 1; c < C; c++) if (z[c] > m) { m = z[c]; arg = c; }
        double sum = 0.0;
        for (int c = 0; c < C; c++) {
            float e = expf(z[c] - m);
            prob[(size_t)k * C + c] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int c = 0; c < C; c++) prob[(size_t)k * C + c] *= inv;
        loss += log(sum) - ((double)z[label] - (double)m);
        hit += arg == label;
    }
    loss = ct_block_sum(loss, sh);
    hit = ct_block_sum(hit, sh);
    if (threadIdx.x == 0) { stats[0] = (float)(loss / B); stats[1] = (float)hit; }
}

extern "C" void ct_softmax_ce_stats_gpu(const ct_backend *be, float *stats, float *prob, const float *logits,
                                        const int *labels, int B, int C)
{
    softmax_ce_stats_kernel<<<1, CT_THREADS, 0, ct_gpu_stream(be)>>>(stats, prob, logits, labels, B, C);
    CT_LAUNCH_CHECK();
}

__global__ static void softmax_bwd_kernel(float *dlogits, const float *prob, const int *labels, int B, int C)
{
    const float inv_b = 1.0f / (float)B;
    size_t n = (size_t)B * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int k = (int)(i / C), c = (int)(i % C);
        dlogits[i] = (prob[i] - (c == labels[k] ? 1.0f : 0.0f)) * inv_b;
    }
}

extern "C" void ct_softmax_ce_backward_gpu(const ct_backend *be, float *dlogits, const float *prob, const int *labels,
                                           int B, int C)
{
    softmax_bwd_kernel<<<ct_gpu_blocks((size_t)B * C, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(dlogits, prob, labels, B, C);
    CT_LAUNCH_CHECK();
}

/* ==== dropout ==== */

/* element i of this call is element base + i of the whole batch's call */
__global__ static void dropout_fwd_kernel(float *out, float *mask, const float *in, size_t n, float p, float scale, uint64_t seed,
                                          uint64_t base)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float m = ct_counter_mask(seed, base + i, p, scale);
        mask[i] = m;
        out[i] = in[i] * m;
    }
}

__global__ static void mul_kernel(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] * b[i];
}

extern "C" void ct_dropout_forward_seeded_gpu(const ct_backend *be, float *out, float *mask, const float *in, size_t n,
                                              float p, uint64_t seed)
{
    CT_ASSERT(p >= 0.0f && p < 1.0f);
    dropout_fwd_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(out, mask, in, n, p, 1.0f / (1.0f - p), seed, 0);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_dropout_forward_gpu(const ct_backend *be, float *out, float *mask, const float *in, size_t n, float p,
                                       int train, ct_rng *rng)
{
    CT_ASSERT(p >= 0.0f && p < 1.0f);
    if (!train || p == 0.0f) {   /* identity: no mask, no random draws */
        if (out != in && n) CT_CUDA_CHECK(cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, ct_gpu_stream(be)));
        return;
    }
    ct_dropout_forward_seeded_gpu(be, out, mask, in, n, p, ct_dropout_seed_draw(rng));
}

/* A part of the whole batch [S * rows, per]: one seed for the whole call, as the whole
 * batch draws it, and each segment's elements numbered by their place in the whole batch. */
extern "C" void ct_dropout_forward_part_gpu(const ct_backend *be, float *out, float *mask, const float *in, size_t per,
                                            int S, int n, int first, int rows, float p, ct_rng *rng)
{
    CT_ASSERT(p >= 0.0f && p < 1.0f && S >= 1 && n >= 0 && first >= 0 && first + n <= rows);
    if (p == 0.0f) { ct_dropout_forward_gpu(be, out, mask, in, (size_t)S * n * per, p, 1, rng); return; }   /* draws nothing */
    const uint64_t seed = ct_dropout_seed_draw(rng);
    const size_t m = (size_t)n * per;
    if (m == 0) return;
    for (int s = 0; s < S; s++) {
        const size_t off = (size_t)s * m;
        const uint64_t base = ((uint64_t)s * rows + first) * per;
        dropout_fwd_kernel<<<ct_gpu_blocks(m, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(out + off, mask + off, in + off, m, p,
                                                                                            1.0f / (1.0f - p), seed, base);
        CT_LAUNCH_CHECK();
    }
}

extern "C" void ct_dropout_apply_gpu(const ct_backend *be, float *out, const float *mask, const float *in, size_t n)
{
    mul_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(out, in, mask, n);
    CT_LAUNCH_CHECK();
}

extern "C" void ct_dropout_backward_gpu(const ct_backend *be, float *din, const float *dout, const float *mask, size_t n)
{
    mul_kernel<<<ct_gpu_blocks(n, CT_THREADS), CT_THREADS, 0, ct_gpu_stream(be)>>>(din, dout, mask, n);
    CT_LAUNCH_CHECK();
}

/* ==== optimizers ==== */

/* squared-norm partial sums: block b sums a fixed strided slice in double */
__global__ static void sumsq_partials_kernel(double *partials, const float *g, size_t n)
{
    __shared__ double sh[CT_THREADS];
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += (double)g[i] * g[i];
    s = ct_block_sum(s, sh);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

/* torch's clip coefficient from the partials (every block recomputes it, in the same order):
 * coef = max_norm / (norm + 1e-6), applied only when < 1 and the norm is finite. */
__device__ static float clip_coef(const double *partials, float max_norm, double *sh, double *norm_out)
{
    double s = threadIdx.x < CT_OPTIM_GPU_PARTIALS ? partials[threadIdx.x] : 0.0;
    s = ct_block_sum(s, sh);
    double norm = sqrt(s);
    if (norm_out) *norm_out = norm;
    if (!(max_norm > 0.0f) || !isfinite(norm)) return 1.0f;
    double coef = (double)max_norm / (norm + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}

typedef struct {
    int kind, nesterov, has_m, clip;
    float lr, wd, mu, rho, one_minus_rho, eps;
    float beta1, beta2, one_minus_b1, one_minus_b2, step_size, bc2_sqrt, wd_grad, decay;
    float max_norm;
} optim_args;

/* ONE launch: every optimizer of layers/optim.h over the flat buffers (kind is
 * uniform across the grid, so the switch does not diverge). */
__global__ static void optim_kernel(float *p, float *grad, float *m, float *v, size_t n, optim_args a, const double *partials)
{
    __shared__ double sh[CT_THREADS];
    float c = a.clip ? clip_coef(partials, a.max_norm, sh, NULL) : 1.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float gr = grad[i];
        if (c != 1.0f) { gr *= c; grad[i] = gr; }   /* clipped in place, as the CPU step */
        switch (a.kind) {
        case OPT_SGD: {
            float g = gr + a.wd * p[i];
            if (a.has_m) {
                float mi = a.mu * m[i] + g;
                m[i] = mi;
                g = a.nesterov ? g + a.mu * mi : mi;
            }
            p[i] -= a.lr * g;
            break;
        }
        case OPT_RMSPROP: {
            float g = gr + a.wd * p[i];
            float vi = a.rho * v[i] + a.one_minus_rho * g * g;
            v[i] = vi;
            p[i] -= a.lr * (g / (sqrtf(vi) + a.eps));
            break;
        }
        default: {   /* OPT_ADAM, OPT_ADAMW */
            float pi = p[i] * a.decay;
            float g = gr + a.wd_grad * pi;
            float mi = a.beta1 * m[i] + a.one_minus_b1 * g;
            float vi = a.beta2 * v[i] + a.one_minus_b2 * g * g;
            m[i] = mi;
            v[i] = vi;
            float denom = sqrtf(vi) / a.bc2_sqrt + a.eps;
            p[i] = pi - a.step_size * (mi / denom);
            break;
        }
        }
    }
}

static unsigned optim_blocks(size_t n)
{
    size_t b = (n + CT_THREADS - 1) / CT_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

extern "C" ct_status ct_optim_init_gpu(const ct_backend *be, ct_optim *o, const ct_optim_config *cfg, size_t n)
{
    memset(o, 0, sizeof *o);
    ct_optim probe;   /* the CPU's validation, with a 1-float state */
    ct_status st = ct_optim_init(&probe, cfg, 1);
    ct_optim_free(&probe);
    if (st != CT_OK) return st;
    o->cfg = *cfg;
    o->n = n;
    int need_m = (cfg->kind == OPT_SGD && cfg->momentum > 0.0f) || cfg->kind == OPT_ADAM || cfg->kind == OPT_ADAMW;
    int need_v = cfg->kind != OPT_SGD;
    if ((need_m && (st = ct_gpu_malloc(ct_gpu_of(be), (void **)&o->m, n * sizeof(float), "optimizer first moment")) != CT_OK)
        || (need_v && (st = ct_gpu_malloc(ct_gpu_of(be), (void **)&o->v, n * sizeof(float), "optimizer second moment")) != CT_OK)
        || (st = ct_gpu_malloc(ct_gpu_of(be), &o->dev, CT_OPTIM_GPU_PARTIALS * sizeof(double), "gradient norm")) != CT_OK) {
        ct_optim_free_gpu(be, o);
        return st;
    }
    return CT_OK;
}

extern "C" void ct_optim_free_gpu(const ct_backend *be, ct_optim *o)
{
    ct_gpu_free(o->m);
    ct_gpu_free(o->v);
    ct_gpu_free(o->dev);
    o->m = o->v = NULL;
    o->dev = NULL;
}

extern "C" void ct_optim_step_gpu(const ct_backend *be, ct_optim *o, float *param, float *grad, float lr)
{
    cudaStream_t s = ct_gpu_stream(be);
    const ct_optim_config *c = &o->cfg;
    o->step++;
    optim_args a;
    memset(&a, 0, sizeof a);
    a.kind = (int)c->kind;
    a.lr = lr;
    a.wd = c->weight_decay;
    a.mu = c->momentum;
    a.nesterov = c->nesterov;
    a.has_m = o->m != NULL;
    a.rho = c->rho;
    a.one_minus_rho = (float)(1.0 - (double)c->rho);
    a.eps = c->eps;
    if (c->kind == OPT_ADAM || c->kind == OPT_ADAMW) {   /* the CPU's scalars, formed in double */
        const double b1 = c->beta1, b2 = c->beta2, t = (double)o->step;
        int decoupled = c->kind == OPT_ADAMW;
        a.beta1 = c->beta1;
        a.beta2 = c->beta2;
        a.one_minus_b1 = (float)(1.0 - b1);
        a.one_minus_b2 = (float)(1.0 - b2);
        a.step_size = (float)((double)lr / (1.0 - pow(b1, t)));
        a.bc2_sqrt = (float)sqrt(1.0 - pow(b2, t));
        a.wd_grad = decoupled ? 0.0f : c->weight_decay;
        a.decay = decoupled ? (float)(1.0 - (double)lr * c->weight_decay) : 1.0f;
    }
    a.clip = c->clip_norm > 0.0f;
    a.max_norm = c->clip_norm;
    if (!o->n) return;
    if (a.clip) {
        sumsq_partials_kernel<<<CT_OPTIM_GPU_PARTIALS, CT_THREADS, 0, s>>>((double *)o->dev, grad, o->n);
        CT_LAUNCH_CHECK();
    }
    optim_kernel<<<optim_blocks(o->n), CT_THREADS, 0, s>>>(param, grad, o->m, o->v, o->n, a, (const double *)o->dev);
    CT_LAUNCH_CHECK();
}

__global__ static void clip_kernel(float *grad, size_t n, float max_norm, const double *partials, double *norm_out)
{
    __shared__ double sh[CT_THREADS];
    double norm;
    float c = clip_coef(partials, max_norm, sh, &norm);
    if (blockIdx.x == 0 && threadIdx.x == 0) *norm_out = norm;
    if (c == 1.0f) return;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) grad[i] *= c;
}

extern "C" float ct_clip_grad_norm_gpu(const ct_backend *be, float *grad, size_t n, float max_norm)
{
    ct_gpu *g = ct_gpu_of(be);
    double *partials = g->scratch + CT_GPU_SCRATCH_PARTIALS;   /* [CT_OPTIM_GPU_PARTIALS] of the context's scratch */
    sumsq_partials_kernel<<<CT_OPTIM_GPU_PARTIALS, CT_THREADS, 0, g->stream>>>(partials, grad, n);
    CT_LAUNCH_CHECK();
    clip_kernel<<<optim_blocks(n), CT_THREADS, 0, g->stream>>>(grad, n, max_norm, partials, g->scratch);
    CT_LAUNCH_CHECK();
    return (float)scratch_read(g, 1)[0];
}
