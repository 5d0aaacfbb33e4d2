//! Id maps for a root caller. The sandbox's ids never include the host's root, nor any host
//! user's: inside ids `0 .. SANDBOX_IDS` are the unprivileged host ids `SANDBOX_BASE ..`,
//! for every root caller (an unprivileged caller maps its own id, one line, written by init).
//! So a root-only host file (`/etc/shadow`, a key under `/etc/ssl/private`) is foreign to the
//! workload, whatever its name, and a file the workload leaves anywhere it could write is
//! owned by an id no host user has.
//!
//! What the caller hands the sandbox on purpose — the work tree, `--bind` sources — is
//! bound through an idmapped mount instead ([`caller_tree`]): the tree's owner appears
//! inside as the workload's pinned id, so the workload owns `/work` and the caller still owns
//! what the run wrote. An image's or `--rootfs`'s files appear with the ids they were
//! unpacked with ([`unpacked_tree`]).

use super::mounts::MountIdmap;
use super::{IdMap, ParentMaps};

/// The first host id of a root caller's sandbox: inside id `k` is host id
/// `SANDBOX_BASE + k`. Just below 2^31 (ids at and above it are the "do not use" range of
/// systemd's `UIDS-GIDS.md`), clear of the ranges distributions give users (`/etc/subuid`
/// starts at 100000 in 65536 steps) and of systemd-nspawn's dynamic ranges
/// (`0x00080000 ..= 0x6FFFFFFF`).
pub const SANDBOX_BASE: u32 = 0x7FFE_0000;
/// How many ids a root caller's sandbox has: `0 .. 65536`, as a container engine's default.
pub const SANDBOX_IDS: u32 = 65536;

/// The maps of a root caller's sandbox: inside `0 .. SANDBOX_IDS` to `SANDBOX_BASE ..`, uids
/// and gids alike.
pub(crate) fn root_caller() -> ParentMaps {
    let all = vec![IdMap::new(0, SANDBOX_BASE, SANDBOX_IDS)];
    ParentMaps {
        uid: all.clone(),
        gid: all,
    }
}

/// The idmapped mount of a tree the caller hands the sandbox, owned by `owner` (uid, gid) on
/// the host, for a workload running as `pinned`: the owner's files are the pinned id's, every
/// other id `1 .. SANDBOX_IDS` of the tree is itself inside, and the host's root (unless it is
/// the owner) and ids above the range stay unmapped (shown as `nobody`, never writable).
pub(crate) fn caller_tree(owner: (u32, u32), pinned: (u32, u32)) -> MountIdmap {
    MountIdmap {
        uid: tree_lines(owner.0, pinned.0),
        gid: tree_lines(owner.1, pinned.1),
        userns: None,
        recursive: false,
    }
}

/// The idmapped mount of an image's (or `--rootfs`'s) unpacked files: on-disk id `k` is
/// inside id `k`, for `k` in `0 .. SANDBOX_IDS`.
pub(crate) fn unpacked_tree() -> MountIdmap {
    let all = vec![IdMap::new(0, SANDBOX_BASE, SANDBOX_IDS)];
    MountIdmap {
        uid: all.clone(),
        gid: all,
        userns: None,
        recursive: false,
    }
}

