#!/bin/sh
# gpu-e2e.sh - every model trained on one device and evaluated on two from the same weights,
# on data made on the spot (scripts/e2e_data.py: synthetic speakers as WAV files, images as
# IDX files; nothing to download). A step of scripts/gpu-check.sh; runs anywhere.
#
#   usage: scripts/gpu-e2e.sh CTRAIN OUTDIR [TRAIN_DEVICE [EVAL_DEVICE_A EVAL_DEVICE_B]]
#          (defaults: train on gpu, evaluate on gpu and cpu)
#
# siamese-lstm and siamese-cnn: `ctrain prep voxceleb` on the WAVs, 2 epochs of training, then
# `ctrain eval` with --scores on both devices: the per-trial scores must agree to 1e-4 of the
# largest (a float32 forward on two devices: about 1e-6 apart) and the EERs to within two
# trials' worth. cnn: 2 epochs, then `ctrain eval` on both: test losses to 1e-4 (the 4
# decimals eval prints) and right predictions to within 2. Prints one line per model and exits 1 if any check failed.
# E2E_THREADS sets the CPU threads (default 4).
set -u
[ $# -ge 2 ] || { echo "usage: scripts/gpu-e2e.sh CTRAIN OUTDIR [TRAIN_DEVICE [EVAL_A EVAL_B]]" >&2; exit 2; }
ctrain=$1; out=$2; dev=${3:-gpu}; ea=${4:-gpu}; eb=${5:-cpu}
threads=${E2E_THREADS:-4}
here=$(cd "$(dirname -- "$0")/.." && pwd -P) || exit 2
py=""
for c in python3 /usr/bin/python3; do command -v "$c" >/dev/null 2>&1 && { py=$c; break; }; done
[ -n "$py" ] || { echo "gpu-e2e: python3 is needed to make the data" >&2; exit 2; }
mkdir -p "$out" || exit 2
fail=0
bad() { echo "FAIL $*"; fail=1; }

"$py" "$here/scripts/e2e_data.py" "$out/data" || { echo "gpu-e2e: making the data failed" >&2; exit 1; }
"$ctrain" prep voxceleb --wav "$out/data/wav" --out "$out/data/feats.h5" --threads "$threads" > "$out/prep.log" 2>&1 ||
  { echo "gpu-e2e: ctrain prep failed: $(tail -n 2 "$out/prep.log")" >&2; exit 1; }

# compare KIND A B: the two evaluations' agreement (prints it; exit 1 when they disagree)
compare() {
  "$py" - "$@" <<'EOF'
import json, re, sys
kind, a, b = sys.argv[1:4]
if kind == "scores":
    def rows(p):
        return [l.split() for l in open(p) if l.strip()]
    ra, rb = rows(a + ".scores"), rows(b + ".scores")
    if len(ra) != len(rb) or any(x[1:] != y[1:] for x, y in zip(ra, rb)):
        print("the two score files list different trials"); sys.exit(1)
    sa, sb = [float(x[0]) for x in ra], [float(y[0]) for y in rb]
    err = max(abs(x - y) for x, y in zip(sa, sb)) / max(max(abs(y) for y in sb), 1e-6)
    ja, jb = json.load(open(a + ".json")), json.load(open(b + ".json"))
    ok = err <= 1e-4 and abs(ja["eer"] - jb["eer"]) <= 2.0 / ja["n_trials"] + 1e-12
    print("EER %.2f%% and %.2f%%, %d trials, scores agree to %.1e of the largest" % (100 * ja["eer"], 100 * jb["eer"], ja["n_trials"], err))
    sys.exit(0 if ok else 1)
else:
    def res(p):
        m = re.search(r"test loss: ([0-9.]+) - test accuracy: ([0-9.]+) \((\d+)/(\d+)\)", open(p).read())
        if not m: print("no 'test loss' line in " + p); sys.exit(1)
        return float(m.group(1)), int(m.group(3)), int(m.group(4))
    (la, ca, n), (lb, cb, _) = res(a + ".log"), res(b + ".log")
    ok = abs(la - lb) <= 1.0001e-4 and abs(ca - cb) <= 2   # the printed losses: 4 decimals
    print("test loss %.4f and %.4f, right %d and %d of %d" % (la, lb, ca, cb, n))
    sys.exit(0 if ok else 1)
EOF
}

for m in siamese-lstm siamese-cnn; do
  if ! "$ctrain" train "$m" --device "$dev" --data "$out/data/feats.h5" --pairs 2048 --val-pairs 256 --epochs 2 --batch 128 \
       --threads "$threads" --no-progress --out "$out/$m.h5" > "$out/train-$m.log" 2>&1; then
    bad "$m: training on $dev: $(tail -n 1 "$out/train-$m.log")"; continue
  fi
  ok=1
  for e in "$ea" "$eb"; do
    "$ctrain" eval "$m" --device "$e" --threads "$threads" --weights "$out/$m.h5" --data "$out/data/feats.h5" \
      --trials "$out/data/trials.txt" --scores "$out/$m-$e.scores" --json "$out/$m-$e.json" > "$out/eval-$m-$e.log" 2>&1 ||
      { bad "$m: evaluation on $e: $(tail -n 1 "$out/eval-$m-$e.log")"; ok=0; }
  done
  [ $ok = 1 ] || continue
  if r=$(compare scores "$out/$m-$ea" "$out/$m-$eb"); then echo "ok   $m: trained on $dev; eval on $ea and $eb: $r"
  else bad "$m: trained on $dev; eval on $ea and $eb disagree: $r"; fi
done

if "$ctrain" train cnn --device "$dev" --data "$out/data/images" --samples 4000 --val-samples 1000 --epochs 2 --batch 128 \
     --threads "$threads" --no-progress --out "$out/cnn.h5" > "$out/train-cnn.log" 2>&1; then
  ok=1
  for e in "$ea" "$eb"; do
    "$ctrain" eval cnn --device "$e" --threads "$threads" --weights "$out/cnn.h5" --data "$out/data/images" > "$out/cnn-$e.log" 2>&1 ||
      { bad "cnn: evaluation on $e: $(tail -n 1 "$out/cnn-$e.log")"; ok=0; }
  done
  if [ $ok = 1 ]; then
    if r=$(compare images "$out/cnn-$ea" "$out/cnn-$eb"); then echo "ok   cnn: trained on $dev; eval on $ea and $eb: $r"
    else bad "cnn: trained on $dev; eval on $ea and $eb disagree: $r"; fi
  fi
else
  bad "cnn: training on $dev: $(tail -n 1 "$out/train-cnn.log")"
fi
exit $fail
