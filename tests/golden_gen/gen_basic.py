"""gen_basic.py - PyTorch references for the basic layers and losses: dense,
activations, dropout (with a given mask), flatten, the pair heads (Euclidean
distance, |a - b|, and the head |a - b| -> dense(D, 1) -> BCE with logits) and
the losses with their accuracy metrics.

Everything is float32; gradients come from autograd, driven by a seeded random
upstream gradient `dout` (for layers) or by the scalar mean loss (for losses).
The C tests (tests/test_{dense,activation,dropout,flatten,pair,loss}.c) read
these files and compare every tensor.

    /usr/bin/python3 tests/golden_gen/gen_basic.py tests/golden
"""
import torch
import torch.nn.functional as F

from common import rand, save


KERAS_EPSILON = 1e-7


def leaf(t):
    return t.clone().requires_grad_(True)


def gen_dense(g):
    B, I, O = 5, 7, 3
    x, w, b = leaf(rand(g, B, I)), leaf(rand(g, O, I)), leaf(rand(g, O))
    dout = rand(g, B, O)
    out = F.linear(x, w, b)                      # x W^T + b, PyTorch's Linear
    out.backward(dout)
    save("dense", attrs=dict(B=B, in_dim=I, out_dim=O),
         x=x, w=w, b=b, dout=dout, out=out, dx=x.grad, dw=w.grad, db=b.grad)


def gen_activation(g):
    n = 40
    x = rand(g, n, lo=-4.0, hi=4.0)
    x[:8] = torch.tensor([0.0, 30.0, -30.0, 100.0, -100.0, 1e-3, -1e-3, 17.0])  # kink, saturation, tiny
    dout = rand(g, n)
    tensors = dict(x=x, dout=dout)
    for name, fn in (("relu", torch.relu), ("tanh", torch.tanh), ("sigmoid", torch.sigmoid)):
        xi = leaf(x)
        y = fn(xi)
        y.backward(dout)
        tensors[name + "_out"] = y
        tensors[name + "_dx"] = xi.grad
    save("activation", attrs=dict(n=n), **tensors)


def gen_dropout(g):
    n, p = 96, 0.3
    x = leaf(rand(g, n))
    keep = (torch.rand(n, generator=g) >= p).to(torch.float32)   # 1 = kept
    dout = rand(g, n)
    out = x * keep / (1.0 - p)                   # inverted dropout with this mask
    out.backward(dout)
    save("dropout", attrs=dict(n=n, p=p), x=x, keep=keep, dout=dout, out=out, dx=x.grad)


def gen_flatten(g):
    N, C, H, W = 2, 3, 4, 5
    x = leaf(rand(g, N, C, H, W))
    out = torch.flatten(x, 1)
    dout = rand(g, N, C * H * W)
    out.backward(dout)
    save("flatten", attrs=dict(N=N, C=C, H=H, W=W), x=x, out=out, dout=dout, dx=x.grad)


def gen_pair(g):
    # Euclidean distance, Keras's siamese example: sqrt(max(sum (a-b)^2, eps)).
    # emb [2B, D]: pair k is rows k and B + k. Row 2 is a == b (the eps branch).
    B, D = 6, 5
    emb = rand(g, 2 * B, D)
    emb[B + 2] = emb[2]
    emb = leaf(emb)
    a, b = emb[:B], emb[B:]
    s = ((a - b) ** 2).sum(dim=1)
    d = torch.sqrt(torch.maximum(s, torch.tensor(KERAS_EPSILON)))
    dd = rand(g, B)
    d.backward(dd)
    # |a - b| on n elements, a few exact ties (sign(0) = 0)
    n = 23
    pa, pb = rand(g, n), rand(g, n)
    pb[[0, 5, 11]] = pa[[0, 5, 11]]
    pa, pb = leaf(pa), leaf(pb)
    ad = (pa - pb).abs()
    ad_dout = rand(g, n)
    ad.backward(ad_dout)
    save("pair", attrs=dict(B=B, D=D, n=n, eps=KERAS_EPSILON),
         emb=emb, dd=dd, d=d, demb=emb.grad,
         abs_a=pa, abs_b=pb, abs_dout=ad_dout, abs_out=ad, abs_da=pa.grad, abs_db=pb.grad)


def gen_pair_head(g):
    # the learned siamese head: z = dense(|a - b|) with out_dim 1, L = BCE with logits
    B, D = 7, 6
    emb, w, b = leaf(rand(g, 2 * B, D)), leaf(rand(g, 1, D)), leaf(rand(g, 1))
    y = (torch.rand(B, generator=g) < 0.5).to(torch.float32)
    h = (emb[:B] - emb[B:]).abs()
    z = F.linear(h, w, b).squeeze(1)
    loss = F.binary_cross_entropy_with_logits(z, y)
    loss.backward()
    acc = ((z > 0).float() == y).float().mean()
    save("pair_head", attrs=dict(B=B, D=D, loss=loss.item(), acc=acc.item()),
         emb=emb, w=w, b=b, y=y, h=h, z=z, demb=emb.grad, dw=w.grad, db=b.grad)


def gen_loss(g):
    tensors, attrs = {}, {}
    # contrastive, y = 1 same: mean y d^2 + (1 - y) max(m - d, 0)^2
    B = 9
    d0 = rand(g, B, lo=0.0, hi=2.5)
    y = (torch.rand(B, generator=g) < 0.5).to(torch.float32)
    tensors.update(c_d=d0, c_y=y)
    for m in (1.0, 2.0):
        d = leaf(d0)
        loss = (y * d ** 2 + (1 - y) * torch.clamp(m - d, min=0) ** 2).mean()
        loss.backward()
        tag = "m%d" % int(m)
        tensors["c_dd_" + tag] = d.grad
        attrs["c_loss_" + tag] = loss.item()
    attrs["c_acc"] = ((d0 < 0.5).float() == y).float().mean().item()
    # BCE with logits, with saturated logits
    B = 11
    z = rand(g, B, lo=-4.0, hi=4.0)
    z[:3] = torch.tensor([50.0, -50.0, 0.0])
    yb = (torch.rand(B, generator=g) < 0.5).to(torch.float32)
    zl = leaf(z)
    loss = F.binary_cross_entropy_with_logits(zl, yb)
    loss.backward()
    tensors.update(b_z=z, b_y=yb, b_dz=zl.grad)
    attrs["b_loss"] = loss.item()
    attrs["b_acc"] = ((z > 0).float() == yb).float().mean().item()
    # softmax cross-entropy, one row with a large logit (max subtraction)
    B, C = 6, 5
    logits = rand(g, B, C, lo=-3.0, hi=3.0)
    logits[1, 3] = 80.0
    labels = torch.randint(0, C, (B,), generator=g)
    ll = leaf(logits)
    loss = F.cross_entropy(ll, labels)
    loss.backward()
    tensors.update(s_logits=logits, s_labels=labels, s_prob=torch.softmax(logits, dim=1), s_dlogits=ll.grad)
    attrs["s_loss"] = loss.item()
    attrs["s_acc"] = (logits.argmax(dim=1) == labels).float().mean().item()
    save("loss", attrs=attrs, **tensors)


def main():
    g = torch.Generator().manual_seed(20240611)
    gen_dense(g)
    gen_activation(g)
    gen_dropout(g)
    gen_flatten(g)
    gen_pair(g)
    gen_pair_head(g)
    gen_loss(g)


if __name__ == "__main__":
    main()
