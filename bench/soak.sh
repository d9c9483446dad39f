#!/usr/bin/env bash
# Soak test of gpufilterd (issue 8; not in CI): the daemon runs for DURATION seconds at
# RATE bytes per second in all, across N followed files (appended, and renamed and
# re-created every ROTATE seconds), M TCP connections and UDP, with lines from the Loghub
# logs (bench/soak_load.cpp writes them). One rule alerts on a marker line that the load
# writes every K lines of each file and connection, with threshold count 1 and no
# cooldown, so the alerts expected are exactly the markers written. At the end it reports
#   lines written        by the load, per kind
#   lines scanned        from gpufilterd's /metrics (gpufilterd_lines_scanned_total)
#   alerts expected      markers written
#   alerts delivered     lines of the JSON-lines output file
#   RSS                  VmRSS/VmHWM of the daemon from /proc, sampled: first, last, peak
#   CPU seconds          user + system of the daemon
#   MB/s                 achieved by the load (10^6 bytes per second)
# and exits 1 when lines written (files and TCP) != lines scanned, when UDP lines written
# != UDP lines scanned + datagrams the daemon dropped and counted (its documented policy:
# UDP cannot push back; one line per datagram here), or when alerts expected != delivered.
#
#   bench/soak.sh [--duration 3600] [--rate 100M] [--files 4] [--connections 4]
#                 [--udp-share 0.02] [--file-share 0.5] [--marker-every 10000]
#                 [--rotate-every 30] [--engine auto] [--device SPEC] [--sample-every 5]
#                 [--work build/soak] [--gpufilterd build/gpufilterd]
#                 [--load build/bench/gpufilter-soak-load] [--corpus ../shared/corpus/loghub]
#
# Runs from any directory given the binaries and the corpus by path (another machine:
# copy gpufilterd, gpufilter-soak-load and the loghub folder, and pass the three paths).
# Needs bash, awk and /proc; the work directory holds the followed files (about
# RATE x file-share x ROTATE x 2 bytes at a time) and should be on a local disk.
set -euo pipefail
export LC_ALL=C
duration=3600 rate=100M files=4 connections=4 udp_share=0.02 file_share=0.5 marker_every=10000
rotate_every=30 engine=auto device= sample_every=5 work=build/soak gpufilterd=build/gpufilterd
load=build/bench/gpufilter-soak-load corpus=../shared/corpus/loghub
usage() { sed -n '2,/^set -euo/p' "$0" | sed -n '/^#   bench/,/^# *$/p' | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    --duration) duration=$2 ;; --rate) rate=$2 ;; --files) files=$2 ;; --connections) connections=$2 ;;
    --udp-share) udp_share=$2 ;; --file-share) file_share=$2 ;; --marker-every) marker_every=$2 ;;
    --rotate-every) rotate_every=$2 ;; --engine) engine=$2 ;; --device) device=$2 ;;
    --sample-every) sample_every=$2 ;; --work) work=$2 ;; --gpufilterd) gpufilterd=$2 ;; --load) load=$2 ;;
    --corpus) corpus=$2 ;;
    *) usage ;;
  esac
  shift 2
done
for f in "$gpufilterd" "$load"; do [ -x "$f" ] || { echo "soak: $f: not an executable" >&2; exit 2; }; done
[ -d "$corpus" ] || { echo "soak: $corpus: not a directory" >&2; exit 2; }
gpufilterd=$(cd "$(dirname "$gpufilterd")" && pwd)/$(basename "$gpufilterd")
load=$(cd "$(dirname "$load")" && pwd)/$(basename "$load")
corpus=$(cd "$corpus" && pwd)
mkdir -p "$work"
work=$(cd "$work" && pwd)
rm -f "$work"/f*.log "$work"/f*.log.1 "$work"/alerts.jsonl "$work"/rss.tsv "$work"/metrics.txt
marker=GPUFSOAKMARK

