/* audio.c - 16 kHz mono float samples from any file libsndfile reads, and from
 * AAC in .m4a through FFmpeg (audio_m4a.c) (see audio.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <samplerate.h>
#include <sndfile.h>
#include "io/audio.h"
#include "io/audio_m4a.h"

/* libsndfile reports a failed sf_open through one global error slot
 * (sf_strerror(NULL)); opening under a lock keeps each thread's reason its own. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t le32(const unsigned char *p)
{ return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* libsndfile quietly shortens a WAV whose data chunk claims more bytes than the
 * file holds (it logs "should be ..." and reads what is there), so a cut-off
 * download would pass unnoticed. Walk the RIFF chunks and compare the data
 * chunk's declared size with the bytes actually present. Files that are not
 * RIFF/WAVE, and streaming headers whose size is 0 or 0xFFFFFFFF ("unknown"),
 * are left to libsndfile. */
static ct_status wav_check_size(const char *path, long long file_size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return CT_OK;   /* the caller reports open errors */
    unsigned char h[12];
    ct_status st = CT_OK;
    if (fread(h, 1, 12, f) == 12 && !memcmp(h, "RIFF", 4) && !memcmp(h + 8, "WAVE", 4)) {
        long long pos = 12;
        for (int guard = 0; guard < 1000; guard++) {
            unsigned char c[8];
            if (fread(c, 1, 8, f) != 8) break;
            uint32_t size = le32(c + 4);
            pos += 8;
            if (!memcmp(c, "data", 4)) {
                if (size != 0 && size != 0xFFFFFFFFu && pos + (long long)size > file_size)
                    st = ct_fail(CT_EFORMAT, "%s: truncated audio: the WAV header announces %u bytes of samples but "
                                 "the file holds only %lld (an interrupted copy or download?); fetch the file again or delete it",
                                 path, size, file_size - pos);
                break;
            }
            pos += (long long)size + (size & 1);
            if (pos > file_size || fseeko(f, (off_t)pos, SEEK_SET) != 0) break;
        }
    }
    fclose(f);
    return st;
}

/* Resample mono x[n] at `rate` to 16 kHz; replaces *x and *n. */
static ct_status resample(float **x, size_t *n, int rate, const char *path)
{
    double ratio = (double)CT_AUDIO_RATE / rate;
    if ((double)*n * ratio > (double)CT_AUDIO_MAX_SAMPLES)
        return ct_fail(CT_EFORMAT, "%s: %zu frames at %d Hz are %.0f samples at 16 kHz, more than %llu (%.1f hours); a corrupt "
                       "header, or a recording to cut into utterances first", path, *n, rate, (double)*n * ratio,
                       (unsigned long long)CT_AUDIO_MAX_SAMPLES, CT_AUDIO_MAX_SAMPLES / 16000.0 / 3600.0);
    size_t cap = (size_t)ceil((double)*n * ratio) + 64;
    float *y = ct_malloc(cap * sizeof *y, "resampled audio");
    if (!y) return CT_ENOMEM;
    SRC_DATA d = { 0 };
    d.data_in = *x;
    d.data_out = y;
    d.input_frames = (long)*n;
    d.output_frames = (long)cap;
    d.src_ratio = ratio;
    d.end_of_input = 1;
    int e = src_simple(&d, SRC_SINC_MEDIUM_QUALITY, 1);
    if (e) { free(y); return ct_fail(CT_EFORMAT, "%s: resampling from %d Hz to 16 kHz failed (%s)", path, rate, src_strerror(e)); }
    free(*x);
    *x = y;
    *n = (size_t)d.output_frames_gen;
    return CT_OK;
}

/* The checks every reader shares: the path exists, is a file, can be opened and
 * is not empty. *size receives its size in bytes. */
static ct_status check_file(const char *path, long long *size)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ct_fail(CT_EIO, "%s: cannot open (%s); check the path", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return ct_fail(CT_EIO, "%s: is a directory, not an audio file", path);
    FILE *probe = fopen(path, "rb");
    if (!probe) return ct_fail(CT_EIO, "%s: cannot open (%s); check the path and its permissions", path, strerror(errno));
    fclose(probe);
    if (sb.st_size == 0)
        return ct_fail(CT_EFORMAT, "%s: empty file (0 bytes), not audio; fetch the file again or delete it", path);
    *size = (long long)sb.st_size;
    return CT_OK;
}

