#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   scripts/bootstrap.sh demo   install what is missing (apt), build, filter examples/app.log
#                               and run gpufilterd's example rules over the OpenSSH sample
#   scripts/bootstrap.sh test   install what is missing (apt), build the programs and the
#                               benchmark's tools (Release, gcc) and run the benchmark's smoke
#                               test with them beside grep and ripgrep; then every test under
#                               AddressSanitizer + UBSan (clang), a short run of every fuzz
#                               target, and the concurrency tests under ThreadSanitizer
#                               (scripts/sanitize.sh, scripts/fuzz.sh; GPUFILTER_SANITIZERS=0
#                               runs every test in the Release build instead of those three)
#   scripts/bootstrap.sh build  install and build only
set -euo pipefail
cd "$(dirname "$0")/.."

action=${1:-demo}
build_dir=${GPUFILTER_BUILD_DIR:-build}

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  opencl-c-headers opencl-clhpp-headers ocl-icd-opencl-dev pocl-opencl-icd clinfo
  libboost-dev libconcurrentqueue-dev libgtest-dev libhyperscan-dev libpcre2-dev nlohmann-json3-dev libyaml-cpp-dev libpcap-dev tshark ngrep
  libjemalloc-dev   # gpufilterd's malloc
  libssl-dev openssl   # https:// outputs; the tests make their CA and certificates with openssl
  zlib1g-dev libzstd-dev liblzma-dev libbz2-dev liblz4-dev
  librdkafka-dev kcat   # Kafka sources and outputs; the tests produce and read topics with kcat
  fail2ban   # its filters (read at run time) and, for the tests, fail2ban-regex and its sample logs
  systemd python3-systemd systemd-journal-remote   # journalctl (journal sources); the tests write journal files and fail2ban-regex reads them
  grep python3 ripgrep gnuplot-nox gzip zstd xz-utils bzip2 lz4
  clang libclang-rt-14-dev llvm
  scdoc dpkg-dev man-db lintian   # the man pages, the .deb's dependencies and checks, tests/install/
)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "bootstrap: installing ${missing[*]}" >&2
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # fail2ban is installed for its files, not its service: one that this run installed is
  # stopped and left disabled, so that it bans nobody on a build machine.
  if [[ " ${missing[*]} " == *" fail2ban "* ]] && command -v systemctl >/dev/null; then
    "${sudo[@]}" systemctl disable --now fail2ban >/dev/null 2>&1 || true
  fi
}

configure() {
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUFILTER_BUILD_TESTS=ON >/dev/null
}

build() {
  configure
  cmake --build "$build_dir" -j "$(nproc)"
}

# The test job: every test runs once, under AddressSanitizer + UBSan; the Release build
# (what users install) gives the programs and the benchmark's tools, and its check is the
# benchmark's smoke test (bench/run.py beside grep and ripgrep on the Loghub corpus: every
# tool must select the same lines). Building and running the suite a second time in Release
# too took a third of the job, which CI must finish in 45 minutes on 2 cores.
release_check() {
  configure
  cmake --build "$build_dir" -j "$(nproc)" --target gpufilter gpufilterd gpupermute gpufilter-gen-corpus \
    gpufilter-hs-count gpufilter-kernel-bench gpufilter-gen-pcap
  (cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 900 -L bench)
}

install_missing
[ "$action" = test ] && [ "${GPUFILTER_SANITIZERS:-1}" != 0 ] || build
case "$action" in
  demo)
    echo "--- gpufilter --list-devices" >&2
    "$build_dir/gpufilter" --list-devices
    echo "--- gpufilter -n -i -e error -e timeout examples/app.log" >&2
    "$build_dir/gpufilter" -n -i -e error -e timeout examples/app.log
    echo "--- gpufilter -n -E 'time(out|d out)|refused' examples/app.log (a regular expression)" >&2
    "$build_dir/gpufilter" -n -E 'time(out|d out)|refused' examples/app.log || true
    if [ -f ../shared/corpus/loghub/OpenSSH_2k.log ]; then
      echo "--- gpufilterd --config examples/daemon/demo.yaml < OpenSSH_2k.log (alerts as JSON lines)" >&2
      "$build_dir/gpufilterd" --config examples/daemon/demo.yaml < ../shared/corpus/loghub/OpenSSH_2k.log
    fi
    ;;
  test)
    stage() { echo "=== $* ($(date +%T))" >&2; }
    if [ "${GPUFILTER_SANITIZERS:-1}" = 0 ]; then
      stage "tests, $build_dir"
      (cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
    else
      stage "Release programs and the benchmark's smoke test, $build_dir"
      release_check
      stage "every test under AddressSanitizer + UndefinedBehaviorSanitizer, build-asan"
      scripts/sanitize.sh address build-asan
      # 15 s a target keeps the whole job inside CI's 45 minutes on two cores, where it
      # took 36 in all on 2026-12-05, the AddressSanitizer suite 24 of them (the corpora
      # are replayed in the AddressSanitizer tests above; longer runs: docs/RELIABILITY.md).
      stage "fuzz targets, ${FUZZ_SECONDS:-15} s each"
      FUZZ_SECONDS=${FUZZ_SECONDS:-15} scripts/fuzz.sh short build-asan
      stage "concurrency tests under ThreadSanitizer, build-tsan"
      scripts/sanitize.sh thread build-tsan
    fi
    stage "all tests passed"
    ;;
  build) ;;
  *) echo "usage: $0 [demo|test|build]" >&2; exit 2 ;;
esac
