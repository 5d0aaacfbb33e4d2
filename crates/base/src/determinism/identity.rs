//! The machine identity a sandbox presents, as data: `uname`, the CPU count and the memory
//! size, and the generated files under /proc and /sys that must agree with them. The values
//! are constants (documented in spec/determinism.md), never the host's.

use serde::{Deserialize, Serialize};

/// `uname -r` inside every sandbox.
pub const KERNEL_RELEASE: &str = "6.1.0-reprorun";
/// `uname -v` inside every sandbox.
pub const KERNEL_VERSION: &str = "#1 SMP PREEMPT_DYNAMIC reprorun";
/// Total memory reported by /proc/meminfo and sysinfo(2): 8 GiB.
pub const MEMORY_BYTES: u64 = 8 << 30;
/// Default `--cpus`.
pub const DEFAULT_CPUS: u32 = 1;
/// The seeded streams of `/proc/sys/kernel/random/boot_id` and `.../uuid`.
pub const DOMAIN_BOOT_ID: &str = "boot_id";
pub const DOMAIN_UUID: &str = "uuid";

/// `uname(2)`'s answer inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uname {
    pub sysname: String,
    pub nodename: String,
    pub release: String,
    pub version: String,
    pub machine: String,
    pub domainname: String,
}

impl Uname {
    /// The pinned identity with the sandbox's host and domain names. The machine is the
    /// architecture reprorun was built for (a program can only run on that one anyway).
    pub fn pinned(nodename: &str, domainname: &str) -> Uname {
        Uname {
            sysname: "Linux".into(),
            nodename: nodename.into(),
            release: KERNEL_RELEASE.into(),
            version: KERNEL_VERSION.into(),
            machine: std::env::consts::ARCH.into(),
            domainname: domainname.into(),
        }
    }

    /// `struct utsname` as the kernel lays it out: six NUL-padded 65-byte fields (values
    /// longer than 64 bytes are cut).
    pub fn to_utsname(&self) -> [u8; 6 * 65] {
        let mut out = [0u8; 6 * 65];
        for (i, field) in [
            &self.sysname,
            &self.nodename,
            &self.release,
            &self.version,
            &self.machine,
            &self.domainname,
        ]
        .into_iter()
        .enumerate()
        {
            let bytes = field.as_bytes();
            let n = bytes.len().min(64);
            out[i * 65..i * 65 + n].copy_from_slice(&bytes[..n]);
        }
        out
    }
}

/// The identity the workload sees: CPUs, memory, uname.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// CPUs the workload may use and sees: it runs on `cpus` of the CPUs the caller may use
    /// (the one it starts on, then the last ones), and every interface reports CPUs
    /// 0..cpus-1.
    pub cpus: u32,
    pub memory_bytes: u64,
    pub uname: Uname,
}

/// A CPU list as the kernel prints it in /sys (`0`, `0-3`).
pub fn cpu_list(cpus: u32) -> String {
    match cpus {
        0 | 1 => "0\n".into(),
        n => format!("0-{}\n", n - 1),
    }
}

/// The kernel command line inside every sandbox (the host's names its boot device, its
/// hypervisor's settings, sometimes tokens).
pub fn cmdline(release: &str) -> String {
    format!("BOOT_IMAGE=/boot/vmlinuz-{release} root=/dev/vda1 ro quiet\n")
}

/// A random (version 4) UUID as the kernel prints one, from the first 16 bytes of the
/// seeded stream `domain`.
pub fn seeded_uuid(seed: u64, domain: &str) -> String {
    let mut b = [0u8; 16];
    super::entropy::Stream::new(seed, domain, 0).fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let mut out = String::with_capacity(37);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(b"0123456789abcdef"[usize::from(x >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(x & 15)]));
    }
    out.push('\n');
    out
}

/// The softirq names of /proc/softirqs, in the kernel's order.
const SOFTIRQS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

impl Identity {
    /// The files bound over the host's, as (path inside the sandbox, contents). `seed` gives
    /// the boot id (always) and, with `seeded` entropy, the one UUID
    /// `/proc/sys/kernel/random/uuid` reads (the kernel's changes at every read).
    pub fn files(&self, boot_epoch: i64, seed: u64, seeded: bool) -> Vec<(&'static str, String)> {
        let mut files = self.machine_files(boot_epoch);
        files.extend(self.kernel_files());
        files.push((
            "/proc/sys/kernel/random/boot_id",
            seeded_uuid(seed, DOMAIN_BOOT_ID),
        ));
        if seeded {
            files.push((
                "/proc/sys/kernel/random/uuid",
                seeded_uuid(seed, DOMAIN_UUID),
            ));
        }
        files
    }

