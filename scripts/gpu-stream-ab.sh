#!/bin/bash
# Runs on the GPU machine after scripts/stage-gpu-run.sh (as .device/gpu-stream-ab.sh), with
# an earlier gpufilter copied by hand to .device/gpufilter-old: --stream over two 2 GB
# captures (gpufilter-gen-pcap's, each copy new connections, and --same-ports: the samples'
# few 5-tuples reused), -F -c, 10,000 / 100 / 1 literals, default threads, the earlier
# binary beside this one, alternating, REPS (3) runs each, the compile cache warm: GB/s
# whole process and --stats' stream_threads; the reading threads READERS (3 4 6); per
# packet and --stream at 10,000 literals with the compile cache empty (a new
# GPUFILTER_CACHE_DIR each run) and warm; whether the outputs agree.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
d=$PWD/.device
w=/tmp/gpufilter-pcap-ab
mkdir -p $w
echo "cores: $(nproc)"
samples=("$d"/corpus/pcap/*.cap "$d"/corpus/pcap/*.pcap "$d"/corpus/pcap/*.trace)
[ -f $w/new.pcap ] || "$d/bin/gpufilter-gen-pcap" --out $w/new.pcap --size "${CAPTURE_SIZE:-2G}" "${samples[@]}"
[ -f $w/same.pcap ] || "$d/bin/gpufilter-gen-pcap" --out $w/same.pcap --size "${CAPTURE_SIZE:-2G}" --same-ports "${samples[@]}"
cat $w/new.pcap $w/same.pcap > /dev/null
python3 bench/capture_patterns.py $w
for n in 1 100 10000; do "$d/gpufilter" --engine=host -F -c -f $w/p$n --pcap $w/new.pcap > /dev/null; done  # the cache
run() {  # binary capture literals [args]
  local b=$1 cap=$2 n=$3; shift 3
  local bytes=$(stat -c %s "$cap") start=$EPOCHREALTIME
  local out=$("$b" --engine=host -F -c --stats "$@" -f $w/p$n --pcap "$cap" 2>&1 >/dev/null | grep -o '"reading_cpu_s":[0-9.]*\|"main_cpu_s":[0-9.]*\|"main_waited_for_reading_s":[0-9.]*\|"flow_thread_cpu_max_s":[0-9.]*' | tr '\n' ' ')
  local end=$EPOCHREALTIME
  awk -v b="$(basename $b)" -v c="$(basename $cap)" -v n=$n -v s="$start" -v e="$end" -v by="$bytes" -v o="$out" \
    'BEGIN { t = e - s; printf "%-14s %-9s %5d %.3f s %.2f GB/s %s\n", b, c, n, t, by / t / 1e9, o }'
}
for cap in $w/new.pcap $w/same.pcap; do
  for n in 10000 100 1; do
    for i in $(seq 1 ${REPS:-3}); do
      run "$d/gpufilter-old" $cap $n --stream
      run "$d/gpufilter" $cap $n --stream
    done
  done
done
echo "reading threads (this binary, new.pcap):"
for r in ${READERS:-3 4 6}; do for n in 10000 1; do GPUFILTER_READ_THREADS=$r run "$d/gpufilter" $w/new.pcap $n --stream; echo " ^ $r readers"; done; done
echo "per packet:"
for n in 10000 1; do run "$d/gpufilter" $w/new.pcap $n; run "$d/gpufilter" $w/new.pcap $n; done
echo "10,000 literals, the compile cache empty, then warm:"
for mode in "" --stream; do
  for i in $(seq 1 ${REPS:-3}); do GPUFILTER_CACHE_DIR=$(mktemp -d) run "$d/gpufilter" $w/new.pcap 10000 $mode; done
  for i in $(seq 1 ${REPS:-3}); do run "$d/gpufilter" $w/new.pcap 10000 $mode; done
done
same() {
  a=$("$d/gpufilter-old" --engine=host --stream "$@" --pcap $w/new.pcap | md5sum)
  b=$("$d/gpufilter" --engine=host --stream "$@" --pcap $w/new.pcap | md5sum)
  c=$("$d/gpufilter" --engine=host --stream -j1 "$@" --pcap $w/new.pcap | md5sum)
  [ "$a" = "$b" ] && [ "$b" = "$c" ] && echo "equal: $*" || echo "DIFFERENT: $* ($a $b $c)"
}
same -F -e google -e Host:
same --json -F -e GET
same -c -e ''
same -o -b -E -e 'Ho[a-z]t:'
