"""The clock-loop suite of suite.sh: reads time.time() and time.monotonic() N times each in
a tight loop (the faked clock's dynamic read inside the sandbox, the vDSO bare) and prints
what a user's program could rely on: how many reads were made and whether either clock went
backwards. The output is the same in both places; the time it takes is what suite.sh
measures."""
import sys
import time


def main():
    n = int(sys.argv[1])
    wall = time.time
    mono = time.monotonic
    back = 0
    last_w = wall()
    last_m = mono()
    for _ in range(n):
        w = wall()
        m = mono()
        if m < last_m:
            back += 1
        last_w, last_m = w, m
    print(f"{2 * n} clock reads, {back} monotonic steps backwards")


main()
