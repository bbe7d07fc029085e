/* audio_m4a.c - AAC in MP4/M4A files decoded through FFmpeg to mono float
 * samples at the file's rate (see audio_m4a.h). A build without FFmpeg
 * (`make FFMPEG=0`, the relocatable tarball) refuses them in one line. */
#ifdef CT_HAVE_FFMPEG
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/mem.h>
#include <libavutil/log.h>
#include <libswresample/swresample.h>
#include "io/audio.h"
#include "io/audio_m4a.h"

/* Set once for the process: FFmpeg's own complaints on stderr ("moov atom not
 * found", "Error decoding AAC frame header") silenced, so a damaged file is
 * reported only by our one line; and the largest block FFmpeg may allocate at
 * once cut from 2 GiB to 256 MiB. A hostile header can claim a table of any size
 * (the fuzzer found one that made the MP4 demuxer ask for 1 GiB); an hour of AAC
 * needs a few MB of tables, and our decoded samples are not FFmpeg's to allocate.
 * Past the limit, opening fails and the file is refused in one line. */
#define M4A_MAX_BLOCK ((size_t)256 << 20)
static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;
static void quiet(void)
{
    av_log_set_level(AV_LOG_QUIET);
    av_max_alloc(M4A_MAX_BLOCK);
}

static uint32_t be32(const unsigned char *p)
{ return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]; }

/* A box type for messages: its four bytes, anything unprintable as '?'. */
static void box_name(char out[5], const unsigned char *t)
{
    for (int i = 0; i < 4; i++) out[i] = t[i] >= 0x20 && t[i] < 0x7f ? (char)t[i] : '?';
    out[4] = '\0';
}

/* An MP4 file is a sequence of boxes, each with its size in its header; a copy cut
 * short ends inside one, or before the 'moov' box that indexes the samples (FFmpeg
 * writes it after the samples). FFmpeg alone would either call that "invalid
 * data" or quietly decode the samples that are there, so the top-level boxes are
 * walked first, the way audio.c checks a WAV's data chunk against the file size.
 * A file that does not open with an 'ftyp' box is left to FFmpeg to refuse. */
static ct_status mp4_check_boxes(const char *path, long long file_size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return CT_OK;   /* the caller reports open errors */
    ct_status st = CT_OK;
    unsigned char h[16];
    char name[5];
    long long pos = 0;
    int boxes = 0, moov = 0;
    for (; pos < file_size && boxes < 100000; boxes++) {
        if (fseeko(f, (off_t)pos, SEEK_SET) != 0 || fread(h, 1, 8, f) != 8) {
            if (boxes > 0)
                st = ct_fail(CT_EFORMAT, "%s: truncated audio: the MP4 file ends inside a box header at byte %lld (an "
                             "interrupted copy or download?); fetch the file again or delete it", path, pos);
            break;
        }
        if (boxes == 0 && memcmp(h + 4, "ftyp", 4) != 0) break;
        box_name(name, h + 4);
        unsigned long long size = be32(h), header = 8;
        if (size == 1) {   /* a 64-bit size follows the type */
            if (fread(h + 8, 1, 8, f) != 8) {
                st = ct_fail(CT_EFORMAT, "%s: truncated audio: the MP4 file ends inside the header of box '%s' at byte "
                             "%lld; fetch the file again or delete it", path, name, pos);
                break;
            }
            size = (unsigned long long)be32(h + 8) << 32 | be32(h + 12);
            header = 16;
        } else if (size == 0) {
            size = (unsigned long long)(file_size - pos);   /* the last box: it runs to the end of the file */
        }
        if (size < header) {
            st = ct_fail(CT_EFORMAT, "%s: damaged MP4 file: box '%s' at byte %lld declares %llu bytes, less than its own "
                         "header; fetch the file again or delete it", path, name, pos, size);
            break;
        }
        if (size > (unsigned long long)(file_size - pos)) {
            st = ct_fail(CT_EFORMAT, "%s: truncated audio: the MP4 box '%s' at byte %lld announces %llu bytes but the file "
                         "holds only %lld from there (an interrupted copy or download?); fetch the file again or delete it",
                         path, name, pos, size, file_size - pos);
            break;
        }
        if (!memcmp(h + 4, "moov", 4)) moov = 1;
        pos += (long long)size;
    }
    fclose(f);
    if (st == CT_OK && boxes > 0 && pos >= file_size && !moov)
        st = ct_fail(CT_EFORMAT, "%s: truncated audio: the MP4 file ends without its 'moov' box, the index of its samples "
                     "(an interrupted copy or download?); fetch the file again or delete it", path);
    return st;
}

