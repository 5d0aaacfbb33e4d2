//! `exec`: a new process in a running container.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::unistd::Pid;

use super::state::{self, Root, Status};
use super::{absolute, convert, io, spec, OciError};
use crate::plan::ProcessUser;
use crate::sandbox::container::{self, ExecProcess};
use crate::security::Security;

/// Options of `exec` into a running container.
pub struct ExecOpts {
    pub id: String,
    pub process: Option<PathBuf>,
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub user: Option<(u32, Option<u32>)>,
    pub additional_gids: Vec<u32>,
    pub caps: Vec<String>,
    pub tty: bool,
    pub console_socket: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    pub detach: bool,
    /// `--no-new-privs`: no_new_privs whatever the container's or process file's setting.
    pub no_new_privs: bool,
}

/// `exec`: runs a process in the running container; returns its exit status (0 when
/// detached).
pub fn exec(root: &Root, o: &ExecOpts) -> Result<i32, OciError> {
    let dir = root.get(&o.id)?;
    let saved = dir.load()?;
    let status = dir.status(&saved);
    if status != Status::Running {
        return Err(OciError::Status {
            id: o.id.clone(),
            status,
            hint: "exec needs a running container",
        });
    }
    let plan = dir.load_plan()?;
    let exec_socket = dir.exec_socket();
    drop(dir);
    let mut s = Settings {
        env: plan
            .env
            .iter()
            .filter_map(|e| e.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        security: Security {
            preserve_fds: 0,
            ..plan.security.clone()
        },
        user: plan.process_user.clone(),
        cwd: plan.cwd.clone(),
        tty: o.tty,
        scheduling: plan.scheduling.clone(),
    };
    let argv = match &o.process {
        Some(path) => {
            let force_nnp = o.no_new_privs
                || plan
                    .security
                    .caps
                    .as_ref()
                    .is_some_and(|c| !c.allow_new_privs);
            s.process_file(path, force_nnp)?
        }
        None => o.command.clone(),
    };
    if let (true, Some(c)) = (o.no_new_privs, s.security.caps.as_mut()) {
        c.allow_new_privs = false;
    }
    if argv.is_empty() || argv[0].is_empty() {
        return Err(OciError::Usage(
            "exec: no command; give one after the container id, or --process FILE".into(),
        ));
    }
    for (k, v) in &o.env {
        s.env.insert(k.clone(), v.clone());
    }
    if let Some(c) = &o.cwd {
        s.cwd = c.clone();
    }
    if let Some((uid, gid)) = o.user {
        s.user = Some(ProcessUser {
            uid,
            gid: gid.unwrap_or(0),
            additional_gids: o.additional_gids.clone(),
        });
    }
    s.add_caps(&o.caps)?;
    let console = match (&o.console_socket, s.tty) {
        (Some(p), true) => Some(OwnedFd::from(
            crate::sys::unixpath::connect_stream(p)
                .map_err(|e| io("connect to --console-socket", p)(e.into()))?,
        )),
        (None, true) => {
            return Err(OciError::Usage(
                "exec with a terminal needs --console-socket PATH".into(),
            ))
        }
        _ => None,
    };
    let process = ExecProcess {
        argv,
        env: s.env.into_iter().map(|(k, v)| format!("{k}={v}")).collect(),
        cwd: s.cwd,
        user: s.user,
        security: s.security,
        scheduling: s.scheduling,
        console,
        plan: &plan,
        cgroup_dirs: &saved.cgroup_dirs,
        exec_socket: &exec_socket,
    };
    let (pid, code) = container::exec_into(Pid::from_raw(saved.pid), process, o.detach)?;
    if let Some(p) = &o.pid_file {
        state::write_atomic(&absolute(p)?, pid.as_raw().to_string().as_bytes())?;
    }
    Ok(code.unwrap_or(0))
}

/// What the new process runs with: the container's own settings, then `--process`, then the
/// flags.
struct Settings {
    env: BTreeMap<String, String>,
    security: Security,
    user: Option<ProcessUser>,
    cwd: PathBuf,
    tty: bool,
    /// The container's scheduling; a `--process` file's own replaces it (as runc takes
    /// the whole process from the file).
    scheduling: Option<crate::plan::sched::Scheduling>,
}

impl Settings {
    /// Applies the process file at `path` (checked as `create` checks config.json's
    /// process); returns its command.
    fn process_file(&mut self, path: &Path, force_nnp: bool) -> Result<Vec<String>, OciError> {
        let text = std::fs::read_to_string(path).map_err(io("read --process", path))?;
        let bad = |reason: String| OciError::ParseConfig {
            path: path.to_path_buf(),
            reason,
        };
        let (p, _unknown): (spec::Process, _) = super::parse_lenient(&text).map_err(bad)?;
        // Checked as `create` checks config.json's process.
        convert::check_process(&p).map_err(|e| bad(e.to_string()))?;
        let (caps, rlimits) =
            convert::process_privilege(&p, force_nnp).map_err(|e| bad(e.to_string()))?;
        if p.capabilities.is_some() {
            self.security.caps = Some(caps);
        }
        self.scheduling = convert::scheduling(&p, true).map_err(|e| bad(e.to_string()))?;
        if !rlimits.is_empty() {
            self.security.rlimits = rlimits;
        }
        for e in &p.env {
            if let Some((k, v)) = e.split_once('=') {
                self.env.insert(k.into(), v.into());
            }
        }
        self.cwd = PathBuf::from(&p.cwd);
        self.user = Some(ProcessUser {
            uid: p.user.uid,
            gid: p.user.gid,
            additional_gids: p.user.additional_gids.clone(),
        });
        self.tty |= p.terminal;
        Ok(p.args)
    }

    /// `--cap`: capabilities added to the bounding, effective and permitted sets.
    fn add_caps(&mut self, caps: &[String]) -> Result<(), OciError> {
        if caps.is_empty() {
            return Ok(());
        }
        let mut sets = self.security.caps.clone().unwrap_or_default();
        for c in caps {
            let c = crate::security::capability(c)?;
            for set in [&mut sets.bounding, &mut sets.effective, &mut sets.permitted] {
                if !set.contains(&c) {
                    set.push(c.clone());
                }
            }
        }
        self.security.caps = Some(sets);
        Ok(())
    }
}
