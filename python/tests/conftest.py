"""The suite runs against the installed wheel (the runtime test installs it into a fresh
virtual environment) or, for a developer, ``PYTHONPATH=python/src`` with ``REPRORUN_BIN``."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _host_cwd(tmp_path, monkeypatch):
    # `reprorun exec` binds the caller's directory at /work: give each test its own.
    monkeypatch.chdir(tmp_path)
    yield


def pytest_report_header(config):
    import reprorun

    return f"reprorun {reprorun.__version__} at {reprorun.binary()} (REPRORUN_BIN={os.environ.get('REPRORUN_BIN')})"
