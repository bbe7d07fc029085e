/* verify.h - speaker-verification metrics and the evaluation of a trial list.
 *
 * A trial is a pair of utterances with a label (1 = same speaker, 0 = different)
 * and a score (higher = more likely the same speaker). A siamese speaker model
 * (models/speaker_model.h: the siamese LSTM or the siamese CNN) scores a trial
 * as  score = -d(emb_a, emb_b),  d the Euclidean distance of layers/pair.h, the
 * embeddings of the two whole utterances (ct_embed_utterances below).
 *
 * ROC, exactly as scikit-learn's roc_curve(label, score, drop_intermediate=False)
 * builds it: the trials sorted by decreasing score; one ROC point per distinct
 * score s, "accept when score >= s", plus the starting point (threshold +inf)
 * that accepts nothing:
 *     FPR(s) = #{negatives with score >= s} / #negatives
 *     TPR(s) = #{positives with score >= s} / #positives,   FNR = 1 - TPR
 * Tied scores move together (one point per distinct score, never half of a tie).
 *
 * EER (equal error rate): walking the ROC points in order, FNR - FPR falls
 * strictly from 1 (at +inf) to -1 (at the lowest score). The ROC is joined by
 * straight lines, and the EER is where that polyline meets FNR = FPR: with
 * k the last point where FNR > FPR and k+1 the next one,
 *     t   = (FNR_k - FPR_k) / ((FNR_k - FPR_k) - (FNR_k+1 - FPR_k+1))   in (0, 1]
 *     EER = FPR_k + t (FPR_k+1 - FPR_k)      (= FNR_k + t (FNR_k+1 - FNR_k))
 * This is the value the VoxCeleb baselines compute with
 * brentq(lambda x: 1 - x - interp1d(fpr, tpr)(x), 0, 1), it does not depend on
 * which collinear ROC points roc_curve drops, and it gives 0 for perfectly
 * separated scores and 0.5 when every score is equal. The EER threshold is
 * interpolated the same way between the two points' thresholds (when k is the
 * +inf start, it is the threshold of point k+1).
 *
 * minDCF (NIST SRE / VoxCeleb): over every ROC point (the +inf start included),
 *     DCF(s) = c_miss * FNR(s) * p_target + c_fa * FPR(s) * (1 - p_target)
 * minimised, then divided by min(c_miss * p_target, c_fa * (1 - p_target)),
 * the cost of the better of the two trivial systems (accept all, reject all).
 * The threshold is that point's s (+INFINITY for the start: reject everything).
 *
 * Errors (CT_EINVAL with a message): n < 1, no positive or no negative trials,
 * a label other than 0/1, a score that is NaN or infinite, p_target outside
 * (0, 1), negative costs.
 */
#ifndef CT_VERIFY_H
#define CT_VERIFY_H
#include "core/error.h"
#include "io/corpus.h"
#include "io/trials.h"
#include "models/speaker_model.h"

/* eer in [0, 1]; threshold may be NULL. */
ct_status ct_eer(const float *score, const int *label, int n, double *eer, double *threshold);
/* min_dcf normalised as above; threshold may be NULL. */
ct_status ct_min_dcf(const float *score, const int *label, int n, double p_target, double c_miss, double c_fa,
                     double *min_dcf, double *threshold);

/* The ROC points ct_eer and ct_min_dcf work on, as described above: *m points,
 * point 0 the +inf start (fpr 0, fnr 1), then one per distinct score in
 * decreasing order (thr = that score). *fpr, *fnr, *thr are malloc'd [*m]
 * (free each with free()); the same errors as ct_eer. */
ct_status ct_roc_points(const float *score, const int *label, int n, double **fpr, double **fnr, double **thr, int *m);

/* What ct_verify_trials_ex measured. */
typedef struct {
    int n_trials, n_same;     /* trials scored, of which same-speaker */
    int n_utts;               /* distinct utterances embedded */
    int n_cut;                /* of those, cut to max_frames */
    int batch_used;           /* utterances (LSTM) or windows (CNN) embedded at once (batch, or fewer to bound memory) */
    double eer, eer_threshold;
    double dcf01, dcf05;      /* minDCF at p_target 0.01 and 0.05, c_miss = c_fa = 1 */
    double seconds;           /* wall time of embedding and scoring */
} ct_verify_result;

