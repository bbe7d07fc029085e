/* prep.c - `ctrain prep voxceleb`: turn a VoxCeleb-style tree of audio files into
 * a feature store (io/featstore.h) that training reads.
 *
 *   DIR/idNNNNN/<video id>/NNNNN.wav     (also .flac and .ogg)
 *   DIR/idNNNNN/<video id>/NNNNN.m4a     (AAC: VoxCeleb2's aac/ tree)
 *
 * DIR is VoxCeleb1's wav/ or VoxCeleb2's aac/ directory, and a tree may mix the
 * formats. Each utterance is stored under its path relative to DIR, extension and
 * all (io/trials.c matches a list naming .wav against a store of .m4a).
 *
 * The paths are found and sorted by the tree walk (cli/prep_tree.h), so the
 * store's order never depends on the file system.
 * Worker threads (--threads N) read the audio and compute the log-mel features
 * (io/audio.h, io/fbank.h); the main thread alone writes to HDF5, in path order,
 * so the file is the same bit for bit whatever N is. At most 4 N utterances are
 * in flight, which bounds the memory. The store is flushed every FLUSH_EVERY
 * utterances, so an interrupted run keeps what it flushed, and running the same
 * command again skips every utterance already stored and adds the rest.
 *
 * A bad file (unreadable, not audio, empty, truncated, too short) is reported on
 * stderr with its path and reason, counted and skipped; one bad file never stops
 * the run. The exit status is 0 when the store holds at least one utterance.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/prep_tree.h"
#include "core/threads.h"
#include "io/audio.h"
#include "io/audio_m4a.h"
#include "io/fbank.h"
#include "io/featstore.h"

#define FLUSH_EVERY 16

static void prep_usage(FILE *out)
{
    fprintf(out,
        "usage: ctrain prep voxceleb --wav DIR --out FILE [options]\n"
        "\n"
        "Computes log-mel features of every utterance under DIR and stores them in the HDF5\n"
        "feature store FILE, which `ctrain train` reads. DIR has the VoxCeleb layout\n"
        "  " CLI_VOXCELEB_LAYOUT "\n"
        "(VoxCeleb1's wav/ directory, or VoxCeleb2's aac/ of AAC .m4a files, read through\n"
        "FFmpeg; a tree may mix the formats). Audio of any rate and channel count is\n"
        "converted to 16 kHz mono; features are 25 ms Hamming windows every 10 ms, log mel\n"
        "filterbanks, normalised per utterance.\n"
        "\n"
        "If FILE exists, utterances already in it are skipped and new ones added, so an\n"
        "interrupted run can simply be started again. A file that cannot be used\n"
        "(unreadable, not audio, empty, truncated, too short) is reported and skipped.\n"
        "\n"
        "options:\n"
        "  --wav DIR          the directory of speaker directories, wav/ or aac/ (required)\n"
        "  --out FILE         the feature store to create or add to (required)\n"
        "  --threads N        worker threads reading audio and computing features\n"
        "                     (default: the number of cores)\n"
        "  --mels N           mel bands (default 40; must match an existing FILE)\n"
        "  --dtype T          float32 (default) or float16: half the bytes, each value\n"
        "                     kept to 11 significant bits (an existing FILE keeps its own)\n"
        "  --min-seconds X    reject shorter recordings (default 1.025: a 1 s training\n"
        "                     crop plus one 25 ms window)\n"
        "  --progress, --no-progress\n"
        "                     show a progress bar on stderr (default: only when stderr is a terminal)\n");
}

/* ---- the worker pool ---- */

typedef struct {
    float *feats;
    int frames, done;
    size_t samples;
    ct_status st;
    char *msg;   /* the reason a file was rejected */
} result;

typedef struct {
    const char *dir;
    char **rel;         /* the jobs, in order */
    size_t n, next_job, written, window;
    int stop;
    const ct_fbank *fb;
    double min_seconds;
    result *res;
    pthread_mutex_t mu;
    pthread_cond_t job_cv, done_cv;
} pool;

