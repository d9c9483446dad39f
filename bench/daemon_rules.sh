#!/usr/bin/env bash
# gpufilterd scans once for all its rules: the same input through 1, 10, 100, 1,000 and
# 10,000 rules (one literal each, from gpufilter-gen-corpus's pattern sets), on standard
# input. Prints, per rule count, the wall time, the seconds the scan engine was busy
# (gpufilterd's scan_busy_seconds) and the alerts; the busy seconds should barely grow.
#   bench/daemon_rules.sh [--size 256M] [--engine auto|gpu|cpu] [--work build/bench-daemon]
#                         [--gpufilterd build/gpufilterd] [--gen build/bench/gpufilter-gen-corpus]
#                         [--loghub ../shared/corpus/loghub]
set -euo pipefail
size=256M engine=auto work=build/bench-daemon gpufilterd=build/gpufilterd
gen=build/bench/gpufilter-gen-corpus loghub=../shared/corpus/loghub
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size=$2 ;; --engine) engine=$2 ;; --work) work=$2 ;; --gpufilterd) gpufilterd=$2 ;;
    --gen) gen=$2 ;; --loghub) loghub=$2 ;;
    *) echo "usage: $0 [--size S] [--engine E] [--work DIR] [--gpufilterd P] [--gen P] [--loghub DIR]" >&2; exit 2 ;;
  esac
  shift 2
done
mkdir -p "$work"
[ -f "$work/corpus.log" ] || "$gen" --loghub "$loghub" --out "$work" --size "$size" >&2
cat "$work/corpus.log" > /dev/null  # page cache
bytes=$(stat -c %s "$work/corpus.log")
echo "| rules | wall s | scan busy s | batches | alerts | GB/s (wall) |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in 1 10 100 1000 10000; do
  python3 - "$work/patterns-$n.txt" "$work/rules-$n.yaml" "$engine" <<'PY'
import json, sys
patterns = [p for p in open(sys.argv[1], "rb").read().decode("latin-1").split("\n") if p]
with open(sys.argv[2], "w") as f:
    f.write("sources:\n  - stdin: true\nrules:\n")
    for i, p in enumerate(patterns):
        f.write(f"  - name: r{i}\n    patterns: [{json.dumps(p)}]\n    cooldown: 1h\n")
    f.write(f"outputs:\n  - type: jsonl\n    path: \"-\"\nserver: 127.0.0.1:0\nengine: {sys.argv[3]}\n")
PY
  start=$EPOCHREALTIME
  "$gpufilterd" --config "$work/rules-$n.yaml" < "$work/corpus.log" > "$work/alerts-$n.jsonl" 2> "$work/log-$n.txt"
  end=$EPOCHREALTIME
  busy=$(grep -o 'scan_busy_seconds=[0-9.]*' "$work/log-$n.txt" | cut -d= -f2)
  batches=$(grep -o ' batches=[0-9]*' "$work/log-$n.txt" | cut -d= -f2)
  alerts=$(wc -l < "$work/alerts-$n.jsonl")
  awk -v n="$n" -v s="$start" -v e="$end" -v b="$busy" -v k="$batches" -v a="$alerts" -v bytes="$bytes" \
    'BEGIN { printf "| %d | %.3f | %.3f | %d | %d | %.2f |\n", n, e - s, b, k, a, bytes / (e - s) / 1e9 }'
done
