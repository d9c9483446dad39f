#!/usr/bin/python3
"""gpufilterd reading a Kafka topic: throughput of 1 instance and of N instances in one group.

    /usr/bin/python3 bench/kafka_scale.py [--records 2000000] [--partitions 12]
        [--instances 1,2,3] [--engines cpu] [--repeat 3] [--setting KEY=VALUE] [--json FILE]

Standard library only; needs kcat, gpufilterd and gpufilter-test-kafka-broker (both copied
into a private temporary folder first, so that the build folder may be rebuilt meanwhile).

1. Topic. The broker (librdkafka's mock cluster in a process of its own) serves topic `logs`
   of P partitions. The records are Loghub lines (--corpus) repeated up to --records (or
   --bytes), dealt to the partitions in blocks of 1,000 lines, plus a begin and an end
   marker record per partition; one `kcat -P -p N` per partition produces them, timed.
   The mock keeps at most 5 MiB of stored batches per partition and silently drops the
   oldest past that, so batches are zstd-compressed (--compression; 2M lines need ~2.5 MiB
   a partition at P=12) and the script checks with kcat -Q that every partition still
   holds offsets 0..end.
2. References, best of --kcat-runs each: `kcat -C -e -o beginning > /dev/null`, one bare
   librdkafka consumer of the whole topic (the "x kcat" column), and P of them at once,
   one per partition (what the broker served to bare consumers: the model's broker bound).
3. Runs. For each round (--repeat), engine and N: N gpufilterd in a NEW consumer group (so
   each run reads the topic from its beginning), started together. A rule alerts once per
   marker; its alert's starts_at (the daemon's clock when it matched the line, in ms) gives
   the first record matched and the end of the last partition: records/s = records /
   (last end marker - first begin marker), good to about 10 ms. The window from the metrics
   (the sum of gpufilterd_kafka_records_total first > 0, then >= the records produced;
   copied once a second, polled every --poll s) is printed beside it as a check, good to
   about 1.2 s. Per instance: its share of the records, partitions, rebalances; records
   read twice (rebalances); CPU of the instances, of the broker and of everything else on
   the host during the window (/proc), since other work on the host skews the figures.
   The table shows the median round; the JSON has every round and its progress.
4. Model: each instance alone does T1 (the N=1 median); with P partitions dealt evenly the
   run ends when the busiest instance (ceil(P/N) partitions) ends, so at most
   T1 * P/ceil(P/N) (N*T1 when N divides P, P*T1 when N >= P) ["instances"]; no more than
   the broker served P parallel bare consumers ["broker"]; no more than the host's cores
   allow at the CPU per record measured at N=1, gpufilterd + broker ["cpu"]. Predicted =
   the least of the three; the "limit" column names it.

--setting KEY=VALUE passes a librdkafka consumer property to gpufilterd and to the kcat
consumers (e.g. queued.min.messages=1000000: librdkafka before 2.4 stops fetching a
partition for 1 s whenever its consumer queue holds queued.min.messages records).
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOPIC = "logs"
BLOCK = 1000                       # consecutive lines that go to the same partition
MOCK_PARTITION_BYTES = 5 << 20     # what the mock keeps per partition (rdkafka_mock.c)
MARKER = "gpufbench-marker"
CLK_TCK = os.sysconf("SC_CLK_TCK")
CHILDREN = []                      # every process started, ended by cleanup()


class BenchError(Exception):
    """A failure with a message for the user (printed without a traceback)."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpufilterd", default=str(REPO / "build/gpufilterd"), help="copied, then run (build/gpufilterd)")
    p.add_argument("--broker", default=str(REPO / "build/tests/kafka/gpufilter-test-kafka-broker"),
                   help="the test broker, copied, then run")
    p.add_argument("--kcat", default="/usr/bin/kcat")
    p.add_argument("--corpus", default=str(REPO.parent / "shared/corpus/loghub"),
                   help="folder of Loghub logs (*_2k.log)")
    p.add_argument("--records", type=int, default=2_000_000, help="records to produce (2000000)")
    p.add_argument("--bytes", type=int, default=0, help="produce this many bytes of log lines instead")
    p.add_argument("--partitions", type=int, default=12, help="partitions of the topic (12)")
    p.add_argument("--instances", default="1,2,3", help="comma-separated instance counts")
    p.add_argument("--engines", default="cpu", help="comma-separated: cpu, gpu, auto")
    p.add_argument("--compression", default="zstd", help="producer codec: zstd, lz4, gzip, snappy, none")
    p.add_argument("--repeat", type=int, default=3, help="rounds of every (engine, N); the median is shown")
    p.add_argument("--kcat-runs", type=int, default=2, help="runs of each bare-consumer reference (best kept)")
    p.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE",
                   help="a librdkafka consumer property for gpufilterd and the kcat consumers (repeatable)")
    p.add_argument("--poll", type=float, default=0.2, help="metrics poll interval, s")
    p.add_argument("--timeout", type=float, default=180, help="per gpufilterd run, s")
    p.add_argument("--json", help="write all figures here")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = p.parse_args(argv)
    try:
        a.instances = [int(x) for x in a.instances.split(",") if x]
    except ValueError:
        p.error("--instances takes numbers separated by commas")
    a.engines = [x for x in a.engines.split(",") if x]
    if any("=" not in kv for kv in a.setting):
        p.error("--setting takes KEY=VALUE")
    if min([a.records, a.partitions, a.repeat, a.kcat_runs] + a.instances) < 1 or not a.instances:
        p.error("--records, --partitions, --instances, --repeat and --kcat-runs must be positive")
    return a


