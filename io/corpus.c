/* corpus.c - the utterance corpus (frames in memory or read from a source), its
 * synthetic generator and the pair sampler (see corpus.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/corpus.h"
#include "core/workers.h"

void ct_corpus_free(ct_corpus *c)
{
    for (int i = 0; c->path && i < c->n_utt; i++) free(c->path[i]);
    for (int i = 0; c->speaker_name && i < c->n_speakers; i++) free(c->speaker_name[i]);
    free(c->path);
    free(c->speaker_name);
    free(c->video);
    free(c->utt);
    free(c->feats);
    if (c->source) c->source->close(c->source);
    memset(c, 0, sizeof *c);
}

ct_status ct_corpus_frames(const ct_corpus *c, int u, int first, int n, float *dst)
{
    if (n <= 0) return CT_OK;
    if (!c->feats) return c->source->read(c->source, u, first, n, dst);
    memcpy(dst, c->feats + c->utt[u].offset + (size_t)first * c->n_mels, (size_t)n * c->n_mels * sizeof *dst);
    return CT_OK;
}

/* A synthetic "speaker" is a spectral envelope env[I] (a few random Gaussian
 * bumps over the bands, like formants) and a modulation rate; an utterance is
 *   frame_t[i] = env[i] * (1 + 0.5 sin(2 pi rate t / 100 + phase)) + channel[i] + noise
 * with a random phase, a small random per-utterance channel offset (a session
 * effect) and uniform noise. Features are then normalised per utterance, as
 * real log-mel features are. */
ct_status ct_corpus_synthetic(ct_corpus *c, const ct_synth_config *g)
{
    memset(c, 0, sizeof *c);
    if (g->speakers < 2 || g->utts_per_speaker < 1 || g->n_mels < 1 || g->min_frames < 1 || g->max_frames < g->min_frames)
        return ct_fail(CT_EINVAL, "synthetic corpus: need >= 2 speakers, >= 1 utterance each, 1 <= min_frames <= max_frames");
    ct_rng r;
    ct_rng_seed(&r, g->seed, 0x5eedULL);
    int I = g->n_mels, n = g->speakers * g->utts_per_speaker;
    c->n_utt = n; c->n_speakers = g->speakers; c->n_mels = I;
    c->utt = ct_calloc((size_t)n, sizeof *c->utt, "synthetic corpus");
    if (!c->utt) return CT_ENOMEM;
    size_t total = 0;
    for (int u = 0; u < n; u++) {
        c->utt[u].speaker = u / g->utts_per_speaker;
        c->utt[u].frames = g->min_frames + (int)ct_rng_below(&r, (uint32_t)(g->max_frames - g->min_frames + 1));
        c->utt[u].offset = total;
        total += (size_t)c->utt[u].frames * I;
    }
    c->feats = ct_malloc(total * sizeof *c->feats, "synthetic corpus");
    float *env = ct_malloc((size_t)g->speakers * I * sizeof *env, "synthetic corpus");
    float *rate = ct_malloc((size_t)g->speakers * sizeof *rate, "synthetic corpus");
    float *chan = ct_malloc((size_t)I * sizeof *chan, "synthetic corpus");
    if (!c->feats || !env || !rate || !chan) { free(env); free(rate); free(chan); ct_corpus_free(c); return CT_ENOMEM; }
    for (int s = 0; s < g->speakers; s++) {
        float *e = env + (size_t)s * I;
        for (int i = 0; i < I; i++) e[i] = 0;
        for (int k = 0; k < 3; k++) {   /* three "formants" */
            float centre = ct_rng_uniform(&r) * I, width = 1.0f + ct_rng_uniform(&r) * I / 8.0f, amp = 0.5f + ct_rng_uniform(&r);
            for (int i = 0; i < I; i++) e[i] += amp * expf(-0.5f * (i - centre) * (i - centre) / (width * width));
        }
        rate[s] = 2.0f + 6.0f * ct_rng_uniform(&r);   /* cycles per 100 frames */
    }
    for (int u = 0; u < n; u++) {
        const float *e = env + (size_t)c->utt[u].speaker * I;
        float *x = c->feats + c->utt[u].offset, phase = 6.2831853f * ct_rng_uniform(&r);
        int T = c->utt[u].frames;
        for (int i = 0; i < I; i++) chan[i] = 0.2f * (2.0f * ct_rng_uniform(&r) - 1.0f);
        for (int t = 0; t < T; t++) {
            float mod = 1.0f + 0.5f * sinf(6.2831853f * rate[c->utt[u].speaker] * t / 100.0f + phase);
            for (int i = 0; i < I; i++)
                x[(size_t)t * I + i] = e[i] * mod + chan[i] + g->noise * (2.0f * ct_rng_uniform(&r) - 1.0f);
        }
        /* per-utterance mean/variance normalisation over all frames and bands */
        double s = 0, s2 = 0;
        size_t m = (size_t)T * I;
        for (size_t k = 0; k < m; k++) { s += x[k]; s2 += (double)x[k] * x[k]; }
        double mean = s / m, sd = sqrt(fmax(s2 / m - mean * mean, 1e-12));
        for (size_t k = 0; k < m; k++) x[k] = (float)((x[k] - mean) / sd);
    }
    free(env); free(rate); free(chan);
    return CT_OK;
}

