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
 *                          and tile t = ty*(TW + 1) + tx, T = TH*(TW + 1) (one spare tile per
 *                          row: see "the tile transforms" below)
 *   M, dM [16, OC, P]      products / transformed output gradients
 * Tiles beyond the output's edge (odd OH or OW) read zero padding and their
 * extra outputs are dropped.
 */
#include <cblas.h>
#include <string.h>
#include "core/hot.h"
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

/* Columns one image takes in the tile buffers: TH rows of TW + 1 (one spare column
 * per tile row, see "the tile transforms" below). */
static int tiles(const wino_shape *s) { return s->TH * (s->TW + 1); }

/* Scratch floats one transform needs: four planes of (TH + 1) x (TW + 1) and eight
 * rows of TH x (TW + 1) (+1). */
static size_t scratch_floats(const wino_shape *s)
{
    const size_t R = (size_t)s->TW + 1;
    return 4 * ((size_t)s->TH + 1) * R + 8 * ((size_t)s->TH * R + 1);
}

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

int ct_conv2d_winograd_ok(const conv2d_dims *d)
{
    return d->KH == 3 && d->KW == 3 && d->stride == 1 && d->pad <= 2;
}

/* Workspace: the transformed filters [16, OC, C], shared, then one region per worker:
 * V and M of a chunk (forward), dU, V and dM (filter gradient), V' and M' (input gradient),
 * each followed by the transforms' scratch. */
static size_t worker_floats(const conv2d_dims *d)
{
    const size_t nb = (size_t)chunk_images(d), filt = (size_t)16 * d->OC * d->C;
    wino_shape f = fwd_shape(d), b = bwd_shape(d);
    size_t pf = nb * (size_t)tiles(&f), pb = nb * (size_t)tiles(&b);
    size_t fwd = filt + 16 * pf * ((size_t)d->C + d->OC) + scratch_floats(&f);
    size_t bwd = 16 * pb * ((size_t)d->OC + d->C) + scratch_floats(&b);
    return fwd > bwd ? fwd : bwd;
}

size_t ct_conv2d_winograd_workspace_floats(const conv2d_dims *d)
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

/* ---- the tile transforms, as long vector loops ----
 *
 * Tile (ty, tx) reads input rows 2ty .. 2ty+3 and columns 2tx .. 2tx+3 (of the
 * zero-padded image). Split the image into four planes by the parity of row and
 * column,
 *     EE[a][j] = x(2a, 2j)   EO[a][j] = x(2a, 2j+1)   OE[a][j] = x(2a+1, 2j)   OO[a][j] = x(2a+1, 2j+1)
 * each (TH + 1) x R with R = TW + 1. Then the patch's rows are d0 = row ty of the
 * even planes, d1 = row ty of the odd planes, d2, d3 = row ty + 1 of them, and its
 * columns are j = tx, tx (odd plane), tx + 1, tx + 1 (odd plane). Numbering the
 * tiles q = ty R + tx, every step of the transform is "plane[q] op plane[q + R]"
 * or "row[q] op row[q + 1]": one flat loop over all TH R tiles of the image,
 * which the compiler vectorises without short-loop overhead. The price is one
 * spare tile per row (tx = TW, which reads into the next row); its columns in the
 * tile buffers hold harmless finite values, are never written to an output, and
 * its output gradient is zero, so it adds nothing to the filter gradient. */

/* e [n], o [n] <- the even and odd columns x0 + 2j, x0 + 2j + 1 (j < n) of row iy of
 * im [H, W], zero outside the image (that is the zero padding). */
