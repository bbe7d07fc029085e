#!/bin/sh
# manpage.sh - writes the man page ctrain(1) to stdout, made from the program's own help:
# `ctrain --help` for the description, then `ctrain COMMAND --help` for every command
# that it lists, and `ctrain COMMAND MODEL --help` for every model a command's help
# lists under "models:" (when that text differs from the command's). The help text is
# set as it is printed (no filling), so the page says exactly what --help says.
#
#   usage: scripts/manpage.sh CTRAIN_BINARY VERSION > ctrain.1
#
# `make install` runs it; exits non-zero when the binary gives no help or lists no command.
set -u
ctrain=$1
version=$2

die() { echo "manpage.sh: $*" >&2; exit 1; }

# roff for text printed as is: backslashes escaped, "-" as a minus (so that options
# copied from the page work), a leading "." or "'" made harmless.
verbatim() {
  printf '.nf\n'
  sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
  printf '.fi\n'
}

# The entries of a help text's block headed by $1 ("commands:", "models:"): the first
# word of each line indented by exactly two spaces, up to the first blank line.
entries() {
  awk -v head="$1" '$0 == head { on = 1; next } on && /^$/ { exit } on && /^  [a-z]/ { print $1 }'
}

top=$("$ctrain" --help 2>/dev/null) || die "$ctrain --help failed"
[ -n "$top" ] || die "$ctrain --help printed nothing"
commands=$(printf '%s\n' "$top" | entries "commands:")
[ -n "$commands" ] || die "$ctrain --help lists no commands (no \"commands:\" block)"
# the first line is "ctrain VERSION - what it is"
what=$(printf '%s\n' "$top" | sed -n '1s/^[^-]* - //p')

cat <<EOF
.TH CTRAIN 1 "" "ctrain $version" "User Commands"
.\" made by scripts/manpage.sh from ctrain's --help; options and code are not hyphenated
.nh
.ad l
.SH NAME
ctrain \\- $(printf '%s' "${what:-a deep-learning training engine in C}" | sed 's/-/\\-/g')
.SH SYNOPSIS
.B ctrain
.I COMMAND
.RI [ options ]
.br
.B ctrain
.I COMMAND
.B \\-\\-help
.SH DESCRIPTION
EOF
printf '%s\n' "$top" | sed -e 1d -e '/./,$!d' | verbatim   # from its first non-blank line
echo ".SH COMMANDS"
for c in $commands; do
  text=$("$ctrain" "$c" --help 2>/dev/null) || die "$ctrain $c --help failed"
  printf '.SS "ctrain %s"\n' "$c"
  printf '%s\n' "$text" | verbatim
  for m in $(printf '%s\n' "$text" | entries "models:"); do
    sub=$("$ctrain" "$c" "$m" --help 2>/dev/null) || continue
    [ "$sub" = "$text" ] && continue
    printf '.SS "ctrain %s %s"\n' "$c" "$m"
    printf '%s\n' "$sub" | verbatim
  done
done
cat <<'EOF'
.SH LIBRARY
The engine under ctrain is also a library, libctrain (static and shared; make
install puts its headers and ctrain.pc under the same prefix). A program includes its API as
.B #include <ctrain.h>
and builds with
.BR "cc prog.c $(pkg\-config \-\-cflags \-\-libs ctrain)" ;
examples/train_small.c in the source trains a CNN through it.
.SH EXIT STATUS
0 on success; non\-zero, after one line saying what was wrong and what to do, on bad
input or a failure.
.SH SEE ALSO
.BR pkg\-config (1);
README.md and docs/ in the ctrain source.
EOF
