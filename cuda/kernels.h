/* kernels.h - ctrain's own GPU kernels: the Euclidean pair head (layers/pair.h),
 * the contrastive and softmax cross-entropy losses with their accuracies
 * (layers/loss.h), dropout (layers/dropout.h) and the optimizers with global-norm
 * clipping (layers/optim.h): what the models call through the GPU's table of
 * operations (cuda/ops_gpu.h); and the float32 <-> bf16 conversions of mixed
 * precision (the layers' bf16 paths in dense.cu, conv2d.cu, lstm.cu).
 *
 * Each function is the `_gpu` twin of the CPU function of the same name (same
 * arguments, device pointers; see cuda/device.h for the conventions) and computes
 * the same formula; the CPU headers hold the math. Reductions (losses, accuracies,
 * norms, the distance's sum over D) run in double in a fixed order, so results are
 * deterministic and independent of the launch configuration.
 *
 * Functions returning a float (a loss, an accuracy, a norm) synchronise the compute
 * stream to read it. A training step uses the *_stats_gpu forms instead, which
 * leave their results on the device (stats[0] = mean loss, stats[1] = number of
 * right predictions) so the host reads everything with one small copy per batch.
 *
 * Dropout on the GPU uses the counter-based scheme of cuda/counter_rng.h: its mask
 * is a pure function of (seed drawn from the dropout stream, element index), not
 * the CPU's sequential draws.
 */
#ifndef CT_CUDA_KERNELS_H
#define CT_CUDA_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/ops.h"
#include "core/error.h"
#include "core/rng.h"
#include "layers/optim.h"

/* ---- pair heads ---- */
void ct_euclidean_forward_gpu(const ct_backend *be, float *d, const float *a, const float *b, int B, int D, float eps);
void ct_euclidean_backward_gpu(const ct_backend *be, float *da, float *db, const float *dd, const float *d, const float *a,
                               const float *b, int B, int D, float eps);

/* ---- losses (labels, targets: device pointers too): stats [2] on the device receives
 * the mean loss and the number of right predictions, with no synchronisation ---- */
void ct_contrastive_stats_gpu(const ct_backend *be, float *stats, const float *d, const float *y, int B, float margin,
                              float threshold);
void ct_contrastive_backward_gpu(const ct_backend *be, float *dd, const float *d, const float *y, int B, float margin);
/* prob [B, C] receives the softmax, kept for backward. */
void ct_softmax_ce_stats_gpu(const ct_backend *be, float *stats, float *prob, const float *logits, const int *labels, int B,
                             int C);
void ct_softmax_ce_backward_gpu(const ct_backend *be, float *dlogits, const float *prob, const int *labels, int B, int C);

/* ---- dropout: rng is the HOST dropout stream (two draws per training call) ---- */
void ct_dropout_forward_gpu(const ct_backend *be, float *out, float *mask, const float *in, size_t n, float p, int train,
                            ct_rng *rng);
/* The same with the step seed given (what ct_dropout_forward_gpu does after drawing it). */
void ct_dropout_forward_seeded_gpu(const ct_backend *be, float *out, float *mask, const float *in, size_t n, float p,
                                   uint64_t seed);
/* A part of a larger batch (layers/dropout.h: ct_dropout_forward_part): two draws for the
 * whole call, element j of segment s numbered (s * rows + first) * per + j, so the part's
 * masks are the whole batch's, as on the CPU. */
void ct_dropout_forward_part_gpu(const ct_backend *be, float *out, float *mask, const float *in, size_t per, int S, int n,
                                 int first, int rows, float p, ct_rng *rng);
void ct_dropout_apply_gpu(const ct_backend *be, float *out, const float *mask, const float *in, size_t n);
void ct_dropout_backward_gpu(const ct_backend *be, float *din, const float *dout, const float *mask, size_t n);

/* ---- bf16 conversions (mixed precision, cuda/device.h) ----
 * bf16 values are held as uint16_t (the bit pattern of __nv_bfloat16: the upper half of the
 * float32), so C files need no CUDA headers. Queued on the compute stream; n may be 0. */
/* dst [n] = bf16(src), rounded to nearest, ties to even (__float2bfloat16_rn, as core/bf16.h). */
void ct_bf16_from_float_gpu(const ct_backend *be, uint16_t *dst, const float *src, size_t n);
/* dst [n] = float(src) (exact). */
void ct_float_from_bf16_gpu(const ct_backend *be, float *dst, const uint16_t *src, size_t n);
/* dst [n] += float(src): a bf16 gradient accumulated into a float32 one. */
void ct_float_add_bf16_gpu(const ct_backend *be, float *dst, const uint16_t *src, size_t n);

/* ---- optimizers on the flat device buffers ----
 * Same formulas, validation and state as ct_optim (layers/optim.h), with o->m and o->v
 * on the device and o->dev holding the squared-norm partial sums of clipping.
 * ct_optim_step_gpu is ONE kernel launch over the n floats (plus one launch for the
 * squared-norm partial sums when clip_norm > 0; the update kernel finishes the
 * norm itself, so no host round trip). Nothing is allocated per step. */
#define CT_OPTIM_GPU_PARTIALS 256

ct_status ct_optim_init_gpu(const ct_backend *be, ct_optim *o, const ct_optim_config *cfg, size_t n);
void      ct_optim_free_gpu(const ct_backend *be, ct_optim *o);
void      ct_optim_step_gpu(const ct_backend *be, ct_optim *o, float *param, float *grad, float lr);
/* Returns the global norm before clipping (synchronises); scales grad as ct_clip_grad_norm. */
float     ct_clip_grad_norm_gpu(const ct_backend *be, float *grad, size_t n, float max_norm);

#ifdef __cplusplus
}
#endif
#endif
