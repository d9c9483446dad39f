#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-reliability.sh), for the runs of docs/RELIABILITY.md that CI does not make:
#   bash .device/gpu-reliability.sh fuzz SECONDS [JOBS]   scripts/fuzz.sh long on the staged
#       fuzz targets (build-asan/fuzz), JOBS processes (default: every core)
#   bash .device/gpu-reliability.sh soak SECONDS [RATE]   bench/soak.sh: gpufilterd on the
#       GPU engine at RATE (default 100M) across files, TCP and UDP
#   bash .device/gpu-reliability.sh faults                the device-fault tests on the GPU
#       (the pipeline's, the CLI's and gpufilterd's)
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo/.device"
sh opencl-setup.sh >/dev/null
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc
case "${1:-}" in
  fuzz)
    cd "$repo"
    bash scripts/fuzz.sh long "${2:?seconds}" "${3:-$(nproc)}" "$repo/.device/fuzz"
    ;;
  soak)
    cd "$repo"
    bash bench/soak.sh --duration "${2:?seconds}" --rate "${3:-100M}" --work /tmp/soak \
      --gpufilterd .device/gpufilterd --load .device/bin/gpufilter-soak-load --corpus .device/corpus/loghub
    ;;
  faults)
    export GPUFILTER_BIN=$PWD/gpufilter GPUFILTER_GREP=$PWD/grep GPUFILTER_CORPUS_DIR=$PWD/corpus
    ./gpufilter --list-devices
    for t in device_fault_test cli_device_fault_test; do
      echo "=== $t"; ./tests/$t --gtest_brief=1 2>&1 | tail -5
    done
    # gpufilterd on the GPU engine, its second finish failing.
    echo "=== gpufilterd_test (device fault)"
    GPUFILTERD_BIN=$PWD/gpufilterd GPUFILTER_SOURCE_DIR=$repo \
      ./tests/gpufilterd_test --gtest_brief=1 --gtest_filter='*DeviceFailing*' 2>&1 | tail -5
    ;;
  *) echo "usage: gpu-reliability.sh fuzz SECONDS [JOBS] | soak SECONDS [RATE] | faults" >&2; exit 2 ;;
esac
