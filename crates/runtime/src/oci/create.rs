//! `create`: a container made from its bundle, its process waiting to be started.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;

use super::state::{self, Dir, Root, Saved, Status};
use super::{absolute, convert, hooks, io, state_bytes, OciError};
use crate::sandbox::container;

/// Options of `create` (and `run`).
pub struct CreateOpts {
    pub id: String,
    pub bundle: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    pub console_socket: Option<PathBuf>,
    pub preserve_fds: u32,
    /// `--systemd-cgroup`: `linux.cgroupsPath` is systemd's `slice:prefix:name`.
    pub systemd_cgroup: bool,
}

fn now_rfc3339() -> String {
    crate::determinism::date::timestamp(std::time::SystemTime::now())
}

fn owner() -> String {
    let uid = nix::unistd::geteuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// A created container, for `run` to go on with.
pub(super) struct Made {
    pub(super) dir: Dir,
    pub(super) saved: Saved,
}

/// With `--systemd-cgroup`, a `linux.cgroupsPath` in systemd's form becomes the cgroupfs path
/// systemd would give that unit (no unit is made: reprorun speaks no D-Bus).
fn systemd_cgroups_path(spec: &mut super::spec::Spec) -> Result<(), OciError> {
    if let Some(path) = spec
        .linux
        .as_mut()
        .and_then(|l| l.cgroups_path.as_mut())
        .filter(|p| !p.is_empty())
    {
        *path = convert::systemd_cgroupfs_path(path)?;
    }
    Ok(())
}

pub(super) fn make(root: &Root, o: &CreateOpts) -> Result<Made, OciError> {
    let given = o.bundle.as_deref().unwrap_or(Path::new("."));
    let bundle = std::fs::canonicalize(given).map_err(|source| OciError::ReadConfig {
        path: given.join("config.json"),
        source,
    })?;
    let mut spec = super::read_spec(&bundle)?;
    if o.systemd_cgroup {
        systemd_cgroups_path(&mut spec)?;
    }
    let host = crate::plan::HostFacts::current()?;
    let mut c = convert::resolve(&spec, &bundle, host.cpus_available)?;
    let user = crate::plan::Namespace::User;
    let in_user_ns = c.plan.has(user) || c.plan.join.iter().any(|j| j.ns == user);
    if let (false, Some(sets)) = (in_user_ns, &c.plan.security.caps) {
        // Only what the running kernel knows (a config may list newer capabilities).
        let known = caps::runtime::thread_all_supported();
        let held: Vec<String> = caps::read(None, caps::CapSet::Permitted)
            .unwrap_or_default()
            .iter()
            .map(|c| c.to_string())
            .chain(caps::all().difference(&known).map(|c| c.to_string()))
            .collect();
        convert::unraisable(sets, &held)?;
    }
    if c.plan.parent_maps.is_some() || in_user_ns {
        super::premake::mount_points(&c.plan);
    }
    // Idmapped binds: their trees made now, so that a filesystem that refuses the mapping
    // fails here, naming the mount, before anything is created.
    let trees = crate::sandbox::isolation::idmap::detached_trees(&c.plan.mounts, (0, 0), None)
        .map_err(|f| tree_failed(&spec, f))?;
    let pid_file = o.pid_file.as_deref().map(absolute).transpose()?;
    c.plan.security.preserve_fds = o.preserve_fds;
    let mut dir = root.create(&o.id)?;
    // The directory exists (with our pid in `creating`): nobody else can create this id,
    // and nobody can `get` it before state.json is written. Unlocked now, so that no
    // process of the container inherits the lock.
    dir.unlock();
    let cleanup = |dir: Dir, e: OciError| {
        let _ = dir.remove();
        e
    };
    let fifo = dir.fifo();
    // 0622 whatever the umask: init writes it as the container's root, which may be another
    // host user (a user namespace); the state directory (0700) keeps everyone else out.
    let made = nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o622))
        .map_err(std::io::Error::from)
        .and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o622))
        });
    if let Err(e) = made {
        return Err(cleanup(dir, io("mkfifo", &fifo)(e)));
    }
    let console = match &o.console_socket {
        None => None,
        Some(p) => match crate::sys::unixpath::connect_stream(p) {
            Ok(s) => Some(OwnedFd::from(s)),
            Err(e) => return Err(cleanup(dir, io("connect to --console-socket", p)(e.into()))),
        },
    };
    if c.plan.terminal && console.is_none() {
        return Err(cleanup(
            dir,
            OciError::Usage(
                "process.terminal is true: pass --console-socket PATH to receive the terminal"
                    .into(),
            ),
        ));
    }
    let cg_path = c.cgroups_path.clone().unwrap_or_else(|| {
        // Unique even across state roots and against a cgroup a killed run left.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!("reprorun/{}-{}-{nanos}", o.id, std::process::id())
    });
    let created = match container::create(&c.plan, &cg_path, &fifo, console, trees) {
        Ok(x) => x,
        Err(e) => return Err(cleanup(dir, e.into())),
    };
    let pid = created.pid;
    let saved = Saved {
        id: o.id.clone(),
        pid: pid.as_raw(),
        pid_start: state::start_time(pid.as_raw()).unwrap_or(0),
        bundle: bundle.clone(),
        rootfs: c.plan.rootfs.clone(),
        created: now_rfc3339(),
        annotations: c.annotations.clone(),
        owner: owner(),
        cgroup_dirs: created.cgroup_dirs.clone(),
        hooks: c.hooks.clone(),
    };
    let fail = |dir: Dir, saved: &Saved, e: OciError| {
        let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(pid, None);
        crate::sandbox::remove_cgroup(&saved.cgroup_dirs);
        cleanup(dir, e)
    };
    if let Err(e) = dir.save_plan(&c.plan).and_then(|_| dir.save(&saved)) {
        return Err(fail(dir, &saved, e.into()));
    }
    let state_json = state_bytes(&saved, Status::Created);
    for (stage, list) in [
        ("createRuntime", &c.hooks.create_runtime),
        ("createContainer", &c.hooks.create_container),
    ] {
        if let Err(e) = hooks::run_all(stage, list, &state_json) {
            return Err(fail(dir, &saved, e.into()));
        }
    }
    if let Err(e) = created.commit(&c.plan, &dir.exec_socket()) {
        return Err(fail(dir, &saved, e.into()));
    }
    if let Some(p) = &pid_file {
        if let Err(e) = state::write_atomic(p, pid.as_raw().to_string().as_bytes()) {
            return Err(fail(dir, &saved, e.into()));
        }
    }
    if let Err(e) = dir.complete() {
        return Err(fail(dir, &saved, e.into()));
    }
    Ok(Made { dir, saved })
}

/// An idmapped bind whose tree could not be made, named by its place in the config's
/// `mounts` (the plan's idmapped binds are the config's idmapped mounts, in order).
fn tree_failed(
    spec: &super::spec::Spec,
    f: crate::sandbox::isolation::idmap::TreeFailed,
) -> OciError {
    let at = spec
        .mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| convert::is_idmapped(m))
        .nth(f.nth)
        .map_or(f.nth, |(i, _)| i);
    OciError::Convert(convert::ConvertError::Field {
        field: format!("mounts[{at}]"),
        reason: f.error.to_string(),
    })
}

/// `create`: the container made and its process waiting for `start`.
pub fn create(root: &Root, o: &CreateOpts) -> Result<i32, OciError> {
    make(root, o).map(|_| 0)
}
