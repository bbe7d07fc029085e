"""cnn_torch.py - the `cnn` model (Keras's mnist_cnn) in PyTorch, for comparison
with build/bench/bench_cnn (same network, batch, threads, FLOP count, reporting)
and with `ctrain train cnn` (same data, optimizer and epochs).

    /usr/bin/python3 bench/cnn_torch.py [--threads N] [--batch B] [--repeats R]
    /usr/bin/python3 bench/cnn_torch.py --epochs 12 [--data DIR|synthetic] [--samples N] [--val-samples M]
                                        [--threads N] [--json FILE] [--peak GFLOPS] [--device cuda]
                                        [--sample-hz HZ] [--price cpu=PER_HOUR] [--electricity PER_KWH]
                                        [--hardware-cost cpu=PRICE]

Network: conv 32 3x3, relu, conv 64 3x3, relu, maxpool 2, dropout 0.25, flatten,
dense 128, relu, dropout 0.5, dense 10, softmax cross-entropy; Adam lr 1e-3.
Benchmark mode times one training step (zero_grad, forward, loss, backward,
Adam) on synthetic images, median of R after 2 warm-up steps. FLOPs per image:
forward 23.98 M (conv1 0.39, conv2 21.23, dense1 2.36, dense2 0.003), a step is
2 x conv1 + 3 x the rest = 71.57 M (no input gradient for the first layer).
With --epochs it trains on the IDX files of --data (default Debian's
Fashion-MNIST; `synthetic`: random images and labels of the same shapes) and
prints a Keras-style log with per-epoch seconds, then the statistics of
`ctrain time cnn` (median, min, max seconds over the epochs after the warm-up,
training images/s, GFLOP/s); --json FILE records them in ctrain time's schema
(bench/torch_timing.py: ctrain-time/2, with the energy, temperature and data-wait
figures measured as ctrain measures them, counters sampled --sample-hz times a
second, and the money of --price, --electricity and --hardware-cost; the data
wait is the time spent taking each training batch out of the tensors).
Validation runs in batches of --batch, as ctrain's does.
"""
import argparse
import gzip
import os
import statistics
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_timing

FLOPS_PER_IMAGE = 2 * 389376 + 3 * (21233664 + 2359296 + 2560)


def model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25),
        nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    assert zero == 0 and dtype == 8, path + ": not an unsigned-byte IDX file"
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(d, name):
    for p in (os.path.join(d, name + ".gz"), os.path.join(d, name)):
        if os.path.exists(p):
            return read_idx(p)
    raise SystemExit(f"{d}/{name}[.gz] not found")


def bench(a):
    torch.manual_seed(1)
    m = model()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    x = torch.rand(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))
    m.train()
    ts = []
    for r in range(-2, a.repeats):
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch_timing.autocast("cpu"):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        if r >= 0:
            ts.append(time.perf_counter() - t0)
    m.eval()
    te = []
    with torch.no_grad(), torch_timing.autocast("cpu"):
        for r in range(-1, a.repeats):
            t0 = time.perf_counter()
            m(x)
            if r >= 0:
                te.append(time.perf_counter() - t0)
    s, e = statistics.median(ts), statistics.median(te)
    g = FLOPS_PER_IMAGE * a.batch / s * 1e-9
    print(f"PyTorch {torch.__version__} cnn (mnist_cnn) on 1x28x28, batch {a.batch}, {a.threads} threads, {torch_timing.precision()}")
    print(f"  training step  {1e3 * s:8.2f} ms  {a.batch / s:7.0f} images/s  {g:6.1f} GFLOP/s   "
          f"(median of {a.repeats}; {FLOPS_PER_IMAGE * 1e-6:.1f} MFLOP/image)")
    b = min(ts)
    print(f"  best step      {1e3 * b:8.2f} ms  {a.batch / b:7.0f} images/s  {FLOPS_PER_IMAGE * a.batch / b * 1e-9:6.1f} GFLOP/s"
          f"  (the least disturbed of {a.repeats} on a shared machine)")
    print(f"  eval forward   {1e3 * e:8.2f} ms  {a.batch / e:7.0f} images/s")
    print(f"  epoch estimate (60000 train + 10000 eval images): {60000 * s / a.batch + 10000 * e / a.batch:.1f} s")


