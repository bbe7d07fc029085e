/* fbank.c - log-mel filterbank features (see fbank.h).
 *
 * For a waveform s[0..N) at 16 kHz with samples in [-1, 1]:
 *
 *   scale      x[n] = 32768 s[n]               (the 16-bit integer scale Kaldi reads WAV in,
 *                                               so the log floor below only ever meets digital silence)
 *   frames     T = 1 + floor((N - 400) / 160) if N >= 400, else 0    (snip_edges = true)
 *              frame t is x[160 t .. 160 t + 400)
 *   DC         u[j] = x_t[j] - (1/400) sum_i x_t[i]                   (remove_dc_offset = true)
 *   pre-emph.  v[j] = u[j] - 0.97 u[j-1],  v[0] = u[0] - 0.97 u[0]   (preemphasis_coefficient = 0.97)
 *   window     w[j] = 0.54 - 0.46 cos(2 pi j / 399), j = 0..399        (symmetric Hamming, window_type = 'hamming')
 *   FFT        X[k] = sum_{j<512} (v[j] w[j]) e^{-2 pi i jk/512}, zero-padded to 512
 *              (round_to_power_of_two = true), k = 0..256, FFTW's r2c in float
 *   power      P[k] = |X[k]|^2                                        (use_power = true)
 *   mel        m(f) = 1127 ln(1 + f / 700)
 *              edges e_i = m(20) + i (m(8000) - m(20)) / (n_mels + 1),  i = 0..n_mels+1
 *              band b's weight on bin k (frequency f_k = 16000 k / 512, k < 256):
 *                H_b[k] = max(0, min((m(f_k) - e_b) / (e_{b+1} - e_b), (e_{b+2} - m(f_k)) / (e_{b+2} - e_{b+1})))
 *              and 0 on the Nyquist bin k = 256 (Kaldi's convention)
 *   log        L[t][b] = ln(max(sum_k H_b[k] P_t[k], FLT_EPSILON))     FLT_EPSILON = 1.19e-7, Kaldi's floor
 *   normalise  F[t][b] = (L[t][b] - mu_b) / sqrt(var_b + 1e-10),  mu_b, var_b the mean and population
 *              variance of band b over the utterance's frames (in double)
 *
 * Up to the normalisation this is torchaudio.compliance.kaldi.fbank(32768 s, window_type='hamming',
 * dither=0.0, frame_length=25, frame_shift=10, num_mel_bins=n_mels, low_freq=20, high_freq=8000,
 * snip_edges=True, round_to_power_of_two=True, remove_dc_offset=True, preemphasis_coefficient=0.97,
 * use_energy=False, use_power=True, use_log_fbank=True, sample_frequency=16000);
 * tests/golden_gen/gen_fbank.py checks that, tests/test_fbank.c states the tolerance.
 *
 * Threads: FFTW's planner is not thread-safe, so plans are made and destroyed under one mutex, once
 * per ct_fbank. The plan is made with FFTW_ESTIMATE, not FFTW_MEASURE: measuring could choose a
 * different algorithm in each run, and then the same audio would not give bit-identical features
 * from one run to the next. ct_fbank_compute executes the plan on its own fftwf_malloc'd buffers
 * (same alignment as the plan's) with fftwf_execute_dft_r2c, which FFTW documents as thread-safe.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <fftw3.h>
#include "io/fbank.h"

#define NBINS (CT_FBANK_NFFT / 2 + 1)

struct ct_fbank {
    ct_fbank_config cfg;
    fftwf_plan plan;
    float window[CT_FBANK_WINDOW];
    int *band_start, *band_len;   /* [n_mels]: first FFT bin with a non-zero weight, how many */
    float *weights;               /* [n_mels][NBINS]: only [start, start + len) used */
};

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

