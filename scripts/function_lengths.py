#!/usr/bin/env python3
"""Lists every C++ function longer than a limit (issue 14: no function over 120 lines).

    scripts/function_lengths.py [--root DIR] [--limit N] [--all] [PATH...]

Reads the tracked .cpp, .hpp and .cc files under pipeline/ sources/ sinks/ cli/ daemon/ fail2ban/
kernels/ examples/ bench/ tests/ (or the PATHs given, files or folders) and prints
`file:line: name: N lines` for each function whose body runs over N lines, longest first;
exits 1 if there is one, 0 otherwise. --all prints every function found, whatever its length.

A function is a brace opened at namespace or class scope at the end of a function
signature (a parameter list followed by nothing or by qualifiers: const, noexcept,
override, final, a trailing return type, a constructor's member initialisers...), up to
its matching closing brace; GoogleTest's TEST, TEST_F and TEST_P bodies are functions
too. Its length counts the lines from the opening brace to the closing one, both
included; the line printed is where its signature starts. Braces in comments, string
and character literals (raw strings included) and preprocessor lines are skipped;
lambdas, local classes and nested blocks belong to the function they are written in.
"""
import argparse
import os
import re
import subprocess
import sys

FOLDERS = ["pipeline", "sources", "sinks", "cli", "daemon", "fail2ban", "kernels", "examples", "bench", "tests"]
EXTENSIONS = (".cpp", ".hpp", ".cc")
RAW_PREFIXES = {"R", "u8R", "uR", "UR", "LR"}


def blank(text):
    """The text with comments, literals' contents and preprocessor lines turned into
    spaces; newlines stay, so offsets and line numbers are those of the file."""
    out = list(text)
    n = len(text)
    i = 0
    line_start = True  # only whitespace since the last newline

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n:  # the directive, with its continuation lines and comments
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                elif text.startswith("/*", j):
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                elif text[j] == "\n":
                    break
                else:
                    j += 1
            wipe(i, j)
            i = j
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            wipe(i, j)
            i = j
        elif c == '"':
            m = re.search(r"[A-Za-z0-9_]+$", text[max(0, i - 64):i])
            if m and m.group(0) in RAW_PREFIXES:
                open_paren = text.find("(", i + 1)
                delim = text[i + 1:open_paren]
                close = text.find(")" + delim + '"', open_paren + 1)
                j = n if close < 0 else close + len(delim) + 1
                wipe(i + 1, j)
                i = j + 1
            else:
                j = i + 1
                while j < n and text[j] != '"' and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                wipe(i + 1, min(j, n))
                i = j + 1
        elif c == "'":
            m = re.search(r"[A-Za-z0-9_.']+$", text[max(0, i - 64):i])
            if m and m.group(0)[0].isdigit():  # a digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            wipe(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def strip_prefixes(header):
    """The declaration without leading access specifiers, attributes and template heads."""
    h = header.strip()
    while True:
        before = h
        h = re.sub(r"^(public|private|protected)\s*:(?!:)\s*", "", h)
        if h.startswith("[["):
            end = h.find("]]")
            h = h[end + 2:].lstrip() if end >= 0 else h
        m = re.match(r"template\s*<", h)
        if m:
            depth, k = 0, m.end() - 1
            while k < len(h):
                if h[k] == "<":
                    depth += 1
                elif h[k] == ">":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            h = h[k + 1:].lstrip()
        if h == before:
            return h


def top_level(h):
    """h with whatever is inside (), [] and {} removed, and the depth at its end."""
    depth, out = 0, []
    for c in h:
        if c in "([{":
            if depth == 0:
                out.append(c)
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    return "".join(out), depth


def parameter_group(h):
    """(name, start, end) of the parameter list: the first top-level (...) that is not
    decltype's, noexcept's or an attribute's, and not the () of `operator()`."""
    depth, k = 0, 0
    while k < len(h):
        c = h[k]
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "(" and depth == 0:
            close, d = k, 0
            while close < len(h):
                d += h[close] == "("
                d -= h[close] == ")"
                if d == 0:
                    break
                close += 1
            before = h[:k].rstrip()
            word = re.search(r"[\w~]*$", before).group(0)
            if word in ("decltype", "alignas", "__attribute__", "noexcept", "sizeof", "alignof"):
                k = close + 1
                continue
            if word == "operator" and h[k + 1:close].strip() == "" and h[close + 1:].lstrip().startswith("("):
                k = close + 1
                continue
            m = re.search(r"((?:[\w~]+\s*::\s*)*(?:operator\s*\S+|[\w~]+))\s*$", before)
            return (m.group(1) if m else before[-40:]), k, close
        k += 1
    return None


