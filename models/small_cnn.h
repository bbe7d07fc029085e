/* small_cnn.h - a small image classifier that exercises every CNN layer of the
 * engine in one training step:
 *
 *   image [C, H, W] -> conv KxK (F filters, 'same' padding) -> batchnorm -> relu
 *                   -> maxpool 2 -> flatten -> dropout p -> dense(classes) -> softmax cross-entropy
 *
 * It is the CNN of the training smoke test and of `ctrain train small-cnn
 * --data synthetic`. It is a sequential CNN (models/seq_cnn.h) with the spec
 *
 *   conv<F>k<K>p<K/2>,batchnorm,relu,maxpool2,flatten,dropout<p>,dense<classes>
 *
 * so it runs on any device through the same code; its parameters are named
 * conv2d_1, batchnorm_1 and dense_1 as in every file it ever wrote.
 */
#ifndef CT_SMALL_CNN_H
#define CT_SMALL_CNN_H
#include <stddef.h>
#include "models/seq_cnn.h"

typedef struct {
    int channels, height, width;   /* input image */
    int filters, kernel;           /* conv */
    int classes;
    float dropout;
} small_cnn_config;

small_cnn_config ct_small_cnn_defaults(void);
/* The spec of this configuration (CT_EINVAL for an even kernel, fewer than 2 classes,
 * a dropout outside [0, 1)). */
ct_status ct_small_cnn_spec(char *buf, size_t cap, const small_cnn_config *cfg);
/* Builds the network as a seq_cnn classifier (ct_seq_cnn_plan, _forward, _backward, _free). */
ct_status ct_small_cnn_build(seq_cnn *m, const small_cnn_config *cfg);

#endif
