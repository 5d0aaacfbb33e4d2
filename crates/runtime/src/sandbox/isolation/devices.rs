//! The sandbox's own device rules (`reprorun exec`): the workload may open the device nodes
//! it is given — null, zero, full, random, urandom, tty, the pty's (`ptmx` and the slaves)
//! — and the character or block devices the caller hands it as descriptors (its standard
//! descriptors and `--preserve-fds`, reopened through `/proc/self/fd`, with the access the
//! descriptor has); no other device, however its node is reached (a descriptor of a host
//! directory, a mount). Inside the sandbox's user namespace `mknod` of a device is refused
//! and every filesystem reprorun mounts is `nodev`: these rules are the wall behind those.
//!
//! Enforced by a device cgroup of the root caller's runs (a rootless caller's workload opens
//! nothing the caller could not). A run with limits has a cgroup of its own
//! ([`super::cgroup`]) and the rules go there. Every other run joins a shared,
//! reprorun-owned cgroup kept for its list of rules, `reprorun-devices-HASH/run` below
//! reprorun's own cgroup: on the v2 hierarchy where one is mounted (the BPF program loaded
//! and attached once; init is cloned into it), else on the v1 `devices` hierarchy (the rules
//! written once; the supervisor's thread steps in to clone init and back). It is never removed, so a run makes no cgroup, loads no
//! program and waits for nothing at its end to remove one. `run` is made after the rules are in place, so its
//! existence means they are: a run that finds it joins without looking further; one that
//! does not takes an exclusive `flock` of our own cgroup's directory and sets the rules up
//! (again, after a setup that died half-way).

use std::cell::Cell;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::unistd::Pid;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::cgroup::Hierarchy;
use super::devfilter;
use crate::security::DeviceRule;

/// The devices of every sandbox: null, zero, full, random, urandom, tty, ptmx and the pty
/// slaves (major 136: every pty of a devpts instance).
const BASE: [&str; 8] = [
    "c 1:3 rwm",
    "c 1:5 rwm",
    "c 1:7 rwm",
    "c 1:8 rwm",
    "c 1:9 rwm",
    "c 5:0 rwm",
    "c 5:2 rwm",
    "c 136:* rwm",
];

/// The shared cgroups' name prefix (the rules' hash follows).
const PREFIX: &str = "reprorun-devices-";
/// The child that runs join, made once the rules are in place.
const RUN: &str = "run";

#[derive(Debug, Error)]
pub enum DevicesError {
    #[error(transparent)]
    Hierarchy(#[from] super::cgroup::CgroupError),
    #[error("the sandbox's device rules: {step} {path}: {errno}")]
    Setup {
        step: &'static str,
        path: PathBuf,
        errno: Errno,
    },
    #[error("the sandbox's device rules: move the sandbox into {path}: {errno}")]
    Join { path: PathBuf, errno: Errno },
}

impl DevicesError {
    /// Whether the hierarchy refuses a cgroup of reprorun's own (a container's read-only
    /// cgroupfs, a cgroup not delegated to us): the run then goes without device rules, as
    /// where no hierarchy can hold them (a second wall: the sandbox's mounts are `nodev`,
    /// `mknod` is refused, its ids are not the host's).
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(
            self,
            DevicesError::Setup {
                errno: Errno::EROFS | Errno::EACCES | Errno::EPERM,
                ..
            }
        )
    }
}

fn errno_of(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// The rule for the device `fd` refers to, with the access it was opened for; `None` for
/// anything but a character or block device (or a descriptor without access: `O_PATH`).
fn fd_rule(fd: RawFd) -> Option<DeviceRule> {
    let st = nix::sys::stat::fstat(fd).ok()?;
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFCHR => 'c',
        libc::S_IFBLK => 'b',
        _ => return None,
    };
    let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).ok()?;
    if flags & libc::O_PATH != 0 {
        return None;
    }
    let access = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => "r",
        libc::O_WRONLY => "w",
        _ => "rw",
    };
    let (major, minor) = (libc::major(st.st_rdev), libc::minor(st.st_rdev));
    Some(DeviceRule {
        allow: true,
        rule: format!("{kind} {major}:{minor} {access}"),
    })
}

