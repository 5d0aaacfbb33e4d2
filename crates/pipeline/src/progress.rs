//! Progress of a study on stderr: on a terminal, one bar with the rate and an ETA
//! (indicatif); for logs, on request, one plain line per finished unit.
//!
//! The coordinator that owns a [`Progress`] forks its workers, so it must stay
//! single-threaded: the bar is redrawn by [`Progress::tick`] from the coordinator's own
//! loop, never by indicatif's steady-tick thread.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A redrawn bar (stderr is a terminal).
    Bar,
    /// One line per finished unit (asked for with `REPRORUN_PROGRESS=lines`, for logs).
    Lines,
    /// Nothing: stderr is a file or a pipe, and keeps only what goes wrong.
    Off,
}

impl ProgressMode {
    /// The mode that suits the process's stderr: a bar on a terminal; elsewhere lines when
    /// `REPRORUN_PROGRESS=lines`, else nothing (an error stays the only line there).
    pub fn for_stderr() -> ProgressMode {
        if std::env::var_os("REPRORUN_PROGRESS").is_some_and(|v| v == "lines") {
            ProgressMode::Lines
        } else if std::io::stderr().is_terminal() {
            ProgressMode::Bar
        } else {
            ProgressMode::Off
        }
    }
}

/// The progress of units of work, counted as they are queued and as they finish.
pub struct Progress {
    mode: ProgressMode,
    /// What a unit is called in the display (`runs`).
    noun: &'static str,
    bar: Option<ProgressBar>,
    total: u64,
    done: u64,
    started: Instant,
}

impl Progress {
    pub fn new(mode: ProgressMode, noun: &'static str) -> Progress {
        Progress {
            mode,
            noun,
            bar: None,
            total: 0,
            done: 0,
            started: Instant::now(),
        }
    }

    /// `n` more units to make.
    pub fn add(&mut self, n: usize) {
        self.total += n as u64;
        if self.mode != ProgressMode::Bar {
            return;
        }
        let noun = self.noun;
        let bar = self.bar.get_or_insert_with(|| {
            let style = ProgressStyle::with_template(&format!(
                "[{{bar:30}}] {{pos}}/{{len}} {noun}  ETA {{eta}}  {{per_sec}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("#>-");
            ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr()).with_style(style)
        });
        bar.set_length(self.total);
        bar.tick();
    }

    /// One unit finished; `label` names it (shown in line mode).
    pub fn done(&mut self, label: &str) {
        self.done += 1;
        match (&self.bar, self.mode) {
            (Some(bar), _) => bar.inc(1),
            (None, ProgressMode::Lines) => eprintln!("{}", self.line(label)),
            (None, _) => {}
        }
    }

    /// The plain line for a finished unit: `[3/24 runs] LABEL (ETA 0m12s)`.
    fn line(&self, label: &str) -> String {
        let eta = eta(self.started.elapsed(), self.done, self.total).map_or_else(
            || "--".to_string(),
            |d| format!("{}m{:02}s", d / 60, d % 60),
        );
        format!(
            "[{}/{} {}] {label} (ETA {eta})",
            self.done, self.total, self.noun
        )
    }

    /// Redraws the bar (called from the coordinator's loop: the rate and ETA move on
    /// while nothing finishes).
    pub(crate) fn tick(&self) {
        if let Some(bar) = &self.bar {
            bar.tick();
        }
    }

    /// Leaves the finished bar on its own line.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.abandon();
            // indicatif leaves the cursor after the bar: what comes next starts below it.
            if !bar.is_hidden() {
                eprintln!();
            }
        }
    }
}

/// Seconds left at the mean pace so far, once a unit has finished.
fn eta(elapsed: Duration, done: u64, total: u64) -> Option<u64> {
    if done == 0 {
        return None;
    }
    let per = elapsed.as_secs_f64() / done as f64;
    Some((per * total.saturating_sub(done) as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_units_and_estimate_what_is_left() {
        let mut p = Progress::new(ProgressMode::Lines, "runs");
        p.add(4);
        p.done = 1;
        assert!(p.line("a shim 0").starts_with("[1/4 runs] a shim 0 (ETA "));
        assert_eq!(eta(Duration::from_secs(10), 1, 4), Some(30));
        assert_eq!(eta(Duration::from_secs(10), 0, 4), None);
        assert_eq!(eta(Duration::from_secs(10), 5, 4), Some(0));
    }
}
