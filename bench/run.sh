#!/bin/sh
# run.sh - `make bench`: this machine's FP32 FMA peak and sgemm peak, then whole
# training runs of ctrain and PyTorch side by side in one run, same shapes,
# batch and threads:
#   1. `ctrain time siamese-lstm --protocol bench` and bench/siamese_torch.py --epochs
#      (3,072 + 1,024 pairs of 100 x 40 log-mels, LSTM 128, batch 128, 4 epochs),
#   2. `ctrain time cnn --protocol bench` and bench/cnn_torch.py --epochs
#      (6,000 + 1,000 Fashion-MNIST images, Keras mnist_cnn, batch 128, 4 epochs),
#   3. `ctrain time siamese-cnn --protocol bench` and bench/siamese_torch.py --model siamese-cnn
#      (the pairs of 1. through the CNN speaker encoder's default spec),
#   each against every PyTorch found: Debian's (/usr/bin/python3, python3-torch)
#   and the newest from PyPI, in a cached virtual environment made by
#   bench/torch_venv.sh (CTRAIN_TORCH_VENV, default ~/.cache/ctrain/venv-torch;
#   skipped with one line when PyPI cannot be reached; CTRAIN_TORCH_PYPI=0 skips
#   it on purpose). Then `ctrain time --compare` of the runs and the ratios of
#   training samples/s; on a machine where Debian's torch.cuda.is_available(),
#   PyTorch with cuDNN too. Every run writes its JSON under bench/results/ as
#   HOST-MODEL-DEVICE.json (ctrain; also HOST-MODEL.svg; HOST is $CTRAIN_BENCH_NAME when set) and
#   HOST-MODEL-torch-VERSION-cpu.json (PyTorch); the closing table is also
#   written as HOST-summary.json;
#   then, where the CPU has bf16 products (AMX-BF16 or AVX512-BF16), the three models with
#   --precision fp32,bf16 against PyTorch's bf16 autocast (HOST-MODEL-bf16-cpu.json,
#   HOST-MODEL-torch-VERSION-bf16-cpu.json);
#   4. the step microbenchmarks: the LSTM, the siamese step, the cnn step, with
#   every PyTorch found (CTRAIN_BENCH_STEPS=0 leaves them out).
#
#   With CTRAIN_BENCH_ISA=avx2 (`make bench-avx2`) this CPU plays one with AVX2 and FMA but no
#   AVX-512, on both sides: ctrain (which that target builds for -march=x86-64-v3) on its AVX2
#   kernels and OpenBLAS's Haswell ones, PyTorch's own kernels, oneDNN and MKL limited to AVX2;
#   the results are named HOST-avx2-*. The FMA peak stays the CPU's own.
#
#   usage: bench/run.sh BUILD_DIR [THREADS] [CTRAIN_BINARY]
#   (CTRAIN_BINARY defaults to BUILD_DIR/ctrain when it exists, else bin/ctrain)
set -u
build=$1
threads=${2:-2}
ctrain=${3:-}
if [ -z "$ctrain" ]; then
  if [ -x "$build/ctrain" ]; then ctrain=$build/ctrain; else ctrain=bin/ctrain; fi
fi
results=bench/results
# the results' file names start with CTRAIN_BENCH_NAME, default the host name: name each kind of
# machine apart (CTRAIN_BENCH_NAME=zen4) to keep its results beside another's
host=${CTRAIN_BENCH_NAME:-$(hostname -s 2>/dev/null || hostname)}
mkdir -p "$results" || exit 1
case "${CTRAIN_BENCH_ISA:-}" in
  "") ;;
  avx2)
    export CTRAIN_CPU_KERNELS=avx2 OPENBLAS_CORETYPE=Haswell
    export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
    host=$host-avx2
    echo "== this CPU plays an AVX2 one: ctrain's AVX2 kernels, OpenBLAS's Haswell kernels, PyTorch limited to AVX2" ;;
  *) echo "CTRAIN_BENCH_ISA=${CTRAIN_BENCH_ISA}: use avx2, or leave it unset (the CPU's widest on both sides)" >&2; exit 2 ;;