/// Whether `rule` allows everything `wanted` does.
fn covers(rule: &devfilter::Rule, wanted: &devfilter::Rule) -> bool {
    let field = |r: Option<u32>, w: Option<u32>| r.is_none() || r == w;
    rule.allow
        && field(rule.kind, wanted.kind)
        && field(rule.major, wanted.major)
        && field(rule.minor, wanted.minor)
        && wanted.access & !rule.access == 0
}

/// The sandbox's rules: [`BASE`], then the device of each of `fds` (the workload's standard
/// descriptors and preserved ones) that [`BASE`] does not already allow.
pub(crate) fn rules(fds: &[RawFd]) -> Vec<DeviceRule> {
    let mut out: Vec<DeviceRule> = BASE
        .iter()
        .map(|r| DeviceRule {
            allow: true,
            rule: r.to_string(),
        })
        .collect();
    for fd in fds {
        let Some(rule) = fd_rule(*fd) else {
            continue;
        };
        let Some(wanted) = devfilter::parse(&rule) else {
            continue;
        };
        let covered = out
            .iter()
            .filter_map(devfilter::parse)
            .any(|r| covers(&r, &wanted));
        if !covered {
            out.push(rule);
        }
    }
    out
}

/// The hierarchies for the sandbox's device cgroup, `None` where there is none to hold it
/// (neither a v2 hierarchy nor the v1 `devices` controller). The v2 one is preferred, so the
/// v1 mounts (`/proc/self/mountinfo`, long on a host with many mounts) are read only without.
pub(crate) fn hierarchy() -> Result<Option<Hierarchy>, DevicesError> {
    let mut h = Hierarchy::host_reading(false)?;
    if h.v2_own().is_some() {
        return Ok(Some(h));
    }
    if let Some(line) = usual_v1_mount(&h) {
        h.mountinfo = line;
        return Ok(Some(h));
    }
    let h = Hierarchy::host_reading(true)?;
    Ok(h.v1_own("devices").is_some().then_some(h))
}

/// The v1 `devices` hierarchy where hosts mount it, `/sys/fs/cgroup/devices`, as the one
/// line of mountinfo [`Hierarchy`] needs, found without reading `/proc/self/mountinfo`
/// (the kernel writes that text out mount by mount: about a tenth of a millisecond of every
/// start here, more on a host with many mounts). It is taken only if the directory is on a
/// cgroup filesystem and our own cgroup (`/proc/self/cgroup`) is there below it with the
/// controller's `devices.list`; else (a container whose mount shows only its own part of
/// the hierarchy, a host that mounts it elsewhere) mountinfo is read.
fn usual_v1_mount(h: &Hierarchy) -> Option<String> {
    let point = h.root.join("devices");
    let own = h.own_path("devices")?;
    let fs = nix::sys::statfs::statfs(&point).ok()?;
    if fs.filesystem_type() != nix::sys::statfs::CGROUP_SUPER_MAGIC {
        return None;
    }
    let list = point.join(own.trim_start_matches('/')).join("devices.list");
    nix::sys::stat::lstat(&list).ok()?;
    Some(format!(
        "0 0 0:0 / {} rw - cgroup cgroup rw,devices\n",
        point.display()
    ))
}

/// The shared cgroup's name for `rules`.
fn name(rules: &[DeviceRule]) -> String {
    let mut h = Sha256::new();
    for r in rules {
        h.update(if r.allow { b"allow " } else { b"deny  " });
        h.update(r.rule.as_bytes());
        h.update(b"\n");
    }
    let digest = h.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{hex}")
}

/// Where the rules are enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The v1 `devices` controller: the rules written into the cgroup's files.
    V1,
    /// A BPF program attached to the v2 cgroup.
    V2,
}

