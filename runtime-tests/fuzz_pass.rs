//! The stable fuzz pass of the test command: every target of `runtime-tests/fuzz/` (the
//! parsers of bytes a sandbox controls, and of the caller's own input) runs its committed
//! seeds, every prefix of them, then random mutations of them, for a bounded time each,
//! with the checks the cargo-fuzz targets make (`fuzz/oracles.rs`). No coverage guidance
//! and no nightly: a smoke test of what the long cargo-fuzz runs (`fuzz/run.sh`) search
//! deeply.
//!
//! `REPRORUN_FUZZ_SECONDS` (default 3) bounds each target; `REPRORUN_FUZZ_SEED` (decimal or
//! 0x-hex; default: a new one each run) replays a run: the n-th input of a target depends on
//! the seed only, so a failure names its seed and execution and comes back with them. Each
//! target prints its executions on stderr (not captured).

#[path = "fuzz/oracles.rs"]
mod oracles;

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Inputs are kept below this size (the largest seed is a few KiB).
const MAX_LEN: usize = 64 << 10;
/// Prefixes run per seed before the mutations (every one for a seed this short or shorter).
const MAX_PREFIXES: usize = 4096;

/// xorshift64*: small, seeded, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Tokens of the formats the targets read, inserted or written over by the mutator.
const DICTIONARY: &[&[u8]] = &[
    b"\r\n",
    b"\r\n\r\n",
    b"\n\n",
    b"\r",
    b" ",
    b"\t",
    b":",
    b"HTTP/1.1",
    b"HTTP/1.0",
    b"CONNECT ",
    b"GET ",
    b"HEAD ",
    b"http://",
    b"https://",
    b"Host: ",
    b"Connection: close, x",
    b"Content-Length: 5",
    b"Transfer-Encoding: chunked",
    b"0\r\n\r\n",
    b"[::1]",
    b":443",
    b"@",
    b"%2e%2e/",
    b"%2f",
    b"../",
    b"/-/",
    b".tgz",
    b"/pypi/simple/",
    b"/pypi/files/",
    b"application/vnd.pypi.simple.v1+json",
    b"xn--",
    b"\xe2\x80\xae",
    b"\x16\x03\x01",
    b"\x00\x00",
    b"\x05\x01\x00",
    b"\x7fELF\x02\x01",
    b"runtime.cputicks.abi0",
    b".note.go.buildid",
    b"=",
    b"\\",
    b"{\"",
    b"SCMP_ACT_ALLOW",
    b"1970-01-01T00:00:00Z",
];

/// Values that tend to sit at a parser's edges, written as 1, 2, 4 or 8 bytes.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x3fff,
    0x4000,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    u64::MAX,
    u64::MAX / 2,
];

/// One random change to `data` (`other`: another seed, for splices).
fn mutate_once(data: &mut Vec<u8>, other: &[u8], rng: &mut Rng) {
    let len = data.len();
    let at = rng.below(len + 1);
    match rng.below(10) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.next() as u8;
        }
        2 => {
            let n = 1 + rng.below(8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            data.splice(at..at, bytes);
        }
        3 if len > 0 => {
            let n = 1 + rng.below((len - at.min(len - 1)).min(64));
            let from = at.min(len - 1);
            data.drain(from..(from + n).min(len));
        }
        4 => {
            let word = DICTIONARY[rng.below(DICTIONARY.len())];
            if rng.below(2) == 0 || at + word.len() > len {
                data.splice(at..at, word.iter().copied());
            } else {
                data[at..at + word.len()].copy_from_slice(word);
            }
        }
        5 => {
            let value = INTERESTING[rng.below(INTERESTING.len())];
            let width = [1, 2, 4, 8][rng.below(4)];
            let bytes = if rng.below(2) == 0 {
                value.to_le_bytes()[..width].to_vec()
            } else {
                value.to_be_bytes()[8 - width..].to_vec()
            };
            if at + width <= len {
                data[at..at + width].copy_from_slice(&bytes);
            } else {
                data.splice(at..at, bytes);
            }
        }
        6 => data.truncate(at),
        7 if !other.is_empty() => {
            // Splice: this input's head, another's tail.
            let from = rng.below(other.len());
            data.truncate(at);
            data.extend_from_slice(&other[from..]);
        }
        8 if len > 0 => {
            // Copy a piece of the input elsewhere in it.
            let from = rng.below(len);
            let n = 1 + rng.below((len - from).min(256));
            let piece = data[from..from + n].to_vec();
            data.splice(at..at, piece);
        }
        _ if len > 0 => {
            // An arithmetic nudge of one byte.
            let i = rng.below(len);
            data[i] = data[i].wrapping_add(rng.below(70) as u8).wrapping_sub(35);
        }
        _ => data.push(rng.next() as u8),
    }
    data.truncate(MAX_LEN);
}

