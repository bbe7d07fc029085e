"""torch_timing.py - per-epoch timing of the PyTorch twins (siamese_torch.py,
cnn_torch.py) recorded the way `ctrain time` records its runs: the same
statistics (median, min and max seconds over the epochs after a warm-up epoch,
training samples/s and GFLOP/s of the training part with ctrain's FLOP count)
and the same JSON schema (ctrain-time/2, cli/time_report.c), so that

    ctrain time --compare bench/results/HOST-cnn-cpu.json bench/results/HOST-cnn-torch-2.15-cpu.json

prints ctrain and PyTorch side by side. The JSON also names the PyTorch build
(version, BLAS, MKL, oneDNN, CPU capability: "pytorch") and ctrain's BLAS core
of the same run ("ctrain_blas_core"). `python torch_timing.py` prints the line
that names this PyTorch.

The figures of schema /2 are measured as ctrain measures them (cli/time_hw.c):
  - data_wait_share: of the training seconds of the epochs after the warm-up,
    the share spent fetching batches (the twins time their batch fetching as
    ctrain times its task's load());
  - energy and temperature: a thread samples the counters --sample-hz times a
    second (default 4) and once more at each epoch's end; the figures are over
    the epochs after the warm-up. The CPU's RAPL package zones and hwmon
    thermometers are read from sysfs as io/hwmon.c reads them (same zones, same
    wrap handling with max_energy_range_uj, same CTRAIN_SYSFS_ROOT), a GPU's
    counters through NVML (libnvidia-ml.so.1 with ctypes) as cuda/nvml.c does;
    the device's own meter (the GPU on --device cuda, else the CPU package)
    gives joules_per_epoch, avg_watts, peak_watts, samples_per_joule and
    max_temp_c. A counter that is not there is null and its *_why says why,
    in ctrain's words;
  - money: --price, --electricity and --hardware-cost with ctrain time's
    syntax (cpu=... for a CPU run, gpu=... or cuda=... for --device cuda) and
    arithmetic, so that --compare shows the cost rows of both.
"""
import ctypes
import datetime
import errno
import json
import math
import os
import platform
import re
import socket
import statistics
import sys
import threading
import time

import torch

SCHEMA = "ctrain-time/2"

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
    ap.add_argument("--sample-hz", type=float, default=SAMPLE_HZ,
                    help="how often the power, energy and temperature counters are read during the epochs (default 4, "
                         "as ctrain time; 0: not at all): RAPL and hwmon for the CPU, NVML for a GPU")
    ap.add_argument("--price", help="DEVICE=PER_HOUR: what renting the device costs an hour (cpu=0.10 or gpu=2.50, "
                                    "any currency), as ctrain time --price")
    ap.add_argument("--electricity", help="PER_KWH: the price of a kWh, as ctrain time --electricity")
    ap.add_argument("--hardware-cost", help="DEVICE=PRICE: what buying the device costs (the break-even), "
                                            "as ctrain time --hardware-cost")


def blas_info():
    """The BLAS PyTorch was built with, as torch.__config__.show() reports it."""
    return "PyTorch " + blas_short()


