"""torch_timing.py - per-epoch timing of the PyTorch twins (siamese_torch.py,
cnn_torch.py) recorded the way `ctrain time` records its runs: the same
statistics (median, min and max seconds over the epochs after a warm-up epoch,
training samples/s and GFLOP/s of the training part with ctrain's FLOP count)
and the same JSON schema (ctrain-time/1), so that

    ctrain time --compare bench/results/HOST-cnn-cpu.json bench/results/HOST-cnn-torch-cpu.json

prints ctrain and PyTorch side by side.
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
    """The math mode set_tf32 chose, as ctrain's GPU header line words it."""
    return "TF32 allowed" if _tf32 else "FP32 (no TF32)"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def blas_info():
    """The BLAS PyTorch was built with, as torch.__config__.show() reports it."""
    for part in torch.__config__.show().replace(",", "\n").splitlines():
        if "BLAS_INFO=" in part:
            return "PyTorch BLAS_INFO=" + part.split("=", 1)[1].strip()
    return "unknown"


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


def report(name, device, epochs, n_train, flops_per_sample, sample_name, peak):
    s = summary(epochs, n_train, flops_per_sample)
    first = s["warmup"] + 1
    frac = f", {100 * s['gflops'] / peak:.0f}% of {peak:.1f}" if peak > 0 else ""
    where = f"{device} ({precision()})" if device == "cuda" else device
    print(f"pytorch {name} on {where}: epochs {first}-{len(epochs)}: {s['median']:.2f} s/epoch median "
          f"(min {s['min']:.2f}, max {s['max']:.2f}), {s['samples_per_s']:.1f} training {sample_name}/s, "
          f"{s['gflops']:.1f} GFLOP/s{frac}", flush=True)
    return s


def write_json(path, *, model, model_desc, protocol, data, device, threads, batch, seed, n_train, n_val,
               epochs, flops_per_sample, flops_counted, peak):
    s = summary(epochs, n_train, flops_per_sample)
    none_if_zero = lambda x: x if x and x > 0 else None
    d = {
        "schema": SCHEMA,
        "framework": f"pytorch {torch.__version__}",
        "ctrain_version": "none (PyTorch twin, bench/" + os.path.basename(sys.argv[0]) + ")",
        "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([sys.executable or "python3"] + sys.argv),
        "host": {"hostname": socket.gethostname(), "os": f"{platform.system()} {platform.release()} {platform.machine()}",
                 "cpu": cpu_model(), "logical_cores": os.cpu_count(),
                 "blas": blas_info(),
                 "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "not used"},
        "model": model, "model_desc": model_desc, "protocol": protocol, "data": data, "data_desc": data,
        "device": "torch-" + device, "device_desc": (f"{torch.cuda.get_device_name(0)}, cuDNN {torch.backends.cudnn.version()}, {precision()}"
                        if device == "cuda" else cpu_model()),
        "tf32": _tf32 if device == "cuda" else None,
        "threads": threads, "batch": batch, "seed": seed, "n_train": n_train, "n_val": n_val,
        "warmup_epochs": s["warmup"], "flops_per_sample": flops_per_sample, "flops_counted": flops_counted,
        "epochs": [dict(epoch=i + 1, **r) for i, r in enumerate(epochs)],
        "epoch_seconds": {"median": s["median"], "min": s["min"], "max": s["max"]},
        "train_samples_per_s": s["samples_per_s"], "gflops": s["gflops"],
        "peak_gflops": none_if_zero(peak), "peak_best_gflops": None,
        "peak_what": "ctrain's OpenBLAS sgemm peak of the same run (--peak)" if peak > 0 else "",
        "fraction_of_peak": s["gflops"] / peak if peak > 0 else None,
    }
    with open(path, "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
    print(f"results written to {path}")
