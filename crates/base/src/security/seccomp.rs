//! The security seccomp profile: reprorun's default (a deny list that refuses at least what
//! Docker's default profile refuses), an OCI `linux.seccomp` profile from a file, or none.
//! Profiles are data until [`compile`] turns them into BPF programs (with `seccompiler`),
//! which the workload installs next to the determinism layer's notification filter; where
//! both speak, the kernel's precedence decides (an error return beats a notification).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

mod tree;

#[derive(Debug, Error)]
pub enum SeccompError {
    #[error("--seccomp {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--seccomp {path}: not an OCI seccomp profile: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("--seccomp {path}: action {action} is not supported (use SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_KILL, SCMP_ACT_KILL_THREAD, SCMP_ACT_KILL_PROCESS, SCMP_ACT_TRAP, SCMP_ACT_TRACE or SCMP_ACT_LOG)")]
    Action { path: PathBuf, action: String },
    #[error("--seccomp {path}: operator {op} is not supported")]
    Operator { path: PathBuf, op: String },
    #[error("compile the seccomp profile: {0}")]
    Compile(String),
}

/// `--seccomp`: which security profile the workload runs under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "profile", rename_all = "kebab-case")]
pub enum SeccompProfile {
    /// reprorun's default deny list ([`DENIED`], namespace-creating `clone` flags, TIOCSTI,
    /// personalities other than the ASLR bit, x32 system calls).
    Default,
    /// No security filter (the determinism layer's notification filter stays).
    Unconfined,
    /// An OCI runtime-spec `linux.seccomp` profile read from `path`.
    Oci { path: PathBuf, spec: OciSeccomp },
}

/// `linux.seccomp` of the OCI runtime spec (the fields reprorun uses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OciSeccomp {
    pub default_action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_errno_ret: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<String>,
    #[serde(default)]
    pub syscalls: Vec<OciSyscall>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OciSyscall {
    pub names: Vec<String>,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno_ret: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<OciArg>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OciArg {
    pub index: u8,
    pub value: u64,
    #[serde(default)]
    pub value_two: u64,
    pub op: String,
}

/// Parses `--seccomp VALUE`: `unconfined`, or the path of an OCI profile (read and checked
/// now, so a bad profile fails before anything runs).
pub fn parse_option(value: &str) -> Result<SeccompProfile, SeccompError> {
    match value {
        "unconfined" => Ok(SeccompProfile::Unconfined),
        "default" => Ok(SeccompProfile::Default),
        path => {
            let path = PathBuf::from(path);
            // A regular file of at most 16 MiB (never a FIFO or device an earlier run left).
            let text =
                crate::sys::hostpath::read_to_string(&path, true, 16 << 20).map_err(|e| {
                    SeccompError::Read {
                        path: path.clone(),
                        source: std::io::Error::other(e),
                    }
                })?;
            let spec = parse_oci(&text).map_err(|reason| SeccompError::Parse {
                path: path.clone(),
                reason,
            })?;
            // Compile once now: unknown actions, operators and oversize programs are input
            // errors.
            let profile = SeccompProfile::Oci { path, spec };
            compile(&profile)?;
            Ok(profile)
        }
    }
}

/// Parses the text of an OCI `linux.seccomp` object, or of a whole `config.json` holding one.
pub fn parse_oci(text: &str) -> Result<OciSeccomp, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let object = value.pointer("/linux/seccomp").cloned().unwrap_or(value);
    serde_json::from_value(object).map_err(|e| e.to_string())
}

