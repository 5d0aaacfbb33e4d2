//! The time path for programs that bypass libc's clock (static binaries, Go): the supervisor
//! traces the sandbox's processes for exec events only, strips the vDSO from each such
//! program's auxiliary vector at exec (so its runtime falls back to the clock system calls),
//! and answers those system calls through a seccomp user-notification listener with the same
//! fake clock the preload library reads. Dynamic C programs keep their vDSO and the preload.
//!
//! Tracing uses PTRACE_SEIZE with fork/vfork/clone/exec events: children are attached
//! automatically; no system call is traced; fork and exec events cost one stop each.

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;

use nix::errno::Errno;
use nix::sys::ptrace::{self, Event, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use crate::determinism::clock::ClockPlan;

/// Tag byte of the datagram that carries the listener descriptor from the workload.
pub const LISTENER_TAG: u8 = b'L';
/// Byte the supervisor sends init once it traces it, so init may fork the workload.
pub const GO: u8 = b'G';

const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_SYSINFO_EHDR: u64 = 33;

/// Whether this build can serve the static path (the filter and register access are per
/// architecture; other architectures keep the preload path only).
pub const SUPPORTED: bool = cfg!(target_arch = "x86_64");

/// The seccomp program installed in the workload before exec: the realtime clock calls
/// (clock_gettime on REALTIME, REALTIME_COARSE, TAI; gettimeofday; time) go to the
/// supervisor; everything else, monotonic clocks included, is allowed at once.
pub fn clock_filter() -> Vec<libc::sock_filter> {
    const ARCH_X86_64: u32 = 0xc000_003e;
    let ld = |k: u32| libc::sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let ret = |k: u32| libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k,
    };
    vec![
        /* 0 */ ld(4), // arch
        /* 1 */ jeq(ARCH_X86_64, 0, 8),
        /* 2 */ ld(0), // syscall number
        /* 3 */ jeq(libc::SYS_gettimeofday as u32, 7, 0),
        /* 4 */ jeq(libc::SYS_time as u32, 6, 0),
        /* 5 */ jeq(libc::SYS_clock_gettime as u32, 0, 4),
        /* 6 */ ld(16), // args[0], low half: the clock id
        /* 7 */ jeq(libc::CLOCK_REALTIME as u32, 3, 0),
        /* 8 */ jeq(libc::CLOCK_REALTIME_COARSE as u32, 2, 0),
        /* 9 */ jeq(libc::CLOCK_TAI as u32, 1, 0),
        /* 10 */ ret(libc::SECCOMP_RET_ALLOW),
        /* 11 */ ret(libc::SECCOMP_RET_USER_NOTIF),
    ]
}

/// Whether a program reads the clock without libc's (interposable) functions: statically
/// linked (no PT_INTERP), or a Go program (its runtime calls the vDSO itself).
pub fn bypasses_libc(exe: &std::fs::File) -> bool {
    let mut ehdr = [0u8; 64];
    if exe.read_exact_at(&mut ehdr, 0).is_err()
        || &ehdr[..4] != b"\x7fELF"
        || ehdr[4] != 2
        || ehdr[5] != 1
    {
        return false; // not a little-endian ELF64: nothing to patch
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(&ehdr, 32), u16_at(&ehdr, 54), u16_at(&ehdr, 56));
    let mut phdrs = vec![0u8; phentsize * phnum];
    if phentsize < 56 || exe.read_exact_at(&mut phdrs, phoff as u64).is_err() {
        return false;
    }
    const PT_INTERP: u32 = 3;
    let dynamic = phdrs.chunks(phentsize).any(|ph| u32_at(ph, 0) == PT_INTERP);
    if !dynamic {
        return true;
    }
    // A dynamically linked Go program (cgo) still reads the clock through the vDSO directly.
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(&ehdr, 40),
        u16_at(&ehdr, 58),
        u16_at(&ehdr, 60),
        u16_at(&ehdr, 62),
    );
    if shentsize < 64 || shnum == 0 || shstrndx >= shnum || shnum > 4096 {
        return false;
    }
    let mut shdrs = vec![0u8; shentsize * shnum];
    if exe.read_exact_at(&mut shdrs, shoff as u64).is_err() {
        return false;
    }
    let strtab = &shdrs[shstrndx * shentsize..];
    let (str_off, str_size) = (u64_at(strtab, 24), u64_at(strtab, 32).min(1 << 20));
    let mut names = vec![0u8; str_size];
    if exe.read_exact_at(&mut names, str_off as u64).is_err() {
        return false;
    }
    shdrs.chunks(shentsize).any(|sh| {
        let name = &names[u32_at(sh, 0) as usize..];
        let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
        name == b".note.go.buildid" || name == b".go.buildinfo"
    })
}

