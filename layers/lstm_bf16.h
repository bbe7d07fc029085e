/* lstm_bf16.h - one LSTM forward step in bf16 on AMX tiles: the gate products of the
 * stacked input [x_t | h_{t-1}] for all four gates of 16 hidden units at once, and the
 * cell applied to 16 or 32 rows as soon as their tiles are stored.
 *
 * The plain bf16 step (layers/lstm.c) is two products and a pass of the cell:
 *   z  = x_t W_ih^T           (x_t rounded to bf16 and packed; C tiles zeroed, stored)
 *   z += h_{t-1} W_hh^T       (h_{t-1} rounded and packed; C tiles loaded back, stored)
 *   the cell reads z again for every row
 * Here the rows are rounded and packed once, side by side ([x_t | h_{t-1}], K = Il + H,
 * so the two inputs share their k-blocks: for the siamese model's Il = 40, H = 128 that
 * is 6 blocks of 32 instead of 2 + 4, with 24 of the first product's 64 k padding), every
 * C tile is zeroed once and stored once, and the cell finds its z in cache.
 *
 * ---- Tiles ----
 * All eight tiles are 16 rows x 64 bytes (as layers/gemm_bf16.h configures them):
 *   tmm0..tmm3  C: z of 16 rows for gate i, f, g, o of units 16u .. 16u+15 (16 x 16 float32 each)
 *   tmm4        A: the 16 rows' [x_t | h_{t-1}], k-block kb (16 rows x 32 bf16)
 *   tmm5..tmm7  B: the gates' weights, k-block kb (16 pair-rows x 16 units x 2 bf16); the
 *               fourth gate reuses tmm5 once the first gate's product is issued
 * Per k-block: 1 + 4 tile loads, 4 TDPBF16PS (each 16 x 16 x 32 multiply-adds).
 * With the rows outside and 32 whole rows left, two row blocks go at once, in two passes over
 * k, gates (i, f) and then (g, o): C tmm0..tmm3 = (rows 0-15, i), (0-15, f), (16-31, i),
 * (16-31, f), and then the same for g and o; A tmm4, tmm5 the two row blocks; B tmm6, tmm7 the
 * two gates. Per k-block and pass: 2 + 2 tile loads, 4 TDPBF16PS: each weight tile loaded
 * serves two row blocks, half the weights read from L2 per row (bench_lstm --bf16, B = 256:
 * forward 6.03-6.22 -> 5.75-5.97 ms). Each C tile is still zeroed once, summed over the
 * k-blocks in order and stored once: the same z, bit for bit.
 *
 * ---- Order ----
 * Two loop orders, the same sums (each block's z does not depend on the order):
 *   units outer  (CT_LSTM_TILES_UNITS_OUTER) one unit block's weights (4 panels
 *                of Kp x 16 bf16: 24 KiB at Kp = 192) stay in L1 while the packed rows
 *                stream past them, and each block's cell runs as soon as its tiles are
 *                stored: 16 rows x 16 units, 64-byte pieces of each row of c and h.
 *   rows outer   (CT_LSTM_TILES_ROWS_OUTER, what layers/lstm.c runs) the 16 rows' A tiles stay in L1 while every
 *                unit block's weights stream (all of them, 192 KiB, per 16 rows), and the
 *                cell runs on 16 whole rows once all their blocks are stored, as the plain
 *                step's cell does.
 * The first loads four times less from L2 for the products, the second gives the cell whole
 * rows. Measured on the C model of the tiles (siamese shapes, 2 threads, Zen 3), the cell
 * took 19-20 ms of CPU per training step with the rows outside (as the plain step's cell)
 * and 34-36 ms with the unit blocks outside; the products' extra L2 traffic with the rows
 * outside (192 KiB of weights per 16 rows, about 1.5 MiB per step and worker) is estimated
 * at about 1.4 ms per training step at the tiles' rate. On real tiles (an AMX Xeon, 2
 * threads, bench_lstm --bf16, B = 256) the forward took 7.2-7.4 ms with the rows outside and
 * 9.9-10.3 ms with the unit blocks outside: the rows go outside. Issuing the previous 16
 * rows' cell between the next 16 rows' tile blocks, so that the vector units and the tiles
 * overlap, measured no faster (7.2-7.8 ms) and was left out.
 *
 * ---- Packing ----
 * The weights, once per layer and batch: W = [W_ih | W_hh] ([4H, Il + H], PyTorch's gate
 * order i, f, g, o) as gemm_bf16.h's packed op(B) = W^T [Il + H, 4H], with the columns
 * taken gate-interleaved per 16 units: panel 4u + q holds the columns q H + 16u .. +15.
 *   wp: [H/16][4][Kp/2][16][2]   element (u, q, p, j, h) = bf16(W[q H + 16u + j][2p + h]),
 *       zero for 2p + h >= Il + H;   Kp = Il + H rounded up to 32
 * The rows, at every step: work [Mp][Kp] bf16, Mp = rows rounded up to 16, row m =
 * bf16(x_t[m]) then bf16(h_{t-1}[m]) (zeros at t = 0) then zeros, and zero rows past `rows`.
 *
 * ---- Results ----
 * Each z element is the tiles' sum over the k-blocks in order, from a zeroed tile: the
 * same instructions on the same pairs as ct_gemm_bf16 over the stacked operands, so the
 * two give the same bits (tests/test_lstm_bf16.c checks it on the model). Against the
 * float32 products of the same rounded operands, gemm_bf16.h's bound (1) with K = Il + H.
 * The sum order differs from the plain step's (which adds the two products' results), so
 * the fused and plain steps agree within that bound, not bit for bit.
 *
 * Runs on the tiles (CT_BF16_AMX) or on the C model (CT_BF16_MODEL): vdpbf16ps CPUs run
 * the plain step. The tests check its logic on any CPU through the model, and on an AMX
 * machine the tiles against the model bit for bit.
 */
