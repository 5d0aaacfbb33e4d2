"""Escape attempts, run inside `reprorun exec`. `escape.py NAME [ARG]` makes one attempt and
prints `BLOCKED: <how>` when the sandbox stopped it or `ESCAPED: <what happened>` when it
did not; `escape.py all` makes every attempt that needs no argument, one line each,
prefixed with its name. Every attempt is real: the system call is made with the arguments
an attacker would use, and success is reported as such."""

import ctypes
import errno
import os
import socket
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

# x86-64 system call numbers.
NR = {
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272,
    "setns": 308, "clone": 56, "clone3": 435, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "reboot": 169,
    "swapon": 167, "swapoff": 168, "bpf": 321, "perf_event_open": 298,
    "io_uring_setup": 425, "userfaultfd": 323, "keyctl": 250, "add_key": 248,
    "request_key": 249, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "process_vm_readv": 310, "iopl": 172, "ioperm": 173, "acct": 163,
    "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "personality": 135,
    "ptrace": 101, "open_tree": 428, "fsopen": 430, "sethostname": 170, "mknod": 133,
    "capset": 126, "syslog": 103, "getpid": 39,
}


def sys_call(name, *args):
    """Makes the call; returns (result, errno name or None)."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    return r, (errno.errorcode.get(e, str(e)) if r == -1 else None)


def refused(name, *args):
    r, err = sys_call(name, *args)
    if r == -1:
        return True, f"{name}: {err}"
    return False, f"{name} returned {r}"


def cstr(s):
    return ctypes.c_char_p(s.encode())


def addr(buf):
    return ctypes.cast(buf, ctypes.c_void_p).value or 0


def open_fails(path, flags, what):
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        return True, f"{what}: {errno.errorcode.get(e.errno, e.errno)}"
    os.close(fd)
    return False, f"{what}: opened {path}"


def read_nothing(path):
    """A masked file reads empty (or cannot be opened); a masked directory lists nothing."""
    try:
        if os.path.isdir(path):
            entries = os.listdir(path)
            return (not entries), f"{path}: {len(entries)} entries"
        with open(path, "rb") as f:
            data = f.read(4096)
        return (not data), f"{path}: {len(data)} bytes"
    except OSError as e:
        return True, f"{path}: {errno.errorcode.get(e.errno, e.errno)}"


def write_fails(path, data=b"1\n"):
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        return True, f"{path}: {errno.errorcode.get(e.errno, e.errno)}"
    return False, f"{path}: written"


MS_BIND, MS_REMOUNT, MS_RDONLY = 0x1000, 0x20, 0x1
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000


def mount_tmpfs():
    return refused("mount", addr(cstr("none")), addr(cstr("/tmp")), addr(cstr("tmpfs")), 0, 0)


def mount_proc():
    return refused("mount", addr(cstr("proc")), addr(cstr("/tmp")), addr(cstr("proc")), 0, 0)


def remount_root_rw():
    return refused("mount", 0, addr(cstr("/")), 0, MS_REMOUNT | MS_BIND, 0)


def bind_host_root():
    return refused("mount", addr(cstr("/")), addr(cstr("/tmp")), 0, MS_BIND, 0)


def umount_work():
    return refused("umount2", addr(cstr("/work")), 2)


def pivot_root():
    return refused("pivot_root", addr(cstr("/tmp")), addr(cstr("/tmp")))


def open_tree():
    return refused("open_tree", -100, addr(cstr("/")), 1)


def fsopen():
    return refused("fsopen", addr(cstr("tmpfs")), 0)


def write_host_root():
    return open_fails("/etc/reprorun-escape", os.O_CREAT | os.O_WRONLY, "create in /etc")


def write_usr_bin():
    return open_fails("/usr/bin/reprorun-escape", os.O_CREAT | os.O_WRONLY, "create in /usr/bin")


def overwrite_runtime_exe():
    # pid 1 is reprorun's own init: /proc/1/exe is the reprorun binary on the host.
    return open_fails("/proc/1/exe", os.O_WRONLY, "open /proc/1/exe for writing")


def read_init_root():
    try:
        os.listdir("/proc/1/root/")
    except OSError as e:
        return True, f"/proc/1/root: {errno.errorcode.get(e.errno, e.errno)}"
    return False, "/proc/1/root listed"


def overwrite_own_exe():
    return open_fails("/proc/self/exe", os.O_WRONLY, "open /proc/self/exe for writing")


def unshare_user():
    return refused("unshare", CLONE_NEWUSER)


def unshare_mount():
    return refused("unshare", CLONE_NEWNS)


def clone_newuser():
    # A raw clone with a namespace flag; the child (if any) exits at once.
    r, err = sys_call("clone", CLONE_NEWUSER | 17, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
        return False, "clone(CLONE_NEWUSER) made a child"
    return True, f"clone(CLONE_NEWUSER): {err}"


def clone3():
    args = (ctypes.c_uint64 * 11)()
    args[0] = CLONE_NEWPID
    args[4] = 17  # exit_signal
    r, err = sys_call("clone3", addr(args), 88)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
        return False, "clone3 made a child"
    return True, f"clone3: {err}"


def setns_init():
    try:
        fd = os.open("/proc/1/ns/mnt", os.O_RDONLY)
    except OSError as e:
        return True, f"open /proc/1/ns/mnt: {errno.errorcode.get(e.errno, e.errno)}"
    r = refused("setns", fd, 0)
    os.close(fd)
    return r


def ptrace_init():
    return refused("ptrace", 16, 1, 0, 0)  # PTRACE_ATTACH to pid 1


def ptrace_host(pid):
    return refused("ptrace", 16, int(pid), 0, 0)


def process_vm_readv():
    buf = ctypes.create_string_buffer(8)
    local = struct.pack("QQ", addr(buf), 8)
    lb = ctypes.create_string_buffer(local)
    remote = struct.pack("QQ", addr(buf), 8)
    rb = ctypes.create_string_buffer(remote)
    return refused("process_vm_readv", os.getpid(), addr(lb), 1, addr(rb), 1, 0)


def proc_kcore():
    return read_nothing("/proc/kcore")


def proc_keys():
    return read_nothing("/proc/keys")


def proc_timer_list():
    return read_nothing("/proc/timer_list")


def proc_sched_debug():
    return read_nothing("/proc/sched_debug")


def sys_firmware():
    return read_nothing("/sys/firmware")


def proc_sys_write():
    return write_fails("/proc/sys/kernel/hostname", b"escaped\n")


def sysrq_trigger():
    return write_fails("/proc/sysrq-trigger", b"h")


def core_pattern():
    return write_fails("/proc/sys/kernel/core_pattern", b"|/tmp/x\n")


def cgroup_escape():
    for root, dirs, files in os.walk("/sys/fs/cgroup"):
        if "cgroup.procs" in files:
            return write_fails(os.path.join(root, "cgroup.procs"), f"{os.getpid()}\n".encode())
    return True, "no cgroup.procs visible"


def mknod_block():
    S_IFBLK = 0o060000
    return refused("mknod", addr(cstr("/tmp/sda")), S_IFBLK | 0o600, (8 << 8) | 0)


def read_disk():
    for dev in ["/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/xvda", "/dev/mem", "/dev/kmsg"]:
        if os.path.exists(dev):
            return False, f"{dev} exists"
    return True, "no disk, memory or kernel-log device in /dev"


def load_module():
    ok1, d1 = refused("init_module", 0, 0, addr(cstr("")))
    ok2, d2 = refused("finit_module", 0, addr(cstr("")), 0)
    return ok1 and ok2, f"{d1}; {d2}"


def delete_module():
    return refused("delete_module", addr(cstr("ext4")), 0)


def kexec_load():
    return refused("kexec_load", 0, 0, 0, 0)


def reboot():
    return refused("reboot", 0xfee1dead, 0x28121969, 0x4321fedc, 0)


def swapon():
    return refused("swapon", addr(cstr("/tmp/swap")), 0)


def bpf():
    attr = ctypes.create_string_buffer(128)
    return refused("bpf", 0, addr(attr), 128)  # BPF_MAP_CREATE


def perf_event_open():
    attr = ctypes.create_string_buffer(128)
    struct.pack_into("II", attr, 0, 1, 128)  # PERF_TYPE_SOFTWARE, size
    return refused("perf_event_open", addr(attr), 0, -1, -1, 0)


def io_uring_setup():
    params = ctypes.create_string_buffer(120)
    return refused("io_uring_setup", 8, addr(params))


def userfaultfd():
    return refused("userfaultfd", 0)


def keyctl():
    return refused("keyctl", 0, -1, 0, 0)  # KEYCTL_GET_KEYRING_ID


def add_key():
    return refused("add_key", addr(cstr("user")), addr(cstr("x")), addr(cstr("v")), 1, -2)


def open_by_handle_at():
    # The "shocker" escape: guess a handle to the host's root directory.
    handle = ctypes.create_string_buffer(8 + 8)
    struct.pack_into("IiQ", handle, 0, 8, 1, 2)
    root = os.open("/", os.O_RDONLY)
    try:
        return refused("open_by_handle_at", root, addr(handle), 0)
    finally:
        os.close(root)


def name_to_handle_at():
    handle = ctypes.create_string_buffer(128)
    struct.pack_into("I", handle, 0, 120)
    mount_id = ctypes.c_int()
    return refused("name_to_handle_at", -100, addr(cstr("/")), addr(handle),
                   ctypes.addressof(mount_id), 0)


def tiocsti():
    import fcntl
    import termios
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSTI, b"x")
    except OSError as e:
        return e.errno == errno.EPERM, f"TIOCSTI: {errno.errorcode.get(e.errno, e.errno)}"
    finally:
        os.close(master)
        os.close(slave)
    return False, "TIOCSTI pushed a byte into the terminal"


def raw_socket():
    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    except OSError as e:
        return True, f"raw socket: {errno.errorcode.get(e.errno, e.errno)}"
    return False, "raw socket opened"


def packet_socket():
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    except OSError as e:
        return True, f"packet socket: {errno.errorcode.get(e.errno, e.errno)}"
    return False, "packet socket opened"


AF_VSOCK = 40
# The families the default profile allows (AF_NETLINK is checked by protocol).
ALLOWED_FAMILIES = {socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_PACKET,
                    socket.AF_NETLINK}
SOCKET_TYPES = (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_RAW)


def opened(family, kind, proto=0):
    """Creates (and closes) a socket; never connects, binds or sends. (opened?, errno name)"""
    try:
        socket.socket(family, kind, proto).close()
    except OSError as e:
        return False, errno.errorcode.get(e.errno, str(e.errno))
    return True, None


def vsock_socket():
    # vsock is not per network namespace: a socket would share the machine's port space
    # (the hypervisor on CID 2, the machine's own agent). Only created, never used.
    made, err = opened(AF_VSOCK, socket.SOCK_STREAM)
    if made:
        return False, "socket(AF_VSOCK, SOCK_STREAM) succeeded"
    return err == "EAFNOSUPPORT", f"socket(AF_VSOCK): {err}"


def socket_families():
    # Every family but the allowed ones (vsock, AF_ALG, Bluetooth, AF_XDP, AF_KEY, TIPC, RDS,
    # CAN...), with each socket type: none may be created, and each fails as on a kernel
    # without it.
    made, errs = [], set()
    for family in range(0, 46):
        if family in ALLOWED_FAMILIES:
            continue
        for kind in SOCKET_TYPES:
            ok, err = opened(family, kind)
            if ok:
                made.append((family, kind))
            errs.add(err)
    if made:
        return False, f"created sockets of (family, type) {made}"
    return errs == {"EAFNOSUPPORT"}, f"families 0-45 but unix, inet, inet6, packet, netlink: {sorted(errs)}"


def netlink_protocols():
    # Netlink protocols but NETLINK_ROUTE: audit, kobject uevents (the host's device events in
    # a pins-only run), sock_diag, generic, netfilter, xfrm...; with the uevent one, also a
    # bind to its multicast group (what a listener does).
    made = []
    for proto in range(1, 32):
        try:
            s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto)
        except OSError as e:
            if e.errno != errno.EPROTONOSUPPORT:
                return False, f"netlink protocol {proto}: {errno.errorcode.get(e.errno)}"
            continue
        with s:
            made.append(proto)
            if proto == 15:  # NETLINK_KOBJECT_UEVENT
                try:
                    s.bind((0, 1))
                    made.append("uevent bound")
                except OSError:
                    pass
    if made:
        return False, f"created netlink sockets of protocols {made}"
    return True, "netlink protocols 1-31: EPROTONOSUPPORT"


def host_loopback(port):
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=2).close()
    except OSError as e:
        return True, f"connect 127.0.0.1:{port}: {e}"
    return False, f"connected to the host's 127.0.0.1:{port}"


def leaked_fds():
    fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    # 0, 1, 2 and the descriptor listdir itself used.
    extra = [fd for fd in fds if fd > 3]
    return (not extra), f"descriptors {fds}"


def chroot():
    return refused("chroot", addr(cstr("/tmp")))


def settimeofday():
    tv = struct.pack("qq", 0, 0)
    return refused("settimeofday", addr(ctypes.create_string_buffer(tv)), 0)


def clock_settime():
    ts = struct.pack("qq", 0, 0)
    return refused("clock_settime", 0, addr(ctypes.create_string_buffer(ts)))


def adjtimex():
    buf = ctypes.create_string_buffer(208)
    struct.pack_into("I", buf, 0, 0x0001)  # ADJ_OFFSET: a change, not a read
    return refused("adjtimex", addr(buf))


def iopl():
    ok1, d1 = refused("iopl", 3)
    ok2, d2 = refused("ioperm", 0x80, 1, 1)
    return ok1 and ok2, f"{d1}; {d2}"


def acct():
    return refused("acct", addr(cstr("/tmp/acct")))


def personality():
    return refused("personality", 0x0400000)  # READ_IMPLIES_EXEC


def x32_syscall():
    # x32 ABI number of getpid: would bypass a filter keyed by x86-64 numbers.
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(0x40000000 | NR["getpid"]))
    if r == -1:
        return True, f"x32 getpid: {errno.errorcode.get(ctypes.get_errno())}"
    return False, f"x32 getpid returned {r}"


def sethostname():
    return refused("sethostname", addr(cstr("escaped")), 7)


def capset_raise():
    # Ask for every capability back (v3 header, all bits).
    header = struct.pack("Ii", 0x20080522, 0)
    data = struct.pack("IIIIII", 0xffffffff, 0xffffffff, 0, 0xffffffff, 0xffffffff, 0)
    return refused("capset", addr(ctypes.create_string_buffer(header)),
                   addr(ctypes.create_string_buffer(data)))


def syslog():
    buf = ctypes.create_string_buffer(4096)
    return refused("syslog", 3, addr(buf), 4096)  # SYSLOG_ACTION_READ_ALL


ATTEMPTS = {f.__name__: f for f in [
    leaked_fds, mount_tmpfs, mount_proc, remount_root_rw, bind_host_root, umount_work, pivot_root,
    open_tree, fsopen, write_host_root, write_usr_bin, overwrite_runtime_exe, read_init_root,
    overwrite_own_exe, unshare_user, unshare_mount, clone_newuser, clone3, setns_init,
    ptrace_init, process_vm_readv, proc_kcore, proc_keys, proc_timer_list, proc_sched_debug,
    sys_firmware, proc_sys_write, sysrq_trigger, core_pattern, cgroup_escape, mknod_block,
    read_disk, load_module, delete_module, kexec_load, reboot, swapon, bpf, perf_event_open,
    io_uring_setup, userfaultfd, keyctl, add_key, open_by_handle_at, name_to_handle_at,
    tiocsti, raw_socket, packet_socket, vsock_socket, socket_families, netlink_protocols, chroot, settimeofday, clock_settime,
    adjtimex, iopl, acct, personality, x32_syscall, sethostname, capset_raise, syslog,
]}
WITH_ARG = {"ptrace_host": ptrace_host, "host_loopback": host_loopback}


def report(name, fn, *args):
    try:
        blocked, detail = fn(*args)
    except Exception as e:  # an attempt that blew up did not escape, but say how
        blocked, detail = True, f"raised {type(e).__name__}: {e}"
    print(f"{name} {'BLOCKED' if blocked else 'ESCAPED'}: {detail}", flush=True)


def main():
    name = sys.argv[1]
    if name == "all":
        for n, fn in ATTEMPTS.items():
            report(n, fn)
    elif name in ATTEMPTS:
        report(name, ATTEMPTS[name])
    else:
        report(name, WITH_ARG[name], *sys.argv[2:])


main()
