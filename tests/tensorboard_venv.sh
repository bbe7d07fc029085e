#!/bin/sh
# tensorboard_venv.sh - TensorBoard from PyPI, for the test that reads ctrain's
# event files back with TensorBoard's own reader (tests/tensorboard_check.py);
# ctrain itself never needs it. Debian has no tensorboard package, so it lives in
# a virtual environment kept between runs outside the repository.
#
#   usage: sh tests/tensorboard_venv.sh
#   prints the environment's python on stdout when it is usable, nothing when
#   not; one status line on stderr either way; always exits 0.
#
# Where: $CTRAIN_TENSORBOARD_VENV, default ${XDG_CACHE_HOME:-~/.cache}/ctrain/venv-tensorboard.
# Cached: an environment that passes the check below is used as it is, with no
# network; CTRAIN_TENSORBOARD_REFRESH=1 builds it again with the newest tensorboard.
# How: /usr/bin/python3 -m venv (Debian's python3-venv, which `make test` installs),
# then pip install tensorboard (with its dependencies: numpy, protobuf, grpcio, ...).
# The check imports the reader the test uses, EventAccumulator. Without PyPI,
# the line on stderr says why and the test reports SKIP with that reason.
set -u
venv=${CTRAIN_TENSORBOARD_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ctrain/venv-tensorboard}
check='import tensorboard
from tensorboard.backend.event_processing import event_accumulator
print(tensorboard.__version__)'

if [ "${CTRAIN_TENSORBOARD_REFRESH:-0}" != 1 ] && [ -f "$venv/.ctrain-ok" ] && ver=$("$venv/bin/python" -c "$check" 2>/dev/null); then
  echo "tensorboard $ver from PyPI, cached in $venv" >&2
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$(dirname "$venv")" || { echo "tensorboard unavailable: cannot create $(dirname "$venv")" >&2; exit 0; }
log=$(dirname "$venv")/venv-tensorboard.log
skip() { echo "tensorboard unavailable: $1 (details: $log)" >&2; exit 0; }
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv" >"$log" 2>&1 || skip "no virtual environment (/usr/bin/python3 -m venv needs Debian's python3-venv)"
pip="$venv/bin/python -m pip --disable-pip-version-check --no-input --no-cache-dir --timeout 20 --retries 1"
echo "tensorboard: installing it from PyPI into $venv (once)" >&2
$pip install -q tensorboard >>"$log" 2>&1 || { rm -rf "$venv"; skip "pip install tensorboard failed (PyPI cannot be reached?)"; }
ver=$("$venv/bin/python" -c "$check" 2>>"$log") || { rm -rf "$venv"; skip "tensorboard does not import"; }
echo "$ver" > "$venv/.ctrain-ok"
echo "tensorboard $ver from PyPI in $venv" >&2
echo "$venv/bin/python"