CT_HOT
static void split_row(float *restrict e, float *restrict o, const float *restrict im, int H, int W, int iy, int x0, int n)
{
    if (iy < 0 || iy >= H) { memset(e, 0, (size_t)n * sizeof *e); memset(o, 0, (size_t)n * sizeof *o); return; }
    const float *row = im + (size_t)iy * W;
    /* interior: 0 <= x0 + 2j and x0 + 2j + 1 <= W - 1 */
    int lo = x0 >= 0 ? 0 : (1 - x0) / 2, hi = W - 2 - x0 >= 0 ? (W - 2 - x0) / 2 + 1 : 0;
    if (hi > n) hi = n;
    if (lo > hi) lo = hi;
    for (int j = lo; j < hi; j++) { e[j] = row[x0 + 2 * j]; o[j] = row[x0 + 2 * j + 1]; }
    for (int j = 0; j < n; j++) {
        if (j == lo) j = hi;   /* the edges, with bounds checks */
        if (j >= n) break;
        int x = x0 + 2 * j;
        e[j] = x >= 0 && x < W ? row[x] : 0.0f;
        o[j] = x + 1 >= 0 && x + 1 < W ? row[x + 1] : 0.0f;
    }
}

/* The four parity planes [rows, R] of im [H, W], starting at image row y0 and column x0. */
static void split_planes(float *ee, float *eo, float *oe, float *oo, const float *im, int H, int W,
                         int y0, int x0, int rows, int R)
{
    for (int a = 0; a < rows; a++) {
        split_row(ee + (size_t)a * R, eo + (size_t)a * R, im, H, W, y0 + 2 * a, x0, R);
        split_row(oe + (size_t)a * R, oo + (size_t)a * R, im, H, W, y0 + 2 * a + 1, x0, R);
    }
}

/* V = B^T d B for every tile of image im [H, W]: v[xi * plane + q], q = ty R + tx. */
CT_HOT
static void input_tiles(float *restrict v, size_t plane, const float *im, const wino_shape *s, float *scratch)
{
    const int R = s->TW + 1, n = s->TH * R;
    const size_t PR = (size_t)(s->TH + 1) * R;
    float *ee = scratch, *eo = ee + PR, *oe = eo + PR, *oo = oe + PR;
    float *t[8];                                      /* B^T d: rows 0..3 at even columns, then at odd */
    for (int i = 0; i < 8; i++) t[i] = oo + PR + (size_t)i * (n + 1);
    split_planes(ee, eo, oe, oo, im, s->H, s->W, -s->pad, -s->pad, s->TH + 1, R);
    for (int pass = 0; pass < 2; pass++) {           /* even columns, then odd */
        const float *restrict d0 = pass ? eo : ee, *restrict d1 = pass ? oo : oe;   /* rows 2ty, 2ty+1; +R: 2ty+2, 2ty+3 */
        float *restrict t0 = t[4 * pass], *restrict t1 = t[4 * pass + 1], *restrict t2 = t[4 * pass + 2], *restrict t3 = t[4 * pass + 3];
        for (int q = 0; q < n; q++) {
            t0[q] = d0[q] - d0[q + R];
            t1[q] = d1[q] + d0[q + R];
            t2[q] = d0[q + R] - d1[q];
            t3[q] = d1[q] - d1[q + R];
        }
        t0[n] = t1[n] = t2[n] = t3[n] = 0.0f;         /* read by the spare tile of the last row */
    }
    for (int i = 0; i < 4; i++) {                     /* (B^T d) B: columns e[tx], o[tx], e[tx+1], o[tx+1] */
        const float *restrict a = t[i], *restrict b = t[4 + i];
        float *restrict v0 = v + (size_t)(4 * i) * plane, *restrict v1 = v0 + plane, *restrict v2 = v1 + plane, *restrict v3 = v2 + plane;
        for (int q = 0; q < n; q++) {
            v0[q] = a[q] - a[q + 1];
            v1[q] = b[q] + a[q + 1];
            v2[q] = a[q + 1] - b[q];
            v3[q] = b[q] - b[q + 1];
        }
    }
}

