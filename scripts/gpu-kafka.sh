#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-kafka.sh). Issue 20's rows of docs/SCALING.md: bench/kafka_scale.py with the
# staged gpufilterd, test broker and kcat, 1-3 instances per engine, with librdkafka's
# defaults and with a deeper fetch queue. KAFKA_ENGINES (default cpu,gpu), KAFKA_REPEAT (2).
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nproc
clinfo -l 2>/dev/null | head -4
out=${OUT:-/tmp}
run() {  # run TAG ARGS...
  local tag=$1
  shift
  echo "=== $tag"
  timeout 280 python3 bench/kafka_scale.py --gpufilterd .device/gpufilterd \
    --broker .device/bin/gpufilter-test-kafka-broker --kcat .device/bin/kcat --corpus .device/corpus/loghub \
    --engines "${KAFKA_ENGINES:-cpu,gpu}" --repeat "${KAFKA_REPEAT:-2}" --json "$out/kafka-$tag.json" "$@" 2>&1 | tail -20
}
run defaults
run deep --setting queued.min.messages=1000000 --setting queued.max.messages.kbytes=1048576
