"""siamese_torch.py - the same siamese LSTM training step as bench/bench_siamese.c,
in PyTorch, for a side-by-side comparison with the same shapes and threads:
batch 128 pairs run as one batch of 256 sequences x 100 frames x 40 features ->
nn.LSTM(40, 128) -> last hidden state -> Linear(128, 64) -> Euclidean distance
(Keras's sqrt(max(sum, 1e-7))) -> contrastive loss (margin 1) -> RMSprop
(alpha 0.9, eps 1e-7, lr 1e-3). Prints median step times, pairs/s, GFLOP/s
(same FLOP count as ctrain's) and the implied seed-protocol epoch seconds.

    /usr/bin/python3 bench/siamese_torch.py [--threads N] [--steps S] [--batch B] [--peak GFLOPS]
"""
import argparse
import statistics
import time

import torch


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


def contrastive(d, y, margin=1.0):
    return torch.mean(y * d ** 2 + (1 - y) * torch.clamp(margin - d, min=0) ** 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--peak", type=float, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    B, T, I, H, D = args.batch, 100, 40, 128, 64
    model = Siamese(I, H, D)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, eps=1e-7)
    x = torch.rand(2 * B, T, I) * 2 - 1
    y = (torch.arange(B) % 2).float()
    train, val = [], []
    for s in range(args.steps + 2):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = contrastive(model(x), y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        with torch.no_grad():
            contrastive(model(x), y)
        t2 = time.perf_counter()
        if s >= 2:
            train.append(t1 - t0)
            val.append(t2 - t1)
    step, vstep = statistics.median(train), statistics.median(val)
    flops = 3.0 * (2.0 * 2 * B * T * 4 * H * (I + H) + 2.0 * 2 * B * H * D)
    gf = flops / step / 1e9
    frac = " = %.0f%% of %.0f" % (100 * gf / args.peak, args.peak) if args.peak > 0 else ""
    print("pytorch  siamese-lstm B=%d pairs, %d threads: train step %.1f ms (min %.1f), %.0f pairs/s, %.1f GFLOP/s%s"
          % (B, args.threads, 1e3 * step, 1e3 * min(train), B / step, gf, frac))
    print("pytorch  validation step %.1f ms; seed-protocol epoch (300k train + 120k val pairs): %.0f s (torch %s)"
          % (1e3 * vstep, 300000 / B * step + 120000 / B * vstep, torch.__version__))


if __name__ == "__main__":
    main()
