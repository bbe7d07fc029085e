/* verify_report.h - what a speaker-verification user looks at beside the EER:
 * the trial scores as a text file, the DET curve as an SVG picture and the
 * metrics as JSON (`ctrain eval siamese-* --scores/--det/--json`).
 *
 * Scores file: one line per trial, in the trial list's order,
 *     SCORE LABEL PATH1 PATH2
 * SCORE is the model's score, printed with 9 significant digits (a float32
 * reads back exactly); higher = more likely the same speaker, as NIST's and
 * scikit-learn's tools expect (the siamese models score -d(emb_a, emb_b)).
 * LABEL is 1 (same speaker) or 0, and the paths are the trial list's.
 *
 * DET curve (Martin et al., 1997; NIST's DETware): the ROC points of
 * train/verify.h, the false-alarm rate P_fa = FPR on x and the miss rate
 * P_miss = FNR on y, both on normal-deviate axes: a probability p is drawn at
 * probit(p) = Phi^-1(p), so Gaussian score distributions give straight lines.
 * Ticks at 0.1, 0.2, 0.5, 1, 2, 5, 10, 20 and 40 %; the axes run from 0.05 %
 * (lower when the trial list is large enough to reach below it, down to
 * 0.0005 %) to 60 % (higher, up to 99.5 %, when a marked point lies beyond,
 * with ticks at 60, 80, 90, 95, 98, 99 %); points at 0 or beyond the axes are
 * clipped to the frame.
 * Marked: the EER point (EER, EER), on the curve (it is where the ROC,
 * joined by straight lines, crosses P_miss = P_fa: the point between the two
 * ROC points around the crossing that ct_eer interpolates), and the operating
 * points of minDCF at p_target 0.01 and 0.05 (ROC points themselves; a rate of
 * 0, which normal-deviate axes cannot show, puts its marker on the frame).
 * Consecutive ROC points on one horizontal or vertical line are merged into
 * its two ends (the drawn curve is the same; large trial lists give a smaller
 * file).
 *
 * JSON: { "model", "data", "trials", "score": "-euclidean distance; higher = same speaker",
 *         "n_trials", "n_same", "n_different", "n_utterances", "n_cut",
 *         "eer", "eer_threshold",
 *         "min_dcf": [ { "p_target": 0.01, "c_miss": 1, "c_fa": 1, "value", "threshold",
 *                        "p_miss", "p_fa" }, { "p_target": 0.05, ... } ] }
 * eer and p_miss/p_fa are fractions (0.025 = 2.5 %); thresholds are scores.
 */
#ifndef CT_VERIFY_REPORT_H
#define CT_VERIFY_REPORT_H
#include "core/error.h"
#include "io/corpus.h"
#include "io/trials.h"
#include "train/verify.h"

/* One line per trial into `path` (format above). c->path names the utterances
 * ("utterance N" when the corpus has no paths). */
ct_status ct_scores_write(const char *path, const float *score, const ct_trial *t, int n, const ct_corpus *c);

#define CT_DET_DCF 2   /* minDCF at p_target 0.01 and 0.05 */

typedef struct {
    double *pfa, *pmiss;         /* [n] the curve's points, P_fa increasing, P_miss decreasing */
    int n;
    double eer, eer_threshold;   /* as ct_eer */
    int eer_index;               /* the EER point lies between points eer_index and eer_index + 1 */
    double p_target[CT_DET_DCF];
    double dcf[CT_DET_DCF], dcf_threshold[CT_DET_DCF];   /* as ct_min_dcf (c_miss = c_fa = 1) */
    double dcf_pfa[CT_DET_DCF], dcf_pmiss[CT_DET_DCF];   /* its operating point */
} ct_det;

/* The DET curve and its marked points of n scored trials; free with ct_det_free.
 * Errors as ct_eer's (CT_EINVAL), CT_ENOMEM. */
ct_status ct_det_build(ct_det *d, const float *score, const int *label, int n);
void      ct_det_free(ct_det *d);
/* The DET picture (title: a line above the plot, e.g. the model's file). */
ct_status ct_det_svg_write(const char *path, const ct_det *d, const char *title);
/* Phi^-1(p), the standard normal quantile, for p in (0, 1) (relative error below
 * 1e-12 after a Halley step); -INFINITY at 0, +INFINITY at 1. */
double    ct_probit(double p);

/* Writes whichever of scores_path, det_path and json_path is not NULL, for the
 * n trials t of corpus c scored score [n] (r: what ct_verify_trials_ex measured
 * of them); model, data and trials name the inputs (in the JSON and the DET's title). */
ct_status ct_verify_reports_write(const char *scores_path, const char *det_path, const char *json_path, const ct_verify_result *r,
                                  const float *score, const ct_trial *t, int n, const ct_corpus *c, const char *model,
                                  const char *data, const char *trials);

/* The JSON report (format above): r from ct_verify_trials_ex, d from ct_det_build. */
ct_status ct_verify_json_write(const char *path, const ct_verify_result *r, const ct_det *d, const char *model,
                               const char *data, const char *trials);

#endif
