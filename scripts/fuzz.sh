#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz/ (built with -DGPUFILTER_FUZZ=ON, see
# tests/fuzz/CMakeLists.txt), each on a scratch copy of its seed corpus: the repository's
# corpus and regression inputs are only read.
#
#   scripts/fuzz.sh short [BUILD_DIR]
#       Every target for FUZZ_SECONDS (default 60) seconds, nproc targets at a time, one
#       process each. Fails (exit 1) when any target finds a crash, a sanitizer report, a
#       leak, a timeout or runs out of memory, naming the target and the input that did it
#       (kept in the scratch directory, whose path is printed). What CI runs.
#   scripts/fuzz.sh long SECONDS JOBS [BUILD_DIR]
#       Every target for SECONDS, JOBS fuzzing processes in all spread over the targets
#       (targets take turns when JOBS is smaller than their number). A process that finds a
#       crash is restarted until its time is up, so the others' inputs keep coming. Prints
#       a table: target, CPU-seconds, executions, new corpus inputs, crashes. Needs only
#       the built executables (their sanitizer runtimes are static) and, at run time,
#       libhs, libpcap and libyaml-cpp: BUILD_DIR may be a CMake build tree (binaries in
#       BUILD_DIR/fuzz/) or a folder holding the binaries themselves.
#
# BUILD_DIR defaults to build-fuzz. FUZZ_KEEP=1 keeps the scratch directory of a run that
# passed (a long run's grown corpus, to merge into tests/fuzz/corpus/ by hand with
# `TARGET -merge=1 tests/fuzz/corpus/TARGET SCRATCH/corpus/TARGET`).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

targets=(cli_options_fuzz patterns_fuzz regex_fuzz chunker_fuzz syslog_framer_fuzz line_framer_fuzz daemon_config_fuzz
         pcap_fuzz tcp_reassembly_fuzz)

# The largest input worth generating, per target: what its input layout can use (an
# argv, a pattern file, a few KB of text, a capture of some packets) within a short run.
max_len() {
  case $1 in
    cli_options_fuzz) echo 512 ;;
    pcap_fuzz) echo 65536 ;;
    tcp_reassembly_fuzz) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

usage() {
  echo "usage: scripts/fuzz.sh short [BUILD_DIR] | scripts/fuzz.sh long SECONDS JOBS [BUILD_DIR]" >&2
  exit 2
}

mode=${1:-}
case "$mode" in
  short)
    seconds=${FUZZ_SECONDS:-60}
    build_dir=${2:-build-fuzz}
    ;;
  long)
    seconds=${2:-}
    jobs=${3:-}
    build_dir=${4:-build-fuzz}
    [[ "$seconds" =~ ^[1-9][0-9]*$ && "$jobs" =~ ^[1-9][0-9]*$ ]] || usage
    ;;
  *) usage ;;
