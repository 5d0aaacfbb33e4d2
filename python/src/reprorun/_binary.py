"""Where the reprorun binary is: the one this package installed, unless told otherwise."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

from .errors import BinaryNotFound


def binary() -> str:
    """The reprorun binary to run: ``$REPRORUN_BIN``, else the one the wheel installed beside
    this interpreter's scripts, else ``reprorun`` on PATH."""
    env = os.environ.get("REPRORUN_BIN")
    if env:
        return env
    scripts = sysconfig.get_path("scripts")
    if scripts:
        candidate = Path(scripts) / "reprorun"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("reprorun")
    if found:
        return found
    raise BinaryNotFound("the reprorun binary was not found (set REPRORUN_BIN or install the wheel)")
