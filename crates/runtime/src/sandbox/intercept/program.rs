//! The workload's program, found and classified before its filters go in.
//!
//! Every `execve` of a sandboxed process goes to the supervisor's notification server, which
//! classifies the program and patches a static or Go one at its exec (`vdso`). The workload's
//! own first exec need not wait for that round trip when its program is a dynamic, non-Go ELF
//! (or a script run by one): the server would let it through untouched. So the workload looks
//! its program up itself, classifies it as the server would, and when nothing is to be done
//! the notification filter lets exactly that one call through: an `execve` whose path, `argv`
//! and `envp` pointers are the ones laid out here, in a mapping made for it at a random
//! address (a later program, with its own memory, passing the same three pointers by chance
//! is as unlikely as guessing the address; and the only effect would be a static program's
//! exec not patched, never a call the security profile refuses let through). A `PATH` search
//! skips the directories where the program is not, without an `execve` (and its round trip)
//! for each.

use std::ffi::{CStr, CString};

use nix::errno::Errno;

use super::elf::Budget;

/// What the workload's own exec may skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::sandbox) enum FirstExec {
    /// Nothing to skip: no notification filter.
    Routed,
    /// The notification, when its program needs nothing at the exec.
    Classified,
    /// The notification, whatever the program (the server changes nothing at any exec).
    Passing,
}

/// The exec the workload is about to make: its arguments, environment and the paths to try.
pub(in crate::sandbox) struct Exec {
    args: Vec<CString>,
    envp: Vec<CString>,
    /// The paths to try in order: the program itself, or its `PATH` candidates (those seen
    /// missing left out).
    candidates: Vec<CString>,
    /// The first candidate, laid out for an unrouted exec when it needs nothing at its exec.
    passing: Option<Passing>,
}

impl Exec {
    /// `argv` run with exactly `env`, looked up in `env`'s `PATH` (else the frozen one) when
    /// it has no slash; `first` says whether its first candidate may skip the server. With
    /// `skip_missing` (the caller has the ids the exec will have), directories where the
    /// program is not are left out of the search.
    pub(in crate::sandbox) fn resolve(
        argv: &[String],
        env: &[String],
        first: FirstExec,
        skip_missing: bool,
    ) -> Result<Exec, Errno> {
        let cstr = |s: &str| CString::new(s).map_err(|_| Errno::EINVAL);
        let args = argv
            .iter()
            .map(|a| cstr(a))
            .collect::<Result<Vec<_>, _>>()?;
        let envp = env.iter().map(|e| cstr(e)).collect::<Result<Vec<_>, _>>()?;
        let program = argv.first().ok_or(Errno::ENOENT)?;
        let candidates = if program.contains('/') {
            vec![args[0].clone()]
        } else {
            let path = env
                .iter()
                .find_map(|e| e.strip_prefix("PATH="))
                .unwrap_or(crate::determinism::FROZEN_PATH);
            search(path, program, skip_missing)?
        };
        let passing = match candidates.first() {
            Some(path)
                if first == FirstExec::Passing
                    || (first == FirstExec::Classified && needs_nothing_at_exec(path)) =>
            {
                Passing::lay_out(path, &args, &envp)
            }
            _ => None,
        };
        Ok(Exec {
            args,
            envp,
            candidates,
            passing,
        })
    }

    /// The pointers of the exec the notification filter lets through: `[path, argv, envp]`.
    pub(in crate::sandbox) fn passing_call(&self) -> Option<[u64; 3]> {
        self.passing.as_ref().map(Passing::call)
    }

    /// `execve` of each candidate in turn, as `execvp` does: on to the next where the program
    /// is missing or not executable there. Returns only on failure.
    pub(in crate::sandbox) fn run(self) -> Errno {
        let mut denied = None;
        for (i, candidate) in self.candidates.iter().enumerate() {
            let errno = match (&self.passing, i) {
                (Some(p), 0) => p.execve(),
                _ => match nix::unistd::execve(candidate, &self.args, &self.envp) {
                    Ok(never) => match never {},
                    Err(e) => e,
                },
            };
            match errno {
                Errno::ENOENT | Errno::ENOTDIR => continue,
                Errno::EACCES => denied = Some(Errno::EACCES),
                e => return e,
            }
        }
        denied.unwrap_or(Errno::ENOENT)
    }
}

