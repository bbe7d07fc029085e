/* seq_cnn.h - a sequential CNN built from a compact architecture spec: a
 * classifier ending in a softmax cross-entropy loss, or (ct_seq_cnn_build_encoder)
 * a bare layer stack whose last layer's output is an embedding, trained through
 * whatever loss the caller puts on top (models/siamese_cnn.h).
 *
 * The default model `cnn` is Keras's mnist_cnn example, written as one spec:
 *
 *   conv32k3,relu,conv64k3,relu,maxpool2,dropout0.25,flatten,dense128,relu,dropout0.5,dense10
 *
 * on 1x28x28 images (Adam, lr 1e-3, batch 128 in `ctrain train cnn`).
 *
 * Two views of the same network:
 *   stack       x [N, C, H, W] -> layer 1 -> ... -> layer n -> out [N, out_size]
 *               ct_seq_cnn_forward_stack / ct_seq_cnn_backward_stack: the caller supplies
 *               d(loss)/d(out) and gets the parameter gradients.
 *   classifier  the stack, then softmax cross-entropy over out_size = classes values
 *               ct_seq_cnn_forward / ct_seq_cnn_backward.
 *
 * Spec grammar (layers separated by commas, no spaces; numbers are decimal):
 *
 *   spec      := layer { "," layer }
 *   layer     := conv | dense | maxpool | "gap" | "gaph" | "flatten" | dropout | "batchnorm"
 *              | "relu" | "tanh" | "sigmoid" | "save" | "add"
 *   conv      := "conv" FILTERS "k" KERNEL [ "s" STRIDE ] [ "p" PAD ]   square kernel, zero padding
 *                                                                     (defaults: stride 1, padding 0)
 *   dense     := "dense" UNITS                     needs a flat input (after flatten or gap)
 *   maxpool   := "maxpool" SIZE [ "s" STRIDE ]     window SIZE x SIZE, stride SIZE unless given
 *   gap       := global average pooling            [C, H, W] -> [C] (flat)
 *   gaph      := average pooling over H only       [C, H, W] -> [C*W] (flat, channel-major):
 *                for a log-mel crop [1, T, I] time is H, so this is the mean
 *                over time that keeps the mel axis (layers/pool.h)
 *   flatten   := [C, H, W] -> [C*H*W]
 *   dropout   := "dropout" P                       inverted dropout, 0 <= P < 1 (e.g. dropout0.25)
 *   batchnorm := per channel on feature maps, per feature on flat input
 *   save      := opens a residual block: keeps the activation at this point (its input, unchanged)
 *   add       := closes the innermost open block: out = input + the activation its save kept
 *                (layers/add.h); both must have the same shape: a block keeps its input's
 *
 * Residual blocks nest like parentheses, at most SEQ_CNN_MAX_DEPTH open at once, and every
 * save needs its add. A stem convolution, then a ResNet basic block (two 3x3 convolutions
 * around an identity skip, relu after the sum):
 *
 *   conv16k3p1,batchnorm,relu,save,conv16k3p1,batchnorm,relu,conv16k3p1,batchnorm,add,relu,gap,dense10
 *
 * Examples: conv32k3s2p1,batchnorm,relu,gap,dense10 ;
 *           conv16k5p2,tanh,maxpool2,conv32k3,sigmoid,maxpool3s2,flatten,dense10
 *
 * The parser (models/seq_cnn_spec.h) computes every layer's output shape up front and
 * fails (CT_EINVAL) naming the layer by its position and text - unknown token, missing
 * or bad number, kernel larger than its (padded) input, dense without flatten, conv or
 * pooling after flatten, an add whose two inputs differ in shape, a save without its
 * add, a last layer whose output is not `classes` values (an encoder: not flat), ...
 *
 * Layer kinds: each kind is ONE row of the table ct_seq_kinds (models/seq_cnn.c), with
 * its spec word and the functions that parse its options, infer its output shape,
 * register its parameters, plan its memory, run it forward and backward, and the
 * description of its weights in Keras's and PyTorch's files (catalog/export.c reads it).
 * A new kind is a row, its functions, and its enum value: nothing else switches on kinds
 * (the one rule across two kinds left is an optimisation: a relu right before a maxpool
 * runs after it, see plan_in_place).
 *
 * Parameters (one flat store, core/params.h) are named Keras-style, numbered per
 * layer type: conv2d_1/w [F, C, K, K], conv2d_1/b [F], dense_1/w [U, in],
 * dense_1/b [U], batchnorm_1/gamma, batchnorm_1/beta [C]; batchnorm running
 * statistics (batchnorm_1/running_mean, running_var) live in the buffer store.
 *
 * The network is written once for every device: each layer is called through
 * the table of the device the model was put on (layers/ops.h; the CPU after
 * build, ct_seq_cnn_set_device moves it). `params` and `buffers` are the host
 * stores (names, shapes, host copies for files and checkpoints); `dev` and
 * `dev_buffers` their copies on the device (on the CPU: the host stores).
 *
 * Activations are planned in one arena on the device for a maximum batch. Elementwise layers
 * (relu, tanh, sigmoid, dropout) run in place when the layer before them does not need
 * its output in backward (nor a save: the activation it keeps must stay); flatten and save
 * are the same memory as their input. Backward walks the layer list in reverse with two
 * ping-pong gradient buffers (in place for elementwise layers) and stops at the first
 * layer with parameters, whose input gradient is not computed. A residual block adds a
 * third live gradient buffer per nesting level: an add keeps its output gradient there,
 * and its save adds it to the gradient that came back through the block.
 */
