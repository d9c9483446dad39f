#!/usr/bin/env bash
# Installs the build into a scratch prefix and checks what a user gets, then builds the
# .deb and checks its control data and files (issue 18, item 5; cmake/Install.cmake and
# cmake/Packaging.cmake):
#   every installed file; the man pages render (man, else groff); the installed binaries
#   run (--version, --help, a search, gpufilterd --check on the installed example); the
#   bash, zsh and fish completions complete options and their values (zsh and fish
#   skipped when the shell is not installed); cpack -G DEB, then dpkg-deb -I / -c and
#   lintian (when installed: no error or warning).
# Everything is written under its own temporary folder, so it runs beside the suite.
#   install_test.sh SOURCE_DIR BUILD_DIR MAN_PAGES(ON|OFF)
set -euo pipefail
src=$1 build=$2 man_pages=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpufilter-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake=${CMAKE:-cmake} cpack=${CPACK:-cpack}

fail() { echo "FAIL: $*" >&2; exit 1; }
# shows TEXT ERE: TEXT has a line matching ERE. (Not `command | grep -q`: under pipefail
# that fails whenever grep's early exit gives the command a SIGPIPE.)
shows() { grep -qE -- "$2" <<<"$1"; }
step() { echo "--- $*"; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }

step "the installed files"
files=(
  bin/gpufilter bin/gpufilterd lib/gpufilter/gpufilter-kafka.so
  share/bash-completion/completions/gpufilter share/bash-completion/completions/gpufilterd
  share/zsh/vendor-completions/_gpufilter
  share/fish/vendor_completions.d/gpufilter.fish share/fish/vendor_completions.d/gpufilterd.fish
  lib/systemd/system/gpufilterd.service
  share/doc/gpufilter/README.md share/doc/gpufilter/docs/DAEMON.md
  share/doc/gpufilter/copyright share/doc/gpufilter/changelog.Debian.gz
  share/doc/gpufilter/docs/grep-compatibility.md
  share/doc/gpufilter/examples/gpufilterd.yaml share/doc/gpufilter/examples/demo.yaml
  share/doc/gpufilter/examples/gpufilterd.service share/doc/gpufilter/examples/k8s-sidecar.yaml
  share/doc/gpufilter/examples/rules/ssh-bruteforce.txt share/doc/gpufilter/examples/rules/kernel-errors.txt
  share/doc/gpufilter/examples/rules/http-5xx.txt share/doc/gpufilter/examples/fail2ban-nft.yaml
)
man_files=(share/man/man1/gpufilter.1.gz share/man/man8/gpufilterd.8.gz share/man/man5/gpufilterd.yaml.5.gz)
[ "$man_pages" = ON ] && files+=("${man_files[@]}")
for f in "${files[@]}"; do
  [ -f "$prefix/$f" ] || fail "not installed: $f"
done
for f in bin/gpufilter bin/gpufilterd; do [ -x "$prefix/$f" ] || fail "not executable: $f"; done
grep -qx "ExecStart=$prefix/bin/gpufilterd --config /etc/gpufilterd/gpufilterd.yaml" \
  "$prefix/lib/systemd/system/gpufilterd.service" || fail "the unit's ExecStart does not name the installed gpufilterd"
echo "${#files[@]} files"

if [ "$man_pages" = ON ]; then
  step "the man pages render"
  # render PAGE: the page as a reader sees it, through man when it is there.
  render() {
    if command -v man >/dev/null; then MANWIDTH=80 man -l -P cat "$1" 2>"$tmp/man.err"
    else gzip -dc "$1" | groff -man -Tutf8 -P-c 2>"$tmp/man.err"; fi
  }
  for page in "${man_files[@]}"; do
    render "$prefix/$page" >"$tmp/page.txt"
    # groff's complaints about the source (not man's about the locale).
    grep -qiE 'warning|error' "$tmp/man.err" && { cat "$tmp/man.err" >&2; fail "$page: warnings while rendering"; }
    for section in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
      grep -q "^$section" "$tmp/page.txt" || fail "$page: no $section section"
    done
  done
  render "$prefix/share/man/man1/gpufilter.1.gz" >"$tmp/page.txt"
  for text in "EXIT STATUS" ENVIRONMENT EXAMPLES GPUFILTER_DEVICE "--engine=ENGINE" "--binary-files=TYPE" "--follow"; do
    grep -qF -- "$text" "$tmp/page.txt" || fail "gpufilter.1 does not show: $text"
  done
  shows "$(render "$prefix/share/man/man8/gpufilterd.8.gz")" SIGHUP || fail "gpufilterd.8 does not show SIGHUP"
  shows "$(render "$prefix/share/man/man5/gpufilterd.yaml.5.gz")" resolve_after || fail "gpufilterd.yaml.5 does not show resolve_after"
  echo "${#man_files[@]} pages"
fi

