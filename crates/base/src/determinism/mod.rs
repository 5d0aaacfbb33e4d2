//! The determinism pins as data: the environment profile, the pinned date, seeded entropy
//! and the machine identity. Nothing here performs effects; the sandbox executor applies what
//! these values say.

pub mod clock;
pub mod date;
pub mod entropy;
pub mod env;
pub mod identity;
pub mod mix;
pub mod page;

pub use clock::{ClockMode, ClockPlan, DateChoice};
pub use date::{parse_date, DateError, DEFAULT_EPOCH};
pub use entropy::RandomMode;
pub use env::{EnvError, EnvProfile, FROZEN_PATH, HOME_DIR};
pub use identity::{Identity, Uname};
