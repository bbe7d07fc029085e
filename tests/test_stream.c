/* test_stream.c - feature stores at scale: float16 conversions (every half, and
 * float32 rounding checked against the CPU's own F16C instructions where it has
 * them), float16 stores, the streamed reader (every crop the same floats as the
 * loaded store, through the chunk map or, for a compressed store, H5Dread; the
 * same batches and crop stream, read by one thread or several; a store truncated
 * while it is read named in one error), the memory budget's choice and its refusal, and
 * `ctrain train` streamed against loaded: bit-identical weights, also after a
 * resume, and `ctrain eval` on a streamed store, a 3-minute utterance embedded whole. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/test.h"
#include "core/half.h"
#include "io/corpus.h"
#include "io/featstore.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_F16C_REF 1
__attribute__((target("f16c"))) static uint16_t f16c_narrow(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
__attribute__((target("f16c"))) static float f16c_widen(uint16_t h) { return _cvtsh_ss(h); }
#endif

/* Crops read from `got` (a streamed store) against the loaded `ref`'s floats: every
 * utterance, starts every `step` frames, lengths 1, 1 + len_step, ...: how many failed or
 * differ (*crops: how many were read). */
static int crops_differ(const ct_corpus *got, const ct_corpus *ref, int step, int len_step, int *crops)
{
    int frames = 0;
    for (int u = 0; u < ref->n_utt; u++) frames = ref->utt[u].frames > frames ? ref->utt[u].frames : frames;
    float *x = t_alloc((size_t)frames * ref->n_mels);
    int bad = 0;
    *crops = 0;
    for (int u = 0; u < ref->n_utt; u++)
        for (int first = 0; first < ref->utt[u].frames; first += step)
            for (int n = 1; first + n <= ref->utt[u].frames; n += len_step, (*crops)++) {
                bad += ct_corpus_frames(got, u, first, n, x) != CT_OK;
                bad += memcmp(x, ref->feats + ref->utt[u].offset + (size_t)first * ref->n_mels,
                              (size_t)n * ref->n_mels * sizeof *x) != 0;
            }
    free(x);
    return bad;
}

static uint32_t bits(float f) { uint32_t x; memcpy(&x, &f, sizeof x); return x; }
static float from_bits(uint32_t x) { float f; memcpy(&f, &x, sizeof f); return f; }

static void half_cases(void)
{
    t_case("stream/float16: every half widens exactly and narrows back to itself");
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ct_float_from_half((uint16_t)h);
        int nan = ((h >> 10) & 31) == 31 && (h & 0x3ff);
        if (nan) bad += !isnan(f);
        else bad += ct_half_from_float(f) != h;
    }
    t_check(bad == 0, "%d halves do not round-trip", bad);

    t_case("stream/float16: narrowing rounds to nearest, ties to even, overflow to inf, underflow to zero");
    t_check(ct_half_from_float(1.0f) == 0x3c00 && ct_half_from_float(-2.0f) == 0xc000, "1 and -2");
    t_check(ct_half_from_float(from_bits(0x3f801000)) == 0x3c00, "1 + 2^-11 (a tie) goes to the even 1.0");
    t_check(ct_half_from_float(from_bits(0x3f803000)) == 0x3c02, "1 + 3*2^-11 (a tie) goes to the even 1 + 2^-9");
    t_check(ct_half_from_float(from_bits(0x3f801001)) == 0x3c01, "just above the tie rounds up");
    t_check(ct_half_from_float(65504.0f) == 0x7bff && ct_half_from_float(65519.99f) == 0x7bff && ct_half_from_float(65520.0f) == 0x7c00,
            "the largest half, and overflow at 65520");
    t_check(ct_half_from_float(ldexpf(1, -24)) == 0x0001 && ct_half_from_float(ldexpf(1, -25)) == 0x0000
            && ct_half_from_float(ldexpf(1.5f, -25)) == 0x0001 && ct_half_from_float(ldexpf(3, -25)) == 0x0002,
            "subnormals: 2^-24, the tie 2^-25 to zero, 1.5*2^-25 up, 3*2^-25 to the even 2");
    t_check(ct_half_from_float(ldexpf(1, -14)) == 0x0400 && ct_half_from_float(ldexpf(2047, -25)) == 0x0400,
            "the smallest normal, reached from below by rounding");
    t_check(ct_half_from_float(INFINITY) == 0x7c00 && ct_half_from_float(-INFINITY) == 0xfc00
            && (ct_half_from_float(NAN) & 0x7c00) == 0x7c00 && (ct_half_from_float(NAN) & 0x3ff), "inf and NaN");