#ifndef CT_SEQ_CNN_H
#define CT_SEQ_CNN_H
#include <stddef.h>
#include "core/arena.h"
#include "core/params.h"
#include "core/rng.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/ops.h"
#include "models/profile.h"

#define SEQ_CNN_DEFAULT_SPEC "conv32k3,relu,conv64k3,relu,maxpool2,dropout0.25,flatten,dense128,relu,dropout0.5,dense10"
#define SEQ_CNN_MAX_LAYERS 64
#define SEQ_CNN_TOKEN_MAX 32
#define SEQ_CNN_MAX_DEPTH 4         /* residual blocks open at once */

/* The layer kinds: the index of each one's row in ct_seq_kinds. */
typedef enum {
    SEQ_CONV, SEQ_DENSE, SEQ_MAXPOOL, SEQ_GAP, SEQ_FLATTEN, SEQ_DROPOUT, SEQ_BATCHNORM,
    SEQ_RELU, SEQ_TANH, SEQ_SIGMOID, SEQ_GAPH, SEQ_SAVE, SEQ_ADD, SEQ_KINDS
} seq_kind;

typedef struct {
    seq_kind kind;
    char text[SEQ_CNN_TOKEN_MAX];   /* the token as written in the spec */
    char name[CT_NAME_MAX];         /* "conv2d_1", "dense_2", "batchnorm_1"; "" for layers without parameters */
    int number;                     /* the 1 of conv2d_1: its place among the layers of its kind with parameters */
    int in_c, in_h, in_w;           /* input per sample; a flat input of F values is F x 1 x 1 with flat_in = 1 */
    int out_c, out_h, out_w;
    int flat_in, flat_out;
    int filters, kernel, stride, pad;   /* conv; maxpool uses kernel and stride */
    int units;                      /* dense */
    float p;                        /* dropout */
    int save;                       /* add: the index of the save that opened its block */
    int depth;                      /* save, add: its block's nesting level (0: inside no other block),
                                     * which is the skip gradient buffer it uses */
    int in_place;                   /* elementwise layer writing over its input */
    int relu_after_pool;            /* a relu right before a maxpool: it runs after the pool, on the pooled map
                                     * (relu(max x) = max(relu x), gradients too); on the maxpool: it runs that relu */
    int pool_of_bn;                 /* batchnorm on maps feeding a pooling layer, run as one where the backend can:
                                     * a maxpool (maybe through a relu after the pool; ops->batchnorm_maxpool_*)
                                     * or a gaph or gap (maybe through a relu between; ops->batchnorm_avgpool_h_*);
                                     * the pool's index, which runs the chain; 0: none */
    int relu_in_bn_pool;            /* a relu between a batchnorm and the gaph or gap it feeds: the pair's
                                     * kernel runs it when the pair runs as one */
    int bn_of_pool;                 /* maxpool, gaph, gap: that batchnorm's index + 1; 0: none */
    int bn_pool_ran;                /* batchnorm: the last forward pass left the pair to the pool */
    int pool_in_conv;               /* maxpool right after a convolution (maybe through the relu it runs): the last
                                     * forward pass ran it, and its relu, inside that convolution's forward, which
                                     * then did not write its own output (ops->conv2d_forward_pool) */
    int relu_in_conv;               /* relu right after a convolution: the last forward pass ran it inside that
                                     * convolution's forward, which then did not write its own output
                                     * (ops->conv2d_forward_relu); where the convolution is the first layer with
                                     * parameters, its backward runs the relu's too (ops->conv2d_backward_relu) */
    const float *bn_pool_in;        /* batchnorm: its input in that pass */
    conv2d_ids conv;
    dense_ids dense;
    batchnorm_ids bn;
    void *conv_plan;                /* conv: the device's plan for max_batch images (be->ops->conv2d_plan) */
    double *plane_stats;            /* conv before a batchnorm: its output planes' statistics [N, OC, 2]
                                     * (layers/batchnorm.h), made as it writes them, so that the
                                     * batchnorm need not read its input for them; NULL: none planned */
    int stats_ran;                  /* conv: the last forward pass made them */
    const float *conv_in;           /* conv: its input in the last forward pass */
    int dw_by_pool;                 /* conv, the first layer with parameters, before a batchnorm run as one with
                                     * its maxpool: the backward pass after the last forward pass took its dW
                                     * and db in that pool's backward, from the batchnorm's din made a plane
                                     * at a time, never written (ops->conv2d_backward_bn_pool) */
    double *bn_sums;                /* batchnorm feeding a pool: the chain's backward's workspace [N + 1, C, 2]
                                     * (ct_batchnorm_chain_sums_doubles); NULL: none planned */
    /* activations on the device, planned for max_batch samples */
    float *out;                     /* [N, out] (aliases the input for flatten, save and in-place layers) */
    float *ws;                      /* the convolutions' shared workspace (im2col; what a conv uses) */
    float *xhat, *mean, *invstd;    /* batchnorm */
    float *mask;                    /* dropout [N, out] */
    int *argmax;                    /* maxpool [N, out] */
} seq_layer;

