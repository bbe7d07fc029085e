/* verify.c - EER and minDCF from (score, label) lists, embedding utterances
 * with a speaker model, and the evaluation of a trial list (definitions in
 * verify.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "train/verify.h"
#include "core/interrupt.h"
#include "layers/pair.h"
#include "train/dist.h"
#include "train/train.h"

/* ---- the ROC ----------------------------------------------------------------- */

typedef struct { float s; int y; } scored;

static int by_score_desc(const void *pa, const void *pb)
{
    float a = ((const scored *)pa)->s, b = ((const scored *)pb)->s;
    return (a < b) - (a > b);
}

/* ROC points in threshold order: thr[0] = +inf (accept nothing), then one per
 * distinct score, decreasing. fpr/fnr/thr are malloc'd [*m]. */
typedef struct { double *fpr, *fnr, *thr; int m; } roc;

static void roc_free(roc *r) { free(r->fpr); free(r->fnr); free(r->thr); memset(r, 0, sizeof *r); }

static ct_status roc_build(roc *r, const float *score, const int *label, int n)
{
    memset(r, 0, sizeof *r);
    if (n < 1) return ct_fail(CT_EINVAL, "verification metrics: no trials");
    long pos = 0, neg = 0;
    for (int i = 0; i < n; i++) {
        if (label[i] != 0 && label[i] != 1)
            return ct_fail(CT_EINVAL, "verification metrics: trial %d has label %d; labels must be 1 (same speaker) or 0", i, label[i]);
        if (!isfinite(score[i]))
            return ct_fail(CT_EINVAL, "verification metrics: trial %d has score %g; every score must be a finite number "
                           "(a NaN usually means the model diverged)", i, (double)score[i]);
        pos += label[i];
    }
    neg = n - pos;
    if (pos == 0 || neg == 0)
        return ct_fail(CT_EINVAL, "verification metrics: %d trials, all %s; EER and minDCF need both same-speaker (1) "
                       "and different-speaker (0) trials", n, pos ? "same-speaker" : "different-speaker");
    scored *v = ct_malloc((size_t)n * sizeof *v, "ROC");
    r->fpr = ct_malloc(((size_t)n + 1) * sizeof(double), "ROC");
    r->fnr = ct_malloc(((size_t)n + 1) * sizeof(double), "ROC");
    r->thr = ct_malloc(((size_t)n + 1) * sizeof(double), "ROC");
    if (!v || !r->fpr || !r->fnr || !r->thr) { free(v); roc_free(r); return CT_ENOMEM; }
    for (int i = 0; i < n; i++) v[i] = (scored){ score[i], label[i] };
    qsort(v, (size_t)n, sizeof *v, by_score_desc);
    long tp = 0, fp = 0;
    int m = 0;
    r->fpr[m] = 0; r->fnr[m] = 1; r->thr[m] = INFINITY; m++;
    for (int i = 0; i < n; ) {
        float s = v[i].s;
        for (; i < n && v[i].s == s; i++) { tp += v[i].y; fp += !v[i].y; }   /* a tie moves as one */
        r->fpr[m] = (double)fp / neg;
        r->fnr[m] = 1.0 - (double)tp / pos;
        r->thr[m] = s;
        m++;
    }
    r->m = m;
    free(v);
    return CT_OK;
}

ct_status ct_roc_points(const float *score, const int *label, int n, double **fpr, double **fnr, double **thr, int *m)
{
    roc r;
    CT_TRY(roc_build(&r, score, label, n));
    *fpr = r.fpr; *fnr = r.fnr; *thr = r.thr; *m = r.m;   /* the caller owns them now */
    return CT_OK;
}

ct_status ct_eer(const float *score, const int *label, int n, double *eer, double *threshold)
{
    roc r;
    CT_TRY(roc_build(&r, score, label, n));
    /* FNR - FPR goes from 1 at k = 0 to -1 at k = m-1, strictly decreasing (each
     * point adds at least one trial). Find the last k with FNR > FPR. */
    int k = 0;
    while (k + 1 < r.m && r.fnr[k + 1] - r.fpr[k + 1] > 0) k++;
    CT_ASSERT(k + 1 < r.m);
    double d0 = r.fnr[k] - r.fpr[k], d1 = r.fnr[k + 1] - r.fpr[k + 1];
    double t = d0 / (d0 - d1);                             /* in (0, 1] */
    *eer = r.fpr[k] + t * (r.fpr[k + 1] - r.fpr[k]);
    if (threshold) *threshold = k == 0 ? r.thr[1] : r.thr[k] + t * (r.thr[k + 1] - r.thr[k]);
    roc_free(&r);
    return CT_OK;
}

