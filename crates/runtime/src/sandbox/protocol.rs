//! Messages from init (pid 1 in the sandbox) to the supervisor, one JSON object per
//! SOCK_SEQPACKET datagram. The supervisor reads them after init exits.

use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{send, MsgFlags};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "kebab-case")]
pub(crate) enum InitMsg {
    /// A setup step failed before the workload started.
    SetupFailed {
        step: String,
        errno: i32,
        refusal: bool,
    },
    /// The workload could not be executed.
    ExecFailed { program: String, errno: i32 },
    /// OCI create: the container is set up and waits for `start`.
    Ready,
    /// An `exec` sandbox's end: the workload has exited and every other process of the
    /// sandbox is gone; its exit code (128+N for signal N) and the resource usage of init and
    /// everything it reaped. init's own exit, the teardown of the sandbox's namespaces,
    /// follows: the supervisor need not wait for it (bubblewrap's parent does not either).
    Done { code: i32, usage: crate::sys::Usage },
}

/// Sends one message; failures are ignored (the supervisor then sees only the exit status).
/// A step or program name is cut to [`NAME_MAX`] characters first, so that the datagram,
/// escaped, fits the receiver's buffer (`sys::recv_packet`, 8 KiB): a longer one (a step
/// naming two long bind paths) would arrive cut off, fail to parse, and be lost.
pub(crate) fn post(sock: &OwnedFd, msg: &InitMsg) {
    if let Ok(bytes) = serde_json::to_vec(&bounded(msg.clone())) {
        let _ = send(sock.as_raw_fd(), &bytes, MsgFlags::MSG_NOSIGNAL);
    }
}

/// The longest step or program name a message carries, in characters: escaped as JSON (at
/// most 6 bytes a character), with the rest of a message, within 8 KiB.
const NAME_MAX: usize = 1000;

fn bounded(msg: InitMsg) -> InitMsg {
    let cut = |s: String| match s.char_indices().nth(NAME_MAX) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s,
    };
    match msg {
        InitMsg::SetupFailed {
            step,
            errno,
            refusal,
        } => InitMsg::SetupFailed {
            step: cut(step),
            errno,
            refusal,
        },
        InitMsg::ExecFailed { program, errno } => InitMsg::ExecFailed {
            program: cut(program),
            errno,
        },
        other => other,
    }
}

/// Reads every message still queued on the socket without blocking.
pub(crate) fn drain(sock: &OwnedFd) -> Vec<InitMsg> {
    let mut out = Vec::new();
    while let Ok(Some((bytes, _))) = crate::sys::recv_packet(sock) {
        out.extend(parse(&bytes));
    }
    out
}

/// One datagram as a message, if it is one (the clock listener's datagram is not).
pub(crate) fn parse(bytes: &[u8]) -> Option<InitMsg> {
    serde_json::from_slice(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

    fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap()
    }

    #[test]
    fn a_long_step_arrives_cut_not_lost() {
        let (a, b) = seqpacket_pair();
        // Control characters escape to six bytes each: 20,000 of them would be 120 KB.
        let step = format!("bind /{}", "\u{1}é".repeat(10_000));
        post(
            &a,
            &InitMsg::SetupFailed {
                step: step.clone(),
                errno: 2,
                refusal: false,
            },
        );
        post(
            &a,
            &InitMsg::ExecFailed {
                program: "p".repeat(50_000),
                errno: 13,
            },
        );
        // The worst case: every character kept escapes to six bytes.
        let worst = "\u{1}".repeat(5_000);
        post(
            &a,
            &InitMsg::ExecFailed {
                program: worst,
                errno: 8,
            },
        );
        match drain(&b).as_slice() {
            [InitMsg::SetupFailed {
                step: got,
                errno: 2,
                ..
            }, InitMsg::ExecFailed { program, errno: 13 }, InitMsg::ExecFailed {
                program: worst,
                errno: 8,
            }] => {
                assert_eq!(got.chars().count(), NAME_MAX + 1);
                assert!(step.starts_with(got.trim_end_matches('…')));
                assert_eq!(program.chars().count(), NAME_MAX + 1);
                assert_eq!(worst.chars().filter(|c| *c == '\u{1}').count(), NAME_MAX);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn messages_round_trip_over_a_socketpair() {
        let (a, b) = seqpacket_pair();
        let m1 = InitMsg::SetupFailed {
            step: "mount /proc".into(),
            errno: 1,
            refusal: true,
        };
        let m2 = InitMsg::ExecFailed {
            program: "nope".into(),
            errno: 2,
        };
        post(&a, &m1);
        post(&a, &m2);
        drop(a);
        assert_eq!(drain(&b), vec![m1, m2]);
    }

    /// init may exit with a datagram of ours unread (the network helper's namespace, when a
    /// step before the network failed): the kernel then marks our end ECONNRESET, which the
    /// first receive reports before the messages init left. They must still be read.
    #[test]
    fn messages_survive_a_peer_that_closed_with_our_datagram_unread() {
        let (ours, theirs) = seqpacket_pair();
        let failed = InitMsg::SetupFailed {
            step: "set hostname: EPERM".into(),
            errno: 1,
            refusal: true,
        };
        let done = InitMsg::Done {
            code: 125,
            usage: crate::sys::Usage::default(),
        };
        send(ours.as_raw_fd(), b"n", MsgFlags::MSG_NOSIGNAL).unwrap(); // never read
        post(&theirs, &failed);
        post(&theirs, &done);
        drop(theirs);
        assert_eq!(drain(&ours), vec![failed, done]);
        assert!(
            matches!(crate::sys::recv_packet(&ours), Ok(None)),
            "then the hang-up"
        );
    }
}
