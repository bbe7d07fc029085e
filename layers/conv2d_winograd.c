/* conv2d_winograd.c - 3x3, stride-1 convolution by Winograd's minimal filtering
 * algorithm F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural
 * Networks", 2016): forward, input gradient and filter gradient.
 *
 * The idea. A 2x2 block of outputs of a 3x3 filter g reads a 4x4 patch d of the
 * input. Computed directly that is 2*2*9 = 36 multiplications; Winograd's
 * identity gives the same four numbers with 16:
 *
 *   Y [2x2] = A^T [ (G g G^T) (.) (B^T d B) ] A          (.) = elementwise product
 *
 *         | 1  0 -1  0 |          | 1    0    0  |
 *   B^T = | 0  1  1  0 |     G =  | 1/2  1/2  1/2|      A^T = | 1  1  1  0 |
 *         | 0 -1  1  0 |          | 1/2 -1/2  1/2|            | 0  1 -1 -1 |
 *         | 0  1  0 -1 |          | 0    0    1  |
 *
 * U = G g G^T (the "transformed filter") and V = B^T d B (the "transformed
 * tile") are 4x4. Summed over input channels, the elementwise products become
 * 16 independent matrix products, one per position xi of the 4x4 grid:
 *
 *   M[xi] [OC, P] = U[xi] [OC, C] x V[xi] [C, P]          P = tiles (2x2 output blocks)
 *
 * and each output block is A^T M A. The gemms do 2.25x fewer flops than
 * im2col's (16 instead of 36 per 2x2 block and channel pair); the transforms
 * are cheap O(C P) loops. F(2x2, 3x3) is the numerically gentle member of the
 * family (its constants are 0, +-1 and 1/2): float32 results differ from direct
 * convolution by a few ulps of the sums.
 *
 * Backward, both gradients stay in the same algebra:
 *   input gradient:  din = full correlation of dout with the filters rotated by
 *                    180 degrees and with C and OC swapped - which is again a
 *                    3x3 stride-1 convolution (padding 2 - p), so the forward
 *                    routine computes it, with transformed filters of the
 *                    rotated weights;
 *   filter gradient: Y is linear in U, so dU[xi] [OC, C] = sum over tiles of
 *                    dM[xi] [OC, P] x V[xi]^T [P, C] with dM = A dY A^T, and
 *                    dg = G^T dU G.
 *
 * Work is done in chunks of `nb` images (enough tiles to keep the gemms
 * efficient, few enough that the transformed tiles stay in cache), and the
 * chunks are shared by d->workers threads (core/threads.h: ct_parallel), each
 * running its own transforms and single-threaded gemms in its own region of the
 * workspace; filter-gradient partial sums are added in worker order. Layouts:
 *   U, dU [16, OC, C]      transformed filters (xi-major, so U[xi] is a row-major [OC, C] matrix)
 *   V     [16, C, P]       transformed input tiles; column p = k*T + t for image k of the chunk
 *                          and tile t = ty*TW + tx
 *   M, dM [16, OC, P]      products / transformed output gradients
 * Tiles beyond the output's edge (odd OH or OW) read zero padding and their
 * extra outputs are dropped.
 */
#include <cblas.h>
#include <string.h>
#include "core/threads.h"
#include "layers/conv2d_winograd.h"

#define WINO_TARGET_TILES 768   /* tiles per chunk: P of each gemm */

/* The per-image geometry of one Winograd convolution: a [C, H, W] image with
 * zero padding `pad` -> [OC, OH, OW] outputs in TH x TW tiles of 2x2. */
typedef struct { int C, H, W, OC, pad, OH, OW, TH, TW; } wino_shape;

static wino_shape shape_make(int C, int H, int W, int OC, int pad)
{
    wino_shape s = { .C = C, .H = H, .W = W, .OC = OC, .pad = pad, .OH = H + 2 * pad - 2, .OW = W + 2 * pad - 2 };
    s.TH = (s.OH + 1) / 2;
    s.TW = (s.OW + 1) / 2;
    return s;
}

static int tiles(const wino_shape *s) { return s->TH * s->TW; }

/* The forward shape of d, and the shape of its input gradient as a convolution of dout. */
static wino_shape fwd_shape(const conv2d_dims *d) { return shape_make(d->C, d->H, d->W, d->OC, d->pad); }
static wino_shape bwd_shape(const conv2d_dims *d) { return shape_make(d->OC, d->OH, d->OW, d->C, 2 - d->pad); }

