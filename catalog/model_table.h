/* model_table.h - every model as the commands see it: one descriptor per model,
 * and the table of them. `ctrain train|eval|time|export|import MODEL` looks the
 * model up here and calls it; nothing in cli/ knows a model by name.
 *
 * A descriptor is data and functions over two blocks of memory the caller
 * allocates with the sizes it gives:
 *   cfg  the model's configuration (cfg_size bytes): every size and option of the
 *        network, and of its data (pairs, speakers, image counts). `opts` declares
 *        its command-line options (catalog/options.h): --help and parsing come from
 *        that table, for every command that takes them.
 *   net  the built network (net_size bytes: a siamese_lstm, siamese_cnn, seq_cnn).
 *
 * Life of a training run (cli/train.c, cli/time.c; the steps from load_data on are
 * catalog/session.h's, which both commands share):
 *   defaults -> [from_meta on --resume] -> options parsed into cfg -> finish
 *   -> load_data -> build -> init_weights -> set_device -> plan -> task_open
 *   -> ct_fit (train/train.h) -> save -> task, net and data freed.
 * Evaluation (cli/eval.c) rebuilds the network from its weights file
 * (eval_config), export and import (catalog/export.h) from the file's recorded
 * description and its tensors' shapes (file_config), and map its parameters to
 * Keras's and PyTorch's layouts through `layout`.
 *
 * The descriptors are in catalog/model_*.c; what the two speaker models and the
 * two image models share is in catalog/model_speaker.c and catalog/model_image.c.
 * Adding a model is writing one descriptor and listing it in ct_models
 * (catalog/model_table.c); docs/extending.md, "How to add a model", walks through it.
 */
#ifndef CT_MODEL_TABLE_H
#define CT_MODEL_TABLE_H
#include <stdio.h>
#include "core/params.h"
#include "core/rng.h"
#include "io/corpus.h"
#include "io/featstore.h"
#include "io/images.h"
#include "io/kv.h"
#include "io/trials.h"
#include "layers/ops.h"
#include "models/profile.h"
#include "models/seq_cnn.h"
#include "models/speaker_model.h"
#include "train/checkpoint.h"
#include "train/image_task.h"
#include "catalog/options.h"
#include "train/speaker_task.h"
#include "train/train.h"

typedef enum { CT_TASK_SPEAKER, CT_TASK_IMAGE } ct_task_kind;   /* pairs of utterances, or labelled images */

/* `ctrain train`'s training settings when no option says otherwise. */
typedef struct {
    int epochs, batch;
    ct_optim_kind optimizer;
    float lr;                  /* with the default optimizer; 0: the optimizer's own default */
    const char *schedule;      /* "constant", "step" or "cosine" */
    const char *data;          /* --data */
} ct_train_defaults;

/* The data of a run, loaded once (load_data) and shared by the runs on every device. */
typedef struct {
    const char *source;                /* --data as given */
    /* speaker models (catalog/model_speaker.c) */
    ct_corpus corpus;
    ct_featstore_plan store_plan;      /* how a feature store was opened (loaded or streamed); unused for synthetic data */
    int ranks_here;                    /* set before load_data: ranks of this job on this machine (0 or 1: one process) */
    const char *trials_path;           /* --trials, or NULL */
    ct_trial *trials;
    int n_trials, *trial_speakers;
    const char *exclude_path;          /* --exclude-trials, or NULL */
    unsigned char *excluded;           /* [corpus speakers] 1: a speaker that list names (tc.excluded) */
    int n_excluded, n_excluded_utts;   /* how many speakers, and their utterances */
    speaker_task_config tc;
    /* image models (catalog/model_image.c) */
    const char *dir;                   /* the IDX directory; NULL for synthetic images */
    ct_images train, val;
    int c, h, w, classes;              /* the images' shape */
    long n_train, n_val;               /* samples (pairs or images) per epoch */
} ct_model_data;

