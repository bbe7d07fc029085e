#!/bin/sh
# @TOOL@ - launcher of the relocatable ctrain tarball (`make dist`; this file is
# made from scripts/dist-launcher.sh). It finds the machine's CUDA libraries
# (libexec/cuda-libs.sh: $CTRAIN_CUDA_LIBS, /usr/local/cuda*, the system, Python's
# nvidia packages), puts their folders on LD_LIBRARY_PATH and runs the CUDA build
# of @TOOL@ from libexec/cuda/. Every other library comes from the tarball's lib/
# (through the binaries' $ORIGIN-relative RUNPATH). When the CUDA libraries are
# not all there, it says so once on stderr and runs the CPU-only build from
# libexec/cpu/ instead. CTRAIN_CPU_ONLY=1 picks the CPU-only build without a word.
# Under mpirun it also looks for NCCL (libnccl.so.2, which GPU ranks load at run
# time: the system, the CUDA toolkit, PyTorch's nvidia/nccl package) and puts its
# folder on LD_LIBRARY_PATH when found; a job that needs it and lacks it says so.
# The test runner (ctrain_tests) runs in the tarball's root, where it finds
# tests/golden/ and the helper scripts, with CTRAIN_BIN set to the same build of ctrain.
set -u
tool=@TOOL@
need="@CUDA_LIBS@"

self=$0
if r=$(readlink -f -- "$0" 2>/dev/null) && [ -n "$r" ]; then self=$r; fi
root=$(cd "$(dirname -- "$self")/.." 2>/dev/null && pwd -P) || {
  echo "$tool: cannot find the tarball's folder from $0; run it as DIR/bin/$tool" >&2; exit 127; }
if ! . "$root/libexec/cuda-libs.sh"; then
  echo "$tool: $root/libexec/cuda-libs.sh is missing; extract the whole tarball again" >&2; exit 127
fi

variant=cpu
if [ -x "$root/libexec/cuda/$tool" ] && [ "${CTRAIN_CPU_ONLY:-0}" = 0 ]; then
  case "${CTRAIN_LAUNCHED:-}" in
    cuda) variant=cuda ;;   # a parent launcher found the libraries and set LD_LIBRARY_PATH
    cpu) ;;                 # ... or found none and has said so
    *)
      ct_cuda_find "$need"
      if [ -z "$CT_CUDA_MISSING" ]; then
        variant=cuda
        if [ -n "${OMPI_COMM_WORLD_SIZE:-}${PMI_SIZE:-}${PMIX_RANK:-}" ] && [ -z "${CTRAIN_NCCL:-}" ]; then
          ct_need_ldpath=$CT_CUDA_LDPATH
          ct_cuda_find libnccl.so.2   # optional: a rank on the CPU never loads it
          ct_nccl_dir=$CT_CUDA_LDPATH   # empty when not found or in a system folder
          CT_CUDA_LDPATH=$ct_need_ldpath
          case ":$CT_CUDA_LDPATH:" in
            *":$ct_nccl_dir:"*) ;;
            *) CT_CUDA_LDPATH=${CT_CUDA_LDPATH:+$CT_CUDA_LDPATH:}$ct_nccl_dir ;;
          esac
        fi
        if [ -n "$CT_CUDA_LDPATH" ]; then
          LD_LIBRARY_PATH="$CT_CUDA_LDPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
          export LD_LIBRARY_PATH
        fi
      else
        echo "$tool: the CUDA libraries were not found (missing: $CT_CUDA_MISSING); running the CPU-only build." \
             "To use the GPU, set CTRAIN_CUDA_LIBS to the folders that hold them (DIR:DIR)." >&2
      fi ;;
  esac
fi
CTRAIN_LAUNCHED=$variant
export CTRAIN_LAUNCHED
[ -x "$root/libexec/$variant/$tool" ] || { echo "$tool: $root/libexec/$variant/$tool is missing; extract the whole tarball again" >&2; exit 127; }
if [ "$tool" = ctrain_tests ]; then
  cd "$root" || exit 127
  CTRAIN_BIN=$root/libexec/$variant/ctrain
  case $CTRAIN_BIN in   # the tests hand it to the shell: quote a path with spaces or the like
    *[!A-Za-z0-9_./+=:,@%-]*) CTRAIN_BIN="'$(printf '%s' "$CTRAIN_BIN" | sed "s/'/'\\\\''/g")'" ;;
  esac
  export CTRAIN_BIN
fi
exec "$root/libexec/$variant/$tool" "$@"