/* images per chunk, chunks, and the workers that share them */
static int chunk_images(const conv2d_dims *d)
{
    wino_shape f = fwd_shape(d);
    int nb = (WINO_TARGET_TILES + tiles(&f) - 1) / tiles(&f);
    return nb < d->N ? nb : d->N;
}

static int n_chunks(const conv2d_dims *d) { int nb = chunk_images(d); return (d->N + nb - 1) / nb; }

static int n_workers(const conv2d_dims *d)
{
    int c = n_chunks(d), w = d->workers < 1 ? 1 : d->workers;
    return w < c ? w : c;
}

int conv2d_winograd_ok(const conv2d_dims *d)
{
    return d->KH == 3 && d->KW == 3 && d->stride == 1 && d->pad <= 2;
}

/* Workspace: the transformed filters [16, OC, C], shared, then one region per worker:
 * V and M of a chunk (forward), dU, V and dM (filter gradient), V' and M' (input gradient). */
static size_t worker_floats(const conv2d_dims *d)
{
    const size_t nb = (size_t)chunk_images(d), filt = (size_t)16 * d->OC * d->C;
    wino_shape f = fwd_shape(d), b = bwd_shape(d);
    size_t pf = nb * (size_t)tiles(&f), pb = nb * (size_t)tiles(&b);
    size_t fwd = filt + 16 * pf * ((size_t)d->C + d->OC);
    size_t bwd = 16 * pb * ((size_t)d->OC + d->C);
    return fwd > bwd ? fwd : bwd;
}

size_t conv2d_winograd_workspace_floats(const conv2d_dims *d)
{
    return (size_t)16 * d->OC * d->C + (size_t)n_workers(d) * worker_floats(d);
}

/* ---- the 4x4 transforms ---- */

