#!/usr/bin/env bash
# Stages what a run on the GPU machine needs into .device/ (ignored by git, named in the
# device tool's `carry`): the gpufilter binary and test binaries built here, the shared
# corpus, GNU grep 3.8 (the oracle; the GPU machine has 3.11) and NVIDIA's OpenCL set-up.
# Then, on the GPU machine, from the repository root:  bash .device/gpu-run.sh
# (GPU_BENCH=1 adds a rough whole-process timing over a 4 GB file.)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GPUFILTER_BUILD_DIR:-build}
scripts/bootstrap.sh build
rm -rf .device && mkdir -p .device/tests .device/corpus/loghub .device/corpus/text
grep -qx '.device/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo '.device/' >> .git/info/exclude; }
cp "$build/gpufilter" .device/
cp "$build"/tests/pipeline/*_test "$build"/tests/cli/*_test .device/tests/
cp ../shared/corpus/loghub/*.log ../shared/corpus/loghub/*.csv ../shared/corpus/loghub/LICENSE .device/corpus/loghub/
cp ../shared/corpus/text/sherlock-nul.txt .device/corpus/text/
cp ../shared/gpu/opencl-setup.sh .device/
cp /bin/grep .device/grep
cp scripts/gpu-run.sh .device/gpu-run.sh
du -sh .device