ct_status ct_corpus_split(int *train, int *n_train, int *val, int *n_val, const ct_corpus *c, double val_fraction, ct_rng *r)
{
    return ct_speakers_split(train, n_train, val, n_val, NULL, c->n_speakers, val_fraction, r);
}

ct_status ct_speakers_split(int *train, int *n_train, int *val, int *n_val, const int *speakers, int S, double val_fraction,
                            ct_rng *r)
{
    int nv = (int)lround(S * val_fraction);
    if (nv < 2 || S - nv < 2)
        return ct_fail(CT_EINVAL, "%d speakers cannot be split into >= 2 training and >= 2 validation speakers "
                       "with validation fraction %.2f; use more speakers", S, val_fraction);
    int *order = ct_malloc((size_t)S * sizeof *order + 1, "speaker split");
    if (!order) return CT_ENOMEM;
    for (int s = 0; s < S; s++) order[s] = speakers ? speakers[s] : s;
    ct_rng_shuffle_int(r, order, S);
    *n_train = S - nv; *n_val = nv;
    memcpy(train, order, (size_t)(S - nv) * sizeof *order);
    memcpy(val, order + S - nv, (size_t)nv * sizeof *order);
    free(order);
    return CT_OK;
}

const char *ct_speaker_label(const ct_corpus *c, int s)
{
    static _Thread_local char buf[64];
    if (c->speaker_name && c->speaker_name[s]) return c->speaker_name[s];
    snprintf(buf, sizeof buf, "speaker %d", s);
    return buf;
}

/* Number of allowed utterances of every speaker. */
static int *count_allowed(const ct_corpus *c, const unsigned char *allowed)
{
    int *count = ct_calloc((size_t)c->n_speakers, sizeof *count, "pair sampler");
    if (!count) return NULL;
    for (int u = 0; u < c->n_utt; u++)
        if (!allowed || allowed[u]) count[c->utt[u].speaker]++;
    return count;
}

void ct_usable_speakers(int *speakers, int *n, const ct_corpus *c, const unsigned char *allowed, void *warn)
{
    int *count = count_allowed(c, allowed), kept = 0;
    if (!count) return;
    for (int k = 0; k < *n; k++) {
        if (count[speakers[k]] >= 2) speakers[kept++] = speakers[k];
        else if (warn)
            fprintf((FILE *)warn, "warning: %s has %d usable utterance(s); same-speaker pairs need 2, so it is left out\n",
                    ct_speaker_label(c, speakers[k]), count[speakers[k]]);
    }
    *n = kept;
    free(count);
}

ct_status ct_corpus_split_videos(unsigned char *val, const ct_corpus *c, ct_rng *r)
{
    if (!c->video) return ct_fail(CT_EINVAL, "validation on held-out videos needs a corpus with video ids (a feature store from `ctrain prep`)");
    memset(val, 0, (size_t)c->n_utt);
    int max_video = -1;
    for (int u = 0; u < c->n_utt; u++) if (c->video[u] > max_video) max_video = c->video[u];
    unsigned char *seen = ct_calloc((size_t)max_video + 1, 1, "video split");
    int *vids = ct_malloc(((size_t)max_video + 1) * sizeof *vids, "video split");
    if (!seen || !vids) { free(seen); free(vids); return CT_ENOMEM; }
    int held = 0;
    for (int s = 0; s < c->n_speakers; s++) {
        int nv = 0;
        for (int u = 0; u < c->n_utt; u++)
            if (c->utt[u].speaker == s && c->video[u] >= 0 && !seen[c->video[u]]) { seen[c->video[u]] = 1; vids[nv++] = c->video[u]; }
        for (int k = 0; k < nv; k++) seen[vids[k]] = 0;
        if (nv < 2) continue;
        int v = vids[ct_rng_below(r, (uint32_t)nv)];
        for (int u = 0; u < c->n_utt; u++) if (c->utt[u].speaker == s && c->video[u] == v) val[u] = 1;
        held++;
    }
    free(seen); free(vids);
    if (held < 2) return ct_fail(CT_EINVAL, "only %d speaker(s) have utterances from 2 or more videos; validating on held-out "
                                 "videos needs at least 2 (use the default open-set split instead)", held);
    return CT_OK;
}

