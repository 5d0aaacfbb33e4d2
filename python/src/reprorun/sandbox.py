"""A long-lived sandbox for agent loops: one ``reprorun exec`` whose command is a small command
server (``_server.py``), so every call runs in the same filesystem, clock and namespaces
without starting a new sandbox.

Why not the OCI lifecycle (create/start/exec/delete)? It needs a bundle (a rootfs directory
and a ``config.json``) and a state directory per sandbox, and each ``exec`` is a reprorun start
of its own; the server costs one start per sandbox and a pipe round trip per call, works the
same for root and unprivileged callers, and keeps every ``exec`` option (image, allowlist,
workdir, limits) as it is. Its cost: the root must have a ``python3`` (the host's does).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Coroutine, Mapping, Sequence, TypeVar

from ._binary import binary
from .errors import FileTooLarge, ReprorunError, SandboxClosed, error_line
from .options import Options

_SERVER = (Path(__file__).with_name("_server.py")).read_text()
# One reply line: a command's output (16 MiB a stream by default) base64-encoded, twice.
_LINE_LIMIT = 96 << 20
_STDERR_LIMIT = 64 << 10
T = TypeVar("T")


@dataclass(frozen=True)
class ExecResult:
    """How one command in a sandbox ended. ``exit_code`` is 128+N for a signal; ``timed_out``
    says the call's ``timeout`` killed it; ``truncated`` that output was cut at the limit."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class AsyncSandbox:
    """A sandbox that stays up between commands (asyncio). Use ``async with`` or
    :meth:`start`/:meth:`stop`.

    >>> async with AsyncSandbox(date="2020-01-01") as sb:
    ...     await sb.write_file("notes.txt", b"hi")
    ...     (await sb.exec(["cat", "notes.txt"])).stdout
    b'hi'

    Relative paths are relative to /work, the sandbox's working directory: a fresh host
    directory of its own (removed at :meth:`stop`) unless ``workdir`` names one.
    """

    def __init__(self, *, options: Options | None = None, python: str = "python3", **kwargs: Any):
        base = options or Options()
        self.options = base.replace(**kwargs) if kwargs else base
        self.python = python
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._stderr = bytearray()
        self._own_workdir: str | None = None
        self._closed: str | None = None

    @property
    def workdir(self) -> str | None:
        """The host directory mounted at /work."""
        return self.options.workdir

    async def __aenter__(self) -> "AsyncSandbox":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the sandbox; :class:`ReprorunError` with reprorun's message when it cannot."""
        if self._proc is not None:
            raise ReprorunError("the sandbox is already started")
        if self.options.workdir is None:
            self._own_workdir = tempfile.mkdtemp(prefix="reprorun-sandbox-")
            self.options = self.options.replace(workdir=self._own_workdir)
        argv = [binary(), "exec", *self.options.to_args(), "--"]
        argv += [self.python, "-I", "-S", "-u", "-c", _SERVER]
        self._proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            limit=_LINE_LIMIT,
        )
        asyncio.get_running_loop().create_task(self._collect_stderr())
        assert self._proc.stdout is not None
        first = await self._proc.stdout.readline()
        if not first.startswith(b'{"ready":true'):
            code = await self._proc.wait()
            await asyncio.sleep(0)
            message = error_line(bytes(self._stderr)) or f"the sandbox's server did not start (exit {code})"
            await self._cleanup()
            raise ReprorunError(message, code)
        self._reader = asyncio.get_running_loop().create_task(self._read_replies())

    async def _collect_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(65536):
            room = _STDERR_LIMIT - len(self._stderr)
            if room > 0:
                self._stderr += chunk[:room]

    async def _read_replies(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            while line := await self._proc.stdout.readline():
                try:
                    reply = json.loads(line)
                    future = self._pending.pop(int(reply["id"]))
                except (ValueError, KeyError, TypeError):
                    continue
                if not future.done():
                    future.set_result(reply)
        except (asyncio.LimitOverrunError, ValueError):
            # A reply over the line limit is not one the server writes: end the sandbox
            # rather than buffer without bound or wait on a server that keeps writing.
            self._stderr += b"\nreprorun: the sandbox's server sent a reply over the line limit\n"
            self._proc.kill()
            # wait() returns once the pipes are closed too: read what is left to the end.
            while await self._proc.stdout.read(1 << 16):
                pass
        code = await self._proc.wait()
        reason = error_line(bytes(self._stderr)) or f"the sandbox ended (exit {code})"
        self._closed = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(SandboxClosed(reason, code))
        self._pending.clear()

    async def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._proc is None or self._proc.stdin is None:
            raise SandboxClosed("the sandbox is not started")
        if self._closed is not None:
            raise SandboxClosed(self._closed)
        rid = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        self._proc.stdin.write(json.dumps({**request, "id": rid}).encode() + b"\n")
        try:
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as e:
            self._pending.pop(rid, None)
            raise SandboxClosed(self._closed or "the sandbox ended") from e
        return await future

    @staticmethod
    def _raise(reply: Mapping[str, Any], path: str) -> None:
        if "error" not in reply:
            return
        kind, message = reply.get("kind"), str(reply["error"])
        if kind == "not_found":
            raise FileNotFoundError(message)
        if kind == "is_directory":
            raise IsADirectoryError(message)
        if kind == "permission":
            raise PermissionError(message)
        if kind == "too_large":
            raise FileTooLarge(message)
        raise OSError(f"{path}: {message}")

    async def exec(
        self,
        argv: Sequence[str],
        *,
        input: bytes | str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the sandbox and wait for it. ``timeout`` (seconds) kills the
        command's process group; what the command started in the background ends with it."""
        if isinstance(argv, str) or not argv:
            raise ValueError("argv is a non-empty list of strings")
        data = input.encode() if isinstance(input, str) else input
        reply = await self._call(
            {
                "op": "exec",
                "argv": list(argv),
                "input": None if data is None else base64.b64encode(data).decode(),
                "cwd": cwd,
                "env": dict(env or {}),
                "timeout": timeout,
            }
        )
        if "error" in reply:
            # The command could not start: as a shell reports it.
            code = 127 if reply.get("kind") == "not_found" else 126
            return ExecResult(code, b"", str(reply["error"]).encode() + b"\n")
        return ExecResult(
            int(reply["exit_code"]),
            base64.b64decode(reply["stdout"]),
            base64.b64decode(reply["stderr"]),
            bool(reply.get("timed_out")),
            bool(reply.get("truncated")),
        )

    async def read_file(self, path: str, *, limit: int = 64 << 20) -> bytes:
        """The bytes of ``path`` in the sandbox (``FileNotFoundError`` etc. as Python raises;
        :class:`FileTooLarge` over ``limit`` bytes, at most 64 MiB)."""
        reply = await self._call({"op": "read", "path": path, "limit": limit})
        self._raise(reply, path)
        return base64.b64decode(reply["data"])

    async def write_file(self, path: str, data: bytes | str) -> None:
        """Write ``data`` to ``path`` in the sandbox, creating its parent directories."""
        raw = data.encode() if isinstance(data, str) else data
        reply = await self._call({"op": "write", "path": path, "data": base64.b64encode(raw).decode()})
        self._raise(reply, path)

    async def stop(self, timeout: float = 10.0) -> None:
        """End the sandbox: close the server's input, wait, kill it if it lingers."""
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
        if self._reader is not None:
            await self._reader
        await self._cleanup()

    async def _cleanup(self) -> None:
        self._closed = self._closed or "the sandbox is stopped"
        if self._own_workdir is not None:
            shutil.rmtree(self._own_workdir, ignore_errors=True)
            self._own_workdir = None


class Sandbox:
    """:class:`AsyncSandbox` for synchronous code: the same methods, run on a private event
    loop thread.

    >>> with Sandbox(date="2020-01-01", seed=7) as sb:
    ...     sb.exec(["sh", "-c", "date +%Y > year"])
    ...     sb.read_file("year")
    b'2020\\n'
    """

    def __init__(self, *, options: Options | None = None, python: str = "python3", **kwargs: Any):
        self._inner = AsyncSandbox(options=options, python=python, **kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.is_closed():
            coro.close()
            raise SandboxClosed("the sandbox is stopped")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def workdir(self) -> str | None:
        """The host directory mounted at /work."""
        return self._inner.workdir

    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """See :meth:`AsyncSandbox.start`."""
        self._wait(self._inner.start())

    def exec(self, argv: Sequence[str], **kwargs: Any) -> ExecResult:
        """See :meth:`AsyncSandbox.exec`."""
        return self._wait(self._inner.exec(argv, **kwargs))

    def read_file(self, path: str, *, limit: int = 64 << 20) -> bytes:
        """See :meth:`AsyncSandbox.read_file`."""
        return self._wait(self._inner.read_file(path, limit=limit))

    def write_file(self, path: str, data: bytes | str) -> None:
        """See :meth:`AsyncSandbox.write_file`."""
        self._wait(self._inner.write_file(path, data))

    def stop(self) -> None:
        """See :meth:`AsyncSandbox.stop`; also ends the private event loop."""
        if self._loop.is_closed():
            return
        try:
            self._wait(self._inner.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
