"""common.py - helpers shared by the golden-file generators (tests/golden_gen/gen_*.py).

Each generator builds the same computation as a ctrain layer in PyTorch (Debian's
python3-torch, run as /usr/bin/python3), in float32, and writes inputs, weights,
outputs and gradients to one small HDF5 file in tests/golden/. The C tests read
them back and compare every tensor with a stated tolerance.
"""
import os
import sys

import h5py
import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


def out_dir():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "golden")
    os.makedirs(d, exist_ok=True)
    return d


def save(name, attrs=None, **tensors):
    """Write tensors (torch or numpy) to <out_dir>/<name>.h5: floats as float32,
    integers as int32, scalars in `attrs` as root attributes."""
    path = os.path.join(out_dir(), name + ".h5")
    with h5py.File(path, "w") as f:
        f.attrs["generator"] = os.path.basename(sys.argv[0])
        f.attrs["torch_version"] = str(torch.__version__)
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
        for k, v in tensors.items():
            if isinstance(v, torch.Tensor):
                v = v.detach().cpu().numpy()
            v = np.asarray(v)
            if v.dtype.kind in "iub":
                f.create_dataset(k, data=v.astype(np.int32))
            else:
                f.create_dataset(k, data=v.astype(np.float32))
    print("wrote", path)


def rand(gen, *shape, lo=-1.0, hi=1.0):
    """Uniform float32 tensor from a seeded torch.Generator."""
    return (torch.rand(*shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo)
