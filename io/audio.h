/* audio.h - reading speech audio for feature extraction: any file libsndfile
 * reads (WAV, FLAC, OGG/Vorbis, ...), and AAC in an MP4 file named .m4a
 * (VoxCeleb2's format) through FFmpeg (io/audio_m4a.h), comes back as 16 kHz
 * mono float samples in [-1, 1].
 *
 *   - several channels are downmixed by averaging them, frame by frame;
 *   - another sample rate is resampled to 16 kHz with libsamplerate's
 *     SRC_SINC_MEDIUM_QUALITY converter (band-limited sinc, 97 dB SNR, and
 *     several times faster than SRC_SINC_BEST_QUALITY; VoxCeleb is already at
 *     16 kHz, so it is not resampled at all);
 *   - 8-bit, 24-bit, float and every other sample format go through
 *     sf_readf_float, which scales integer formats to [-1, 1);
 *   - .m4a: FFmpeg decodes and libswresample averages the channels to mono
 *     float at the file's rate; the encoder's priming and padding samples are
 *     dropped; the same libsamplerate converter then makes 16 kHz.
 *
 * Failures return a ct_status with a message that names the path, the reason
 * and what to do:
 *   CT_EIO     the file is missing or cannot be opened (errno's text);
 *   CT_EFORMAT not audio (libsndfile's sf_strerror text), no frames at all,
 *              truncated (the header promises more than the file holds: for
 *              WAV the data chunk's declared size is checked against the file
 *              size, for every format sf_readf_float must return every frame
 *              sf_info.frames announces), or shorter than min_seconds;
 *              a header announcing more than CT_AUDIO_MAX_SAMPLES samples, or a
 *              sample rate libsamplerate cannot convert to 16 kHz. Memory grows
 *              with the samples actually read, never with the header's claim.
 *              For .m4a also: an MP4 box running past the end of the file or
 *              no 'moov' box (truncated), bytes the MP4 demuxer refuses, no audio
 *              stream, a packet the decoder refuses, or fewer samples than the
 *              file's index announces.
 */
#ifndef CT_AUDIO_H
#define CT_AUDIO_H
#include <stddef.h>
#include "core/error.h"

#define CT_AUDIO_RATE 16000   /* the rate every caller receives */
/* The most samples read from one file, before and after resampling (2^28: 4.7 hours
 * of 16 kHz mono, 1 GiB of floats); a header announcing more is refused. */
#define CT_AUDIO_MAX_SAMPLES ((unsigned long long)1 << 28)

/* Reads `path` into a new malloc'd array *out of *n samples at 16 kHz mono
 * (free it with free()). min_seconds > 0 rejects shorter files, measured after
 * resampling (n < min_seconds * 16000). Thread-safe (sf_open runs under a lock, as libsndfile
 * keeps its open errors in one global slot). */
ct_status ct_audio_read(float **out, size_t *n, const char *path, double min_seconds);
/* The same for a file read as MP4/M4A through FFmpeg whatever its name (ct_audio_read
 * does this for names ending in .m4a, in any case). */
ct_status ct_audio_read_m4a(float **out, size_t *n, const char *path, double min_seconds);

#endif
