#!/bin/sh
# install_check.sh - `make install` as a library user meets it, end to end:
#
#   1. make install DESTDIR=TMP/stage PREFIX=/usr: exactly the files docs/library.md lists
#      (the public headers: ctrain.h and what it reaches, scripts/public-headers.sh;
#      both libraries, ctrain.pc, the man page, bin/ctrain); no private header
#      (scripts/private-headers.txt: layers/gemm_packed.h, cuda/lstm_map.h,
#      io/h5probe.h, ...); the installed ctrain.h reaches every installed header and
#      nothing missing; the shared library's soname and links; one version
#      everywhere (ctrain --version, ctrain.pc, the file name); ctrain.pc valid; the
#      man page has a section for every command `ctrain --help` lists and groff has
#      nothing to say about it;
#   2. make uninstall with the same variables leaves no file or link behind;
#   3. make install PREFIX=TMP/prefix, then every installed header compiled on its
#      own with `pkg-config --cflags ctrain` (-std=c11 -Wall -Wextra -Werror), and
#      examples/train_small.c compiled with `pkg-config --cflags --libs ctrain`,
#      linked to libctrain.so (with an rpath) and to libctrain.a (`--static`), each
#      run: it trains a small CNN through the library and must learn (exit 0); and
#      examples/train_speakers.c against libctrain.so: the siamese LSTM on synthetic
#      speakers must learn, write its checkpoint and read its weights file back.
#
#   usage: tests/install_check.sh CUDA      (CUDA: 1 or 0, as the build being tested)
# Run from the source root; the test case install/... (tests/test_install.c) runs it.
# Prints "ok: ..." per check, "FAILED: ..." per failure; exits 1 if anything failed.
set -u
cuda=${1:?usage: tests/install_check.sh CUDA}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ctrain-install.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
failed=0
ok()  { echo "ok: $*"; }
bad() { echo "FAILED: $*"; failed=1; }

# make with the caller's variables (MAKEFLAGS: SAN, OPT, ...) but not its job server,
# whose file descriptors this process does not have.
MAKEFLAGS=$(printf '%s' "${MAKEFLAGS:-}" | sed 's/--jobserver-[a-z]*=[^ ]*//g')
export MAKEFLAGS
mk() {
  ${MAKE:-make} --no-print-directory CUDA="$cuda" "$@" > "$tmp/make.log" 2>&1 && return 0
  bad "make $*: $(tail -n 8 "$tmp/make.log")"
  return 1
}