def epoch_record(seconds, train_seconds, val_seconds, loss, accuracy, val_loss, val_accuracy, data_seconds=float("nan")):
    """One epoch; data_seconds: of train_seconds, the time spent fetching batches (the JSON's data_wait_share,
    not one of the epoch's fields, as in ctrain's)."""
    return dict(seconds=seconds, train_seconds=train_seconds, val_seconds=val_seconds, loss=loss,
                accuracy=accuracy, val_loss=val_loss, val_accuracy=val_accuracy, data_seconds=data_seconds)


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
               epochs, flops_per_sample, flops_counted, peak, fma_peak=0, ctrain_blas="", hardware=None, prices=None):
    """The run in ctrain time's JSON; hardware: the Hardware that sampled it (None: not sampled), prices:
    parse_money's (None: none given)."""
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
        "epochs": [dict(epoch=i + 1, **{k: v for k, v in r.items() if k != "data_seconds"}) for i, r in enumerate(epochs)],
        "epoch_seconds": {"median": s["median"], "min": s["min"], "max": s["max"]},
        "train_samples_per_s": s["samples_per_s"], "gflops": s["gflops"],
        "peak_gflops": none_if_zero(peak), "peak_best_gflops": None,
        "peak_what": "ctrain's OpenBLAS sgemm peak of the same run (--peak)" if peak > 0 else "",
        "fraction_of_peak": s["gflops"] / peak if peak > 0 else None,
        "fma_peak_gflops": none_if_zero(fma_peak), "fma_peak_best_gflops": None,
        "fma_peak_what": "ctrain's FP32 FMA peak of the same run (--fma-peak)" if fma_peak > 0 else "",
        "fraction_of_fma_peak": s["gflops"] / fma_peak if fma_peak > 0 else None,
    }
    d.update(hardware_fields(hardware, epochs, n_train, device, prices))
    with open(path, "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
    print(f"results written to {path}")


# ---- the counters: ctrain's io/hwmon.c and cuda/nvml.c, in Python ----
# Same counters, same choices, same words: RAPL package zones under <root>/class/powercap
# (intel-rapl:N named package-*, never the sub-zones intel-rapl:N:M or psys), each counter's
# wrap undone with its max_energy_range_uj; the hottest k10temp (Tdie, else Tctl) or coretemp
# ("Package id N") sensor under <root>/class/hwmon; root is $CTRAIN_SYSFS_ROOT, else /sys.
# A counter that is not there is NaN, with its reason; nothing is estimated.

NAN = float("nan")
SAMPLE_HZ = 4.0          # ctrain time's --sample-hz default
MAX_ZONES = 8            # CT_HW_MAX_ZONES
MAX_TEMPS = 8            # CT_HW_MAX_TEMPS
_NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.I)


def sysfs_root():
    r = os.environ.get("CTRAIN_SYSFS_ROOT", "")
    return r if r else "/sys"


def _read_line(path, cap=64):
    """The first line of a small file without its newline, and 0; or None and errno (fgets's cap too)."""
    try:
        with open(path, "rb") as f:
            line = f.readline(cap - 1)
    except OSError as e:
        return None, e.errno or errno.EIO
    if not line:
        return None, errno.EIO
    return line.decode("utf-8", "replace").split("\n", 1)[0], 0


def _read_number(path):
    """The number at the start of a file's first line, as strtod reads it; NaN when there is none."""
    line, err = _read_line(path)
    m = _NUMBER.match(line) if err == 0 else None
    return float(m.group(0)) if m else NAN


def _list_dir(d, prefix):
    """The entries of d starting with prefix, sorted (at most 64), and 0; or [] and errno."""
    try:
        names = [n for n in os.listdir(d) if n.startswith(prefix)]
    except OSError as e:
        return [], e.errno or errno.EIO
    return sorted(names[:64]), 0


def _finite(x):
    return x is not None and math.isfinite(x)


