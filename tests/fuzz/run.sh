#!/bin/sh
# run.sh - runs every fuzz target for a while and prints one table:
#   usage: tests/fuzz/run.sh BUILD_DIR SECONDS TARGET...
# Each target starts from its committed seeds (tests/fuzz/corpus/TARGET, read
# only) and keeps what it learns in BUILD_DIR/corpus/TARGET, so a second run
# goes on where the first stopped. libFuzzer's own limits: an input that runs
# longer than 10 s, grows the process beyond 2 GB or asks malloc for more than
# 1 GB at once is a crash (the readers must refuse such sizes before allocating).
# A crash leaves its input in BUILD_DIR/crashes/TARGET/ and the log in
# BUILD_DIR/logs/; the script then exits 1. Turn it into a regression case by
# copying the input to tests/fuzz/corpus/TARGET/ (make test replays every file
# there) and fixing the reader.
# A crash or hang whose innermost frame (below the sanitizer's and libFuzzer's) is
# inside libhdf5 is counted apart, in the column "in libhdf5", with its stack's
# innermost frame printed: Debian's libhdf5 is not ours to fix, and
# docs/robustness.md records the ones known (stack, HDF5 version, what our checks
# can and cannot do about them). Those do not fail the run: the target starts
# again for the rest of its time. Everything else stops the target and fails the run.
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
  mkdir -p "$work" "$crashes" "$build/logs"
  seeds=tests/fuzz/corpus/$t
  start=$(date +%s)
  execs=0; ours=0; hdf5=0; part=0; cov=""; ft=""; notes=""
  while :; do
    left=$((seconds - ($(date +%s) - start)))
    [ $left -ge 1 ] || break
    part=$((part + 1))
    log="$build/logs/fuzz_$t.$part.log"
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=tests/fuzz/lsan.supp:print_suppressions=0}" \
      nice -n "$nice" "$bin" -max_total_time="$left" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "$seeds" > "$log" 2>&1
    rc=$?
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -z "$n" ] && n=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#')
    execs=$((execs + ${n:-0}))
    c=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | sed 's/cov: //'); [ -n "$c" ] && cov=$c
    f=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | sed 's/ft: //'); [ -n "$f" ] && ft=$f
    [ $rc -eq 0 ] && break
    # the innermost frame that is neither the sanitizer's, libFuzzer's nor libc's signal handling
    inner=$(grep -E '^ +#[0-9]+ ' "$log" | grep -v -E '__sanitizer|__asan|__ubsan|__interceptor_|fuzzer::|LLVMFuzzer|libc\.so|\(<unknown module>\)' \
      | grep -v -E ' in (malloc|calloc|realloc|free|aligned_alloc|posix_memalign|memcpy|memmove|memset) \(' | head -n 1)
    what=$(grep -E '^(==[0-9]+== ?ERROR|SUMMARY|fuzz .*: broken promise|.*runtime error)' "$log" | head -n 2 | sed 's/ *(BuildId[^)]*)//g; s/^/    /')
    case "$inner" in
      *libhdf5*)
        hdf5=$((hdf5 + 1))
        where=$(echo "$inner" | sed 's/ *(BuildId.*//; s/^ *#[0-9]* 0x[0-9a-f]* *//; s/^in //')
        case "$notes" in
          *"$where"*) ;;   # the same place again: once is enough
          *) notes="$notes
  in libhdf5: $where (first: $log)
$what" ;;
        esac ;;
      *)
        ours=$((ours + 1)); status=1
        notes="$notes
  fuzz_$t stopped with status $rc ($log)
$what"
        break ;;
    esac
  done
  elapsed=$(( $(date +%s) - start )); [ $elapsed -ge 1 ] || elapsed=1
  printf '%-11s %10s %8s %8s %8s %8s %10s\n' "$t" "$execs" "$((execs / elapsed))" "${cov:-?}" "${ft:-?}" "$ours" "$hdf5"
  [ -n "$notes" ] && printf '%s\n' "$notes" | sed '1d'
done
if [ $status -eq 0 ]; then echo "fuzz: no crash in ctrain in $# targets x $seconds s"
else echo "fuzz: crashes found in ctrain (inputs under $build/crashes/)"; fi
exit $status
