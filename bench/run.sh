#!/bin/sh
# run.sh - `make bench`: this machine's sgemm peak, then ctrain and PyTorch side
# by side in one run, same shapes and threads:
#   1. the speaker model's LSTM step (256 sequences x 100 frames x 40 -> 128),
#   2. the whole siamese LSTM training step (batch 128 pairs, RMSprop) and the
#      seed-protocol epoch time it implies,
#   3. the Keras mnist_cnn training step on 28x28 images (batch 128, Adam).
#   usage: bench/run.sh BUILD_DIR [THREADS]
set -u
build=$1
threads=${2:-2}
echo "== sgemm peak ($threads threads)"
"$build/bench/bench_sgemm" --threads "$threads" | tee /tmp/ctrain-sgemm.txt || exit 1
peak=$(sed -n 's/^square (the machine.s sgemm peak).*median *\([0-9.]*\).*/\1/p' /tmp/ctrain-sgemm.txt)
have_torch=0
/usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || echo "PyTorch comparisons skipped: Debian's python3-torch is not installed (sh scripts/deps.sh golden installs it)"
echo
echo "== LSTM forward+backward ($threads threads)"
"$build/bench/bench_lstm" --threads "$threads" || exit 1
[ $have_torch = 1 ] && /usr/bin/python3 bench/lstm_torch.py --threads "$threads"
echo
echo "== siamese LSTM training step ($threads threads, sgemm peak ${peak:-?} GFLOP/s)"
"$build/bench/bench_siamese" --threads "$threads" ${peak:+--peak $peak} || exit 1
[ $have_torch = 1 ] && /usr/bin/python3 bench/siamese_torch.py --threads "$threads" ${peak:+--peak $peak}
echo
echo "== CNN (Keras mnist_cnn) training step ($threads threads)"
"$build/bench/bench_cnn" --threads "$threads" || exit 1
[ $have_torch = 1 ] && /usr/bin/python3 bench/cnn_torch.py --threads "$threads"
exit 0