ct_status ct_min_dcf(const float *score, const int *label, int n, double p_target, double c_miss, double c_fa,
                     double *min_dcf, double *threshold)
{
    if (!(p_target > 0 && p_target < 1) || !(c_miss >= 0) || !(c_fa >= 0) || !(c_miss * p_target + c_fa * (1 - p_target) > 0))
        return ct_fail(CT_EINVAL, "minDCF: p_target %g must be in (0, 1) and the costs c_miss %g, c_fa %g non-negative, "
                       "not both zero", p_target, c_miss, c_fa);
    roc r;
    CT_TRY(roc_build(&r, score, label, n));
    double best = INFINITY, best_thr = INFINITY;
    for (int k = 0; k < r.m; k++) {
        double dcf = c_miss * r.fnr[k] * p_target + c_fa * r.fpr[k] * (1 - p_target);
        if (dcf < best) { best = dcf; best_thr = r.thr[k]; }
    }
    double norm = fmin(c_miss * p_target, c_fa * (1 - p_target));
    *min_dcf = norm > 0 ? best / norm : best;
    if (threshold) *threshold = best_thr;
    roc_free(&r);
    return CT_OK;
}

/* ---- embedding utterances ------------------------------------------------------- */

typedef struct { int pos, frames; int utt; } utt_len;

static int by_len_desc(const void *pa, const void *pb)
{
    const utt_len *a = pa, *b = pb;
    if (a->frames != b->frames) return (a->frames < b->frames) - (a->frames > b->frames);
    return (a->utt > b->utt) - (a->utt < b->utt);   /* ties by index: deterministic */
}

/* Bytes of embedding activations at most: a batch of whole utterances shrinks to fit (down to
 * one utterance; the default LSTM keeps about 3.8 KB per frame, 68 MB for 3 minutes, so any
 * utterance under about 23 minutes fits alone; a longer one takes 3.8 KB per frame beyond). */
#define VERIFY_MEM_BUDGET ((size_t)512 << 20)

/* Sequences of T frames that fit the memory budget, at most `batch` and at least 1. */
static int fit_batch(speaker_model *m, int batch, int T)
{
    size_t per_seq = (m->embed_floats(m->ctx, T) + (size_t)T * m->n_mels) * sizeof(float);
    size_t fit = VERIFY_MEM_BUDGET / (per_seq ? per_seq : 1);
    return (size_t)batch > fit ? (fit > 0 ? (int)fit : 1) : batch;
}

/* Whole utterances (the LSTM): sorted by decreasing length, batches zero-padded
 * to their longest member, the lengths masking the padding. */
static ct_status embed_whole(speaker_model *m, const ct_corpus *c, const int *utts, int n, int batch, int max_frames,
                             float *emb, int *batch_used)
{
    size_t I = (size_t)m->n_mels, D = (size_t)m->embed_dim;
    utt_len *order = ct_malloc((size_t)n * sizeof *order, "embedding order");
    if (!order) return CT_ENOMEM;
    int longest = 1;
    for (int k = 0; k < n; k++) {
        int f = c->utt[utts[k]].frames < max_frames ? c->utt[utts[k]].frames : max_frames;
        order[k] = (utt_len){ k, f, utts[k] };
        if (f > longest) longest = f;
    }
    qsort(order, (size_t)n, sizeof *order, by_len_desc);
    int S = fit_batch(m, batch, longest);   /* the model keeps its forward state for S sequences of `longest` frames */
    if (S > n) S = n;
    *batch_used = S;
    float *x = ct_malloc((size_t)S * longest * I * sizeof *x, "embedding batch");       /* [S, T, I] */
    float *e = ct_malloc((size_t)S * D * sizeof *e, "embedding batch");                 /* [S, D] */
    int *len = ct_malloc((size_t)S * sizeof *len, "embedding batch");                   /* [S] */
    ct_status st = x && e && len ? CT_OK : CT_ENOMEM;
    if (st == CT_OK) st = m->plan_embed(m->ctx, S, longest);
    for (int first = 0; st == CT_OK && first < n; first += S) {
        int B = n - first < S ? n - first : S;
        int T = order[first].frames;   /* the longest of this batch: sorted by decreasing length */
        memset(x, 0, (size_t)B * T * I * sizeof *x);
        for (int b = 0; b < B && st == CT_OK; b++) {
            len[b] = order[first + b].frames;
            st = ct_corpus_frames(c, order[first + b].utt, 0, len[b], x + (size_t)b * T * I);
        }
        if (st != CT_OK) break;
        m->embed(m->ctx, e, x, len, B, T);
        for (int b = 0; b < B; b++) memcpy(emb + (size_t)order[first + b].pos * D, e + (size_t)b * D, D * sizeof *e);
        if (ct_interrupt_signal()) st = ct_fail(CT_EINTR, "interrupted by %s", ct_interrupt_name(ct_interrupt_signal()));
    }
    free(order); free(x); free(e); free(len);
    return st;
}