class CpuCounters:
    """The CPU's counters found under sysfs (ct_hw_open)."""

    def __init__(self):
        self.zone_path, self.zone_name, self.zone_max_uj = [], [], []
        self.energy_why = ""
        self.temp_path, self.temp_what, self.temp_why = [], "", ""
        root = sysfs_root()
        self._find_rapl(root)
        self._find_temps(root)

    def _find_rapl(self, root):
        d = f"{root[:160]}/class/powercap"
        names, err = _list_dir(d, "intel-rapl:")
        if err:
            self.energy_why = (f"no CPU energy counter: {d}: {os.strerror(err)} (no RAPL driver: a virtual machine, "
                               "or a kernel without intel_rapl)")
            return
        unreadable = other = 0
        for n in names:
            if not re.fullmatch(r"intel-rapl:\s*[+-]?\d+", n) or len(self.zone_path) >= MAX_ZONES:
                continue
            name = _read_line(f"{d}/{n}/name", 32)[0] or ""
            if not name.startswith("package"):
                other += 1
                continue
            path = f"{d}/{n}/energy_uj"
            mx = _read_number(f"{d}/{n}/max_energy_range_uj")
            err = _read_line(path)[1]
            if err == 0:
                self.zone_path.append(path)
                self.zone_name.append(name)
                self.zone_max_uj.append(mx if math.isfinite(mx) and mx > 0 else 0.0)
            elif err in (errno.EACCES, errno.EPERM):
                unreadable += 1
        if self.zone_path:
            return
        if unreadable:
            self.energy_why = (f"no CPU energy counter: {d}/intel-rapl:*/energy_uj is readable by root only (Linux 5.10 "
                               "and later): run as root or `sudo chmod o+r` those files")
        else:
            self.energy_why = f"no CPU energy counter: {d} has no RAPL package zone" + (" (only sub-zones or psys)" if other else "")

    def _find_temps(self, root):
        d = f"{root[:160]}/class/hwmon"
        names, err = _list_dir(d, "hwmon")
        if err:
            self.temp_why = (f"no CPU thermometer: {d}: {os.strerror(err)} (a virtual machine, or no k10temp/coretemp "
                             "driver)")
            return
        for n in names:
            chip = _read_line(f"{d}/{n}/name")[0] or ""
            amd, intel = chip == "k10temp", chip == "coretemp"
            best, best_rank = -1, 0
            for k in range(1, 65) if amd or intel else ():
                label, err = _read_line(f"{d}/{n}/temp{k}_label")
                if err:
                    continue
                rank = (2 if label == "Tdie" else 1 if label == "Tctl" else 0) if amd else int(label.startswith("Package id"))
                if rank > best_rank:
                    best_rank, best, self.temp_what = rank, k, f"{chip} {label}"
            if best > 0 and len(self.temp_path) < MAX_TEMPS:
                self.temp_path.append(f"{d}/{n[:100]}/temp{best}_input")
        if not self.temp_path:
            self.temp_why = f"no CPU thermometer: no k10temp (Tdie/Tctl) or coretemp (Package id) sensor under {d}"

    def read(self, t):
        """The CPU's side of a sample at time t (ct_hw_read_cpu)."""
        temp = NAN
        for p in self.temp_path:
            c = _read_number(p) / 1000.0
            if math.isfinite(c) and not c <= temp:
                temp = c
        return {"t": t, "cpu_uj": [_read_number(p) for p in self.zone_path], "cpu_temp_c": temp,
                "gpu_w": NAN, "gpu_mj": NAN, "gpu_temp_c": NAN, "gpu_busy": NAN, "gpu_mem_busy": NAN,
                "gpu_sm_mhz": NAN, "gpu_mem_mhz": NAN}


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class Nvml:
    """A GPU's counters through NVML (libnvidia-ml.so.1, as cuda/nvml.c loads it); raises
    RuntimeError with ctrain's words when there are none."""

    def __init__(self, index):
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError:
            raise RuntimeError("no GPU counters: libnvidia-ml.so.1 cannot be loaded (no NVIDIA driver here)")
        need = ["nvmlInit_v2", "nvmlErrorString", "nvmlDeviceGetHandleByIndex_v2", "nvmlShutdown", "nvmlDeviceGetPowerUsage",
                "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetTemperature", "nvmlDeviceGetUtilizationRates",
                "nvmlDeviceGetClockInfo"]
        for name in need:
            if not hasattr(lib, name):
                raise RuntimeError(f"no GPU counters: libnvidia-ml.so.1 has no {name} (a driver too old)")
        lib.nvmlErrorString.restype = ctypes.c_char_p
        e = lib.nvmlInit_v2()
        if e != 0:
            raise RuntimeError(f"no GPU counters: nvmlInit: {lib.nvmlErrorString(e).decode()}")
        self.lib, self.dev = lib, ctypes.c_void_p()
        uuid, e = self._cuda_uuid(index), -1
        if uuid and hasattr(lib, "nvmlDeviceGetHandleByUUID"):   # the GPU CUDA numbers `index`, whatever NVML numbers it
            e = lib.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(self.dev))
        if e != 0:
            e = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(self.dev))
        if e != 0:
            lib.nvmlShutdown()
            raise RuntimeError(f"no GPU counters: NVML cannot find GPU {index}: {lib.nvmlErrorString(e).decode()}")

    @staticmethod
    def _cuda_uuid(index):
        """NVML's UUID string of CUDA device index ("GPU-xxxxxxxx-..."), or "" when torch does not tell it."""
        try:
            u = str(torch.cuda.get_device_properties(index).uuid)
        except (AttributeError, RuntimeError, AssertionError):
            return ""
        return u if u.startswith("GPU-") else "GPU-" + u

    def read(self, s):
        """Fills the gpu_ fields of sample s (NaN where NVML has no such counter)."""
        lib, dev, u, mj, ut = self.lib, self.dev, ctypes.c_uint(), ctypes.c_ulonglong(), _Utilization()
        s["gpu_w"] = u.value / 1000.0 if lib.nvmlDeviceGetPowerUsage(dev, ctypes.byref(u)) == 0 else NAN
        s["gpu_mj"] = float(mj.value) if lib.nvmlDeviceGetTotalEnergyConsumption(dev, ctypes.byref(mj)) == 0 else NAN
        s["gpu_temp_c"] = float(u.value) if lib.nvmlDeviceGetTemperature(dev, 0, ctypes.byref(u)) == 0 else NAN
        if lib.nvmlDeviceGetUtilizationRates(dev, ctypes.byref(ut)) == 0:
            s["gpu_busy"], s["gpu_mem_busy"] = float(ut.gpu), float(ut.memory)
        else:
            s["gpu_busy"] = s["gpu_mem_busy"] = NAN
        s["gpu_sm_mhz"] = float(u.value) if lib.nvmlDeviceGetClockInfo(dev, 1, ctypes.byref(u)) == 0 else NAN
        s["gpu_mem_mhz"] = float(u.value) if lib.nvmlDeviceGetClockInfo(dev, 2, ctypes.byref(u)) == 0 else NAN

    def close(self):
        self.lib.nvmlShutdown()


