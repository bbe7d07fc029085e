#!/bin/sh
# gpu-check.sh - the whole check of ctrain on a GPU machine, in one command that
# finishes in under 10 minutes and needs no network and no installs.
#
#   usage: scripts/gpu-check.sh OUTDIR
#     from the extracted `make dist` tarball (it uses libexec/cuda/ and finds the
#     CUDA libraries as bin/ctrain does), or from a repository checkout with a
#     normal (not SAN=1) build: `make gpu-check [OUT=DIR]`.
#
# Steps, in this order, each with its own time limit (seconds) inside a total
# budget of GPU_CHECK_BUDGET (default 570); a step that fails is recorded and
# the next one runs; a step the budget no longer allows is recorded as not run:
#   info      nvidia-smi, the driver, the CUDA/cuDNN/cuBLAS libraries found (paths,
#             versions), Python/PyTorch, `ctrain info`; refuses a build without CUDA
#             and stops, saying so, when no GPU can be opened (exit 3)
#   gpu-tests `ctrain_tests gpu` with CT_REQUIRE_GPU=1 (a case that cannot run fails)   150
#   memcheck  compute-sanitizer --tool memcheck --leak-check full on `ctrain_tests gpu`   200
#   ownlstm   ctrain's own LSTM kernels (cuda/lstm_rec.h, CTRAIN_LSTM_ALGO=ctrain):            150
#             ctrain time siamese-lstm --device gpu --precision fp32,bf16 --per-layer on ten
#             times the bench training set, on the own kernels and on cuDNN's, PyTorch's AMP
#             on the same workload, and the seed protocol's epoch on the own kernels
#   peak      bench_sgemm --device gpu: cuBLAS sgemm 8192^3, FP32 and TF32                  60
#   ceiling   bench_lstm --ceiling --threads 2: the machine's CPU on 2 threads, the LSTM      60
#             step as training runs it beside its matrix products alone, against the
#             CPU's FP32 FMA peak (what the cell costs there; bench/RESULTS.md)
#   amx       `ctrain_tests bf16 lstm_bf16 conv_bf16` with CT_REQUIRE_AMX=1 when the CPU has    120
#             amx_bf16: ctrain's AMX-BF16 product kernel, the LSTM and conv2d in bf16 on the real
#             tiles, bit for bit against the exact C model of the tile instructions that every
#             other machine tests them through, and a bf16 training run against FP32; then
#             bench_lstm --bf16 on 2 threads with the tiles' fused forward step in both loop
#             orders and with the plain one (--plain), each phase as a share of the AMX peak
#   time-*    ctrain time siamese-lstm, siamese-cnn, cnn --device cpu,gpu --protocol bench
#             --threads 16 --per-layer (synthetic data)                                90/120/60
#             and, when this ctrain has --logdir, TensorBoard files of the CPU and
#             GPU runs in OUTDIR/tensorboard/MODEL/cpu and .../gpu (view them with
#             `tensorboard --logdir tensorboard` after unpacking gpu-check.tar.gz)
#   tf32-*    the same on the GPU with --tf32, when this ctrain has --tf32                  45 each
#   seed      ctrain time siamese-lstm --protocol seed --epochs 2 --device gpu            150
#   store     scripts/gpu-store.sh: the seed protocol's 2 epochs on the GPU fed from a feature   240
#             store on this machine's disk (8 GiB, written once by scale_store into
#             GPU_STORE_DIR), streamed, warm and cold page cache, against synthetic data
#   e2e       scripts/gpu-e2e.sh: each model trained on the GPU and evaluated on the GPU     150
#             and on the CPU from the same weights, on data made on the spot (needs python3)
#   nccl      mpirun -np 1 ctrain train cnn --device gpu: gradients through NCCL, weights   90
#             bit-identical to a plain run (a build with MPI; the tarball's bin/mpirun or the
#             machine's; NCCL found as the launcher finds it, e.g. PyTorch's nvidia/nccl;
#             compared with h5diff, or h5py where HDF5's tools are missing)
#   resume    scripts/gpu-resume.sh: siamese-lstm and cnn on the GPU, stopped inside an epoch     120
#             and resumed from the checkpoint, weights bit-identical to the uninterrupted run
#   torch-*   bench/siamese_torch.py (siamese-lstm, and --model siamese-cnn) and cnn_torch.py
#             --device cuda, TF32 off and on, with `python3` from PATH (the same workloads as
#             the time-* steps)                                                          75 each
#   bf16-*    when the CPU has amx_bf16: ctrain time siamese-lstm, cnn and siamese-cnn       120 each
#             --device cpu --threads 2 --precision fp32,bf16 --protocol bench, and PyTorch's bf16 autocast
#             on the same workload (python3 on PATH): the AMX targets of docs/precision.md
#   gpubf16-* ctrain time siamese-lstm, cnn and siamese-cnn --device gpu --precision fp32,bf16  150 each
#             --per-layer
#             on ten times the bench training set: bf16 on the tensor cores against FP32, with
#             NVML's power and energy figures and the report page (--html) where this ctrain has
#             them, TF32 on the same workload (its energy), PyTorch AMP (bf16 autocast) on the
#             same workload, and for the LSTM FP32 on cuDNN's standard algorithm (bf16's) and
#             the seed protocol's epoch in bf16
#   nvml      `ctrain_tests hwreport`, its NVML case required to pass: power, temperature, clocks  60
#   scaling   scripts/cpu-scaling.sh: siamese-lstm and cnn on the CPU at 2, 4, 8 and 16       180
#             threads (GPU_CHECK_THREADS), speed-up, parallel efficiency and each layer's
#             ms per batch, ctrain in bf16 at 2 and 16 threads (the Xeon's AMX), and
#             PyTorch's twins on 16 threads in FP32 and bf16 autocast
#   cpu-tests the whole test suite once (in the background, beside racecheck)          240
#   racecheck compute-sanitizer --tool racecheck on the same, only ctrain's own kernels   150
#             (names ending in _kernel or _reduce; cuBLAS and cuDNN run unchecked), all
#             cases but the TF32 LSTM one, which runs alone (racecheck-tf32-lstm), and     60
#             the bf16 cases that run cuBLAS's bf16 products (memcheck covers those); the own
#             LSTM kernels' recurrence cases alone (racecheck-own)                          90
# Everything goes to OUTDIR: one log per step, the JSON of every timing, summary.txt
# (the table printed last) and gpu-check.tar.gz (all of it). Exit status: 0 when
# every step ran and passed, 1 when a test failed, a sanitizer reported errors or a
# step did not run to the end, 2 for a build without CUDA or missing CUDA libraries,
# 3 when no GPU was found. GPU_CHECK_THREADS (default 16) sets the CPU threads.
# GPU_CHECK_STEPS="gpu-tests memcheck ..." runs only the steps named (a name without its
# model, e.g. time, tf32 or torch, selects all of its models); the others are recorded as
# not run. GPU_CHECK_SUITES="mpi checkpoint" limits cpu-tests to those suites of the test runner.
# GPU_CHECK_WITHOUT_GPU=1 goes on without a GPU (every GPU step then fails): only
# for testing this script on a machine without one.
set -u

