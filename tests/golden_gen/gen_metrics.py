"""gen_metrics.py - golden values for the verification metrics (models/verify.h).

For several (score, label) sets it writes tests/golden/metrics_<name>.h5 with
  score [n] float32, label [n] int32,
  root attributes eer, eer_threshold, dcf01, dcf05 (float64),
where everything is derived from scikit-learn's roc_curve (Debian's
python3-sklearn; run with /usr/bin/python3):
  fpr, tpr, thr = roc_curve(label, score, drop_intermediate=False);  fnr = 1 - tpr
  (one point per distinct score, as ctrain builds it; dropping collinear points
  changes neither the EER nor minDCF, only which two thresholds are interpolated)
  EER: the straight-line ROC segment (k, k+1) on which FNR - FPR changes sign,
       EER = fpr[k] + t (fpr[k+1] - fpr[k]),  t = d_k / (d_k - d_k+1),  d = fnr - fpr
       (checked against the VoxCeleb baselines' brentq(1 - x - interp1d(fpr, tpr)(x)))
  minDCF(p) = min_k (fnr[k] p + fpr[k] (1 - p)) / min(p, 1 - p)   (c_miss = c_fa = 1)
"""
import os
import sys

import h5py
import numpy as np
from sklearn.metrics import roc_curve

try:
    from scipy.interpolate import interp1d
    from scipy.optimize import brentq
except ImportError:  # the cross-check is optional
    brentq = None


def out_dir():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "golden")
    os.makedirs(d, exist_ok=True)
    return d


def metrics(score, label):
    fpr, tpr, thr = roc_curve(label, score.astype(np.float64), drop_intermediate=False)
    fnr = 1.0 - tpr
    d = fnr - fpr
    k = int(np.nonzero(d > 0)[0].max())       # last point with FNR > FPR (d[0] = 1 at the start)
    t = d[k] / (d[k] - d[k + 1])
    eer = fpr[k] + t * (fpr[k + 1] - fpr[k])
    eer_thr = thr[1] if k == 0 else thr[k] + t * (thr[k + 1] - thr[k])
    if brentq is not None and len(np.unique(fpr)) == len(fpr) and 0 < eer < 1:
        ref = brentq(lambda x: 1.0 - x - interp1d(fpr, tpr)(x), 0.0, 1.0)
        assert abs(ref - eer) < 1e-9, (ref, eer)
    dcf = {}
    for name, p in (("dcf01", 0.01), ("dcf05", 0.05)):
        dcf[name] = float(np.min(fnr * p + fpr * (1 - p)) / min(p, 1 - p))
    return float(eer), float(eer_thr), dcf


def save(name, score, label):
    score = np.asarray(score, dtype=np.float32)
    label = np.asarray(label, dtype=np.int32)
    eer, eer_thr, dcf = metrics(score, label)
    path = os.path.join(out_dir(), "metrics_" + name + ".h5")
    with h5py.File(path, "w") as f:
        f.attrs["generator"] = os.path.basename(sys.argv[0])
        f.attrs["n"] = float(len(score))
        f.attrs["eer"] = eer
        f.attrs["eer_threshold"] = eer_thr
        f.attrs["dcf01"] = dcf["dcf01"]
        f.attrs["dcf05"] = dcf["dcf05"]
        f.create_dataset("score", data=score)
        f.create_dataset("label", data=label)
    print("wrote %s: n %d, EER %.6f, minDCF(0.01) %.6f, minDCF(0.05) %.6f" % (path, len(score), eer, dcf["dcf01"], dcf["dcf05"]))


def main():
    rng = np.random.default_rng(20240601)
    # overlapping Gaussians, unbalanced (like a real system)
    n = 3000
    label = (rng.random(n) < 0.3).astype(np.int32)
    save("random", rng.normal(0, 1, n) + 1.5 * label, label)
    # many ties: scores quantised to a few levels
    n = 500
    label = (rng.random(n) < 0.5).astype(np.int32)
    save("ties", np.round(rng.normal(0, 1, n) + 0.8 * label, 1), label)
    # perfectly separable
    n = 200
    label = np.arange(n) % 2
    save("separable", np.where(label == 1, rng.uniform(1, 2, n), rng.uniform(-2, 0.5, n)), label)
    # the smallest possible list: one trial of each label, wrongly ordered
    save("tiny", [0.25, 0.75], [1, 0])
    # distances of a siamese model: scores -d with d >= 0, many trials
    n = 20000
    label = (rng.random(n) < 0.5).astype(np.int32)
    save("distance", -np.abs(rng.normal(1.2 - 0.8 * label, 0.2, n)), label)


if __name__ == "__main__":
    main()
