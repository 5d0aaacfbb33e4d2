//! Exit statuses reprorun itself reports (documented in spec/sandbox.md).

/// The workload ran past `--timeout` and was killed.
pub const TIMEOUT: i32 = 124;
/// reprorun could not set up or supervise the run (bad input included).
pub const RUNTIME_ERROR: i32 = 125;
/// The command was found but could not be executed.
pub const NOT_EXECUTABLE: i32 = 126;
/// The command was not found.
pub const NOT_FOUND: i32 = 127;
