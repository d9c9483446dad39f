"""The bench's cases beside the pattern sets (bench/run.py --cases), each run for every tool
in the same run as the sets:

- first-line: milliseconds from fork to the first selected byte on a pipe, one literal
  that first occurs about 1 MB into the corpus, every tool with --line-buffered (what a user waits for before output starts;
  a GPU engine's start-up shows here).
- files500x20K, files500x512K: 500 files cut from the corpus at line boundaries, all
  named on one command line, 100 literals (one process start, hundreds of opens).
- pipe: the corpus on standard input through a pipe (`cat CORPUS | tool -c -F -f
  patterns-100.txt`), timed from the tool's start (cat's just before) to its exit: what a
  user's `cat`, `zcat` or `tail` in front of the tool costs it.
- capture: a capture made of the sample captures' packets (gpufilter-gen-pcap, 256 MB or
  the corpus size if smaller), the frames
  holding "google": `gpufilter -c --pcap` beside `tshark -r -Y 'frame contains "google"'`.

Each case checks that the tools agree (lines, or frames for the capture).
"""
import hashlib
import os
import selectors
import signal
import subprocess
import time
from pathlib import Path

CASES = ["first-line", "files500x20K", "files500x512K", "pipe", "capture"]
FIRST_LINE_AT = 1 << 20          # the literal of first-line first occurs past this offset
CAPTURE_BYTES = 256 << 20


def _best(runs):
    ok = [r for r in runs if r["status"] == "ok"]
    return min(ok, key=lambda r: r["seconds"]) if ok else runs[-1]


def _time_to_first_byte(cmd, env, timeout):
    """Seconds from fork to the first byte on stdout (a pipe); the process is then killed."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return {"status": "timeout", "seconds": timeout}
        first = os.read(proc.stdout.fileno(), 1)
        seconds = time.perf_counter() - start
        if not first:
            return {"status": "failed", "seconds": seconds, "message": "no output"}
        return {"status": "ok", "seconds": seconds}
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _run(run_once, cmd, timeout, out_dir):
    """Whole process through bench/run.py's run_once (stdout to out_dir/stdout), with the
    output's line count and the hash of its sorted lines (rg orders files as it likes)."""
    r = run_once(cmd, out_dir, timeout)
    if r["status"] == "ok":
        data = (out_dir / "stdout").read_bytes()
        r["lines"] = data.count(b"\n")
        r["sha1"] = hashlib.sha1(b"".join(sorted(data.splitlines(True)))).hexdigest()
        r["first_word"] = data.split(maxsplit=1)[0].decode("latin-1") if data.strip() else ""
    return r


def _first_line_literal(corpus):
    """A token of the first line past FIRST_LINE_AT that occurs nowhere before it."""
    with open(corpus, "rb") as f:
        head = f.read(FIRST_LINE_AT + (1 << 16))
    start = head.find(b"\n", FIRST_LINE_AT) + 1
    line = head[start:head.find(b"\n", start)]
    for length in (24, 32, 48, 64, len(line)):
        literal = line[-length:].strip()
        if literal and b"\n" not in literal and head.find(literal) == start + line.rfind(literal):
            return literal.decode("latin-1")
    return line.decode("latin-1")