/* im [OH, OW] <- A^T m A + bias for every tile, m[xi * plane + q]; outputs past the edge are dropped. */
CT_HOT
static void output_tiles(float *im, const float *m, size_t plane, float bias, const wino_shape *s, float *scratch)
{
    const int R = s->TW + 1, n = s->TH * R;
    float *restrict y00 = scratch, *restrict y01 = y00 + n, *restrict y10 = y01 + n, *restrict y11 = y10 + n;
    for (int q = 0; q < n; q++) {
        float t0[4], t1[4];                           /* A^T m, by column */
        for (int c = 0; c < 4; c++) {
            float m0 = m[(size_t)c * plane + q], m1 = m[(size_t)(4 + c) * plane + q];
            float m2 = m[(size_t)(8 + c) * plane + q], m3 = m[(size_t)(12 + c) * plane + q];
            t0[c] = m0 + m1 + m2;
            t1[c] = m1 - m2 - m3;
        }
        y00[q] = t0[0] + t0[1] + t0[2] + bias;        /* (A^T m) A */
        y01[q] = t0[1] - t0[2] - t0[3] + bias;
        y10[q] = t1[0] + t1[1] + t1[2] + bias;
        y11[q] = t1[1] - t1[2] - t1[3] + bias;
    }
    for (int ty = 0; ty < s->TH; ty++)                /* interleave the 2x2 blocks into the image */
        for (int r = 0; r < 2 && 2 * ty + r < s->OH; r++) {
            float *row = im + (size_t)(2 * ty + r) * s->OW;
            const float *ya = (r ? y10 : y00) + (size_t)ty * R, *yb = (r ? y11 : y01) + (size_t)ty * R;
            for (int tx = 0; tx < s->OW / 2; tx++) { row[2 * tx] = ya[tx]; row[2 * tx + 1] = yb[tx]; }
            if (s->OW % 2) row[s->OW - 1] = ya[s->OW / 2];
        }
}

/* dM = A dY A^T for every 2x2 block of the output gradient im [OH, OW] (zero past the edge). */
CT_HOT
static void output_grad_tiles(float *restrict dm, size_t plane, const float *im, const wino_shape *s, float *scratch)
{
    const int R = s->TW + 1, n = s->TH * R;
    float *ee = scratch, *eo = ee + n, *oe = eo + n, *oo = oe + n;   /* dY's rows 2ty, 2ty+1 x columns 2tx, 2tx+1 */
    split_planes(ee, eo, oe, oo, im, s->OH, s->OW, 0, 0, s->TH, R);
    for (int i = 0; i < 4; i++) {
        /* A dY: row i of the 4x2 product, at even and odd columns */
        const float *restrict a0 = i == 3 ? NULL : ee, *restrict a1 = i == 0 ? NULL : oe;
        const float *restrict b0 = i == 3 ? NULL : eo, *restrict b1 = i == 0 ? NULL : oo;
        const float sign = i == 2 || i == 3 ? -1.0f : 1.0f;   /* rows of A: (1,0) (1,1) (1,-1) (0,-1) */
        float *restrict d0 = dm + (size_t)(4 * i) * plane, *restrict d1 = d0 + plane, *restrict d2 = d1 + plane, *restrict d3 = d2 + plane;
        for (int q = 0; q < n; q++) {
            float a = (a0 ? a0[q] : 0.0f) + (a1 ? sign * a1[q] : 0.0f);
            float b = (b0 ? b0[q] : 0.0f) + (b1 ? sign * b1[q] : 0.0f);
            d0[q] = a;                                /* (A dY) A^T */
            d1[q] = a + b;
            d2[q] = a - b;
            d3[q] = -b;
        }
    }
}

/* The three transforms over whole chunks: image k, channel c -> columns [k T, (k+1) T)
 * of row c of each [16, channels, P] plane. */
typedef enum { WINO_INPUT, WINO_OUTPUT, WINO_OUTPUT_GRAD } wino_pass;

