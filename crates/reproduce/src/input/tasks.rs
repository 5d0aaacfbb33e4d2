//! `--instances DIR`: task directories in Harbor's layout, the one Harbor's adapters write
//! SWE-bench (Verified, Pro, Multi-SWE-bench, SWE-smith, ...) tasks in, each task carrying
//! its own files:
//!
//! ```text
//! TASK/task.toml              Harbor's settings (timeouts, resources): not read
//! TASK/instruction.md         the problem statement: not read
//! TASK/environment/Dockerfile the image the task runs on: the instance's `dockerfile`
//!                             (context `environment/`) unless the record names an
//!                             `image`, `dockerfile` or `rootfs`, or `--task-environment host`
//! TASK/tests/config.json      the SWE-bench instance record (instance_id, repo, base_commit,
//!                             patch, test_patch, FAIL_TO_PASS, PASS_TO_PASS, version, ...)
//! TASK/tests/test.sh          the evaluation script: its test command is read
//! TASK/solution/solve.sh      applies the gold patch (config.json's `patch` is used)
//! ```
//!
//! `DIR` is one task (it has `tests/config.json`) or a directory of them. Each task becomes
//! one instance record: `config.json` as it is, with the test command its `test.sh` runs
//! while it captures the test output (below) as `test_cmd` when the record has none.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use thiserror::Error;

use reprorun_pipeline::records::Records;

/// Files of a task read at most this long (a record with its patches, a script).
pub(crate) const MAX_FILE: u64 = 16 << 20;

/// At most this many tasks in one directory.
pub(crate) const MAX_TASKS: usize = 100_000;

#[derive(Debug, Error)]
pub enum TasksError {
    #[error("--instances {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--instances {path}: {reason}")]
    Task { path: PathBuf, reason: String },
}

/// Where the evaluation script's captured test output starts and ends: SWE-bench's own
/// markers (its `eval.sh`), or the capture Harbor's SWE-bench adapter wraps around the test
/// command (`exec > >(tee "$LOG_FILE") 2>&1` ... `exec 1>&3 2>&4 # stop record`).
const CAPTURES: [(&str, &str); 2] = [
    (": '>>>>> Start Test Output'", ": '>>>>> End Test Output'"),
    ("exec > >(tee \"$LOG_FILE\") 2>&1", "exec 1>&3 2>&4"),
];

/// `--task-environment`: where a task's runs run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TaskEnvironment {
    /// In the image its `environment/Dockerfile` builds (context `environment/`).
    #[default]
    Dockerfile,
    /// On the host's root (or `--rootfs`), its Dockerfile unread.
    Host,
}

/// Whether `dir` is one task.
fn is_task(dir: &Path) -> bool {
    dir.join("tests/config.json").is_file()
}

/// The records of the task or tasks in `dir`, in directory-name order. A record's
/// `dockerfile` and `context` are relative to `dir` (as `load` reads them).
pub(crate) fn read(dir: &Path, env: TaskEnvironment) -> Result<Records, TasksError> {
    let mut tasks = Vec::new();
    if is_task(dir) {
        tasks.push(dir.to_path_buf());
    } else {
        let entries = std::fs::read_dir(dir).map_err(|source| TasksError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| TasksError::Read {
                path: dir.to_path_buf(),
                source,
            })?;
            let name = entry.file_name();
            let path = entry.path();
            if name.to_string_lossy().starts_with('.') || !path.is_dir() {
                continue;
            }
            if !is_task(&path) {
                return Err(TasksError::Task {
                    path,
                    reason: "not a task directory (no tests/config.json)".into(),
                });
            }
            if tasks.len() == MAX_TASKS {
                return Err(TasksError::Task {
                    path: dir.to_path_buf(),
                    reason: format!("more than {MAX_TASKS} tasks"),
                });
            }
            tasks.push(path);
        }
        tasks.sort();
    }
    if tasks.is_empty() {
        return Err(TasksError::Task {
            path: dir.to_path_buf(),
            reason: "no task directories (TASK/tests/config.json, Harbor's layout) and not a JSON file of instances".into(),
        });
    }
    tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut record = task(t)?;
            if env == TaskEnvironment::Dockerfile {
                let rel = t.strip_prefix(dir).unwrap_or(Path::new(""));
                environment(t, rel, &mut record);
            }
            Ok((i + 1, record))
        })
        .collect()
}

