#!/usr/bin/env python3
"""CPU time of a command's whole process tree, per run.

    treecpu.py RUNS CMD [ARG...]

Runs CMD RUNS times (output to /dev/null) as a child subreaper (PR_SET_CHILD_SUBREAPER):
whatever the command leaves behind when it exits (bubblewrap's parent exits without waiting
for its namespaced child; a runtime's daemonised helper) is re-parented here and reaped, so
its user and system time reach this process's RUSAGE_CHILDREN like the command's own.
Prints the mean user+system milliseconds per run. hyperfine's user+system comes from the
same rusage without the subreaper and so misses such processes. Work the kernel defers to
its own threads (a network namespace's cleanup) is counted for no command.
"""
import ctypes
import os
import resource
import sys

PR_SET_CHILD_SUBREAPER = 36


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: treecpu.py RUNS CMD [ARG...]")
    runs, argv = int(sys.argv[1]), sys.argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"treecpu.py: prctl: {os.strerror(ctypes.get_errno())}")
    null = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions)
        while True:  # the command, then everything it left to us
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"{cpu / runs * 1000:.3f}")


if __name__ == "__main__":
    main()
