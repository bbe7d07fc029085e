/* lstm_map.h - how ctrain's flat parameter buffer maps onto cuDNN's LSTM weight
 * space. Host-only logic (no CUDA calls), so it is built and tested in every build.
 *
 * cuDNN keeps an LSTM's weights in one "weight space". cudnnGetRNNWeightParams
 * tells, for pseudo-layer l and linLayerID k, where matrix (l, k) and bias (l, k)
 * start and how many floats they hold. For CUDNN_LSTM, k = 0..3 are the input
 * matrices of gates i, f, g, o ([H, I_l] each) and k = 4..7 the recurrent ones
 * ([H, H]); the biases of CUDNN_RNN_DOUBLE_BIAS are b_ih's gates (k < 4) and
 * b_hh's (k >= 4), [H] each. ctrain's gate order i, f, g, o is cuDNN's, so gate k's
 * rows of w_ih_l<l> [4H, I_l] are exactly matrix (l, k), and so on.
 *
 * ctrain registers, per layer, w_ih [4H, I_l], w_hh [4H, H], b_ih [4H], b_hh [4H]
 * one after another (each view starting on a 16-float boundary). cuDNN packs each
 * layer as its 8 matrices, then its 8 biases, layer after layer, with no gaps
 * (the order PyTorch's flat LSTM weights also rely on). When both agree - always
 * when H % 4 == 0, so that no padding falls between ctrain's views - the flat
 * buffer IS the weight space: cuDNN is handed ps->data + base, and its weight
 * gradients (CUDNN_WGRAD_MODE_ADD) go straight into ps->grad + base. Nothing is
 * copied per step.
 *
 * ct_lstm_wspace_map_make decides this from the offsets cuDNN reports at plan time
 * (the check runs on every plan, so a cuDNN version that packs differently is
 * caught, not silently mis-read). If any offset or size differs it builds the
 * fallback: a list of copy segments with which the model packs the parameters
 * into a separate weight space once per step, before forward, and adds the
 * gradient space back into ps->grad once per step, after backward.
 */
#ifndef CT_CUDA_LSTM_MAP_H
#define CT_CUDA_LSTM_MAP_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/params.h"
#include "layers/lstm.h"

/* Where cudnnGetRNNWeightParams put matrix and bias (layer, linLayerID), in floats
 * from the start of the weight space, with their sizes in floats. */
typedef struct { long long m_off, m_n, b_off, b_n; } lstm_wspace_loc;

typedef struct { size_t wspace, flat, n; } lstm_wspace_seg;   /* floats: wspace[wspace..+n) <-> flat[flat..+n) */

#define LSTM_WSPACE_MAX_SEGS (LSTM_MAX_LAYERS * 16)

typedef struct {
    int direct;             /* 1: the weight space is flat[base .. base + wspace_floats) */
    size_t base;            /* direct: offset of the weight space in the flat buffer */
    size_t wspace_floats;   /* cuDNN's weight space size in floats */
    int nseg;               /* fallback: copy segments (merged where contiguous on both sides) */
    lstm_wspace_seg seg[LSTM_WSPACE_MAX_SEGS];
    char why[256];          /* fallback: the first difference found, for the log */
} lstm_wspace_map;

/* loc [L * 8] indexed [layer * 8 + linLayerID]; wspace_floats = cudnnGetRNNWeightSpaceSize / 4.
 * Fails (CT_EFORMAT) only if cuDNN's sizes are not those of an LSTM with these dimensions,
 * or its regions overlap or leave the space: then neither mapping is possible. */
ct_status ct_lstm_wspace_map_make(lstm_wspace_map *map, const lstm_wspace_loc *loc, size_t wspace_floats,
                               const ct_params *ps, const lstm_ids *ids, int I, int H, int L);

/* The same check, but the result is always the copy segments (direct = 0): for a weight
 * space in another data type than the flat buffer (bf16, cuda/lstm.cu), which is packed
 * with conversion every step even where the layouts agree. Sizes and offsets in elements
 * of the weight space's type. */
ct_status ct_lstm_wspace_map_make_packed(lstm_wspace_map *map, const lstm_wspace_loc *loc, size_t wspace_elems,
                                         const ct_params *ps, const lstm_ids *ids, int I, int H, int L);

/* Host reference of the fallback copies (the GPU runs the same segments in one kernel):
 * pack:  wspace[seg] = flat[seg];   unpack_add: flat[seg] += wspace[seg]. */
void ct_lstm_wspace_pack(float *wspace, const float *flat, const lstm_wspace_map *map);
void ct_lstm_wspace_unpack_add(float *flat, const float *wspace, const lstm_wspace_map *map);

/* cuDNN's documented packing (layer by layer: 8 matrices, then 8 biases, no gaps), as
 * a table of the form above: what the tests feed ct_lstm_wspace_map_make, and what the
 * GPU test compares cuDNN's real answers with. Returns the weight space size in floats. */
size_t ct_lstm_wspace_loc_packed(lstm_wspace_loc *loc, int I, int H, int L);

/* The GPU LSTM's argument checks (host only): CT_EINVAL naming the field and the fix. */
ct_status ct_lstm_gpu_dims_check(const lstm_dims *d);

#ifdef __cplusplus
}
#endif
#endif
