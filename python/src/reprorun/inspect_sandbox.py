"""The Inspect sandbox provider: ``sandbox="reprorun"`` (or ``("reprorun", ReprorunConfig(...))``)
in a task runs each sample's tool calls in a reprorun sandbox of its own.

Importing this module registers the provider with Inspect; the wheel names it in Inspect's
``inspect_ai`` entry point group, so a task needs no import. Each sample gets a fresh
:class:`~reprorun.AsyncSandbox` (its own /work directory, /tmp, processes and clock) started in
``sample_init`` and stopped in ``sample_cleanup``; the task's config gives reprorun's options
(:class:`ReprorunConfig`, or the path of a JSON file of them), reprorun's defaults when none.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, Union, overload

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from inspect_ai.util._sandbox.environment import SandboxUnavailableError
from pydantic import BaseModel, ConfigDict

from .errors import FileTooLarge, ReprorunError
from .options import Options
from .sandbox import AsyncSandbox

_EXEC_LIMIT_ENV = "INSPECT_SANDBOX_MAX_EXEC_OUTPUT_SIZE"
_READ_LIMIT_ENV = "INSPECT_SANDBOX_MAX_READ_FILE_SIZE"


class ReprorunConfig(BaseModel):
    """reprorun's options for a task's samples (``spec/harness.md``). Every field is optional."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    date: str | None = None
    clock: str | None = None
    seed: int | None = None
    random: str | None = None
    env: dict[str, str] = {}
    image: str | None = None
    rootfs: str | None = None
    store: str | None = None
    allow_hosts: list[str] = []
    net: str | None = None
    timeout: Union[int, float, str, None] = None
    memory: Union[str, int, None] = None
    pids: int | None = None
    cpus: int | None = None
    cpus_quota: float | None = None
    binds: list[str] = []
    hostname: str | None = None
    isolation: str | None = None
    extra_args: list[str] = []
    python: str = "python3"
    """The interpreter that runs the command server inside (the root must have it)."""

    def __hash__(self) -> int:
        # Inspect keys its sandboxes by config; dicts and lists are not hashable as they are.
        return hash(json.dumps(self.model_dump(), sort_keys=True))

    def options(self) -> Options:
        """The :class:`~reprorun.Options` these fields map to."""
        return Options.from_mapping(self.model_dump(exclude={"python"}))


def _config(config: SandboxEnvironmentConfigType | None) -> ReprorunConfig:
    if config is None:
        return ReprorunConfig()
    if isinstance(config, ReprorunConfig):
        return config
    if isinstance(config, BaseModel):
        return ReprorunConfig(**config.model_dump())
    if isinstance(config, str):
        return ReprorunConfig(**json.loads(Path(config).read_text()))
    raise ValueError(f"reprorun sandbox: unsupported config {config!r}")


def _limit(env: str, default: int) -> int:
    try:
        return int(os.environ.get(env, default))
    except ValueError:
        return default


@sandboxenv(name="reprorun")
class ReprorunSandboxEnvironment(SandboxEnvironment):
    """One sample's reprorun sandbox."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        super().__init__()
        self.sandbox = sandbox

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return ReprorunConfig(**config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        # Refuse a bad config once, before any sample starts.
        _config(config).options().to_args()

    @classmethod
    async def sample_init(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        metadata: dict[str, str],
    ) -> dict[str, SandboxEnvironment]:
        cfg = _config(config)
        sandbox = AsyncSandbox(options=cfg.options(), python=cfg.python)
        await sandbox.start()
        return {"default": cls(sandbox)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for environment in environments.values():
            if isinstance(environment, ReprorunSandboxEnvironment):
                await environment.sandbox.stop()

    @classmethod
    async def task_cleanup(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool
    ) -> None:
        # Every sample's sandbox ends in sample_cleanup; nothing is shared between them.
        return None

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        if user is not None and user not in ("root", "0"):
            raise SandboxUserUnsupportedError(f"the reprorun sandbox runs commands as root, not {user!r}")
        try:
            result = await self.sandbox.exec(cmd, input=input, cwd=cwd, env=env, timeout=timeout)
        except ReprorunError as e:
            raise SandboxUnavailableError(str(e)) from e
        if result.timed_out:
            raise TimeoutError(f"command timed out after {timeout} s")
        limit = _limit(_EXEC_LIMIT_ENV, 10 << 20)
        stdout = result.stdout.decode("utf-8", "replace")
        stderr = result.stderr.decode("utf-8", "replace")
        if result.truncated or max(len(result.stdout), len(result.stderr)) > limit:
            raise OutputLimitExceededError(f"{limit} bytes", stdout[:limit])
        return ExecResult(result.exit_code == 0, result.exit_code, stdout, stderr)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        await self.sandbox.write_file(file, contents)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> Union[str, bytes]:
        limit = min(_limit(_READ_LIMIT_ENV, 100 << 20), 64 << 20)
        try:
            data = await self.sandbox.read_file(file, limit=limit)
        except FileTooLarge as e:
            raise OutputLimitExceededError(f"{limit} bytes", None) from e
        if not text:
            return data
        # Newlines as they are (open(newline="")).
        return data.decode("utf-8")