out=${1:-}
if [ -z "$out" ] || [ "$out" = "-h" ] || [ "$out" = "--help" ]; then
  echo "usage: scripts/gpu-check.sh OUTDIR   (see the comment at the top of this script for the steps)" >&2
  exit 2
fi
budget=${GPU_CHECK_BUDGET:-570}
threads=${GPU_CHECK_THREADS:-16}
start=$(date +%s)
here=$(cd "$(dirname -- "$0")/.." 2>/dev/null && pwd -P) || { echo "gpu-check: cannot find the folder of $0" >&2; exit 2; }
mkdir -p "$out" 2>/dev/null && out=$(cd "$out" && pwd -P) || { echo "gpu-check: cannot create $out; give a writable OUTDIR" >&2; exit 2; }
rm -rf "$out/.steps" "$out/gpu-check.tar.gz" "$out/summary.txt"
mkdir -p "$out/.steps" || { echo "gpu-check: cannot write into $out" >&2; exit 2; }
log=$out/gpu-check.log
: > "$log"

say() { echo "$*" | tee -a "$log"; }
have() { command -v "$1" >/dev/null 2>&1; }
now() { date +%s; }
TO=""
have timeout && TO="timeout -k 10"
# tmo SECONDS COMMAND...: COMMAND, killed after SECONDS where timeout(1) exists (exit 124)
tmo() { tmo_s=$1; shift; if [ -n "$TO" ]; then $TO "$tmo_s" "$@"; else "$@"; fi; }

# ---- where the binaries are ----
if [ -f "$here/libexec/cuda-libs.sh" ]; then
  layout="tarball $here"
  bindir=$here/libexec/cuda
  . "$here/libexec/cuda-libs.sh"
  need=$(sed -n 's/^need="\(.*\)"$/\1/p' "$here/bin/ctrain" 2>/dev/null)
else
  layout="repository checkout $here"
  bindir=$here/build
  . "$here/scripts/cuda-libs.sh"
  need=""
fi
ctrain=$bindir/ctrain
[ -x "$ctrain" ] || ctrain=$here/bin/ctrain
tests=$bindir/ctrain_tests
sgemm=$bindir/bench_sgemm
[ -x "$sgemm" ] || sgemm=$bindir/bench/bench_sgemm
blstm=$bindir/bench_lstm
[ -x "$blstm" ] || blstm=$bindir/bench/bench_lstm
smaker=$bindir/scale_store
[ -x "$smaker" ] || smaker=$bindir/bench/scale_store

