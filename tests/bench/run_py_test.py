#!/usr/bin/env python3
"""Unit tests of the benchmark harness: bench/run.py's parsing, agreement check and table
cells, the regex sets (bench/regex_sets.py), gpufilter-gen-corpus's determinism and pattern
sets, and gpufilter-hs-count (literal and --regex) against a plain Python count. The
programs come from $GPUFILTER_GEN_CORPUS, $GPUFILTER_HS_COUNT and
the Loghub logs from $GPUFILTER_CORPUS_DIR/loghub (set by tests/bench/CMakeLists.txt)."""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from unittest import mock
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import cases  # noqa: E402  (bench/cases.py)
import run  # noqa: E402  (bench/run.py)
import regex_sets  # noqa: E402  (bench/regex_sets.py)


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
        self.assertEqual(run.parse_sets("templates,logregex,ioc,nofactor,factor,factorlit"), run.REGEX_SETS)
        for bad in ("", "2", "1,icase,foo"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                run.parse_sets(bad)

    @mock.patch.dict(os.environ)
    def test_defaults_and_overrides(self):
        for name in ("GPUFILTER_BIN", "GPUFILTER_HS_COUNT", "GPUFILTER_GEN_CORPUS", "GPUFILTER_KERNEL_BENCH"):
            os.environ.pop(name, None)
        a = run.parse_args(["--build", "/b", "--rg", "/opt/rg"])
        self.assertEqual(a.size, 256 << 20)
        self.assertEqual(a.sets, run.DEFAULT_SETS)
        self.assertEqual(run.DEFAULT_SETS, run.GEN_SETS)  # the regex sets are opt-in
        self.assertEqual(run.ALL_SETS, run.GEN_SETS + run.REGEX_SETS)
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

    def test_commands(self):
        a = argparse.Namespace(gpufilter="G", grep="g", rg="r", hs_count="h", stats=True, device=None, threads=None,
                               engine=None)
        self.assertEqual(run.command(a, "gpufilter", "P", False, "C", True), ["G", "--stats", "-E", "-f", "P", "C"])
        a.engine = "cpu"  # --engine: gpufilter alone takes it
        self.assertEqual(run.command(a, "gpufilter", "P", False, "C"), ["G", "--stats", "--engine=cpu", "-F", "-f", "P", "C"])
        self.assertEqual(run.command(a, "grep", "P", False, "C"), ["g", "-F", "-f", "P", "C"])
        a.engine = None
        self.assertEqual(run.command(a, "gpufilter", "P", True, "C"), ["G", "--stats", "-F", "-i", "-f", "P", "C"])
        self.assertEqual(run.command(a, "grep", "P", False, "C", True), ["g", "-E", "-f", "P", "C"])
        self.assertEqual(run.command(a, "grep", "P", False, "C"), ["g", "-F", "-f", "P", "C"])
        self.assertEqual(run.command(a, "rg", "P", False, "C", True)[:2], ["r", "--no-config"])
        self.assertEqual(run.command(a, "rg", "P", False, "C")[:2], ["r", "-F"])
        self.assertEqual(run.command(a, "hs", "P", False, "C", True), ["h", "--compile-ms", "--regex", "-f", "P", "C"])

    def test_regex_table_columns(self):
        gpu = dict(ok(3), stats={"regex_candidates": 1234, "regex_confirmed": 3})
        tools = {"gpufilter": gpu, "grep": ok(3), "rg": ok(3), "hs": ok(3, None)}
        sets = {"100": {"lines": 3, "regex": False, "tools": tools, "kernel": {"status": "n/a"}},
                "logregex": {"lines": 3, "regex": True, "tools": tools, "kernel": {"status": "n/a"}}}
        results = {"corpus": {"lines": 10}, "sets": sets}
        rows = run.table(results, 60).splitlines()
        self.assertTrue(rows[0].endswith("| regex_candidates | regex_confirmed | regex_full_scan_lines |"))
        self.assertTrue(rows[2].endswith("| - | - | - |"))
        self.assertTrue(rows[3].startswith("| logregex (-E) |") and rows[3].endswith("| 1,234 | 3 | - |"))
        literal_only = run.table({"corpus": {"lines": 10}, "sets": {"100": sets["100"]}}, 60).splitlines()
        self.assertNotIn("regex_candidates", literal_only[0])

    def test_template_regex(self):
        self.assertEqual(regex_sets.template_regex("Invalid user <*> from <*>"), "Invalid user .* from .*")
        self.assertEqual(regex_sets.template_regex("a.b[c](d)*+?{e}|^$\\ <*>x"),
                         "a\\.b\\[c\\]\\(d\\)\\*\\+\\?\\{e\\}\\|\\^\\$\\\\ .*x")
        for text in ("a.b[c](d)*+?{e}|^$\\ z", "x-/=:,'\"#&%"):  # an escaped template matches itself only
            rx = re.compile(regex_sets.template_regex(text))
            self.assertTrue(rx.fullmatch(text), text)
            if "." in text:
                self.assertIsNone(rx.search(text.replace(".", "Q")), text)

    @unittest.skipUnless(Path("/bin/grep").is_file(), "GNU grep at /bin/grep")
    def test_grep_refuses(self):
        env = dict(os.environ, LC_ALL="C")
        self.assertEqual(regex_sets.grep_refuses("/bin/grep", ["a.*b", "x\\(y"], env), [])
        refused = regex_sets.grep_refuses("/bin/grep", ["ok", "a(b", "c[d", "fine"], env)
        self.assertEqual([p for p, _ in refused], ["a(b", "c[d"])
        for p in regex_sets.LOGREGEX + regex_sets.NOFACTOR:  # no backslash-letter classes, no [[:space:]]
            self.assertIsNone(re.search(r"\\[a-zA-Z]|\[\[:", p), p)
        self.assertEqual(len(regex_sets.LOGREGEX), 10)

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


    def test_cases(self):
        self.assertEqual(run.parse_cases("first-line,capture"), ["first-line", "capture"])
        self.assertEqual(run.parse_cases("none"), [])
        with self.assertRaises(argparse.ArgumentTypeError):
            run.parse_cases("first-line,files")
        self.assertEqual(run.parse_args(["--build", "/b"]).cases, cases.CASES)
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus.log"
            corpus.write_bytes(b"".join(b"line %d of the corpus\n" % i for i in range(100000)))
            literal = cases._first_line_literal(corpus)
            data = corpus.read_bytes()
            self.assertGreaterEqual(data.find(literal.encode()), cases.FIRST_LINE_AT)
            files = cases._cut_files(corpus, Path(tmp) / "files", 50, 1 << 16)  # more than the corpus holds
            self.assertEqual(len(files), 50)
            for f in files:
                piece = f.read_bytes()
                self.assertGreaterEqual(len(piece), 1 << 16)
                self.assertTrue(piece.endswith(b"\n") and piece in data)
        table = cases.table({"files500x20K": {"what": "w", "unit": "s", "tools": {
            "gpufilter": ok(3, seconds=0.5), "grep": ok(3, seconds=1.0), "rg": {"status": "timeout", "seconds": 9}}}})
        self.assertIn("| files500x20K: w | 0.500 s (2 GB/s) | 1.000 s (1 GB/s) | timeout | – | 2× as fast |", table)


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
        names = ["corpus.log"] + [f"patterns-{s}.txt" for s in run.GEN_SETS]
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

    def test_hs_count_regex_counts_lines_like_grep_e_c(self):
        data = b"abc\nxabcx abc\n\nzzz\nab\ncABC\nlast abc"
        cases = {"abc$": 3, "^ab": 2, "^": 7, "$": 7, "^$": 1, "x*": 7, "[^a]+c": 3, "b[^b]+b": 1, "[^]a]x": 1,
                 "a.c": 3, "^[a-z]+$": 3, "c[^x]*a": 0, "(zz|ab)c": 3, "[A-Z]{3}": 1}
        for pattern, lines in cases.items():  # negated classes and . never cross a newline
            self.assertEqual(self.hs_count(pattern.encode() + b"\n", data, "--regex", "--threads", "3"), lines, pattern)
        self.assertEqual(self.hs_count(b"ABC\n", data, "--regex", "-i"), 4)
        self.assertEqual(self.hs_count(b"^\n", b"a\nb\n", "--regex"), 2)  # no line after the last newline
        (self.dir / "p.txt").write_bytes(b"a(b\nfine\n[z\n")
        r = subprocess.run([os.environ["GPUFILTER_HS_COUNT"], "--regex", "-f", str(self.dir / "p.txt"),
                            str(self.dir / "d.txt")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("refuses 2 of 3 patterns", r.stderr)
        self.assertIn("pattern 1 'a(b'", r.stderr)
        self.assertIn("pattern 3 '[z'", r.stderr)

    def test_regex_sets_on_a_corpus(self):
        a, _ = self.generate("r", "--size", "2M")
        lines = (a / "corpus.log").read_bytes().split(b"\n")[:-1]
        env = dict(os.environ, LC_ALL="C")
        for name in ("logregex", "nofactor"):
            path, info = regex_sets.build(name, a, self.loghub, 1, "/bin/grep", env)
            self.assertEqual(info["dropped"], 0, name)
            patterns = [re.compile(p.encode()) for p in path.read_text().splitlines()]  # same meaning in Python re
            expect = sum(any(rx.search(line) for rx in patterns) for line in lines)
            r = subprocess.run([os.environ["GPUFILTER_HS_COUNT"], "--regex", "--threads", "4", "-f", str(path),
                                str(a / "corpus.log")], capture_output=True, text=True, check=True)
            self.assertEqual(int(r.stdout), expect, name)
            if name == "logregex":
                self.assertTrue(0.05 * len(lines) < expect < 0.5 * len(lines), expect)
        # The templates: Python re backtracks for minutes on their many .*; grep -E -c on 300 lines.
        path, info = regex_sets.build("templates", a, self.loghub, 1, "/bin/grep", env)
        self.assertGreater(info["patterns"], 1000)
        (self.dir / "few.log").write_bytes(b"".join(line + b"\n" for line in lines[:300]))
        expect = subprocess.run(["/bin/grep", "-E", "-c", "-f", str(path), str(self.dir / "few.log")],
                                capture_output=True, text=True, env=env).stdout
        r = subprocess.run([os.environ["GPUFILTER_HS_COUNT"], "--regex", "-f", str(path), str(self.dir / "few.log")],
                           capture_output=True, text=True, check=True)
        self.assertEqual(int(r.stdout), int(expect))
        ioc = regex_sets.ioc_patterns(1, self.loghub)
        self.assertEqual(len(ioc), regex_sets.IOC_COUNT)
        self.assertEqual(len(set(ioc)), len(ioc))
        self.assertEqual(ioc, regex_sets.ioc_patterns(1, self.loghub))
        self.assertNotEqual(ioc, regex_sets.ioc_patterns(2, self.loghub))

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