/// `program`'s candidates in the directories of `path`, in order; with `skip_missing`,
/// without those where it certainly is not: a `stat` that fails with `ENOENT` or `ENOTDIR`
/// is what `execve` would have said (with the same ids), and a `PATH` search goes on from
/// both.
fn search(path: &str, program: &str, skip_missing: bool) -> Result<Vec<CString>, Errno> {
    let mut found = Vec::new();
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let candidate = CString::new(format!("{dir}/{program}")).map_err(|_| Errno::EINVAL)?;
        match nix::sys::stat::stat(candidate.as_c_str()) {
            Err(Errno::ENOENT | Errno::ENOTDIR) if skip_missing => {}
            _ => found.push(candidate),
        }
    }
    Ok(found)
}

/// The program at `path` (links followed, as `execve` follows them), opened for reading if
/// it is a regular file: looked at through an `O_PATH` descriptor first, so nothing else (a
/// FIFO, a device) is ever opened.
fn open_program(path: &CStr) -> Option<std::fs::File> {
    // SAFETY: openat reads the NUL-terminated path; the descriptor it returns (atomically
    // close-on-exec; musl's open would add an fcntl) is owned by the File below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC,
        )
    };
    let fd = Errno::result(fd).ok()? as std::os::fd::RawFd;
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let probe = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    crate::sys::reopen_regular(&probe, false).ok()
}

/// Whether the server would let an exec of `path` through untouched: a dynamic ELF program
/// not built by Go, or a `#!` script whose interpreter is one. Anything unknown (unreadable,
/// another format, a script of a script) is left to the server.
fn needs_nothing_at_exec(path: &CStr) -> bool {
    let interpreter = |name: &[u8]| open_program(&CString::new(name).ok()?);
    open_program(path)
        .and_then(|file| super::vdso::program_of(file, interpreter, &mut Budget::per_exec()))
        .is_some_and(|(_, kind)| !kind.bypasses_libc())
}

/// The exec's path and pointer arrays in a private mapping at a random address. The mapping
/// is never unmapped by its maker: a process that fails to exec exits, and one that shares
/// its parent's memory leaves it to the parent ([`unmap_left`]).
struct Passing {
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
}

impl Passing {
    /// Lays out `path` and the pointers to `args` and `envp` (which must outlive the exec);
    /// `None` when no memory could be mapped (the exec is then routed as any other).
    fn lay_out(path: &CStr, args: &[CString], envp: &[CString]) -> Option<Passing> {
        let ptr = std::mem::size_of::<*const libc::c_char>();
        let path_len = path.to_bytes_with_nul().len().next_multiple_of(ptr);
        let len = path_len + (args.len() + 1 + envp.len() + 1) * ptr;
        let base = map_at_random(len)?;
        LEFT.set((base as usize, len));
        let at = base as *mut u8;
        // SAFETY: the mapping is `len` bytes, writable and ours: the path fills its first
        // `path_len` bytes (the rest of them zero), then the two NULL-terminated arrays of
        // `args.len() + 1` and `envp.len() + 1` pointers, aligned (a page start plus a
        // multiple of the pointer size).
        unsafe {
            std::ptr::copy_nonoverlapping(path.as_ptr() as *const u8, at, path.to_bytes().len());
            let argv = at.add(path_len) as *mut *const libc::c_char;
            for (i, a) in args.iter().enumerate() {
                *argv.add(i) = a.as_ptr();
            }
            *argv.add(args.len()) = std::ptr::null();
            let env = argv.add(args.len() + 1);
            for (i, e) in envp.iter().enumerate() {
                *env.add(i) = e.as_ptr();
            }
            *env.add(envp.len()) = std::ptr::null();
            Some(Passing {
                path: at as *const libc::c_char,
                argv,
                envp: env,
            })
        }
    }

