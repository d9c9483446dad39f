#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

Every seed is made here, from scratch, so that each one is small, says what it is for in
its name, and follows the input layout its target documents at the top of its .cpp file.
The captures are synthetic (written byte by byte below) rather than cut from the shared
corpus, whose files are not to be copied into the repository; the ctest replay of
pcap_fuzz reads those real captures in place instead.

Run it after changing a target's input layout: tests/fuzz/make_seeds.py
"""
import os
import re
import shutil
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
written = {}


def seed(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    assert len(data) < 4096, (target, name, len(data))
    written.setdefault(target, {})[name] = data


# --- cli_options_fuzz: argv words separated by NUL --------------------------------------

def argv(*words):
    return "\0".join(words)


CLI = {
    "basic": argv("-n", "-i", "-e", "ERROR", "-e", "timeout", "app.log"),
    "context-digits": argv("-15", "-v", "--color=always", "pattern", "a", "b"),
    "context-bundled": argv("-C2", "-A", "1", "-B3", "-nH", "x"),
    "pattern-file": argv("-f", "p", "-w", "-x", "-f", "e", "--", "-file-"),
    "pattern-stdin": argv("-f", "-", "-c"),
    "follow": argv("--follow", "--state", "s.state", "--from-start", "--poll-interval=250", "ERROR", "f.log"),
    "listen": argv("--listen", "tcp://127.0.0.1:5140", "--listen=udp://[::1]:0", "--json",
                   "--max-line-bytes=64K", "--max-connections", "10", "ERR"),
    "pcap": argv("--pcap", "c.pcap", "-X", "--stream", "--bpf", "tcp port 80", "--pcap-out", "o.pcap",
                 "de:ad:be:ef"),
    "escapes": argv("--escapes", "--pcap=-", "--hexdump", "--match-frame", "a\\x41\\n\\t\\0"),
    "max-count": argv("-m", "-3", "-c", "-m5", "--max-count=99999999999999999999999", "x"),
    "engine": argv("--chunk-size=4K", "--slots", "3", "--engine=cpu", "--host-scan-below=0", "--stats",
                   "--batch-timeout", "7", "--device=0:1", "x"),
    "lists": argv("-l", "-L", "-q", "-s", "-h", "-H", "--label=in", "-o", "-b", "--line-buffered", "x", "-"),
    "binary": argv("-a", "--binary-files=without-match", "-I", "-U", "--no-ignore-case", "-y", "x"),
    "separators": argv("--group-separator=::", "--no-group-separator", "--colour", "-C", "0", "x"),
    "regex-refused": argv("-E", "a|b"),
    "ambiguous": argv("--co", "x"),
    "missing-argument": argv("x", "-A"),
    "missing-long-argument": argv("x", "--chunk-size"),
    "too-big": argv("--max-line-bytes=2G", "x"),
    "bad-poll": argv("--follow", "--poll-interval=0", "x", "f"),
    "help": argv("--help"),
    "version": argv("-V", "--list-devices"),
    "unsupported": argv("-r", "-z", "-Z", "x"),
    "permuted": argv("x", "file", "-n", "--", "-v"),
    "empty-pattern": argv("-e", "", "-x"),
    "newline-patterns": argv("-e", "a\nb\n\nc", "f"),
}
for name, words in CLI.items():
    seed("cli_options_fuzz", name, words)


# --- patterns_fuzz: a flags byte (1 -X, 2 --escapes, 4 -i, 8 -e), then a pattern file -----

PATTERNS = {
    "duplicates-empty-crlf": (0x00, b"ERROR\nWARN\n\nfail\r\nERROR\nWARN\n\n"),
    "case-duplicates": (0x04, b"Error\nERROR\nerror\nerr\nERR\n"),
    "prefixes": (0x00, b"a\nab\nabc\nabcd\nb\nbc\nbcd\nabcdabc\n"),
    "nul-bytes": (0x00, b"a\0b\nab\n\0\n\0\0\n"),
    "no-final-newline": (0x00, b"first\nsecond"),
    "only-newline": (0x00, b"\n"),
    "empty-file": (0x00, b""),
    "hex": (0x01, b"de:ad:be:ef\n0a0d\n474554\n00 11 22\n47-45-54\n"),
    "hex-case": (0x05, b"41\n61\n4142\nDEADbeef\n"),
    "hex-odd": (0x01, b"abc\n"),
    "hex-bad": (0x01, b"GET\n"),
    "escapes": (0x02, b"tab\\there\nnul\\0byte\nhex\\x41\\x42\ncr\\r\\n\nback\\\\slash\ntrailing\\\n"),
    "escapes-bad": (0x02, b"\\x4\n"),
    "escapes-unknown": (0x02, b"\\q\n"),
    "escapes-and-hex": (0x03, b"\\x41\n41\n"),
    "inline-list": (0x08, b"ERROR\nWARN\n\nERROR"),
    "long": (0x00, b"x" * 300 + b"\n" + b"xy" * 100 + b"\nx\n"),
    "binary-bytes": (0x04, bytes(range(1, 10)) + b"\n" + bytes(range(0x80, 0x90)) + b"\n\xff\xfe\n"),
}
for name, (flags, text) in PATTERNS.items():
    seed("patterns_fuzz", name, bytes([flags]) + text)


# --- chunker_fuzz: 5 header bytes, patterns each ended by '\n', then the text ------------

LOG = (
    "2023-10-11 22:14:15 INFO  sshd[1234]: Accepted password for alice from 10.0.0.5\n"
    "2023-10-11 22:14:16 ERROR sshd[1240]: Failed password for root from 10.0.0.9\r\n"
    "2023-10-11 22:14:17 WARN  kernel: disk sda1 is 91% full\n"
    "\n"
    "2023-10-11 22:14:18 error timeout while reading from upstream\n"
    "2023-10-11 22:14:19 INFO  cron[77]: (root) CMD (run-parts /etc/cron.hourly)\n"
    "ERROR_CODE=5 errorless ERROR-ish\n"
    "2023-10-11 22:14:20 INFO  done"
)


def chunker(f0=0, f1=0, chunk=0, reads=0, count=None, mcount=0, context=0, patterns=(), text=LOG):
    if count is None:
        count = len(patterns)
    f4 = (count & 7) | (context & 3) << 3 | (mcount & 7) << 5
    body = b"".join(p.encode("latin-1") + b"\n" for p in patterns)
    t = text.encode("latin-1") if isinstance(text, str) else text
    return bytes([f0, f1, chunk, reads, f4]) + body + t


I, W, X, V, N, O, M, STREAM = 1, 2, 4, 8, 16, 32, 64, 128
COUNTS, BINARY, SLOTS3, A, B, C, IDS, THREADS2 = 1, 2, 8, 16, 32, 48, 64, 128
CHUNKER = {
    "default": chunker(N, 0, 63, 6, patterns=["ERROR", "timeout"]),
    "ignore-case-word": chunker(I | W | N, IDS, 15, 2, patterns=["error", "root", "disk"]),
    "whole-line": chunker(X | O, 0, 31, 1, patterns=["", "2023-10-11 22:14:20 INFO  done", "ERROR"]),
    "invert-context": chunker(V | N | O, C, 7, 3, context=2, patterns=["INFO"]),
    "max-count-after": chunker(M | N, A, 3, 0, mcount=2, context=1, patterns=["2023"]),
    "before-context": chunker(N, B | SLOTS3, 5, 7, context=3, patterns=["cron", "disk"]),
    "pattern-counts": chunker(I, COUNTS | THREADS2, 0, 4, patterns=["e", "er", "err", "ERROR", "rr"]),
    "empty-pattern-word": chunker(W | N, 0, 9, 5, patterns=["", "ERROR"]),
    "stream-small-reads": chunker(STREAM | N | O, BINARY, 11, 0, patterns=["sshd", "from 10.0.0"]),
    "long-line-split": chunker(O | N, COUNTS, 0, 1, patterns=["abcabd", "cab"],
                               text="x" * 40 + "abcabcabdabcabd" * 12 + "\nshort abcabd\n" + "y" * 600),
    "pattern-longer-than-chunk": chunker(N, 0, 0, 3, patterns=["a long pattern that spans chunks"],
                                         text="a long pattern that spans chunks\nnot here\n" * 3),
    "nul-and-cr": chunker(N | O, COUNTS, 13, 2, patterns=["a\0b", "\r"],
                          text=b"a\0b\r\nplain\r\n\0\0\na\0bb\0a\0b"),
    "binary-detection": chunker(N, BINARY | COUNTS, 31, 6, patterns=["ERROR"]),
    "no-patterns": chunker(N, 0, 8, 3, patterns=[]),
    "empty-text": chunker(V, 0, 1, 0, patterns=["x"], text=""),
    "only-newlines": chunker(V | N | X, C, 0, 0, context=1, patterns=[""], text="\n\n\n\n"),
    "max-count-zero": chunker(M, COUNTS, 4, 1, mcount=0, patterns=["INFO"]),
    "big-chunk": chunker(I | N | O, COUNTS | IDS, 255, 7, patterns=["info", "error", "warn"]),
    "word-boundaries": chunker(W | N, IDS, 6, 2, patterns=["ERROR", "err"],
                               text="xERROR\nERRORx\n_ERROR yes\n(ERROR)\nERROR_\nERROR\nerr-or\nerr_\nxerr\n"),
    "overlapping-counts": chunker(N, COUNTS, 2, 1, patterns=["aa", "aba", "a"],
                                  text="aaaaaaa ababababa\n" + "a" * 50 + "\nbab"),
    "context-groups": chunker(N | I, C | IDS, 10, 3, context=1, patterns=["SSHD[1234]", "DONE"]),
}
for name, data in CHUNKER.items():
    seed("chunker_fuzz", name, data)


# --- line_framer_fuzz and syslog_framer_fuzz: 2 header bytes, then the stream -----------
# [0] bits 0-2 max line (1, 2, 3, 5, 8, 16, 64, 1024), 3-7 seed; [1] bits 0-2 largest piece
# (1, 2, 3, 5, 17, 64, 1000, whole), bit 3 take lines a few at a time.

def framed(max_sel, piece_sel, partial, stream, seed_bits=5):
    return bytes([max_sel | seed_bits << 3, piece_sel | (8 if partial else 0)]) + (
        stream.encode("latin-1") if isinstance(stream, str) else stream)


LINES = {
    "lines": framed(5, 2, True, "first line\nsecond\n\nthird line without end"),
    "over-long": framed(3, 1, True, "ok\nthis line is too long\nok2\nlonger than five\nend"),
    "crlf": framed(7, 6, False, "a\r\nb\r\n\r\nlast\r"),
    "unterminated-over-long": framed(2, 0, True, "ab\ntoolong"),
    "binary": framed(6, 3, True, b"\0\1\2\n\xff\xfe\n\0"),
    "empty-lines": framed(0, 0, True, "\n\n\n\n"),
    "exact-limit": framed(4, 4, True, "12345678\n123456789\n1234567\n"),
}
for name, data in LINES.items():
    seed("line_framer_fuzz", name, data)


def frame(msg, count=None):
    msg = msg.encode("latin-1") if isinstance(msg, str) else msg
    return str(len(msg) if count is None else count).encode() + b" " + msg


MSG1 = "<13>1 2023-10-11T22:14:15Z host app - - - hello octets"
MSG2 = "<14>Oct 11 22:14:16 host app: second\n"
MSG3 = "<15>embedded\nnewline and trailing\n"
SYSLOG = {
    "octets": framed(7, 3, True, frame(MSG1) + frame(MSG2) + frame(MSG3)),
    "octets-separators": framed(7, 1, False, frame(MSG1) + b"\r\n " + frame(MSG2) + b"\n\n" + frame("<9>x")),
    "newline-framing": framed(7, 4, True, MSG2 + "<13>Oct 11 22:14:17 host app: third\n" + MSG1),
    "huge-count": framed(6, 5, True, frame("<13>short", count=999999999)),
    "count-too-short": framed(7, 2, True, frame("<13>abcdef", count=4) + frame(MSG1)),
    "count-zero": framed(7, 0, False, frame("<13>", count=0)),
    "ten-digits": framed(7, 2, True, b"1234567890 <13>not a count\n"),
    "negative": framed(7, 2, True, b"-5 <13>negative\n"),
    "non-digit": framed(7, 2, True, frame(MSG1) + b"12a <13>x"),
    "truncated-header": framed(7, 1, True, frame(MSG1) + b"12"),
    "truncated-body": framed(7, 3, True, frame("<13>cut short here", count=40)),
    "frame-too-long": framed(3, 2, True, frame("<13>this frame is long") + frame("<1>ok")),
    "escapes-too-long": framed(4, 1, True, frame("<1>\n\n\n\nx") + frame("<2>ok")),
    "digits-only": framed(7, 0, True, b"123"),
}
for name, data in SYSLOG.items():
    seed("syslog_framer_fuzz", name, data)


# --- daemon_config_fuzz: YAML files -------------------------------------------------------

CONFIGS = {
    "minimal.yaml": "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\n",
    "complete.yaml": """\