# ---- summary ----
summarize() {
  py=""
  for c in python3 /usr/bin/python3; do have "$c" && { py=$c; break; }; done
  if [ -n "$py" ]; then
    "$py" - "$out" "$(($(now) - start))" > "$out/summary.txt" 2>>"$log" <<'EOF'
import glob, json, os, re, sys
out, elapsed = sys.argv[1], sys.argv[2]
steps = {}
for p in glob.glob(os.path.join(out, ".steps", "*")):
    if os.path.basename(p) in ("abort", "verdict"):
        continue
    f = open(p).read().split(None, 2)
    steps[os.path.basename(p)] = (f[0], int(f[1]), f[2].strip() if len(f) > 2 else "")

def text(name):
    # the log of a step not run this time is an earlier run's, when OUTDIR is used again
    if name.endswith(".log") and steps.get(name[:-4], ("",))[0] == "skip":
        return ""
    try:
        return open(os.path.join(out, name), errors="replace").read()
    except OSError:
        return ""

PREREQ = ("espeak-ng or sox is missing", "Fashion-MNIST not found", "dataset-fashion-mnist", "install Debian's python3-torch")
bad = []
lines = []
def status(name):
    if name not in steps:
        return "not run"
    rc, dt, why = steps[name]
    if rc == "skip":
        return "not run: " + why
    if rc in ("124", "137"):
        return "TIMED OUT after %ds" % dt
    return "exit %s, %ds" % (rc, dt)

def tests(name, env_ok):
    log = text(name + ".log")
    m = re.findall(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?", log, re.M)
    if name not in steps or steps[name][0] == "skip":
        bad.append(name); return status(name)
    if not m:
        bad.append(name); return "no summary line (crashed?), " + status(name)
    p, f, s = (int(x or 0) for x in m[-1])
    fails = [re.sub(r"\s+max err .*$", "", l[5:]).rstrip() for l in log.splitlines() if l.startswith("FAIL ")]
    # a failure is the machine's (a prerequisite missing) when one of its checks says so; case
    # names hold ": " themselves, so each is looked up whole
    checks = [l[len("  check failed in "):] for l in log.splitlines() if l.startswith("  check failed in ")]
    env_fails = [x for x in fails if env_ok and any(c.startswith(x + ": ") and any(k in c for k in PREREQ) for c in checks)]
    real = f - len(env_fails)
    if real > 0 or steps[name][0] in ("124", "137"):
        bad.append(name)
    r = "%d passed, %d failed, %d skipped" % (p, f, s)
    if env_fails:
        r += " (%d of the failures: a prerequisite missing on this machine, not ctrain: %s)" % (len(env_fails), "; ".join(env_fails))
    others = [x for x in fails if x not in env_fails]
    if others:   # ctrain's own failures, each with the first check that failed in it
        why = lambda x: next((c[len(x) + 2:][:160] for c in checks if c.startswith(x + ": ")), "")
        r += "; FAILED: " + "; ".join(("%s (%s)" % (x, why(x)) if why(x) else x)[:240] for x in others)
    if steps[name][0] in ("124", "137"):
        r += ", " + status(name)
    return r

def sanitizer(name):
    log = text(name + ".log")
    if name not in steps or steps[name][0] == "skip":
        bad.append(name); return status(name)
    e = re.findall(r"ERROR SUMMARY: (\d+) error", log)
    r = re.findall(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)", log)
    rc = steps[name][0]
    if rc in ("124", "137"):
        bad.append(name); return "INCOMPLETE: " + status(name)
    if r:
        verdict = "%s hazards (%s errors, %s warnings)" % r[-1]
        errs = int(r[-1][1])
    elif e:
        verdict = "%s errors" % e[-1]
        errs = int(e[-1])
    else:
        bad.append(name); return "no sanitizer summary, " + status(name)
    t = re.findall(r"^(\d+) passed, (\d+) failed", log, re.M)
    if t: verdict += "; tests under it: %s passed, %s failed" % t[-1]
    if errs or rc != "0": bad.append(name)
    return verdict + " (" + status(name) + ")"

def run(path):
    try:
        d = json.load(open(path))
        return d["epoch_seconds"]["median"], d["train_samples_per_s"]
    except Exception:
        return None

lines.append("ctrain gpu-check summary (%s s)" % elapsed)
abort = text(os.path.join(".steps", "abort")).strip()
if abort:
    lines.append("STOPPED: " + abort.replace("\n", "\n         "))
gpu = re.findall(r"^sgemm, cuBLAS, (.*)$", text("probe.log"), re.M)
lines.append("GPU: " + (gpu[0] if gpu else "none found"))
if not gpu and os.environ.get("GPU_CHECK_WITHOUT_GPU") == "1" and not abort:
    gpu = ["none (GPU_CHECK_WITHOUT_GPU=1: a test of this script)"]
if gpu:
    lines.append("tests: GPU suite with CT_REQUIRE_GPU=1: " + tests("gpu-tests", False))
    lines.append("       whole suite: " + tests("cpu-tests", True))
    lines.append("sanitizers: memcheck --leak-check full: " + sanitizer("memcheck"))
    lines.append("            racecheck (own kernels), all cases but tf32/lstm and bf16's cuBLAS ones: " + sanitizer("racecheck"))
    lines.append("            racecheck (own kernels), tf32/lstm alone:                                " + sanitizer("racecheck-tf32-lstm"))
    lines.append("            racecheck, ctrain's own LSTM recurrence kernels alone:                   " + sanitizer("racecheck-own"))
    pk = text("peak.log")
    f32 = re.findall(r"^cuBLAS sgemm FP32 +N= *(\d+) +median +([\d.]+)", pk, re.M)
    t32 = re.findall(r"^cuBLAS sgemm TF32 +N= *(\d+) +median +([\d.]+)", pk, re.M)
    lines.append("peak: cuBLAS sgemm %s: FP32 %s GFLOP/s, TF32 %s GFLOP/s (%s)" % (
        "%s^3" % f32[0][0] if f32 else "?", f32[0][1] if f32 else "?", t32[0][1] if t32 else "?", status("peak")))
    cl = re.findall(r"^  (step, .*|the cell .*)$", text("ceiling.log"), re.M)
    lines.append("CPU LSTM on 2 threads, as trained and its products alone (%s):" % status("ceiling"))
    lines.extend("  " + re.sub(r" +", " ", l)[:160] for l in cl)
    am = re.findall(r"^(?:PASS|FAIL|SKIP) (?:bf16/(?:real AMX|dispatch: the chain)|lstm_bf16/|conv_bf16/the shapes on).*$",
                    text("amx.log"), re.M)
    lines.append("CPU bf16 products on AMX tiles against the tile model (%s):" % status("amx"))
    lines.extend("  " + l[:200] for l in am)
    bb = re.findall(r"^(ctrain LSTM .*|  (?:forward|backward|step|bf16 peak) .*)$", text("amx.log"), re.M)
    lines.append("CPU LSTM in bf16 on 2 threads, the tiles' fused forward step (both loop orders) and the plain one:")
    lines.extend("  " + re.sub(r" +", " ", l)[:200] for l in bb)
    for m in ("siamese-lstm", "cnn", "siamese-cnn"):
        bl = re.findall(r"^cpu(?: bf16)? +\d.*$", text("bf16-%s.log" % m), re.M)
        tl = re.findall(r"^pytorch .*$", text("bf16-%s.log" % m), re.M)
        lines.append("CPU %s on 2 threads, fp32 and bf16 (AMX), and PyTorch bf16 autocast (%s):" % (m, status("bf16-" + m)))
        lines.extend("  " + re.sub(r" +", " ", l)[:160] for l in bl + tl)
    sc = text(os.path.join("scaling", "scaling.txt"))
    lines.append("CPU threads, 2 to %s (%s):" % (os.environ.get("GPU_CHECK_THREADS", "16"), status("scaling")))
    lines.extend("  " + l[:160] for l in sc.splitlines() if l.strip())
    lines.append("")
    lines.append("%-13s %-22s %10s %12s   %s" % ("model", "run", "s/epoch", "samples/s", "step"))
    ratio = []
    for m in ("siamese-lstm", "siamese-cnn", "cnn"):
        rows = [("ctrain cpu", "ctrain-%s-cpu.json" % m, "time-" + m), ("ctrain gpu FP32", "ctrain-%s-gpu.json" % m, "time-" + m),
                ("ctrain gpu TF32", "ctrain-%s-gpu-tf32.json" % m, "tf32-" + m),
                ("pytorch cuda FP32", "torch-%s-cuda.json" % m, "torch-" + m), ("pytorch cuda TF32", "torch-%s-cuda-tf32.json" % m, "torch-%s-tf32" % m)]
        got = {}
        for label, f, step in rows:
            r = run(os.path.join(out, f))
            got[label] = r
            if r: lines.append("%-13s %-22s %10.2f %12.1f   %s" % (m, label, r[0], r[1], status(step)))
            else:
                why = re.findall(r"^gpu\S*: unavailable: (.*)$", text(step + ".log"), re.M) if "gpu" in label else []
                note = "" if status(step).startswith("not run") else ", no JSON: " + (why[-1][:110] if why else "see %s.log" % step)
                lines.append("%-13s %-22s %10s %12s   %s" % (m, label, "n/a", "n/a", status(step) + note))
        for prec in ("FP32", "TF32"):
            a, b = got.get("ctrain gpu " + prec), got.get("pytorch cuda " + prec)
            ratio.append("%s %s: %s" % (m, prec, "%.2fx" % (a[1] / b[1]) if a and b else "n/a"))
    s = run(os.path.join(out, "ctrain-siamese-lstm-seed-gpu.json"))
    why = re.findall(r"^gpu\S*: unavailable: (.*)$", text("seed.log"), re.M)
    lines.append("%-13s %-22s %10s %12s   %s" % ("siamese-lstm", "seed, 2 epochs, gpu", "%.2f" % s[0] if s else "n/a",
                                                "%.1f" % s[1] if s else "n/a", status("seed") + ("" if s or not why else ": " + why[-1][:110])))
    e2e = [l for l in text("e2e.log").splitlines() if l.startswith(("ok   ", "FAIL "))]
    lines.append("end to end (%s):" % status("e2e"))
    lines.extend("  " + l for l in (e2e or ([] if status("e2e").startswith("not run") else ["no result lines: see e2e.log"])))
    said = [l for l in text("nccl.log").splitlines() if l.startswith(("nccl: ", "h5py: ", "h5diff: ", "ctrain train: "))]
    lines.append("nccl, one rank through NCCL vs a plain run (%s)%s" % (status("nccl"), ": " + said[-1][:150] if said else ""))
    st = [l for l in text("store.log").splitlines() if l.startswith(("synthetic ", "store-warm", "store-cold ", "gpu-store: ", "loader "))]
    lines.append("seed protocol fed from a feature store (%s):" % status("store"))
    lines.extend("  " + l[:200] for l in st)
    res = [l for l in text("resume.log").splitlines() if l.startswith(("ok   ", "FAIL "))]
    lines.append("resume on the GPU (%s):" % status("resume"))
    lines.extend("  " + l[:200] for l in (res or ([] if status("resume").startswith("not run") else ["no result lines: see resume.log"])))
    lines.append("")
    lines.append("ctrain GPU / PyTorch cuDNN, training samples/s: " + "; ".join(ratio))
    for m in ("siamese-lstm", "cnn", "siamese-cnn"):
        gl = re.findall(r"^gpu(?: bf16)? +\d.*$", text("gpubf16-%s.log" % m), re.M)
        gl += re.findall(r"^pytorch .*$", text("gpubf16-%s.log" % m), re.M)
        gl += ["TF32: " + l for l in re.findall(r"^gpu +\d.*$", text("gpubf16-%s-tf32.log" % m), re.M)]
        gl += ["FP32, cuDNN's standard algorithm: " + l for l in re.findall(r"^gpu +\d.*$", text("gpubf16-%s-standard.log" % m), re.M)]
        gl += ["seed protocol, bf16: " + l for l in re.findall(r"^gpu bf16 +\d.*$", text("gpubf16-%s-seed.log" % m), re.M)]
        lines.append("GPU %s, fp32 and bf16, PyTorch AMP (%s):" % (m, status("gpubf16-" + m)))
        lines.extend("  " + re.sub(r" +", " ", l)[:160] for l in gl)
    j = lambda f: run(os.path.join(out, f))
    own16, own32 = j("ctrain-siamese-lstm-gpu-own-gpu-bf16.json"), j("ctrain-siamese-lstm-gpu-own-gpu.json")
    cud16, cud32 = j("ctrain-siamese-lstm-gpu-cudnn-gpu-bf16.json"), j("ctrain-siamese-lstm-gpu-cudnn-gpu.json")
    amp = j("torch-siamese-lstm-cuda-bf16-own.json")
    sd16, sd32 = j("ctrain-siamese-lstm-seed-gpu-own-gpu-bf16.json"), j("ctrain-siamese-lstm-seed-gpu-own-gpu.json")
    fmt = lambda r: "%.1f" % r[1] if r else "n/a"
    rat = lambda a, b: "%.2fx" % (a[1] / b[1]) if a and b else "n/a"
    lines.append("GPU siamese-lstm on ctrain's own LSTM kernels (%s), pairs/s: own float32 %s, bf16 %s; cuDNN float32 %s, "
                 "bf16 %s; PyTorch AMP %s" % (status("ownlstm"), fmt(own32), fmt(own16), fmt(cud32), fmt(cud16), fmt(amp)))
    lines.append("  own bf16 / PyTorch AMP %s, own bf16 / cuDNN bf16 %s, own float32 / cuDNN float32 %s; seed epoch on the own "
                 "kernels: float32 %s s, bf16 %s s" % (rat(own16, amp), rat(own16, cud16), rat(own32, cud32),
                 "%.2f" % sd32[0] if sd32 else "n/a", "%.2f" % sd16[0] if sd16 else "n/a"))
    ol = re.findall(r"^ *(lstm_1|step|dense_1) .*$", text("ownlstm.log"), re.M)
    lines.extend("  " + re.sub(r" +", " ", l)[:160] for l in ol[:8])
    lines.append("NVML through the hardware report (%s)" % status("nvml"))
    for k in ("time-siamese-lstm", "time-siamese-cnn", "time-cnn", "seed", "peak", "ceiling", "amx", "bf16-siamese-lstm", "bf16-cnn",
              "bf16-siamese-cnn",
              "gpubf16-siamese-lstm", "gpubf16-cnn", "gpubf16-siamese-cnn", "nvml", "ownlstm",
              "store", "e2e", "nccl", "resume",
              "tf32-siamese-lstm", "tf32-siamese-cnn", "tf32-cnn"):
        if k in steps and steps[k][0] not in ("0", "skip"): bad.append(k)
    for k in steps:
        if k.startswith("torch-") and steps[k][0] not in ("0",): bad.append(k)
else:
    bad.append("gpu (none found)" if not abort else "stopped")
verdict = "PASS" if not bad else "FAIL or INCOMPLETE: " + ", ".join(sorted(set(bad)))
lines.append("verdict: " + verdict)
print("\n".join(lines))
open(os.path.join(out, ".steps", "verdict"), "w").write("ok\n" if not bad else "bad\n")
EOF
  else
    { echo "ctrain gpu-check summary (no python3 here: the table is left out; see the logs in $out)"
      for f in "$out"/.steps/*; do echo "  $(basename "$f"): $(cat "$f")"; done; } > "$out/summary.txt"
    bad=0
    for f in "$out"/.steps/*; do case $f in */abort|*/verdict) continue ;; esac; read -r rc rest < "$f"; [ "$rc" = 0 ] || bad=1; done
    [ $bad = 0 ] && echo ok > "$out/.steps/verdict" || echo bad > "$out/.steps/verdict"
  fi
  echo
  echo "================ summary ================"
  cat "$out/summary.txt"
}

# finish STATUS|auto: summary.txt, the bundle, the exit (auto: 0 when the summary's verdict is PASS, else 1)
finish() {
  summarize
  st=$1
  if [ "$st" = auto ]; then
    if [ "$(cat "$out/.steps/verdict" 2>/dev/null)" = ok ]; then st=0; else st=1; fi
  fi
  tmp=$(mktemp /tmp/gpu-check.XXXXXX) || exit "$st"
  # the logs, JSON and TensorBoard files; not the made-up data and trained weights (tens of MB)
  if tar -C "$(dirname "$out")" --exclude=.steps --exclude=data --exclude="*.h5" -czf "$tmp" "$(basename "$out")" 2>>"$log"; then
    chmod 644 "$tmp"; mv "$tmp" "$out/gpu-check.tar.gz" && echo "everything is in $out/gpu-check.tar.gz (summary: $out/summary.txt)"
  else
    rm -f "$tmp"; echo "gpu-check: could not bundle $out into gpu-check.tar.gz (see $log)"
  fi
  exit "$st"
}
# abort STATUS MESSAGE...: says why the check cannot go on, records it for the summary, finishes
abort() {
  st=$1; shift
  for l in "$@"; do say "$l"; done
  printf '%s\n' "$@" > "$out/.steps/abort"
  finish "$st"
}

# ---- steps ----
# run_step NAME CAP COMMAND...: runs COMMAND with its output in NAME.log, at most CAP seconds
# and never past the budget; records "rc seconds" (rc 124: timed out; "skip": not run).
run_step() {
  name=$1; cap=$2; shift 2
  if ! selected "$name"; then not_run "$name" "not selected (GPU_CHECK_STEPS=$GPU_CHECK_STEPS)"; return 0; fi
  left=$((budget - ($(now) - start) - 15))
  lim=$cap
  [ "$left" -lt "$lim" ] && lim=$left
  if [ "$lim" -lt 5 ]; then
    echo "skip 0 the time budget of ${budget}s was spent" > "$out/.steps/$name"
    say "-- $name: not run (the ${budget}s budget is spent)"
    return 0
  fi
  say "-- $name (at most ${lim}s): $*"
  t0=$(now)
  tmo "$lim" "$@" > "$out/$name.log" 2>&1
  rc=$?
  dt=$(($(now) - t0))
  echo "$rc $dt" > "$out/.steps/$name"
  tail -n 4 "$out/$name.log" | sed 's/^/   | /' | tee -a "$log"
  case $rc in
    0) say "   $name: ok (${dt}s)" ;;
    124|137) say "   $name: TIMED OUT after ${dt}s" ;;
    *) say "   $name: exit $rc (${dt}s)" ;;
  esac
  return 0
}
not_run() { echo "skip 0 $2" > "$out/.steps/$1"; say "-- $1: not run: $2"; }
# selected NAME: true when GPU_CHECK_STEPS is unset or names NAME or NAME's stem (time for time-cnn)
GPU_CHECK_STEPS=$(printf '%s' "${GPU_CHECK_STEPS:-}" | tr ',' ' ')
selected() {
  [ -z "$GPU_CHECK_STEPS" ] && return 0
  for w in $GPU_CHECK_STEPS; do
    case $1 in "$w"|"$w"-*) return 0 ;; esac
  done
  return 1
}

