//! The exec-time path for programs that bypass libc (static binaries, Go): their clock and
//! their AT_RANDOM bytes. The workload's seccomp filter sends the realtime clock calls and
//! every `execve`/`execveat` to the supervisor's notification server. At an exec of such a
//! program the server attaches with ptrace for that one exec (PTRACE_SEIZE + exec event),
//! writes the seeded AT_RANDOM bytes, gives it the fake clock in-process (or turns its
//! AT_SYSINFO_EHDR auxiliary-vector entry into AT_IGNORE, so that its runtime finds no vDSO
//! and makes the clock system calls, which the server answers) and detaches. Nothing else is traced: no
//! fork, signal or exit ever stops a process; dynamic programs keep their vDSO and the preload.

use std::os::unix::fs::FileExt;

use nix::errno::Errno;
use nix::sys::ptrace::{self, Event, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use super::elf::{self, le, name_at, Budget, GoTicks, ProgramKind};
use super::fakeclock::{
    fake_page, FakeClock, CODE_CLOCK_GETTIME, CODE_GETTIMEOFDAY, CODE_TIME, ENTRY_CLOCK_GETTIME,
    ENTRY_GETTIMEOFDAY, ENTRY_TIME, FAKE_PAGE, SLOTS, SLOTS_LEN,
};
use super::procpath::{ProcessFs, Start};
use super::tracees::{release, wait_stop};

/// Tag byte of the datagram that carries the listener descriptor from the workload.
pub(crate) const LISTENER_TAG: u8 = b'L';

const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_RANDOM: u64 = 25;
const AT_SYSINFO_EHDR: u64 = 33;

/// What a static or Go program's clock gets at its exec.
#[derive(Debug, Clone, Copy)]
pub(in crate::sandbox) enum ClockPatch {
    /// Nothing (the clock is not faked).
    Keep,
    /// The fake clock in-process.
    Inject(FakeClock),
    /// No vDSO: the clock system calls, which the server answers.
    Strip,
}

/// What to change in a static or Go program at its exec.
#[derive(Debug, Clone, Copy)]
pub(in crate::sandbox) struct ExecPatch {
    pub(crate) clock: ClockPatch,
    /// Seeded entropy: AT_RANDOM is rewritten (static Go: removed).
    pub(crate) seeded: bool,
}

/// Whether this build can serve the static path (the filter and register access are per
/// architecture; other architectures keep the preload path only).
pub(crate) const SUPPORTED: bool = cfg!(target_arch = "x86_64");

/// Go before 1.22 seeds each thread's `fastrand` — and so map iteration order — from the CPU's
/// timestamp counter: its `runtime.cputicks` ([`GoTicks`]) is replaced by this code, which
/// returns a constant, so the seed is AT_RANDOM's alone.
/// `movq $0x10000000, %rax; movq %rax, 8(%rsp); ret`: the ABI0 result slot (and AX) hold a
/// constant tick count.
const TICKS_CODE: [u8; 13] = [
    0x48, 0xc7, 0xc0, 0x00, 0x00, 0x00, 0x10, 0x48, 0x89, 0x44, 0x24, 0x08, 0xc3,
];

/// Replaces the stopped tracee's `runtime.cputicks` with [`TICKS_CODE`].
#[cfg(target_arch = "x86_64")]
fn patch_go_ticks(pid: Pid, ticks: GoTicks) -> Result<(), Errno> {
    const AT_ENTRY: u64 = 9;
    let base = match ticks.pie_entry {
        None => 0,
        Some(entry) => {
            let (_, at_entry) = auxv_entry(pid, AT_ENTRY)?.ok_or(Errno::ENOENT)?;
            at_entry.wrapping_sub(entry)
        }
    };
    poke_bytes(pid, ticks.vaddr.wrapping_add(base), &TICKS_CODE)
}

#[cfg(not(target_arch = "x86_64"))]
fn patch_go_ticks(_pid: Pid, _ticks: GoTicks) -> Result<(), Errno> {
    Err(Errno::ENOSYS)
}

/// Reads another process's memory (writes go through ptrace: [`poke_bytes`]).
struct Remote(Pid);

impl Remote {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        use nix::sys::uio::{process_vm_readv, RemoteIoVec};
        let remote = [RemoteIoVec {
            base: addr as usize,
            len: buf.len(),
        }];
        let n = process_vm_readv(self.0, &mut [std::io::IoSliceMut::new(buf)], &remote)?;
        if n == buf.len() {
            Ok(())
        } else {
            Err(Errno::EFAULT)
        }
    }

    /// A NUL-terminated string of at most 4096 bytes.
    fn cstr(&self, addr: u64) -> Result<Vec<u8>, Errno> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < 4096 {
            // Read up to the end of the page, so an unmapped next page is never touched.
            let len = 4096 - (at as usize % 4096);
            let mut buf = vec![0u8; len];
            self.read(at, &mut buf)?;
            if let Some(nul) = buf.iter().position(|b| *b == 0) {
                out.extend_from_slice(&buf[..nul]);
                return Ok(out);
            }
            out.extend_from_slice(&buf);
            at += len as u64;
        }
        Err(Errno::ENAMETOOLONG)
    }

    fn word(&self, addr: u64) -> Result<u64, Errno> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }
}