/* u [16] = G g G^T for one 3x3 filter g [9] (row-major). */
static void filter_transform(float *u, const float *g)
{
    float t[4][3];   /* G g */
    for (int j = 0; j < 3; j++) {
        t[0][j] = g[j];
        t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        t[3][j] = g[6 + j];
    }
    for (int i = 0; i < 4; i++) {   /* (G g) G^T */
        u[i * 4 + 0] = t[i][0];
        u[i * 4 + 1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
        u[i * 4 + 2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
        u[i * 4 + 3] = t[i][2];
    }
}

/* dg [9] += G^T du G for one 4x4 du [16]: the adjoint of filter_transform. */
static void filter_transform_adjoint(float *dg, const float *du)
{
    float t[3][4];   /* G^T du */
    for (int j = 0; j < 4; j++) {
        t[0][j] = du[j] + 0.5f * (du[4 + j] + du[8 + j]);
        t[1][j] = 0.5f * (du[4 + j] - du[8 + j]);
        t[2][j] = 0.5f * (du[4 + j] + du[8 + j]) + du[12 + j];
    }
    for (int i = 0; i < 3; i++) {   /* (G^T du) G */
        dg[i * 3 + 0] += t[i][0] + 0.5f * (t[i][1] + t[i][2]);
        dg[i * 3 + 1] += 0.5f * (t[i][1] - t[i][2]);
        dg[i * 3 + 2] += 0.5f * (t[i][1] + t[i][2]) + t[i][3];
    }
}

/* ---- the tile transforms, vectorised along a row of tiles ----
 *
 * A row of tiles (fixed ty) reads 4 image rows. Splitting each row into its even
 * and odd columns, tile tx's four columns are e[tx], o[tx], e[tx+1], o[tx+1], so
 * every transform below is a handful of contiguous loops over tx that the
 * compiler turns into SIMD code. Rows are handled in blocks of WINO_BLOCK tiles. */
#define WINO_BLOCK 64

/* e [n], o [n] <- the even and odd columns x0 + 2j, x0 + 2j + 1 (j < n) of row iy of
 * im [H, W], zero outside the image (that is the zero padding). */
static void split_row(float *restrict e, float *restrict o, const float *restrict im, int H, int W, int iy, int x0, int n)
{
    if (iy < 0 || iy >= H) { memset(e, 0, (size_t)n * sizeof *e); memset(o, 0, (size_t)n * sizeof *o); return; }
    const float *row = im + (size_t)iy * W, *src = row + x0;
    float padded[2 * (WINO_BLOCK + 1)];
    if (x0 < 0 || x0 + 2 * n > W) {     /* at the edge: copy the row's valid part into zeros */
        int lo = x0 < 0 ? 0 : x0, hi = x0 + 2 * n < W ? x0 + 2 * n : W;
        memset(padded, 0, (size_t)(2 * n) * sizeof *padded);
        if (hi > lo) memcpy(padded + (lo - x0), row + lo, (size_t)(hi - lo) * sizeof *row);
        src = padded;
    }
    for (int j = 0; j < n; j++) { e[j] = src[2 * j]; o[j] = src[2 * j + 1]; }
}

/* V = B^T d B for tiles [tx0, tx0 + nt) of tile row ty of image im [H, W]:
 * v[xi * plane + j] for tile tx0 + j. */
static void input_tile_row(float *restrict v, size_t plane, const float *restrict im, const wino_shape *s, int ty, int tx0, int nt)
{
    float e[4][WINO_BLOCK + 1], o[4][WINO_BLOCK + 1];     /* columns of the 4 input rows */
    for (int r = 0; r < 4; r++)
        split_row(e[r], o[r], im, s->H, s->W, 2 * ty - s->pad + r, 2 * tx0 - s->pad, nt + 1);
    float te[4][WINO_BLOCK + 1], to[4][WINO_BLOCK + 1];   /* B^T d, even and odd columns */
    for (int j = 0; j <= nt; j++) {
        te[0][j] = e[0][j] - e[2][j]; te[1][j] = e[1][j] + e[2][j]; te[2][j] = e[2][j] - e[1][j]; te[3][j] = e[1][j] - e[3][j];
        to[0][j] = o[0][j] - o[2][j]; to[1][j] = o[1][j] + o[2][j]; to[2][j] = o[2][j] - o[1][j]; to[3][j] = o[1][j] - o[3][j];
    }
    for (int i = 0; i < 4; i++) {                         /* (B^T d) B: columns e[j], o[j], e[j+1], o[j+1] */
        float *v0 = v + (size_t)(4 * i) * plane, *v1 = v0 + plane, *v2 = v1 + plane, *v3 = v2 + plane;
        const float *a = te[i], *b = to[i];
        for (int j = 0; j < nt; j++) {
            v0[j] = a[j] - a[j + 1];
            v1[j] = b[j] + a[j + 1];
            v2[j] = a[j + 1] - b[j];
            v3[j] = b[j] - b[j + 1];
        }
    }
}

/* Output rows 2ty, 2ty+1, columns of tiles [tx0, tx0 + nt), of im [OH, OW] <- A^T m A + bias,
 * m[xi * plane + j] for tile tx0 + j; outputs past the edge are dropped. */
static void output_tile_row(float *restrict im, const float *restrict m, size_t plane, float bias, const wino_shape *s, int ty, int tx0, int nt)
{
    float t[2][4][WINO_BLOCK];   /* A^T m */
    for (int c = 0; c < 4; c++) {
        const float *m0 = m + (size_t)c * plane, *m1 = m0 + 4 * plane, *m2 = m1 + 4 * plane, *m3 = m2 + 4 * plane;
        for (int j = 0; j < nt; j++) {
            t[0][c][j] = m0[j] + m1[j] + m2[j];
            t[1][c][j] = m1[j] - m2[j] - m3[j];
        }
    }
    const int x0 = 2 * tx0, nx = s->OW - x0 < 2 * nt ? s->OW - x0 : 2 * nt;
    for (int i = 0; i < 2 && 2 * ty + i < s->OH; i++) {   /* (A^T m) A, interleaved into the output row */
        float y[2 * WINO_BLOCK];
        for (int j = 0; j < nt; j++) {
            y[2 * j]     = t[i][0][j] + t[i][1][j] + t[i][2][j] + bias;
            y[2 * j + 1] = t[i][1][j] - t[i][2][j] - t[i][3][j] + bias;
        }
        memcpy(im + (size_t)(2 * ty + i) * s->OW + x0, y, (size_t)nx * sizeof *y);
    }
}

/* dM = A dY A^T for tiles [tx0, tx0 + nt) of tile row ty of the output gradient im [OH, OW]
 * (zero past the edge): dm[xi * plane + j] for tile tx0 + j. */
static void output_grad_tile_row(float *restrict dm, size_t plane, const float *restrict im, const wino_shape *s, int ty, int tx0, int nt)
{
    float e[2][WINO_BLOCK], o[2][WINO_BLOCK];   /* dY's two rows, even and odd columns */
    for (int r = 0; r < 2; r++) split_row(e[r], o[r], im, s->OH, s->OW, 2 * ty + r, 2 * tx0, nt);
    float te[4][WINO_BLOCK], to[4][WINO_BLOCK]; /* A dY */
    for (int j = 0; j < nt; j++) {
        te[0][j] = e[0][j]; te[1][j] = e[0][j] + e[1][j]; te[2][j] = e[0][j] - e[1][j]; te[3][j] = -e[1][j];
        to[0][j] = o[0][j]; to[1][j] = o[0][j] + o[1][j]; to[2][j] = o[0][j] - o[1][j]; to[3][j] = -o[1][j];
    }
    for (int i = 0; i < 4; i++) {               /* (A dY) A^T */
        float *d0 = dm + (size_t)(4 * i) * plane, *d1 = d0 + plane, *d2 = d1 + plane, *d3 = d2 + plane;
        const float *a = te[i], *b = to[i];
        for (int j = 0; j < nt; j++) {
            d0[j] = a[j];
            d1[j] = a[j] + b[j];
            d2[j] = a[j] - b[j];
            d3[j] = -b[j];
        }
    }
}

/* The three transforms over whole chunks. Each walks images k, channels, tile rows
 * and blocks of tiles; column p = k*T + ty*TW + tx of the [16, channels, P] buffer. */
typedef enum { WINO_INPUT, WINO_OUTPUT, WINO_OUTPUT_GRAD } wino_pass;

static void transform_chunk(wino_pass pass, float *tilebuf, float *img, const float *cimg, const float *b,
                            const wino_shape *s, int nb, size_t P)
{
    const int T = tiles(s), channels = pass == WINO_INPUT ? s->C : s->OC;
    const size_t plane = (size_t)channels * P, img_size = pass == WINO_INPUT ? (size_t)s->H * s->W : (size_t)s->OH * s->OW;
    for (int k = 0; k < nb; k++)
        for (int c = 0; c < channels; c++) {
            const size_t off = ((size_t)k * channels + c) * img_size;    /* this channel of image k */
            float *col = tilebuf + (size_t)c * P + (size_t)k * T;         /* its columns in xi plane 0 */
            for (int ty = 0; ty < s->TH; ty++)
                for (int tx0 = 0; tx0 < s->TW; tx0 += WINO_BLOCK) {
                    const int nt = s->TW - tx0 < WINO_BLOCK ? s->TW - tx0 : WINO_BLOCK;
                    float *cols = col + (size_t)ty * s->TW + tx0;
                    if (pass == WINO_INPUT) input_tile_row(cols, plane, cimg + off, s, ty, tx0, nt);
                    else if (pass == WINO_OUTPUT) output_tile_row(img + off, cols, plane, b ? b[c] : 0.0f, s, ty, tx0, nt);
                    else output_grad_tile_row(cols, plane, cimg + off, s, ty, tx0, nt);
                }
        }
}

/* One call's work, split into chunks of nb images that the workers share. */
typedef struct {
    wino_shape s;           /* of the convolution being computed */
    int N, nb;
    const float *U;         /* [16, OC, C] transformed filters (forward and input gradient) */
    float *ws;              /* per-worker regions of worker_size floats each */
    size_t worker_size;
    const float *in, *b;    /* convolve: in [N, C, H, W] -> out [N, OC, OH, OW] */
    float *out;
    const float *dout;      /* filter gradient: dout [N, OC, OH, OW] with in */
} wino_job;

/* images [n0, n0 + k) of chunk `task` */
static int chunk_range(const wino_job *j, int task, int *n0)
{
    *n0 = task * j->nb;
    return j->N - *n0 < j->nb ? j->N - *n0 : j->nb;
}

/* One chunk of a convolution: V = tiles of in, M[xi] = U[xi] x V[xi], out = A^T M A + b. */
static void convolve_chunk(void *ctx, int task, int worker)
{
    const wino_job *j = ctx;
    const wino_shape *s = &j->s;
    int n0, k = chunk_range(j, task, &n0);
    const size_t P = (size_t)k * tiles(s);
    float *V = j->ws + (size_t)worker * j->worker_size, *M = V + 16 * (size_t)s->C * P;
    transform_chunk(WINO_INPUT, V, NULL, j->in + (size_t)n0 * s->C * s->H * s->W, NULL, s, k, P);
    for (int xi = 0; xi < 16; xi++)   /* M[xi] [OC, P] = U[xi] [OC, C] x V[xi] [C, P] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->OC, (int)P, s->C, 1.0f, j->U + (size_t)xi * s->OC * s->C,
                    s->C, V + (size_t)xi * s->C * P, (int)P, 0.0f, M + (size_t)xi * s->OC * P, (int)P);
    transform_chunk(WINO_OUTPUT, M, j->out + (size_t)n0 * s->OC * s->OH * s->OW, NULL, j->b, s, k, P);
}

/* One chunk of the filter gradient, summed into this worker's dU [16, OC, C]:
 * dU[xi] += dM[xi] [OC, P] x V[xi]^T [P, C]. A worker's first chunk (task < workers) starts the sum. */
static void filter_grad_chunk(void *ctx, int task, int worker)
{
    const wino_job *j = ctx;
    const wino_shape *s = &j->s;
    int n0, k = chunk_range(j, task, &n0);
    const size_t P = (size_t)k * tiles(s), OCC = (size_t)s->OC * s->C;
    float *dU = j->ws + (size_t)worker * j->worker_size, *V = dU + 16 * OCC, *dM = V + 16 * (size_t)s->C * P;
    transform_chunk(WINO_INPUT, V, NULL, j->in + (size_t)n0 * s->C * s->H * s->W, NULL, s, k, P);
    transform_chunk(WINO_OUTPUT_GRAD, dM, NULL, j->dout + (size_t)n0 * s->OC * s->OH * s->OW, NULL, s, k, P);
    const int first = task == worker;
    for (int xi = 0; xi < 16; xi++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->OC, s->C, (int)P, 1.0f, dM + (size_t)xi * s->OC * P, (int)P,
                    V + (size_t)xi * s->C * P, (int)P, first ? 0.0f : 1.0f, dU + xi * OCC, s->C);
}

static wino_job job_make(const conv2d_dims *d, const wino_shape *s, float *ws)
{
    const size_t filt = (size_t)16 * d->OC * d->C;
    return (wino_job){ .s = *s, .N = d->N, .nb = chunk_images(d), .U = ws, .ws = ws + filt, .worker_size = worker_floats(d) };
}

void conv2d_winograd_forward(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d)
{
    const wino_shape s = fwd_shape(d);
    const size_t OCC = (size_t)d->OC * d->C;
    for (int o = 0; o < d->OC; o++)            /* U [16, OC, C] */
        for (int c = 0; c < d->C; c++) {
            float u[16];
            filter_transform(u, w + ((size_t)o * d->C + c) * 9);
            for (int xi = 0; xi < 16; xi++) ws[xi * OCC + (size_t)o * d->C + c] = u[xi];
        }
    wino_job j = job_make(d, &s, ws);
    j.in = in; j.b = b; j.out = out;
    ct_parallel(n_chunks(d), n_workers(d), convolve_chunk, &j);
}

void conv2d_winograd_backward(float *din, float *dw, float *ws, const float *dout, const float *in, const float *w,
                              const conv2d_dims *d)
{
    const int C = d->C, OC = d->OC, W = n_workers(d);
    const size_t OCC = (size_t)OC * C;

    /* filter gradient: each worker sums its chunks' dU; the partial sums are added in
     * worker order (deterministic for a given thread count), then dw += G^T dU G */
    const wino_shape s = fwd_shape(d);
    wino_job j = job_make(d, &s, ws);
    j.in = in; j.dout = dout;
    const int used = ct_parallel(n_chunks(d), W, filter_grad_chunk, &j);
    float *dU = j.ws;
    for (int k = 1; k < used; k++) {
        const float *part = j.ws + (size_t)k * j.worker_size;
        for (size_t i = 0; i < 16 * OCC; i++) dU[i] += part[i];
    }
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++) {
            float du[16];
            for (int xi = 0; xi < 16; xi++) du[xi] = dU[xi * OCC + (size_t)o * C + c];
            filter_transform_adjoint(dw + ((size_t)o * C + c) * 9, du);
        }
    if (!din) return;

    /* input gradient: a convolution of dout [N, OC, OH, OW] with the rotated filters
     * g'[c, o] = rot180(w[o, c]), padding 2 - p, giving [N, C, H, W] */
    const wino_shape sb = bwd_shape(d);
    for (int c = 0; c < C; c++)               /* U' [16, C, OC] */
        for (int o = 0; o < OC; o++) {
            const float *g = w + ((size_t)o * C + c) * 9;
            float rot[9], u[16];
            for (int i = 0; i < 9; i++) rot[i] = g[8 - i];
            filter_transform(u, rot);
            for (int xi = 0; xi < 16; xi++) ws[xi * OCC + (size_t)c * OC + o] = u[xi];
        }
    wino_job jb = job_make(d, &sb, ws);
    jb.in = dout; jb.out = din;
    ct_parallel(n_chunks(d), W, convolve_chunk, &jb);
}
