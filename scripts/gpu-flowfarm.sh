#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-flowfarm.sh): --stream over a capture file on many threads
# (cli/flow_farm.hpp). bench/pcap_throughput.sh's rows with one thread (-j1), the
# default and JOBS (default "4 8") threads, fixed strings (-F), on a capture of
# CAPTURE_SIZE (default 2G); then whether the default prints byte for byte what -j1
# prints, for text, JSON, -o and regexes.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
d=$PWD/.device
w=/tmp/gpufilter-pcap
echo "cores: $(nproc)"
throughput() {
  bash bench/pcap_throughput.sh --size "${CAPTURE_SIZE:-2G}" --work $w --gpufilter "$d/gpufilter" \
    --gen "$d/bin/gpufilter-gen-pcap" --samples "$d/corpus/pcap" -- --engine=host -F "$@" 2>&1 | grep -v "^|---"
}
throughput -j1 | grep -v "| packet"
throughput
for j in ${JOBS:-4 8}; do throughput -j"$j" | grep "stream"; done
cap=$(ls $w/big-*.pcap | head -1)
run_both() {
  a=$("$d/gpufilter" --engine=host -j1 --stream "$@" --pcap "$cap" | md5sum)
  b=$("$d/gpufilter" --engine=host --stream "$@" --pcap "$cap" | md5sum)
  [ "$a" = "$b" ] && echo "equal: $*" || echo "DIFFERENT: $*"
}
run_both -F google
run_both -E 'GET|POST'
run_both --json -F -e GET -e HTTP
run_both -o -F HTTP
run_both -P 'Ho.t'
run_both -c -e ''
