//! The collection's progress on stderr: on a terminal a bar over repositories whose message
//! is the current repository, its issues and the API budget left; with
//! `REPRORUN_PROGRESS=lines` one line per repository and per rate-limit wait (for logs);
//! otherwise nothing but the summary.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::limits::Budget;
use reprorun_pipeline::progress::ProgressMode;

pub(crate) struct Bar {
    mode: ProgressMode,
    bar: Option<ProgressBar>,
    total: usize,
    done: usize,
    repo: String,
    issues: usize,
    issues_done: usize,
}

fn budget_text(b: Option<Budget>) -> String {
    b.map_or_else(String::new, |b| format!(", API {} left", b.remaining))
}

impl Bar {
    pub(crate) fn new(total: usize) -> Bar {
        let mode = ProgressMode::for_stderr();
        let bar = (mode == ProgressMode::Bar).then(|| {
            let style = ProgressStyle::with_template("[{bar:30}] {pos}/{len} repositories  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("#>-");
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
                .with_style(style)
        });
        Bar {
            mode,
            bar,
            total,
            done: 0,
            repo: String::new(),
            issues: 0,
            issues_done: 0,
        }
    }

    /// The callback the HTTP client calls before it waits.
    pub(crate) fn waiter(&self) -> super::http::OnWait {
        let bar = self.bar.clone();
        let lines = self.mode == ProgressMode::Lines;
        Box::new(move |why, secs| {
            let text = format!("waiting {secs:.0}s: {why}");
            match &bar {
                Some(b) => b.set_message(text),
                None if lines => eprintln!("reprorun: audit collect: {text}"),
                None => {}
            }
        })
    }

    pub(crate) fn start(&mut self, repo: &str) {
        self.repo = repo.to_string();
        self.issues = 0;
        self.issues_done = 0;
        if let Some(b) = &self.bar {
            b.set_message(repo.to_string());
        }
    }

    pub(crate) fn issues(&mut self, n: usize) {
        self.issues = n;
    }

    pub(crate) fn issue_done(&mut self, budget: Option<Budget>) {
        self.issues_done += 1;
        if let Some(b) = &self.bar {
            b.set_message(format!(
                "{}: issues {}/{}{}",
                self.repo,
                self.issues_done,
                self.issues,
                budget_text(budget)
            ));
        }
    }

    /// A paper finished; `what` says how (`4 issues`, `skipped: ...`).
    pub(crate) fn done(&mut self, repo: &str, what: &str, budget: Option<Budget>) {
        self.done += 1;
        match &self.bar {
            Some(b) => b.inc(1),
            None if self.mode == ProgressMode::Lines => eprintln!(
                "[{}/{} repositories] {repo}: {what}{}",
                self.done,
                self.total,
                budget_text(budget)
            ),
            None => {}
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.abandon();
            eprintln!();
        }
    }
}
