"""reprorun's ``exec`` options as one typed value, and the command line it maps to."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, Union

Duration = Union[int, float, str]
"""Seconds as a number, or a reprorun duration string (``"90s"``, ``"10m"``, ``"500ms"``)."""


def duration_arg(value: Duration) -> str:
    """A duration as reprorun's parser takes it: numbers are seconds (to the millisecond)."""
    if isinstance(value, bool):
        raise TypeError("a duration is a number of seconds or a string such as '90s'")
    if isinstance(value, (int, float)):
        ms = round(float(value) * 1000)
        if ms <= 0:
            raise ValueError(f"duration must be positive, got {value!r}")
        return f"{ms}ms"
    return str(value)


@dataclass(frozen=True)
class Options:
    """What a sandbox is made of. Each field maps to one ``reprorun exec`` option
    (``spec/harness.md`` has the table); ``None`` leaves reprorun's default.

    >>> Options(date="2020-01-01", allow_hosts=["pypi.org"]).to_args()
    ['--date', '2020-01-01', '--allow-host', 'pypi.org']
    """

    date: str | None = None
    """``--date``: RFC 3339, ``YYYY-MM-DD``, ``@EPOCH`` or ``now`` (default 2024-01-01)."""
    clock: str | None = None
    """``--clock``: ``start-at``, ``frozen`` or ``tick[=STEP]``."""
    seed: int | None = None
    """``--seed``: the seed of hash seeds and random bytes (default 0)."""
    random: str | None = None
    """``--random``: ``seeded`` or ``real``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """``--env KEY=VALUE`` for each item."""
    workdir: str | None = None
    """``--workdir``: the host directory mounted read-write at /work."""
    workdir_mode: str | None = None
    """``--workdir-mode``: ``rw``, ``ro`` or ``overlay``."""
    image: str | None = None
    """``--image``: an imported image (``NAME[:TAG]`` or ``sha256:DIGEST``)."""
    rootfs: str | None = None
    """``--rootfs``: a root filesystem directory."""
    store: str | None = None
    """``--store``: the image store for ``image``."""
    allow_hosts: Sequence[str] = ()
    """``--allow-host`` for each pattern (implies ``--net allow``)."""
    net: str | None = None
    """``--net``: ``none``, ``host`` or ``allow``."""
    timeout: Duration | None = None
    """``--timeout``: kill everything after this long (exit 124)."""
    memory: str | int | None = None
    """``--memory``: bytes, or a size such as ``512m``."""
    pids: int | None = None
    """``--pids``: a limit on processes and threads."""
    cpus: int | None = None
    """``--cpus``: CPUs the command runs on and sees (default 1)."""
    cpus_quota: float | None = None
    """``--cpus-quota``: CPU time limit, in CPUs."""
    binds: Sequence[str] = ()
    """``--bind SRC:DST[:ro|rw]`` for each item."""
    hostname: str | None = None
    """``--hostname``."""
    isolation: str | None = None
    """``--isolation``: ``full``, ``auto`` or ``none``."""
    extra_args: Sequence[str] = ()
    """Any other ``exec`` options, passed as they are (before ``--``)."""

    def to_args(self) -> list[str]:
        """The ``reprorun exec`` options these values map to (without the command)."""
        args: list[str] = []

        def opt(flag: str, value: Any) -> None:
            if value is not None:
                args.extend([flag, str(value)])

        opt("--date", self.date)
        opt("--clock", self.clock)
        opt("--seed", self.seed)
        opt("--random", self.random)
        for key, value in self.env.items():
            if not key or "=" in key:
                raise ValueError(f"bad environment variable name {key!r}")
            args.extend(["--env", f"{key}={value}"])
        opt("--workdir", self.workdir)
        opt("--workdir-mode", self.workdir_mode)
        opt("--image", self.image)
        opt("--rootfs", self.rootfs)
        opt("--store", self.store)
        if isinstance(self.allow_hosts, str):
            raise TypeError("allow_hosts is a list of patterns, not one string")
        for host in self.allow_hosts:
            args.extend(["--allow-host", host])
        opt("--net", self.net)
        opt("--timeout", None if self.timeout is None else duration_arg(self.timeout))
        opt("--memory", self.memory)
        opt("--pids", self.pids)
        opt("--cpus", self.cpus)
        opt("--cpus-quota", self.cpus_quota)
        for bind in self.binds:
            args.extend(["--bind", bind])
        opt("--hostname", self.hostname)
        opt("--isolation", self.isolation)
        args.extend(self.extra_args)
        return args

    def replace(self, **changes: Any) -> "Options":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "Options":
        """Options from a plain mapping (a task's config, a YAML file), refusing unknown keys."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown reprorun option(s): {', '.join(unknown)}")
        return cls(**dict(values))