/// At an exec stop the stack pointer addresses argc, then argv, NULL, envp, NULL, auxv.
/// Returns the address of the auxiliary-vector entry of type `kind` and its value.
#[cfg(target_arch = "x86_64")]
fn auxv_entry(pid: Pid, kind: u64) -> Result<Option<(u64, u64)>, Errno> {
    let sp = ptrace::getregs(pid)?.rsp;
    let mem = Remote(pid);
    let argc = mem.word(sp)?;
    let mut at = sp + 8 * (argc + 2); // past argc, argv[], NULL
    while mem.word(at)? != 0 {
        at += 8; // envp[]
    }
    at += 8;
    for _ in 0..512 {
        match mem.word(at)? {
            AT_NULL => return Ok(None),
            k if k == kind => return Ok(Some((at, mem.word(at + 8)?))),
            _ => at += 16,
        }
    }
    Ok(None)
}

/// Turns the AT_SYSINFO_EHDR entry into AT_IGNORE, so the program finds no vDSO and makes
/// the clock system calls, which the clock server answers.
#[cfg(target_arch = "x86_64")]
fn strip_vdso(pid: Pid) -> Result<bool, Errno> {
    hide_auxv(pid, AT_SYSINFO_EHDR)
}

/// Turns the auxiliary-vector entry of type `kind` into AT_IGNORE.
#[cfg(target_arch = "x86_64")]
fn hide_auxv(pid: Pid, kind: u64) -> Result<bool, Errno> {
    match auxv_entry(pid, kind)? {
        Some((entry, _)) => poke_bytes(pid, entry, &AT_IGNORE.to_ne_bytes()).map(|_| true),
        None => Ok(false),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn strip_vdso(_pid: Pid) -> Result<bool, Errno> {
    Ok(false)
}

#[cfg(not(target_arch = "x86_64"))]
fn hide_auxv(_pid: Pid, _kind: u64) -> Result<bool, Errno> {
    Ok(false)
}

/// Overwrites the 16 bytes the program's AT_RANDOM entry points to.
#[cfg(target_arch = "x86_64")]
fn seed_at_random(pid: Pid, bytes: &[u8; 16]) -> Result<(), Errno> {
    let (_, addr) = auxv_entry(pid, AT_RANDOM)?.ok_or(Errno::ENOENT)?;
    poke_bytes(pid, addr, bytes)
}

#[cfg(not(target_arch = "x86_64"))]
fn seed_at_random(_pid: Pid, _bytes: &[u8; 16]) -> Result<(), Errno> {
    Err(Errno::ENOSYS)
}

/// What to change in a program's vDSO: the dynamic-symbol value fields of its realtime entry
/// points (each with the value that makes it resolve into the fake clock page), and the
/// address of its own `clock_gettime`.
struct VdsoPatch {
    fields: Vec<(u64, u64)>,
    clock_gettime: u64,
}

/// Reads the vDSO at `base` from the tracee and plans the patch.
fn vdso_patch(pid: Pid, base: u64) -> Result<VdsoPatch, Errno> {
    let mem = Remote(pid);
    let mut image = Vec::new();
    for page in 0..8u64 {
        let mut buf = vec![0u8; 4096];
        if mem.read(base + page * 4096, &mut buf).is_err() {
            break;
        }
        image.extend_from_slice(&buf);
    }
    let field = |at: usize, n: usize| le(&image, at, n).ok_or(Errno::ENOEXEC);
    if image.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err(Errno::ENOEXEC);
    }
    let (shoff, shentsize, shnum) = (field(40, 8)?, field(58, 2)?, field(60, 2)?);
    const SHT_DYNSYM: usize = 11;
    let mut fields = Vec::new();
    let mut clock_gettime = 0;
    for sh in (0..shnum).map(|i| shoff + i * shentsize) {
        if field(sh + 4, 4)? != SHT_DYNSYM {
            continue;
        }
        let (sym_off, sym_size, link) =
            (field(sh + 24, 8)?, field(sh + 32, 8)?, field(sh + 40, 4)?);
        let strings = image
            .get(field(shoff + link * shentsize + 24, 8)?..)
            .ok_or(Errno::ENOEXEC)?;
        for sym in (sym_off..sym_off + sym_size).step_by(24) {
            // The longest wanted name is 20 bytes: no name is scanned further.
            let entry = match name_at(strings, field(sym, 4)?, 32) {
                b"clock_gettime" | b"__vdso_clock_gettime" => ENTRY_CLOCK_GETTIME,
                b"gettimeofday" | b"__vdso_gettimeofday" => ENTRY_GETTIMEOFDAY,
                b"time" | b"__vdso_time" => ENTRY_TIME,
                _ => continue,
            };
            if entry == ENTRY_CLOCK_GETTIME {
                clock_gettime = base + field(sym + 8, 8)? as u64;
            }
            // Symbol values are relative to the vDSO's base; users add the two (wrapping).
            fields.push((
                base + sym as u64 + 8,
                (FAKE_PAGE + entry).wrapping_sub(base),
            ));
        }
    }
    if clock_gettime == 0 {
        return Err(Errno::ENOENT);
    }
    Ok(VdsoPatch {
        fields,
        clock_gettime,
    })
}

/// Writes into the tracee's memory whatever the page protection (ptrace's forced write).
fn poke_bytes(pid: Pid, addr: u64, bytes: &[u8]) -> Result<(), Errno> {
    let mut off = 0usize;
    while off < bytes.len() {
        let at = addr + off as u64;
        let n = (bytes.len() - off).min(8);
        let mut word = if n < 8 {
            (ptrace::read(pid, at as ptrace::AddressType)? as u64).to_le_bytes()
        } else {
            [0u8; 8]
        };
        word[..n].copy_from_slice(&bytes[off..off + n]);
        ptrace::write(
            pid,
            at as ptrace::AddressType,
            i64::from_le_bytes(word) as libc::c_long,
        )?;
        off += n;
    }
    Ok(())
}

/// Runs one system call in the stopped tracee (at its current instruction, temporarily a
/// `syscall`), then restores its code and registers. Returns the call's result.
#[cfg(target_arch = "x86_64")]
/// A signal that arrives meanwhile is held back into `pending` (to deliver at detach).
fn inject_syscall(
    pid: Pid,
    nr: u64,
    args: [u64; 6],
    pending: &mut Option<Signal>,
) -> Result<u64, Errno> {
    let saved = ptrace::getregs(pid)?;
    let ip = saved.rip;
    let code = ptrace::read(pid, ip as ptrace::AddressType)? as u64;
    let syscall_insn = (code & !0xffff) | 0x050f; // 0f 05
    ptrace::write(pid, ip as ptrace::AddressType, syscall_insn as libc::c_long)?;
    let mut regs = saved;
    regs.rax = nr;
    regs.orig_rax = u64::MAX;
    (regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9) =
        (args[0], args[1], args[2], args[3], args[4], args[5]);
    let result = ptrace::setregs(pid, regs).and_then(|_| loop {
        ptrace::step(pid, None)?;
        match wait_stop(pid)? {
            WaitStatus::Stopped(_, Signal::SIGTRAP) => break Ok(ptrace::getregs(pid)?.rax),
            // A signal stopped it before the step: keep it for later, step again.
            WaitStatus::Stopped(_, sig) => *pending = Some(sig),
            _ => break Err(Errno::ECHILD),
        }
    });
    ptrace::write(pid, ip as ptrace::AddressType, code as libc::c_long)?;
    ptrace::setregs(pid, saved)?;
    result
}

/// Gives a static or Go program the fake clock in-process: maps the fake clock page at
/// [`FAKE_PAGE`] and points the vDSO's realtime symbols at it (the vDSO's code is untouched,
/// so other clocks stay in the vDSO). The tracee must be at the exit of its execve (so its
/// registers can be borrowed) and must not have run yet (it resolves the vDSO at start-up).
#[cfg(target_arch = "x86_64")]
fn inject_fake_clock(
    pid: Pid,
    clock: FakeClock,
    pending: &mut Option<Signal>,
) -> Result<(), Errno> {
    let (_, base) = auxv_entry(pid, AT_SYSINFO_EHDR)?.ok_or(Errno::ENOENT)?;
    let patch = vdso_patch(pid, base)?;
    let prot = (libc::PROT_READ | libc::PROT_EXEC) as u64;
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64;
    let mapped = inject_syscall(
        pid,
        libc::SYS_mmap as u64,
        [FAKE_PAGE, 4096, prot, flags, u64::MAX, 0],
        pending,
    )?;
    if mapped != FAKE_PAGE {
        return Err(Errno::EEXIST);
    }
    // The page is fresh (zeroed): write only the code and the slots.
    let page = fake_page(clock, patch.clock_gettime);
    for (start, len) in [
        (ENTRY_CLOCK_GETTIME as usize, CODE_CLOCK_GETTIME.len()),
        (ENTRY_GETTIMEOFDAY as usize, CODE_GETTIMEOFDAY.len()),
        (ENTRY_TIME as usize, CODE_TIME.len()),
        (SLOTS, SLOTS_LEN),
    ] {
        poke_bytes(pid, FAKE_PAGE + start as u64, &page[start..start + len])?;
    }
    for (field, value) in patch.fields {
        poke_bytes(pid, field, &value.to_le_bytes())?;
    }
    Ok(())
}

#[cfg(not(target_arch = "x86_64"))]
fn inject_fake_clock(
    _pid: Pid,
    _clock: FakeClock,
    _pending: &mut Option<Signal>,
) -> Result<(), Errno> {
    Err(Errno::ENOSYS)
}

/// The file an `execve`/`execveat` notification is about to run, opened for reading only if
/// it is a regular file, looked up as the caller sees it (see [`ProcessFs`]): absolute paths
/// inside its root, relative ones from its working directory or `dirfd` (still inside its
/// root), AT_EMPTY_PATH the descriptor itself. Never through the host's filesystem.
fn exec_target(fs: &ProcessFs, pid: Pid, nr: i64, args: &[u64; 6]) -> Option<std::fs::File> {
    let (dirfd, path_ptr, flags) = if nr == libc::SYS_execveat {
        (args[0] as i32, args[1], args[4] as i32)
    } else {
        (libc::AT_FDCWD, args[0], 0)
    };
    let path = Remote(pid).cstr(path_ptr).ok()?;
    let start = if dirfd == libc::AT_FDCWD {
        Start::Cwd
    } else {
        Start::Fd(dirfd)
    };
    let probe = if path.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
        fs.find_start(start)?
    } else if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
        fs.find_nofollow(start, &path)? // a link: the exec fails (ELOOP), nothing to patch
    } else {
        fs.find(start, &path)?
    };
    // Only regular files can be programs: no FIFO or device is ever opened.
    crate::sys::reopen_regular(&probe, false).ok()
}

