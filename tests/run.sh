#!/bin/sh
# run.sh - runs the whole test suite and prints one closing line for all of it.
#   usage: tests/run.sh BUILD_DIR CTRAIN_BINARY
# The C test runner (BUILD_DIR/ctrain_tests) prints a PASS/FAIL line per case and
# its own "N passed, N failed"; the command-line tests are cases of its `cli`
# suite. This script adds nothing but the exit status and the final line.
set -u
build=$1
ctrain=$2
export CTRAIN_BIN="$ctrain"
log=$(mktemp)
# the runner's own exit status, not tee's (POSIX sh has no pipefail)
{ "$build/ctrain_tests"; echo $? > "$log.rc"; } | tee "$log"
rc=$(cat "$log.rc" 2>/dev/null || echo 1)
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
rm -f "$log" "$log.rc"
if [ -z "$summary" ]; then
  echo "test runner crashed before its summary (exit $rc)"
  echo "0 passed, 1 failed"
  exit 1
fi
[ $rc -eq 0 ] || exit 1
exit 0
