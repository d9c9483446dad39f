#!/usr/bin/env python3
"""Unit tests of the benchmark harness: bench/run.py's parsing, agreement check and table
cells, gpufilter-gen-corpus's determinism and pattern sets, and gpufilter-hs-count against a
plain Python count. The programs come from $GPUFILTER_GEN_CORPUS, $GPUFILTER_HS_COUNT and
the Loghub logs from $GPUFILTER_CORPUS_DIR/loghub (set by tests/bench/CMakeLists.txt)."""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import run  # noqa: E402  (bench/run.py)


def ok(lines, sha1="a", seconds=1.0):
    return {"status": "ok", "lines": lines, "sha1": sha1, "seconds": seconds, "gbps": 1 / seconds}


class RunPyTest(unittest.TestCase):
    def test_parse_size(self):
        self.assertEqual(run.parse_size("4M"), 4 << 20)
        self.assertEqual(run.parse_size("256m"), 256 << 20)
        self.assertEqual(run.parse_size("16G"), 16 << 30)
        self.assertEqual(run.parse_size("2048"), 2048)
        self.assertEqual(run.parse_size("3K"), 3072)
        for bad in ("", "1.5M", "-1M", "12X", "M", "100", "4 M B"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                run.parse_size(bad)

    def test_parse_sets(self):
        self.assertEqual(run.parse_sets("1, 100,dense"), ["1", "100", "dense"])
        for bad in ("", "2", "1,icase,foo"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                run.parse_sets(bad)

    @mock.patch.dict(os.environ)
    def test_defaults_and_overrides(self):
        for name in ("GPUFILTER_BIN", "GPUFILTER_HS_COUNT", "GPUFILTER_GEN_CORPUS", "GPUFILTER_KERNEL_BENCH"):
            os.environ.pop(name, None)
        a = run.parse_args(["--build", "/b", "--rg", "/opt/rg"])
        self.assertEqual(a.size, 256 << 20)
        self.assertEqual(a.sets, run.ALL_SETS)
        self.assertEqual(a.work, Path("/b/bench-work"))
        self.assertEqual(a.gpufilter, Path("/b/gpufilter"))
        self.assertEqual(a.hs_count, Path("/b/bench/gpufilter-hs-count"))
        self.assertEqual(a.rg, Path("/opt/rg"))
        os.environ["GPUFILTER_HS_COUNT"] = "/x/hs"
        self.assertEqual(run.parse_args(["--build", "/b"]).hs_count, Path("/x/hs"))
        self.assertEqual(run.parse_args(["--hs-count", "/y/hs"]).hs_count, Path("/y/hs"))

    def test_agreement(self):
        tools = {"grep": ok(5), "rg": ok(5), "gpufilter": ok(5), "hs": ok(5, None)}
        self.assertEqual(run.check_agreement("1", tools), [])
        self.assertEqual(len(run.check_agreement("1", dict(tools, rg=ok(5, "b")))), 1)
        self.assertEqual(len(run.check_agreement("1", dict(tools, hs=ok(4, None)))), 1)
        # grep timed out: rg is the reference; a failing rg is only a note, a failing gpufilter is not.
        timeout = {"status": "timeout", "seconds": 9, "gbps": 0.1}
        failed = {"status": "failed", "seconds": 1, "message": "exit 2: boom", "gbps": 1}
        self.assertEqual(run.check_agreement("1", dict(tools, grep=timeout)), [])
        self.assertIn("gpufilter selects", run.check_agreement("1", dict(tools, grep=timeout, gpufilter=ok(6)))[0])
        self.assertEqual(run.check_agreement("1", dict(tools, rg=failed)), [])
        self.assertIn("boom", run.check_agreement("1", dict(tools, gpufilter=failed))[0])

    def test_run_once(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            r = run.run_once(["/bin/sh", "-c", "echo x; echo 'gpufilter-stats: {\"a\": 1}' >&2; exit 1"], d, 10)
            self.assertEqual((r["status"], r["rc"], r["stats"]), ("ok", 1, {"a": 1}))
            self.assertEqual((d / "stdout").read_bytes(), b"x\n")
            r = run.run_once(["/bin/sh", "-c", "echo 'rg: regex too big' >&2; exit 2"], d, 10)
            self.assertEqual((r["status"], r["message"]), ("failed", "exit 2: rg: regex too big"))
            r = run.run_once(["/bin/sleep", "5"], d, 0.2)
            self.assertEqual((r["status"], r["seconds"]), ("timeout", 0.2))

    def test_cells(self):
        timeout = {"status": "timeout", "seconds": 60, "gbps": 0.5}
        self.assertEqual(run.speed_cell(ok(1, seconds=0.25), 60), "4.00")
        self.assertEqual(run.speed_cell(timeout, 60), "< 0.5 (timeout > 60 s)")
        self.assertEqual(run.ratio_cell(ok(1, seconds=0.5), ok(1, seconds=1)), "2")
        self.assertEqual(run.ratio_cell(ok(1, seconds=0.5), timeout), "> 4")
        self.assertEqual(run.ratio_cell(timeout, ok(1, seconds=0.5)), "< 0.25")
        self.assertEqual(run.ratio_cell(timeout, timeout), "–")
        skipped = {"status": "skipped", "seconds": None, "gbps": None, "message": "timed out on set 100"}
        self.assertEqual(run.speed_cell(skipped, 60), "skipped")
        self.assertEqual(run.ratio_cell(ok(1), skipped), "–")


def sha1(path):
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


@unittest.skipUnless(os.environ.get("GPUFILTER_GEN_CORPUS") and os.environ.get("GPUFILTER_HS_COUNT"),
                     "GPUFILTER_GEN_CORPUS and GPUFILTER_HS_COUNT name the built programs")
class ProgramsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name)
        cls.loghub = Path(os.environ.get("GPUFILTER_CORPUS_DIR", run.REPO.parent / "shared" / "corpus")) / "loghub"

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def generate(self, name, *args):
        out = self.dir / name
        r = subprocess.run([os.environ["GPUFILTER_GEN_CORPUS"], "--loghub", str(self.loghub), "--out", str(out),
                            *args], capture_output=True, text=True, check=True)
        return out, json.loads(r.stdout)

    def hs_count(self, patterns, data, *flags):
        (self.dir / "p.txt").write_bytes(patterns)
        (self.dir / "d.txt").write_bytes(data)
        r = subprocess.run([os.environ["GPUFILTER_HS_COUNT"], *flags, "-f", str(self.dir / "p.txt"),
                            str(self.dir / "d.txt")], capture_output=True, text=True, check=True)
        return int(r.stdout)

    def test_gen_corpus_is_deterministic_and_well_formed(self):
        a, meta = self.generate("a", "--size", "3M", "--threads", "1")
        b, _ = self.generate("b", "--size", "3M", "--threads", "3")
        c, _ = self.generate("c", "--size", "3M", "--seed", "2")
        names = ["corpus.log"] + [f"patterns-{s}.txt" for s in run.ALL_SETS]
        self.assertEqual([sha1(a / n) for n in names], [sha1(b / n) for n in names])
        self.assertNotEqual(sha1(a / "corpus.log"), sha1(c / "corpus.log"))
        data = (a / "corpus.log").read_bytes()
        self.assertEqual(len(data), 3 << 20)
        self.assertEqual(meta["lines"], data.count(b"\n"))
        self.assertTrue(data.endswith(b"\n") and b"\r" not in data and b"\n\n" not in data)
        for n in run.LITERAL_SETS:
            patterns = (a / f"patterns-{n}.txt").read_bytes().splitlines()
            self.assertEqual(len(patterns), int(n))
            self.assertEqual(len(set(patterns)), int(n))
            tokens = len(n)  # min(N, 1 + floor(log10 N)) rare real tokens lead set N
            self.assertEqual(patterns[:tokens], [t["token"].encode() for t in meta["rare_tokens"]][:tokens])
        icase = (a / "patterns-icase.txt").read_bytes().splitlines()
        self.assertEqual([p.lower() for p in icase], [p.lower() for p in (a / "patterns-100.txt").read_bytes().splitlines()])
        self.assertNotEqual(icase, (a / "patterns-100.txt").read_bytes().splitlines())
        self.assertGreaterEqual(meta["dense_source_line_fraction"], 0.8)

    def test_hs_count_counts_lines_like_grep_c(self):
        data = b"abc\nxabcx abc\n\nzzz\nab\ncABC\nlast abc"
        self.assertEqual(self.hs_count(b"abc\n", data), 3)
        self.assertEqual(self.hs_count(b"abc\n", data, "-i"), 4)
        self.assertEqual(self.hs_count(b"abc\nzz\nnothing\n", data, "--threads", "3"), 4)
        self.assertEqual(self.hs_count(b"c\nx\n", b"c\nx\nc"), 3)                # matches at line edges
        self.assertEqual(self.hs_count(b"abc\r\n", b"abc\nabc\r\n"), 1)           # '\r' is pattern
        self.assertEqual(self.hs_count(b"abc\n\n", data), data.count(b"\n") + 1)  # '' selects all
        self.assertEqual(self.hs_count(b"", data), 0)
        self.assertEqual(self.hs_count(b"abc\n", b""), 0)

    def test_hs_count_on_a_corpus(self):
        a, meta = self.generate("h", "--size", "2M")
        lines = (a / "corpus.log").read_bytes().split(b"\n")[:-1]
        for name in ("100", "dense"):
            patterns = (a / f"patterns-{name}.txt").read_bytes().splitlines()
            expect = sum(any(p in line for p in patterns) for line in lines)
            r = subprocess.run([os.environ["GPUFILTER_HS_COUNT"], "--threads", "4", "-f",
                                str(a / f"patterns-{name}.txt"), str(a / "corpus.log")],
                               capture_output=True, text=True, check=True)
            self.assertEqual(int(r.stdout), expect, name)
            if name == "dense":
                self.assertGreater(expect, 0.8 * meta["lines"])


if __name__ == "__main__":
    unittest.main()
