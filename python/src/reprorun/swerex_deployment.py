"""A SWE-ReX deployment that runs ``swerex-remote``'s server inside a reprorun sandbox, as
SWE-ReX's docker and modal deployments run it in a container or a Modal sandbox.

How the host reaches the server: the deployment opens a listening TCP socket on the host's
loopback (a free port) and hands that one descriptor to the sandbox (``--preserve-fds``); the
server (uvicorn, ``fd=``) accepts on it. The sandbox keeps its own network namespace (loopback
only, or the egress allowlist): it can accept on that socket but not connect anywhere through
it, and no path is shared. The isolation cost: one port on the host's loopback, reachable by
local processes of the host, guarded by SWE-ReX's per-deployment auth token (as docker's
``-p PORT:8000`` is).

The server runs with the host's interpreter (``python``, default this one), which must see
``swe-rex`` installed and be visible in the sandbox (the host's root is, read-only, except
/tmp and the caller's home: a virtual environment there is not).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from pydantic import BaseModel, ConfigDict
from swerex.deployment.abstract import AbstractDeployment
from swerex.deployment.hooks.abstract import CombinedDeploymentHook, DeploymentHook
from swerex.exceptions import DeploymentNotStartedError
from swerex.runtime.abstract import IsAliveResponse
from swerex.runtime.config import RemoteRuntimeConfig
from swerex.runtime.remote import RemoteRuntime

from ._binary import binary
from .errors import ReprorunError, error_line
from .options import Options

_SERVE = (
    "import sys, uvicorn, swerex.server as s; s.AUTH_TOKEN = sys.argv[1]; "
    "uvicorn.run(s.app, fd=int(sys.argv[2]), log_level='warning')"
)


class ReprorunDeploymentConfig(BaseModel):
    """The deployment's settings: reprorun's options (``spec/harness.md``) and SWE-ReX's."""

    model_config = ConfigDict(extra="forbid")

    date: str | None = None
    clock: str | None = None
    seed: int | None = None
    env: dict[str, str] = {}
    workdir: str | None = None
    image: str | None = None
    allow_hosts: list[str] = []
    timeout: float | str | None = None
    memory: str | int | None = None
    pids: int | None = None
    cpus: int | None = None
    binds: list[str] = []
    extra_args: list[str] = []
    python: str = sys.executable
    """The interpreter (with swe-rex installed) that runs the server inside the sandbox."""
    startup_timeout: float = 60.0
    """Seconds to wait for the server to answer."""
    runtime_timeout: float = 60.0
    """SWE-ReX's timeout for one request to the server."""

    def options(self) -> Options:
        fields = self.model_dump(exclude={"python", "startup_timeout", "runtime_timeout"})
        return Options.from_mapping(fields)


class ReprorunDeployment(AbstractDeployment):
    """``ReprorunDeployment(date="2020-01-01", allow_hosts=["pypi.org"])``; then ``await
    start()``, use :attr:`runtime` (a SWE-ReX ``RemoteRuntime``), ``await stop()``."""

    def __init__(self, *, logger: logging.Logger | None = None, **kwargs: Any) -> None:
        self.logger = logger or logging.getLogger("rex-deploy")
        self._config = ReprorunDeploymentConfig(**kwargs)
        self._hooks = CombinedDeploymentHook()
        self._runtime: RemoteRuntime | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._own_workdir: str | None = None

    @classmethod
    def from_config(cls, config: ReprorunDeploymentConfig) -> "ReprorunDeployment":
        return cls(**config.model_dump())

    def add_hook(self, hook: DeploymentHook) -> None:
        self._hooks.add_hook(hook)

    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        if self._runtime is None or self._proc is None:
            raise DeploymentNotStartedError()
        if self._proc.returncode is not None:
            return IsAliveResponse(is_alive=False, message=f"the sandbox ended (exit {self._proc.returncode})")
        return await self._runtime.is_alive(timeout=timeout)

    async def start(self) -> None:
        """Start the sandbox and its server; :class:`ReprorunError` with reprorun's message
        when the sandbox cannot start."""
        options = self._config.options()
        if options.workdir is None:
            self._own_workdir = tempfile.mkdtemp(prefix="reprorun-swerex-")
            options = options.replace(workdir=self._own_workdir)
        token = secrets.token_hex(16)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            fd, port = listener.fileno(), listener.getsockname()[1]
            argv = [binary(), "exec", *options.to_args(), "--preserve-fds", str(fd - 2), "--"]
            argv += [self._config.python, "-c", _SERVE, token, str(fd)]
            self._hooks.on_custom_step("Starting the reprorun sandbox")
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=[fd],
            )
        finally:
            listener.close()  # the sandbox holds its own copy
        self._runtime = RemoteRuntime.from_config(
            RemoteRuntimeConfig(port=port, timeout=self._config.runtime_timeout, auth_token=token)
        )
        started = time.monotonic()
        response = await self._wait_until_alive(started + self._config.startup_timeout)
        if not response:
            message = await self._failure()
            await self.stop()
            raise ReprorunError(message or f"the SWE-ReX server did not answer: {response.message}")
        self.logger.info("reprorun sandbox up in %.2f s on port %d", time.monotonic() - started, port)

    async def _wait_until_alive(self, deadline: float) -> IsAliveResponse:
        # The socket listens before the server starts: the first request waits in its backlog
        # until the server accepts it (no polling interval), and fails at once when the
        # sandbox ends (its copy of the socket closes with it).
        assert self._proc is not None and self._runtime is not None
        response = IsAliveResponse(is_alive=False, message="not started")
        while time.monotonic() < deadline and self._proc.returncode is None:
            try:
                response = await self._runtime.is_alive(timeout=max(deadline - time.monotonic(), 0.1))
            except Exception as e:  # refused or reset: the sandbox has ended, or is ending
                response = IsAliveResponse(is_alive=False, message=str(e))
                await asyncio.sleep(0.02)
                continue
            if response:
                return response
            await asyncio.sleep(0.02)
        return response

    async def _failure(self) -> str | None:
        if self._proc is None or self._proc.stderr is None or self._proc.returncode is None:
            return None
        return error_line(await self._proc.stderr.read(64 << 10))

    async def stop(self) -> None:
        """Close the runtime, end the sandbox and remove its own work directory."""
        runtime, self._runtime = self._runtime, None
        proc, self._proc = self._proc, None
        if runtime is not None and proc is not None and proc.returncode is None:
            try:
                await runtime.close()  # asks the server to end its sessions
            except Exception as e:  # a server that already went: nothing to close
                self.logger.debug("closing the SWE-ReX runtime: %s", e)
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        if self._own_workdir is not None:
            shutil.rmtree(self._own_workdir, ignore_errors=True)
            self._own_workdir = None

    @property
    def runtime(self) -> RemoteRuntime:
        if self._runtime is None:
            raise DeploymentNotStartedError()
        return self._runtime