    /// Counters and limits of the kernel that would tell the host's memory size and
    /// activity: the command line, `threads-max` and `file-max` as the kernel sizes them for
    /// [`Identity::memory_bytes`] (one thread per 128 KiB, one file per 10 KiB), open files
    /// and dentries of an idle machine, /proc/softirqs with one column per CPU, all 0, and
    /// no disks.
    fn kernel_files(&self) -> Vec<(&'static str, String)> {
        use std::fmt::Write;
        let file_max = self.memory_bytes / 10240;
        let cpus = self.cpus as usize;
        let mut softirqs = String::with_capacity(21 + 11 * cpus + 11 * (13 + 11 * cpus));
        softirqs.push_str(&" ".repeat(20));
        for i in 0..self.cpus {
            let _ = write!(softirqs, "CPU{i:<8}");
        }
        softirqs.push('\n');
        let zeros = "          0".repeat(cpus);
        for name in SOFTIRQS {
            let _ = writeln!(softirqs, "{name:>12}:{zeros}");
        }
        vec![
            ("/proc/cmdline", cmdline(&self.uname.release)),
            (
                "/proc/sys/kernel/threads-max",
                format!("{}\n", self.memory_bytes / (128 << 10)),
            ),
            ("/proc/sys/fs/file-max", format!("{file_max}\n")),
            ("/proc/sys/fs/file-nr", format!("1024\t0\t{file_max}\n")),
            (
                "/proc/sys/fs/dentry-state",
                "10000\t5000\t45\t0\t0\t0\n".to_string(),
            ),
            ("/proc/softirqs", softirqs),
            // No disks (a mask would fail the open: readers such as psutil want a file).
            (
                "/proc/partitions",
                "major minor  #blocks  name\n\n".to_string(),
            ),
            ("/proc/diskstats", String::new()),
        ]
    }

    /// CPUs, memory, load and the kernel's version.
    fn machine_files(&self, boot_epoch: i64) -> Vec<(&'static str, String)> {
        let list = cpu_list(self.cpus);
        vec![
            ("/proc/cpuinfo", self.cpuinfo()),
            ("/proc/meminfo", self.meminfo()),
            ("/proc/stat", self.stat(boot_epoch)),
            // An idle machine: the host's load is neither shown nor an input.
            ("/proc/loadavg", "0.00 0.00 0.00 1/1 1\n".to_string()),
            (
                "/proc/version",
                format!(
                    "Linux version {} (reprorun@reprorun) (reprorun) {}\n",
                    self.uname.release, self.uname.version
                ),
            ),
            (
                "/proc/sys/kernel/osrelease",
                format!("{}\n", self.uname.release),
            ),
            (
                "/proc/sys/kernel/version",
                format!("{}\n", self.uname.version),
            ),
            ("/sys/devices/system/cpu/online", list.clone()),
            ("/sys/devices/system/cpu/possible", list.clone()),
            ("/sys/devices/system/cpu/present", list),
        ]
    }

    /// /proc/cpuinfo: `cpus` identical processors with the x86-64 baseline feature flags, so
    /// a program that picks code paths from this file picks the same ones everywhere.
    fn cpuinfo(&self) -> String {
        let n = self.cpus;
        let mut out = String::new();
        for i in 0..n {
            if cfg!(target_arch = "x86_64") {
                out.push_str(&format!(
                    "processor\t: {i}\nvendor_id\t: reprorun\ncpu family\t: 6\nmodel\t\t: 0\n\
model name\t: reprorun virtual CPU\nstepping\t: 0\ncpu MHz\t\t: 2000.000\ncache size\t: 1024 KB\n\
physical id\t: 0\nsiblings\t: {n}\ncore id\t\t: {i}\ncpu cores\t: {n}\napicid\t\t: {i}\n\
initial apicid\t: {i}\nfpu\t\t: yes\nfpu_exception\t: yes\ncpuid level\t: 13\nwp\t\t: yes\n\
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 syscall nx lm\n\
bogomips\t: 4000.00\nclflush size\t: 64\ncache_alignment\t: 64\n\
address sizes\t: 46 bits physical, 48 bits virtual\npower management:\n\n"
                ));
            } else {
                out.push_str(&format!("processor\t: {i}\nBogoMIPS\t: 4000.00\n\n"));
            }
        }
        out
    }