# ---- 0. what is here ----
say "ctrain gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(hostname 2>/dev/null), from the $layout"
say "output: $out; budget ${budget}s; CPU threads $threads"
[ -x "$ctrain" ] && [ -x "$tests" ] && [ -x "$sgemm" ] ||
  abort 2 "gpu-check: ctrain, ctrain_tests or bench_sgemm is missing under $bindir: run it from the extracted tarball, or build first (make gpu-check does)"

{
  echo "== nvidia-smi"
  if have nvidia-smi; then tmo 20 nvidia-smi 2>&1; echo; tmo 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv 2>&1
  else echo "nvidia-smi: not found on PATH"; fi
  echo "== driver"
  cat /proc/driver/nvidia/version 2>/dev/null || echo "/proc/driver/nvidia/version: none (no NVIDIA kernel driver loaded)"
  echo "libcuda.so.1: $( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | awk '/libcuda\.so\.1 /{print $NF; exit}')"
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt" >> "$log"
sed -n '1,40p' "$out/machine.txt"

# the CUDA libraries: the tarball finds them as its launcher does; a build uses its RUNPATH
extra="libcublasLt.so.13 libcudnn_graph.so.9 libcudnn_engines_precompiled.so.9 libcudnn_engines_runtime_compiled.so.9 libcudnn_ops.so.9 libcudnn_cnn.so.9 libcudnn_adv.so.9 libcudnn_heuristic.so.9 libnvrtc.so.13"
if [ -n "$need" ]; then
  ct_cuda_find "$need"
  if [ -n "$CT_CUDA_MISSING" ]; then
    abort 2 "gpu-check: the CUDA libraries this ctrain needs were not found (missing: $CT_CUDA_MISSING)." \
      "  searched: $(echo "$CT_CUDA_SEARCHED" | tr '\n' ' ')" \
      "  Set CTRAIN_CUDA_LIBS to the folders that hold them (e.g. PyTorch's site-packages/nvidia/cudnn/lib:...), then run again."
  fi
  [ -n "$CT_CUDA_LDPATH" ] && LD_LIBRARY_PATH="$CT_CUDA_LDPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && export LD_LIBRARY_PATH
  CTRAIN_LAUNCHED=cuda; export CTRAIN_LAUNCHED
  # NCCL, which ctrain loads at run time for GPU ranks (step nccl): as the launcher does under mpirun
  ct_cuda_find libnccl.so.2
  [ -n "$CT_CUDA_LDPATH" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$CT_CUDA_LDPATH" && export LD_LIBRARY_PATH
fi
{
  echo "== CUDA libraries loaded by $ctrain (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
  ldd "$ctrain" 2>&1 | grep -E 'libcud|libcublas|libnvrtc|not found' | while read -r so arrow path rest; do
    [ "$arrow" = "=>" ] || { echo "  $so $arrow $path $rest"; continue; }
    echo "  $so => $path ($(readlink -f "$path" 2>/dev/null))"
  done
  cudnn_dir=$(ldd "$ctrain" 2>/dev/null | awk '$1 ~ /^libcudnn\.so/ {print $3}' | xargs -r dirname 2>/dev/null)
  for l in $extra; do
    case $l in libcudnn*) d=$cudnn_dir ;; *) d="" ;; esac
    if [ -n "$d" ] && [ -e "$d/$l" ]; then echo "  $l: $(readlink -f "$d/$l")"; fi
  done
  ct_cuda_find "libnvrtc.so.13"
  [ -n "$CT_CUDA_FOUND" ] && echo "  libnvrtc.so.13 (cuDNN's runtime-compiled engines): $CT_CUDA_FOUND" | tr -d '\n' && echo
  echo "  $("$ctrain" info 2>&1 | grep '^Data-parallel')"
  echo "== Python"
  if have python3; then
    echo "python3: $(command -v python3) ($(python3 --version 2>&1))"
    tmo 60 python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version(), "GPU available:", torch.cuda.is_available())' 2>&1 | tail -n 1
    tmo 30 python3 -c 'import importlib.metadata as m
