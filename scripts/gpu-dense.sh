#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-dense.sh): issue 17's dense output, every selected line written to a file on
# /dev/shm. A corpus of DENSE_SIZE (default 4G) with the bench's dense set; beside
# gpufilter (--stats: where the pipeline's time went), what one thread writing the same
# number of bytes to /dev/shm takes (dd), the ceiling of a single writer.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
d=$PWD/.device
w=${DENSE_WORK:-/tmp/gpufilter-dense}
size=${DENSE_SIZE:-4G}
mkdir -p $w
[ -f $w/corpus.log ] || "$d/bin/gpufilter-gen-corpus" --loghub "$d/corpus/loghub" --size "$size" --out $w > $w/gen.json
cat $w/corpus.log > /dev/null
bytes=$(stat -c %s $w/corpus.log)
echo "corpus: $bytes bytes; patterns: $(wc -l < $w/patterns-dense.txt) (dense)"
for i in 1 2 3; do
  rm -f /dev/shm/dense-out
  start=$EPOCHREALTIME
  stats=$(LC_ALL=C "$d/gpufilter" -F -f $w/patterns-dense.txt $w/corpus.log --stats 2>&1 > /dev/shm/dense-out | tr ',' '\n' | grep -E '"(engine|scan_s|wait_s|deliver_s|fill_s|workers_cpu_s|workers_after_scan_s)"' | tr '\n' ' ')
  end=$EPOCHREALTIME
  out=$(stat -c %s /dev/shm/dense-out)
  awk -v s="$start" -v e="$end" -v b="$bytes" -v o="$out" -v st="$stats" \
    'BEGIN { t = e - s; printf "gpufilter dense: %.3f s, %.2f GB/s in, %.2f GB out  %s\n", t, b / t / 1e9, o / 1e9, st }'
done
for i in 1 2; do
  rm -f /dev/shm/dd-out
  dd if=/dev/shm/dense-out of=/dev/shm/dd-out bs=4M 2>&1 | tail -1
done
rm -f /dev/shm/dd-out
for i in 1 2; do
  rm -f /dev/shm/dd-out
  head -c "$out" $w/corpus.log | dd of=/dev/shm/dd-out bs=4M 2>&1 | tail -1
done
rm -f /dev/shm/dense-out /dev/shm/dd-out