def meter_none(why):
    """A meter with nothing measured, every _why set to why (ct_hw_meter_none)."""
    return {"seconds": NAN, "joules": NAN, "avg_w": NAN, "peak_w": NAN, "energy_how": "", "energy_why": why,
            "max_temp_c": NAN, "temp_why": why, "busy_pct": NAN, "mem_busy_pct": NAN, "sm_mhz": NAN, "busy_why": why,
            "n_samples": 0}


def _meter_begin(s, lo, hi):
    m = meter_none("")
    m["n_samples"] = hi - lo + 1
    m["seconds"] = s[hi]["t"] - s[lo]["t"]
    return m


def _max_of(s, lo, hi, key):
    mx = NAN
    for x in s[lo:hi + 1]:
        if math.isfinite(x[key]) and not x[key] <= mx:
            mx = x[key]
    return mx


def _mean_of(s, lo, hi, key):
    v = [x[key] for x in s[lo:hi + 1] if math.isfinite(x[key])]
    return sum(v) / len(v) if v else NAN


def cpu_meter(hw, s, lo, hi):
    """The CPU package's figures of samples lo..hi (ct_hw_cpu_meter): joules summed sample by sample
    (at most one wrap between two samples), W = J / s, peak: the highest power between two samples."""
    m = _meter_begin(s, lo, hi)
    m["max_temp_c"] = _max_of(s, lo, hi, "cpu_temp_c")
    if not math.isfinite(m["max_temp_c"]):
        m["temp_why"] = "the CPU thermometer could not be read" if hw.temp_path else hw.temp_why
    m["busy_why"] = "a GPU figure"
    if not hw.zone_path:
        m["energy_why"] = hw.energy_why
        return m
    if hi <= lo or not m["seconds"] > 0:
        m["energy_why"] = "fewer than two samples"
        return m
    total, peak = 0.0, NAN
    for i in range(lo, hi):
        uj, dt = 0.0, s[i + 1]["t"] - s[i]["t"]
        for z, path in enumerate(hw.zone_path):
            d = s[i + 1]["cpu_uj"][z] - s[i]["cpu_uj"][z]
            if not math.isfinite(d):
                m["energy_why"] = f"the energy counter {path} could not be read during the run"
                return m
            if d < 0:
                if not hw.zone_max_uj[z] > 0:
                    m["energy_why"] = f"the energy counter {path} wrapped and its max_energy_range_uj is unknown"
                    return m
                d += hw.zone_max_uj[z]
            uj += d
        total += uj
        if dt > 0 and not uj / 1e6 / dt <= peak:
            peak = uj / 1e6 / dt
    n = len(hw.zone_path)
    m["joules"] = total / 1e6
    m["avg_w"] = m["joules"] / m["seconds"]
    m["peak_w"] = peak
    m["energy_how"] = f"RAPL package energy counter{'s' if n > 1 else ''} ({n} zone{'s' if n > 1 else ''})"
    return m


