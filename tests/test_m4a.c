/* test_m4a.c - VoxCeleb2's AAC files: io/audio_m4a.c through ct_audio_read,
 * `ctrain prep voxceleb` on an aac/ tree and on a tree mixing .wav and .m4a, and
 * trial lists whose extension differs from the store's.
 *
 * A small corpus of WAVs is written with libsndfile (3 speakers x 2 videos x 2
 * utterances of 1.5-2.9 s of voiced "syllables" over a noise floor, one of them
 * 22.05 kHz stereo) and each is encoded to .m4a by Debian's ffmpeg (`ffmpeg -c:a
 * aac -b:a 128k`); without ffmpeg the suite fails, saying to run scripts/deps.sh test.
 * Checks: the decoded samples are exactly as many as the WAV's and line up at
 * lag 0 (the encoder's 1024 priming samples dropped, the last frame's padding
 * cut); prep finds the same utterances in the aac/ tree as in the wav/ tree, with
 * the same frame counts and features close to the WAV's; a mixed tree stores both;
 * a truncated, a garbage, an empty and an index-less .m4a are each reported in
 * one line while prep stores the rest; --wav on the parent of wav/ and aac/
 * names both; a trial list naming .wav resolves against the .m4a store and the
 * other way round, with one line saying so. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sndfile.h>
#include "tests/test.h"
#include "io/audio.h"
#include "io/audio_m4a.h"
#include "io/featstore.h"
#include "io/trials.h"

static char root[64];

static const char *P(const char *rel)
{
    static char b[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(b[k], sizeof b[k], "%s/%s", root, rel);
    return b[k];
}

static int sh(const char *fmt, const char *a, const char *b)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    return system(cmd);
}

/* Something shaped like speech, so that the features vary as speech's do: voiced
 * "syllables" (about 4 a second, gaps between them) of a harmonic tone whose pitch
 * glides around a speaker-dependent f0, over a faint noise floor. */
static int write_wav(const char *path, int rate, int channels, double seconds, int seed)
{
    sf_count_t n = (sf_count_t)(seconds * rate);
    float *x = malloc((size_t)n * channels * sizeof *x);
    ct_rng r;
    ct_rng_seed(&r, (uint64_t)seed, 11);
    double f0 = 110 + 40 * (seed % 5), phase = 0, syl = 3.5 + 0.25 * (seed % 3);
    for (sf_count_t i = 0; x && i < n; i++) {
        double t = (double)i / rate, e = sin(6.2832 * syl * t);
        double env = e > 0 ? e * e : 0;
        phase += 6.2832 * f0 * (1 + 0.08 * sin(6.2832 * 0.9 * t)) / rate;
        double v = 0;
        for (int k = 1; k <= 6; k++) v += sin(k * phase) / k;
        for (int c = 0; c < channels; c++)
            x[i * channels + c] = (float)(0.25 * env * v + 0.01 * (ct_rng_uniform(&r) - 0.5) + 0.002 * c);
    }
    SF_INFO info = { .samplerate = rate, .channels = channels, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16 };
    SNDFILE *f = x ? sf_open(path, SFM_WRITE, &info) : NULL;
    sf_count_t w = f ? sf_writef_float(f, x, n) : -1;
    if (f) sf_close(f);
    free(x);
    return t_check(w == n, "writing %s: %s", path, sf_strerror(NULL));
}

/* The utterances, relative to wav/ and aac/, without their extension. */
static const char *UTT[] = {
    "id20001/vidAAA/00001", "id20001/vidAAA/00002", "id20001/vidBBB/00001", "id20001/vidBBB/00002",
    "id20002/vidCCC/00001", "id20002/vidCCC/00002", "id20002/vidDDD/00001", "id20002/vidDDD/00002",
    "id20003/vidEEE/00001", "id20003/vidEEE/00002", "id20003/vidFFF/00001", "id20003/vidFFF/00002",
};
#define NU ((int)(sizeof UTT / sizeof UTT[0]))
#define STEREO 5   /* UTT[5] is 22.05 kHz stereo */

static int encode(const char *wav, const char *m4a)
{
    return sh("ffmpeg -nostdin -loglevel error -y -i '%s' -c:a aac -b:a 128k '%s' 2>&1", wav, m4a) == 0;
}

