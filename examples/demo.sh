#!/bin/sh
# demo.sh - `make demo`: the speaker-verification experiment end to end on a corpus
# made on this machine.
#   1. synthesise a VoxCeleb-layout corpus with espeak-ng and sox: 100 speakers x
#      3 sessions x 4 utterances, 1-4 s each, and a trial list over the last 20
#      speakers (examples/make_corpus.py; kept in demo-out/corpus between runs);
#   2. compute log-mel features into an HDF5 feature store (ctrain prep);
#   3. train the siamese LSTM with the trial speakers held out, printing the
#      hardware header and Keras's per-epoch log with seconds and val_eer. It uses
#      `train`'s defaults (the embedding reads the LSTM's mean over time; RMSprop
#      lr 3e-3, cosine schedule) for 20,000 pairs x 10 epochs: on this corpus it
#      reaches 4.1% EER, where the seed's last hidden state (--pool last) ends at 11.8%;
#   4. evaluate the equal error rate and minDCF on the trial list (whole utterances),
#      writing the scores, the DET curve and the metrics as JSON beside the weights.
# About 4 minutes on 2 cores.
#   usage: examples/demo.sh CTRAIN_BINARY
set -eu
ctrain=$1
out=demo-out
corpus=$out/corpus
threads=$(nproc 2>/dev/null || echo 2)
mkdir -p "$out"
start=$(date +%s)

echo "== 1. a speech corpus from espeak-ng and sox ($corpus)"
if [ -f "$corpus/trials.txt" ] && [ -d "$corpus/wav" ]; then
  echo "already there (delete $corpus to make it again)"
else
  rm -rf "$corpus"
  /usr/bin/python3 examples/make_corpus.py --out "$corpus" --speakers 100 --videos 3 --utts 4 \
      --trials-speakers 20 --trials 2000 --seed 1 --jobs "$threads"
fi

echo
echo "== 2. log-mel features (ctrain prep)"
"$ctrain" prep voxceleb --wav "$corpus/wav" --out "$corpus/feats.h5" --threads "$threads"

echo
echo "== 3. training the siamese LSTM (the 20 trial speakers are never trained on)"
rm -rf "$out/run"   # the previous demo's run directory: --run-dir refuses to overwrite a run
"$ctrain" train siamese-lstm --data "$corpus/feats.h5" --trials "$corpus/trials.txt" \
    --pairs 20000 --val-pairs 2000 --epochs 10 --batch 128 \
    --threads "$threads" --seed 1 --csv "$out/history.csv" --out "$out/siamese-lstm.h5" --run-dir "$out/run"

echo
echo "== 4. evaluation on the trial list (whole utterances)"
"$ctrain" eval siamese-lstm --weights "$out/siamese-lstm.h5" --data "$corpus/feats.h5" \
    --trials "$corpus/trials.txt" --threads "$threads" \
    --scores "$out/scores.txt" --det "$out/det.svg" --json "$out/eer.json"

echo
echo "demo finished in $(( $(date +%s) - start )) s; weights: $out/siamese-lstm.h5, history: $out/history.csv,"
echo "DET curve: $out/det.svg, scores: $out/scores.txt, metrics: $out/eer.json;"
echo "the run (configuration, curves, TensorBoard files): $out/run (tensorboard --logdir $out/run/tensorboard)"
