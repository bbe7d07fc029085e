#!/bin/sh
# torch_venv.sh - the newest PyTorch from PyPI, for `make bench` only (the
# product and `make test` never use it), in a virtual environment kept between
# runs outside the repository.
#
#   usage: sh bench/torch_venv.sh
#   prints the environment's python on stdout when it is usable, nothing when
#   not; one status line on stderr either way; always exits 0.
#
# Where: $CTRAIN_TORCH_VENV, default ${XDG_CACHE_HOME:-~/.cache}/ctrain/venv-torch.
# Cached: an environment that passes the check below is used as it is, with no
# network; CTRAIN_TORCH_REFRESH=1 builds it again with whatever torch is newest.
#
# How, from PyPI alone and as small as it gets: PyPI's torch wheel for Linux
# x86-64 is the CUDA build, and `pip install torch` adds several GB of CUDA
# libraries (cuDNN, cuBLAS, NCCL, ...) that a CPU run never calls; without them
# torch does not import. So:
#   1. /usr/bin/python3 -m venv (Debian's python3-venv);
#   2. pip install --no-deps torch (the wheel alone, about 540 MB for 2.15);
#   3. pip install of what torch imports: filelock typing-extensions sympy
#      mpmath networkx jinja2 MarkupSafe fsspec, and numpy h5py for our scripts;
#   4. bench/torch_cuda_stubs.py: small stand-ins for the CUDA libraries the
#      wheel names (torch.cuda.is_available() is then False);
#   5. the check: import torch, a product and its backward pass on the CPU.
# If PyPI cannot be reached, one line says so and `make bench` goes on with
# Debian's PyTorch.
set -u
venv=${CTRAIN_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ctrain/venv-torch}
here=$(cd "$(dirname "$0")" && pwd)
check='import torch
x = torch.randn(64, 64, requires_grad=True)
(x @ x).relu().sum().backward()
assert x.grad is not None and torch.isfinite(x.grad).all() and not torch.cuda.is_available()
print(torch.__version__)'

if [ "${CTRAIN_TORCH_REFRESH:-0}" != 1 ] && [ -f "$venv/.ctrain-ok" ] && ver=$("$venv/bin/python" -c "$check" 2>/dev/null); then
  echo "newest PyTorch: $ver from PyPI, cached in $venv ($(du -sh "$venv" 2>/dev/null | cut -f1))" >&2
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$(dirname "$venv")" || { echo "newest PyTorch skipped: cannot create $(dirname "$venv")" >&2; exit 0; }
log=$(dirname "$venv")/venv-torch.log
skip() { echo "newest PyTorch skipped: $1 (details: $log); comparing with Debian's PyTorch only" >&2; exit 0; }
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv" >"$log" 2>&1 || skip "no virtual environment (/usr/bin/python3 -m venv needs Debian's python3-venv)"
pip="$venv/bin/python -m pip --disable-pip-version-check --no-input --no-cache-dir --timeout 20 --retries 1"
latest=$($pip index versions torch 2>>"$log" | sed -n 's/^torch (\(.*\))$/\1/p')
[ -n "$latest" ] || { rm -rf "$venv"; skip "PyPI cannot be reached"; }
echo "newest PyTorch: installing torch $latest from PyPI into $venv (the wheel without its CUDA libraries, about 540 MB to download, once)" >&2
$pip install -q --no-deps "torch==$latest" >>"$log" 2>&1 || { rm -rf "$venv"; skip "pip install torch==$latest failed"; }
$pip install -q filelock typing-extensions sympy mpmath networkx jinja2 MarkupSafe fsspec numpy h5py >>"$log" 2>&1 \
  || { rm -rf "$venv"; skip "pip install of torch's Python dependencies failed"; }
"$venv/bin/python" "$here/torch_cuda_stubs.py" >>"$log" 2>&1 || { rm -rf "$venv"; skip "the CUDA stand-ins could not be built (readelf, cc)"; }
ver=$("$venv/bin/python" -c "$check" 2>>"$log") || { rm -rf "$venv"; skip "torch $latest does not import or run on the CPU"; }
echo "$ver" > "$venv/.ctrain-ok"
echo "newest PyTorch: $ver from PyPI in $venv ($(du -sh "$venv" 2>/dev/null | cut -f1))" >&2
echo "$venv/bin/python"
