#!/bin/sh
# same-weights.sh - whether two of ctrain's HDF5 files (weights or checkpoints) hold the same
# tensors under /model, bit for bit: h5diff where HDF5's tools are installed, else h5py (a GPU
# machine often has Python's h5py and no HDF5 tools). Used by gpu-check.sh's nccl step and by
# gpu-resume.sh.
#
#   usage: scripts/same-weights.sh A.h5 B.h5
#   prints one line ("h5diff: equal", "h5py: 8 tensors compared, 0 differ", ...); exit 0 when
#   the weights are the same, 1 when they differ, 2 when neither tool is here to compare them.
set -u
[ $# = 2 ] || { echo "usage: scripts/same-weights.sh A.h5 B.h5" >&2; exit 2; }
if command -v h5diff >/dev/null 2>&1; then
  h5diff "$1" "$2" model model > /dev/null 2>&1 && { echo "h5diff: equal"; exit 0; }
  echo "h5diff: the weights differ (or a file cannot be read)"; exit 1
fi
for py in python3 /usr/bin/python3; do
  command -v "$py" >/dev/null 2>&1 && "$py" -c 'import h5py, numpy' 2>/dev/null || continue
  "$py" - "$1" "$2" <<'EOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r")["model"], h5py.File(sys.argv[2], "r")["model"]
def tensors(g):
    found = []
    g.visit(lambda n: found.append(n) if isinstance(g[n], h5py.Dataset) else None)
    return found
names, names_b = tensors(a), tensors(b)
bad, worst = sorted(set(names_b) - set(names)), 0.0   # a tensor only B holds differs too
for n in names:
    if n not in names_b or a[n].shape != b[n].shape:
        bad.append(n); continue
    x, y = np.asarray(a[n][()], np.float64), np.asarray(b[n][()], np.float64)
    if not np.array_equal(x, y):
        bad.append(n); worst = max(worst, float(np.max(np.abs(x - y))))
print("h5py: %d tensors compared, %d differ%s" % (len(names), len(bad), " (largest difference %.3g, in %s)" % (worst, bad[:3]) if bad else ""))
sys.exit(1 if bad or not names else 0)
EOF
  exit $?
done
echo "neither h5diff nor python3 with h5py and numpy is here to compare the weights"
exit 2
