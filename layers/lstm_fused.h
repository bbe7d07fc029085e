/* lstm_fused.h - one LSTM forward step as a single AVX-512 kernel: both gate
 * products and the cell update, while the gates are still in registers.
 *
 * The plain forward step (layers/lstm.c) is three passes over the step's rows:
 * z = x_t W_ih^T into the gate rows, z += h_{t-1} W_hh^T (the rows read back and
 * written again), then the cell loop reads z once more to make i, f, g, o, c_t,
 * tanh(c_t) and h_t. Here one register tile does it all: 6 rows by the four
 * gates (i, f, g, o) of 16 hidden units, summed over k = 0 .. Il+H-1 of the
 * stacked input [x_t | h_{t-1}], then biases, activations and the cell update
 * applied to the 24 accumulators before anything is stored.
 *
 * For the four gates of one unit to land in one tile, the weights are packed
 * per unit block: panel u (units 16u .. 16u+15) holds, for each k of the
 * stacked input, the 64 values W[q H + 16u + l][k] for q = 0..3 (i, f, g, o)
 * and l = 0..15, where W = [W_ih | W_hh] is [4H, Il + H]:
 * [H/16 panels][Il + H][64]. The gate rows in memory keep lstm.c's layout
 * (i, f, g, o each H wide), so the backward pass is unchanged.
 *
 * Arithmetic: every accumulator sums k in order 0 .. Il-1 then Il .. Il+H-1,
 * as the two separate products do, and the cell math is lstm.c's, operation
 * for operation (the same exp polynomial, divisions, fused and unfused
 * multiply-adds), so on a build whose scalar code uses FMA (-march=native on
 * any AVX-512 CPU) the results are bit for bit the plain step's. The portable
 * build's scalar code rounds each product before adding; there the two paths
 * agree to float rounding (tests/test_lstm.c checks both ways).
 *
 * The same cell is also here on its own, forward (for the bf16 tiles' fused step, which
 * makes its products on AMX and needs only the cell) and backward (lstm.c's equations
 * (1)-(3), for both precisions): 16 units at a time, operation for operation the scalar
 * cell, so with FMA in the scalar code the results are again the same bits. For bf16
 * training the forward cell can round the gates it stores for the backward to bf16, and
 * the backward cell read them so (lstm.c, "bf16").
 *
 * Needs ctrain's AVX-512 kernels (ct_kernels_get(), layers/gemm_packed.h) and H a
 * multiple of 16; elsewhere lstm.c runs the plain step and the scalar cells.
 */
#ifndef CT_LSTM_FUSED_H
#define CT_LSTM_FUSED_H
#include <stddef.h>
#include <stdint.h>

/* 1 when the fused step runs for hidden size H on this CPU. */
int    ct_lstm_fused_ok(int H);
/* Floats of the packed [W_ih | W_hh] of one layer with input size Il. */
size_t ct_lstm_fused_pack_floats(int Il, int H);
/* Packs w_ih [4H, Il] and w_hh [4H, H] (row-major, PyTorch's layout) into wp. */
void   ct_lstm_fused_pack(float *wp, const float *w_ih, const float *w_hh, int Il, int H);
/* One step for `rows` consecutive sequences (row-major blocks, one row per sequence):
 *   x [rows, Il], hprev [rows, H] (NULL at t = 0: h_{-1} = 0), cprev [rows, H]
 *   writes gate [rows, 4H] (i, f, g, o after their activations), c, h [rows, H].
 * hard: Keras's hard sigmoid for i, f, o instead of the sigmoid. Where gate is 64-byte
 * aligned, the gates, which only the backward reads, are streamed to memory past the caches
 * (as ct_lstm_fused_cell below; the values are the same either way). gate NULL: the gates
 * are not kept (a forward with no backward after it). tanh(c_t) is not kept: the backward cell
 * makes it again from c_t. */
void   ct_lstm_fused_step(int rows, int Il, int H, const float *x, const float *hprev, const float *cprev,
                          const float *wp, const float *b_ih, const float *b_hh,
                          float *gate, float *c, float *h, int hard);
/* The step's cell alone, the same operations (every AVX-512 CPU: what the bf16 tiles' fused
 * step runs on its stored products, layers/lstm.c): `rows` rows of units [0, n) (n a multiple
 * of 16, at most H; every pointer at the first row's first unit). z: the products without
 * biases, rows ldz floats apart (gate q of unit j at z[q H + j]); the gates after their
 * activations go to gate (floats; gate = z: in place) or, rounded to bf16, to gate16 (at least
 * one of the two NULL; both: the gates are not kept), rows ldg apart. cprev, c, h: rows H floats apart. Where the gates are aligned
 * (and not written in place), they, which only the backward reads, are streamed to memory past
 * the caches (non-temporal stores: no read of the lines they overwrite); c_t and h_t, which the
 * next step reads, are stored. */
void   ct_lstm_fused_cell(int rows, int n, int H, const float *z, size_t ldz, const float *cprev, const float *b_ih,
                          const float *b_hh, float *gate, uint16_t *gate16, size_t ldg, float *c, float *h, int hard);
/* The backward cell of one valid row, lstm.c's equations (1)-(3) with the same operations,
 * 16 units at a time (every AVX-512 CPU; H a multiple of 16): reads the forward's gates [4H]
 * (floats from gate, or bf16 from gate16, one of the two NULL), c = c_t and cprev = c_{t-1} [H],
 * dh and dc [H] (and the output part s ds [H] where ds is not NULL); computes tanh(c_t) with the
 * forward cell's operations (the same bits as the forward's); writes dz [4H] and adds it to db
 * [4H]; leaves dc = dc_t f_t and dh = 0. */
void   ct_lstm_fused_cell_backward(float *dz, float *db, float *dh, float *dc, const float *ds, float s, const float *gate,
                                   const uint16_t *gate16, const float *c, const float *cprev, int H, int hard);
/* The same step's products alone: z [rows, 4H] = [x | hprev] [W_ih | W_hh]^T in the
 * same tiles, order and sums, stored where the step stores its gates, with no bias,
 * activation or cell update. Not part of training: bench_lstm --ceiling times it
 * beside the step to show what the cell costs and what the products alone reach. */
void   ct_lstm_fused_products(int rows, int Il, int H, const float *x, const float *hprev, const float *wp, float *z);

#endif
