#!/usr/bin/env python3
"""One line of cluster.sh's phases: NAME T0 T1 T2 T3 STAMPS (see cluster.sh's slurm_run)."""
import sys

n, t0, t1, t2, t3 = sys.argv[1], *map(float, sys.argv[2:6])
st = {}
with open(sys.argv[6]) as f:
    for line in f:
        k, v = line.split()
        st.setdefault(k, []).append(float(v))
ws, we = min(st["work-start"]), max(st["work-end"])
ms, me = st["merge-start"][0], st["merge-end"][0]
print(f"{n:<6}{t1-t0:>7.2f}{t2-t1:>9.2f}{ws-t2:>13.2f}{we-ws:>8.2f}{ms-we:>10.2f}{me-ms:>8.2f}{t3-me:>9.2f}{t3-t0:>8.2f}")
