#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-regex-ab.sh). The regex sets of bench/regex_sets.py (issue 16): an earlier
# gpufilter (REGEX_BEFORE: a folder holding it) beside this one, alternating, three runs
# each, counting (-c) and printing to /dev/shm, each binary with its own warm Hyperscan
# compile cache (an untimed run fills it), then bench/run.py's rows for the same sets
# beside grep -E, rg and the Hyperscan reference (every run compiles there).
#   REGEX_SIZE (bytes, default 2147483648), REGEX_SETS (default "templates logregex nofactor
#   ioc"), BENCH_SETS (bench/run.py's, default templates,logregex,nofactor; grep -E is left
#   out there: it times out on the template set), BENCH_TOOLS (default gpufilter,rg,hs)
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
export LC_ALL=C
d=$PWD/.device
nproc; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
w=/dev/shm/gpu-regex-ab
mkdir -p $w
sets="${REGEX_SETS:-templates logregex nofactor ioc}"
# The corpus and the sets as bench/run.py makes them.
[ -s $w/corpus.log ] || timeout 200 $d/bin/gpufilter-gen-corpus --loghub $d/corpus/loghub \
  --size "${REGEX_SIZE:-2147483648}" --out $w --seed 1 > $w/corpus.json || exit 1
python3 - $w $d $sets <<'PY' || exit 1
import os, sys; sys.path.insert(0, "bench"); import regex_sets
w, d = sys.argv[1], sys.argv[2]
for name in sys.argv[3:]:
    regex_sets.build(name, w, d + "/corpus/loghub", 1, d + "/grep", dict(os.environ, LC_ALL="C"))
PY
ls -la $w/corpus.log || exit 1
builds="now:$d/gpufilter"
[ -n "${REGEX_BEFORE:-}" ] && builds="before:$REGEX_BEFORE/gpufilter $builds"
stats() { grep -oE '"(startup_ms|deliver_s|total_s|workers_cpu_s|workers_scan_s|workers_after_scan_s)":[0-9.]+' | tr '\n' ' '; }
for set in $sets; do
  for b in $builds; do
    IFS=: read -r tag bin <<< "$b"
    GPUFILTER_CACHE_DIR=$w/cache-$tag "$bin" -c -E -f $w/patterns-$set.txt $w/corpus.log > /dev/null
  done
  for mode in "-c" ""; do for i in 1 2 3; do for b in $builds; do
    IFS=: read -r tag bin <<< "$b"
    echo "$set ${mode:---print} $tag $( { GPUFILTER_CACHE_DIR=$w/cache-$tag /usr/bin/time -f "%e s %U user" \
      timeout 120 "$bin" --stats $mode -E -f $w/patterns-$set.txt $w/corpus.log > $w/out; } 2>&1 | stats) \
      $(if [ -n "$mode" ]; then cat $w/out; else md5sum < $w/out | cut -c1-8; fi)"
  done; done; done
done
rm -f $w/out
echo "=== bench/run.py (cold compile cache, as the reference)"
python3 bench/run.py --work $w --size "${REGEX_SIZE:-2147483648}" --sets "${BENCH_SETS:-templates,logregex,nofactor}" \
  --repeat 2 --timeout 45 --tools "${BENCH_TOOLS:-gpufilter,rg,hs}" --cases none --kernel-bench none --gpufilter $d/gpufilter --grep $d/grep --rg $d/bin/rg \
  --hs-count $d/bin/gpufilter-hs-count --gen-corpus $d/bin/gpufilter-gen-corpus --loghub $d/corpus/loghub 2>&1 | tail -12
