"""Peak resident memory of reprorun's host-side processes per sandbox (issue 50), used by
memory.sh: runs `BIN exec ARGS -- CMD` RUNS times, samples the supervisor (the `reprorun`
process) and its host-side helpers (children in the host's pid namespace: the network
namespace's helper, the proxy's privilege-separated helper; not init, which is the sandbox's)
every 2 ms. The supervisor's peak is its `VmHWM`, the kernel's own high-water mark of the
resident set (no peak between samples is missed: the last sample before exit holds it); it
counts the pages of the binary read in (`RssFile`), which the helpers, forked from it, share.
So the anonymous part (`RssAnon`: heap, stacks; what grows with the work) is printed too, the
highest sample of it (a peak shorter than 2 ms can be missed).

    python3 memory.py NAME RUNS BIN EXEC-ARGS... -- CMD...

Prints one line: NAME, then the medians (and maxima) over the runs of the supervisor's
VmHWM and peak RssAnon, and of the helpers' (summed over helpers alive at once), in KiB.
"""

import os
import statistics
import subprocess
import sys
import time


def status(pid):
    """(VmHWM, RssAnon in KiB, number of NSpid entries) of pid, or None once it is gone
    (or a zombie, which has no memory left)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except (FileNotFoundError, ProcessLookupError):
        return None
    if "VmHWM" not in fields:
        return None
    kib = lambda k: int(fields.get(k, "0 kB").split()[0])
    return kib("VmHWM"), kib("RssAnon"), len(fields.get("NSpid", "").split())


def children(pid):
    """The pids of pid's children (over all its threads)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def one(argv):
    """One run: [supervisor's VmHWM, its peak RssAnon, helpers' VmHWM, helpers' RssAnon]."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    peak = [0, 0, 0, 0]
    while proc.poll() is None:
        s = status(proc.pid)
        if s is not None:
            peak[0], peak[1] = max(peak[0], s[0]), max(peak[1], s[1])
        hwm = anon = 0
        for c in children(proc.pid):
            cs = status(c)
            # In the host's pid namespace only: init and the workload are the sandbox's.
            if cs is not None and cs[2] == 1:
                hwm, anon = hwm + cs[0], anon + cs[1]
        peak[2], peak[3] = max(peak[2], hwm), max(peak[3], anon)
        time.sleep(0.002)
    if proc.returncode != 0:
        sys.exit(f"memory.py: {' '.join(argv)} exited with {proc.returncode}")
    return peak


def main():
    name, runs, exe = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rest = sys.argv[4:]
    argv = [exe, "exec"] + rest
    cols = list(zip(*(one(argv) for _ in range(runs))))
    med = [f"{statistics.median(c):.0f} ({max(c)})" for c in cols]
    print(
        f"{name:<34} supervisor VmHWM {med[0]:>15} RssAnon {med[1]:>13}"
        f" | helpers VmHWM {med[2]:>15} RssAnon {med[3]:>13}  KiB, median (max) of {runs}"
    )


if __name__ == "__main__":
    main()
