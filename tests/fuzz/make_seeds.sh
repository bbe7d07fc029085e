#!/bin/sh
# make_seeds.sh - remakes the seed corpora of tests/fuzz/corpus/ (small valid files
# and the known bad cases), which are committed; the inputs fuzzers crashed on are
# committed beside them by hand (crash-*), and this script leaves those alone.
#   usage: tests/fuzz/make_seeds.sh [CTRAIN_BINARY]   (from the source tree, after make)
# Needs sox (make deps), ffmpeg and Debian's /usr/bin/python3 with h5py and numpy (make test's packages).
set -eu
ctrain=${1:-bin/ctrain}
c=tests/fuzz/corpus
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p $c/audio $c/m4a $c/featstore $c/checkpoint $c/weights $c/keras $c/torch $c/idx $c/trials $c/arch $c/json

# ---- audio: what libsndfile reads, short ----
sox -n -r 16000 -c 1 -b 16 $c/audio/seed-16k-mono.wav synth 0.05 sine 440
sox -n -r 8000 -c 2 -b 8 $c/audio/seed-8k-stereo-u8.wav synth 0.05 sine 300
sox -n -r 22050 -c 1 -e floating-point -b 32 $c/audio/seed-22k-float.wav synth 0.03 sine 500
sox -n -r 16000 -c 1 -b 24 $c/audio/seed-16k-24bit.flac synth 0.05 sine 440
sox -n -r 16000 -c 1 $c/audio/seed-16k.ogg synth 0.1 sine 440
head -c 60 $c/audio/seed-16k-mono.wav > $c/audio/bad-truncated.wav
: > $c/audio/bad-empty.wav
printf 'not audio at all\n' > $c/audio/bad-text.wav

# ---- m4a: AAC in MP4 (ffmpeg's encoder, moov last and first), short; cut and bad ----
sox -n -r 16000 -c 1 -b 16 $t/tone.wav synth 0.1 sine 440
ffmpeg -nostdin -loglevel error -y -i $t/tone.wav -c:a aac -b:a 32k $c/m4a/seed-16k-mono.m4a
sox -n -r 22050 -c 2 -b 16 $t/stereo.wav synth 0.1 sine 300 sine 500
ffmpeg -nostdin -loglevel error -y -i $t/stereo.wav -c:a aac -b:a 32k -movflags +faststart $c/m4a/seed-22k-stereo-faststart.m4a
head -c 300 $c/m4a/seed-16k-mono.m4a > $c/m4a/bad-truncated.m4a
: > $c/m4a/bad-empty.m4a
printf 'not audio at all\n' > $c/m4a/bad-text.m4a

# ---- IDX: 3 images of 4x4 and their labels, plain and gzip; bad headers ----
/usr/bin/python3 - "$c/idx" <<'PY'
import gzip, struct, sys
d = sys.argv[1]
img = struct.pack('>4B3I', 0, 0, 8, 3, 3, 4, 4) + bytes(range(48))
lab = struct.pack('>4BI', 0, 0, 8, 1, 3) + bytes([0, 1, 9])
open(d + '/seed-images-idx3-ubyte', 'wb').write(img)
open(d + '/seed-labels-idx1-ubyte', 'wb').write(lab)
open(d + '/seed-images-idx3-ubyte.gz', 'wb').write(gzip.compress(img, mtime=0))
open(d + '/seed-labels-idx1-ubyte.gz', 'wb').write(gzip.compress(lab, mtime=0))
# a 40-byte file whose header promises 60000 images of 28x28
open(d + '/bad-huge-header', 'wb').write(struct.pack('>4B3I', 0, 0, 8, 3, 60000, 28, 28) + bytes(24))
open(d + '/bad-zero-dim', 'wb').write(struct.pack('>4B3I', 0, 0, 8, 3, 0, 4, 4))
open(d + '/bad-type', 'wb').write(struct.pack('>4B3I', 0, 0, 0x0d, 3, 1, 1, 1) + bytes(4))
open(d + '/bad-truncated.gz', 'wb').write(gzip.compress(img, mtime=0)[:30])
PY

