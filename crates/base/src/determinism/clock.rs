//! The fake wall clock as data: the mode and date users choose, and the clock page every
//! time path reads (the preload library maps it; the supervisor reads the same values).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::date::{parse_date, DateError};

use super::page;
pub use super::page::SIZE as PAGE_SIZE;
/// Where the page and the preload library live inside the sandbox.
pub const RUN_DIR: &str = "/run/reprorun";
pub const PAGE_PATH: &str = "/run/reprorun/clock";
pub const PRELOAD_PATH: &str = "/run/reprorun/libreprotime.so";
/// The file names of the page and the library in their directory (RUN_DIR in a sandbox).
pub const PAGE_FILE: &str = "clock";
pub const PRELOAD_FILE: &str = "libreprotime.so";
/// Default `tick` step: 1 ms.
pub const DEFAULT_TICK_NS: u64 = 1_000_000;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ClockError {
    #[error(transparent)]
    Date(#[from] DateError),
    #[error("invalid --clock {0:?}: expected start-at, frozen, tick or tick=STEP (e.g. tick=1ms)")]
    Mode(String),
}

/// `--clock`: how the fake wall clock moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum ClockMode {
    /// Starts at the date and advances in real time (`faketime "@DATE"`).
    StartAt,
    /// Always the date.
    Frozen,
    /// Every read advances by `step_ns`, independent of real time.
    Tick { step_ns: u64 },
}

impl ClockMode {
    fn code(self) -> u32 {
        match self {
            ClockMode::StartAt => page::MODE_START_AT,
            ClockMode::Frozen => page::MODE_FROZEN,
            ClockMode::Tick { .. } => page::MODE_TICK,
        }
    }
}

/// `--date`: a pinned instant or `now` (faking off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateChoice {
    Pinned(i64),
    Now,
}

pub fn parse_date_choice(text: &str) -> Result<DateChoice, DateError> {
    if text.trim() == "now" {
        return Ok(DateChoice::Now);
    }
    parse_date(text).map(DateChoice::Pinned)
}

pub fn parse_clock_mode(text: &str) -> Result<ClockMode, ClockError> {
    let err = || ClockError::Mode(text.to_string());
    match text.trim() {
        "start-at" => Ok(ClockMode::StartAt),
        "frozen" => Ok(ClockMode::Frozen),
        "tick" => Ok(ClockMode::Tick {
            step_ns: DEFAULT_TICK_NS,
        }),
        other => {
            let step = other.strip_prefix("tick=").ok_or_else(err)?;
            let d = crate::parse::duration(step).map_err(|_| err())?;
            let step_ns = u64::try_from(d.as_nanos()).map_err(|_| err())?;
            Ok(ClockMode::Tick { step_ns })
        }
    }
}

/// The resolved clock: what the sandbox's wall clock reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockPlan {
    /// The pinned date, seconds since the epoch.
    pub epoch: i64,
    #[serde(flatten)]
    pub mode: ClockMode,
}

/// The runtime page every time path and the preload library read: the clock (`None`: real
/// time, nothing faked) started at real time `real_now_ns` (CLOCK_REALTIME), and the entropy
/// seed (`None`: real entropy).
pub fn runtime_page(clock: Option<ClockPlan>, seed: Option<u64>, real_now_ns: i64) -> Vec<u8> {
    let mut page = vec![0u8; PAGE_SIZE];
    let mut put = |at: usize, bytes: &[u8]| page[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, &page::MAGIC.to_le_bytes());
    put(page::AT_VERSION, &page::VERSION.to_le_bytes());
    if let Some(clock) = clock {
        let epoch_ns = clock.epoch.saturating_mul(1_000_000_000);
        let step = match clock.mode {
            ClockMode::Tick { step_ns } => step_ns as i64,
            _ => 0,
        };
        put(page::AT_MODE, &clock.mode.code().to_le_bytes());
        put(page::AT_OFFSET, &(epoch_ns - real_now_ns).to_le_bytes());
        put(page::AT_EPOCH, &epoch_ns.to_le_bytes());
        put(page::AT_STEP, &step.to_le_bytes());
    }
    if let Some(seed) = seed {
        put(page::AT_FLAGS, &page::FLAG_SEEDED.to_le_bytes());
        put(page::AT_SEED, &seed.to_le_bytes());
    }
    // The tick counter (page::AT_TICKS) starts at zero.
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_dates_parse() {
        assert_eq!(parse_clock_mode("start-at").unwrap(), ClockMode::StartAt);
        assert_eq!(parse_clock_mode("frozen").unwrap(), ClockMode::Frozen);
        assert_eq!(
            parse_clock_mode("tick").unwrap(),
            ClockMode::Tick { step_ns: 1_000_000 }
        );
        assert_eq!(
            parse_clock_mode("tick=5s").unwrap(),
            ClockMode::Tick {
                step_ns: 5_000_000_000
            }
        );
        assert_eq!(
            parse_clock_mode("tick=250us").unwrap(),
            ClockMode::Tick { step_ns: 250_000 }
        );
        for bad in ["", "fast", "tick=", "tick=0s", "tick=x", "frozen=1"] {
            assert!(parse_clock_mode(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_date_choice("now").unwrap(), DateChoice::Now);
        assert_eq!(parse_date_choice("@5").unwrap(), DateChoice::Pinned(5));
        assert!(parse_date_choice("1969-01-01").is_err());
    }

    #[test]
    fn paths_agree() {
        assert_eq!(PAGE_PATH, format!("{RUN_DIR}/{PAGE_FILE}"));
        assert_eq!(PRELOAD_PATH, format!("{RUN_DIR}/{PRELOAD_FILE}"));
    }

    #[test]
    fn page_layout_matches_the_preload_library() {
        let plan = ClockPlan {
            epoch: 100,
            mode: ClockMode::Tick { step_ns: 7 },
        };
        let page = runtime_page(Some(plan), Some(9), 40_000_000_000);
        assert_eq!(page.len(), PAGE_SIZE);
        let u64_at = |at: usize| u64::from_le_bytes(page[at..at + 8].try_into().unwrap());
        let i64_at = |at: usize| i64::from_le_bytes(page[at..at + 8].try_into().unwrap());
        assert_eq!(&page[0..8], b"REPROTIM");
        assert_eq!(u32::from_le_bytes(page[8..12].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(page[12..16].try_into().unwrap()), 3);
        assert_eq!(i64_at(16), 60_000_000_000, "offset = date - real start");
        assert_eq!(i64_at(24), 100_000_000_000);
        assert_eq!(i64_at(32), 7);
        assert_eq!(u32::from_le_bytes(page[40..44].try_into().unwrap()), 1);
        assert_eq!(u64_at(48), 9);
        assert_eq!(u64_at(64), 0);
        let bare = runtime_page(None, None, 5);
        assert_eq!(&bare[0..8], b"REPROTIM");
        assert!(bare[12..].iter().all(|b| *b == 0), "mode 0: nothing faked");
    }
}