/// The committed seeds of `target`, sorted by name.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("runtime-tests/fuzz/seeds")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// How one target's run went.
#[derive(Debug)]
struct Run {
    executions: u64,
    slowest: Duration,
}

/// The input that broke a promise: its execution (counted from 0 under the seed), its bytes
/// and the panic's message.
#[derive(Debug, PartialEq, Eq)]
struct Failure {
    execution: u64,
    input: Vec<u8>,
    message: String,
}

/// The n-th input of a run: the seeds, their prefixes, then mutants (of a seed or of a
/// recent mutant), all drawn from `rng`.
struct Inputs<'a> {
    seeds: &'a [Vec<u8>],
    prefixes: Vec<(usize, usize)>,
    recent: Vec<Vec<u8>>,
    n: usize,
    rng: Rng,
}

impl<'a> Inputs<'a> {
    fn new(seeds: &'a [Vec<u8>], seed: u64) -> Inputs<'a> {
        let prefixes = seeds
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                let step = s.len().div_ceil(MAX_PREFIXES).max(1);
                (0..s.len()).step_by(step).map(move |cut| (i, cut))
            })
            .collect();
        Inputs {
            seeds,
            prefixes,
            recent: Vec::new(),
            n: 0,
            rng: Rng::new(seed),
        }
    }

    fn next(&mut self) -> Vec<u8> {
        let n = self.n;
        self.n += 1;
        if let Some(s) = self.seeds.get(n) {
            return s.clone();
        }
        if let Some((i, cut)) = self.prefixes.get(n - self.seeds.len()) {
            return self.seeds[*i][..*cut].to_vec();
        }
        let rng = &mut self.rng;
        let mut data = match rng.below(4) {
            0 if !self.recent.is_empty() => self.recent[rng.below(self.recent.len())].clone(),
            _ => self.seeds[rng.below(self.seeds.len())].clone(),
        };
        let other = &self.seeds[rng.below(self.seeds.len())];
        let times = 1 << rng.below(4);
        for _ in 0..times {
            mutate_once(&mut data, other, rng);
        }
        if self.recent.len() < 64 {
            self.recent.push(data.clone());
        } else {
            let i = rng.below(64);
            self.recent[i] = data.clone();
        }
        data
    }
}

/// Runs `check` over the inputs of `seed` for `budget` (or to the first failure).
fn run(
    seeds: &[Vec<u8>],
    seed: u64,
    budget: Duration,
    check: oracles::Check,
) -> Result<Run, Failure> {
    let mut inputs = Inputs::new(seeds, seed);
    let start = Instant::now();
    let mut done = Run {
        executions: 0,
        slowest: Duration::ZERO,
    };
    while done.executions < (seeds.len() + inputs.prefixes.len()) as u64 || start.elapsed() < budget
    {
        let input = inputs.next();
        let began = Instant::now();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(&input))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Err(Failure {
                execution: done.executions,
                input,
                message,
            });
        }
        done.slowest = done.slowest.max(began.elapsed());
        done.executions += 1;
    }
    Ok(done)
}

/// `REPRORUN_FUZZ_SECONDS` (default 3).
fn budget() -> Duration {
    let text = std::env::var("REPRORUN_FUZZ_SECONDS").unwrap_or_else(|_| "3".into());
    let secs: f64 = text
        .trim()
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s >= 0.0)
        .unwrap_or_else(|| panic!("REPRORUN_FUZZ_SECONDS={text:?} is not a number of seconds"));
    Duration::from_secs_f64(secs)
}