/* Windows of T frames (the CNN): hop T/2, the last window ending at the
 * utterance's end, a short utterance as one zero-padded window; the windows'
 * embeddings averaged per utterance. Windows are embedded in batches of S. */
static ct_status embed_windows(speaker_model *m, const ct_corpus *c, const int *utts, int n, int max_frames,
                               int batch, float *emb, int *batch_used)
{
    const int T = m->frames, hop = T / 2 > 0 ? T / 2 : 1;
    size_t I = (size_t)m->n_mels, D = (size_t)m->embed_dim;
    long total = 0;
    for (int k = 0; k < n; k++) total += ct_utt_windows(c->utt[utts[k]].frames < max_frames ? c->utt[utts[k]].frames : max_frames, T);
    int S = fit_batch(m, batch, T);
    if (S > total) S = (int)total;
    *batch_used = S;
    float *x = ct_malloc((size_t)S * T * I * sizeof *x, "embedding batch");   /* [S, T, I] */
    float *e = ct_malloc((size_t)S * D * sizeof *e, "embedding batch");       /* [S, D] */
    int *len = ct_malloc((size_t)S * sizeof *len, "embedding batch");         /* [S] */
    int *owner = ct_malloc((size_t)S * sizeof *owner, "embedding batch");     /* [S] position of each window's utterance */
    ct_status st = x && e && len && owner ? CT_OK : CT_ENOMEM;
    if (st == CT_OK) st = m->plan_embed(m->ctx, S, T);
    if (st == CT_OK) memset(emb, 0, (size_t)n * D * sizeof *emb);
    int k = 0, w = 0, B = 0;   /* utterance k, its window w; windows in the batch */
    while (st == CT_OK && k < n) {
        const ct_utt *u = &c->utt[utts[k]];
        int f = u->frames < max_frames ? u->frames : max_frames, nw = ct_utt_windows(f, T);
        int start = w == nw - 1 ? (f > T ? f - T : 0) : w * hop, l = f < T ? f : T;
        float *xb = x + (size_t)B * T * I;
        if ((st = ct_corpus_frames(c, utts[k], start, l, xb)) != CT_OK) break;
        if (l < T) memset(xb + (size_t)l * I, 0, (size_t)(T - l) * I * sizeof *x);
        len[B] = l;
        owner[B++] = k;
        if (++w == nw) { k++; w = 0; }
        if (B == S || k == n) {   /* embed the batch, add each window to its utterance */
            m->embed(m->ctx, e, x, len, B, T);
            for (int b = 0; b < B; b++)
                for (size_t d = 0; d < D; d++) emb[(size_t)owner[b] * D + d] += e[(size_t)b * D + d];
            B = 0;
            if (ct_interrupt_signal()) st = ct_fail(CT_EINTR, "interrupted by %s", ct_interrupt_name(ct_interrupt_signal()));
        }
    }
    for (int j = 0; st == CT_OK && j < n; j++) {   /* the mean over each utterance's windows */
        int f = c->utt[utts[j]].frames < max_frames ? c->utt[utts[j]].frames : max_frames;
        float inv = 1.0f / (float)ct_utt_windows(f, T);
        for (size_t d = 0; d < D; d++) emb[(size_t)j * D + d] *= inv;
    }
    free(x); free(e); free(len); free(owner);
    return st;
}

