#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-captures.sh): capture throughput (bench/pcap_throughput.sh) on a capture of
# CAPTURE_SIZE (default 2G) generated from the samples, per packet and with --stream, on
# the host engine and on the GPU.
set -u
sh .device/opencl-setup.sh >/dev/null
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
d=$PWD/.device
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for engine in cpu gpu; do
  bash bench/pcap_throughput.sh --size "${CAPTURE_SIZE:-2G}" --work /tmp/gpufilter-pcap --gpufilter "$d/gpufilter" \
    --gen "$d/bin/gpufilter-gen-pcap" --samples "$d/corpus/pcap" -- --engine=$engine
done
