#!/bin/sh
# run.sh - runs every fuzz target for a while and prints one table:
#   usage: tests/fuzz/run.sh BUILD_DIR SECONDS TARGET...
# Each target starts from its committed seeds (tests/fuzz/corpus/TARGET, read
# only) and keeps what it learns in BUILD_DIR/corpus/TARGET, so a second run
# goes on where the first stopped. libFuzzer's own limits: an input that runs
# longer than 25 s, grows the process beyond 2 GB or asks malloc for more than
# 1 GB at once is a crash (the readers must refuse such sizes before allocating).
# A crash leaves its input in BUILD_DIR/crashes/TARGET/ and the log beside it;
# the script then exits 1. Turn it into a regression case by copying the input to
# tests/fuzz/corpus/TARGET/ (make test replays every file there) and fixing the reader.
set -u
build=$1
seconds=$2
shift 2
nice=${FUZZ_NICE:-10}
status=0
printf '%-11s %10s %8s %8s %8s  %s\n' target executions exec/s cov features crashes
for t in "$@"; do
  bin="$build/fuzz/fuzz_$t"
  work="$build/corpus/$t"
  crashes="$build/crashes/$t"
  log="$build/logs/fuzz_$t.log"
  mkdir -p "$work" "$crashes" "$build/logs"
  seeds=tests/fuzz/corpus/$t
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    nice -n "$nice" "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "$seeds" > "$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | sed 's/cov: //')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | sed 's/ft: //')
  found=$(ls "$crashes" 2>/dev/null | grep -c -E '^(crash|leak|oom|timeout|slow-unit)-' || true)
  printf '%-11s %10s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$found"
  if [ $rc -ne 0 ]; then
    status=1
    echo "  fuzz_$t stopped with status $rc; its log: $log"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz .*: broken promise|.*runtime error)' "$log" | head -n 5 | sed 's/^/  /'
  fi
done
[ $status -eq 0 ] && echo "fuzz: no crash in $# targets x $seconds s" || echo "fuzz: crashes found (inputs under $build/crashes/)"
exit $status
