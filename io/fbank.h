/* fbank.h - log-mel filterbank features for 16 kHz speech: 25 ms Hamming
 * windows every 10 ms, a 512-point real FFT (FFTW3), the power spectrum,
 * n_mels triangular mel filters between 20 Hz and 8 kHz, the log, and then a
 * per-utterance mean/variance normalisation of every band over its frames.
 * The exact definition, with formulas, is at the top of fbank.c; without the
 * normalisation it is torchaudio.compliance.kaldi.fbank (Kaldi's
 * compute-fbank-feats) with the options listed there.
 *
 * Usage: create one ct_fbank (this plans the FFT; do it once, up front), then
 * call ct_fbank_compute from as many threads as you like: it only reads the
 * ct_fbank and works in its own buffers.
 */
#ifndef CT_FBANK_H
#define CT_FBANK_H
#include <stddef.h>
#include "core/error.h"

#define CT_FBANK_RATE     16000   /* samples per second the features are defined at */
#define CT_FBANK_WINDOW   400     /* 25 ms */
#define CT_FBANK_HOP      160     /* 10 ms */
#define CT_FBANK_NFFT     512     /* the window zero-padded to the next power of two */
#define CT_FBANK_FRAME_LENGTH_MS 25
#define CT_FBANK_FRAME_SHIFT_MS  10

typedef struct {
    int n_mels;          /* mel bands, default 40 (at least 4) */
    float low_hz;        /* lowest filter edge, default 20 */
    float high_hz;       /* highest filter edge, default 8000 (Nyquist) */
    float preemphasis;   /* y[j] = x[j] - p x[j-1] within the frame, default 0.97 */
    int remove_dc;       /* subtract each frame's mean first, default 1 */
    int normalize;       /* per-utterance mean/variance normalisation, default 1 */
} ct_fbank_config;

void ct_fbank_config_default(ct_fbank_config *cfg);

typedef struct ct_fbank ct_fbank;

/* Plans the FFT and builds the window and the mel filters. CT_EINVAL names a bad field. */
ct_status ct_fbank_create(ct_fbank **fb, const ct_fbank_config *cfg);
void      ct_fbank_free(ct_fbank *fb);
int       ct_fbank_n_mels(const ct_fbank *fb);

/* Frames from n samples: 1 + (n - 400) / 160 (integer division) when n >= 400,
 * else 0; only windows that fit completely are used (Kaldi's snip_edges). */
size_t ct_fbank_frames(size_t n_samples);

/* Features of x[0..n) (16 kHz, [-1, 1]) into out [ct_fbank_frames(n), n_mels],
 * row-major. CT_EINVAL if n < 400 (no complete window). Thread-safe. */
ct_status ct_fbank_compute(const ct_fbank *fb, float *out, const float *x, size_t n);

/* Per-band normalisation in place: x[t][b] = (x[t][b] - mean_b) / sqrt(var_b + 1e-10),
 * mean and (population) variance over the frames t, accumulated in double. */
void ct_fbank_normalize(float *x, size_t frames, int n_mels);

#endif
