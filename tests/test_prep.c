/* test_prep.c - `ctrain prep voxceleb` end to end, run as the user runs it
 * ($CTRAIN_BIN, else bin/ctrain): a tiny VoxCeleb-layout tree written here with
 * libsndfile (3 speakers x 2 videos x 2 utterances of 1.5-3 s tones and noise,
 * one of them a 22.05 kHz stereo FLAC) plus four bad files (truncated, 0 frames,
 * text named .wav, too short). Checks: the good utterances are stored with the
 * right speaker, video and path and the features prep computes are those of
 * io/audio + io/fbank; each bad file is reported with its path and reason and
 * listed in the summary; exit 0; a second run skips everything and a third adds
 * a new file; --threads 1 and --threads 2 write byte-identical stores; an empty
 * directory, a missing one, one without the layout, and one with only bad files
 * give a clear error and a non-zero exit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sndfile.h>
#include "tests/test.h"
#include "io/audio.h"
#include "io/fbank.h"
#include "io/featstore.h"

static char root[64], tree[128];   /* the temporary directory, and the wav/ tree in it */
static const char *base = root;     /* where P() and the writers below put files */

static const char *P(const char *rel)
{
    static char b[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(b[k], sizeof b[k], "%s/%s", base, rel);
    return b[k];
}

static void mkdirs(const char *rel)   /* mkdir -p base/rel */
{
    char b[512];
    snprintf(b, sizeof b, "%s/%s", base, rel);
    for (char *s = b + strlen(base) + 1; ; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            mkdir(b, 0755);
            if (!c) break;
            *s = c;
        }
    }
}

/* A tone (speaker-dependent pitch and harmonics) plus noise, `seconds` long. */
static int write_utt(const char *rel, int format, int rate, int channels, double seconds, int seed)
{
    sf_count_t n = (sf_count_t)(seconds * rate);
    float *x = malloc((size_t)n * channels * sizeof *x);
    ct_rng r;
    ct_rng_seed(&r, (uint64_t)seed, 11);
    double f0 = 110 + 40 * (seed % 5);
    for (sf_count_t i = 0; x && i < n; i++)
        for (int c = 0; c < channels; c++)
            x[i * channels + c] = (float)(0.3 * sin(6.2832 * f0 * i / rate) + 0.1 * sin(6.2832 * 3 * f0 * i / rate + c)
                                          + 0.05 * (ct_rng_uniform(&r) - 0.5));
    SF_INFO info = { .samplerate = rate, .channels = channels, .format = format };
    SNDFILE *f = x ? sf_open(P(rel), SFM_WRITE, &info) : NULL;
    sf_count_t w = f ? sf_writef_float(f, x, n) : -1;
    if (f) sf_close(f);
    free(x);
    return t_check(w == n, "writing %s: %s", rel, sf_strerror(NULL));
}

static const char *GOOD[] = {
    "id10001/vidAAA/00001.wav", "id10001/vidAAA/00002.wav", "id10001/vidBBB/00001.wav", "id10001/vidBBB/00002.wav",
    "id10002/vidCCC/00001.wav", "id10002/vidCCC/00002.flac", "id10002/vidDDD/00001.wav", "id10002/vidDDD/00002.wav",
    "id10003/vidEEE/00001.wav", "id10003/vidEEE/00002.wav", "id10003/vidFFF/00001.wav", "id10003/vidFFF/00002.wav",
};
#define NG ((int)(sizeof GOOD / sizeof GOOD[0]))
static const struct { const char *rel, *reason; } BAD[] = {
    { "id10001/vidAAA/00003.wav", "truncated" },
    { "id10002/vidDDD/00003.wav", "0 audio frames" },
    { "id10003/vidEEE/00003.wav", "not audio" },
    { "id10003/vidFFF/00003.wav", "too short" },
};
#define NB ((int)(sizeof BAD / sizeof BAD[0]))

static void build_tree(void)
{
    for (int i = 0; i < NG; i++) {
        char d[64];
        snprintf(d, sizeof d, "%.14s", GOOD[i]);   /* idNNNNN/vidXXX */
        mkdirs(d);
        if (strstr(GOOD[i], ".flac")) write_utt(GOOD[i], SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 22050, 2, 2.2, i);
        else write_utt(GOOD[i], SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, 1.5 + 0.125 * i, i);
    }
    /* truncated: a valid 2 s WAV with its second half chopped off */
    if (write_utt(BAD[0].rel, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, 2.0, 99)) t_check(truncate(P(BAD[0].rel), 44 + 32000) == 0, "truncate");
    SF_INFO info = { .samplerate = 16000, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16 };
    SNDFILE *f = sf_open(P(BAD[1].rel), SFM_WRITE, &info);
    if (t_check(f != NULL, "empty wav")) sf_close(f);
    FILE *t = fopen(P(BAD[2].rel), "w");
    if (t_check(t != NULL, "text wav")) { fputs("RIFF? no, just text pretending to be audio\n", t); fclose(t); }
    write_utt(BAD[3].rel, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, 0.5, 98);
    t = fopen(P("id10001/vidAAA/notes.txt"), "w");   /* not audio by name: ignored, not rejected */
    if (t) { fputs("ignored\n", t); fclose(t); }
}