step "the installed binaries run"
shows "$("$prefix/bin/gpufilter" --version)" '^gpufilter [0-9]' || fail "gpufilter --version"
shows "$("$prefix/bin/gpufilter" --help)" '--engine=ENGINE' || fail "gpufilter --help"
[ "$(printf 'a\nfoo bar\nb\n' | "$prefix/bin/gpufilter" --engine=host -n foo)" = "2:foo bar" ] || fail "gpufilter foo"
# --kafka loads lib/gpufilter/gpufilter-kafka.so: a property librdkafka refuses is its answer.
kafka_err=$("$prefix/bin/gpufilter" --kafka 'kafka://127.0.0.1:1/t?no.such.property=1' x 2>&1 </dev/null || true)
shows "$kafka_err" 'No such configuration property' || fail "gpufilter --kafka (the module): $kafka_err"
shows "$("$prefix/bin/gpufilterd" --version)" '^gpufilterd [0-9]' || fail "gpufilterd --version"
shows "$("$prefix/bin/gpufilterd" --help)" '--config' || fail "gpufilterd --help"
# The installed example with its rules/ beside it (relative paths are the config's).
"$prefix/bin/gpufilterd" --config "$prefix/share/doc/gpufilter/examples/demo.yaml" --check \
  || fail "gpufilterd --check on the installed demo.yaml"

step "bash completion"
bash --norc --noprofile -c '
  set -u
  source "$1"
  complete -p gpufilter gpufilterd >/dev/null
  # complete WORD...: what _gpufilter offers for the last word, sorted.
  complete_words() {
    COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _gpufilter
    printf "%s\n" "${COMPREPLY[@]}" | sort | paste -sd " "
  }
  expect() { [ "$1" = "$2" ] || { echo "completed \"$3\" to \"$1\", not \"$2\"" >&2; exit 1; }; }
  expect "$(complete_words gpufilter --eng)" "--engine=" "gpufilter --eng"
  expect "$(complete_words gpufilter --engine = h)" "host" "gpufilter --engine=h"
  expect "$(complete_words gpufilter --color=n)" "--color=never" "gpufilter --color=n (one word)"
  expect "$(complete_words gpufilter -d "")" "read recurse skip" "gpufilter -d"
  expect "$(complete_words gpufilter --binary-files = w)" "without-match" "gpufilter --binary-files=w"
  expect "$(complete_words gpufilter --pattern-c)" "--pattern-counts" "gpufilter --pattern-c"
  expect "$(complete_words gpufilter -f "$2/bin/gpufilter")" "$2/bin/gpufilter $2/bin/gpufilterd" "gpufilter -f FILE"
  COMP_WORDS=(gpufilterd --con); COMP_CWORD=1; _gpufilterd
  expect "${COMPREPLY[*]}" "--config" "gpufilterd --con"
' bash "$prefix/share/bash-completion/completions/gpufilter" "$prefix" || fail "bash completion"

if command -v zsh >/dev/null; then
  step "zsh completion"
  zsh -n "$prefix/share/zsh/vendor-completions/_gpufilter" || fail "zsh -n"
  zsh -f "$src/tests/install/zsh_complete.zsh" "$prefix/share/zsh/vendor-completions" || fail "zsh completion"
else
  step "zsh not installed: _gpufilter not checked"
fi
if command -v fish >/dev/null; then
  step "fish completions"
  for f in gpufilter gpufilterd; do fish -n "$prefix/share/fish/vendor_completions.d/$f.fish" || fail "fish -n $f.fish"; done
  shows "$(fish --no-config -c "source $prefix/share/fish/vendor_completions.d/gpufilter.fish; complete -C 'gpufilter --engine='")" \
    '^--engine=host' || fail "fish does not complete --engine="
else
  step "fish not installed: its completions not checked"
fi

step "cpack -G DEB"
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log"; fail "cpack"; }
debs=("$tmp"/pkg/gpufilter_*.deb)
[ -f "${debs[0]}" ] || { cat "$tmp/cpack.log"; fail "no .deb"; }
deb=${debs[0]}
echo "${deb##*/}"
dpkg-deb -I "$deb" >"$tmp/info.txt"
sed -n '/^ Package:/p;/^ Version:/p;/^ Depends:/p;/^ Recommends:/p' "$tmp/info.txt"
# Dependencies come from dpkg-shlibdeps: the libraries the binaries link.
for dependency in libc6 libstdc++6 libhyperscan5 libyaml-cpp ocl-icd-libopencl1 libpcap 'librdkafka++1'; do
  grep -q "^ Depends:.*$dependency" "$tmp/info.txt" || fail "Depends lacks $dependency (dpkg-shlibdeps missing? apt-get install dpkg-dev)"
done
grep -q '^ Recommends: pocl-opencl-icd | opencl-icd' "$tmp/info.txt" || fail "Recommends lacks pocl-opencl-icd | opencl-icd"
grep -q ' postinst' "$tmp/info.txt" || fail "no postinst (the unit's user)"
dpkg-deb -c "$deb" | awk '{print $NF}' >"$tmp/contents.txt"
for f in "${files[@]}"; do
  grep -qx "./usr/$f" "$tmp/contents.txt" || fail "not in the .deb: /usr/$f"
done
shows "$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/gpufilterd.service)" \
  '^ExecStart=/usr/bin/gpufilterd --config /etc/gpufilterd/gpufilterd.yaml$' || fail "the packaged unit does not run /usr/bin/gpufilterd"
echo "$(grep -vc '/$' "$tmp/contents.txt") files in the .deb"
# Debian's own checks of the package: no error and no warning (its information tags, such
# as hardening suggestions, are not failures).
if command -v lintian >/dev/null; then
  lintian --allow-root --tag-display-limit 0 "$deb" >"$tmp/lintian.txt" 2>&1 || true
  if grep -qE '^[EW]: ' "$tmp/lintian.txt"; then cat "$tmp/lintian.txt" >&2; fail "lintian reports errors or warnings"; fi
  echo "lintian: no error, no warning"
fi
echo "PASS"