ct_status ct_pair_sampler_init(ct_pair_sampler *ps, const ct_corpus *c, const unsigned char *allowed,
                               const int *speakers, int n_speakers)
{
    memset(ps, 0, sizeof *ps);
    if (n_speakers < 2) return ct_fail(CT_EINVAL, "pairs need at least 2 speakers with 2 or more utterances each (got %d)", n_speakers);
    int S = c->n_speakers;
    ps->n_speakers = n_speakers;
    ps->speakers = ct_malloc((size_t)n_speakers * sizeof *ps->speakers, "pair sampler");
    ps->count = count_allowed(c, allowed);
    ps->start = ct_calloc((size_t)S + 1, sizeof *ps->start, "pair sampler");
    ps->list = ct_malloc(((size_t)c->n_utt + 1) * sizeof *ps->list, "pair sampler");
    int *fill = ct_calloc((size_t)S + 1, sizeof *fill, "pair sampler");
    ct_status st = CT_OK;
    if (!ps->speakers || !ps->count || !ps->start || !ps->list || !fill) { st = CT_ENOMEM; goto done; }
    memcpy(ps->speakers, speakers, (size_t)n_speakers * sizeof *speakers);
    for (int s = 0; s < S; s++) ps->start[s + 1] = ps->start[s] + ps->count[s];
    for (int u = 0; u < c->n_utt; u++)
        if (!allowed || allowed[u]) { int s = c->utt[u].speaker; ps->list[ps->start[s] + fill[s]++] = u; }
    for (int k = 0; k < n_speakers; k++)
        if (ps->count[speakers[k]] < 2) {
            st = ct_fail(CT_EINVAL, "%s has %d usable utterance(s); same-speaker pairs need at least 2 "
                         "(remove the speaker or add utterances)", ct_speaker_label(c, speakers[k]), ps->count[speakers[k]]);
            goto done;
        }
done:
    free(fill);
    if (st != CT_OK) ct_pair_sampler_free(ps);
    return st;
}

void ct_pair_sampler_free(ct_pair_sampler *ps)
{
    free(ps->speakers); free(ps->count); free(ps->start); free(ps->list);
    memset(ps, 0, sizeof *ps);
}

void ct_pairs_sample(ct_pair *out, int n, const ct_pair_sampler *ps, ct_rng *r)
{
    const int *speakers = ps->speakers, *count = ps->count, *start = ps->start, *list = ps->list;
    uint32_t S = (uint32_t)ps->n_speakers;
    for (int i = 0; i < n; i++) {
        int sa = speakers[ct_rng_below(r, S)], sb = sa;
        int same = (i % 2) == 0;
        if (!same) while (sb == sa) sb = speakers[ct_rng_below(r, S)];
        int ua = (int)ct_rng_below(r, (uint32_t)count[sa]), ub = (int)ct_rng_below(r, (uint32_t)count[sb]);
        if (same) while (ub == ua) ub = (int)ct_rng_below(r, (uint32_t)count[sb]);
        out[i] = (ct_pair){ list[start[sa] + ua], list[start[sb] + ub], same ? 1.0f : 0.0f };
    }
    for (int i = n - 1; i > 0; i--) {   /* shuffle so same/different alternate no more */
        int j = (int)ct_rng_below(r, (uint32_t)i + 1);
        ct_pair t = out[i]; out[i] = out[j]; out[j] = t;
    }
}

ct_status ct_pairs_draw(ct_pair *out, int n, const ct_corpus *c, const unsigned char *allowed,
                        const int *speakers, int n_speakers, ct_rng *r)
{
    ct_pair_sampler ps;
    CT_TRY(ct_pair_sampler_init(&ps, c, allowed, speakers, n_speakers));
    ct_pairs_sample(out, n, &ps, r);
    ct_pair_sampler_free(&ps);
    return CT_OK;
}

/* The crop of utterance u: its first frame and length (T, or the whole
 * utterance when it is shorter: then zero-padded). Draws one number from r when
 * the utterance is at least T frames long, none otherwise. */
static void crop_place(const ct_corpus *c, int u, int T, ct_rng *r, int *first, int *len)
{
    int frames = c->utt[u].frames;
    *first = frames >= T ? (int)ct_rng_below(r, (uint32_t)(frames - T + 1)) : 0;
    *len = frames >= T ? T : frames;
}

