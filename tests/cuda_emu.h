/* cuda_emu.h - ctrain's own GPU kernels (cuda/lstm_rec_kernels.cuh) run on the CPU, from their
 * CUDA source, by a small emulation of CUDA's execution model (tests/cuda_emu.cpp): each block's
 * threads are POSIX threads, __syncthreads is a barrier, a warp shuffle goes through an exchange
 * array between two barriers, and the blocks run one after another. So a test on any machine
 * runs the kernels' indexing, their barriers and shuffles, and their arithmetic, and compares
 * them with the C model of cuda/lstm_rec.c (the same float operations in the same order: the
 * same bits). What the emulation cannot show is the GPU's own arithmetic (its expf and tanhf)
 * and speed: the GPU tests do that.
 *
 * Each call returns 0, or -1 with a message in `why` when a barrier was divergent (some threads
 * of a block left the kernel while others waited at a barrier, or reached one after a thread had
 * left): undefined behaviour on a GPU.
 */
#ifndef CT_TESTS_CUDA_EMU_H
#define CT_TESTS_CUDA_EMU_H
#include <stddef.h>
#include <stdint.h>
#include "cuda/lstm_rec.h"

#ifdef __cplusplus
extern "C" {
#endif

int ct_emu_rec_forward(const lstm_rec_fwd_args *a, char *why, size_t n);
int ct_emu_rec_backward(const lstm_rec_bwd_args *a, char *why, size_t n);
/* pack_kernel and bias_grad_kernel on `grid` blocks of `block` threads (their grid-stride loops) */
int ct_emu_rec_pack(int bf16, int backward, void *image, const float *w_hh, int H, int HP, unsigned grid, unsigned block, char *why,
                    size_t n);
int ct_emu_bias_grad(float *db_ih, float *db_hh, const float *part, int B, int cols, unsigned grid, unsigned block, char *why,
                     size_t n);

#ifdef __cplusplus
}
#endif
#endif