def gpu_meter(gpu_why, s, lo, hi):
    """The GPU's figures of samples lo..hi (ct_hw_gpu_meter): NVML's energy counter, else its power
    readings integrated; gpu_why: why there are none (None: the samples hold them)."""
    if gpu_why is not None:
        return meter_none(gpu_why)
    m = _meter_begin(s, lo, hi)
    m["max_temp_c"] = _max_of(s, lo, hi, "gpu_temp_c")
    if not math.isfinite(m["max_temp_c"]):
        m["temp_why"] = "NVML gave no GPU temperature"
    m["busy_pct"] = _mean_of(s, lo, hi, "gpu_busy")
    m["mem_busy_pct"] = _mean_of(s, lo, hi, "gpu_mem_busy")
    m["sm_mhz"] = _mean_of(s, lo, hi, "gpu_sm_mhz")
    if not math.isfinite(m["busy_pct"]):
        m["busy_why"] = "NVML gave no utilisation rates"
    m["peak_w"] = _max_of(s, lo, hi, "gpu_w")
    if hi <= lo or not m["seconds"] > 0:
        m["energy_why"] = "fewer than two samples"
        return m
    if math.isfinite(s[lo]["gpu_mj"]) and math.isfinite(s[hi]["gpu_mj"]):
        m["joules"] = (s[hi]["gpu_mj"] - s[lo]["gpu_mj"]) / 1e3
        m["energy_how"] = "NVML total energy counter"
    else:
        j = 0.0
        for i in range(lo, hi):
            if not math.isfinite(s[i]["gpu_w"]) or not math.isfinite(s[i + 1]["gpu_w"]):
                m["energy_why"] = "NVML gave neither an energy counter nor power readings"
                return m
            j += 0.5 * (s[i]["gpu_w"] + s[i + 1]["gpu_w"]) * (s[i + 1]["t"] - s[i]["t"])
        m["joules"] = j
        m["energy_how"] = "NVML power readings integrated over the samples (no energy counter)"
    m["avg_w"] = m["joules"] / m["seconds"]
    return m


class Hardware:
    """The counters sampled while a twin trains, as `ctrain time` samples them (cli/time_hw.c): a thread
    reads every counter hz times a second; epoch_end() takes one more sample at each epoch's end (after
    validation); end() gives the meters of the epochs after the warm-up, from the sample at the warm-up
    epoch's end (the start when there is none) to the one at the last epoch's end."""

    def __init__(self, device, hz):
        self.gpu_run = device == "cuda"
        self.hz = hz
        self.samples, self.marks = [], []
        self.gpu, self.gpu_why = None, "not a GPU run"
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.thread = None
        if hz <= 0:
            return
        if self.gpu_run:
            try:
                self.gpu = Nvml(torch.cuda.current_device())
                self.gpu_why = None
            except RuntimeError as e:
                self.gpu_why = str(e)
        self.cpu = CpuCounters()
        self.period = 1.0 / hz
        self.thread = threading.Thread(target=self._run, name="counters", daemon=True)
        self.thread.start()
        self.start = self._take()

    def _take(self):
        with self.lock:
            s = self.cpu.read(time.perf_counter())
            if self.gpu:
                self.gpu.read(s)
            self.samples.append(s)
            return len(self.samples) - 1

    def _run(self):
        while not self.stop.is_set():
            self._take()
            self.stop.wait(self.period)

    def epoch_end(self):
        if self.hz > 0:
            self.marks.append(self._take())

    def end(self, n_epochs, warmup):
        """{sample_hz, cpu, gpu}: the meters of the epochs after the warm-up."""
        if self.hz <= 0:
            why = "not sampled (--sample-hz 0)"
            return {"sample_hz": 0, "cpu": meter_none(why), "gpu": meter_none(why)}
        self.stop.set()
        self.thread.join()
        first = warmup if n_epochs > warmup else 0
        if len(self.marks) >= n_epochs and n_epochs - first > 0:
            lo, hi = self.marks[first - 1] if first > 0 else self.start, self.marks[n_epochs - 1]
            cpu = cpu_meter(self.cpu, self.samples, lo, hi)
            gpu = gpu_meter((self.gpu_why if self.gpu is None else None) if self.gpu_run else "not a GPU run",
                            self.samples, lo, hi)
        else:
            why = "the run ended before its epochs were sampled"
            cpu, gpu = meter_none(why), meter_none(why)
        if self.gpu:
            self.gpu.close()
            self.gpu = None
        return {"sample_hz": 1.0 / self.period, "cpu": cpu, "gpu": gpu}