/* Mono samples from libsndfile at the file's rate: *buf (malloc'd) of *n, *rate. */
static ct_status read_sndfile(float **out, size_t *n, int *rate, const char *path, long long file_size)
{
    CT_TRY(wav_check_size(path, file_size));
    SF_INFO info;
    memset(&info, 0, sizeof info);
    char why[256] = "";
    pthread_mutex_lock(&open_lock);
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    if (!sf) snprintf(why, sizeof why, "%s", sf_strerror(NULL));
    pthread_mutex_unlock(&open_lock);
    if (!sf) return ct_fail(CT_EFORMAT, "%s: not audio that libsndfile can read (%s); use WAV, FLAC, OGG or AAC in .m4a", path, why);
    ct_status st = CT_OK;
    float *buf = NULL;
    if (info.frames <= 0 || info.frames == SF_COUNT_MAX) {
        st = info.frames == 0
           ? ct_fail(CT_EFORMAT, "%s: empty recording (0 audio frames); delete it or record it again", path)
           : ct_fail(CT_EFORMAT, "%s: the header gives no frame count; convert it to WAV or FLAC", path);
        goto done;
    }
    if (info.channels < 1 || info.samplerate < 1) {
        st = ct_fail(CT_EFORMAT, "%s: header says %d channels at %d Hz, which cannot be right (corrupt header)", path, info.channels, info.samplerate);
        goto done;
    }
    if (info.channels > 1024 || (uint64_t)info.frames > CT_AUDIO_MAX_SAMPLES / (uint64_t)info.channels) {
        st = ct_fail(CT_EFORMAT, "%s: header announces %lld frames of %d channels, more than %llu samples (%.1f hours at "
                     "16 kHz): a corrupt header, or a recording to cut into utterances first", path, (long long)info.frames,
                     info.channels, (unsigned long long)CT_AUDIO_MAX_SAMPLES, CT_AUDIO_MAX_SAMPLES / 16000.0 / 3600.0);
        goto done;
    }
    if (info.samplerate != CT_AUDIO_RATE && !src_is_valid_ratio((double)CT_AUDIO_RATE / info.samplerate)) {
        st = ct_fail(CT_EFORMAT, "%s: header says %d Hz, which cannot be resampled to 16 kHz (63 Hz to 4 MHz can); a corrupt "
                     "header?", path, info.samplerate);
        goto done;
    }
    size_t frames = (size_t)info.frames, ch = (size_t)info.channels;
    /* Read block by block, growing the buffer with what really arrives: the header's
     * frame count is a claim, and a short file must not be given memory for it. */
    size_t cap = 0, got = 0, block = 65536;
    for (;;) {
        size_t want = frames - got < block ? frames - got : block;
        if (want == 0) break;
        if ((got + want) * ch > cap) {
            size_t ncap = cap ? 2 * cap : want * ch;
            if (ncap < (got + want) * ch) ncap = (got + want) * ch;
            if (ncap > frames * ch) ncap = frames * ch;
            float *nb = realloc(buf, ncap * sizeof *buf);
            if (!nb) { st = ct_fail(CT_ENOMEM, "%s: out of memory after %zu frames", path, got); goto done; }
            buf = nb;
            cap = ncap;
        }
        sf_count_t r = sf_readf_float(sf, buf + got * ch, (sf_count_t)want);
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (got < frames) {
        st = ct_fail(CT_EFORMAT, "%s: truncated audio: the header announces %lld frames but only %zu could be read (%s); "
                     "fetch the file again or delete it", path, (long long)info.frames, got,
                     sf_error(sf) ? sf_strerror(sf) : "end of file");
        goto done;
    }
    if (ch > 1) {   /* downmix: average the channels of each frame, in place */
        for (size_t t = 0; t < frames; t++) {
            double s = 0;
            for (size_t c = 0; c < ch; c++) s += buf[t * ch + c];
            buf[t] = (float)(s / (double)ch);
        }
    }
    *out = buf;
    *n = frames;
    *rate = info.samplerate;
    buf = NULL;
done:
    free(buf);
    sf_close(sf);
    return st;
}

/* What every reader's samples go through: resampled to 16 kHz (the same
 * converter for every format), then held against min_seconds. */
static ct_status finish(float **out, size_t *n, float *buf, size_t frames, int rate, const char *path, double min_seconds)
{
    ct_status st = CT_OK;
    if (rate != CT_AUDIO_RATE && !src_is_valid_ratio((double)CT_AUDIO_RATE / rate))
        st = ct_fail(CT_EFORMAT, "%s: %d Hz cannot be resampled to 16 kHz (63 Hz to 4 MHz can); a corrupt header?", path, rate);
    if (st == CT_OK && rate != CT_AUDIO_RATE) st = resample(&buf, &frames, rate, path);
    if (st == CT_OK && min_seconds > 0 && (double)frames < min_seconds * CT_AUDIO_RATE)
        st = ct_fail(CT_EFORMAT, "%s: too short: %.3f s of audio, at least %.3f s needed (lower --min-seconds to keep it)",
                     path, (double)frames / CT_AUDIO_RATE, min_seconds);
    if (st != CT_OK) { free(buf); return st; }
    *out = buf;
    *n = frames;
    return CT_OK;
}

/* ".m4a" in any case: VoxCeleb2's AAC files, read through FFmpeg. */
static int is_m4a(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot && !strchr(dot, '/') && strlen(dot) == 4 && tolower((unsigned char)dot[1]) == 'm'
        && dot[2] == '4' && tolower((unsigned char)dot[3]) == 'a';
}

static ct_status read_any(float **out, size_t *n, const char *path, double min_seconds, int m4a)
{
    *out = NULL;
    *n = 0;
    long long size = 0;
    CT_TRY(check_file(path, &size));
    float *buf = NULL;
    size_t frames = 0;
    int rate = 0;
    CT_TRY(m4a ? ct_audio_decode_m4a(&buf, &frames, &rate, path, size) : read_sndfile(&buf, &frames, &rate, path, size));
    return finish(out, n, buf, frames, rate, path, min_seconds);
}

ct_status ct_audio_read(float **out, size_t *n, const char *path, double min_seconds)
{
    return read_any(out, n, path, min_seconds, is_m4a(path));
}

ct_status ct_audio_read_m4a(float **out, size_t *n, const char *path, double min_seconds)
{
    return read_any(out, n, path, min_seconds, 1);
}

