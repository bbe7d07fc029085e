#!/bin/sh
# dist-check.sh - checks a `make dist` tarball the way a machine without ctrain's
# build dependencies would use it (`make dist-check`; about 5 minutes on 2 cores).
#
#   usage: scripts/dist-check.sh dist/ctrain-VERSION-linux-x86_64.tar.gz
#
# It extracts the tarball into an empty folder under /tmp and, with a bare
# environment (env -i PATH=/usr/bin:/bin HOME=/tmp, run from /), checks that
#   1. every shipped binary and library has an $ORIGIN-relative RUNPATH and nothing else;
#   2. no binary uses an AVX instruction outside the run-time dispatched clones
#      (core/hot.h): the baseline is portable x86-64-v2;
#   3. bin/ctrain info runs, and with CTRAIN_CUDA_LIBS=/usr/local/cuda/lib64 (as on a
#      GPU machine) loads nothing from the system's library folders but glibc and the
#      CUDA libraries: by ldd, and by LD_DEBUG=libs while running the GPU test suite;
#   4. the whole test suite passes from the extracted copy (GPU cases SKIP here);
#   5. without CUDA libraries the launchers fall back to the CPU-only build, say so
#      once, and its tests pass (a subset);
#   6. scripts/gpu-check.sh on a machine without a GPU stops quickly, says so, exits 3;
#   7. its end-to-end step (scripts/gpu-e2e.sh) from the extracted copy, on the CPU: every
#      model trained and evaluated twice from the same weights, on data it makes;
#      and its exact-resume step (scripts/gpu-resume.sh) on the CPU on the same data, and its
#      store step (scripts/gpu-store.sh) on a small store;
#   8. the tarball's own Open MPI (bin/mpirun) runs the data-parallel suite with the
#      system's Open MPI hidden (a private mount namespace: root and unshare -m), loading
#      nothing from the system but glibc and the CUDA libraries (LD_DEBUG=libs).
# Prints one line per check and exits non-zero if any failed.
set -u
tarball=${1:-}
[ -n "$tarball" ] && [ -f "$tarball" ] || { echo "usage: scripts/dist-check.sh dist/ctrain-VERSION-linux-x86_64.tar.gz (make dist builds it)" >&2; exit 2; }
tarball=$(cd "$(dirname "$tarball")" && pwd -P)/$(basename "$tarball")
tmp=$(mktemp -d /tmp/ctrain-dist-check.XXXXXX) || { echo "dist-check: mktemp failed" >&2; exit 2; }
chmod 755 "$tmp"   # the read-only-directory test runs ctrain as another user
tar -C "$tmp" -xzf "$tarball" || { echo "dist-check: cannot extract $tarball" >&2; exit 2; }
root=$(echo "$tmp"/ctrain-*)
[ -x "$root/bin/ctrain" ] || { echo "dist-check: $tarball holds no ctrain-*/bin/ctrain" >&2; exit 2; }
cuda_dir=${DIST_CHECK_CUDA_LIBS:-/usr/local/cuda/lib64}
fails=0
ok()   { echo "ok   $*"; }
bad()  { echo "FAIL $*"; fails=$((fails + 1)); }
bare() { (cd / && env -i PATH=/usr/bin:/bin HOME=/tmp "$@"); }
echo "dist-check: $tarball ($(du -h "$tarball" | cut -f1)) extracted into $root"

# 1. RUNPATH
runpath_bad=""
for f in "$root"/libexec/*/* "$root"/lib/* "$root"/mpi/bin/* "$root"/mpi/lib/*/*.so; do
  case $f in *.sh) continue ;; esac
  [ -f "$f" ] || continue
  rp=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\1 \2/p')
  case "$f" in
    "$root"/libexec/*|"$root"/mpi/bin/*) want='RUNPATH $ORIGIN/../../lib' ;;
    "$root"/mpi/lib/*) want='RUNPATH $ORIGIN/../../../lib' ;;
    *) want='RUNPATH $ORIGIN' ;;
  esac
  [ "$rp" = "$want" ] || runpath_bad="$runpath_bad $(basename "$f")=[$rp]"
done
if [ -z "$runpath_bad" ]; then ok "RUNPATH: \$ORIGIN/../../lib on the binaries, \$ORIGIN on the $(ls "$root/lib" | wc -l) libraries$([ -d "$root/mpi" ] && echo ", \$ORIGIN/../../../lib on Open MPI's $(ls "$root"/mpi/lib/*/*.so | wc -l) plug-ins")"
else bad "RUNPATH not as expected:$runpath_bad"; fi

