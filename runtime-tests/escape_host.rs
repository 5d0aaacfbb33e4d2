//! Escape attempts against the caller's side of the box: its process group and terminal, the
//! host's device nodes, its unix sockets, symbolic links planted for a later run, and what
//! the sandbox may learn of the host. Each `attempt_*` is listed in `escape.rs`'s
//! `host_side_tests!`, so the escape summary counts it; each returns `Ok(detail)` when the
//! attempt was blocked.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Runs `reprorun exec FLAGS -- CMD` from a shell in a process group of its own (so an escape
/// kills that shell, never the test runner) and says whether the shell lived on after it.
fn caller_survives(flags: &[&str], cmd: &[&str]) -> Result<String, String> {
    let quoted: Vec<String> = flags
        .iter()
        .chain(["--"].iter())
        .chain(cmd)
        .map(|a| format!("'{a}'"))
        .collect();
    let script = format!("{BIN} exec {}; echo caller-survived $?", quoted.join(" "));
    let o = Command::new("sh")
        .args(["-c", &script])
        .process_group(0)
        .output()
        .unwrap();
    let out = stdout(&o);
    match out.lines().find(|l| l.starts_with("caller-survived")) {
        Some(line) => Ok(line.to_string()),
        None => Err(format!(
            "the caller's shell was killed ({:?}): {out} {}",
            o.status,
            stderr(&o)
        )),
    }
}

/// `kill(0, SIGKILL)` inside: reaches the sandbox's own process group, not the caller's.
pub(crate) fn attempt_kill_caller_group() -> Result<String, String> {
    let kill0 = [
        "python3",
        "-c",
        "import os, signal; os.kill(0, signal.SIGKILL)",
    ];
    let full = caller_survives(&[], &kill0)?;
    let pins_only = caller_survives(&["--isolation", "none"], &kill0)?;
    Ok(format!("full: {full}; pins only: {pins_only}"))
}

/// A pseudo-terminal standing for the caller's terminal: the test holds the master and
/// reprorun runs on the slave as its controlling terminal.
struct CallerTty {
    master: OwnedFd,
    slave: OwnedFd,
}