# ---- 1. a staged install under DESTDIR ----
stage=$tmp/stage
if mk install DESTDIR="$stage" PREFIX=/usr; then
  root=$stage/usr
  version=$("$root/bin/ctrain" --version 2>/dev/null | sed -n 's/^ctrain //p')
  major=${version%%.*}
  [ -n "$version" ] && ok "installed ctrain --version: $version" || bad "installed bin/ctrain --version printed no version"

  { echo bin/ctrain
    for f in libctrain.a libctrain.so "libctrain.so.$major" "libctrain.so.$version" pkgconfig/ctrain.pc; do echo "lib/$f"; done
    echo include/ctrain/ctrain.h
    sh scripts/public-headers.sh | sed 's|^|include/ctrain/|'
    echo share/man/man1/ctrain.1
  } | sort > "$tmp/want"
  (cd "$root" && find . ! -type d | sed 's|^\./||' | sort) > "$tmp/got"
  if cmp -s "$tmp/want" "$tmp/got"; then ok "the installed tree: $(wc -l < "$tmp/got") files and links, as listed"
  else bad "the installed tree differs from the list (< missing, > unexpected): $(diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -n 10 | tr '\n' ' ')"; fi

  soname=$(readelf -d "$root/lib/libctrain.so.$version" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  l1=$(readlink "$root/lib/libctrain.so"); l2=$(readlink "$root/lib/libctrain.so.$major")
  if [ "$soname" = "libctrain.so.$major" ] && [ "$l1" = "libctrain.so.$major" ] && [ "$l2" = "libctrain.so.$version" ]; then
    ok "SONAME $soname; libctrain.so -> $l1 -> $l2"
  else bad "SONAME '$soname' (want libctrain.so.$major), libctrain.so -> '$l1', libctrain.so.$major -> '$l2'"; fi

  pc=$root/lib/pkgconfig
  pcver=$(PKG_CONFIG_PATH=$pc pkg-config --modversion ctrain 2>&1)
  if PKG_CONFIG_PATH=$pc pkg-config --validate ctrain && [ "$pcver" = "$version" ] \
     && grep -qx 'prefix=/usr' "$pc/ctrain.pc" && grep -qx 'Cflags: -I${includedir}/ctrain' "$pc/ctrain.pc"; then
    ok "ctrain.pc valid, version $pcver, prefix /usr, Cflags -I\${includedir}/ctrain"
  else bad "ctrain.pc: version '$pcver' (want $version) or prefix/Cflags wrong: $(tr '\n' ' ' < "$pc/ctrain.pc")"; fi

  man=$root/share/man/man1/ctrain.1
  missing=""
  for c in $("$root/bin/ctrain" --help | awk '$0 == "commands:" { on = 1; next } on && /^$/ { exit } on && /^  [a-z]/ { print $1 }'); do
    grep -q "^\.SS \"ctrain $c\"" "$man" || missing="$missing $c"
  done
  if ! grep -q "^\.TH CTRAIN 1 .*ctrain $version" "$man"; then bad "man page: no .TH line with version $version"
  elif [ -n "$missing" ]; then bad "man page: no section for$missing"
  elif command -v groff > /dev/null && [ -n "$(groff -man -Tutf8 -ww -z "$man" 2>&1)" ]; then bad "groff warns about the man page: $(groff -man -Tutf8 -ww -z "$man" 2>&1 | head -n 3)"
  else ok "man page: $(grep -c '^\.SS' "$man") sections, one for every command of ctrain --help$(command -v groff > /dev/null && echo ', no groff warnings')"; fi

  # the public API only: no internal header installed, and the installed ctrain.h
  # reaches exactly the installed headers (none missing, none extra)
  inc=$root/include/ctrain
  leaked=$(sed -e 's/#.*//' scripts/private-headers.txt | awk 'NF { print $1 }' | while read -r h; do
    [ -e "$inc/$h" ] && echo "$h"; done | tr '\n' ' ')
  [ -z "$leaked" ] && ok "no private header installed ($(sed -e 's/#.*//' scripts/private-headers.txt | awk 'NF' | wc -l) listed in scripts/private-headers.txt)" \
    || bad "private headers installed: $leaked"
  (cd "$inc" && find . -name '*.h' ! -name ctrain.h | sed 's|^\./||' | sort) > "$tmp/headers"
  if sh scripts/public-headers.sh "$inc/ctrain.h" "$inc" > "$tmp/reached" 2> "$tmp/reached.err"; then
    cmp -s "$tmp/headers" "$tmp/reached" && ok "the installed ctrain.h reaches all $(wc -l < "$tmp/headers") installed headers and no other" \
      || bad "installed headers (<) against those the installed ctrain.h reaches (>): $(diff "$tmp/headers" "$tmp/reached" | grep '^[<>]' | head -n 10 | tr '\n' ' ')"
  else bad "the installed ctrain.h includes a header that was not installed: $(cat "$tmp/reached.err")"; fi

  # ---- 2. uninstall ----
  if mk uninstall DESTDIR="$stage" PREFIX=/usr; then
    left=$(cd "$stage" && find . ! -type d | head -n 5 | tr '\n' ' ')
    [ -z "$left" ] && ok "make uninstall removed every file and link" || bad "make uninstall left: $left"
  fi
fi

# ---- 3. the example against an installed prefix ----
prefix=$tmp/prefix
if mk install PREFIX="$prefix" LDCONFIG=true; then
  PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  export PKG_CONFIG_PATH
  libdir=$(pkg-config --variable=libdir ctrain)
  cflags="-std=c11 -O2 -Wall -Wextra -Werror $(pkg-config --cflags ctrain)"
  # each installed header compiles on its own (it includes what it uses), with only pkg-config's flags
  includedir=$(pkg-config --variable=includedir ctrain)/ctrain
  alone=$(cd "$includedir" && find . -name '*.h' | sed 's|^\./||' | sort)
  failed_alone=""
  for h in $alone; do
    printf '#include "%s"\nint main(void) { return 0; }\n' "$h" > "$tmp/alone.c"
    ${CC:-cc} $cflags -c -o "$tmp/alone.o" "$tmp/alone.c" > "$tmp/alone.log" 2>&1 \
      || failed_alone="$failed_alone $h: $(grep -m 1 'error' "$tmp/alone.log")"
  done
  [ -n "$alone" ] && [ -z "$failed_alone" ] && ok "each of the $(echo $alone | wc -w) installed headers compiles on its own with pkg-config --cflags ctrain" \
    || bad "installed headers that do not compile on their own:${failed_alone:- none installed}"
  run_example() {   # run_example NAME [ARG...]: runs TMP/NAME, checks it learned (exit 0)
    name=$1
    shift
    if "$tmp/$name" "$@" > "$tmp/$name.log" 2>&1; then ok "$name: $(tail -n 1 "$tmp/$name.log")"
    else bad "$name exited $?: $(tail -n 4 "$tmp/$name.log" | tr '\n' ' ')"; fi
  }
  # shared: -lctrain finds libctrain.so; the rpath lets it run without LD_LIBRARY_PATH
  if ${CC:-cc} $cflags -o "$tmp/train_small-shared" examples/train_small.c $(pkg-config --libs ctrain) -Wl,-rpath,"$libdir" > "$tmp/cc.log" 2>&1; then
    lib=$(ldd "$tmp/train_small-shared" | awk '$1 ~ /^libctrain/ { print $3 }')
    if [ -n "$lib" ] && [ "$(readlink -f "$lib")" = "$(readlink -f "$libdir/libctrain.so")" ]; then
      ok "examples/train_small.c built with pkg-config --cflags --libs ctrain; loads $lib"
    else bad "the shared example loads libctrain from '$lib', not from $libdir"; fi
    run_example train_small-shared
  else bad "compiling examples/train_small.c against libctrain.so: $(head -n 8 "$tmp/cc.log")"; fi
  # static: libctrain.a by name (-l:libctrain.a; -lctrain would take the .so beside it)
  # and the private libraries from --static
  if ${CC:-cc} $cflags -o "$tmp/train_small-static" examples/train_small.c \
       $(pkg-config --libs --static ctrain | sed 's/-lctrain /-l:libctrain.a /') > "$tmp/cc.log" 2>&1; then
    if readelf -d "$tmp/train_small-static" | grep -q 'NEEDED.*libctrain'; then bad "the static example needs libctrain.so"
    else ok "examples/train_small.c linked to libctrain.a with pkg-config --libs --static ctrain"; fi
    run_example train_small-static
  else bad "linking examples/train_small.c to libctrain.a: $(head -n 8 "$tmp/cc.log")"; fi
  # the same seed and the same library: the same numbers (the seconds and the time per step may differ)
  for k in shared static; do sed 's/^ - [0-9.]*s - [0-9]*[mu]s\/step - / - /' "$tmp/train_small-$k.log" > "$tmp/$k.numbers" 2>/dev/null; done
  if [ -s "$tmp/shared.numbers" ] && [ -s "$tmp/static.numbers" ]; then
    cmp -s "$tmp/shared.numbers" "$tmp/static.numbers" && ok "both links print the same losses and accuracies" \
      || bad "the shared and static examples print different numbers: $(diff "$tmp/shared.numbers" "$tmp/static.numbers" | head -n 4 | tr '\n' ' ')"
  fi
  # the speaker model with a checkpoint and a weights file, through the same API
  if ${CC:-cc} $cflags -o "$tmp/train_speakers" examples/train_speakers.c $(pkg-config --libs ctrain) -Wl,-rpath,"$libdir" > "$tmp/cc.log" 2>&1; then
    ok "examples/train_speakers.c built with pkg-config --cflags --libs ctrain"
    mkdir -p "$tmp/speakers"
    run_example train_speakers "$tmp/speakers"
    [ -s "$tmp/speakers/checkpoint.h5" ] && [ -s "$tmp/speakers/weights.h5" ] && ok "train_speakers wrote checkpoint.h5 and weights.h5" \
      || bad "train_speakers left no checkpoint.h5 or weights.h5 in $tmp/speakers"
  else bad "compiling examples/train_speakers.c against libctrain.so: $(head -n 8 "$tmp/cc.log")"; fi
  mk uninstall PREFIX="$prefix" LDCONFIG=true
fi

exit $failed
