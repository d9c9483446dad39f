#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-stream.sh): --stream over a 2 GB capture with the reading threads of
# cli/packets_ahead.hpp, 1 to 4 of them (GPUFILTER_READ_THREADS; default: one per six
# cores), 1 / 100 / 10,000 literals, whole process, GB/s and --stats' stream_threads
# (where the time went); then whether they print byte for byte what -j1 prints.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
d=$PWD/.device
w=/tmp/gpufilter-pcap
echo "cores: $(nproc)"
# The capture and the pattern files, as bench/pcap_throughput.sh makes them (its -j1 row too).
bash bench/pcap_throughput.sh --size "${CAPTURE_SIZE:-2G}" --work $w --gpufilter "$d/gpufilter" \
  --gen "$d/bin/gpufilter-gen-pcap" --samples "$d/corpus/pcap" -- --engine=host -F -j1 2>&1 | grep "stream\|capture"
cap=$(ls $w/big-*.pcap | head -1)
bytes=$(stat -c %s "$cap")
for readers in default 1 2 3 4; do
  for n in 1 100 10000; do
    for run in 1 2; do
      env=()
      [ "$readers" != default ] && env=(GPUFILTER_READ_THREADS=$readers)
      start=$EPOCHREALTIME
      stats=$(env "${env[@]}" "$d/gpufilter" --engine=host -F -c --stream --stats -f $w/p$n --pcap "$cap" 2>&1 >/dev/null | grep -o '"stream_threads":{[^}]*}')
      end=$EPOCHREALTIME
      awk -v r="$readers" -v n="$n" -v s="$start" -v e="$end" -v b="$bytes" -v st="$stats" \
        'BEGIN { t = e - s; printf "readers %-7s literals %5d  %.3f s  %.2f GB/s  %s\n", r, n, t, b / t / 1e9, st }'
    done
  done
done
run_both() {
  a=$("$d/gpufilter" --engine=host -j1 --stream "$@" --pcap "$cap" | md5sum)
  b=$(GPUFILTER_READ_THREADS=4 "$d/gpufilter" --engine=host --stream "$@" --pcap "$cap" | md5sum)
  [ "$a" = "$b" ] && echo "equal: $*" || echo "DIFFERENT: $*"
}
run_both -F google
run_both -E 'GET|POST'
run_both --json -F -e GET -e HTTP
run_both -o -F HTTP
run_both -c -e ''
