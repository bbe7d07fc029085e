"""gen_siamese_cnn.py - PyTorch reference for models/siamese_cnn.c: ONE full
training step of the siamese CNN speaker model (both towers as one batch of 2B
log-mel crops through the shared CNN, Euclidean distance, contrastive loss,
backward, one RMSprop step).

Run with Debian's torch:  /usr/bin/python3 tests/golden_gen/gen_siamese_cnn.py tests/golden

File written: tests/golden/siamese_cnn_step.h5 for the tower
  conv3k3p1,batchnorm,relu,maxpool2,conv4k3p1,batchnorm,relu,gaph,dense5
on crops of T = 8 frames x I = 6 mels, B = 4 pairs (labels 1, 0, 1, 0).

Datasets: x [2B, T, I] (a-crops then b-crops; the last 3 frames of row 5 are
zero, a short utterance's padding), y [B], init/<param>, emb [2B, D],
dist [B], loss [1], grad/<param>, buffers/<name> (batchnorm running statistics
after the step's forward, from mean 0, var 1: statistics over all 2B crops),
after/<param> (after torch.optim.RMSprop(lr, alpha=0.9, eps=1e-7), which is
ctrain's rmsprop). Root attributes: spec, B, T, I, margin, lr.

The margin is 1.5 x the largest distance of the initial weights, so every
different-speaker pair is inside it and the hinge's gradient is exercised.
"""
import torch

from common import rand, save
from gen_cnn import forward, init_params, parse, step_tensors

EPS = 1e-7   # CT_KERAS_EPSILON: d = sqrt(max(sum (a - b)^2, eps))
LR = 0.01


def distance(emb, B):
    s = ((emb[:B] - emb[B:]) ** 2).sum(dim=1)
    return torch.sqrt(torch.clamp(s, min=EPS))


def make(name, spec, B, T, I, seed):
    gen = torch.Generator().manual_seed(seed)
    layers = parse(spec, 1, T, I)
    params, buffers = init_params(gen, layers)
    x = rand(gen, 2 * B, T, I, lo=-2.0, hi=2.0)
    x[5, T - 3:, :] = 0.0
    y = torch.tensor([1.0, 0.0] * (B // 2))

    # the margin from a probe forward (on copies of the running statistics)
    with torch.no_grad():
        probe = {k: v.clone() for k, v in buffers.items()}
        d0 = distance(forward(layers, params, probe, x.reshape(2 * B, 1, T, I), {}), B)
    margin = float(torch.tensor(1.5 * d0.max().item(), dtype=torch.float32))

    init = {k: v.clone() for k, v in params.items()}
    P = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    emb = forward(layers, P, buffers, x.reshape(2 * B, 1, T, I), {})     # [2B, D]: the crop [T, I] is the image [1, T, I]
    d = distance(emb, B)
    loss = (y * d ** 2 + (1 - y) * torch.clamp(margin - d, min=0.0) ** 2).mean()
    loss.backward()
    grads = {k: v.grad.clone() for k, v in P.items()}
    opt = torch.optim.RMSprop(list(P.values()), lr=LR, alpha=0.9, eps=1e-7)
    opt.step()
    tensors = step_tensors(dict(x=x, y=y, emb=emb, dist=d, loss=loss.reshape(1)),
                           init, grads, P, buffers)
    save(name, attrs=dict(spec=spec, B=B, T=T, I=I, margin=margin, lr=LR), **tensors)


if __name__ == "__main__":
    make("siamese_cnn_step", "conv3k3p1,batchnorm,relu,maxpool2,conv4k3p1,batchnorm,relu,gaph,dense5", B=4, T=8, I=6, seed=31)
