/* trials.h - speaker-verification trial lists in the official VoxCeleb format,
 * resolved against a corpus loaded from a feature store.
 *
 * One trial per line: a label (1 = same speaker, 0 = different) and two paths
 * relative to the corpus's wav/ directory, separated by spaces or tabs:
 *
 *     1 id10270/x6uYqmx31kE/00001.wav id10270/8jEAjG6SegY/00008.wav
 *     0 id10270/x6uYqmx31kE/00001.wav id10300/ize_eiCFEg0/00003.wav
 *
 * Blank lines and trailing whitespace (CR of DOS line ends included) are
 * allowed. Each path is looked up in the corpus's path[] through a hash table
 * built once per call (VoxCeleb1's test list: 37,720 trials over 4,874 files;
 * the whole corpus: 153,516 utterances). A path that is not there exactly is
 * matched by the path without its extension, so a list naming .wav finds the
 * utterances of a store made from VoxCeleb2's .m4a (and the other way round);
 * one line says how many were matched so.
 *
 * Errors name the file and the line (1-based):
 *   CT_EIO     the file cannot be read;
 *   CT_EFORMAT a line without exactly three fields, a label other than 0 or 1,
 *              or a file with no trial at all;
 *   CT_EINVAL  a path that is not in the corpus (run `ctrain prep voxceleb` on
 *              the directory that contains it), or a corpus without paths
 *              (a synthetic corpus).
 */
#ifndef CT_TRIALS_H
#define CT_TRIALS_H
#include <stdio.h>
#include "core/error.h"
#include "io/corpus.h"

typedef struct {
    int a, b;      /* utterance indices into the corpus */
    int label;     /* 1 same speaker, 0 different */
} ct_trial;

/* Reads `path` and resolves it against c: *out (malloc'd, free with free())
 * receives *n >= 1 trials in file order. On failure *out = NULL, *n = 0.
 * Paths matched with another extension are told in one line on stderr:
 *   trials: 1234 paths end in .wav but the store has .m4a; matched by path without extension */
ct_status ct_trials_load(ct_trial **out, int *n, const char *path, const ct_corpus *c);
/* The same with that line written to `note` (NULL: not written). */
ct_status ct_trials_load_note(ct_trial **out, int *n, const char *path, const ct_corpus *c, FILE *note);

/* The corpus's speakers that the list at `path` names: a path's speaker is its first
 * component (idNNNNN). named [c->n_speakers] receives 1 for each, *n_named their count.
 * The paths need not be in the corpus (a list over utterances it does not hold names none
 * of its speakers, or some); the corpus must have speaker names (a feature store).
 * Errors: CT_EIO, CT_EFORMAT (a bad line, no trial) naming the file and line. */
ct_status ct_trials_speakers(unsigned char *named, int *n_named, const char *path, const ct_corpus *c);

#endif
