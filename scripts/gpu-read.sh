#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-read.sh). Two questions, each answered by a binary before a change beside
# the one after, in one run (READ_BEFORE: a folder holding the older gpufilter):
# 1. the GPU path's reading (issue 17 item 3): --engine=gpu -c -F over a page-cached
#    corpus (in /dev/shm), with --stats' fill_s (waiting for the reader), wait_s (for
#    the device), deliver_s; and -a (no NUL search) for comparison;
# 2. a regex with a required literal against the literal path at the same match rate
#    (issue 16): the factor/factorlit sets of bench/regex_sets.py, ssh's failed passwords
#    against their literal, and the logregex set, printing to /dev/shm;
# 3. literal sets printing their lines (1, 100, 1,000 literals and the dense set).
#   READ_SIZE (bytes, default 4294967296), READ_SETS (default "1 100 10000")
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
export LC_ALL=C
nproc; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
w=/dev/shm/gpu-read
mkdir -p $w
[ -s $w/corpus.log ] || timeout 200 .device/bin/gpufilter-gen-corpus --loghub .device/corpus/loghub \
  --size "${READ_SIZE:-4294967296}" --out $w --seed 1 > $w/meta.json || exit 1
builds="now:.device/gpufilter"
[ -n "${READ_BEFORE:-}" ] && builds="before:$READ_BEFORE/gpufilter $builds"
stats() { grep -oE '"(steady_gbps|startup_ms|fill_s|wait_s|deliver_s|total_s)":[0-9.]+' | tr '\n' ' '; }
echo "=== 1. --engine=gpu -c -F, whole process (three runs each; -a: no NUL search)"
for n in ${READ_SETS:-1 100 10000}; do for a in "" "-a"; do for b in $builds; do for i in 1 2 3; do
  IFS=: read -r tag bin <<< "$b"
  echo "$n ${a:-  } $tag $( { /usr/bin/time -f "%e s" timeout 60 "$bin" --engine=gpu --stats $a -c -F -f $w/patterns-$n.txt $w/corpus.log > $w/count; } 2>&1 | stats) count=$(cat $w/count)"
done; done; done; done
echo "=== 2. regex against its literal, same lines, printing (three runs each, seconds)"
printf 'instance: [0-9a-f]{8}-[0-9a-f]{4}-\n' > $w/factor.txt
printf 'instance: \n' > $w/factorlit.txt
printf 'Failed password for (invalid user )?[^ ]+ from [0-9.]+ port [0-9]+\n' > $w/ssh.txt
printf 'Failed password for \n' > $w/sshlit.txt
python3 - "$w/logregex.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import regex_sets
open(sys.argv[1], "w").write("".join(p + "\n" for p in regex_sets.LOGREGEX))
PY
# printing NAME MATCHER PATTERN-FILE: three runs of each build, printing to /dev/shm.
printing() {
  for b in $builds; do
    IFS=: read -r tag bin <<< "$b"
    for i in 1 2 3; do
      echo "$1 $tag $( { /usr/bin/time -f "%e s" timeout 60 "$bin" --stats "$2" -f "$3" $w/corpus.log > $w/out; } 2>&1 | stats) lines=$(wc -l < $w/out)"
    done
  done
}
for set in factor factorlit ssh sshlit logregex; do printing $set -E $w/$set.txt; done
echo "=== 3. literal sets, default engine, printing (three runs each)"
for n in 1 100 1000 dense; do printing $n -F $w/patterns-$n.txt; done
echo "=== peers on the same sets (rg, grep -E on factor only; seconds)"
for set in factor factorlit; do
  echo "$set rg $( { /usr/bin/time -f "%e s" timeout 60 .device/bin/rg --no-config -N --no-filename -f $w/$set.txt $w/corpus.log > $w/out; } 2>&1 | tail -1) lines=$(wc -l < $w/out)"
  echo "$set hs $( { /usr/bin/time -f "%e s" timeout 60 .device/bin/gpufilter-hs-count --regex -f $w/$set.txt $w/corpus.log; } 2>&1 | tr '\n' ' ')"
done
rm -f $w/out $w/count