# The configuration: every source, the marker rule, a JSON-lines output (a queue large
# enough that no alert is dropped: the check is that every one is delivered).
config=$work/gpufilterd.yaml
{
  echo "sources:"
  if [ "$files" -gt 0 ]; then
    printf '  - follow: ['
    for ((i = 0; i < files; i++)); do
      if [ "$i" -gt 0 ]; then printf ', '; fi
      printf 'f%d.log' "$i"
      : > "$work/f$i.log"
    done
    printf ']\n    from_start: true\n'
  fi
  if [ "$connections" -gt 0 ]; then echo "  - listen: tcp://127.0.0.1:0"; fi
  echo "  - listen: udp://127.0.0.1:0"
  cat <<EOF
rules:
  - name: soak-marker
    patterns: [$marker]
    cooldown: 0s
    resolve_after: 1000d
outputs:
  - type: jsonl
    path: alerts.jsonl
    queue: 10000000
server: 127.0.0.1:0
engine: $engine
drain_timeout: 120s
EOF
  if [ -n "$device" ]; then echo "device: \"$device\""; fi
} > "$config"
chmod 0644 "$config"  # gpufilterd refuses a configuration others may write
"$gpufilterd" --config "$config" --check > /dev/null

"$gpufilterd" --config "$config" 2> "$work/gpufilterd.log" &
pid=$!
cleanup() { kill "$pid" 2> /dev/null || true; [ -n "${sampler:-}" ] && kill "$sampler" 2> /dev/null || true; }
trap cleanup EXIT
for ((i = 0; i < 1200; i++)); do
  grep -q 'msg="gpufilterd started"' "$work/gpufilterd.log" && break
  kill -0 "$pid" 2> /dev/null || { cat "$work/gpufilterd.log" >&2; echo "soak: gpufilterd did not start" >&2; exit 2; }
  sleep 0.1
done
server=$(grep -o 'server=[^ ]*' "$work/gpufilterd.log" | head -1 | cut -d= -f2)
tcp=$(grep -o 'url=tcp://[^ ]*' "$work/gpufilterd.log" | head -1 | cut -d= -f2)
udp=$(grep -o 'url=udp://[^ ]*' "$work/gpufilterd.log" | head -1 | cut -d= -f2)
[ -n "$server" ] || { cat "$work/gpufilterd.log" >&2; echo "soak: no server address in the log" >&2; exit 2; }
grep 'gpufilterd started' "$work/gpufilterd.log" >&2

# RSS of the daemon over time: seconds, VmRSS and VmHWM in KiB.
start=$EPOCHREALTIME
(
  while [ -r "/proc/$pid/status" ]; do
    awk -v t="$(awk -v s="$start" -v n="$EPOCHREALTIME" 'BEGIN { printf "%.1f", n - s }')" \
      '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { if (r != "") print t, r, h }' "/proc/$pid/status" 2> /dev/null
    sleep "$sample_every"
  done
) >> "$work/rss.tsv" &
sampler=$!

args=(run --corpus "$corpus" --seconds "$duration" --rate "$rate" --file-share "$file_share"
      --udp-share "$udp_share" --marker-every "$marker_every" --marker "$marker" --rotate-every "$rotate_every"
      --udp "$udp")
for ((i = 0; i < files; i++)); do args+=(--file "$work/f$i.log"); done
if [ "$connections" -gt 0 ]; then args+=(--tcp "$tcp" --connections "$connections"); fi
"$load" "${args[@]}" > "$work/load.json"
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$work/load.json"; }
file_lines=$(field file_lines) tcp_lines=$(field tcp_lines) udp_lines=$(field udp_lines)
markers=$(field markers) mbps=$(field mb_per_s) bytes=$(field bytes) rotations=$(field rotations)

