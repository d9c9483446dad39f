#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-latency.sh): bench/latency (gpufilter-latency) at 1,000, 10,000 and 100,000
# lines per second through a pipe and through TCP, on the host engine, on the GPU with
# small batches scanned on the host (the default), and on the GPU for every batch
# (--host-scan-below=0). Tables on stdout; latency-*.json in $OUT.
set -u
sh .device/opencl-setup.sh
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
d=$PWD/.device
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
seconds=${LATENCY_SECONDS:-5}
rc=0
run() {
  local tag=$1; shift
  "$d/bin/gpufilter-latency" --gpufilter "$d/gpufilter" --seconds "$seconds" --json "${OUT:-/tmp}/latency-$tag.json" -- "$@" || rc=1
}
run host --engine=cpu
run gpu --engine=gpu
run gpu-every-batch --engine=gpu --host-scan-below=0
exit $rc
