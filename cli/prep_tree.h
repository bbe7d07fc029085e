/* prep_tree.h - the audio files of a VoxCeleb-style tree, for `ctrain prep voxceleb`
 * (cli/prep.c; the walk itself is cli/prep_tree.c):
 *
 *   DIR/idNNNNN/<video id>/NNNNN.wav     (also .flac, .ogg and .m4a, in any case)
 *
 * Each file is named by its path relative to DIR ("speaker/video/file"), the name
 * it is stored under in the feature store. */
#ifndef CT_CLI_PREP_TREE_H
#define CT_CLI_PREP_TREE_H
#include <stddef.h>
#include "core/error.h"

/* The layout, as the usage and the error messages print it. */
#define CLI_VOXCELEB_LAYOUT "DIR/idNNNNN/VIDEO_ID/NNNNN.wav (or .flac, .ogg, .m4a)"

typedef struct {
    char **rel;      /* [n] "speaker/video/file", sorted by strcmp; each one malloc'ed */
    size_t n, cap;
} cli_audio_paths;

/* Every file with an audio extension exactly two directory levels below `dir`
 * (entries whose names begin with '.' are skipped), sorted. Fails, with a message
 * that names --wav and the layout, when `dir` is missing, not a directory, empty,
 * or holds no such file (naming DIR/wav or DIR/aac when `dir` is their parent, and
 * saying so when audio files lie at another depth), or when memory runs out; *out
 * is then empty. */
ct_status cli_audio_tree_scan(cli_audio_paths *out, const char *dir);
void      cli_audio_paths_free(cli_audio_paths *l);

#endif
