/* test_trials.c - reading VoxCeleb trial lists (io/trials.h): a good file with
 * blank lines, tabs and DOS line ends; every malformed case gives its status
 * and a message naming the file and the line; a list the size of VoxCeleb1's
 * test list resolves quickly against a large corpus. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/test.h"
#include "io/trials.h"

/* A synthetic corpus (tiny features) whose utterance u of speaker s has the path
 * "id1SSSS/vid_SSSS_xx/UUUUU.wav". */
static int corpus_with_paths(ct_corpus *c, int speakers, int utts, int frames, int mels)
{
    ct_synth_config sc = { .speakers = speakers, .utts_per_speaker = utts, .min_frames = frames, .max_frames = frames,
                           .n_mels = mels, .noise = 1.0f, .seed = 3 };
    if (!t_check(ct_corpus_synthetic(c, &sc) == CT_OK, "synthetic corpus: %s", ct_last_error())) return 0;
    c->path = calloc((size_t)c->n_utt, sizeof *c->path);
    c->speaker_name = calloc((size_t)c->n_speakers, sizeof *c->speaker_name);
    for (int s = 0; s < c->n_speakers; s++) {
        char b[32];
        snprintf(b, sizeof b, "id1%04d", s);
        c->speaker_name[s] = strdup(b);
    }
    for (int u = 0; u < c->n_utt; u++) {
        char b[64];
        int s = c->utt[u].speaker, k = u % utts;
        snprintf(b, sizeof b, "id1%04d/vid_%04d_%02d/%05d.wav", s, s, k / 3, k + 1);
        c->path[u] = strdup(b);
    }
    return 1;
}

/* Writes text to a new temporary file; returns its path (static buffer per slot). */
static const char *temp_file(const char *text, int slot)
{
    static char names[8][64];
    snprintf(names[slot], sizeof names[slot], "/tmp/ctrain_trials_XXXXXX");
    int fd = mkstemp(names[slot]);
    if (fd < 0) { t_check(0, "mkstemp failed"); return "/nonexistent"; }
    size_t n = strlen(text);
    t_check(write(fd, text, n) == (ssize_t)n, "write %s", names[slot]);
    close(fd);
    return names[slot];
}

static void expect_fail(const ct_corpus *c, const char *text, ct_status want, const char *line_tag, const char *what)
{
    const char *f = temp_file(text, 1);
    ct_trial *t = (ct_trial *)1;
    int n = -1;
    ct_status st = ct_trials_load(&t, &n, f, c);
    const char *msg = ct_last_error();
    t_check(st == want, "%s: status %s, want %s (%s)", line_tag, ct_status_name(st), ct_status_name(want), msg);
    t_check(t == NULL && n == 0, "%s: outputs not cleared on failure", line_tag);
    t_check(strstr(msg, f) != NULL, "%s: message does not name the file %s: %s", line_tag, f, msg);
    t_check(strstr(msg, line_tag) != NULL, "message lacks the line '%s': %s", line_tag, msg);
    t_check(strstr(msg, what) != NULL, "%s: message lacks \"%s\": %s", line_tag, what, msg);
    unlink(f);
}

