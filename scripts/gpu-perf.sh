#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-perf.sh). Issue 17's rows: the default engine beside grep, rg and the
# Hyperscan reference, then --engine=cpu (the host engine scanning the mapped file in
# place) and --engine=gpu beside the reference only, on one page-cached corpus.
#   PERF_SIZE (default 8G), PERF_SETS (default 1,10,100,1000,10000)
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
size=${PERF_SIZE:-8G}
sets=${PERF_SETS:-1,10,100,1000,10000}
nproc
pass() {  # pass TAG SECONDS ARGS...
  local tag=$1 limit=$2
  shift 2
  echo "=== $tag: $*"
  BENCH_WORK=/tmp/gp BENCH_TAG=$tag timeout "$limit" bash .device/gpu-bench.sh --size="$size" --timeout=30 "$@" 2>&1 |
    grep -E '^\| |corpus:|GB/s  ' | grep -v -- '--- |' | tail -14
}
pass auto 300 --sets="$sets"
pass cpu 150 --sets="$sets" --engine=cpu --tools=gpufilter,hs --kernel-bench=none
pass gpu 120 --sets="$sets" --engine=gpu --tools=gpufilter --kernel-bench=none
# The dense set (90 % of lines selected, written to /dev/shm) and -i, beside the reference.
pass extra 150 --sets="${PERF_EXTRA:-dense,icase,100000}" --tools=gpufilter,hs --kernel-bench=none
