#!/bin/bash
# Runs on the GPU machine after .device/gpu-stream.sh made its capture (as
# .device/stream-rep.sh): --stream -c with the default threads, REPS (6) runs in a row
# for 10,000, 100 and 1 literals, GB/s each, to show the spread of one lease.
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
d=$PWD/.device; w=/tmp/gpufilter-pcap
cap=$(ls $w/big-*.pcap | head -1); bytes=$(stat -c %s "$cap")
for n in 10000 100 1; do
  for i in $(seq 1 ${REPS:-6}); do
    start=$EPOCHREALTIME
    "$d/gpufilter" --engine=host -F -c --stream -f $w/p$n --pcap "$cap" > /dev/null
    end=$EPOCHREALTIME
    awk -v s="$start" -v e="$end" -v b="$bytes" 'BEGIN { printf "%.2f ", b / (e - s) / 1e9 }'
  done
  echo " GB/s, $n literals, --stream, default threads"
done