void ct_fbank_config_default(ct_fbank_config *cfg)
{
    cfg->n_mels = 40;
    cfg->low_hz = 20.0f;
    cfg->high_hz = 8000.0f;
    cfg->preemphasis = 0.97f;
    cfg->remove_dc = 1;
    cfg->normalize = 1;
}

size_t ct_fbank_frames(size_t n_samples)
{
    return n_samples < CT_FBANK_WINDOW ? 0 : 1 + (n_samples - CT_FBANK_WINDOW) / CT_FBANK_HOP;
}

int ct_fbank_n_mels(const ct_fbank *fb) { return fb->cfg.n_mels; }

static double mel(double hz) { return 1127.0 * log(1.0 + hz / 700.0); }

ct_status ct_fbank_create(ct_fbank **out, const ct_fbank_config *cfg)
{
    *out = NULL;
    if (cfg->n_mels < 4 || cfg->n_mels > 256)
        return ct_fail(CT_EINVAL, "fbank: n_mels = %d; use 4 to 256 mel bands (40 is usual)", cfg->n_mels);
    if (!(cfg->low_hz >= 0 && cfg->low_hz < cfg->high_hz && cfg->high_hz <= CT_FBANK_RATE / 2))
        return ct_fail(CT_EINVAL, "fbank: band edges %g..%g Hz; need 0 <= low < high <= 8000", cfg->low_hz, cfg->high_hz);
    if (!(cfg->preemphasis >= 0 && cfg->preemphasis <= 1))
        return ct_fail(CT_EINVAL, "fbank: pre-emphasis %g; use a value in [0, 1]", cfg->preemphasis);
    ct_fbank *fb = ct_calloc(1, sizeof *fb, "fbank");
    if (!fb) return CT_ENOMEM;
    fb->cfg = *cfg;
    int M = cfg->n_mels;
    fb->band_start = ct_calloc((size_t)M, sizeof *fb->band_start, "fbank");
    fb->band_len = ct_calloc((size_t)M, sizeof *fb->band_len, "fbank");
    fb->weights = ct_calloc((size_t)M * NBINS, sizeof *fb->weights, "fbank");
    if (!fb->band_start || !fb->band_len || !fb->weights) { ct_fbank_free(fb); return CT_ENOMEM; }

    for (int j = 0; j < CT_FBANK_WINDOW; j++)
        fb->window[j] = (float)(0.54 - 0.46 * cos(6.283185307179586 * j / (CT_FBANK_WINDOW - 1)));

    double lo = mel(cfg->low_hz), hi = mel(cfg->high_hz), delta = (hi - lo) / (M + 1);
    for (int b = 0; b < M; b++) {
        double l = lo + b * delta, c = lo + (b + 1) * delta, r = lo + (b + 2) * delta;
        float *w = fb->weights + (size_t)b * NBINS;
        int first = -1, last = -1;
        for (int k = 0; k < CT_FBANK_NFFT / 2; k++) {   /* the Nyquist bin keeps weight 0 */
            double m = mel((double)CT_FBANK_RATE * k / CT_FBANK_NFFT);
            double up = (m - l) / (c - l), down = (r - m) / (r - c);
            double h = fmax(0.0, fmin(up, down));
            if (h > 0) { w[k] = (float)h; if (first < 0) first = k; last = k; }
        }
        fb->band_start[b] = first < 0 ? 0 : first;
        fb->band_len[b] = first < 0 ? 0 : last - first + 1;
    }

    float *in = fftwf_malloc(CT_FBANK_NFFT * sizeof *in);
    fftwf_complex *spec = fftwf_malloc(NBINS * sizeof *spec);
    if (!in || !spec) {
        fftwf_free(in); fftwf_free(spec); ct_fbank_free(fb);
        return ct_fail(CT_ENOMEM, "fbank: out of memory for the FFT buffers");
    }
    pthread_mutex_lock(&plan_lock);
    fb->plan = fftwf_plan_dft_r2c_1d(CT_FBANK_NFFT, in, spec, FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    fftwf_free(in);
    fftwf_free(spec);
    if (!fb->plan) { ct_fbank_free(fb); return ct_fail(CT_ENOMEM, "fbank: FFTW could not plan a %d-point FFT", CT_FBANK_NFFT); }
    *out = fb;
    return CT_OK;
}

void ct_fbank_free(ct_fbank *fb)
{
    if (!fb) return;
    if (fb->plan) {
        pthread_mutex_lock(&plan_lock);
        fftwf_destroy_plan(fb->plan);
        pthread_mutex_unlock(&plan_lock);
    }
    free(fb->band_start);
    free(fb->band_len);
    free(fb->weights);
    free(fb);
}

ct_status ct_fbank_compute(const ct_fbank *fb, float *out, const float *x, size_t n)
{
    size_t T = ct_fbank_frames(n);
    if (T == 0)
        return ct_fail(CT_EINVAL, "fbank: %zu samples (%.4f s) is shorter than one 25 ms window", n, (double)n / CT_FBANK_RATE);
    float *in = fftwf_malloc(CT_FBANK_NFFT * sizeof *in);
    fftwf_complex *spec = fftwf_malloc(NBINS * sizeof *spec);
    if (!in || !spec) { fftwf_free(in); fftwf_free(spec); return ct_fail(CT_ENOMEM, "fbank: out of memory"); }
    const ct_fbank_config *cfg = &fb->cfg;
    const int M = cfg->n_mels;
    const float p = cfg->preemphasis;
    float power[NBINS];
    for (size_t t = 0; t < T; t++) {
        const float *s = x + t * CT_FBANK_HOP;
        float u[CT_FBANK_WINDOW];
        double mean = 0;
        for (int j = 0; j < CT_FBANK_WINDOW; j++) { u[j] = 32768.0f * s[j]; mean += u[j]; }
        if (cfg->remove_dc) {
            float m = (float)(mean / CT_FBANK_WINDOW);
            for (int j = 0; j < CT_FBANK_WINDOW; j++) u[j] -= m;
        }
        /* pre-emphasis runs backwards so u[j-1] is still the unemphasised value */
        for (int j = CT_FBANK_WINDOW - 1; j > 0; j--) in[j] = (u[j] - p * u[j - 1]) * fb->window[j];
        in[0] = (u[0] - p * u[0]) * fb->window[0];
        for (int j = CT_FBANK_WINDOW; j < CT_FBANK_NFFT; j++) in[j] = 0.0f;
        fftwf_execute_dft_r2c(fb->plan, in, spec);
        for (int k = 0; k < NBINS; k++) power[k] = spec[k][0] * spec[k][0] + spec[k][1] * spec[k][1];
        float *o = out + t * (size_t)M;
        for (int b = 0; b < M; b++) {
            const float *w = fb->weights + (size_t)b * NBINS;
            float e = 0.0f;
            for (int k = fb->band_start[b], end = k + fb->band_len[b]; k < end; k++) e += w[k] * power[k];
            o[b] = logf(e > FLT_EPSILON ? e : FLT_EPSILON);
        }
    }
    fftwf_free(in);
    fftwf_free(spec);
    if (cfg->normalize) ct_fbank_normalize(out, T, M);
    return CT_OK;
}

void ct_fbank_normalize(float *x, size_t frames, int n_mels)
{
    if (frames == 0) return;
    for (int b = 0; b < n_mels; b++) {
        double s = 0, ss = 0;
        for (size_t t = 0; t < frames; t++) s += x[t * (size_t)n_mels + b];
        double mu = s / (double)frames;
        for (size_t t = 0; t < frames; t++) { double d = x[t * (size_t)n_mels + b] - mu; ss += d * d; }
        double inv = 1.0 / sqrt(ss / (double)frames + 1e-10);
        for (size_t t = 0; t < frames; t++) {
            float *v = &x[t * (size_t)n_mels + b];
            *v = (float)((*v - mu) * inv);
        }
    }
}
