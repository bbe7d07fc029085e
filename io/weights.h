/* weights.h - save a model's parameters to an HDF5 file, replaced atomically.
 *
 * Layout (readable with h5py or `h5dump -n`):
 *   /                  attributes: format "ctrain-weights", format_version 1, model (name),
 *                      and the model's description: every size and option, and the feature
 *                      settings of its training data (catalog/model_desc.h; files written
 *                      before it have only some of them, or none)
 *   /model/<name>      one float32 dataset per parameter, with its shape
 *                      (e.g. /model/lstm_1/w_ih_l0 [512, 40], /model/dense_1/w [64, 128])
 *   /state/<name>      non-trainable state (batchnorm running statistics), if any
 *   /train_speakers    speaker models: the names of the speakers trained on [n] (fixed-length
 *                      strings, io/h5.h's names), so `ctrain eval` can tell a trial list that
 *                      names them; files written before it have none
 *
 * The file is built in memory and written through io/h5atomic.h: a temporary
 * file in the same directory, fsync'ed, renamed over `path`, directory fsync'ed.
 * A crash, a full disk or a read-only directory leaves the old file whole.
 */
#ifndef CT_WEIGHTS_H
#define CT_WEIGHTS_H
#include <hdf5.h>
#include "core/params.h"
#include "io/kv.h"

ct_status ct_weights_save(const char *path, const char *model, const ct_params *params, const ct_params *state);
/* The same, with extra string attributes on the root: str_attrs = { key, value, ..., NULL }
 * (e.g. a CNN's architecture spec as "arch"), written in the same atomic step. */
ct_status ct_weights_save_attrs(const char *path, const char *model, const ct_params *params, const ct_params *state,
                               const char *const *str_attrs);
/* The same, with the named values of `desc` (ct_kv, train/checkpoint.h) as root attributes:
 * integers, numbers and strings, as a checkpoint stores its model configuration; then
 * str_attrs (may be NULL) as above, for strings longer than a ct_kv holds. */
ct_status ct_weights_save_kv(const char *path, const char *model, const ct_params *params, const ct_params *state,
                             const ct_kv *desc, const char *const *str_attrs);
/* The same, with the names of the speakers the model was trained on as /train_speakers
 * (none when speakers is NULL). */
ct_status ct_weights_save_speakers(const char *path, const char *model, const ct_params *params, const ct_params *state,
                                   const ct_kv *desc, const char *const *str_attrs, const char *const *speakers, int n_speakers);
/* The names /train_speakers records (malloc'd; ct_h5_names_free): *n = 0 and *speakers = NULL
 * when the file has no record. */
ct_status ct_weights_read_speakers(const char *path, char ***speakers, int *n);
/* Load parameters by name; every parameter of `params` must be present with its shape.
 * A file whose root attribute "model" names another model is refused with a message
 * saying which; nothing is changed unless everything was read. */
ct_status ct_weights_load(const char *path, const char *model, ct_params *params, ct_params *state);

/* Checks that group/<name> exists in f with the right shape for every parameter
 * of ps; the error names the file, the parameter, both shapes, and ends with `fix`. */
ct_status ct_params_check_h5(hid_t f, const char *path, const char *group, const ct_params *ps, const char *fix);

#endif