/* Writes wav/UTT.wav and aac/UTT.m4a for every utterance; 0 after a failed check. */
static int build_trees(void)
{
    for (int i = 0; i < NU; i++) {
        char dw[160], da[160];   /* wav/idNNNNN/vidXXX and aac/idNNNNN/vidXXX */
        snprintf(dw, sizeof dw, "wav/%.14s", UTT[i]);
        snprintf(da, sizeof da, "aac/%.14s", UTT[i]);
        if (sh("mkdir -p '%s' '%s'", P(dw), P(da))) return t_check(0, "mkdir %s", dw);
        char wav[160], m4a[160];
        snprintf(wav, sizeof wav, "wav/%s.wav", UTT[i]);
        snprintf(m4a, sizeof m4a, "aac/%s.m4a", UTT[i]);
        int ok = i == STEREO ? write_wav(P(wav), 22050, 2, 2.2, i) : write_wav(P(wav), 16000, 1, 1.5 + 0.125 * i, i);
        if (!ok || !t_check(encode(P(wav), P(m4a)), "ffmpeg could not encode %s to %s", wav, m4a)) return 0;
    }
    return 1;
}

/* 10 log10(sum a^2 / sum (a - b shifted by lag)^2) over a[1100, n - 1100): how well
 * b, moved by lag samples, reproduces a. */
static double snr_db(const float *a, const float *b, size_t n, int lag)
{
    double e = 0, s = 0;
    for (size_t k = 1100; k + 1100 < n; k++) {
        double d = (double)a[k] - b[(ptrdiff_t)k + lag];
        e += d * d;
        s += (double)a[k] * a[k];
    }
    return 10 * log10(s / (e > 0 ? e : 1e-30));
}

/* Path a equals path b but for the extension. */
static int same_stem(const char *a, const char *b)
{
    const char *da = strrchr(a, '.'), *db = strrchr(b, '.');
    size_t la = da ? (size_t)(da - a) : strlen(a), lb = db ? (size_t)(db - b) : strlen(b);
    return la == lb && !memcmp(a, b, la);
}

