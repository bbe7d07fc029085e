#!/bin/sh
# check-deps.sh - the layers of ctrain, checked on every #include:
#
#   core  <-  layers  <-  models  <-  train  <-  cli
#   io    on core only;   comm on core only;   cuda beside layers (core, layers, comm)
#
# A file may include its own directory and the directories its layer may see;
# anything else (an include that goes upward or sideways) is printed with its
# file and line, and the script exits 1. tests/, bench/ and examples/ may use
# everything. `make check-deps` runs it, and so does `make test`.
set -u
cd "$(dirname "$0")/.." || exit 2
allowed() {   # allowed LAYER: the directories a layer may include
  case "$1" in
    core)   echo "core" ;;
    io)     echo "core io" ;;
    comm)   echo "core comm" ;;
    layers) echo "core layers" ;;
    cuda)   echo "core layers comm cuda" ;;
    models) echo "core layers models" ;;
    train)  echo "core io layers comm models train" ;;
    cli)    echo "core io layers comm cuda models train cli" ;;
  esac
}
bad=0
for layer in core io comm layers cuda models train cli; do
  ok=$(allowed "$layer")
  for f in "$layer"/*.c "$layer"/*.h "$layer"/*.cu "$layer"/*.cuh; do
    [ -f "$f" ] || continue
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/' "$f" | while IFS= read -r line; do
      dir=$(printf '%s\n' "$line" | sed 's/^[0-9]*:[^"]*"\([a-z_]*\)\/.*/\1/')
      case " $ok " in *" $dir "*) ;; *) echo "$f:${line%%:*}: $layer may not include $dir/ ($(printf '%s' "${line#*:}" | tr -s ' '))" ;; esac
    done
  done
done > /tmp/ctrain-check-deps.$$
if [ -s /tmp/ctrain-check-deps.$$ ]; then
  cat /tmp/ctrain-check-deps.$$
  echo "check-deps: $(wc -l < /tmp/ctrain-check-deps.$$) include(s) against the layers (core <- layers <- models <- train <- cli; io and comm on core; cuda beside layers)"
  bad=1
else
  echo "check-deps: every include follows the layers (core <- layers <- models <- train <- cli; io and comm on core; cuda beside layers)"
fi
rm -f /tmp/ctrain-check-deps.$$
exit $bad
