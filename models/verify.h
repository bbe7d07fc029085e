/* verify.h - speaker-verification metrics and the evaluation of a trial list.
 *
 * A trial is a pair of utterances with a label (1 = same speaker, 0 = different)
 * and a score (higher = more likely the same speaker). The siamese LSTM scores a
 * trial as  score = -d(emb_a, emb_b),  d the Euclidean distance of layers/pair.h,
 * the embeddings of the two whole utterances (models/siamese_lstm.h).
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
#include "models/siamese_lstm.h"

/* eer in [0, 1]; threshold may be NULL. */
ct_status ct_eer(const float *score, const int *label, int n, double *eer, double *threshold);
/* min_dcf normalised as above; threshold may be NULL. */
ct_status ct_min_dcf(const float *score, const int *label, int n, double p_target, double c_miss, double c_fa,
                     double *min_dcf, double *threshold);

/* What ct_verify_trials_ex measured. */
typedef struct {
    int n_trials, n_same;     /* trials scored, of which same-speaker */
    int n_utts;               /* distinct utterances embedded */
    int n_cut;                /* of those, cut to max_frames */
    int batch_used;           /* utterances embedded at once (batch, or fewer to bound memory) */
    double eer, eer_threshold;
    double dcf01, dcf05;      /* minDCF at p_target 0.01 and 0.05, c_miss = c_fa = 1 */
    double seconds;           /* wall time of embedding and scoring */
} ct_verify_result;

/* Evaluate a trial list with a siamese LSTM.
 *
 * m: built (siamese_lstm_build) and holding the weights to evaluate; its
 *    training activations (siamese_lstm_plan) are left alone, so this can run
 *    between epochs. It (re)plans m's embedding memory (siamese_lstm_plan_embed),
 *    which stays allocated until siamese_lstm_free or the next plan.
 * c: the corpus the trials index (t[k].a, t[k].b are utterance indices into c,
 *    as io/trials.h resolves them); c->n_mels must equal m->cfg.n_mels.
 * Every utterance that appears in t is embedded exactly once, whole (not
 * cropped) up to max_frames frames (longer ones are cut to their first
 * max_frames frames and counted in n_cut), in batches of up to `batch`
 * utterances sorted by length, each batch zero-padded to its longest member
 * with the lengths passed to the LSTM so the padding changes nothing. The batch
 * is reduced when its activations for the longest utterance would exceed
 * 512 MiB. Each trial is scored -d(emb_a, emb_b); eer, dcf01, dcf05 are
 * ct_eer and ct_min_dcf (p_target 0.01 and 0.05, c_miss = c_fa = 1) of those
 * scores. Deterministic; OpenBLAS's thread count (core/threads.h) applies.
 * Errors: CT_EINVAL (mismatched n_mels, bad batch/max_frames, an index out of
 * range, trials of only one label), CT_ENOMEM. Outputs may be NULL. */
ct_status ct_verify_trials(siamese_lstm *m, const ct_corpus *c, const ct_trial *t, int n, int batch, int max_frames,
                           double *eer, double *dcf01, double *dcf05);
/* The same with everything it measured; scores [n] (may be NULL) receives each trial's score. */
ct_status ct_verify_trials_ex(siamese_lstm *m, const ct_corpus *c, const ct_trial *t, int n, int batch, int max_frames,
                              ct_verify_result *res, float *scores);

#endif
