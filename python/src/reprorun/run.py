"""One command in a fresh sandbox: ``reprorun exec`` with a typed result."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ._binary import binary
from .errors import RUNTIME_ERROR, CommandFailed, ReprorunError, error_line
from .options import Options
from .record import Record

# A record is a few kilobytes; one far larger was not written by reprorun.
_RECORD_LIMIT = 64 << 20


@dataclass(frozen=True)
class Result:
    """How a command in a sandbox ended: its exit status (124 on ``timeout``, 128+N on a
    signal), its output, and the run record (``None`` with ``record=False``)."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    record: Record | None

    @property
    def ok(self) -> bool:
        """The command exited 0."""
        return self.exit_code == 0

    def check(self) -> "Result":
        """This result, or :class:`CommandFailed` when the command exited non-zero."""
        if self.exit_code != 0:
            raise CommandFailed(self.exit_code, self.stderr)
        return self


def command_line(argv: Sequence[str], options: Options, record_path: str | None) -> list[str]:
    """The ``reprorun exec`` command line that runs ``argv`` with ``options``."""
    if isinstance(argv, str):
        raise TypeError("argv is a list of strings, not one string")
    if not argv:
        raise ValueError("argv must name a command")
    args = [binary(), "exec", *options.to_args()]
    if record_path is not None:
        args += ["--record", record_path]
    return [*args, "--", *argv]


def _options(options: Options | None, kwargs: dict[str, Any]) -> Options:
    base = options or Options()
    return base.replace(**kwargs) if kwargs else base


def _finish(code: int, stdout: bytes, stderr: bytes, record_path: str | None) -> Result:
    record = None
    if record_path is not None and os.path.exists(record_path):
        with open(record_path, "rb") as f:
            raw = f.read(_RECORD_LIMIT + 1)
        if len(raw) > _RECORD_LIMIT:
            raise ReprorunError("the run record is over 64 MiB")
        try:
            record = Record.parse(json.loads(raw))
        except ValueError as e:
            raise ReprorunError(f"unreadable run record: {e}") from e
    if code == RUNTIME_ERROR:
        # 125 is reprorun's own failure when its record says so, or when it wrote none (it
        # stopped before running anything); otherwise the command itself exited 125.
        if record is not None and record.error is not None:
            raise ReprorunError(record.error)
        if record is None:
            message = error_line(stderr)
            if message is not None or record_path is not None:
                raise ReprorunError(message or "reprorun failed without a message")
    return Result(code, stdout, stderr, record)


def run(
    argv: Sequence[str],
    *,
    options: Options | None = None,
    input: bytes | None = None,
    record: bool = True,
    **kwargs: Any,
) -> Result:
    """Run ``argv`` in a fresh sandbox and wait for it.

    Keyword arguments are :class:`Options` fields (``date=``, ``clock=``, ``seed=``, ``env=``,
    ``workdir=``, ``image=``, ``allow_hosts=``, ``timeout=``, ``memory=``, ...), applied over
    ``options``. ``input`` is the command's standard input (none by default). Raises
    :class:`ReprorunError` with reprorun's one-line message when reprorun itself fails (exit 125);
    the command's own failures are in :attr:`Result.exit_code`.

    >>> run(["date", "+%Y"], date="2020-06-01").stdout
    b'2020\\n'
    """
    opts = _options(options, kwargs)
    tmp = tempfile.mkdtemp(prefix="reprorun-") if record else None
    try:
        path = str(Path(tmp) / "record.json") if tmp else None
        proc = subprocess.run(
            command_line(argv, opts, path),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        return _finish(proc.returncode, proc.stdout, proc.stderr, path)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


async def run_async(
    argv: Sequence[str],
    *,
    options: Options | None = None,
    input: bytes | None = None,
    record: bool = True,
    **kwargs: Any,
) -> Result:
    """:func:`run` for asyncio: the same arguments, result and errors."""
    opts = _options(options, kwargs)
    tmp = tempfile.mkdtemp(prefix="reprorun-") if record else None
    try:
        path = str(Path(tmp) / "record.json") if tmp else None
        proc = await asyncio.create_subprocess_exec(
            *command_line(argv, opts, path),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            stdout, stderr = await proc.communicate(input)
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        assert proc.returncode is not None
        return _finish(proc.returncode, stdout, stderr, path)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