int ct_utt_windows(int frames, int T)
{
    int hop = T / 2 > 0 ? T / 2 : 1;
    if (frames <= T) return 1;
    return 1 + (frames - T + hop - 1) / hop;   /* starts 0, hop, ..., and the last one at frames - T */
}

ct_status ct_embed_utterances(speaker_model *m, const ct_corpus *c, const int *utts, int n, int batch, int max_frames,
                              float *emb, int *batch_used)
{
    int used = 0;
    if (c->n_mels != m->n_mels)
        return ct_fail(CT_EINVAL, "verification: the features have %d values per frame but the model expects %d (--mels)",
                       c->n_mels, m->n_mels);
    if (batch < 1 || max_frames < 1)
        return ct_fail(CT_EINVAL, "verification: batch (%d) and max_frames (%d) must be >= 1", batch, max_frames);
    for (int k = 0; k < n; k++) {
        if (utts[k] < 0 || utts[k] >= c->n_utt)
            return ct_fail(CT_EINVAL, "verification: utterance %d is outside the corpus's %d utterances", utts[k], c->n_utt);
        if (c->utt[utts[k]].frames < 1) return ct_fail(CT_EINVAL, "verification: utterance %d has no frames", utts[k]);
    }
    if (n < 1) return CT_OK;
    ct_status st = m->whole_utterances ? embed_whole(m, c, utts, n, batch, max_frames, emb, &used)
                                       : embed_windows(m, c, utts, n, max_frames, batch, emb, &used);
    if (batch_used) *batch_used = used;
    return st;
}

/* emb [n, D] of utts [n], shared among the ranks of d (see ct_verify_trials_dist). st: this
 * rank's status so far; a rank that already failed still takes part in the agreement, so the
 * others stop with its message instead of waiting for it. */
static ct_status embed_shared(speaker_model *m, const ct_corpus *c, const int *utts, int n, int batch, int max_frames,
                              ct_dist *d, float *emb, int *batch_used, ct_status st)
{
    const int ranks = ct_dist_ranks(d);
    if (ranks <= 1) return st == CT_OK ? ct_embed_utterances(m, c, utts, n, batch, max_frames, emb, batch_used) : st;
    const size_t D = (size_t)m->embed_dim;
    utt_len *order = NULL;
    int *mine = NULL, *pos = NULL, k = 0;
    float *e = NULL;
    if (st == CT_OK) {
        order = ct_malloc((size_t)n * sizeof *order, "embedding order");
        mine = ct_malloc((size_t)n * sizeof *mine, "embedding order");          /* this rank's utterances */
        pos = ct_malloc((size_t)n * sizeof *pos, "embedding order");            /* and their rows in emb */
        e = ct_malloc(((size_t)n / ranks + 1) * D * sizeof *e, "embeddings");    /* [mine, D] */
        st = order && mine && pos && e ? CT_OK : CT_ENOMEM;
    }
    if (st == CT_OK) {
        for (int j = 0; j < n; j++) order[j] = (utt_len){ j, c->utt[utts[j]].frames, utts[j] };
        qsort(order, (size_t)n, sizeof *order, by_len_desc);   /* long and short ones on every rank alike */
        for (int j = d->rank; j < n; j += ranks) { mine[k] = order[j].utt; pos[k++] = order[j].pos; }
        st = ct_embed_utterances(m, c, mine, k, batch, max_frames, e, batch_used);
    }
    if (st == CT_OK) {
        memset(emb, 0, (size_t)n * D * sizeof *emb);
        for (int j = 0; j < k; j++) memcpy(emb + (size_t)pos[j] * D, e + (size_t)j * D, D * sizeof *e);
    }
    free(order); free(mine); free(pos); free(e);
    st = ct_dist_agree(d, st);   /* every rank embedded its share, or every rank stops */
    if (st == CT_OK) st = ct_dist_sum_f32(d, emb, (size_t)n * D, "the trial list's embeddings");
    return st;
}

/* ---- evaluating a trial list ---------------------------------------------------- */

ct_status ct_verify_trials_ex(speaker_model *m, const ct_corpus *c, const ct_trial *t, int n, int batch, int max_frames,
                              ct_verify_result *res, float *scores)
{
    return ct_verify_trials_dist(m, c, t, n, batch, max_frames, NULL, res, scores);
}

