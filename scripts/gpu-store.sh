#!/bin/sh
# gpu-store.sh - gpu-check's store step: the seed protocol's epochs fed from a
# feature store on this machine's disk, against the same protocol on synthetic
# data in memory. bench/scale_store writes the store (VoxCeleb's utterance
# lengths, GPU_STORE_SPEAKERS speakers, default 1,000; GPU_STORE_GIB GiB, default
# 8, in GPU_STORE_DIR, default /var/tmp/ctrain-gpu-store, kept for later runs); `ctrain time siamese-lstm
# --protocol seed` then runs four times on DEVICE: synthetic, the store streamed
# (--data-memory 1G: the path a store larger than memory takes) with the file in
# the page cache, with the default 4 loader threads and with 1, and the same after
# the page cache is dropped (as root; else said so). Prints each run's training
# pairs/s and its ratio to synthetic's, and before them what the batch loader alone
# reads from the store (bench_loader, beside scale_store: 1 and 4 reader threads,
# warm and cold page cache).
#   usage: scripts/gpu-store.sh CTRAIN SCALE_STORE OUTDIR DEVICE THREADS [EPOCHS] [PAIRS]
set -u
ctrain=$1; maker=$2; out=$3; dev=$4; threads=$5; epochs=${6:-2}; pairs=${7:-0}
dir=${GPU_STORE_DIR:-/var/tmp/ctrain-gpu-store}
gib=${GPU_STORE_GIB:-8}
store=$dir/store-${gib}g.h5
mkdir -p "$out" "$dir" || exit 1
[ -f "$store" ] || "$maker" "$store" "$gib" "${GPU_STORE_SPEAKERS:-1000}" || { echo "gpu-store: writing $store failed"; exit 1; }
extra=""; [ "$pairs" -gt 0 ] && extra="--pairs $pairs --val-pairs $(( pairs / 4 ))"
rc=0
one() {   # one NAME ARGS...: a `ctrain time` run, its JSON in OUTDIR/NAME.json
  name=$1; shift
  "$ctrain" time siamese-lstm --protocol seed --epochs "$epochs" --device "$dev" --threads "$threads" $extra \
      --json "$out/$name.json" "$@" > "$out/$name.log" 2>&1 || { echo "gpu-store: $name failed: $(tail -n 1 "$out/$name.log")"; rc=1; }
}
# the loader alone (bench/bench_loader): batches of the seed protocol read from the store
# by 1 and by 4 threads, ms per batch and the pairs/s it could feed
loader=$(dirname "$maker")/bench_loader
readers() {   # readers TAG: warm 1 and 4 threads, or after the page cache is dropped
  for r in 1 4; do
    [ "$1" = cold ] && { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || return 0; }
    n=2000; [ "$1" = cold ] && n=500
    "$loader" "$store" "$n" "$r" 2>&1 | sed -n "s/^loader: [0-9]* batches/loader $1: &/p" | sed 's/loader: //'
  done
}
one synthetic --data synthetic
cat "$store" > /dev/null
if [ -x "$loader" ]; then readers warm; readers cold; cat "$store" > /dev/null
else echo "gpu-store: $loader is missing: no loader-only lines"; fi
one store-warm --data "$store" --data-memory 1G
one store-warm-1t --data "$store" --data-memory 1G --loader-threads 1   # the loader thread alone
sync
if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then one store-cold --data "$store" --data-memory 1G
else echo "gpu-store: the page cache could not be dropped (not root): no cold-cache run"; fi
# each run's training samples/s as `ctrain time` reports it, from its JSON
python3 - "$out" <<'PY' || rc=1
import json, os, sys
out = sys.argv[1]
def rate(name):
    p = os.path.join(out, name + ".json")
    if not os.path.exists(p): return None
    return json.load(open(p)).get("train_samples_per_s")
base = rate("synthetic")
for n in ("synthetic", "store-warm", "store-warm-1t", "store-cold"):
    r = rate(n)
    if r is None: print("%-13s not run" % n); continue
    print("%-13s %10.0f pairs/s%s" % (n, r, "  %.1f%% of synthetic" % (100 * r / base) if base and n != "synthetic" else ""))
PY
exit $rc