    fn call(&self) -> [u64; 3] {
        [self.path as u64, self.argv as u64, self.envp as u64]
    }

    /// The exec itself; returns its error.
    fn execve(&self) -> Errno {
        // SAFETY: the path and both arrays were laid out by `lay_out` and are NUL/NULL
        // terminated; the strings they point to are the caller's, alive until the exec.
        let r = unsafe { libc::execve(self.path, self.argv, self.envp) };
        debug_assert_eq!(r, -1);
        Errno::last()
    }
}

thread_local! {
    /// The mapping (address, length) of the last [`Passing`] laid out by this thread: a
    /// child sharing its memory (`spawn::Start::Borrow`) also runs on the thread's
    /// thread-local storage (no CLONE_SETTLS), so it records here for the thread that
    /// started it, which unmaps the mapping once the child has exec'd or exited
    /// ([`unmap_left`]), so nothing of it stays to be found. Per thread, so that two threads
    /// starting children (tests) never unmap each other's.
    static LEFT: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// In the parent, after a child that shared its memory has exec'd or exited: unmaps what the
/// child's [`Passing`] left (nothing when it laid none out).
pub(in crate::sandbox) fn unmap_left() {
    let (base, len) = LEFT.take();
    if base != 0 {
        // SAFETY: `base` and `len` are a mapping `map_at_random` made in this memory, which
        // the child (now exec'd or gone) was the only user of; it is unmapped once (taken
        // out above).
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
    }
}

/// A private, readable and writable anonymous mapping of `len` bytes, asked for at a random
/// page-aligned address between 4 GiB and 64 TiB (taken as a hint: where it is not free, the
/// kernel places it elsewhere, which is only likelier to be found again).
fn map_at_random(len: usize) -> Option<*mut libc::c_void> {
    let mut r = [0u8; 8];
    // SAFETY: getrandom writes at most r.len() bytes into r.
    let got = unsafe { libc::getrandom(r.as_mut_ptr().cast(), r.len(), libc::GRND_NONBLOCK) };
    if got != r.len() as isize {
        return None;
    }
    const LOW: u64 = 1 << 32;
    const HIGH: u64 = 1 << 46;
    let hint = (LOW + u64::from_ne_bytes(r) % (HIGH - LOW)) & !0xfff;
    // SAFETY: a new anonymous mapping without MAP_FIXED replaces nothing; the result is
    // checked.
    let base = unsafe {
        libc::mmap(
            hint as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (base != libc::MAP_FAILED).then_some(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    fn script(dir: &std::path::Path, name: &str, text: &str) -> CString {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        c(path.to_str().unwrap())
    }

    #[test]
    fn dynamic_programs_and_their_scripts_need_nothing_and_the_rest_go_to_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Debian's coreutils and sh are dynamic; busybox-static is static.
        assert!(needs_nothing_at_exec(&c("/bin/true")));
        assert!(needs_nothing_at_exec(&script(d, "sh", "#!/bin/sh\ntrue\n")));
        assert!(needs_nothing_at_exec(&script(d, "tab", "#!\t/bin/sh -e\n")));
        if std::path::Path::new("/bin/busybox").exists() {
            assert!(!needs_nothing_at_exec(&c("/bin/busybox")));
            assert!(!needs_nothing_at_exec(&script(
                d,
                "bb",
                "#!/bin/busybox sh\n"
            )));
        }
        // Unknown: not ELF, a script of a script, missing, a directory, a FIFO.
        assert!(!needs_nothing_at_exec(&script(d, "text", "echo hi\n")));
        let inner = script(d, "inner", "#!/bin/sh\n");
        let outer = format!("#!{}\n", inner.to_str().unwrap());
        assert!(!needs_nothing_at_exec(&script(d, "outer", &outer)));
        assert!(!needs_nothing_at_exec(&c("/nonexistent/x")));
        assert!(!needs_nothing_at_exec(&script(
            d,
            "noint",
            "#!/nonexistent\n"
        )));
        assert!(!needs_nothing_at_exec(&script(d, "empty", "#!\n")));
        assert!(!needs_nothing_at_exec(&c(d.to_str().unwrap())));
        let fifo = d.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o755)).unwrap();
        assert!(!needs_nothing_at_exec(&c(fifo.to_str().unwrap())));
    }

    #[test]
    fn the_search_leaves_out_only_directories_without_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["a", "b", "c"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        std::fs::write(d.join("b/prog"), "not executable").unwrap();
        std::fs::write(d.join("c/prog"), "").unwrap();
        std::fs::write(d.join("file"), "").unwrap();
        let p = |s: &str| d.join(s).display().to_string();
        // Missing (a), a file where a directory should be (ENOTDIR), empty entries: left
        // out; a non-executable candidate stays (execve says EACCES and the search goes on).
        let path = format!("{}::{}:{}:{}", p("a"), p("file"), p("b"), p("c"));
        let found = search(&path, "prog", true).unwrap();
        assert_eq!(found, vec![c(&p("b/prog")), c(&p("c/prog"))]);
        assert!(search(&p("a"), "prog", true).unwrap().is_empty());
        // Without the final ids, every directory is tried by execve itself.
        assert_eq!(search(&path, "prog", false).unwrap().len(), 4);
        assert_eq!(search(&p("a"), "nul\0", true).unwrap_err(), Errno::EINVAL);
    }

    #[test]
    fn the_passing_call_points_at_the_program_and_its_arrays() {
        let argv = ["/bin/true".to_string(), "x".into()];
        let env = ["A=1".to_string(), "PATH=/bin".into()];
        let exec = Exec::resolve(&argv, &env, FirstExec::Classified, true).unwrap();
        let [path, args, envp] = exec.passing_call().expect("/bin/true is dynamic");
        let strings = |at: u64| {
            let mut out = Vec::new();
            // SAFETY: `at` is one of the NULL-terminated arrays laid out by `lay_out`, whose
            // strings `exec` keeps alive.
            unsafe {
                let mut p = at as *const *const libc::c_char;
                while !(*p).is_null() {
                    out.push(CStr::from_ptr(*p).to_str().unwrap().to_string());
                    p = p.add(1);
                }
            }
            out
        };
        // SAFETY: `path` points at the NUL-terminated path in the mapping `exec` holds.
        let path = unsafe { CStr::from_ptr(path as *const libc::c_char) };
        assert_eq!(path.to_str().unwrap(), "/bin/true");
        assert_eq!(strings(args), argv);
        assert_eq!(strings(envp), env);
        drop(exec);
        unmap_left(); // as the parent of a child that shared its memory
                      // Nothing changes at any exec: any program passes, unexamined.
        if std::path::Path::new("/bin/busybox").exists() {
            let bb = ["/bin/busybox".to_string()];
            let exec = Exec::resolve(&bb, &env, FirstExec::Passing, true).unwrap();
            assert!(exec.passing_call().is_some());
            unmap_left();
        }
        // No notification filter, a static program, a search that finds nothing: routed.
        assert!(Exec::resolve(&argv, &env, FirstExec::Routed, true)
            .unwrap()
            .passing_call()
            .is_none());
        if std::path::Path::new("/bin/busybox").exists() {
            let bb = ["busybox".to_string()];
            assert!(Exec::resolve(&bb, &env, FirstExec::Classified, true)
                .unwrap()
                .passing_call()
                .is_none());
        }
        let none = ["no-such-program".to_string()];
        let exec = Exec::resolve(&none, &env, FirstExec::Classified, true).unwrap();
        assert!(exec.passing_call().is_none());
        assert_eq!(exec.run(), Errno::ENOENT);
        assert_eq!(
            Exec::resolve(&["a\0b".to_string()], &env, FirstExec::Classified, true).err(),
            Some(Errno::EINVAL)
        );
        assert_eq!(
            Exec::resolve(&[], &env, FirstExec::Classified, true).err(),
            Some(Errno::ENOENT)
        );
    }
}