typedef struct seq_cnn {
    char spec[1024];
    int in_c, in_h, in_w;
    int classes;                    /* softmax classes; 0 for an encoder (no loss of its own) */
    int out_size;                   /* values per sample of the last layer (= classes for a classifier) */
    int n;                          /* layers */
    seq_layer layer[SEQ_CNN_MAX_LAYERS];
    int first_param;                /* first layer with parameters: backward stops there */
    int depth;                      /* residual blocks open at once, at most (0: none) */
    ct_params params;               /* host: trainable */
    ct_params buffers;              /* host: batchnorm running statistics */
    const ct_backend *be;           /* the device the model is on */
    ct_dparams dev, dev_buffers;    /* params (with gradients) and buffers on the device */
    int max_batch;
    size_t conv_ws_floats;          /* the convolutions' shared workspace, as planned */
    float *ws;                      /* [conv_ws_floats] that workspace (each layer's ws points at it) */
    ct_arena arena;
    float *prob;                    /* [N, classes] softmax, kept for backward (NULL for an encoder) */
    float *stats;                   /* [2] mean loss, right predictions (classifier) */
    float *grad[2];                 /* [N, largest activation] ping-pong gradient buffers */
    float *skip_grad[SEQ_CNN_MAX_DEPTH];   /* [N, largest activation] per nesting level: an add's output
                                     * gradient, kept until the backward pass reaches its save */
    const float *logits;            /* [N, out_size] the last layer's output after a forward */
    /* Testing hook: when set, training-mode dropout applies each dropout layer's
     * current `mask` (filled by the caller) instead of drawing a new one. */
    int given_masks;
    int unfused;                    /* 1: every layer runs alone, never a pair as one (the tests compare the two) */
    int bn_own_stats;               /* 1: every batchnorm takes its statistics from its input, none from the
                                     * convolution before it (the tests compare the two) */
    /* Data-parallel training (ct_seq_cnn_set_part): the batch of the next forward is
     * part of a larger one, and dropout draws each element's number where the whole
     * batch would. part_rows = 0: the batch is whole. */
    int part_first, part_rows, part_segments;
    /* Synchronised batchnorm (ct_seq_cnn_sync_batchnorm): with a part set, training-mode
     * batchnorm takes its statistics over the whole batch through bn_sync.sum. */
    ct_replica_sum bn_sync;
    /* Profiling: with prof.on, forward and backward add each layer's wall seconds to
     * prof.fwd[i] / prof.bwd[i] (the loss goes to the last layer). */
    ct_prof prof;
} seq_cnn;

