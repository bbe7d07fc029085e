#!/usr/bin/env python3
"""e2e_data.py - small synthetic data sets for scripts/gpu-e2e.sh, made with Python's standard
library alone (the GPU machine has no espeak-ng, sox or Fashion-MNIST):

  OUT/wav/idNNNNN/VIDEO/NNNNN.wav   speakers x videos x utterances, 16 kHz mono, 2-3 s each: a
                                    speaker is a pitch and three formant-like resonances, an
                                    utterance a syllable-rate envelope over them plus noise
                                    (`ctrain prep voxceleb` reads this layout)
  OUT/trials.txt                    VoxCeleb-format trial list: 'LABEL PATH1 PATH2', half of
                                    them the same speaker, paths relative to OUT/wav
  OUT/images/*-idx?-ubyte.gz        MNIST-format images 28x28 of 10 classes (a class is a
                                    bar at one of 10 angles, with noise), train and t10k

usage: e2e_data.py OUT [--speakers 10] [--videos 2] [--utts 5] [--images 4000] [--test 1000] [--seed 1]
"""
import argparse
import gzip
import math
import os
import random
import struct
import sys
import wave

RATE = 16000


def speaker_voice(rng):
    return {"f0": rng.uniform(100, 180), "formants": sorted(rng.uniform(500, 1500) for _ in range(3))}


def utterance(rng, voice, seconds):
    n = int(seconds * RATE)
    syll = rng.uniform(3.0, 5.0)            # syllables per second
    phase = [rng.uniform(0, 2 * math.pi) for _ in range(4)]
    amps = [1.0] + [rng.uniform(0.3, 0.8) for _ in range(3)]
    freqs = [voice["f0"]] + voice["formants"]
    out = bytearray()
    for i in range(n):
        t = i / RATE
        env = 0.5 + 0.5 * math.sin(2 * math.pi * syll * t + phase[0])
        s = sum(a * math.sin(2 * math.pi * f * t + p) for a, f, p in zip(amps, freqs, phase))
        v = 0.12 * env * s + rng.gauss(0, 0.12)
        out += struct.pack("<h", max(-32767, min(32767, int(v * 32767))))
    return bytes(out)


def write_wavs(root, rng, n_spk, n_vid, n_utt):
    utts = {}
    for k in range(n_spk):
        spk = "id%05d" % (20001 + k)
        voice = speaker_voice(rng)
        for v in range(n_vid):
            vid = "vid%07d" % (v + 1)
            d = os.path.join(root, "wav", spk, vid)
            os.makedirs(d, exist_ok=True)
            for u in range(n_utt):
                name = "%05d.wav" % (u + 1)
                with wave.open(os.path.join(d, name), "wb") as w:
                    w.setnchannels(1)
                    w.setsampwidth(2)
                    w.setframerate(RATE)
                    w.writeframes(utterance(rng, voice, rng.uniform(2.0, 3.0)))
                utts.setdefault(spk, []).append("%s/%s/%s" % (spk, vid, name))
    return utts


def write_trials(path, rng, utts, n):
    spks = sorted(utts)
    with open(path, "w") as f:
        for i in range(n):
            if i % 2 == 0:
                s = rng.choice(spks)
                a, b = rng.sample(utts[s], 2)
                f.write("1 %s %s\n" % (a, b))
            else:
                s, t = rng.sample(spks, 2)
                f.write("0 %s %s\n" % (rng.choice(utts[s]), rng.choice(utts[t])))


def write_images(root, rng, prefix, n):
    os.makedirs(root, exist_ok=True)
    pixels, labels = bytearray(), bytearray()
    for _ in range(n):
        c = rng.randrange(10)
        ang = math.pi * c / 10 + rng.gauss(0, 0.05)
        cx, cy = 13.5 + rng.gauss(0, 1.5), 13.5 + rng.gauss(0, 1.5)
        dx, dy = math.cos(ang), math.sin(ang)
        for y in range(28):
            for x in range(28):
                dist = abs((x - cx) * dy - (y - cy) * dx)      # distance to the bar's line
                along = abs((x - cx) * dx + (y - cy) * dy)
                v = 220 if dist < 1.6 and along < 10 else 0
                pixels.append(max(0, min(255, int(v + rng.gauss(0, 25)))))
        labels.append(c)
    with gzip.open(os.path.join(root, prefix + "-images-idx3-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + bytes(pixels))
    with gzip.open(os.path.join(root, prefix + "-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">II", 2049, n) + bytes(labels))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--speakers", type=int, default=10)
    ap.add_argument("--videos", type=int, default=2)
    ap.add_argument("--utts", type=int, default=5)
    ap.add_argument("--trials", type=int, default=600)
    ap.add_argument("--images", type=int, default=4000)
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.speakers < 2 or a.videos * a.utts < 2:
        sys.exit("e2e_data.py: need at least 2 speakers with at least 2 utterances each")
    rng = random.Random(a.seed)
    utts = write_wavs(a.out, rng, a.speakers, a.videos, a.utts)
    write_trials(os.path.join(a.out, "trials.txt"), rng, utts, a.trials)
    write_images(os.path.join(a.out, "images"), rng, "train", a.images)
    write_images(os.path.join(a.out, "images"), rng, "t10k", a.test)
    print("e2e_data.py: %d speakers x %d utterances in %s/wav, %d trials, %d + %d images in %s/images"
          % (a.speakers, a.videos * a.utts, a.out, a.trials, a.images, a.test, a.out))


if __name__ == "__main__":
    main()