/* The decoded samples so far, and the converter to mono float made for the first
 * frame (every later frame must have the same rate, format and channels). */
typedef struct {
    const char *path;
    float *buf;
    size_t n, cap;
    int rate, format;
    AVChannelLayout layout;
    SwrContext *swr;
} sink;

static const char *av_why(int e, char *buf, size_t cap)
{
    if (av_strerror(e, buf, cap) < 0) snprintf(buf, cap, "FFmpeg error %d", e);
    return buf;
}

/* A resampler that only converts: the frame's format and channels to mono float
 * at the same rate, each output sample the average of the frame's channels. */
static ct_status sink_start(sink *s, const AVFrame *fr)
{
    int ch = fr->ch_layout.nb_channels;
    if (fr->sample_rate < 1 || ch < 1 || ch > 64)
        return ct_fail(CT_EFORMAT, "%s: the audio stream says %d channels at %d Hz, which cannot be right (corrupt "
                       "header); fetch the file again or delete it", s->path, ch, fr->sample_rate);
    s->rate = fr->sample_rate;
    s->format = fr->format;
    if (av_channel_layout_copy(&s->layout, &fr->ch_layout) < 0) return ct_fail(CT_ENOMEM, "%s: out of memory", s->path);
    AVChannelLayout in, mono = AV_CHANNEL_LAYOUT_MONO;
    if (fr->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC) av_channel_layout_default(&in, ch);   /* only a count: name them */
    else if (av_channel_layout_copy(&in, &fr->ch_layout) < 0) return ct_fail(CT_ENOMEM, "%s: out of memory", s->path);
    double avg[64];
    for (int c = 0; c < ch; c++) avg[c] = 1.0 / ch;
    char why[AV_ERROR_MAX_STRING_SIZE];
    int e = swr_alloc_set_opts2(&s->swr, &mono, AV_SAMPLE_FMT_FLT, s->rate, &in, (enum AVSampleFormat)s->format, s->rate, 0, NULL);
    if (e >= 0) e = swr_set_matrix(s->swr, avg, ch);
    if (e >= 0) e = swr_init(s->swr);
    av_channel_layout_uninit(&in);
    if (e < 0)
        return ct_fail(CT_EFORMAT, "%s: cannot convert its audio (%d channels, sample format %d, %d Hz) to mono (%s); "
                       "convert the file to WAV", s->path, ch, s->format, s->rate, av_why(e, why, sizeof why));
    return CT_OK;
}

