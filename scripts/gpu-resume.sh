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
# deterministic convolutions) on IMAGES_DIR. Weights compared by scripts/same-weights.sh.
# Prints one line per model and exits 1 if any check failed. RESUME_THREADS sets the CPU threads.
set -u
[ $# -ge 2 ] || { echo "usage: scripts/gpu-resume.sh CTRAIN OUTDIR [DEVICE [FEATS.h5 [IMAGES_DIR]]]" >&2; exit 2; }
ctrain=$1; out=$2; dev=${3:-gpu}; feats=${4:-synthetic}; images=${5:-synthetic}
threads=${RESUME_THREADS:-4}
here=$(cd "$(dirname -- "$0")" && pwd -P) || exit 2
stop=21
mkdir -p "$out" || exit 2
fail=0

# same A B: the weights under /model of two files equal bit for bit (prints how they compare)
same() { sh "$here/same-weights.sh" "$1" "$2"; }

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