def images(a):
    """Training and validation images: the IDX files of a.data, or random ones of the same shapes."""
    if a.data == "synthetic":
        g = torch.Generator().manual_seed(a.seed)
        n, v = a.samples or 60000, a.val_samples if a.val_samples >= 0 else 10000
        return (torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g),
                torch.rand(v, 1, 28, 28, generator=g), torch.randint(0, 10, (v,), generator=g))
    xtr = torch.from_numpy(load(a.data, "train-images-idx3-ubyte").astype(np.float32) / 255.0).unsqueeze(1)
    ytr = torch.from_numpy(load(a.data, "train-labels-idx1-ubyte").astype(np.int64))
    xte = torch.from_numpy(load(a.data, "t10k-images-idx3-ubyte").astype(np.float32) / 255.0).unsqueeze(1)
    yte = torch.from_numpy(load(a.data, "t10k-labels-idx1-ubyte").astype(np.int64))
    n = a.samples if 0 < a.samples < len(xtr) else len(xtr)
    v = a.val_samples if 0 <= a.val_samples < len(xte) else len(xte)
    return xtr[:n], ytr[:n], xte[:v], yte[:v]


def train(a, prices):
    dev = torch.device(a.device)
    xtr, ytr, xte, yte = (t.to(dev) for t in images(a))
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.manual_seed(a.seed)
    m = model().to(dev)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    print(f"PyTorch {torch.__version__} on {a.device}, {a.threads} threads")
    print(f"Train on {len(xtr)} samples, validate on {len(xte)} samples")
    hw = torch_timing.Hardware(a.device, a.sample_hz) if a.json else None
    hist = []
    for ep in range(a.epochs):
        sync()
        t0 = time.perf_counter()
        m.train()
        perm = torch.randperm(len(xtr), device=dev)
        tl, tc, wait = 0.0, 0, 0.0
        for i in range(0, len(xtr), a.batch):
            tw = time.perf_counter()           # fetching the batch: the data wait, as ctrain times its load()
            idx = perm[i:i + a.batch]
            xb, yb = xtr[idx], ytr[idx]
            wait += time.perf_counter() - tw
            opt.zero_grad()
            with torch_timing.autocast(dev.type):
                z = m(xb)
                loss = F.cross_entropy(z, yb)
            loss.backward()
            opt.step()
            tl += loss.item() * len(idx)
            tc += (z.argmax(1) == yb).sum().item()
        sync()
        t1 = time.perf_counter()
        m.eval()
        vl, vc = 0.0, 0
        with torch.no_grad(), torch_timing.autocast(dev.type):
            for i in range(0, len(xte), a.batch):
                z = m(xte[i:i + a.batch])
                vl += F.cross_entropy(z, yte[i:i + a.batch], reduction="sum").item()
                vc += (z.argmax(1) == yte[i:i + a.batch]).sum().item()
        sync()
        t2 = time.perf_counter()
        if hw:
            hw.epoch_end()
        nv = max(len(xte), 1)
        hist.append(torch_timing.epoch_record(t2 - t0, t1 - t0, t2 - t1, tl / len(xtr), tc / len(xtr), vl / nv, vc / nv, wait))
        torch_timing.print_epoch(ep, a.epochs, hist[-1])
    torch_timing.report("cnn", a.device, hist, len(xtr), FLOPS_PER_IMAGE, "images", a.peak, a.fma_peak)
    if a.json:
        torch_timing.write_json(a.json, model="cnn", protocol=a.protocol, data=a.data, device=a.device, threads=a.threads,
                                model_desc="mnist_cnn in torch.nn (conv32k3,relu,conv64k3,relu,maxpool2,dropout0.25,flatten,"
                                           "dense128,relu,dropout0.5,dense10), Adam lr 0.001",
                                batch=a.batch, seed=a.seed, n_train=len(xtr), n_val=len(xte), epochs=hist,
                                flops_per_sample=FLOPS_PER_IMAGE, peak=a.peak, fma_peak=a.fma_peak, ctrain_blas=a.ctrain_blas,
                                flops_counted="conv and dense matrix products, as ctrain counts them (models/seq_cnn.h)",
                                hardware=hw, prices=prices)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=0, help="train on --data for this many epochs instead of benchmarking")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--samples", type=int, default=0, help="training images per epoch (default: all, 60000 synthetic)")
    ap.add_argument("--val-samples", type=int, default=-1, help="validation images (default: all, 10000 synthetic)")
    ap.add_argument("--protocol", default="bench", help="recorded in the JSON")
    ap.add_argument("--peak", type=float, default=0, help="sgemm peak GFLOP/s for the fraction of peak")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--tf32", action="store_true",
                    help="allow TensorFloat-32 on the GPU (default: off, plain FP32 as ctrain's default)")
    ap.add_argument("--json", default="")
    torch_timing.add_args(ap)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch_timing.set_tf32(a.tf32)
    torch_timing.set_autocast(a.autocast)
    prices = torch_timing.parse_money(a, a.device)
    if a.epochs > 0:
        train(a, prices)
    else:
        bench(a)


if __name__ == "__main__":
    main()
