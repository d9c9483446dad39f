#!/usr/bin/env python3
"""The gpufilter benchmark in one command (see bench/README.md).

Generates a corpus from the Loghub lines and the pattern sets (bench/gen_corpus.cpp),
reads the corpus once into the page cache, then runs on it, set by set: gpufilter,
`LC_ALL=C grep -F`, `rg -F` and the Hyperscan reference (bench/hs_count.cpp); the regex sets
(bench/regex_sets.py, opt-in) with `-E`, rg without -F and the reference's --regex. It checks
that every tool selects the same lines, prints a markdown table of whole-process GB/s and
gpufilter's ratios, gpufilter's own figures (`--stats`) and the kernel-only throughput
(gpufilter-kernel-bench), and writes WORK/results.json and WORK/throughput.png.
Exit status 1 when tools disagree or one of gpufilter's own programs fails.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cases as bench_cases  # noqa: E402  (bench/cases.py)
import regex_sets  # noqa: E402  (bench/regex_sets.py)

REPO = Path(__file__).resolve().parent.parent
LITERAL_SETS = ["1", "10", "100", "1000", "10000", "100000", "1000000"]
GEN_SETS = LITERAL_SETS + ["dense", "icase"]        # written by gpufilter-gen-corpus
REGEX_SETS = regex_sets.REGEX_SETS                 # written here, run with -E
ALL_SETS = GEN_SETS + REGEX_SETS
DEFAULT_SETS = GEN_SETS                            # the regex sets are opt-in (slow in grep and rg)
REGEX_STATS = ["regex_candidates", "regex_confirmed", "regex_full_scan_lines"]
TOOLS = ["gpufilter", "grep", "rg", "hs"]          # run in this order, set by set
PRINTING = ["grep", "rg", "gpufilter"]             # tools whose output is compared, reference first
LABEL = {"gpufilter": "gpufilter", "grep": "grep", "rg": "rg", "hs": "hyperscan"}
READ_BLOCK = 16 << 20
KERNEL_BYTES = 1 << 30                             # data resident on the device for the kernel bench
STATS_PREFIX = "gpufilter-stats: "
HS_PREFIX = "gpufilter-hs-count: "
ENV = dict(os.environ, LC_ALL="C")


def parse_size(text):
    """'256M' -> 268435456: a whole number with an optional K, M or G (powers of 1024)."""
    m = re.fullmatch(r"(\d+)([KMGkmg]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (a number with K, M or G)")
    value = int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    if value < 1024:
        raise argparse.ArgumentTypeError(f"size '{text}' is below 1K")
    return value


def parse_sets(text):
    sets = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in sets if s not in ALL_SETS]
    if unknown or not sets:
        raise argparse.ArgumentTypeError(f"unknown set(s) {unknown}; choose from {','.join(ALL_SETS)}")
    return sets


def parse_cases(text):
    if text == "none":
        return []
    names = [c for c in text.split(",") if c]
    unknown = [c for c in names if c not in bench_cases.CASES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown cases {','.join(unknown)}; from {','.join(bench_cases.CASES)}")
    return names


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="Tool paths: the flag, else the environment variable named in its help.")
    p.add_argument("--size", type=parse_size, default=parse_size("256M"), help="corpus size (default 256M)")
    p.add_argument("--seed", type=int, default=1, help="corpus and pattern seed (default 1)")
    p.add_argument("--work", type=Path, help="work folder (default BUILD/bench-work)")
    p.add_argument("--build", type=Path, default=REPO / "build", help="build folder (default build)")
    p.add_argument("--sets", type=parse_sets, default=DEFAULT_SETS,
                   help=f"comma-separated, from {','.join(ALL_SETS)} (default: {','.join(DEFAULT_SETS)})")
    p.add_argument("--timeout", type=float, default=120, help="seconds per tool run (default 120)")
    p.add_argument("--threads", type=int, help="Hyperscan and corpus threads (default: all cores)")
    p.add_argument("--device", help="gpufilter --device SPEC, also for the kernel bench")
    p.add_argument("--repeat", type=int, default=1, help="runs per tool and set; the best counts")
    p.add_argument("--hs-cache", choices=["cold", "warm"], default="cold",
                   help="cold (default): gpufilter compiles its Hyperscan databases in every run, as the "
                        "reference does; warm: from its cache (GPUFILTER_CACHE_DIR in the work folder), "
                        "filled by an untimed run first")
    p.add_argument("--engine", choices=["auto", "cpu", "gpu", "both"], help="gpufilter --engine (default: its own, auto)")
    p.add_argument("--tools", default=",".join(TOOLS),
                   help=f"comma-separated tools to run, from {','.join(TOOLS)} (default: all); the others are "
                        "marked skipped, e.g. a second --engine pass without the peers")
    p.add_argument("--cases", type=parse_cases, default=bench_cases.CASES,
                   help=f"comma-separated, from {','.join(bench_cases.CASES)}, or none (default: all; "
                        "see bench/cases.py)")
    p.add_argument("--loghub", type=Path, help="Loghub logs (default $GPUFILTER_CORPUS_DIR/loghub, "
                   "else ../shared/corpus/loghub)")
    p.add_argument("--plot-only", action="store_true", help="only redraw WORK/throughput.png from WORK/results.json")
    tools = {"gpufilter": ("GPUFILTER_BIN", "BUILD/gpufilter"),
             "grep": ("GPUFILTER_GREP", "/bin/grep"),
             "rg": ("GPUFILTER_RG", "rg on PATH"),
             "hs-count": ("GPUFILTER_HS_COUNT", "BUILD/bench/gpufilter-hs-count"),
             "kernel-bench": ("GPUFILTER_KERNEL_BENCH", "BUILD/bench/gpufilter-kernel-bench; none: not run"),
             "gen-corpus": ("GPUFILTER_GEN_CORPUS", "BUILD/bench/gpufilter-gen-corpus"),
             "gen-pcap": ("GPUFILTER_GEN_PCAP", "BUILD/bench/gpufilter-gen-pcap; none: no capture case"),
             "tshark": ("GPUFILTER_TSHARK", "tshark on PATH; none: the capture case without it"),
             "gnuplot": ("GPUFILTER_GNUPLOT", "gnuplot on PATH")}
    for name, (env, default) in tools.items():
        p.add_argument(f"--{name}", type=Path, help=f"${env}, else {default}")
    a = p.parse_args(argv)
    a.work = (a.work or a.build / "bench-work").resolve()
    if a.loghub is None:
        corpus = os.environ.get("GPUFILTER_CORPUS_DIR")
        a.loghub = Path(corpus) / "loghub" if corpus else REPO.parent / "shared" / "corpus" / "loghub"

    def tool(name, default):
        value = getattr(a, name.replace("-", "_")) or os.environ.get(tools[name][0]) or default
        if str(value) == "none":
            return None
        if value and "/" not in str(value):
            value = shutil.which(value)  # a bare name: looked up on PATH
        return Path(value).resolve() if value else None

    a.gpufilter = tool("gpufilter", a.build / "gpufilter")
    a.grep = tool("grep", "/bin/grep")
    a.rg = tool("rg", shutil.which("rg"))
    a.hs_count = tool("hs-count", a.build / "bench" / "gpufilter-hs-count")
    a.kernel_bench = tool("kernel-bench", a.build / "bench" / "gpufilter-kernel-bench")
    a.gen_corpus = tool("gen-corpus", a.build / "bench" / "gpufilter-gen-corpus")
    a.gen_pcap = tool("gen-pcap", a.build / "bench" / "gpufilter-gen-pcap")
    a.tshark = tool("tshark", shutil.which("tshark"))
    a.gnuplot = tool("gnuplot", shutil.which("gnuplot"))
    return a


def fail(message):
    print(f"bench: {message}", file=sys.stderr)
    sys.exit(2)


def require(path, what, flag):
    if path is None or not (path.is_file() and os.access(path, os.X_OK)):
        fail(f"{what} not found at {path or '(not on PATH)'}; build it or pass {flag}")


def first_line(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    return ((r.stdout or r.stderr).splitlines() or [""])[0]


def check_tools(a):
    """Versions of the tools, and whether gpufilter takes --stats yet."""
    require(a.gpufilter, "gpufilter", "--gpufilter")
    require(a.grep, "grep", "--grep")
    require(a.rg, "ripgrep", "--rg")
    require(a.hs_count, "gpufilter-hs-count", "--hs-count")
    require(a.gen_corpus, "gpufilter-gen-corpus", "--gen-corpus")
    versions = {"gpufilter": first_line([a.gpufilter, "--version"]), "grep": first_line([a.grep, "--version"]),
                "rg": first_line([a.rg, "--version"]),
                "hs": "Hyperscan (hs_compile_lit_multi; hs_compile_multi for the regex sets)"}
    if "GNU grep" not in versions["grep"]:
        fail(f"{a.grep} is not GNU grep ({versions['grep']!r}); pass --grep")
    probe = subprocess.run([a.gpufilter, "--stats", "-c", "-e", "x", "/dev/null"],
                           capture_output=True, text=True, env=ENV)
    stats = "unrecognized option" not in probe.stderr
    if not stats:
        print("bench: gpufilter does not take --stats yet: its own figures read n/a", file=sys.stderr)
    return versions, stats


def ensure_corpus(a):
    """The corpus and pattern files in WORK, generated unless present with this size and seed."""
    meta_path = a.work / "corpus.json"
    corpus = a.work / "corpus.log"
    files = [corpus] + [a.work / f"patterns-{s}.txt" for s in GEN_SETS]
    if meta_path.is_file() and all(f.is_file() for f in files):
        meta = json.loads(meta_path.read_text())
        if meta.get("bytes") == a.size and meta.get("seed") == a.seed and corpus.stat().st_size == a.size:
            print(f"corpus: {corpus} ({a.size / 1e9:.3g} GB, {meta['lines']:,} lines) already there")
            return meta
    a.work.mkdir(parents=True, exist_ok=True)
    cmd = [a.gen_corpus, "--loghub", a.loghub, "--size", str(a.size), "--out", a.work, "--seed", str(a.seed)]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"gpufilter-gen-corpus failed: {r.stderr.strip()}")
    meta = json.loads(r.stdout)
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    print(f"corpus: {corpus} ({a.size / 1e9:.3g} GB, {meta['lines']:,} lines) generated in {meta['seconds']:.1f} s; "
          f"dense set: {meta['dense_source_line_fraction']:.0%} of the source lines")
    return meta


def warm(path):
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(READ_BLOCK):
            pass
    return time.perf_counter() - start


def digest(path):
    """Line count and SHA-1 of a tool's output."""
    h, lines = hashlib.sha1(), 0
    with open(path, "rb", buffering=0) as f:
        while block := f.read(READ_BLOCK):
            h.update(block)
            lines += block.count(b"\n")
    return lines, h.hexdigest()


