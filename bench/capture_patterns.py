#!/usr/bin/env python3
"""The capture benchmarks' pattern files in WORK: p1 (one literal found in the samples),
p100 and p10000 (eight found, the rest absent), the same every run (seed 5).
   bench/capture_patterns.py WORK"""
import random
import sys

work = sys.argv[1]
random.seed(5)
real = ["google", "GET /", "Host:", "MAIL FROM", "www.netbsd.org", "ping", "HTTP/1.1 200", "Location:"]
open(f"{work}/p1", "w").write("google\n")
for n in (100, 10000):
    absent = ["zq%xj%x_never" % (i, random.getrandbits(32)) for i in range(n - len(real))]
    open(f"{work}/p{n}", "w").write("\n".join(real + absent) + "\n")