# ---------------------------------------------------------------- processes

def spawn(cmd, **kw):
    """Popen, remembered so that cleanup() ends it whatever happens."""
    proc = subprocess.Popen(cmd, **kw)
    CHILDREN.append(proc)
    return proc


def stop(proc, sig=signal.SIGTERM, wait=20.0):
    """Signal one child, wait for it, SIGKILL it past `wait`; returns its exit status."""
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc in CHILDREN:
        CHILDREN.remove(proc)
    return proc.returncode


def cleanup():
    for proc in list(CHILDREN):
        stop(proc, wait=5.0)


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def cpu_seconds(pid):
    """User + system CPU seconds of a live process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def host_busy_seconds():
    """CPU seconds the whole host spent busy (all cores, /proc/stat: not idle or iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK_TCK


def stage_binaries(args, tmp):
    """Copies gpufilterd and the broker into TMP/bin (the build folder may be rebuilt)."""
    bindir = tmp / "bin"
    bindir.mkdir()
    staged = {}
    for name in ("gpufilterd", "broker"):
        src = Path(getattr(args, name))
        if not os.access(src, os.X_OK):
            raise BenchError(f"--{name}: {src} is not an executable (build it first)")
        staged[name] = str(shutil.copy2(src, bindir / src.name))
    if not os.access(args.kcat, os.X_OK):
        raise BenchError(f"--kcat: {args.kcat} not found (apt-get install kcat)")
    return staged


# ---------------------------------------------------------------- data

def load_lines(corpus):
    """The non-empty lines of every *.log in CORPUS, files in name order."""
    files = sorted(Path(corpus).glob("*.log"))
    if not files:
        raise BenchError(f"--corpus: no *.log in {corpus}")
    lines = []
    for f in files:
        lines += [ln for ln in f.read_bytes().split(b"\n") if ln.strip()]
    return [ln.rstrip(b"\r") for ln in lines], [f.name for f in files]


def write_partitions(lines, args, tmp):
    """One file per partition: a begin marker, its blocks of lines, an end marker.
    Returns the files and the totals (records and value bytes, markers included)."""
    paths = [tmp / f"part-{p}.txt" for p in range(args.partitions)]
    outs = [open(path, "wb") for path in paths]
    count, size = [0] * args.partitions, [0] * args.partitions

    def put(p, line):
        outs[p].write(line + b"\n")
        count[p] += 1
        size[p] += len(line)

    try:
        for p in range(args.partitions):
            put(p, f"{MARKER} begin key=begin-{p}".encode())
        data_bytes, i = 0, 0
        while (data_bytes < args.bytes) if args.bytes > 0 else (i < args.records):
            line = lines[i % len(lines)]
            put((i // BLOCK) % args.partitions, line)
            data_bytes += len(line)
            i += 1
        for p in range(args.partitions):
            put(p, f"{MARKER} end key=end-{p}".encode())
    finally:
        for f in outs:
            f.close()
    return paths, {"data_records": i, "data_bytes": data_bytes, "records": sum(count),
                   "bytes": sum(size), "per_partition_records": count, "per_partition_bytes": size}


# ---------------------------------------------------------------- broker and kcat

def start_broker(binary, partitions, log):
    """The mock cluster; returns (process, bootstrap servers)."""
    with open(log, "wb") as err:
        proc = spawn([binary, f"{TOPIC}:{partitions}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    first = proc.stdout.readline().decode().strip()
    if not first or proc.poll() is not None:
        raise BenchError(f"broker did not start: {log.read_text(errors='replace')[-500:]}")
    return proc, first


def produce(args, brokers, paths):
    """One kcat -P per partition, all at once; returns the wall time in seconds."""
    t0 = time.monotonic()
    procs = []
    for p, path in enumerate(paths):
        cmd = [args.kcat, "-P", "-b", brokers, "-t", TOPIC, "-p", str(p),
               "-X", "linger.ms=50", "-X", "batch.num.messages=10000",
               "-X", f"compression.codec={args.compression}"]
        with open(path, "rb") as f:
            procs.append(spawn(cmd, stdin=f, stderr=subprocess.PIPE))
    errors = []
    for proc in procs:
        err = proc.communicate()[1].decode()
        if stop(proc) != 0:
            errors.append(err.strip()[-300:])
    if errors:
        raise BenchError("kcat -P failed: " + errors[0])
    return time.monotonic() - t0


def watermarks(args, brokers, which):
    """Per partition, the first (which=-2) or next (which=-1) offset, from kcat -Q."""
    cmd = [args.kcat, "-Q", "-b", brokers]
    for p in range(args.partitions):
        cmd += ["-t", f"{TOPIC}:{p}:{which}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    found = {int(m[0]): int(m[1]) for m in re.findall(r"\[(\d+)\] offset (-?\d+)", out.stdout)}
    if len(found) != args.partitions:
        raise BenchError(f"kcat -Q: {out.stdout.strip()} {out.stderr.strip()}")
    return [found[p] for p in range(args.partitions)]


def check_topic(args, brokers, data):
    """Every record produced is still in the topic (the mock drops the oldest batches of a
    partition past 5 MiB)."""
    low, high = watermarks(args, brokers, -2), watermarks(args, brokers, -1)
    for p in range(args.partitions):
        if low[p] != 0 or high[p] != data["per_partition_records"][p]:
            raise BenchError(
                f"partition {p} holds offsets {low[p]}..{high[p]}, not 0..{data['per_partition_records'][p]}: "
                f"the mock broker keeps at most {MOCK_PARTITION_BYTES >> 20} MiB of stored batches per "
                "partition and drops the oldest; use --compression zstd, more --partitions or fewer --records")


def time_kcat(args, brokers, broker_pid, parallel):
    """Bare consumers reading the whole topic to /dev/null: one kcat -C of every partition,
    or (PARALLEL) one kcat -C -p per partition at once. Wall seconds and CPU seconds."""
    base = [args.kcat, "-C", "-b", brokers, "-t", TOPIC, "-e", "-q", "-o", "beginning"]
    for kv in args.setting:
        base += ["-X", kv]
    cmds = [base + ["-p", str(p)] for p in range(args.partitions)] if parallel else [base]
    b0, r0, t0 = cpu_seconds(broker_pid), os.times(), time.monotonic()
    procs = [spawn(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for cmd in cmds]
    for proc in procs:
        err = proc.communicate(timeout=args.timeout)[1].decode()
        if stop(proc) != 0:
            raise BenchError(f"kcat -C failed: {err.strip()[-300:]}")
    wall, r1 = time.monotonic() - t0, os.times()
    return {"seconds": wall, "broker_cpu_s": cpu_seconds(broker_pid) - b0,
            "kcat_cpu_s": (r1.children_user + r1.children_system) - (r0.children_user + r0.children_system)}


def bare_consumers(args, brokers, broker_pid, records):
    """The references, best of --kcat-runs each: 'single' (one bare consumer, the ratio
    column) and 'parallel' (P at once: what the broker served, the model's bound)."""
    refs = {}
    for mode in ("single", "parallel"):
        runs = [time_kcat(args, brokers, broker_pid, mode == "parallel") for _ in range(args.kcat_runs)]
        best = min(runs, key=lambda r: r["seconds"])
        refs[mode] = dict(best, runs_s=[r["seconds"] for r in runs], records_per_s=records / best["seconds"],
                          consumers=args.partitions if mode == "parallel" else 1)
    return refs


# ---------------------------------------------------------------- gpufilterd

def write_config(folder, brokers, group, engine, extra):
    """A gpufilterd configuration of one kafka source, the example rules and the markers'."""
    alerts = folder / "alerts.jsonl"
    settings = dict([("session.timeout.ms", "6000"), ("heartbeat.interval.ms", "500")] +
                    [kv.split("=", 1) for kv in extra])
    settings = ", ".join(f'{k}: "{v}"' for k, v in settings.items())
    text = f"""sources:
  - kafka: {{brokers: "{brokers}", topics: {TOPIC}, group_id: "{group}", settings: {{{settings}}}}}
rules:
  - name: errors
    patterns: ["ERROR", "Failed password"]
    cooldown: 1h
  - name: {MARKER}
    patterns: ["{MARKER}"]
    threshold: {{count: 1, group_by: {{field_after: "key="}}}}
    cooldown: 1h
outputs:
  - {{type: jsonl, path: "{alerts}"}}
server: 127.0.0.1:0
engine: {engine}
"""
    path = folder / "gpufilterd.yaml"
    path.write_text(text)
    os.chmod(path, 0o644)
    return path, alerts


class Instance:
    """One gpufilterd: its process, its log, its metrics port, its alerts read so far."""

    def __init__(self, binary, folder, brokers, group, engine, settings):
        folder.mkdir()
        self.config, self.alerts = write_config(folder, brokers, group, engine, settings)
        self.log = folder / "stderr.log"
        self.alerts_offset = 0
        self.first_marker = None  # when this instance matched its first marker
        self.port = None
        self.started_at = time.time()
        with open(self.log, "wb") as err:
            self.proc = spawn([binary, "--config", str(self.config)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=err)

    def log_tail(self):
        return self.log.read_text(errors="replace")[-1500:]

    def complaints(self):
        """Its log's warnings and errors, the last three."""
        lines = self.log.read_text(errors="replace").splitlines()
        return [ln for ln in lines if "level=warn" in ln or "level=error" in ln][-3:]

    def check_started(self):
        """True once the log says started (and the metrics port is known)."""
        if self.port is None:
            m = re.search(r'msg="gpufilterd started".*?server=[\d.]+:(\d+)', self.log.read_text(errors="replace"))
            if m:
                self.port = int(m.group(1))
        if self.proc.poll() is not None:
            raise BenchError(f"gpufilterd exited with {self.proc.returncode}:\n{self.log_tail()}")
        return self.port is not None

    def metrics(self):
        """The kafka counters from /metrics, each summed over its label sets."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError as e:
            raise BenchError(f"GET /metrics of port {self.port}: {e}\n{self.log_tail()}") from e
        wanted = ("gpufilterd_kafka_records_total", "gpufilterd_kafka_bytes_total", "gpufilterd_kafka_partitions",
                  "gpufilterd_kafka_rebalances_total", "gpufilterd_kafka_consumer_lag",
                  "gpufilterd_scan_busy_seconds_total", "gpufilterd_bytes_scanned_total")
        values = dict.fromkeys(wanted, 0.0)
        for line in text.splitlines():
            name = re.split(r"[{ ]", line, 1)[0]
            if name in values:
                values[name] += float(line.rsplit(" ", 1)[1])
        return values

    def new_marker_alerts(self):
        """(key, epoch seconds) of the marker alerts written since the last call."""
        try:
            with open(self.alerts, "rb") as f:
                f.seek(self.alerts_offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        chunk = chunk[:chunk.rfind(b"\n") + 1]
        self.alerts_offset += len(chunk)
        found = []
        for line in chunk.splitlines():
            alert = json.loads(line)
            if alert.get("rule") == MARKER and alert.get("state") == "firing":
                when = datetime.datetime.strptime(alert["starts_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
                found.append((alert["group"], when.replace(tzinfo=datetime.timezone.utc).timestamp()))
        return found


def start_instances(args, staged, brokers, tmp, engine, n):
    """N gpufilterd in a new group; waits until every one says it started."""
    group = f"bench-{engine}-{n}-{uuid.uuid4().hex[:8]}"
    runs = tmp / group
    runs.mkdir()
    instances = [Instance(staged["gpufilterd"], runs / f"i{i}", brokers, group, engine, args.setting) for i in range(n)]
    deadline = time.monotonic() + 60
    while not all(inst.check_started() for inst in instances):
        if time.monotonic() > deadline:
            raise BenchError("gpufilterd did not start within 60 s:\n" + instances[0].log_tail())
        time.sleep(0.05)
    return group, instances


def poll(instances, broker_pid, markers):
    """One sample: the time, each instance's metrics and CPU, the broker's CPU; new marker
    alerts go into MARKERS (key -> earliest time seen)."""
    for inst in instances:
        inst.check_started()
    t = time.time()
    sample = {"t": t, "metrics": [inst.metrics() for inst in instances],
              "cpu": [cpu_seconds(inst.proc.pid) for inst in instances], "broker_cpu": cpu_seconds(broker_pid),
              "host_cpu": host_busy_seconds()}
    for inst in instances:
        for key, when in inst.new_marker_alerts():
            markers[key] = min(when, markers.get(key, when))
            inst.first_marker = min(when, inst.first_marker or when)
    return sample


def follow_run(args, instances, broker_pid, total):
    """Polls until every end marker has alerted and the records counted reach TOTAL, then
    once more after a metrics copy; returns the samples and the markers."""
    markers, samples = {}, []
    ends = {f"end-{p}" for p in range(args.partitions)}
    deadline = time.monotonic() + args.timeout
    while True:
        samples.append(poll(instances, broker_pid, markers))
        counted = sum(m["gpufilterd_kafka_records_total"] for m in samples[-1]["metrics"])
        if ends <= markers.keys() and counted >= total:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"run not finished after {args.timeout} s: {counted:.0f} of {total} records counted, "
                             f"{len(ends & markers.keys())} of {len(ends)} partitions ended")
        time.sleep(args.poll)
    time.sleep(1.3)          # one more copy of the counters: the final figures
    samples.append(poll(instances, broker_pid, markers))
    return samples, markers


def cpu_at(samples, t, pick):
    """A cumulative CPU figure at time T, interpolated between the samples."""
    points = [(s["t"], pick(s)) for s in samples]
    if t <= points[0][0]:
        return points[0][1]
    for (t0, c0), (t1, c1) in zip(points, points[1:]):
        if t <= t1:
            return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1e-9)
    return points[-1][1]


def metrics_window(samples, total):
    """(first sample with records counted, first with all counted) from the metrics."""
    sums = [(s["t"], sum(m["gpufilterd_kafka_records_total"] for m in s["metrics"])) for s in samples]
    first = next((t for t, c in sums if c > 0), None)
    full = next((t for t, c in sums if c >= total), None)
    return (first, full) if first is not None and full is not None and full > first else (None, None)


def summarize_run(args, engine, n, group, instances, samples, markers, data):
    """The figures of one run from its samples and marker times."""
    begin = min(t for k, t in markers.items() if k.startswith("begin-"))
    end = max(t for k, t in markers.items() if k.startswith("end-"))
    wall = end - begin
    m_first, m_full = metrics_window(samples, data["records"])
    final = samples[-1]["metrics"]
    counted = sum(m["gpufilterd_kafka_records_total"] for m in final)
    per = [{"records": m["gpufilterd_kafka_records_total"], "bytes": m["gpufilterd_kafka_bytes_total"],
            "share": m["gpufilterd_kafka_records_total"] / max(counted, 1),
            "partitions": int(m["gpufilterd_kafka_partitions"]),
            "rebalances": int(m["gpufilterd_kafka_rebalances_total"]),
            "scan_busy_s": m["gpufilterd_scan_busy_seconds_total"]} for m in final]
    gcpu = sum(cpu_at(samples, end, lambda s, i=i: s["cpu"][i]) - cpu_at(samples, begin, lambda s, i=i: s["cpu"][i])
               for i in range(n))
    bcpu = cpu_at(samples, end, lambda s: s["broker_cpu"]) - cpu_at(samples, begin, lambda s: s["broker_cpu"])
    hcpu = cpu_at(samples, end, lambda s: s["host_cpu"]) - cpu_at(samples, begin, lambda s: s["host_cpu"])
    return {
        "engine": engine, "instances": n, "partitions": args.partitions, "group": group,
        "seconds": wall, "records_per_s": data["records"] / wall, "mb_per_s": data["bytes"] / wall / 1e6,
        "start_to_first_record_s": begin - min(inst.started_at for inst in instances),
        "join_skew_s": max((inst.first_marker or end) for inst in instances) - begin,
        "metrics_window_s": (m_full - m_first) if m_first and m_full else None,
        "metrics_records_per_s": data["records"] / (m_full - m_first) if m_first and m_full else None,
        "records_counted": counted, "records_read_twice": counted - data["records"],
        "bytes_counted": sum(m["gpufilterd_kafka_bytes_total"] for m in final),
        "gpufilterd_cpu_s": gcpu, "broker_cpu_s": bcpu,
        "gpufilterd_cores": gcpu / wall, "broker_cores": bcpu / wall, "host_busy_cores": hcpu / wall,
        "other_cores": (hcpu - gcpu - bcpu) / wall, "per_instance": per,
        "progress": [(round(s["t"] - begin, 3), [m["gpufilterd_kafka_records_total"] for m in s["metrics"]],
                      [m["gpufilterd_kafka_consumer_lag"] for m in s["metrics"]]) for s in samples],
    }


def run_group(args, staged, brokers, broker_pid, tmp, engine, n, data):
    """One measurement: N instances of ENGINE reading the whole topic in a new group."""
    group, instances = start_instances(args, staged, brokers, tmp, engine, n)
    try:
        samples, markers = follow_run(args, instances, broker_pid, data["records"])
        result = summarize_run(args, engine, n, group, instances, samples, markers, data)
    finally:
        for inst in instances:
            if inst.proc.poll() is None:
                inst.proc.send_signal(signal.SIGTERM)
        codes = [stop(inst.proc, wait=30) for inst in instances]
    result["exit_codes"] = codes
    result["exit_complaints"] = {i: inst.complaints() for i, inst in enumerate(instances) if codes[i] != 0}
    return result


# ---------------------------------------------------------------- model and report

def summarize_configs(runs):
    """Per (engine, N): the run of median records/s stands for it; the range beside it."""
    configs = {}
    for r in runs:
        configs.setdefault((r["engine"], r["instances"]), []).append(r)
    rows = []
    for (engine, n), group in configs.items():
        ordered = sorted(group, key=lambda r: r["records_per_s"])
        row = dict(ordered[(len(ordered) - 1) // 2])
        row.pop("round", None)
        row["runs_records_per_s"] = [r["records_per_s"] for r in group]
        row["min_records_per_s"], row["max_records_per_s"] = ordered[0]["records_per_s"], ordered[-1]["records_per_s"]
        rows.append(row)
    return rows


def add_model(rows, refs, partitions, cores):
    """Predicted throughput per row: the least of three bounds (module docstring):
    instances T1 * P/ceil(P/N), broker (P parallel kcats), cpu (cores / CPU per record at N=1)."""
    for r in rows:
        r["vs_bare_consumer"] = r["records_per_s"] / refs["single"]["records_per_s"]
        one = next((x for x in rows if x["engine"] == r["engine"] and x["instances"] == 1), None)
        if one is None:
            continue
        t1 = one["records_per_s"]
        cpu_per_record = (one["gpufilterd_cpu_s"] + one["broker_cpu_s"]) / (one["records_per_s"] * one["seconds"])
        bounds = {"instances": t1 * partitions / math.ceil(partitions / r["instances"]),
                  "broker": refs["parallel"]["records_per_s"],
                  "cpu": cores / cpu_per_record}
        r["model_bounds_per_s"] = bounds
        r["limit"] = min(bounds, key=bounds.get)
        r["predicted_per_s"] = bounds[r["limit"]]
        r["vs_one_instance"] = r["records_per_s"] / t1


def print_references(data, produce_s, refs):
    print(f"\ntopic: {data['records']:,} records ({data['data_records']:,} log lines + 2 markers per partition), "
          f"{data['bytes'] / 1e6:.1f} MB of values, {len(data['per_partition_records'])} partitions")
    print(f"producer (kcat -P, one per partition): {produce_s:.2f} s, {data['records'] / produce_s:,.0f} records/s")
    for mode, ref in refs.items():
        print(f"bare consumer, {mode} ({ref['consumers']} kcat -C > /dev/null, best of {len(ref['runs_s'])}): "
              f"{ref['seconds']:.2f} s, {ref['records_per_s']:,.0f} records/s, "
              f"{data['bytes'] / ref['seconds'] / 1e6:.1f} MB/s; CPU: kcat {ref['kcat_cpu_s'] / ref['seconds']:.2f} "
              f"cores, broker {ref['broker_cpu_s'] / ref['seconds']:.2f} cores")


def table_row(r):
    pred = r.get("predicted_per_s")
    shares = " ".join(f"{p['share'] * 100:.0f}%/{p['partitions']}p/{p['rebalances']}r" for p in r["per_instance"])
    return (r["engine"], str(r["instances"]), str(r["partitions"]), f"{r['records_per_s']:,.0f}",
            f"{r['min_records_per_s'] / 1e3:,.0f}k-{r['max_records_per_s'] / 1e3:,.0f}k", f"{r['mb_per_s']:.1f}",
            f"{r['vs_one_instance']:.2f}" if pred else "-", f"{r['vs_bare_consumer']:.2f}",
            f"{pred:,.0f}" if pred else "-", f"{r['records_per_s'] / pred:.2f}" if pred else "-",
            r.get("limit", "-"), f"{r['gpufilterd_cores']:.2f}", f"{r['broker_cores']:.2f}",
            f"{r['other_cores']:.2f}", f"{r['records_read_twice']:,.0f}", shares)


def print_table(rows):
    head = ("engine", "inst", "parts", "records/s", "range", "MB/s", "x1 inst", "x kcat", "predicted", "meas/pred",
            "limit", "gpufilterd cores", "broker cores", "other cores", "read twice", "share/partitions/rebalances")
    lines = [head] + [table_row(r) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    left = {0, 1, 2, 10, 15}
    print()
    for k, line in enumerate(lines):
        print(" | ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
        if k == 0:
            print("-+-".join("-" * w for w in widths))


def print_runs(runs):
    print("\nruns (records/s from the markers; from the metrics, +-1.2 s on the window; start: spawn to the first "
          "record matched, mostly the group join):")
    for r in runs:
        metric = f"{r['metrics_records_per_s']:,.0f} over {r['metrics_window_s']:.1f} s" \
            if r["metrics_records_per_s"] else "- (window under one poll)"
        print(f"  {r['engine']} N={r['instances']} round {r['round']}: {r['records_per_s']:,.0f} over "
              f"{r['seconds']:.3f} s; metrics {metric}; start {r['start_to_first_record_s']:.1f} s; "
              f"last instance's first record +{r['join_skew_s']:.2f} s; "
              f"cores: gpufilterd {r['gpufilterd_cores']:.2f}, other {r['other_cores']:.2f}; "
              f"exit {r['exit_codes']}")
        for i, lines in r["exit_complaints"].items():
            for line in lines:
                print(f"    instance {i}: {line}")


def print_report(data, produce_s, refs, rows, runs, cores):
    """References, the table, each run's figures, and how precise they are."""
    print_references(data, produce_s, refs)
    print_table(rows)
    print_runs(runs)
    short = min([r["seconds"] for r in runs] + [ref["seconds"] for ref in refs.values()])
    if short < 1.0:
        print(f"\nWARNING: a window lasted {short:.2f} s: fetch round trips and start-up weigh on it; "
              "use more --records (the mock holds ~3M lines at P=12 with zstd) or more --partitions.")
    busy = max(r["other_cores"] for r in runs)
    if busy > 0.25:
        print(f"\nWARNING: other processes kept up to {busy:.2f} of {cores} cores busy during a run; "
              "rounds that overlap them are slower (see 'other' per run).")
    print(f"\nrecords/s: records / (first begin marker .. last end marker matched), alert times in ms, so about "
          f"+-10 ms on the window; the median of the rounds (range beside it). MB/s: value bytes produced / window "
          f"(= gpufilterd_kafka_bytes_total when no record is read twice). Host: {cores} usable cores.\n"
          "predicted = min(T1 * P/ceil(P/N) [instances], P parallel kcat consumers [broker], "
          "cores / (gpufilterd+broker CPU per record at N=1) [cpu]); 'limit' names the least. "
          "Cores: CPU seconds / window.")


def machine_info(gpufilterd, source):
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.processor())
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    version = subprocess.run([gpufilterd, "--version"], capture_output=True, text=True).stdout.strip()
    return {"nproc": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)), "cpu_model": model,
            "kernel": platform.release(), "python": platform.python_version(), "commit": commit,
            "gpufilterd": version, "gpufilterd_path": source,
            "gpufilterd_sha256": hashlib.sha256(Path(gpufilterd).read_bytes()).hexdigest(),
            "gpufilterd_mtime": datetime.datetime.fromtimestamp(Path(gpufilterd).stat().st_mtime,
                                                                datetime.timezone.utc).isoformat(timespec="seconds"),
            "load_average": os.getloadavg(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def prepare_topic(args, staged, tmp):
    """Broker up, records produced and checked; returns (broker, brokers, data, produce s)."""
    lines, files = load_lines(args.corpus)
    paths, data = write_partitions(lines, args, tmp)
    data["corpus_files"] = files
    broker, brokers = start_broker(staged["broker"], args.partitions, tmp / "broker.log")
    print(f"broker {brokers}; producing {data['records']:,} records ({data['bytes'] / 1e6:.1f} MB, "
          f"{args.compression}) ...", flush=True)
    produce_s = produce(args, brokers, paths)
    check_topic(args, brokers, data)
    for path in paths:
        path.unlink()
    return broker, brokers, data, produce_s


def measure(args, staged, brokers, broker_pid, tmp, data):
    """Every (engine, N), --repeat rounds, interleaved so that drift spreads over all."""
    runs = []
    for k in range(args.repeat):
        for engine in args.engines:
            for n in args.instances:
                print(f"round {k + 1}/{args.repeat}: engine={engine} instances={n} ...", flush=True)
                run = run_group(args, staged, brokers, broker_pid, tmp, engine, n, data)
                run["round"] = k + 1
                runs.append(run)
    return runs


def main(argv):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tmp = Path(tempfile.mkdtemp(prefix="gpufilter-kafka-scale-"))
    try:
        staged = stage_binaries(args, tmp)
        broker, brokers, data, produce_s = prepare_topic(args, staged, tmp)
        refs = bare_consumers(args, brokers, broker.pid, data["records"])
        runs = measure(args, staged, brokers, broker.pid, tmp, data)
        cores = len(os.sched_getaffinity(0))
        rows = summarize_configs(runs)
        add_model(rows, refs, args.partitions, cores)
        print_report(data, produce_s, refs, rows, runs, cores)
        if args.json:
            summary = {"machine": machine_info(staged["gpufilterd"], args.gpufilterd), "args": vars(args),
                       "topic": data, "produce_s": produce_s,
                       "producer_records_per_s": data["records"] / produce_s,
                       "bare_consumers": refs, "summary": rows, "runs": runs}
            Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
        return 0
    except BenchError as e:
        print(f"kafka_scale: {e}", file=sys.stderr)
        return 1
    finally:
        cleanup()
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
