"""reprorun from Python: a typed API over the ``reprorun`` binary this package ships.

- :func:`run` / :func:`run_async`: one command in a fresh sandbox, with its run record;
- :class:`Sandbox` / :class:`AsyncSandbox`: a sandbox that stays up for an agent loop;
- :mod:`reprorun.inspect_sandbox`: the Inspect sandbox provider (``sandbox="reprorun"``);
- :mod:`reprorun.swerex_deployment`: a SWE-ReX deployment.

``spec/harness.md`` maps every option to the command line.
"""

from .errors import BinaryNotFound, CommandFailed, FileTooLarge, ReprorunError, SandboxClosed
from .options import Options
from .record import Clock, Connection, Plan, Record, Rusage
from .run import Result, run, run_async
from .sandbox import AsyncSandbox, ExecResult, Sandbox
from ._binary import binary

__version__ = "0.0.0"  # replaced by build.sh with the binary's version

__all__ = [
    "AsyncSandbox",
    "BinaryNotFound",
    "Clock",
    "CommandFailed",
    "Connection",
    "ExecResult",
    "FileTooLarge",
    "Options",
    "Plan",
    "Record",
    "ReprorunError",
    "Result",
    "Rusage",
    "Sandbox",
    "SandboxClosed",
    "binary",
    "run",
    "run_async",
]