/* The text [line, eol) contains needle. */
static int line_has(const char *line, const char *eol, const char *needle)
{
    const char *p = strstr(line, needle);
    return p && p + strlen(needle) <= eol;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The note ct_trials_load_note writes, read back from a temporary file. */
static ct_status load_trials(ct_trial **t, int *n, const char *list, const ct_corpus *c, char *note, size_t cap)
{
    FILE *f = tmpfile();
    ct_status st = ct_trials_load_note(t, n, list, c, f);
    size_t got = 0;
    if (f) { rewind(f); got = fread(note, 1, cap - 1, f); fclose(f); }
    note[got] = '\0';
    return st;
}

void suite_m4a(void)
{
    static char out[1 << 16];
    char args[2048];
    int rc;

    if (!ct_audio_m4a_built()) {   /* make FFMPEG=0: a .m4a is one line saying so, never a crash */
        t_case("m4a/a build without FFmpeg refuses a .m4a in one line");
        float *x = NULL;
        size_t nx = 0;
        char f[64] = "/tmp/ctrain_m4a_XXXXXX";
        int fd = mkstemp(f);
        if (fd >= 0) { (void)!write(fd, "\0\0\0\x18" "ftypM4A ", 12); close(fd); }
        char m4a[80];
        snprintf(m4a, sizeof m4a, "%s.m4a", f);
        t_check(fd >= 0 && rename(f, m4a) == 0, "a scratch file");
        ct_status st = ct_audio_read(&x, &nx, m4a, 0);
        unlink(m4a);
        t_check(st == CT_EFORMAT && !x && strstr(ct_last_error(), "built without FFmpeg"), "%s: %s", ct_status_name(st), ct_last_error());
        t_skip("m4a/decoding, prep and trial lists: this build has no FFmpeg (make FFMPEG=0)");
        return;
    }
    t_case("m4a/ffmpeg encodes the test corpus to AAC .m4a");
    if (!t_check(system("command -v ffmpeg >/dev/null 2>&1") == 0,
                 "the ffmpeg command is missing, and the .m4a tests encode their files with it: run scripts/deps.sh test "
                 "(apt-get install ffmpeg)"))
        return;
    snprintf(root, sizeof root, "/tmp/ctrain_m4a_XXXXXX");
    if (!t_check(mkdtemp(root) != NULL, "mkdtemp failed")) return;
    if (!build_trees()) { sh("rm -rf '%s'%s", root, ""); return; }

    t_case("m4a/decoded samples: exactly the WAV's count, aligned at lag 0 (priming and padding dropped)");
    double worst_snr = 1e9, margin = 1e9;
    for (int i = 0; i < NU; i++) {
        char wav[160], m4a[160];
        snprintf(wav, sizeof wav, "wav/%s.wav", UTT[i]);
        snprintf(m4a, sizeof m4a, "aac/%s.m4a", UTT[i]);
        float *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (t_check(ct_audio_read(&a, &na, P(wav), 0) == CT_OK, "%s", ct_last_error())
            && t_check(ct_audio_read(&b, &nb, P(m4a), 0) == CT_OK, "%s", ct_last_error())
            && t_check(na == nb, "%s: %zu samples from the .m4a, %zu from the .wav", UTT[i], nb, na)) {
            /* the signal-to-error ratio at lag 0, and at the best other lag within one AAC frame */
            double at0 = snr_db(a, b, na, 0), best_other = -1e9;
            for (int lag = -1024; lag <= 1024; lag++)
                if (lag != 0 && snr_db(a, b, na, lag) > best_other) best_other = snr_db(a, b, na, lag);
            t_check(at0 > best_other + 10, "%s: %.1f dB at lag 0, %.1f dB at another lag: the samples are shifted", UTT[i],
                    at0, best_other);
            if (at0 - best_other < margin) margin = at0 - best_other;
            if (at0 < worst_snr) worst_snr = at0;
        }
        free(a);
        free(b);
    }
    /* measured: 33.3 dB at worst over the 12 utterances, and at least 15.6 dB above the
     * best other lag within an AAC frame (the voiced parts are nearly periodic, so a lag
     * of one pitch period still gives up to 21 dB); 15 dB at lag 0 and a margin of 10 dB
     * leave room for another encoder build, and a shift by the 1024 priming samples
     * fails both */
    t_check(worst_snr > 15 && worst_snr < 1e9, "worst signal-to-error ratio %.1f dB at lag 0", worst_snr);
    if (worst_snr < 1e9) printf("  measured: signal-to-error ratio at lag 0 %.1f dB at worst, at least %.1f dB above any other lag\n", worst_snr, margin);

    t_case("m4a/prep reads the aac/ tree: the WAV tree's utterances, frame counts and speakers");
    snprintf(args, sizeof args, "prep voxceleb --wav %s --out %s --threads 2", P("wav"), P("w.h5"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "stored 12, skipped 0 already stored, rejected 0"), "prep of wav/: exit %d: %s", rc, out);
    snprintf(args, sizeof args, "prep voxceleb --wav %s --out %s --threads 2", P("aac"), P("a.h5"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "stored 12, skipped 0 already stored, rejected 0"), "prep of aac/: exit %d: %s", rc, out);
    ct_corpus cw = { 0 }, ca = { 0 };
    int loaded = t_check(ct_featstore_load(&cw, P("w.h5")) == CT_OK, "load w.h5: %s", ct_last_error())
              && t_check(ct_featstore_load(&ca, P("a.h5")) == CT_OK, "load a.h5: %s", ct_last_error())
              && t_check(cw.n_utt == NU && ca.n_utt == NU, "%d utterances from wav/, %d from aac/, want %d", cw.n_utt, ca.n_utt, NU);
    int max_dframes = 0;
    for (int u = 0; loaded && u < NU; u++) {
        t_check(same_stem(cw.path[u], ca.path[u]) && strstr(ca.path[u], ".m4a"), "utt %d: %s vs %s", u, cw.path[u], ca.path[u]);
        t_check(!strcmp(cw.speaker_name[cw.utt[u].speaker], ca.speaker_name[ca.utt[u].speaker]) && cw.video[u] == ca.video[u],
                "utt %d: speaker or video differs", u);
        int d = abs(cw.utt[u].frames - ca.utt[u].frames);
        if (d > max_dframes) max_dframes = d;
        t_check(d <= 1, "%s: %d frames from the .m4a, %d from the .wav", UTT[u], ca.utt[u].frames, cw.utt[u].frames);
    }
    t_check(max_dframes == 0, "frame counts differ by up to %d (the decoder gives the WAV's exact sample count)", max_dframes);

    t_case("m4a/features of the .m4a close to the WAV's");
    /* The stored features are log-mels normalised per band and utterance (unit
     * variance). Measured on this corpus (ffmpeg 5.1's aac encoder): in mel bands 0-11
     * (20-800 Hz, where every speaker's harmonics are) mean |difference| 0.024, max
     * 1.05; over all 40 bands mean 0.108, max 3.9, the large ones above 1 kHz where
     * only the -46 dB noise floor is, which AAC does not code faithfully. For scale:
     * the same features one frame (10 ms) out of line differ by 0.27 and 0.71. The
     * bounds, 0.06 and 2 in bands 0-11 and 0.25 over all bands, catch a shift of one
     * frame with room to spare for another encoder build. */
    double low_sum = 0, low_max = 0, all_sum = 0;
    size_t low_n = 0, all_n = 0;
    for (int u = 0; loaded && u < NU; u++) {
        int T = cw.utt[u].frames < ca.utt[u].frames ? cw.utt[u].frames : ca.utt[u].frames, M = cw.n_mels;
        const float *fw = cw.feats + cw.utt[u].offset, *fa = ca.feats + ca.utt[u].offset;
        for (size_t k = 0; k < (size_t)T * (size_t)M; k++) {
            double d = fabs((double)fw[k] - fa[k]);
            all_sum += d;
            all_n++;
            if ((int)(k % (size_t)M) < 12) { low_sum += d; low_n++; if (d > low_max) low_max = d; }
        }
    }
    double low_mean = low_n ? low_sum / (double)low_n : 1e9, all_mean = all_n ? all_sum / (double)all_n : 1e9;
    t_check(loaded && low_mean < 0.06 && low_max < 2, "bands 0-11: mean |difference| %.4f (bound 0.06), max %.3f (bound 2)",
            low_mean, low_max);
    t_check(loaded && all_mean < 0.25, "all bands: mean |difference| %.4f (bound 0.25)", all_mean);
    printf("  measured: bands 0-11 mean |difference| %.4f, max %.3f; all bands mean %.4f\n", low_mean, low_max, all_mean);

    t_case("m4a/a mixed tree (.wav and .m4a side by side) and damaged .m4a files: one line each, the rest stored");
    /* mixed/: the even utterances as .wav, the odd as .m4a, and four damaged files */
    for (int i = 0; i < NU; i++) {
        char from[160], dir[160];
        snprintf(from, sizeof from, i % 2 ? "aac/%s.m4a" : "wav/%s.wav", UTT[i]);
        snprintf(dir, sizeof dir, "mixed/%.14s", UTT[i]);
        t_check(sh("mkdir -p '%s'%s", P(dir), "") == 0 && sh("cp '%s' '%s'", P(from), P(dir)) == 0, "copying %s", from);
    }
    static const struct { const char *rel, *reason; } BAD[] = {
        { "id20001/vidAAA/00009.m4a", "truncated audio" },    /* cut in the middle of its samples */
        { "id20002/vidCCC/00009.m4a", "not an MP4" },         /* random bytes */
        { "id20002/vidDDD/00009.m4a", "empty file" },         /* 0 bytes */
        { "id20003/vidFFF/00009.m4a", "without its 'moov'" },  /* cut just before the index */
    };
    char m[160];
    snprintf(m, sizeof m, "aac/%s.m4a", UTT[0]);
    struct stat sb;
    long long size = stat(P(m), &sb) == 0 ? (long long)sb.st_size : 0;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "head -c %lld '%s' > '%s/mixed/%s'", size / 2, P(m), root, BAD[0].rel);
    t_check(system(cmd) == 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "head -c 4000 /dev/urandom > '%s/mixed/%s' && : > '%s/mixed/%s'", root, BAD[1].rel, root, BAD[2].rel);
    t_check(system(cmd) == 0, "%s", cmd);
    /* ffmpeg writes the moov box last: keep everything before it */
    FILE *mf = fopen(P(m), "rb");
    long long moov = -1;
    unsigned char h[8];
    for (long long pos = 0; mf && fseek(mf, (long)pos, SEEK_SET) == 0 && fread(h, 1, 8, mf) == 8;) {
        unsigned long sz = (unsigned long)h[0] << 24 | h[1] << 16 | h[2] << 8 | h[3];
        if (!memcmp(h + 4, "moov", 4)) { moov = pos; break; }
        if (sz < 8) break;
        pos += (long long)sz;
    }
    if (mf) fclose(mf);
    t_check(moov > 0, "no moov box found in %s", m);
    snprintf(cmd, sizeof cmd, "head -c %lld '%s' > '%s/mixed/%s'", moov, P(m), root, BAD[3].rel);
    t_check(system(cmd) == 0, "%s", cmd);
    snprintf(args, sizeof args, "prep voxceleb --wav %s --out %s --threads 2", P("mixed"), P("m.h5"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "stored 12, skipped 0 already stored, rejected 4:"), "prep of mixed/: exit %d: %s", rc, out);
    for (int i = 0; i < 4; i++) {
        char full[512];
        snprintf(full, sizeof full, "%s/mixed/%s", root, BAD[i].rel);
        const char *line = strstr(out, full);
        const char *eol = line ? strchr(line, '\n') : NULL;
        t_check(count_lines_with(out, full) == 1, "%s is named %d times, want once: %s", BAD[i].rel, count_lines_with(out, full), out);
        t_check(line && eol && line_has(line, eol, BAD[i].reason),
                "no one-line report of %s with \"%s\": %s", full, BAD[i].reason, out);
    }
    /* FFmpeg's own logging stays quiet: only our lines */
    t_check(!strstr(out, "[mov,mp4") && !strstr(out, "[aac @") && !strstr(out, "moov atom"), "FFmpeg's log leaked: %s", out);
    ct_corpus cm = { 0 };
    if (loaded && t_check(ct_featstore_load(&cm, P("m.h5")) == CT_OK, "load m.h5: %s", ct_last_error())
        && t_check(cm.n_utt == NU, "%d utterances from mixed/", cm.n_utt)) {
        int bad = 0;
        for (int u = 0; u < NU; u++) {   /* each is exactly what its own tree's store holds */
            const ct_corpus *ref = u % 2 ? &ca : &cw;
            bad += strcmp(cm.path[u], ref->path[u]) != 0 || cm.utt[u].frames != ref->utt[u].frames
                || memcmp(cm.feats + cm.utt[u].offset, ref->feats + ref->utt[u].offset,
                          (size_t)cm.utt[u].frames * (size_t)cm.n_mels * sizeof *cm.feats) != 0;
        }
        t_check(bad == 0, "%d utterances of the mixed tree differ from the single-format stores", bad);
    }
    ct_corpus_free(&cm);

    t_case("m4a/--wav on the parent of wav/ and aac/ points to both");
    unlink(P("e.h5"));
    snprintf(args, sizeof args, "prep voxceleb --wav %s --out %s", root, P("e.h5"));
    rc = t_run_ctrain(args, out, sizeof out);
    char hint[512];
    snprintf(hint, sizeof hint, "did you mean --wav %s/wav or --wav %s/aac?", root, root);
    t_check(rc == 1 && strstr(out, hint) && access(P("e.h5"), F_OK) != 0, "exit %d: %s", rc, out);

    t_case("m4a/ct_audio_read_m4a reads MP4 whatever the name, and refuses a WAV in one line");
    snprintf(cmd, sizeof cmd, "cp '%s/aac/%s.m4a' '%s/renamed.bin'", root, UTT[1], root);
    float *x = NULL;
    size_t n = 0;
    if (t_check(system(cmd) == 0, "%s", cmd)) {
        t_check(ct_audio_read_m4a(&x, &n, P("renamed.bin"), 0) == CT_OK && loaded
                && (int)n > 0, "renamed.bin: %s", ct_last_error());
        free(x);
    }
    char w1[160];
    snprintf(w1, sizeof w1, "wav/%s.wav", UTT[1]);
    x = NULL;
    ct_status st = ct_audio_read_m4a(&x, &n, P(w1), 0);
    t_check(st == CT_EFORMAT && x == NULL && strstr(ct_last_error(), P(w1)) && strstr(ct_last_error(), "not an MP4")
            && !strchr(ct_last_error(), '\n'), "a WAV read as MP4: %d %s", st, ct_last_error());

    const char *huge = "tests/fuzz/corpus/m4a/bad-huge-table.m4a";
    if (access(huge, R_OK) != 0)
        t_skip("m4a/a header claiming a 1 GiB table: %s is not here (run from the source tree)", huge);
    else {
        t_case("m4a/a header claiming a 1 GiB table (found by the fuzzer) is refused in one line, nothing allocated for it");
        x = NULL;
        ct_status st_huge = ct_audio_read_m4a(&x, &n, huge, 0);
        t_check(st_huge == CT_EFORMAT && x == NULL && strstr(ct_last_error(), "256 MiB") && !strchr(ct_last_error(), '\n'),
                "%s: %d %s", huge, st_huge, ct_last_error());
    }

    t_case("m4a/a trial list naming .wav matches the .m4a store, and .m4a the WAV store, with one line");
    FILE *tf = fopen(P("trials-wav.txt"), "w"), *tm = fopen(P("trials-m4a.txt"), "w");
    if (tf && tm) {
        fprintf(tf, "1 %s.wav %s.wav\n0 %s.wav %s.wav\n1 %s.wav %s.wav\n", UTT[0], UTT[1], UTT[0], UTT[4], UTT[8], UTT[11]);
        fprintf(tm, "1 %s.m4a %s.m4a\n0 %s.m4a %s.m4a\n", UTT[0], UTT[1], UTT[0], UTT[4]);
    }
    if (tf) fclose(tf);
    if (tm) fclose(tm);
    ct_trial *t = NULL;
    int nt = 0;
    char note[512];
    if (loaded) {
        st = load_trials(&t, &nt, P("trials-wav.txt"), &ca, note, sizeof note);
        t_check(st == CT_OK && nt == 3, "wav list against the m4a store: %s", ct_last_error());
        t_check(t && t[0].a == 0 && t[0].b == 1 && t[1].b == 4 && t[2].a == 8 && t[2].b == 11 && t[0].label == 1 && t[1].label == 0,
                "wrong utterances resolved");
        t_check(!strcmp(note, "trials: 6 paths end in .wav but the store has .m4a; matched by path without extension\n"),
                "note: \"%s\"", note);
        free(t);
        t = NULL;
        st = load_trials(&t, &nt, P("trials-m4a.txt"), &cw, note, sizeof note);
        t_check(st == CT_OK && nt == 2 && t[1].b == 4, "m4a list against the wav store: %s", ct_last_error());
        t_check(!strcmp(note, "trials: 4 paths end in .m4a but the store has .wav; matched by path without extension\n"),
                "note: \"%s\"", note);
        free(t);
        t = NULL;
        st = load_trials(&t, &nt, P("trials-m4a.txt"), &ca, note, sizeof note);   /* exact: no note */
        t_check(st == CT_OK && nt == 2 && note[0] == '\0', "exact paths gave a note: \"%s\"", note);
        free(t);
        t = NULL;
        tf = fopen(P("trials-missing.txt"), "w");
        if (tf) { fprintf(tf, "1 %s.wav id29999/none/00001.wav\n", UTT[0]); fclose(tf); }
        st = load_trials(&t, &nt, P("trials-missing.txt"), &ca, note, sizeof note);
        t_check(st == CT_EINVAL && strstr(ct_last_error(), "id29999/none/00001.wav") && strstr(ct_last_error(), "not in the feature store"),
                "a path in neither form: %d %s", st, ct_last_error());
        free(t);
    }
    ct_corpus_free(&cw);
    ct_corpus_free(&ca);

    sh("rm -rf '%s'%s", root, "");
}
