#!/bin/sh
# demo.sh - `make demo`: train the siamese LSTM speaker model on a synthetic
# speaker corpus generated from a seed (60 speakers: 45 for training, 15 held
# out for validation), printing the hardware header and Keras's per-epoch log
# with seconds, then write the weights to demo-out/siamese-lstm.h5.
#   usage: examples/demo.sh CTRAIN_BINARY
set -eu
ctrain=$1
mkdir -p demo-out
threads=$(nproc 2>/dev/null || echo 2)
echo "== ctrain demo: siamese LSTM speaker verification on a synthetic corpus ($threads threads)"
"$ctrain" train siamese-lstm --data synthetic --speakers 60 --utts 12 --noise 2 \
    --pairs 8000 --val-pairs 2000 --epochs 5 --batch 128 --threads "$threads" --seed 1 \
    --out demo-out/siamese-lstm.h5
echo
echo "== the weights file (HDF5; read it with h5py or h5dump)"
if command -v h5ls >/dev/null 2>&1; then h5ls -r demo-out/siamese-lstm.h5; fi
