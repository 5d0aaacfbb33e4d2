//! Which namespaces joined by path are the container's own. An engine may make a namespace
//! itself and pass its path (podman and CNI/netavark make the network namespace, then set up
//! its interfaces and name it in `linux.namespaces`); such a namespace belongs to the
//! container as much as a new one does, and its sysctls change nothing of the host's. A path
//! that names the caller's own namespace (or init's, the host's) does not: a sysctl there
//! would change the host. runc draws the same line (it refuses a network sysctl only in the
//! host's network namespace).

use std::path::Path;

use crate::plan::{Namespace, NsJoin};

/// A namespace's identity: the device and inode of its `nsfs` file.
pub(super) type NsId = (u64, u64);

/// The name of a namespace's file under `/proc/PID/ns/`.
fn proc_name(ns: Namespace) -> &'static str {
    match ns {
        Namespace::User => "user",
        Namespace::Pid => "pid",
        Namespace::Mount => "mnt",
        Namespace::Net => "net",
        Namespace::Uts => "uts",
        Namespace::Ipc => "ipc",
        Namespace::Cgroup => "cgroup",
        Namespace::Time => "time",
    }
}

/// The identity of the namespace a path names (following the `/proc/PID/ns/*` magic links,
/// as joining it does).
fn identity(path: &Path) -> std::io::Result<NsId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// The namespaces the container has of its own: `new` ones, and those of `join` that are
/// neither the caller's nor init's, read from `/proc`.
pub(super) fn own_namespaces(new: &[Namespace], join: &[NsJoin]) -> Vec<Namespace> {
    own_namespaces_with(
        new,
        join,
        |path| identity(path).ok(),
        |ns| {
            let name = proc_name(ns);
            ["/proc/self/ns", "/proc/1/ns"]
                .iter()
                .filter_map(|dir| identity(&Path::new(dir).join(name)).ok())
                .collect()
        },
    )
}

/// [`own_namespaces`] with the identities given: `of_path` reads a joined path's, `hosts`
/// lists the caller's and init's of a kind. A path whose identity cannot be read is not
/// counted as the container's own (joining it fails later, naming it).
pub(super) fn own_namespaces_with(
    new: &[Namespace],
    join: &[NsJoin],
    of_path: impl Fn(&Path) -> Option<NsId>,
    hosts: impl Fn(Namespace) -> Vec<NsId>,
) -> Vec<Namespace> {
    let mut own = new.to_vec();
    for j in join {
        if of_path(&j.path).is_some_and(|id| !hosts(j.ns).contains(&id)) {
            own.push(j.ns);
        }
    }
    own
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn join(ns: Namespace, path: &str) -> NsJoin {
        NsJoin {
            ns,
            path: PathBuf::from(path),
        }
    }

    fn ids(path: &Path) -> Option<NsId> {
        match path.to_str()? {
            "/run/netns/cni-1" => Some((4, 100)),
            "/proc/self/ns/net" => Some((4, 1)),
            "/proc/1/ns/ipc" => Some((4, 7)),
            _ => None,
        }
    }

    fn hosts(ns: Namespace) -> Vec<NsId> {
        match ns {
            Namespace::Net => vec![(4, 1), (4, 2)],
            _ => vec![(4, 7)],
        }
    }

    /// podman's case: a network namespace the engine made, passed by path, is the
    /// container's own (its sysctls may be set); the caller's or init's is not.
    #[test]
    fn a_joined_namespace_other_than_the_hosts_is_the_containers_own() {
        let new = [Namespace::Mount, Namespace::Pid];
        let own = own_namespaces_with(
            &new,
            &[join(Namespace::Net, "/run/netns/cni-1")],
            ids,
            hosts,
        );
        assert_eq!(own, vec![Namespace::Mount, Namespace::Pid, Namespace::Net]);
        let own = own_namespaces_with(
            &new,
            &[
                join(Namespace::Net, "/proc/self/ns/net"),
                join(Namespace::Ipc, "/proc/1/ns/ipc"),
            ],
            ids,
            hosts,
        );
        assert_eq!(own, new.to_vec());
    }

    #[test]
    fn a_joined_path_that_cannot_be_read_is_not_the_containers_own() {
        let own = own_namespaces_with(&[], &[join(Namespace::Net, "/nonexistent")], ids, hosts);
        assert!(own.is_empty(), "{own:?}");
    }

    /// Read from /proc: this process's own network namespace, named by path, is the
    /// caller's (not the container's own).
    #[test]
    fn the_callers_own_namespace_by_path_is_not_the_containers() {
        let own = own_namespaces(&[], &[join(Namespace::Net, "/proc/self/ns/net")]);
        assert!(own.is_empty(), "{own:?}");
        let own = own_namespaces(
            &[],
            &[join(
                Namespace::Net,
                &format!("/proc/{}/ns/net", std::process::id()),
            )],
        );
        assert!(own.is_empty(), "{own:?}");
    }
}
