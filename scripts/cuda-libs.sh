# cuda-libs.sh - finds this machine's CUDA runtime, cuBLAS and cuDNN libraries.
#
# Sourced (POSIX sh) by the launchers of the `make dist` tarball (bin/*, installed
# there as libexec/cuda-libs.sh) and by scripts/gpu-check.sh. ctrain ships every
# library it loads except glibc and these: they belong to the machine (its driver
# and toolkit, or PyTorch's Python packages), and the loader needs them before
# main(), so a launcher finds them and puts their directories on LD_LIBRARY_PATH.
#
#   ct_cuda_find "libcudart.so.13 libcublas.so.13 ..."
#     looks for each library, in this order:
#       1. only the directories of $CTRAIN_CUDA_LIBS (colon-separated), when it is set;
#       2. otherwise $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64,
#          /usr/local/cuda/targets/x86_64-linux/lib, /usr/local/cuda-*/lib64 (newest
#          first), /usr/lib/x86_64-linux-gnu, /usr/lib64, and then the lib/ folders of
#          Python's nvidia packages (nvidia/cudnn/lib, nvidia/cublas/lib, nvidia/cu13/lib,
#          ...): those of `python3` on PATH and of /usr/bin/python3 when Python is
#          there (asked only if something is still missing), and the usual
#          site-packages folders (virtualenv, conda, ~/.local, /usr/local/lib) without it.
#     and sets
#       CT_CUDA_FOUND    lines "library directory" for the libraries found;
#       CT_CUDA_MISSING  the libraries not found (space-separated; empty when all are);
#       CT_CUDA_LDPATH   the directories to put on LD_LIBRARY_PATH (colon-separated),
#                        leaving out the system's own library folders, which the
#                        loader searches anyway (and which hold other copies of the
#                        libraries ctrain ships).
#       CT_CUDA_SEARCHED the directories searched, one per line.

ct_cuda_nl='
'

# The loader's default folders: never put on LD_LIBRARY_PATH (they would take
# precedence over the libraries shipped in lib/).
ct_cuda_is_system_dir() {
  case "$1" in
    /lib|/lib/|/usr/lib|/usr/lib/|/lib64|/lib64/|/usr/lib64|/usr/lib64/) return 0 ;;
    /lib/x86_64-linux-gnu|/lib/x86_64-linux-gnu/|/usr/lib/x86_64-linux-gnu|/usr/lib/x86_64-linux-gnu/) return 0 ;;
  esac
  return 1
}

# Candidate folders without asking Python, one per line, in search order.
ct_cuda_dirs_fixed() {
  if [ -n "${CTRAIN_CUDA_LIBS:-}" ]; then
    printf '%s\n' "$CTRAIN_CUDA_LIBS" | tr ':' '\n' | sed '/^$/d'
    return 0
  fi
  [ -n "${CUDA_HOME:-}" ] && echo "$CUDA_HOME/lib64"
  [ -n "${CUDA_PATH:-}" ] && echo "$CUDA_PATH/lib64"
  echo /usr/local/cuda/lib64
  echo /usr/local/cuda/targets/x86_64-linux/lib
  for d in /usr/local/cuda-*/lib64; do [ -d "$d" ] && echo "$d"; done | sort -r -t- -k2 -V 2>/dev/null
  echo /usr/lib/x86_64-linux-gnu
  echo /usr/lib64
  for sp in ${VIRTUAL_ENV:+"$VIRTUAL_ENV"/lib/python3*/site-packages} \
            ${CONDA_PREFIX:+"$CONDA_PREFIX"/lib/python3*/site-packages} \
            ${HOME:+"$HOME"/.local/lib/python3*/site-packages} \
            /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
            /usr/lib/python3/dist-packages /usr/lib/python3*/site-packages /usr/lib64/python3*/site-packages \
            /opt/conda/lib/python3*/site-packages /opt/venv/lib/python3*/site-packages; do
    for d in "$sp"/nvidia/*/lib; do [ -d "$d" ] && echo "$d"; done
  done
  return 0
}

# The lib/ folders of the nvidia packages that `python3` on PATH and /usr/bin/python3 import.
ct_cuda_dirs_python() {
  [ -n "${CTRAIN_CUDA_LIBS:-}" ] && return 0
  ct_to=""
  command -v timeout >/dev/null 2>&1 && ct_to="timeout 20"
  for py in "$(command -v python3 2>/dev/null)" /usr/bin/python3; do
    [ -n "$py" ] && [ -x "$py" ] || continue
    $ct_to "$py" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null | while IFS= read -r p; do
      for d in "$p"/*/lib; do [ -d "$d" ] && echo "$d"; done
    done
  done
  return 0
}

# ct_cuda_lookup LIBS DIRS: fills CT_CUDA_FOUND, CT_CUDA_MISSING from the folders DIRS (one per line).
ct_cuda_lookup() {
  CT_CUDA_MISSING=""
  for ct_lib in $1; do
    ct_hit=""
    ct_save_ifs=$IFS; IFS=$ct_cuda_nl
    for ct_d in $2; do
      if [ -e "$ct_d/$ct_lib" ]; then ct_hit=$ct_d; break; fi
    done
    IFS=$ct_save_ifs
    if [ -n "$ct_hit" ]; then
      case "$ct_cuda_nl$CT_CUDA_FOUND" in
        *"$ct_cuda_nl$ct_lib "*) ;;
        *) CT_CUDA_FOUND="$CT_CUDA_FOUND$ct_lib $ct_hit$ct_cuda_nl" ;;
      esac
    else
      CT_CUDA_MISSING="${CT_CUDA_MISSING:+$CT_CUDA_MISSING }$ct_lib"
    fi
  done
}

ct_cuda_find() {
  CT_CUDA_FOUND=""
  CT_CUDA_LDPATH=""
  CT_CUDA_SEARCHED=$(ct_cuda_dirs_fixed | awk '!seen[$0]++')
  ct_cuda_lookup "$1" "$CT_CUDA_SEARCHED"
  if [ -n "$CT_CUDA_MISSING" ]; then
    ct_py=$(ct_cuda_dirs_python | awk '!seen[$0]++')
    if [ -n "$ct_py" ]; then
      CT_CUDA_SEARCHED=$(printf '%s\n%s\n' "$CT_CUDA_SEARCHED" "$ct_py" | awk 'NF && !seen[$0]++')
      ct_cuda_lookup "$CT_CUDA_MISSING" "$ct_py"
    fi
  fi
  ct_save_ifs=$IFS; IFS=$ct_cuda_nl
  for ct_line in $CT_CUDA_FOUND; do
    ct_d=${ct_line#* }
    ct_cuda_is_system_dir "$ct_d" && continue
    case ":$CT_CUDA_LDPATH:" in
      *":$ct_d:"*) ;;
      *) CT_CUDA_LDPATH="${CT_CUDA_LDPATH:+$CT_CUDA_LDPATH:}$ct_d" ;;
    esac
  done
  IFS=$ct_save_ifs
  return 0
}
