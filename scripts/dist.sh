#!/bin/sh
# dist.sh - packs the relocatable tarball of `make dist` from two portable builds.
#
#   usage: scripts/dist.sh VERSION OUT.tar.gz CPU_BUILD_DIR [CUDA_BUILD_DIR]
#
# Layout of the tarball (one folder, ctrain-VERSION-linux-x86_64/):
#   bin/            POSIX sh launchers (scripts/dist-launcher.sh): ctrain, ctrain_tests, bench_*
#   libexec/cuda/   the CUDA build of each (when CUDA_BUILD_DIR is given)
#   libexec/cpu/    the CPU-only build of each, the fallback without CUDA libraries
#   libexec/cuda-libs.sh  how the launchers find the CUDA libraries
#   lib/            every shared library those binaries load, transitively, except
#                   glibc's own and the CUDA ones (cuDNN, cuBLAS, the CUDA runtime),
#                   each with RUNPATH $ORIGIN; the binaries have RUNPATH $ORIGIN/../../lib
#   mpi/            when the builds use MPI: Open MPI's runtime (bin/orterun and orted,
#                   lib/openmpi/ and lib/pmix/ the plug-ins, RUNPATH $ORIGIN/../../../lib;
#                   share/ the help texts, etc/ the settings), started by bin/mpirun
#                   (scripts/dist-mpirun.sh). NCCL is not shipped: ctrain loads it at run time.
#   tests/golden/, tests/fixtures/, tests/fuzz/corpus/ and hdf5/, tests/*.py, tests/tensorboard_venv.sh, examples/make_corpus.py
#                   what the test suite reads and runs
#   bench/*.py      the PyTorch peers;  scripts/gpu-check.sh (with cpu-scaling.sh, gpu-e2e.sh, gpu-resume.sh, gpu-store.sh, same-weights.sh, e2e_data.py)   the GPU machine's check
#   README.md, BUILDINFO
# Needs patchelf (scripts/deps.sh dist installs it), ldd, tar and gzip.
set -u

die() { echo "dist: $*" >&2; exit 1; }
[ $# -ge 3 ] || die "usage: scripts/dist.sh VERSION OUT.tar.gz CPU_BUILD_DIR [CUDA_BUILD_DIR]"
version=$1; out=$2; cpu_build=$3; cuda_build=${4:-}
command -v patchelf >/dev/null 2>&1 || die "patchelf is missing: run 'sh scripts/deps.sh dist' (apt-get install patchelf), then retry"
command -v ldd >/dev/null 2>&1 || die "ldd is missing (Debian's libc-bin); install it, then retry"
[ -x "$cpu_build/ctrain" ] || die "$cpu_build/ctrain is missing: build it first (make dist does)"
[ -z "$cuda_build" ] || [ -x "$cuda_build/ctrain" ] || die "$cuda_build/ctrain is missing: build it first (make dist does)"

name=ctrain-$version-linux-x86_64
work=$(mktemp -d /tmp/ctrain-dist.XXXXXX) || die "mktemp failed"
trap 'rm -rf "$work"' EXIT
top=$work/$name
mkdir -p "$top/bin" "$top/lib" "$top/libexec" "$top/tests" "$top/examples" "$top/bench" "$top/scripts" || die "cannot create $top"

# glibc's own libraries and the CUDA libraries: never shipped
is_glibc() {
  case "$1" in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|\
    libutil.so.*|libanl.so.*|libmvec.so.*|libnsl.so.1|libBrokenLocale.so.*|libnss_*.so.*|libthread_db.so.*) return 0 ;;
  esac
  return 1
}
is_cuda() {
  case "$1" in
    libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libcudnn*.so.*|libnvrtc*.so.*|libnvJitLink.so.*|libnvidia-*.so.*) return 0 ;;
  esac
  return 1
}

