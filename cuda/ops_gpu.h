/* ops_gpu.h - the GPU's table of operations (layers/ops.h): the cuda/ twins of the
 * layers on the GPU opened by ct_gpu_open (cuda/device.h). */
#ifndef CT_CUDA_OPS_GPU_H
#define CT_CUDA_OPS_GPU_H
#include "layers/ops.h"

/* The table, or NULL in a build without CUDA (ct_gpu_open says why first). Its entries
 * need an open GPU. */
const ct_ops *ct_ops_gpu(void);

#endif
