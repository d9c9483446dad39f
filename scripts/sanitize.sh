#!/usr/bin/env bash
# The sanitizer jobs of the test suite (docs/RELIABILITY.md), each in its own build tree,
# compiled by clang:
#   scripts/sanitize.sh address [BUILD_DIR]  AddressSanitizer + UndefinedBehaviorSanitizer,
#       with libFuzzer coverage: every test, the fuzz targets' corpus replays included.
#       Default BUILD_DIR: build-asan (scripts/fuzz.sh short runs the fuzz targets built there).
#   scripts/sanitize.sh thread [BUILD_DIR]   ThreadSanitizer: the tests labelled `concurrency`
#       (pipeline, sockets, followers, the daemon, the CLI's streaming modes). Default: build-tsan.
# A report fails the test that caused it, in the test process or in a gpufilter or gpufilterd
# it started: the options below make every report fatal with an exit status (86, 66) that no
# test expects from gpufilter, whose own statuses are 0, 1 and 2.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:?usage: scripts/sanitize.sh address|thread [BUILD_DIR]}
jobs=$(nproc)
# One test more than cores: a third of the sanitized tests' time is spent waiting (sockets,
# followers, the daemon's timers, tshark), and on two cores the CPU stood idle 30 % of the
# ThreadSanitizer run with one test per core (vmstat, 2026-12-05).
test_jobs=$((jobs + 1))

configure() {  # configure DIR SANITIZERS [EXTRA...]
  local dir=$1 sanitizers=$2
  shift 2
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DGPUFILTER_SANITIZE="$sanitizers" -DGPUFILTER_BUILD_TESTS=ON -DGPUFILTER_BUILD_BENCH=OFF \
    -DGPUFILTER_BUILD_EXAMPLES=ON "$@" >/dev/null
}

# Reports name the source line; symbolizing needs llvm-symbolizer (clang's package).
symbolizer=$(command -v llvm-symbolizer || ls /usr/bin/llvm-symbolizer-* 2>/dev/null | head -1 || true)
export ASAN_SYMBOLIZER_PATH=$symbolizer

# After a failed ctest run in build-asan: whether each failed test's own output holds
# LeakSanitizer's tracer crash and no other failure (Testing/Temporary: LastTestsFailed.log names them,
# LastTest.log holds each test's output after its "N/M Test: NAME" line).
tracer_crashes_only() {
  local failed=Testing/Temporary/LastTestsFailed.log log=Testing/Temporary/LastTest.log
  [ -s "$failed" ] && [ -f "$log" ] || return 1
  awk -F: '
    FNR == NR { want[$2] = 1; next }
    /^[0-9]+\/[0-9]+ Test: / { name = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", name); next }
    /LeakSanitizer has encountered a fatal error/ { crashed[name] = 1 }
    /^\[  FAILED  \]|:[0-9]+: Failure$|ERROR: AddressSanitizer|runtime error:/ { failed_check[name] = 1 }
    END { for (t in want) if (!(t in crashed) || (t in failed_check)) exit 1; exit 0 }
  ' "$failed" "$log"
}

case "$mode" in
  address)
    dir=${2:-build-asan}
    configure "$dir" address,undefined -DGPUFILTER_FUZZ=ON
    cmake --build "$dir" -j "$jobs"
    # detect_leaks: a leak is a report like any other. detect_stack_use_after_return and the
    # init-order checks cost little here.
    # use_sigaltstack=0, the one option that gives something up, and why: PoCL compiles
    # kernels with LLVM, which installs a malloc()ed alternate signal stack on the thread that
    # compiles; clang 14's ASan, when a thread exits, munmap()s whatever alternate stack is
    # installed, fails on that heap block and aborts ("unable to unmap", seen in gpufilterd's
    # reload test). Without its own alternate stack ASan still reports stack overflows, with a
    # less precise message.
    # intercept_tls_get_addr=0: clang 14's LeakSanitizer follows __tls_get_addr to find the
    # dynamic TLS of libraries loaded with dlopen() (PoCL loads each kernel it compiles so)
    # and, in some binaries, reads a bogus block there and crashes in its tracer ("Tracer
    # caught signal 11", "DTLS 6 at 0x7bd": scanner_test once it held one more test, on
    # every run). Without it the tracer no longer scans those blocks: a pointer held only
    # there would be reported as a leak, never hidden.
    export ASAN_OPTIONS=exitcode=86:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:use_sigaltstack=0:intercept_tls_get_addr=0
    # One suppression file, for leaks allocated inside PoCL and LLVM (tests/asan/pocl.supp).
    export LSAN_OPTIONS=exitcode=86:suppressions=$PWD/tests/asan/pocl.supp
    export UBSAN_OPTIONS=exitcode=86:print_stacktrace=1:halt_on_error=1
    cd "$dir"
    # On a machine whose PoCL kernel cache (~/.cache/pocl) is cold, the first process to
    # meet each kernel variant compiles it with LLVM; LLVM's leaks are suppressed
    # (tests/asan/pocl.supp), but LeakSanitizer's check at exit may still crash in its
    # tracer ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal error").
    # When every test that failed failed that way, they run once more, with the cache now
    # warm; any other failure (a report, a failed check, a timeout) ends the job at once.
    if ! ctest --output-on-failure -j "$test_jobs" --timeout 1200; then
      tracer_crashes_only || exit 1
      echo "=== the tests whose LeakSanitizer tracer crashed, once more (a cold PoCL kernel cache)"
      ctest --output-on-failure --rerun-failed --timeout 1200
    fi
    ;;
  thread)
    dir=${2:-build-tsan}
    configure "$dir" thread
    cmake --build "$dir" -j "$jobs" --target gpufilter_concurrency_tests
    # librdkafka's C11 threads and locks, made visible to TSan, and the one suppression:
    # races inside librdkafka itself, whose atomics TSan cannot see (tests/CMakeLists.txt).
    export LD_PRELOAD=$PWD/$dir/tests/libgpufilter_tsan_c11.so
    export TSAN_OPTIONS=exitcode=66:halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan/librdkafka.supp
    cd "$dir"
    ctest --output-on-failure -j "$test_jobs" --timeout 1200 -L concurrency
    ;;
  *)
    echo "usage: scripts/sanitize.sh address|thread [BUILD_DIR]" >&2
    exit 2
    ;;
esac