for d in sorted(m.distributions(), key=lambda d: d.metadata["Name"] or ""):
    n = d.metadata["Name"] or ""
    if n.startswith("nvidia-"): print("  %s %s" % (n, d.version))' 2>&1
  else
    echo "python3: not on PATH (the PyTorch comparisons will not run)"
  fi
  echo "== ctrain info"
  tmo 60 "$ctrain" info 2>&1
} > "$out/libraries.txt" 2>&1
tee -a "$log" < "$out/libraries.txt"

if grep -q 'not compiled in' "$out/libraries.txt"; then
  abort 2 "gpu-check: this ctrain was built without CUDA ('ctrain info' says the GPU backend is not compiled in): every GPU test would only be skipped." \
    "  Build with the CUDA toolkit and cuDNN (make CUDA=1; make detect shows what is missing), or use the tarball from make dist."
fi

# Is there a GPU? bench_sgemm opens device 0 and multiplies once.
if ! tmo 90 "$sgemm" --device gpu --n 256 --repeats 1 > "$out/probe.log" 2>&1 && [ "${GPU_CHECK_WITHOUT_GPU:-0}" != 1 ]; then
  abort 3 "gpu-check: NO GPU FOUND: $(tail -n 1 "$out/probe.log")" \
    "  nvidia-smi: $(have nvidia-smi && (tmo 20 nvidia-smi -L 2>&1 | head -n 1) || echo 'not installed')" \
    "  Nothing was tested. Run this on a machine with an NVIDIA GPU and its driver."
