/* audio_m4a.h - the FFmpeg half of io/audio.c: AAC audio in an MP4/M4A file
 * (VoxCeleb2's aac/idNNNNN/VIDEO/NNNNN.m4a) decoded to mono float samples at the
 * file's own rate. io/audio.c checks the file first (missing, empty) and
 * afterwards resamples to 16 kHz exactly as it does a WAV; callers use
 * ct_audio_read or ct_audio_read_m4a (io/audio.h), not this.
 *
 * FFmpeg's libavformat reads the container (forced to the MP4 demuxer, so other
 * bytes are never probed as some other format), libavcodec decodes with the
 * send/receive API, and libswresample converts every sample format and channel
 * layout to mono float by averaging the channels (the same downmix libsndfile's
 * path makes). The AAC encoder's priming samples at the start are dropped (the
 * decoder applies the skip the MP4 edit list announces) and the padding of the
 * last AAC frame is cut at the stream's duration, so the samples are those of the
 * recording that was encoded, no more and no fewer.
 */
#ifndef CT_AUDIO_M4A_H
#define CT_AUDIO_M4A_H
#include <stddef.h>
#include "core/error.h"

/* Decodes `path` (file_size bytes, > 0) into a new malloc'd array *out of *n mono
 * samples at *rate Hz. Failures (CT_EFORMAT: truncated, not MP4, no audio stream,
 * undecodable, more than CT_AUDIO_MAX_SAMPLES samples; CT_ENOMEM) name the path in
 * one line, and leave *out NULL. Thread-safe. */
ct_status ct_audio_decode_m4a(float **out, size_t *n, int *rate, const char *path, long long file_size);
/* 1 when this build reads .m4a (it was built with FFmpeg: CT_HAVE_FFMPEG), else 0. */
int       ct_audio_m4a_built(void);

#endif
