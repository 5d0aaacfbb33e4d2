"""The Inspect provider, through Inspect itself: a task whose samples use the bash() tool, run
offline with Inspect's mockllm model scripted to call it. Nothing here imports the provider:
Inspect finds it through the wheel's entry point."""

from __future__ import annotations

import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai import Task, eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.solver import generate, use_tools  # noqa: E402
from inspect_ai.tool import bash  # noqa: E402

# Each sample: make a file in /work and /tmp, then count what it sees there. The seed makes
# mktemp pick the same name in every sandbox, so a shared directory would show two files.
SCRIPT = (
    "mktemp -p /work mark.XXXXXX >/dev/null; mktemp -p /tmp mark.XXXXXX >/dev/null; "
    "echo work=$(ls /work | wc -l) tmp=$(ls /tmp | wc -l); date +%F; "
    "curl -sS -o /dev/null -w 'http=%{http_code}\\n' http://example.com/ 2>&1 || true"
)


def _outputs(samples: int):
    # With usage given, mockllm does not count tokens (tiktoken would download its tables).
    usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    for _ in range(samples):
        call = ModelOutput.for_tool_call("mockllm/model", "bash", {"command": SCRIPT})
        done = ModelOutput.from_content("mockllm/model", "done")
        call.usage = done.usage = usage
        yield call
        yield done


def _run(sandbox, samples: int, tmp_path) -> list[str]:
    task = Task(
        dataset=[Sample(input=f"sample {i}", id=i) for i in range(samples)],
        solver=[use_tools(bash(timeout=60)), generate()],
        sandbox=sandbox,
    )
    model = get_model("mockllm/model", custom_outputs=_outputs(samples))
    [log] = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none", max_samples=1)
    assert log.status == "success", log.error
    outputs = []
    for sample in log.samples or []:
        tools = [m for m in sample.messages if isinstance(m, ChatMessageTool)]
        assert len(tools) == 1, sample.messages
        assert tools[0].error is None, tools[0].error
        outputs.append(tools[0].text)
    return outputs


def test_samples_run_in_reprorun_sandboxes_with_the_tasks_options(tmp_path):
    from reprorun.inspect_sandbox import ReprorunConfig

    config = ReprorunConfig(date="2021-03-04", allow_hosts=["pypi.org"], seed=5)
    outputs = _run(("reprorun", config), 2, tmp_path)
    assert len(outputs) == 2
    for out in outputs:
        # Each sample sees only its own files, the fake date, and the allowlist's refusal.
        assert out.splitlines() == ["work=1 tmp=1", "2021-03-04", "http=403"], out


def test_no_config_means_reprorunss_defaults(tmp_path):
    [out] = _run("reprorun", 1, tmp_path)
    lines = out.splitlines()
    assert lines[:2] == ["work=1 tmp=1", "2024-01-01"], out
    # --net none by default: no proxy, no way out.
    assert "http=000" in lines[2] or "resolve" in out or "Could not" in out, out


def test_a_bad_config_is_refused(tmp_path):
    from reprorun.inspect_sandbox import ReprorunConfig

    with pytest.raises(ValueError):
        ReprorunConfig(dat="2020-01-01")  # type: ignore[call-arg]
