"""siamese_torch.py - the same siamese training step as bench/bench_siamese.c and
`ctrain time siamese-lstm|siamese-cnn`, in PyTorch, for a side-by-side comparison
with the same shapes and threads: batch 128 pairs run as one batch of 256 crops
of 100 frames x 40 features through the shared tower, then Euclidean distance
(Keras's sqrt(max(sum, 1e-7))) -> contrastive loss (margin 1) -> RMSprop
(alpha 0.9, eps 1e-7, lr 1e-3). The towers (--model):
  siamese-lstm (default)  nn.LSTM(40, 128) -> last hidden state -> Linear(128, 64)
  siamese-cnn             ctrain's default spec (models/siamese_cnn.h) on the crop as a
                          1 x 100 x 40 image: three 3x3 convolutions with padding 1 (16, 32,
                          64 maps), each followed by BatchNorm2d (eps 1e-5, momentum 0.1) and
                          relu, 2x2 max pooling after the first two, the mean over time
                          (64 maps x 10 bands, channel-major) -> Linear(640, 64)
Prints median step times, pairs/s, GFLOP/s (same FLOP count as ctrain's) and the
implied seed-protocol epoch seconds.

    /usr/bin/python3 bench/siamese_torch.py [--model M] [--threads N] [--steps S] [--batch B] [--peak GFLOPS] [--autocast bf16]

With --epochs N it instead trains epoch by epoch like `ctrain time siamese-lstm`
(--pairs training and --val-pairs validation pairs per epoch, validation under
no_grad after each epoch) and reports the same per-epoch statistics; --json FILE
records them in ctrain time's schema (bench/torch_timing.py: ctrain-time/2, with
the energy, temperature and data-wait figures measured as ctrain measures them,
counters sampled --sample-hz times a second, and the money of --price,
--electricity and --hardware-cost). The inputs are a
pool of 16 random batches of the right shapes, cycled, so data preparation costs
PyTorch nothing (ctrain crops its batches from a corpus on a loader thread);
the time spent taking a batch from it is the data wait.
--device cuda runs it on the GPU (cuDNN's LSTM).

    /usr/bin/python3 bench/siamese_torch.py --epochs 4 --pairs 3072 --val-pairs 1024 [--json FILE] [--device cuda]
                                            [--sample-hz HZ] [--price cpu=PER_HOUR] [--electricity PER_KWH]
                                            [--hardware-cost cpu=PRICE]
"""
import argparse
import statistics
import time

import torch

import torch_timing


class Siamese(torch.nn.Module):
    def __init__(self, n_mels=40, hidden=128, embed=64):
        super().__init__()
        self.lstm = torch.nn.LSTM(n_mels, hidden, batch_first=True)
        self.dense = torch.nn.Linear(hidden, embed)

    def forward(self, x):                      # x [2B, T, I]: a-utterances then b-utterances
        _, (h, _) = self.lstm(x)
        emb = self.dense(h[-1])                # [2B, D]
        a, b = emb.chunk(2)
        return torch.sqrt(torch.clamp(((a - b) ** 2).sum(1), min=1e-7))


