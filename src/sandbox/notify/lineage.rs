//! Process lineage: the key each process's seeded streams (its `getrandom` stream and its
//! AT_RANDOM bytes) are drawn from. A process's key is its parent's key mixed with the ordinal
//! of its creation among the parent's children, so it does not depend on pids: threads take
//! pids from the same counter, and runtimes such as Go's start a number of threads that
//! varies with timing, which would shift the pid (and so the stream) of every later process.
//!
//! The workload's filter routes process creation (`fork`, `vfork`, a `clone` without
//! `CLONE_THREAD`, every `clone3`) here. The server counts the fork, lets the call proceed and
//! waits for the child to appear in the calling thread's `children` list (the kernel links it
//! there before the child first runs, so before the child can make a call of its own), then
//! records the child's key. A process the server never saw created (the workload's first
//! process) is a root, keyed by its pid in the sandbox, which nothing else precedes.

use std::collections::HashSet;
use std::time::Duration;

use super::*;

/// A process the server knows: its key, how many processes it has created, its stream.
pub(super) struct Node {
    /// Tells this process from a later one with its reused id.
    pidfd: OwnedFd,
    pub(super) key: u64,
    forks: u64,
    pub(super) stream: Option<Stream>,
}

/// The known processes, by host tgid.
#[derive(Default)]
pub(super) struct Lineage {
    nodes: HashMap<i32, Node>,
    sweep_at: usize,
}

impl Lineage {
    /// The node of process `tgid` (host id; `ns_tgid` its id in the sandbox): the one recorded
    /// at its creation, else a root keyed by `ns_tgid`. The caller must be blocked in a
    /// notified call of that process (so `tgid` names it).
    pub(super) fn node(&mut self, tgid: i32, ns_tgid: u64) -> Result<&mut Node, Errno> {
        if self
            .nodes
            .get(&tgid)
            .map_or(true, |n| exited(Some(&n.pidfd)))
        {
            let pidfd = crate::sys::pidfd_open_process(Pid::from_raw(tgid))?;
            self.insert(tgid, pidfd, ns_tgid);
        }
        self.nodes.get_mut(&tgid).ok_or(Errno::ESRCH)
    }

    fn insert(&mut self, tgid: i32, pidfd: OwnedFd, key: u64) {
        // Each node holds a descriptor: drop the exited ones whenever the map has doubled
        // since the last sweep, so short-lived processes never pile up.
        if self.nodes.len() >= self.sweep_at.max(SWEEP_MIN) {
            self.nodes.retain(|_, n| !exited(Some(&n.pidfd)));
            self.sweep_at = 2 * self.nodes.len();
        }
        let node = Node {
            pidfd,
            key,
            forks: 0,
            stream: None,
        };
        self.nodes.insert(tgid, node);
    }

    /// Whether `pid` is a live known process.
    fn knows(&self, pid: i32) -> bool {
        self.nodes
            .get(&pid)
            .is_some_and(|n| !exited(Some(&n.pidfd)))
    }
}

impl Server {
    /// The lineage key of the process of thread `tid` (`None`: it is gone).
    pub(super) fn key_of_thread(&mut self, tid: Pid) -> Option<u64> {
        let [host, inner] = status_ids(tid, ["Tgid", "NStgid"]);
        let tgid = i32::try_from(host?).ok()?;
        self.lineage.node(tgid, inner?).ok().map(|n| n.key)
    }

    /// A notified process creation (`nr` with `args`) by `caller`: counted, let through, and
    /// the child's key recorded once it exists. Thread creation just goes on.
    pub(super) fn on_fork(
        &mut self,
        listener: &OwnedFd,
        id: u64,
        nr: i64,
        c: &mut Caller,
        args: &[u64; 6],
    ) {
        let go_on = || {
            let _ = seccomp::respond_continue(listener, id);
        };
        let flags = match nr {
            libc::SYS_clone3 => {
                let mut b = [0u8; 8];
                match c.mem.read_exact_at(&mut b, args[0]) {
                    Ok(()) => u64::from_ne_bytes(b),
                    Err(_) => return go_on(),
                }
            }
            libc::SYS_clone => args[0],
            _ => 0, // fork, vfork
        };
        if flags & libc::CLONE_THREAD as u64 != 0 {
            return go_on();
        }
        let Ok((tgid, ns_tgid)) = c.process() else {
            return go_on();
        };
        let Ok(parent) = self.lineage.node(tgid, ns_tgid) else {
            return go_on();
        };
        let key = entropy::child_key(parent.key, parent.forks);
        parent.forks += 1;
        // CLONE_PARENT makes a sibling, not in the caller's list: it becomes a root.
        let list = format!("/proc/{tgid}/task/{}/children", c.tid);
        let before = match children(&list) {
            Some(b) if flags & libc::CLONE_PARENT as u64 == 0 => b,
            _ => return go_on(),
        };
        go_on();
        if let Some(child) = self.await_child(&list, &before, c.tid, nr) {
            if let Ok(pidfd) = crate::sys::pidfd_open_process(Pid::from_raw(child)) {
                self.lineage.insert(child, pidfd, key);
            }
        }
    }

    /// The child that appears in the `children` list at `list` (not in `before`), waited for
    /// while thread `tid` is still in the creating call `nr` (at most a second: a creation
    /// that failed leaves no child).
    fn await_child(&self, list: &str, before: &HashSet<i32>, tid: Pid, nr: i64) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(1);
        // A known live process may join the list by reparenting (a sibling thread exited).
        let new = || {
            children(list)?
                .into_iter()
                .find(|p| !before.contains(p) && !self.lineage.knows(*p))
        };
        let mut round = 0u32;
        loop {
            round += 1;
            if let Some(p) = new() {
                return Some(p);
            }
            if round > 16 && (!in_call(tid, nr) || Instant::now() > deadline) {
                // The call may have ended just after the list was read: once more.
                return new();
            }
            if round < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

/// The pids in a `children` list (`None`: it cannot be read, e.g. the thread is gone or the
/// kernel lacks CONFIG_PROC_CHILDREN).
fn children(list: &str) -> Option<HashSet<i32>> {
    let text = std::fs::read_to_string(list).ok()?;
    Some(
        text.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
    )
}

/// Whether thread `tid` may still be in call `nr` (its /proc syscall file names another call
/// only once it is out: "running" leaves it open).
fn in_call(tid: Pid, nr: i64) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{tid}/syscall")) else {
        return false;
    };
    match text.split_whitespace().next() {
        Some("running") => true,
        Some(n) => n.parse::<i64>().is_ok_and(|n| n == nr),
        None => false,
    }
}