esac

echo "== FP32 FMA peak and sgemm peak ($threads threads)"
"$build/bench/bench_sgemm" --threads "$threads" | tee /tmp/ctrain-sgemm.txt || exit 1
peak=$(sed -n 's/^square (the machine.s sgemm peak).*median *\([0-9.]*\).*/\1/p' /tmp/ctrain-sgemm.txt)
fma=$(sed -n 's/^FP32 FMA peak.*  peak *\([0-9.]*\).*/\1/p' /tmp/ctrain-sgemm.txt)
core=$(sed -n 's/^sgemm, .*, core //p' /tmp/ctrain-sgemm.txt)

# The PyTorch peers: "NAME=PYTHON" words
peers=""
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then peers="debian=/usr/bin/python3"
else echo "Debian's PyTorch skipped: python3-torch is not installed (sh scripts/deps.sh test installs it)"; fi
if [ "${CTRAIN_TORCH_PYPI:-1}" != 0 ]; then
  newest=$(sh bench/torch_venv.sh)
  [ -n "$newest" ] && peers="$peers pypi=$newest"
fi
have_cuda=0
case "$peers" in *debian=*)
  /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && have_cuda=1 ;;
esac
echo
echo "ctrain's BLAS: ${core:-unknown}"
for p in $peers; do echo "${p%%=*} PyTorch: $("${p#*=}" bench/torch_timing.py)"; done

# ratio A.json B.json: A's training samples/s over B's
ratio() {
  /usr/bin/python3 -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("%.2fx" % (a["train_samples_per_s"] / b["train_samples_per_s"]))' "$1" "$2"
}

# torch_version PYTHON: "1.13", "2.15" (major.minor, for file names)
torch_version() { "$1" -c 'import torch; print(".".join(torch.__version__.split("+")[0].split(".")[:2]))'; }

# compare_torch MODEL TORCH_SCRIPT TORCH_ARGS...: ctrain's run against every PyTorch's, on the CPU and
# (with Debian's CUDA) the GPU
compare_torch() {
  model=$1; script=$2; shift 2
  mine=$results/$host-$model-cpu.json
  files=$mine
  for p in $peers; do
    py=${p#*=}
    theirs=$results/$host-$model-torch-$(torch_version "$py")-cpu.json
    echo
    echo "-- $("$py" bench/torch_timing.py), same workload"
    "$py" "$script" --epochs 4 --batch 128 --threads "$threads" --protocol bench "$@" ${peak:+--peak $peak} \
      ${fma:+--fma-peak $fma} --ctrain-blas "$core" --json "$theirs" || return 1
    files="$files $theirs"
  done
  [ "$files" = "$mine" ] && return 0
  echo
  "$ctrain" time --compare $files || return 1
  for f in $files; do
    [ "$f" = "$mine" ] && continue
    echo "ctrain / $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["framework"])' "$f") ($model, cpu, $threads threads): $(ratio "$mine" "$f") the training samples/s"
  done
  if [ $have_cuda = 1 ]; then
    gpu=$results/$host-$model-torch-cuda.json
    /usr/bin/python3 "$script" --epochs 4 --batch 128 --threads "$threads" --protocol bench --device cuda "$@" --json "$gpu" || return 1
    echo "PyTorch cuDNN / ctrain cpu ($model): $(ratio "$gpu" "$mine") the training samples/s"
  fi
}

echo
echo "== siamese-lstm, protocol bench ($threads threads)"
"$ctrain" time siamese-lstm --protocol bench --threads "$threads" --device cpu,gpu --per-layer --json "$results/$host-siamese-lstm.json" || exit 1
compare_torch siamese-lstm bench/siamese_torch.py --pairs 3072 --val-pairs 1024 || exit 1

echo
echo "== cnn (Keras mnist_cnn), protocol bench ($threads threads)"
# the same images on both sides: the first 6,000 + 1,000 of Debian's Fashion-MNIST (installed with the
# build dependencies), so the loss curves are comparable too; synthetic images where it is missing
fmnist=/usr/share/datasets/fashion-mnist
if [ -f $fmnist/train-images-idx3-ubyte.gz ]; then cnn_data=fashion-mnist; torch_data=$fmnist; else cnn_data=synthetic; torch_data=synthetic; fi
"$ctrain" time cnn --protocol bench --data $cnn_data --threads "$threads" --device cpu,gpu --per-layer --json "$results/$host-cnn.json" || exit 1
compare_torch cnn bench/cnn_torch.py --data $torch_data --samples 6000 --val-samples 1000 || exit 1

echo
echo "== siamese-cnn (the CNN speaker encoder), protocol bench ($threads threads)"
"$ctrain" time siamese-cnn --protocol bench --threads "$threads" --device cpu,gpu --per-layer --json "$results/$host-siamese-cnn.json" || exit 1
compare_torch siamese-cnn bench/siamese_torch.py --model siamese-cnn --pairs 3072 --val-pairs 1024 || exit 1

# bf16: ctrain --precision bf16 against PyTorch's bf16 autocast, where this CPU has bf16 products
# (AMX-BF16 or AVX512-BF16; docs/precision.md); elsewhere one line says why
bf16_line=$("$ctrain" info --no-peak | sed -n 's/^--precision bf16: //p')
case "$bf16_line" in
  "CPU products on "*)
    echo
    echo "== bf16 mixed precision: ctrain --precision bf16 and PyTorch bf16 autocast ($threads threads)"
    for m in siamese-lstm cnn siamese-cnn; do
      if [ $m = cnn ]; then script=bench/cnn_torch.py; margs="--data $torch_data --samples 6000 --val-samples 1000"; cdata="--data $cnn_data"
      else script=bench/siamese_torch.py; margs="--model $m --pairs 3072 --val-pairs 1024"; cdata=""; fi
      mine=$results/$host-$m-bf16-cpu.json
      "$ctrain" time $m --protocol bench $cdata --threads "$threads" --device cpu --precision fp32,bf16 --json "$results/$host-$m-prec.json" || exit 1
      mv "$results/$host-$m-prec-cpu-bf16.json" "$mine" && rm -f "$results/$host-$m-prec-cpu.json"
      for p in $peers; do
        py=${p#*=}
        theirs=$results/$host-$m-torch-$(torch_version "$py")-bf16-cpu.json
        "$py" $script --epochs 4 --batch 128 --threads "$threads" --protocol bench $margs --autocast bf16 --ctrain-blas "$core" \
          --json "$theirs" || exit 1
        echo "ctrain bf16 / $("$py" bench/torch_timing.py | cut -c1-40) bf16 autocast ($m, cpu, $threads threads): $(ratio "$mine" "$theirs") the training samples/s"
      done
    done ;;
  *) echo; echo "== bf16 mixed precision skipped: ${bf16_line:-ctrain info says nothing about bf16}" ;;
esac

echo
echo "== side by side ($threads threads; training samples/s of the bench protocol, epochs 2-4)"
/usr/bin/python3 bench/summary.py "$results" "$host" "$results/$host-summary.json" || exit 1

[ "${CTRAIN_BENCH_STEPS:-1}" = 0 ] && exit 0
echo
echo "== step microbenchmarks: LSTM forward+backward ($threads threads), and as trained beside its products alone"
"$build/bench/bench_lstm" --threads "$threads" --ceiling || exit 1   # the ceiling says so where the fused step does not run
for p in $peers; do "${p#*=}" bench/lstm_torch.py --threads "$threads"; done
echo
echo "== siamese LSTM training step ($threads threads, FMA peak ${fma:-?} GFLOP/s, sgemm peak ${peak:-?} GFLOP/s)"
"$build/bench/bench_siamese" --threads "$threads" ${fma:+--peak $fma} || exit 1
for p in $peers; do "${p#*=}" bench/siamese_torch.py --threads "$threads" ${fma:+--peak $fma}; done
echo
echo "== CNN (Keras mnist_cnn) training step ($threads threads)"
"$build/bench/bench_cnn" --threads "$threads" || exit 1
for p in $peers; do "${p#*=}" bench/cnn_torch.py --threads "$threads"; done
exit 0