def output_dir(work, corpus_bytes):
    """/dev/shm when it holds a whole corpus of output (the dense set), else WORK."""
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free > corpus_bytes * 1.5:
        return Path(tempfile.mkdtemp(prefix="gpufilter-bench-", dir=shm))
    return Path(tempfile.mkdtemp(prefix="out-", dir=work))


def command(a, tool, patterns, icase, corpus, regex=False):
    """A tool's command line; `regex`: the patterns are EREs (grep -E, rg without -F, hs --regex)."""
    i = ["-i"] if icase else []
    if tool == "gpufilter":
        return ([a.gpufilter] + (["--stats"] if a.stats else []) + ([f"--device={a.device}"] if a.device else [])
                + ([f"--engine={a.engine}"] if a.engine else [])
                + (["-E"] if regex else ["-F"]) + i + ["-f", patterns, corpus])
    if tool == "grep":
        return [a.grep, "-E" if regex else "-F"] + i + ["-f", patterns, corpus]
    if tool == "rg":
        return [a.rg] + ([] if regex else ["-F"]) + ["--no-config", "--no-line-number", "--no-filename", "--color",
                                                     "never"] + i + ["-f", patterns, corpus]
    return [a.hs_count, "--compile-ms"] + (["--regex"] if regex else []) + (
        ["--threads", str(a.threads)] if a.threads else []) + i + ["-f", patterns, corpus]


