"""gen_optim.py - PyTorch reference for layers/optim.c: three steps of every
optimizer configuration, global-norm clipping, and the StepLR / CosineAnnealingLR
learning-rate sequences.

Run with Debian's torch:  /usr/bin/python3 tests/golden_gen/gen_optim.py tests/golden

Files written (tests/golden/):
  optim_inputs.h5   for each size N in (37, 1000): n{N}_p0 (initial parameters) and
                    n{N}_g1, n{N}_g2, n{N}_g3 (the gradient fed to step 1, 2, 3)
  optim_sgd.h5, optim_rmsprop.h5, optim_adam.h5, optim_adamw.h5
                    for each configuration CFG listed in the file's attributes and
                    each size N: {CFG}_n{N}_p1, _p2, _p3 = parameters after steps 1..3.
                    Configurations ending in "_clip" call clip_grad_norm_(max_norm =
                    CLIP) before each step.
  optim_clip.h5     clip_grad_norm_ on n1000_g1 alone: the returned norm, the clipped
                    gradient, and a max_norm large enough that nothing is clipped
  optim_sched.h5    StepLR and CosineAnnealingLR: lr at t = 0 (before any
                    scheduler.step()) and after each of the following steps

Every hyperparameter is rounded to float32 first, so torch (which keeps them as
Python doubles) and ctrain (float config fields) use exactly the same numbers.
The parameter vector is handed to torch as TWO tensors (a third and the rest), so
the clipping norm is global over parameters, as in ctrain's flat buffer.
"""
import math

import numpy as np
import torch

from common import rand, save


SIZES = (37, 1000)
CLIP = 1.0          # the gradients have norms ~3.5 (N=37) and ~18 (N=1000): always clips


def f32(x):
    return float(np.float32(x))


# name -> (torch optimizer class, kwargs). Names are what the C test looks up.
CONFIGS = {
    "sgd": {
        "sgd_plain":    (torch.optim.SGD, dict(lr=0.1)),
        "sgd_momentum": (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
        "sgd_nesterov": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
        "sgd_wd":       (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.05)),
    },
    "rmsprop": {
        "rmsprop":      (torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-7)),
        "rmsprop_wd":   (torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-7, weight_decay=0.05)),
    },
    "adam": {
        "adam":         (torch.optim.Adam, dict(lr=0.05, betas=(0.9, 0.999), eps=1e-8)),
        # a large eps so that its place in the formula (after the bias correction) is visible
        "adam_wd":      (torch.optim.Adam, dict(lr=0.05, betas=(0.8, 0.99), eps=1e-3, weight_decay=0.05)),
    },
    "adamw": {
        "adamw_wd0.01": (torch.optim.AdamW, dict(lr=0.05, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
        "adamw_wd0.1":  (torch.optim.AdamW, dict(lr=0.05, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
    },
}


def round_kwargs(kw):
    out = {}
    for k, v in kw.items():
        if isinstance(v, tuple):
            out[k] = tuple(f32(x) for x in v)
        elif isinstance(v, bool):
            out[k] = v
        else:
            out[k] = f32(v)
    return out


def run(cls, kw, p0, grads, clip):
    """Three steps; returns the parameters (concatenated) after each step."""
    k = len(p0) // 3
    params = [torch.nn.Parameter(p0[:k].clone()), torch.nn.Parameter(p0[k:].clone())]
    opt = cls(params, **round_kwargs(kw))
    out = []
    for g in grads:
        params[0].grad = g[:k].clone()
        params[1].grad = g[k:].clone()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, max_norm=CLIP)
        opt.step()
        out.append(torch.cat([p.detach() for p in params]).clone())
    return out


def main():
    gen = torch.Generator().manual_seed(20240611)
    inputs = {}
    for n in SIZES:
        inputs[n] = (rand(gen, n), [rand(gen, n) * s for s in (1.0, 0.5, 2.0)])
    save("optim_inputs",
         **{f"n{n}_p0": inputs[n][0] for n in SIZES},
         **{f"n{n}_g{i + 1}": inputs[n][1][i] for n in SIZES for i in range(3)})

    for fname, configs in CONFIGS.items():
        tensors = {}
        for name, (cls, kw) in configs.items():
            for clip in (False, True):
                cname = name + ("_clip" if clip else "")
                for n in SIZES:
                    p0, grads = inputs[n]
                    for i, p in enumerate(run(cls, kw, p0, grads, clip)):
                        tensors[f"{cname}_n{n}_p{i + 1}"] = p
        save("optim_" + fname, attrs={"clip": CLIP, "configs": ",".join(configs)}, **tensors)

    # clip_grad_norm_ alone: norm returned and clipped gradient; then no clipping
    g = inputs[1000][1][0]
    k = len(g) // 3
    gs = [torch.nn.Parameter(torch.zeros(k)), torch.nn.Parameter(torch.zeros(len(g) - k))]
    gs[0].grad, gs[1].grad = g[:k].clone(), g[k:].clone()
    norm = torch.nn.utils.clip_grad_norm_(gs, max_norm=CLIP)
    clipped = torch.cat([p.grad for p in gs])
    gs[0].grad, gs[1].grad = g[:k].clone(), g[k:].clone()
    big = f32(2 * float(norm))
    torch.nn.utils.clip_grad_norm_(gs, max_norm=big)
    unclipped = torch.cat([p.grad for p in gs])
    save("optim_clip", attrs={"max_norm": CLIP, "norm": float(norm), "big_max_norm": big},
         clipped=clipped, unclipped=unclipped)

    # schedules: lr at t = 0..EPOCHS
    EPOCHS = 25
    base, gamma, step_size, eta_min = f32(0.1), f32(0.3), 7, f32(1e-3)
    w = [torch.nn.Parameter(torch.zeros(1))]

    def lrs(make):
        opt = torch.optim.SGD(w, lr=base)
        sched = make(opt)
        out = [opt.param_groups[0]["lr"]]
        for _ in range(EPOCHS):
            opt.step()
            sched.step()
            out.append(opt.param_groups[0]["lr"])
        return np.array(out, dtype=np.float64)

    step_lr = lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=step_size, gamma=gamma))
    # T_max = EPOCHS: torch's CosineAnnealingLR climbs back up after T_max (it is
    # periodic), while ctrain holds eta_min there, so compare over 0..T_max only.
    cos_lr = lrs(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=EPOCHS, eta_min=eta_min))
    assert math.isclose(cos_lr[-1], eta_min, rel_tol=1e-9)
    save("optim_sched",
         attrs={"epochs": EPOCHS, "base_lr": base, "gamma": gamma, "step_size": step_size,
                "t_max": EPOCHS, "eta_min": eta_min},
         step_lr=step_lr, cosine_lr=cos_lr)


if __name__ == "__main__":
    main()
