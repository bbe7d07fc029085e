/* trials.c - read a VoxCeleb trial list and resolve its paths against a
 * corpus (see trials.h). Paths are found through an open-addressing hash table
 * (FNV-1a, linear probing, at most half full) over the corpus's path[]; a path
 * not found there is looked up again without its extension in a second table,
 * built on first need, over the store's paths without theirs. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include "io/trials.h"

typedef struct {
    int *slot;        /* [cap] index into key, -1 = empty */
    size_t mask;      /* cap - 1, cap a power of two */
    char *const *key; /* [n] the strings indexed: the corpus's paths, or its speakers' names */
    int stems;        /* 1: keyed on the strings without their extension */
} path_index;

/* The length of p without its extension ("id1/v/00001.wav" -> 12): the last '.'
 * after the last '/', if any, and not the name's first character. */
static size_t stem_len(const char *p)
{
    const char *slash = strrchr(p, '/'), *name = slash ? slash + 1 : p, *dot = strrchr(name, '.');
    return dot && dot > name ? (size_t)(dot - p) : strlen(p);
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
    return h;
}

/* The key of string p: all of it, or its stem. */
static size_t key_len(const path_index *ix, const char *p) { return ix->stems ? stem_len(p) : strlen(p); }

static int key_eq(const path_index *ix, const char *stored, const char *p, size_t n)
{
    return key_len(ix, stored) == n && memcmp(stored, p, n) == 0;
}

static ct_status index_build(path_index *ix, char *const *key, int n, int stems)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    ix->slot = ct_malloc(cap * sizeof *ix->slot, "trial list path index");
    if (!ix->slot) return CT_ENOMEM;
    for (size_t i = 0; i < cap; i++) ix->slot[i] = -1;
    ix->mask = cap - 1;
    ix->key = key;
    ix->stems = stems;
    for (int u = 0; u < n; u++) {
        if (!key[u]) continue;
        size_t len = key_len(ix, key[u]), h = (size_t)fnv1a(key[u], len) & ix->mask;
        while (ix->slot[h] >= 0 && !key_eq(ix, key[ix->slot[h]], key[u], len)) h = (h + 1) & ix->mask;
        if (ix->slot[h] < 0) ix->slot[h] = u;   /* a duplicate key keeps its first index */
    }
    return CT_OK;
}

/* The utterance whose key is the first n characters of p, or -1. */
static int index_find(const path_index *ix, const char *p, size_t n)
{
    size_t h = (size_t)fnv1a(p, n) & ix->mask;
    while (ix->slot[h] >= 0) {
        if (key_eq(ix, ix->key[ix->slot[h]], p, n)) return ix->slot[h];
        h = (h + 1) & ix->mask;
    }
    return -1;
}

/* Paths matched with another extension, counted per pair of extensions for the note. */
#define EXT_PAIRS 8
typedef struct {
    char list[EXT_PAIRS][16], store[EXT_PAIRS][16];
    long count[EXT_PAIRS];
    int n;
    long other;   /* pairs beyond EXT_PAIRS */
} ext_swaps;

static void swaps_add(ext_swaps *w, const char *listed, const char *stored)
{
    const char *a = listed + stem_len(listed), *b = stored + stem_len(stored);
    for (int k = 0; k < w->n; k++)
        if (!strcmp(w->list[k], a) && !strcmp(w->store[k], b)) { w->count[k]++; return; }
    if (w->n == EXT_PAIRS || strlen(a) >= sizeof w->list[0] || strlen(b) >= sizeof w->store[0]) { w->other++; return; }
    snprintf(w->list[w->n], sizeof w->list[0], "%s", a);
    snprintf(w->store[w->n], sizeof w->store[0], "%s", b);
    w->count[w->n++] = 1;
}

/* One line: "trials: 1234 paths end in .wav but the store has .m4a; matched by path without extension". */
static void swaps_note(const ext_swaps *w, FILE *note)
{
    if (!note || (w->n == 0 && w->other == 0)) return;
    fprintf(note, "trials:");
    for (int k = 0; k < w->n; k++)
        fprintf(note, "%s %ld path%s end%s in %s but the store has %s", k ? "," : "", w->count[k], w->count[k] == 1 ? "" : "s",
                w->count[k] == 1 ? "s" : "", *w->list[k] ? w->list[k] : "no extension", *w->store[k] ? w->store[k] : "none");
    if (w->other) fprintf(note, "%s %ld more with other extensions", w->n ? "," : "", w->other);
    fprintf(note, "; matched by path without extension\n");
    fflush(note);
}

/* Splits line into at most 4 whitespace-separated fields (in place); returns the count (4 = "more than 3"). */
static int split_fields(char *line, char *f[4])
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == '\v' || *p == '\f') p++;
        if (!*p) break;
        if (n == 4) return 4;
        f[n++] = p;
        while (*p && !(*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == '\v' || *p == '\f')) p++;
        if (*p) *p++ = '\0';
    }
    return n;
}

ct_status ct_trials_load(ct_trial **out, int *n, const char *path, const ct_corpus *c)
{
    return ct_trials_load_note(out, n, path, c, stderr);
}

/* The next trial line of f: *got = 1 with fld[0..2] its label and two paths (pointing into
 * *line), or *got = 0 at the end of the file. Blank lines are skipped; a line that is not
 * 'LABEL PATH1 PATH2' with a label of 0 or 1 is CT_EFORMAT naming the file and the line. */