# 2. portable instruction set: AVX registers only inside the .arch_x86_64_v3/v4 clones
#    and the functions written for one instruction set with target("..."), which run
#    only after a cpuid check: the FMA peak loops (core/peak.c, ct_fma_isa_best), the
#    packed kernel's AVX-512 and AVX2 versions (layers/gemm_packed.c, ct_kernels_get) and
#    the LSTM's fused step, its products alone and its cells, forward and backward
#    (layers/lstm_fused.c, ct_lstm_fused_ok), the bf16 conversions eight at a time and 32 at
#    a time with AVX512-BF16 (core/bf16.c, ct_bf16_vectorised) and the
#    AVX512-BF16 product and its peak loop (layers/gemm_bf16.c, ct_kernels_bf16), and the
#    tile model's fast rows and the transposed bf16 packing's 8 x 8 gather (layers/gemm_bf16.c,
#    dp_tile_avx2 and gather_avx2: only where ct_kernels_get() is AVX2 or wider), and the
#    one-channel convolution (layers/conv2d_c1.c: only where ct_conv2d_dims_make set direct1,
#    on ctrain's AVX-512 kernels), and batchnorm's sums in double (layers/batchnorm.c: only
#    where ct_kernels_get() is AVX-512), and the bf16 direct convolution's streamed copy of an image's
#    result (conv2d_c1.c's copy, called where ct_kernels_get() is AVX-512), and dropout's
#    16 draws at a time (layers/dropout.c, keep_avx512: where ct_kernels_get() is AVX-512 and
#    the CPU has AVX512DQ)
avx_dispatched='run_sum_avx512|run_sumsq_dev_avx512|run_sums2_avx512|ct_conv2d_c1_forward_image|ct_conv2d_c1_backward_image|ct_conv2d_c1_pad_image|ct_conv2d_c1_dw_plane|c1_pad_plane|ct_conv2d_c1_stream_copy|fma_avx512|fma_avx2|gemm_packed_avx512|tile_rest|strip2_whole|strip2_part|fused_step_sigmoid|fused_step_hard|fused_step_sigmoid_stream|fused_step_hard_stream|fused_products|cell_sigmoid|cell_hard|cell_sigmoid_stream|cell_hard_stream|cell_sigmoid_stream_cvt|cell_backward_sigmoid|cell_backward_sigmoid_ds|cell_backward_hard|cell_backward_hard_ds|narrow_avx2|narrow_avx512bf16|widen_avx2|gemm_avx512bf16|avx512bf16_peak_rounds|dp_tile_avx2|gather_avx2|normalise_avx512|din_avx512|pool2_plane_avx512|pool2_plane_backward_avx512|first_lanes|keep_avx512'
avx_bad=""
for f in "$root"/libexec/*/*; do
  case $f in *.sh) continue ;; esac
  # GCC's specialised copies of those functions (name.constprop.N, .isra.N, .part.N) count as them
  n=$(objdump -d --no-show-raw-insn "$f" 2>/dev/null | awk -v ok="^<($avx_dispatched)([.](constprop|isra|part)[.][0-9]+)*>:\$" '
    /^[0-9a-f]+ <.*>:$/ { fn = $2; next }
    /%[yz]mm[0-9]/ && fn !~ /arch_x86_64_v[34]/ && fn !~ ok { n++; if (!(fn in seen)) { seen[fn] = 1; print fn > "/dev/stderr" } }
    END { print n + 0 }' 2>"$tmp/avx.txt")
  [ "$n" = 0 ] || avx_bad="$avx_bad $(basename "$(dirname "$f")")/$(basename "$f"):$n($(tr '\n' ' ' < "$tmp/avx.txt"))"
done
if [ -z "$avx_bad" ]; then ok "instruction set: no AVX/AVX-512 outside the run-time dispatched clones and kernels"
else bad "AVX instructions in the portable baseline:$avx_bad"; fi

# 3. ctrain info; what is loaded from where
if bare CTRAIN_CUDA_LIBS="$cuda_dir" "$root/bin/ctrain" info > "$tmp/info.txt" 2>&1 && grep -q 'CUDA backend compiled in' "$tmp/info.txt"; then
  ok "bin/ctrain info (CUDA build, CTRAIN_CUDA_LIBS=$cuda_dir): $(grep '^BLAS' "$tmp/info.txt")"
else bad "bin/ctrain info failed or did not use the CUDA build: $(cat "$tmp/info.txt")"; fi
# allowed from outside the tarball: glibc's own libraries and the CUDA ones
foreign() {
  grep -v -e "^$root/" | while read -r p; do
    b=$(basename "$p")
    case "$b" in
      ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libmvec.so.*) continue ;;
      libcuda.so.*|libcudart.so.*|libcublas*.so.*|libcudnn*.so.*|libnvrtc*.so.*|libnvJitLink.so.*|libnvidia-*.so*|libnccl.so.*) continue ;;
    esac
    echo "$p"
  done
}
: > "$tmp/ldd-foreign.txt"
for f in "$root"/libexec/cuda/* "$root"/libexec/cpu/*; do
  bare LD_LIBRARY_PATH="$cuda_dir" ldd "$f" | awk '$2 == "=>" { print ($3 == "not" ? $1 " NOT FOUND" : $3) } $1 ~ /^\// { print $1 }' | foreign >> "$tmp/ldd-foreign.txt"
done
if [ -s "$tmp/ldd-foreign.txt" ]; then bad "ldd: libraries from outside the tarball: $(sort -u "$tmp/ldd-foreign.txt" | tr '\n' ' ')"
else ok "ldd: every library of every binary comes from lib/, glibc or CUDA ($cuda_dir)"; fi
bare CTRAIN_CUDA_LIBS="$cuda_dir" LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/lddebug" "$root/bin/ctrain_tests" gpu > "$tmp/gpu-tests.txt" 2>&1
# one file per process: keep those of the tarball's binaries (the launcher's helpers, readlink,
# dirname, awk, are the system's own programs and load what they load)
grep -l "initialize program: $root/" "$tmp"/lddebug.* 2>/dev/null | xargs cat 2>/dev/null | sed -n 's/.*calling init: //p' | sort -u > "$tmp/loaded.txt"
foreign < "$tmp/loaded.txt" > "$tmp/loaded-foreign.txt"
if [ ! -s "$tmp/loaded.txt" ]; then bad "LD_DEBUG=libs recorded nothing"
elif [ -s "$tmp/loaded-foreign.txt" ]; then bad "LD_DEBUG=libs (ctrain_tests gpu): loaded from outside the tarball: $(tr '\n' ' ' < "$tmp/loaded-foreign.txt")"
else ok "LD_DEBUG=libs (ctrain_tests gpu, CUDA build): $(wc -l < "$tmp/loaded.txt") objects loaded, none from the system but glibc and CUDA: $(grep -c "^$root/" "$tmp/loaded.txt") from lib/"; fi

# 4. the whole suite from the extracted copy
t0=$(date +%s)
bare CTRAIN_CUDA_LIBS="$cuda_dir" "$root/bin/ctrain_tests" > "$tmp/tests.txt" 2>&1
rc=$?
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$tmp/tests.txt" | tail -n 1)
if [ $rc = 0 ] && [ -n "$summary" ]; then ok "whole test suite from the extracted copy, run from /: $summary ($(($(date +%s) - t0))s)"
else bad "whole test suite from the extracted copy: exit $rc, ${summary:-no summary}; failures: $(grep -E '^FAIL' "$tmp/tests.txt" | head -n 5 | tr '\n' ';') (log: $tmp/tests.txt)"; fi

# 5. no CUDA libraries: the CPU-only build, said once
bare CTRAIN_CUDA_LIBS=/nonexistent "$root/bin/ctrain" info > "$tmp/cpu-info.txt" 2>"$tmp/cpu-info.err"
rc=$?
notes=$(grep -c 'running the CPU-only build' "$tmp/cpu-info.err")
if [ $rc = 0 ] && [ "$notes" = 1 ] && grep -q 'not compiled in' "$tmp/cpu-info.txt"; then
  ok "no CUDA libraries: falls back to the CPU-only build and says so once: $(cat "$tmp/cpu-info.err")"
else bad "CPU-only fallback: exit $rc, $notes notes, $(cat "$tmp/cpu-info.txt" "$tmp/cpu-info.err")"; fi
bare CTRAIN_CUDA_LIBS=/nonexistent "$root/bin/ctrain_tests" core dense lstm conv2d optim time cli harness gpu > "$tmp/cpu-tests.txt" 2>&1
rc=$?
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$tmp/cpu-tests.txt" | tail -n 1)
notes=$(grep -c 'running the CPU-only build' "$tmp/cpu-tests.txt")
if [ $rc = 0 ] && [ "$notes" = 1 ]; then ok "CPU-only build, suites core dense lstm conv2d optim time cli harness gpu: $summary"
else bad "CPU-only build tests: exit $rc, $notes fallback notes (want 1), ${summary:-no summary} (log: $tmp/cpu-tests.txt)"; fi

# 6. gpu-check without a GPU (on a machine with one it would run the whole check: left out)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "skip scripts/gpu-check.sh without a GPU: this machine has one (run scripts/gpu-check.sh OUTDIR for the real check)"
  t0=skip
fi
[ "${t0:-}" = skip ] || {
t0=$(date +%s)
bare CTRAIN_CUDA_LIBS="$cuda_dir" "$root/scripts/gpu-check.sh" "$tmp/gc" > "$tmp/gpu-check.txt" 2>&1
rc=$?
dt=$(($(date +%s) - t0))
if [ $rc = 3 ] && grep -q 'NO GPU FOUND' "$tmp/gpu-check.txt" && [ -s "$tmp/gc/summary.txt" ] && [ -s "$tmp/gc/gpu-check.tar.gz" ]; then
  ok "scripts/gpu-check.sh without a GPU: exit 3 in ${dt}s: $(grep 'NO GPU FOUND' "$tmp/gpu-check.txt" | head -n 1)"
else bad "scripts/gpu-check.sh without a GPU: exit $rc in ${dt}s (want 3, 'NO GPU FOUND', summary.txt, gpu-check.tar.gz): $(tail -n 5 "$tmp/gpu-check.txt")"; fi
}

# 7. the end-to-end step of gpu-check, on the CPU (the GPU machine runs it with gpu, gpu cpu)
t0=$(date +%s)
bare E2E_THREADS=2 CTRAIN_CUDA_LIBS=/nonexistent sh "$root/scripts/gpu-e2e.sh" "$root/bin/ctrain" "$tmp/e2e" cpu cpu cpu > "$tmp/e2e.txt" 2>&1
rc=$?
dt=$(($(date +%s) - t0))
if [ $rc = 0 ] && [ "$(grep -c '^ok ' "$tmp/e2e.txt")" = 3 ]; then
  ok "scripts/gpu-e2e.sh on the CPU, from the extracted copy: three models trained and evaluated (${dt}s)"
else bad "scripts/gpu-e2e.sh on the CPU: exit $rc in ${dt}s: $(tail -n 4 "$tmp/e2e.txt")"; fi

# 7b. its exact-resume step (scripts/gpu-resume.sh), on the CPU, on the end-to-end step's data
t0=$(date +%s)
bare RESUME_THREADS=2 CTRAIN_CUDA_LIBS=/nonexistent sh "$root/scripts/gpu-resume.sh" "$root/bin/ctrain" "$tmp/resume" cpu \
  "$tmp/e2e/data/feats.h5" "$tmp/e2e/data/images" > "$tmp/resume.txt" 2>&1
rc=$?
dt=$(($(date +%s) - t0))
if [ $rc = 0 ] && [ "$(grep -c '^ok ' "$tmp/resume.txt")" = 2 ]; then
  ok "scripts/gpu-resume.sh on the CPU, from the extracted copy: two models stopped, resumed, bit-identical (${dt}s)"
else bad "scripts/gpu-resume.sh on the CPU: exit $rc in ${dt}s: $(tail -n 4 "$tmp/resume.txt")"; fi

# 7c. its store step (scripts/gpu-store.sh), on the CPU: a 64 MiB store, 512 pairs a run
t0=$(date +%s)
bare GPU_STORE_DIR="$tmp/store-data" GPU_STORE_GIB=0.0625 GPU_STORE_SPEAKERS=50 CTRAIN_CUDA_LIBS=/nonexistent sh "$root/scripts/gpu-store.sh" \
  "$root/bin/ctrain" "$root/bin/scale_store" "$tmp/store" cpu 2 2 512 > "$tmp/store.txt" 2>&1
rc=$?
dt=$(($(date +%s) - t0))
if [ $rc = 0 ] && grep -q '^store-warm .* of synthetic' "$tmp/store.txt"; then
  ok "scripts/gpu-store.sh on the CPU, from the extracted copy: the seed protocol fed from a store, streamed (${dt}s)"
else bad "scripts/gpu-store.sh on the CPU: exit $rc in ${dt}s: $(tail -n 4 "$tmp/store.txt")"; fi

# 7d. its CPU-threads step (scripts/cpu-scaling.sh) at 1 and 2 threads, 2 epochs a run
t0=$(date +%s)
bare CPU_SCALING_EPOCHS=2 CTRAIN_CUDA_LIBS=/nonexistent sh "$root/scripts/cpu-scaling.sh" "$root/bin/ctrain" "$tmp/scaling" 1 2 \
  > "$tmp/scaling.txt" 2>&1
rc=$?
dt=$(($(date +%s) - t0))
# where this CPU runs bf16, ctrain's bf16 runs at 1 and 2 threads must be in the table too
want_bf16=0
bare CTRAIN_CUDA_LIBS=/nonexistent "$root/bin/ctrain" info --no-peak 2>/dev/null | grep -q '^--precision bf16: CPU products on ' && want_bf16=2
if [ $rc = 0 ] && [ "$(grep -c '^ *2 .*%' "$tmp/scaling.txt")" = 2 ] \
   && [ "$(grep -c '^  ctrain bf16: .* parallel efficiency' "$tmp/scaling.txt")" = $want_bf16 ]; then
  ok "scripts/cpu-scaling.sh from the extracted copy: both models at 1 and 2 threads, with the efficiency table$([ $want_bf16 = 2 ] && echo ', bf16 too') (${dt}s)"
else bad "scripts/cpu-scaling.sh: exit $rc in ${dt}s: $(tail -n 4 "$tmp/scaling.txt")"; fi

# 8. Open MPI's runtime from the tarball, with the system's own hidden: its folders (ompi_info
#    names them) and PMIx's under empty file systems, its launchers under /dev/null
if [ ! -x "$root/bin/mpirun" ]; then
  echo "skip Open MPI from the tarball: it was built without MPI (no bin/mpirun)"
elif [ "$(id -u)" != 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
  echo "skip Open MPI from the tarball with the system's hidden: that needs root and unshare -m (a private mount namespace)"
else
  hide=""
  if command -v ompi_info >/dev/null 2>&1; then
    hide=$(ompi_info --parsable --path all 2>/dev/null | awk -F: '$2 ~ /^(libdir|pkglibdir|pkgdatadir|sysconfdir)$/ { print $3 }' | sort -u | tr '\n' ' ')
  fi
  for d in /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/openmpi /etc/openmpi /usr/share/openmpi; do
    case " $hide " in *" $d "*) ;; *) hide="$hide $d" ;; esac
  done
  t0=$(date +%s)
  unshare -m --propagation private sh -c '
    root=$1; tmp=$2; shift 2
    for d in "$@"; do [ -d "$d" ] && { mount -t tmpfs none "$d" || exit 90; }; done
    for b in /usr/bin/orterun /usr/bin/orted /usr/bin/mpirun /usr/bin/mpiexec; do [ -e "$b" ] && { mount --bind /dev/null "$b" || exit 90; }; done
    cd / && exec env -i PATH="$root/bin:/usr/bin:/bin" HOME=/tmp LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/mpidebug" "$root/bin/ctrain_tests" mpi
  ' sh "$root" "$tmp" $hide > "$tmp/mpi-tests.txt" 2>&1
  rc=$?
  dt=$(($(date +%s) - t0))
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$tmp/mpi-tests.txt" | tail -n 1)
  grep -l "initialize program: $root/" "$tmp"/mpidebug.* 2>/dev/null | xargs cat 2>/dev/null | sed -n 's/.*calling init: //p' | sort -u > "$tmp/mpi-loaded.txt"
  foreign < "$tmp/mpi-loaded.txt" > "$tmp/mpi-foreign.txt"
  plugins=$(grep -c "^$root/mpi/lib/" "$tmp/mpi-loaded.txt")
  if [ $rc != 0 ] || [ -z "$summary" ] || grep -q 'SKIP' "$tmp/mpi-tests.txt"; then
    bad "bin/mpirun with the system's Open MPI hidden ($hide): exit $rc, ${summary:-no summary}; $(grep -E '^(FAIL|SKIP)' "$tmp/mpi-tests.txt" | head -n 3 | tr '\n' ';') (log: $tmp/mpi-tests.txt)"
  elif [ -s "$tmp/mpi-foreign.txt" ]; then bad "bin/mpirun: loaded from outside the tarball: $(tr '\n' ' ' < "$tmp/mpi-foreign.txt")"
  elif [ "$plugins" -lt 5 ]; then bad "bin/mpirun: only $plugins of Open MPI's plug-ins were loaded from the tarball's mpi/lib (LD_DEBUG=libs)"
  else ok "bin/mpirun (Open MPI from the tarball, the system's hidden): data-parallel suite $summary (${dt}s); $plugins plug-ins from mpi/lib, nothing from the system but glibc and CUDA"; fi
fi

if [ $fails = 0 ]; then
  echo "dist-check: all checks passed"
  rm -rf "$tmp"
  exit 0
fi
echo "dist-check: $fails check(s) failed; the extracted copy and the logs are in $tmp"
exit 1