/// The program about to be exec'd, if it bypasses libc: the file itself, or the interpreter
/// of a `#!` script (looked up as the kernel does, from the caller's view), and its kind.
fn exec_bypasses_libc(
    pid: Pid,
    nr: i64,
    args: &[u64; 6],
    budget: &mut Budget,
) -> Option<(std::fs::File, ProgramKind)> {
    let fs = ProcessFs::of(pid)?;
    let file = exec_target(&fs, pid, nr, args)?;
    program_of(file, |interp| fs.open_regular(Start::Cwd, interp), budget)
        .filter(|(_, kind)| kind.bypasses_libc())
}

/// What an exec of `file` runs, and its kind: `file` itself if it is an ELF program, else
/// the interpreter its `#!` line names, opened by `open` (looked up as the kernel does, from
/// the exec'ing process's view). `None` for anything else: another format, a script of a
/// script, a file that cannot be read. (Used by the server at every exec, and by the
/// workload for its own, `program`.)
pub(in crate::sandbox) fn program_of(
    file: std::fs::File,
    open: impl FnOnce(&[u8]) -> Option<std::fs::File>,
    budget: &mut Budget,
) -> Option<(std::fs::File, ProgramKind)> {
    if let Some(kind) = elf::program_kind(&file, budget) {
        return Some((file, kind));
    }
    let mut head = [0u8; 256];
    let n = file.read_at(&mut head, 0).ok()?;
    if !head[..n].starts_with(b"#!") {
        return None;
    }
    let interp = open(script_interpreter(&head[..n])?)?;
    let kind = elf::program_kind(&interp, budget)?;
    Some((interp, kind))
}

