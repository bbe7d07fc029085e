/* test_metrics.c - EER and minDCF (train/verify.h) against scikit-learn's
 * roc_curve (tests/golden/metrics_*.h5, from tests/golden_gen/gen_metrics.py)
 * and against cases worked by hand; and the errors for unusable trial sets.
 * Tolerance: 1e-6 of the reference value (EER, minDCF, thresholds), which for
 * these values in [0, 1] is at most 1e-6 absolute; typically seen: ~1e-8, the
 * float rounding of the reported number. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "io/h5.h"
#include "train/verify.h"

static void near(const char *what, double got, double want, double tol)
{
    float g = (float)got;
    t_close_d(what, &g, &want, 1, tol);
}

static void golden_case(const char *name)
{
    char file[64];
    snprintf(file, sizeof file, "metrics_%s.h5", name);
    t_case("metrics/sklearn %s", name);
    hid_t f = t_golden_open(file);
    if (f < 0) return;
    int n = (int)t_golden_attr(f, "n");
    if (!t_check(n >= 2, "%s: n = %d", file, n)) { ct_h5_close(f); return; }
    float *score = t_golden(f, "score", (size_t)n);
    int *label = t_golden_i32(f, "label", (size_t)n);
    double eer = -1, thr = 0, d01 = -1, d05 = -1;
    ct_status st = ct_eer(score, label, n, &eer, &thr);
    t_check(st == CT_OK, "ct_eer: %s", ct_last_error());
    st = ct_min_dcf(score, label, n, 0.01, 1, 1, &d01, NULL);
    t_check(st == CT_OK, "ct_min_dcf 0.01: %s", ct_last_error());
    st = ct_min_dcf(score, label, n, 0.05, 1, 1, &d05, NULL);
    t_check(st == CT_OK, "ct_min_dcf 0.05: %s", ct_last_error());
    near("eer", eer, t_golden_attr(f, "eer"), 1e-6);
    near("eer threshold", thr, t_golden_attr(f, "eer_threshold"), 1e-6);
    near("minDCF(0.01)", d01, t_golden_attr(f, "dcf01"), 1e-6);
    near("minDCF(0.05)", d05, t_golden_attr(f, "dcf05"), 1e-6);
    free(score);
    free(label);
    ct_h5_close(f);
}

void suite_metrics(void)
{
    const char *sets[] = { "random", "ties", "separable", "tiny", "distance" };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) golden_case(sets[i]);

    double eer, thr, dcf, dthr;
    t_case("metrics/hand-worked 4 trials");
    {
        /* Same-speaker scores 0.9, 0.5, 0.2; one different-speaker trial at 0.7.
         * ROC points (threshold: FPR, FNR):  +inf: 0, 1   0.9: 0, 2/3   0.7: 1, 2/3
         *                                     0.5: 1, 1/3   0.2: 1, 0
         * FNR - FPR = 1, 2/3, -1/3, ...: the crossing is on the segment 0.9 -> 0.7,
         * t = (2/3) / (2/3 + 1/3) = 2/3, EER = 0 + t (1 - 0) = 2/3,
         * threshold = 0.9 + t (0.7 - 0.9) = 0.76667.
         * DCF at p = 0.5, costs 1: 0.5 FNR + 0.5 FPR = 1/2, 1/3, 5/6, 2/3, 1/2;
         * min 1/3 (threshold 0.9), normalised by min(0.5, 0.5): 2/3. */
        float s[] = { 0.5f, 0.7f, 0.9f, 0.2f };
        int y[] = { 1, 0, 1, 1 };
        t_check(ct_eer(s, y, 4, &eer, &thr) == CT_OK, "%s", ct_last_error());
        near("eer", eer, 2.0 / 3.0, 1e-6);
        near("threshold", thr, 0.9 + (2.0 / 3.0) * (0.7 - 0.9), 1e-6);
        t_check(ct_min_dcf(s, y, 4, 0.5, 1, 1, &dcf, &dthr) == CT_OK, "%s", ct_last_error());
        near("minDCF", dcf, 2.0 / 3.0, 1e-6);
        near("minDCF threshold", dthr, 0.9f, 1e-6);
    }

    t_case("metrics/perfect separation gives EER 0");
    {
        float s[] = { -3, 2, -1, 5, 0.5f, -2 };
        int y[] = { 0, 1, 0, 1, 1, 0 };
        t_check(ct_eer(s, y, 6, &eer, &thr) == CT_OK, "%s", ct_last_error());
        near("eer", eer, 0, 1e-6);
        t_check(thr > -1 && thr <= 0.5f, "threshold %g should lie between the classes", thr);
        t_check(ct_min_dcf(s, y, 6, 0.01, 1, 1, &dcf, NULL) == CT_OK, "%s", ct_last_error());
        near("minDCF", dcf, 0, 1e-6);
    }

    t_case("metrics/all scores equal gives EER 0.5");
    {
        float s[] = { 0.3f, 0.3f, 0.3f, 0.3f, 0.3f };
        int y[] = { 1, 0, 0, 1, 0 };
        t_check(ct_eer(s, y, 5, &eer, &thr) == CT_OK, "%s", ct_last_error());
        near("eer", eer, 0.5, 1e-6);
        t_check(ct_min_dcf(s, y, 5, 0.05, 1, 1, &dcf, NULL) == CT_OK, "%s", ct_last_error());
        near("minDCF (no better than a trivial system)", dcf, 1.0, 1e-6);
    }

    t_case("metrics/errors: no positives, no negatives, NaN, bad label, bad p_target");
    {
        float s[] = { 0.1f, 0.2f, 0.3f };
        int none[] = { 0, 0, 0 }, all[] = { 1, 1, 1 }, mixed[] = { 1, 0, 1 }, bad[] = { 1, 0, 2 };
        ct_status st = ct_eer(s, none, 3, &eer, NULL);
        t_check(st == CT_EINVAL && strstr(ct_last_error(), "same-speaker"), "no positives: %d %s", st, ct_last_error());
        st = ct_min_dcf(s, all, 3, 0.01, 1, 1, &dcf, NULL);
        t_check(st == CT_EINVAL && strstr(ct_last_error(), "different-speaker"), "no negatives: %d %s", st, ct_last_error());
        float sn[] = { 0.1f, NAN, 0.3f };
        st = ct_eer(sn, mixed, 3, &eer, NULL);
        t_check(st == CT_EINVAL && strstr(ct_last_error(), "trial 1"), "NaN score: %d %s", st, ct_last_error());
        st = ct_min_dcf(sn, mixed, 3, 0.01, 1, 1, &dcf, NULL);
        t_check(st == CT_EINVAL, "NaN score (minDCF): %d", st);
        st = ct_eer(s, bad, 3, &eer, NULL);
        t_check(st == CT_EINVAL && strstr(ct_last_error(), "label 2"), "label 2: %d %s", st, ct_last_error());
        st = ct_eer(s, mixed, 0, &eer, NULL);
        t_check(st == CT_EINVAL, "n = 0: %d", st);
        st = ct_min_dcf(s, mixed, 3, 1.5, 1, 1, &dcf, NULL);
        t_check(st == CT_EINVAL && strstr(ct_last_error(), "p_target"), "p_target 1.5: %d %s", st, ct_last_error());
    }
}
