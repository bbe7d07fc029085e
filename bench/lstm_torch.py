"""lstm_torch.py - the speaker model's LSTM step in PyTorch, for comparison with
build/bench/bench_lstm (same shape, same FLOP count, same reporting).

    /usr/bin/python3 bench/lstm_torch.py [--threads N] [--batch B] [--steps T]
                     [--input I] [--hidden H] [--layers L] [--repeats R]

One step = forward of nn.LSTM(batch_first=True) on x [B, T, I], output = the last
step's h, then backward of (out * dout).sum() (dx and every weight gradient).
FLOPs counted: forward 2*B*T*4H*(I+H) per layer (I -> H above the first),
backward twice that.
"""
import argparse
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--input", type=int, default=40)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    B, T, I, H, L = a.batch, a.steps, a.input, a.hidden, a.layers
    m = torch.nn.LSTM(I, H, num_layers=L, batch_first=True)
    x = torch.rand(B, T, I) * 2 - 1
    x.requires_grad_(True)
    dout = torch.rand(B, H) * 2 - 1

    flops_fwd = sum(2.0 * B * T * 4 * H * ((I if l == 0 else H) + H) for l in range(L))
    flops_bwd = 2 * flops_fwd
    tf, tb, ts = [], [], []
    for r in range(-2, a.repeats):
        t0 = time.perf_counter()
        out = m(x)[0][:, -1]
        t1 = time.perf_counter()
        out.backward(dout)
        t2 = time.perf_counter()
        if r >= 0:
            tf.append(t1 - t0)
            tb.append(t2 - t1)
            ts.append(t2 - t0)
    mf, mb, ms = statistics.median(tf), statistics.median(tb), statistics.median(ts)
    print(f"PyTorch {torch.__version__} nn.LSTM  B={B} T={T} I={I} H={H} L={L} ret=last, {a.threads} threads")
    print(f"  forward   {1e3 * mf:8.2f} ms  {flops_fwd / mf * 1e-9:6.1f} GFLOP/s")
    print(f"  backward  {1e3 * mb:8.2f} ms  {flops_bwd / mb * 1e-9:6.1f} GFLOP/s")
    print(f"  step      {1e3 * ms:8.2f} ms  {(flops_fwd + flops_bwd) / ms * 1e-9:6.1f} GFLOP/s   "
          f"(median of {a.repeats}; FLOPs = 3 x 2*B*T*4H*(I+H) = {(flops_fwd + flops_bwd) * 1e-9:.2f} GFLOP)")


if __name__ == "__main__":
    main()
