#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-fail2ban.sh). Issue 23's rows: bench/fail2ban_bench.py with the staged
# gpufilterd and the Debian fail2ban filters copied into .device/fail2ban (fail2ban-regex is
# not installed there: gpufilterd's rows alone), the stock sshd filter and every stock
# filter at once, per engine. F2B_SIZE (default 1G), F2B_ENGINES (default cpu,gpu).
set -u
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nproc
out=${OUT:-/tmp}
for engine in $(echo "${F2B_ENGINES:-cpu,gpu}" | tr , ' '); do
  echo "=== engine $engine"
  timeout 280 python3 bench/fail2ban_bench.py --size "${F2B_SIZE:-1G}" --gpufilterd .device/gpufilterd \
    --fail2ban-dir "$PWD/.device/fail2ban" --corpus .device/corpus/loghub/OpenSSH_2k.log --engine "$engine" \
    --all-filters --json "$out/fail2ban-$engine.json" 2>&1 | tail -8
done
