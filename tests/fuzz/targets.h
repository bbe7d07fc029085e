/* targets.h - one entry point per reader of files that other people make, shared
 * by the libFuzzer targets (tests/fuzz/fuzz_main.c, `make fuzz`) and by the
 * replay of the committed corpora in `make test` (tests/test_fuzz.c).
 *
 * Every target takes a file and reads it the way a command does:
 *   audio       ct_audio_read                     (prep: WAV, FLAC, OGG, anything libsndfile opens)
 *   m4a         ct_audio_read_m4a                 (prep: AAC in MP4/M4A through FFmpeg)
 *   featstore   ct_featstore_read_settings, ct_featstore_load, ct_featstore_open
 *               (on a copy: open repairs a store cut short, and appends)
 *   checkpoint  ct_ckpt_read_meta, ct_ckpt_verify, then --resume's path: the model's
 *               configuration from the file, the network built, ct_ckpt_load
 *   weights     ctrain's own weights file: ct_export_model, ct_model_export (which
 *               rebuilds the network from the file's description, then ct_weights_load)
 *   keras       ct_model_import --format keras, for every model of the table
 *   torch       ct_model_import --format torch, for every model of the table
 *   idx         ct_idx_read_images, ct_idx_read_labels (gzip or plain)
 *   trials      ct_trials_load against a small corpus whose paths the seeds use
 *   arch        the architecture spec (the file's text): ct_seq_cnn_build on 1x28x28
 *               images, ct_seq_cnn_build_encoder on 1x100x40 log-mel crops
 *   config      ct_yaml_map_read: a --config YAML file (libyaml, flat key: value)
 *   json        `ctrain time --compare FILE` (time_compare, in cli/): built into the
 *               fuzzer only; make test replays its corpus through the ctrain binary
 *
 * What every target promises beyond "no crash, no sanitizer report": a failure
 * comes with a message of one line that names the file (the spec, which is not a
 * file, only one line), and nothing of HDF5 is left open afterwards. fuzz_check reports a broken promise; the fuzzer turns it
 * into a crash, the replay test into a failed case. With FUZZ_VERBOSE set in the
 * environment, fuzz_check prints every result it sees (status and message) on stderr.
 */
#ifndef CT_FUZZ_TARGETS_H
#define CT_FUZZ_TARGETS_H
#include <stddef.h>
#include "core/error.h"

/* A target: reads `path`; `tmp` is an empty directory it may write into (outputs,
 * copies). Returns 0 when every promise was kept, -1 after fuzz_check reported one. */
typedef int (*fuzz_fn)(const char *path, const char *tmp);

typedef struct {
    const char *name;
    fuzz_fn run;
} fuzz_target;

extern const fuzz_target fuzz_targets[];   /* every target but json; ends with { NULL, NULL } */
const fuzz_target *fuzz_target_find(const char *name);

/* Checks the promise about the result `st` of reading `file` (NULL: not a file, the
 * message need not name one). Returns 0 if kept; else writes why into the buffer
 * fuzz_why() returns and returns -1. */
int fuzz_check(ct_status st, const char *file);
const char *fuzz_why(void);
/* HDF5 files, groups, datasets and attributes open now; after a target,
 * fuzz_h5_left_open(the count before it) is 0 if it left none open (a leaked hid_t,
 * which LeakSanitizer cannot see), else -1 with why in fuzz_why(). */
long fuzz_h5_open_objects(void);
int  fuzz_h5_left_open(long before);

/* The json target (tests/fuzz/json.c, linked with cli/ in the fuzz build only). */
int fuzz_json(const char *path, const char *tmp);

#endif
