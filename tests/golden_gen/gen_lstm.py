"""gen_lstm.py - PyTorch reference for layers/lstm.c (tests/golden/lstm_*.h5).

Each file holds one stacked LSTM in PyTorch's layout (gate order i, f, g, o, two
biases, batch_first=True) with seeded random weights, an input x [B, T, I],
optional lengths len [B], the output `out`, a fixed upstream gradient `dout`,
and torch's dx and every parameter gradient (dw_ih_l0, dw_hh_l0, db_ih_l0, ...).
Root attributes B, T, I, H, L, ret (0 last, 1 sequence, 2 mean), recur
(0 sigmoid, 1 hard sigmoid), has_len.

Sigmoid cases run torch.nn.LSTM itself (with lengths through
pack_padded_sequence). The hard sigmoid (Keras 2: clip(0.2 z + 0.5, 0, 1)) is not
an nn.LSTM option, so those cases run a hand-written cell loop under autograd; the
same loop with the sigmoid is checked against nn.LSTM here first.

usage: /usr/bin/python3 tests/golden_gen/gen_lstm.py tests/golden
"""
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from common import rand, save

RET = {"last": 0, "seq": 1, "mean": 2}


def hard_sigmoid(z):
    return torch.clamp(0.2 * z + 0.5, 0.0, 1.0)


def reduce_out(seq, lengths, ret, T):
    """seq [B, T, H] with zeros past each length -> the requested output."""
    B = seq.shape[0]
    if ret == "seq":
        return seq
    if ret == "last":
        return seq[torch.arange(B), lengths - 1]          # = seq[:, -1] without lengths
    return seq.sum(1) / lengths.to(seq.dtype)[:, None]    # = seq.mean(1) without lengths


def manual_lstm(x, lengths, weights, recur):
    """The cell loop of lstm.h: state carried past each length, output 0 there."""
    B, T, _ = x.shape
    r = torch.sigmoid if recur == "sigmoid" else hard_sigmoid
    inp = x
    for (w_ih, w_hh, b_ih, b_hh) in weights:
        H = w_hh.shape[1]
        h = x.new_zeros(B, H)
        c = x.new_zeros(B, H)
        outs = []
        for t in range(T):
            z = inp[:, t] @ w_ih.t() + b_ih + h @ w_hh.t() + b_hh
            zi, zf, zg, zo = z.split(H, dim=1)
            i, f, g, o = r(zi), r(zf), torch.tanh(zg), r(zo)
            c_new = f * c + i * g
            h_new = o * torch.tanh(c_new)
            m = (t < lengths)[:, None]
            c = torch.where(m, c_new, c)
            h = torch.where(m, h_new, h)
            outs.append(torch.where(m, h_new, torch.zeros_like(h_new)))
        inp = torch.stack(outs, 1)
    return inp


def torch_lstm(x, lengths, weights, has_len):
    I = x.shape[2]
    H = weights[0][1].shape[1]
    L = len(weights)
    m = torch.nn.LSTM(I, H, num_layers=L, batch_first=True)
    with torch.no_grad():
        for l, (w_ih, w_hh, b_ih, b_hh) in enumerate(weights):
            getattr(m, f"weight_ih_l{l}").copy_(w_ih)
            getattr(m, f"weight_hh_l{l}").copy_(w_hh)
            getattr(m, f"bias_ih_l{l}").copy_(b_ih)
            getattr(m, f"bias_hh_l{l}").copy_(b_hh)
    params = [[getattr(m, f"{n}_l{l}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")] for l in range(L)]
    if has_len:
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        seq, _ = pad_packed_sequence(m(packed)[0], batch_first=True, total_length=x.shape[1])
    else:
        seq = m(x)[0]
    return seq, params


