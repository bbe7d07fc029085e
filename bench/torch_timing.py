"""torch_timing.py - per-epoch timing of the PyTorch twins (siamese_torch.py,
cnn_torch.py) recorded the way `ctrain time` records its runs: the same
statistics (median, min and max seconds over the epochs after a warm-up epoch,
training samples/s and GFLOP/s of the training part with ctrain's FLOP count)
and the same JSON schema (ctrain-time/1), so that

    ctrain time --compare bench/results/HOST-cnn-cpu.json bench/results/HOST-cnn-torch-2.15-cpu.json

prints ctrain and PyTorch side by side. The JSON also names the PyTorch build
(version, BLAS, MKL, oneDNN, CPU capability: "pytorch") and ctrain's BLAS core
of the same run ("ctrain_blas_core"). `python torch_timing.py` prints the line
that names this PyTorch.
"""
import datetime
import json
import os
import platform
import socket
import statistics
import sys

import torch

SCHEMA = "ctrain-time/1"

_tf32 = False
_autocast = "none"


def _has(obj, name):
    """hasattr for torch.backends, whose older versions raise AssertionError for unknown names."""
    try:
        getattr(obj, name)
        return True
    except (AttributeError, AssertionError):
        return False


def set_tf32(enabled):
    """TensorFloat-32 for float32 matrix products, convolutions and the LSTM on a GPU:
    allowed with --tf32, otherwise explicitly off, as ctrain's default (PyTorch itself
    allows it in cuDNN by default). PyTorch 2.9 and later take fp32_precision ("tf32" or
    "ieee"); older ones allow_tf32; the two APIs must not be mixed."""
    global _tf32
    _tf32 = bool(enabled)
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if _has(matmul, "fp32_precision") and _has(cudnn, "conv") and _has(cudnn, "rnn"):
        mode = "tf32" if _tf32 else "ieee"
        matmul.fp32_precision = mode
        cudnn.conv.fp32_precision = mode
        cudnn.rnn.fp32_precision = mode
    else:
        matmul.allow_tf32 = _tf32
        cudnn.allow_tf32 = _tf32


def precision():
    """The math mode set_tf32 and set_autocast chose, as ctrain's header words it."""
    if _autocast == "bf16":
        return "bf16 autocast"
    return "TF32 allowed" if _tf32 else "FP32 (no TF32)"


def set_autocast(mode):
    """--autocast bf16: PyTorch's mixed precision, torch.autocast(dtype=torch.bfloat16) around
    the forward pass and the loss (its documented use; backward runs in the types the
    forward chose). The peer of ctrain's --precision bf16. "none": plain FP32."""
    global _autocast
    _autocast = mode


