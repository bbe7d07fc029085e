/* model_speaker.h - what the two speaker models (siamese-lstm, siamese-cnn)
 * share in their descriptors (catalog/model_table.h): the pair and data options,
 * loading the corpus and its trial list, the speaker task (train/speaker_task.h),
 * the "Data:" lines and what a checkpoint records of the data. */
#ifndef CT_MODEL_SPEAKER_H
#define CT_MODEL_SPEAKER_H
#include "catalog/model_desc.h"
#include "catalog/model_table.h"

/* The data options of a speaker model: a member of its configuration. */
typedef struct {
    ct_synth_config synth;       /* --data synthetic: --speakers, --utts, --noise */
    long pairs, val_pairs;       /* per epoch */
    int val_split;               /* ct_val_split */
    float val_fraction;
    const char *trials;          /* --trials FILE, or NULL */
    const char *data_memory;     /* --data-memory SIZE, or NULL: half the memory available */
    int loader_threads;          /* --loader-threads N: threads reading a batch from a streamed store */
    const char *exclude_trials;  /* --exclude-trials FILE, or NULL */
} ct_speaker_opts;

extern const ct_opt_choice ct_val_split_choices[];   /* speakers, videos */

/* The data options are kept in a run's configuration and its checkpoints' /training. */
#define CT_SPEAKER_KEPT (CT_IN_CONFIG | CT_IN_TRAINING)
/* The option table entries of ct_speaker_opts member M of configuration type T, with their headings. */
#define CT_SPEAKER_OPTS(T, M) \
    { CT_OPT_HEADING, "pairs:", 0, 0, 0, 0, 0, NULL, CT_CMD_TRAIN, NULL, .store = CT_IN_NONE }, \
    { CT_OPT_LONG, "--pairs", "N", offsetof(T, M.pairs), 0, 1, 100000000, NULL, CT_CMD_TRAIN, \
      "training pairs per epoch, half same-speaker", .store = CT_SPEAKER_KEPT }, \
    { CT_OPT_LONG, "--val-pairs", "N", offsetof(T, M.val_pairs), 0, 0, 100000000, NULL, CT_CMD_TRAIN, "validation pairs", .store = CT_SPEAKER_KEPT }, \
    { CT_OPT_CHOICE, "--val-split", "WHAT", offsetof(T, M.val_split), 0, 0, 0, ct_val_split_choices, CT_CMD_TRAIN, \
      "speakers: validate on held-out speakers (default, open-set);\nvideos: on a held-out video of each training speaker", .store = CT_SPEAKER_KEPT }, \
    { CT_OPT_FLOAT, "--val-fraction", "X", offsetof(T, M.val_fraction), 0, 0.01, 0.99, NULL, CT_CMD_TRAIN, \
      "share of speakers held out with --val-split speakers", .store = CT_SPEAKER_KEPT }, \
    { CT_OPT_STR, "--trials", "FILE", offsetof(T, M.trials), 0, 0, 0, NULL, CT_CMD_TRAIN, \
      "a trial list in the VoxCeleb format over the feature store: its\nspeakers become the validation speakers (never trained on) and the\n" \
      "equal error rate on it is reported as val_eer after every epoch", .store = CT_SPEAKER_KEPT }, \
    { CT_OPT_STR, "--exclude-trials", "FILE", offsetof(T, M.exclude_trials), 0, 0, 0, NULL, CT_CMD_TRAIN, \
      "a trial list in the VoxCeleb format (a test list): every speaker it\nnames (a path's first component, idNNNNN) is left out of training\n" \
      "and validation; its utterances need not be in the feature store", .store = CT_SPEAKER_KEPT }, \
    { CT_OPT_HEADING, "data:", 0, 0, 0, 0, 0, NULL, CT_CMD_TRAIN, NULL, .store = CT_IN_NONE }, \
    { CT_OPT_NOTE, "--data", "FEATS.h5", 0, 0, 0, 0, NULL, CT_CMD_TRAIN, \
      "a feature store written by `ctrain prep voxceleb`, or `synthetic`", .store = CT_IN_NONE }, \
    { CT_OPT_STR, "--data-memory", "SIZE", offsetof(T, M.data_memory), 0, 0, 0, NULL, CT_CMD_TRAIN | CT_CMD_TIME, \
      "memory for the feature store (512M, 8G; default half the memory\navailable): a store that fits is loaded, a larger one is streamed\n" \
      "from the file as batches need it (the same crops and weights)", .store = CT_IN_CONFIG }, \
    { CT_OPT_INT, "--loader-threads", "N", offsetof(T, M.loader_threads), 0, 1, CT_LOADER_MAX_READERS, NULL, CT_CMD_TRAIN | CT_CMD_TIME, \
      "threads that read each batch's crops from a streamed store at once\n(default 4, at most the cores; the same crops and weights)", \
      .store = CT_IN_CONFIG }, \
    { CT_OPT_HEADING, "synthetic data (--data synthetic):", 0, 0, 0, 0, 0, NULL, CT_CMD_TRAIN, NULL, .store = CT_IN_NONE }, \
    { CT_OPT_INT, "--speakers", "N", offsetof(T, M.synth.speakers), 0, 4, 1000000, NULL, CT_CMD_TRAIN, "speakers", .store = CT_SPEAKER_KEPT }, \
    { CT_OPT_INT, "--utts", "N", offsetof(T, M.synth.utts_per_speaker), 0, 2, 100000, NULL, CT_CMD_TRAIN, "utterances per speaker", .store = CT_SPEAKER_KEPT }, \
    { CT_OPT_FLOAT, "--noise", "X", offsetof(T, M.synth.noise), 0, 0, 1e3, NULL, CT_CMD_TRAIN, "noise level; larger is harder", .store = CT_SPEAKER_KEPT }

void      ct_speaker_opts_defaults(ct_speaker_opts *o);   /* 40 speakers x 12 utterances, 6000 + 2000 pairs */
ct_status ct_speaker_opts_check(const ct_speaker_opts *o);
/* What a checkpoint records of the data: the features (model_cfg: what eval checks a feature
 * store against) and the data options, the rows of the model's table `opts` recorded
 * CT_IN_TRAINING, with their values in the model's configuration cfg (train_cfg). */
ct_status ct_speaker_to_meta(const ct_opt *opts, const void *cfg, const ct_model_data *data, ct_ckpt_meta *meta);
/* Loads --data (a feature store or `synthetic`, crops of `frames` frames of `n_mels`) and the trial list. */
ct_status ct_speaker_load(ct_model_data *data, const ct_speaker_opts *o, const char *source, long seed, int batch, int n_mels, int frames);
void      ct_speaker_data_line(const ct_model_data *data, const ct_model_task *task, const ct_fit_config *fit, FILE *out);
void      ct_speaker_data_summary(const ct_model_data *data, char *buf, size_t cap);
/* The pair pipeline around the speaker model sm. */
ct_status ct_speaker_task_open(ct_model_task *t, speaker_model sm, ct_model_data *data, const ct_rngs *rngs);
/* The model description of a weights file or checkpoint (`path`, its root attributes `kv`) for model_desc's readers. */
void      ct_speaker_desc_of(model_desc *d, const char *path, const ct_kv *kv);

#endif
