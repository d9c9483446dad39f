#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-build-time.sh). Issue 17 item 3: the start-up of large literal sets, step by
# step from --stats (device_ms, table_ms, kernel_ms, matcher_ms = the tables' upload,
# engine_ms = the scanner), 1,000,000 and 100,000 literals on an empty log and on a 4 GB
# corpus of gpufilter-gen-corpus, three runs each; with BUILD_BEFORE (an older gpufilter)
# beside this one, alternating.
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nproc; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
w=/dev/shm/gpu-build-time; mkdir -p $w
[ -s $w/patterns-1000000.txt ] || timeout 120 .device/bin/gpufilter-gen-corpus --loghub .device/corpus/loghub \
  --size 4294967296 --out $w --seed 1 > $w/meta.json || exit 1
: > $w/empty.log
bins=".device/gpufilter"
[ -n "${BUILD_BEFORE:-}" ] && bins="$BUILD_BEFORE $bins"
for n in 1000000 100000; do for f in empty.log corpus.log; do for i in 1 2 3; do for b in $bins; do
  s=$(date +%s%N)
  timeout 60 "$b" --engine=gpu --stats -c -F -f $w/patterns-$n.txt $w/$f > $w/out 2> $w/err
  e=$(date +%s%N)
  echo "$b $n $f wall_ms=$(( (e - s) / 1000000 )) count=$(cat $w/out) $(grep -oE '"[a-z_]+_(ms|gbps)":[0-9.]+' $w/err | tr '\n' ' ')"
done; done; done; done