size_t ct_seq_layer_out_size(const seq_layer *l);   /* values per sample */
size_t ct_seq_layer_in_size(const seq_layer *l);    /* values per sample */

/* ---- the table of layer kinds ---- */

/* How a weight is laid out in Keras's file (PyTorch's is ctrain's own, always a copy). */
typedef enum {
    SEQ_EXPORT_COPY,        /* the same layout */
    SEQ_EXPORT_CONV,        /* [F, C, KH, KW] <-> [KH, KW, C, F] */
    SEQ_EXPORT_DENSE,       /* transposed; after a flatten, its rows reordered to channels-last */
    SEQ_EXPORT_FEATURE,     /* a vector per feature: after a flatten, reordered to channels-last */
    SEQ_EXPORT_COUNTER      /* PyTorch's int64 num_batches_tracked; nothing of ctrain's */
} seq_export_map;

/* What a layer does to the order of a flattened map, which Keras (channels-last) and
 * ctrain (channel-major) lay out differently. */
typedef enum {
    SEQ_VIEW_KEEP,          /* keeps the current order (elementwise layers, pooling of maps, ...) */
    SEQ_VIEW_FLATTEN,       /* its output is its input map [C, H, W] flattened */
    SEQ_VIEW_FLATTEN_W,     /* its output is a map [C, 1, W] flattened (gaph) */
    SEQ_VIEW_END            /* its output is a new vector, the same in both orders (dense, gap) */
} seq_export_view;

typedef struct {
    const char *keras;      /* Keras's weight ("kernel:0"); NULL: in PyTorch's file only */
    const char *torch;      /* PyTorch's attribute ("weight"); NULL ends the list */
    const char *param;      /* ctrain's parameter after "<layer name>/" ("w"); NULL: none */
    seq_export_map map;
    int buffer;             /* 1: one of the buffers (batchnorm statistics), not a parameter */
} seq_export_weight;

typedef struct {
    const char *keras_class;        /* "Conv2D" */
    const char *keras_prefix;       /* Keras names the layer "<prefix>_<number>" ("batch_normalization_1") */
    seq_export_weight w[6];         /* in the file's order */
    seq_export_view view;
    int keeps;                      /* 1: keeps its input for a later add (save): a flattened map kept
                                     * there would be added in two different orders in Keras */
} seq_export;

