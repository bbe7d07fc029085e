#!/usr/bin/python3
"""verify_scores_check.py - scores a `ctrain eval --scores` file with scikit-learn
and checks that it gives the EER ctrain reported.

    verify_scores_check.py SCORES.txt EER

SCORES.txt: one line per trial, "SCORE LABEL PATH1 PATH2", higher score = more
likely the same speaker. EER: ctrain's equal error rate as a fraction.
The EER is computed as the VoxCeleb baselines do:
    fpr, tpr, _ = roc_curve(label, score); brentq(lambda x: 1 - x - interp1d(fpr, tpr)(x), 0, 1)
Prints both values and exits 0 when they agree to 1e-6, 1 when not (or when the
file is malformed), 2 when scikit-learn or SciPy is missing (install Debian's
python3-sklearn: sh scripts/deps.sh test).
"""
import sys

try:
    import numpy as np
    from scipy.interpolate import interp1d
    from scipy.optimize import brentq
    from sklearn.metrics import roc_curve
except ImportError as e:  # the C test reports this as a skip, with the reason
    print(f"missing: {e}: install Debian's python3-sklearn (sh scripts/deps.sh test)")
    sys.exit(2)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(1)
    scores, labels = [], []
    with open(sys.argv[1]) as f:
        for no, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != 4 or parts[1] not in ("0", "1"):
                print(f"FAIL: {sys.argv[1]}:{no}: expected 'SCORE LABEL PATH1 PATH2', got {line!r}")
                sys.exit(1)
            scores.append(float(parts[0]))
            labels.append(int(parts[1]))
    fpr, tpr, _ = roc_curve(np.array(labels), np.array(scores), pos_label=1)
    eer = brentq(lambda x: 1.0 - x - interp1d(fpr, tpr)(x), 0.0, 1.0)
    want = float(sys.argv[2])
    print(f"{len(scores)} trials: scikit-learn EER {eer:.8f}, ctrain {want:.8f}")
    sys.exit(0 if abs(eer - want) <= 1e-6 else 1)


if __name__ == "__main__":
    main()