/// The shared device cgroup a run joins.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Its `run` directory.
    dir: PathBuf,
    /// On cgroup v2, that directory open: init is cloned into it
    /// ([`crate::sys::clone_process_into`]) rather than moved.
    v2: Option<OwnedFd>,
    /// On cgroup v1, our own cgroup's directory on the `devices` hierarchy: the supervisor's
    /// thread steps into the shared cgroup for the clone and back (see [`Shared::enter`]).
    own_v1: Option<PathBuf>,
    /// Init was cloned into it: nothing to move.
    joined: Cell<bool>,
    /// The supervisor's thread is in it (v1, between [`Shared::enter`] and [`Shared::leave`]).
    entered: Cell<bool>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.leave();
    }
}

impl Shared {
    /// The shared cgroup for `rules` on the hierarchies `h` describes, set up if it is not
    /// yet: on the v2 hierarchy where one is mounted (a hybrid host's too: init is cloned
    /// straight into it, where a move into a v1 cgroup can wait milliseconds for the kernel),
    /// else on the v1 `devices` controller; `None` where there is neither.
    pub(crate) fn for_rules(
        h: &Hierarchy,
        rules: &[DeviceRule],
    ) -> Result<Option<Shared>, DevicesError> {
        let (own, kind) = match h.v2_own() {
            Some(own) => (own, Kind::V2),
            None => match h.v1_own("devices") {
                Some(own) => (own, Kind::V1),
                None => return Ok(None),
            },
        };
        let top = own.join(name(rules));
        let dir = top.join(RUN);
        let open = || {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            let fd = nix::fcntl::open(&dir, flags, Mode::empty())?;
            // SAFETY: open returned a fresh descriptor nothing else owns.
            Ok::<_, Errno>(unsafe { OwnedFd::from_raw_fd(fd) })
        };
        // Found by opening it (v2, where it is needed open) or looking (v1); else set up.
        let found = match kind {
            Kind::V2 => open().ok(),
            Kind::V1 => None,
        };
        if found.is_none() && !(kind == Kind::V1 && dir.exists()) {
            set_up(&own, &top, kind, rules)?;
        }
        let own_v1 = (kind == Kind::V1).then(|| own.clone());
        let v2 = match (kind, found) {
            (Kind::V1, _) => None,
            (Kind::V2, Some(fd)) => Some(fd),
            (Kind::V2, None) => Some(open().map_err(|errno| DevicesError::Join {
                path: dir.clone(),
                errno,
            })?),
        };
        Ok(Some(Shared {
            dir,
            v2,
            own_v1,
            joined: Cell::new(false),
            entered: Cell::new(false),
        }))
    }

    /// The v2 cgroup directory to clone init into; `None` on v1 ([`Shared::add`] then).
    pub(crate) fn clone_into(&self) -> Option<BorrowedFd<'_>> {
        self.v2.as_ref().map(|fd| fd.as_fd())
    }

    /// Notes that init was cloned into the cgroup.
    pub(crate) fn cloned_into(&self) {
        self.joined.set(true);
    }

    /// v1: moves the calling thread (the single-threaded supervisor, about to clone init,
    /// which then starts in the cgroup) into the cgroup, by writing `0` to its `tasks`. A
    /// thread moving itself is the one move that skips the kernel's global lock of every
    /// process's cgroups, whose taking waits for an RCU grace period when no move came just
    /// before (milliseconds; about 0.1 ms this way). Whether it moved; a failure leaves
    /// [`Shared::add`] to move init.
    pub(crate) fn enter(&self) -> bool {
        let moved = self.own_v1.is_some() && std::fs::write(self.dir.join("tasks"), "0").is_ok();
        self.entered.set(moved);
        moved
    }

    /// Moves the calling thread back to our own cgroup after [`Shared::enter`] (before it
    /// starts threads or processes of its own).
    pub(crate) fn leave(&self) {
        if let (true, Some(own)) = (self.entered.get(), &self.own_v1) {
            let _ = std::fs::write(own.join("tasks"), "0");
            self.entered.set(false);
        }
    }

    /// Moves process `pid` into the cgroup, unless it was cloned into it.
    pub(crate) fn add(&self, pid: Pid) -> Result<(), DevicesError> {
        if self.joined.get() {
            return Ok(());
        }
        let procs = self.dir.join("cgroup.procs");
        std::fs::write(&procs, pid.as_raw().to_string()).map_err(|e| DevicesError::Join {
            path: self.dir.clone(),
            errno: errno_of(&e),
        })
    }
}