# ---- trial lists against the corpus of targets.c ----
printf '1 id10001/vida/00001.wav id10001/vidb/00002.wav\n0 id10001/vida/00001.wav id10002/vidc/00001.wav\n\n1 id10002/vidc/00001.wav id10002/vidc/00002.wav\r\n' > $c/trials/seed-list.txt
printf '1\tid10003/vidd/00001.wav\tid10002/vidc/00002.wav' > $c/trials/seed-tabs-no-newline.txt
printf '1 id10001/vida/00001.wav\n' > $c/trials/bad-two-fields.txt
printf '2 id10001/vida/00001.wav id10001/vidb/00002.wav\n' > $c/trials/bad-label.txt
printf '1 id10001/vida/00001.wav id99999/none/00001.wav\n' > $c/trials/bad-unknown-path.txt
printf '\n\n  \n' > $c/trials/bad-blank.txt

# ---- architecture specs ----
printf 'conv32k3,relu,conv64k3,relu,maxpool2,dropout0.25,flatten,dense128,relu,dropout0.5,dense10' > $c/arch/seed-mnist-cnn
printf 'conv16k3p1,batchnorm,relu,maxpool2,conv32k3p1,batchnorm,relu,maxpool2,conv64k3p1,batchnorm,relu,gaph,dense64' > $c/arch/seed-speaker-tower
printf 'conv32k3s2p1,batchnorm,relu,gap,dense10' > $c/arch/seed-strided
printf 'conv16k5p2,tanh,maxpool2,conv32k3,sigmoid,maxpool3s2,flatten,dense10' > $c/arch/seed-pooling
printf 'conv65536k1,conv65536k1,gap,dense10' > $c/arch/bad-too-many-weights
printf 'dense10' > $c/arch/bad-dense-on-maps
printf 'conv0k3,gap,dense10' > $c/arch/bad-zero-filters
printf 'conv8k99,gap,dense10' > $c/arch/bad-kernel-too-large
printf 'conv8k3,,gap,dense10' > $c/arch/bad-empty-layer

# ---- ctrain's own files: a checkpoint and weights of every model, tiny ----
common="--epochs 1 --batch 8 --threads 1 --seed 1"
"$ctrain" train small-cnn --data synthetic --size 8 --filters 2 --kernel 3 --classes 3 --samples 16 --val-samples 8 $common \
    --checkpoint $c/checkpoint/seed-small-cnn.h5 --out $c/weights/seed-small-cnn.h5 > /dev/null
"$ctrain" train cnn --data synthetic --arch conv2k3,relu,maxpool2,flatten,dense10 --samples 16 --val-samples 8 $common \
    --checkpoint $c/checkpoint/seed-cnn.h5 --out $c/weights/seed-cnn.h5 > /dev/null
"$ctrain" train siamese-lstm --data synthetic --mels 4 --frames 6 --hidden 3 --embed 2 --pairs 16 --val-pairs 8 $common \
    --checkpoint $c/checkpoint/seed-siamese-lstm.h5 --out $c/weights/seed-siamese-lstm.h5 > /dev/null
"$ctrain" train siamese-cnn --data synthetic --mels 4 --frames 8 --arch conv2k3p1,relu,gaph,dense2 --pairs 16 --val-pairs 8 $common \
    --checkpoint $c/checkpoint/seed-siamese-cnn.h5 --out $c/weights/seed-siamese-cnn.h5 > /dev/null
for m in small-cnn cnn siamese-lstm siamese-cnn; do
  "$ctrain" export --format keras $c/weights/seed-$m.h5 $c/keras/seed-$m.h5 > /dev/null
  "$ctrain" export --format torch $c/weights/seed-$m.h5 $c/torch/seed-$m.h5 > /dev/null
done
printf 'not HDF5\n' > $c/checkpoint/bad-text.h5
head -c 2000 $c/checkpoint/seed-small-cnn.h5 > $c/checkpoint/bad-truncated.h5
cp $c/checkpoint/bad-text.h5 $c/weights/bad-text.h5
cp $c/checkpoint/seed-small-cnn.h5 $c/weights/bad-a-checkpoint.h5
cp $c/weights/seed-cnn.h5 $c/keras/bad-ctrain-weights.h5
cp $c/keras/seed-cnn.h5 $c/torch/bad-keras-file.h5

