#!/bin/bash
# Runs on the GPU machine from the repository root (as .device/gpu-permute.sh) the
# permutation work of issue 7 (docs/PERMUTATIONS.md): its tests against the GPU, then
# gpupermute-bench (N = 11 and 12 on the GPU, output kept on the device and copied back to
# /dev/null, against the 16-core std::next_permutation generator; --sweep adds kernel
# time by --steps). Staged beforehand from a Release build on the development machine:
#   .device/bin/gpupermute         (build/gpupermute)
#   .device/bin/gpupermute-bench   (build/bench/gpupermute-bench)
#   .device/tests/permute_host_test, permute_device_test, permute_cli_test
#                                  (build/tests/permutations/)
#   .device/opencl-setup.sh        (../shared/gpu/opencl-setup.sh)
# PERMUTE_DIR names another folder with that layout. Arguments go to gpupermute-bench
# (default: --device gpu --sweep). The table lands in $OUT/permute-bench.md.
set -u
d=${PERMUTE_DIR:-$PWD/.device}
sh "$d/opencl-setup.sh"
export LD_LIBRARY_PATH=$d/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rc=0
if [ "${PERMUTE_TESTS:-1}" = 1 ]; then
  export GPUPERMUTE_BIN=$d/bin/gpupermute
  for t in permute_host_test permute_device_test permute_cli_test; do
    echo "=== $t"
    "$d/tests/$t" --gtest_brief=1 || rc=1
  done
fi
echo "=== gpupermute 12 --check --device gpu"
"$d/bin/gpupermute" 12 --check --device gpu || rc=1
echo "=== gpupermute-bench"
"$d/bin/gpupermute-bench" "${@:---device gpu --sweep}" | tee "${OUT:-/tmp}/permute-bench.md"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
exit $rc
