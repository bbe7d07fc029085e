#!/bin/sh
# check-deps.sh - the layers of ctrain, checked on every #include, and the line
# between the public API and the internals.
#
# 1. The layers:
#
#   core  <-  layers  <-  models  <-  train  <-  catalog  <-  cli
#   io    on core only;   comm on core only;   cuda beside layers (core, layers, comm)
#
# A file may include its own directory and the directories its layer may see;
# anything else (an include that goes upward or sideways) is printed with its
# file and line. Quoted includes count, and so do angle-bracket ones that name
# a folder of ctrain (<core/params.h>).
#
# The libraries' headers, included with angle brackets, have owners too: only the
# folder that wraps a library includes its headers, and everything else goes
# through that folder's interface.
#
#   CUDA, cuBLAS, cuDNN, NVML  <cuda*.h> <cublas*.h> <cudnn*.h> <nvml*.h>   cuda/
#   NCCL                       <nccl*.h>                                   cuda/ (cuda/nccl.c)
#   MPI                        <mpi.h>                                     comm/ (comm/mpi.c)
#   HDF5                       <hdf5*.h> <H5*.h>                           io/, and train/, catalog/ and cli/
#
# HDF5's types are part of io/'s interface (io/h5.h hands out hid_t), so train/
# (checkpoints, a task's own state), catalog/ (exports) and cli/ (the library's version in
# `ctrain info` and `ctrain time`) use them too; the other layers may not.
# A library header outside its owners is printed with its file, line and owners.
#
# tests/, bench/ and examples/ may use everything.
#
# 2. The public API: include/ctrain.h and every header it reaches
# (scripts/public-headers.sh, which `make install` installs) must not reach a
# header listed as private in scripts/private-headers.txt, nor one of cli/;
# each private one is printed with the chain of includes that reaches it.
# Every header of core/ layers/ io/ comm/ models/ train/ catalog/ cuda/ must be one or the
# other, and every listed one must exist.
#
# Anything found is printed and the script exits 1. `make check-deps` runs it,
# and so does `make test`.
set -u
cd "$(dirname "$0")/.." || exit 2
LAYERS="core io comm layers cuda models train catalog cli"
allowed() {   # allowed LAYER: the directories a layer may include
  case "$1" in
    core)   echo "core" ;;
    io)     echo "core io" ;;
    comm)   echo "core comm" ;;
    layers) echo "core layers" ;;
    cuda)   echo "core layers comm cuda" ;;
    models) echo "core layers models" ;;
    train)  echo "core io layers comm models train" ;;
    catalog) echo "core io layers comm models train catalog" ;;
    cli)    echo "core io layers comm cuda models train catalog cli" ;;
  esac
}
owners() {   # owners HEADER: "LIBRARY: the folders that may include it", or nothing for other headers
  case "$1" in
    cuda*.h|cublas*.h|cudnn*.h|nvml*.h) echo "CUDA: cuda" ;;
    nccl*.h)                            echo "NCCL: cuda" ;;
    mpi.h)                              echo "MPI: comm" ;;
    hdf5*.h|H5*.h)                      echo "HDF5: io train catalog cli" ;;
  esac
}
report=/tmp/ctrain-check-deps.$$
for layer in $LAYERS; do
  ok=$(allowed "$layer")
  for f in "$layer"/*.c "$layer"/*.h "$layer"/*.cu "$layer"/*.cuh; do
    [ -f "$f" ] || continue
    # "dir/file.h" and <dir/file.h> of ctrain's folders: the layers
    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("[a-z_]+/|<(core|layers|io|comm|models|train|catalog|cuda|cli)/)' "$f" | while IFS= read -r line; do
      dir=$(printf '%s\n' "$line" | sed -E 's/^[0-9]+:[^"<]*["<]([a-z_]+)\/.*/\1/')
      case " $ok " in *" $dir "*) ;; *) echo "$f:${line%%:*}: $layer may not include $dir/ ($(printf '%s' "${line#*:}" | tr -s ' '))" ;; esac
    done
    # <header.h>: the libraries' owners
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' "$f" | while IFS= read -r line; do
      hdr=$(printf '%s\n' "$line" | sed 's/^[0-9]*:[^<]*<\([^>]*\)>.*/\1/')
      own=$(owners "$hdr")
      [ -n "$own" ] || continue
      dirs=${own#*: }
      case " $dirs " in *" $layer "*) ;; *)
        echo "$f:${line%%:*}: <$hdr> is ${own%%:*}'s, which only $(printf '%s/ ' $dirs | sed 's/ $//; s/ /, /g') may include" ;;
      esac
    done
  done
done > $report
if [ -s $report ]; then
  cat $report
  echo "check-deps: $(wc -l < $report) include(s) against the layers (core <- layers <- models <- train <- catalog <- cli; io and comm on core; cuda beside layers) or the libraries' owners"
  bad=1
else
  echo "check-deps: every include follows the layers (core <- layers <- models <- train <- catalog <- cli; io and comm on core; cuda beside layers) and the libraries' owners (CUDA, NCCL in cuda/; MPI in comm/; HDF5 in io/, train/, catalog/, cli/)"
  bad=0
fi

# ---- 2. the public API reaches no private header ----
list=scripts/private-headers.txt
private=$(sed -e 's/#.*//' "$list" | awk 'NF { print $1 }')
private_words=" $(echo $private) "
if ! public=$(sh scripts/public-headers.sh -v); then   # it said which include is missing
  echo "check-deps: the public headers cannot be listed (above)"
  rm -f $report
  exit 1
fi
chain() {   # chain HEADER: HEADER <- the header that includes it <- ... <- ctrain.h
  printf '%s\n' "$public" | awk -v h="$1" '{ up[$1] = $2 } END { s = h; while (h in up) { h = up[h]; s = s " <- " h } print s }'
}
is_public() { printf '%s\n' "$public" | awk -v h="$1" '$1 == h { found = 1 } END { exit !found }'; }
{
  for h in $private; do
    [ -f "$h" ] || echo "$list: $h is not in the tree (remove it from the list)"
    is_public "$h" && echo "include/ctrain.h reaches the private header $h: $(chain "$h")"
  done
  printf '%s\n' "$public" | awk '$1 ~ /^cli\// { print $1 }' | while read -r h; do
    echo "include/ctrain.h reaches $h, the command line's own header: $(chain "$h")"
  done
  for h in core/*.h layers/*.h io/*.h comm/*.h models/*.h train/*.h catalog/*.h cuda/*.h cuda/*.cuh; do
    [ -f "$h" ] || continue
    is_public "$h" && continue
    case "$private_words" in *" $h "*) continue ;; esac
    echo "$h is neither public (reached from include/ctrain.h) nor listed in $list: list it there, saying why, or include it from a public header"
  done
} > $report
if [ -s $report ]; then
  cat $report
  echo "check-deps: $(wc -l < $report) problem(s) with the public API (include/ctrain.h and what it reaches against $list)"
  bad=1
else
  echo "check-deps: include/ctrain.h reaches $(printf '%s\n' "$public" | grep -c .) public headers and none of the $(echo $private | wc -w) private ones"
fi
rm -f $report
exit $bad