def run_once(cmd, out_dir, timeout, stdin=None):
    """One whole-process run: wall seconds from fork to exit, with stdout to a file (and
    standard input from `stdin`, a pipe's end, where given)."""
    out, err = out_dir / "stdout", out_dir / "stderr"
    with open(out, "wb") as o, open(err, "wb") as e:
        start = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], stdin=stdin, stdout=o, stderr=e, env=ENV)
        # A blocking wait with a timer that kills: Popen.wait(timeout) polls, adding up to 50 ms.
        killed = threading.Event()
        timer = threading.Timer(timeout, lambda: (killed.set(), proc.kill()))
        timer.start()
        rc = proc.wait()
        seconds = time.perf_counter() - start
        timer.cancel()
    if killed.is_set():
        return {"status": "timeout", "seconds": timeout}
    stderr = err.read_text(errors="replace")
    if rc not in (0, 1):
        message = [ln for ln in stderr.splitlines() if not ln.startswith((STATS_PREFIX, HS_PREFIX))]
        return {"status": "failed", "seconds": seconds, "message": f"exit {rc}: " + " | ".join(message[-3:])}
    run = {"status": "ok", "seconds": seconds, "rc": rc}
    for line in stderr.splitlines():
        for prefix in (STATS_PREFIX, HS_PREFIX):
            if line.startswith(prefix):
                run["stats"] = json.loads(line[len(prefix):])
    return run