fi
say "GPU: $(sed -n 's/^sgemm, cuBLAS, //p' "$out/probe.log")"

# ---- 1. the GPU tests, where a skip is a failure ----
CTRAIN_BIN=$ctrain
case $CTRAIN_BIN in   # the tests hand it to the shell: quote a path with spaces or the like
  *[!A-Za-z0-9_./+=:,@%-]*) CTRAIN_BIN="'$(printf '%s' "$CTRAIN_BIN" | sed "s/'/'\\\\''/g")'" ;;
esac
export CTRAIN_BIN
cd "$here" || abort 2 "gpu-check: cannot cd to $here"
run_step gpu-tests 150 env CT_REQUIRE_GPU=1 "$tests" gpu

# ---- 1b. the same GPU tests under compute-sanitizer's memcheck (found early: a bad access
# found here explains a failure anywhere later) ----
san=""
for c in compute-sanitizer /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  if have "$c"; then san=$(command -v "$c"); break; fi
done
[ -z "$san" ] && for c in /usr/local/cuda-*/bin/compute-sanitizer; do [ -x "$c" ] && san=$c; done
if [ -n "$san" ]; then
  say "compute-sanitizer: $san ($("$san" --version 2>&1 | tail -n 1))"
  run_step memcheck 200 env CT_REQUIRE_GPU=1 CT_GPU_TEST_NO_OOM=1 "$san" --tool memcheck --leak-check full --error-exitcode 99 "$tests" gpu
else
  not_run memcheck "compute-sanitizer not found (PATH, /usr/local/cuda*/bin)"
fi

# ---- 1c. ctrain's own LSTM kernels (cuda/lstm_rec.h), opt-in with CTRAIN_LSTM_ALGO=ctrain until
# verified here: their tests ran in gpu-tests and memcheck (own32/... and bf16own/...); this times
# them, early, on ten times the bench training set: float32 and bf16 on the own kernels in one run
# with each layer's milliseconds, the same on cuDNN's, PyTorch's AMP, and the seed protocol's
# epoch in float32 and bf16 on the own kernels ----
if "$ctrain" time --help 2>&1 | grep -q -e '--precision'; then
  run_step ownlstm 150 sh -c 'ctrain=$1 out=$2 threads=$3 bench=$4 w="--pairs 30720 --val-pairs 1024"
    CTRAIN_LSTM_ALGO=ctrain "$ctrain" time siamese-lstm --device gpu --precision fp32,bf16 --protocol bench --threads "$threads" \
      --per-layer $w --json "$out/ctrain-siamese-lstm-gpu-own.json" || exit 1
    "$ctrain" time siamese-lstm --device gpu --precision fp32,bf16 --protocol bench --threads "$threads" --per-layer $w \
      --json "$out/ctrain-siamese-lstm-gpu-cudnn.json" > "$out/ownlstm-cudnn.log" 2>&1 || exit 1
    if python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" > /dev/null 2>&1; then
      python3 "$bench/siamese_torch.py" --device cuda --autocast bf16 --epochs 4 --batch 128 --threads "$threads" --protocol bench $w \
        --json "$out/torch-siamese-lstm-cuda-bf16-own.json" > "$out/ownlstm-torch.log" 2>&1 || exit 1
    fi
    CTRAIN_LSTM_ALGO=ctrain "$ctrain" time siamese-lstm --device gpu --precision fp32,bf16 --protocol seed --epochs 2 \
      --threads "$threads" --json "$out/ctrain-siamese-lstm-seed-gpu-own.json" > "$out/ownlstm-seed.log" 2>&1' \
    sh "$ctrain" "$out" "$threads" "$here/bench"
else
  not_run ownlstm "this ctrain has no --precision"
fi

# ---- 2. the sgemm peak; the CPU's LSTM against its products alone ----
run_step peak 60 "$sgemm" --device gpu --repeats 10
if grep -q -w avx512f /proc/cpuinfo 2>/dev/null; then
  run_step ceiling 60 "$blstm" --ceiling --threads 2
else
  not_run ceiling "this CPU has no AVX-512F: the fused LSTM step it compares does not run here"
fi

if grep -q -w amx_bf16 /proc/cpuinfo 2>/dev/null; then
  run_step amx 120 sh -c 'CT_REQUIRE_AMX=1 "$1" bf16 lstm_bf16 conv_bf16; rc=$?
    "$2" --bf16 --threads 2 && "$2" --bf16 --threads 2 --units-outer && "$2" --bf16 --threads 2 --plain && exit $rc' sh "$tests" "$blstm"
else
  not_run amx "this CPU has no AMX-BF16 (no amx_bf16 in /proc/cpuinfo)"
fi

