#!/usr/bin/python3
"""A fail2ban filter over an auth log: gpufilterd beside fail2ban-regex, on the same file.

    /usr/bin/python3 bench/fail2ban_bench.py [--size 64M] [--filter sshd]
        [--regex-size 22M] [--gpufilterd build/gpufilterd] [--engine cpu] [--json FILE]
        [--fail2ban-dir /etc/fail2ban] [--all-filters]

Standard library only. Issue 23's measurement:
1. Input. The OpenSSH Loghub sample (../shared/corpus/loghub/OpenSSH_2k.log) repeated up
   to --size, each copy's addresses moved to a new range (so that the hosts are many, as
   in a real auth log) and its line ends made LF; written to a temporary folder once.
2. fail2ban-regex -r FILE FILTER (the summary; its -o ip reads the same lines) on the
   first --regex-size bytes of that file, whole lines (it runs at a few MB/s: a 1 GB run
   takes minutes), timed; MB/s is what it read over its wall time.
3. gpufilterd --test-filter FILTER FILE (one thread, every line through the filter, the
   summary of fail2ban-regex) on the whole file, timed, and its summary line checked
   against fail2ban-regex's on the --regex-size part.
4. gpufilterd with a `fail2ban_filter:` rule (threshold 5 in 10m per host, the jail's
   defaults) reading the whole file on standard input, alerts to /dev/null, timed from
   start to exit: the daemon's path, engine --engine.
5. With --all-filters, the same with every stock filter that loads as a rule at once (one
   read for all jails: their literals in one scan, one date detection per kind of date).
Prints MB/s of each and the ratios to fail2ban-regex (gpufilterd's rows alone where
fail2ban-regex is not installed). Absolute figures depend on the
machine: compare within one run.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def size_arg(text):
    m = re.fullmatch(r"([0-9.]+)([KMG]?)", text.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 64M or 1G")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)])


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=size_arg, default=size_arg("64M"), help="bytes of auth log (64M)")
    p.add_argument("--regex-size", type=size_arg, default=size_arg("22M"),
                   help="bytes of it that fail2ban-regex reads (22M)")
    p.add_argument("--filter", default="sshd")
    p.add_argument("--gpufilterd", default=str(REPO / "build/gpufilterd"))
    p.add_argument("--engine", default="cpu", help="the daemon run's engine: cpu, gpu, auto")
    p.add_argument("--corpus", default=str(REPO.parent / "shared/corpus/loghub/OpenSSH_2k.log"))
    p.add_argument("--fail2ban-dir", default="/etc/fail2ban", help="where filter.d/ is (/etc/fail2ban)")
    p.add_argument("--all-filters", action="store_true",
                   help="also a daemon run with every stock filter of --fail2ban-dir as a rule at once")
    p.add_argument("--json", help="write the figures here")
    return p.parse_args()


def make_log(sample, size, path):
    """The sample repeated to `size` bytes, addresses moved per copy, LF line ends."""
    lines = Path(sample).read_bytes().replace(b"\r\n", b"\n").rstrip(b"\n").split(b"\n")
    addr = re.compile(rb"\b(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\b")
    written = 0
    copy = 0
    with open(path, "wb") as out:
        while written < size:
            a, b = 10 + copy // 250 % 200, copy % 250
            block = b"\n".join(addr.sub(lambda m: b"%d.%d.%s.%s" % (a, b, m.group(3), m.group(4)), l) for l in lines)
            block += b"\n"
            out.write(block)
            written += len(block)
            copy += 1
    return written


def head(path, size, out_path):
    """The first whole lines of `path` up to `size` bytes."""
    with open(path, "rb") as f:
        data = f.read(size)
    data = data[: data.rfind(b"\n") + 1]
    Path(out_path).write_bytes(data)
    return len(data)


def timed(argv, **kw):
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, **kw)
    return time.monotonic() - t0, r


def summary_line(text):
    m = re.search(r"^Lines: .*$", text, re.M)
    return m.group(0) if m else None


def rules_yaml(filters):
    return "".join(f"  - {{name: {f}, fail2ban_filter: {f}, threshold: {{count: 5, window: 10m, "
                   "group_by: {capture: host}}, cooldown: 10m}\n" for f in filters)


def loadable_filters(args, tmp):
    """The stock filters of --fail2ban-dir that gpufilterd --check accepts alone."""
    names = sorted(p.stem for p in Path(args.fail2ban_dir, "filter.d").glob("*.conf"))
    ok = []
    for name in names:
        config = Path(tmp) / "one.yaml"
        config.write_text(f"fail2ban_dir: {args.fail2ban_dir}\nsources: [{{stdin: true}}]\nrules:\n"
                          + rules_yaml([name]) + "server: 127.0.0.1:0\n")
        os.chmod(config, 0o644)
        if subprocess.run([args.gpufilterd, "--check", "--config", str(config)], capture_output=True).returncode == 0:
            ok.append(name)
    return ok


def daemon_run(args, tmp, log, size, filters=None):
    config = Path(tmp) / "jail.yaml"
    config.write_text(
        f"fail2ban_dir: {args.fail2ban_dir}\n"
        "sources: [{stdin: true}]\n"
        f"engine: {args.engine}\n"
        "rules:\n" + rules_yaml(filters or [args.filter]) +
        "outputs: [{type: jsonl, path: /dev/null, queue: 1000000}]\n"
        "server: 127.0.0.1:0\n")
    os.chmod(config, 0o644)
    with open(log, "rb") as stdin:
        seconds, r = timed([args.gpufilterd, "--config", str(config)], stdin=stdin)
    if r.returncode != 0:
        sys.exit(f"gpufilterd exited {r.returncode}: {r.stderr.decode(errors='replace')[-2000:]}")
    return seconds


def main():
    args = parse()
    # Where fail2ban-regex is not installed (the GPU machine), gpufilterd's rows alone.
    regex_tool = shutil.which("fail2ban-regex")
    conf = f"{args.fail2ban_dir}/filter.d/{args.filter}.conf"
    rows = {}
    same = None
    with tempfile.TemporaryDirectory(prefix="gpufilter-f2b-bench-") as tmp:
        log = Path(tmp) / "auth.log"
        size = make_log(args.corpus, args.size, log)
        part = Path(tmp) / "auth-part.log"
        part_size = head(log, min(args.regex_size, size), part)
        if regex_tool:
            f2b_s, f2b = timed([regex_tool, "-r", str(part), conf])
            if f2b.returncode != 0:
                sys.exit(f"fail2ban-regex failed: {f2b.stderr.decode(errors='replace')[-2000:]}")
            rows["fail2ban-regex"] = {"bytes": part_size, "seconds": f2b_s}
            check_s, check = timed([args.gpufilterd, "--test-filter", args.filter, str(part),
                                    "--fail2ban-dir", args.fail2ban_dir])
            same = summary_line(check.stdout.decode()) == summary_line(f2b.stdout.decode())
        tf_s, tf = timed([args.gpufilterd, "--test-filter", args.filter, str(log), "--fail2ban-dir", args.fail2ban_dir])
        if tf.returncode != 0:
            sys.exit(f"gpufilterd --test-filter failed: {tf.stderr.decode(errors='replace')[-2000:]}")
        rows["gpufilterd --test-filter"] = {"bytes": size, "seconds": tf_s}
        rows[f"gpufilterd (rule, engine {args.engine})"] = {"bytes": size, "seconds": daemon_run(args, tmp, log, size)}
        if args.all_filters:
            filters = loadable_filters(args, tmp)
            rows[f"gpufilterd ({len(filters)} filters, engine {args.engine})"] = {
                "bytes": size, "seconds": daemon_run(args, tmp, log, size, filters)}
    mb = 1e6
    base = part_size / rows["fail2ban-regex"]["seconds"] if regex_tool else None
    print(f"{args.filter} over {size / mb:.1f} MB of generated auth log "
          f"(fail2ban-regex over its first {part_size / mb:.1f} MB); {os.cpu_count()} cores")
    if regex_tool:
        print(f"summary lines equal on the common part: {same}  ({summary_line(f2b.stdout.decode())})")
    else:
        print("fail2ban-regex is not installed here: gpufilterd's rows alone")
    print(f"{'tool':44} {'MB':>8} {'seconds':>8} {'MB/s':>8} {'x fail2ban-regex':>17}")
    for name, r in rows.items():
        rate = r["bytes"] / r["seconds"]
        r["mb_per_s"] = rate / mb
        r["vs_fail2ban_regex"] = rate / base if base else None
        ratio = f"{rate / base:17.1f}" if base else f"{'-':>17}"
        print(f"{name:44} {r['bytes'] / mb:8.1f} {r['seconds']:8.2f} {rate / mb:8.1f} {ratio}")
    if args.json:
        Path(args.json).write_text(json.dumps({"filter": args.filter, "same_summary": same, "rows": rows}, indent=1))
    return 0 if same is not False else 1


if __name__ == "__main__":
    sys.exit(main())