/// The interpreter named by a `#!` line (`head` starts with `#!`).
fn script_interpreter(head: &[u8]) -> Option<&[u8]> {
    let line = head.get(2..)?;
    let line = &line[..line.iter().position(|b| *b == b'\n').unwrap_or(line.len())];
    line.split(|b| *b == b' ' || *b == b'\t')
        .find(|w| !w.is_empty())
}

/// What happens to a new program's AT_RANDOM bytes.
enum Random<'a> {
    Keep,
    Seed(&'a [u8; 16]),
    /// Removed (a static Go program then reads the seeded /dev/urandom).
    Hide,
}

/// At the exec stop of `p`: its AT_RANDOM and Go tick counter, then its clock (the fake
/// clock in-process, a jump from the vDSO; else the system-call path: no vDSO, the server
/// answers); then lets it go on.
fn at_exec_stop(p: Pid, clock: ClockPatch, random: Random, go_ticks: Option<GoTicks>) {
    match random {
        Random::Keep => {}
        Random::Seed(bytes) => {
            let _ = seed_at_random(p, bytes);
        }
        Random::Hide => {
            let _ = hide_auxv(p, AT_RANDOM);
        }
    }
    if let Some(ticks) = go_ticks {
        let _ = patch_go_ticks(p, ticks);
    }
    let mut pending = None;
    let mut lost = false;
    let mut inject = |clock| {
        if ptrace::syscall(p, None).is_err() {
            return false;
        }
        match wait_stop(p) {
            Ok(WaitStatus::PtraceSyscall(_)) => inject_fake_clock(p, clock, &mut pending).is_ok(),
            Err(Errno::ETIMEDOUT) => {
                lost = true; // running, not stopped: released below
                false
            }
            _ => false,
        }
    };
    match clock {
        ClockPatch::Keep => {}
        ClockPatch::Inject(clock) => {
            if !inject(clock) && !lost {
                let _ = strip_vdso(p);
            }
        }
        ClockPatch::Strip => {
            let _ = strip_vdso(p);
        }
    }
    if lost {
        release(p);
        return;
    }
    // A signal held back during the injection is delivered now.
    let _ = ptrace::detach(p, pending);
}