class SiameseCNN(torch.nn.Module):
    """ctrain's siamese-cnn default spec: conv16k3p1,batchnorm,relu,maxpool2,conv32k3p1,
    batchnorm,relu,maxpool2,conv64k3p1,batchnorm,relu,gaph,dense64."""
    def __init__(self, n_mels=40, embed=64):
        super().__init__()
        nn = torch.nn
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
        self.dense = nn.Linear(64 * (n_mels // 4), embed)

    def forward(self, x):                      # x [2B, T, I]: a-crops then b-crops, each a 1 x T x I image
        f = self.body(x.unsqueeze(1))          # [2B, 64, T/4, I/4]
        emb = self.dense(f.mean(2).flatten(1)) # gaph: the mean over time, channel-major -> [2B, D]
        a, b = emb.chunk(2)
        return torch.sqrt(torch.clamp(((a - b) ** 2).sum(1), min=1e-7))


def contrastive(d, y, margin=1.0):
    return torch.mean(y * d ** 2 + (1 - y) * torch.clamp(margin - d, min=0) ** 2)


def step_flops(B, T=100, I=40, H=128, D=64, model="siamese-lstm"):
    """ctrain's count: siamese-lstm (models/siamese_lstm.h) forward gemms, backward twice
    that; siamese-cnn (models/seq_cnn.h) conv 2*F*OH*OW*C*K*K and dense 2*in*out forward per
    image, the same again for the weight gradient and for the input gradient (none for the
    first layer)."""
    if model == "siamese-cnn":
        convs = [2.0 * 16 * T * I * 1 * 9, 2.0 * 32 * (T // 2) * (I // 2) * 16 * 9, 2.0 * 64 * (T // 4) * (I // 4) * 32 * 9]
        dense = 2.0 * 64 * (I // 4) * D
        return 2 * B * (2 * convs[0] + 3 * (convs[1] + convs[2] + dense))
    return 3.0 * (2.0 * 2 * B * T * 4 * H * (I + H) + 2.0 * 2 * B * H * D)


FLOPS_COUNTED_CNN = ("matrix products only, as ctrain counts them (models/seq_cnn.h): conv 2*N*F*OH*OW*C*K*K and dense "
                     "2*N*in*out forward, the same again for the weight gradient and for the input gradient (none for the first layer)")

DESC = {"siamese-lstm": "nn.LSTM(40, 128) -> last hidden state -> Linear(128, 64) -> euclidean -> contrastive, RMSprop lr 0.001",
        "siamese-cnn": "siamese-cnn 100x40 -> conv16k3p1,batchnorm,relu,maxpool2,conv32k3p1,batchnorm,relu,maxpool2,"
                       "conv64k3p1,batchnorm,relu,gaph,dense64 -> euclidean -> contrastive (margin 1), RMSprop lr 0.001"}


def make_model(name, I=40, H=128, D=64):
    return SiameseCNN(I, D) if name == "siamese-cnn" else Siamese(I, H, D)


FLOPS_COUNTED = ("matrix products only, as ctrain counts them (models/siamese_lstm.h): LSTM forward 2*S*T*4H*(I+H) "
                 "and dense 2*S*H*D with S = 2 sequences per pair, backward twice the forward")


def epochs(args, prices):
    """Epoch-by-epoch training, timed like `ctrain time siamese-lstm`."""
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    B, T, I, H, D = args.batch, 100, 40, 128, 64
    model = make_model(args.model, I, H, D).to(dev)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, eps=1e-7)
    pool = [(torch.rand(2 * B, T, I, device=dev) * 2 - 1, (torch.arange(B, device=dev) % 2).float()) for _ in range(16)]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def run(n_pairs, train):
        loss_sum, right, k, wait = 0.0, 0, 0, 0.0
        for first in range(0, n_pairs, B):
            t = time.perf_counter()            # fetching the batch: the data wait, as ctrain times its load()
            b = min(B, n_pairs - first)
            x, y = pool[k % len(pool)]
            x = torch.cat([x[:b], x[B:B + b]]) if b < B else x
            y = y[:b]
            k += 1
            wait += time.perf_counter() - t
            if train:
                opt.zero_grad()
                with torch_timing.autocast(dev.type):
                    d = model(x)
                    loss = contrastive(d, y)
                loss.backward()
                opt.step()
            else:
                model.eval()                   # batchnorm on its running statistics, as ctrain validates
                with torch.no_grad(), torch_timing.autocast(dev.type):
                    d = model(x)
                    loss = contrastive(d, y)
                model.train()
            loss_sum += loss.item() * b
            right += ((d < 0.5).float() == y).sum().item()
        return loss_sum / max(n_pairs, 1), right / max(n_pairs, 1), wait

    model.train()
    print(f"PyTorch {torch.__version__} {args.model} on {args.device}, {args.threads} threads: "
          f"{args.pairs} training + {args.val_pairs} validation pairs, batch {B}")
    hw = torch_timing.Hardware(args.device, args.sample_hz) if args.json else None
    hist = []
    for e in range(args.epochs):
        sync()
        t0 = time.perf_counter()
        loss, acc, wait = run(args.pairs, True)
        sync()
        t1 = time.perf_counter()
        vloss, vacc, _ = run(args.val_pairs, False)
        sync()
        t2 = time.perf_counter()
        if hw:
            hw.epoch_end()
        hist.append(torch_timing.epoch_record(t2 - t0, t1 - t0, t2 - t1, loss, acc, vloss, vacc, wait))
        torch_timing.print_epoch(e, args.epochs, hist[-1])
    flops1 = step_flops(1, model=args.model)
    torch_timing.report(args.model, args.device, hist, args.pairs, flops1, "pairs", args.peak, args.fma_peak)
    if args.json:
        torch_timing.write_json(args.json, model=args.model, protocol=args.protocol, data="random inputs (16 batches, cycled)",
                                model_desc=DESC[args.model],
                                device=args.device, threads=args.threads, batch=B, seed=args.seed, n_train=args.pairs,
                                n_val=args.val_pairs, epochs=hist, flops_per_sample=flops1,
                                flops_counted=FLOPS_COUNTED_CNN if args.model == "siamese-cnn" else FLOPS_COUNTED, peak=args.peak, fma_peak=args.fma_peak,
                                ctrain_blas=args.ctrain_blas, hardware=hw, prices=prices)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="siamese-lstm", choices=["siamese-lstm", "siamese-cnn"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--peak", type=float, default=0)
    ap.add_argument("--epochs", type=int, default=0, help="train epoch by epoch like `ctrain time` instead of timing steps")
    ap.add_argument("--pairs", type=int, default=3072)
    ap.add_argument("--val-pairs", type=int, default=1024)
    ap.add_argument("--protocol", default="bench", help="recorded in the JSON")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--tf32", action="store_true",
                    help="allow TensorFloat-32 on the GPU (default: off, plain FP32 as ctrain's default)")
    ap.add_argument("--json", default="")
    torch_timing.add_args(ap)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch_timing.set_tf32(args.tf32)
    torch_timing.set_autocast(args.autocast)
    prices = torch_timing.parse_money(args, args.device)
    if args.epochs > 0:
        return epochs(args, prices)
    torch.manual_seed(1)
    B, T, I, H, D = args.batch, 100, 40, 128, 64
    model = make_model(args.model, I, H, D)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, eps=1e-7)
    x = torch.rand(2 * B, T, I) * 2 - 1
    y = (torch.arange(B) % 2).float()
    train, val = [], []
    for s in range(args.steps + 2):
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch_timing.autocast("cpu"):
            loss = contrastive(model(x), y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        model.eval()
        with torch.no_grad(), torch_timing.autocast("cpu"):
            contrastive(model(x), y)
        model.train()
        t2 = time.perf_counter()
        if s >= 2:
            train.append(t1 - t0)
            val.append(t2 - t1)
    step, vstep = statistics.median(train), statistics.median(val)
    flops = step_flops(B, T, I, H, D, args.model)
    gf = flops / step / 1e9
    frac = " = %.0f%% of %.0f" % (100 * gf / args.peak, args.peak) if args.peak > 0 else ""
    print("pytorch  %s B=%d pairs, %d threads, %s: train step %.1f ms (min %.1f), %.0f pairs/s, %.1f GFLOP/s%s"
          % (args.model, B, args.threads, torch_timing.precision(), 1e3 * step, 1e3 * min(train), B / step, gf, frac))
    print("pytorch  validation step %.1f ms; seed-protocol epoch (300k train + 120k val pairs): %.0f s (torch %s)"
          % (1e3 * vstep, 300000 / B * step + 120000 / B * vstep, torch.__version__))


if __name__ == "__main__":
    main()