/// One task's instance record.
fn task(dir: &Path) -> Result<Map<String, Value>, TasksError> {
    let bad = |path: PathBuf, reason: String| TasksError::Task { path, reason };
    let config = dir.join("tests/config.json");
    let text = read_bounded(&config)?;
    let mut record = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return Err(bad(
                config,
                "not a JSON object (a SWE-bench instance)".into(),
            ))
        }
        Err(e) => return Err(bad(config, format!("not JSON: {e}"))),
    };
    if !matches!(record.get("instance_id"), Some(Value::String(s)) if !s.is_empty()) {
        return Err(bad(config, "no \"instance_id\" string".into()));
    }
    // SWE-bench Pro's records name the lists in lower case.
    for (upper, lower) in [
        ("FAIL_TO_PASS", "fail_to_pass"),
        ("PASS_TO_PASS", "pass_to_pass"),
    ] {
        if !record.contains_key(upper) {
            if let Some(v) = record.get(lower).cloned() {
                record.insert(upper.into(), v);
            }
        }
    }
    if !record.contains_key("test_cmd") {
        let script = dir.join("tests/test.sh");
        let text = read_bounded(&script)?;
        let cmd = test_command(&text).ok_or_else(|| {
            bad(
                script,
                "no test command found: the script marks none with SWE-bench's `: '>>>>> Start Test Output'` or Harbor's `exec > >(tee \"$LOG_FILE\") 2>&1` capture".into(),
            )
        })?;
        record.insert("test_cmd".into(), Value::String(cmd));
    }
    Ok(record)
}

/// Names the task's `environment/Dockerfile` (`rel` is the task's path under the directory
/// read) as the record's `dockerfile`, its directory as the `context`, when the task has one
/// and the record names no root of its own.
fn environment(dir: &Path, rel: &Path, record: &mut Map<String, Value>) {
    if ["image", "dockerfile", "rootfs"]
        .iter()
        .any(|k| record.contains_key(*k))
    {
        return;
    }
    // A link is not followed: a task's Dockerfile is a file of the task.
    let is_file = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    if !is_file(&dir.join("environment/Dockerfile")) {
        return;
    }
    let env = rel.join("environment");
    let text = |p: &Path| Value::String(p.to_string_lossy().into_owned());
    record.insert("dockerfile".into(), text(&env.join("Dockerfile")));
    record.insert("context".into(), text(&env));
}

/// The commands the evaluation script runs while it captures the test output, one a line:
/// without its bookkeeping ([`is_bookkeeping`]), comments and blank lines, and without a
/// trailing `|| true` (the script's way of carrying on to its own grading). `None` when no
/// capture is marked or it holds no command.
pub(crate) fn test_command(script: &str) -> Option<String> {
    for (start, end) in CAPTURES {
        let mut lines = script.lines().map(str::trim);
        if !lines.any(|l| l == start) {
            continue;
        }
        let mut cmds = Vec::new();
        for line in lines {
            if line.starts_with(end) {
                break;
            }
            if line.is_empty() || line.starts_with('#') || is_bookkeeping(line) {
                continue;
            }
            let line = line.strip_suffix("|| true").map_or(line, str::trim_end);
            cmds.push(line.to_string());
        }
        if !cmds.is_empty() {
            return Some(cmds.join("\n"));
        }
    }
    None
}

/// The script's own bookkeeping around the test command, not part of it: its shell options
/// (`set -x`, `set +e`, as Harbor's SWE-bench Pro adapter switches them) and the keeping of
/// the command's status (`TEST_EXIT_CODE=$?`), so the command's own status stands.
fn is_bookkeeping(line: &str) -> bool {
    let options = line.strip_prefix("set ").is_some_and(|rest| {
        rest.split_whitespace().all(|w| {
            w.len() > 1
                && w.starts_with(['-', '+'])
                && w[1..].chars().all(|c| c.is_ascii_alphabetic())
        })
    });
    let status = line.strip_suffix("=$?").is_some_and(|name| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    });
    options || status
}

/// `path` as text, refused beyond [`MAX_FILE`].
fn read_bounded(path: &Path) -> Result<String, TasksError> {
    use std::io::Read;
    let io = |source| TasksError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut text = String::new();
    file.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_FILE {
        return Err(TasksError::Task {
            path: path.to_path_buf(),
            reason: format!("over {} MiB", MAX_FILE >> 20),
        });
    }
    Ok(text)
}

/// A digest of what `read` reads from `dir` (the cluster plan's record of its input).
pub(crate) fn digest(dir: &Path) -> Result<String, TasksError> {
    let mut all = Vec::new();
    for (_, record) in read(dir, TaskEnvironment::default())? {
        all.extend(serde_json::to_vec(&record).unwrap_or_default());
        all.push(b'\n');
    }
    Ok(reprorun_pipeline::store::sha256_hex(&all))
}

#[cfg(test)]
mod tests;
