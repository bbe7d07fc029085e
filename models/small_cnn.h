/* small_cnn.h - a small image classifier that exercises every CNN layer of the
 * engine in one training step:
 *
 *   image [C, H, W] -> conv KxK (F filters, 'same' padding) -> batchnorm -> relu
 *                   -> maxpool 2 -> flatten -> dropout p -> dense(classes) -> softmax cross-entropy
 *
 * It is the CNN of the training smoke test and of `ctrain train small-cnn
 * --data synthetic`. (The Keras mnist_cnn architecture and user-defined CNNs
 * build on the same layers.)
 */
#ifndef CT_SMALL_CNN_H
#define CT_SMALL_CNN_H
#include "core/arena.h"
#include "core/params.h"
#include "core/rng.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/pool.h"

typedef struct {
    int channels, height, width;   /* input image */
    int filters, kernel;           /* conv */
    int classes;
    float dropout;
} small_cnn_config;

typedef struct {
    small_cnn_config cfg;
    ct_params params;     /* trainable */
    ct_params buffers;    /* batchnorm running statistics */
    conv2d_ids conv;
    batchnorm_ids bn;
    dense_ids fc;
    int max_batch, flat;  /* flat = F * PH * PW features after pooling */
    size_t conv_ws_floats;  /* the convolution workspace, as planned (it grows with the thread count) */
    ct_arena arena;
    struct {
        float *conv_ws;         /* im2col scratch, conv_ws_floats of it */
        float *conv;            /* [N, F, H, W] conv output */
        float *bn, *xhat;       /* [N, F, H, W] */
        float *bn_mean, *bn_invstd;   /* [F] */
        float *pool;            /* [N, F, PH, PW] relu'd then pooled; flatten is the same memory */
        int *argmax;            /* [N, F, PH, PW] */
        float *drop, *mask;     /* [N, flat] */
        float *logits, *prob;   /* [N, classes] */
        float *dlogits, *ddrop, *dpool, *dbn, *dconv;
    } act;
} small_cnn;

small_cnn_config small_cnn_defaults(void);
ct_status small_cnn_build(small_cnn *m, const small_cnn_config *cfg);
void      small_cnn_init_weights(small_cnn *m, ct_rng *r);
ct_status small_cnn_plan(small_cnn *m, int max_batch);
void      small_cnn_free(small_cnn *m);
/* x [N, C, H, W], labels [N] in [0, classes). Returns the mean loss; *correct = right predictions.
 * train != 0: batch statistics and dropout (drawing from `dropout_rng`). */
float small_cnn_forward(small_cnn *m, const float *x, const int *labels, int N, int train, ct_rng *dropout_rng, int *correct);
void  small_cnn_backward(small_cnn *m, const float *x, const int *labels, int N);

#endif