def case(name, seed, B, T, I, H, L, ret, recur, lengths=None, wscale=0.5):
    gen = torch.Generator().manual_seed(seed)
    x = rand(gen, B, T, I)
    weights = []
    for l in range(L):
        Il = I if l == 0 else H
        weights.append([rand(gen, 4 * H, Il, lo=-wscale, hi=wscale), rand(gen, 4 * H, H, lo=-wscale, hi=wscale),
                        rand(gen, 4 * H, lo=-wscale, hi=wscale), rand(gen, 4 * H, lo=-wscale, hi=wscale)])
    has_len = lengths is not None
    lens = torch.tensor(lengths if has_len else [T] * B, dtype=torch.int64)
    x.requires_grad_(True)

    if recur == "sigmoid":
        seq, params = torch_lstm(x, lens, weights, has_len)
        # the hand-written loop (used for the hard sigmoid) must agree with nn.LSTM
        with torch.no_grad():
            ref = manual_lstm(x, lens, weights, "sigmoid")
        err = (ref - seq).abs().max().item()
        assert err < 1e-5, f"{name}: manual loop differs from nn.LSTM by {err}"
    else:
        params = [[w.clone().requires_grad_(True) for w in layer] for layer in weights]
        seq = manual_lstm(x, lens, params, recur)
    out = reduce_out(seq, lens, ret, T)
    dout = rand(torch.Generator().manual_seed(seed + 1000), *out.shape)
    out.backward(dout)

    tensors = dict(x=x, out=out, dout=dout, dx=x.grad)
    if has_len:
        tensors["len"] = lens
    for l in range(L):
        for k, n in enumerate(("w_ih", "w_hh", "b_ih", "b_hh")):
            tensors[f"{n}_l{l}"] = weights[l][k]
            tensors[f"d{n}_l{l}"] = params[l][k].grad
    if recur == "hard_sigmoid":   # how much of the kinked range the case exercises
        with torch.no_grad():
            z = x[:, 0] @ weights[0][0].t() + weights[0][2] + weights[0][3]
            print(f"  {name}: {(z.abs() > 2.5).float().mean().item():.0%} of step-0 pre-activations saturated")
    save(name, attrs=dict(B=B, T=T, I=I, H=H, L=L, ret=RET[ret], recur=0 if recur == "sigmoid" else 1,
                          has_len=int(has_len)), **tensors)


if __name__ == "__main__":
    case("lstm_l1_last", 1, B=3, T=5, I=4, H=6, L=1, ret="last", recur="sigmoid")
    case("lstm_l1_seq_len", 2, B=3, T=5, I=4, H=6, L=1, ret="seq", recur="sigmoid", lengths=[5, 1, 3])
    case("lstm_l1_mean_len", 3, B=4, T=6, I=3, H=5, L=1, ret="mean", recur="sigmoid", lengths=[2, 6, 1, 4])
    case("lstm_l2_last_len", 4, B=3, T=6, I=5, H=4, L=2, ret="last", recur="sigmoid", lengths=[6, 1, 4])
    case("lstm_l2_seq", 5, B=2, T=4, I=3, H=5, L=2, ret="seq", recur="sigmoid")
    case("lstm_l2_mean_len", 6, B=3, T=7, I=4, H=3, L=2, ret="mean", recur="sigmoid", lengths=[7, 3, 1])
    case("lstm_l3_seq_len", 11, B=3, T=5, I=3, H=4, L=3, ret="seq", recur="sigmoid", lengths=[2, 5, 1])
    case("lstm_hard_l1_seq_len", 7, B=3, T=5, I=4, H=6, L=1, ret="seq", recur="hard_sigmoid", lengths=[5, 1, 3], wscale=2.5)
    case("lstm_hard_l2_last_len", 8, B=3, T=6, I=5, H=4, L=2, ret="last", recur="hard_sigmoid", lengths=[6, 1, 4], wscale=2.5)
    case("lstm_hard_l1_mean", 9, B=2, T=5, I=3, H=5, L=1, ret="mean", recur="hard_sigmoid", wscale=2.5)
    # a long sequence, the speaker model's input size: weights ~ 1/sqrt(H)
    case("lstm_long_t100", 10, B=4, T=100, I=40, H=16, L=1, ret="last", recur="sigmoid", lengths=[100, 37, 1, 73],
         wscale=0.25)
