//! Process lineage: the key each process's seeded streams (its `getrandom` stream and its
//! AT_RANDOM bytes) are drawn from. A process's key is its parent's key mixed with its
//! ordinal among its parent's children, so it does not depend on pids: threads take pids
//! from the same counter, and runtimes such as Go's start a number of threads that varies
//! with timing, which would shift the pid (and so the stream) of every later process.
//!
//! A parent's children get their ordinals in pid order (the order the kernel created them)
//! whenever the server *syncs* the parent: when one of them first needs its key (the preload
//! library's query at a dynamic program's start, a static program's exec, a `getrandom`),
//! and whenever the parent waits (`wait4`, `waitid`
//! are routed for this, and let through unchanged). A child can only disappear from its
//! parent's list by being reaped, which takes a wait, so every child is seen before it is
//! gone: one that exits without a routed call of its own (a subshell running builtins)
//! still takes its ordinal, on every run alike. Process creation itself is not routed (a
//! routed `fork` could fail with EINTR, which a real `fork` never does).
//!
//! Not covered, and keyed by their pid in the sandbox instead (the previous scheme): the
//! command itself (its parent is the sandbox's init), a process whose parent exited before
//! the process was seen (a double-forked daemon), and, without a pid namespace, one whose
//! parent never made a routed call. A child reaped without a wait (its parent ignores SIGCHLD) that never made a
//! routed call is not counted, which shifts its later siblings' keys if it exited before
//! they were seen; children forked at once by several threads of one process take their
//! ordinals in the order the kernel created them, which is as timing-dependent as that
//! order.

use super::*;

/// A process the server knows: its key, its children's keys, its stream.
pub(super) struct Node {
    /// Tells this process from a later one with its reused id.
    pidfd: OwnedFd,
    pub(super) key: u64,
    /// The children listed at the last sync (host pid → key).
    kids: HashMap<i32, u64>,
    /// How many children have had an ordinal.
    born: u64,
    pub(super) stream: Option<Stream>,
}

/// The known processes, by host tgid.
#[derive(Default)]
pub(super) struct Lineage {
    nodes: HashMap<i32, Node>,
    sweep_at: usize,
}

/// How far up the tree placing a process may go (its unplaced ancestors).
const MAX_DEPTH: usize = 64;

impl Lineage {
    /// The node of process `tgid` (host id; `ns_tgid` its id in the sandbox), placed now if
    /// it is new. It must be alive (blocked in a routed call), so `tgid` names it.
    pub(super) fn node(&mut self, tgid: i32, ns_tgid: u64) -> Result<&mut Node, Errno> {
        if !self.knows(tgid) {
            self.place(tgid, Some(ns_tgid), 0)?;
        }
        self.nodes.get_mut(&tgid).ok_or(Errno::ESRCH)
    }

    /// Process `tgid` is about to wait: its children get their ordinals before one of them
    /// can be reaped.
    pub(super) fn on_wait(&mut self, tgid: i32, ns_tgid: u64) {
        if self.node(tgid, ns_tgid).is_ok() {
            self.sync(tgid);
        }
    }

    /// Places process `pid`: under its parent (placed first if need be), else as a root.
    fn place(&mut self, pid: i32, ns_pid: Option<u64>, depth: usize) -> Result<(), Errno> {
        let pidfd = crate::sys::pidfd_open_process(Pid::from_raw(pid))?;
        let [ppid, ns] = status_ids(Pid::from_raw(pid), ["PPid", "NStgid"]);
        let ns_pid = ns_pid.or(ns).ok_or(Errno::ESRCH)?;
        // A parent outside the sandbox's processes (its init, the host's) is never placed:
        // what the host runs must not shift the keys.
        let parent = ppid
            .and_then(|p| i32::try_from(p).ok())
            .filter(|&p| p > 0 && depth < MAX_DEPTH)
            .filter(|&p| {
                self.knows(p) || (in_sandbox(p) && self.place(p, None, depth + 1).is_ok())
            });
        let key = parent
            .and_then(|p| {
                self.sync(p);
                self.nodes.get(&p)?.kids.get(&pid).copied()
            })
            .unwrap_or(ns_pid);
        self.insert(pid, pidfd, key);
        Ok(())
    }

    /// Gives each child of `pid` listed now and not at the last sync the next ordinal, in pid
    /// order, and forgets the children no longer listed (reaped).
    pub(super) fn sync(&mut self, pid: i32) {
        let Some(node) = self.nodes.get_mut(&pid) else {
            return;
        };
        let mut listed = children_of(pid);
        listed.sort_unstable();
        listed.dedup();
        node.kids.retain(|k, _| listed.binary_search(k).is_ok());
        for child in listed {
            if let std::collections::hash_map::Entry::Vacant(e) = node.kids.entry(child) {
                e.insert(entropy::child_key(node.key, node.born));
                node.born += 1;
            }
        }
    }

    fn insert(&mut self, tgid: i32, pidfd: OwnedFd, key: u64) {
        // Each node holds a descriptor: drop the exited ones whenever the map has doubled
        // since the last sweep, so short-lived processes never pile up. An exited child's
        // ordinal stays counted in its parent's `born`.
        if self.nodes.len() >= self.sweep_at.max(SWEEP_MIN) {
            self.nodes.retain(|_, n| !exited(Some(&n.pidfd)));
            self.sweep_at = 2 * self.nodes.len();
        }
        let node = Node {
            pidfd,
            key,
            kids: HashMap::new(),
            born: 0,
            stream: None,
        };
        self.nodes.insert(tgid, node);
    }

    /// Whether `pid` is a live known process.
    pub(super) fn knows(&self, pid: i32) -> bool {
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

    /// A `wait4`/`waitid` of thread `tid`: its process's children get their ordinals.
    pub(super) fn before_wait(&mut self, tid: Pid) {
        // Most waits come from a known process's main thread: no status to read then.
        if self.lineage.knows(tid.as_raw()) {
            self.lineage.sync(tid.as_raw());
            return;
        }
        let [host, inner] = status_ids(tid, ["Tgid", "NStgid"]);
        if let (Some(tgid), Some(inner)) = (host.and_then(|h| i32::try_from(h).ok()), inner) {
            self.lineage.on_wait(tgid, inner);
        }
    }
}

/// Whether process `pid` is one of the sandbox's own, not its init: in a pid namespace below
/// the reader's, with an id above 1 there. (In a run without a pid namespace nothing is, and
/// only processes already placed serve as parents.)
fn in_sandbox(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let ids: Vec<&str> = status
        .lines()
        .find_map(|l| l.strip_prefix("NStgid:"))
        .map(|v| v.split_whitespace().collect())
        .unwrap_or_default();
    ids.len() >= 2
        && ids
            .last()
            .and_then(|i| i.parse::<u64>().ok())
            .is_some_and(|i| i > 1)
}

/// The children of process `pid` (live or not yet reaped), from every thread's `children`
/// list (empty where the kernel lacks CONFIG_PROC_CHILDREN).
fn children_of(pid: i32) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let parse = |text: String| -> Vec<i32> {
        text.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let task = format!("/proc/{pid}/task");
    // A single thread (the task directory's links: itself, its parent, one thread): its
    // own list, without listing the directory (most waiters are single-threaded shells).
    if std::fs::metadata(&task).is_ok_and(|m| m.nlink() == 3) {
        return std::fs::read_to_string(format!("{task}/{pid}/children"))
            .map(parse)
            .unwrap_or_default();
    }
    let Ok(tasks) = std::fs::read_dir(&task) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(parse)
        .collect()
}
