#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-literal.sh): one literal, -c, over a page-cached Loghub corpus, gpufilter
# beside grep 3.8, rg and the Hyperscan reference, alternating, three runs each
# (milliseconds, whole process; the count in brackets). gpufilter runs as it chooses (its --stats says whether it mapped the
# file: mapping_beats_reading()), and mapped and read by force (GPUFILTER_MAP_FILES);
# LITERAL_BEFORE: a folder holding an older gpufilter, run beside.
#   LITERAL_SIZE (bytes, default 4294967296), LITERAL_DIR (default /dev/shm)
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
export LC_ALL=C
nproc
w=${LITERAL_DIR:-/dev/shm}/gpu-literal
mkdir -p $w
[ -s $w/corpus.log ] || timeout 200 .device/bin/gpufilter-gen-corpus --loghub .device/corpus/loghub \
  --size "${LITERAL_SIZE:-4294967296}" --out $w --seed 1 > $w/meta.json || exit 1
ls -la $w/corpus.log
cat $w/corpus.log > /dev/null
.device/gpufilter --stats -cF zzzq $w/corpus.log 2>&1 | grep -oE '"(engine|inputs_mapped|total_s)":[^,]+' | tr '\n' ' '; echo
tools="gpufilter:.device/gpufilter map:.device/gpufilter read:.device/gpufilter grep:.device/grep rg:.device/bin/rg hs:.device/bin/gpufilter-hs-count"
[ -n "${LITERAL_BEFORE:-}" ] && tools="before:$LITERAL_BEFORE/gpufilter $tools"
run() {  # TAG BIN LITERAL: prints seconds and the count
  local tag=$1 bin=$2 lit=$3 env=()
  [ "$tag" = map ] && env=(GPUFILTER_MAP_FILES=1)
  [ "$tag" = read ] && env=(GPUFILTER_MAP_FILES=0)
  if [ "$tag" = hs ]; then printf '%s\n' "$lit" > $w/lit.txt; set -- "$bin" -f $w/lit.txt $w/corpus.log
  else set -- "$bin" -cF "$lit" $w/corpus.log; fi
  local start=$(date +%s%N)
  local out=$(env "${env[@]}" timeout 60 "$@" 2>&1 | tail -1)
  local end=$(date +%s%N)
  printf '%d(%s) ' $(( (end - start) / 1000000 )) "${out##* }"
}
for lit in "error" "INFO" "Failed password" "session opened for user" "e" "zzzq"; do
  declare -A times=()
  for i in 1 2 3; do for t in $tools; do
    IFS=: read -r tag bin <<< "$t"
    times[$tag]+="$(run "$tag" "$bin" "$lit")"
  done; done
  for t in $tools; do IFS=: read -r tag bin <<< "$t"; echo "$lit | $tag | ${times[$tag]}"; done
  unset times
done
# The bench's literal sets (-f), where Hyperscan does more work per byte.
for n in 100 1000; do
  declare -A times=()
  for i in 1 2 3; do for t in $tools; do
    IFS=: read -r tag bin <<< "$t"
    [ "$tag" = rg ] || [ "$tag" = grep ] && continue
    env=(); [ "$tag" = map ] && env=(GPUFILTER_MAP_FILES=1); [ "$tag" = read ] && env=(GPUFILTER_MAP_FILES=0)
    if [ "$tag" = hs ]; then set -- "$bin" -f $w/patterns-$n.txt $w/corpus.log; else set -- "$bin" -cF -f $w/patterns-$n.txt $w/corpus.log; fi
    start=$(date +%s%N); out=$(env "${env[@]}" timeout 60 "$@" 2>&1 | tail -1); end=$(date +%s%N)
    times[$tag]+="$(printf '%d(%s) ' $(( (end - start) / 1000000 )) "${out##* }")"
  done; done
  for t in $tools; do IFS=: read -r tag bin <<< "$t"; [ -n "${times[$tag]:-}" ] && echo "patterns-$n | $tag | ${times[$tag]}"; done
  unset times
done
