/* test_fbank.c - log-mel filterbanks: parity with torchaudio.compliance.kaldi.fbank
 * (tests/golden/fbank_*.h5 from tests/golden_gen/gen_fbank.py), before and after the
 * per-utterance normalisation; the frame-count formula; zero mean and unit variance
 * per band; concurrent use from several threads; bad input.
 *
 * Tolerance: normalised max error (test.h) 2e-5 on the log-mel before normalisation
 * (float32 FFTW against torchaudio's float32 pocketfft; both float, so ~1e-6 is what
 * to expect) and 1e-4 after normalisation (dividing by a band's standard deviation,
 * often ~1-3 log units, magnifies the same absolute differences). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "io/fbank.h"

static void parity(int n_mels, const char *what)
{
    char file[64];
    snprintf(file, sizeof file, "fbank_%d.h5", n_mels);
    hid_t f = t_golden_open(file);
    size_t n = (size_t)t_golden_attr(f, "n_samples"), T = (size_t)t_golden_attr(f, "frames");
    t_check((int)t_golden_attr(f, "n_mels") == n_mels, "golden n_mels");
    t_check(ct_fbank_frames(n) == T, "ct_fbank_frames(%zu) = %zu, torchaudio made %zu frames", n, ct_fbank_frames(n), T);
    float *wave = t_golden(f, "wave", n);
    float *raw = t_golden(f, "raw", T * n_mels), *norm = t_golden(f, "norm", T * n_mels);
    float *got = t_alloc(T * n_mels);
    ct_fbank_config cfg;
    ct_fbank_config_default(&cfg);
    cfg.n_mels = n_mels;
    cfg.normalize = 0;
    ct_fbank *fb = NULL;
    if (t_check(ct_fbank_create(&fb, &cfg) == CT_OK, "create: %s", ct_last_error()) && T > 0) {
        t_check(ct_fbank_compute(fb, got, wave, n) == CT_OK, "compute: %s", ct_last_error());
        t_close("log-mel before normalisation", got, raw, T * n_mels, 2e-5);
        t_case("fbank/parity after per-utterance normalisation, %d mels, %s", n_mels, what);
        ct_fbank_normalize(got, T, n_mels);
        t_close("normalised (ct_fbank_normalize)", got, norm, T * n_mels, 1e-4);
        ct_fbank_free(fb);
        cfg.normalize = 1;
        fb = NULL;
        memset(got, 0, T * n_mels * sizeof *got);
        if (t_check(ct_fbank_create(&fb, &cfg) == CT_OK, "create: %s", ct_last_error())) {
            t_check(ct_fbank_compute(fb, got, wave, n) == CT_OK, "compute: %s", ct_last_error());
            t_close("normalised (config.normalize = 1)", got, norm, T * n_mels, 1e-4);
        }
    }
    ct_fbank_free(fb);
    free(wave); free(raw); free(norm); free(got);
    if (f >= 0) H5Fclose(f);
}

typedef struct { const ct_fbank *fb; const float *x; size_t n; float *out; ct_status st; } job;
static void *run_job(void *p)
{
    job *j = p;
    for (int rep = 0; rep < 5; rep++) j->st = ct_fbank_compute(j->fb, j->out, j->x, j->n);
    return NULL;
}

void suite_fbank(void)
{
    t_case("fbank/frame count: 1 + (n - 400) / 160, 0 below one window");
    struct { size_t n, frames; } fc[] = { {0, 0}, {1, 0}, {399, 0}, {400, 1}, {559, 1}, {560, 2}, {16000, 98}, {16400, 101}, {160000, 998} };
    for (size_t i = 0; i < sizeof fc / sizeof fc[0]; i++)
        t_check(ct_fbank_frames(fc[i].n) == fc[i].frames, "ct_fbank_frames(%zu) = %zu, want %zu", fc[i].n, ct_fbank_frames(fc[i].n), fc[i].frames);

    t_case("fbank/parity with torchaudio kaldi.fbank (log-mel), 40 mels, 1.6 s");
    parity(40, "1.6 s");
    t_case("fbank/parity with torchaudio kaldi.fbank (log-mel), 24 mels, 1 s");
    parity(24, "1 s");

    ct_fbank_config cfg;
    ct_fbank_config_default(&cfg);
    t_case("fbank/defaults: 40 mels, 20-8000 Hz, pre-emphasis 0.97, DC removal, normalisation");
    t_check(cfg.n_mels == 40 && cfg.low_hz == 20.0f && cfg.high_hz == 8000.0f && cfg.preemphasis == 0.97f
            && cfg.remove_dc == 1 && cfg.normalize == 1, "defaults changed");

    t_case("fbank/normalisation: zero mean, unit variance per band");
    {
        size_t n = 24000, T = ct_fbank_frames(n);
        float *x = t_alloc(n), *o = t_alloc(T * 40);
        ct_rng r;
        ct_rng_seed(&r, 7, 1);
        for (size_t i = 0; i < n; i++) x[i] = 0.3f * sinf(0.05f * (float)i + 1e-5f * (float)(i * i) / 16.0f) + 0.05f * (ct_rng_uniform(&r) - 0.5f);
        ct_fbank *fb = NULL;
        if (t_check(ct_fbank_create(&fb, &cfg) == CT_OK, "create: %s", ct_last_error())) {
            t_check(ct_fbank_compute(fb, o, x, n) == CT_OK, "compute: %s", ct_last_error());
            double worst_mu = 0, worst_var = 0;
            for (int b = 0; b < 40; b++) {
                double s = 0, ss = 0;
                for (size_t t = 0; t < T; t++) s += o[t * 40 + b];
                double mu = s / T;
                for (size_t t = 0; t < T; t++) ss += (o[t * 40 + b] - mu) * (o[t * 40 + b] - mu);
                worst_mu = fmax(worst_mu, fabs(mu));
                worst_var = fmax(worst_var, fabs(ss / T - 1.0));
            }
            t_check(worst_mu < 1e-5, "largest |band mean| %.3g", worst_mu);
            t_check(worst_var < 1e-4, "largest |band variance - 1| %.3g", worst_var);

            t_case("fbank/four threads sharing one plan give the single-thread result bit for bit");
            float *outs[4];
            pthread_t th[4];
            job jobs[4];
            for (int k = 0; k < 4; k++) {
                outs[k] = t_alloc(T * 40);
                jobs[k] = (job){ fb, x, n, outs[k], CT_OK };
                pthread_create(&th[k], NULL, run_job, &jobs[k]);
            }
            for (int k = 0; k < 4; k++) {
                pthread_join(th[k], NULL);
                t_check(jobs[k].st == CT_OK, "thread %d: %s", k, ct_status_name(jobs[k].st));
                t_check(memcmp(outs[k], o, T * 40 * sizeof *o) == 0, "thread %d differs", k);
                free(outs[k]);
            }

            t_case("fbank/fewer samples than one window is CT_EINVAL, not a crash");
            t_check(ct_fbank_compute(fb, o, x, 399) == CT_EINVAL, "399 samples accepted");
            t_check(strstr(ct_last_error(), "shorter than one 25 ms window") != NULL, "message: %s", ct_last_error());
            ct_fbank_free(fb);
        }
        free(x); free(o);
    }

    t_case("fbank/bad configuration names the field");
    ct_fbank *fb = NULL;
    ct_fbank_config bad = cfg;
    bad.n_mels = 2;
    t_check(ct_fbank_create(&fb, &bad) == CT_EINVAL && strstr(ct_last_error(), "n_mels") && !fb, "n_mels 2: %s", ct_last_error());
    bad = cfg;
    bad.high_hz = 9000;
    t_check(ct_fbank_create(&fb, &bad) == CT_EINVAL && strstr(ct_last_error(), "8000") && !fb, "high 9000: %s", ct_last_error());
}
