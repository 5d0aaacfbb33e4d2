//! Id maps for a root caller: the pinned id inside maps to the owner of the work tree, and
//! every other id maps to itself, so that a tree unpacked from a tarball (uid 1001) is the
//! workload's own and files of other users show their real ids instead of `nobody`. The
//! host's root, when it is not the owner, shows as `nobody` (65534), as for an unprivileged
//! caller; it stays mapped, so that init's capabilities in the namespace still cover the
//! host's root-owned directories while it builds the root.
//!
//! An unprivileged caller may map only its own id (one line, written by init); a root caller's
//! maps are written by the supervisor from outside (as for OCI containers).

use super::{IdMap, ParentMaps};

/// The end of the id range (ids run from 0 to 2^32-2; 2^32-1 is invalid).
const END: u32 = u32::MAX;

/// `nobody`, as which the host's root shows when the owner is another id.
const NOBODY: u32 = 65534;

/// Maps `pinned` (inside) to `owner` (outside), the host's root to `nobody` (when the owner
/// is not root), and every other id to itself. Ids on one side of a pair and not on the
/// other stay unmapped (with `pinned` 0 and `owner` 1001: inside 1001, outside 65534).
pub(crate) fn one_to_one_but(pinned: u32, owner: u32) -> Vec<IdMap> {
    let mut pairs = vec![(pinned, owner)];
    if owner != 0 && pinned != NOBODY {
        pairs.push((NOBODY, 0));
    }
    let mut taken: Vec<u32> = pairs.iter().flat_map(|&(i, o)| [i, o]).collect();
    taken.sort_unstable();
    taken.dedup();
    let mut maps: Vec<IdMap> = pairs
        .iter()
        .filter(|(i, o)| i != o)
        .map(|&(inside, outside)| IdMap::new(inside, outside, 1))
        .collect();
    // The identity between the taken ids (a pair of equal ids is part of it).
    let mut start = 0u32;
    for bound in taken.iter().copied().chain([END]) {
        let same = pairs.iter().any(|&(i, o)| i == bound && o == bound);
        if same {
            continue;
        }
        if bound > start {
            maps.push(IdMap::new(start, start, bound - start));
        }
        start = bound.saturating_add(1);
    }
    maps.sort_by_key(|m| m.inside);
    maps
}

/// The maps of a root caller whose workload runs as `pinned` (uid, gid) over a work tree
/// owned by `owner` (uid, gid).
pub(crate) fn root_caller(pinned: (u32, u32), owner: (u32, u32)) -> ParentMaps {
    ParentMaps {
        uid: one_to_one_but(pinned.0, owner.0),
        gid: one_to_one_but(pinned.1, owner.1),
    }
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
            assert!(r.last().unwrap().1 <= END as u64, "{maps:?}");
        }
        assert!(
            maps.len() <= 340 && maps.iter().all(|m| m.count > 0),
            "{maps:?}"
        );
    }

    #[test]
    fn the_pinned_id_is_the_owner_and_the_rest_is_itself() {
        for (pinned, owner) in [(0, 1001), (1000, 0), (1000, 1001), (1001, 1000), (5, 4)] {
            let m = one_to_one_but(pinned, owner);
            no_overlap(&m);
            assert_eq!(apply(&m, pinned), Some(owner));
            if owner != 0 {
                assert_eq!(
                    apply(&m, NOBODY),
                    Some(0),
                    "the host's root shows as nobody"
                );
            }
            for id in [0, 1, 3, 999, 1002, END - 1] {
                // With another owner, the host's root is inside's nobody, and inside 0 is
                // not mapped unless pinned.
                let root_moved = owner != 0 && id == 0;
                if ![pinned, owner].contains(&id) && !root_moved {
                    assert_eq!(apply(&m, id), Some(id), "{pinned}->{owner}: {id}");
                }
            }
            // Inside, the owner's own id is not another host id's.
            assert_ne!(apply(&m, owner).filter(|_| owner != pinned), Some(owner));
        }
    }

    #[test]
    fn the_same_id_is_the_whole_range() {
        let m = one_to_one_but(0, 0);
        assert_eq!(m, [IdMap::new(0, 0, u32::MAX)]);
        let m = root_caller((1000, 1000), (1000, 0));
        no_overlap(&m.uid);
        assert_eq!(apply(&m.uid, 1000), Some(1000));
        assert_eq!(apply(&m.uid, NOBODY), Some(0));
        assert_eq!(apply(&m.gid, 1000), Some(0));
        assert_eq!(apply(&m.gid, 0), None);
    }

    #[test]
    fn ids_at_the_ends_of_the_range() {
        for (pinned, owner) in [(0, END - 1), (END - 1, 0), (0, 1), (1, 0)] {
            let m = one_to_one_but(pinned, owner);
            no_overlap(&m);
            assert_eq!(apply(&m, pinned), Some(owner));
        }
    }
}
