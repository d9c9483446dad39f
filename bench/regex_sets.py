"""The benchmark's regular-expression sets (bench/run.py --sets templates,logregex,ioc,nofactor,factor,factorlit).

One ERE per line, written so that it means the same in GNU grep -E, ripgrep and Hyperscan
(PCRE syntax): no backslash-letter classes, bracket expressions without backslashes, no
[[:space:]]. Every file is rebuilt on each run (well under a second) and checked with
`LC_ALL=C grep -E -f SET /dev/null` (exit 1, not 2):

- templates: every event template of the Loghub logs (`*_structured.csv`, `*_templates.csv`:
  the EventTemplate column) as one set: ERE metacharacters escaped, `<*>` made `.*`, nothing
  anchored, duplicates dropped; a template grep refuses is dropped and counted.
- logregex: 10 hand-written log regexes, each selecting some (0.2 to 8 %) of the lines.
- ioc: 10,000 generated indicator-of-compromise regexes, deterministic for the seed: random
  domains, URL paths, hash prefixes, mail domains, file names and agent strings that never
  occur, and 10 rare real words of the logs, so that a few lines match.
- nofactor: regexes without a literal factor worth the name (full scans).
- factor and factorlit: one regex with a required literal, and that literal alone (an ERE
  without metacharacters takes the literal path), selecting the same lines (OpenStack's
  instance ids, about 1.7 % of the generated corpus): their ratio is the cost of the regex
  over the literal path at the same match rate (issue 16 asks for at least 0.8).
"""
import csv
import random
import re
import subprocess
from pathlib import Path

REGEX_SETS = ["templates", "logregex", "ioc", "nofactor", "factor", "factorlit"]
ERE_META = set(".[]()*+?{}|^$\\")
IOC_COUNT = 10_000
SAMPLE_BYTES = 4 << 20                              # corpus bytes for the per-regex match rates

LOGREGEX = [
    "Failed password for (invalid user )?[^ ]+ from [0-9.]+ port [0-9]+",
    "(ERROR|WARN).*(fail|timeout|refused|exception|error)",
    "session (opened|closed) for user [a-z_][a-z0-9_-]*",
    "([0-9]{1,3}\\.){3}[0-9]{1,3}:[0-9]{2,5}",
    "[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3} (INFO|WARN|ERROR)",
    "blk_-?[0-9]+ (terminating|of size|src:)",
    "took [0-9]+(\\.[0-9]+)? ?(ms|s|seconds)",
    "uid=[0-9]+ euid=[0-9]+",
    "(GET|POST|PUT|DELETE) /[a-z0-9/._-]+",
    "instance: [0-9a-f]{8}-[0-9a-f]{4}-",
]

FACTOR = "instance: [0-9a-f]{8}-[0-9a-f]{4}-"
FACTOR_LITERAL = "instance: "

NOFACTOR = [
    "[0-9]+$",
    "^[A-Z][a-z]+ +[0-9]+",
    "([a-f0-9]{2}:){5}[a-f0-9]{2}",
    "[0-9]{2}:[0-9]{2}:[0-9]{2} [A-Z]",
]


def ere_escape(text):
    return "".join("\\" + c if c in ERE_META else c for c in text)


def template_regex(template):
    """A Loghub event template as an ERE: the text escaped, each `<*>` made `.*`."""
    return ".*".join(ere_escape(part) for part in template.split("<*>"))


def read_templates(loghub):
    """The distinct templates of every Loghub system, in file order."""
    files = sorted(Path(loghub).glob("*_structured.csv")) + sorted(Path(loghub).glob("*_templates.csv"))
    seen = {}
    for path in files:
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            for row in csv.DictReader(f):
                template = (row.get("EventTemplate") or "").strip()
                if template and "\n" not in template:
                    seen.setdefault(template, path.name)
    return list(seen), len(files)


def grep_refuses(grep, patterns, env):
    """The patterns GNU grep -E refuses (exit 2), each with its message; one call when none."""
    def check(lines):
        r = subprocess.run([str(grep), "-E", "-f", "-", "/dev/null"], input="".join(p + "\n" for p in lines),
                           capture_output=True, text=True, env=env)
        return r.returncode, r.stderr.strip()

    if check(patterns)[0] != 2:
        return []
    refused = []
    for p in patterns:
        rc, message = check([p])
        if rc == 2:
            refused.append((p, message))
    return refused


