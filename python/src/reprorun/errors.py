"""The exceptions the package raises, each carrying reprorun's own one-line message."""

from __future__ import annotations

# reprorun's exit statuses (spec/sandbox.md, *Exit status*; crates/base/src/exit.rs).
TIMEOUT = 124
RUNTIME_ERROR = 125
NOT_EXECUTABLE = 126
NOT_FOUND = 127


class ReprorunError(Exception):
    """reprorun could not set up or supervise the run (exit status 125), or the package could
    not reach it. ``message`` is reprorun's one line, without its ``reprorun: `` prefix."""

    def __init__(self, message: str, exit_code: int = RUNTIME_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class BinaryNotFound(ReprorunError):
    """No reprorun binary: neither ``REPRORUN_BIN``, the package's own, nor one on PATH."""


class CommandFailed(Exception):
    """Raised by :meth:`reprorun.Result.check` when the command exited non-zero."""

    def __init__(self, exit_code: int, stderr: bytes) -> None:
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        super().__init__(f"command exited {exit_code}: {tail[0]}")
        self.exit_code = exit_code
        self.stderr = stderr


class FileTooLarge(OSError):
    """A file read from a sandbox is over the size asked for."""


class SandboxClosed(ReprorunError):
    """The long-lived sandbox ended (stopped, timed out, or its server died)."""


def error_line(stderr: bytes) -> str | None:
    """reprorun's last ``reprorun: ...`` line in ``stderr`` (its prefix removed), skipping the
    ``hint:`` lines that follow a 127."""
    found = None
    for raw in stderr.decode("utf-8", "replace").splitlines():
        if raw.startswith("reprorun: ") and not raw.startswith("reprorun: hint:"):
            found = raw[len("reprorun: ") :]
    return found
