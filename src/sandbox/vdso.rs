//! The time path for programs that bypass libc's clock (static binaries, Go). The workload's
//! seccomp filter sends the realtime clock calls and every `execve`/`execveat` to the
//! supervisor's clock server. At an exec of such a program the server attaches with ptrace
//! for that one exec (PTRACE_SEIZE + exec event), turns the new program's AT_SYSINFO_EHDR
//! auxiliary-vector entry into AT_IGNORE — its runtime then finds no vDSO and falls back to the
//! clock system calls, which the server answers — and detaches. Nothing else is traced: no
//! fork, signal or exit ever stops a process; dynamic programs keep their vDSO and the preload.

use std::os::unix::fs::FileExt;

use nix::errno::Errno;
use nix::sys::ptrace::{self, Event, Options};
use nix::sys::wait::WaitStatus;
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

/// Tag byte of the datagram that carries the listener descriptor from the workload.
pub const LISTENER_TAG: u8 = b'L';

const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_SYSINFO_EHDR: u64 = 33;

/// Whether this build can serve the static path (the filter and register access are per
/// architecture; other architectures keep the preload path only).
pub const SUPPORTED: bool = cfg!(target_arch = "x86_64");

/// The seccomp program installed in the workload before exec: the realtime clock calls
/// (clock_gettime on REALTIME, REALTIME_COARSE, TAI; gettimeofday; time) and the exec calls
/// go to the supervisor; everything else, monotonic clocks included, is allowed at once.
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
        /* 1 */ jeq(ARCH_X86_64, 0, 10),
        /* 2 */ ld(0), // syscall number
        /* 3 */ jeq(libc::SYS_gettimeofday as u32, 9, 0),
        /* 4 */ jeq(libc::SYS_time as u32, 8, 0),
        /* 5 */ jeq(libc::SYS_execve as u32, 7, 0),
        /* 6 */ jeq(libc::SYS_execveat as u32, 6, 0),
        /* 7 */ jeq(libc::SYS_clock_gettime as u32, 0, 4),
        /* 8 */ ld(16), // args[0], low half: the clock id
        /* 9 */ jeq(libc::CLOCK_REALTIME as u32, 3, 0),
        /* 10 */ jeq(libc::CLOCK_REALTIME_COARSE as u32, 2, 0),
        /* 11 */ jeq(libc::CLOCK_TAI as u32, 1, 0),
        /* 12 */ ret(libc::SECCOMP_RET_ALLOW),
        /* 13 */ ret(libc::SECCOMP_RET_USER_NOTIF),
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
pub(super) struct Remote(pub Pid);

impl Remote {
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
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

    pub fn write(&self, addr: u64, bytes: &[u8]) -> Result<(), Errno> {
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

    /// A NUL-terminated string of at most 4096 bytes.
    pub fn cstr(&self, addr: u64) -> Result<Vec<u8>, Errno> {
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

/// The file an `execve`/`execveat` notification is about to run, opened as the caller sees
/// it: absolute paths resolve inside its root (symlinks included), relative ones from its
/// working directory or `dirfd`.
fn exec_target(pid: Pid, nr: i64, args: &[u64; 6]) -> Option<std::fs::File> {
    let mem = Remote(pid);
    let (dirfd, path_ptr, flags) = if nr == libc::SYS_execveat {
        (args[0] as i32, args[1], args[4] as i32)
    } else {
        (libc::AT_FDCWD, args[0], 0)
    };
    let path = mem.cstr(path_ptr).ok()?;
    let path = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&path);
    if path.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
        return std::fs::File::open(format!("/proc/{pid}/fd/{dirfd}")).ok();
    }
    // The caller's /proc/self is its own entry in the host's /proc (busybox re-execs itself so).
    for own in ["/proc/self/", "/proc/thread-self/"] {
        if let Some(rest) = path.as_encoded_bytes().strip_prefix(own.as_bytes()) {
            let rest = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(rest);
            return std::fs::File::open(std::path::Path::new(&format!("/proc/{pid}")).join(rest))
                .ok();
        }
    }
    if path.as_encoded_bytes().first() == Some(&b'/') {
        let root = std::fs::File::open(format!("/proc/{pid}/root")).ok()?;
        return crate::sys::open_in_root(&root, std::path::Path::new(path)).ok();
    }
    let base = if dirfd == libc::AT_FDCWD {
        format!("/proc/{pid}/cwd")
    } else {
        format!("/proc/{pid}/fd/{dirfd}")
    };
    std::fs::File::open(std::path::Path::new(&base).join(path)).ok()
}

/// Whether the program about to be exec'd reads the clock past libc: the file itself, or the
/// interpreter of a `#!` script.
fn exec_bypasses_libc(pid: Pid, nr: i64, args: &[u64; 6]) -> bool {
    let Some(file) = exec_target(pid, nr, args) else {
        return false;
    };
    let mut head = [0u8; 256];
    let n = file.read_at(&mut head, 0).unwrap_or(0);
    if head[..n].starts_with(b"#!") {
        let line = &head[2..n];
        let line = &line[..line.iter().position(|b| *b == b'\n').unwrap_or(line.len())];
        let interp = line
            .split(|b| *b == b' ' || *b == b'\t')
            .find(|w| !w.is_empty());
        let Some(interp) = interp.filter(|i| i.first() == Some(&b'/')) else {
            return false;
        };
        let root = std::fs::File::open(format!("/proc/{pid}/root")).ok();
        let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(interp);
        return root
            .and_then(|r| crate::sys::open_in_root(&r, std::path::Path::new(target)).ok())
            .is_some_and(|f| bypasses_libc(&f));
    }
    bypasses_libc(&file)
}

/// Handles an exec notification: lets the exec proceed, and when the new program reads the
/// clock past libc, strips its vDSO at the exec stop. `respond` lets the exec continue.
pub(super) fn on_exec(pid: Pid, nr: i64, args: &[u64; 6], respond: impl FnOnce()) {
    if !exec_bypasses_libc(pid, nr, args)
        || ptrace::seize(pid, Options::PTRACE_O_TRACEEXEC).is_err()
    {
        respond();
        return;
    }
    respond();
    // Wait (briefly) for the exec stop; an exec that fails produces none.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    loop {
        match waitpid(pid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::PtraceEvent(p, _, ev)) if ev == Event::PTRACE_EVENT_EXEC as i32 => {
                let _ = strip_vdso(p);
                let _ = ptrace::detach(p, None);
                return;
            }
            Ok(WaitStatus::Stopped(p, sig)) => {
                // A signal arrived meanwhile: pass it on and keep waiting for the exec.
                let _ = ptrace::cont(p, Some(sig));
            }
            Ok(WaitStatus::PtraceEvent(p, _, _)) => {
                let _ = ptrace::cont(p, None);
            }
            Ok(WaitStatus::StillAlive) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_) => return,
            Ok(_) => {
                // The exec failed (or took too long): stop tracing.
                let _ = ptrace::interrupt(pid);
                let _ = waitpid(pid, Some(WaitPidFlag::__WALL));
                let _ = ptrace::detach(pid, None);
                return;
            }
        }
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
