#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-bench.sh): registers NVIDIA's OpenCL and runs bench/run.py with the staged
# tools. Arguments go to bench/run.py (default: --size=16G --timeout=60); a 16 GB run of
# every set takes longer than one device command may, so give --sets in two calls, e.g.
#   BENCH_TAG=a bash .device/gpu-bench.sh --size=16G --timeout=60 --sets=1,10,100,1000,dense
#   BENCH_TAG=b bash .device/gpu-bench.sh --size=16G --timeout=60 --sets=10000,100000,1000000,icase
# results-TAG.json and throughput-TAG.png land in $OUT.
set -u
sh .device/opencl-setup.sh
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
d=$PWD/.device
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 bench/run.py --work "${BENCH_WORK:-/tmp/gpufilter-bench}" --gpufilter "$d/gpufilter" --grep "$d/grep" \
  --rg "$d/bin/rg" --hs-count "$d/bin/gpufilter-hs-count" --kernel-bench "$d/bin/gpufilter-kernel-bench" \
  --gen-corpus "$d/bin/gpufilter-gen-corpus" --gen-pcap "$d/bin/gpufilter-gen-pcap" --loghub "$d/corpus/loghub" \
  "${@:---size=16G --timeout=60}"
rc=$?
tag=${BENCH_TAG:-all}
cp "${BENCH_WORK:-/tmp/gpufilter-bench}/results.json" "${OUT:-/tmp}/results-$tag.json"
cp "${BENCH_WORK:-/tmp/gpufilter-bench}/throughput.png" "${OUT:-/tmp}/throughput-$tag.png" 2>/dev/null
exit $rc
