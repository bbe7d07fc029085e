"""gen_cnn.py - PyTorch reference for models/seq_cnn.c: ONE full training step
(forward, softmax cross-entropy, backward, one Adam step) of small spec networks.

Run with Debian's torch:  /usr/bin/python3 tests/golden_gen/gen_cnn.py tests/golden

Files written (tests/golden/), one per network:
  cnn_step.h5      conv4k3s2p1,relu,batchnorm,conv6k3p1,relu,maxpool2,dropout0.3,flatten,
                   dense12,tanh,dropout0.5,dense5   on x [4, 2, 10, 9], 5 classes
  cnn_step_gap.h5  conv3k2,sigmoid,batchnorm,conv5k3s2p2,tanh,gap,dense4   on x [3, 3, 7, 8], 4 classes
  cnn_step_res.h5  residual blocks (save ... add): SPEC_RES below, on x [4, 2, 8, 8], 5 classes; two
                   blocks in a row, one nested in another, one on flat vectors with dropout inside

Datasets: x, labels, init/<param> (weights set from a seeded generator),
mask/L<i> (the inverted-dropout mask of layer i, 0-based, values 0 or 1/(1-p)),
logits, loss [1], grad/<param>, after/<param> (after one Adam step, lr = LR,
betas 0.9/0.999, eps 1e-8), buffers/<name> (batchnorm running statistics after
the step's forward; they start at mean 0, var 1). Parameter names and order are
ctrain's: conv2d_k/w, conv2d_k/b, batchnorm_k/gamma, batchnorm_k/beta, dense_k/w,
dense_k/b, numbered per layer type. Root attributes: spec, N, C, H, W, classes, lr.

parse, init_params and forward are shared with gen_siamese_cnn.py (the CNN
speaker encoder is the same layer stack without the softmax).
"""
import math
import re

import torch
import torch.nn.functional as F

from common import rand, save

LR = 0.01

# Residual blocks: a block of two convolutions (its add followed by a relu that runs after the
# next maxpool), two blocks opened at one point and nested, and a block on flat vectors whose
# relu right after the save cannot run in place, with dropout inside.
SPEC_RES = ("conv4k3p1,tanh,batchnorm,save,conv4k3p1,tanh,batchnorm,conv4k3p1,add,relu,maxpool2,"
            "save,save,conv4k3p1,tanh,add,conv4k3p1,sigmoid,add,flatten,dense12,save,relu,dense12,dropout0.3,add,dense5")


def parse(spec, C, H, W):
    """Layers as dicts with kind, options and parameter names (ctrain's numbering)."""
    layers, counts = [], {"conv2d": 0, "dense": 0, "batchnorm": 0}
    c, h, w, flat = C, H, W, False
    for t in spec.split(","):
        m = re.fullmatch(r"conv(\d+)k(\d+)(?:s(\d+))?(?:p(\d+))?", t)
        if m:
            f, k, s, p = int(m[1]), int(m[2]), int(m[3] or 1), int(m[4] or 0)
            counts["conv2d"] += 1
            layers.append(dict(kind="conv", name="conv2d_%d" % counts["conv2d"], cin=c, f=f, k=k, s=s, p=p))
            c, h, w = f, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            continue
        m = re.fullmatch(r"dense(\d+)", t)
        if m:
            counts["dense"] += 1
            layers.append(dict(kind="dense", name="dense_%d" % counts["dense"], cin=c, u=int(m[1])))
            c = int(m[1])
            continue
        m = re.fullmatch(r"maxpool(\d+)(?:s(\d+))?", t)
        if m:
            k = int(m[1]); s = int(m[2] or k)
            layers.append(dict(kind="maxpool", k=k, s=s))
            h, w = (h - k) // s + 1, (w - k) // s + 1
            continue
        m = re.fullmatch(r"dropout([0-9.]+)", t)
        if m:
            layers.append(dict(kind="dropout", p=float(m[1]), n=c * h * w))
            continue
        if t == "batchnorm":
            counts["batchnorm"] += 1
            layers.append(dict(kind="batchnorm", name="batchnorm_%d" % counts["batchnorm"], cin=c))
            continue
        if t == "flatten":
            c, h, w, flat = c * h * w, 1, 1, True
        elif t == "gap":
            h, w, flat = 1, 1, True
        elif t == "gaph":   # mean over H: C maps of W values, read flat
            c, h, w, flat = c * w, 1, 1, True
        layers.append(dict(kind=t))
    return layers


