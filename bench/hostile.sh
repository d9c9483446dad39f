#!/usr/bin/env bash
# The hostile inputs of issue 8 at their full sizes (not in CI: tests/cli/hostile_input_test.cpp
# and tests/sources/listener_test.cpp run them scaled down). Each is checked (against GNU
# grep -F where it is line filtering; against what was sent where it is a socket) and timed,
# and the table says: the input, the result ("ok: ..." or what went wrong, with the exit
# status and message), wall seconds, and gpufilter's peak resident memory in MB.
#
#   bench/hostile.sh [BUILD_DIR]        (default: build; needs BUILD_DIR/gpufilter)
#
# Needs python3, GNU grep and /usr/bin/time. Scratch space in $TMPDIR (default /tmp): the
# 2 GB line (2 GB, and 2 GB more of gpufilter's spool while it runs); the 10 GB file of NUL
# bytes is sparse. The socket cases raise this shell's open-file limit to its hard limit
# (10,000 connections need 10,000 descriptors on each side). About 5 minutes on 2 cores.
set -euo pipefail

build=${1:-build}
gf=$(realpath "$build/gpufilter")
here=$(cd "$(dirname "$0")/.." && pwd)
corpus=${GPUFILTER_CORPUS_DIR:-$here/../shared/corpus}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpufilter-hostile-XXXXXX")
trap 'rm -rf "$work"' EXIT
ulimit -n "$(ulimit -H -n)"
export LC_ALL=C
rows=$work/rows
: > "$rows"

row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$rows"; }

# measure OUT ERR CMD...: runs CMD with its output in OUT and ERR; sets status, wall (s)
# and rss (MB).
measure() {
  local out=$1 err=$2
  shift 2
  set +e
  /usr/bin/time -f '%e %M' -o "$work/time" "$@" > "$out" 2> "$err"
  status=$?
  set -e
  read -r wall rss_kb < <(tail -n 1 "$work/time")
  rss=$((rss_kb / 1024))
}

# The first line of ERR without "gpufilter: ", for a result.
message() { head -n 1 "$1" | sed 's/^gpufilter: //' | cut -c 1-160; }

# same_as_grep LABEL ARGS...: gpufilter (with the options in gf_extra, if any) and grep -F
# on the same arguments.
gf_extra=()
same_as_grep() {
  local label=$1
  shift
  measure "$work/ours" "$work/ours.err" "$gf" ${gf_extra[@]+"${gf_extra[@]}"} "$@"
  local ours_status=$status ours_wall=$wall ours_rss=$rss
  set +e
  /usr/bin/time -f '%e %M' -o "$work/gtime" grep -F "$@" > "$work/theirs" 2> "$work/theirs.err"
  local grep_status=$?
  set -e
  read -r gwall grss < <(tail -n 1 "$work/gtime")
  local result
  if [ "$ours_status" = "$grep_status" ] && cmp -s "$work/ours" "$work/theirs"; then
    result="ok: = grep ($(wc -l < "$work/ours") lines out, exit $ours_status; grep ${gwall} s, $((grss / 1024)) MB)"
  else
    result="DIFFERS from grep: exit $ours_status vs $grep_status; $(message "$work/ours.err")"
  fi
  row "$label" "$result" "$ours_wall" "$ours_rss"
}

echo "gpufilter: $gf" >&2
echo "scratch:   $work" >&2

# ---------------------------------------------------------------------------------------
# A 2 GB line: one line of 2 GiB + 4 KiB (past 2^31), NEEDLE 1000 bytes before its end.
echo "2 GB line..." >&2
line=$work/line
size=$((2 * 1024 * 1024 * 1024 + 4096))
head -c "$size" /dev/zero | tr '\0' a > "$line"
printf NEEDLE | dd of="$line" bs=1 seek=$((size - 1000)) conv=notrunc status=none
same_as_grep "2 GB line, -c" -c NEEDLE "$line"
measure "$work/out" "$work/err" "$gf" -o -b NEEDLE "$line"
if [ "$status" = 0 ] && [ "$(cat "$work/out")" = "$((size - 1000)):NEEDLE" ]; then
  row "2 GB line, -o -b" "ok: $(cat "$work/out")" "$wall" "$rss"