static int file_bytes_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

static int corpus_equal(const ct_corpus *a, const ct_corpus *b)
{
    if (a->n_utt != b->n_utt || a->n_speakers != b->n_speakers || a->n_mels != b->n_mels) return 0;
    size_t total = 0;
    for (int u = 0; u < a->n_utt; u++) {
        if (a->utt[u].frames != b->utt[u].frames || a->utt[u].offset != b->utt[u].offset || a->utt[u].speaker != b->utt[u].speaker
            || a->video[u] != b->video[u] || strcmp(a->path[u], b->path[u])) return 0;
        total += (size_t)a->utt[u].frames * a->n_mels;
    }
    return memcmp(a->feats, b->feats, total * sizeof *a->feats) == 0;
}

void suite_prep(void)
{
    static char out[1 << 16];
    char args[2048];
    int rc;
    snprintf(root, sizeof root, "/tmp/ctrain_prep_XXXXXX");
    if (!mkdtemp(root)) { t_case("prep/temp dir"); t_check(0, "mkdtemp failed"); return; }
    mkdirs("wav");
    mkdirs("empty");
    snprintf(tree, sizeof tree, "%s/wav", root);

    t_case("prep/stores the good utterances, reports and counts each bad file, exits 0");
    base = tree;
    build_tree();
    base = root;
    snprintf(args, sizeof args, "prep voxceleb --wav %s --out %s --threads 1", tree, P("s1.h5"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(strstr(out, "stored 12, skipped 0 already stored, rejected 4:") != NULL, "summary missing: %s", out);
    for (int i = 0; i < NB; i++) {
        char full[512];
        snprintf(full, sizeof full, "%s/%s", tree, BAD[i].rel);
        const char *line = strstr(out, full);   /* the report on stderr names the full path ... */
        t_check(line && strstr(line, BAD[i].reason), "no report of %s with \"%s\": %s", full, BAD[i].reason, out);
        char summ[512];
        snprintf(summ, sizeof summ, "  %s (", BAD[i].rel);   /* ... and the summary lists it with its reason */
        const char *s = strstr(out, summ);
        t_check(s && strstr(s, BAD[i].reason), "summary does not list %s with \"%s\"", BAD[i].rel, BAD[i].reason);
    }
    t_check(strstr(out, "notes.txt") == NULL, "a .txt file was looked at: %s", out);
    ct_corpus c1 = { 0 };
    if (t_check(ct_featstore_load(&c1, P("s1.h5")) == CT_OK, "load: %s", ct_last_error()) && t_check(c1.n_utt == NG, "%d utterances", c1.n_utt)) {
        t_check(c1.n_speakers == 3 && c1.n_mels == 40, "%d speakers, %d mels", c1.n_speakers, c1.n_mels);
        for (int u = 0; u < NG; u++) {
            t_check(!strcmp(c1.path[u], GOOD[u]), "utt %d path %s, want %s (sorted)", u, c1.path[u], GOOD[u]);
            t_check(!strncmp(c1.speaker_name[c1.utt[u].speaker], GOOD[u], 7), "utt %d speaker %s", u, c1.speaker_name[c1.utt[u].speaker]);
            t_check(c1.video[u] == u / 2, "utt %d video %d, want %d", u, c1.video[u], u / 2);
        }
        /* the stored features are exactly what io/audio + io/fbank make of the file */
        int bad = 0;
        ct_fbank_config fc;
        ct_fbank_config_default(&fc);
        ct_fbank *fb = NULL;
        for (int u = 0; u < NG && ct_fbank_create(&fb, &fc) == CT_OK; u++) {
            char full[512];
            snprintf(full, sizeof full, "%s/%s", tree, GOOD[u]);
            float *x = NULL;
            size_t n = 0;
            if (ct_audio_read(&x, &n, full, 0) == CT_OK) {
                size_t T = ct_fbank_frames(n);
                float *f = t_alloc(T * 40);
                ct_fbank_compute(fb, f, x, n);
                bad += (size_t)c1.utt[u].frames != T || memcmp(f, c1.feats + c1.utt[u].offset, T * 40 * sizeof *f) != 0;
                free(f);
            } else bad++;
            free(x);
            ct_fbank_free(fb);
            fb = NULL;
        }
        t_check(bad == 0, "%d stored utterances differ from io/audio + io/fbank", bad);
        t_check(c1.utt[5].frames == (int)ct_fbank_frames((size_t)(2.2 * 16000)), "FLAC at 22.05 kHz stereo: %d frames", c1.utt[5].frames);
    }

    t_case("prep/--threads 1 and --threads 2 write byte-identical stores");
    snprintf(args, sizeof args, "prep voxceleb --wav %s --out %s --threads 2", tree, P("s2.h5"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "stored 12, skipped 0 already stored, rejected 4:"), "exit %d: %s", rc, out);
    t_check(file_bytes_equal(P("s1.h5"), P("s2.h5")), "the two files differ");
    ct_corpus c2 = { 0 };
    if (t_check(ct_featstore_load(&c2, P("s2.h5")) == CT_OK, "load: %s", ct_last_error()))
        t_check(c1.n_utt == NG && corpus_equal(&c1, &c2), "the loaded stores differ");
    ct_corpus_free(&c2);

    t_case("prep/a second run skips what is stored; a third adds a new file");
    snprintf(args, sizeof args, "prep voxceleb --wav %s --out %s --threads 2", tree, P("s1.h5"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "stored 0, skipped 12 already stored, rejected 4:"), "exit %d: %s", rc, out);
    base = tree;
    mkdirs("id10004/vidGGG");
    write_utt("id10004/vidGGG/00001.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, 1.8, 50);
    base = root;
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "stored 1, skipped 12 already stored, rejected 4:"), "exit %d: %s", rc, out);
    ct_corpus c3 = { 0 };
    if (t_check(ct_featstore_load(&c3, P("s1.h5")) == CT_OK, "load: %s", ct_last_error())
        && t_check(c3.n_utt == NG + 1 && c3.n_speakers == 4, "%d utterances, %d speakers", c3.n_utt, c3.n_speakers)) {
        t_check(!strcmp(c3.path[NG], "id10004/vidGGG/00001.wav") && !strcmp(c3.speaker_name[3], "id10004"), "new utterance");
        t_check(c1.n_utt == NG && !memcmp(c3.feats, c1.feats, (c1.utt[NG - 1].offset + (size_t)c1.utt[NG - 1].frames * 40) * sizeof *c1.feats),
                "the stored utterances changed");
    }
    ct_corpus_free(&c3);
    ct_corpus_free(&c1);

    t_case("prep/--mels other than the store's is refused");
    snprintf(args, sizeof args, "prep voxceleb --wav %s --out %s --mels 24", tree, P("s1.h5"));
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc != 0 && rc != 134 && strstr(out, "--mels 40"), "exit %d: %s", rc, out);

    t_case("prep/empty, missing, wrong-layout and all-bad directories: clear error, non-zero exit");
    struct { const char *dir, *expect; } bad[] = {
        { "empty", "the directory is empty" },
        { "nothere", "No such file or directory" },
        { "flat", "no audio files in the VoxCeleb layout" },
        { "allbad", "no utterance could be stored" },
        { "", "did you mean --wav" },   /* the parent of wav/ */
    };
    mkdirs("flat");
    write_utt("flat/00001.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, 1.5, 1);
    mkdirs("allbad/id1/v1");
    write_utt("allbad/id1/v1/00001.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, 0.3, 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unlink(P("e.h5"));
        snprintf(args, sizeof args, "prep voxceleb --wav %s --out %s", P(bad[i].dir), P("e.h5"));
        rc = t_run_ctrain(args, out, sizeof out);
        t_check(rc > 0 && rc != 134, "--wav %s: exit %d", bad[i].dir, rc);
        t_check(strstr(out, bad[i].expect) != NULL, "--wav %s: message lacks \"%s\": %s", bad[i].dir, bad[i].expect, out);
        t_check(access(P("e.h5"), F_OK) != 0, "--wav %s left a store behind", bad[i].dir);
    }

    t_case("prep/bad options give a clear error");
    struct { const char *args, *expect; } opt[] = {
        { "prep voxceleb --out x.h5", "--wav DIR is required" },
        { "prep voxceleb --wav /tmp", "--out FILE is required" },
        { "prep voxceleb --wav /tmp --out x.h5 --threads 0", "--threads: '0' is not an integer" },
        { "prep voxceleb --wav /tmp --out x.h5 --min-seconds -1", "--min-seconds" },
        { "prep voxceleb --wav /tmp --out x.h5 --bogus", "unknown option '--bogus'" },
        { "prep librispeech", "unknown corpus 'librispeech'" },
    };
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
        rc = t_run_ctrain(opt[i].args, out, sizeof out);
        t_check(rc > 0 && rc != 134 && strstr(out, opt[i].expect), "`ctrain %s` (exit %d): %s", opt[i].args, rc, out);
    }
    rc = t_run_ctrain("prep voxceleb --help", out, sizeof out);
    t_check(rc == 0 && strstr(out, "--min-seconds") && strstr(out, "--threads"), "--help (exit %d)", rc);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    t_check(system(cmd) == 0, "cleanup of %s", root);
}