/// The lines of one side of [`caller_tree`]: on-disk `owner` to the sandbox's `pinned`, and
/// on-disk `k` to the sandbox's `k` for every other `k` in `1 .. SANDBOX_IDS` but `pinned`
/// (taken by the owner). Each line reads `on-disk host-id count`.
fn tree_lines(owner: u32, pinned: u32) -> Vec<IdMap> {
    let mut lines = vec![IdMap::new(owner, SANDBOX_BASE + pinned, 1)];
    // The ids 1 .. SANDBOX_IDS, less the owner and the pinned id, in runs.
    let mut holes = [owner, pinned];
    holes.sort_unstable();
    let mut start = 1u32;
    for bound in holes.iter().copied().chain([SANDBOX_IDS]) {
        let bound = bound.min(SANDBOX_IDS);
        if bound < start {
            continue;
        }
        if bound > start {
            lines.push(IdMap::new(start, SANDBOX_BASE + start, bound - start));
        }
        start = bound + 1;
    }
    lines.sort_by_key(|m| m.inside);
    // Runs that continue each other are one line (a root-owned tree of a root workload is
    // the sandbox's own mapping, whose user namespace it can then take).
    let mut merged: Vec<IdMap> = Vec::new();
    for line in lines {
        match merged.last_mut() {
            Some(last)
                if last.inside + last.count == line.inside
                    && last.outside + last.count == line.outside =>
            {
                last.count += line.count
            }
            _ => merged.push(line),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The map as a function: inside id to outside id.
    fn apply(maps: &[IdMap], id: u32) -> Option<u32> {
        maps.iter()
            .find(|m| id >= m.inside && id - m.inside < m.count)
            .map(|m| m.outside + (id - m.inside))
    }

    /// No two lines overlap on either side (the kernel refuses such a map).
    fn no_overlap(maps: &[IdMap]) {
        let ranges = |f: fn(&IdMap) -> u32| {
            let mut r: Vec<(u64, u64)> = maps
                .iter()
                .map(|m| (f(m) as u64, f(m) as u64 + m.count as u64))
                .collect();
            r.sort();
            r
        };
        for r in [ranges(|m| m.inside), ranges(|m| m.outside)] {
            for w in r.windows(2) {
                assert!(w[0].1 <= w[1].0, "{maps:?}");
            }
        }
        assert!(
            maps.len() <= 340 && maps.iter().all(|m| m.count > 0),
            "{maps:?}"
        );
    }

    #[test]
    fn a_root_callers_sandbox_holds_no_host_users_id() {
        let m = root_caller();
        for maps in [&m.uid, &m.gid] {
            no_overlap(maps);
            assert_eq!(apply(maps, 0), Some(SANDBOX_BASE), "inside root");
            assert_eq!(apply(maps, 65534), Some(SANDBOX_BASE + 65534));
            assert_eq!(apply(maps, SANDBOX_IDS), None);
            // No inside id is a host id below the base (root, users, system accounts).
            for line in maps.iter() {
                assert!(line.outside >= SANDBOX_BASE);
                assert!(line.outside as u64 + line.count as u64 <= 1 << 31);
            }
        }
    }

    #[test]
    fn the_owner_of_a_callers_tree_is_the_pinned_id() {
        for (owner, pinned) in [(0, 0), (1000, 0), (0, 1000), (1000, 1000), (1001, 1000)] {
            let m = tree_lines(owner, pinned);
            no_overlap(&m);
            assert_eq!(apply(&m, owner), Some(SANDBOX_BASE + pinned));
            // The host's root is foreign unless it owns the tree.
            if owner != 0 {
                assert_eq!(apply(&m, 0), None, "{owner}->{pinned}");
            }
            // The pinned id's own files (if it is not the owner) have no inside id left.
            if pinned != owner {
                assert_eq!(apply(&m, pinned), None);
            }
            for id in [1, 3, 999, 1002, 65533, 65535] {
                if ![owner, pinned].contains(&id) {
                    assert_eq!(
                        apply(&m, id),
                        Some(SANDBOX_BASE + id),
                        "{owner}->{pinned}: {id}"
                    );
                }
            }
            assert_eq!(apply(&m, SANDBOX_IDS), None);
        }
    }

    #[test]
    fn owners_and_pinned_ids_at_the_ends_of_the_range() {
        for (owner, pinned) in [
            (u32::MAX - 1, 0),
            (0, SANDBOX_IDS - 1),
            (SANDBOX_IDS - 1, 1),
            (1, 1),
            (200_000, 65534),
        ] {
            let m = tree_lines(owner, pinned);
            no_overlap(&m);
            assert_eq!(apply(&m, owner), Some(SANDBOX_BASE + pinned));
        }
    }

    #[test]
    fn a_root_owned_tree_of_a_root_workload_is_the_sandboxs_own_mapping() {
        let own = root_caller();
        let tree = caller_tree((0, 0), (0, 0));
        assert_eq!((&tree.uid, &tree.gid), (&own.uid, &own.gid));
        assert_eq!(
            (&unpacked_tree().uid, &unpacked_tree().gid),
            (&own.uid, &own.gid)
        );
        assert_ne!(caller_tree((1000, 1000), (0, 0)).uid, root_caller().uid);
    }

    #[test]
    fn an_unpacked_tree_keeps_its_ids() {
        let m = unpacked_tree();
        assert_eq!(apply(&m.uid, 0), Some(SANDBOX_BASE));
        assert_eq!(apply(&m.gid, 1000), Some(SANDBOX_BASE + 1000));
    }
}
