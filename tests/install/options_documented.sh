#!/usr/bin/env bash
# Every option that `gpufilter --help` and `gpufilterd --help` list must be documented in
# the man page source (docs/man/*.scd) and completed by the bash, zsh and fish
# completions (completions/). The help text (cli/help.cpp) is the source of truth: an
# option added there and forgotten elsewhere fails here, naming the file.
#   options_documented.sh SOURCE_DIR GPUFILTER GPUFILTERD
set -euo pipefail
src=$1 gpufilter=$2 gpufilterd=$3
missing=0

# has FILE ERE WHAT: FILE must hold a match of ERE.
has() {
  if ! grep -qE -- "$2" "$1"; then
    echo "not in ${1#"$src"/}: $3" >&2
    missing=$((missing + 1))
  fi
}

help=$("$gpufilter" --help)
longs=$(grep -oE -- '--[a-z][a-z0-9-]*[a-z]' <<<"$help" | sort -u)
# Short options start a line of the help: "  -E, --extended-regexp", "  -I   ...".
shorts=$(grep -oE -- '^  -[A-Za-z]([, ]|$)' <<<"$help" | cut -c4 | sort -u)
[ "$(wc -w <<<"$longs")" -gt 60 ] || { echo "too few long options read from --help: $longs" >&2; exit 1; }
[ "$(wc -w <<<"$shorts")" -gt 30 ] || { echo "too few short options read from --help: $shorts" >&2; exit 1; }

for o in $longs; do
  name=${o#--}
  has "$src/docs/man/gpufilter.1.scd" "\*$o\*" "$o"
  has "$src/completions/gpufilter.bash" "(^|[^a-z-])$o([^a-z-]|$)" "$o"
  has "$src/completions/_gpufilter" "(^|[^a-z-])$o([^a-z-]|$)" "$o"
  has "$src/completions/gpufilter.fish" "-l $name([^a-z-]|$)" "$o"
done
for s in $shorts; do
  has "$src/docs/man/gpufilter.1.scd" "\*-$s\*" "-$s"
  has "$src/completions/gpufilter.bash" "(^|[[:space:]|])-$s([[:space:]|)]|$)" "-$s"
  has "$src/completions/_gpufilter" "(^|[^A-Za-z-])-$s([^A-Za-z-]|$)" "-$s"
  has "$src/completions/gpufilter.fish" "-s $s( |$)" "-$s"
done

dhelp=$("$gpufilterd" --help)
for o in $(grep -oE -- '--[a-z][a-z0-9-]*[a-z]' <<<"$dhelp" | sort -u) --help --version; do
  has "$src/docs/man/gpufilterd.8.scd" "\*$o\*" "gpufilterd $o"
  has "$src/completions/gpufilter.bash" "(^|[^a-z-])$o([^a-z-]|$)" "gpufilterd $o"
  has "$src/completions/_gpufilter" "(^|[^a-z-])$o([^a-z-]|$)" "gpufilterd $o"
  has "$src/completions/gpufilterd.fish" "-l ${o#--}([^a-z-]|$)" "gpufilterd $o"
done

if [ "$missing" -gt 0 ]; then
  echo "$missing gaps: document each option of --help in docs/man/ and completions/ (CONTRIBUTING.md)" >&2
  exit 1
fi
echo "$(wc -w <<<"$longs") long and $(wc -w <<<"$shorts") short options of gpufilter, and gpufilterd's, are in the man pages and the completions"