static void transform_chunk(wino_pass pass, float *tilebuf, float *img, const float *cimg, const float *b,
                            const wino_shape *s, int nb, size_t P, float *scratch)
{
    const int T = tiles(s), channels = pass == WINO_INPUT ? s->C : s->OC;
    const size_t plane = (size_t)channels * P, img_size = pass == WINO_INPUT ? (size_t)s->H * s->W : (size_t)s->OH * s->OW;
    for (int k = 0; k < nb; k++)
        for (int c = 0; c < channels; c++) {
            const size_t off = ((size_t)k * channels + c) * img_size;    /* this channel of image k */
            float *cols = tilebuf + (size_t)c * P + (size_t)k * T;        /* its columns in xi plane 0 */
            if (pass == WINO_INPUT) input_tiles(cols, plane, cimg + off, s, scratch);
            else if (pass == WINO_OUTPUT) output_tiles(img + off, cols, plane, b ? b[c] : 0.0f, s, scratch);
            else output_grad_tiles(cols, plane, cimg + off, s, scratch);
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
    const size_t Pmax = (size_t)j->nb * tiles(s);
    float *V = j->ws + (size_t)worker * j->worker_size, *M = V + 16 * (size_t)s->C * Pmax, *scratch = M + 16 * (size_t)s->OC * Pmax;
    transform_chunk(WINO_INPUT, V, NULL, j->in + (size_t)n0 * s->C * s->H * s->W, NULL, s, k, P, scratch);
    for (int xi = 0; xi < 16; xi++)   /* M[xi] [OC, P] = U[xi] [OC, C] x V[xi] [C, P] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->OC, (int)P, s->C, 1.0f, j->U + (size_t)xi * s->OC * s->C,
                    s->C, V + (size_t)xi * s->C * P, (int)P, 0.0f, M + (size_t)xi * s->OC * P, (int)P);
    transform_chunk(WINO_OUTPUT, M, j->out + (size_t)n0 * s->OC * s->OH * s->OW, NULL, j->b, s, k, P, scratch);
}

/* One chunk of the filter gradient, summed into this worker's dU [16, OC, C]:
 * dU[xi] += dM[xi] [OC, P] x V[xi]^T [P, C]. A worker's first chunk (task < workers) starts the sum. */
static void filter_grad_chunk(void *ctx, int task, int worker)
{
    const wino_job *j = ctx;
    const wino_shape *s = &j->s;
    int n0, k = chunk_range(j, task, &n0);
    const size_t P = (size_t)k * tiles(s), OCC = (size_t)s->OC * s->C;
    const size_t Pmax = (size_t)j->nb * tiles(s);
    float *dU = j->ws + (size_t)worker * j->worker_size, *V = dU + 16 * OCC, *dM = V + 16 * (size_t)s->C * Pmax;
    float *scratch = dM + 16 * (size_t)s->OC * Pmax;
    transform_chunk(WINO_INPUT, V, NULL, j->in + (size_t)n0 * s->C * s->H * s->W, NULL, s, k, P, scratch);
    transform_chunk(WINO_OUTPUT_GRAD, dM, NULL, j->dout + (size_t)n0 * s->OC * s->OH * s->OW, NULL, s, k, P, scratch);
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

void ct_conv2d_winograd_forward(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_dims *d)
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

/* The filter gradient of the output channels [lo, hi) on each thread (ct_parallel_range):
 * worker 0's dU [16, OC, C] += the other workers' partial sums, in worker order, then
 * dw [o, c] += G^T dU [., o, c] G. Every value is summed in the same order however the
 * channels are split. */
typedef struct {
    const conv2d_dims *d;
    float *dw, *dU;
    size_t worker_size;
    int used;
} dw_job;

static void dw_range(void *ctx, size_t lo, size_t hi)
{
    const dw_job *j = ctx;
    const size_t C = (size_t)j->d->C, OCC = (size_t)j->d->OC * C;
    for (int k = 1; k < j->used; k++) {
        const float *part = j->dU + (size_t)k * j->worker_size;
        for (size_t xi = 0; xi < 16; xi++)
            for (size_t i = xi * OCC + lo * C; i < xi * OCC + hi * C; i++) j->dU[i] += part[i];
    }
    for (size_t o = lo; o < hi; o++)
        for (size_t c = 0; c < C; c++) {
            float du[16];
            for (size_t xi = 0; xi < 16; xi++) du[xi] = j->dU[xi * OCC + o * C + c];
            filter_transform_adjoint(j->dw + (o * C + c) * 9, du);
        }
}

void ct_conv2d_winograd_backward(float *din, float *dw, float *ws, const float *dout, const float *in, const float *w,
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
    dw_job dj = { .d = d, .dw = dw, .dU = j.ws, .worker_size = j.worker_size, .used = used };
    ct_parallel_range((size_t)OC, 16 * OCC * (size_t)used, dw_range, &dj);
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