/// Makes `top` with the rules in place, then its `run` child, holding the lock of `own`.
fn set_up(own: &Path, top: &Path, kind: Kind, rules: &[DeviceRule]) -> Result<(), DevicesError> {
    let fail = |step: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |e: std::io::Error| DevicesError::Setup {
            step,
            path,
            errno: errno_of(&e),
        }
    };
    let dir = std::fs::File::open(own).map_err(fail("open", own))?;
    let _lock = nix::fcntl::Flock::lock(dir, nix::fcntl::FlockArg::LockExclusive).map_err(
        |(_, errno)| DevicesError::Setup {
            step: "lock",
            path: own.to_path_buf(),
            errno,
        },
    )?;
    let run = top.join(RUN);
    if run.exists() {
        return Ok(()); // set up by another run while we waited
    }
    match std::fs::create_dir(top) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail("create", top)(e)),
    }
    match kind {
        Kind::V1 => {
            let deny = top.join("devices.deny");
            std::fs::write(&deny, "a").map_err(fail("write", &deny))?;
            let allow = top.join("devices.allow");
            for r in rules {
                let file = if r.allow { &allow } else { &deny };
                std::fs::write(file, &r.rule).map_err(fail("write", file))?;
            }
        }
        Kind::V2 => {
            devfilter::attach(top, rules).map_err(|errno| DevicesError::Setup {
                step: "attach the device program to",
                path: top.to_path_buf(),
                errno,
            })?;
        }
    }
    std::fs::create_dir(&run).map_err(fail("create", &run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn texts(rules: &[DeviceRule]) -> Vec<&str> {
        rules.iter().map(|r| r.rule.as_str()).collect()
    }

    #[test]
    fn the_base_list_and_devices_handed_over_as_descriptors_with_their_access() {
        let null_rw = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap();
        let file = tempfile::tempfile().unwrap();
        // /dev/null is in the list already; a regular file is no device; -1 is no descriptor.
        let r = rules(&[null_rw.as_raw_fd(), file.as_raw_fd(), -1]);
        assert_eq!(texts(&r), BASE);
        assert!(r.iter().all(|r| r.allow));
        // A device outside the list (the kernel log, where the host has it): added with
        // the descriptor's own access only.
        if let Ok(f) = std::fs::File::open("/dev/kmsg") {
            let r = rules(&[f.as_raw_fd()]);
            assert_eq!(texts(&r).last(), Some(&"c 1:11 r"));
            assert_eq!(r.len(), BASE.len() + 1);
        }
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open("/dev/kmsg") {
            assert_eq!(texts(&rules(&[f.as_raw_fd()])).last(), Some(&"c 1:11 w"));
        }
    }

    #[test]
    fn a_rule_covers_what_it_allows_and_nothing_more() {
        let p = |allow, t: &str| {
            devfilter::parse(&DeviceRule {
                allow,
                rule: t.into(),
            })
            .unwrap()
        };
        assert!(covers(&p(true, "c 136:* rwm"), &p(true, "c 136:4 rw")));
        assert!(covers(&p(true, "c 1:3 rwm"), &p(true, "c 1:3 r")));
        assert!(!covers(&p(true, "c 1:3 r"), &p(true, "c 1:3 rw")));
        assert!(!covers(&p(true, "c 1:3 rwm"), &p(true, "b 1:3 r")));
        assert!(!covers(&p(true, "c 136:* rwm"), &p(true, "c 137:0 r")));
        assert!(!covers(&p(false, "c 1:3 rwm"), &p(true, "c 1:3 r")));
    }

    #[test]
    fn the_shared_cgroup_is_named_by_its_rules() {
        let base = rules(&[]);
        assert_eq!(name(&base), name(&rules(&[])));
        assert!(name(&base).starts_with(PREFIX));
        assert_eq!(name(&base).len(), PREFIX.len() + 16);
        let mut more = base.clone();
        more.push(DeviceRule {
            allow: true,
            rule: "c 4:64 rw".into(),
        });
        assert_ne!(name(&base), name(&more));
        let mut denied = more.clone();
        denied.last_mut().unwrap().allow = false;
        assert_ne!(name(&more), name(&denied));
    }

    #[test]
    fn set_up_writes_v1_rules_then_the_run_child_and_is_done_once() {
        // A directory standing in for the v1 devices hierarchy, this process at its root.
        let dir = tempfile::tempdir().unwrap();
        let point = dir.path().join("devices");
        std::fs::create_dir(&point).unwrap();
        let h = Hierarchy {
            root: dir.path().to_path_buf(),
            membership: "5:devices:/\n0::/\n".into(),
            mountinfo: format!(
                "30 1 0:40 / {} rw - cgroup cgroup rw,devices\n",
                point.display()
            ),
        };
        let list = rules(&[]);
        let shared = Shared::for_rules(&h, &list).unwrap().unwrap();
        let top = point.join(name(&list));
        assert_eq!(shared.dir, top.join(RUN));
        assert!(shared.dir.is_dir());
        // (A plain file keeps the last write of each.)
        assert_eq!(
            std::fs::read_to_string(top.join("devices.deny")).unwrap(),
            "a"
        );
        assert_eq!(
            std::fs::read_to_string(top.join("devices.allow")).unwrap(),
            "c 136:* rwm"
        );
        // Found set up: nothing written again.
        std::fs::remove_file(top.join("devices.allow")).unwrap();
        Shared::for_rules(&h, &list).unwrap().unwrap();
        assert!(!top.join("devices.allow").exists());
        // A setup that died before `run`: done again.
        std::fs::remove_dir(top.join(RUN)).unwrap();
        Shared::for_rules(&h, &list).unwrap().unwrap();
        assert!(top.join("devices.allow").exists() && top.join(RUN).is_dir());
        // With a v2 hierarchy too, that one is preferred: the program is attached there (a
        // plain directory refuses it, naming the cgroup; nothing is half made).
        let unified = dir.path().join("unified");
        std::fs::create_dir(&unified).unwrap();
        std::fs::write(unified.join("cgroup.controllers"), "").unwrap();
        match Shared::for_rules(&h, &list).unwrap_err() {
            DevicesError::Setup { step, path, .. } => {
                assert_eq!(step, "attach the device program to");
                assert_eq!(path, unified.join(name(&list)));
            }
            other => panic!("{other}"),
        }
        assert!(!unified.join(name(&list)).join(RUN).exists());
        // Without the v1 controller and without a v2 hierarchy: nowhere to enforce them.
        let none = Hierarchy {
            mountinfo: String::new(),
            membership: "5:devices:/\n".into(),
            ..h
        };
        assert!(Shared::for_rules(&none, &list).unwrap().is_none());
    }

    #[test]
    fn the_usual_v1_mount_is_taken_only_on_a_cgroup_filesystem_with_our_cgroup_in_it() {
        // A plain directory shaped like the hierarchy: not a cgroup filesystem, so mountinfo
        // is to be read.
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("devices/user.slice");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("devices.list"), "a *:* rwm\n").unwrap();
        let h = Hierarchy {
            root: dir.path().to_path_buf(),
            membership: "5:devices:/user.slice\n".into(),
            mountinfo: String::new(),
        };
        assert_eq!(usual_v1_mount(&h), None);
        // This host's, where it has one: the line names the mount and the controller, and
        // the directory it leads to is the one mountinfo gives.
        let host = match Hierarchy::host_reading(true) {
            Ok(h) if h.own_path("devices").is_some() => h,
            _ => return, // no v1 devices controller here: the negative case above stands
        };
        let Some(line) = usual_v1_mount(&host) else {
            return; // mounted elsewhere or showing a sub-hierarchy: mountinfo is read
        };
        let fast = Hierarchy {
            mountinfo: line,
            ..host.clone()
        };
        assert_eq!(fast.v1_own("devices"), host.v1_own("devices"));
    }
}