/* Row flags */
#define SEQ_ALIAS       1u  /* its output is its input's memory (flatten, save) */
#define SEQ_ELEMENTWISE 2u  /* may run in place, writing over its input */
#define SEQ_KEEP_OUT    4u  /* the next layer must not write over its output (its backward reads it, or an add does) */
#define SEQ_OPENS       8u  /* opens a residual block (save) */
#define SEQ_CLOSES     16u  /* closes the innermost open block (add) */

typedef struct seq_kind_row {
    const char *word;       /* the spec word: a token is the longest word it starts with, then options */
    const char *form;       /* the token as written, for messages ("convFkK[sS][pP]") */
    const char *param_name; /* its layers' names are "<param_name>_<number>"; NULL: no parameters */
    unsigned flags;         /* SEQ_ALIAS | SEQ_ELEMENTWISE | SEQ_KEEP_OUT | SEQ_OPENS | SEQ_CLOSES */
    /* Reads the options after the word into l (pos: the layer's place in the spec, for
     * messages). NULL: the word takes none. */
    ct_status (*parse)(seq_layer *l, const char *opts, int pos);
    /* Sets l's output shape from its input shape (l->in_*, flat_in; the output fields hold
     * a copy of the input's), or fails naming the layer. NULL: the output is the input. */
    ct_status (*shape)(const seq_cnn *m, seq_layer *l, int pos);
    /* Registers l's parameters (and buffers) in m's stores under l->name. */
    ct_status (*params)(seq_cnn *m, seq_layer *l);
    /* Plans what l needs beyond its output for batches of N on m's device: arena blocks,
     * the device's plans; *ws: the shared workspace it needs (floats). NULL: nothing. */
    ct_status (*plan)(seq_cnn *m, seq_layer *l, ct_arena *a, int N, size_t *ws);
    void      (*unplan)(seq_cnn *m, seq_layer *l);      /* frees what plan made outside the arena */
    /* Layer i forward on N samples: in [N, in] -> m->layer[i].out [N, out] (which the caller
     * has pointed at `in` for an alias or in-place layer). */
    void (*forward)(seq_cnn *m, int i, const float *in, int N, int train, ct_rng *rng);
    /* Layer i backward: dout [N, out] = d loss / d its output (it may overwrite it); in: its
     * forward input. Writes d loss / d its input to din [N, in] (NULL for the first layer with
     * parameters: not wanted), or in place over dout, accumulates its parameter gradients, and
     * returns where the input gradient is (din or dout). */
    float *(*backward)(seq_cnn *m, int i, float *dout, float *din, const float *in, int N);
    double (*flops)(const seq_layer *l, int N);          /* its forward's matrix-product FLOPs; NULL: 0 */
    seq_export layout;             /* its weights in Keras's and PyTorch's files (catalog/export.c) */
} seq_kind_row;

extern const seq_kind_row ct_seq_kinds[SEQ_KINDS];

/* Parses `spec` for images [C, H, W] and `classes` classes, registers and
 * allocates the parameters (zeroed: call ct_seq_cnn_init_weights). On failure m
 * holds no memory and the message names the offending layer. The model is on
 * the CPU. */
ct_status ct_seq_cnn_build(seq_cnn *m, const char *spec, int C, int H, int W, int classes);
/* The same for an encoder: no classes and no loss; the spec must end in a flat
 * output (after flatten, gap or gaph; normally a dense layer), whose size is
 * m->out_size, the embedding size. Use the stack functions below. */
ct_status ct_seq_cnn_build_encoder(seq_cnn *m, const char *spec, int C, int H, int W);
void      ct_seq_cnn_init_weights(seq_cnn *m, ct_rng *r);     /* on the host */
/* Moves the model to the device of `be` (before planning), copying the host weights there. */
ct_status ct_seq_cnn_set_device(seq_cnn *m, const ct_backend *be);
/* Plans every activation and convolution on the model's device for batches of up to
 * max_batch samples (re-plans if called again). */