static ct_status next_trial(FILE *f, const char *path, char **line, size_t *line_cap, long *lineno, char *fld[4], int *got)
{
    *got = 0;
    for (;;) {
        errno = 0;
        if (getline(line, line_cap, f) < 0) {
            if (ferror(f)) return ct_fail(CT_EIO, "%s:%ld: read error: %s", path, *lineno + 1, strerror(errno ? errno : EIO));
            return CT_OK;
        }
        ++*lineno;
        int nf = split_fields(*line, fld);
        if (nf == 0) continue;   /* blank line */
        if (nf != 3)
            return ct_fail(CT_EFORMAT, "%s:%ld: expected 3 fields 'LABEL PATH1 PATH2' (label 1 same speaker, 0 different), "
                           "found %s%d", path, *lineno, nf == 4 ? "more than " : "", nf == 4 ? 3 : nf);
        if (strcmp(fld[0], "0") != 0 && strcmp(fld[0], "1") != 0)
            return ct_fail(CT_EFORMAT, "%s:%ld: label '%.40s' is not 0 (different speakers) or 1 (same speaker)", path, *lineno, fld[0]);
        *got = 1;
        return CT_OK;
    }
}

ct_status ct_trials_load_note(ct_trial **out, int *n, const char *path, const ct_corpus *c, FILE *note)
{
    *out = NULL;
    *n = 0;
    if (!c->path)
        return ct_fail(CT_EINVAL, "%s: the corpus has no file paths (a synthetic corpus?); a trial list needs a feature "
                       "store made by `ctrain prep voxceleb`", path);
    FILE *f = fopen(path, "r");
    if (!f) return ct_fail(CT_EIO, "%s: cannot open the trial list: %s", path, strerror(errno));
    path_index ix = { 0 }, stems = { 0 };
    ext_swaps swaps = { 0 };
    ct_status st = index_build(&ix, c->path, c->n_utt, 0);
    ct_trial *t = NULL;
    int count = 0, cap = 0;
    long lineno = 0;
    char *line = NULL;
    size_t line_cap = 0;
    while (st == CT_OK) {
        char *fld[4];
        int more = 0;
        if ((st = next_trial(f, path, &line, &line_cap, &lineno, fld, &more)) != CT_OK || !more) break;
        int u[2];
        for (int k = 0; k < 2 && st == CT_OK; k++) {
            u[k] = index_find(&ix, fld[1 + k], strlen(fld[1 + k]));
            size_t sl = stem_len(fld[1 + k]);
            if (u[k] < 0 && fld[1 + k][sl]) {   /* not there: the same path with another extension? */
                if (!stems.slot) st = index_build(&stems, c->path, c->n_utt, 1);
                if (st != CT_OK) break;
                if ((u[k] = index_find(&stems, fld[1 + k], sl)) >= 0) swaps_add(&swaps, fld[1 + k], c->path[u[k]]);
            }
            if (u[k] < 0)
                st = ct_fail(CT_EINVAL, "%s:%ld: '%.300s' is not in the feature store (%d utterances); run `ctrain prep "
                             "voxceleb` on the directory that contains it", path, lineno, fld[1 + k], c->n_utt);
        }
        if (st != CT_OK) break;
        if (count == cap) {
            int ncap = cap ? 2 * cap : 1024;
            ct_trial *nt = realloc(t, (size_t)ncap * sizeof *t);
            if (!nt) { st = ct_fail(CT_ENOMEM, "%s: out of memory after %d trials", path, count); break; }
            t = nt;
            cap = ncap;
        }
        if (count == 0x7fffffff) { st = ct_fail(CT_EFORMAT, "%s:%ld: too many trials", path, lineno); break; }
        t[count++] = (ct_trial){ u[0], u[1], fld[0][0] - '0' };
    }
    free(line);
    free(ix.slot);
    free(stems.slot);
    fclose(f);
    if (st == CT_OK && count == 0)
        st = lineno == 0 ? ct_fail(CT_EFORMAT, "%s: no trials: the file is empty; expected lines 'LABEL PATH1 PATH2'", path)
                         : ct_fail(CT_EFORMAT, "%s:1-%ld: no trials: all %ld lines are blank; expected lines 'LABEL PATH1 PATH2'",
                                   path, lineno, lineno);
    if (st != CT_OK) { free(t); return st; }
    swaps_note(&swaps, note);
    *out = t;
    *n = count;
    return CT_OK;
}

ct_status ct_trials_speakers(unsigned char *named, int *n_named, const char *path, const ct_corpus *c)
{
    memset(named, 0, (size_t)c->n_speakers);
    *n_named = 0;
    if (!c->speaker_name)
        return ct_fail(CT_EINVAL, "%s: the corpus has no speaker names (a synthetic corpus?); a trial list needs a feature "
                       "store made by `ctrain prep voxceleb`", path);
    FILE *f = fopen(path, "r");
    if (!f) return ct_fail(CT_EIO, "%s: cannot open the trial list: %s", path, strerror(errno));
    path_index ix = { 0 };
    ct_status st = index_build(&ix, c->speaker_name, c->n_speakers, 0);
    long lineno = 0, trials = 0;
    char *line = NULL;
    size_t line_cap = 0;
    while (st == CT_OK) {
        char *fld[4];
        int more = 0;
        if ((st = next_trial(f, path, &line, &line_cap, &lineno, fld, &more)) != CT_OK || !more) break;
        trials++;
        for (int k = 1; k <= 2; k++) {
            char *slash = strchr(fld[k], '/');   /* the speaker: the path's first component */
            if (slash) *slash = '\0';
            int s = index_find(&ix, fld[k], strlen(fld[k]));
            if (s >= 0 && !named[s]) { named[s] = 1; (*n_named)++; }
        }
    }
    free(line);
    free(ix.slot);
    fclose(f);
    if (st == CT_OK && trials == 0) st = ct_fail(CT_EFORMAT, "%s: no trials; expected lines 'LABEL PATH1 PATH2'", path);
    if (st != CT_OK) { memset(named, 0, (size_t)c->n_speakers); *n_named = 0; }
    return st;
}
