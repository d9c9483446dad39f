#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-only-matching.sh). Everyday -o/--color and -i regexes over a 2 GB corpus of
# gpufilter-gen-corpus in /dev/shm, output into a file there: gpufilter beside rg and grep
# 3.8 (grep only where it ends within 60 s), and with BUILD_BEFORE (an older gpufilter)
# beside that, two runs each, the same output checked. Then the tests of the change.
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nproc; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
w=/dev/shm/gpu-only-matching; mkdir -p $w
[ -s $w/corpus.log ] || timeout 120 .device/bin/gpufilter-gen-corpus --loghub .device/corpus/loghub \
  --size 2147483648 --out $w --seed 1 > $w/meta.json || exit 1
cat $w/corpus.log > /dev/null
rg=.device/bin/rg; [ -x $rg ] || rg=rg
run() {  # NAME LOCALE TOOL ARGS...
  local name=$1 loc=$2 tool=$3 s e; shift 3
  s=$(date +%s%N)
  LC_ALL=$loc timeout 60 "$tool" "$@" $w/corpus.log > $w/out.$name 2> $w/err
  local rc=$?
  e=$(date +%s%N)
  echo "$name $loc $(basename $tool) ms=$(( (e - s) / 1000000 )) rc=$rc md5=$(md5sum < $w/out.$name | cut -c1-8)"
}
ip='[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+'; mail='[[:alnum:]._-]+@[[:alnum:].-]+'; tm='[0-9]{2}:[0-9]{2}:[0-9]{2}'
for loc in C.UTF-8 C; do for i in 1 2; do
  run ip $loc .device/gpufilter -oE "$ip"; run ip $loc $rg -o "$ip"
  run mail $loc .device/gpufilter -oE "$mail"; run mail $loc $rg -o "$mail"
  run time $loc .device/gpufilter -oE "$tm"; run time $loc $rg -o "$tm"
  run icase $loc .device/gpufilter -oiE 'error|warn'; run icase $loc $rg -oi 'error|warn'
  run color $loc .device/gpufilter --color=always -E 'fail(ed|ure)'; run color $loc $rg --color=always 'fail(ed|ure)'
  if [ -n "${BUILD_BEFORE:-}" ]; then
    run ip $loc "$BUILD_BEFORE" -oE "$ip"; run mail $loc "$BUILD_BEFORE" -oE "$mail"
    run time $loc "$BUILD_BEFORE" -oE "$tm"; run icase $loc "$BUILD_BEFORE" -oiE 'error|warn'
  fi
  [ $i = 1 ] && { run ip $loc .device/grep -oE "$ip"; run icase $loc .device/grep -oiE 'error|warn'; }
done; done
export GPUFILTER_GREP=$PWD/.device/grep GPUFILTER_BIN=$PWD/.device/gpufilter GPUFILTER_CORPUS_DIR=$PWD/.device/corpus
[ -x .device/tests/cli_regex_differential_test ] && .device/tests/cli_regex_differential_test \
  --gtest_filter='*PartsFoundWhere*:*HyperscansWalk*:*LettersSpelledOut*:*StrayClose*:*CaselessRanges*:RegexRandom.*' 2>&1 | grep -E "TALLY|PASSED|FAILED|tests ran"
