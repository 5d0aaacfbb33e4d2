//! The network namespace helper's system calls, made directly (`syscall` instruction): the
//! helper shares the supervisor's memory and thread-local state, so it must not allocate or
//! set `errno`, which libc's wrappers do on failure. x86-64 only, as the helper is
//! ([`super::by_helper`]).

use std::ffi::c_char;

/// One system call with up to four arguments; the kernel's result (negative errno on
/// failure).
///
/// # Safety
/// As the system call `nr` with these arguments: pointers must be valid for what it reads
/// and writes.
#[cfg(target_arch = "x86_64")]
unsafe fn syscall4(nr: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
    // SAFETY: the caller vouches for the arguments; `syscall` clobbers rcx and r11 only,
    // and touches no memory but what the call itself reads or writes.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn syscall4(_nr: libc::c_long, _a: usize, _b: usize, _c: usize, _d: usize) -> isize {
    -(libc::ENOSYS as isize) // never used: `by_helper` is false off x86-64
}

/// open(2), read-only, close-on-exec.
fn open(path: *const c_char) -> Option<libc::c_int> {
    let flags = (libc::O_RDONLY | libc::O_CLOEXEC) as usize;
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let fd = unsafe {
        syscall4(
            libc::SYS_openat,
            libc::AT_FDCWD as usize,
            path as usize,
            flags,
            0,
        )
    };
    (fd >= 0).then_some(fd as libc::c_int)
}

fn close(fd: libc::c_int) {
    // SAFETY: closes a descriptor this helper opened.
    unsafe { syscall4(libc::SYS_close, fd as usize, 0, 0, 0) };
}

/// Joins the user namespace at `user_ns`, makes a network namespace there and brings its
/// loopback up; a descriptor of it.
pub(super) fn make_net(user_ns: *const c_char) -> Option<libc::c_int> {
    let user = open(user_ns)?;
    // SAFETY: setns with a descriptor this helper owns.
    let joined = unsafe {
        syscall4(
            libc::SYS_setns,
            user as usize,
            libc::CLONE_NEWUSER as usize,
            0,
            0,
        )
    };
    close(user);
    if joined != 0 {
        return None;
    }
    // SAFETY: unshare takes flags only.
    let made = unsafe { syscall4(libc::SYS_unshare, libc::CLONE_NEWNET as usize, 0, 0, 0) };
    if made != 0 {
        return None;
    }
    if !loopback_up() {
        return None;
    }
    open(c"/proc/thread-self/ns/net".as_ptr())
}

/// Sets `lo` up and running in the current network namespace.
fn loopback_up() -> bool {
    let kind = (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as usize;
    // SAFETY: socket(2) with constant arguments.
    let sock = unsafe { syscall4(libc::SYS_socket, libc::AF_INET as usize, kind, 0, 0) };
    if sock < 0 {
        return false;
    }
    // SAFETY: ifreq is plain old data; zeroed is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as c_char;
    }
    let ioctl = |cmd: libc::c_ulong, req: &mut libc::ifreq| {
        // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq we own.
        unsafe {
            syscall4(
                libc::SYS_ioctl,
                sock as usize,
                cmd as usize,
                req as *mut _ as usize,
                0,
            )
        }
    };
    let mut ok = ioctl(libc::SIOCGIFFLAGS, &mut req) == 0;
    if ok {
        // SAFETY: the union's flags member is what SIOCGIFFLAGS just filled in.
        unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
        ok = ioctl(libc::SIOCSIFFLAGS, &mut req) == 0;
    }
    close(sock as libc::c_int);
    ok
}

/// Sends `tag`, with the descriptor `fd` (SCM_RIGHTS, then closed here) when given, on
/// `sock`.
pub(super) fn send(sock: libc::c_int, tag: u8, fd: Option<libc::c_int>) -> bool {
    // Room for one descriptor's control message, aligned for cmsghdr.
    #[repr(C)]
    struct Control {
        _align: [libc::cmsghdr; 0],
        bytes: [u8; 64],
    }
    let mut control = Control {
        _align: [],
        bytes: [0; 64],
    };
    let mut byte = tag;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: msghdr is plain old data; zeroed is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        let int = std::mem::size_of::<libc::c_int>() as u32;
        msg.msg_control = control.bytes.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic on a constant.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(int) } as usize;
        // SAFETY: the control buffer holds CMSG_SPACE(sizeof(int)) bytes (at most 24 of its
        // 64) and is aligned for cmsghdr; CMSG_FIRSTHDR points into it, CMSG_DATA at its data.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(int) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
        }
    }
    let flags = libc::MSG_NOSIGNAL as usize;
    // SAFETY: `msg` and what it points to live on this stack for the call.
    let sent = unsafe {
        syscall4(
            libc::SYS_sendmsg,
            sock as usize,
            &msg as *const _ as usize,
            flags,
            0,
        )
    };
    if let Some(fd) = fd {
        close(fd);
    }
    sent == 1
}
