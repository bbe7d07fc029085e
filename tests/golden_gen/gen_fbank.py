"""gen_fbank.py - golden log-mel filterbanks from torchaudio.compliance.kaldi.fbank
for tests/test_fbank.c (io/fbank.c documents the definition and the options).

For each file tests/golden/fbank_<n_mels>.h5:
  wave  [N]        a 1.6 s test signal at 16 kHz in [-1, 1]: a chirp, two tones with
                   an amplitude envelope, white noise, and a quiet stretch
  raw   [T, M]     torchaudio's log-mel of 32768 * wave, before normalisation
  norm  [T, M]     raw normalised per band over frames: (raw - mean) / sqrt(var + 1e-10),
                   population variance, in float64
  attrs n_mels, n_samples, frames
Run with Debian's python (python3-torchaudio): /usr/bin/python3 gen_fbank.py [OUT_DIR]
"""
import numpy as np
import torch
import torchaudio.compliance.kaldi as kaldi

from common import save


def signal(seed, n):
    g = np.random.default_rng(seed)
    t = np.arange(n) / 16000.0
    chirp = 0.25 * np.sin(2 * np.pi * (100 * t + 0.5 * 2400 * t * t))         # 100 Hz -> 3.9 kHz
    tones = (0.2 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 5300 * t)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    noise = 0.02 * g.standard_normal(n)
    x = chirp + tones + noise
    x[n // 2: n // 2 + 2000] *= 0.001                                             # a quiet stretch
    return x.astype(np.float32)


def one(n_mels, seed, n):
    wave = torch.from_numpy(signal(seed, n))
    raw = kaldi.fbank(wave.unsqueeze(0) * 32768.0, window_type="hamming", dither=0.0,
                      frame_length=25.0, frame_shift=10.0, num_mel_bins=n_mels,
                      low_freq=20.0, high_freq=8000.0, snip_edges=True, round_to_power_of_two=True,
                      remove_dc_offset=True, preemphasis_coefficient=0.97, use_energy=False,
                      use_power=True, use_log_fbank=True, sample_frequency=16000.0)
    r = raw.double().numpy()
    norm = (r - r.mean(axis=0)) / np.sqrt(r.var(axis=0) + 1e-10)
    save("fbank_%d" % n_mels, attrs={"n_mels": n_mels, "n_samples": n, "frames": raw.shape[0]},
         wave=wave, raw=raw, norm=norm)


if __name__ == "__main__":
    one(40, 1, 25_650)   # 1.603 s: 158 frames, the last window ends 130 samples before the end
    one(24, 2, 16_000)   # exactly 1 s: 98 frames
