//! OCI `process.scheduler`, `ioPriority` and `execCPUAffinity` (runtime-spec 1.2, runc
//! 1.2), and `linux.personality` (as crun applies it): the container's process and its execs
//! run with them; bad values fail `create` with one line naming the field, and a value the
//! kernel refuses fails before the program runs.

use crate::common::*;
use crate::oci::Bundle;

/// The nice value and policy of the calling shell (fields 19 and 41 of /proc/self/stat),
/// then its I/O priority as `ionice` prints it.
const SHOW: &str = "busybox cut -d' ' -f19,41 /proc/$$/stat; busybox ionice -p $$";

/// A container of `b` (whose process writes `show`'s two lines to /shared/out, then sleeps)
/// created and started as `id`: the create's output, whether it started and wrote them, and
/// what it wrote.
fn start_showing(b: &Bundle, id: &str) -> (std::process::Output, bool, String) {
    let out = b.shared().join("out");
    let o = b.run(&["create", id]);
    let started = o.status.success()
        && b.run(&["start", id]).status.success()
        && wait_until(std::time::Duration::from_secs(10), || {
            std::fs::read_to_string(&out).is_ok_and(|t| t.lines().count() >= 2)
        });
    let shown = std::fs::read_to_string(&out).unwrap_or_default();
    (o, started, shown)
}

#[test]
fn oci_scheduler_and_io_priority_apply_to_the_process_and_its_execs() {
    require!(Need::Root);
    let script = format!("({SHOW}) > /shared/out; exec sleep 1000");
    let b = Bundle::new(&["sh", "-c", &script], |c| {
        c["process"]["scheduler"] = serde_json::json!({"policy": "SCHED_BATCH", "nice": 5});
        c["process"]["ioPriority"] = serde_json::json!({"class": "IOPRIO_CLASS_BE", "priority": 4});
        c["process"]["execCPUAffinity"] = serde_json::json!({"final": "0"});
    });
    let (o, started, init) = start_showing(&b, "s1");
    // An exec without --process takes the container's process settings (as runc's does).
    let inherited = b.run(&["exec", "s1", "sh", "-c", SHOW]);
    // One with --process takes the file's: SCHED_IDLE, no I/O class, CPU 0 only.
    let file = b.work.path().join("process.json");
    std::fs::write(
        &file,
        serde_json::json!({
            "user": {"uid": 0, "gid": 0}, "cwd": "/", "env": ["PATH=/bin"],
            "args": ["sh", "-c", format!("{SHOW}; grep Cpus_allowed_list /proc/$$/status")],
            "scheduler": {"policy": "SCHED_IDLE"},
            "execCPUAffinity": {"initial": "0-1", "final": "0"}
        })
        .to_string(),
    )
    .unwrap();
    let own = b.run(&["exec", "--process", file.to_str().unwrap(), "s1"]);
    let _ = b.run(&["delete", "--force", "s1"]);
    assert!(started, "{o:?}");
    assert_eq!(init, "5 3\nbest-effort: prio 4\n");
    assert_eq!(expect_code(&inherited, 0), "5 3\nbest-effort: prio 4\n");
    let own = expect_code(&own, 0);
    let mut lines = own.lines();
    assert_eq!(lines.next(), Some("0 5"), "{own}");
    lines.next(); // the I/O class the kernel derives with none set
    assert_eq!(lines.next(), Some("Cpus_allowed_list:\t0"), "{own}");
}

#[test]
fn oci_bad_scheduling_fails_with_one_line() {
    require!(Need::Root);
    // Refused at create, naming the field (runc's checks).
    let b = Bundle::new(&["true"], |c| {
        c["process"]["scheduler"] = serde_json::json!({"policy": "SCHED_OTHER", "priority": 5});
    });
    expect_error(&b.run(&["create", "s2"]), "process.scheduler.priority");
    let b = Bundle::new(&["true"], |c| {
        c["process"]["ioPriority"] = serde_json::json!({"class": "IOPRIO_CLASS_BE", "priority": 8});
    });
    expect_error(&b.run(&["create", "s3"]), "process.ioPriority.priority");
    // Refused by the kernel (a deadline shorter than the runtime): the program never runs.
    let b = Bundle::new(&["sh", "-c", "echo ran"], |c| {
        c["process"]["scheduler"] = serde_json::json!({
            "policy": "SCHED_DEADLINE", "runtime": 20_000_000u64,
            "deadline": 10_000_000u64, "period": 30_000_000u64
        });
    });
    let o = b.run(&["run", "s4"]);
    let _ = b.run(&["delete", "--force", "s4"]);
    expect_error(&o, "set the scheduler (sched_setattr)");
    assert!(!stdout(&o).contains("ran"));
}

/// `linux.personality` `LINUX32`: the process and an exec into the container run in the
/// 32-bit execution domain (`uname -m` says i686, as under crun), with the determinism
/// layer's address-space randomization off on top (`0x0040008`); an unknown domain fails
/// `create` with one line.
#[test]
fn oci_personality_sets_the_execution_domain() {
    require!(Need::Root);
    const SHOW: &str = "busybox uname -m; busybox cat /proc/self/personality";
    let script = format!("({SHOW}) > /shared/out; exec sleep 1000");
    let b = Bundle::new(&["sh", "-c", &script], |c| {
        c["linux"]["personality"] = serde_json::json!({"domain": "LINUX32"});
    });
    let (o, started, init) = start_showing(&b, "p1");
    let exec = b.run(&["exec", "p1", "sh", "-c", SHOW]);
    let _ = b.run(&["delete", "--force", "p1"]);
    assert!(started, "{o:?}");
    assert_eq!(init, "i686\n00040008\n");
    assert_eq!(expect_code(&exec, 0), "i686\n00040008\n");

    let bad = Bundle::new(&["true"], |c| {
        c["linux"]["personality"] = serde_json::json!({"domain": "LINUX64"});
    });
    let o = bad.run(&["create", "p2"]);
    assert_eq!(o.status.code(), Some(125));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("linux.personality.domain"), "{err}");
}
