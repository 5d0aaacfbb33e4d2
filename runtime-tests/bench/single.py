#!/usr/bin/env python3
"""Wall time of single starts: each command run in turn, a pause after every run.

    single.py RUNS PAUSE_MS NAME=CMD...

Runs the commands alternately (each round in a shuffled order), RUNS times each
(after 3 untimed rounds), output to /dev/null, sleeping PAUSE_MS after every run, and prints NAME<TAB>MEDIAN_MS per command: the
wall time from the start until the command itself exits, as a user waiting for one command
sees it. hyperfine runs each command's runs back to back instead, so whatever a command
leaves to finish after it has exited (bubblewrap's parent exits without waiting for its
namespaced child's teardown) lands on its own next run there, and on the next command's
run in an alternation without pauses; the pause lets it finish before anything is timed.
"""
import os
import random
import statistics
import sys
import time


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit("usage: single.py RUNS PAUSE_MS NAME=CMD...")
    runs, pause = int(sys.argv[1]), float(sys.argv[2]) / 1000
    commands = [arg.split("=", 1) for arg in sys.argv[3:]]
    walls = {name: [] for name, _ in commands}
    null = os.open("/dev/null", os.O_WRONLY)
    # Each round in an order of its own (shuffled, the same every time the script runs): what
    # a command leaves behind when it exits (bubblewrap's or runc's sandbox torn down after
    # them, under load outlasting the pause) lands on whichever command comes next, so no
    # command may always follow the same one.
    order = random.Random(0)
    for i in range(runs + 3):
        for name, cmd in order.sample(commands, len(commands)):
            argv = cmd.split()
            start = time.perf_counter()
            pid = os.posix_spawnp(argv[0], argv, os.environ,
                                  file_actions=[(os.POSIX_SPAWN_DUP2, null, 1)])
            _, status = os.waitpid(pid, 0)
            elapsed = time.perf_counter() - start
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit(f"single.py: {name} failed: {cmd}")
            if i >= 3:
                walls[name].append(elapsed * 1000)
            time.sleep(pause)
    for name, _ in commands:
        print(f"{name}\t{statistics.median(walls[name]):.3f}")


main()