    /// /proc/stat: `cpus` CPUs with no time counted yet, booted at `boot_epoch` (the host's
    /// counters and boot time would tell its uptime and load, and differ on every run).
    fn stat(&self, boot_epoch: i64) -> String {
        let zeros = "0 0 0 0 0 0 0 0 0 0";
        let mut out = format!("cpu  {zeros}\n");
        for i in 0..self.cpus {
            out.push_str(&format!("cpu{i} {zeros}\n"));
        }
        out.push_str(&format!(
            "intr 0\nctxt 0\nbtime {boot_epoch}\nprocesses 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n"
        ));
        out
    }

    /// /proc/meminfo: `memory_bytes` in all, half of it free, no swap.
    fn meminfo(&self) -> String {
        let total = self.memory_bytes / 1024;
        let free = total / 2;
        let lines: [(&str, u64); 22] = [
            ("MemTotal", total),
            ("MemFree", free),
            ("MemAvailable", free),
            ("Buffers", 0),
            ("Cached", 0),
            ("SwapCached", 0),
            ("Active", 0),
            ("Inactive", 0),
            ("SwapTotal", 0),
            ("SwapFree", 0),
            ("Dirty", 0),
            ("Writeback", 0),
            ("AnonPages", 0),
            ("Mapped", 0),
            ("Shmem", 0),
            ("Slab", 0),
            ("CommitLimit", free),
            ("Committed_AS", 0),
            ("HugePages_Total", 0),
            ("HugePages_Free", 0),
            ("HugePages_Rsvd", 0),
            ("Hugepagesize", 2048),
        ];
        // One string written in place (a format! per field and line cost about 15 us of
        // every start, issue 20).
        use std::fmt::Write;
        let mut out = String::with_capacity(lines.len() * 28);
        for (k, v) in lines {
            let unit = if k.starts_with("HugePages_") {
                ""
            } else {
                " kB"
            };
            let _ = writeln!(
                out,
                "{k}:{:pad$}{v:>8}{unit}",
                "",
                pad = 15 - k.len().min(15)
            );
        }
        out
    }

