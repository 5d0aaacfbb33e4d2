//! Threads kept for the next connection (issue 50): the proxy served every connection with a
//! thread made for it (and the supervisor decided every request in another, and a terminated
//! connection did the upstream's handshake in a third), so a small request paid for making
//! and ending up to three threads. A [`Workers`] keeps a thread that finished its job
//! waiting for the next one, for a while and up to a number; a job with no thread waiting
//! gets a new one. What bounds the work is unchanged: the callers count their jobs (the
//! connection caps), and a job never waits for a free thread. The supervisor's deciding
//! threads use it; the helper's connection threads take turns accepting instead (`accept`).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::lock;

/// One job: a closure run once on a worker.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Threads kept waiting at most, and how long one waits for a job before it ends.
const KEEP: usize = 16;
const LINGER: Duration = Duration::from_secs(10);

/// A set of threads that run jobs and wait for more.
pub(super) struct Workers {
    name: &'static str,
    stack: usize,
    queue: Arc<Queue>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    ready: Condvar,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Threads waiting for a job.
    idle: usize,
    /// No more jobs: waiting threads end.
    closed: bool,
}

impl Workers {
    pub(super) fn new(name: &'static str, stack: usize) -> Workers {
        Workers {
            name,
            stack,
            queue: Arc::default(),
            threads: Mutex::new(Vec::new()),
        }
    }

    /// Runs `job` on a waiting thread, or on a new one when none waits. An error: no thread
    /// could be made (the job did not run), or the set is closed.
    pub(super) fn run(&self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        {
            let mut st = lock(&self.queue.state);
            if st.closed {
                return Err(std::io::Error::other("stopping"));
            }
            // Every job queued has a waiting thread of its own.
            if st.idle > st.jobs.len() {
                st.jobs.push_back(Box::new(job));
                self.queue.ready.notify_one();
                return Ok(());
            }
        }
        let queue = Arc::clone(&self.queue);
        let handle = std::thread::Builder::new()
            .name(self.name.into())
            .stack_size(self.stack)
            .spawn(move || {
                job();
                serve(&queue);
            })?;
        let mut threads = lock(&self.threads);
        threads.retain(|t| !t.is_finished());
        threads.push(handle);
        Ok(())
    }

    /// Lets every job end, then ends and joins every thread. Not on drop: a job may hold
    /// the last reference to what holds the set, and a thread cannot join itself.
    pub(super) fn join(&self) {
        lock(&self.queue.state).closed = true;
        self.queue.ready.notify_all();
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
    }
}

/// A worker after its first job: takes the next ones until none comes for [`LINGER`], the
/// set is closed, or [`KEEP`] threads already wait.
fn serve(queue: &Queue) {
    let mut st = lock(&queue.state);
    loop {
        if let Some(job) = st.jobs.pop_front() {
            drop(st);
            job();
            st = lock(&queue.state);
            continue;
        }
        if st.closed || st.idle >= KEEP {
            return;
        }
        st.idle += 1;
        let (next, timeout) = queue
            .ready
            .wait_timeout_while(st, LINGER, |s| s.jobs.is_empty() && !s.closed)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        st = next;
        st.idle -= 1;
        if timeout.timed_out() && st.jobs.is_empty() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    #[test]
    fn a_thread_that_finished_runs_the_next_job() {
        let w = Workers::new("t", 64 * 1024);
        let (tx, rx) = mpsc::channel();
        let mut ran_on = std::collections::HashSet::new();
        for _ in 0..20 {
            let tx = tx.clone();
            w.run(move || tx.send(std::thread::current().id()).unwrap())
                .unwrap();
            // Wait for it, so that its thread is waiting again when the next comes.
            ran_on.insert(rx.recv().unwrap());
            while lock(&w.queue.state).idle == 0 {
                std::thread::yield_now();
            }
        }
        // One thread made, reused 19 times.
        assert_eq!(ran_on.len(), 1);
        assert_eq!(lock(&w.threads).len(), 1);
        w.join();
    }

    #[test]
    fn jobs_run_at_once_whatever_the_others_do_and_join_waits_for_all() {
        let w = Workers::new("t", 64 * 1024);
        let done = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        // 30 jobs that all wait for one another: they only end if each got a thread.
        for _ in 0..30 {
            let (done, gate) = (Arc::clone(&done), Arc::clone(&gate));
            w.run(move || {
                let (m, cv) = &*gate;
                let started = done.fetch_add(1, Ordering::SeqCst) + 1;
                let mut open = m.lock().unwrap();
                if started == 30 {
                    *open = true;
                    cv.notify_all();
                }
                while !*open {
                    open = cv.wait(open).unwrap();
                }
            })
            .unwrap();
        }
        w.join();
        assert_eq!(done.load(Ordering::SeqCst), 30);
        assert!(lock(&w.threads).is_empty());
        assert!(w.run(|| {}).is_err(), "closed");
    }
}
