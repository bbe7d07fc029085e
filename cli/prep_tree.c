/* prep_tree.c - the audio tree walk of `ctrain prep voxceleb` (cli/prep.c): every
 * audio file two directory levels below --wav DIR, as DIR/speaker/video/file, listed
 * in sorted order so that the feature store's order never depends on the file system.
 * The contract is in cli/prep_tree.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/prep_tree.h"

static int has_audio_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    char e[8] = { 0 };
    for (size_t i = 0; dot[i] && i < sizeof e - 1; i++) e[i] = (char)tolower((unsigned char)dot[i]);
    return !strcmp(e, ".wav") || !strcmp(e, ".flac") || !strcmp(e, ".ogg") || !strcmp(e, ".m4a");
}

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static ct_status paths_add(cli_audio_paths *l, const char *a, const char *b, const char *c)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        char **r = realloc(l->rel, cap * sizeof *r);
        if (!r) return ct_fail(CT_ENOMEM, "out of memory listing the audio files");
        l->rel = r;
        l->cap = cap;
    }
    size_t n = strlen(a) + strlen(b) + strlen(c) + 3;
    char *s = malloc(n);
    if (!s) return ct_fail(CT_ENOMEM, "out of memory listing the audio files");
    snprintf(s, n, "%s/%s/%s", a, b, c);
    l->rel[l->n++] = s;
    return CT_OK;
}

void cli_audio_paths_free(cli_audio_paths *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->rel[i]);
    free(l->rel);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Entry names of a directory (no "." entries), sorted; *n = count. */
static ct_status list_dir(char ***names, size_t *n, const char *path)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(path);
    if (!d) return ct_fail(CT_EIO, "%s: cannot open the directory (%s)", path, strerror(errno));
    size_t cap = 0;
    struct dirent *e;
    ct_status st = CT_OK;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            char **r = realloc(*names, cap * sizeof *r);
            if (!r) { st = ct_fail(CT_ENOMEM, "out of memory listing %s", path); break; }
            *names = r;
        }
        if (!((*names)[*n] = strdup(e->d_name))) { st = ct_fail(CT_ENOMEM, "out of memory listing %s", path); break; }
        (*n)++;
    }
    closedir(d);
    if (st == CT_OK && *n > 1) qsort(*names, *n, sizeof **names, cmp_str);
    return st;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

ct_status cli_audio_tree_scan(cli_audio_paths *out, const char *dir)
{
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return ct_fail(CT_EIO, "--wav %s: %s; give the directory that holds the speaker directories (" CLI_VOXCELEB_LAYOUT ")", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return ct_fail(CT_EINVAL, "--wav %s: not a directory; give the directory that holds the speaker directories", dir);
    char **spk;
    size_t n_spk, elsewhere = 0;
    CT_TRY(list_dir(&spk, &n_spk, dir));
    if (n_spk == 0) { free_names(spk, n_spk); return ct_fail(CT_EINVAL, "--wav %s: the directory is empty; expected " CLI_VOXCELEB_LAYOUT, dir); }
    ct_status st = CT_OK;
    size_t plen = strlen(dir) + 3 * 256 + 8;
    char *p = malloc(plen);
    if (!p) { free_names(spk, n_spk); return ct_fail(CT_ENOMEM, "out of memory"); }
    for (size_t s = 0; s < n_spk && st == CT_OK; s++) {
        snprintf(p, plen, "%s/%s", dir, spk[s]);
        if (!is_dir(p)) { elsewhere += has_audio_ext(spk[s]); continue; }
        char **vid;
        size_t n_vid;
        if ((st = list_dir(&vid, &n_vid, p)) != CT_OK) break;
        for (size_t v = 0; v < n_vid && st == CT_OK; v++) {
            snprintf(p, plen, "%s/%s/%s", dir, spk[s], vid[v]);
            if (!is_dir(p)) { elsewhere += has_audio_ext(vid[v]); continue; }
            char **fil;
            size_t n_fil;
            if ((st = list_dir(&fil, &n_fil, p)) != CT_OK) break;
            for (size_t k = 0; k < n_fil && st == CT_OK; k++)
                if (has_audio_ext(fil[k])) st = paths_add(out, spk[s], vid[v], fil[k]);
            free_names(fil, n_fil);
        }
        free_names(vid, n_vid);
    }
    free(p);
    free_names(spk, n_spk);
    if (st == CT_OK && out->n == 0) {   /* the parent of VoxCeleb1's wav/ or VoxCeleb2's aac/? */
        char wav[4096], aac[4096];
        snprintf(wav, sizeof wav, "%s/wav", dir);
        snprintf(aac, sizeof aac, "%s/aac", dir);
        int has_wav = is_dir(wav), has_aac = is_dir(aac);
        if (has_wav || has_aac)
            st = ct_fail(CT_EINVAL, "--wav %s: no audio files in the VoxCeleb layout; did you mean --wav %s%s%s?", dir,
                         has_wav ? wav : aac, has_wav && has_aac ? " or --wav " : "", has_wav && has_aac ? aac : "");
        else st = ct_fail(CT_EINVAL, "--wav %s: no audio files in the VoxCeleb layout " CLI_VOXCELEB_LAYOUT "%s", dir,
                          elsewhere ? " (there are audio files, but not two directory levels down)" : "");
    }
    if (st != CT_OK) cli_audio_paths_free(out);
    else qsort(out->rel, out->n, sizeof *out->rel, cmp_str);   /* "a/b/c" order == the nested sorted order, but be sure */
    return st;
}
