//! The answers to the notified calls: clock, entropy, identity, directory listings.

use super::*;

/// The size of the kernel's struct sysinfo (112 bytes on 64-bit): libc's may be larger
/// (musl's adds 256 reserved bytes), and written whole into the caller's buffer it would
/// overrun it. mem_unit ends the kernel's fields, then a pad to 20 bytes from totalhigh,
/// then the alignment of a long.
pub(super) const KERNEL_SYSINFO_LEN: usize = {
    let word = std::mem::size_of::<libc::c_ulong>();
    let fields = std::mem::offset_of!(libc::sysinfo, mem_unit) + 4 + (20 - 2 * word - 4);
    fields.div_ceil(word) * word
};

impl Server {
    pub(super) fn clock_call(
        &self,
        c: &mut Caller,
        nr: i64,
        args: &[u64; 6],
    ) -> Result<i64, Errno> {
        let Some(clock) = self.config.clock else {
            return Err(Errno::ENOSYS); // not routed here without a fake clock
        };
        if nr == libc::SYS_clock_gettime && is_cpu_clock(args[0]) {
            // Routed here only under a frozen or tick clock (see `filter`).
            let ns = match (clock.mode, &self.page) {
                (ClockMode::Tick { step_ns }, Some(p)) => p.next_tick() as i64 * step_ns as i64,
                _ => 0,
            };
            let pair = [ns / 1_000_000_000, ns % 1_000_000_000];
            let bytes: Vec<u8> = pair.iter().flat_map(|v| v.to_ne_bytes()).collect();
            return c.put(args[1], &bytes).map(|_| 0);
        }
        let now = self.now_ns(clock);
        let (secs, nanos) = (now.div_euclid(1_000_000_000), now.rem_euclid(1_000_000_000));
        let pair = |a: i64, b: i64| {
            let mut buf = [0u8; 16];
            buf[..8].copy_from_slice(&a.to_ne_bytes());
            buf[8..].copy_from_slice(&b.to_ne_bytes());
            buf
        };
        let mut opt = |addr: u64, bytes: &[u8]| match addr {
            0 => Ok(()),
            _ => c.put(addr, bytes),
        };
        if nr == libc::SYS_clock_gettime {
            opt(args[1].max(1), &pair(secs, nanos)).map(|_| 0)
        } else if is_gettimeofday(nr) {
            opt(args[0], &pair(secs, nanos / 1000))
                .and_then(|_| opt(args[1], &[0u8; 8]))
                .map(|_| 0)
        } else {
            opt(args[0], &secs.to_ne_bytes()).map(|_| secs) // time(2)
        }
    }

    /// getrandom(buf, len, flags): the next bytes of the calling process's seeded stream.
    pub(super) fn getrandom(&mut self, c: &mut Caller, args: &[u64; 6]) -> Result<i64, Errno> {
        const GRND_NONBLOCK: u64 = 1;
        const GRND_RANDOM: u64 = 2;
        const GRND_INSECURE: u64 = 4;
        let (buf, len, flags) = (args[0], args[1] as usize, args[2] as u32 as u64);
        if flags == u64::from(entropy::KEY_QUERY) && len == 8 && self.config.seed.is_some() {
            // The preload library asking for its process's key (for its AT_RANDOM bytes).
            let (tgid, ns_tgid) = c.process()?;
            let key = self.lineage.node(tgid, ns_tgid)?.key;
            return c.put(buf, &key.to_ne_bytes()).map(|_| 8);
        }
        if flags & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0
            || flags & (GRND_RANDOM | GRND_INSECURE) == (GRND_RANDOM | GRND_INSECURE)
        {
            return Err(Errno::EINVAL);
        }
        let Some(seed) = self.config.seed else {
            return Err(Errno::ENOSYS); // not routed here with real entropy
        };
        // Large requests may be answered in part, as the kernel's may.
        let len = len.min(1 << 20);
        if len == 0 {
            return Ok(0);
        }
        let (tgid, ns_tgid) = c.process()?;
        let node = self.lineage.node(tgid, ns_tgid)?;
        let stream = node
            .stream
            .get_or_insert_with(|| Stream::new(seed, entropy::DOMAIN_GETRANDOM, node.key));
        let mut bytes = vec![0u8; len];
        stream.fill(&mut bytes);
        c.put(buf, &bytes).map(|_| len as i64)
    }