/// Reads and writes words of another process's memory.
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

    fn write(&self, addr: u64, bytes: &[u8]) -> Result<(), Errno> {
        use nix::sys::uio::{process_vm_writev, RemoteIoVec};
        let remote = [RemoteIoVec {
            base: addr as usize,
            len: bytes.len(),
        }];
        let n = process_vm_writev(self.0, &[std::io::IoSlice::new(bytes)], &remote)?;
        if n == bytes.len() {
            Ok(())
        } else {
            Err(Errno::EFAULT)
        }
    }

    fn word(&self, addr: u64) -> Result<u64, Errno> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }
}

/// At an exec stop the stack pointer addresses argc, then argv, NULL, envp, NULL, auxv.
/// Turns the AT_SYSINFO_EHDR entry into AT_IGNORE, so the program finds no vDSO.
#[cfg(target_arch = "x86_64")]
fn strip_vdso(pid: Pid) -> Result<bool, Errno> {
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
            AT_NULL => return Ok(false),
            AT_SYSINFO_EHDR => {
                mem.write(at, &AT_IGNORE.to_ne_bytes())?;
                return Ok(true);
            }
            _ => at += 16,
        }
    }
    Ok(false)
}

#[cfg(not(target_arch = "x86_64"))]
fn strip_vdso(_pid: Pid) -> Result<bool, Errno> {
    Ok(false)
}

/// Supervisor-side state of the time path.
pub struct Tracer {
    init: Pid,
    init_traced: bool,
    seen: HashSet<Pid>,
    clock: ClockPlan,
}

impl Tracer {
    /// Starts tracing init (which then waits for [`GO`] before forking the workload).
    pub fn attach(init: Pid, clock: ClockPlan) -> Result<Tracer, Errno> {
        let opts = Options::PTRACE_O_TRACEEXEC
            | Options::PTRACE_O_TRACEFORK
            | Options::PTRACE_O_TRACEVFORK
            | Options::PTRACE_O_TRACECLONE
            | Options::PTRACE_O_EXITKILL;
        ptrace::seize(init, opts)?;
        Ok(Tracer {
            init,
            init_traced: true,
            seen: HashSet::from([init]),
            clock,
        })
    }

    /// Starts answering the workload's clock calls on `listener` (a thread of its own).
    pub fn serve(&self, listener: OwnedFd) {
        super::clock_server::spawn(listener, self.clock, self.init);
    }

    /// Handles one wait status of a traced process; returns false if it was not a tracee.
    pub fn on_wait(&mut self, status: WaitStatus) -> bool {
        match status {
            WaitStatus::PtraceEvent(pid, _, ev) if ev == Event::PTRACE_EVENT_EXEC as i32 => {
                self.seen.insert(pid);
                if let Ok(exe) = std::fs::File::open(format!("/proc/{pid}/exe")) {
                    if bypasses_libc(&exe) {
                        let _ = strip_vdso(pid);
                    }
                }
                let _ = ptrace::cont(pid, None);
            }
            WaitStatus::PtraceEvent(pid, sig, ev) if ev == Event::PTRACE_EVENT_STOP as i32 => {
                self.seen.insert(pid);
                if matches!(
                    sig,
                    Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU
                ) {
                    // A group-stop: stay stopped, but let a later SIGCONT through.
                    // SAFETY: PTRACE_LISTEN on a seized tracee in group-stop; no pointers.
                    unsafe { libc::ptrace(libc::PTRACE_LISTEN, pid.as_raw(), 0, 0) };
                } else {
                    // A new child's first stop, or a re-trap after SIGCONT.
                    let _ = ptrace::cont(pid, None);
                }
            }
            WaitStatus::PtraceEvent(pid, _, _) => {
                if pid == self.init && self.init_traced {
                    // Init forked the workload, which is now traced; init itself need not be.
                    self.init_traced = false;
                    let _ = ptrace::detach(pid, None);
                } else {
                    let _ = ptrace::cont(pid, None);
                }
            }
            WaitStatus::Stopped(pid, sig) => {
                // A signal on its way to a tracee: deliver it unchanged.
                self.seen.insert(pid);
                let _ = ptrace::cont(
                    pid,
                    if sig == Signal::SIGTRAP {
                        None
                    } else {
                        Some(sig)
                    },
                );
            }
            WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _) => {
                return self.seen.remove(&pid);
            }
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_static_dynamic_and_non_elf_programs() {
        let dynamic = std::fs::File::open("/bin/sh").unwrap();
        assert!(!bypasses_libc(&dynamic));
        // The test binary itself is linked statically (crt-static), as reprorun is.
        let me = std::fs::File::open("/proc/self/exe").unwrap();
        assert!(bypasses_libc(&me));
        let script = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(script.path(), "#!/bin/sh\n").unwrap();
        assert!(!bypasses_libc(&std::fs::File::open(script.path()).unwrap()));
    }

    #[test]
    fn filter_jumps_land_inside_the_program() {
        let prog = clock_filter();
        for (i, ins) in prog.iter().enumerate() {
            if ins.code == (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16 {
                assert!(i + 1 + (ins.jt as usize) < prog.len());
                assert!(i + 1 + (ins.jf as usize) < prog.len());
            }
        }
        assert_eq!(prog.last().unwrap().k, libc::SECCOMP_RET_USER_NOTIF);
    }
}