#ifdef HAVE_F16C_REF
    if (!__builtin_cpu_supports("f16c")) { t_skip("stream/float16 against F16C: this CPU has no F16C"); return; }
    t_case("stream/float16: the same bits as the CPU's F16C conversions (every half; every 61st float32 bit pattern)");
    bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = ct_float_from_half((uint16_t)h), b = f16c_widen((uint16_t)h);
        bad += bits(a) != bits(b) && !(isnan(a) && isnan(b));
    }
    for (uint64_t x = 0; x < (1ULL << 32); x += 61) {
        float f = from_bits((uint32_t)x);
        if (isnan(f)) continue;
        bad += ct_half_from_float(f) != f16c_narrow(f);
    }
    t_check(bad == 0, "%d conversions differ from F16C", bad);
#endif
}

/* A synthetic corpus written to a store of `dtype`. */
static int make_store(const char *path, ct_corpus *c, ct_feat_dtype dtype)
{
    ct_synth_config sc = { .speakers = 10, .utts_per_speaker = 5, .min_frames = 12, .max_frames = 90, .n_mels = 8, .noise = 0.5f, .seed = 9 };
    if (!t_check(ct_corpus_synthetic(c, &sc) == CT_OK, "synthetic: %s", ct_last_error())) return 0;
    unlink(path);
    ct_featstore *w = NULL;
    if (!t_check(ct_featstore_open_dtype(&w, path, c->n_mels, dtype) == CT_OK, "open %s: %s", path, ct_last_error())) return 0;
    int ok = 1;
    for (int u = 0; u < c->n_utt && ok; u++) {
        char p[64], s[16], v[16];
        snprintf(s, sizeof s, "id1%04d", c->utt[u].speaker);
        snprintf(v, sizeof v, "vid%d", u % 3);
        snprintf(p, sizeof p, "%s/%s/%05d.wav", s, v, u);
        ok = t_check(ct_featstore_append(w, p, s, v, c->feats + c->utt[u].offset, c->utt[u].frames) == CT_OK, "append: %s", ct_last_error());
    }
    return t_check(ct_featstore_close(w) == CT_OK, "close: %s", ct_last_error()) && ok;
}

