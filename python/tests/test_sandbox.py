"""reprorun.Sandbox / AsyncSandbox: one sandbox for many commands (an agent loop)."""

from __future__ import annotations

import asyncio
import os

import pytest

from reprorun import AsyncSandbox, ReprorunError, Sandbox, SandboxClosed


def test_commands_share_the_filesystem_and_the_clock():
    with Sandbox(date="2020-01-01", clock="tick=1s") as sb:
        assert sb.exec(["sh", "-c", "echo one > f; mkdir -p d; echo two > /tmp/t"]).ok
        assert sb.exec(["cat", "f", "/tmp/t"]).stdout == b"one\ntwo\n"
        first = int(sb.exec(["date", "+%s"]).stdout)
        second = int(sb.exec(["date", "+%s"]).stdout)
        # One clock for the whole sandbox: each read advances it (tick), never back to the start.
        assert 1577836800 <= first < second
        assert sb.exec(["pwd"]).stdout == b"/work\n"


def test_files_in_and_out():
    with Sandbox() as sb:
        sb.write_file("sub/dir/data.bin", bytes(range(256)))
        assert sb.exec(["wc", "-c", "sub/dir/data.bin"]).stdout.split()[0] == b"256"
        assert sb.read_file("/work/sub/dir/data.bin") == bytes(range(256))
        sb.write_file("/tmp/text.txt", "crlf\r\nkept")
        assert sb.read_file("/tmp/text.txt") == b"crlf\r\nkept"
        with pytest.raises(FileNotFoundError):
            sb.read_file("nope.txt")
        with pytest.raises(IsADirectoryError):
            sb.read_file("sub")
        with pytest.raises(OSError):
            sb.write_file("/usr/bin/planted", b"x")  # the root is read-only


def test_exec_options_and_failures():
    with Sandbox(env={"FROM_OPTIONS": "1"}) as sb:
        r = sb.exec(["sh", "-c", 'cat; echo "$FROM_OPTIONS$PER_CALL"; pwd'], input="in\n", cwd="/tmp", env={"PER_CALL": "2"})
        assert r.stdout == b"in\n12\n/tmp\n"
        assert sb.exec(["sh", "-c", "echo err >&2; exit 4"]).exit_code == 4
        assert sb.exec(["no-such-command-here"]).exit_code == 127
        slow = sb.exec(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.5)
        assert slow.timed_out and slow.exit_code == 124
        # The sandbox outlives a command's timeout.
        assert sb.exec(["true"]).ok


def test_concurrent_commands_in_one_sandbox():
    async def main():
        async with AsyncSandbox() as sb:
            results = await asyncio.gather(*(sb.exec(["sh", "-c", f"sleep 0.2; echo {i}"]) for i in range(5)))
            return [r.stdout for r in results]

    assert asyncio.run(main()) == [f"{i}\n".encode() for i in range(5)]


def test_two_sandboxes_never_see_each_others_files():
    with Sandbox() as a, Sandbox() as b:
        a.write_file("mine.txt", "a")
        a.write_file("/tmp/mine.txt", "a")
        assert a.workdir != b.workdir
        assert b.exec(["ls", "-A", "/work", "/tmp"]).stdout == b"/tmp:\n\n/work:\n"


def test_stop_removes_its_own_workdir_and_later_calls_fail():
    sb = Sandbox()
    sb.start()
    workdir = sb.workdir
    assert workdir and os.path.isdir(workdir)
    sb.stop()
    assert not os.path.exists(workdir)
    with pytest.raises(SandboxClosed):
        sb.exec(["true"])
    sb.stop()  # a second stop does nothing


def test_a_given_workdir_is_kept(tmp_path):
    with Sandbox(workdir=str(tmp_path)) as sb:
        sb.exec(["sh", "-c", "echo kept > out.txt"])
    assert (tmp_path / "out.txt").read_text() == "kept\n"


def test_a_bad_option_fails_start_with_reprorun_message():
    with pytest.raises(ReprorunError) as e:
        Sandbox(seed="not-a-number").start()  # type: ignore[arg-type]
    assert "seed" in e.value.message


def test_the_server_ending_fails_pending_and_later_calls():
    async def main():
        sb = AsyncSandbox(timeout=1)
        await sb.start()
        with pytest.raises(SandboxClosed):
            await sb.exec(["sleep", "30"])
        with pytest.raises(SandboxClosed):
            await sb.exec(["true"])
        await sb.stop()

    asyncio.run(main())


def test_a_reply_over_the_line_limit_ends_the_sandbox(monkeypatch):
    import reprorun.sandbox

    # The host bounds what it reads from the sandbox: a reply line over the limit ends it
    # (here 4 KiB; 96 MiB by default) instead of being buffered without bound.
    monkeypatch.setattr(reprorun.sandbox, "_LINE_LIMIT", 4096)
    with Sandbox() as sb:
        assert sb.exec(["echo", "small"]).ok
        with pytest.raises(SandboxClosed) as e:
            sb.exec(["head", "-c", "100000", "/dev/zero"])
        assert "line limit" in e.value.message
        with pytest.raises(SandboxClosed):
            sb.exec(["true"])


def test_a_server_that_does_not_start_is_an_error():
    with pytest.raises(ReprorunError) as e:
        Sandbox(python="false").start()
    assert "did not start" in e.value.message
    with pytest.raises(ReprorunError) as e:
        Sandbox(python="no-such-python").start()
    assert "no-such-python" in e.value.message
