#!/bin/bash
# A/B on the GPU machine: an earlier gpufilterd, staged by hand as .device/gpufilterd-old,
# against .device/gpufilterd (scripts/stage-gpu-run.sh), the
# sshd rule and the 93 stock filters over 256 MB of the generated auth log (engine cpu),
# and --test-filter sshd, alternating, three runs each.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
nproc; grep -m1 "model name" /proc/cpuinfo
T=/tmp/f2b; mkdir -p $T
python3 - <<'PY'
import sys; sys.path.insert(0,'bench')
import fail2ban_bench as b
print(b.make_log('.device/corpus/loghub/OpenSSH_2k.log', 256<<20, '/tmp/f2b/auth.log'))
PY
rule() { echo "  - {name: $1, fail2ban_filter: $1, threshold: {count: 5, window: 10m, group_by: {capture: host}}, cooldown: 10m}"; }
rule sshd > .device/rules-sshd.txt
: > .device/rules-all.txt
for f in .device/fail2ban/filter.d/*.conf; do  # every stock filter that loads alone (as bench/fail2ban_bench.py)
  name=$(basename "$f" .conf)
  { echo "fail2ban_dir: $PWD/.device/fail2ban"; echo "sources: [{stdin: true}]"; echo "rules:"; rule "$name"; echo "server: 127.0.0.1:0"; } > $T/one.yaml
  .device/gpufilterd --check --config $T/one.yaml >/dev/null 2>&1 && rule "$name" >> .device/rules-all.txt
done
echo "filters: $(wc -l < .device/rules-all.txt)"
for which in sshd all; do
  { echo "fail2ban_dir: $PWD/.device/fail2ban"; echo "sources: [{stdin: true}]"; echo "engine: cpu"; echo "rules:";
    cat .device/rules-$which.txt; echo "outputs: [{type: jsonl, path: $T/alerts-$which.jsonl, queue: 1000000}]"; echo "server: 127.0.0.1:0"; } > $T/$which.yaml
  chmod 644 $T/$which.yaml
done
for rep in 1 2 3; do
  for bin in gpufilterd-old gpufilterd; do
    for which in sshd all; do
      rm -f $T/alerts-$which.jsonl
      /usr/bin/time -f "$which $bin %e s %U u %S s" .device/$bin --config $T/$which.yaml < $T/auth.log 2>&1 | grep -v level=
      [ $rep = 1 ] && echo "  alerts $(wc -l < $T/alerts-$which.jsonl) $(md5sum < $T/alerts-$which.jsonl)"
    done
    /usr/bin/time -f "test-filter $bin %e s" .device/$bin --test-filter sshd $T/auth.log --fail2ban-dir $PWD/.device/fail2ban > $T/tf-$bin.txt 2>$T/tf-$bin.err; tail -1 $T/tf-$bin.err
    [ $rep = 1 ] && md5sum < $T/tf-$bin.txt
  done
done
