#!/bin/sh
# scale.sh - `make bench-scale`: training from a feature store larger than this
# machine's memory, with no dataset needed.
#   1. bench/scale_store writes BIG, a VoxCeleb-sized store of at least 1.5x the
#      machine's RAM (5,994 speakers, 4-12 s utterances of 40 log-mels, float32),
#      and SMALL, a 1 GiB store of the same kind (1,000 speakers: about 8 utterances each) (both kept in DIR for later runs);
#   2. the seed protocol's epoch (siamese LSTM, 100-frame crops, batch 128,
#      PAIRS pairs, 2 threads) trained three ways:
#        in-RAM:   SMALL loaded into memory (the path every earlier ctrain took);
#        warm:     SMALL streamed (--data-memory 64M) with the file in the page cache;
#        big-cold: BIG streamed under the default budget after the page cache is
#                  dropped (as root; otherwise the line says it could not drop it);
#      in-RAM and warm alternate ROUNDS times (SCALE_ROUNDS, default 2), so that a
#      machine's drift falls on both; their median ratio closes the report.
#      SCALE_BIG=0 leaves the big store's run out;
#   3. for each run: training pairs/s of the epoch, the peak resident memory, and
#      the bytes the process read (rchar: through read(2); read_bytes: from the
#      disk) per byte of crop the batches used (PAIRS x 2 crops x 100 x 40 x 4 B).
# Writes DIR/scale-HOST.txt and prints it.
#   usage: bench/scale.sh CTRAIN_BINARY SCALE_STORE_BINARY [DIR] [PAIRS]
set -u
ctrain=$1
maker=$2
dir=${3:-/var/tmp/ctrain-scale}
pairs=${4:-300000}
mkdir -p "$dir" || exit 1
ram_gib=$(awk '/MemTotal/ { printf "%d", $2 / 1048576 + 0.999 }' /proc/meminfo)
big_gib=$(( ram_gib * 3 / 2 + 1 ))
big=$dir/big-${big_gib}g.h5
small=$dir/small-1g.h5
free_gib=$(df -P -k "$dir" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')
if [ ! -f "$big" ] && [ "$free_gib" -lt $(( big_gib + 3 )) ]; then
  echo "bench-scale: $dir has $free_gib GiB free; the store needs $big_gib GiB (1.5x the $ram_gib GiB of memory): set a DIR with room"
  exit 1
fi
[ -f "$small" ] || "$maker" "$small" 1 1000 || exit 1
[ -f "$big" ] || "$maker" "$big" "$big_gib" || exit 1
out=$dir/scale-$(hostname).txt
crop_bytes=$(( pairs * 2 * 100 * 40 * 4 ))

# run NAME STORE [--data-memory SIZE]: one epoch; the process's /proc/PID/io sampled until it ends
run() {
  name=$1; store=$2; shift 2
  log=$dir/$name.log
  rm -rf "$dir/runs/$name" "$dir/$name-weights.h5"
  /usr/bin/time -f "maxrss_kb %M" "$ctrain" train siamese-lstm --data "$store" --pairs "$pairs" --val-pairs 0 --epochs 1 \
      --threads 2 --seed 1 --no-progress --out "$dir/$name-weights.h5" --run-dir "$dir/runs/$name" "$@" > "$log" 2>&1 &
  tpid=$!
  sleep 1
  pid=$(pgrep -P "$tpid" -x ctrain | head -n 1)
  io=""
  while kill -0 "$tpid" 2>/dev/null; do
    [ -n "$pid" ] && cur=$(cat "/proc/$pid/io" 2>/dev/null) && io=$cur
    sleep 0.5
  done
  wait "$tpid"
  secs=$(sed -n 's/^ - \([0-9.]*\)s - .*/\1/p' "$log" | tail -n 1)
  rss=$(sed -n 's/^maxrss_kb //p' "$log")
  rchar=$(echo "$io" | awk '/^rchar/ { print $2 }')
  rbytes=$(echo "$io" | awk '/^read_bytes/ { print $2 }')
  how=$(sed -n 's/^Features: //p' "$log")
  awk -v n="$name" -v s="$secs" -v p="$pairs" -v r="$rss" -v c="$rchar" -v b="$rbytes" -v u="$crop_bytes" -v h="$how" 'BEGIN {
    printf "%-9s %8.0f pairs/s  %6.1fs  RSS %6.2f GiB  rchar/used %6.2f  read_bytes/used %6.2f  (%s)\n",
           n, (s > 0 ? p / s : 0), s, r / 1048576, (u ? c / u : 0), (u ? b / u : 0), h }' >> "$out"
}

{
  echo "bench-scale on $(hostname), $(date -u +%Y-%m-%dT%H:%MZ): $(nproc) cores, $ram_gib GiB RAM, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)"
  echo "stores: $(du -h "$big" | cut -f1) $big, $(du -h "$small" | cut -f1) $small; $pairs pairs, one epoch, 2 threads"
} > "$out"
cat "$small" > /dev/null
rounds=${SCALE_ROUNDS:-2}
r=1
while [ $r -le "$rounds" ]; do
  run in-RAM "$small"
  run warm "$small" --data-memory 64M
  r=$((r + 1))
done
awk '$1 == "in-RAM" { a[++n] = $2 } $1 == "warm" { b[++m] = $2 }
     END { k = 0; for (i = 1; i <= n && i <= m; i++) if (a[i] > 0) r[++k] = b[i] / a[i];
           for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
           if (k) printf "warm / in-RAM, round by round: median %.3f (of %d rounds)\n", (k % 2 ? r[(k + 1) / 2] : (r[k / 2] + r[k / 2 + 1]) / 2), k }' \
    "$out" >> "$out"
if [ "${SCALE_BIG:-1}" = 1 ]; then
  sync
  if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then run big-cold "$big"
  else echo "big-cold: the page cache could not be dropped (not root); the big store was run as it was cached" >> "$out"; run big "$big"; fi
fi
cat "$out"
