#!/usr/bin/python3
"""export_torch_check.py - loads `ctrain export --format torch` output into the
equivalent torch.nn.Module and checks that it computes what ctrain computed.

    export_torch_check.py siamese-lstm STATE.h5 IO.h5
    export_torch_check.py small-cnn    STATE.h5 IO.h5
    export_torch_check.py cnn          STATE.h5 IO.h5
    export_torch_check.py siamese-cnn  STATE.h5 IO.h5

STATE.h5: one dataset per state_dict entry (names as in the modules below), and
          ctrain's description of the model as root attributes (the spec of a
          cnn or siamese-cnn as "arch", the LSTM's "pool").
IO.h5:    written by ctrain's test: /x (the input), /out (ctrain's output:
          embeddings [S, D] or logits [N, classes]).
Prints the normalised max error and exits 0 when it is below 1e-5, 1 when not,
2 when python3-torch or python3-h5py is missing (install them: apt-get install
python3-torch python3-h5py).
"""
import re
import sys

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as e:  # never pass without checking
    print(f"FAIL: {e}: install Debian's python3-torch and python3-h5py (apt-get install python3-torch python3-h5py)")
    sys.exit(2)


class SiameseTower(nn.Module):
    """One tower of ctrain's siamese-lstm: LSTM (batch first) -> last hidden state or mean over time -> Linear."""

    def __init__(self, n_mels, hidden, layers, embed, pool):
        super().__init__()
        self.lstm = nn.LSTM(n_mels, hidden, num_layers=layers, batch_first=True)
        self.dense = nn.Linear(hidden, embed)
        self.pool = pool

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.dense(out.mean(dim=1) if self.pool == "mean" else out[:, -1, :])


class SpecNet(nn.Module):
    """A ctrain sequential CNN (models/seq_cnn.h) from its spec: each layer with weights is the
    submodule of ctrain's name (conv2d_1, batchnorm_1, dense_1, ...); the others are functions;
    save and add are a residual block's skip connection.
    flatten and gaph (mean over H, keeping W) flatten channel-major, as ctrain and PyTorch do."""

    def __init__(self, spec, state):
        super().__init__()
        self.ops = []
        count = {"conv2d": 0, "dense": 0, "batchnorm": 0}
        flat = False
        for tok in spec.split(","):
            m = re.fullmatch(r"conv(\d+)k(\d+)(?:s(\d+))?(?:p(\d+))?", tok)
            if m:
                count["conv2d"] += 1
                name = f"conv2d_{count['conv2d']}"
                w = state[name + ".weight"]
                self.add_module(name, nn.Conv2d(w.shape[1], int(m[1]), int(m[2]), stride=int(m[3] or 1), padding=int(m[4] or 0)))
                self.ops.append(name)
            elif tok.startswith("dense"):
                count["dense"] += 1
                name = f"dense_{count['dense']}"
                w = state[name + ".weight"]
                self.add_module(name, nn.Linear(w.shape[1], w.shape[0]))
                self.ops.append(name)
            elif tok == "batchnorm":
                count["batchnorm"] += 1
                name = f"batchnorm_{count['batchnorm']}"
                n = state[name + ".weight"].shape[0]
                self.add_module(name, nn.BatchNorm1d(n, eps=1e-5) if flat else nn.BatchNorm2d(n, eps=1e-5))
                self.ops.append(name)
            elif tok.startswith("maxpool"):
                m = re.fullmatch(r"maxpool(\d+)(?:s(\d+))?", tok)
                k, st = int(m[1]), int(m[2] or m[1])
                self.ops.append(lambda x, k=k, st=st: F.max_pool2d(x, k, st))
            elif tok in ("flatten", "gap", "gaph"):
                flat = True
                self.ops.append({"flatten": lambda x: torch.flatten(x, 1), "gap": lambda x: x.mean(dim=(2, 3)),
                                 "gaph": lambda x: torch.flatten(x.mean(dim=2), 1)}[tok])
            elif tok in ("relu", "tanh", "sigmoid"):
                self.ops.append(getattr(torch, tok))
            elif tok.startswith("dropout"):
                pass   # evaluation: none
            elif tok in ("save", "add"):   # a residual block: forward keeps its input, adds it at its end
                self.ops.append(tok)
            else:
                raise ValueError(f"unknown layer {tok}")

    def forward(self, x):
        kept = []
        for op in self.ops:
            if op == "save":
                kept.append(x)
            elif op == "add":
                x = x + kept.pop()
            else:
                x = getattr(self, op)(x) if isinstance(op, str) else op(x)
        return x


class SmallCNN(nn.Module):
    """ctrain's small-cnn: conv 'same' -> batchnorm -> relu -> maxpool 2 -> flatten -> (dropout) -> dense."""

    def __init__(self, channels, filters, kernel, flat, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, filters, kernel, padding=kernel // 2)
        self.bn1 = nn.BatchNorm2d(filters, eps=1e-5, momentum=0.1)
        self.pool = nn.MaxPool2d(2)
        self.dense = nn.Linear(flat, classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        return self.dense(torch.flatten(x, 1))


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    model, state_path, io_path = sys.argv[1:]
    with h5py.File(state_path, "r") as f:
        state = {k: torch.from_numpy(np.array(f[k][()])) for k in f.keys()}
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    with h5py.File(io_path, "r") as f:
        x = np.array(f["x"], dtype=np.float32)
        ref = np.array(f["out"], dtype=np.float32)
    torch.set_num_threads(1)
    if model == "siamese-lstm":
        layers = sum(1 for k in state if k.startswith("lstm.weight_ih_l"))
        hidden = state["lstm.weight_hh_l0"].shape[1]
        net = SiameseTower(state["lstm.weight_ih_l0"].shape[1], hidden, layers, state["dense.weight"].shape[0],
                           attrs.get("pool", "last"))
    elif model == "small-cnn":
        w = state["conv1.weight"]
        net = SmallCNN(w.shape[1], w.shape[0], w.shape[2], state["dense.weight"].shape[1], state["dense.weight"].shape[0])
    elif model in ("cnn", "siamese-cnn"):
        net = SpecNet(attrs["arch"], state)
        if model == "siamese-cnn":
            x = np.ascontiguousarray(x[:, None, :, :])   # crops [S, T, I] are images [S, 1, T, I]
    else:
        print(f"FAIL: unknown model {model}")
        sys.exit(2)
    net.load_state_dict(state, strict=True)   # every name and shape must match the module's
    net.eval()
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
    if got.shape != ref.shape:
        print(f"FAIL: torch output shape {got.shape}, ctrain's {ref.shape}")
        sys.exit(1)
    err = float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1e-6))
    ok = err < 1e-5
    print(f"{'OK' if ok else 'FAIL'}: {model}: torch {tuple(got.shape)} vs ctrain, normalised max error {err:.2e} (tolerance 1e-5)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
