/* model_desc.h - a trained speaker model's complete description, kept beside
 * its weights: every size and option of the model and the settings of the
 * features it was trained on. `ctrain train` writes it as root attributes of
 * the weights file (and, under the same names, in a checkpoint's model
 * configuration); `ctrain eval` rebuilds the model from it with no size flags,
 * refuses a flag that contradicts it, and refuses a feature store whose
 * features were made otherwise than the training data's.
 *
 * Attributes (numbers are HDF5 integers or floats, the rest strings):
 *   siamese-lstm  the rows of its option table recorded CT_IN_MODEL (catalog/model_siamese_lstm.c,
 *                 written and checked by ct_opts_to_kv and ct_opts_from_file, catalog/options.h):
 *                 n_mels, frames, hidden, layers, embed, margin, threshold,
 *                 recurrent ("sigmoid" | "hard_sigmoid"), pool ("last" | "mean")
 *   siamese-cnn   the rows of its table recorded CT_IN_MODEL: n_mels, frames, margin,
 *                 threshold, and embed and arch (the tower's spec) as the network reports them
 *   both          features: "log-mel" (a store written by `ctrain prep`) or
 *                 "synthetic" (--data synthetic); with log-mel also the store's
 *                 sample_rate, frame_length_ms, frame_shift_ms and normalization
 *                 (io/featstore.h). The store's n_mels is the model's n_mels.
 *
 * Older files: siamese-lstm weights recorded only pool (or nothing), siamese-cnn
 * weights arch and frames (frames as a string), checkpoints the model's sizes
 * but no feature settings. What a file does not record is taken from the flags
 * or their defaults, as before, is not checked, and is named in one note
 * (ct_model_desc_note).
 */
#ifndef CT_MODEL_DESC_H
#define CT_MODEL_DESC_H
#include "train/checkpoint.h"
#include "models/siamese_cnn.h"
#include "models/siamese_lstm.h"
#include "catalog/options.h"

/* The names of the LSTM's options in files and on the command line: --recurrent
 * sigmoid|hard_sigmoid, --pool last|mean (lstm_recurrent and lstm_return values). */
extern const ct_opt_choice ct_lstm_recurrent_choices[];
extern const ct_opt_choice ct_lstm_pool_choices[];

/* ---- writing (ctrain train) ---- */

/* The feature settings of the training data: `data` is a feature store's path
 * (its attributes are read) or "synthetic". */
ct_status ct_model_desc_features(ct_kv *kv, const char *data);

/* ---- reading (ctrain eval) ---- */

typedef struct {
    char path[512];       /* the weights file or checkpoint; messages name it */
    ct_kv kv;             /* its root attributes */
    char missing[512];    /* settings it does not record, ", "-separated ("" when complete) */
} model_desc;

/* Reads the root attributes of a weights file or a checkpoint. One whose
 * "model" attribute names another model than `model` is refused. */
ct_status ct_model_desc_read(model_desc *d, const char *path, const char *model);

/* The tower's spec that a siamese-cnn weights file or checkpoint at `path` records, whole (it may be
 * longer than a ct_kv string), into spec; a file without it, or without frames in its root
 * attributes kv, was not written by `ctrain train siamese-cnn` (CT_EFORMAT). */
ct_status ct_model_desc_cnn_arch(const char *path, const ct_kv *kv, char *spec, size_t cap);

/* Refuses a feature store whose settings differ from those the model was
 * trained on (n_mels, sample_rate, frame_length_ms, frame_shift_ms,
 * normalization), or a model trained on synthetic features; settings the file
 * does not record are added to d->missing and not checked. *store_mels (may be
 * NULL) receives the store's mel bands. */
ct_status ct_model_desc_check_store(model_desc *d, const char *store, int *store_mels);

/* "W.h5 does not record n_mels, hidden, ... (written by an older ctrain): taken
 * from the flags or their defaults, not checked", or NULL when nothing is missing. */
const char *ct_model_desc_note(const model_desc *d, char *buf, size_t cap);

#endif