ct_status ct_pairs_batch(float *x, int *len, float *y, const ct_pair *p, int B, const ct_corpus *c, int T, ct_rng *r)
{
    return ct_pairs_batch_part(x, len, y, p, B, 0, B, c, T, r);
}

/* Pairs [s_lo, s_hi) of the part [lo, hi) of a batch of B pairs: their crops, lengths
 * and labels, at their places in the part's x [2n, T, I], len [2n], y [n] (n = hi - lo).
 * Every pair's crop is drawn from r, in batch order, whoever reads it. */
static ct_status batch_share(float *x, int *len, float *y, const ct_pair *p, int B, int lo, int hi, int s_lo, int s_hi,
                             const ct_corpus *c, int T, ct_rng *r)
{
    size_t row = (size_t)T * c->n_mels;
    int n = hi - lo;
    ct_status st = CT_OK;
    if (c->source && c->source->hint) {   /* a disk: the crops' places first, so that all their reads start at once */
        ct_rng before = *r;
        for (int k = 0; k < B; k++)
            for (int side = 0; side < 2; side++) {
                int u = side ? p[k].b : p[k].a, first, l;
                crop_place(c, u, T, r, &first, &l);
                if (k >= s_lo && k < s_hi) c->source->hint(c->source, u, first, l);
            }
        *r = before;   /* drawn again below, the same */
    }
    for (int k = 0; k < B; k++) {
        int mine = k >= s_lo && k < s_hi, j = k - lo;
        for (int side = 0; side < 2; side++) {   /* a, then b: the order the starts are drawn in */
            int u = side ? p[k].b : p[k].a, first, l;
            crop_place(c, u, T, r, &first, &l);
            if (!mine || st != CT_OK) continue;   /* another rank's or reader's pair, or a read already failed: draw only */
            float *dst = x + (size_t)(side ? n + j : j) * row;
            st = ct_corpus_frames(c, u, first, l, dst);
            if (l < T) memset(dst + (size_t)l * c->n_mels, 0, (size_t)(T - l) * c->n_mels * sizeof *dst);
            len[side ? n + j : j] = l;
        }
        if (mine) y[j] = p[k].y;
    }
    return st;
}

ct_status ct_pairs_batch_part(float *x, int *len, float *y, const ct_pair *p, int B, int lo, int hi, const ct_corpus *c, int T,
                              ct_rng *r)
{
    return batch_share(x, len, y, p, B, lo, hi, lo, hi, c, T, r);
}

/* ---- a batch read by several threads ---- */

typedef struct {
    float *x, *y;
    int *len;
    const ct_pair *p;
    int B, lo, hi, T, shares;
    const ct_corpus *c;
    ct_rng start, end;                       /* the crop stream before the batch, and after it */
    ct_status st[CT_LOADER_MAX_READERS];     /* per share */
    char msg[CT_LOADER_MAX_READERS][512];    /*   and its reader's message (messages are per thread) */
} share_job;

static void share_task(void *ctx, int t, int worker)
{
    share_job *j = ctx;
    (void)worker;
    int n = j->hi - j->lo, s_lo = j->lo + (int)((long)n * t / j->shares), s_hi = j->lo + (int)((long)n * (t + 1) / j->shares);
    ct_rng r = j->start;
    j->st[t] = batch_share(j->x, j->len, j->y, j->p, j->B, j->lo, j->hi, s_lo, s_hi, j->c, j->T, &r);
    if (j->st[t] != CT_OK) snprintf(j->msg[t], sizeof j->msg[t], "%s", ct_last_error());
    if (t == 0) j->end = r;
}

ct_status ct_pairs_batch_pool(float *x, int *len, float *y, const ct_pair *p, int B, int lo, int hi, const ct_corpus *c, int T,
                              ct_rng *crop, ct_workers *pool, int readers)
{
    if (!pool || readers <= 1 || hi - lo < 2) return ct_pairs_batch_part(x, len, y, p, B, lo, hi, c, T, crop);
    share_job j = { .x = x, .y = y, .len = len, .p = p, .B = B, .lo = lo, .hi = hi, .T = T, .c = c, .start = *crop };   /* 8 kB */
    j.shares = readers < CT_LOADER_MAX_READERS ? readers : CT_LOADER_MAX_READERS;
    if (j.shares > hi - lo) j.shares = hi - lo;
    ct_workers_run(pool, j.shares, j.shares, share_task, &j);
    ct_status st = CT_OK;
    for (int t = 0; t < j.shares && st == CT_OK; t++)
        if (j.st[t] != CT_OK) st = ct_fail(j.st[t], "%s", j.msg[t]);
    *crop = j.end;
    return st;
}