# copy_tools BUILD VARIANT: the binaries, debug info kept (it is small, and a backtrace on the GPU machine needs it)
copy_tools() {
  mkdir -p "$top/libexec/$2" || die "mkdir failed"
  cp "$1/ctrain" "$1/ctrain_tests" "$top/libexec/$2/" || die "copying $1/ctrain and $1/ctrain_tests failed"
  for b in "$1"/bench/*; do
    [ -f "$b" ] && [ -x "$b" ] && { cp "$b" "$top/libexec/$2/" || die "copying $b failed"; }
  done
}
copy_tools "$cpu_build" cpu
[ -n "$cuda_build" ] && copy_tools "$cuda_build" cuda

# Open MPI's runtime, when the builds link MPI: the launcher (orterun; orted, its daemon
# on other machines), the plug-ins it and libmpi load at run time (Open MPI's and PMIx's),
# its help texts and settings. Plug-ins for fabrics this tarball does not carry the
# libraries of (InfiniBand verbs, UCX, libfabric, PSM) and OpenSHMEM's are left out;
# between processes on one machine Open MPI uses shared memory (btl vader), across
# machines TCP.
mpi_lib=$(ldd "$top/libexec/cpu/ctrain" 2>/dev/null | awk '$1 ~ /^libmpi\.so/ { print $3 }')
ompi_version=""
if [ -n "$mpi_lib" ]; then
  command -v ompi_info >/dev/null 2>&1 || die "the builds link $mpi_lib, but ompi_info is missing: apt-get install openmpi-bin"
  ompi_path() { ompi_info --parsable --path "$1" 2>/dev/null | awk -F: -v k="$1" '$2 == k { print $3; exit }'; }
  ompi_version=$(ompi_info --parsable 2>/dev/null | awk -F: '$1 == "ompi" && $2 == "version" && $3 == "full" { print $4; exit }')
  ompi_bin=$(ompi_path bindir); ompi_plugins=$(ompi_path pkglibdir); ompi_data=$(ompi_path pkgdatadir); ompi_etc=$(ompi_path sysconfdir)
  for d in "$ompi_bin" "$ompi_plugins" "$ompi_data"; do [ -d "$d" ] || die "Open MPI's folder '$d' (ompi_info --path all) is missing"; done
  mkdir -p "$top/mpi/bin" "$top/mpi/lib/openmpi" "$top/mpi/lib/pmix" "$top/mpi/share" "$top/mpi/etc" || die "mkdir failed"
  cp "$ompi_bin/orterun" "$ompi_bin/orted" "$top/mpi/bin/" || die "copying Open MPI's orterun and orted from $ompi_bin failed"
  unshipped='^(libucp|libuct|libucs|libucm|libpsm|libinfinipath|libibverbs|librdmacm|libfabric|libefa|liboshmem|libmca_common_(ucx|verbs|ofi)|libnl-)'
  left_out=0
  for f in "$ompi_plugins"/mca_*.so; do
    if ldd "$f" 2>/dev/null | awk '{ print $1 }' | grep -Eq "$unshipped"; then left_out=$((left_out + 1)); continue; fi
    cp "$f" "$top/mpi/lib/openmpi/" || die "copying $f failed"
  done
  cp -R "$ompi_data" "$top/mpi/share/openmpi" || die "copying $ompi_data failed"
  if [ -f "$ompi_etc/openmpi-mca-params.conf" ]; then   # its settings without the comments (grep exits 1 when none remain)
    grep -v '^#' "$ompi_etc/openmpi-mca-params.conf" | grep . > "$top/mpi/etc/openmpi-mca-params.conf"
    [ $? -le 1 ] && [ -f "$top/mpi/etc/openmpi-mca-params.conf" ] || die "writing mpi/etc/openmpi-mca-params.conf failed"
  fi
  # PMIx, when Open MPI uses an external one (Debian's libpmix2): its plug-ins and help texts
  pmix_lib=$(for f in "$top"/mpi/lib/openmpi/*.so; do ldd "$f"; done 2>/dev/null | awk '$1 ~ /^libpmix\.so/ { print $3; exit }')
  if [ -n "$pmix_lib" ]; then
    pmix_dir=$(dirname "$(readlink -f "$pmix_lib")")
    [ -d "$pmix_dir/pmix" ] && { cp "$pmix_dir"/pmix/*.so "$top/mpi/lib/pmix/" || die "copying PMIx's plug-ins from $pmix_dir/pmix failed"; }
    [ -d "$pmix_dir/../share/pmix" ] && { cp -R "$pmix_dir/../share/pmix" "$top/mpi/share/pmix" || die "copying PMIx's help texts failed"; }
  fi
  echo "dist: Open MPI $ompi_version's runtime: $(ls "$top/mpi/lib/openmpi" | wc -l) plug-ins ($left_out left out: fabrics and OpenSHMEM), PMIx's $(ls "$top/mpi/lib/pmix" | wc -l)"
fi

# The libraries: ldd lists them transitively. Anything not found (other than CUDA's) is an error.
libs=$work/libs.txt
: > "$libs"
for f in "$top"/libexec/*/* "$top"/mpi/bin/* "$top"/mpi/lib/*/*.so; do
  [ -f "$f" ] || continue
  ldd "$f" > "$work/ldd.txt" 2>&1 || die "ldd $f failed: $(cat "$work/ldd.txt")"
  awk '$2 == "=>" { print $1, $3 }' "$work/ldd.txt" >> "$libs"
done
sort -u "$libs" > "$libs.u"
while read -r soname path; do
  if is_glibc "$soname" || is_cuda "$soname"; then continue; fi
  [ "$path" != "not" ] && [ -f "$path" ] || die "$soname is needed by the binaries but was not found by ldd; install it, then retry"
  [ -e "$top/lib/$soname" ] && continue
  cp -L "$path" "$top/lib/$soname" || die "copying $path failed"
  chmod 755 "$top/lib/$soname"
done < "$libs.u"
# the CUDA libraries the launchers must find on the target: those the CUDA build loads (ldd: transitively)
cuda_libs=""
if [ -n "$cuda_build" ]; then
  cuda_libs=$(ldd "$top/libexec/cuda/ctrain" 2>/dev/null | awk '$2 == "=>" { print $1 }' | while read -r s; do is_cuda "$s" && echo "$s"; done | sort -u | tr '\n' ' ' | sed 's/ $//')
  [ -n "$cuda_libs" ] || die "$cuda_build/ctrain loads no CUDA library: was it built with CUDA=1?"
fi

# RUNPATH: binaries look in ../../lib, libraries next to themselves
for f in "$top"/libexec/*/*; do
  patchelf --set-rpath '$ORIGIN/../../lib' "$f" || die "patchelf --set-rpath on $f failed"
done
for f in "$top"/lib/*; do
  patchelf --set-rpath '$ORIGIN' "$f" || die "patchelf --set-rpath on $f failed"
done
for f in "$top"/mpi/bin/*; do
  [ -f "$f" ] && { patchelf --set-rpath '$ORIGIN/../../lib' "$f" || die "patchelf --set-rpath on $f failed"; }
done
for f in "$top"/mpi/lib/*/*.so; do
  [ -f "$f" ] && { patchelf --set-rpath '$ORIGIN/../../../lib' "$f" || die "patchelf --set-rpath on $f failed"; }
done

# launchers, one per tool of either build
for f in "$top"/libexec/*/*; do
  t=$(basename "$f")
  [ -e "$top/bin/$t" ] && continue
  sed -e "s|@TOOL@|$t|g" -e "s|@CUDA_LIBS@|$cuda_libs|g" scripts/dist-launcher.sh > "$top/bin/$t" || die "writing bin/$t failed"
  chmod 755 "$top/bin/$t"
done
cp scripts/cuda-libs.sh "$top/libexec/cuda-libs.sh" || die "copying scripts/cuda-libs.sh failed"
if [ -d "$top/mpi" ]; then
  sed "s|@OMPI_VERSION@|$ompi_version|g" scripts/dist-mpirun.sh > "$top/bin/mpirun" || die "writing bin/mpirun failed"
  chmod 755 "$top/bin/mpirun"
fi

# what the test suite reads and runs, the PyTorch peers, the GPU check
mkdir -p "$top/tests/golden" || die "mkdir failed"
cp tests/golden/*.h5 "$top/tests/golden/" || die "copying tests/golden failed"
cp tests/*.py tests/tensorboard_venv.sh "$top/tests/" || die "copying tests/*.py and tests/tensorboard_venv.sh failed"
mkdir -p "$top/tests/fixtures" && cp tests/fixtures/* "$top/tests/fixtures/" || die "copying tests/fixtures failed"
mkdir -p "$top/tests/fuzz" && cp -R tests/fuzz/corpus tests/fuzz/hdf5 "$top/tests/fuzz/" ||
    die "copying tests/fuzz/corpus and tests/fuzz/hdf5 failed"   # replayed by the suite fuzz; hdf5/: the file that hangs libhdf5
cp examples/make_corpus.py "$top/examples/" || die "copying examples/make_corpus.py failed"
cp bench/*.py "$top/bench/" || die "copying bench/*.py failed"
cp scripts/gpu-check.sh scripts/cpu-scaling.sh scripts/gpu-e2e.sh scripts/gpu-resume.sh scripts/gpu-store.sh scripts/same-weights.sh scripts/e2e_data.py scripts/cuda-libs.sh "$top/scripts/" || die "copying scripts/gpu-check.sh failed"
sed "s|@VERSION@|$version|g" scripts/dist-README.md > "$top/README.md" || die "writing README.md failed"

# BUILDINFO: where and how it was built, and where each shipped library came from
{
  echo "ctrain $version, built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") ($(uname -m))"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "compiler: $(${CC:-cc} --version 2>/dev/null | head -n 1)"
  echo "glibc: $(ldd --version 2>/dev/null | head -n 1) (the target's must be this or newer)"
  echo "instruction set: x86-64-v2 baseline; hot loops also for x86-64-v3 and v4, chosen at run time (core/hot.h)"
  [ -n "$cuda_build" ] && echo "CUDA build: $(cat "$cuda_build/.cuda-config" 2>/dev/null); loads $cuda_libs from the machine"
  if [ -n "$mpi_lib" ]; then echo "MPI: Open MPI $ompi_version (bin/mpirun, mpi/); NCCL for GPU ranks: loaded from the machine at run time"
  else echo "MPI: none (built without it: one process)"; fi
  echo "shipped libraries (lib/), from:"
  while read -r soname path; do
    if is_glibc "$soname" || is_cuda "$soname"; then continue; fi
    echo "  $soname <- $(readlink -f "$path")"
  done < "$libs.u" | sort -u
} > "$top/BUILDINFO"

mkdir -p "$(dirname "$out")" || die "cannot create $(dirname "$out")"
tar -C "$work" --owner=0 --group=0 --numeric-owner -cf - "$name" | gzip -9 > "$out.tmp" || die "tar | gzip into $out failed"
mv "$out.tmp" "$out" || die "cannot write $out"
echo "dist: $out: $(du -h "$out" | cut -f1) compressed, $(du -sh "$top" | cut -f1) extracted"
echo "dist: lib/ holds $(ls "$top/lib" | wc -l) libraries ($(du -sh "$top/lib" | cut -f1)); CUDA libraries found on the target: ${cuda_libs:-none (CPU-only tarball)}"
