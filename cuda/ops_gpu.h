/* ops_gpu.h - the GPU backend (layers/ops.h): its table of operations, the cuda/
 * twins of the layers, and opening a GPU as a backend. */
#ifndef CT_CUDA_OPS_GPU_H
#define CT_CUDA_OPS_GPU_H
#include "layers/ops.h"

/* The GPU's table, or NULL in a build without CUDA. Its entries need a backend
 * opened by ct_backend_open_gpu. */
const ct_ops *ct_ops_gpu(void);

/* Opens GPU `index` (cuda/device.h: ct_gpu_open) as a backend computing with `math`
 * (NULL: the defaults): be->dev is its own ct_gpu, released by ct_backend_close.
 * CT_ENODEV with ct_gpu_open's message when there is no such GPU or no CUDA in
 * this build, or with one line naming the compute capability and cuDNN version
 * found when math->dtype is bf16 and this GPU cannot compute it (its check_dtype
 * entry: compute capability 8.0 and cuDNN 9.13 or later); be is then zeroed. */
ct_status ct_backend_open_gpu(ct_backend *be, int index, const ct_math *math);

/* The compute stream of a backend opened by ct_backend_open_gpu (where the NCCL
 * collectives of data-parallel training queue: train/dist.h); NULL for any other. */
struct CUstream_st;
struct CUstream_st *ct_backend_gpu_stream(const ct_backend *be);

#endif