def init_params(gen, layers):
    """Seeded weights (registration order = ctrain's), batchnorm running mean 0, var 1."""
    params, buffers = {}, {}
    for L in layers:   # registration order = ctrain's
        if L["kind"] == "conv":
            fan = L["cin"] * L["k"] * L["k"]
            a = 1.5 / math.sqrt(fan)
            params[L["name"] + "/w"] = rand(gen, L["f"], L["cin"], L["k"], L["k"], lo=-a, hi=a)
            params[L["name"] + "/b"] = rand(gen, L["f"], lo=-0.2, hi=0.2)
        elif L["kind"] == "batchnorm":
            params[L["name"] + "/gamma"] = rand(gen, L["cin"], lo=0.5, hi=1.5)
            params[L["name"] + "/beta"] = rand(gen, L["cin"], lo=-0.3, hi=0.3)
            buffers[L["name"] + "/running_mean"] = torch.zeros(L["cin"])
            buffers[L["name"] + "/running_var"] = torch.ones(L["cin"])
        elif L["kind"] == "dense":
            a = 1.5 / math.sqrt(L["cin"])
            params[L["name"] + "/w"] = rand(gen, L["u"], L["cin"], lo=-a, hi=a)
            params[L["name"] + "/b"] = rand(gen, L["u"], lo=-0.2, hi=0.2)
    return params, buffers


def forward(layers, P, buffers, x, masks):
    """The layer stack in training mode (batch statistics; updates buffers in place)."""
    h, kept = x, []
    for i, L in enumerate(layers):
        k = L["kind"]
        if k == "conv":
            h = F.conv2d(h, P[L["name"] + "/w"], P[L["name"] + "/b"], stride=L["s"], padding=L["p"])
        elif k == "dense":
            h = F.linear(h, P[L["name"] + "/w"], P[L["name"] + "/b"])
        elif k == "batchnorm":
            h = F.batch_norm(h, buffers[L["name"] + "/running_mean"], buffers[L["name"] + "/running_var"],
                             P[L["name"] + "/gamma"], P[L["name"] + "/beta"], training=True, momentum=0.1, eps=1e-5)
        elif k == "maxpool":
            h = F.max_pool2d(h, L["k"], L["s"])
        elif k == "dropout":
            h = h * masks["mask/L%d" % i].reshape(h.shape)
        elif k == "flatten":
            h = torch.flatten(h, 1)
        elif k == "gap":
            h = h.mean(dim=(2, 3))
        elif k == "gaph":
            h = torch.flatten(h.mean(dim=2), 1)
        elif k == "relu":
            h = torch.relu(h)
        elif k == "tanh":
            h = torch.tanh(h)
        elif k == "sigmoid":
            h = torch.sigmoid(h)
        elif k == "save":   # a residual block opens: keep its input
            kept.append(h)
        elif k == "add":    # the innermost open block closes: add what its save kept
            h = h + kept.pop()
    return h


def step_tensors(tensors, init, grads, P, buffers):
    """Adds each parameter's initial value, gradient and value after the optimizer
    step, and the batchnorm running statistics, under init/ grad/ after/ buffers/."""
    for k in init:
        tensors["init/" + k] = init[k]
        tensors["grad/" + k] = grads[k]
        tensors["after/" + k] = P[k]
    for k, v in buffers.items():
        tensors["buffers/" + k] = v
    return tensors


def make(name, spec, N, C, H, W, classes, seed):
    gen = torch.Generator().manual_seed(seed)
    layers = parse(spec, C, H, W)
    params, buffers = init_params(gen, layers)
    x = rand(gen, N, C, H, W, lo=0.0, hi=1.0)
    labels = torch.randint(0, classes, (N,), generator=gen)
    masks = {}
    for i, L in enumerate(layers):
        if L["kind"] == "dropout":
            keep = (torch.rand(N, L["n"], generator=gen) >= L["p"]).float()
            masks["mask/L%d" % i] = keep / (1.0 - L["p"])

    init = {k: v.clone() for k, v in params.items()}
    P = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    logits = forward(layers, P, buffers, x, masks)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    grads = {k: v.grad.clone() for k, v in P.items()}
    opt = torch.optim.Adam(list(P.values()), lr=LR, betas=(0.9, 0.999), eps=1e-8)
    opt.step()
    tensors = dict(x=x, labels=labels, logits=logits, loss=loss.reshape(1))
    tensors.update(masks)
    step_tensors(tensors, init, grads, P, buffers)
    save(name, attrs=dict(spec=spec, N=N, C=C, H=H, W=W, classes=classes, lr=LR), **tensors)


if __name__ == "__main__":
    make("cnn_step", "conv4k3s2p1,relu,batchnorm,conv6k3p1,relu,maxpool2,dropout0.3,flatten,"
         "dense12,tanh,dropout0.5,dense5", 4, 2, 10, 9, 5, seed=11)
    make("cnn_step_gap", "conv3k2,sigmoid,batchnorm,conv5k3s2p2,tanh,gap,dense4", 3, 3, 7, 8, 4, seed=12)
    make("cnn_step_res", SPEC_RES, 4, 2, 8, 8, 5, seed=13)
