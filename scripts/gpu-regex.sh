#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh.
# Regex checks and rows on the GPU machine (issue 16): the differential tests against grep
# 3.8 on the real GPU, then bench/run.py's regex sets beside grep -E, rg and Hyperscan.
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
d=$PWD/.device
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$d/gpufilter --list-devices
export GPUFILTER_BIN=$d/gpufilter GPUFILTER_GREP=$d/grep GPUFILTER_CORPUS_DIR=$d/corpus GPUFILTER_TEST_KNOBS=2
( cd $d && timeout 200 ./tests/cli_regex_differential_test 2>&1 | grep -E "TALLY|PASSED|FAILED|differs|args" | head -60 )
( cd $d && timeout 60 ./tests/cli_regex_parallel_test 2>&1 | grep -E "PASSED|FAILED|differs|args" | head -20 )
nproc
BENCH_WORK=/tmp/gb BENCH_TAG=regex timeout 300 bash .device/gpu-bench.sh --size=${REGEX_BENCH_SIZE:-4G} --timeout=25 --sets=100,logregex,nofactor,templates 2>&1 | tail -40
