//! Process lineage: the key each process's seeded streams (its `getrandom` stream and its
//! AT_RANDOM bytes) are drawn from. A process's key is its parent's key mixed with its
//! ordinal among its parent's children, so it does not depend on pids: threads take pids
//! from the same counter, and runtimes such as Go's start a number of threads that varies
//! with timing, which would shift the pid (and so the stream) of every later process.
//!
//! Process creation is not routed here (a routed `fork` could fail with EINTR when a signal
//! arrives before the supervisor takes the call). Instead a process is placed when it first
//! needs its key (its first routed call: its exec, a `getrandom`): its ordinal is the number
//! of its parent's children created before it (a lower pid: pids are handed out in creation
//! order) that the server has placed or that are still alive. A child that exited without
//! ever making a routed call is not counted, which is the same on every run of a program
//! that does the same thing. The command itself (whose parent is the sandbox's init), a
//! process whose parent is gone (a double-forked daemon), and, without a pid namespace, one
//! whose parent never made a routed call, is a root, keyed by its pid in the sandbox.

use super::*;

/// A process the server knows: its key, its placed children, its stream.
pub(super) struct Node {
    /// Tells this process from a later one with its reused id.
    pidfd: OwnedFd,
    pub(super) key: u64,
    /// The host pids of the children placed so far.
    children: Vec<i32>,
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
        let key = match parent.and_then(|p| self.nodes.get(&p).map(|n| (p, n))) {
            Some((p, node)) => {
                let live = children_of(p);
                let before = |c: &i32| *c < pid;
                let placed = node.children.iter().filter(|c| before(c)).count();
                let unplaced = live
                    .iter()
                    .filter(|c| before(c) && !node.children.contains(c))
                    .count();
                entropy::child_key(node.key, (placed + unplaced) as u64)
            }
            None => ns_pid,
        };
        if let Some(p) = parent {
            if let Some(n) = self.nodes.get_mut(&p) {
                n.children.push(pid);
            }
        }
        self.insert(pid, pidfd, key);
        Ok(())
    }

    fn insert(&mut self, tgid: i32, pidfd: OwnedFd, key: u64) {
        // Each node holds a descriptor: drop the exited ones whenever the map has doubled
        // since the last sweep, so short-lived processes never pile up. An exited process's
        // place among its siblings stays with its parent (its pid in `children`).
        if self.nodes.len() >= self.sweep_at.max(SWEEP_MIN) {
            self.nodes.retain(|_, n| !exited(Some(&n.pidfd)));
            self.sweep_at = 2 * self.nodes.len();
        }
        let node = Node {
            pidfd,
            key,
            children: Vec::new(),
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

/// The live children of process `pid`, from every thread's `children` list (empty where the
/// kernel lacks CONFIG_PROC_CHILDREN).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}