else
  row "2 GB line, -o -b" "exit $status: $(message "$work/err") $(head -c 80 "$work/out")" "$wall" "$rss"
fi
measure /dev/null "$work/err" sh -c '"$0" NEEDLE "$1" | wc -c > "$2"' "$gf" "$line" "$work/count"
if [ "$status" = 0 ] && [ "$(cat "$work/count")" = "$((size + 1))" ]; then
  row "2 GB line, printed" "ok: $((size + 1)) bytes out (the spool's pages are file-backed)" "$wall" "$rss"
else
  row "2 GB line, printed" "exit $status: $(message "$work/err")" "$wall" "$rss"
fi
rm -f "$line"

# ---------------------------------------------------------------------------------------
# A 10 GB file of NUL bytes (sparse), "needle" at its start, in its middle and at its end.
echo "10 GB of NUL bytes..." >&2
nul=$work/nul
truncate -s 10G "$nul"
for at in 0 $((5 * 1024 * 1024 * 1024)) $((10 * 1024 * 1024 * 1024 - 6)); do
  printf needle | dd of="$nul" bs=1 seek="$at" conv=notrunc status=none
done
# The first read of a sparse file fills the page cache with zeros; timed on its own, so
# that the rows after it measure gpufilter (grep itself skips holes: SEEK_HOLE).
measure /dev/null "$work/err" cat "$nul"
row "10 GB NUL file: cat > /dev/null (the page cache)" "ok: read once, for the rows below" "$wall" "$rss"
same_as_grep "10 GB NUL file, -c (host engine)" -c needle "$nul"
gf_extra=(--engine=gpu)
same_as_grep "10 GB NUL file, -c --engine=gpu" -c needle "$nul"
gf_extra=()
same_as_grep "10 GB NUL file, -c -v (every record)" -c -v needle "$nul"