static void compute_one(pool *p, size_t i)
{
    result *r = &p->res[i];
    size_t len = strlen(p->dir) + strlen(p->rel[i]) + 2;
    char *path = malloc(len);
    float *x = NULL;
    size_t n = 0;
    ct_status st = path ? CT_OK : ct_fail(CT_ENOMEM, "out of memory");
    if (st == CT_OK) {
        snprintf(path, len, "%s/%s", p->dir, p->rel[i]);
        st = ct_audio_read(&x, &n, path, p->min_seconds);
    }
    size_t T = ct_fbank_frames(n);
    if (st == CT_OK && (T == 0 || T > 0x7fffffff))
        st = ct_fail(CT_EFORMAT, "%s: %.3f s of audio gives %zu frames; lower --min-seconds no further than 0.025", path, (double)n / 16000, T);
    if (st == CT_OK) {
        r->feats = malloc(T * (size_t)ct_fbank_n_mels(p->fb) * sizeof *r->feats);
        st = r->feats ? ct_fbank_compute(p->fb, r->feats, x, n) : ct_fail(CT_ENOMEM, "%s: out of memory for %zu frames", path, T);
    }
    if (st == CT_OK) { r->frames = (int)T; r->samples = n; }
    else {
        free(r->feats);
        r->feats = NULL;
        r->msg = strdup(ct_last_error());   /* ct_last_error is per thread: copy it for the main thread */
    }
    r->st = st;
    free(x);
    free(path);
}

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->next_job < p->n && p->next_job >= p->written + p->window) pthread_cond_wait(&p->job_cv, &p->mu);
        if (p->stop || p->next_job >= p->n) { pthread_mutex_unlock(&p->mu); return NULL; }
        size_t i = p->next_job++;
        pthread_mutex_unlock(&p->mu);
        compute_one(p, i);
        pthread_mutex_lock(&p->mu);
        p->res[i].done = 1;
        pthread_cond_broadcast(&p->done_cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void progress(size_t done, size_t n, double audio_s, double t0)
{
    int width = 30, fill = n ? (int)((double)width * (double)done / (double)n) : width;
    double el = now_s() - t0;
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu  %.0f audio-s/s ", fill, "==============================", width - fill, "",
            done, n, el > 0 ? audio_s / el : 0.0);
    fflush(stderr);
}

/* The reason part of a message "PATH: reason; what to do". */
static void short_reason(char *out, size_t n, const char *msg, const char *path)
{
    size_t pl = strlen(path);
    if (!strncmp(msg, path, pl) && msg[pl] == ':' && msg[pl + 1] == ' ') msg += pl + 2;
    size_t k = strcspn(msg, ";");
    if (k >= n) k = n - 1;
    memcpy(out, msg, k);
    out[k] = '\0';
}