static void store_cases(const char *dir)
{
    char f32[256], f16[256], cut[256];
    snprintf(f32, sizeof f32, "%s/f32.h5", dir);
    snprintf(f16, sizeof f16, "%s/f16.h5", dir);
    snprintf(cut, sizeof cut, "%s/cut.h5", dir);
    ct_corpus src, src16, a, b;

    t_case("stream/a float16 store holds each value rounded to nearest even, within 2^-11 relative");
    if (make_store(f16, &src16, CT_FEAT_FLOAT16) && t_check(ct_featstore_load(&a, f16) == CT_OK, "load: %s", ct_last_error())) {
        size_t n = src16.utt[src16.n_utt - 1].offset + (size_t)src16.utt[src16.n_utt - 1].frames * src16.n_mels;
        int bad = 0;
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            float want = ct_float_from_half(ct_half_from_float(src16.feats[i]));
            bad += bits(a.feats[i]) != bits(want);
            if (fabsf(src16.feats[i]) > 6.2e-5f) worst = fmax(worst, fabs((double)a.feats[i] - src16.feats[i]) / fabs(src16.feats[i]));
        }
        t_check(bad == 0, "%d values are not the rounded float32", bad);
        t_check(worst <= ldexp(1, -11), "relative error %g > 2^-11", worst);
        ct_featstore *w = NULL;
        t_check(ct_featstore_open_dtype(&w, f16, 8, CT_FEAT_FLOAT32) == CT_EINVAL && strstr(ct_last_error(), "float16 features"),
                "appending float32 to a float16 store: %s", ct_last_error());
        if (w) ct_featstore_close(w);
        ct_featstore_plan plan;
        if (t_check(ct_featstore_open_corpus(&b, f16, 8000, 1, 0, &plan) == CT_OK && plan.streamed && plan.dtype == CT_FEAT_FLOAT16,
                    "stream the float16 store: %s", ct_last_error())) {
            float *x = t_alloc(90 * 8);
            int diff = 0;
            for (int u = 0; u < b.n_utt; u++) {
                diff += ct_corpus_frames(&b, u, 0, b.utt[u].frames, x) != CT_OK;
                diff += memcmp(x, a.feats + a.utt[u].offset, (size_t)b.utt[u].frames * 8 * sizeof *x) != 0;
            }
            t_check(diff == 0, "%d utterances streamed differ from the loaded float16 store", diff);
            ct_featstore_stats s16;
            t_check(ct_featstore_stats_of(&b, &s16) && s16.direct == 1, "a float16 store is read through its chunk map too");
            free(x);
            ct_corpus_free(&b);
        }
        ct_corpus_free(&a);
    }
    if (src16.feats) ct_corpus_free(&src16);

    t_case("stream/every crop streamed is the loaded store's floats; out-of-range frames are refused");
    if (make_store(f32, &src, CT_FEAT_FLOAT32) && t_check(ct_featstore_load(&a, f32) == CT_OK, "load: %s", ct_last_error())
        && t_check(ct_featstore_stream(&b, f32) == CT_OK, "stream: %s", ct_last_error())) {
        t_check(!b.feats && b.source && b.n_utt == a.n_utt && b.n_speakers == a.n_speakers, "the streamed corpus holds the index only");
        float *x = t_alloc(90 * 8);
        int crops = 0, diff = crops_differ(&b, &a, 7, 11, &crops);
        t_check(diff == 0, "%d of %d crops differ", diff, crops);
        ct_featstore_stats s;
        t_check(ct_featstore_stats_of(&b, &s) && s.reads == (unsigned long long)crops, "stats: %llu reads for %d crops", s.reads, crops);
        t_check(s.direct == 1, "a plain store is read through its chunk map (pread), not H5Dread");
        t_check(ct_corpus_frames(&b, 0, a.utt[0].frames - 2, 3, x) == CT_EINVAL && strstr(ct_last_error(), "asked for"),
                "a read past the utterance's end: %s", ct_last_error());

        t_case("stream/batches from a streamed store: the same crops, lengths, labels and crop stream as loaded");
        enum { B = 12, T = 40 };
        ct_pair p[B];
        ct_rng r;
        ct_rng_seed(&r, 3, 1);
        int spk[10];
        for (int k = 0; k < 10; k++) spk[k] = k;
        if (t_check(ct_pairs_draw(p, B, &a, NULL, spk, 10, &r) == CT_OK, "pairs: %s", ct_last_error())) {
            float *xa = t_alloc((size_t)2 * B * T * 8), *xb = t_alloc((size_t)2 * B * T * 8), ya[B], yb[B];
            int la[2 * B], lb[2 * B];
            ct_rng ra, rb;
            ct_rng_seed(&ra, 11, 2);
            rb = ra;
            for (int it = 0; it < 5; it++) {
                t_check(ct_pairs_batch(xa, la, ya, p, B, &a, T, &ra) == CT_OK && ct_pairs_batch(xb, lb, yb, p, B, &b, T, &rb) == CT_OK,
                        "batch: %s", ct_last_error());
                t_check(!memcmp(xa, xb, sizeof(float) * 2 * B * T * 8) && !memcmp(la, lb, sizeof la) && !memcmp(ya, yb, sizeof ya)
                        && ct_rng_u32(&ra) == ct_rng_u32(&rb), "batch %d differs", it);
            }
            free(xa); free(xb);
        }
        free(x);

        t_case("stream/a batch read by 1, 2, 3 or 7 threads at once: the same crops, lengths, labels and crop stream; a part too");
        if (t_check(ct_pairs_draw(p, B, &a, NULL, spk, 10, &r) == CT_OK, "pairs: %s", ct_last_error())) {
            size_t xs = (size_t)2 * B * T * 8;
            float *x1 = t_alloc(xs), *xn = t_alloc(xs), y1[B], yn[B];
            int l1[2 * B], ln[2 * B], bad = 0;
            ct_workers *pool = ct_workers_new();
            const int readers[] = { 1, 2, 3, 7 };
            for (int part = 0; part < 2; part++) {   /* the whole batch, then pairs [3, 10) of it */
                int lo = part ? 3 : 0, hi = part ? 10 : B;
                ct_rng r1, rn;
                ct_rng_seed(&r1, 5, 3);
                for (int it = 0; it < 3; it++) {
                    ct_rng start = r1;
                    memset(x1, 0xff, xs * sizeof *x1);
                    bad += ct_pairs_batch_part(x1, l1, y1, p, B, lo, hi, &b, T, &r1) != CT_OK;
                    for (int k = 0; k < 4; k++) {
                        rn = start;
                        memset(xn, 0xff, xs * sizeof *xn);
                        bad += ct_pairs_batch_pool(xn, ln, yn, p, B, lo, hi, &b, T, &rn, pool, readers[k]) != CT_OK;
                        int n = hi - lo;
                        bad += memcmp(x1, xn, (size_t)2 * n * T * 8 * sizeof *x1) != 0 || memcmp(l1, ln, sizeof(int) * 2 * (size_t)n) != 0
                               || memcmp(y1, yn, sizeof(float) * (size_t)n) != 0;
                        ct_rng c1 = r1;
                        bad += ct_rng_u32(&c1) != ct_rng_u32(&rn);
                    }
                }
            }
            t_check(bad == 0, "%d differences between one reader and several", bad);
            ct_workers_free(pool);
            free(x1); free(xn);
        }

        t_case("stream/a compressed store (h5repack -f GZIP=1) is read through H5Dread: the same floats, the same batches");
        char gz[300], cmd[1024];
        snprintf(gz, sizeof gz, "%s.gz.h5", f32);
        snprintf(cmd, sizeof cmd, "h5repack -f /feats:GZIP=1 %s %s 2>&1", f32, gz);
        if (t_check(system(cmd) == 0, "%s failed", cmd)) {
            ct_corpus g;
            ct_featstore_plan gp;
            char line[512];
            if (t_check(ct_featstore_open_corpus(&g, gz, 20000, 1, 0, &gp) == CT_OK && gp.streamed, "stream the compressed store: %s",
                        ct_last_error())) {
                ct_featstore_plan_line(&gp, line, sizeof line);
                t_check(strstr(line, "through HDF5") && strstr(line, "compressed"), "the plan line does not say why: %s", line);
                int differ = 0;
                x = t_alloc(90 * 8);
                for (int u = 0; u < a.n_utt; u++) {
                    differ += ct_corpus_frames(&g, u, 0, a.utt[u].frames, x) != CT_OK;
                    differ += memcmp(x, a.feats + a.utt[u].offset, (size_t)a.utt[u].frames * 8 * sizeof *x) != 0;
                }
                ct_featstore_stats gs;
                t_check(ct_featstore_stats_of(&g, &gs) && gs.direct == 0, "a compressed store must not be read through the chunk map");
                t_check(differ == 0, "%d utterances of the compressed store differ from the loaded store", differ);
                free(x);
                ct_corpus_free(&g);
            }
            unlink(gz);
        }

        t_case("stream/chunks of 7 frames (h5repack -l): crops across chunk edges through the chunk map, float32 and float16");
        const char *stores[2] = { f32, f16 };
        for (int k = 0; k < 2; k++) {
            char small[300], cmd7[1024];
            snprintf(small, sizeof small, "%s.c7.h5", stores[k]);
            snprintf(cmd7, sizeof cmd7, "h5repack -l /feats:CHUNK=7x8 %s %s 2>&1", stores[k], small);
            ct_corpus ref, g;
            if (!t_check(system(cmd7) == 0, "%s failed", cmd7)) continue;
            if (t_check(ct_featstore_load(&ref, stores[k]) == CT_OK, "load: %s", ct_last_error())) {
                if (t_check(ct_featstore_stream(&g, small) == CT_OK, "stream: %s", ct_last_error())) {
                    int n7 = 0, differ = crops_differ(&g, &ref, 3, 5, &n7);
                    ct_featstore_stats gs;
                    t_check(ct_featstore_stats_of(&g, &gs) && gs.direct == 1, "%s in 7-frame chunks: not read through the chunk map", stores[k]);
                    t_check(differ == 0, "%d of %d crops of %s in 7-frame chunks differ from the loaded store", differ, n7, stores[k]);
                    ct_corpus_free(&g);
                }
                ct_corpus_free(&ref);
            }
            unlink(small);
        }

        t_case("stream/a store truncated while it is streamed: one error naming the file and the utterance");
        ct_corpus cc;
        FILE *in = fopen(f32, "rb"), *out = fopen(cut, "wb");
        char buf[4096];
        size_t n;
        while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
        if (in) fclose(in);
        if (out) fclose(out);
        if (t_check(ct_featstore_stream(&cc, cut) == CT_OK, "stream the copy: %s", ct_last_error())) {
            int last = cc.n_utt - 1;
            t_check(truncate(cut, (off_t)(cc.utt[last].offset / 8) * 32 / 2) == 0, "truncate");
            ct_status st = CT_OK;
            for (int u = last; u >= 0 && st == CT_OK; u--) st = ct_corpus_frames(&cc, u, 0, cc.utt[u].frames, x = t_alloc(90 * 8)), free(x);
            t_check(st == CT_EIO && strstr(ct_last_error(), cut) && strstr(ct_last_error(), "/0") && strstr(ct_last_error(), "truncated"),
                    "reading a truncated store: %s: %s", ct_status_name(st), ct_last_error());
            /* a batch of every utterance read by 3 threads: the failing reader's error reaches the caller */
            ct_pair all[25];
            for (int k = 0; k < 25; k++) all[k] = (ct_pair){ 2 * k, 2 * k + 1, 0.0f };
            float *xb3 = t_alloc((size_t)2 * 25 * 12 * 8), yb3[25];
            int lb3[50];
            ct_rng r3;
            ct_rng_seed(&r3, 1, 1);
            ct_workers *pool = ct_workers_new();
            st = ct_pairs_batch_pool(xb3, lb3, yb3, all, 25, 0, 25, &cc, 12, &r3, pool, 3);
            t_check(st == CT_EIO && strstr(ct_last_error(), cut) && strstr(ct_last_error(), "truncated"),
                    "a batch of 3 readers from a truncated store: %s: %s", ct_status_name(st), ct_last_error());
            ct_workers_free(pool);
            free(xb3);
            ct_corpus_free(&cc);
        }
        ct_corpus_free(&b);
        ct_corpus_free(&a);
    }

    t_case("stream/the budget: loaded when it fits, streamed when not, refused with the size needed when a batch does not fit");
    ct_featstore_plan plan;
    if (t_check(ct_featstore_open_corpus(&a, f32, (size_t)1 << 30, 1, 4096, &plan) == CT_OK, "%s", ct_last_error())) {
        t_check(!plan.streamed && a.feats && !a.source, "1 GB: loaded");
        ct_corpus_free(&a);
    }
    if (t_check(ct_featstore_open_corpus(&a, f32, 20000, 1, 4096, &plan) == CT_OK, "%s", ct_last_error())) {
        t_check(plan.streamed && !a.feats && a.source && plan.feat_bytes > 20000, "20 kB: streamed");
        char line[512];
        t_check(plan.no_map_why[0] == 0 && !strstr(ct_featstore_plan_line(&plan, line, sizeof line), "through HDF5"),
                "a plain store streamed through its chunk map: %s", line);
        ct_corpus_free(&a);
    }
    t_check(ct_featstore_open_corpus(&a, f32, 20000, 1, 100000, &plan) == CT_EINVAL && strstr(ct_last_error(), "give at least")
            && strstr(ct_last_error(), "--data-memory") && !a.utt, "a batch larger than the budget: %s", ct_last_error());
    if (src.feats) ct_corpus_free(&src);
    unlink(f32); unlink(f16); unlink(cut);
}

