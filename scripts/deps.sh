#!/bin/sh
# deps.sh - install the Debian packages ctrain needs, only when they are missing.
#
# usage: scripts/deps.sh [build|test|golden|bench|dist|fuzz]
#   build   compiler, OpenBLAS, HDF5, zlib, libsndfile, libsamplerate, FFTW3, jansson,
#           libyaml (--config files), FFmpeg's libavformat, libavcodec, libswresample and
#           libavutil (prep reads VoxCeleb2's AAC .m4a files), and the tools the demo uses
#           (espeak-ng and sox to synthesise speech, Fashion-MNIST): enough for `make`
#           and `make demo`
#   test    adds Debian's python3-torch and python3-h5py: one test loads ctrain's
#           PyTorch export into torch and compares outputs (`make test`);
#           python3-sklearn: one test scores `eval --scores` with scikit-learn's ROC; and
#           libmp3lame-dev, for the test that links a program to the installed
#           libctrain.a with `pkg-config --libs --static ctrain`: sndfile.pc names
#           -lmp3lame among its private libraries, but libsndfile1-dev does not
#           depend on libmp3lame-dev; python3-venv: the test that reads ctrain's
#           TensorBoard files with TensorBoard's own reader installs tensorboard from
#           PyPI into a virtual environment (tests/tensorboard_venv.sh); libopenmpi-dev and openmpi-bin, so that the
#           build has data-parallel training and the tests run it under mpirun -np 2; ffmpeg,
#           the command-line tool, which the .m4a tests encode their AAC files with; chromium, whose
#           headless mode renders `ctrain time --html`'s page and dumps its DOM (tests/test_hwreport.c)
#   golden  adds torchaudio, for `make golden`
#   bench   adds python3-venv and binutils (readelf) to golden's: `make bench` also
#           times the newest PyTorch from PyPI in a virtual environment
#           (bench/torch_venv.sh)
#   dist    the build set and patchelf, which `make dist` uses to set the shipped
#           binaries' and libraries' RUNPATH
#   fuzz    the build set, clang and libclang-rt-14-dev (libclang_rt.fuzzer, which
#           Debian 12's clang does not pull in): `make fuzz` builds libFuzzer targets
# Present packages are detected with dpkg-query, so a second run does nothing and
# takes a fraction of a second. When it cannot install (not root, no sudo, no
# network) it prints the exact command to run and exits non-zero.
set -eu

BUILD_PKGS="gcc g++ make pkg-config libopenblas-dev libhdf5-dev hdf5-tools zlib1g-dev libsndfile1-dev libsamplerate0-dev libfftw3-dev libjansson-dev libyaml-dev libavformat-dev libavcodec-dev libswresample-dev libavutil-dev espeak-ng sox dataset-fashion-mnist"
TEST_PKGS="python3 python3-torch python3-h5py python3-numpy python3-sklearn libmp3lame-dev python3-venv libopenmpi-dev openmpi-bin ffmpeg chromium"
GOLDEN_PKGS="python3-torchaudio"
BENCH_PKGS="python3-venv binutils"
FUZZ_PKGS="clang libclang-rt-14-dev"

case "${1:-build}" in
  build)  want="$BUILD_PKGS" ;;
  test)   want="$BUILD_PKGS $TEST_PKGS" ;;
  golden) want="$BUILD_PKGS $TEST_PKGS $GOLDEN_PKGS" ;;
  bench|all) want="$BUILD_PKGS $TEST_PKGS $GOLDEN_PKGS $BENCH_PKGS" ;;
  dist)   want="$BUILD_PKGS patchelf" ;;
  fuzz)   want="$BUILD_PKGS $FUZZ_PKGS" ;;
  *) echo "deps.sh: unknown set '$1' (use build, test, golden, bench, dist or fuzz)" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
  st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$st" = "installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "deps: installing missing Debian packages:$missing"
if [ "$(id -u)" = 0 ]; then SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"
else
  echo "deps: not root and no password-less sudo; run this, then retry:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends $missing; } >/tmp/ctrain-deps.log 2>&1; then
  tail -20 /tmp/ctrain-deps.log >&2
  echo "deps: apt-get failed (log above, full log in /tmp/ctrain-deps.log); run this, then retry:" >&2
  echo "  ${SUDO:+$SUDO }apt-get update && ${SUDO:+$SUDO }apt-get install -y$missing" >&2
  exit 1
fi
echo "deps: installed$missing"