def run_tool(a, tool, patterns, icase, corpus, out_dir, regex=False):
    """Best of --repeat runs, each checked: lines and hash (printing tools) or the count (hs)."""
    best, seen = None, None
    if tool == "gpufilter" and a.hs_cache == "warm":
        run_once(command(a, tool, patterns, icase, corpus, regex), out_dir, a.timeout)
        (out_dir / "stdout").unlink(missing_ok=True)
    for _ in range(a.repeat):
        run = run_once(command(a, tool, patterns, icase, corpus, regex), out_dir, a.timeout)
        if run["status"] == "ok":
            stdout = out_dir / "stdout"
            if tool == "hs":
                run["lines"], run["sha1"] = int(stdout.read_text().split()[0]), None
            else:
                run["lines"], run["sha1"] = digest(stdout)
            if seen and seen != (run["lines"], run["sha1"]):
                run = {"status": "failed", "seconds": run["seconds"], "message": "repeated runs differ"}
            seen = seen or (run.get("lines"), run.get("sha1"))
        (out_dir / "stdout").unlink(missing_ok=True)
        if best is None or run["status"] != "ok" or run["seconds"] < best["seconds"]:
            best = run
        if run["status"] != "ok":
            break
    best["gbps"] = a.size / best["seconds"] / 1e9
    return best


def kernel_bench(a, patterns, icase, corpus):
    if a.kernel_bench is None or not a.kernel_bench.is_file():
        return {"status": "n/a"}
    # The kernel bench takes one device: the first of a list, a GPU for "all".
    one = (a.device or "").split(",")[0]
    one = "gpu" if one == "all" else one
    cmd = [a.kernel_bench] + ([f"--device={one}"] if one else []) + (["-i"] if icase else []) + [
        "--bytes", str(min(a.size, KERNEL_BYTES)), "-f", patterns, corpus]
    try:
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=a.timeout, env=ENV)
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    if r.returncode != 0:
        return {"status": "failed", "message": f"exit {r.returncode}: {r.stderr.strip()[-300:]}"}
    try:
        return {"status": "ok", **json.loads(r.stdout.strip().splitlines()[-1])}
    except (ValueError, IndexError):
        return {"status": "failed", "message": f"no JSON line in its output: {r.stdout[-300:]!r}"}


def run_set(a, name, corpus, out_dir, slow):
    """Every tool on one pattern set, then the kernel bench. `slow` maps a tool to the fewest
    literals it timed out on: it is not run on larger literal sets (it would time out again)."""
    patterns = a.work / f"patterns-{name}.txt"
    icase = name == "icase"
    regex = name in REGEX_SETS
    tools = {}
    for tool in TOOLS:
        if tool not in a.tools.split(","):
            r = {"status": "skipped", "seconds": None, "gbps": None, "message": "not asked for (--tools)"}
        elif name in LITERAL_SETS and slow.get(tool, math.inf) < int(name):
            r = {"status": "skipped", "seconds": None, "gbps": None, "message": f"timed out on set {slow[tool]}"}
        else:
            r = run_tool(a, tool, patterns, icase, corpus, out_dir, regex)
            if r["status"] == "timeout" and name in LITERAL_SETS:
                slow[tool] = min(slow.get(tool, math.inf), int(name))
        tools[tool] = r
        seconds = f"{r['seconds']:8.3f} s" if r["seconds"] is not None else " " * 10
        print(f"  set {name:>7} {LABEL[tool]:>9}: {r['status']:>7} {seconds} {speed_cell(r, a.timeout):>10} GB/s"
              + (f"  {r['message']}" if "message" in r else ""), flush=True)
    kernel = {"status": "n/a"} if regex else kernel_bench(a, patterns, icase, corpus)  # it takes literals
    print(f"  set {name:>7} kernel-only: {kernel['status']}"
          + (f" {fmt_gbps(kernel['kernel_gbps'])} GB/s" if kernel["status"] == "ok" else ""), flush=True)
    found = [tools[t]["lines"] for t in PRINTING + ["hs"] if tools[t]["status"] == "ok"]
    return {"patterns": str(patterns), "icase": icase, "regex": regex, "lines": found[0] if found else None,
            "tools": tools, "kernel": kernel}


