/* cuda/conv2d.h - the GPU twin of layers/conv2d.h: 2-D cross-correlation, NCHW, on
 * cuDNN (conventions in cuda/device.h).
 *
 * The CPU functions take the dims; their GPU twins take a plan made ONCE per layer
 * (ct_conv2d_plan_gpu) for the largest batch, and each call's batch size N. For each batch
 * size met (the full batch, the last partial batch of each split, embedding batches)
 * the plan keeps a shape: cuDNN's tensor descriptors and three convolution
 * descriptors, one per direction, each with the algorithm picked by cuDNN's heuristics
 * (cudnnGetConvolution*Algorithm_v7: the best-ranked one that is supported, fits the
 * workspace, uses the backend's math - FP32 FMA only unless TF32 was allowed - and,
 * when the backend asks for determinism, is deterministic) and that algorithm's math
 * type (as PyTorch's Conv_v7 sets it). The plan keeps the backend's GPU and math
 * from when it was made: shapes made later for other batch sizes follow the same rules. The workspace is the caller's, sized by
 * ct_conv2d_workspace_floats_gpu for the largest batch, as on the CPU; another batch size
 * only picks among the algorithms that fit it. Shapes are host-side state (descriptors,
 * no device memory); the plan keeps the CONV2D_GPU_SHAPES most recently used.
 *
 * bf16 (the backend's math.dtype = CT_BF16 when planned: mixed precision, docs/precision.md):
 * the convolutions run in cuDNN's pseudo-bf16 configuration - input, filter and output
 * descriptors CUDNN_DATA_BFLOAT16, the convolution descriptor's compute type
 * CUDNN_DATA_FLOAT (FP32 accumulation) - with the algorithms (and their math types,
 * tensor-op math allowed) chosen for those descriptors. The layer's tensors stay FP32:
 * the plan holds device buffers for the bf16 copies (allocated when planned, for the
 * largest batch), and the convolutions read and write those: forward's output comes
 * back as bf16 and is converted to FP32 (so out holds bf16-rounded sums), backward
 * filter writes a bf16 dw that is then added into the FP32 dw, backward data a bf16 din
 * converted to FP32. The bias and its gradient stay FP32 (the FP32 descriptors).
 */
#ifndef CT_CUDA_CONV2D_H
#define CT_CUDA_CONV2D_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/ops.h"
#include "layers/conv2d.h"
#include "cuda/device.h"

struct cudnnTensorStruct;
struct cudnnFilterStruct;
struct cudnnConvolutionStruct;

#define CONV2D_GPU_WORKSPACE_LIMIT ((size_t)1 << 30)   /* bytes an algorithm may ask for */
#define CONV2D_GPU_SHAPES 4

enum { CONV2D_GPU_FWD, CONV2D_GPU_BWD_DATA, CONV2D_GPU_BWD_FILTER };

typedef struct {
    int N;                                          /* batch size; 0 = an unused slot */
    unsigned long used;                             /* the plan's clock at the last use */
    struct cudnnTensorStruct *x_desc, *y_desc;      /* FP32 [N, C, H, W], [N, OC, OH, OW] */
    struct cudnnTensorStruct *xh_desc, *yh_desc;    /* bf16 plans: the same shapes in bf16 (NULL in FP32 plans) */
    struct cudnnConvolutionStruct *conv_desc[3];    /* per direction, with its algorithm's math type */
    int algo[3];                                    /* cuDNN's enum values, per direction */
    size_t bytes[3];                                /* the workspace each needs */
} conv2d_gpu_shape;

typedef struct {
    conv2d_dims d;                                  /* d.N: the largest batch */
    int bias;
    ct_gpu *gpu;                                    /* the backend's GPU: cuDNN's handle */
    ct_math math;                                   /* the backend's math when planned: TF32, determinism, data type */
    struct cudnnTensorStruct *b_desc;
    struct cudnnFilterStruct *w_desc;
    struct cudnnFilterStruct *wh_desc;              /* bf16 plans: [OC, C, KH, KW] in bf16 (else NULL) */
    uint16_t *xh;                                   /* bf16 plans, device: [d.N, C, H, W] in, then din, in bf16 */
    uint16_t *yh;                                   /* bf16 plans, device: [d.N, OC, OH, OW] out, then dout, in bf16 */
    uint16_t *wh, *dwh;                             /* bf16 plans, device: [OC, C, KH, KW] w and its gradient in bf16 */
    size_t ws_bytes;                                /* the workspace planned: the largest need at d.N */
    conv2d_gpu_shape shape[CONV2D_GPU_SHAPES];
    unsigned long clock;
} conv2d_gpu_plan;

/* Fails (CT_EINVAL / CT_ENODEV naming the shape) if cuDNN has no usable algorithm, or
 * (CT_EINVAL) if the backend's data type is not computed. */
ct_status ct_conv2d_plan_gpu(const ct_backend *be, conv2d_gpu_plan *p, const conv2d_dims *d, int bias);
void      ct_conv2d_plan_free_gpu(conv2d_gpu_plan *p);
size_t    ct_conv2d_workspace_floats_gpu(const conv2d_gpu_plan *p);
/* The shape for batch size N (1 <= N <= d.N), made on first use. NULL with a message if
 * cuDNN has no usable algorithm for N within the planned workspace. For tests and `time`. */
const conv2d_gpu_shape *ct_conv2d_shape_gpu(conv2d_gpu_plan *p, int N);

/* out [N, OC, OH, OW]; in [N, C, H, W]; w [OC, C, KH, KW]; b [OC] or NULL; ws scratch. */
void ct_conv2d_forward_gpu(const ct_backend *be, float *out, float *ws, const float *in, const float *w, const float *b,
                           conv2d_gpu_plan *p, int N);
/* din overwritten (NULL: not computed); dw, db accumulated (db NULL if no bias). */
void ct_conv2d_backward_gpu(const ct_backend *be, float *din, float *dw, float *db, float *ws, const float *dout,
                            const float *in, const float *w, conv2d_gpu_plan *p, int N);

#ifdef __cplusplus
}
#endif
#endif