/// System calls the default profile refuses with EPERM, whatever their arguments.
pub const DENIED: &[(&str, i64)] = &[
    // Kernel modules, kexec, reboot, swap.
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    // Mounts (the sandbox is set up before the filter is installed).
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("open_tree_attr", 467), // Linux 6.15; not in libc yet (unified number)
    ("mount_setattr", libc::SYS_mount_setattr),
    ("chroot", libc::SYS_chroot),
    // Namespaces.
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    // Keys.
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    // Kernel attack surface: BPF, perf, io_uring, userfaultfd.
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("userfaultfd", libc::SYS_userfaultfd),
    // Other processes' memory.
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    // File handles (the "shocker" escape).
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    // I/O ports, accounting, clocks, quotas, kernel log, NUMA policy, legacy calls.
    ("iopl", libc::SYS_iopl),
    ("ioperm", libc::SYS_ioperm),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("quotactl", libc::SYS_quotactl),
    ("quotactl_fd", libc::SYS_quotactl_fd),
    ("syslog", libc::SYS_syslog),
    ("vhangup", libc::SYS_vhangup),
    ("uselib", libc::SYS_uselib),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    ("nfsservctl", libc::SYS_nfsservctl),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("mbind", libc::SYS_mbind),
    ("set_mempolicy", libc::SYS_set_mempolicy),
    ("migrate_pages", libc::SYS_migrate_pages),
    ("move_pages", libc::SYS_move_pages),
    ("set_mempolicy_home_node", libc::SYS_set_mempolicy_home_node),
    ("sethostname", libc::SYS_sethostname),
    ("setdomainname", libc::SYS_setdomainname),
];

/// `clone` flags that create namespaces: refused in `clone`'s flags argument.
const NAMESPACE_FLAGS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];
/// ioctl requests that push input into a terminal (TIOCSTI) or reach the console (TIOCLINUX).
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541c;
/// personality(2) values allowed: the default, ADDR_NO_RANDOMIZE, and the query.
const PERSONALITIES: &[u32] = &[0, 0x0040000, 0xffff_ffff];
/// Address families `socket` and `socketpair` may create (besides `AF_NETLINK`, checked by
/// protocol): unix, IPv4, IPv6, and packet sockets, which the kernel gives only to a holder
/// of CAP_NET_RAW (`--cap-add NET_RAW`). Every other family fails with EAFNOSUPPORT: vsock
/// (not per network namespace: the machine's hypervisor and agents), Bluetooth, AF_ALG,
/// AF_KEY, TIPC, RDS, X.25, CAN and the rest, little-used code reachable without privilege.
pub const SOCKET_FAMILIES: &[u32] = &[
    libc::AF_UNIX as u32,
    libc::AF_INET as u32,
    libc::AF_INET6 as u32,
    libc::AF_PACKET as u32,
];
/// Netlink protocols a workload may open: `NETLINK_ROUTE` (interfaces, addresses, routes:
/// `getifaddrs`, `if_nameindex`, `getaddrinfo`'s `AI_ADDRCONFIG`, `ip`, Go's and Python's
/// interface lists). Others fail with EPROTONOSUPPORT: audit (libaudit then reports auditing
/// unavailable), kobject uevents (the host's device events in a pins-only run), sock_diag
/// (`ss` falls back to `/proc/net`), generic netlink, netfilter, xfrm and the rest.
pub const NETLINK_PROTOCOLS: &[u32] = &[libc::NETLINK_ROUTE as u32];

pub(super) fn arch() -> Result<TargetArch, SeccompError> {
    std::env::consts::ARCH.try_into().map_err(|_| {
        SeccompError::Compile(format!("no seccomp support for {}", std::env::consts::ARCH))
    })
}

pub(super) fn cond(
    index: u8,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, SeccompError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Qword, op, value)
        .map_err(|e| SeccompError::Compile(e.to_string()))
}

pub(super) fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SeccompError> {
    SeccompRule::new(conds).map_err(|e| SeccompError::Compile(e.to_string()))
}

fn program(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    mismatch: SeccompAction,
    matched: SeccompAction,
) -> Result<BpfProgram, SeccompError> {
    let filter = SeccompFilter::new(rules, mismatch, matched, arch()?)
        .map_err(|e| SeccompError::Compile(e.to_string()))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompError::Compile(e.to_string()))
}

