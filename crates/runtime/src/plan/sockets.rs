//! Named unix sockets of the host. A read-only mount does not stop `connect(2)`, so with the
//! host's root as the sandbox's root, a socket a host service listens on (a container
//! engine's, snap's, a database's) would answer the workload. Landlock (ABI 7 on this
//! kernel) has no right for connecting to a named socket and seccomp cannot see paths, so
//! the plan covers every socket the host's network namespace has bound (`/proc/net/unix`) and
//! that the sandbox would see, with the null device. The directories the sandbox replaces by
//! its own (`/run`, `/tmp`, `/home`, `/root`, `/dev`, ...) need nothing; the working directory
//! and bind sources are the caller's to give.

use std::path::{Path, PathBuf};

use super::mounts::MountOp;

/// The paths of the named sockets in `/proc/net/unix`'s text, in name order, without
/// duplicates (abstract sockets, shown with `@`, and unnamed ones are not paths).
pub(crate) fn parse_proc_net_unix(text: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = text
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The named sockets the host has bound now (none if `/proc/net/unix` cannot be read).
pub(crate) fn host_sockets() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/net/unix")
        .map(|t| parse_proc_net_unix(&t))
        .unwrap_or_default()
}

/// Mask steps for the sockets among `sockets` that the workload would reach through the host
/// root: those that still exist as sockets, resolved (a link in the path is followed once,
/// here, on the host), outside the directories the sandbox provides itself (`provided`, top
/// level names) and outside what the caller gives it (`given`: workdir, bind sources).
pub(crate) fn masks(sockets: &[PathBuf], provided: &[&str], given: &[&Path]) -> Vec<MountOp> {
    use std::os::unix::fs::FileTypeExt;
    let mut dests: Vec<PathBuf> = sockets
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .filter(|p| {
            std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket())
                && !covered(p, provided, given)
        })
        .collect();
    dests.sort();
    dests.dedup();
    dests
        .into_iter()
        .map(|dest| MountOp::Mask { dest })
        .collect()
}

/// Whether the sandbox's own mounts already replace `path`, or the caller gave it on purpose.
fn covered(path: &Path, provided: &[&str], given: &[&Path]) -> bool {
    let top = path
        .components()
        .nth(1)
        .and_then(|c| c.as_os_str().to_str());
    top.is_some_and(|t| provided.contains(&t) || t == "root")
        || given.iter().any(|g| path.starts_with(g))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_sockets_are_read_and_abstract_ones_skipped() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 17 /var/lib/x/api.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 18 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 19\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 20 /run/a.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 21 /var/lib/x/api.sock\n\
            garbage\n";
        assert_eq!(
            parse_proc_net_unix(text),
            vec![
                PathBuf::from("/run/a.sock"),
                PathBuf::from("/var/lib/x/api.sock")
            ]
        );
    }

    #[test]
    fn only_live_sockets_outside_the_sandboxs_own_dirs_are_masked() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let gone = dir.path().join("gone.sock");
        let all = vec![sock.clone(), file, gone];
        let real = std::fs::canonicalize(&sock).unwrap();
        assert_eq!(
            masks(&all, &["run"], &[]),
            vec![MountOp::Mask { dest: real.clone() }]
        );
        // Under a directory the sandbox provides, or given by the caller: nothing to do.
        let top = real.components().nth(1).unwrap();
        let top = top.as_os_str().to_str().unwrap();
        assert!(masks(&all, &[top], &[]).is_empty());
        assert!(masks(&all, &["run"], &[real.parent().unwrap()]).is_empty());
    }
}