/* The training task of a built network over its data (task_open; ct_model_task_close). */
typedef struct {
    speaker_task s;
    image_task c;
    int open;                          /* 0 none, 1 speaker, 2 image */
    ct_task task;                      /* what ct_fit trains */
} ct_model_task;

/* A row of `ctrain time --layers`: seconds summed over the profiled batches, FLOPs per sample. */
typedef void (*ct_row_fn)(void *ctx, const char *name, double fwd_s, double bwd_s, double flops_per_sample);

/* Export and import (catalog/export.h). */
typedef enum { CT_FORMAT_CTRAIN, CT_FORMAT_KERAS, CT_FORMAT_TORCH } ct_format;
struct ct_layout;
struct ct_src;

typedef struct ct_model_descriptor ct_model_descriptor;
struct ct_model_descriptor {
    /* ---- who it is ---- */
    const char *name;                  /* "siamese-lstm": the word after train, eval, time; --model */
    const char *summary;               /* one line in the model lists of --help */
    const char *about;                 /* `ctrain train NAME --help`: what the network is */
    ct_task_kind task;

    /* ---- configuration ---- */
    size_t cfg_size, net_size;
    const ct_opt *opts;                /* model and data options, CT_OPT_END-terminated */
    ct_train_defaults train;
    void      (*defaults)(void *cfg);                 /* `ctrain train`'s */
    void      (*time_defaults)(void *cfg);            /* the model `ctrain time` times; NULL: defaults */
    /* After parsing: derived fields and checks (checkpointing: --checkpoint or --save-best given). */
    ct_status (*finish)(void *cfg, int checkpointing);
    /* --resume: the checkpoint's model and data settings (path names it in messages). */
    ct_status (*from_meta)(void *cfg, const ct_ckpt_meta *meta, const char *path);
    /* The model's description: the checkpoint's root attributes, the weights file's, the exports'. */
    void      (*describe)(const void *cfg, const void *net, ct_kv *model);
    /* What a checkpoint records of the data: the features (model) and the data options (training). */
    ct_status (*data_to_meta)(const void *cfg, const ct_model_data *data, ct_ckpt_meta *meta);
    /* `ctrain time`'s protocol: samples per epoch. */
    void      (*set_counts)(void *cfg, long n_train, long n_val);

    /* ---- data and task ---- */
    ct_status (*load_data)(ct_model_data *data, const void *cfg, const char *source, long seed, int batch);
    /* train's "Data:" lines (may be NULL): what was loaded, the split the task made, the optimizer. */
    void      (*data_line)(const ct_model_data *data, const ct_model_task *task, const ct_fit_config *fit, FILE *out);
    void      (*data_summary)(const ct_model_data *data, char *buf, size_t cap);              /* one line for `ctrain time` */
    /* The task factory: a speaker task (pairs) or an image task over the planned network. */
    ct_status (*task_open)(ct_model_task *t, void *net, ct_model_data *data, const ct_rngs *rngs, int batch);

    /* ---- the network ---- */
    ct_status (*build)(void *net, const void *cfg, const ct_model_data *data);   /* data: NULL outside training */
    void      (*init_weights)(void *net, ct_rng *r);
    ct_status (*set_device)(void *net, const ct_backend *be);
    ct_status (*plan)(void *net, int batch);
    void      (*free)(void *net);
    ct_params *(*params)(void *net);
    ct_params *(*buffers)(void *net);  /* non-trainable state (batchnorm statistics); NULL when none */
    ct_prof   *(*prof)(void *net);
    void      (*arch_line)(const void *net, char *buf, size_t cap);    /* "siamese-lstm 40x100 -> LSTM 128 -> ..." */
    void      (*train_line)(const void *net, char *buf, size_t cap);   /* train's "Model:" line */
    double    (*step_flops)(const void *net);                          /* one training step, per sample */
    const char *sample_name;                                           /* "pairs" or "images" */
    const char *flops_counted;                                         /* what step_flops counts, in words */
    void      (*layer_rows)(const void *net, ct_row_fn row, void *ctx);   /* `ctrain time --layers` */
    /* Weights file: the parameters, buffers and the description `desc` (may be NULL); a speaker
     * model also records the names of the speakers it was trained on (speakers NULL: none). */
    ct_status (*save)(void *net, const char *path, const ct_kv *desc, const char *const *speakers, int n_speakers);

