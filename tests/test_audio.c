/* test_audio.c - reading audio: files written here with libsndfile in a temporary
 * directory (16 kHz 16-bit, 8-bit, 8 kHz, stereo, three channels, 44.1 kHz FLAC,
 * OGG), and every way a file can be bad (truncated WAV and FLAC, 0 frames,
 * 0 bytes, text named .wav, missing, a directory, too short): each gives its
 * status and a message that names the path, and nothing crashes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sndfile.h>
#include "tests/test.h"
#include "io/audio.h"

static char dir[64];

static const char *tmp_path(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* Writes frames x channels samples (interleaved shorts) as `format` at `rate`. */
static int write_short(const char *path, int format, int rate, int channels, const short *x, sf_count_t frames)
{
    SF_INFO info = { .samplerate = rate, .channels = channels, .format = format };
    SNDFILE *f = sf_open(path, SFM_WRITE, &info);
    if (!f) { t_check(0, "cannot write %s: %s", path, sf_strerror(NULL)); return 0; }
    sf_count_t w = frames ? sf_writef_short(f, x, frames) : 0;
    sf_close(f);
    return t_check(w == frames, "wrote %lld of %lld frames to %s", (long long)w, (long long)frames, path);
}

static int write_float(const char *path, int format, int rate, int channels, const float *x, sf_count_t frames)
{
    SF_INFO info = { .samplerate = rate, .channels = channels, .format = format };
    if (!sf_format_check(&info)) return 0;
    SNDFILE *f = sf_open(path, SFM_WRITE, &info);
    if (!f) { t_check(0, "cannot write %s: %s", path, sf_strerror(NULL)); return 0; }
    sf_count_t w = sf_writef_float(f, x, frames);
    sf_close(f);
    return t_check(w == frames, "wrote %lld of %lld frames to %s", (long long)w, (long long)frames, path);
}

static int zero_crossings(const float *x, size_t n)
{
    int z = 0;
    for (size_t i = 1; i < n; i++) z += (x[i - 1] < 0) != (x[i] < 0);
    return z;
}

static void sine(float *x, size_t n, double hz, int rate, float amp)
{
    for (size_t i = 0; i < n; i++) x[i] = amp * (float)sin(6.283185307179586 * hz * (double)i / rate + 0.3);
}

/* Expects path to fail with `want`, a message holding the path and `reason`, and no samples. */
static void expect_fail(const char *path, double min_s, ct_status want, const char *reason)
{
    float *x = (float *)&x;   /* must come back NULL */
    size_t n = 123;
    ct_status st = ct_audio_read(&x, &n, path, min_s);
    t_check(st == want, "%s: status %s, want %s (%s)", path, ct_status_name(st), ct_status_name(want), ct_last_error());
    t_check(strstr(ct_last_error(), path) != NULL, "message does not name the path: %s", ct_last_error());
    t_check(strstr(ct_last_error(), reason) != NULL, "message lacks \"%s\": %s", reason, ct_last_error());
    t_check(x == NULL && n == 0, "failed read returned samples");
    if (st == CT_OK) free(x);
}

