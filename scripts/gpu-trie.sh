#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-trie.sh). Issue 17, item 3: the device trie's kernel-only throughput
# (gpufilter-kernel-bench: 1 GiB resident, 10 scans) and the whole process with
# --engine=gpu (start-up, the trie's build, steady state) for 1 to 1,000,000 literals, on
# a 2 GB corpus of gpufilter-gen-corpus. Every command has a time limit and the log is
# written as it goes, so that a run cut short still says how far it came.
#   TRIE_SIZE (bytes, default 2147483648), TRIE_SETS (default 100000 1000000 10000 1000 100 10 1)
#   TRIE_BEFORE: a folder holding an older gpufilter and gpufilter-kernel-bench to run beside
#   TRIE_WALKS (default "in-place compacted"): the kernel-only runs' --walks, each beside the others
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nproc; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
w=/dev/shm/gpu-trie
mkdir -p $w
[ -s $w/patterns-1000000.txt ] || timeout 120 .device/bin/gpufilter-gen-corpus --loghub .device/corpus/loghub \
  --size "${TRIE_SIZE:-2147483648}" --out $w --seed 1 > $w/meta.json || exit 1
sets=${TRIE_SETS:-100000 1000000 10000 1000 100 10 1}
builds="now:.device/gpufilter:.device/bin/gpufilter-kernel-bench"
[ -n "${TRIE_BEFORE:-}" ] && builds="before:$TRIE_BEFORE/gpufilter:$TRIE_BEFORE/gpufilter-kernel-bench $builds"
echo "=== kernel-only GB/s (1 GiB resident, 10 scans)"
for n in $sets; do for b in $builds; do for walks in ${TRIE_WALKS:-in-place compacted}; do
  IFS=: read -r tag _ bench <<< "$b"
  [ "$tag" = before ] && walks=
  echo "$n $tag ${walks:-} $(timeout 60 "$bench" -f $w/patterns-$n.txt --bytes 1073741824 --iterations 10 \
    ${walks:+--walks $walks} $w/corpus.log 2>&1 | tail -1 | grep -oE '"(kernel_gbps|occurrences)":[0-9.]+' | tr '\n' ' ')"
  [ "$tag" = before ] && break
done; done; done
echo "=== whole process: --engine=gpu -c -F, two runs each"
for n in $sets; do for b in $builds; do for i in 1 2; do
  IFS=: read -r tag bin _ <<< "$b"
  /usr/bin/time -f "%e s" timeout 60 "$bin" --engine=gpu --stats -c -F -f $w/patterns-$n.txt $w/corpus.log 2>&1 |
    grep -oE '"(steady_gbps|build_ms|table_ms|startup_ms)":[0-9.]+|^[0-9]+$|[0-9.]+ s$' | tr '\n' ' '
  echo " $n $tag"
done; done; done
echo "=== the scanner's tests on the GPU"
export GPUFILTER_CORPUS_DIR=$PWD/.device/corpus
for t in scanner_test co_scanner_test device_fault_test engine_test; do
  echo "$t $(timeout 150 .device/tests/$t 2>&1 | tail -1)"
done