    /* ---- evaluation (NULL eval_config: `ctrain eval` does not take the model) ---- */
    const char *eval_about;            /* `ctrain eval NAME --help` */
    const ct_opt *eval_opts;           /* the model flags of eval (the rows with CT_CMD_EVAL; the model's `opts`
                                          where eval's flags are its training options), into a block of
                                          eval_flags_size bytes */
    size_t eval_flags_size;
    int eval_batch;                    /* default --batch */
    /* The configuration of the weights file `weights` (model flags: `flags`, bit i of given set when
     * eval_opts[i] was given; data: the feature store or the IDX directory). A note about settings an
     * older file does not record goes to note ("" when none). */
    ct_status (*eval_config)(void *cfg, const char *weights, const void *flags, unsigned long long given, const char *data,
                             char *note, size_t cap);
    speaker_model (*speaker)(void *net);   /* speaker models: the verification interface */
    seq_cnn  *(*classifier)(void *net);    /* image models: the network */

    /* ---- export and import (catalog/export.h) ---- */
    /* The configuration of a file to export or import: its recorded description and its
     * tensors' shapes, with the options `given` (bit i: opts[i]) applied and checked. */
    ct_status (*file_config)(void *cfg, const struct ct_src *src, unsigned long long given);
    /* Where each parameter goes in a Keras save_weights file or a PyTorch state_dict. */
    ct_status (*layout)(const void *net, ct_format format, struct ct_layout *out);
};

extern const ct_model_descriptor *const ct_models[];   /* NULL-terminated */
/* The model called `name`, or NULL. */
const ct_model_descriptor *ct_model_find(const char *name);
/* "siamese-lstm, siamese-cnn, small-cnn, cnn": the names, for messages (with_eval: those eval takes). */
void ct_model_names(char *buf, size_t cap, int with_eval);

/* Build, initialise (rngs->init), put on the device of `be` and plan for `batch`; on failure
 * the network holds no memory. */
ct_status ct_model_net_open(const ct_model_descriptor *d, void *net, const void *cfg, const ct_model_data *data,
                            ct_rng *init, const ct_backend *be, int batch);
void      ct_model_task_close(ct_model_task *t);
/* Data-parallel training (train/dist.h): the task loads this rank's part of each batch; with
 * sync_batchnorm, batchnorm's training statistics are over the whole batch (either device). */
struct ct_dist;
void      ct_model_task_set_dist(ct_model_task *t, struct ct_dist *dist, int sync_batchnorm);
/* The `ctrain time --layers` rows of a sequential CNN: each layer, with `per_sample` of its
 * images per sample (2 for a siamese tower: both crops of a pair). */
void      ct_model_seq_rows(const seq_cnn *m, int per_sample, ct_row_fn row, void *ctx);
/* What ct_seq_cnn_step_flops counts, in words. */
#define CT_MODEL_SEQ_FLOPS \
    "matrix products only (models/seq_cnn.h): conv 2*N*F*OH*OW*C*K*K and dense 2*N*in*out forward, the same " \
    "again for the weight gradient and for the input gradient (none for the first layer); activations, pooling, " \
    "batchnorm, dropout, loss and optimizer are not counted. Convolutions count the FLOPs of direct convolution; " \
    "on a CPU without AVX-512, 3x3 stride-1 layers run Winograd F(2x2,3x3), whose products do 2.25x fewer, so " \
    "their rate there is an effective one and can exceed the sgemm peak"
void      ct_model_data_free(ct_model_data *data);

#endif