# ---- the money: ctrain's --price, --electricity, --hardware-cost (cli/time_hw.c) ----
def _amount(text):
    """strtod over the whole text (a number, nothing after it), or None."""
    m = _NUMBER.match(text)
    if not text or not m or m.end() != len(text):
        return None
    v = float(m.group(0))
    return v if math.isfinite(v) and v >= 0 else None


def _prices(flag, text, device):
    """DEVICE=AMOUNT,...: the amount for this run's device (cpu, or gpu for --device cuda), NaN when not named."""
    if not text:
        raise ValueError(f"{flag} needs DEVICE=AMOUNT[,DEVICE=AMOUNT] (e.g. cpu=0.10,gpu=2.50)")
    own, got = "gpu" if device == "cuda" else "cpu", NAN
    for part in text.split(","):
        eq = part.find("=")
        if eq <= 0 or eq >= 64:
            raise ValueError(f"{flag} {text}: '{part}' is not DEVICE=AMOUNT (e.g. cpu=0.10,gpu=2.50)")
        dev, num = part[:eq], part[eq + 1:eq + 64]
        dev = "gpu" if dev == "cuda" else dev
        v = _amount(num)
        if v is None:
            raise ValueError(f"{flag} {text}: '{num}' for {dev} is not an amount (a number such as 2.50, in any currency)")
        if dev != own:
            raise ValueError(f"{flag} {text}: this run does not time {dev} (its devices: {own})")
        if math.isfinite(got):
            raise ValueError(f"{flag} {text}: {dev} is priced twice")
        got = v
    return got


def parse_money(args, device):
    """--price, --electricity, --hardware-cost as ctrain time reads them: {price_per_hour,
    electricity_per_kwh, hardware_cost} (NaN: not given); a bad one ends the program, exit 2, one line."""
    try:
        kwh = NAN
        if args.electricity is not None:
            kwh = _amount(args.electricity)
            if kwh is None:
                raise ValueError(f"--electricity {args.electricity}: not a price per kWh (a number such as 0.30, in any currency)")
        price = _prices("--price", args.price, device) if args.price is not None else NAN
        cost = _prices("--hardware-cost", args.hardware_cost, device) if args.hardware_cost is not None else NAN
        if not 0 <= args.sample_hz <= 100:
            raise ValueError(f"--sample-hz {args.sample_hz:g}: expected 0 to 100")
    except ValueError as e:
        print(f"{os.path.basename(sys.argv[0])}: {e}", file=sys.stderr)
        raise SystemExit(2)
    return {"price_per_hour": price, "electricity_per_kwh": kwh, "hardware_cost": cost}