/* Appends one decoded frame, converted to mono float. */
static ct_status sink_add(sink *s, const AVFrame *fr)
{
    if (fr->nb_samples <= 0) return CT_OK;
    if (!s->swr) CT_TRY(sink_start(s, fr));
    else if (fr->sample_rate != s->rate || fr->format != s->format || av_channel_layout_compare(&fr->ch_layout, &s->layout) != 0)
        return ct_fail(CT_EFORMAT, "%s: the audio changes its sample rate or channels part way (%d Hz, %d channels at first; "
                       "%d Hz, %d channels at sample %zu); convert the file to WAV", s->path, s->rate,
                       s->layout.nb_channels, fr->sample_rate, fr->ch_layout.nb_channels, s->n);
    int out = swr_get_out_samples(s->swr, fr->nb_samples);
    if (out < 0) return ct_fail(CT_EFORMAT, "%s: converting the decoded audio to mono failed", s->path);
    size_t room = (size_t)out;
    if (s->n + room > CT_AUDIO_MAX_SAMPLES)
        return ct_fail(CT_EFORMAT, "%s: more than %llu samples (%.1f hours at 16 kHz): a corrupt file, or a recording to "
                       "cut into utterances first", s->path, (unsigned long long)CT_AUDIO_MAX_SAMPLES,
                       CT_AUDIO_MAX_SAMPLES / 16000.0 / 3600.0);
    if (s->n + room > s->cap) {   /* grow with what is decoded, never with what a header claims */
        size_t cap = s->cap ? 2 * s->cap : 65536;
        while (cap < s->n + room) cap *= 2;
        float *b = realloc(s->buf, cap * sizeof *b);
        if (!b) return ct_fail(CT_ENOMEM, "%s: out of memory after %zu samples", s->path, s->n);
        s->buf = b;
        s->cap = cap;
    }
    uint8_t *dst = (uint8_t *)(s->buf + s->n);
    int got = swr_convert(s->swr, &dst, (int)room, (const uint8_t **)fr->extended_data, fr->nb_samples);
    if (got < 0) {
        char why[AV_ERROR_MAX_STRING_SIZE];
        return ct_fail(CT_EFORMAT, "%s: converting the decoded audio to mono failed (%s)", s->path, av_why(got, why, sizeof why));
    }
    s->n += (size_t)got;
    return CT_OK;
}

/* Every frame the decoder has ready. */
static ct_status drain(sink *s, AVCodecContext *dec, AVFrame *fr)
{
    for (;;) {
        int e = avcodec_receive_frame(dec, fr);
        if (e == AVERROR(EAGAIN) || e == AVERROR_EOF) return CT_OK;
        if (e < 0) {
            char why[AV_ERROR_MAX_STRING_SIZE];
            return ct_fail(CT_EFORMAT, "%s: damaged audio: decoding failed after %zu samples (%s); fetch the file again or "
                           "delete it", s->path, s->n, av_why(e, why, sizeof why));
        }
        ct_status st = sink_add(s, fr);
        av_frame_unref(fr);
        if (st != CT_OK) return st;
    }
}