int cmd_prep(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) { prep_usage(argc < 1 ? stderr : stdout); return argc < 1 ? 2 : 0; }
    if (strcmp(argv[0], "voxceleb")) {
        fprintf(stderr, "ctrain prep: unknown corpus '%s' (only 'voxceleb'; see ctrain prep --help)\n", argv[0]);
        return 2;
    }
    const char *wav = NULL, *out = NULL, *dtype_name = NULL;
    ct_feat_dtype dtype = CT_FEAT_DEFAULT;
    int threads = ct_cpu_count(), mels = 40, show = isatty(2);
    float min_s = 1.025f;
    ct_status st = CT_OK;
    ct_args a = { .argc = argc, .i = 1, .argv = argv };
    while (a.i < argc && st == CT_OK) {
        if (ct_args_flag(&a, "--help") || ct_args_flag(&a, "-h")) { prep_usage(stdout); return 0; }
        if (ct_args_end(&a)) continue;
        if (ct_args_flag(&a, "--progress")) { show = 1; continue; }
        if (ct_args_flag(&a, "--no-progress")) { show = 0; continue; }
        if (ct_args_str(&a, "--dtype", &dtype_name, &st)) {
            if (st == CT_OK) st = ct_feat_dtype_parse(&dtype, dtype_name);
            continue;
        }
        if (ct_args_str(&a, "--wav", &wav, &st) || ct_args_str(&a, "--out", &out, &st)
            || ct_args_int(&a, "--threads", &threads, 1, 1024, &st) || ct_args_int(&a, "--mels", &mels, 4, 256, &st)
            || ct_args_float(&a, "--min-seconds", &min_s, 0.025f, 3600.0f, &st))
            continue;
        st = ct_args_unknown(&a, "ctrain prep voxceleb --help");
    }
    if (st == CT_OK && !wav) st = ct_fail(CT_EINVAL, "--wav DIR is required (the directory of speaker directories)");
    if (st == CT_OK && !out) st = ct_fail(CT_EINVAL, "--out FILE is required (the feature store to create or add to)");
    if (st != CT_OK) { fprintf(stderr, "ctrain prep: %s\n", ct_last_error()); return 2; }
    if (threads < 1) threads = 1;

    cli_audio_paths all;
    if ((st = cli_audio_tree_scan(&all, wav)) != CT_OK) { fprintf(stderr, "ctrain prep: %s\n", ct_last_error()); return 1; }
    size_t n_m4a = 0;
    for (size_t i = 0; i < all.n; i++) {
        const char *dot = strrchr(all.rel[i], '.');
        n_m4a += dot && !strcasecmp(dot, ".m4a");
    }
    if (n_m4a > 0 && !ct_audio_m4a_built()) {   /* one line for the tree, not one per file */
        fprintf(stderr, "ctrain prep: %zu of the files under %s are AAC .m4a, and this ctrain was built without FFmpeg: build "
                "ctrain from source with FFmpeg's libraries (scripts/deps.sh build, then make), or convert them to WAV\n", n_m4a, wav);
        cli_audio_paths_free(&all);
        return 1;
    }
    struct stat sb;
    int existed = stat(out, &sb) == 0;
    ct_featstore *w = NULL;
    ct_fbank_config fc;
    ct_fbank_config_default(&fc);
    fc.n_mels = mels;
    ct_fbank *fb = NULL;
    if ((st = ct_fbank_create(&fb, &fc)) != CT_OK || (st = ct_featstore_open_dtype(&w, out, mels, dtype)) != CT_OK) {
        fprintf(stderr, "ctrain prep: %s\n", ct_last_error());
        ct_fbank_free(fb);
        cli_audio_paths_free(&all);
        return 1;
    }
    /* the jobs: every path not stored yet */
    pool p = { .dir = wav, .fb = fb, .min_seconds = min_s, .window = 4 * (size_t)threads };
    p.rel = malloc((all.n ? all.n : 1) * sizeof *p.rel);
    p.res = calloc(all.n ? all.n : 1, sizeof *p.res);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    if (!p.rel || !p.res || !th) {
        fprintf(stderr, "ctrain prep: out of memory\n");
        free(p.rel); free(p.res); free(th); ct_featstore_close(w); ct_fbank_free(fb); cli_audio_paths_free(&all);
        return 1;
    }
    size_t skipped = 0;
    for (size_t i = 0; i < all.n; i++) {
        if (ct_featstore_has(w, all.rel[i])) skipped++;
        else p.rel[p.n++] = all.rel[i];
    }
    printf("ctrain prep voxceleb: %zu audio files under %s, %zu already in %s, %zu to do with %d thread%s\n",
           all.n, wav, skipped, out, p.n, threads, threads == 1 ? "" : "s");
    fflush(stdout);

    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.job_cv, NULL);
    pthread_cond_init(&p.done_cv, NULL);
    int started = 0;
    for (int k = 0; k < threads && (size_t)k < p.n; k++) {
        if (pthread_create(&th[k], NULL, worker, &p) != 0) break;
        started++;
    }
    if (p.n > 0 && started == 0) { fprintf(stderr, "ctrain prep: cannot start a worker thread\n"); st = CT_EIO; }

    size_t stored = 0, rejected = 0;
    double audio_s = 0, t0 = now_s(), last_draw = 0;
    char **bad = calloc(p.n ? p.n : 1, sizeof *bad);   /* "rel (reason)" of each rejected file */
    for (size_t i = 0; i < p.n && st == CT_OK; i++) {
        pthread_mutex_lock(&p.mu);
        while (!p.res[i].done) pthread_cond_wait(&p.done_cv, &p.mu);
        pthread_mutex_unlock(&p.mu);
        result *r = &p.res[i];
        if (r->st == CT_OK) {
            const char *rel = p.rel[i];
            char spk[256], vid[256];
            size_t a1 = strcspn(rel, "/"), a2 = strcspn(rel + a1 + 1, "/");
            snprintf(spk, sizeof spk, "%.*s", (int)a1, rel);
            snprintf(vid, sizeof vid, "%.*s", (int)a2, rel + a1 + 1);
            st = ct_featstore_append(w, rel, spk, vid, r->feats, r->frames);
            if (st == CT_OK && (++stored % FLUSH_EVERY) == 0) st = ct_featstore_flush(w);
            audio_s += (double)r->samples / CT_AUDIO_RATE;
            if (st != CT_OK) fprintf(stderr, "%sctrain prep: %s\n", show ? "\n" : "", ct_last_error());
        } else if (r->st == CT_ENOMEM) {
            fprintf(stderr, "%sctrain prep: %s\n", show ? "\n" : "", r->msg ? r->msg : "out of memory");
            st = CT_ENOMEM;
        } else {
            rejected++;
            fprintf(stderr, "%sctrain prep: rejected %s\n", show ? "\n" : "", r->msg ? r->msg : p.rel[i]);
            char full[4096], why[512];
            snprintf(full, sizeof full, "%s/%s", wav, p.rel[i]);
            short_reason(why, sizeof why, r->msg ? r->msg : "unknown error", full);
            size_t len = strlen(p.rel[i]) + strlen(why) + 4;
            if (bad && (bad[rejected - 1] = malloc(len))) snprintf(bad[rejected - 1], len, "%s (%s)", p.rel[i], why);
        }
        free(r->feats);
        free(r->msg);
        r->feats = NULL;
        r->msg = NULL;
        pthread_mutex_lock(&p.mu);
        p.written = i + 1;
        pthread_cond_broadcast(&p.job_cv);
        pthread_mutex_unlock(&p.mu);
        if (show && (now_s() - last_draw > 0.1 || i + 1 == p.n)) { progress(i + 1, p.n, audio_s, t0); last_draw = now_s(); }
    }
    pthread_mutex_lock(&p.mu);
    p.stop = 1;
    pthread_cond_broadcast(&p.job_cv);
    pthread_mutex_unlock(&p.mu);
    for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
    for (size_t i = 0; i < p.n; i++) { free(p.res[i].feats); free(p.res[i].msg); }
    if (show && p.n) fputc('\n', stderr);
    double el = now_s() - t0;

    int n_store = ct_featstore_n_utt(w);
    ct_status cst = ct_featstore_close(w);
    if (cst != CT_OK) fprintf(stderr, "ctrain prep: %s\n", ct_last_error());
    if (st == CT_OK) st = cst;

    printf("stored %zu, skipped %zu already stored, rejected %zu%s\n", stored, skipped, rejected, rejected ? ":" : "");
    for (size_t k = 0; bad && k < rejected; k++) printf("  %s\n", bad[k] ? bad[k] : "(out of memory)");
    if (stored > 0)
        printf("%.1f s of audio in %.2f s: %.1f utterances/s, %.0f audio-seconds/s with %d thread%s; %s holds %d utterances\n",
               audio_s, el, (double)stored / el, audio_s / el, threads, threads == 1 ? "" : "s", out, n_store);
    fflush(stdout);
    for (size_t k = 0; bad && k < rejected; k++) free(bad[k]);
    free(bad);
    pthread_cond_destroy(&p.job_cv);
    pthread_cond_destroy(&p.done_cv);
    pthread_mutex_destroy(&p.mu);
    free(th);
    free(p.res);
    free(p.rel);
    ct_fbank_free(fb);
    cli_audio_paths_free(&all);
    if (st != CT_OK) return 1;
    if (n_store == 0) {
        if (!existed) unlink(out);   /* do not leave an empty store behind */
        fprintf(stderr, "ctrain prep: no utterance could be stored (every file was rejected, see above); %s\n",
                existed ? "the store is still empty" : "no store was written");
        return 1;
    }
    return 0;
}