def _cut_files(corpus, folder, count, size):
    """`count` files of about `size` bytes each, consecutive line-aligned pieces of the corpus."""
    marker = folder / ".done"
    if marker.is_file() and marker.read_text() == f"{count} {size}":
        return sorted(folder.glob("f*.log"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("f*.log"):
        old.unlink()
    files = []
    with open(corpus, "rb") as f:
        for i in range(count):
            piece = f.read(size)
            if len(piece) < size:  # a corpus smaller than the files: from its start again
                f.seek(0)
                piece = f.read(size)
            piece += f.readline()
            path = folder / f"f{i:03d}.log"
            path.write_bytes(piece)
            files.append(path)
    marker.write_text(f"{count} {size}")
    return files


def _tools(a):
    return [t for t in ("gpufilter", "grep", "rg") if t in a.tools.split(",")]


def _gpufilter(a):
    return [a.gpufilter] + ([f"--device={a.device}"] if a.device else []) + (
        [f"--engine={a.engine}"] if a.engine else [])


def _best_runs(a, commands, run_once, out_dir, size):
    """Each tool's best of --repeat whole runs of its command, with GB/s over `size` bytes."""
    tools = {}
    for t in _tools(a):
        tools[t] = _best([_run(run_once, commands[t], a.timeout, out_dir) for _ in range(a.repeat)])
        if tools[t]["status"] == "ok":
            tools[t]["gbps"] = size / tools[t]["seconds"] / 1e9
    return tools


def first_line_case(a, corpus, env, out_dir):
    literal = _first_line_literal(corpus)
    # --line-buffered: a line is written when it is found, not when a buffer fills (or the
    # input ends: without it, every tool's "first line" here was its whole run).
    commands = {"gpufilter": _gpufilter(a) + ["--line-buffered", "-F", "-e", literal, corpus],
                "grep": [a.grep, "--line-buffered", "-F", "-e", literal, corpus],
                "rg": [a.rg, "--line-buffered", "-F", "--no-config", "--no-line-number", "--color", "never", "-e",
                       literal, corpus]}
    tools = {}
    for t in _tools(a):
        tools[t] = _best([_time_to_first_byte(commands[t], env, a.timeout) for _ in range(max(3, a.repeat))])
    return {"what": f"ms to the first selected line, literal {literal!r} first at about {FIRST_LINE_AT >> 20} MiB",
            "unit": "ms", "tools": tools, "problems": []}


def files_case(a, corpus, run_once, out_dir, size):
    files = _cut_files(corpus, a.work / f"files500x{size >> 10}K", 500, size)
    total = sum(f.stat().st_size for f in files)
    patterns = a.work / "patterns-100.txt"
    commands = {"gpufilter": _gpufilter(a) + ["-h", "-F", "-f", patterns] + files,
                "grep": [a.grep, "-h", "-F", "-f", patterns] + files,
                "rg": [a.rg, "-F", "--no-config", "--no-filename", "--no-line-number", "--color", "never",
                       "-f", patterns] + files}
    tools = _best_runs(a, commands, run_once, out_dir, total)
    return {"what": f"500 files of {size >> 10} KiB ({total / 1e6:.0f} MB), 100 literals", "unit": "s",
            "tools": tools, "problems": _disagreements(tools, "lines")}


def _from_cat(run_once, corpus):
    """run_once with `cat corpus |` as the command's standard input."""
    def run(cmd, out_dir, timeout):
        cat = subprocess.Popen(["cat", str(corpus)], stdout=subprocess.PIPE)
        try:
            return run_once(cmd, out_dir, timeout, stdin=cat.stdout)
        finally:
            cat.stdout.close()  # the last reader gone: a cat still writing (a timeout) ends
            cat.wait()
    return run


def pipe_case(a, corpus, run_once, out_dir):
    patterns = a.work / "patterns-100.txt"
    commands = {"gpufilter": _gpufilter(a) + ["-c", "-F", "-f", patterns],
                "grep": [a.grep, "-c", "-F", "-f", patterns],
                "rg": [a.rg, "-c", "-F", "--no-config", "-f", patterns]}
    size = Path(corpus).stat().st_size
    tools = _best_runs(a, commands, _from_cat(run_once, corpus), out_dir, size)
    return {"what": f"`cat` of the corpus ({size / 1e6:.0f} MB) into `-c`, 100 literals", "unit": "s",
            "tools": tools, "problems": _disagreements(tools, "lines")}


def capture_case(a, run_once, out_dir):
    samples = a.loghub.parent / "pcap"
    gen, tshark = a.gen_pcap, a.tshark
    if gen is None or not gen.is_file() or not samples.is_dir():
        return {"what": "capture", "unit": "s", "tools": {}, "problems": [],
                "skipped": f"needs {gen} and {samples}"}
    wanted = min(CAPTURE_BYTES, a.size)
    capture = a.work / f"capture-{wanted}-connections.pcap"  # each copy new connections (gen-pcap, 2026-12-01)
    if not capture.is_file():
        inputs = sorted(p for p in samples.iterdir() if p.suffix in (".cap", ".pcap", ".trace"))
        r = subprocess.run([str(gen), "--out", str(capture), "--size", str(wanted)] + [str(p) for p in inputs],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return {"what": "capture", "unit": "s", "tools": {}, "problems": [f"gpufilter-gen-pcap: {r.stderr.strip()}"]}
    with open(capture, "rb") as f:
        while f.read(16 << 20):
            pass
    size = capture.stat().st_size
    tools = {}
    tools["gpufilter"] = _best([_run(run_once, _gpufilter(a) + ["-c", "--pcap", capture, "google"], a.timeout,
                                     out_dir) for _ in range(a.repeat)])
    if tshark:
        tools["tshark"] = _best([_run(run_once, [tshark, "-r", capture, "-Y", 'frame contains "google"', "-T",
                                                 "fields", "-e", "frame.number"], a.timeout, out_dir)
                                 for _ in range(a.repeat)])
    for r in tools.values():
        if r["status"] == "ok":
            r["gbps"] = size / r["seconds"] / 1e9
    problems = []
    g, t = tools.get("gpufilter"), tools.get("tshark")
    if g and t and g["status"] == t["status"] == "ok" and g["first_word"] != str(t["lines"]):
        problems.append(f"capture: gpufilter counts {g['first_word']} frames, tshark {t['lines']:,}")
    return {"what": f"capture of {size / 1e6:.0f} MB, frames holding \"google\"", "unit": "s", "tools": tools,
            "problems": problems}


def _disagreements(tools, key):
    done = [(t, r) for t, r in tools.items() if r["status"] == "ok"]
    return [f"{t} selects {r['lines']:,} lines, {done[0][0]} {done[0][1]['lines']:,}"
            for t, r in done[1:] if (r["lines"], r["sha1"]) != (done[0][1]["lines"], done[0][1]["sha1"])]


def run_case(a, name, corpus, env, out_dir, run_once):
    """`run_once(cmd, out_dir, timeout)`: bench/run.py's whole-process run."""
    if name == "first-line":
        return first_line_case(a, corpus, env, out_dir)
    if name.startswith("files500x"):
        return files_case(a, corpus, run_once, out_dir, int(name[len("files500x"):-1]) << 10)
    if name == "pipe":
        return pipe_case(a, corpus, run_once, out_dir)
    return capture_case(a, run_once, out_dir)


def table(cases):
    head = ["case", "gpufilter", "grep", "rg", "tshark", "gpufilter / best peer"]
    rows = [head, ["---"] * len(head)]
    for name, c in cases.items():
        cells = []
        for t in ("gpufilter", "grep", "rg", "tshark"):
            r = c["tools"].get(t)
            if r is None:
                cells.append("–")
            elif r["status"] != "ok":
                cells.append(r["status"])
            elif c["unit"] == "ms":
                cells.append(f"{r['seconds'] * 1e3:.1f} ms")
            else:
                cells.append(f"{r['seconds']:.3f} s ({r['gbps']:.3g} GB/s)")
        g = c["tools"].get("gpufilter")
        peers = [r["seconds"] for t, r in c["tools"].items() if t != "gpufilter" and r["status"] == "ok"]
        ratio = f"{min(peers) / g['seconds']:.3g}× as fast" if g and g["status"] == "ok" and peers else "–"
        rows.append([f"{name}: {c['what']}" + (f" (skipped: {c['skipped']})" if "skipped" in c else "")] + cells
                    + [ratio])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)
