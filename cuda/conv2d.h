/* cuda/conv2d.h - the GPU twin of layers/conv2d.h: 2-D cross-correlation, NCHW, on
 * cuDNN (conventions in cuda/device.h).
 *
 * The CPU functions take the dims; their GPU twins take a plan made ONCE per shape
 * (conv2d_plan_gpu): it holds the dims, cuDNN's descriptors and the three algorithms
 * (forward, backward data, backward filter) picked by cuDNN's heuristics
 * (cudnnGetConvolution*Algorithm_v7): the best-ranked algorithm that is supported,
 * fits the workspace limit, uses the context's math (FP32 FMA only unless TF32 was
 * allowed) and - when the context asks for determinism - is deterministic. The
 * workspace is the caller's, sized by conv2d_workspace_floats_gpu, as on the CPU.
 */
#ifndef CT_CUDA_CONV2D_H
#define CT_CUDA_CONV2D_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/conv2d.h"

struct cudnnTensorStruct;
struct cudnnFilterStruct;
struct cudnnConvolutionStruct;

#define CONV2D_GPU_WORKSPACE_LIMIT ((size_t)1 << 30)   /* bytes an algorithm may ask for */

typedef struct {
    conv2d_dims d;
    int bias;
    struct cudnnTensorStruct *x_desc, *y_desc, *b_desc;
    struct cudnnFilterStruct *w_desc;
    struct cudnnConvolutionStruct *conv_desc;
    int fwd_algo, bwd_data_algo, bwd_filter_algo;   /* cuDNN's enum values */
    size_t ws_bytes;                                /* the largest of the three algorithms' needs */
} conv2d_gpu_plan;

/* Fails (CT_EINVAL / CT_ENODEV naming the shape) if cuDNN has no usable algorithm. */
ct_status conv2d_plan_gpu(conv2d_gpu_plan *p, const conv2d_dims *d, int bias);
void      conv2d_plan_free_gpu(conv2d_gpu_plan *p);
size_t    conv2d_workspace_floats_gpu(const conv2d_gpu_plan *p);

/* out [N, OC, OH, OW]; in [N, C, H, W]; w [OC, C, KH, KW]; b [OC] or NULL; ws scratch. */
void conv2d_forward_gpu(float *out, float *ws, const float *in, const float *w, const float *b, const conv2d_gpu_plan *p);
/* din overwritten (NULL: not computed); dw, db accumulated (db NULL if no bias). */
void conv2d_backward_gpu(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                         const float *w, const conv2d_gpu_plan *p);

#ifdef __cplusplus
}
#endif
#endif