void suite_trials(void)
{
    ct_corpus c = { 0 };
    if (!corpus_with_paths(&c, 4, 6, 3, 2)) return;

    t_case("trials/good file: blank lines, tabs, trailing spaces, CRLF");
    {
        const char *text =
            "1 id10000/vid_0000_00/00001.wav id10000/vid_0000_01/00005.wav\n"
            "\n"
            "0\tid10000/vid_0000_00/00002.wav\tid10003/vid_0003_01/00006.wav   \n"
            "   \n"
            "1 id10002/vid_0002_00/00003.wav  id10002/vid_0002_00/00001.wav\r\n"
            "0 id10001/vid_0001_01/00004.wav id10002/vid_0002_01/00004.wav";   /* no final newline */
        const char *f = temp_file(text, 0);
        ct_trial *t = NULL;
        int n = 0;
        ct_status st = ct_trials_load(&t, &n, f, &c);
        if (t_check(st == CT_OK, "load: %s", ct_last_error()) && t_check(n == 4, "n = %d, want 4", n)) {
            int want[4][3] = { { 1, 0, 4 }, { 0, 1, 3 * 6 + 5 }, { 1, 2 * 6 + 2, 2 * 6 + 0 }, { 0, 6 + 3, 2 * 6 + 3 } };
            for (int k = 0; k < 4; k++)
                t_check(t[k].label == want[k][0] && t[k].a == want[k][1] && t[k].b == want[k][2],
                        "trial %d: label %d a %d b %d, want %d %d %d", k, t[k].label, t[k].a, t[k].b,
                        want[k][0], want[k][1], want[k][2]);
        }
        free(t);
        unlink(f);
    }

    t_case("trials/malformed lines name the file and the line");
    expect_fail(&c, "1 id10000/vid_0000_00/00001.wav id10000/vid_0000_01/00005.wav\n"
                    "1 id10000/vid_0000_00/00001.wav\n", CT_EFORMAT, ":2:", "expected 3 fields");
    expect_fail(&c, "\n\n1 id10000/vid_0000_00/00001.wav id10000/vid_0000_01/00005.wav extra\n",
                CT_EFORMAT, ":3:", "expected 3 fields");
    expect_fail(&c, "1 id10000/vid_0000_00/00001.wav id10000/vid_0000_01/00005.wav\n"
                    "2 id10000/vid_0000_00/00001.wav id10000/vid_0000_01/00005.wav\n", CT_EFORMAT, ":2:", "label '2'");
    expect_fail(&c, "same id10000/vid_0000_00/00001.wav id10000/vid_0000_01/00005.wav\n", CT_EFORMAT, ":1:", "label 'same'");
    expect_fail(&c, "1 id10000/vid_0000_00/00001.wav id10000/vid_0000_01/00005.wav\n"
                    "0 id10000/vid_0000_00/00001.wav id10000/vid_0000_01/00005.wav\n"
                    "0 id10000/vid_0000_00/00001.wav id19999/nope/00001.wav\n", CT_EINVAL, ":3:", "id19999/nope/00001.wav");
    expect_fail(&c, "0 id19999/nope/00001.wav id10000/vid_0000_00/00001.wav\n", CT_EINVAL, ":1:", "ctrain prep voxceleb");

    t_case("trials/empty and blank files, missing file, corpus without paths");
    expect_fail(&c, "", CT_EFORMAT, ": no trials", "empty");
    expect_fail(&c, "\n  \n\t\n", CT_EFORMAT, ":1-3:", "blank");
    {
        ct_trial *t = NULL;
        int n = 0;
        ct_status st = ct_trials_load(&t, &n, "/nonexistent/veri_test.txt", &c);
        t_check(st == CT_EIO && strstr(ct_last_error(), "/nonexistent/veri_test.txt"), "missing file: %s %s",
                ct_status_name(st), ct_last_error());
        ct_corpus syn = { 0 };
        ct_synth_config sc = { .speakers = 2, .utts_per_speaker = 2, .min_frames = 2, .max_frames = 2, .n_mels = 2, .seed = 1 };
        if (t_check(ct_corpus_synthetic(&syn, &sc) == CT_OK, "%s", ct_last_error())) {
            const char *f = temp_file("1 a b\n", 2);
            st = ct_trials_load(&t, &n, f, &syn);
            t_check(st == CT_EINVAL && strstr(ct_last_error(), "prep"), "corpus without paths: %s %s",
                    ct_status_name(st), ct_last_error());
            unlink(f);
        }
        ct_corpus_free(&syn);
    }
    ct_corpus_free(&c);

    t_case("trials/40000 trials over 20000 utterances");
    {
        ct_corpus big = { 0 };
        if (!corpus_with_paths(&big, 2000, 10, 1, 1)) return;
        size_t cap = 40000 * 80;
        char *text = malloc(cap), *p = text;
        ct_rng r;
        ct_rng_seed(&r, 9, 1);
        static int want_a[40000], want_b[40000];
        for (int k = 0; k < 40000; k++) {
            want_a[k] = (int)ct_rng_below(&r, (uint32_t)big.n_utt);
            want_b[k] = (int)ct_rng_below(&r, (uint32_t)big.n_utt);
            p += sprintf(p, "%d %s %s\n", k & 1, big.path[want_a[k]], big.path[want_b[k]]);
        }
        const char *f = temp_file(text, 3);
        free(text);
        ct_trial *t = NULL;
        int n = 0, bad = 0;
        ct_status st = ct_trials_load(&t, &n, f, &big);
        if (t_check(st == CT_OK && n == 40000, "load: n %d: %s", n, ct_last_error()))
            for (int k = 0; k < n; k++) bad += t[k].a != want_a[k] || t[k].b != want_b[k] || t[k].label != (k & 1);
        t_check(bad == 0, "%d trials resolved wrongly", bad);
        free(t);
        unlink(f);
        ct_corpus_free(&big);
    }
}
