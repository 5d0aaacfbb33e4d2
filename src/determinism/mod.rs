//! The determinism pins as data: the environment profile and the pinned date.
//! Nothing here performs effects; the sandbox executor applies what these values say.

pub mod clock;
pub mod date;
pub mod env;

pub use clock::{ClockMode, ClockPlan, DateChoice};
pub use date::{parse_date, DateError, DEFAULT_EPOCH};
pub use env::{EnvError, EnvProfile, FROZEN_PATH, HOME_DIR};
