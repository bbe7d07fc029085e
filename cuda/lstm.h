/* cuda/lstm.h - the GPU twin of layers/lstm.h on cuDNN 9's RNN API (conventions in
 * cuda/device.h): stacked unidirectional LSTM layers, gates i, f, g, o, two biases
 * (CUDNN_RNN_DOUBLE_BIAS = PyTorch's b_ih, b_hh), input [B, T, I] batch-major
 * (CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED), per-sequence lengths, outputs
 * LSTM_RETURN_LAST / SEQUENCE / MEAN exactly as on the CPU (padded outputs are 0).
 * Only the sigmoid recurrent activation exists in cuDNN: hard_sigmoid is refused
 * at plan time with a message.
 *
 * The plan (ct_lstm_plan_gpu, once per model and largest batch) creates cuDNN's
 * descriptors, sizes its work and reserve spaces, and maps the flat parameter
 * buffer onto cuDNN's weight space (cuda/lstm_map.h). Where the CPU passes per-layer
 * weight pointers (lstm_weights), the GPU passes the flat device parameter buffer
 * and its gradient buffer: the plan knows where the LSTM lies in them. Where the
 * CPU keeps `cache` and `ws`, the GPU keeps cuDNN's reserve and work spaces in the
 * plan. Lengths come twice: `len` on the device (cuDNN's devSeqLengths, uploaded
 * with the batch) and `len_host` (for the RNN data descriptors); both NULL = all T.
 *
 * Backward: BackwardData then BackwardWeights with CUDNN_WGRAD_MODE_ADD, so the
 * weight gradients ACCUMULATE into the flat gradient buffer, dx is overwritten.
 *
 * bf16 (the backend's math.dtype = CT_BF16 when planned: mixed precision, docs/precision.md):
 * the RNN descriptor has dataType CUDNN_DATA_BFLOAT16, mathPrec CUDNN_DATA_FLOAT (the
 * gates, the cell and every sum in FP32) and CUDNN_TENSOR_OP_MATH, with the standard
 * algorithm. cuDNN's weight space is then bf16 (biases included: cuDNN has one data type
 * per weight space) and never the flat buffer: every forward packs it from the FP32
 * parameters, rounding to nearest even, through the segment map (lstm_map.h:
 * ct_lstm_wspace_map_make_packed); x and dout are converted to bf16 into the plan's
 * buffers, y, hy and dx come back as bf16 and are converted to FP32; the weight gradients
 * go into a zeroed bf16 gradient space and are then added into the FP32 flat gradient
 * buffer through the same map. All those buffers are the plan's, made when planned.
 */
#ifndef CT_CUDA_LSTM_H
#define CT_CUDA_LSTM_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "layers/ops.h"
#include "cuda/lstm_map.h"
#include "cuda/lstm_rec.h"
#include "cuda/device.h"

struct cudnnRNNStruct;
struct cudnnRNNDataStruct;
struct cudnnTensorStruct;
struct cudnnDropoutStruct;