/* The final weights of two runs, compared as numbers. */
static void same_weights(const char *a, const char *b)
{
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "h5diff -q %s/%s %s/%s 2>&1; echo rc=$?", t_scratch_dir(), a, t_scratch_dir(), b);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = 0;
    if (p) pclose(p);
    t_check(strstr(out, "rc=0") != NULL, "%s and %s differ: %s", a, b, out);
}

static void cli_cases(void)
{
    char feats[512], trials[512], args[2048];
    static char out[1 << 16];
    if (!t_speaker_data(t_scratch_dir(), feats, trials, sizeof feats)) return;
    const char *common = "--mels 8 --hidden 8 --layers 1 --embed 4 --frames 10 --batch 4 --pairs 96 --val-pairs 16 --threads 1 --seed 4";

    t_case("stream/cli: train streamed (a small --data-memory, 3 loader threads) gives the loaded run's weights bit for bit");
    snprintf(args, sizeof args, "train siamese-lstm --data %s %s --epochs 2 --out st_loaded.h5", feats, common);
    int rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "loaded into memory"), "loaded run: exit %d: %s", rc, out);
    snprintf(args, sizeof args, "train siamese-lstm --data %s %s --epochs 2 --data-memory 30K --loader-threads 3 --out st_streamed.h5",
             feats, common);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "streamed from the file"), "streamed run: exit %d: %s", rc, out);
    same_weights("st_loaded.h5", "st_streamed.h5");

    t_case("stream/cli: a streamed run stopped inside an epoch and resumed (1 loader thread) gives the same weights");
    snprintf(args, sizeof args, "train siamese-lstm --data %s %s --epochs 2 --data-memory 30K --checkpoint st_ck.h5 "
             "--stop-after-steps 17 --out st_part.h5", feats, common);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "Stopped after 17 batches"), "stopped run: exit %d: %s", rc, out);
    snprintf(args, sizeof args, "train siamese-lstm --data %s %s --epochs 2 --data-memory 30K --checkpoint st_ck.h5 --resume st_ck.h5 "
             "--loader-threads 1 --out st_resumed.h5", feats, common);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0, "resumed run: exit %d: %s", rc, out);
    same_weights("st_loaded.h5", "st_resumed.h5");

    t_case("stream/cli: --data-memory too small for a batch is refused at start with the size needed");
    snprintf(args, sizeof args, "train siamese-lstm --data %s %s --epochs 1 --data-memory 2K --out st_no.h5", feats, common);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc != 0 && rc < 128 && strstr(out, "--data-memory 2.00 kB is too small") && strstr(out, "give at least"),
            "exit %d: %s", rc, out);
    snprintf(args, sizeof args, "train siamese-lstm --data %s %s --epochs 1 --data-memory lots --out st_no.h5", feats, common);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc != 0 && rc < 128 && strstr(out, "--data-memory lots: give a size"), "exit %d: %s", rc, out);

    t_case("stream/cli: eval reads the store streamed and scores the trials");
    snprintf(args, sizeof args, "eval siamese-lstm --weights st_loaded.h5 --data %s --trials %s --mels 8 --hidden 8 --layers 1 --embed 4 --threads 1",
             feats, trials);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "read as they are embedded") && strstr(out, "EER: "), "exit %d: %s", rc, out);
}

