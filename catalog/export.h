/* export.h - a network's weights in the files of Keras 2
 * (`model.save_weights("w.h5")`) and PyTorch (a state_dict, one HDF5 dataset per
 * tensor, named as in the module), and back: `ctrain export` and `ctrain import`
 * for every model in the table (catalog/model_table.h).
 *
 * Each model's descriptor gives its layout (ct_layout): for every tensor of the
 * file, where it comes from among ctrain's parameters (which store PyTorch's
 * layouts) and how it is rearranged (ct_map_op). Keras keeps its weights per
 * layer: the root attribute layer_names lists the layers in order, each layer's
 * group has the attribute weight_names, and each weight is the dataset
 * <layer>/<layer>/<weight>:0. The layouts, per kind of layer:
 *
 *   ctrain (= PyTorch)          Keras
 *   conv  w [F, C, KH, KW]      Conv2D kernel [KH, KW, C, F], bias [F]
 *   dense w [U, in]             Dense kernel [in, U] (transposed), bias [U]; after a flatten its
 *                               rows are reordered: ctrain (like PyTorch) flattens a map [C, H, W]
 *                               channel-major, index (c H + h) W + w, and Keras flattens its
 *                               channels-last [H, W, C] as (h W + w) C + c (CT_MAP_FLAT_T)
 *   batchnorm gamma, beta,      BatchNormalization gamma, beta, moving_mean, moving_variance
 *     running mean and var      (epsilon 1e-5: PyTorch's and ctrain's; Keras's default is 1e-3);
 *                               a batchnorm on a flattened vector is reordered like the dense rows
 *   LSTM w_ih [4H, I], w_hh     LSTM kernel [I, 4H], recurrent_kernel [H, 4H] (transposed); gates
 *     [4H, H], b_ih, b_hh [4H]  i, f, g, o in both; bias = b_ih + b_hh (import: b_ih = bias, b_hh = 0)
 *   PyTorch adds batchnorm's num_batches_tracked (int64, 0 on export, ignored on import).
 *
 * Both files also carry ctrain's description of the model as root attributes
 * ("model", its sizes and options, the spec as "arch"), so `ctrain import` of an
 * exported file needs no flag; a file written by Keras or PyTorch is matched by
 * its tensors' shapes (and the model's flags). An export imported back gives
 * the same weights, bit for bit (the Keras LSTM's two biases come back summed).
 */
#ifndef CT_EXPORT_H
#define CT_EXPORT_H
#include <hdf5.h>
#include "catalog/model_table.h"

typedef enum {
    CT_MAP_COPY,        /* the same layout */
    CT_MAP_T,           /* a 2-D transpose: [R, C] <-> [C, R] */
    CT_MAP_CONV,        /* [F, C, KH, KW] <-> [KH, KW, C, F] */
    CT_MAP_FLAT_T,      /* a dense layer after a flatten of [c, h, w]: reordered rows, transposed */
    CT_MAP_FLAT,        /* a per-feature vector after a flatten of [c, h, w]: reordered */
    CT_MAP_SUM,         /* param[0] + param[1] (Keras's LSTM bias); import: param[0] = it, param[1] = 0 */
    CT_MAP_COUNTER      /* an int64 scalar 0 (PyTorch's num_batches_tracked); nothing of ctrain's */
} ct_map_op;

typedef struct {
    char layer[64];         /* Keras: the layer, its group in the file ("conv2d_1"); PyTorch: "" */
    const char *kind;       /* Keras: the layer's class ("Conv2D"), for messages */
    char name[128];         /* Keras: the weight ("kernel:0"); PyTorch: the state_dict key ("conv1.weight") */
    char param[2][64];      /* ctrain's parameter(s) ("conv2d_1/w") */
    int buffer;             /* 1: the parameter is a buffer (batchnorm statistics) */
    ct_map_op op;
    int c, h, w;            /* CT_MAP_FLAT*: the map [c, h, w] that was flattened */
} ct_map;

#define CT_LAYOUT_MAX 400
typedef struct ct_layout {
    int n;
    ct_map m[CT_LAYOUT_MAX];
    const char *arch;       /* the network's spec, written whole as the root attribute "arch" (NULL: none) */
} ct_layout;

/* Appends an entry; NULL (and the message set) when the layout is full. */
ct_map *ct_layout_add(ct_layout *l, const char *layer, const char *kind, const char *name, const char *param, ct_map_op op);
/* The layout of a sequential CNN. PyTorch's module names are ctrain's layer names
 * ("conv2d_1.weight"), or renamed by `torch_names` ({ "conv2d_1", "conv1" }, ..., { NULL, NULL }). */
ct_status ct_layout_seq_cnn(const seq_cnn *m, ct_format format, const char *const (*torch_names)[2], ct_layout *out);

/* A file being exported or imported, as a descriptor's file_config sees it. */
#define CT_SRC_LAYERS 96
typedef struct {
    char name[128];
    int nw;                 /* weights */
    char w[8][128];         /* their names, as weight_names lists them */
    int ndim[8];
    size_t dims[8][4];
} ct_src_layer;

typedef struct ct_src {
    const char *path;
    ct_format format;
    hid_t f;
    ct_kv kv;               /* the root attributes */
    int described;          /* kv is ctrain's description of this model (its "model" attribute names it) */
    int n_layers;           /* Keras: the layers with weights, in layer_names order */
    ct_src_layer layer[CT_SRC_LAYERS];
} ct_src;

/* The dimensions of dataset `name` of the file: ndim, or 0 when it is absent or not 1-4 dimensional. */
int ct_src_dims(const ct_src *s, const char *name, size_t dims[4]);

/* `ctrain export`, in two steps: ct_export_model reads which model the checkpoint or
 * weights file `src` holds (its "model" attribute); the caller fills a configuration
 * of that model (cfg_size bytes) from its defaults and the command line (given: bit i
 * set when option i of d->opts was given); ct_model_export rebuilds the network from
 * the file and writes its weights to `dst` as `format`. ct_export_model: CT_EINVAL when
 * the file is whole but records no model this ctrain knows (`import` then asks for
 * --model), CT_EIO or CT_EFORMAT when it cannot be read. */
ct_status ct_export_model(const char *src, const ct_model_descriptor **d);
ct_status ct_model_export(const ct_model_descriptor *d, void *cfg, unsigned long long given, const char *src, ct_format format,
                          const char *dst);
/* `ctrain import`: a Keras or PyTorch file of model d into the ctrain weights file `dst`. */
ct_status ct_model_import(const ct_model_descriptor *d, void *cfg, unsigned long long given, ct_format format, const char *src,
                          const char *dst);

#endif