def autocast(device):
    """The context the forward pass and the loss run in."""
    import contextlib
    if _autocast == "bf16":
        return torch.autocast(device_type=device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def loaded_openblas():
    """OpenBLAS's own description ("OpenBLAS 0.3.21 ... Haswell ...") when this process has loaded it
    (Debian's PyTorch reaches it through libblas.so.3), else ""."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "libopenblas" in line and "/" in line})
        if not paths:
            return ""
        import ctypes
        lib = ctypes.CDLL(paths[0])
        lib.openblas_get_config.restype = ctypes.c_char_p
        return lib.openblas_get_config().decode()
    except (OSError, AttributeError):
        return ""


def build_info():
    """What torch.__config__.show() says about the CPU libraries: BLAS, MKL, oneDNN, CPU capability."""
    show = torch.__config__.show()
    info = {"version": torch.__version__, "python": sys.executable, "blas_info": "unknown", "mkl": "", "onednn": "",
            "cpu_capability": "", "mkldnn_available": bool(torch.backends.mkldnn.is_available()),
            "mkl_available": bool(torch.backends.mkl.is_available())}
    for part in show.replace(",", "\n").splitlines():
        part = part.strip()
        if "BLAS_INFO=" in part and "LAPACK_INFO=" not in part:
            info["blas_info"] = part.split("BLAS_INFO=", 1)[1].strip()
        elif "Math Kernel Library Version" in part:
            info["mkl"] = part.split("Version", 1)[1].split("-")[0].strip()
        elif "MKL-DNN v" in part or "oneDNN v" in part:
            info["onednn"] = "v" + part.split(" v", 1)[1].split(" ")[0]
        elif part.startswith("- CPU capability usage:"):
            info["cpu_capability"] = part.split(":", 1)[1].strip()
    info["openblas"] = loaded_openblas()
    return info


def blas_short(info=None):
    """One line: "BLAS mkl (MKL 2024.2), oneDNN v3.13.3, CPU capability AVX512"."""
    i = info or build_info()
    s = f"BLAS {i['blas_info']}" + (f" (MKL {i['mkl']})" if i["mkl"] else "") + (f" ({i['openblas']})" if i["openblas"] else "")
    s += f", oneDNN {i['onednn']}" if i["onednn"] and i["mkldnn_available"] else ", no oneDNN"
    return s + (f", CPU capability {i['cpu_capability']}" if i["cpu_capability"] else "")


def describe():
    """The line that names this PyTorch in the output of `make bench`."""
    i = build_info()
    return f"PyTorch {i['version']} ({i['python']}): {blas_short(i)}"


def add_args(ap):
    """Options every twin takes from bench/run.sh, for the record."""
    ap.add_argument("--fma-peak", type=float, default=0, help="ctrain's FP32 FMA peak GFLOP/s of the same run")
    ap.add_argument("--ctrain-blas", default="", help="ctrain's BLAS core of the same run, for the record")
    ap.add_argument("--autocast", default="none", choices=["none", "bf16"],
                    help="bf16: torch.autocast(bfloat16) around forward and loss (the peer of ctrain --precision bf16)")


def blas_info():
    """The BLAS PyTorch was built with, as torch.__config__.show() reports it."""
    return "PyTorch " + blas_short()


def epoch_record(seconds, train_seconds, val_seconds, loss, accuracy, val_loss, val_accuracy):
    return dict(seconds=seconds, train_seconds=train_seconds, val_seconds=val_seconds, loss=loss,
                accuracy=accuracy, val_loss=val_loss, val_accuracy=val_accuracy)


def print_epoch(e, n, r):
    print(f"Epoch {e + 1}/{n}\n - {r['seconds']:.1f}s - loss: {r['loss']:.4f} - accuracy: {r['accuracy']:.4f}"
          f" - val_loss: {r['val_loss']:.4f} - val_accuracy: {r['val_accuracy']:.4f}", flush=True)


def summary(epochs, n_train, flops_per_sample):
    """ctrain time's statistics: epoch 1 is the warm-up unless there is only one."""
    warmup = 1 if len(epochs) > 1 else 0
    timed = epochs[warmup:]
    secs = [r["seconds"] for r in timed]
    train = sum(r["train_seconds"] for r in timed)
    sps = n_train * len(timed) / train
    return dict(warmup=warmup, median=statistics.median(secs), min=min(secs), max=max(secs),
                samples_per_s=sps, gflops=sps * flops_per_sample / 1e9)


def report(name, device, epochs, n_train, flops_per_sample, sample_name, peak, fma_peak=0):
    s = summary(epochs, n_train, flops_per_sample)
    first = s["warmup"] + 1
    frac = f", {100 * s['gflops'] / fma_peak:.0f}% of the FMA peak {fma_peak:.1f}" if fma_peak > 0 else ""
    frac += f", {100 * s['gflops'] / peak:.0f}% of the sgemm peak {peak:.1f}" if peak > 0 else ""
    where = f"{device} ({precision()})" if device == "cuda" or _autocast != "none" else device
    print(f"pytorch {name} on {where}: epochs {first}-{len(epochs)}: {s['median']:.2f} s/epoch median "
          f"(min {s['min']:.2f}, max {s['max']:.2f}), {s['samples_per_s']:.1f} training {sample_name}/s, "
          f"{s['gflops']:.1f} GFLOP/s{frac}", flush=True)
    return s


def write_json(path, *, model, model_desc, protocol, data, device, threads, batch, seed, n_train, n_val,
               epochs, flops_per_sample, flops_counted, peak, fma_peak=0, ctrain_blas=""):
    s = summary(epochs, n_train, flops_per_sample)
    none_if_zero = lambda x: x if x and x > 0 else None
    info = build_info()
    d = {
        "schema": SCHEMA,
        "framework": f"pytorch {torch.__version__}",
        "ctrain_version": "none (PyTorch twin, bench/" + os.path.basename(sys.argv[0]) + ")",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([sys.executable or "python3"] + sys.argv),
        "host": {"hostname": socket.gethostname(), "os": f"{platform.system()} {platform.release()} {platform.machine()}",
                 "cpu": cpu_model(), "logical_cores": os.cpu_count(),
                 "blas": "PyTorch " + blas_short(info), "blas_core": blas_short(info),
                 "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "not used"},
        "pytorch": info,
        "ctrain_blas_core": ctrain_blas,
        "model": model, "model_desc": model_desc, "protocol": protocol, "data": data, "data_desc": data,
        "device": "torch-" + device, "device_desc": (f"{torch.cuda.get_device_name(0)}, cuDNN {torch.backends.cudnn.version()}, {precision()}"
                        if device == "cuda" else cpu_model() + (", bf16 autocast" if _autocast == "bf16" else "")),
        "tf32": _tf32 if device == "cuda" else None,
        "precision": "bf16" if _autocast == "bf16" else "fp32",
        "threads": threads, "batch": batch, "seed": seed, "n_train": n_train, "n_val": n_val,
        "warmup_epochs": s["warmup"], "flops_per_sample": flops_per_sample, "flops_counted": flops_counted,
        "epochs": [dict(epoch=i + 1, **r) for i, r in enumerate(epochs)],
        "epoch_seconds": {"median": s["median"], "min": s["min"], "max": s["max"]},
        "train_samples_per_s": s["samples_per_s"], "gflops": s["gflops"],
        "peak_gflops": none_if_zero(peak), "peak_best_gflops": None,
        "peak_what": "ctrain's OpenBLAS sgemm peak of the same run (--peak)" if peak > 0 else "",
        "fraction_of_peak": s["gflops"] / peak if peak > 0 else None,
        "fma_peak_gflops": none_if_zero(fma_peak), "fma_peak_best_gflops": None,
        "fma_peak_what": "ctrain's FP32 FMA peak of the same run (--fma-peak)" if fma_peak > 0 else "",
        "fraction_of_fma_peak": s["gflops"] / fma_peak if fma_peak > 0 else None,
    }
    with open(path, "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
    print(f"results written to {path}")


if __name__ == "__main__":
    print(describe())
