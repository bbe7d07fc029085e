/* siamese_lstm_gpu.h - the siamese LSTM of models/siamese_lstm.h trained on the GPU.
 *
 * Everything a step touches stays on the device for the whole run: the flat
 * parameter buffer (same layout as the host model's ct_params, so its LSTM part IS
 * cuDNN's weight space, see cuda/lstm_map.h), the gradient buffer, the optimizer
 * state and every activation. Per batch, exactly one host-to-device copy (inputs,
 * labels and lengths packed in one pinned block) and one 8-byte device-to-host copy
 * (loss and number of right predictions). Parameters cross only when asked
 * (siamese_lstm_gpu_upload_params / _download_params: start, checkpoints, the end).
 *
 * Batches are double-buffered: siamese_lstm_upload_gpu writes the next batch into
 * the other pinned slot and queues its copy on the copy stream, which first waits
 * (event) until the compute stream no longer reads that slot's device buffer; the
 * next forward makes the compute stream wait (event) for the copy. With the training
 * loop's order - load(k+1) right after backward(k) and step(k) were queued - the copy
 * and the host's batch preparation overlap the GPU's backward pass and update of
 * batch k. Only forward synchronises, to return the loss.
 *
 * Mirrors siamese_lstm_forward/backward with the batch given by the last
 * siamese_lstm_upload_gpu instead of x, len, y arguments.
 */
#ifndef CT_CUDA_SIAMESE_LSTM_GPU_H
#define CT_CUDA_SIAMESE_LSTM_GPU_H

#ifdef __cplusplus
extern "C" {
#endif
#include "models/siamese_lstm.h"
#include "cuda/kernels.h"
#include "cuda/lstm.h"

struct CUevent_st;

typedef struct {
    float *host;                    /* pinned: x [2B, T, I] | y [B] | len [2B] (ints) */
    float *dev;                     /* the same block on the device */
    struct CUevent_st *copied;      /* copy stream: the block has arrived */
    struct CUevent_st *consumed;    /* compute stream: the last kernel reading it has run */
} siamese_lstm_gpu_slot;

typedef struct {
    siamese_lstm *m;                /* host model: config, parameter layout, host weights */
    int max_pairs;
    float *params, *grad;           /* [m->params.numel] device */
    int training;                   /* an optimizer was given */
    ct_optim_gpu opt;
    lstm_gpu lstm;
    struct {                        /* device activations for max_pairs pairs */
        float *h;                   /* [2B, H] */
        float *emb;                 /* [2B, D] */
        float *dist, *ddist;        /* [B] */
        float *demb;                /* [2B, D] */
        float *dh;                  /* [2B, H] */
        float *stats;               /* [2] mean loss, right predictions */
    } act;
    float *stats_host;              /* [2] pinned */
    struct CUevent_st *stats_ready;
    siamese_lstm_gpu_slot slot[2];
    size_t x_floats, y_off, len_off, slot_bytes;   /* slot layout (floats / bytes) */
    int cur, cur_B, cur_has_len;    /* the batch the next forward/backward works on */
} siamese_lstm_gpu;

/* m: a built host model with its weights (initialised or loaded); opt: the optimizer
 * (NULL: evaluation only). Opens nothing: ct_gpu_open must have been called. Copies
 * the host weights to the device. Fails with a message (CT_EINVAL for a configuration
 * the GPU cannot run, e.g. hard_sigmoid; CT_ENOMEM; CT_ENODEV). After a failure
 * siamese_lstm_gpu_free is still safe and releases what was made. */
ct_status siamese_lstm_gpu_create(siamese_lstm_gpu *g, siamese_lstm *m, int max_pairs, const ct_optim_config *opt);
void      siamese_lstm_gpu_free(siamese_lstm_gpu *g);
ct_status siamese_lstm_gpu_upload_params(siamese_lstm_gpu *g);    /* m->params.data -> device */
ct_status siamese_lstm_gpu_download_params(siamese_lstm_gpu *g);  /* device -> m->params.data (checkpoints) */
ct_status siamese_lstm_gpu_download_grad(siamese_lstm_gpu *g);    /* device -> m->params.grad (tests) */

/* Host x [2B, T, I], len [2B] or NULL, y [B]: staged and copied (one copy) for the next forward. */
void  siamese_lstm_upload_gpu(siamese_lstm_gpu *g, const float *x, const int *len, const float *y, int B);
/* Forward on the uploaded batch; returns the mean loss, *correct = pairs right (synchronises). */
float siamese_lstm_forward_gpu(siamese_lstm_gpu *g, int B, int *correct);
/* Accumulates the gradient of the mean loss into g->grad (asynchronous). */
void  siamese_lstm_backward_gpu(siamese_lstm_gpu *g, int B);
/* One optimizer update at learning rate lr, then zeroes the gradients (asynchronous). */
void  siamese_lstm_step_gpu(siamese_lstm_gpu *g, float lr);

#ifdef __cplusplus
}
#endif
#endif