/* Embedding whole utterances with a speaker model (evaluation mode).
 *
 * utts [n] are utterance indices into c; emb [n, D] receives their embeddings
 * in that order. Each utterance counts up to max_frames frames (longer ones are
 * cut to their first max_frames). How depends on the model:
 *   whole_utterances = 1 (the siamese LSTM): each utterance is embedded in one
 *     piece, in batches of up to `batch` utterances sorted by decreasing length,
 *     each batch zero-padded to its longest member with the lengths passed to
 *     the model so the padding changes nothing;
 *   whole_utterances = 0 (the siamese CNN, which sees crops of exactly T =
 *     frames frames): windows of T frames at starts 0, hop, 2 hop, ... with
 *     hop = T/2 (at least 1), the last window aligned to the utterance's end
 *     (start f - T, so it may overlap its neighbour by more than T/2), in all
 *     ct_utt_windows(f, T) windows; an utterance of f <= T frames is one window,
 *     zero-padded after its f frames, as in training. Windows are embedded in
 *     batches of up to `batch` windows (any utterance's windows may share a
 *     batch: in evaluation mode each window's embedding depends on it alone),
 *     and the utterance's embedding is the mean of its windows' embeddings.
 * The batch is reduced when its activations would exceed 512 MiB. It (re)plans
 * the model's embedding memory (plan_embed): the LSTM keeps separate memory for
 * it; the CNN embeds with its tower's activations (grown if the batch is larger
 * than the training batch), which the next training batch overwrites anyway, so
 * either can run between epochs. *batch_used (may be NULL) = sequences (LSTM)
 * or windows (CNN) embedded at once. Errors: CT_EINVAL (mismatched n_mels, bad
 * batch/max_frames, an index out of range, an empty utterance), CT_ENOMEM. */
ct_status ct_embed_utterances(speaker_model *m, const ct_corpus *c, const int *utts, int n, int batch, int max_frames,
                              float *emb, int *batch_used);
/* Windows of T frames an utterance of `frames` frames is embedded with (see above). */
int ct_utt_windows(int frames, int T);

/* Evaluate a trial list with a speaker model.
 *
 * m: built and holding the weights to evaluate (e.g. ct_speaker_model_lstm(&lstm)).
 * c: the corpus the trials index (t[k].a, t[k].b are utterance indices into c,
 *    as io/trials.h resolves them); c->n_mels must equal m->n_mels.
 * Every utterance that appears in t is embedded exactly once by
 * ct_embed_utterances (whole, not cropped, up to max_frames frames; the ones
 * longer than that are counted in n_cut), with `batch` as described there.
 * Each trial is scored -d(emb_a, emb_b); eer, dcf01, dcf05 are
 * ct_eer and ct_min_dcf (p_target 0.01 and 0.05, c_miss = c_fa = 1) of those
 * scores. Deterministic; OpenBLAS's thread count (core/threads.h) applies.
 * Errors: CT_EINVAL (mismatched n_mels, bad batch/max_frames, an index out of
 * range, trials of only one label), CT_ENOMEM. Outputs may be NULL. */
ct_status ct_verify_trials(speaker_model *m, const ct_corpus *c, const ct_trial *t, int n, int batch, int max_frames,
                           double *eer, double *dcf01, double *dcf05);
/* The same with everything it measured; scores [n] (may be NULL) receives each trial's score. */
ct_status ct_verify_trials_ex(speaker_model *m, const ct_corpus *c, const ct_trial *t, int n, int batch, int max_frames,
                              ct_verify_result *res, float *scores);
/* ct_verify_trials_ex on the ranks of a data-parallel run (train/dist.h; NULL or one rank:
 * ct_verify_trials_ex itself). Every rank calls it with the same arguments. The utterances,
 * in order of decreasing length, are dealt out to the ranks in turn; each rank embeds its
 * own, a sum over the ranks (every other rank contributes zeros to a row) gives every rank
 * every embedding, and every rank scores the whole list, so all of them return the same
 * numbers. An utterance's embedding does not depend on which others share its batch, so
 * these are the numbers of one process. res->batch_used is this rank's. A failure on any
 * rank fails every rank, with that rank's message. */
struct ct_dist;
ct_status ct_verify_trials_dist(speaker_model *m, const ct_corpus *c, const ct_trial *t, int n, int batch, int max_frames,
                                struct ct_dist *d, ct_verify_result *res, float *scores);

#endif