void suite_audio(void)
{
    snprintf(dir, sizeof dir, "/tmp/ctrain_audio_XXXXXX");
    if (!mkdtemp(dir)) { t_case("audio/temp dir"); t_check(0, "mkdtemp failed"); return; }
    float *x = NULL;
    size_t n = 0;
    enum { N = 16000 };
    short *s = calloc(4 * N, sizeof *s);
    float *fl = calloc(4 * 44100, sizeof *fl);
    if (!s || !fl) { t_case("audio/alloc"); t_check(0, "out of memory"); free(s); free(fl); return; }

    t_case("audio/16 kHz mono 16-bit WAV: every sample back exactly");
    for (int i = 0; i < N; i++) s[i] = (short)((i * 7919) % 65536 - 32768);
    if (write_short(tmp_path("a16.wav"), SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, s, N)) {
        t_check(ct_audio_read(&x, &n, tmp_path("a16.wav"), 0) == CT_OK, "%s", ct_last_error());
        t_check(n == N, "length %zu", n);
        int bad = 0;
        for (size_t i = 0; x && i < n && i < N; i++) bad += x[i] != s[i] / 32768.0f;
        t_check(bad == 0, "%d samples differ from short/32768", bad);
        free(x); x = NULL;
    }

    t_case("audio/8-bit unsigned PCM WAV read through sf_readf_float");
    for (int i = 0; i < N; i++) s[i] = (short)(((i % 256) - 128) * 256);
    if (write_short(tmp_path("a8.wav"), SF_FORMAT_WAV | SF_FORMAT_PCM_U8, 16000, 1, s, N)) {
        t_check(ct_audio_read(&x, &n, tmp_path("a8.wav"), 0) == CT_OK, "%s", ct_last_error());
        t_check(n == N, "length %zu", n);
        int bad = 0;
        for (size_t i = 0; x && i < n && i < N; i++) bad += x[i] != ((int)(i % 256) - 128) / 128.0f;
        t_check(bad == 0, "%d samples differ from (v - 128) / 128", bad);
        free(x); x = NULL;
    }

    t_case("audio/8 kHz resampled to 16 kHz: twice the length, a 500 Hz sine stays 500 Hz");
    sine(fl, 8000, 500, 8000, 0.5f);
    if (write_float(tmp_path("a8k.wav"), SF_FORMAT_WAV | SF_FORMAT_PCM_16, 8000, 1, fl, 8000)) {
        t_check(ct_audio_read(&x, &n, tmp_path("a8k.wav"), 0) == CT_OK, "%s", ct_last_error());
        t_check(n >= 15998 && n <= 16002, "length %zu, want 16000", n);
        int z = x ? zero_crossings(x + 200, n - 400) : 0;   /* 0.975 s away from the edges: 975 crossings */
        t_check(abs(z - 975) <= 2, "%d zero crossings in 0.975 s, want 975 (500 Hz)", z);
        free(x); x = NULL;
    }

    t_case("audio/stereo downmixed by averaging the channels");
    for (int i = 0; i < N; i++) { s[2 * i] = (short)((i * 31) % 20000 - 10000); s[2 * i + 1] = (short)(-(i * 17) % 30000 + 5000); }
    if (write_short(tmp_path("st.wav"), SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 2, s, N)) {
        t_check(ct_audio_read(&x, &n, tmp_path("st.wav"), 0) == CT_OK, "%s", ct_last_error());
        t_check(n == N, "length %zu", n);
        int bad = 0;
        for (size_t i = 0; x && i < n && i < N; i++) bad += x[i] != (s[2 * i] + s[2 * i + 1]) / 65536.0f;
        t_check(bad == 0, "%d samples differ from (L + R) / 2", bad);
        free(x); x = NULL;
    }

    t_case("audio/three channels downmixed by averaging");
    for (int i = 0; i < N; i++) { s[3 * i] = 3000; s[3 * i + 1] = -6000; s[3 * i + 2] = (short)(i % 3000); }
    if (write_short(tmp_path("c3.wav"), SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 3, s, N)) {
        t_check(ct_audio_read(&x, &n, tmp_path("c3.wav"), 0) == CT_OK, "%s", ct_last_error());
        double worst = 0;
        for (size_t i = 0; x && i < n && i < N; i++) worst = fmax(worst, fabs(x[i] - (3000 - 6000 + (int)(i % 3000)) / (3 * 32768.0)));
        t_check(n == N && worst < 1e-7, "length %zu, worst %.3g", n, worst);
        free(x); x = NULL;
    }

    t_case("audio/44.1 kHz FLAC resampled: 16000 samples per second, a 1 kHz sine stays 1 kHz");
    sine(fl, 44100, 1000, 44100, 0.4f);
    if (write_float(tmp_path("a.flac"), SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 44100, 1, fl, 44100)) {
        t_check(ct_audio_read(&x, &n, tmp_path("a.flac"), 0) == CT_OK, "%s", ct_last_error());
        t_check(n >= 15998 && n <= 16002, "length %zu, want 16000", n);
        int z = x ? zero_crossings(x + 200, n - 400) : 0;   /* 0.975 s: 1950 crossings */
        t_check(abs(z - 1950) <= 2, "%d zero crossings, want 1950 (1 kHz)", z);
        free(x); x = NULL;
    }

    t_case("audio/OGG Vorbis at 16 kHz");
    sine(fl, N, 300, 16000, 0.4f);
    if (t_check(write_float(tmp_path("a.ogg"), SF_FORMAT_OGG | SF_FORMAT_VORBIS, 16000, 1, fl, N), "this libsndfile cannot write OGG")) {
        t_check(ct_audio_read(&x, &n, tmp_path("a.ogg"), 0) == CT_OK, "%s", ct_last_error());
        int z = x && n > 400 ? zero_crossings(x + 200, n - 400) : 0;
        t_check(n == N && abs(z - 585) <= 2, "length %zu, %d zero crossings (want 16000, 585)", n, z);
        free(x); x = NULL;
    }

    t_case("audio/minimum duration: 1 s passes a 1.0 s minimum, 0.5 s is rejected at 1.025 s");
    t_check(ct_audio_read(&x, &n, tmp_path("a16.wav"), 1.0) == CT_OK, "1.0 s file with min 1.0: %s", ct_last_error());
    free(x); x = NULL;
    if (write_short(tmp_path("short.wav"), SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, s, 8000))
        expect_fail(tmp_path("short.wav"), 1.025, CT_EFORMAT, "too short");

    t_case("audio/truncated WAV (bytes chopped off the end) is CT_EFORMAT");
    for (int i = 0; i < N; i++) s[i] = (short)(i % 1000);
    if (write_short(tmp_path("trunc.wav"), SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, s, N)) {
        t_check(truncate(tmp_path("trunc.wav"), 44 + 2 * N - 10001) == 0, "truncate failed");
        expect_fail(tmp_path("trunc.wav"), 0, CT_EFORMAT, "truncated");
    }

    t_case("audio/truncated FLAC (fewer frames decoded than the header says) is CT_EFORMAT");
    sine(fl, 44100, 1000, 44100, 0.4f);
    if (write_float(tmp_path("trunc.flac"), SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 44100, 1, fl, 44100)) {
        struct stat sb;
        t_check(stat(tmp_path("trunc.flac"), &sb) == 0 && truncate(tmp_path("trunc.flac"), sb.st_size / 2) == 0, "truncate failed");
        expect_fail(tmp_path("trunc.flac"), 0, CT_EFORMAT, "truncated");
    }

    t_case("audio/WAV with 0 frames is CT_EFORMAT (empty recording)");
    if (write_short(tmp_path("empty.wav"), SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, s, 0))
        expect_fail(tmp_path("empty.wav"), 0, CT_EFORMAT, "0 audio frames");

    t_case("audio/zero-byte file is CT_EFORMAT");
    FILE *f = fopen(tmp_path("zero.wav"), "wb");
    if (t_check(f != NULL, "cannot create zero.wav")) fclose(f);
    expect_fail(tmp_path("zero.wav"), 0, CT_EFORMAT, "0 bytes");

    t_case("audio/text file named .wav is CT_EFORMAT with libsndfile's reason");
    f = fopen(tmp_path("text.wav"), "w");
    if (t_check(f != NULL, "cannot create text.wav")) { fputs("this is not audio, just some text in a file\n", f); fclose(f); }
    expect_fail(tmp_path("text.wav"), 0, CT_EFORMAT, "not audio");

    t_case("audio/missing file and a directory are CT_EIO");
    expect_fail(tmp_path("missing.wav"), 0, CT_EIO, "No such file");
    expect_fail(dir, 0, CT_EIO, "directory");

    free(s);
    free(fl);
    const char *names[] = { "a16.wav", "a8.wav", "a8k.wav", "st.wav", "c3.wav", "a.flac", "a.ogg", "short.wav",
                            "trunc.wav", "trunc.flac", "empty.wav", "zero.wav", "text.wav" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tmp_path(names[i]));
    rmdir(dir);
}
