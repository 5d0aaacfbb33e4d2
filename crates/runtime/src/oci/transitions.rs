//! Which lifecycle command a container's status allows, as data (runc's rules): the commands
//! ask here before they act, and the unit tests read the whole table without a container.

use super::state::Status;

/// A lifecycle command that depends on the container's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    Start,
    Kill,
    Delete { force: bool },
}

/// What a command does to a container in a given status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Go ahead.
    Proceed,
    /// Go ahead, killing the container's processes first (`delete` of a live container with
    /// `--force`, or of a created one).
    KillFirst,
    /// Refuse, with the one-line hint users see.
    Refuse(&'static str),
}

/// The decision for `command` on a container in `status`.
pub(crate) fn decide(command: Command, status: Status) -> Decision {
    use Decision::*;
    match (command, status) {
        (Command::Start, Status::Created) => Proceed,
        (Command::Start, _) => Refuse("only a created container can be started"),
        (Command::Kill, Status::Created | Status::Running) => Proceed,
        (Command::Kill, _) => Refuse("container not running"),
        (Command::Delete { force: false }, Status::Running) => {
            Refuse("stop it first (reprorun kill) or pass --force")
        }
        (Command::Delete { .. }, Status::Created | Status::Running) => KillFirst,
        (Command::Delete { .. }, Status::Creating | Status::Stopped) => Proceed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lifecycle_table_is_runcs() {
        use Decision::*;
        use Status::*;
        let all = [Creating, Created, Running, Stopped];
        let start: Vec<_> = all.iter().map(|s| decide(Command::Start, *s)).collect();
        assert_eq!(start[1], Proceed);
        assert!(
            matches!(start[3], Refuse(_)),
            "a stopped container is not restarted"
        );
        let kill: Vec<_> = all.iter().map(|s| decide(Command::Kill, *s)).collect();
        assert_eq!(kill[1..3], [Proceed, Proceed]);
        assert_eq!(kill[3], Refuse("container not running"));
        let delete = |force| -> Vec<_> {
            all.iter()
                .map(|s| decide(Command::Delete { force }, *s))
                .collect()
        };
        assert_eq!(
            delete(false),
            [
                Proceed,
                KillFirst,
                Refuse("stop it first (reprorun kill) or pass --force"),
                Proceed
            ]
        );
        assert_eq!(delete(true), [Proceed, KillFirst, KillFirst, Proceed]);
    }
}