FUNCTION_TRAILER = re.compile(
    r"\s*($|const\b|volatile\b|noexcept\b|override\b|final\b|mutable\b|&|->|try\b|requires\b|\[\[)")


def classify(header):
    """What a brace opened at namespace or class scope after `header` opens:
    'namespace', 'class', ('function', name), or 'inline' (an initialiser, an argument,
    a member initialiser: braces that belong to the declaration being read)."""
    h = strip_prefixes(header)
    top, depth = top_level(h)
    if depth > 0:
        return "inline"
    if re.match(r"(inline\s+)?namespace\b", h) or re.fullmatch(r'extern\s*"[^"]*"\s*', h):
        return "namespace"
    if re.match(r"(typedef\s+)?(class|struct|union|enum)\b", h):
        return "class"
    if re.search(r"(?<![=!<>])=(?!=)", re.sub(r"operator\s*\S*=+", "", top)):
        return "inline"
    group = parameter_group(h)
    if group is None:
        return "inline"
    name, start, close = group
    trailer = h[close + 1:]
    if re.match(r"\s*:(?!:)", trailer):  # a constructor's member initialisers
        if not h.rstrip().endswith((")", "}")):
            return "inline"  # a member's braced initialiser: a_{x}
    elif not FUNCTION_TRAILER.match(trailer):
        return "inline"
    if name in ("TEST", "TEST_F", "TEST_P", "TYPED_TEST", "TYPED_TEST_P"):
        name = name + "(" + re.sub(r"\s+", " ", h[start + 1:close].strip()) + ")"
    return ("function", name)


def functions(text):
    """(signature line, brace line, closing line, name) of each function in the text."""
    code = blank(text)
    found = []
    stack = [["root"]]  # kinds: root, namespace, class, function, inline, block
    header, header_line = [], None
    line = 1
    for c in code:
        kind = stack[-1][0]
        if kind in ("root", "namespace", "class"):
            if c == "{":
                what = classify("".join(header))
                if what == "inline":
                    stack.append(["inline"])
                    header.append("{")
                elif what in ("namespace", "class"):
                    stack.append([what])
                    header, header_line = [], None
                else:
                    stack.append(["function", header_line or line, line, what[1]])
                    header, header_line = [], None
            elif c == "}":
                if len(stack) > 1:
                    stack.pop()
                header, header_line = [], None
            elif c == ";" or (c == ":" and "".join(header).strip() in ("public", "private", "protected")):
                header, header_line = [], None
            else:
                if header_line is None and not c.isspace():
                    header_line = line
                header.append(c)
        elif c == "{":
            stack.append(["block"])
        elif c == "}":
            closed = stack.pop()
            if closed[0] == "function":
                found.append((closed[1], closed[2], line, closed[3]))
            elif closed[0] == "inline" and stack[-1][0] in ("root", "namespace", "class"):
                header.append("}")
        if c == "\n":
            line += 1
    return found


def source_files(root, paths):
    if paths:
        files = []
        for p in paths:
            if os.path.isdir(p):
                for d, _, names in os.walk(p):
                    files += [os.path.join(d, f) for f in names if f.endswith(EXTENSIONS)]
            else:
                files.append(p)
        return sorted(files)
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", *FOLDERS],
                                check=True, capture_output=True, text=True).stdout.split("\0")
        return sorted(os.path.join(root, f) for f in listed if f.endswith(EXTENSIONS))
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file there
        return source_files(root, [os.path.join(root, f) for f in FOLDERS if os.path.isdir(os.path.join(root, f))])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--limit", type=int, default=120)
    parser.add_argument("--all", action="store_true", help="print every function, whatever its length")
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    rows = []
    for path in source_files(root, args.paths):
        if not os.path.isfile(path):
            continue  # deleted in the working tree, not yet committed
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        rel = os.path.relpath(os.path.abspath(path), root)
        for start, brace, close, name in functions(text):
            length = close - brace + 1
            if args.all or length > args.limit:
                rows.append((length, rel, start, name))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    for length, rel, start, name in rows:
        print(f"{rel}:{start}: {name}: {length} lines")
    over = [r for r in rows if r[0] > args.limit]
    if over:
        print(f"{len(over)} function(s) over {args.limit} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
