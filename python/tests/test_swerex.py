"""The SWE-ReX deployment, through SWE-ReX's own runtime API (as SWE-agent drives it)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("swerex")

from swerex.runtime.abstract import (  # noqa: E402
    BashAction,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    WriteFileRequest,
)

from reprorun import ReprorunError  # noqa: E402
from reprorun.swerex_deployment import ReprorunDeployment  # noqa: E402


def test_commands_sessions_and_files_through_the_runtime_api():
    async def main():
        deployment = ReprorunDeployment(date="2020-01-01", allow_hosts=["pypi.org"])
        await deployment.start()
        try:
            assert await deployment.is_alive()
            runtime = deployment.runtime
            one = await runtime.execute(Command(command=["date", "+%F"]))
            assert (one.exit_code, one.stdout) == (0, "2020-01-01\n")
            await runtime.create_session(CreateBashSessionRequest())
            obs = await runtime.run_in_session(BashAction(command="cd /work && echo state > f && export X=kept"))
            assert obs.exit_code == 0
            obs = await runtime.run_in_session(BashAction(command="cat f; echo $X; pwd"))
            assert obs.output.splitlines() == ["state", "kept", "/work"]
            await runtime.write_file(WriteFileRequest(path="/tmp/w.txt", content="written"))
            assert (await runtime.read_file(ReadFileRequest(path="/tmp/w.txt"))).content == "written"
            denied = await runtime.execute(
                Command(command="curl -sS -o /dev/null -w '%{http_code}' http://example.com/", shell=True)
            )
            assert denied.stdout == "403"
        finally:
            await deployment.stop()
        assert deployment._proc is None

    asyncio.run(main())


def test_a_bad_option_fails_start_with_reprorun_message():
    async def main():
        deployment = ReprorunDeployment(date="not a date", startup_timeout=30)
        with pytest.raises(ReprorunError) as e:
            await deployment.start()
        assert "invalid date" in e.value.message

    asyncio.run(main())