#ifndef CT_LSTM_BF16_H
#define CT_LSTM_BF16_H
#include <stddef.h>
#include <stdint.h>
#include "layers/gemm_bf16.h"

#define CT_LSTM_BF16_UNITS 16   /* hidden units per block: one C tile per gate */

/* 1 when the fused bf16 step runs for hidden size H on the bf16 kernels in use
 * (ct_kernels_bf16(): the tiles or their model) and H is a multiple of 16. */
int    ct_lstm_bf16_fused_ok(int H);
/* Elements (uint16_t) of the packed [W_ih | W_hh] of a layer with input size Il. */
size_t ct_lstm_bf16_pack_elems(int Il, int H);
/* Elements (uint16_t) of the rows' work buffer for a step of `rows` sequences. */
size_t ct_lstm_bf16_work_elems(int rows, int Il, int H);
/* Rounds and packs w_ih [4H, Il] and w_hh [4H, H] (row-major) into wp (layout above). */
void   ct_lstm_bf16_pack(uint16_t *wp, const float *w_ih, const float *w_hh, int Il, int H);

/* Rows of z that a z_block buffer holds: the rows outer order's blocks of 32 rows. */
#define CT_LSTM_BF16_BLOCK_ROWS 32
/* The cell of one block: rows r0 .. r0+nr-1 of the step (nr <= 16 with the units outer, <= 32
 * with the rows outer), units u0 .. u0+nu-1 (nu = 16 with the units outer, H with the rows
 * outer), called once per block after its z (z + r ldz + q H + u0 .. +nu-1, q = 0..3) is stored. */
typedef void (*ct_lstm_cell_block)(void *ctx, int r0, int nr, int u0, int nu);
typedef enum { CT_LSTM_TILES_UNITS_OUTER = 0, CT_LSTM_TILES_ROWS_OUTER = 1 } ct_lstm_tile_order;
/* One step for `rows` consecutive sequences:
 *   x [rows, Il] (row stride Il), hprev [rows, H] (NULL at t = 0: h_{-1} = 0)
 *   z [rows, ldz]: the pre-activations without biases, in lstm.c's layout (gate q of unit
 *     j at column q H + j), then whatever `cell` makes of them; with z_block, z is only
 *     [CT_LSTM_BF16_BLOCK_ROWS, ldz]: every block's rows r0 .. r0+nr-1 are stored at its rows
 *     0 .. nr-1, for the cell to take before the next block overwrites them (lstm.c: a small
 *     buffer that stays in L2, the cell writing the gates where they are kept)
 * with `work` (ct_lstm_bf16_work_elems) overwritten, on the implementation `which`
 * (CT_BF16_AMX or CT_BF16_MODEL), in the loop order `order`. */
void   ct_lstm_bf16_step(ct_bf16_kernels which, ct_lstm_tile_order order, int rows, int Il, int H, const float *x,
                         const float *hprev, const uint16_t *wp, uint16_t *work, float *z, int ldz, int z_block,
                         ct_lstm_cell_block cell, void *ctx);

#endif