ct_status ct_audio_decode_m4a(float **out, size_t *n, int *rate, const char *path, long long file_size)
{
    *out = NULL;
    *n = 0;
    *rate = 0;
    pthread_once(&quiet_once, quiet);
    CT_TRY(mp4_check_boxes(path, file_size));

    char why[AV_ERROR_MAX_STRING_SIZE];
    AVFormatContext *fmt = NULL;
    AVCodecContext *dec = NULL;
    AVPacket *pkt = NULL;
    AVFrame *fr = NULL;
    sink s = { .path = path };
    ct_status st = CT_OK;
    /* The MP4 demuxer by name: bytes that are not MP4 are refused, never guessed at. */
    int e = avformat_open_input(&fmt, path, av_find_input_format("mp4"), NULL);
    if (e < 0) {
        fmt = NULL;
        if (e == AVERROR(ENOMEM))
            st = ct_fail(CT_EFORMAT, "%s: its MP4 header claims a table larger than the %zu MiB FFmpeg may allocate at once: "
                         "a damaged file; use AAC in .m4a, WAV, FLAC or OGG", path, M4A_MAX_BLOCK >> 20);
        else
            st = ct_fail(CT_EFORMAT, "%s: not an MP4/M4A file that FFmpeg can read (%s); use AAC in .m4a, WAV, FLAC or OGG",
                         path, av_why(e, why, sizeof why));
        goto done;
    }
    const AVCodec *codec = NULL;
    int si = av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
    if (si < 0) {
        st = si == AVERROR_DECODER_NOT_FOUND
           ? ct_fail(CT_EFORMAT, "%s: FFmpeg has no decoder for its audio codec; convert the file to WAV", path)
           : ct_fail(CT_EFORMAT, "%s: the MP4 file holds no audio stream; delete it or extract its audio", path);
        goto done;
    }
    AVStream *as = fmt->streams[si];
    if (!(dec = avcodec_alloc_context3(codec)) || !(pkt = av_packet_alloc()) || !(fr = av_frame_alloc())) {
        st = ct_fail(CT_ENOMEM, "%s: out of memory opening the decoder", path);
        goto done;
    }
    e = avcodec_parameters_to_context(dec, as->codecpar);
    dec->pkt_timebase = as->time_base;   /* the time base of the packets' timestamps and skips */
    if (e >= 0) e = avcodec_open2(dec, codec, NULL);
    if (e < 0) {
        st = ct_fail(CT_EFORMAT, "%s: the %s decoder refuses the stream's settings (%s); a damaged file? fetch it again or "
                     "delete it", path, codec->name, av_why(e, why, sizeof why));
        goto done;
    }
    /* Packets in, frames out. The decoder drops the priming samples itself: the
     * demuxer attaches the edit list's skip to the first packet as side data. */
    long packets = 0;
    while (st == CT_OK) {
        e = av_read_frame(fmt, pkt);
        if (e == AVERROR_EOF) break;
        if (e < 0) {
            st = ct_fail(CT_EFORMAT, "%s: damaged audio: reading packet %ld failed (%s); fetch the file again or delete it",
                         path, packets + 1, av_why(e, why, sizeof why));
            break;
        }
        if (pkt->stream_index == si) {
            packets++;
            e = avcodec_send_packet(dec, pkt);
            if (e < 0)
                st = ct_fail(CT_EFORMAT, "%s: damaged audio: packet %ld cannot be decoded (%s); fetch the file again or "
                             "delete it", path, packets, av_why(e, why, sizeof why));
            else st = drain(&s, dec, fr);
        }
        av_packet_unref(pkt);
    }
    if (st == CT_OK) {   /* end of stream: the decoder's last frames */
        e = avcodec_send_packet(dec, NULL);
        st = e < 0 ? ct_fail(CT_EFORMAT, "%s: damaged audio: the decoder failed at the end (%s)", path, av_why(e, why, sizeof why))
                   : drain(&s, dec, fr);
    }
    if (st != CT_OK) goto done;
    if (s.n == 0) {
        st = ct_fail(CT_EFORMAT, "%s: empty recording (0 audio samples); delete it or record it again", path);
        goto done;
    }
    /* The last AAC frame is padded to 1024 samples; the stream's duration (the
     * edit list's) says where the recording ends. Fewer samples than that means
     * packets are missing. */
    if (as->duration > 0 && as->time_base.num > 0 && as->time_base.den > 0) {
        int64_t want = av_rescale_q(as->duration, as->time_base, (AVRational){ 1, s.rate });
        if (want > 0 && (uint64_t)want < s.n) s.n = (size_t)want;
        else if (want > 0 && (uint64_t)want > s.n) {
            st = ct_fail(CT_EFORMAT, "%s: truncated audio: the MP4 index announces %lld samples but only %zu could be "
                         "decoded; fetch the file again or delete it", path, (long long)want, s.n);
            goto done;
        }
    }
    *out = s.buf;
    *n = s.n;
    *rate = s.rate;
    s.buf = NULL;
done:
    free(s.buf);
    swr_free(&s.swr);
    av_channel_layout_uninit(&s.layout);
    av_frame_free(&fr);
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    avformat_close_input(&fmt);
    return st;
}

int ct_audio_m4a_built(void) { return 1; }

#else   /* built without FFmpeg */

#include "io/audio_m4a.h"

int ct_audio_m4a_built(void) { return 0; }

ct_status ct_audio_decode_m4a(float **out, size_t *n, int *rate, const char *path, long long file_size)
{
    (void)n; (void)rate; (void)file_size;
    *out = NULL;
    return ct_fail(CT_EFORMAT, "%s: this ctrain was built without FFmpeg, so it reads no AAC .m4a; build ctrain from source "
                   "with FFmpeg's libraries (scripts/deps.sh build, then make), or convert the files to WAV", path);
}

#endif