/// The default profile as one program: every call in [`DENIED`], `clone` with a namespace
/// flag, `clone3` (ENOSYS, so libc falls back to `clone`, whose flags can be checked),
/// `ioctl(TIOCSTI/TIOCLINUX)`, other personalities and sockets of a family or netlink
/// protocol not allowed ([`SOCKET_FAMILIES`], [`NETLINK_PROTOCOLS`]) fail; x32 calls fail
/// with ENOSYS; everything else is allowed. Laid out as a search tree ([`tree`]): cheap to install.
fn default_programs() -> Result<Vec<BpfProgram>, SeccompError> {
    use tree::Leaf;
    const EPERM: u32 = libc::EPERM as u32;
    const IOCTLS: &[u32] = &[TIOCSTI as u32, TIOCLINUX as u32];
    let mut calls: Vec<(i64, Leaf)> = DENIED
        .iter()
        .map(|(_, nr)| (*nr, Leaf::Errno(EPERM)))
        .collect();
    let namespaces = NAMESPACE_FLAGS.iter().fold(0u32, |m, f| m | *f as u32);
    calls.extend([
        (
            libc::SYS_clone,
            Leaf::AnyBitSet {
                index: 0,
                mask: namespaces,
                errno: EPERM,
            },
        ),
        (
            libc::SYS_ioctl,
            Leaf::OneOf {
                index: 1,
                values: IOCTLS,
                errno: EPERM,
            },
        ),
        (
            libc::SYS_personality,
            Leaf::NoneOf {
                index: 0,
                values: PERSONALITIES,
                errno: EPERM,
            },
        ),
        (libc::SYS_clone3, Leaf::Errno(libc::ENOSYS as u32)),
    ]);
    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
        let leaf = Leaf::Families {
            families: SOCKET_FAMILIES,
            netlink: NETLINK_PROTOCOLS,
        };
        calls.push((nr, leaf));
    }
    Ok(vec![tree::program(calls)?])
}

fn oci_action(
    path: &Path,
    action: &str,
    errno: Option<u32>,
    default_errno: u32,
) -> Result<SeccompAction, SeccompError> {
    Ok(match action {
        "SCMP_ACT_ALLOW" => SeccompAction::Allow,
        "SCMP_ACT_ERRNO" => SeccompAction::Errno(errno.unwrap_or(default_errno)),
        "SCMP_ACT_KILL" | "SCMP_ACT_KILL_THREAD" => SeccompAction::KillThread,
        "SCMP_ACT_KILL_PROCESS" => SeccompAction::KillProcess,
        "SCMP_ACT_TRAP" => SeccompAction::Trap,
        "SCMP_ACT_TRACE" => SeccompAction::Trace(errno.unwrap_or(0)),
        "SCMP_ACT_LOG" => SeccompAction::Log,
        other => {
            return Err(SeccompError::Action {
                path: path.to_path_buf(),
                action: other.to_string(),
            })
        }
    })
}

fn oci_op(path: &Path, arg: &OciArg) -> Result<(SeccompCmpOp, u64), SeccompError> {
    Ok(match arg.op.as_str() {
        "SCMP_CMP_NE" => (SeccompCmpOp::Ne, arg.value),
        "SCMP_CMP_LT" => (SeccompCmpOp::Lt, arg.value),
        "SCMP_CMP_LE" => (SeccompCmpOp::Le, arg.value),
        "SCMP_CMP_EQ" => (SeccompCmpOp::Eq, arg.value),
        "SCMP_CMP_GE" => (SeccompCmpOp::Ge, arg.value),
        "SCMP_CMP_GT" => (SeccompCmpOp::Gt, arg.value),
        "SCMP_CMP_MASKED_EQ" => (SeccompCmpOp::MaskedEq(arg.value), arg.value_two),
        other => {
            return Err(SeccompError::Operator {
                path: path.to_path_buf(),
                op: other.to_string(),
            })
        }
    })
}

/// A system call's number on this architecture, if it has one.
pub fn syscall_number(name: &str) -> Option<i64> {
    SYSCALLS.iter().find(|(n, _)| *n == name).map(|(_, nr)| *nr)
}