    /// sched_getaffinity(pid, len, mask): CPUs 0..cpus-1, whatever the real mask.
    pub(super) fn getaffinity(&self, c: &mut Caller, args: &[u64; 6]) -> Result<i64, Errno> {
        // As the kernel: a whole number of longs, large enough for every CPU it reports;
        // the answer is the smaller of that and its own mask size.
        let len = args[1] as usize;
        let word = std::mem::size_of::<libc::c_ulong>();
        if len % word != 0 || len * 8 < self.config.identity.cpus as usize {
            return Err(Errno::EINVAL);
        }
        let n = len.min(self.cpumask_bytes);
        c.put(args[2], &self.config.identity.affinity_mask(n))
            .map(|_| n as i64)
    }

    /// struct sysinfo: the pinned memory, no swap, no load, uptime since the sandbox began.
    pub(super) fn sysinfo(&self) -> Vec<u8> {
        let id = &self.config.identity;
        // SAFETY: sysinfo is plain old data; all-zero is a valid value.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        info.uptime =
            (self.config.uptime_start_secs + self.started.elapsed().as_secs() as i64) as _;
        info.totalram = id.memory_bytes as _;
        info.freeram = (id.memory_bytes / 2) as _;
        info.procs = 1;
        info.mem_unit = 1;
        let size = KERNEL_SYSINFO_LEN;
        // SAFETY: reads the first `size` bytes of a fully initialised plain-old-data struct,
        // which is at least that large (libc's layout begins with the kernel's).
        unsafe { std::slice::from_raw_parts(&info as *const libc::sysinfo as *const u8, size) }
            .to_vec()
    }

    /// getdents64/getdents(fd, buf, count) in sorted order; `None` where the kernel should
    /// answer itself (a filesystem whose directory offsets we cannot set).
    pub(super) fn getdents(
        &mut self,
        c: &mut Caller,
        args: &[u64; 6],
        legacy: bool,
        still_valid: impl Fn() -> bool,
    ) -> Option<Result<i64, Errno>> {
        let (fd, buf, count) = (args[0] as i32, args[1], args[2] as u32 as usize);
        // Kernels before 6.9 give no pidfd for a thread that is not its process's leader:
        // use the process's (the descriptor table is shared), checked to still be the
        // caller's, so that every thread's listing goes through here.
        let process_pidfd;
        let pidfd = match c.pidfd.as_ref() {
            Some(p) => p,
            None => {
                let (tgid, _) = c.process().ok()?;
                process_pidfd = crate::sys::pidfd_open_process(Pid::from_raw(tgid)).ok()?;
                if !still_valid() {
                    return None;
                }
                &process_pidfd
            }
        };
        let dup = match crate::sys::pidfd_getfd(pidfd, fd) {
            Ok(d) => d,
            Err(Errno::EBADF) => return Some(Err(Errno::EBADF)),
            Err(_) => return None,
        };
        let flags = nix::fcntl::fcntl(dup.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).ok()?;
        if flags & libc::O_PATH != 0 {
            return Some(Err(Errno::EBADF));
        }
        let st = nix::sys::stat::fstat(dup.as_raw_fd()).ok()?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Some(Err(Errno::ENOTDIR));
        }
        use nix::unistd::{lseek, Whence};
        let pos = lseek(dup.as_raw_fd(), 0, Whence::SeekCur).ok()?;
        // Reading the directory moves the shared offset: every way out that consumes nothing
        // puts it back where the caller left it.
        let restore = || {
            let _ = lseek(dup.as_raw_fd(), pos, Whence::SeekSet);
        };
        let entries = match self.listings.get(
            (c.tid.as_raw(), fd),
            (st.st_dev, st.st_ino),
            pos == 0,
            || dirs::read_sorted(&dup),
        ) {
            Ok(e) => e,
            Err(_) => {
                restore();
                return None;
            }
        };
        let start = usize::try_from(pos)
            .unwrap_or(usize::MAX)
            .min(entries.len());
        let (bytes, next) = match dirs::encode(&entries, start, count, legacy) {
            Ok(r) => r,
            Err(e) => {
                restore();
                return Some(Err(e));
            }
        };
        if bytes.is_empty() {
            restore();
            return Some(Ok(0));
        }
        if let Err(e) = c.put(buf, &bytes) {
            restore();
            return Some(Err(e));
        }
        if lseek(dup.as_raw_fd(), next as i64, Whence::SeekSet).is_err() {
            // This filesystem refuses our offsets: the kernel's own (unsorted) answer.
            restore();
            return None;
        }
        Some(Ok(bytes.len() as i64))
    }
}
