#!/bin/sh
# gpu-resume.sh - exact resume on one device: each model trained straight through, and the same
# run stopped after some batches (--stop-after-steps, inside an epoch) and resumed from its
# checkpoint; the two sets of weights must be equal bit for bit. A step of scripts/gpu-check.sh;
# runs anywhere (DEVICE cpu too).
#
#   usage: scripts/gpu-resume.sh CTRAIN OUTDIR [DEVICE [FEATS.h5 [IMAGES_DIR]]]
#          (defaults: gpu, synthetic speakers, synthetic images)
#
# siamese-lstm on FEATS.h5 (gpu-e2e.sh's store: utterances of many lengths, so batches with
# shorter sequences, which the GPU LSTM runs on cuDNN's standard algorithm, alternate with
# full-length ones, which it runs on the persistent kernel: the resumed run must choose the
# same algorithm for each batch as the uninterrupted one); cnn (the Keras mnist_cnn: dropout,
# deterministic convolutions) on IMAGES_DIR. Weights compared with h5diff, else h5py.
# Prints one line per model and exits 1 if any check failed. RESUME_THREADS sets the CPU threads.
set -u
[ $# -ge 2 ] || { echo "usage: scripts/gpu-resume.sh CTRAIN OUTDIR [DEVICE [FEATS.h5 [IMAGES_DIR]]]" >&2; exit 2; }
ctrain=$1; out=$2; dev=${3:-gpu}; feats=${4:-synthetic}; images=${5:-synthetic}
threads=${RESUME_THREADS:-4}
stop=21
mkdir -p "$out" || exit 2
fail=0

# same A B: the weights under /model of two files equal bit for bit (prints how they compare)
same() {
  if command -v h5diff >/dev/null 2>&1; then
    h5diff "$1" "$2" model model > /dev/null 2>&1 && { echo "h5diff: equal"; return 0; }
    echo "h5diff: the weights differ"; return 1
  fi
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 && "$py" -c 'import h5py, numpy' 2>/dev/null || continue
    "$py" - "$1" "$2" <<'EOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r")["model"], h5py.File(sys.argv[2], "r")["model"]
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
bad, worst = [], 0.0
for n in names:
    if n not in b or a[n].shape != b[n].shape:
        bad.append(n); continue
    x, y = np.asarray(a[n][()], np.float64), np.asarray(b[n][()], np.float64)
    if not np.array_equal(x, y):
        bad.append(n); worst = max(worst, float(np.max(np.abs(x - y))))
print("h5py: %d tensors compared, %d differ%s" % (len(names), len(bad), " (largest difference %.3g, in %s)" % (worst, bad[:3]) if bad else ""))
sys.exit(1 if bad or not names else 0)
EOF
    return $?
  done
  echo "neither h5diff nor python3 with h5py to compare the weights"; return 1
}

for m in siamese-lstm cnn; do
  case $m in
    siamese-lstm) args="--data $feats --pairs 2048 --val-pairs 256" ;;
    cnn) args="--data $images --samples 4000 --val-samples 1000 --deterministic" ;;
  esac
  [ "$dev" = cpu ] && args=$(echo "$args" | sed 's/ --deterministic//')
  run="$ctrain train $m $args --epochs 2 --batch 128 --device $dev --threads $threads --no-progress --no-run-dir"
  rm -f "$out/$m-straight.h5" "$out/$m-resumed.h5" "$out/$m-checkpoint.h5"
  if ! $run --out "$out/$m-straight.h5" > "$out/$m-straight.log" 2>&1; then
    echo "FAIL $m: the uninterrupted run on $dev: $(tail -n 1 "$out/$m-straight.log")"; fail=1; continue
  fi
  if ! $run --checkpoint "$out/$m-checkpoint.h5" --stop-after-steps $stop --out "$out/$m-resumed.h5" > "$out/$m-stopped.log" 2>&1 ||
     [ ! -f "$out/$m-checkpoint.h5" ]; then
    echo "FAIL $m: the run stopped after $stop batches on $dev: $(tail -n 1 "$out/$m-stopped.log")"; fail=1; continue
  fi
  if ! "$ctrain" train "$m" --resume "$out/$m-checkpoint.h5" --device "$dev" --threads "$threads" --no-progress --no-run-dir \
       --out "$out/$m-resumed.h5" > "$out/$m-resumed.log" 2>&1; then
    echo "FAIL $m: the resumed run on $dev: $(tail -n 1 "$out/$m-resumed.log")"; fail=1; continue
  fi
  if r=$(same "$out/$m-straight.h5" "$out/$m-resumed.h5"); then
    echo "ok   $m: stopped after $stop batches and resumed on $dev = the uninterrupted run, bit for bit ($r)"
  else
    echo "FAIL $m: stopped after $stop batches and resumed on $dev differs from the uninterrupted run: $r"; fail=1
  fi
done
exit $fail