/// Rules for one system call: `None` matches whatever the arguments.
type Matches = BTreeMap<i64, Option<Vec<Vec<SeccompCondition>>>>;

fn add_match(m: &mut Matches, nr: i64, conds: &[SeccompCondition]) {
    let entry = m.entry(nr).or_insert_with(|| Some(Vec::new()));
    match entry {
        None => {}
        Some(_) if conds.is_empty() => *entry = None,
        Some(list) => list.push(conds.to_vec()),
    }
}

fn to_rules(m: Matches) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SeccompError> {
    m.into_iter()
        .map(|(nr, r)| {
            // seccompiler reads an empty rule list as "match always".
            let rules = r
                .unwrap_or_default()
                .into_iter()
                .map(rule)
                .collect::<Result<Vec<_>, _>>()?;
            Ok((nr, rules))
        })
        .collect()
}

/// Compiles an OCI profile so that the kernel's precedence between filters (KILL > TRAP >
/// ERRNO > TRACE > LOG > ALLOW) gives each call the strongest action among the rules it
/// matches, and the default action when it matches none: one program per action (match: that
/// action, else ALLOW), and one that gives the default to every call no rule matches. System
/// calls this architecture does not have are skipped, as runc does.
fn compile_oci(path: &Path, spec: &OciSeccomp) -> Result<Vec<BpfProgram>, SeccompError> {
    let default_errno = spec.default_errno_ret.unwrap_or(libc::EPERM as u32);
    let default = oci_action(
        path,
        &spec.default_action,
        spec.default_errno_ret,
        default_errno,
    )?;
    let mut any_rule = Matches::new();
    let mut by_action: Vec<(SeccompAction, Matches)> = Vec::new();
    for sc in &spec.syscalls {
        let action = oci_action(path, &sc.action, sc.errno_ret, default_errno)?;
        let conds = sc
            .args
            .iter()
            .map(|a| {
                let (op, value) = oci_op(path, a)?;
                cond(a.index, op, value)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let at = match by_action.iter().position(|(a, _)| *a == action) {
            Some(i) => i,
            None => {
                by_action.push((action, Matches::new()));
                by_action.len() - 1
            }
        };
        for nr in sc.names.iter().filter_map(|n| syscall_number(n)) {
            add_match(&mut by_action[at].1, nr, &conds);
            add_match(&mut any_rule, nr, &conds);
        }
    }
    let mut programs = Vec::new();
    if default != SeccompAction::Allow {
        programs.push(program(to_rules(any_rule)?, default, SeccompAction::Allow)?);
    }
    for (action, matches) in by_action {
        if action != SeccompAction::Allow && !matches.is_empty() {
            programs.push(program(to_rules(matches)?, SeccompAction::Allow, action)?);
        }
    }
    programs.push(tree::x32_blocker());
    Ok(programs)
}

/// The kernel's limit on one seccomp program (BPF_MAXINSNS).
pub const MAX_INSTRUCTIONS: usize = 4096;

/// The BPF programs the workload installs for `profile` (none when unconfined).
pub fn compile(profile: &SeccompProfile) -> Result<Vec<BpfProgram>, SeccompError> {
    let programs = match profile {
        SeccompProfile::Unconfined => Vec::new(),
        SeccompProfile::Default => default_programs()?,
        SeccompProfile::Oci { path, spec } => compile_oci(path, spec)?,
    };
    if let Some(p) = programs.iter().find(|p| p.len() > MAX_INSTRUCTIONS) {
        return Err(SeccompError::Compile(format!(
            "{} instructions, more than the kernel's {MAX_INSTRUCTIONS} per filter; use fewer argument rules",
            p.len()
        )));
    }
    Ok(programs)
}

include!("syscalls.rs");

#[cfg(test)]
mod tests {
    use super::*;

    const X86_64: u32 = 0xc000_003e;

    /// Runs a classic-BPF seccomp program over (arch, nr, args).
    fn run(prog: &[seccompiler::sock_filter], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        run_counted(prog, arch, nr, args).0
    }

    /// [`run`], and how many instructions it took.
    fn run_counted(
        prog: &[seccompiler::sock_filter],
        arch: u32,
        nr: i64,
        args: [u64; 6],
    ) -> (u32, usize) {
        let prog = prog.iter().map(|i| (i.code, i.jt, i.jf, i.k));
        crate::sys::bpf::run(prog, arch, nr, args)
    }

    /// What the kernel does with a call under all of `progs`: the action of highest
    /// precedence (the lowest value as a signed action).
    fn verdict(progs: &[BpfProgram], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        progs
            .iter()
            .map(|p| run(p, arch, nr, args))
            .min_by_key(|r| (r & 0xffff_0000) as i32)
            .unwrap_or(libc::SECCOMP_RET_ALLOW)
    }

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    fn errno(e: i32) -> u32 {
        libc::SECCOMP_RET_ERRNO | e as u32
    }

    /// A condition on the low 32 bits of an argument the kernel reads as an `int` (personality,
    /// ioctl request): whatever a caller leaves in the upper half is ignored, as by the kernel.
    fn cond32(index: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SeccompError> {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
            .map_err(|e| SeccompError::Compile(e.to_string()))
    }

    /// ENOSYS for every x32 call and for `also`, as the default profile's second program
    /// was before the search tree.
    fn enosys_program(also: i64) -> BpfProgram {
        use crate::sys::bpf::{self, errno, jump, load, ret};
        let enosys = errno(libc::ENOSYS as u32);
        bpf::to_program(&[
            load(bpf::NR),
            jump(libc::BPF_JSET, bpf::X32_BIT, 0, 1),
            ret(enosys),
            jump(libc::BPF_JEQ, also as u32, 0, 1),
            ret(enosys),
            ret(libc::SECCOMP_RET_ALLOW),
        ])
    }

    /// The default profile as seccompiler lays it out (a linear chain, two programs): what
    /// the search tree of [`default_programs`] must agree with on every call.
    fn seccompiler_reference() -> Vec<BpfProgram> {
        let eperm = SeccompAction::Errno(libc::EPERM as u32);
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for (_, nr) in DENIED {
            rules.insert(*nr, vec![]);
        }
        let clone_rules = NAMESPACE_FLAGS
            .iter()
            .map(|f| rule(vec![cond(0, SeccompCmpOp::MaskedEq(*f as u64), *f as u64)?]))
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        rules.insert(libc::SYS_clone, clone_rules);
        let ioctls = [TIOCSTI, TIOCLINUX]
            .iter()
            .map(|r| rule(vec![cond32(1, SeccompCmpOp::Eq, *r)?]))
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        rules.insert(libc::SYS_ioctl, ioctls);
        let odd_persona = PERSONALITIES
            .iter()
            .map(|p| cond32(0, SeccompCmpOp::Ne, u64::from(*p)))
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        rules.insert(libc::SYS_personality, vec![rule(odd_persona).unwrap()]);
        let denied = program(rules, SeccompAction::Allow, eperm).unwrap();
        // Sockets: a family outside the list; a netlink protocol outside its list.
        let mut other_family = SOCKET_FAMILIES
            .iter()
            .map(|f| cond32(0, SeccompCmpOp::Ne, u64::from(*f)))
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        other_family.push(cond32(0, SeccompCmpOp::Ne, libc::AF_NETLINK as u64).unwrap());
        let mut netlink = vec![cond32(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64).unwrap()];
        for p in NETLINK_PROTOCOLS {
            netlink.push(cond32(2, SeccompCmpOp::Ne, u64::from(*p)).unwrap());
        }
        let socket_rules = |conds: &Vec<SeccompCondition>| {
            [libc::SYS_socket, libc::SYS_socketpair]
                .into_iter()
                .map(|nr| (nr, vec![rule(conds.clone()).unwrap()]))
                .collect::<BTreeMap<_, _>>()
        };
        let errno = |e: i32| SeccompAction::Errno(e as u32);
        let families = program(
            socket_rules(&other_family),
            SeccompAction::Allow,
            errno(libc::EAFNOSUPPORT),
        )
        .unwrap();
        let protocols = program(
            socket_rules(&netlink),
            SeccompAction::Allow,
            errno(libc::EPROTONOSUPPORT),
        )
        .unwrap();
        vec![
            denied,
            families,
            protocols,
            enosys_program(libc::SYS_clone3),
        ]
    }

    /// The tree gives every call number (and x32's, and another architecture's), with
    /// arguments that do and do not match each rule, the verdict seccompiler's chain gives,
    /// in one program of a fraction of its length.
    #[test]
    fn the_search_tree_agrees_with_the_linear_chain() {
        let tree = compile(&SeccompProfile::Default).unwrap();
        let chain = seccompiler_reference();
        assert_eq!(tree.len(), 1);
        // What the kernel's action cache pays at install: one run per call number.
        let cost = |progs: &[BpfProgram]| -> usize {
            (0..=600)
                .map(|nr| {
                    let each = progs.iter().map(|p| run_counted(p, X86_64, nr, [0; 6]).1);
                    each.sum::<usize>()
                })
                .sum()
        };
        let (tree_steps, chain_steps) = (cost(&tree), cost(&chain));
        assert!(
            tree_steps * 5 < chain_steps,
            "{tree_steps} vs {chain_steps}"
        );
        eprintln!("steps over calls 0..=600: tree {tree_steps}, chain {chain_steps}");
        let mut args: Vec<[u64; 6]> = vec![[0; 6], [u64::MAX; 6]];
        for f in NAMESPACE_FLAGS {
            args.push([*f as u64 | libc::SIGCHLD as u64, 0, 0, 0, 0, 0]);
        }
        for r in [TIOCSTI, TIOCLINUX, 0x5401, 0xffff_ffff_0000_0000 | TIOCSTI] {
            args.push([1, r, 0, 0, 0, 0]);
        }
        for p in [0x0040000u64, 0xffff_ffff, 8, 0x0020000, 0x1_0000_0000] {
            args.push([p, 0, 0, 0, 0, 0]);
        }
        // Socket families (vsock 40, AF_ALG 38, Bluetooth 31, AF_UNSPEC, a listed family
        // with upper bits set) and netlink protocols (route, sock_diag, audit, uevent).
        for family in [
            1u64,
            2,
            10,
            16,
            17,
            40,
            38,
            31,
            0,
            0x1_0000_0002,
            0xffff_ffff,
        ] {
            for protocol in [0u64, 4, 9, 15, 0x1_0000_0000] {
                args.push([family, 1, protocol, 0, 0, 0]);
            }
        }
        for arch in [X86_64, 0x4000_0003] {
            for nr in (0..=600).chain((0..=600).map(|n| 0x4000_0000 | n)) {
                for a in &args {
                    assert_eq!(
                        verdict(&tree, arch, nr, *a),
                        verdict(&chain, arch, nr, *a),
                        "arch {arch:#x}, call {nr}, args {a:x?}"
                    );
                }
            }
        }
    }

    #[test]
    fn default_profile_refuses_the_documented_calls() {
        let progs = compile(&SeccompProfile::Default).unwrap();
        let v = |nr: i64, args: [u64; 6]| verdict(&progs, X86_64, nr, args);
        let none = [0u64; 6];
        for (name, nr) in DENIED {
            assert_eq!(v(*nr, none), errno(libc::EPERM), "{name}");
            assert_eq!(syscall_number(name), Some(*nr), "{name} in the name table");
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_openat,
            libc::SYS_execve,
            libc::SYS_ptrace,
        ] {
            assert_eq!(v(nr, none), ALLOW, "{nr}");
        }
        let sigchld = libc::SIGCHLD as u64;
        let fork_flags = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(v(libc::SYS_clone, [fork_flags, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(v(libc::SYS_clone, [sigchld, 0, 0, 0, 0, 0]), ALLOW);
        for f in NAMESPACE_FLAGS {
            let flags = *f as u64 | sigchld;
            assert_eq!(
                v(libc::SYS_clone, [flags, 0, 0, 0, 0, 0]),
                errno(libc::EPERM)
            );
        }
        assert_eq!(v(libc::SYS_clone3, none), errno(libc::ENOSYS));
        assert_eq!(
            v(libc::SYS_ioctl, [1, TIOCSTI, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        let high = 0xffff_ffff_0000_0000 | TIOCSTI;
        assert_eq!(
            v(libc::SYS_ioctl, [1, high, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(v(libc::SYS_ioctl, [1, 0x5401, 0, 0, 0, 0]), ALLOW, "TCGETS");
        for p in [0u64, 0x40000, 0xffff_ffff, u64::MAX] {
            assert_eq!(
                v(libc::SYS_personality, [p, 0, 0, 0, 0, 0]),
                ALLOW,
                "{p:#x}"
            );
        }
        for p in [8u64, 0x0020000, 0x0400000] {
            assert_eq!(
                v(libc::SYS_personality, [p, 0, 0, 0, 0, 0]),
                errno(libc::EPERM),
                "{p:#x}"
            );
        }
        // x32 numbers and the i386 ABI cannot go around the list.
        assert_eq!(
            v(0x4000_0000 | libc::SYS_unshare, none),
            errno(libc::ENOSYS)
        );
        assert_eq!(
            verdict(&progs, 0x4000_0003, 1, none),
            libc::SECCOMP_RET_KILL_PROCESS
        );
        assert!(compile(&SeccompProfile::Unconfined).unwrap().is_empty());
    }

    /// `socket` and `socketpair` create only unix, inet, inet6, packet and route-netlink
    /// sockets; every other family is refused as a kernel without it would refuse it.
    #[test]
    fn default_profile_allows_only_the_listed_socket_families() {
        let progs = compile(&SeccompProfile::Default).unwrap();
        for nr in [libc::SYS_socket, libc::SYS_socketpair] {
            let v = |family: i32, protocol: i32| {
                let args = [
                    family as u64,
                    libc::SOCK_STREAM as u64,
                    protocol as u64,
                    0,
                    0,
                    0,
                ];
                verdict(&progs, X86_64, nr, args)
            };
            for family in [
                libc::AF_UNIX,
                libc::AF_INET,
                libc::AF_INET6,
                libc::AF_PACKET,
            ] {
                assert_eq!(v(family, 0), ALLOW, "call {nr}, family {family}");
                assert_eq!(
                    v(family, 6),
                    ALLOW,
                    "call {nr}, family {family}, protocol 6"
                );
            }
            assert_eq!(v(libc::AF_NETLINK, libc::NETLINK_ROUTE), ALLOW);
            for protocol in [
                libc::NETLINK_AUDIT,
                libc::NETLINK_KOBJECT_UEVENT,
                libc::NETLINK_SOCK_DIAG,
                libc::NETLINK_GENERIC,
                libc::NETLINK_NETFILTER,
                libc::NETLINK_XFRM,
                -1,
            ] {
                assert_eq!(
                    v(libc::AF_NETLINK, protocol),
                    errno(libc::EPROTONOSUPPORT),
                    "netlink protocol {protocol}"
                );
            }
            for family in [
                libc::AF_VSOCK,
                libc::AF_ALG,
                libc::AF_BLUETOOTH,
                libc::AF_KEY,
                libc::AF_TIPC,
                libc::AF_RDS,
                libc::AF_CAN,
                libc::AF_UNSPEC,
                46, // past the last family (AF_MCTP, 45)
                -1,
            ] {
                assert_eq!(
                    v(family, 0),
                    errno(libc::EAFNOSUPPORT),
                    "call {nr}, family {family}"
                );
            }
            // The kernel reads the family as an int: upper bits do not change the verdict.
            let high = |f: i32| [0xffff_ffff_0000_0000 | f as u64, 1, 0, 0, 0, 0];
            assert_eq!(verdict(&progs, X86_64, nr, high(libc::AF_INET)), ALLOW);
            assert_eq!(
                verdict(&progs, X86_64, nr, high(libc::AF_VSOCK)),
                errno(libc::EAFNOSUPPORT)
            );
        }
        // Unconfined and OCI profiles do not get the list (the profile decides).
        assert!(compile(&SeccompProfile::Unconfined).unwrap().is_empty());
    }

    const DOCKER_LIKE: &str = r#"{
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 1,
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": [
            {"names": ["read", "write", "exit_group", "no_such_call"], "action": "SCMP_ACT_ALLOW"},
            {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}]},
            {"names": ["getpid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
            {"names": ["ptrace"], "action": "SCMP_ACT_KILL_PROCESS"},
            {"names": ["socket"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": 16, "valueTwo": 0, "op": "SCMP_CMP_NE"}]}
        ]
    }"#;

    #[test]
    fn oci_profiles_compile_with_every_action_and_operator() {
        let spec = parse_oci(DOCKER_LIKE).unwrap();
        let progs = compile_oci(Path::new("p.json"), &spec).unwrap();
        let v = |nr: i64, a0: u64| verdict(&progs, X86_64, nr, [a0, 0, 0, 0, 0, 0]);
        assert_eq!(v(libc::SYS_read, 0), ALLOW);
        assert_eq!(v(libc::SYS_mount, 0), errno(1), "the default action");
        assert_eq!(v(libc::SYS_getpid, 0), errno(38));
        assert_eq!(v(libc::SYS_ptrace, 0), libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!(v(libc::SYS_personality, 0), ALLOW);
        assert_eq!(v(libc::SYS_personality, 8), errno(1));
        assert_eq!(v(libc::SYS_socket, 2), ALLOW, "AF_INET");
        assert_eq!(v(libc::SYS_socket, 16), errno(1), "AF_NETLINK");
        // A whole config.json works too.
        let config = format!(r#"{{"ociVersion": "1.0.2", "linux": {{"seccomp": {DOCKER_LIKE}}}}}"#);
        assert_eq!(parse_oci(&config).unwrap(), spec);
        // Default ALLOW with one refusal.
        let allow = parse_oci(
            r#"{"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO"}]}"#,
        )
        .unwrap();
        let progs = compile_oci(Path::new("p.json"), &allow).unwrap();
        assert_eq!(
            verdict(&progs, X86_64, libc::SYS_mkdir, [0; 6]),
            errno(libc::EPERM)
        );
        assert_eq!(verdict(&progs, X86_64, libc::SYS_read, [0; 6]), ALLOW);
    }

    #[test]
    fn bad_profiles_are_refused_with_the_reason() {
        assert!(parse_oci("not json").is_err());
        assert!(
            parse_oci(r#"{"syscalls": []}"#).is_err(),
            "no defaultAction"
        );
        let p = Path::new("p.json");
        let notify = parse_oci(r#"{"defaultAction": "SCMP_ACT_NOTIFY"}"#).unwrap();
        assert!(matches!(
            compile_oci(p, &notify),
            Err(SeccompError::Action { .. })
        ));
        let op = parse_oci(
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"],
                "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_ABOUT"}]}]}"#,
        )
        .unwrap();
        assert!(matches!(
            compile_oci(p, &op),
            Err(SeccompError::Operator { .. })
        ));
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        assert!(matches!(
            parse_option(missing.to_str().unwrap()),
            Err(SeccompError::Read { .. })
        ));
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{").unwrap();
        let err = parse_option(bad.to_str().unwrap()).unwrap_err();
        assert!(err
            .to_string()
            .starts_with(&format!("--seccomp {}: not an OCI", bad.display())));
        assert_eq!(
            parse_option("unconfined").unwrap(),
            SeccompProfile::Unconfined
        );
    }
}
