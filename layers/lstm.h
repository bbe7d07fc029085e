/* lstm.h - Long Short-Term Memory, one or more stacked layers, full
 * backpropagation through time.
 *
 * For each layer, time step t and sequence b (gate order i, f, g, o as PyTorch
 * and cuDNN; Keras calls g "c"):
 *
 *   z_t = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh          [4H] pre-activations
 *   i = r(z_i)   f = r(z_f)   g = tanh(z_g)   o = r(z_o)      r = sigmoid or hard_sigmoid
 *   c_t = f * c_{t-1} + i * g
 *   h_t = o * tanh(c_t)
 *   h_0 = c_0 = 0
 *
 * lstm.c explains how the work is organised: on AVX-512 each step's two
 * products and its cell update are one register-tiled kernel
 * (layers/lstm_fused.h, for H a multiple of 16) or two packed products and a
 * cell loop; elsewhere the input projection of all steps is one sgemm and only
 * h_{t-1} W_hh^T is computed step by step.
 *
 * Layout: x [B, T, I] (batch first, like Keras and batch_first=True), per layer
 * w_ih [4H, I_l] (I_0 = I, I_l = H above), w_hh [4H, H], b_ih [4H], b_hh [4H]
 * (PyTorch's names and shapes; Keras's single bias is b_ih + b_hh).
 * Init (Keras defaults): w_ih Glorot-uniform (fan_in I_l, fan_out 4H), w_hh
 * orthogonal, b_ih forget gate 1 / others 0, b_hh 0.
 *
 * Output (the last layer's h): LSTM_RETURN_LAST [B, H] = h at each sequence's
 * last valid step; LSTM_RETURN_SEQUENCE [B, T, H]; LSTM_RETURN_MEAN [B, H] = the
 * mean of h over the valid steps.
 *
 * Masking: len [B] (or NULL = all T) gives each sequence's valid length,
 * 1 <= len[b] <= T. At steps t >= len[b] the state is carried unchanged and the
 * sequence output is 0 (PyTorch's packed-sequence result), so padded frames
 * change nothing, forward or backward.
 *
 * ct_lstm_backward: dx [B, T, I] overwritten (NULL: not computed); the per-layer
 * parameter gradients ACCUMULATE.
 *
 * Mixed precision (dims.dtype = CT_BF16): every matrix product - the gate products
 * forward, dh's and dx's products and the weight gradients backward - takes bf16
 * operands with float32 sums (layers/gemm_bf16.h); the cell, its state, the biases
 * and every gradient stay float32. The caller checks ct_bf16_check() first.
 */
#ifndef CT_LSTM_H
#define CT_LSTM_H
#include <stddef.h>
#include "core/dtype.h"
#include "core/params.h"

/* <cblas.h> (through OpenBLAS's openblas_config.h) includes <complex.h>, whose
 * macro `I` (the imaginary unit) would break the field lstm_dims.I below.
 * ctrain uses no complex numbers, so drop it. A file that includes <cblas.h>
 * AFTER this header must #undef I again. */
#ifdef I
#undef I
#endif

#define LSTM_MAX_LAYERS 8

typedef enum { LSTM_RETURN_LAST, LSTM_RETURN_SEQUENCE, LSTM_RETURN_MEAN } lstm_return;
typedef enum { LSTM_SIGMOID, LSTM_HARD_SIGMOID } lstm_recurrent;

typedef struct {
    int B, T, I, H, L;      /* batch, time steps, input size, hidden size, layers */
    lstm_return ret;
    lstm_recurrent recur;   /* recurrent activation of the i, f, o gates */
    ct_dtype dtype;         /* the products' operands: CT_F32 (0, the default) or CT_BF16 (lstm.c, "bf16") */
    int forward_only;       /* 1: no backward follows this forward (evaluation): the steps that keep the gates in
                             * the cache only for the backward (the AVX-512 fused step and cell) store none */
} lstm_dims;

typedef struct { int w_ih[LSTM_MAX_LAYERS], w_hh[LSTM_MAX_LAYERS], b_ih[LSTM_MAX_LAYERS], b_hh[LSTM_MAX_LAYERS]; int L; } lstm_ids;
typedef struct { const float *w_ih, *w_hh, *b_ih, *b_hh; } lstm_weights;   /* one layer's parameters */
typedef struct { float *w_ih, *w_hh, *b_ih, *b_hh; } lstm_grads;           /* their gradients */

/* Registers "<prefix>/w_ih_l<k>", "w_hh_l<k>", "b_ih_l<k>", "b_hh_l<k>" for k < L with Keras's initialisers. */
ct_status ct_lstm_params_add(lstm_ids *ids, ct_params *ps, const char *prefix, int I, int H, int L);
/* Fills w[0..L) and g[0..L) with pointers into ps (g may be NULL). */
void      ct_lstm_params_view(lstm_weights *w, lstm_grads *g, const ct_params *ps, const lstm_ids *ids);

size_t ct_lstm_cache_floats(const lstm_dims *d);      /* forward state kept for backward */
/* Scratch used by backward. It holds one region per worker: size it after the thread
 * count is set (core/threads.h), as every plan does. */
size_t ct_lstm_workspace_floats(const lstm_dims *d);

/* The forward step fused into one kernel (layers/lstm_fused.h) is used where it runs (AVX-512,
 * H a multiple of 16) unless turned off here: for tests and benchmarks that compare the two. */
void ct_lstm_set_fused(int on);
/* The bf16 fused step's loop order on the tiles (layers/lstm_bf16.h, "Order"): 1 rows outside
 * (the default), 0 unit blocks outside. For benchmarks that compare the two, and tests. */
void ct_lstm_set_bf16_rows_outer(int on);
/* bf16: the backward's weight gradients over windows of steps (lstm.c, LSTM_BF16_DW_K; the
 * default, 1) or one product per step (0): the same bits either way. For tests and benchmarks. */
void ct_lstm_set_bf16_dw_windows(int on);

/* out: [B, H] or [B, T, H] (see ret); cache [ct_lstm_cache_floats]; w [L]. */
void ct_lstm_forward(float *out, float *cache, const float *x, const int *len,
                  const lstm_weights *w, const lstm_dims *d);
/* dout has out's shape; g [L] accumulated; ws [ct_lstm_workspace_floats]. */
void ct_lstm_backward(float *dx, const lstm_grads *g, float *ws, const float *dout, const float *cache,
                   const float *x, const int *len, const lstm_weights *w, const lstm_dims *d);

#endif