# ---- 3. ctrain's timings ----
devflag=--devices
"$ctrain" time --help 2>&1 | grep -q -e '--device ' && devflag=--device
layerflag=--layers
"$ctrain" time --help 2>&1 | grep -q -e '--per-layer' && layerflag=--per-layer
has_tf32=0
"$ctrain" time --help 2>&1 | grep -q -e '--tf32' && has_tf32=1
has_logdir=0
"$ctrain" time --help 2>&1 | grep -q -e '--logdir' && has_logdir=1
html=""
"$ctrain" time --help 2>&1 | grep -q -e '--html' && html=1
say "ctrain time: device option $devflag; --tf32 $( [ $has_tf32 = 1 ] && echo available || echo 'not in this ctrain (TF32 runs of ctrain left out)')"
for spec in siamese-lstm:90 siamese-cnn:120 cnn:60; do
  m=${spec%%:*}; cap=${spec#*:}
  data=""; [ "$m" = cnn ] && data="--data synthetic"
  if [ $has_logdir = 1 ]; then
    run_step "time-$m" "$cap" "$ctrain" time "$m" $devflag cpu,gpu --protocol bench --threads "$threads" $layerflag $data \
        --json "$out/ctrain-$m.json" --logdir "$out/tensorboard/$m" ${html:+--html "$out/report-$m.html"}
  else
    run_step "time-$m" "$cap" "$ctrain" time "$m" $devflag cpu,gpu --protocol bench --threads "$threads" $layerflag $data --json "$out/ctrain-$m.json"
  fi
done
for m in siamese-lstm siamese-cnn cnn; do
  if [ $has_tf32 = 1 ]; then
    data=""; [ "$m" = cnn ] && data="--data synthetic"
    run_step "tf32-$m" 45 "$ctrain" time "$m" $devflag gpu --tf32 --protocol bench --threads "$threads" $data --json "$out/ctrain-$m-gpu-tf32.json"
  else
    not_run "tf32-$m" "this ctrain has no --tf32"
  fi
done
run_step seed 150 "$ctrain" time siamese-lstm --protocol seed --epochs 2 $devflag gpu --threads "$threads" --json "$out/ctrain-siamese-lstm-seed-gpu.json"

if [ -x "$smaker" ]; then
  run_step store 240 sh "$here/scripts/gpu-store.sh" "$ctrain" "$smaker" "$out/store" gpu "$threads"
else
  not_run store "scale_store is missing under $bindir"
fi

# ---- 3a. end to end: train on the GPU, evaluate on both devices ----
run_step e2e 150 env E2E_THREADS="$threads" sh "$here/scripts/gpu-e2e.sh" "$ctrain" "$out/e2e" gpu gpu cpu

# ---- 3b. NCCL: one rank under mpirun sends its gradients through ncclAllReduce (cuda/nccl.c);
# with one rank and deterministic convolutions it must train exactly as a plain run ----
# mpirun: the tarball's own Open MPI (bin/mpirun) where it has one, else the machine's; the
# weights are compared with h5diff, or with h5py where HDF5's tools are not installed
mpirun=""
if [ -x "$here/bin/mpirun" ]; then mpirun=$here/bin/mpirun; elif have mpirun; then mpirun=mpirun; fi
same_weights=""   # scripts/same-weights.sh needs h5diff, or h5py and numpy
if have h5diff || { have python3 && python3 -c 'import h5py, numpy' 2>/dev/null; }; then
  same_weights="sh '$here/scripts/same-weights.sh' '$out/nccl-1rank.h5' '$out/nccl-plain.h5'"
fi
if [ -n "$mpirun" ] && [ -n "$same_weights" ] && "$ctrain" info 2>/dev/null | grep -q "GPU gradients: NCCL 2"; then
  nccl_run="$ctrain train cnn --data synthetic --samples 1024 --val-samples 0 --epochs 1 --batch 64 --device gpu --deterministic --threads 4 --no-progress"
  asroot=""; [ "$(id -u)" = 0 ] && asroot="--allow-run-as-root"
  run_step nccl 90 sh -c "'$mpirun' -np 1 $asroot $nccl_run --out '$out/nccl-1rank.h5' && $nccl_run --out '$out/nccl-plain.h5' &&
    $same_weights && echo 'nccl: one rank through NCCL = the plain run, bit for bit'"
else
  not_run nccl "needs mpirun (${mpirun:-none}), h5diff or h5py (${same_weights:+found}), and a ctrain with MPI that finds NCCL (ctrain info: $("$ctrain" info 2>/dev/null | grep '^Data-parallel' || echo '?'))"
fi

# ---- 3c. exact resume on the GPU: stopped inside an epoch and resumed = the uninterrupted run,
# bit for bit (scripts/gpu-resume.sh), on the end-to-end step's data where it made some ----
rfeats=synthetic; rimages=synthetic
[ -f "$out/e2e/data/feats.h5" ] && rfeats=$out/e2e/data/feats.h5
[ -d "$out/e2e/data/images" ] && rimages=$out/e2e/data/images
run_step resume 120 env RESUME_THREADS=4 sh "$here/scripts/gpu-resume.sh" "$ctrain" "$out/resume" gpu "$rfeats" "$rimages"

# ---- 4. the PyTorch peers, same workloads ----
py_ok=0
if have python3 && tmo 120 python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' > "$out/torch-probe.log" 2>&1; then py_ok=1; fi
for tf in "" "--tf32"; do
  sfx=${tf:+-tf32}
  if [ $py_ok = 1 ]; then
    run_step "torch-siamese-lstm$sfx" 75 python3 "$here/bench/siamese_torch.py" --device cuda $tf --epochs 4 --batch 128 --threads "$threads" \
      --protocol bench --pairs 3072 --val-pairs 1024 --json "$out/torch-siamese-lstm-cuda$sfx.json"
    run_step "torch-cnn$sfx" 75 python3 "$here/bench/cnn_torch.py" --device cuda $tf --epochs 4 --batch 128 --threads "$threads" \
      --protocol bench --data synthetic --samples 6000 --val-samples 1000 --json "$out/torch-cnn-cuda$sfx.json"
    run_step "torch-siamese-cnn$sfx" 75 python3 "$here/bench/siamese_torch.py" --model siamese-cnn --device cuda $tf --epochs 4 \
      --batch 128 --threads "$threads" --protocol bench --pairs 3072 --val-pairs 1024 --json "$out/torch-siamese-cnn-cuda$sfx.json"
  else
    why="python3 on PATH ($(command -v python3 || echo none)) has no PyTorch with a usable GPU $(tail -n 1 "$out/torch-probe.log" 2>/dev/null)"
    not_run "torch-siamese-lstm$sfx" "$why"; not_run "torch-cnn$sfx" "$why"; not_run "torch-siamese-cnn$sfx" "$why"
  fi
done

# ---- 4b. bf16 on the CPU's AMX tiles against PyTorch's bf16 autocast, 2 threads ----
if grep -q -w amx_bf16 /proc/cpuinfo 2>/dev/null; then
  for m in siamese-lstm cnn siamese-cnn; do
    if [ $m = cnn ]; then w="--samples 6000 --val-samples 1000"; tw="--data synthetic --samples 6000 --val-samples 1000"; script=cnn_torch.py
    else w="--pairs 3072 --val-pairs 1024"; tw="--model $m --pairs 3072 --val-pairs 1024"; script=siamese_torch.py; fi
    if [ $py_ok = 1 ] || (have python3 && python3 -c 'import torch' 2>/dev/null); then
      run_step "bf16-$m" 120 sh -c "\"\$1\" time $m --protocol bench --device cpu --threads 2 --precision fp32,bf16 $w --json \"\$2\" && \
        python3 \"\$3\" --epochs 4 --batch 128 --threads 2 --protocol bench $tw --autocast bf16 --json \"\$4\"" \
        sh "$ctrain" "$out/ctrain-$m-prec.json" "$here/bench/$script" "$out/torch-$m-cpu-bf16.json"
    else
      run_step "bf16-$m" 120 "$ctrain" time $m --protocol bench --device cpu --threads 2 --precision fp32,bf16 $w --json "$out/ctrain-$m-prec.json"
    fi
  done
else
  not_run bf16-siamese-lstm "this CPU has no AMX-BF16 (no amx_bf16 in /proc/cpuinfo)"
  not_run bf16-cnn "this CPU has no AMX-BF16 (no amx_bf16 in /proc/cpuinfo)"
  not_run bf16-siamese-cnn "this CPU has no AMX-BF16 (no amx_bf16 in /proc/cpuinfo)"
fi

# ---- 4c. bf16 on the GPU's tensor cores, NVML through the hardware report ----
# Ten times the bench protocol's training set, so that an epoch lasts long enough for NVML's
# energy counter; each layer's milliseconds (--per-layer); PyTorch's AMP (bf16 autocast) on the
# same workload (bench/*_torch.py --autocast bf16, logged beside); for the LSTM also FP32 on
# cuDNN's standard algorithm, the one cuDNN offers bf16 data (gpubf16-siamese-lstm-standard.log),
# and the seed protocol's epoch in bf16 (gpubf16-siamese-lstm-seed.log).
if "$ctrain" time --help 2>&1 | grep -q -e '--precision'; then
  for m in siamese-lstm cnn siamese-cnn; do
    tm=""
    if [ "$m" = cnn ]; then w="--data synthetic --samples 60000 --val-samples 1000"; script=cnn_torch.py
    else w="--pairs 30720 --val-pairs 1024"; script=siamese_torch.py; fi
    [ "$m" = siamese-cnn ] && tm="--model siamese-cnn"
    run_step "gpubf16-$m" 150 sh -c 'ctrain=$1 m=$2 w=$3 script=$4 out=$5 threads=$6 devflag=$7 html=$8 py=$9 tm=${10}
      "$ctrain" time "$m" $devflag gpu --precision fp32,bf16 --protocol bench --threads "$threads" --per-layer $w \
        --json "$out/ctrain-$m-gpu-prec.json" ${html:+--html "$out/report-$m-gpu-prec.html"} || exit 1
      if [ -n "$py" ]; then
        python3 "$py/$script" $tm --device cuda --autocast bf16 --epochs 4 --batch 128 --threads "$threads" --protocol bench $w \
          --json "$out/torch-$m-cuda-bf16.json" || exit 1
      fi
      "$ctrain" time "$m" $devflag gpu --tf32 --protocol bench --threads "$threads" $w \
        --json "$out/ctrain-$m-gpu-tf32-energy.json" > "$out/gpubf16-$m-tf32.log" 2>&1 || exit 1
      [ "$m" = siamese-lstm ] || exit 0
      CTRAIN_LSTM_ALGO=standard "$ctrain" time "$m" $devflag gpu --protocol bench --threads "$threads" $w \
        --json "$out/ctrain-$m-gpu-standard-algo.json" > "$out/gpubf16-$m-standard.log" 2>&1 || exit 1
      "$ctrain" time "$m" $devflag gpu --precision bf16 --protocol seed --epochs 2 --threads "$threads" \
        --json "$out/ctrain-$m-seed-gpu-bf16.json" > "$out/gpubf16-$m-seed.log" 2>&1' \
      sh "$ctrain" "$m" "$w" "$script" "$out" "$threads" "$devflag" "$html" "$([ $py_ok = 1 ] && echo "$here/bench")" "$tm"
  done
else
  for m in siamese-lstm cnn siamese-cnn; do not_run "gpubf16-$m" "this ctrain has no --precision"; done
fi
# The hardware report's suite as a user runs it (its cases that need Chromium or Debian's python3-torch
# skip here), and its NVML case must have read this GPU.
run_step nvml 60 sh -c '"$1" hwreport > "$2" 2>&1; rc=$?; cat "$2"; [ $rc = 0 ] || exit 1
  grep -q "^PASS hwreport/NVML reads" "$2" || { echo "gpu-check: the NVML case did not pass"; exit 1; }' sh "$tests" "$out/.nvml-suite.log"

# ---- 4d. the CPU's threads: 2 to all of them, ctrain against PyTorch on all (before the suite loads the CPU) ----
if [ -f "$here/scripts/cpu-scaling.sh" ]; then
  counts=""
  for t in 2 4 8 16 32 64; do [ "$t" -lt "$threads" ] && counts="$counts $t"; done
  run_step scaling 180 sh "$here/scripts/cpu-scaling.sh" "$ctrain" "$out/scaling" $counts "$threads"
else
  not_run scaling "scripts/cpu-scaling.sh is missing"
fi

# ---- 5. the whole suite (background) beside the race check ----
run_step cpu-tests 240 "$tests" ${GPU_CHECK_SUITES:-} &
cpu_pid=$!
if [ -n "$san" ]; then
  if "$san" --help 2>&1 | grep -q -e '--kernel-regex'; then kfilter="--kernel-regex kns=_kernel|_reduce"; else kfilter="--kernel-name kns=_kernel"; fi
  # in two parts: the sanitizer once stopped inside cuDNN's TF32 LSTM forward ("failed to handle
  # a hardware exception", in a cuDNN kernel it does not check), which hid every case after it.
  # The bf16 cases that reach cuBLAS's bf16 products (dense, the LSTM through cuDNN, the peak,
  # training) are left out: on an H200 with CUDA 13.0 racecheck stopped the same way inside
  # cuBLAS's bf16 GemmEx every time, alone or not, while memcheck and plain runs pass them; the
  # bf16 conversions they add hold no shared memory, which is all racecheck checks.
  run_step racecheck 150 env CT_REQUIRE_GPU=1 CT_GPU_CASES=-tf32/lstm,-bf16/dense,-bf16/lstm,-bf16/peak,-bf16/training,-own \
    "$san" --tool racecheck $kfilter --error-exitcode 99 "$tests" gpu
  # ctrain's own LSTM kernels apart (their recurrence alone, no cuBLAS: every step's shared memory
  # is checked, which is slow; a time-out here loses nothing else)
  run_step racecheck-own 90 env CT_REQUIRE_GPU=1 CT_GPU_CASES=own32/recurrence,bf16own/recurrence \
    "$san" --tool racecheck $kfilter --error-exitcode 99 "$tests" gpu
  run_step racecheck-tf32-lstm 60 env CT_REQUIRE_GPU=1 CT_GPU_CASES=tf32/lstm "$san" --tool racecheck $kfilter --error-exitcode 99 "$tests" gpu
else
  not_run racecheck "compute-sanitizer not found (PATH, /usr/local/cuda*/bin)"
  not_run racecheck-tf32-lstm "compute-sanitizer not found (PATH, /usr/local/cuda*/bin)"
  not_run racecheck-own "compute-sanitizer not found (PATH, /usr/local/cuda*/bin)"
fi
wait "$cpu_pid"
say "all steps done in $(($(now) - start))s"
finish auto