def check_agreement(name, tools):
    """Messages for every tool that selects other lines than the reference (grep, else rg)."""
    done = [t for t in PRINTING if tools[t]["status"] == "ok"]
    problems = []
    if done:
        ref = tools[done[0]]
        for t in done[1:]:
            if (tools[t]["lines"], tools[t]["sha1"]) != (ref["lines"], ref["sha1"]):
                problems.append(f"set {name}: {t} selects {tools[t]['lines']:,} lines (sha1 {tools[t]['sha1'][:12]}), "
                                f"{done[0]} {ref['lines']:,} (sha1 {ref['sha1'][:12]})")
        if tools["hs"]["status"] == "ok" and tools["hs"]["lines"] != ref["lines"]:
            problems.append(f"set {name}: hyperscan counts {tools['hs']['lines']:,} lines, "
                            f"{done[0]} selects {ref['lines']:,}")
    for t in ("gpufilter", "hs"):
        if tools[t]["status"] == "failed":
            problems.append(f"set {name}: {LABEL[t]} failed: {tools[t]['message']}")
    return problems


def fmt_gbps(x):
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3g}"


def speed_cell(r, timeout):
    if r["status"] == "ok":
        return fmt_gbps(r["gbps"])
    if r["status"] == "timeout":
        return f"< {fmt_gbps(r['gbps'])} (timeout > {timeout:g} s)"
    return r["status"]


def ratio_cell(g, p):
    """gpufilter / peer; a timeout gives a bound."""
    if "ok" not in (g["status"], p["status"]) or {g["status"], p["status"]} - {"ok", "timeout"}:
        return "–"
    r = g["gbps"] / p["gbps"]
    return f"> {r:.3g}" if p["status"] == "timeout" else f"< {r:.3g}" if g["status"] == "timeout" else f"{r:.3g}"


def regex_stat_cells(s, stats):
    """gpufilter's regex figures: '-' where its --stats line lacks one (or for a literal set)."""
    return [f"{stats[k]:,}" if s.get("regex") and isinstance(stats.get(k), int)
            else str(stats[k]) if s.get("regex") and k in stats else "-" for k in REGEX_STATS]