typedef struct {
    lstm_dims d;                          /* as planned: d.B is the largest batch */
    ct_gpu *gpu;                          /* the backend's GPU: its cuDNN handle, stream and memory */
    ct_math math;                         /* the backend's math when planned: TF32, data type */
    lstm_wspace_map map;                  /* flat buffer <-> cuDNN weight space */
    struct cudnnRNNStruct *rnn;
    struct cudnnRNNDataStruct *x_desc, *y_desc;
    struct cudnnTensorStruct *h_desc, *c_desc;
    struct cudnnDropoutStruct *drop;      /* no dropout between layers (p = 0) */
    size_t wspace_bytes, work_bytes, reserve_bytes;
    void *work, *reserve;                 /* device */
    float *y;                             /* [B, T, H] last layer's h sequence */
    float *hy;                            /* [L, B, H] final h of each layer */
    float *dy;                            /* [B, T, H] gradient into y */
    float *dhy;                           /* [L, B, H] gradient into hy */
    float *dx;                            /* [B, T, I] when the caller does not want dx */
    float *wpack, *dwpack;                /* fallback only: packed weights and their gradients */
    int bf16;                             /* the plan computes in bf16 (math.dtype == CT_BF16) */
    uint16_t *wh, *dwh;                   /* bf16 plans: cuDNN's bf16 weight space and its gradient (wspace_bytes each) */
    uint16_t *xh, *dxh;                   /* bf16 plans: [B, T, I] x and dx in bf16 */
    uint16_t *yh, *dyh;                   /* bf16 plans: [B, T, H] y and dy in bf16 */
    uint16_t *hyh, *dhyh;                 /* bf16 plans: [L, B, H] hy and dhy in bf16 */
    void *segs;                           /* fallback only: the copy segments, on the device */
    int *len_full_dev;                    /* [B] all full_T (len == NULL) */
    int *len_full_host;                   /* [B] all full_T */
    int full_T;                           /* the length len_full_* hold */
    int shape_B, shape_T;                 /* the shape the descriptors were last set for (0: none) */
    int *shape_len;                       /* [B] host: the lengths they were set for */
    int algo;                             /* cudnnRNNAlgo_t the descriptor holds: the last batch's (cuda/lstm.cu) */
    int persistent_ok;                    /* the plan's trial step ran cuDNN's persistent kernel */
    int refused_B, refused_T;             /* a full-length shape cuDNN refused it for (0: none) */
    int said_refused;                     /* that was said on stderr */
    int own;                              /* ctrain's own kernels (cuda/lstm_rec.h) instead of cuDNN's */
    lstm_rec_plan rec;                    /* own: their memory */
    lstm_rec_engine rec_eng;              /* own: the GPU engine; its context is set to each call's backend */
    size_t off[LSTM_MAX_LAYERS][4];       /* own: w_ih, w_hh, b_ih, b_hh of each layer in the flat buffer */
} lstm_gpu;

/* d: the largest batch and the longest sequence (calls may have fewer of both); ps, ids:
 * the host parameter store (for the layout; its data is not read); params_dev: the device
 * copy of ps->data. cuDNN's work and reserve spaces are sized for d and re-queried when a
 * call's shape changes: they are not monotonic in the batch size, so a smaller batch may
 * need more, and the plan then grows them (once, in forward). Fails with CT_EINVAL
 * (hard_sigmoid, bad sizes), CT_ENOMEM, CT_ENODEV (cuDNN refuses), CT_EFORMAT (cuDNN's
 * weight space is not an LSTM's, or the backend's data type is not computed). The plan
 * keeps the backend's GPU and math. A layout that differs from ctrain's is not an error:
 * the plan packs once per step and says so on stderr (plan->map.direct == 0). */
ct_status ct_lstm_plan_gpu(const ct_backend *be, lstm_gpu *p, const lstm_dims *d, const ct_params *ps, const lstm_ids *ids,
                           const float *params_dev);
void      ct_lstm_plan_free_gpu(lstm_gpu *p);
/* the cuDNN algorithm of the plan's last batch, in words ("persistent (small hidden size)" or
 * "standard"; chosen per batch, cuda/lstm.cu) */
const char *ct_lstm_gpu_algo(const lstm_gpu *p);

/* out: [B, H] or [B, T, H] (d->ret); x [B, T, I]; params: flat device buffer; d->B and d->T
 * <= planned. */
void ct_lstm_forward_gpu(const ct_backend *be, float *out, lstm_gpu *cache, const float *x, const int *len,
                         const int *len_host, const float *params, const lstm_dims *d);
/* dx [B, T, I] overwritten (NULL: not computed); grads: flat device gradient buffer (accumulated).
 * Needs the forward of the same batch just before: cuDNN's backward-data pass changes the
 * reserve space, so a second backward needs a second forward. */
void ct_lstm_backward_gpu(const ct_backend *be, float *dx, float *grads, lstm_gpu *cache, const float *dout, const float *x,
                          const int *len, const int *len_host, const float *params, const lstm_dims *d);

#ifdef __cplusplus
}
#endif
#endif
