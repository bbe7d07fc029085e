#!/bin/sh
# public-headers.sh - the public headers of libctrain: every header that
# include/ctrain.h includes, every header those include, and so on to the end.
# This closure is what `make install` installs beside ctrain.h (a program that
# includes <ctrain.h> needs each of them to compile); every other header of the
# tree is private, and scripts/check-deps.sh checks that none of the private
# ones (scripts/private-headers.txt) is reached.
#
#   usage: scripts/public-headers.sh [-v] [UMBRELLA [ROOT]]
#
# UMBRELLA is the top header (default include/ctrain.h), ROOT the folder the
# includes are found under (default the source root; for an installed tree,
# PREFIX/include/ctrain with its ctrain.h). An include counts when it names a
# header of ctrain's folders, core/ layers/ io/ models/ train/ catalog/ cuda/ cli/, in
# quotes or in angle brackets ("core/params.h", <core/params.h>); system headers
# (<stdio.h>, <hdf5.h>) do not. Includes inside #if count too: every header
# that some build could include is needed.
#
# Prints the headers as paths under ROOT, sorted, one per line; with -v each is
# followed by the header that first included it (the way to trace a chain).
# Exits 1, naming the includer, when an included header is not there.
set -u
verbose=0
[ "${1:-}" = -v ] && { verbose=1; shift; }
src=$(cd "$(dirname "$0")/.." && pwd) || exit 2
umbrella=${1:-$src/include/ctrain.h}
root=${2:-$src}
[ -f "$umbrella" ] || { echo "public-headers.sh: $umbrella: no such file" >&2; exit 2; }

# A breadth-first walk in awk: the queue q[] holds each include met, by[] the
# header it was met in; the first visit of a header records its includer in
# seen[] and queues the header's own includes.
awk -v umbrella="$umbrella" -v root="$root" -v verbose="$verbose" '
function queue_includes(file, from,   line, h) {
  while ((getline line < file) > 0)
    if (line ~ /^[ \t]*#[ \t]*include[ \t]*["<](core|layers|io|models|train|catalog|cuda|cli)\/[^">]+[">]/) {
      h = line
      sub(/^[ \t]*#[ \t]*include[ \t]*["<]/, "", h)
      sub(/[">].*/, "", h)
      q[++n] = h
      by[n] = from
    }
  close(file)
}
BEGIN {
  queue_includes(umbrella, "ctrain.h")
  for (i = 1; i <= n; i++) {
    h = q[i]
    if (h in seen) continue
    f = root "/" h
    if ((getline line < f) < 0) {
      printf "public-headers.sh: %s includes %s, which is not under %s\n", by[i], h, root > "/dev/stderr"
      exit 1
    }
    close(f)
    seen[h] = by[i]
    queue_includes(f, h)
  }
  for (h in seen) print (verbose ? h " " seen[h] : h) | "sort"
}'