# ---------------------------------------------------------------------------------------
# Patterns: 1,000,000 distinct; 1,000,000 lines of duplicates and empty lines; 64 KiB each.
echo "patterns..." >&2
cat "$corpus"/loghub/*_2k.log > "$work/logs"
python3 - "$work" <<'PY'
import random, sys
work = sys.argv[1]
r = random.Random(1)
logs = open(f"{work}/logs", "rb").read()
alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/"
with open(f"{work}/million", "wb") as f:
    for i in range(1_000_000):
        if i % 50 == 0:  # a piece of a line: it occurs
            at = r.randrange(len(logs) - 40)
            p = logs[at:at + r.randint(6, 30)].replace(b"\n", b"") or b"x"
        else:
            p = bytes(r.choice(alphabet) for _ in range(r.randint(6, 24)))
        f.write(p + b"\n")
distinct = [b"sshd", b"Failed password", b"pam_unix(sshd:auth)", b"error", b"session"]
with open(f"{work}/duplicates", "wb") as f:
    for i in range(1_000_000):
        f.write((b"" if i % 3 == 1 else distinct[i % len(distinct)]) + b"\n")
letters = b"abcdefgh"
pats = [bytes(r.choice(letters) for _ in range(65536)) for _ in range(8)]
with open(f"{work}/long-patterns", "wb") as f:
    f.write(b"\n".join(pats) + b"\n")
with open(f"{work}/long-input", "wb") as f:
    for i in range(400):
        p = pats[i % 8]
        kind = i % 4
        if kind == 0: f.write(b"x" * r.randrange(100) + p + b"y" * r.randrange(100) + b"\n")
        elif kind == 1: f.write(p[:-1] + b"\n")
        elif kind == 2: f.write(p[1:] + p[:5] + b"\n")
        else: f.write(bytes(r.choice(letters) for _ in range(r.randrange(1, 70000))) + b"\n")
bad = [b"\x80", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xff\xfe", b"\xe2\x82", b"\xc3\xa9"]
with open(f"{work}/utf8", "wb") as f:
    for i in range(1_000_000):
        parts = []
        for _ in range(r.randint(0, 12)):
            k = r.randrange(4)
            parts.append(r.choice(bad) if k == 0 else bytes(r.choice(b"abcERROR ") for _ in range(3)) if k == 1
                         else bytes([r.randrange(0x80, 0x100)]))
        f.write(b"".join(parts) + b"\n")
with open(f"{work}/utf8-patterns", "wb") as f:
    f.write(b"\xc3\n\xed\xa0\x80\nERROR\n\xff\xfe\nR\x80\n")
PY
same_as_grep "1,000,000 distinct patterns, -n" -n -f "$work/million" "$work/logs"
same_as_grep "1,000,000-line pattern file: duplicates, empty lines" -c -f "$work/duplicates" "$work/logs"
same_as_grep "64 KiB patterns (8), 23 MB input, -n" -n -f "$work/long-patterns" "$work/long-input"
same_as_grep "invalid UTF-8, 1,000,000 lines, -o -b" -o -b -f "$work/utf8-patterns" "$work/utf8"
measure "$work/out" "$work/err" "$gf" --json -f "$work/utf8-patterns" "$work/utf8"
if python3 -c 'import json, sys; n = sum(1 for l in open(sys.argv[1], "rb") if json.loads(l)); print(n)' "$work/out" \
    > "$work/n" 2>/dev/null; then
  row "invalid UTF-8, --json" "ok: $(cat "$work/n") objects, each valid JSON" "$wall" "$rss"
else
  row "invalid UTF-8, --json" "exit $status: not valid JSON; $(message "$work/err")" "$wall" "$rss"
fi

# Literals that make Hyperscan 5.4's hs_scan fail (intel/hyperscan#303): a run of one byte
# broken once, beside another literal. The host engine scans a chunk that hits it with the
# trie walk instead; the same set without the run, for the speed Hyperscan gives.
python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
bug = b"xxy" + b"x" * 34
plain = b"xyz0123456789abcdefghijklmnopqrstuvw"[:len(bug)]
logs = open(f"{work}/logs", "rb").read().splitlines(keepends=True)
with open(f"{work}/hs-bug-input", "wb") as f:
    for i in range(1_200_000):  # about 160 MB: the Loghub lines, a literal every 1,000
        line = logs[i % len(logs)]
        if i % 1000 == 500:
            line = line.rstrip(b"\n") + b" " + (bug if i % 2000 == 500 else plain) + b"\n"
        f.write(line)
open(f"{work}/hs-bug-patterns", "wb").write(bug + b"\nsshd\n")
open(f"{work}/hs-plain-patterns", "wb").write(plain + b"\nsshd\n")
PY
gf_extra=(--engine=cpu)
same_as_grep "Hyperscan's bug literals, 160 MB, -c (host engine: trie walk)" -c -f "$work/hs-bug-patterns" "$work/hs-bug-input"
same_as_grep "the same without the bug, -c (host engine: Hyperscan)" -c -f "$work/hs-plain-patterns" "$work/hs-bug-input"
gf_extra=()
same_as_grep "Hyperscan's bug literals, 160 MB, -c (default engine)" -c -f "$work/hs-bug-patterns" "$work/hs-bug-input"
rm -f "$work/hs-bug-input"

# ---------------------------------------------------------------------------------------
# Captures: a pcap record and a pcapng block claiming 4 GB.
echo "captures..." >&2
python3 - "$work" "$corpus" <<'PY'
import struct, sys
work, corpus = sys.argv[1], sys.argv[2]
b = bytearray(open(f"{corpus}/pcap/http.cap", "rb").read())
at = 24
for _ in range(20):
    at += 16 + struct.unpack_from("<I", b, at + 8)[0]
struct.pack_into("<II", b, at + 8, 0xFFFFFFFF, 0xFFFFFFFF)
open(f"{work}/huge.pcap", "wb").write(b)
open(f"{work}/huge.pcap.at", "w").write(str(at))
b = bytearray(open(f"{corpus}/pcap/http_redirects.pcapng", "rb").read())
at, packets = 0, 0
while True:
    kind, length = struct.unpack_from("<II", b, at)
    if kind == 6:
        packets += 1
        if packets == 20:
            break
    at += length
struct.pack_into("<I", b, at + 4, 0xFFFFFFFC)
open(f"{work}/huge.pcapng", "wb").write(b)
open(f"{work}/huge.pcapng.at", "w").write(str(at))
PY
for capture in huge.pcap huge.pcapng; do
  at=$(cat "$work/$capture.at")
  head -c "$at" "$work/$capture" > "$work/cut-$capture"
  "$gf" --pcap "$work/cut-$capture" --match-frame -e HTTP > "$work/before" 2>/dev/null || true
  measure "$work/out" "$work/err" "$gf" --pcap "$work/$capture" --match-frame -e HTTP
  if [ "$status" = 2 ] && [ -s "$work/before" ] && cmp -s "$work/out" "$work/before" &&
      grep -q "^gpufilter: $work/$capture: bad capture at byte $at: " "$work/err"; then
    row "$capture: record claiming 4 GB" "ok: exit 2 after the packets before it; $(message "$work/err" | sed "s|$work/||")" "$wall" "$rss"
  else
    row "$capture: record claiming 4 GB" "exit $status: $(message "$work/err")" "$wall" "$rss"
  fi
done

# ---------------------------------------------------------------------------------------
# Sockets, driven by python3: it starts gpufilter, plays the clients, and prints one row.
echo "sockets..." >&2
cat > "$work/sockets.py" <<'PY'
import json, os, re, resource, signal, socket, subprocess, sys, threading, time

gf, case = sys.argv[1], sys.argv[2]


class Gpufilter:
    """gpufilter with its output collected by threads; its peak RSS from wait4."""

    def __init__(self, args, ulimit=None):
        argv = [gf] + args
        if ulimit:
            argv = ["/bin/sh", "-c", f"ulimit {ulimit} && exec \"$0\" \"$@\""] + argv
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out, self.err = [], []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._read, args=(s, b), daemon=True)
                        for s, b in ((self.p.stdout, self.out), (self.p.stderr, self.err))]
        for t in self.threads:
            t.start()
        self.url = self.wait_err(r"listening on (\S+)", 60).group(1)
        self.port = int(self.url.rsplit(":", 1)[1])

    def _read(self, stream, into):
        for line in stream:
            with self.lock:
                into.append(line)

    def text(self, which):
        with self.lock:
            return b"".join(self.out if which == "out" else self.err).decode("latin-1")

    def wait_err(self, pattern, limit):
        deadline = time.time() + limit
        while time.time() < deadline:
            m = re.search(pattern, self.text("err"))
            if m:
                return m
            time.sleep(0.01)
        raise SystemExit(f"gpufilter never said /{pattern}/: {self.text('err')[-300:]}")

    def wait_out(self, part, limit):
        deadline = time.time() + limit
        while time.time() < deadline:
            if part in self.text("out"):
                return True
            time.sleep(0.005)
        return False

    def status(self, key):
        for line in open(f"/proc/{self.p.pid}/status"):
            if line.startswith(key):
                return int(line.split()[1])
        return 0

    def cpu(self):
        fields = open(f"/proc/{self.p.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        _, status, usage = os.wait4(self.p.pid, 0)
        self.p.returncode = os.waitstatus_to_exitcode(status)
        for t in self.threads:
            t.join()
        self.max_rss_mb = usage.ru_maxrss // 1024
        m = re.search(r"gpufilter-stats: (\{.*\})", self.text("err"))
        self.stats = json.loads(m.group(1)) if m else {}
        return self.p.returncode


def connect(port):
    return socket.create_connection(("127.0.0.1", port))


def emit(label, result, wall, rss):
    print(f"{label}\t{result}\t{wall:.2f}\t{rss}")


start = time.time()
if case == "idle":
    n = 10_000
    g = Gpufilter(["--listen", "tcp://127.0.0.1:0", "--max-connections", str(n + 100), "--stats", "-H", "ERROR"])
    warm = connect(g.port); warm.sendall(b"warm ERROR\n"); warm.close(); g.wait_out("warm ERROR", 10)
    before = g.status("VmRSS")
    idle = [connect(g.port) for _ in range(n)]
    talker = connect(g.port); t0 = time.time(); talker.sendall(b"talker ERROR\n")
    served = g.wait_out("talker ERROR", 30); latency = (time.time() - t0) * 1000
    growth = g.status("VmRSS") - before
    c0 = g.cpu(); time.sleep(2); idle_cpu = g.cpu() - c0
    talker.close()
    for s in idle: s.close()
    code = g.stop()
    ok = served and code == 0 and g.stats.get("connections") == n + 2 and growth < n * 8
    emit(f"{n:,} silent TCP connections (slowloris)",
         f"{'ok' if ok else 'FAILED'}: +{growth / 1024:.1f} MB ({growth * 1024 // n} bytes each), "
         f"idle CPU {idle_cpu:.2f} s in 2 s, a talker served in {latency:.1f} ms, exit {code}",
         time.time() - start, g.max_rss_mb)
elif case == "refused":
    n = 10_000
    g = Gpufilter(["--listen", "tcp://127.0.0.1:0", "--stats", "x"])
    socks = [connect(g.port) for _ in range(n)]
    time.sleep(1)
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            closed += s.recv(1) == b""
        except (BlockingIOError, ConnectionResetError) as e:
            closed += isinstance(e, ConnectionResetError)
    for s in socks: s.close()
    code = g.stop()
    st = g.stats
    ok = st.get("connections") == 1024 and st.get("connections_refused") == n - 1024 and closed == n - 1024
    emit(f"{n:,} connections, default --max-connections",
         f"{'ok' if ok else 'FAILED'}: {st.get('connections')} open, {st.get('connections_refused')} refused "
         f"(closed at once, counted); no EMFILE: {'Too many open files' not in g.text('err')}",
         time.time() - start, g.max_rss_mb)
elif case == "emfile":
    n = 1000
    g = Gpufilter(["--listen", "tcp://127.0.0.1:0", "--stats", "-H", "said"], ulimit="-n 256")
    clients = []
    for i in range(n):
        s = connect(g.port); s.sendall(f"client {i} said hello\n".encode()); clients.append(s)
    # Each client is served (its line out) or refused (closed by gpufilter); none may wait.
    served, refused, deadline = set(), set(), time.time() + 60
    while len(served) + len(refused) < n and time.time() < deadline:
        out = g.text("out")
        for i, s in enumerate(clients):
            if i in served or i in refused:
                continue
            if f"client {i} said hello\n" in out:
                served.add(i)
                continue
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    refused.add(i)
            except BlockingIOError:
                pass
            except ConnectionResetError:
                refused.add(i)
        time.sleep(0.02)
    c0 = g.cpu(); time.sleep(2); busy = g.cpu() - c0
    for s in clients: s.close()
    code = g.stop()
    ok = len(served) + len(refused) == n and code == 0 and busy < 0.2 and g.stats.get("connections_refused") == len(refused)
    emit(f"{n:,} connections under ulimit -n 256 (EMFILE)",
         f"{'ok' if ok else 'FAILED'}: {len(served)} served, {len(refused)} refused at once (counted), "
         f"{n - len(served) - len(refused)} left waiting; CPU {busy:.2f} s in 2 s at the limit",
         time.time() - start, g.max_rss_mb)
elif case == "trickle":
    g = Gpufilter(["--listen", "tcp://127.0.0.1:0", "-H", "ERROR"])
    slow = connect(g.port); fast = connect(g.port)
    for s in (slow, fast):  # no Nagle: each write is a segment of its own
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    line = b"slow ERROR\n"
    worst = 0.0
    for i, byte in enumerate(line):
        slow.sendall(bytes([byte]))
        t_end = time.time() + 1.0
        k = 0
        while time.time() < t_end:  # one byte a second; a fast line every 10 ms meanwhile
            mark = f"fast ERROR {i}.{k}\n"
            t0 = time.time(); fast.sendall(mark.encode())
            if not g.wait_out(mark, 5):
                worst = float("inf"); break
            worst = max(worst, time.time() - t0); k += 1
            time.sleep(0.01)
    whole = g.wait_out(":slow ERROR\n", 5)
    slow.close(); fast.close()
    code = g.stop()
    ok = whole and worst < 0.05 and code == 0
    emit("a TCP client sending 1 byte a second",
         f"{'ok' if ok else 'FAILED'}: its line whole after {len(line)} s; another client's lines "
         f"out within {worst * 1000:.1f} ms meanwhile", time.time() - start, g.max_rss_mb)
elif case == "udp":
    peers, each = 1000, 1000
    g = Gpufilter(["--listen", "udp://127.0.0.1:0", "--stats", "-H", "the last one"])
    addr = ("127.0.0.1", g.port)
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(peers)]
    payload = b"f" * 200
    sent = 0
    for r in range(each):
        d = b"flood %d " % r + payload + b"\n"
        for s in socks:
            s.sendto(d, addr); sent += 1
    for _ in range(200):
        socks[0].sendto(b"the last one\n", addr); sent += 1
        if g.wait_out(":the last one", 0.3): break
    for s in socks: s.close()
    code = g.stop()
    st = g.stats
    got, kernel, room = st.get("datagrams", 0), st.get("datagrams_dropped_kernel", 0), st.get("datagrams_dropped", 0)
    ok = got + kernel == sent and st.get("lines", 0) + room == got and code == 0
    emit(f"UDP flood: {sent:,} datagrams from {peers:,} peers",
         f"{'ok' if ok else 'FAILED'}: {got:,} received, {kernel:,} dropped by the kernel, {room:,} found no "
         f"room; all counted", time.time() - start, g.max_rss_mb)
elif case == "octets":
    g = Gpufilter(["--listen", "tcp://127.0.0.1:0", "--stats", "-H", "lie"])
    good = b"<13>lie one, honestly counted"
    frame = b"%d " % len(good) + good
    a = connect(g.port); a.sendall(frame + b"99999999999 <13>lie with eleven digits\n")
    b = connect(g.port); b.sendall(b"-5 <13>lie negative\n")
    c = connect(g.port); c.sendall(frame + b"999999999 <13>lie huge\n")
    junk = b"lie inside the skipped frame\n" * (1 << 15)
    before = g.status("VmRSS")
    for _ in range(100 * (1 << 20) // len(junk)):
        c.sendall(junk)
    d = connect(g.port); d.sendall(frame + b"5 <13>lie: the count is too short\n")
    time.sleep(0.5)
    growth = g.status("VmRSS") - before
    for s in (a, b, c, d): s.close()
    code = g.stop()
    out, err = g.text("out"), g.text("err")
    ok = (code == 0 and out.count("<13>lie one, honestly counted") == 3 and "-5 <13>lie negative" in out
          and err.count("malformed octet-counted frame") == 2 and g.stats.get("lines_too_long") == 1
          and "inside the skipped" not in out)
    emit("octet counts that lie: 11 digits, -5, 999999999 (+100 MB), too short",
         f"{'ok' if ok else 'FAILED'}: 2 connections closed (malformed frame, noticed), -5 read as a line, "
         f"the 999999999-byte frame dropped and counted (+{growth // 1024} MB while skipping 100 MB)",
         time.time() - start, g.max_rss_mb)
PY
for case in idle refused emfile trickle udp octets; do
  echo "  $case..." >&2
  if ! python3 "$work/sockets.py" "$gf" "$case" >> "$rows" 2> "$work/py.err"; then
    row "sockets: $case" "FAILED: $(tail -n 1 "$work/py.err" | cut -c 1-120)" "-" "-"
  fi
done

# ---------------------------------------------------------------------------------------
echo
{
  printf 'input\tresult\twall s\tpeak RSS MB\n'
  cat "$rows"
} | column -t -s $'\t'