ct_status ct_seq_cnn_plan(seq_cnn *m, int max_batch);
/* Host copies of the weights and batchnorm statistics -> device, and back. Nothing on the CPU. */
ct_status ct_seq_cnn_to_device(seq_cnn *m);
ct_status ct_seq_cnn_to_host(seq_cnn *m);
void      ct_seq_cnn_free(seq_cnn *m);

/* The next training forward's N rows are `segments` runs of N / segments rows, run s
 * being rows [first, first + N / segments) of a run of `rows` rows of the whole batch
 * (a siamese stack has 2 runs: the first and the second sides). Dropout draws, for
 * each element of the part, the number the whole batch would draw for it, and leaves
 * the stream where the whole batch leaves it (on the CPU; the GPU draws one seed per
 * run). rows = 0: the batch is whole. */
void ct_seq_cnn_set_part(seq_cnn *m, int first, int rows, int segments);
/* Batchnorm over the whole batch of a part (layers/batchnorm.h: ct_replica_sum): sum(ctx,
 * buf, n) sums host doubles over the replicas. sum NULL: each part's own statistics. CPU only. */
void ct_seq_cnn_sync_batchnorm(seq_cnn *m, int (*sum)(void *ctx, double *buf, int n), void *ctx);

/* Every pointer below is on the model's device.
 *
 * The layer stack alone. x [N, C, H, W]; returns the last layer's output
 * [N, out_size] (inside m's activations, valid until the next forward; also
 * m->logits). train != 0: dropout draws from dropout_rng, batchnorm uses batch
 * statistics and updates its running statistics; train == 0: no dropout,
 * batchnorm uses its running statistics. */
const float *ct_seq_cnn_forward_stack(seq_cnn *m, const float *x, int N, int train, ct_rng *dropout_rng);
/* After a training forward_stack on the same x: given dout [N, out_size] =
 * d(loss)/d(out), accumulates d(loss)/d(params) into params.grad. dout is only
 * read (it may be any buffer of the caller's). */
void ct_seq_cnn_backward_stack(seq_cnn *m, const float *x, const float *dout, int N);

/* Classifier: x [N, C, H, W], labels [N] in [0, classes). Returns the mean loss; *correct
 * (may be NULL) = right predictions. train != 0: dropout draws from dropout_rng,
 * batchnorm uses batch statistics and updates its running statistics. */
float ct_seq_cnn_forward(seq_cnn *m, const float *x, const int *labels, int N, int train, ct_rng *dropout_rng, int *correct);
/* After a training forward on the same batch: accumulates d(mean loss)/d(params) into params.grad. */
void  ct_seq_cnn_backward(seq_cnn *m, const float *x, const int *labels, int N);

/* Floating-point operations of one training step (forward + backward) on N
 * samples, counting the matrix products (conv and dense), per layer:
 *   conv   forward 2 N F OH OW C K K; backward the same for dW and, unless it is
 *          the first parameter layer, again for the input gradient
 *   dense  forward 2 N in U; backward the same for dW and (unless first) din
 * Elementwise work (activations, pooling, batchnorm, loss) is not counted. */
double ct_seq_cnn_step_flops(const seq_cnn *m, int N);
double ct_seq_cnn_forward_flops(const seq_cnn *m, int N);
/* FLOPs of layer i alone in one training step on N samples. */
double ct_seq_layer_step_flops(const seq_cnn *m, int i, int N);

/* One line per layer: position, text, name, output shape, parameters. */
void  ct_seq_cnn_summary(const seq_cnn *m, char *buf, size_t cap);

/* Whether conv layer i has its backward done by the backward of the batchnorm and maxpool
 * after it when that pair runs as one (ops->conv2d_backward_bn_pool): it is the first layer
 * with parameters (its din is not wanted), so the batchnorm's din is needed only for its dW
 * and db, which take it a plane at a time as it is made, never written. The same bits. */
int ct_seq_cnn_conv_dw_by_pool(const seq_cnn *m, int i);

#endif
