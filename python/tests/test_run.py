"""reprorun.run / run_async: one command in a fresh sandbox, its result and its record."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

import reprorun
from reprorun import Options, Record, ReprorunError


def test_version_is_the_binarys():
    out = subprocess.run([reprorun.binary(), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["reprorun", reprorun.__version__]


def test_the_wheel_puts_reprorun_on_path_of_its_environment():
    # The binary found is the one beside this interpreter (the wheel's), unless overridden.
    import os
    import sysconfig

    if "REPRORUN_BIN" not in os.environ:
        assert reprorun.binary().startswith(sysconfig.get_path("scripts"))


def test_run_pins_the_date_and_parses_the_record():
    r = reprorun.run(["date", "+%F %Z"], date="2020-06-01", seed=7)
    assert r.ok and r.stdout == b"2020-06-01 UTC\n"
    assert isinstance(r.record, Record)
    assert r.record.exit_code == 0 and r.record.error is None and not r.record.timed_out
    assert r.record.plan is not None and r.record.plan.seed == 7
    assert r.record.plan.clock is not None and r.record.plan.clock.epoch == 1590969600
    assert r.record.plan.argv == ["date", "+%F %Z"]
    assert r.record.rusage is not None and r.record.reprorun_version == reprorun.__version__


def test_run_passes_env_input_and_workdir(tmp_path):
    (tmp_path / "in.txt").write_text("from the host\n")
    r = reprorun.run(
        ["sh", "-c", 'cat in.txt; cat; echo "$GREETING"; pwd'],
        env={"GREETING": "hello"},
        input=b"stdin bytes\n",
        workdir=str(tmp_path),
    )
    assert r.stdout == b"from the host\nstdin bytes\nhello\n/work\n"


def test_same_seed_same_bytes_other_seed_other_bytes():
    cmd = ["sh", "-c", "head -c 16 /dev/urandom | od -An -tx1"]
    a, b, c = (reprorun.run(cmd, seed=s, record=False).stdout for s in (1, 1, 2))
    assert a == b != c


def test_a_bad_option_raises_reprorun_one_line_message():
    with pytest.raises(ReprorunError) as e:
        reprorun.run(["true"], date="yesterday-ish")
    assert "invalid date" in e.value.message and "\n" not in e.value.message
    assert e.value.exit_code == 125


def test_a_bad_workdir_raises_with_reprorun_message(tmp_path):
    with pytest.raises(ReprorunError) as e:
        reprorun.run(["true"], workdir=str(tmp_path / "missing"))
    assert "missing" in e.value.message


def test_the_commands_own_failures_are_results_not_exceptions():
    assert reprorun.run(["sh", "-c", "exit 3"]).exit_code == 3
    # 125 from the command itself is the command's, not reprorun's (the record says so).
    r = reprorun.run(["sh", "-c", "exit 125"])
    assert r.exit_code == 125 and r.record is not None and r.record.error is None
    assert reprorun.run(["no-such-command-here"]).exit_code == 127
    with pytest.raises(reprorun.CommandFailed):
        reprorun.run(["false"]).check()


def test_timeout_kills_and_exits_124():
    r = reprorun.run(["sleep", "30"], timeout=0.5)
    assert r.exit_code == 124 and r.record is not None and r.record.timed_out


def test_the_allowlist_refuses_other_hosts_and_records_it():
    r = reprorun.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "http://example.com/"],
        allow_hosts=["pypi.org"],
    )
    assert r.stdout == b"403"
    assert r.record is not None and r.record.network is not None
    [attempt] = r.record.network
    assert (attempt.host, attempt.port, attempt.decision) == ("example.com", 80, "refused")


def test_run_async_gives_the_same_result():
    async def both():
        return await asyncio.gather(
            reprorun.run_async(["date", "+%Y"], date="2001-02-03"),
            reprorun.run_async(["cat"], input=b"piped"),
        )

    year, piped = asyncio.run(both())
    assert year.stdout == b"2001\n" and piped.stdout == b"piped"
    with pytest.raises(ReprorunError):
        asyncio.run(reprorun.run_async(["true"], clock="sideways"))


def test_options_map_to_exec_flags():
    opts = Options(
        date="2020-01-01",
        clock="frozen",
        seed=3,
        env={"A": "1"},
        image="busybox",
        allow_hosts=["pypi.org", "*.pythonhosted.org"],
        timeout=1.5,
        memory="512m",
        cpus=2,
    )
    assert opts.to_args() == [
        "--date", "2020-01-01", "--clock", "frozen", "--seed", "3", "--env", "A=1",
        "--image", "busybox", "--allow-host", "pypi.org", "--allow-host", "*.pythonhosted.org",
        "--timeout", "1500ms", "--memory", "512m", "--cpus", "2",
    ]  # fmt: skip
    assert Options().to_args() == []


@pytest.mark.parametrize(
    "bad",
    [
        {"allow_hosts": "pypi.org"},  # one string, not a list: would be split into letters
        {"env": {"A=B": "1"}},
        {"timeout": 0},
        {"timeout": True},
    ],
)
def test_options_refuse_bad_values(bad):
    with pytest.raises((TypeError, ValueError)):
        Options(**bad).to_args()


def test_options_from_a_mapping_refuse_unknown_keys():
    assert Options.from_mapping({"seed": 1}).seed == 1
    with pytest.raises(ValueError, match="dat"):
        Options.from_mapping({"dat": "2020-01-01"})


def test_argv_must_be_a_list():
    with pytest.raises(TypeError):
        reprorun.run("echo hi")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        reprorun.run([])


def test_a_malformed_record_is_refused():
    with pytest.raises(ValueError):
        Record.parse({"exit_code": "zero"})
    with pytest.raises(ValueError):
        Record.parse([])  # type: ignore[arg-type]
    assert Record.parse({}).plan is None
