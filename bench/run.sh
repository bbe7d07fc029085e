#!/bin/sh
# run.sh - `make bench`: the machine's sgemm peak, then the siamese LSTM's LSTM
# step (256 sequences x 100 frames x 40 features -> 128 units, forward+backward)
# in ctrain and in PyTorch, side by side in one run with the same threads.
#   usage: bench/run.sh BUILD_DIR [THREADS]
set -u
build=$1
threads=${2:-2}
echo "== sgemm peak ($threads threads)"
"$build/bench/bench_sgemm" --threads "$threads" || exit 1
echo
echo "== LSTM forward+backward, ctrain ($threads threads)"
"$build/bench/bench_lstm" --threads "$threads" || exit 1
echo
echo "== LSTM forward+backward, PyTorch ($threads threads)"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 bench/lstm_torch.py --threads "$threads"
else
  echo "PyTorch comparison skipped: Debian's python3-torch is not installed (sh scripts/deps.sh golden installs it)"
fi
