#!/bin/sh
# cpu-scaling.sh - how ctrain's CPU training speed grows with threads: the siamese
# LSTM and the Keras mnist_cnn on the bench protocol (synthetic data), one
# `ctrain time --per-layer` run per thread count, then a table of samples/s, the
# speed-up over the fewest threads and the parallel efficiency, and each layer's
# milliseconds per batch at every count (where the efficiency is lost). Where the
# CPU has AMX-BF16 or AVX512-BF16, ctrain also trains in bf16 at the fewest and the
# most threads (its own speed-up and efficiency, each layer's milliseconds). Where
# python3 has PyTorch, its twins (bench/siamese_torch.py, bench/cnn_torch.py) run
# at the largest count in FP32 and, where ctrain runs bf16, with bf16 autocast, so
# ctrain and PyTorch are side by side on all the threads in both precisions.
#
#   usage: scripts/cpu-scaling.sh CTRAIN OUTDIR [THREADS...]     (default: 2 4 8 16)
#
# Parallel efficiency from a to b threads = (rate_b / rate_a) / (b / a): 100% when
# b threads train b/a times as fast as a. It says nothing when the machine has
# fewer cores than threads (the table says so); the figure the project aims for is
# at least 70% from 2 to 16 threads on a machine with 16 cores (bench/RESULTS.md).
# The machine itself rarely scales by b/a: when the logical cores are hyperthreads
# two of them share one core's FMA units, and many cores run at a lower clock than
# two. So each run's own FP32 FMA peak (measured by `ctrain time` at its thread
# count) is shown beside it, and "of the peak's" = ctrain's speed-up over the FMA
# peak's speed-up (the "peak's" column): 100% when ctrain grows exactly as the
# hardware's arithmetic does. Beside each step's milliseconds, in brackets, the part
# of it that ran outside the worker threads: what no number of threads shortens.
# CPU_SCALING_EPOCHS=N runs N epochs instead of the protocol's 4 (the first is the
# warm-up, so N >= 2). Writes OUTDIR/ctrain-MODEL-tN[-bf16].json, OUTDIR/torch-MODEL-tN[-bf16].json, one log per
# run and OUTDIR/scaling.txt (the table, also printed). Exit status: 0 when every
# run ran, 1 when one failed (the others still run), 2 for bad arguments.
set -u
[ $# -ge 2 ] || { echo "usage: scripts/cpu-scaling.sh CTRAIN OUTDIR [THREADS...]" >&2; exit 2; }
ctrain=$1; out=$2; shift 2
threads=${*:-2 4 8 16}
for t in $threads; do
  case $t in ''|*[!0-9]*|0) echo "cpu-scaling.sh: '$t' is not a thread count (a whole number >= 1)" >&2; exit 2 ;; esac
done
[ -x "$ctrain" ] || { echo "cpu-scaling.sh: $ctrain is not an executable ctrain" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" || exit 2
epochs=""
if [ -n "${CPU_SCALING_EPOCHS:-}" ]; then
  case $CPU_SCALING_EPOCHS in ''|*[!0-9]*|0|1) echo "cpu-scaling.sh: CPU_SCALING_EPOCHS='$CPU_SCALING_EPOCHS': give 2 or more (the first epoch is the warm-up)" >&2; exit 2 ;; esac
  epochs=$CPU_SCALING_EPOCHS
fi
rc=0
first=""; last=""
for t in $threads; do [ -n "$first" ] || first=$t; last=$t; done
# bf16 where ctrain runs it on this CPU (AMX-BF16 or AVX512-BF16)
bf16=""; bf16_counts=""
"$ctrain" info --no-peak 2>/dev/null | grep -q '^--precision bf16: CPU products on ' && bf16=1
[ -n "$bf16" ] && { bf16_counts=$first; [ "$last" != "$first" ] && bf16_counts="$first $last"; }