/// `REPRORUN_FUZZ_SEED`, else a new seed.
fn base_seed() -> u64 {
    match std::env::var("REPRORUN_FUZZ_SEED") {
        Ok(text) => {
            let t = text.trim();
            let parsed = match t.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => t.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("REPRORUN_FUZZ_SEED={text:?} is not a number"))
        }
        Err(_) => {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            h.write_u128(now.unwrap_or_default().as_nanos());
            h.finish()
        }
    }
}

/// The seed of one target's run: the base seed and its name (FNV-1a).
fn target_seed(base: u64, target: &str) -> u64 {
    let name = target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    base ^ name
}

/// Fuzzes `target` with its seeds and its checks; fails with the input that broke one.
fn fuzz(target: &str) {
    let check = oracles::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, check)| *check)
        .unwrap_or_else(|| panic!("no fuzz target {target}"));
    let seeds = seeds(target);
    assert!(
        !seeds.is_empty(),
        "runtime-tests/fuzz/seeds/{target} holds no seed"
    );
    let (base, budget) = (base_seed(), budget());
    let replay = format!(
        "REPRORUN_FUZZ_SEED={base:#x} cargo test --test runtime fuzz_pass::{target} -- --exact"
    );
    match run(&seeds, target_seed(base, target), budget, check) {
        Ok(done) => {
            let line = format!(
                "fuzz {target}: {} executions in {:.1} s ({} seeds, seed {base:#x}, slowest input {:.2} ms)\n",
                done.executions,
                budget.as_secs_f64(),
                seeds.len(),
                done.slowest.as_secs_f64() * 1e3,
            );
            // Straight to the process's stderr: shown even when the test passes.
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
        Err(f) => {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-pass");
            let _ = std::fs::create_dir_all(&dir);
            let file = dir.join(format!("{target}-{base:x}-{}", f.execution));
            let _ = std::fs::write(&file, &f.input);
            let shown = &f.input[..f.input.len().min(512)];
            panic!(
                "fuzz {target}: execution {} broke a promise: {}\n  input ({} bytes, saved to {}): {:?}\n  replay: {replay}\n  or: cargo +nightly fuzz run --fuzz-dir runtime-tests/fuzz {target} {}",
                f.execution,
                f.message,
                f.input.len(),
                file.display(),
                String::from_utf8_lossy(shown),
                file.display(),
            );
        }
    }
}

macro_rules! targets {
    ($($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                fuzz(stringify!($name));
            }
        )*

        /// Every target in `oracles::TARGETS` has its test here, and its seeds.
        #[test]
        fn every_target_runs() {
            let here = [$(stringify!($name)),*];
            let all: Vec<&str> = oracles::TARGETS.iter().map(|(n, _)| *n).collect();
            assert_eq!(here.to_vec(), all);
        }
    };
}

targets!(
    proxy_http,
    proxy_socks,
    proxy_sni,
    mirror_request,
    elf,
    duration,
    bind,
    env,
    date,
    user_hostname,
    seccomp
);

/// The pass can fail, and a failure comes back with its seed: a check that breaks on a NUL
/// byte (absent from the HTTP seeds) is caught, at the same execution and with the same
/// input each time.
#[test]
fn a_broken_check_fails_and_replays() {
    fn no_nul(data: &[u8]) {
        assert!(!data.contains(&0), "a NUL");
    }
    let seeds = seeds("proxy_http");
    assert!(seeds.iter().all(|s| !s.contains(&0)));
    let budget = Duration::from_secs(60);
    let first = run(&seeds, 7, budget, no_nul).expect_err("a NUL is found");
    assert!(first.input.contains(&0) && first.message.contains("a NUL"));
    assert!(first.execution >= seeds.len() as u64);
    assert_eq!(run(&seeds, 7, budget, no_nul).unwrap_err(), first);
}

/// The mutator keeps inputs bounded and changes them.
#[test]
fn mutants_are_bounded_and_differ() {
    let seeds = vec![b"GET http://a.example/ HTTP/1.1\r\n\r\n".to_vec()];
    let mut inputs = Inputs::new(&seeds, 1);
    let all: Vec<Vec<u8>> = (0..5000).map(|_| inputs.next()).collect();
    assert!(all.iter().all(|i| i.len() <= MAX_LEN));
    let distinct: std::collections::HashSet<_> = all.iter().collect();
    assert!(distinct.len() > 2500, "{} distinct inputs", distinct.len());
}