def money(prices, sec_median, epochs, joules_per_epoch, avg_w, energy_why):
    """time_money: the rent and electricity of an epoch and a run, and the break-even."""
    price, kwh, cost = prices["price_per_hour"], prices["electricity_per_kwh"], prices["hardware_cost"]
    m = {"price_per_hour": price, "electricity_per_kwh": kwh, "hardware_cost": cost, "epochs": epochs}
    m["rent_per_epoch"] = price * (sec_median / 3600)
    m["rent_per_run"] = m["rent_per_epoch"] * epochs
    m["electricity_per_epoch"] = joules_per_epoch / 3.6e6 * kwh
    m["electricity_per_run"] = m["electricity_per_epoch"] * epochs
    m["break_even_hours"], why = NAN, ""
    if not math.isfinite(cost) or not math.isfinite(price):
        why = "break-even needs --hardware-cost and --price for the device"
    elif math.isfinite(kwh) and not math.isfinite(avg_w):
        why = f"break-even with --electricity needs the device's power: {energy_why[:400]}"
    else:
        # owning costs the hardware once, then the electricity; renting costs the price every hour
        elec_per_hour = avg_w / 1000 * kwh if math.isfinite(kwh) else 0.0
        if price <= elec_per_hour:
            why = "never: its electricity costs more an hour than renting"
        else:
            m["break_even_hours"] = cost / (price - elec_per_hour)
    m["break_even_why"] = "" if math.isfinite(m["break_even_hours"]) else why
    return m


def hardware_fields(hw, epochs, n_train, device, prices):
    """The fields of schema /2 (cli/time_report.c's write_hardware): the device's own meter (the GPU on a
    CUDA run, else the CPU package) per epoch, the data wait, the hardware block and the money."""
    s = summary(epochs, n_train, 0)
    first, k = s["warmup"], len(epochs) - s["warmup"]
    h = hw.end(len(epochs), first) if hw else {"sample_hz": 0, "cpu": meter_none("not sampled (--sample-hz 0)"),
                                               "gpu": meter_none("not sampled (--sample-hz 0)")}
    own = h["gpu"] if device == "cuda" else h["cpu"]
    jpe = own["joules"] / k if k > 0 else NAN
    data = sum(r.get("data_seconds", NAN) for r in epochs[first:])
    train = sum(r["train_seconds"] for r in epochs[first:])
    d = {"joules_per_epoch": jpe, "avg_watts": own["avg_w"], "peak_watts": own["peak_w"],
         "samples_per_joule": n_train / jpe if jpe > 0 else NAN, "max_temp_c": own["max_temp_c"],
         "gpu_busy_pct": h["gpu"]["busy_pct"], "data_wait_share": data / train if train > 0 else NAN,
         "energy_how": own["energy_how"] if math.isfinite(jpe) else "",
         "energy_why": "" if math.isfinite(jpe) else own["energy_why"],
         "temp_why": "" if math.isfinite(own["max_temp_c"]) else own["temp_why"],
         "busy_why": "" if math.isfinite(h["gpu"]["busy_pct"]) else h["gpu"]["busy_why"]}
    hardware = {"sample_hz": h["sample_hz"]}
    for key in ("cpu", "gpu"):
        m = dict(h[key])
        if math.isfinite(m["joules"]):
            m["energy_why"] = ""
        if math.isfinite(m["max_temp_c"]):
            m["temp_why"] = ""
        if key == "cpu":
            for gpu_only in ("busy_pct", "mem_busy_pct", "sm_mhz", "busy_why"):
                del m[gpu_only]
        elif math.isfinite(m["busy_pct"]):
            m["busy_why"] = ""
        hardware[key] = {f: m[f] for f in ("seconds", "joules", "avg_w", "peak_w", "energy_how", "energy_why", "max_temp_c",
                                           "temp_why", "busy_pct", "mem_busy_pct", "sm_mhz", "busy_why", "n_samples") if f in m}
    d["hardware"] = hardware
    prices = prices or {"price_per_hour": NAN, "electricity_per_kwh": NAN, "hardware_cost": NAN}
    d["money"] = money(prices, s["median"], len(epochs), jpe, own["avg_w"], own["energy_why"])
    return _nulls(d)


def _nulls(x):
    """NaN and infinities as null, as ctrain's JSON writer has them."""
    if isinstance(x, dict):
        return {k: _nulls(v) for k, v in x.items()}
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


if __name__ == "__main__":
    print(describe())
