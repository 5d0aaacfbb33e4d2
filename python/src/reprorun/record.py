"""The run record (``reprorun exec --record``, ``spec/record.md``) as typed objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


def _get(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = data.get(key, default)
    if value is None or isinstance(value, kind):
        return value
    raise ValueError(f"record field {key!r}: expected {kind}, got {type(value).__name__}")


@dataclass(frozen=True)
class Clock:
    """The pinned wall clock: seconds since the epoch and how it moves."""

    epoch: int
    mode: str
    step_ns: int | None = None


@dataclass(frozen=True)
class Plan:
    """The resolved plan (``--dry-run``'s output); ``raw`` keeps every field."""

    isolation: str
    namespaces: list[str]
    rootfs: str
    cwd: str
    host_workdir: str | None
    env: list[str]
    argv: list[str]
    timeout_ms: int | None
    clock: Clock | None
    seed: int | None
    random: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> "Plan":
        clock = _get(data, "clock", dict)
        return cls(
            isolation=_get(data, "isolation", str, ""),
            namespaces=list(_get(data, "namespaces", list, [])),
            rootfs=_get(data, "rootfs", str, ""),
            cwd=_get(data, "cwd", str, ""),
            host_workdir=_get(data, "host_workdir", str),
            env=list(_get(data, "env", list, [])),
            argv=list(_get(data, "argv", list, [])),
            timeout_ms=_get(data, "timeout_ms", int),
            clock=None
            if clock is None
            else Clock(int(clock["epoch"]), str(clock["mode"]), clock.get("step_ns")),
            seed=_get(data, "seed", int),
            random=_get(data, "random", str),
            raw=dict(data),
        )


@dataclass(frozen=True)
class Rusage:
    """CPU seconds and the largest resident set of every process the sandbox ran."""

    user_s: float
    sys_s: float
    max_rss_kib: int


@dataclass(frozen=True)
class Connection:
    """One connection attempt the egress proxy saw (``--net allow``)."""

    host: str | None
    port: int | None
    address: str | None
    protocol: str | None
    decision: str
    rule: str | None
    bytes_up: int
    bytes_down: int
    start: str | None
    duration_ms: int | None
    note: str | None = None

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> "Connection":
        return cls(
            host=data.get("host"),
            port=data.get("port"),
            address=data.get("address"),
            protocol=data.get("protocol"),
            decision=str(data.get("decision", "")),
            rule=data.get("rule"),
            bytes_up=int(data.get("bytes_up") or 0),
            bytes_down=int(data.get("bytes_down") or 0),
            start=data.get("start"),
            duration_ms=data.get("duration_ms"),
            note=data.get("note"),
        )


@dataclass(frozen=True)
class Record:
    """A run record. ``rootfs`` stays a dict (its fields depend on its ``kind``)."""

    record_version: int
    reprorun_version: str
    argv: list[str]
    plan: Plan | None
    rootfs: dict[str, Any] | None
    isolation_used: str | None
    started_at: str
    ended_at: str
    duration_s: float
    exit_code: int
    timed_out: bool
    oom_killed: bool
    error: str | None
    rusage: Rusage | None
    network: list[Connection] | None = None
    network_dropped: int | None = None

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> "Record":
        """A record from its JSON object; ``ValueError`` when a field has the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError("a record is a JSON object")
        plan = _get(data, "plan", dict)
        rusage = _get(data, "rusage", dict)
        network = _get(data, "network", list)
        return cls(
            record_version=_get(data, "record_version", int, 0),
            reprorun_version=_get(data, "reprorun_version", str, ""),
            argv=list(_get(data, "argv", list, [])),
            plan=None if plan is None else Plan.parse(plan),
            rootfs=_get(data, "rootfs", dict),
            isolation_used=_get(data, "isolation_used", str),
            started_at=_get(data, "started_at", str, ""),
            ended_at=_get(data, "ended_at", str, ""),
            duration_s=float(_get(data, "duration_s", (int, float), 0.0)),
            exit_code=_get(data, "exit_code", int, 0),
            timed_out=bool(data.get("timed_out", False)),
            oom_killed=bool(data.get("oom_killed", False)),
            error=_get(data, "error", str),
            rusage=None
            if rusage is None
            else Rusage(
                float(rusage.get("user_s", 0.0)),
                float(rusage.get("sys_s", 0.0)),
                int(rusage.get("max_rss_kib", 0)),
            ),
            network=None if network is None else [Connection.parse(c) for c in network],
            network_dropped=_get(data, "network_dropped", int),
        )
