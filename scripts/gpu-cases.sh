#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-cases.sh): bench/run.py's cases (time to the first line, 500 small files, a
# capture; tshark is not installed there) and the sets 1 and dense, beside the peers, on a
# corpus of CASES_SIZE (default 2G). results-cases.json lands in $OUT.
set -u
BENCH_WORK=/tmp/gc BENCH_TAG=cases bash .device/gpu-bench.sh --size="${CASES_SIZE:-2G}" --timeout=30 \
  --sets="${CASES_SETS:-1,dense}" --kernel-bench=none 2>&1 | grep -E '^\| |corpus:|GB/s  |case ' | grep -v -- '--- |'