    /// The affinity mask every process is told it has (CPUs 0..cpus-1), in `len` bytes.
    pub fn affinity_mask(&self, len: usize) -> Vec<u8> {
        let mut mask = vec![0u8; len];
        for cpu in 0..self.cpus as usize {
            if let Some(byte) = mask.get_mut(cpu / 8) {
                *byte |= 1 << (cpu % 8);
            }
        }
        mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(cpus: u32) -> Identity {
        Identity {
            cpus,
            memory_bytes: MEMORY_BYTES,
            uname: Uname::pinned("reprorun", "(none)"),
        }
    }

    #[test]
    fn utsname_layout() {
        let u = Uname::pinned("box", "(none)").to_utsname();
        let field = |i: usize| {
            let f = &u[i * 65..(i + 1) * 65];
            String::from_utf8(f[..f.iter().position(|b| *b == 0).unwrap()].to_vec()).unwrap()
        };
        assert_eq!(field(0), "Linux");
        assert_eq!(field(1), "box");
        assert_eq!(field(2), KERNEL_RELEASE);
        assert_eq!(field(3), KERNEL_VERSION);
        assert_eq!(field(4), std::env::consts::ARCH);
        assert_eq!(field(5), "(none)");
        let long = Uname::pinned(&"x".repeat(100), "d").to_utsname();
        assert_eq!(long[65 + 63], b'x');
        assert_eq!(long[65 + 64], 0, "cut to 64 bytes, NUL-terminated");
    }

    #[test]
    fn cpu_views_agree() {
        let id = identity(3);
        let files = id.files(1_700_000_000, 42, true);
        let get = |p: &str| files.iter().find(|(f, _)| *f == p).unwrap().1.clone();
        assert_eq!(get("/sys/devices/system/cpu/online"), "0-2\n");
        assert_eq!(cpu_list(1), "0\n");
        assert_eq!(get("/proc/cpuinfo").matches("processor\t:").count(), 3);
        assert_eq!(id.affinity_mask(8), vec![0b111, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(identity(9).affinity_mask(2), vec![0xff, 1]);
        let meminfo = get("/proc/meminfo");
        assert!(meminfo.starts_with("MemTotal:        8388608 kB\n"));
        assert!(meminfo.contains("\nCommitted_AS:          0 kB\nHugePages_Total:       0\n"));
        assert!(meminfo.ends_with("\nHugepagesize:       2048 kB\n"));
        assert_eq!(meminfo.lines().count(), 22);
        assert!(get("/proc/version").contains(KERNEL_RELEASE));
        let stat = get("/proc/stat");
        assert_eq!(stat.lines().filter(|l| l.starts_with("cpu")).count(), 4);
        assert!(stat.contains("\nbtime 1700000000\n"));
        assert!(get("/proc/loadavg").starts_with("0.00 0.00 0.00 "));
        // One column per CPU in /proc/softirqs, every count 0.
        let softirqs = get("/proc/softirqs");
        let mut lines = softirqs.lines();
        let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(head, ["CPU0", "CPU1", "CPU2"]);
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows.len(), 10);
        assert_eq!(rows[1], ["TIMER:", "0", "0", "0"]);
        assert!(rows
            .iter()
            .all(|r| r.len() == 4 && r[1..].iter().all(|c| *c == "0")));
        let one = identity(1).files(0, 42, true);
        let one = &one.iter().find(|(f, _)| *f == "/proc/softirqs").unwrap().1;
        assert!(
            one.starts_with(&format!("{}CPU0", " ".repeat(20))),
            "{one:?}"
        );
        assert!(one.contains("\n          HI:          0\n"), "{one:?}");
    }

    /// The kernel's sizes agree with the pinned memory, not the host's.
    #[test]
    fn memory_sized_limits_follow_the_pinned_memory() {
        let files = identity(2).files(0, 1, false);
        let get = |p: &str| files.iter().find(|(f, _)| *f == p).unwrap().1.clone();
        // 8 GiB: the kernel's own formulas give 65536 threads and 838860 files.
        assert_eq!(get("/proc/sys/kernel/threads-max"), "65536\n");
        assert_eq!(get("/proc/sys/fs/file-max"), "838860\n");
        assert_eq!(get("/proc/sys/fs/file-nr"), "1024\t0\t838860\n");
        assert_eq!(get("/proc/sys/fs/dentry-state").split('\t').count(), 6);
        assert!(get("/proc/cmdline").contains(KERNEL_RELEASE));
    }

    /// boot_id is a UUID v4 of the seed, in every entropy mode; the uuid file is pinned only
    /// with seeded entropy (with real entropy the kernel's fresh UUIDs are no host fact).
    #[test]
    fn boot_id_and_uuid_come_from_the_seed() {
        let id = identity(1);
        let get = |files: &[(&str, String)], p: &str| {
            files.iter().find(|(f, _)| *f == p).map(|(_, c)| c.clone())
        };
        let seeded = id.files(0, 42, true);
        let boot = get(&seeded, "/proc/sys/kernel/random/boot_id").unwrap();
        let uuid = get(&seeded, "/proc/sys/kernel/random/uuid").unwrap();
        for u in [&boot, &uuid] {
            assert_eq!(u.len(), 37, "{u:?}");
            let groups: Vec<usize> = u.trim_end().split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{u:?}");
            assert_eq!(&u[14..15], "4", "version 4: {u:?}");
            assert!("89ab".contains(&u[19..20]), "variant: {u:?}");
            assert!(u
                .trim_end()
                .chars()
                .all(|c| c == '-' || c.is_ascii_hexdigit()));
        }
        assert_ne!(boot, uuid);
        let real = id.files(0, 42, false);
        assert_eq!(get(&real, "/proc/sys/kernel/random/boot_id").unwrap(), boot);
        assert_eq!(get(&real, "/proc/sys/kernel/random/uuid"), None);
        let other = id.files(0, 43, true);
        assert_ne!(
            get(&other, "/proc/sys/kernel/random/boot_id").unwrap(),
            boot
        );
        assert_eq!(
            id.files(0, 42, true),
            seeded,
            "the same seed, the same files"
        );
    }
}
