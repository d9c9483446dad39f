#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-icase-utf8.sh). -F -i in a UTF-8 locale: fixed strings whose letters fold
# beyond ASCII ('s' to U+017F) scanned as their case variants on the literal path, beside
# the same sets in the C locale and, with BUILD_BEFORE (an older gpufilter), beside the
# regex path that took them before; 1,000 to 1,000,000 literals over a 4 GB corpus of
# gpufilter-gen-corpus in /dev/shm, two runs each. Then the tests of the change.
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nproc; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
w=/dev/shm/gpu-icase-utf8; mkdir -p $w
[ -s $w/patterns-1000000.txt ] || timeout 120 .device/bin/gpufilter-gen-corpus --loghub .device/corpus/loghub \
  --size 4294967296 --out $w --seed 1 > $w/meta.json || exit 1
cat $w/corpus.log > /dev/null
run() {  # LOCALE BINARY N [OPTION]
  local s e
  s=$(date +%s%N)
  LC_ALL=$1 timeout 60 "$2" ${4:-} --stats -c -F -i -f $w/patterns-$3.txt $w/corpus.log > $w/out 2> $w/err
  e=$(date +%s%N)
  echo "$1 $2 $3 ${4:-} wall_ms=$(( (e - s) / 1000000 )) count=$(cat $w/out) $(grep -oE '"(engine|patterns)":"?[a-z0-9]+|"[a-z_]+_(ms|gbps)":[0-9.]+' $w/err | tr '\n' ' ')"
}
for n in 1000 10000 100000 1000000; do for i in 1 2; do
  run C .device/gpufilter $n
  run C.UTF-8 .device/gpufilter $n
  [ -n "${BUILD_BEFORE:-}" ] && [ $i = 1 ] && run C.UTF-8 "$BUILD_BEFORE" $n
done; done
# The engines beside each other where the variants pass the host engine's 10,000 literals.
for n in 10000 30000; do
  [ -s $w/patterns-$n.txt ] || head -$n $w/patterns-100000.txt > $w/patterns-$n.txt
  for i in 1 2; do for e in cpu gpu; do run C.UTF-8 .device/gpufilter $n --engine=$e; done; done
  run C .device/gpufilter $n --engine=gpu
done
export GPUFILTER_GREP=$PWD/.device/grep GPUFILTER_BIN=$PWD/.device/gpufilter GPUFILTER_CORPUS_DIR=$PWD/.device/corpus
for t in cli_grep_differential_test cli_pattern_counts_test cli_json_test; do
  [ -x .device/tests/$t ] && .device/tests/$t --gtest_filter='*CaseVariants*:*FixedStrings*:*CaseFolding*' 2>&1 | tail -2
done