# Scanned, from /metrics: followed files (any label but the socket kinds), tcp, udp, and
# the datagrams dropped and counted. Waits until everything written is accounted for
# and the alerts are written, or until a minute (or a tenth of the run) passes.
scan_counts() {
  if ! "$load" metrics "$server" > "$work/metrics.txt"; then echo "0 0 0 0 0 0"; return; fi
  awk '
    /^gpufilterd_lines_scanned_total\{/ {
      v = $NF; if ($0 ~ /source="tcp"/) t += v; else if ($0 ~ /source="udp"/) u += v;
      else if ($0 !~ /source="(unix|stdin)"/) f += v }
    /^gpufilterd_source_datagrams_dropped_total\{/ { d += $NF }
    /^gpufilterd_output_published_total\{/ { p += $NF }
    /^gpufilterd_output_delivered_total\{/ { q += $NF }
    END { printf "%d %d %d %d %d %d\n", f, t, u, d, p, q }' "$work/metrics.txt"
}
patience=$(awk -v d="$duration" 'BEGIN { p = d / 10; print (p < 60 ? 60 : p) }')
deadline=$(awk -v n="$EPOCHREALTIME" -v p="$patience" 'BEGIN { printf "%d", n + p }')
while :; do
  read -r file_scanned tcp_scanned udp_scanned udp_dropped published delivered < <(scan_counts)
  if [ "$file_scanned" -ge "$file_lines" ] && [ "$tcp_scanned" -ge "$tcp_lines" ] &&
     [ $((udp_scanned + udp_dropped)) -ge "$udp_lines" ] && [ "$delivered" -ge "$markers" ] &&
     [ "$published" -eq "$delivered" ]; then
    break
  fi
  [ "${EPOCHREALTIME%.*}" -lt "$deadline" ] || { echo "soak: gave up waiting for the scan to catch up" >&2; break; }
  sleep 1
done
sleep 2  # a last look: nothing more may arrive
read -r file_scanned tcp_scanned udp_scanned udp_dropped published delivered < <(scan_counts)
ticks=$(getconf CLK_TCK)
cpu=$(awk -v hz="$ticks" '{ sub(/.*\) /, ""); printf "%.1f", ($12 + $13) / hz }' "/proc/$pid/stat")
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
kill "$sampler" 2> /dev/null || true
wait "$sampler" 2> /dev/null || true
trap - EXIT
alerts=$(grep -c "\"state\":\"firing\"" "$work/alerts.jsonl" || true)
alert_lines=$(wc -l < "$work/alerts.jsonl")
read -r rss_first_t rss_first _ < <(head -1 "$work/rss.tsv")
read -r rss_last_t rss_last _ < <(tail -1 "$work/rss.tsv")
peak_sampled=$(awk 'BEGIN { m = 0 } { if ($3 > m) m = $3 } END { print m }' "$work/rss.tsv")
[ "${hwm:-0}" -ge "$peak_sampled" ] || hwm=$peak_sampled
wall=$(awk -v s="$start" -v n="$EPOCHREALTIME" 'BEGIN { printf "%.1f", n - s }')

fail=0
check() { if [ "$2" = "$3" ]; then echo "ok"; else echo "MISMATCH"; fi; }
c_files=$(check files "$file_lines" "$file_scanned")
c_tcp=$(check tcp "$tcp_lines" "$tcp_scanned")
c_udp=$(check udp "$udp_lines" "$((udp_scanned + udp_dropped))")
c_alerts=$(check alerts "$markers" "$alerts")
[ "$alerts" = "$alert_lines" ] || { c_alerts="MISMATCH (non-firing lines)"; fail=1; }
[ "$status" = 0 ] || fail=1
for c in "$c_files" "$c_tcp" "$c_udp" "$c_alerts"; do [ "$c" = ok ] || fail=1; done
cat <<EOF
| gpufilterd soak | |
|---|---:|
| duration (load), s | $(field seconds) |
| target rate | $rate B/s |
| achieved, MB/s | $mbps |
| bytes written | $bytes |
| followed files / rotations | $files / $rotations |
| TCP connections | $connections |
| lines written: files | $file_lines |
| lines scanned: files | $file_scanned ($c_files) |
| lines written: TCP | $tcp_lines |
| lines scanned: TCP | $tcp_scanned ($c_tcp) |
| lines written: UDP | $udp_lines |
| lines scanned: UDP + datagrams dropped (counted) | $udp_scanned + $udp_dropped ($c_udp) |
| alerts expected (markers) | $markers |
| alerts delivered (alerts.jsonl) | $alerts ($c_alerts) |
| peak RSS (VmHWM), MiB | $(awk -v k="$hwm" 'BEGIN { printf "%.1f", k / 1024 }') |
| RSS first sample (t=${rss_first_t}s), MiB | $(awk -v k="$rss_first" 'BEGIN { printf "%.1f", k / 1024 }') |
| RSS last sample (t=${rss_last_t}s), MiB | $(awk -v k="$rss_last" 'BEGIN { printf "%.1f", k / 1024 }') |
| CPU seconds (user + system) | $cpu |
| wall seconds, start to stop | $wall |
| exit status of gpufilterd | $status |
EOF
echo "files: $work (gpufilterd.log, rss.tsv, load.json, metrics.txt, alerts.jsonl)"
[ "$fail" = 0 ] && echo "soak: PASS" || echo "soak: FAIL"
exit "$fail"
