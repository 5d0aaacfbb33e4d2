//! OCI hooks: each runs with the container's state JSON on standard input, the hook's own
//! `args` (args[0] as argv[0]) and exactly its `env`, within its `timeout`.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use thiserror::Error;

use super::spec::Hook;

#[derive(Debug, Error)]
pub enum HookError {
    #[error("{stage} hook {path}: {reason}")]
    Failed {
        stage: &'static str,
        path: String,
        reason: String,
    },
}

/// Runs `hooks` in order; the first failure stops them.
pub fn run_all(stage: &'static str, hooks: &[Hook], state: &[u8]) -> Result<(), HookError> {
    for h in hooks {
        run(stage, h, state)?;
    }
    Ok(())
}

/// Runs every one of `hooks` in order, whatever fails (poststart, poststop: the runtime spec
/// has a failure logged and the rest go on); returns the failures.
pub fn run_each(stage: &'static str, hooks: &[Hook], state: &[u8]) -> Vec<HookError> {
    hooks
        .iter()
        .filter_map(|h| run(stage, h, state).err())
        .collect()
}

fn run(stage: &'static str, hook: &Hook, state: &[u8]) -> Result<(), HookError> {
    let fail = |reason: String| HookError::Failed {
        stage,
        path: hook.path.clone(),
        reason,
    };
    let mut cmd = Command::new(&hook.path);
    if let Some((first, rest)) = hook.args.split_first() {
        cmd.arg0(first).args(rest);
    }
    cmd.env_clear();
    for e in &hook.env {
        if let Some((k, v)) = e.split_once('=') {
            cmd.env(k, v);
        }
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::null());
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(format!("cannot start: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // From a thread, inside the deadline: a hook that does not read its input neither
        // fails nor blocks us.
        let state = state.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&state);
        });
    }
    let deadline = hook
        .timeout
        .filter(|t| *t > 0)
        .map(|t| Instant::now() + Duration::from_secs(t as u64));
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(fail(format!("exited with {status}"))),
            Ok(None) => {}
            Err(e) => return Err(fail(e.to_string())),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(format!(
                "timed out after {}s",
                hook.timeout.unwrap_or(0)
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(script: &str, timeout: Option<u32>) -> Hook {
        Hook {
            path: "/bin/sh".into(),
            args: vec!["sh".into(), "-c".into(), script.into()],
            env: vec!["HOOKVAR=1".into()],
            timeout,
        }
    }

    #[test]
    fn hooks_get_state_on_stdin_and_only_their_env() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let script = format!(
            "cat > {0}; echo \"$HOOKVAR${{HOME:-unset}}\" >> {0}",
            out.display()
        );
        run_all("poststart", &[hook(&script, None)], b"{\"id\":\"x\"}\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "{\"id\":\"x\"}\n1unset\n"
        );
    }

    #[test]
    fn failing_missing_and_slow_hooks_are_errors() {
        let e = run_all("createRuntime", &[hook("exit 3", None)], b"").unwrap_err();
        assert!(
            e.to_string()
                .contains("createRuntime hook /bin/sh: exited with"),
            "{e}"
        );
        let missing = Hook {
            path: "/nonexistent/hook".into(),
            ..Hook::default()
        };
        assert!(run_all("poststop", &[missing], b"").is_err());
        // poststart/poststop: every hook runs, each failure is returned.
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("after");
        let touch = hook(&format!("/usr/bin/touch {}", mark.display()), None);
        let failures = run_each(
            "poststop",
            &[hook("exit 1", None), hook("exit 2", None), touch],
            b"",
        );
        assert_eq!(failures.len(), 2);
        assert!(
            failures[1].to_string().contains("exited with"),
            "{}",
            failures[1]
        );
        assert!(mark.exists(), "a hook after failing ones ran");
        let e = run_all("poststart", &[hook("sleep 5", Some(1))], b"").unwrap_err();
        assert!(e.to_string().contains("timed out"), "{e}");
    }
}
