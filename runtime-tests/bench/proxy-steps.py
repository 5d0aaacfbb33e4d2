#!/usr/bin/env python3
"""The proxy's steps per request, from REPRORUN_PROXY_TIMING's files (crates/net/src/proxy/timing.rs).

   python3 runtime-tests/bench/proxy-steps.py DIR

For requests made one after another (net.sh's latency loop): every step of both processes,
ordered by time, split into requests at each `h.accepted`; prints the mean time from each
step to the next, and the mean from accept to the helper's record.
"""
import collections
import glob
import sys

steps = []
for path in glob.glob(f"{sys.argv[1]}/rrnet-timing.*"):
    with open(path) as f:
        for line in f:
            ns, step = line.split()
            steps.append((int(ns), step))
steps.sort()
requests, cur = [], []
for ns, step in steps:
    if step == "h.accepted" and cur:
        requests.append(cur)
        cur = []
    cur.append((ns, step))
if cur:
    requests.append(cur)
gaps = collections.defaultdict(list)
order = []
totals = []
for r in requests:
    for (a, sa), (b, sb) in zip(r, r[1:]):
        key = f"{sa} -> {sb}"
        if key not in gaps:
            order.append(key)
        gaps[key].append(b - a)
    done = [ns for ns, s in r if s == "h.recorded"]
    if r[0][1] == "h.accepted" and done:
        totals.append(done[0] - r[0][0])
print(f"{len(requests)} requests")
print(f"{'step':<40}{'count':>7}{'mean us':>10}{'median us':>11}")
for key in order:
    v = sorted(gaps[key])
    print(f"{key:<40}{len(v):>7}{sum(v) / len(v) / 1e3:>10.1f}{v[len(v) // 2] / 1e3:>11.1f}")
if totals:
    t = sorted(totals)
    print(f"{'accepted -> recorded':<40}{len(t):>7}{sum(t) / len(t) / 1e3:>10.1f}{t[len(t) // 2] / 1e3:>11.1f}")