/* A store of 4 speakers x 4 utterances of 30 frames, plus a 3-minute utterance (18,000
 * frames, a speaker's utterances repeated) of speaker 0, and trials of every pair. */
static int long_store(const char *feats, const char *trials)
{
    enum { SPK = 4, UTT = 4, LONG = 18000 };
    ct_corpus c = { 0 };
    ct_synth_config sc = { .speakers = SPK, .utts_per_speaker = UTT, .min_frames = 30, .max_frames = 30, .n_mels = 8, .noise = 0.5f, .seed = 6 };
    if (!t_check(ct_corpus_synthetic(&c, &sc) == CT_OK, "synthetic: %s", ct_last_error())) return 0;
    float *big = t_alloc((size_t)LONG * 8);
    for (int t = 0; t < LONG; t++) memcpy(big + (size_t)t * 8, c.feats + c.utt[(t / 30) % UTT].offset + (size_t)(t % 30) * 8, 8 * sizeof *big);
    unlink(feats);
    ct_featstore *w = NULL;
    ct_status st = ct_featstore_open(&w, feats, 8);
    char path[SPK * UTT + 1][64];
    for (int u = 0; st == CT_OK && u <= SPK * UTT; u++) {
        int s = u < SPK * UTT ? c.utt[u].speaker : 0;
        char spk[16], vid[16];
        snprintf(spk, sizeof spk, "id1%04d", s);
        snprintf(vid, sizeof vid, "vid%d", u % 2);
        snprintf(path[u], sizeof path[u], "%s/%s/%05d.wav", spk, vid, u);
        st = u < SPK * UTT ? ct_featstore_append(w, path[u], spk, vid, c.feats + c.utt[u].offset, c.utt[u].frames)
                           : ct_featstore_append(w, path[u], spk, vid, big, LONG);
    }
    if (w && ct_featstore_close(w) != CT_OK && st == CT_OK) st = CT_EIO;
    FILE *f = st == CT_OK ? fopen(trials, "w") : NULL;
    for (int a = 0; f && a <= SPK * UTT; a++)
        for (int b = a + 1; b <= SPK * UTT; b++)
            fprintf(f, "%d %s %s\n", (a < SPK * UTT ? c.utt[a].speaker : 0) == (b < SPK * UTT ? c.utt[b].speaker : 0), path[a], path[b]);
    int ok = f && fclose(f) == 0;
    free(big);
    ct_corpus_free(&c);
    return t_check(st == CT_OK && ok, "long store: %s", ct_last_error());
}

