#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-capture-cold.sh): issue 19's speed rows (a 2 GB capture, -F -c, per packet and
# --stream, 10,000 / 100 / 1 literals, default threads) with the Hyperscan compile cache
# cold (an empty GPUFILTER_CACHE_DIR each run) and warm (filled by the run before), REPS
# (3) runs each: GB/s whole process, and --stats' build_ms and stream_threads.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
d=$PWD/.device
w=/tmp/gpufilter-pcap
echo "cores: $(nproc)"
bash bench/pcap_throughput.sh --size "${CAPTURE_SIZE:-2G}" --work $w --gpufilter "$d/gpufilter" \
  --gen "$d/bin/gpufilter-gen-pcap" --samples "$d/corpus/pcap" -- --engine=host -F
cap=$(ls $w/big-*.pcap | head -1)
bytes=$(stat -c %s "$cap")
warm=$(mktemp -d)
for n in 10000 100 1; do
  for mode in packet stream; do
    extra=(); [ $mode = stream ] && extra=(--stream)
    for cache in cold warm; do
      for i in $(seq 1 ${REPS:-3}); do
        dir=$warm; [ $cache = cold ] && dir=$(mktemp -d)
        start=$EPOCHREALTIME
        stats=$(GPUFILTER_CACHE_DIR=$dir "$d/gpufilter" --engine=host -F -c --stats "${extra[@]}" -f $w/p$n --pcap "$cap" 2>&1 >/dev/null)
        end=$EPOCHREALTIME
        b=$(echo "$stats" | grep -o '"build_ms":[0-9.]*' | head -1)
        st=$(echo "$stats" | grep -o '"main_cpu_s":[0-9.]*' | head -1)
        awk -v m=$mode -v c=$cache -v n=$n -v s="$start" -v e="$end" -v by="$bytes" -v b="$b" -v st="$st" \
          'BEGIN { t = e - s; printf "%-6s %5d %-4s %.3f s %.2f GB/s %s %s\n", m, n, c, t, by / t / 1e9, b, st }'
      done
    done
  done
done