def table(results, timeout):
    head = ["set", "matching lines", "gpufilter GB/s", "grep GB/s", "rg GB/s", "hyperscan GB/s", "gpufilter/grep",
            "gpufilter/rg", "gpufilter/hs", "gpufilter steady GB/s", "start-up ms", "build ms", "kernel-only GB/s",
            "gpufilter engine"]
    regex = any(s.get("regex") for s in results["sets"].values())
    if regex:  # the regex figures only when a regex set ran: the literal table is unchanged
        head += REGEX_STATS
    rows = [head, ["---"] * len(head)]
    corpus_lines = results["corpus"]["lines"]
    for name, s in results["sets"].items():
        t = s["tools"]
        lines = s["lines"]
        stats = t["gpufilter"].get("stats") or {}
        kernel = s["kernel"]

        def stat(key, fmt):
            return fmt(stats[key]) if key in stats else "n/a"

        rows.append([
            f"{name}" + (" (-i)" if name == "icase" else " (-E)" if s.get("regex") else ""),
            "?" if lines is None else f"{lines:,} ({lines / corpus_lines:.2%})",
            *(speed_cell(t[k], timeout) for k in TOOLS),
            *(ratio_cell(t["gpufilter"], t[k]) for k in ("grep", "rg", "hs")),
            stat("steady_gbps", fmt_gbps), stat("startup_ms", lambda v: f"{v:.0f}"),
            stat("build_ms", lambda v: f"{v:.0f}"),
            fmt_gbps(kernel["kernel_gbps"]) if kernel["status"] == "ok" else kernel["status"],
            f"{stats['engine']}: {stats.get('device', '')}" if "engine" in stats else "n/a"]
            + (regex_stat_cells(s, stats) if regex else []))
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def machine():
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "cpu": model, "nproc": os.cpu_count(),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def plot(results, png, gnuplot):
    """throughput.png: GB/s against literals (log-log); the dense and -i sets in a second panel."""
    data = png.parent / "plot"
    data.mkdir(exist_ok=True)
    series = [(LABEL[t], lambda s, t=t: s["tools"][t]["gbps"] if s["tools"][t]["status"] == "ok" else None)
              for t in TOOLS]
    series += [("gpufilter steady", lambda s: (s["tools"]["gpufilter"].get("stats") or {}).get("steady_gbps")),
               ("kernel only", lambda s: s["kernel"].get("kernel_gbps"))]
    styles = [(1, 7), (2, 5), (3, 9), (4, 13), ("'#1f77b4' dt 2", 6), ("'#7f7f7f' dt 3", 4)]
    literal_sets = [(int(n), s) for n, s in results["sets"].items() if n in LITERAL_SETS]
    other_sets = [(n, s) for n, s in results["sets"].items() if n not in LITERAL_SETS]
    left, right, values = [], [], []
    for i, (title, value) in enumerate(series):
        points = [(x, y) for x, s in literal_sets if (y := value(s))]
        extra = [(k + (i - 2.5) * 0.08, y) for k, (_, s) in enumerate(other_sets) if (y := value(s))]
        values += [y for _, y in points + extra]
        for name, rows, style, panel in (("literals", points, "linespoints", left), ("other", extra, "points", right)):
            if rows:
                f = data / f"{name}-{i}.dat"
                f.write_text("".join(f"{x} {y}\n" for x, y in rows))
                panel.append(f"'{f}' using 1:2 with {style} ls {i + 1} title '{title}'")
    if not values:
        return False
    m = results["machine"]
    script = [
        "set terminal pngcairo size 1400,560 font ',10'", f"set output '{png}'",
        f"set multiplot layout 1,{2 if right else 1} title \"gpufilter vs CPU peers: "
        f"{results['corpus']['bytes'] / 1e9:.3g} GB page-cached corpus, whole-process GB/s; "
        f"{m['hostname']}, {m['nproc']} cores; gpufilter on {', '.join(m.get('devices', [])) or 'n/a'}\"",
        "set grid", "set logscale y", "set ylabel 'GB/s'", "set key top right",
        f"set yrange [{10 ** math.floor(math.log10(min(values)))}:{10 ** math.ceil(math.log10(max(values)))}]",
        *[f"set style line {i + 1} lc {c} pt {p} lw 2" for i, (c, p) in enumerate(styles)]]
    if left:
        script += ["set logscale x", "set xlabel 'literals in the pattern set (mostly absent)'",
                   "set xrange [0.5:2e6]", "set xtics ('1' 1, '10' 10, '100' 100, '1k' 1e3, '10k' 1e4, "
                   "'100k' 1e5, '1M' 1e6)", "plot " + ", ".join(left)]
    if right:
        labels = ", ".join(f"'{n}{' (100, -i)' if n == 'icase' else ''}' {k}" for k, (n, _) in enumerate(other_sets))
        script += ["unset logscale x", "unset key", "set xlabel ''", f"set xrange [-0.6:{len(other_sets) - 0.4}]",
                   f"set xtics ({labels})", "plot " + ", ".join(right)]
    script.append("unset multiplot")
    (png.parent / "throughput.gp").write_text("\n".join(script) + "\n")
    r = subprocess.run([str(gnuplot), str(png.parent / "throughput.gp")], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"bench: gnuplot failed: {r.stderr.strip()}", file=sys.stderr)
    return r.returncode == 0


def draw(a, results):
    png = a.work / "throughput.png"
    if a.gnuplot is None:
        print("bench: no gnuplot: no chart (run --plot-only where there is one)", file=sys.stderr)
    elif plot(results, png, a.gnuplot):
        print(f"chart: {png}")


