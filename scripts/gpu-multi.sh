#!/bin/bash
# Issue 21: several GPUs of one host on one input. Runs on a multi-GPU machine from the
# repository root after scripts/stage-gpu-run.sh (as .device/gpu-multi.sh); writes to $OUT.
#  1. the GPU test binaries on every device (CUDA_VISIBLE_DEVICES picks one), while
#     bench/run.py's corpus is generated;
#  2. bench/run.py on that corpus (SIZE, default 20G; SETS, default 10, 1,000, 100,000,
#     1,000,000 literals): the OpenCL engine on every GPU (--device all) and on each GPU
#     alone (with the kernel-only bench), the default engine beside the bare Hyperscan
#     reference, and --engine=both --device=all for 10 to 10,000 literals (BOTH=0: not).
#     MODE=co: only co-scanning (SETS_CO, default 10,000 and 100,000 literals): the host
#     engine alone, --engine=both with one GPU, and with every GPU.
# NVLink multicast stays off (nothing here asks for it).
set -u
sh .device/opencl-setup.sh
d=$PWD/.device
export LD_LIBRARY_PATH=$d/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
export GPUFILTER_BIN=$d/gpufilter GPUFILTER_GREP=$d/grep GPUFILTER_CORPUS_DIR=$d/corpus GPUFILTER_TEST_KNOBS=1
OUT=${OUT:-/tmp/gpu-multi}; mkdir -p "$OUT"
SIZE=${SIZE:-20G}
SETS=${SETS:-10,1000,100000,1000000}
logs=/tmp/gpu-multi-logs; mkdir -p $logs
# At most a few files come back: summary.txt, bench.txt and one results-TAG.json per pass.
{ nvidia-smi -L; nvidia-smi topo -m; "$d/gpufilter" --list-devices; } > "$OUT/summary.txt" 2>&1
gpus=$(nvidia-smi -L | wc -l)

(
  for ((g = 0; g < gpus; g++)); do
    for t in device_test gpu_device_test scanner_test co_scanner_test device_fault_test file_scan_test; do
      [ -x "$d/tests/$t" ] || continue
      CUDA_VISIBLE_DEVICES=$g timeout 200 "$d/tests/$t" > "$logs/gpu$g-$t.log" 2>&1
      echo "GPU $g $t: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$logs/gpu$g-$t.log" | tr '\n' ' ')"
      grep -E -A8 '^\[  FAILED  \]|Failure' "$logs/gpu$g-$t.log" | head -40
    done
  done > $logs/tests.txt
) &
tests=$!

bench() {  # TAG [bench/run.py options]: one pass over the sets, its results in OUT/results-TAG.json
  local tag=$1; shift
  echo "=== $tag: $*"
  python3 bench/run.py --work /tmp/gpufilter-bench --size="$SIZE" --sets="$SETS" --cases=none --timeout=30 \
    --gpufilter "$d/gpufilter" --grep "$d/grep" --rg "$d/bin/rg" --hs-count "$d/bin/gpufilter-hs-count" \
    --kernel-bench none --gen-corpus "$d/bin/gpufilter-gen-corpus" --loghub "$d/corpus/loghub" "$@" 2>&1 |
    grep -v skipped
  cp /tmp/gpufilter-bench/results.json "$OUT/results-$tag.json" 2>/dev/null
}
if [ "${MODE:-all}" = co ]; then  # co-scanning only: the host engine alone, with one GPU, with all
  {
    SETS=10 bench corpus --tools=hs
    SETS=${SETS_CO:-10000,100000} bench host --tools=gpufilter,hs --engine=cpu
    CUDA_VISIBLE_DEVICES=0 SETS=${SETS_CO:-10000,100000} bench both-0 --tools=gpufilter --engine=both
    SETS=${SETS_CO:-10000,100000} bench both-all --tools=gpufilter --engine=both --device=all
  } > "$OUT/bench.txt" 2>&1
  wait $tests
  cat $logs/tests.txt >> "$OUT/summary.txt"
  exit 0
fi
{
  SETS=10 bench corpus --tools=hs
  wait $tests
  cat $logs/tests.txt >> "$OUT/summary.txt"
  bench gpu-all --tools=gpufilter --engine=gpu --device=all
  for ((g = 0; g < gpus; g++)); do
    CUDA_VISIBLE_DEVICES=$g bench gpu-$g --tools=gpufilter --engine=gpu --kernel-bench "$d/bin/gpufilter-kernel-bench"
  done
  bench default --tools=gpufilter,hs
  [ "${BOTH:-1}" = 1 ] && SETS=10,1000,10000 bench both-all --tools=gpufilter --engine=both --device=all
} > "$OUT/bench.txt" 2>&1
exit 0
