#!/bin/sh
# same-results.sh - fixed-seed training runs whose weights and logs must not change when the
# code is restructured: every model, both LSTM pools, each optimizer and schedule, a resume
# from the middle of an epoch, and 2 MPI ranks. `record` keeps their weights, checkpoints
# and CSV logs (timing columns cut) in DIR; `compare` runs them again with this tree's
# binary and checks each file against DIR: weights bit for bit (scripts/same-weights.sh),
# logs line for line.
#
#   usage: scripts/same-results.sh record DIR    [CTRAIN=bin/ctrain]
#          scripts/same-results.sh compare DIR   [CTRAIN=bin/ctrain]
#   exit 0 when every run matches (compare) or was recorded (record), 1 otherwise.
#
# The runs are small (a few seconds each on 2 cores) and use 2 threads. They stay on the
# CPU; a GPU run's weights depend on cuDNN's algorithms and are checked by gpu-check.sh.
set -u
[ $# = 2 ] || { echo "usage: scripts/same-results.sh record|compare DIR" >&2; exit 2; }
mode=$1; ref=$2
here=$(cd "$(dirname "$0")/.." && pwd)
ctrain=${CTRAIN:-$here/bin/ctrain}
[ -x "$ctrain" ] || { echo "same-results: $ctrain not found; run make first" >&2; exit 2; }
case $mode in
  record) out=$ref; mkdir -p "$out" ;;
  compare) [ -d "$ref" ] || { echo "same-results: no recorded runs in $ref" >&2; exit 2; }
           out=$(mktemp -d); trap 'rm -rf "$out"' EXIT ;;
  *) echo "usage: scripts/same-results.sh record|compare DIR" >&2; exit 2 ;;
esac

LSTM="--data synthetic --pairs 512 --val-pairs 128 --batch 64 --hidden 32 --embed 16 --frames 40 --speakers 10 --utts 6"
CNNS="--data synthetic --pairs 256 --val-pairs 64 --batch 32 --frames 40 --speakers 8 --utts 6"
COMMON="--threads 2 --no-run-dir --no-progress"
ARCH="conv8k3,batchnorm,relu,maxpool2,conv16k3,relu,gap,dropout0.25,dense10"

failed=0
run() {   # run NAME ARGS...: train into $out/NAME.{h5,csv}
  name=$1; shift
  if ! "$@" --out "$out/$name.h5" --csv "$out/$name.full.csv" $COMMON > "$out/$name.log" 2>&1; then
    echo "$name: the run failed:"; tail -3 "$out/$name.log"; failed=1; return
  fi
  # the CSV without its timing columns (seconds, train_seconds, val_seconds)
  awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i !~ /seconds/) keep[i] = 1 }
                    { s = ""; for (i = 1; i <= NF; i++) if (keep[i]) s = s (s == "" ? "" : ",") $i; print s }' \
      "$out/$name.full.csv" > "$out/$name.csv"
  rm -f "$out/$name.full.csv"
}

run lstm-last-sgd      "$ctrain" train siamese-lstm $LSTM --pool last --optimizer sgd --epochs 2
run lstm-mean-adam     "$ctrain" train siamese-lstm $LSTM --pool mean --optimizer adam --epochs 2
run lstm-rmsprop-step  "$ctrain" train siamese-lstm $LSTM --optimizer rmsprop --schedule step --step-size 1 \
                       --gamma 0.5 --clip-norm 1 --weight-decay 1e-4 --epochs 3
run lstm-adamw-2layers "$ctrain" train siamese-lstm $LSTM --optimizer adamw --layers 2 --recurrent hard_sigmoid \
                       --weight-decay 1e-3 --schedule cosine --epochs 2
run lstm-fixed-pairs   "$ctrain" train siamese-lstm $LSTM --fixed-pairs --epochs 2 --seed 7
run scnn-adam          "$ctrain" train siamese-cnn $CNNS --optimizer adam --epochs 2
run small-cnn-sgd      "$ctrain" train small-cnn --data synthetic --optimizer sgd --epochs 2 --batch 32
run cnn-adam           "$ctrain" train cnn --data synthetic --samples 512 --val-samples 128 --arch "$ARCH" \
                       --optimizer adam --epochs 2 --batch 32
run cnn-rmsprop        "$ctrain" train cnn --data synthetic --samples 512 --val-samples 128 --arch "$ARCH" \
                       --optimizer rmsprop --epochs 2 --batch 32

# resume from the middle of epoch 2: the resumed run's weights are the whole run's
run lstm-stop "$ctrain" train siamese-lstm $LSTM --optimizer adam --epochs 3 --stop-after-steps 12 \
    --checkpoint "$out/lstm-stop.ckpt.h5"
[ -f "$out/lstm-stop.ckpt.h5" ] && run lstm-resumed "$ctrain" train siamese-lstm --resume "$out/lstm-stop.ckpt.h5"
rm -f "$out/lstm-stop.h5" "$out/lstm-stop-interrupted.h5"

# 2 MPI ranks, one thread each
if command -v mpirun > /dev/null 2>&1; then
  MPI="mpirun -np 2 --oversubscribe"
  [ "$(id -u)" = 0 ] && MPI="$MPI --allow-run-as-root"
  COMMON_SAVED=$COMMON; COMMON="--threads 1 --no-run-dir --no-progress"
  run mpi2-lstm $MPI "$ctrain" train siamese-lstm $LSTM --optimizer adam --epochs 2
  run mpi2-cnn-syncbn $MPI "$ctrain" train cnn --data synthetic --samples 512 --val-samples 128 --arch "$ARCH" \
      --optimizer adam --epochs 2 --batch 32 --sync-batchnorm
  COMMON=$COMMON_SAVED
else
  echo "same-results: mpirun not found: the 2-rank runs are left out"
fi

n=0
for f in "$out"/*.h5 "$out"/*.csv; do
  [ -f "$f" ] && n=$((n + 1))
done
if [ "$mode" = record ]; then
  rm -f "$out"/*.log
  echo "same-results: recorded $n files in $out"
  exit $failed
fi

same=0
for f in "$ref"/*.h5 "$ref"/*.csv; do
  [ -f "$f" ] || continue
  b=$(basename "$f")
  if [ ! -f "$out/$b" ]; then echo "$b: not made by this tree"; failed=1; continue; fi
  case $b in
    *.h5) if r=$(sh "$here/scripts/same-weights.sh" "$f" "$out/$b"); then same=$((same + 1)); else echo "$b: $r"; failed=1; fi ;;
    *.csv) if cmp -s "$f" "$out/$b"; then same=$((same + 1)); else echo "$b: the log differs:"; diff "$f" "$out/$b" | head -6; failed=1; fi ;;
  esac
done
echo "same-results: $same files the same as $ref, failures: $failed"
exit $failed