/* The scores file's score of each line, [n]. */
static int read_scores(const char *file, double *score, int cap)
{
    char p[512], line[512];
    snprintf(p, sizeof p, "%s/%s", t_scratch_dir(), file);
    FILE *f = fopen(p, "r");
    int n = 0;
    while (f && n < cap && fgets(line, sizeof line, f)) score[n++] = atof(line);
    if (f) fclose(f);
    return n;
}

static void long_cases(void)
{
    char feats[512], trials[512], args[2048];
    static char out[1 << 16];
    snprintf(feats, sizeof feats, "%s/long.h5", t_scratch_dir());
    snprintf(trials, sizeof trials, "%s/long_trials.txt", t_scratch_dir());
    t_case("stream/cli: eval embeds a 3-minute utterance whole by default; --max-frames cuts it only when asked");
    if (!long_store(feats, trials)) return;
    snprintf(args, sizeof args, "eval siamese-lstm --weights st_loaded.h5 --data %s --trials %s --mels 8 --hidden 8 --layers 1 "
             "--embed 4 --threads 1 --scores long_whole.txt", feats, trials);
    int rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "Embedded 17 utterances") && !strstr(out, "cut"), "whole: exit %d: %s", rc, out);
    snprintf(args, sizeof args, "eval siamese-lstm --weights st_loaded.h5 --data %s --trials %s --mels 8 --hidden 8 --layers 1 "
             "--embed 4 --threads 1 --max-frames 3000 --scores long_cut.txt", feats, trials);
    rc = t_run_ctrain(args, out, sizeof out);
    t_check(rc == 0 && strstr(out, "1 longer than 3000 frames cut to that"), "cut: exit %d: %s", rc, out);
    double whole[200], cut[200];
    int n = read_scores("long_whole.txt", whole, 200), m = read_scores("long_cut.txt", cut, 200), same_short = 1, long_differs = 0;
    /* trials are every pair (a, b), a < b, of 17 utterances; the long one is the last: it is in trials with b = 16 */
    int k = 0;
    for (int a = 0; a < 17; a++)
        for (int b = a + 1; b < 17; b++, k++) {
            if (k >= n || k >= m) break;
            if (b == 16) long_differs += whole[k] != cut[k];
            else same_short &= whole[k] == cut[k];
        }
    t_check(n == 136 && m == 136, "%d and %d scores, want 136", n, m);
    t_check(same_short && long_differs == 16, "the short utterances' scores must agree and the long one's 16 differ (%d differ)", long_differs);
}

void suite_stream(void)
{
    half_cases();
    char dir[] = "/tmp/ctrain_stream_XXXXXX";
    if (!mkdtemp(dir)) { t_case("stream/temp dir"); t_check(0, "mkdtemp failed"); return; }
    store_cases(dir);
    rmdir(dir);
    cli_cases();
    long_cases();
}