/// Handles an exec notification: lets the exec proceed, and when the new program bypasses
/// libc (static, Go), applies `patch` at the exec stop: its AT_RANDOM bytes, and its clock
/// (the fake clock in-process, or no vDSO). `respond` lets the exec continue.
pub(in crate::sandbox) fn on_exec(
    pid: Pid,
    nr: i64,
    args: &[u64; 6],
    patch: ExecPatch,
    at_random: impl FnOnce() -> Option<[u8; 16]>,
    still_valid: impl Fn() -> bool,
    respond: impl FnOnce(),
) {
    let opts = Options::PTRACE_O_TRACEEXEC | Options::PTRACE_O_TRACESYSGOOD;
    let nothing = matches!(patch.clock, ClockPatch::Keep) && !patch.seeded;
    // The classification below runs while this exec and every other notification wait: its
    // work is bounded (see `elf`).
    let mut budget = Budget::per_exec();
    let program = if nothing {
        None
    } else {
        exec_bypasses_libc(pid, nr, args, &mut budget)
    };
    let Some((program, kind)) = program else {
        respond();
        return;
    };
    // Seeded entropy for a static Go program: its runtime pads AT_RANDOM's 16 bytes out with
    // the monotonic clock, but reads /dev/urandom (the seeded stream) in full when there is no
    // AT_RANDOM, so the entry is removed; and Go before 1.22 mixes the timestamp counter into
    // each thread's random state, so that becomes a constant. (Not for libc programs: their
    // loader needs AT_RANDOM.)
    let static_go = patch.seeded && kind.is_static && kind.is_go;
    let at_random = if patch.seeded && !static_go {
        at_random()
    } else {
        None
    };
    let go_ticks = if static_go {
        // Stripped (as `go test` links the test binaries it runs): Go's function table.
        elf::go_cputicks(&program, TICKS_CODE.len(), &mut budget)
            .or_else(|| super::gopclntab::go_cputicks(&program, TICKS_CODE.len(), &mut budget))
    } else {
        None
    };
    // The main thread reaps nothing while this thread has a tracee (see `tracees`).
    let _tracing = super::tracees::tracing();
    if ptrace::seize(pid, opts).is_err() {
        respond();
        return;
    }
    // Attached to the right process? (The caller may have died and its pid been reused
    // between the notification and the attach.)
    // (A signal that interrupts the exec also invalidates its notification: the tracee is
    // running then, so it must be stopped before it can be detached.)
    if !still_valid() {
        release(pid);
        return;
    }
    respond();
    // Wait (briefly) for the exec stop; an exec that fails produces none.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    loop {
        // Any tracee of this thread: an exec from a non-leader thread reports its stop under
        // the leader's pid. __WNOTHREAD keeps the supervisor's own child (init) out of reach.
        match super::tracees::wait(Pid::from_raw(-1), libc::WNOHANG) {
            Ok(WaitStatus::PtraceEvent(p, _, ev)) if ev == Event::PTRACE_EVENT_EXEC as i32 => {
                let random = match (static_go, &at_random) {
                    (true, _) => Random::Hide,
                    (false, Some(bytes)) => Random::Seed(bytes),
                    (false, None) => Random::Keep,
                };
                at_exec_stop(p, patch.clock, random, go_ticks);
                return;
            }
            Ok(WaitStatus::Stopped(p, sig)) => {
                // A signal arrived meanwhile: pass it on and keep waiting for the exec.
                let _ = ptrace::cont(p, Some(sig));
            }
            Ok(WaitStatus::PtraceEvent(p, sig, ev))
                if ev == Event::PTRACE_EVENT_STOP as i32
                    && matches!(
                        sig,
                        Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU
                    ) =>
            {
                // A group-stop: stay stopped until SIGCONT, which re-traps.
                let _ = crate::sys::ptrace_listen(p);
            }
            Ok(WaitStatus::PtraceEvent(p, _, _)) => {
                let _ = ptrace::cont(p, None);
            }
            Ok(WaitStatus::StillAlive) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
            Err(Errno::EINTR) => {}
            Ok(WaitStatus::Exited(p, _) | WaitStatus::Signaled(p, ..)) if p == pid => return,
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => {}
            Err(_) => return,
            Ok(_) => {
                // The exec failed (or took too long): stop tracing.
                release(pid);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_interpreter_is_the_first_word_of_the_line() {
        assert_eq!(
            script_interpreter(b"#!/bin/sh -e\nx"),
            Some(&b"/bin/sh"[..])
        );
        assert_eq!(
            script_interpreter(b"#! \t/bin/busybox sh"),
            Some(&b"/bin/busybox"[..])
        );
        assert_eq!(script_interpreter(b"#!rel\n"), Some(&b"rel"[..]));
        assert_eq!(script_interpreter(b"#!\n/bin/sh"), None);
        assert_eq!(script_interpreter(b"#!"), None);
        assert_eq!(script_interpreter(b"#"), None);
    }
}
