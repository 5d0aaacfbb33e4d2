#!/usr/bin/env python3
"""Start-up through the Python integrations (issue 49) against the CLI: start a sandbox, run
one command (`sh -c 'echo hi'`), end it, through

  cli        `reprorun exec -- sh -c 'echo hi'` from Python's subprocess (the baseline), and
             with `--record` (reprorun's record costs its own time: the host's package digest)
  run        reprorun.run([...]) (with its record parsed; against `cli --record`), and with
             record=False
  sandbox    reprorun.Sandbox: start, exec, stop
  inspect    the Inspect provider: sample_init, exec, sample_cleanup (what a sample costs it;
             Inspect's own eval machinery is not counted)
  swerex     the SWE-ReX deployment: start, runtime.execute, stop; its server (FastAPI and
             uvicorn) imports for most of a second whatever runs it, so it is also set against
             the CLI running that import alone (`swerex-cli`)

in rounds that alternate the ways (median wall time of each, ratio to the CLI's), and one
command in an already running Sandbox (what an agent loop pays per tool call). Not part
of the test suite: timings on a shared machine are noise; read the ratios of one run.

Set-up (offline after .ci/setup), as root:
  python/build.sh /var/tmp/dist            # or REPRORUN_BIN=target/.../reprorun python/build.sh ...
  python3 -m venv /var/tmp/rr && /var/tmp/rr/bin/pip install --no-index \\
      --find-links /var/cache/reprorun/python-wheels -r python/requirements-test.txt /var/tmp/dist/*.whl
  /var/tmp/rr/bin/python runtime-tests/bench/python.py [ROUNDS]
The virtual environment must be outside /tmp and your home (the sandbox sees the host's root
but not those), or the SWE-ReX server cannot start in it.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time

import reprorun

CMD = ["sh", "-c", "echo hi"]


def cli() -> None:
    out = subprocess.run([reprorun.binary(), "exec", "--", *CMD], capture_output=True, stdin=subprocess.DEVNULL)
    assert out.returncode == 0 and out.stdout == b"hi\n", out


def cli_record() -> None:
    with tempfile.TemporaryDirectory() as d:
        argv = [reprorun.binary(), "exec", "--record", f"{d}/r.json", "--", *CMD]
        out = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)
        assert out.returncode == 0 and out.stdout == b"hi\n", out


def run_record() -> None:
    assert reprorun.run(CMD).stdout == b"hi\n"


def run_plain() -> None:
    assert reprorun.run(CMD, record=False).stdout == b"hi\n"


def sandbox() -> None:
    with reprorun.Sandbox() as sb:
        assert sb.exec(CMD).stdout == b"hi\n"


def inspect() -> None:
    from reprorun.inspect_sandbox import ReprorunSandboxEnvironment as Env

    async def sample() -> None:
        envs = await Env.sample_init("bench", None, {})
        try:
            assert (await envs["default"].exec(CMD)).stdout == "hi\n"
        finally:
            await Env.sample_cleanup("bench", None, envs, False)

    asyncio.run(sample())


def swerex() -> None:
    from swerex.runtime.abstract import Command

    from reprorun.swerex_deployment import ReprorunDeployment

    async def once() -> None:
        d = ReprorunDeployment()
        await d.start()
        try:
            assert (await d.runtime.execute(Command(command=CMD))).stdout == "hi\n"
        finally:
            await d.stop()

    asyncio.run(once())


def swerex_cli() -> None:
    code = "import uvicorn, swerex.server"
    out = subprocess.run([reprorun.binary(), "exec", "--", sys.executable, "-c", code], stdin=subprocess.DEVNULL)
    assert out.returncode == 0


WAYS = {
    "cli": cli,
    "cli --record": cli_record,
    "run": run_record,
    "run(record=False)": run_plain,
    "sandbox": sandbox,
    "inspect": inspect,
    "swerex-cli": swerex_cli,
    "swerex": swerex,
}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    scratch = tempfile.TemporaryDirectory(prefix="reprorun-bench-", dir="/var/tmp")
    os.chdir(scratch.name)
    for fn in WAYS.values():  # warm caches (page cache, .pyc files)
        fn()
    times: dict[str, list[float]] = {name: [] for name in WAYS}
    for r in range(rounds):
        order = list(WAYS.items())
        if r % 2:
            order.reverse()
        for name, fn in order:
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    # What an agent loop pays per tool call once its sandbox is up: one exec in a running
    # Sandbox, against a whole CLI start for the same command.
    with reprorun.Sandbox() as sb:
        for _ in range(rounds):
            start = time.perf_counter()
            assert sb.exec(CMD).stdout == b"hi\n"
            times.setdefault("sandbox exec (warm)", []).append(time.perf_counter() - start)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"reprorun {reprorun.__version__}, {rounds} rounds, median wall time (ms) and ratio")
    for name, m in med.items():
        against = {"swerex": "swerex-cli", "run": "cli --record"}.get(name, "cli")
        base = med[against]
        print(f"  {name:<18} {m * 1000:8.1f} ms  {m / base:5.2f}x {against}")
    print(f"  {'swerex':<18} {'':8}     {med['swerex'] / med['cli']:6.1f}x cli (the server's import included)")
    os.chdir("/")
    scratch.cleanup()


if __name__ == "__main__":
    main()
