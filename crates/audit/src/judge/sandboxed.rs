//! One attempt of a model judge in a sandbox of its own whose only input is the task.

use super::task::Task;
use super::{agent, check_answer, Attempt, JudgeError, Study};
use crate::run::request::{self, Sandbox};
use crate::run::store::RunRow;
use reprorun_pipeline::cluster::LogSink;
use reprorun_pipeline::unit::{Scratch, UnitOutcome};
use reprorun_runtime::plan::HostFacts;

/// Where a judging keeps its logs and scratch.
pub(super) struct Place<'a, L> {
    pub(super) logs: &'a L,
    pub(super) scratch: &'a std::path::Path,
}

/// One attempt of a model judge, in a fresh sandbox whose only input is the task.
pub(super) fn sandboxed<L: LogSink>(
    study: &Study,
    sb: &Sandbox,
    at: &Place<'_, L>,
    row: &RunRow,
    attempt: u32,
    task: &Task,
    task_json: &[u8],
) -> Result<Attempt, JudgeError> {
    let setup = |step: &'static str| {
        move |cause: String| JudgeError::Setup {
            group: row.group_id.clone(),
            repeat: row.repeat,
            step,
            cause,
        }
    };
    let dir = at.scratch.join(format!(
        "{}-{}-{}-{attempt}",
        reprorun_pipeline::unit::file_name_part(&row.group_id),
        row.repeat,
        std::process::id()
    ));
    let mut scratch = Scratch::create(dir.clone()).map_err(|e| setup("scratch")(e.to_string()))?;
    let inv = agent::invocation(&study.cfg);
    let work = dir.join("work");
    std::fs::create_dir_all(&work)
        .and_then(|()| std::fs::write(work.join("task.json"), task_json))
        .and_then(|()| std::fs::write(work.join("PROMPT.md"), &inv.prompt))
        .map_err(|e| setup("lay out /work")(e.to_string()))?;
    let codex_home = match &inv.codex_config {
        Some(config) => {
            let home = dir.join("codex-home");
            std::fs::create_dir_all(&home)
                .and_then(|()| std::fs::write(home.join("config.toml"), config))
                .map_err(|e| setup("codex home")(e.to_string()))?;
            Some(home)
        }
        None => None,
    };
    let req = request::request(sb, &inv, &work, &scratch.out_dir(), codex_home.as_deref())?;
    let host = HostFacts::current().map_err(|e| setup("host facts")(e.to_string()))?;
    let result = scratch
        .run(&req, &host)
        .map_err(|e| setup("plan")(e.to_string()))?;
    let (out, err) = (scratch.stdout(), scratch.stderr());
    let (stdout_sha256, stderr_sha256) =
        (Some(at.logs.put_log(&out)?), Some(at.logs.put_log(&err)?));
    let outcome = match result {
        UnitOutcome::Ran(o) => o,
        UnitOutcome::CommandMissing(e) => {
            return Ok(Attempt {
                stdout_sha256,
                stderr_sha256,
                ..Attempt::failed("judge_missing", e.to_string())
            })
        }
        UnitOutcome::HostFailure(e) => return Err(setup("sandbox")(e.to_string())),
    };
    let answer = agent::answer(study.cfg.kind, &scratch.out_dir(), &out);
    let mut a = check_answer(at.logs, answer.document.as_deref(), answer.missing, task)?;
    a.usage = answer.usage;
    a.stdout_sha256 = stdout_sha256;
    a.stderr_sha256 = stderr_sha256;
    if outcome.timed_out || outcome.oom_killed {
        a.status = if outcome.timed_out { "timeout" } else { "oom" };
        a.reason = Some(format!("the judge was stopped ({})", a.status));
        a.pairs = None;
    }
    Ok(a)
}
