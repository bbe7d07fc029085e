"""gen_conv.py - PyTorch parity files for the CNN layers: conv2d, max pooling,
global average pooling, average pooling over H (time) and batch normalisation (tests/test_conv2d.c, test_pool.c,
test_batchnorm.c read them).

    /usr/bin/python3 tests/golden_gen/gen_conv.py tests/golden

Every file holds the seeded float32 inputs and weights, the forward output, a fixed
random upstream gradient `dout`, and every gradient autograd computes from
loss = sum(out * dout). The layer sizes are root attributes, so the C test rebuilds
the same dims from the file.
"""
import torch
import torch.nn.functional as F

from common import rand, save



def gen_conv2d(name, seed, N, C, H, W, OC, KH, KW, stride, pad, bias):
    g = torch.Generator().manual_seed(seed)
    x = rand(g, N, C, H, W).requires_grad_()
    w = rand(g, OC, C, KH, KW, lo=-0.5, hi=0.5).requires_grad_()
    b = rand(g, OC).requires_grad_() if bias else None
    out = F.conv2d(x, w, b, stride=stride, padding=pad)
    dout = rand(g, *out.shape)
    (out * dout).sum().backward()
    tensors = dict(x=x, w=w, out=out, dout=dout, dx=x.grad, dw=w.grad)
    if bias:
        tensors.update(b=b, db=b.grad)
    save(name, attrs=dict(N=N, C=C, H=H, W=W, OC=OC, KH=KH, KW=KW, stride=stride, pad=pad, bias=int(bias)),
         **tensors)


def gen_maxpool(name, seed, N, C, H, W, K, stride):
    g = torch.Generator().manual_seed(seed)
    x = rand(g, N, C, H, W).requires_grad_()
    out, idx = F.max_pool2d(x, K, stride=stride, return_indices=True)
    dout = rand(g, *out.shape)
    (out * dout).sum().backward()
    # torch's indices count within each [H, W] plane; ctrain's are flat indices into [N, C, H, W]
    plane = (torch.arange(N * C).reshape(N, C, 1, 1) * H * W)
    argmax = idx + plane
    save(name, attrs=dict(N=N, C=C, H=H, W=W, K=K, stride=stride),
         x=x, out=out, argmax=argmax, dout=dout, dx=x.grad)


def gen_gap(name, seed, N, C, H, W):
    g = torch.Generator().manual_seed(seed)
    x = rand(g, N, C, H, W).requires_grad_()
    out = F.adaptive_avg_pool2d(x, 1).reshape(N, C)
    assert torch.allclose(out, x.mean(dim=(2, 3)))
    dout = rand(g, N, C)
    (out * dout).sum().backward()
    save(name, attrs=dict(N=N, C=C, H=H, W=W), x=x, out=out, dout=dout, dx=x.grad)


def gen_gaph(name, seed, N, C, H, W):
    """Average pooling over H only (ctrain's `gaph`: the mean over time of a log-mel
    feature map [C, T, I]), read flat as [N, C*W]."""
    g = torch.Generator().manual_seed(seed)
    x = rand(g, N, C, H, W).requires_grad_()
    out = F.adaptive_avg_pool2d(x, (1, W)).reshape(N, C * W)
    assert torch.allclose(out, x.mean(dim=2).reshape(N, C * W))
    dout = rand(g, N, C * W)
    (out * dout).sum().backward()
    save(name, attrs=dict(N=N, C=C, H=H, W=W), x=x, out=out, dout=dout, dx=x.grad)


def gen_batchnorm(name, seed, N, C, HW, momentum, eps):
    """One train step (batch statistics, running stats updated), then eval on a second input
    with the updated running statistics. x is [N, C, HW] (HW = 1: BatchNorm1d after a dense
    layer, given to torch as [N, C]; else BatchNorm2d, given as [N, C, H, W] with H*W = HW)."""
    g = torch.Generator().manual_seed(seed)
    shape = (N, C) if HW == 1 else (N, C, 1, HW)
    x = (rand(g, *shape) * 2.0 + 0.5).requires_grad_()             # mean away from 0, var away from 1
    gamma = rand(g, C, lo=0.5, hi=1.5).requires_grad_()
    beta = rand(g, C, lo=-0.5, hi=0.5).requires_grad_()
    rm0 = rand(g, C, lo=-0.2, hi=0.2)
    rv0 = rand(g, C, lo=0.5, hi=1.5)
    rm, rv = rm0.clone(), rv0.clone()
    out = F.batch_norm(x, rm, rv, gamma, beta, training=True, momentum=momentum, eps=eps)
    dout = rand(g, *out.shape)
    (out * dout).sum().backward()
    x_eval = rand(g, *shape) * 2.0 + 0.5
    with torch.no_grad():
        out_eval = F.batch_norm(x_eval, rm, rv, gamma, beta, training=False, momentum=momentum, eps=eps)
    save(name, attrs=dict(N=N, C=C, HW=HW, momentum=momentum, eps=eps),
         x=x, gamma=gamma, beta=beta, running_mean0=rm0, running_var0=rv0,
         out=out, dout=dout, dx=x.grad, dgamma=gamma.grad, dbeta=beta.grad,
         running_mean1=rm, running_var1=rv, x_eval=x_eval, out_eval=out_eval)


if __name__ == "__main__":
    gen_conv2d("conv2d_3x3_s1_p1", 101, N=2, C=3, H=7, W=6, OC=4, KH=3, KW=3, stride=1, pad=1, bias=True)
    gen_conv2d("conv2d_2x3_s2_p2_nobias", 102, N=3, C=2, H=8, W=9, OC=5, KH=2, KW=3, stride=2, pad=2, bias=False)
    gen_conv2d("conv2d_1x1", 103, N=2, C=5, H=4, W=3, OC=3, KH=1, KW=1, stride=1, pad=0, bias=True)
    gen_conv2d("conv2d_5x5_s3_p0", 104, N=1, C=2, H=11, W=10, OC=2, KH=5, KW=5, stride=3, pad=0, bias=True)
    # one input channel, stride 1: the direct path of layers/conv2d_c1.c (a spectrogram's first layer)
    gen_conv2d("conv2d_c1_3x3_s1_p1", 105, N=2, C=1, H=12, W=40, OC=16, KH=3, KW=3, stride=1, pad=1, bias=True)
    gen_maxpool("pool_max_k2_s2", 201, N=2, C=3, H=6, W=7, K=2, stride=2)
    gen_maxpool("pool_max_k3_s2", 202, N=2, C=2, H=7, W=8, K=3, stride=2)
    gen_maxpool("pool_max_k2_s3", 203, N=1, C=3, H=8, W=7, K=2, stride=3)
    gen_gap("pool_gap", 301, N=3, C=4, H=5, W=3)
    gen_gaph("pool_gaph", 302, N=3, C=4, H=7, W=5)
    gen_batchnorm("batchnorm_2d", 401, N=4, C=3, HW=15, momentum=0.1, eps=1e-5)
    gen_batchnorm("batchnorm_1d", 402, N=6, C=5, HW=1, momentum=0.3, eps=1e-3)