def build_regex_sets(a, corpus):
    """WORK/patterns-NAME.txt for the regex sets asked for; what results.json keeps of each."""
    built = {}
    for name in (n for n in a.sets if n in REGEX_SETS):
        try:
            path, info = regex_sets.build(name, a.work, a.loghub, a.seed, a.grep, ENV)
        except (OSError, ValueError) as e:
            fail(f"regex set {name}: {e}")
        line = f"regex set {name}: {info['patterns']:,} patterns in {path}"
        if name == "templates":
            line += (f" from {info['templates']:,} distinct templates of {info['template_files']} files; "
                     f"{info['dropped']} dropped (grep -E refuses them)")
        print(line)
        for m in info["dropped_examples"]:
            print(f"  dropped: {m}")
        if name in ("logregex", "nofactor", "factor", "factorlit"):
            patterns = path.read_text().splitlines()
            rates = regex_sets.sample_rates(patterns, corpus)
            info["sample_rates"] = dict(zip(patterns, rates))
            for pattern, rate in zip(patterns, rates):
                print(f"  {rate:8.3%} of the lines (first {regex_sets.SAMPLE_BYTES >> 20} MiB)  {pattern}")
        built[name] = info
    return built


def main(argv):
    a = parse_args(argv)
    if a.plot_only:
        draw(a, json.loads((a.work / "results.json").read_text()))
        return 0
    if a.repeat < 1 or a.timeout <= 0:
        fail("--repeat and --timeout must be positive")
    # gpufilter keeps compiled Hyperscan databases between runs (GPUFILTER_CACHE_DIR); the
    # empty string turns that off.
    ENV["GPUFILTER_CACHE_DIR"] = ""
    if a.hs_cache == "warm":
        ENV["GPUFILTER_CACHE_DIR"] = str(a.work / "hs-cache")
        (a.work / "hs-cache").mkdir(mode=0o700, parents=True, exist_ok=True)
    versions, a.stats = check_tools(a)
    meta = ensure_corpus(a)
    corpus = a.work / "corpus.log"
    built = build_regex_sets(a, corpus)
    print(f"page cache: read {corpus} in {warm(corpus):.2f} s")
    results = {"machine": dict(machine(), devices=[]), "command": [sys.executable] + sys.argv, "tools": versions,
               "paths": {k: str(getattr(a, k)) for k in ("gpufilter", "grep", "rg", "hs_count", "kernel_bench")},
               "corpus": {"path": str(corpus), "bytes": a.size, "lines": meta["lines"], "seed": a.seed,
                          "generator": meta},
               "timeout_s": a.timeout, "repeat": a.repeat, "hs_cache": a.hs_cache, "sets": {}}
    problems, slow = [], {}
    out_dir = output_dir(a.work, a.size)
    try:
        for name in a.sets:
            s = results["sets"][name] = run_set(a, name, corpus, out_dir, slow)
            if name in built:
                s["set"] = built[name]
            problems += check_agreement(name, s["tools"])
            if s["kernel"]["status"] == "failed":
                problems.append(f"set {name}: gpufilter-kernel-bench failed: {s['kernel']['message']}")
            device = (s["tools"]["gpufilter"].get("stats") or {}).get("device") or s["kernel"].get("device")
            if device and device not in results["machine"]["devices"]:
                results["machine"]["devices"].append(device)
        results["cases"] = {}
        for name in a.cases:
            c = bench_cases.run_case(a, name, corpus, ENV, out_dir, run_once)
            print(f"  case {name}: " + ", ".join(f"{t} {r['status']} {r['seconds']:.4f} s"
                                               for t, r in c["tools"].items()), flush=True)
            results["cases"][name] = c
            problems += [f"case {name}: {p}" for p in c["problems"]]
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    results["problems"] = problems
    (a.work / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print()
    print(table(results, a.timeout))
    print()
    if results["cases"]:
        print(bench_cases.table(results["cases"]))
        print()
    for name, s in results["sets"].items():
        for tool in ("grep", "rg"):
            if s["tools"][tool]["status"] == "failed":
                print(f"note: set {name}: {tool} failed: {s['tools'][tool]['message']}")
    print(f"results: {a.work / 'results.json'}")
    draw(a, results)
    if problems:
        print("\n!!! THE TOOLS DO NOT AGREE OR FAILED:\n!!! " + "\n!!! ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