# ---- feature stores, written with h5py in the layout of io/featstore.h, small chunks ----
/usr/bin/python3 - "$c/featstore" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
def store(path, frames=(3, 2, 4), mels=2, cut=None, offsets=None, speakers=None, declared=None):
    with h5py.File(path, 'w', track_order=False) as f:
        f.attrs['format'] = 'ctrain-features'
        for k, v in (('format_version', 1), ('n_mels', mels), ('sample_rate', 16000), ('frame_shift_ms', 10), ('frame_length_ms', 25)):
            f.attrs.create(k, v, dtype='<i4')
        f.attrs['normalization'] = 'utterance_mean_var'
        s = h5py.string_dtype('utf-8')
        total = sum(frames)
        off = np.cumsum([0] + list(frames[:-1])) if offsets is None else np.array(offsets)
        f.create_dataset('feats', data=np.arange(total * mels, dtype='<f4').reshape(total, mels), maxshape=(None, mels), chunks=(4, mels))
        n = len(frames)
        cols = {'utt_offset': (off, '<i8'), 'utt_frames': (frames, '<i4'), 'utt_speaker': (speakers or [0, 0, 1][:n], '<i4'), 'utt_video': ([0, 1, 2][:n], '<i4')}
        for k, (v, t) in cols.items():
            v = np.array(v, dtype=t)
            if cut == k: v = v[:-1]
            f.create_dataset(k, data=v, maxshape=(None,), chunks=(4,))
        paths = ['id10001/vida/00001.wav', 'id10001/vidb/00002.wav', 'id10002/vidc/00001.wav'][:n]
        if cut == 'utt_path': paths = paths[:-1]
        f.create_dataset('utt_path', data=paths, dtype=s, maxshape=(None,), chunks=(4,))
        f.create_dataset('speakers', data=['id10001', 'id10002'], dtype=s, maxshape=(None,), chunks=(4,))
        f.create_dataset('videos', data=['vida', 'vidb', 'vidc'], dtype=s, maxshape=(None,), chunks=(4,))
        if declared: f['feats'].resize((declared, mels))
store(d + '/seed-store.h5', frames=(3, 2, 4))
store(d + '/seed-cut-short.h5', cut='utt_path')
store(d + '/bad-offset-beyond-feats.h5', offsets=[0, 3, 50])
store(d + '/bad-speaker-index.h5', speakers=[0, 7, 1])
store(d + '/bad-declared-frames.h5', declared=1 << 40)
PY
printf 'not HDF5\n' > $c/featstore/bad-text.h5

# ---- ctrain time --json files ----
/usr/bin/python3 - "$c/json" <<'PY'
import json, sys
d = sys.argv[1]
ep = {"seconds": 1.5, "train_seconds": 1.25, "val_seconds": 0.25, "loss": 0.5, "accuracy": 0.8, "val_loss": 0.6, "val_accuracy": None}
doc = {"schema": "ctrain-time/1", "host": {"hostname": "h", "cpu": "x86", "blas_core": "Haswell"}, "ctrain_version": "0.1.0",
       "date": "2026-01-01T00:00:00Z", "device": "cpu", "model": "cnn", "protocol": "smoke", "threads": 2, "batch": 128,
       "n_train": 1000, "n_val": 100, "epochs": [ep, ep], "epoch_seconds": {"median": 1.5, "min": 1.5, "max": 1.5},
       "train_samples_per_s": 800.0, "gflops": 12.5, "peak_gflops": 100.0, "fma_peak_gflops": 200.0}
open(d + '/seed-run.json', 'w').write(json.dumps(doc, indent=2) + '\n')
bad = dict(doc); bad["epochs"] = []
open(d + '/bad-no-epochs.json', 'w').write(json.dumps(bad) + '\n')
bad = dict(doc); bad["schema"] = "other/1"
open(d + '/bad-schema.json', 'w').write(json.dumps(bad) + '\n')
open(d + '/bad-deep.json', 'w').write('[' * 200 + ']' * 200 + '\n')
open(d + '/bad-unterminated.json', 'w').write('{"schema": "ctrain-time/1", "host": {"hostname": "\\ud800\n')
open(d + '/bad-number.json', 'w').write('{"threads": 1e999999, "batch": -0.e}\n')
PY
echo "seeds written under $c"
