#!/bin/sh
# run.sh - runs every fuzz target for a while and prints one table:
#   usage: tests/fuzz/run.sh BUILD_DIR SECONDS TARGET...
# Each target starts from its committed seeds (tests/fuzz/corpus/TARGET, read
# only) and keeps what it learns in BUILD_DIR/corpus/TARGET, so a second run
# goes on where the first stopped. libFuzzer's own limits: an input that runs
# longer than 25 s, grows the process beyond 2 GB or asks malloc for more than
# 1 GB at once is a crash (the readers must refuse such sizes before allocating).
# A crash leaves its input in BUILD_DIR/crashes/TARGET/ and the log in
# BUILD_DIR/logs/; the script then exits 1. Turn it into a regression case by
# copying the input to tests/fuzz/corpus/TARGET/ (make test replays every file
# there) and fixing the reader.
# A crash or hang whose innermost frame (below the sanitizer's and libFuzzer's) is
# inside libhdf5 is counted apart, in the column "in libhdf5", with its log named:
# Debian's libhdf5 is not ours to fix, and docs/robustness.md records the ones known
# (stack, HDF5 version, what our checks can and cannot do about them). Those do not
# fail the run; everything else does.
set -u
build=$1
seconds=$2
shift 2
nice=${FUZZ_NICE:-10}
status=0
printf '%-11s %10s %8s %8s %8s %8s %10s\n' target executions exec/s cov features crashes 'in libhdf5'
for t in "$@"; do
  bin="$build/fuzz/fuzz_$t"
  work="$build/corpus/$t"
  crashes="$build/crashes/$t"
  log="$build/logs/fuzz_$t.log"
  mkdir -p "$work" "$crashes" "$build/logs"
  seeds=tests/fuzz/corpus/$t
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
  LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=tests/fuzz/lsan.supp:print_suppressions=0}" \
    nice -n "$nice" "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "$seeds" > "$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | sed 's/cov: //')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | sed 's/ft: //')
  # the innermost frame that is neither the sanitizer's, libFuzzer's nor libc's signal handling
  inner=$(grep -E '^ +#[0-9]+ ' "$log" | grep -v -E '__sanitizer|__asan|__ubsan|__interceptor_|fuzzer::|LLVMFuzzer|libc\.so|\(<unknown module>\)' | head -n 1)
  ours=0; hdf5=0
  if [ $rc -ne 0 ]; then
    case "$inner" in *libhdf5*) hdf5=1 ;; *) ours=1 ;; esac
  fi
  printf '%-11s %10s %8s %8s %8s %8s %10s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$ours" "$hdf5"
  if [ $rc -ne 0 ]; then
    [ $ours -eq 1 ] && status=1
    echo "  fuzz_$t stopped with status $rc$([ $hdf5 -eq 1 ] && echo ' inside libhdf5'); its log: $log"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz .*: broken promise|.*runtime error|artifact_prefix)' "$log" | head -n 5 | sed 's/^/  /'
    [ $hdf5 -eq 1 ] && echo "  $(echo "$inner" | sed 's/ *(BuildId.*//; s/^ *//')"
  fi
done
[ $status -eq 0 ] && echo "fuzz: no crash in $# targets x $seconds s" || echo "fuzz: crashes found (inputs under $build/crashes/)"
exit $status
