//! The notification server's CPU time, charged to the sandbox. The server thread runs in the
//! supervisor, outside the sandbox's cgroup, so a workload that floods it with routed calls
//! (64 threads calling `uname` in a loop) would spend host CPU beyond `--cpus-quota`. After
//! each answer the server reads its own thread's CPU clock (one `clock_gettime`) and, when it
//! has used more than the sandbox's rate allows, sleeps until it is back within it: a token
//! bucket of CPU time, filled at the rate (the quota in CPUs) and holding at most
//! [`Throttle::BURST`], so short bursts (a start-up, an exec) never wait. Sleeping before the
//! next answer makes the callers wait: the flood is slowed to what the quota pays for.
//!
//! Without `--cpus-quota` the rate is the sandbox's `--cpus` count, which one thread cannot
//! exceed: then nothing is read or charged at all.

use std::time::{Duration, Instant};

use nix::time::{clock_gettime, ClockId};

/// The serving thread's CPU budget.
#[derive(Debug)]
pub(crate) struct Throttle {
    /// CPU time per wall time allowed, in thousandths of a CPU; `None`: unbounded (a CPU or
    /// more: one thread cannot use more).
    rate_milli: Option<u64>,
    /// CPU time the thread may still use before it sleeps, in ns (negative: owed).
    credit_ns: i64,
    last_cpu_ns: i64,
    last_wall: Instant,
}

impl Throttle {
    /// CPU time the thread may use at once beyond its rate.
    pub(crate) const BURST: Duration = Duration::from_millis(100);

    /// A budget of `rate_milli` thousandths of a CPU (the sandbox's quota, or its CPU count
    /// times 1000), starting from the calling thread's CPU time now.
    pub(crate) fn new(rate_milli: u64) -> Throttle {
        let rate_milli = (rate_milli < 1000).then_some(rate_milli.max(1));
        Throttle {
            rate_milli,
            credit_ns: Self::BURST.as_nanos() as i64,
            last_cpu_ns: if rate_milli.is_some() {
                thread_cpu_ns()
            } else {
                0
            },
            last_wall: Instant::now(),
        }
    }

    /// After an answer: charges the thread's CPU time since the last call and sleeps while
    /// it is over budget.
    pub(crate) fn pace(&mut self) {
        if self.rate_milli.is_none() {
            return;
        }
        let wait = self.charge(thread_cpu_ns(), Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }

    /// Charges CPU time up to `cpu_ns` (the thread's clock) at wall time `now`; returns how
    /// long to sleep to pay what is owed (the sleep itself is credited at the next charge).
    fn charge(&mut self, cpu_ns: i64, now: Instant) -> Duration {
        let Some(rate) = self.rate_milli else {
            return Duration::ZERO;
        };
        let wall_ns = now.saturating_duration_since(self.last_wall).as_nanos();
        let earned = (wall_ns.saturating_mul(u128::from(rate)) / 1000).min(i64::MAX as u128);
        let burst = Self::BURST.as_nanos() as i64;
        let spent = cpu_ns.saturating_sub(self.last_cpu_ns).max(0);
        self.credit_ns = self
            .credit_ns
            .saturating_add(earned as i64)
            .min(burst)
            .saturating_sub(spent);
        self.last_cpu_ns = cpu_ns;
        self.last_wall = now;
        if self.credit_ns >= 0 {
            return Duration::ZERO;
        }
        let owed = self.credit_ns.unsigned_abs();
        Duration::from_nanos(owed.saturating_mul(1000) / rate)
    }
}

/// The calling thread's CPU time, in ns (0 if the clock cannot be read).
fn thread_cpu_ns() -> i64 {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(0, |t| {
        t.tv_sec()
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn at(t: &Throttle, ms: u64) -> Instant {
        t.last_wall + Duration::from_millis(ms)
    }

    #[test]
    fn a_burst_is_free_then_the_rate_holds() {
        let mut t = Throttle::new(50); // 0.05 CPU
        let start = t.last_cpu_ns;
        let now = at(&t, 0);
        // 100 ms of CPU at once: within the burst.
        assert_eq!(t.charge(start + 100 * MS, now), Duration::ZERO);
        // 10 ms more: owed, paid back by 10 / 0.05 = 200 ms of sleep.
        assert_eq!(t.charge(start + 110 * MS, now), Duration::from_millis(200));
        // After that sleep the debt is paid: a further 5 ms needs 100 ms more.
        let later = now + Duration::from_millis(200);
        assert_eq!(
            t.charge(start + 115 * MS, later),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn idle_time_refills_only_up_to_the_burst() {
        let mut t = Throttle::new(500);
        let start = t.last_cpu_ns;
        // An hour idle earns no more than the burst.
        let late = at(&t, 3_600_000);
        assert_eq!(t.charge(start + 100 * MS, late), Duration::ZERO);
        assert_eq!(t.charge(start + 150 * MS, late), Duration::from_millis(100));
    }

    #[test]
    fn the_thread_keeps_within_its_rate_over_a_flood() {
        // Answers of 1 ms each, one after the other, sleeping as told: over 10 s of wall
        // time the CPU spent is the rate's share plus the burst.
        let mut t = Throttle::new(100);
        let (start_cpu, start) = (t.last_cpu_ns, t.last_wall);
        let (mut cpu, mut now) = (start_cpu, start);
        while now < start + Duration::from_secs(10) {
            cpu += MS;
            now += Duration::from_millis(1);
            now += t.charge(cpu, now);
        }
        // 0.1 CPU over 10 s is 1000 ms, plus the 100 ms burst (and one answer's overshoot).
        let used_ms = (cpu - start_cpu) / MS;
        assert!((1050..=1110).contains(&used_ms), "{used_ms} ms");
    }

    #[test]
    fn a_cpu_or_more_is_never_charged() {
        let mut t = Throttle::new(2000);
        assert_eq!(t.rate_milli, None);
        assert_eq!(t.charge(i64::MAX, at(&t, 0)), Duration::ZERO);
        t.pace(); // reads no clock, never sleeps
    }
}