impl CallerTty {
    fn new() -> CallerTty {
        let pty = nix::pty::openpty(None, None).unwrap();
        let ws = libc::winsize {
            ws_row: 40,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads the winsize we own.
        unsafe { libc::ioctl(pty.slave.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
        CallerTty {
            master: pty.master,
            slave: pty.slave,
        }
    }

    /// `reprorun ARGS` in a session of its own whose controlling terminal is this one (its
    /// standard descriptors are the caller's to choose).
    fn controlling(&self, args: &[&str]) -> Command {
        let slave = self.slave.as_raw_fd();
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        // SAFETY: setsid and ioctl are async-signal-safe; `slave` stays open until the exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::setsid();
                if libc::ioctl(slave, libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    /// Runs reprorun on the terminal; writes `send` once `when` was printed. Returns the
    /// output and the exit code.
    fn run(&self, args: &[&str], when: &str, send: &[u8]) -> (String, Option<i32>) {
        let io = || Stdio::from(self.slave.try_clone().unwrap());
        let mut cmd = self.controlling(args);
        cmd.stdin(io()).stdout(io()).stderr(io());
        let mut child = cmd.spawn().unwrap();
        let mut out = Vec::new();
        let mut sent = false;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut fds = [nix::poll::PollFd::new(
                self.master.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u16));
            if fds[0].any().unwrap_or(false) {
                let mut buf = [0u8; 4096];
                if let Ok(n) = nix::unistd::read(self.master.as_raw_fd(), &mut buf) {
                    out.extend_from_slice(&buf[..n]);
                }
            }
            if !sent && String::from_utf8_lossy(&out).contains(when) {
                nix::unistd::write(&self.master, send).unwrap();
                sent = true;
            }
            if let Some(status) = child.try_wait().unwrap() {
                return (String::from_utf8_lossy(&out).into_owned(), status.code());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return (String::from_utf8_lossy(&out).into_owned(), None);
            }
        }
    }

    fn settings(&self) -> (bool, u16) {
        let t = nix::sys::termios::tcgetattr(self.slave.as_fd()).unwrap();
        let mut ws = libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCGWINSZ fills the winsize we own.
        unsafe { libc::ioctl(self.slave.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) };
        let echo = t.local_flags.contains(nix::sys::termios::LocalFlags::ECHO);
        (echo, ws.ws_col)
    }
}

/// With the caller on a terminal (its controlling terminal) but its standard descriptors
/// elsewhere (no pty is made), nothing inside reaches that terminal through `/dev/tty`: not
/// the workload, not its children, not a new session made inside. Full isolation, `--share-tty`
/// and pins-only runs.
pub(crate) fn attempt_open_caller_terminal() -> Result<String, String> {
    // `true 3<>/dev/tty` opens the terminal in the shell itself (a failed redirection of a
    // regular builtin does not end the shell).
    let script = "for who in workload child session; do case $who in \
        workload) true 3<>/dev/tty ;; child) sh -c 'true 3<>/dev/tty' ;; \
        session) setsid -w sh -c 'true 3<>/dev/tty' ;; esac 2>/dev/null \
        && { echo opened-$who; printf INJECTED-$who >/dev/tty; }; done; echo tried";
    let mut seen = Vec::new();
    for flags in [&[][..], &["--share-tty"][..], &["--isolation", "none"][..]] {
        let tty = CallerTty::new();
        let mut cmd =
            tty.controlling(&[&["exec"][..], flags, &["--", "sh", "-c", script]].concat());
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let o = cmd.output().unwrap();
        let out = stdout(&o);
        if !out.contains("tried") {
            return Err(format!(
                "{flags:?}: the check did not run: {out} {}",
                stderr(&o)
            ));
        }
        nix::fcntl::fcntl(
            tty.master.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .unwrap();
        let mut buf = [0u8; 4096];
        let echoed = match nix::unistd::read(tty.master.as_raw_fd(), &mut buf) {
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(_) => String::new(),
        };
        if out.contains("opened") || echoed.contains("INJECTED") {
            return Err(format!(
                "{flags:?}: the caller's terminal was reached: {out:?}, on it: {echoed:?}"
            ));
        }
        seen.push(format!("{flags:?}: /dev/tty refused"));
    }
    Ok(seen.join("; "))
}

/// `stty` inside changes the sandbox's own pty, never the caller's terminal, and the caller's
/// ^C still reaches the workload (and its children) through the relay.
pub(crate) fn attempt_change_caller_terminal() -> Result<String, String> {
    let mut seen = Vec::new();
    for flags in [&[][..], &["--isolation", "none"][..]] {
        let tty = CallerTty::new();
        let before = tty.settings();
        let mut args = vec!["exec"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&[
            "--",
            "sh",
            "-c",
            "stty -echo cols 123; echo stty-done; sleep 10; echo not-interrupted",
        ]);
        let (out, code) = tty.run(&args, "stty-done", b"\x03");
        let after = tty.settings();
        if after != before {
            return Err(format!(
                "{flags:?}: the caller's terminal changed: (echo, cols) {before:?} -> {after:?}"
            ));
        }
        if code != Some(130) || out.contains("not-interrupted") {
            return Err(format!(
                "{flags:?}: ^C did not stop the workload: {code:?} {out:?}"
            ));
        }
        seen.push(format!("{flags:?}: unchanged, ^C -> {code:?}"));
    }
    Ok(seen.join("; "))
}

/// The host's device nodes bound into the sandbox cannot be changed from inside: `chmod`,
/// `touch` and `chown` fail (the mount is read-only); the host's modes and times stay.
pub(crate) fn attempt_chmod_host_devices() -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let nodes = [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/tty",
        "/dev/urandom",
    ];
    let state = || -> Vec<(u32, i64, u32)> {
        nodes
            .iter()
            .map(|n| {
                let m = std::fs::metadata(n).unwrap();
                (m.mode(), m.mtime(), m.uid())
            })
            .collect()
    };
    let before = state();
    let script = "for n in null zero full tty urandom; do \
        chmod 000 /dev/$n 2>/dev/null && echo chmod-$n; \
        touch -d 2001-01-01 /dev/$n 2>/dev/null && echo touch-$n; \
        chown 1:1 /dev/$n 2>/dev/null && echo chown-$n; done; \
        echo x > /dev/null && head -c 4 /dev/zero | od -An -tx1 && echo written";
    let w = Work::new();
    let o = w.run(&["exec", "--random", "real", "--", "sh", "-c", script]);
    let after = state();
    // Undo an escape at once: the host must not keep a broken /dev.
    for (node, (mode, _, _)) in nodes.iter().zip(&before) {
        let _ = std::fs::set_permissions(
            node,
            std::os::unix::fs::PermissionsExt::from_mode(*mode & 0o7777),
        );
    }
    let out = stdout(&o);
    if before != after {
        return Err(format!(
            "host nodes changed: {before:?} -> {after:?} ({out})"
        ));
    }
    if out.contains("chmod-") || out.contains("touch-") || out.contains("chown-") {
        return Err(format!("a change went through inside: {out}"));
    }
    if !out.contains("00 00 00 00") || !out.contains("written") {
        return Err(format!("the devices no longer work: {out} {}", stderr(&o)));
    }
    Ok("chmod, touch, chown refused; reads and writes work".into())
}

/// A device outside the sandbox's list stays closed however its node is reached. Here the
/// caller hands the workload a descriptor of a host directory holding device nodes
/// (`--preserve-fds`): through `/proc/self/fd/3/NODE` the node is on the host's mount, which
/// is not `nodev`, so only the device rules stand between the workload and the device. The
/// kernel log (1:11, which opens for writing without a capability: a workload could write
/// lines into the host's log) is refused with EPERM by the sandbox's device cgroup — the
/// shared one by default (here the BPF program on the unified hierarchy), the run's own with
/// a limit (here on the v1 `devices` controller), and the shared one on each hierarchy
/// alone (`REPRORUN_CGROUP=v1`, `v2`) — while the null device in the same directory opens.
pub(crate) fn attempt_device_through_host_dir() -> Result<String, String> {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    if !is_root() {
        return Ok("rootless: the workload opens only what its caller could".into());
    }
    let w = Work::new();
    let nodes = w.path().join("nodes");
    std::fs::create_dir(&nodes).unwrap();
    for (name, major, minor) in [("kmsg", 1, 11), ("null", 1, 3)] {
        let mode = Mode::from_bits_truncate(0o666);
        mknod(
            &nodes.join(name),
            SFlag::S_IFCHR,
            mode,
            makedev(major, minor),
        )
        .unwrap();
        // Writable by anyone (mknod applied the umask): a root caller's workload is not the
        // host's root, and only the device rules may stand between it and the node.
        std::fs::set_permissions(
            nodes.join(name),
            std::os::unix::fs::PermissionsExt::from_mode(0o666),
        )
        .unwrap();
        // On the host the node opens: what the sandbox sees of it is the device rules' doing.
        std::fs::OpenOptions::new()
            .write(true)
            .open(nodes.join(name))
            .map_err(|e| format!("the host cannot open its own {name} node here: {e}"))?;
    }
    let script = "(: > /proc/self/fd/3/kmsg) 2>/tmp/err && echo kmsg-opened || cat /tmp/err; \
                  (: > /proc/self/fd/3/null) && echo null-opened";
    let exists = |p: &str| std::path::Path::new(p).exists();
    let v2 = exists("/sys/fs/cgroup/cgroup.controllers")
        || exists("/sys/fs/cgroup/unified/cgroup.controllers");
    let mut modes = vec![("auto", &[][..]), ("auto", &["--pids", "256"][..])];
    if exists("/sys/fs/cgroup/devices/devices.list") {
        modes.push(("v1", &[][..]));
    }
    if v2 {
        modes.push(("v2", &[][..]));
    }
    let mut seen = Vec::new();
    for (mode, flags) in modes {
        let dir = std::fs::File::open(&nodes).unwrap();
        let fd = dir.as_raw_fd();
        let mut cmd = w.cmd(&["exec", "--preserve-fds", "1"]);
        cmd.args(flags).args(["--", "sh", "-c", script]);
        cmd.env("REPRORUN_CGROUP", mode);
        pass_as_fd3(&mut cmd, fd);
        let o = cmd.stdin(Stdio::null()).output().unwrap();
        let out = stdout(&o);
        let label = format!("{mode} {}", flags.join(" "));
        if out.contains("kmsg-opened") {
            return Err(format!(
                "{label}: the host's kernel log opened for writing: {out}"
            ));
        }
        if !out.contains("Operation not permitted") || !out.contains("null-opened") {
            return Err(format!(
                "{label}: expected EPERM for the kernel log and the null device open: {out} {}",
                stderr(&o)
            ));
        }
        seen.push(label.trim().to_string());
    }
    Ok(format!(
        "refused with EPERM ({}); null opens",
        seen.join(", ")
    ))
}

/// A link planted by one run in its `/work` does not turn a later run's `--workdir` or
/// `--bind` source into a host path: the source is refused, naming the link; with
/// `--follow-symlinks` it is followed and the run record names the resolved path.
pub(crate) fn attempt_planted_source_link() -> Result<String, String> {
    let w = Work::new();
    std::fs::create_dir(w.path().join("pw")).unwrap();
    // Exactly as many `..` as lead from the host directory to `/`: then the link names the
    // host's /etc from where the mount is made.
    let depth = w.path().join("pw").components().count() - 1;
    let plant = format!(
        "ln -s {}etc /work/pw/out && echo planted",
        "../".repeat(depth)
    );
    let plant = w.run(&["exec", "--", "sh", "-c", &plant]);
    if !stdout(&plant).contains("planted") {
        return Err(format!("could not plant the link: {}", stderr(&plant)));
    }
    let probe = "touch /work/reprorun-escape-probe 2>&1; test -e /work/passwd && echo host-etc";
    let workdir = w.run(&["exec", "--workdir", "pw/out", "--", "sh", "-c", probe]);
    let bind = format!("{}/pw/out:/mnt", w.path().display());
    let bound = w.run(&[
        "exec",
        "--bind",
        &bind,
        "--",
        "sh",
        "-c",
        "ls /mnt | head -3",
    ]);
    let _ = std::fs::remove_file("/etc/reprorun-escape-probe");
    for (what, o) in [("--workdir", &workdir), ("--bind", &bound)] {
        if o.status.code() != Some(125) || !stderr(o).contains("symbolic link") {
            return Err(format!(
                "{what} through the planted link was not refused: {:?} {} {}",
                o.status.code(),
                stdout(o),
                stderr(o)
            ));
        }
    }
    let record = w.path().join("run.json");
    let followed = w.run(&[
        "exec",
        "--follow-symlinks",
        "--record",
        record.to_str().unwrap(),
        "--workdir",
        "pw/out",
        "--",
        "true",
    ]);
    let json = std::fs::read_to_string(&record).unwrap_or_default();
    if followed.status.code() != Some(0) || !json.contains("\"host_workdir\": \"/etc\"") {
        return Err(format!(
            "--follow-symlinks: {:?} {}; record: {}",
            followed.status.code(),
            stderr(&followed),
            json.lines()
                .filter(|l| l.contains("host_workdir"))
                .collect::<String>()
        ));
    }
    Ok(stderr(&workdir).trim().to_string())
}

/// A host service's unix socket, named on the host root (outside `/run` and `/tmp`), does not
/// answer the workload (a read-only mount does not stop `connect`); nor, with `--net host`,
/// does an abstract socket of the host (Landlock's abstract-socket scope, where the kernel
/// has it).
pub(crate) fn attempt_host_unix_socket() -> Result<String, String> {
    use std::os::linux::net::SocketAddrExt;
    // Unique per call: the summary test runs every attempt while this one's own test may
    // run it at the same time, in the same process.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("{}-{n}", std::process::id());
    let dir = std::path::PathBuf::from(format!("/var/tmp/reprorun-escape-{id}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("service.sock");
    let named = std::os::unix::net::UnixListener::bind(&path).unwrap();
    named.set_nonblocking(true).unwrap();
    let name = format!("reprorun-escape-{id}");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let abstract_ = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    abstract_.set_nonblocking(true).unwrap();
    let probe = format!(
        "import socket\n\
         for a in ({:?}, '\\0{name}'):\n\
         \x20   s = socket.socket(socket.AF_UNIX)\n\
         \x20   try:\n\
         \x20       s.connect(a); print('connected', repr(a))\n\
         \x20   except OSError as e:\n\
         \x20       print('refused', repr(a), e.errno)\n",
        path.display().to_string()
    );
    let w = Work::new();
    let outs: Vec<String> = [&[][..], &["--net", "host"][..]]
        .iter()
        .map(|flags| {
            let mut args = vec!["exec"];
            args.extend_from_slice(flags);
            args.extend_from_slice(&["--", "python3", "-c", &probe]);
            stdout(&w.run(&args))
        })
        .collect();
    let accepted = named.accept().is_ok() || abstract_.accept().is_ok();
    let _ = std::fs::remove_dir_all(&dir);
    let all = outs.join(" | ");
    if accepted || all.contains("connected") || all.matches("refused").count() != 4 {
        return Err(format!("a host unix socket answered: {all}"));
    }
    Ok(all.replace('\n', "; "))
}

/// What the sandbox could learn of the host through its own view of /proc and /sys: the
/// caller's command line (host paths, `--env` secrets) as init's, the host's load, boot time
/// and pressure, the kernel's physical addresses. Each reads as a pinned value (the same on
/// every run) or not at all.
pub(crate) fn attempt_host_information() -> Result<String, String> {
    let probe = r#"
import os
def read(p):
    try:
        with open(p, "rb") as f: return f.read()
    except OSError as e: return ("error %d" % e.errno).encode()
print("cmdline", read("/proc/1/cmdline"))
print("loadavg", read("/proc/loadavg"))
print("btime", [l for l in read("/proc/stat").split(b"\n") if l.startswith(b"btime")])
print("cpus", [l for l in read("/proc/stat").split(b"\n") if l.startswith(b"cpu")])
print("pressure", sorted(os.listdir("/proc/pressure")) if os.path.isdir("/proc/pressure") else None)
print("vmcoreinfo", read("/sys/kernel/vmcoreinfo")[:40])
"#;
    let w = Work::new();
    let run = || {
        let o = w.run(&[
            "exec",
            "--env",
            "API_TOKEN=s3cr3t-value",
            "--",
            "python3",
            "-c",
            probe,
        ]);
        stdout(&o)
    };
    let (first, second) = (run(), run());
    let line = |key: &str| {
        first
            .lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap_or("")
            .to_string()
    };
    let mut leaks = Vec::new();
    if first.contains("s3cr3t")
        || first.contains(BIN)
        || line("cmdline") != "cmdline b'reprorun-init\\x00'"
    {
        leaks.push(line("cmdline"));
    }
    if line("loadavg") != "loadavg b'0.00 0.00 0.00 1/1 1\\n'" {
        leaks.push(line("loadavg"));
    }
    if !line("cpus").contains(" 0 0 0 0 0 0 0 0 0 0'") || line("btime") == "btime []" {
        leaks.push(format!("{} {}", line("cpus"), line("btime")));
    }
    if line("pressure") != "pressure []" && line("pressure") != "pressure None" {
        leaks.push(line("pressure"));
    }
    let vmcore = line("vmcoreinfo");
    if !(vmcore == "vmcoreinfo b''" || vmcore.contains("error")) {
        leaks.push(vmcore);
    }
    if first != second {
        leaks.push(format!("two runs differ: {first:?} vs {second:?}"));
    }
    if leaks.is_empty() {
        Ok(line("cmdline"))
    } else {
        Err(leaks.join("; "))
    }
}

/// What /proc and /sys would tell of the host's kernel, disks and memory beside the pinned
/// identity: its boot id and command line (device names, hypervisor settings), sizes the
/// kernel derives from the real memory (`threads-max`, `file-max`, the NUMA node's
/// `meminfo`), its disks, per-CPU counters with the host's CPU count, dentry and file
/// counters, and the kernel's UUID source under seeded entropy. Each must read as a pinned
/// value (never the host's, the same on every run) or nothing.
pub(crate) fn attempt_host_kernel_facts() -> Result<String, String> {
    let probe = "for f in /proc/sys/kernel/random/boot_id /proc/sys/kernel/random/uuid \
        /proc/sys/kernel/random/uuid /proc/cmdline /proc/sys/kernel/threads-max \
        /proc/sys/fs/file-max /proc/sys/fs/file-nr /proc/sys/fs/dentry-state /proc/softirqs \
        /proc/partitions /proc/diskstats /proc/zoneinfo /proc/buddyinfo; do \
        printf '%s=%s\n' $f \"$(tr '\n\t' '| ' < $f 2>&1)\"; done; \
        for d in /sys/devices/system/node /sys/block /sys/class/block /sys/dev/block; do \
        printf '%s=%s\n' $d \"$(ls $d 2>&1 | tr '\n' ' ')\"; done";
    let w = Work::new();
    let run = || stdout(&w.run(&["exec", "--cpus", "1", "--", "sh", "-c", probe]));
    let (first, second) = (run(), run());
    let host = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let value = |path: &str| {
        first
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{path}=")))
            .unwrap_or("<missing>")
            .to_string()
    };
    let mut leaks = Vec::new();
    for file in [
        "/proc/sys/kernel/random/boot_id",
        "/proc/cmdline",
        "/proc/sys/kernel/threads-max",
        "/proc/sys/fs/file-max",
    ] {
        let inside = value(file);
        if inside.is_empty() || inside == host(file).replace('\n', "|") {
            leaks.push(format!("{file}: {inside}"));
        }
    }
    if value("/proc/sys/kernel/threads-max") != "65536|" {
        leaks.push(format!(
            "threads-max {}",
            value("/proc/sys/kernel/threads-max")
        ));
    }
    let uuid = first
        .lines()
        .filter(|l| l.starts_with("/proc/sys/kernel/random/uuid="));
    if uuid.collect::<std::collections::BTreeSet<_>>().len() != 1 {
        leaks.push("two reads of the uuid differ".into());
    }
    let softirqs = value("/proc/softirqs");
    if softirqs
        .split('|')
        .nth(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        != Some(vec!["HI:", "0"])
    {
        leaks.push(format!("softirqs {softirqs}"));
    }
    if value("/proc/partitions") != "major minor  #blocks  name||" {
        leaks.push(format!("/proc/partitions: {}", value("/proc/partitions")));
    }
    for hidden in [
        "/proc/diskstats",
        "/proc/zoneinfo",
        "/proc/buddyinfo",
        "/sys/devices/system/node",
        "/sys/block",
        "/sys/class/block",
        "/sys/dev/block",
    ] {
        let inside = value(hidden);
        if !(inside.is_empty() || inside.contains("No such file")) {
            leaks.push(format!("{hidden}: {}", &inside[..inside.len().min(80)]));
        }
    }
    if first != second {
        leaks.push(format!("two runs differ: {first:?} vs {second:?}"));
    }
    if leaks.is_empty() {
        Ok(value("/proc/sys/kernel/random/boot_id"))
    } else {
        Err(leaks.join("; "))
    }
}

/// A link planted in `/work` as the next run's `--record` file (`run.json -> a host file`)
/// does not make reprorun, on the host, truncate and write the file it names.
pub(crate) fn attempt_planted_record_link() -> Result<String, String> {
    let w = Work::new();
    let victim = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(victim.path(), "precious host file").unwrap();
    let plant = format!(
        "ln -s {} /work/run.json && echo planted",
        victim.path().display()
    );
    let planted = w.run(&["exec", "--", "sh", "-c", &plant]);
    if !stdout(&planted).contains("planted") {
        return Err(format!("could not plant: {}", stderr(&planted)));
    }
    let o = w.run(&["exec", "--record", "run.json", "--", "true"]);
    let now = std::fs::read_to_string(victim.path()).unwrap_or_default();
    if now != "precious host file" {
        return Err(format!("the host file was overwritten: {now:.80}"));
    }
    if o.status.code() != Some(125) || !stderr(&o).contains("symbolic link") {
        return Err(format!("not refused: {:?} {}", o.status.code(), stderr(&o)));
    }
    Ok(stderr(&o).trim().to_string())
}
