#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-run.sh): registers NVIDIA's OpenCL, lists the devices, runs every test binary
# built on the development machine against GNU grep 3.8, and with GPU_BENCH=1 times a few
# filters over a page-cached file generated from the Loghub logs.
set -u
cd .device
sh opencl-setup.sh
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}  # libhs, libpcre2: staged
echo "=== gpufilter --list-devices"; ./gpufilter --list-devices
export GPUFILTER_BIN=$PWD/gpufilter GPUFILTER_GREP=$PWD/grep GPUFILTER_CORPUS_DIR=$PWD/corpus
export GPUFILTER_PEAK_RSS=$PWD/bin/gpufilter-test-peak-rss  # tests' run_process_measured()
export GPUFILTERD_BIN=$PWD/gpufilterd GPUFILTER_SOURCE_DIR=$(cd .. && pwd) GPUPERMUTE_BIN=$PWD/bin/gpupermute
./grep --version | head -1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "${GPU_BENCH:-0}" = 1 ]; then
echo "=== smoke"; ./gpufilter -c -i -e error -e timeout ../examples/app.log; ./grep -F -c -i -e error -e timeout ../examples/app.log
python3 - <<'PY'
import glob, random
random.seed(7)
lines = []
for f in sorted(glob.glob("corpus/loghub/*_2k.log")):
    lines += open(f, "rb").read().replace(b"\r\n", b"\n").split(b"\n")
lines = [l for l in lines if l]
out = open("/dev/shm/big.log", "wb")
chunk = b"\n".join(lines) + b"\n"
size = 0
while size < 4 * 2**30:
    out.write(chunk); size += len(chunk)
out.close()
rare = random.sample([l.split()[-1] for l in lines if l.split()], 1)
open("/dev/shm/p1", "wb").write(b"zqxjv_never\n")
open("/dev/shm/p1000", "wb").write(b"\n".join(b"zq%dxj_never" % i for i in range(1000)) + b"\n")
PY
cat /dev/shm/big.log > /dev/null
ls -la /dev/shm/big.log
bytes=$(stat -c %s /dev/shm/big.log)
t() { local s=$EPOCHREALTIME; "$@" > /dev/null; local rc=$?; local e=$EPOCHREALTIME
      awk -v s="$s" -v e="$e" -v b="$bytes" -v rc=$rc -v c="$*" 'BEGIN{printf "%.3f s  %.2f GB/s  rc=%d : %s\n", e-s, b/(e-s)/1e9, rc, c}'; }
for i in 1; do
  t ./gpufilter -c -f /dev/shm/p1 /dev/shm/big.log
  t ./grep -F -c -f /dev/shm/p1 /dev/shm/big.log
  t ./gpufilter -c -f /dev/shm/p1000 /dev/shm/big.log
  t ./gpufilter -c ERROR /dev/shm/big.log
  t ./gpufilter --device=cpu -c -f /dev/shm/p1 /dev/shm/big.log
done
./gpufilter -c ERROR /dev/shm/big.log; ./grep -F -c ERROR /dev/shm/big.log
fi
# Every test binary, each split into 6 shards, all at once (16 cores), 500 s at most.
export GPUFILTER_TEST_KNOBS=${GPUFILTER_TEST_KNOBS:-1}
for t in tests/*; do
  for shard in 0 1 2 3 4 5; do
    GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$shard timeout 500 ./"$t" > "$OUT/$(basename $t).$shard.log" 2>&1 &
  done
done
wait
total=0; failed=0
for log in "$OUT"/*.log; do
  total=$((total+1))
  if grep -q '^\[  FAILED  \]' "$log" || ! grep -q '^\[  PASSED  \]' "$log"; then
    failed=$((failed+1)); echo "=== FAILED: $log"; grep -E 'Failure|FAILED' -A6 "$log" | head -30; tail -3 "$log"
  fi
done
echo "=== shards: $total, failed: $failed"
cat "$OUT"/*.log | grep -E '^\[  (PASSED|SKIPPED) ' | awk '{n[$2]+=$4} END {for (k in n) print k, n[k], "tests"}'
cat "$OUT"/*.log | grep -E '^\[  SKIPPED \] [A-Za-z]' | sort -u
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cd - > /dev/null