for m in siamese-lstm cnn; do
  data=""; [ $m = cnn ] && data="--data synthetic"
  for t in $threads; do
    echo "-- ctrain time $m --device cpu --threads $t"
    "$ctrain" time $m --device cpu --protocol bench --threads "$t" --per-layer $data ${epochs:+--epochs $epochs} \
      --json "$out/ctrain-$m-t$t.json" > "$out/ctrain-$m-t$t.log" 2>&1 || { echo "   failed: see $out/ctrain-$m-t$t.log"; rc=1; }
  done
  # bf16 at the fewest and the most threads
  for t in $bf16_counts; do
    echo "-- ctrain time $m --device cpu --precision bf16 --threads $t"
    "$ctrain" time $m --device cpu --precision bf16 --protocol bench --threads "$t" --per-layer $data ${epochs:+--epochs $epochs} \
      --json "$out/ctrain-$m-t$t-bf16.json" > "$out/ctrain-$m-t$t-bf16.log" 2>&1 || { echo "   failed: see $out/ctrain-$m-t$t-bf16.log"; rc=1; }
  done
done

# the PyTorch twins at the largest count, FP32 and (where ctrain runs bf16 on this CPU) bf16 autocast
if command -v python3 >/dev/null 2>&1 && python3 -c 'import torch' 2>/dev/null; then
  for m in siamese-lstm cnn; do
    if [ $m = cnn ]; then script=cnn_torch.py; w="--data synthetic --samples 6000 --val-samples 1000"
    else script=siamese_torch.py; w="--pairs 3072 --val-pairs 1024"; fi
    for ac in "" ${bf16:+bf16}; do
      sfx=${ac:+-bf16}
      echo "-- PyTorch $m --threads $last${ac:+ --autocast bf16}"
      python3 "$here/bench/$script" --device cpu --epochs "${epochs:-4}" --batch 128 --threads "$last" --protocol bench $w \
        ${ac:+--autocast $ac} --json "$out/torch-$m-t$last$sfx.json" > "$out/torch-$m-t$last$sfx.log" 2>&1 \
        || { echo "   failed: see $out/torch-$m-t$last$sfx.log"; rc=1; }
    done
  done
else
  echo "-- PyTorch not run: python3 on PATH has no torch" | tee "$out/torch-missing.log"
fi

py=""
for c in python3 /usr/bin/python3; do command -v "$c" >/dev/null 2>&1 && { py=$c; break; }; done
if [ -z "$py" ]; then echo "cpu-scaling.sh: no python3 for the table; the JSON files are in $out"; exit $rc; fi
"$py" - "$out" $threads <<'EOF' | tee "$out/scaling.txt"
import json, os, sys
out, counts = sys.argv[1], [int(t) for t in sys.argv[2:]]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
cores = os.cpu_count() or 0
def physical_cores():
    # distinct (package, core) pairs in sysfs; None where the topology cannot be read
    seen = set()
    for c in range(cores):
        try:
            base = "/sys/devices/system/cpu/cpu%d/topology/" % c
            seen.add((open(base + "physical_package_id").read().strip(), open(base + "core_id").read().strip()))
        except OSError:
            return None
    return len(seen) or None
def fma_median(d):
    # `ctrain time` measures its FP32 FMA peak at the run's thread count: "best of 7 (median X)"
    import re
    m = re.search(r"median ([0-9.]+)", d.get("fma_peak_what", "") or "")
    return float(m.group(1)) if m else d.get("fma_peak_gflops")
phys = physical_cores()
print("this machine: %d logical cores%s" % (cores, ", %d physical (%s)" % (phys, "hyperthreads: two threads share a core's FMA units"
      if phys and phys < cores else "no hyperthreads") if phys else ", physical cores unknown"))