def random_word(rng, low=5, high=9):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(low, high)))


def ioc_pattern(rng, kind):
    w, w2, hexdigits = random_word(rng), random_word(rng, 4, 7), "0123456789abcdef"
    if kind == 0:
        return f"{w}[0-9]+\\.{w2}\\.(com|net|org)"
    if kind == 1:
        return f"/{w}/[a-z]{{3,8}}\\.(php|asp|jsp)\\?{w2}="
    if kind == 2:
        prefix = "".join(rng.choice(hexdigits) for _ in range(rng.choice((6, 8, 10))))
        return f"{prefix}[0-9a-f]{{{rng.choice((32, 40, 64)) - len(prefix)}}}"
    if kind == 3:
        return f"[a-z0-9._-]+@{w}\\.(ru|cn|top|xyz)"
    if kind == 4:
        return f"{w}\\.(exe|dll|ps1|vbs)"
    if kind == 5:
        return f"{w}-(agent|bot|crawler)/[0-9]+\\.[0-9]+"
    if kind == 6:
        return f"([0-9]{{1,3}}\\.){{3}}[0-9]{{1,3}}/{w}"
    return f"{w}_{w2}=[0-9a-f]{{8,}}"


def rare_words(loghub, low=2, high=10):
    """Words of 8+ letters that 2 to 10 of the Loghub lines hold (the corpus keeps letters)."""
    counts = {}
    for path in sorted(Path(loghub).glob("*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            for word in set(re.findall(r"[A-Za-z]{8,}", line)):
                counts[word] = counts.get(word, 0) + 1
    return sorted(w for w, n in counts.items() if low <= n <= high)


def ioc_patterns(seed, loghub, count=IOC_COUNT):
    rng = random.Random(seed * 1_000_003 + 7)
    words = rare_words(loghub)
    real = [f"{w}[=: ,.]" for w in rng.sample(words, min(10, len(words)))]
    out, seen = [], set(real)
    while len(out) + len(real) < count:
        p = ioc_pattern(rng, len(out) % 8)
        if p not in seen:
            seen.add(p)
            out.append(p)
    step = max(1, len(out) // (len(real) + 1))
    for i, p in enumerate(real):  # spread through the set
        out.insert((i + 1) * step + i, p)
    return out


def sample_rates(patterns, corpus, limit=SAMPLE_BYTES):
    """Per-pattern share of the lines in the first `limit` bytes (Python re reads these EREs alike)."""
    with open(corpus, "rb") as f:
        data = f.read(limit)
    lines = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]
    rates = []
    for p in patterns:
        rx = re.compile(p.encode())
        rates.append(sum(1 for line in lines if rx.search(line)) / max(1, len(lines)))
    return rates


def patterns_for(name, loghub, seed):
    """The patterns of a set, and a note on how they were made."""
    if name == "templates":
        templates, files = read_templates(loghub)
        if not templates:
            raise ValueError(f"no templates: {loghub} holds no *_structured.csv or *_templates.csv")
        regexes = list(dict.fromkeys(template_regex(t) for t in templates))
        return regexes, {"templates": len(templates), "template_files": files}
    if name == "logregex":
        return list(LOGREGEX), {}
    if name == "ioc":
        return ioc_patterns(seed, loghub), {}
    if name == "nofactor":
        return list(NOFACTOR), {}
    if name == "factor":
        return [FACTOR], {}
    if name == "factorlit":
        return [FACTOR_LITERAL], {}
    raise ValueError(f"not a regex set: {name}")


def build(name, work, loghub, seed, grep, env):
    """Writes WORK/patterns-NAME.txt; returns what run.py records about the set. Templates grep
    refuses are dropped; a refusal in the other sets is an error (ValueError)."""
    patterns, info = patterns_for(name, loghub, seed)
    refused = grep_refuses(grep, patterns, env)
    if refused and name != "templates":
        raise ValueError(f"grep -E refuses {len(refused)} pattern(s) of set {name}: {refused[:3]}")
    bad = {p for p, _ in refused}
    patterns = [p for p in patterns if p not in bad]
    path = Path(work) / f"patterns-{name}.txt"
    path.write_text("".join(p + "\n" for p in patterns))
    info.update(patterns=len(patterns), dropped=len(refused), dropped_examples=[m for _, m in refused[:5]])
    return path, info