ct_status ct_verify_trials_dist(speaker_model *m, const ct_corpus *c, const ct_trial *t, int n, int batch, int max_frames,
                                ct_dist *dist, ct_verify_result *res, float *scores)
{
    double t0 = ct_now();
    ct_verify_result R = { 0 };
    if (c->n_mels != m->n_mels)
        return ct_fail(CT_EINVAL, "verification: the features have %d values per frame but the model expects %d (--mels)",
                       c->n_mels, m->n_mels);
    if (batch < 1 || max_frames < 1)
        return ct_fail(CT_EINVAL, "verification: batch (%d) and max_frames (%d) must be >= 1", batch, max_frames);
    if (n < 1) return ct_fail(CT_EINVAL, "verification: no trials");
    for (int k = 0; k < n; k++)
        if (t[k].a < 0 || t[k].a >= c->n_utt || t[k].b < 0 || t[k].b >= c->n_utt)
            return ct_fail(CT_EINVAL, "verification: trial %d refers to utterance %d/%d, outside the corpus's %d utterances",
                           k, t[k].a, t[k].b, c->n_utt);

    /* row[u] = the embedding row of utterance u, -1 if no trial uses it; utts[row] = u */
    int *row = ct_malloc((size_t)c->n_utt * sizeof *row, "verification");
    int *utts = ct_malloc((size_t)c->n_utt * sizeof *utts, "verification");
    float *score = scores ? scores : ct_malloc((size_t)n * sizeof *score, "verification");
    int *label = ct_malloc((size_t)n * sizeof *label, "verification");
    float *emb = NULL;
    ct_status st = row && utts && score && label ? CT_OK : CT_ENOMEM;
    int nu = 0;
    if (st == CT_OK) {
        for (int u = 0; u < c->n_utt; u++) row[u] = -1;
        for (int k = 0; k < n && st == CT_OK; k++) {
            int ab[2] = { t[k].a, t[k].b };
            for (int j = 0; j < 2; j++)
                if (row[ab[j]] < 0) {
                    int f = c->utt[ab[j]].frames;
                    if (f < 1) { st = ct_fail(CT_EINVAL, "verification: utterance %d has no frames", ab[j]); break; }
                    if (f > max_frames) R.n_cut++;
                    utts[nu] = ab[j];
                    row[ab[j]] = nu++;
                }
        }
    }
    if (st == CT_OK) {
        emb = ct_malloc((size_t)nu * m->embed_dim * sizeof *emb, "verification embeddings");   /* [nu, D] */
        if (!emb) st = CT_ENOMEM;
    }
    st = embed_shared(m, c, utts, nu, batch, max_frames, dist, emb, &R.batch_used, st);   /* every rank, failed or not */
    if (st == CT_OK) {
        int D = m->embed_dim;
        for (int k = 0; k < n; k++) {
            float d;
            ct_euclidean_forward(&d, emb + (size_t)row[t[k].a] * D, emb + (size_t)row[t[k].b] * D, 1, D, CT_KERAS_EPSILON);
            score[k] = -d;
            label[k] = t[k].label;
            R.n_same += t[k].label == 1;
        }
        R.n_trials = n;
        R.n_utts = nu;
        st = ct_eer(score, label, n, &R.eer, &R.eer_threshold);
        if (st == CT_OK) st = ct_min_dcf(score, label, n, 0.01, 1, 1, &R.dcf01, NULL);
        if (st == CT_OK) st = ct_min_dcf(score, label, n, 0.05, 1, 1, &R.dcf05, NULL);
    }
    free(row); free(utts); free(label); free(emb);
    if (!scores) free(score);
    R.seconds = ct_now() - t0;
    if (res) *res = R;
    return st;
}

ct_status ct_verify_trials(speaker_model *m, const ct_corpus *c, const ct_trial *t, int n, int batch, int max_frames,
                           double *eer, double *dcf01, double *dcf05)
{
    ct_verify_result r;
    CT_TRY(ct_verify_trials_ex(m, c, t, n, batch, max_frames, &r, NULL));
    if (eer) *eer = r.eer;
    if (dcf01) *dcf01 = r.dcf01;
    if (dcf05) *dcf05 = r.dcf05;
    return CT_OK;
}