esac
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_SECONDS must be a positive number" >&2; exit 2; }
case "$build_dir" in /*) ;; *) build_dir=$PWD/$build_dir ;; esac

# Where the binaries are; a CMake tree without them is built first (short mode, here).
binary() {
  if [ -x "$build_dir/fuzz/$1" ]; then echo "$build_dir/fuzz/$1"; else echo "$build_dir/$1"; fi
}
missing=()
for t in "${targets[@]}"; do [ -x "$(binary "$t")" ] || missing+=("$t"); done
if [ ${#missing[@]} -gt 0 ] && [ -f "$build_dir/CMakeCache.txt" ] && command -v cmake >/dev/null; then
  if ! grep -q '^GPUFILTER_FUZZ:BOOL=ON' "$build_dir/CMakeCache.txt"; then
    echo "fuzz.sh: $build_dir is not configured with -DGPUFILTER_FUZZ=ON (clang): see tests/fuzz/CMakeLists.txt" >&2
    exit 2
  fi
  cmake --build "$build_dir" --target "${missing[@]}"
  missing=()
  for t in "${targets[@]}"; do [ -x "$(binary "$t")" ] || missing+=("$t"); done
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz.sh: no fuzz target binaries (${missing[*]}) in $build_dir or $build_dir/fuzz" >&2
  exit 2
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpufilter-fuzz.XXXXXX")
mkdir -p "$scratch/corpus" "$scratch/artifacts" "$scratch/logs"
# Reports name source lines where a symbolizer is at hand; elsewhere addresses will do.
symbolizer=$(command -v llvm-symbolizer || ls /usr/bin/llvm-symbolizer-* 2>/dev/null | head -1 || true)
[ -n "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH=$symbolizer
# See scripts/sanitize.sh for use_sigaltstack; every report is fatal.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:use_sigaltstack=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The inputs a target starts from: its seeds and regression inputs, and for pcap_fuzz the
# real captures of the shared corpus where it exists. Read-only for libFuzzer: only the
# first directory given (the scratch corpus) is written to.
seed_dirs() {
  local dirs=("$repo/tests/fuzz/corpus/$1" "$repo/tests/fuzz/regressions/$1")
  if [ "$1" = pcap_fuzz ] && [ -d "$repo/../shared/corpus/pcap" ]; then
    dirs+=("$(cd "$repo/../shared/corpus/pcap" && pwd)")
  fi
  printf '%s\n' "${dirs[@]}"
}

seed_count() {
  local n=0 d
  while read -r d; do n=$((n + $(find "$d" -type f ! -name '.*' | wc -l))); done < <(seed_dirs "$1")
  echo "$n"
}

# One fuzzing process: run_worker TARGET WORKER SECONDS RESTART. With RESTART it starts
# again after a crash until SECONDS are used up. Leaves, in $scratch/logs/TARGET.WORKER.*,
# the libFuzzer logs and a line "CPU_SECONDS EXECUTIONS RUNS FAILURES".
run_worker() {
  local t=$1 w=$2 total=$3 restart=$4
  local bin dict=() seeds=() start now left status run=0 failures=0 executions=0
  bin=$(binary "$t")
  [ -f "$repo/tests/fuzz/dict/$t.dict" ] && dict=(-dict="$repo/tests/fuzz/dict/$t.dict")
  mapfile -t seeds < <(seed_dirs "$t")
  start=$SECONDS
  local TIMEFORMAT='%U %S'
  : > "$scratch/logs/$t.$w.cpu"
  while :; do
    now=$SECONDS
    left=$((total - (now - start)))
    [ "$left" -ge 1 ] || break
    run=$((run + 1))
    local log="$scratch/logs/$t.$w.$run.log"
    status=0
    # The outer limit: libFuzzer's own -timeout and -rss_limit_mb stop a slow or greedy
    # input, but on running out of memory it first prints a heap profile, which for a
    # 2 GB heap of small blocks took an hour (a CI run); killed past its time plus two
    # minutes, the run counts as failed and its log says so.
    { time timeout -k 10 $((left + 120)) "$bin" "$scratch/corpus/$t" "${seeds[@]}" "${dict[@]}" -max_total_time="$left" \
        -max_len="$(max_len "$t")" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$scratch/artifacts/$t.$w.$run-" > "$log" 2>&1 || status=$?; } 2>> "$scratch/logs/$t.$w.cpu"
    executions=$((executions + $(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 | grep . || echo 0)))
    if [ "$status" -ne 0 ]; then
      { [ "$status" = 124 ] || [ "$status" = 137 ]; } && \
        echo "fuzz.sh: $t fuzz: killed after $((left + 120)) s (exit $status): an input ran past -timeout or -rss_limit_mb and was not stopped" >> "$log"
      failures=$((failures + 1))
      [ "$restart" = 1 ] && [ "$failures" -lt 100 ] || break
    fi
  done
  local cpu
  cpu=$(awk '{ s += $1 + $2 } END { printf "%.0f", s }' "$scratch/logs/$t.$w.cpu")
  echo "$cpu $executions $run $failures" > "$scratch/logs/$t.$w.summary"
}

# The inputs that made TARGET fail, one path per line.
artifacts_of() {
  find "$scratch/artifacts" -maxdepth 1 -type f -name "$1.*" ! -name '*slow-unit-*' | sort
}

# Runs the workers of `batch` (TARGET:WORKERS ...) at once, each for $seconds.
run_batch() {
  local entry t n w pids=()
  for entry in "$@"; do
    t=${entry%%:*}
    n=${entry##*:}
    mkdir -p "$scratch/corpus/$t"
    for ((w = 1; w <= n; w++)); do
      run_worker "$t" "$w" "$seconds" "$restart" &
      pids+=($!)
    done
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
}

trap 'echo "fuzz.sh: interrupted; scratch directory $scratch" >&2; exit 130' INT TERM

if [ "$mode" = short ]; then
  restart=0
  parallel=$(nproc)
  echo "fuzz.sh: ${#targets[@]} targets, $seconds s each, $parallel at a time; scratch $scratch" >&2
  for ((i = 0; i < ${#targets[@]}; i += parallel)); do
    batch=()
    for t in "${targets[@]:i:parallel}"; do batch+=("$t:1"); done
    run_batch "${batch[@]}"
  done
  failed=()
  for t in "${targets[@]}"; do
    read -r cpu execs runs failures < "$scratch/logs/$t.1.summary"
    printf 'fuzz.sh: %-22s %9s executions in %4s CPU-s%s\n' "$t" "$execs" "$cpu" \
      "$([ "$failures" -gt 0 ] && echo "  FAILED")" >&2
    [ "$failures" -gt 0 ] && failed+=("$t")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    for t in "${failed[@]}"; do
      echo "fuzz.sh: $t failed; its log: $(ls "$scratch/logs/$t".1.*.log | tail -1)" >&2
      grep -m 3 -E 'ERROR:|SUMMARY:|_fuzz: |fuzz: ' "$(ls "$scratch/logs/$t".1.*.log | tail -1)" | sed 's/^/    /' >&2 || true
      artifacts_of "$t" | sed 's/^/    input: /' >&2
    done
    echo "fuzz.sh: FAILED: ${failed[*]} (replay an input: BINARY INPUT; keep it in tests/fuzz/regressions/TARGET/)" >&2
    exit 1
  fi
  echo "fuzz.sh: all ${#targets[@]} targets ran $seconds s without a failure" >&2
  [ "${FUZZ_KEEP:-0}" = 1 ] && echo "fuzz.sh: scratch kept: $scratch" >&2 || rm -rf "$scratch"
  exit 0
fi

# long: JOBS processes spread over the targets, in turns of at most JOBS targets.
restart=1
echo "fuzz.sh: ${#targets[@]} targets, $seconds s each, $jobs processes in all; scratch $scratch" >&2
per_turn=$((jobs < ${#targets[@]} ? jobs : ${#targets[@]}))
for ((i = 0; i < ${#targets[@]}; i += per_turn)); do
  turn=("${targets[@]:i:per_turn}")
  batch=()
  for ((k = 0; k < ${#turn[@]}; k++)); do
    # JOBS split evenly over this turn's targets, the remainder to the first ones.
    n=$((jobs / ${#turn[@]} + (k < jobs % ${#turn[@]} ? 1 : 0)))
    batch+=("${turn[k]}:$n")
  done
  run_batch "${batch[@]}"
done

printf '%-22s %12s %14s %12s %8s\n' target CPU-seconds executions new-inputs crashes
total_cpu=0 total_execs=0 total_crashes=0 broken=()
for t in "${targets[@]}"; do
  cpu=0 execs=0 failures=0
  for s in "$scratch/logs/$t".*.summary; do
    read -r c e _ f < "$s"
    cpu=$((cpu + c))
    execs=$((execs + e))
    failures=$((failures + f))
  done
  new=$(find "$scratch/corpus/$t" -type f | wc -l)
  crashes=$(artifacts_of "$t" | wc -l)
  printf '%-22s %12s %14s %12s %8s\n' "$t" "$cpu" "$execs" "$new" "$crashes"
  total_cpu=$((total_cpu + cpu))
  total_execs=$((total_execs + execs))
  total_crashes=$((total_crashes + crashes))
  # A process that failed without leaving an input behind did not fuzz at all (a missing
  # library, a bad option): that is a failed run too, not a quiet one.
  [ "$failures" -gt "$crashes" ] && broken+=("$t")
done
printf '%-22s %12s %14s %12s %8s\n' total "$total_cpu" "$total_execs" "" "$total_crashes"
seeds=0
for t in "${targets[@]}"; do seeds=$((seeds + $(seed_count "$t"))); done
echo "(new-inputs: inputs libFuzzer added to the corpus beyond the $seeds seeds and regression inputs;" \
     "CPU-hours: $(awk -v s="$total_cpu" 'BEGIN { printf "%.2f", s / 3600 }'))"
if [ "$total_crashes" -gt 0 ]; then
  echo "crash inputs (replay: BINARY INPUT):" >&2
  for t in "${targets[@]}"; do artifacts_of "$t" | sed "s/^/  $t: /" >&2; done
fi
for t in "${broken[@]}"; do
  echo "fuzz.sh: $t: processes failed without an input to show for it; the end of its last log:" >&2
  tail -n 5 "$(ls "$scratch/logs/$t".*.log | tail -1)" | sed 's/^/    /' >&2
done
echo "fuzz.sh: scratch kept: $scratch" >&2
[ "$total_crashes" -eq 0 ] && [ ${#broken[@]} -eq 0 ]
