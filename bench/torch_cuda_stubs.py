"""torch_cuda_stubs.py - lets the newest PyTorch wheel from PyPI run on the CPU
without downloading its CUDA libraries.

PyPI's torch wheel for Linux x86-64 is built with CUDA: libtorch_cuda.so and
libtorch_python.so name cuDNN, cuBLAS, NCCL, cuSPARSELt, NVSHMEM, cuFile ...
as needed libraries, and the loader refuses to import torch without them
(`pip install torch` fetches them from PyPI: several GB more). A CPU run never
calls into them. This script writes one small stand-in library per missing
CUDA soname into a directory on the wheel's RPATH (site-packages/nvidia/.../lib,
where the real ones would go, searched before the system's libraries), defining
every symbol torch takes from it, with the symbol versions torch asks for:

  - functions return 100, CUDA's "no device" error (cudaErrorNoDevice), so
    torch.cuda.is_available() is False; the few that return a message string
    return "CUDA is not installed: this PyTorch runs on the CPU only";
  - data objects are zero-filled.

The CPU code (MKL, oneDNN, ATen's kernels) is PyTorch's own and untouched. Only
readelf (binutils) and a C compiler are needed.

    VENV/bin/python bench/torch_cuda_stubs.py [SITE_PACKAGES]

Prints one line per stand-in written, and nothing else; exits 0 when the wheel
needs no CUDA library (a CPU-only build) too.
"""
import collections
import glob
import os
import re
import subprocess
import sys
import sysconfig

CUDA_SONAME = re.compile(r"^lib(cudart|cublas|cublasLt|cusparse|cusparseLt|cufft|cufile|cusolver|cudnn|nccl|nvrtc|"
                         r"nvshmem_host|cupti|nvJitLink|nvToolsExt|curand)\.so\.\d+$")
# Unversioned symbols: the library a name prefix comes from.
PREFIXES = [("nccl", "libnccl.so"), ("nvshmem", "libnvshmem_host.so"), ("cuFile", "libcufile.so"),
            ("cusparseLt", "libcusparseLt.so"), ("cudnn", "libcudnn.so"), ("cublasLt", "libcublasLt.so"),
            ("cublas", "libcublas.so"), ("cusparse", "libcusparse.so"), ("cufft", "libcufft.so"),
            ("cusolver", "libcusolver.so"), ("cupti", "libcupti.so"), ("nvrtc", "libnvrtc.so"), ("cuda", "libcudart.so")]
MESSAGE_FUNCS = ("GetErrorString", "GetErrorName", "GetStatusString", "GetStatusName", "GetLastErrorString", "GetString")


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], capture_output=True, text=True, check=True).stdout


def main():
    site = sys.argv[1] if len(sys.argv) > 1 else sysconfig.get_paths()["purelib"]
    libs = glob.glob(os.path.join(site, "torch", "lib", "*.so")) + glob.glob(os.path.join(site, "torch", "_C*.so"))
    if not libs:
        sys.exit(f"torch_cuda_stubs: no torch libraries under {site}/torch")
    needed, defined, undefined, version_file = collections.defaultdict(set), set(), [], {}
    rpath = []
    for lib in libs:
        dyn = readelf("-d", lib)
        needed[lib] = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", dyn))
        m = re.search(r"\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[(.*?)\]", dyn)
        if m and not rpath and os.path.basename(lib) == "libtorch_cuda.so":
            rpath = m.group(1).split(":")
        current = None
        for line in readelf("-V", lib).splitlines():   # version name -> the library that defines it
            f = re.search(r"File: (\S+)", line)
            if f:
                current = f.group(1)
                continue
            n = re.search(r"Name: (\S+)", line)
            if n and current:
                version_file[n.group(1)] = current
        for line in readelf("--dyn-syms", lib).splitlines():
            f = line.split()
            if len(f) < 8 or not f[0].endswith(":"):
                continue
            if f[6] == "UND":
                undefined.append((lib, f[3], f[7]))
            else:
                defined.add(f[7].split("@")[0])
    cuda = sorted({n for lib in libs for n in needed[lib] if CUDA_SONAME.match(n)})
    if not cuda:
        return
    # where the stand-ins go: the wheel's first nvidia/... RPATH entry, relative to torch/lib
    target = next((p for p in rpath if "/nvidia/" in p), "$ORIGIN/../../nvidia/cu13/lib")
    out = os.path.normpath(target.replace("$ORIGIN", os.path.join(site, "torch", "lib")))
    os.makedirs(out, exist_ok=True)
    by_lib = collections.defaultdict(dict)   # soname -> symbol -> (type, version)
    for lib, typ, sym in undefined:
        name, _, version = sym.partition("@")
        version = version.split(" ")[0]
        if name in defined:
            continue
        if version:
            so = version_file.get(version, "")
            if CUDA_SONAME.match(so):
                by_lib[so][name] = (typ, version)
            continue
        for prefix, stem in PREFIXES:
            if name.startswith(prefix):
                so = next((n for n in needed[lib] if n.startswith(stem + ".")), None)
                if so:
                    by_lib[so][name] = (typ, "")
                break
    for so in cuda:
        symbols = by_lib.get(so, {})
        src = ['/* stand-in for %s: CUDA is not installed (bench/torch_cuda_stubs.py) */' % so,
               'static const char msg[] = "CUDA is not installed: this PyTorch runs on the CPU only";']
        versions = collections.defaultdict(list)
        for name, (typ, version) in sorted(symbols.items()):
            if typ == "OBJECT":
                src.append(f"char {name}[256] __attribute__((aligned(64)));")
            elif name.endswith(MESSAGE_FUNCS):
                src.append(f"const char *{name}(void) {{ return msg; }}")
            else:
                src.append(f"long {name}(void) {{ return 100; }}")
            versions[version].append(name)
        c_path = os.path.join(out, so + ".c")
        with open(c_path, "w") as f:
            f.write("\n".join(src) + "\n")
        cmd = [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O0", "-w", "-o", os.path.join(out, so), c_path,
               "-Wl,-soname," + so]
        named = [v for v in versions if v]
        if named:
            map_path = os.path.join(out, so + ".map")
            with open(map_path, "w") as f:
                for version in named:
                    f.write(version + " { global: " + " ".join(n + ";" for n in versions[version]) + " };\n")
                if "" in versions:   # the unversioned ones
                    f.write("CT_STAND_IN { global: *; };\n")
            cmd.append("-Wl,--version-script=" + map_path)
        subprocess.run(cmd, check=True)
        os.remove(c_path)
        if named:
            os.remove(map_path)
        print(f"{so}: stand-in with {len(symbols)} symbols")


if __name__ == "__main__":
    main()