print()
for m, unit in (("siamese-lstm", "pairs/s"), ("cnn", "images/s")):
    runs = [(t, load("ctrain-%s-t%d.json" % (m, t))) for t in counts]
    runs = [(t, d) for t, d in runs if d]
    if not runs:
        print("%s: no run finished" % m); continue
    host = runs[0][1].get("host", {})
    print("%s on %s (%d logical cores), bench protocol, synthetic data, median of epochs 2-%d" % (
        m, host.get("cpu", "?"), cores, len(runs[0][1].get("epochs", [])) or 4))
    print("  %7s %12s %9s %11s %14s %9s %14s   %s" % ("threads", unit, "speed-up", "efficiency", "FMA peak GF/s",
          "peak's", "of the peak's", "ms per batch (outside the threads)"))
    t0, r0, p0 = runs[0][0], runs[0][1]["train_samples_per_s"], fma_median(runs[0][1])
    for t, d in runs:
        r, p = d["train_samples_per_s"], fma_median(d)
        su = r / r0
        eff = su / (t / t0)
        psu = p / p0 if p and p0 else None
        note = "" if t <= cores else "  (more threads than cores)"
        step = 1000.0 * d.get("batch", 128) / r if r else 0
        serial = d.get("outside_threads_ms")
        print("  %7d %12.0f %8.2fx %10.0f%% %14s %9s %14s   %.1f (%s)%s" % (t, r, su, 100 * eff, "%.0f" % p if p else "?",
              "%.2fx" % psu if psu else "?", "%.0f%%" % (100 * su / psu) if psu else "?", step,
              "%.2f" % serial if isinstance(serial, (int, float)) else "?", note))
    # the layers: ms per training batch at each count, and each layer's own speed-up
    names = [l["name"] for l in runs[0][1].get("layers", [])]
    if names:
        print("  per layer, ms per training batch (forward + backward), and its speed-up %d -> %d threads:" % (t0, runs[-1][0]))
        print("  %-24s" % "layer" + "".join("%9s" % ("t=%d" % t) for t, _ in runs) + "   speed-up")
        for i, n in enumerate(names):
            ms = []
            for t, d in runs:
                ls = d.get("layers", [])
                ms.append(ls[i]["forward_ms"] + ls[i]["backward_ms"] if i < len(ls) else float("nan"))
            su = ms[0] / ms[-1] if ms[-1] > 0 else float("nan")
            print("  %-24s" % n[:24] + "".join("%9.2f" % x for x in ms) + "   %7.2fx" % su)
        # the step less its layers: the optimizer, the data, the loss's glue (from the timed epochs,
        # the layers from the profiled batches: an estimate, noisy where it is small)
        rest = []
        for t, d in runs:
            r = d["train_samples_per_s"]
            step = 1000.0 * d.get("batch", 128) / r if r else float("nan")
            rest.append(step - sum(l["forward_ms"] + l["backward_ms"] for l in d.get("layers", [])))
        print("  %-24s" % "other (optimizer, data)" + "".join("%9.2f" % x for x in rest)
              + ("   %7.2fx" % (rest[0] / rest[-1]) if rest[-1] > 0 else ""))
    # ctrain in bf16 at the fewest and the most threads (where this CPU runs it)
    b0, b1 = load("ctrain-%s-t%d-bf16.json" % (m, counts[0])), load("ctrain-%s-t%d-bf16.json" % (m, counts[-1]))
    if b0 and b1:
        r0b, r1b = b0["train_samples_per_s"], b1["train_samples_per_s"]
        su = r1b / r0b
        print("  ctrain bf16: %.0f %s on %d threads, %.0f on %d: speed-up %.2fx, parallel efficiency %.0f%% (FP32's: %s)" % (
            r0b, unit, counts[0], r1b, counts[-1], su, 100 * su / (counts[-1] / counts[0]),
            "%.0f%%" % (100 * runs[-1][1]["train_samples_per_s"] / r0 / (runs[-1][0] / t0)) if runs[-1][0] == counts[-1] and t0 == counts[0] else "?"))
        l0, l1 = b0.get("layers", []), b1.get("layers", [])
        if l0 and len(l0) == len(l1):
            print("  %-24s%9s%9s   speed-up   (bf16, ms per training batch, forward + backward)" % ("layer", "t=%d" % counts[0], "t=%d" % counts[-1]))
            for a, b in zip(l0, l1):
                x, y = a["forward_ms"] + a["backward_ms"], b["forward_ms"] + b["backward_ms"]
                print("  %-24s%9.2f%9.2f   %7.2fx" % (a["name"][:24], x, y, x / y if y > 0 else float("nan")))
    elif b0 or b1:
        print("  ctrain bf16: only one of the %d- and %d-thread runs finished" % (counts[0], counts[-1]))
    for sfx, what in (("", "FP32"), ("-bf16", "bf16 autocast")):
        tr = load("torch-%s-t%d%s.json" % (m, runs[-1][0], sfx))
        if tr:
            mine = runs[-1][1] if not sfx else b1 if b1 and runs[-1][0] == counts[-1] else None
            print("  PyTorch %s %s on %d threads: %.0f %s; ctrain %s / PyTorch %s = %s" % (
                tr.get("framework", "").replace("PyTorch ", ""), what, runs[-1][0], tr["train_samples_per_s"], unit,
                "bf16" if sfx else "FP32", what,
                "%.2fx" % (mine["train_samples_per_s"] / tr["train_samples_per_s"]) if mine else "? (ctrain bf16 did not run)"))
    print()
EOF
exit $rc
