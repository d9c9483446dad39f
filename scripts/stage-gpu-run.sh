#!/usr/bin/env bash
# Stages what a run on the GPU machine needs into .device/ (ignored by git, named in the
# device tool's `carry`): the gpufilter binary and test binaries built here, the shared
# corpus, GNU grep 3.8 (the oracle; the GPU machine has 3.11), NVIDIA's OpenCL set-up,
# and the benchmark's tools with the libraries that machine lacks (bench/, ripgrep,
# libhs, libpcre2, the --decompress libraries). Then, on the GPU machine, from the repository root:
#   bash .device/gpu-run.sh      every test binary against grep 3.8
#   bash .device/gpu-bench.sh    the bench/run.py table at 16 GB
#   bash .device/gpu-regex.sh    the regex differential tests and the regex sets of bench/run.py
#   bash .device/gpu-perf.sh     issue 17: default, --engine=cpu and --engine=gpu rows beside the peers
#   bash .device/gpu-latency.sh  bench/latency: write-to-output latency, pipe and TCP
#   bash .device/gpu-permute.sh  gpupermute's tests and benchmark
#   bash .device/gpu-captures.sh capture throughput (bench/pcap_throughput.sh) on 2 GB
#   bash .device/gpu-flowfarm.sh --stream on one thread and on many, and their outputs compared
#   bash .device/gpu-multi.sh    issue 21: tests on every GPU, bench/run.py on all GPUs and each alone
#   bash .device/gpu-kafka.sh    issue 20: bench/kafka_scale.py, 1-3 gpufilterd per engine in a group
#   bash .device/gpu-fail2ban.sh issue 23: bench/fail2ban_bench.py, sshd and every stock filter at once
#   bash .device/gpu-fail2ban-ab.sh issue 23: an earlier gpufilterd (copied by hand to .device/gpufilterd-old) beside this one
#   bash .device/gpu-build-time.sh issue 17 item 3: large literal sets' start-up, step by step (BUILD_BEFORE: an older gpufilter)
#   bash .device/gpu-icase-utf8.sh -F -i in UTF-8: case variants against the C locale (BUILD_BEFORE: an older gpufilter)
#   bash .device/gpu-only-matching.sh everyday -o/--color/-i regexes beside rg and grep (BUILD_BEFORE: an older gpufilter)
#   bash .device/gpu-trie.sh     issue 17 item 3: the device trie, kernel-only and --engine=gpu, 1 to 1,000,000 literals
#   bash .device/gpu-read.sh     the GPU path's reading, and a regex against its literal path (issues 17, 16)
#   bash .device/gpu-first.sh    a short run's start-up: first line, one small file, 500 small files
#   bash .device/gpu-stream.sh   --stream with 1 to 4 reading threads: GB/s and where the time went
#   bash .device/gpu-stream-ab.sh issue 19: --stream, an earlier binary (.device/gpufilter-old) beside this one
#   bash .device/gpu-regex-ab.sh issue 16: the regex sets, an earlier gpufilter (REGEX_BEFORE: its folder) beside this one
#   bash .device/gpu-dense.sh    dense output to /dev/shm beside one thread writing as much (dd)
#   bash .device/gpu-literal.sh  one literal: mapped, read and as chosen, beside grep, rg and Hyperscan
#   bash .device/gpu-reliability.sh fuzz SECONDS   the long fuzz run on every core
#   bash .device/gpu-reliability.sh soak SECONDS   bench/soak.sh on the GPU engine
# The fuzz targets come from build-asan/fuzz (scripts/sanitize.sh address) when built.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GPUFILTER_BUILD_DIR:-build}
scripts/bootstrap.sh build
rm -rf .device && mkdir -p .device/tests .device/corpus/loghub .device/corpus/text .device/corpus/pcap .device/bin .device/lib
grep -qx '.device/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo '.device/' >> .git/info/exclude; }
cp "$build/gpufilter" "$build/gpufilterd" "$build/gpufilter-kafka.so" .device/
# The test binaries that reach OpenCL (the engines, the drive loops, the CLI, the daemon
# and the permutations); the folders of pure host code (sources, sinks, grep, core,
# patterns) stay here, where CI runs them, so that .device fits what the device tool
# carries (64 MiB).
for t in "$build"/tests/{engines,scan,cli,permutations}/*_test "$build"/tests/daemon/gpufilterd_test; do
  cp "$t" .device/tests/
done
cp ../shared/corpus/loghub/*.log ../shared/corpus/loghub/*.csv ../shared/corpus/loghub/LICENSE .device/corpus/loghub/
cp ../shared/corpus/text/sherlock-nul.txt .device/corpus/text/
cp ../shared/gpu/opencl-setup.sh .device/
cp /bin/grep .device/grep
cp scripts/gpu-run.sh scripts/gpu-bench.sh scripts/gpu-latency.sh scripts/gpu-permute.sh scripts/gpu-captures.sh \
  scripts/gpu-reliability.sh scripts/gpu-regex.sh scripts/gpu-perf.sh scripts/gpu-cases.sh scripts/gpu-multi.sh \
  scripts/gpu-kafka.sh scripts/gpu-fail2ban.sh scripts/gpu-fail2ban-ab.sh scripts/gpu-flowfarm.sh scripts/gpu-trie.sh scripts/gpu-build-time.sh scripts/gpu-read.sh scripts/gpu-first.sh scripts/gpu-stream.sh scripts/gpu-dense.sh scripts/gpu-stream-ab.sh scripts/gpu-regex-ab.sh scripts/gpu-literal.sh scripts/gpu-icase-utf8.sh scripts/gpu-only-matching.sh .device/
cp scripts/gpu-stream-rep.sh .device/stream-rep.sh
cp "$build"/bench/gpufilter-gen-corpus "$build"/bench/gpufilter-hs-count "$build"/bench/gpufilter-kernel-bench "$build"/bench/gpufilter-latency \
  "$build"/bench/gpufilter-gen-pcap "$build"/bench/gpupermute-bench "$build"/bench/gpufilter-soak-load \
  "$build"/gpupermute "$build"/tests/gpufilter-test-peak-rss .device/bin/
if compgen -G 'build-asan/fuzz/*_fuzz' >/dev/null; then  # built, not merely begun
  mkdir -p .device/fuzz && cp build-asan/fuzz/*_fuzz .device/fuzz/
fi
cp ../shared/corpus/pcap/* .device/corpus/pcap/
# fail2ban's filters (bench/fail2ban_bench.py, gpufilterd's fail2ban_dir): Debian's, read there.
cp -rL /etc/fail2ban .device/fail2ban
cp "$(command -v rg)" .device/bin/rg
# Kafka (bench/kafka_scale.py): the test broker, kcat and librdkafka with what it links.
cp "$build"/tests/kafka/gpufilter-test-kafka-broker /usr/bin/kcat .device/bin/
cp -L /lib/x86_64-linux-gnu/librdkafka.so.1 /lib/x86_64-linux-gnu/librdkafka++.so.1 /lib/x86_64-linux-gnu/libyajl.so.2 \
  /lib/x86_64-linux-gnu/libsasl2.so.2 .device/lib/
cp -L /lib/x86_64-linux-gnu/libhs.so.5 /lib/x86_64-linux-gnu/libpcre2-8.so.0 /lib/x86_64-linux-gnu/libyaml-cpp.so.0.7 \
  /lib/x86_64-linux-gnu/libjemalloc.so.2 \
  /lib/x86_64-linux-gnu/libpcap.so.0.8 /lib/x86_64-linux-gnu/libdbus-1.so.3 \
  /lib/x86_64-linux-gnu/libzstd.so.1 /lib/x86_64-linux-gnu/liblz4.so.1 /lib/x86_64-linux-gnu/liblzma.so.5 \
  /lib/x86_64-linux-gnu/libbz2.so.1.0 /lib/x86_64-linux-gnu/libz.so.1 .device/lib/
# Symbols are not needed there; without them the folder is a third smaller.
strip --strip-unneeded .device/gpufilter .device/gpufilterd .device/tests/* .device/bin/* 2>/dev/null || true
du -sh .device
