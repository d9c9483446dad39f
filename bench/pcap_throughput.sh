#!/usr/bin/env bash
# Capture throughput: a large capture generated from the sample captures
# (gpufilter-gen-pcap: each copy of them new connections), filtered per packet and per reassembled TCP stream with 1, 100
# and 10,000 literals. Prints packets/s and GB/s (whole process, page-cached file).
#   bench/pcap_throughput.sh [--size 2G] [--work build/bench-pcap] [--gpufilter build/gpufilter]
#                            [--gen build/bench/gpufilter-gen-pcap] [--samples ../shared/corpus/pcap]
#                            [-- EXTRA-GPUFILTER-ARGS]
set -euo pipefail
size=2G work=build/bench-pcap gpufilter=build/gpufilter gen=build/bench/gpufilter-gen-pcap
samples=../shared/corpus/pcap extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size=$2; shift 2 ;; --work) work=$2; shift 2 ;; --gpufilter) gpufilter=$2; shift 2 ;;
    --gen) gen=$2; shift 2 ;; --samples) samples=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: $0 [--size S] [--work DIR] [--gpufilter P] [--gen P] [--samples DIR] [-- ARGS]" >&2; exit 2 ;;
  esac
done
mkdir -p "$work"
capture=$work/big-$size-connections.pcap  # each copy new client ports (gen-pcap since 2026-12-01)
if [ ! -f "$capture" ]; then
  "$gen" --out "$capture" --size "$size" "$samples"/*.cap "$samples"/*.pcap "$samples"/*.trace > "$work/gen.json"
fi
cat "$capture" > /dev/null
packets=$(python3 -c "import json;print(json.load(open('$work/gen.json'))['packets'])")
bytes=$(stat -c %s "$capture")
python3 "$(dirname "$0")/capture_patterns.py" "$work"
echo "capture: $bytes bytes, $packets packets (${extra[*]:-default engine})"
echo "| mode | literals | selected | seconds | packets/s | GB/s |"
echo "|---|---:|---:|---:|---:|---:|"
for mode in packet stream; do
  for n in 1 100 10000; do
    args=(-c -f "$work/p$n" --pcap "$capture")
    [ "$mode" = stream ] && args+=(--stream)
    start=$EPOCHREALTIME
    selected=$("$gpufilter" "${extra[@]}" "${args[@]}" || true)
    end=$EPOCHREALTIME
    awk -v m="$mode" -v n="$n" -v c="$selected" -v s="$start" -v e="$end" -v p="$packets" -v b="$bytes" \
      'BEGIN { t = e - s; printf "| %s | %d | %s | %.3f | %.0f | %.2f |\n", m, n, c, t, p / t, b / t / 1e9 }'
  done
done