sources:
  - follow: [auth.log, /var/log/secure]
    state: follow.state
    from_start: true
    poll_interval: 250ms
  - listen: tcp://127.0.0.1:5140
  - stdin: true
rules:
  - name: ssh-bruteforce
    patterns_file: p
    threshold: {count: 5, window: 1m, group_by: {field_after: "from "}}
    severity: critical
    labels: {team: security}
    annotations: {summary: "SSH brute force"}
    cooldown: 5m
    resolve_after: 10m
  - name: kernel
    patterns: ["Kernel panic", oops]
    ignore_case: yes
    word: true
  - name: quiet
    patterns: heartbeat
    invert: true
    threshold: {count: 2, window: 30, group_by: source}
outputs:
  - type: jsonl
    path: alerts.jsonl
  - type: alertmanager
    url: http://127.0.0.1:9093
    resend_interval: 30s
  - type: webhook
    name: ops-hook
    url: http://127.0.0.1:8080/hook
    bearer_token_env: HOOK_TOKEN
    queue: 100
    timeout: 1.5s
server: 127.0.0.1:0
log_format: json
engine: cpu
device: "0:0"
max_line_bytes: 4096
max_connections: 10
drain_timeout: 2d
""",
    "unknown-key.yaml": "sources:\n  - stdin: true\nrules:\n  - name: a\n    patterns: [x]\n    colour: red\n",
    "bad-duration.yaml": "sources: [{stdin: true}]\nrules:\n  - name: a\n    patterns: [x]\n"
                         "    threshold: {count: 5, window: 5x}\n",
    "anchors.yaml": "base: &b {name: a, patterns: [x, y]}\nsources: [{stdin: true}]\nrules: [*b]\n",
    "duplicate-names.yaml": "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}, {name: a, patterns: [y]}]\n",
    "empty-pattern.yaml": "sources: [{stdin: true}]\nrules: [{name: a, patterns: ['']}]\n",
    "tags-and-complex-keys.yaml": "? [a, b]\n: c\nsources: !!seq [{stdin: !!bool true}]\n"
                                  "rules: [{name: !!str 1, patterns: [!!binary aGVsbG8=]}]\n",
    "multi-document.yaml": "sources: [{stdin: true}]\n---\nrules: [{name: a, patterns: [x]}]\n",
    "wrong-types.yaml": "sources: {stdin: true}\nrules: [{name: [a], patterns: {x: y}}]\nmax_line_bytes: -1\n",
    "numbers.yaml": "sources: [{stdin: true}]\nrules:\n  - name: a\n    patterns: [x]\n"
                    "    threshold: {count: 1000000, window: 0.001}\n    cooldown: 0\n    resolve_after: 1e3\n"
                    "max_line_bytes: 1073741824\nmax_connections: 1000000\n",
    "syntax-error.yaml": "sources: [{stdin: true}\nrules: [{name: a\n",
}
for name, text in CONFIGS.items():
    seed("daemon_config_fuzz", name, text)
EXAMPLES = os.path.join(os.path.dirname(ROOT), "..", "..", "examples", "daemon")
for name in ("gpufilterd.yaml", "demo.yaml", "k8s-sidecar.yaml"):
    with open(os.path.join(EXAMPLES, name), "rb") as f:
        seed("daemon_config_fuzz", "example-" + name, f.read())


# --- pcap_fuzz: synthetic captures --------------------------------------------------------

def ipv4(proto, payload, src=(10, 0, 0, 1), dst=(10, 0, 0, 2), flags_fragment=0, total=None, ihl=5):
    options = b"\x01" * ((ihl - 5) * 4)
    length = 20 + len(options) + len(payload) if total is None else total
    return struct.pack(">BBHHHBBH4B4B", 0x40 | ihl, 0, length, 1, flags_fragment, 64, proto, 0, *src, *dst) + \
        options + payload


def ipv6(next_header, payload, src=b"\x20\x01\x0d\xb8" + b"\0" * 11 + b"\1",
         dst=b"\x20\x01\x0d\xb8" + b"\0" * 11 + b"\2", declared=None):
    length = len(payload) if declared is None else declared
    return struct.pack(">IHBB", 0x60000000, length, next_header, 64) + src + dst + payload


def tcp(sport, dport, seq, ack, flags, data=b"", options=b""):
    offset = (20 + len(options)) // 4
    return struct.pack(">HHIIBBHHH", sport, dport, seq, ack, offset << 4, flags, 65535, 0, 0) + options + data


def udp(sport, dport, data, length=None):
    return struct.pack(">HHHH", sport, dport, 8 + len(data) if length is None else length, 0) + data


def ether(payload, ethertype=0x0800, vlans=()):
    head = b"\x00\x11\x22\x33\x44\x55" + b"\x66\x77\x88\x99\xaa\xbb"
    for tpid, vid in vlans:
        head += struct.pack(">HH", tpid, vid)
    return head + struct.pack(">H", ethertype) + payload


def pcap(linktype, packets, snaplen=65535, big=False, nano=False, lengths=None):
    e = ">" if big else "<"
    out = struct.pack(e + "IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)
    for i, p in enumerate(packets):
        caplen = min(len(p), snaplen)
        orig = len(p) if lengths is None else lengths[i]
        out += struct.pack(e + "IIII", 1697062455 + i, 1000 * i, caplen, orig) + p[:caplen]
    return out


def block(kind, body, big=False):
    e = ">" if big else "<"
    body += b"\0" * (-len(body) % 4)
    return struct.pack(e + "II", kind, len(body) + 12) + body + struct.pack(e + "I", len(body) + 12)


def pcapng(linktype, packets, big=False, tsresol=None):
    e = ">" if big else "<"
    out = block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1), big)
    options = b""
    if tsresol is not None:
        options = struct.pack(e + "HHB", 9, 1, tsresol) + b"\0\0\0" + struct.pack(e + "HH", 0, 0)
    out += block(1, struct.pack(e + "HHI", linktype, 0, 65535) + options, big)
    for i, p in enumerate(packets):
        out += block(6, struct.pack(e + "IIIII", 0, 0x5A5A, 1000 + i, len(p), len(p)) + p, big)
    out += block(3, struct.pack(e + "I", 4) + b"spb!", big)  # a simple packet block
    return out


C, S = (10, 0, 0, 1), (10, 0, 0, 2)
SYN, FIN, RST, PSH, ACK = 0x02, 0x01, 0x04, 0x08, 0x10
GET = b"GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n"
REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
session = [
    ether(ipv4(6, tcp(40000, 80, 1000, 0, SYN, options=b"\x02\x04\x05\xb4"))),
    ether(ipv4(6, tcp(80, 40000, 5000, 1001, SYN | ACK), S, C)),
    ether(ipv4(6, tcp(40000, 80, 1001, 5001, ACK | PSH, GET))),
    ether(ipv4(6, tcp(80, 40000, 5001 + 20, 1001 + len(GET), ACK, REPLY[20:]), S, C)),  # out of order
    ether(ipv4(6, tcp(80, 40000, 5001, 1001 + len(GET), ACK, REPLY[:25]), S, C)),       # overlaps it
    ether(ipv4(6, tcp(40000, 80, 1001, 5001, ACK | PSH, GET))),                         # retransmitted
    ether(ipv4(6, tcp(40000, 80, 1001 + len(GET), 5001 + len(REPLY), FIN | ACK))),
    ether(ipv4(6, tcp(80, 40000, 5001 + len(REPLY), 1002 + len(GET), FIN | ACK), S, C)),
]
SYSLOG_MSG = b"<13>Oct 11 22:14:15 host app: hello over udp"
CAPTURES = {
    "ethernet-tcp-session.pcap": pcap(1, session),
    "ethernet-tcp-session.pcapng": pcapng(1, session, tsresol=9),
    "ethernet-big-endian-nano.pcap": pcap(1, session[:3], big=True, nano=True),
    "pcapng-big-endian.pcapng": pcapng(1, session[2:5], big=True),
    "vlan-udp-syslog.pcap": pcap(1, [
        ether(ipv4(17, udp(5514, 514, SYSLOG_MSG)), vlans=[(0x8100, 5)]),
        ether(ipv4(17, udp(5514, 514, SYSLOG_MSG)), vlans=[(0x88a8, 7), (0x8100, 5)]),
        ether(ipv4(17, udp(53, 53, b"\x12\x34\x01\x00", length=0))),
        ether(ipv4(17, udp(53, 53, b"short", length=3))),
    ]),
    "ipv6-extension-headers.pcap": pcap(101, [
        ipv6(0, b"\x06\x00" + b"\x01\x04\0\0\0\0" + tcp(40000, 443, 7, 0, SYN)),           # hop-by-hop, TCP
        ipv6(44, b"\x11\x00\x00\x01\0\0\0\x2a" + udp(5353, 5353, b"first fragment")),       # fragment, UDP
        ipv6(44, b"\x11\x00\x00\x09\0\0\0\x2a" + b"later fragment bytes"),                  # later fragment
        ipv6(51, b"\x06\x01\0\0" + b"\0" * 8 + tcp(1, 2, 3, 4, ACK, b"after AH")),          # AH
        ipv6(6, tcp(40000, 443, 8, 0, ACK, b"jumbo"), declared=0),
        ipv6(58, b"\x80\x00\x00\x00icmp echo"),
    ]),
    "sll-ipv4-fragments.pcap": pcap(113, [
        b"\0\0\0\1\0\6" + b"\0" * 8 + b"\x08\x00" + ipv4(17, udp(9, 9, b"A" * 16), flags_fragment=0x2000),
        b"\0\0\0\1\0\6" + b"\0" * 8 + b"\x08\x00" + ipv4(17, b"B" * 16, flags_fragment=0x0003),
        b"\0\0\0\1\0\6" + b"\0" * 8 + b"\x08\x00" + ipv4(6, tcp(1, 2, 3, 4, ACK, b"options"), ihl=7),
    ]),
    "sll2-tcp.pcap": pcap(276, [
        b"\x08\x00\0\0\0\0\0\2\0\1\0\6" + b"\0" * 8 + ipv4(6, tcp(40000, 80, 1, 0, SYN)),
        b"\x86\xdd\0\0\0\0\0\2\0\1\0\6" + b"\0" * 8 + ipv6(6, tcp(40000, 80, 2, 0, ACK, b"v6 data")),
    ]),
    "null-and-loop.pcap": pcap(0, [
        struct.pack("<I", 2) + ipv4(6, tcp(1, 2, 3, 4, ACK, b"loopback v4")),
        struct.pack(">I", 30) + ipv6(17, udp(1, 2, b"loopback v6")),
        struct.pack("<I", 99) + b"unknown family",
    ]),
    "loop-big-endian.pcap": pcap(108, [struct.pack(">I", 2) + ipv4(17, udp(7, 7, b"DLT_LOOP"))]),
    "raw-ipv4-linktype-228.pcap": pcap(228, [ipv4(6, tcp(5, 6, 7, 8, ACK | PSH, b"raw ipv4"))]),
    "raw-ipv6-linktype-229.pcap": pcap(229, [ipv6(17, udp(5, 6, b"raw ipv6"))]),
    "snaplen-cut.pcap": pcap(1, session[2:4] + [ether(ipv4(6, tcp(40000, 80, 9, 9, ACK, b"x" * 200)))],
                             snaplen=60),
    "lying-lengths.pcap": pcap(1, [
        ether(ipv4(6, tcp(1, 2, 3, 4, ACK, b"ip total too big"), total=1500)),
        ether(ipv4(6, tcp(1, 2, 3, 4, ACK, b"ip total too small"), total=10)),
        ether(ipv4(6, b"\0" * 12 + b"\x10\x10" + b"\0" * 6)),  # TCP data offset 1 (below 20 bytes)
        ether(ipv4(6, tcp(1, 2, 3, 4, ACK, b"len 0 (TSO)"), total=0)),
    ], lengths=[9000, 10, 0, 70]),
    "unknown-linktype.pcap": pcap(147, [b"user link type payload"]),
    "truncated-record.pcap": pcap(1, session[:2])[:-10],
    "truncated-header.pcap": pcap(1, [])[:20],
    "huge-caplen.pcap": pcap(1, session[:1]) + struct.pack("<IIII", 1, 0, 0xFFFFFFF0, 0xFFFFFFF0) + b"tail",
    "truncated.pcapng": pcapng(1, session[:3])[:-30],
    "pcapng-bad-block-length.pcapng": pcapng(1, session[:1]) + struct.pack("<II", 6, 7) + b"\0" * 8,
    "not-a-capture.txt": b"this is not a capture file\n",
}
for name, data in CAPTURES.items():
    seed("pcap_fuzz", name, data)


# --- tcp_reassembly_fuzz: a config byte, two initial sequence numbers, 6-byte segments ---

def reassembly(pending_sel, flows_sel, idle_sel, isn_client, isn_server, segments):
    out = bytes([pending_sel | flows_sel << 3 | idle_sel << 6]) + struct.pack(">II", isn_client, isn_server)
    for seg in segments:
        c, distance, length, dt = seg[:4]
        extra = seg[4] if len(seg) > 4 else 0
        garbage = seg[5] if len(seg) > 5 else b""
        out += bytes([c]) + struct.pack(">h", distance) + bytes([length, dt & 0xff, extra]) + garbage
    return out


R, Sy, Fi, Rs, Ak, G = 4, 8, 16, 32, 64, 128  # reply, SYN, FIN, RST, ACK, garbage
EXPIRE, V6, LONG_LEN, OFFSET_PAST = 1, 2, 4, 8
TCP_SEEDS = {
    "in-order": reassembly(6, 4, 3, 1000, 5000, [
        (Sy, 0, 0, 0), (R | Sy | Ak, 0, 0, 0), (Ak, 1, 20, 1), (R | Ak, 1, 30, 0), (Ak, 21, 10, 0),
        (Fi | Ak, 31, 0, 1), (R | Fi | Ak, 31, 0, 0), (Ak, 32, 0, 0)]),
    "out-of-order-overlap": reassembly(6, 4, 3, 1000, 5000, [
        (Sy, 0, 0, 0), (Ak, 41, 20, 0), (Ak, 21, 15, 0), (Ak, 1, 40, 0), (Ak, 11, 40, 0), (Ak, 61, 5, 0)]),
    "wraparound": reassembly(6, 4, 3, 0xFFFFFFF0, 0x7FFFFFFF, [
        (Sy, 0, 0, 0), (Ak, 1, 30, 0), (Ak, 31, 30, 0), (R | Ak, 0, 40, 0), (R | Ak, 40, 40, 0)]),
    "gap-past-limit": reassembly(2, 4, 3, 1, 2, [
        (Sy, 0, 0, 0), (Ak, 100, 10, 0), (Ak, 200, 10, 0), (Ak, 300, 10, 0), (Ak, 1, 99, 0)]),
    "many-pieces": reassembly(5, 4, 3, 77, 88, [(Sy, 0, 0, 0)] + [(Ak, 40 - 2 * i, 1, 0) for i in range(20)]
                              + [(Ak, 1, 1, 0)]),
    "flow-limit-and-expire": reassembly(6, 0, 1, 10, 20, [
        (Sy, 0, 0, 0), (Ak, 1, 10, 0), (1 | Sy, 0, 0, 1), (1 | Ak, 1, 10, 0), (2 | Ak, 5, 10, 5, EXPIRE),
        (Ak, 11, 10, -3), (3 | Ak | R, 7, 10, 0), (Ak, 21, 10, 100, EXPIRE)]),
    "rst-then-new-syn": reassembly(6, 4, 2, 500, 600, [
        (Sy, 0, 0, 0), (Ak, 1, 10, 0), (Rs | Ak, 11, 0, 0), (Ak, 11, 5, 0), (Sy, 100, 0, 0), (Ak, 101, 8, 0),
        (Fi | Ak, 109, 0, 0), (R | Fi | Ak, 3, 0, 0), (R | Ak, 4, 0, 20)]),
    "garbage-retransmission": reassembly(6, 4, 3, 1000, 5000, [
        (Sy, 0, 0, 0), (Ak, 1, 10, 0), (G | Ak, 5, 8, 0, 0, b"GARBAGE!"), (Ak, 11, 10, 0)]),
    "lying-lengths-and-v6": reassembly(6, 4, 3, 1000, 5000, [
        (Sy, 0, 0, 0, V6), (Ak, 1, 10, 0, V6 | LONG_LEN), (Ak, 11, 10, 0, V6 | OFFSET_PAST),
        (Ak, 11, 10, 0, V6), (Sy, 0, 0, 0), (Ak, 1, 4, 0, LONG_LEN)]),
    "no-syn-seen": reassembly(6, 4, 3, 1000, 5000, [(Ak, 50, 10, 0), (Ak, 40, 20, 0), (Ak, 60, 10, 0),
                                                     (R | Ak, 7, 9, 0)]),
    "idle-timeout-zero": reassembly(6, 4, 0, 1000, 5000, [(Sy, 0, 0, 0), (Ak, 1, 5, 1), (Ak, 6, 5, 1),
                                                          (Ak, 11, 5, -1)]),
}
for name, data in TCP_SEEDS.items():
    seed("tcp_reassembly_fuzz", name, data)


# --- Dictionaries (libFuzzer -dict, used by scripts/fuzz.sh): the words a target's parser
# looks for, which random mutation would take long to spell.

def dictionary(words):
    def quoted(w):
        return '"' + "".join(c if 0x20 <= ord(c) < 0x7f and c not in '"\\' else "\\x%02x" % ord(c)
                             for c in w) + '"'
    return "".join(quoted(w) + "\n" for w in words)


OPTIONS_CPP = os.path.join(os.path.dirname(ROOT), "..", "..", "cli", "options.cpp")
with open(OPTIONS_CPP) as f:
    long_options = re.findall(r'\{"([a-z-]+)", (no|required|optional)_argument', f.read())
CLI_WORDS = ["--" + name + ("=" if kind != "no" else "") for name, kind in long_options]
CLI_WORDS += ["--", "-", "\0-", "tcp://", "udp://", "unix:", "always", "never", "auto", "binary", "text",
              "without-match", "gpu", "cpu", "4K", "1M", "2G", "\\x", "de:ad"]
DICTS = {
    "cli_options_fuzz": CLI_WORDS,
    "daemon_config_fuzz": [
        "sources:", "rules:", "outputs:", "server:", "generator_url:", "log_format:", "engine:", "device:",
        "max_line_bytes:", "max_connections:", "drain_timeout:", "follow:", "state:", "from_start:",
        "poll_interval:", "listen:", "stdin:", "name:", "patterns:", "patterns_file:", "ignore_case:", "word:",
        "invert:", "threshold:", "count:", "window:", "group_by:", "field_after:", "severity:", "labels:",
        "annotations:", "cooldown:", "resolve_after:", "type:", "path:", "url:", "resend_interval:", "timeout:",
        "bearer_token_env:", "queue:", "jsonl", "alertmanager", "webhook", "source", "none", "true", "false",
        "ms", "s", "m", "h", "d", "1e3", "- ", "{", "}", "[", "]", "&a", "*a", "!!", "---", "? ", "tcp:__127.0.0.1:1",
    ],
    "syslog_framer_fuzz": [" <", "<13>", "999999999 <", "1 <", "\n", "\r\n"],
}


def main():
    directory = os.path.join(os.path.dirname(ROOT), "dict")
    os.makedirs(directory, exist_ok=True)
    for target, words in sorted(DICTS.items()):
        with open(os.path.join(directory, target + ".dict"), "w") as f:
            f.write("# libFuzzer dictionary, written by tests/fuzz/make_seeds.py\n" + dictionary(words))
    for target, seeds in sorted(written.items()):
        directory = os.path.join(ROOT, target)
        if os.path.isdir(directory):
            shutil.rmtree(directory)
        os.makedirs(directory)
        for name, data in sorted(seeds.items()):
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)
        print(f"{target}: {len(seeds)} seeds")


if __name__ == "__main__":
    sys.exit(main())
