//! Pure statistics for `reprorun reproduce`: reproduction rates and classes, the exact
//! McNemar test, medians, and the exponential dependency-drift hazard fit.
//!
//! Nothing here panics on data: empty inputs and NaN give `None` (or the documented neutral
//! value) rather than a panic or a NaN in the output.

use serde::{Deserialize, Serialize};

/// The class of a patch (or a baseline) from its reproduction rate r.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// r = 1: every run gave the recorded outcome.
    Reproducible,
    /// 0 < r < 1: some runs did, some did not.
    Flaky,
    /// r = 0: no run did.
    Broken,
}

impl Class {
    pub const ALL: [Class; 3] = [Class::Reproducible, Class::Flaky, Class::Broken];

    /// The class's name in JSON and in reports: `reproducible`, `flaky`, `broken`.
    pub fn name(self) -> &'static str {
        match self {
            Class::Reproducible => "reproducible",
            Class::Flaky => "flaky",
            Class::Broken => "broken",
        }
    }
}

/// r(π) = (1/k) Σ 1[T_i = T_0]: the share of `results` (each run's `resolved`, T_i) equal
/// to `recorded` (T_0). `None` for no runs.
pub fn reproduction_rate(results: &[bool], recorded: bool) -> Option<f64> {
    if results.is_empty() {
        return None;
    }
    let same = results.iter().filter(|&&t| t == recorded).count();
    Some(same as f64 / results.len() as f64)
}

/// Reproducible if r ≥ 1, flaky if 0 < r < 1, broken otherwise (r ≤ 0, and NaN: a rate that
/// is not a number shows no reproduction).
pub fn classify(r: f64) -> Class {
    if r >= 1.0 {
        Class::Reproducible
    } else if r > 0.0 {
        Class::Flaky
    } else {
        Class::Broken
    }
}

/// The exact two-sided McNemar test on the discordant pairs `b` and `c`: under H0 each
/// discordant pair falls either way with probability 1/2, so
/// p = min(1, 2 · Σ_{i=0}^{min(b,c)} C(n,i) / 2^n) with n = b + c; n = 0 gives 1.
///
/// The sum is accumulated in log space (log C(n,i) by the recurrence
/// log C(n,i) = log C(n,i−1) + ln(n−i+1) − ln i, terms combined with log-sum-exp), so it
/// neither overflows nor loses the small terms for large n; a p-value below the smallest
/// positive f64 comes out as 0. The work is O(min(b, c)).
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    if b == c {
        // The lower tail up to the middle holds at least half the mass.
        return 1.0;
    }
    let m = b.min(c);
    let n = b as f64 + c as f64;
    // Terms increase with i (i ≤ m < n/2), so the running sum is dominated by the latest
    // term: log-sum-exp against the running value stays well conditioned.
    let mut log_term = 0.0_f64; // log C(n, 0)
    let mut log_sum = 0.0_f64;
    let mut i = 1_u64;
    while i <= m {
        let fi = i as f64;
        log_term += (n - fi + 1.0).ln() - fi.ln();
        log_sum = log_add_exp(log_sum, log_term);
        i += 1;
    }
    let log_p = std::f64::consts::LN_2 + log_sum - n * std::f64::consts::LN_2;
    let p = log_p.exp();
    if p.is_nan() {
        return 1.0;
    }
    p.clamp(0.0, 1.0)
}

/// log(e^a + e^b) without overflow.
fn log_add_exp(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// The median of the values that are not NaN (the mean of the two middle ones for an even
/// count); `None` when there are none. Reorders `values` (NaNs end up last).
pub fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(|a, b| a.is_nan().cmp(&b.is_nan()).then(a.total_cmp(b)));
    let n = values.iter().take_while(|v| !v.is_nan()).count();
    if n == 0 {
        return None;
    }
    let mid = n / 2;
    if n % 2 == 1 {
        Some(values[mid])
    } else {
        // Halve first so two huge values do not overflow.
        Some(values[mid - 1] / 2.0 + values[mid] / 2.0)
    }
}

/// An exponential dependency-drift hazard fitted to current-status data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HazardFit {
    /// λ̂, the drift hazard per day (maximum likelihood).
    pub rate_per_day: f64,
    /// ln 2 / λ̂: the age at which half the patches have drifted.
    pub half_life_days: f64,
    /// Lower bound of the 95% Wald interval of the half-life (from the upper bound of λ).
    pub ci_low: f64,
    /// Upper bound of the 95% Wald interval of the half-life (from the lower bound of λ).
    pub ci_high: f64,
    /// Observations used (those with a finite age > 0).
    pub n: u64,
    /// Of those, how many had drifted.
    pub events: u64,
}

/// The 0.975 quantile of the standard normal distribution.
const Z_975: f64 = 1.959_963_984_540_054;

/// Fits P(drifted by age t) = 1 − exp(−λ t) to `(age_days, drifted)` observations: a
/// binomial GLM with complementary log-log link and offset log t, whose intercept is
/// β = log λ. With μ_i = exp(β + log t_i) = λ t_i the log-likelihood is
///
/// ℓ(β) = Σ_{events} log(1 − e^{−μ_i}) − Σ_{non-events} μ_i,
///
/// with score U = Σ_{events} μ_i/(e^{μ_i} − 1) − Σ_{non-events} μ_i and observed information
/// I = Σ_{events} h_i (μ_i/(1 − e^{−μ_i}) − 1) + Σ_{non-events} μ_i, h_i = μ_i/(e^{μ_i} − 1).
/// ℓ is concave in β; Newton–Raphson with step halving finds the maximum. The 95% Wald
/// interval β̂ ± 1.96/√I maps to the half-life ln 2/λ with its bounds swapped.
///
/// Observations with an age that is not a finite number > 0 are left out. `None` when the
/// MLE does not exist in the interior: no usable observation, no event, or every
/// observation an event.
pub fn fit_exponential_hazard(obs: &[(f64, bool)]) -> Option<HazardFit> {
    let data: Vec<(f64, bool)> = obs
        .iter()
        .copied()
        .filter(|(t, _)| t.is_finite() && *t > 0.0)
        .collect();
    let n = data.len() as u64;
    let events = data.iter().filter(|(_, e)| *e).count() as u64;
    if n == 0 || events == 0 || events == n {
        return None;
    }
    let log_t: Vec<(f64, bool)> = data.iter().map(|&(t, e)| (t.ln(), e)).collect();

    // Start from the closed-form MLE for equal ages at the mean age.
    let mean_t = data.iter().map(|(t, _)| t).sum::<f64>() / n as f64;
    let share = events as f64 / n as f64;
    let mut beta = (-(-share).ln_1p() / mean_t).ln();
    if !beta.is_finite() {
        return None;
    }
    let mut ll = log_likelihood(&log_t, beta);
    let mut converged = false;
    for _ in 0..200 {
        let (score, info) = score_info(&log_t, beta);
        if !(score.is_finite() && info.is_finite()) || info <= 0.0 {
            return None;
        }
        let full = score / info;
        if full.abs() < 1e-12 {
            converged = true;
            break;
        }
        // Step halving: take the longest of step, step/2, step/4, ... that does not lower ℓ.
        let mut step = full;
        let mut accepted = false;
        for _ in 0..60 {
            let candidate = beta + step;
            let cand_ll = log_likelihood(&log_t, candidate);
            if cand_ll.is_finite() && cand_ll >= ll - 1e-12 * ll.abs().max(1.0) {
                beta = candidate;
                ll = cand_ll;
                accepted = true;
                break;
            }
            step /= 2.0;
        }
        // No step raises ℓ: by concavity β is the maximum to within rounding.
        if !accepted || step.abs() < 1e-10 {
            converged = true;
            break;
        }
    }
    if !converged {
        return None;
    }
    let (_, info) = score_info(&log_t, beta);
    if !(info.is_finite() && info > 0.0) {
        return None;
    }
    let se = 1.0 / info.sqrt();
    let ln2 = std::f64::consts::LN_2;
    let rate = beta.exp();
    let fit = HazardFit {
        rate_per_day: rate,
        half_life_days: ln2 / rate,
        ci_low: ln2 / (beta + Z_975 * se).exp(),
        ci_high: ln2 / (beta - Z_975 * se).exp(),
        n,
        events,
    };
    let all_finite = [
        fit.rate_per_day,
        fit.half_life_days,
        fit.ci_low,
        fit.ci_high,
    ]
    .iter()
    .all(|v| v.is_finite() && *v > 0.0);
    all_finite.then_some(fit)
}

/// ℓ(β) for observations given as (log t, event).
fn log_likelihood(data: &[(f64, bool)], beta: f64) -> f64 {
    data.iter()
        .map(|&(log_t, event)| {
            let mu = (beta + log_t).exp();
            if event {
                // log(1 − e^{−μ}) = log(−expm1(−μ)); −∞ when μ underflows to 0.
                (-(-mu).exp_m1()).ln()
            } else {
                -mu
            }
        })
        .sum()
}

/// Score U(β) and observed information I(β) = −ℓ''(β).
fn score_info(data: &[(f64, bool)], beta: f64) -> (f64, f64) {
    let mut score = 0.0;
    let mut info = 0.0;
    for &(log_t, event) in data {
        let mu = (beta + log_t).exp();
        if event {
            // h = μ/(e^μ − 1), the event's score; → 1 as μ → 0, → 0 as μ → ∞.
            let h = if mu < 1e-300 { 1.0 } else { mu / mu.exp_m1() };
            // q − 1 with q = μ/(1 − e^{−μ}) = 1 + μ/2 + μ²/12 − …; the series avoids the
            // cancellation for small μ.
            let q_minus_1 = if mu < 1e-4 {
                mu / 2.0 + mu * mu / 12.0
            } else {
                mu / (-(-mu).exp_m1()) - 1.0
            };
            score += h;
            info += h * q_minus_1;
        } else {
            score -= mu;
            info += mu;
        }
    }
    (score, info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(f64::MIN_POSITIVE)
    }

    #[test]
    fn rates() {
        assert_eq!(reproduction_rate(&[], true), None);
        // 3 of 4 runs equal T_0 = true: 3/4.
        assert_eq!(
            reproduction_rate(&[true, true, false, true], true),
            Some(0.75)
        );
        // T_0 = false: the one false run matches: 1/4.
        assert_eq!(
            reproduction_rate(&[true, true, false, true], false),
            Some(0.25)
        );
        assert_eq!(reproduction_rate(&[false; 5], false), Some(1.0));
    }

    #[test]
    fn classes() {
        assert_eq!(classify(1.0), Class::Reproducible);
        assert_eq!(classify(0.2), Class::Flaky);
        assert_eq!(classify(0.999_999), Class::Flaky);
        assert_eq!(classify(0.0), Class::Broken);
        assert_eq!(classify(f64::NAN), Class::Broken);
        assert_eq!(Class::Flaky.name(), "flaky");
        assert_eq!(
            serde_json::to_string(&Class::Reproducible).ok().as_deref(),
            Some("\"reproducible\"")
        );
        for c in Class::ALL {
            assert_eq!(
                serde_json::to_string(&c).ok(),
                Some(format!("\"{}\"", c.name()))
            );
        }
    }

    #[test]
    fn mcnemar_small_by_hand() {
        // n = 0 → 1.
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        // b = 0, c = 5: n = 5, Σ_{i=0}^{0} C(5,i) = 1, p = 2·1/32 = 0.0625.
        assert!(close(mcnemar_exact(0, 5), 0.0625, 1e-12));
        assert!(close(mcnemar_exact(5, 0), 0.0625, 1e-12));
        // b = 1, c = 9: n = 10, C(10,0) + C(10,1) = 11, p = 22/1024 = 0.021484375.
        assert!(close(mcnemar_exact(1, 9), 0.021_484_375, 1e-12));
        // b = 2, c = 20: n = 22, 1 + 22 + 231 = 254, p = 508/4194304 = 0.00012111663818359375.
        assert!(close(
            mcnemar_exact(2, 20),
            0.000_121_116_638_183_593_75,
            1e-12
        ));
        // b = c: 1.
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        assert_eq!(mcnemar_exact(7_000, 7_000), 1.0);
        // b = 2, c = 3: n = 5, 1 + 5 + 10 = 16, 2·16/32 = 1 → capped at 1.
        assert_eq!(mcnemar_exact(2, 3), 1.0);
        // b = 0, c = 1: 2·1/2 = 1.
        assert_eq!(mcnemar_exact(0, 1), 1.0);
    }

    #[test]
    fn mcnemar_matches_exact_integer_arithmetic() {
        // Pascal's triangle in u128 is exact up to n = 120; compare every (b, c) up to n = 60.
        let mut row: Vec<u128> = vec![1];
        for n in 1..=60_u64 {
            let mut next = vec![1_u128; n as usize + 1];
            for i in 1..n as usize {
                next[i] = row[i - 1] + row[i];
            }
            row = next;
            for b in 0..=n {
                let c = n - b;
                let m = b.min(c) as usize;
                let tail: u128 = row[..=m].iter().sum();
                let exact = (2.0 * tail as f64 / 2f64.powi(n as i32)).min(1.0);
                let got = mcnemar_exact(b, c);
                assert!(close(got, exact, 1e-10), "b={b} c={c}: {got} vs {exact}");
            }
        }
    }

    #[test]
    fn mcnemar_large_n() {
        // n = 10 000. Reference values from an exact big-integer evaluation of
        // 2·Σ_{i≤m} C(n,i) / 2^n (independent of this code), checked against the normal
        // approximation with continuity correction: sd = √(n/4) = 50;
        // b = 4950: z = (4950.5 − 5000)/50 = −0.99, 2Φ(−0.99) = 0.3222;
        // b = 4900: z = −1.99, 2Φ(−1.99) = 0.0466; b = 4800: z = −3.99, 2Φ(−3.99) = 6.6e-5.
        assert!(close(
            mcnemar_exact(4950, 5050),
            0.322_174_199_795_312,
            1e-9
        ));
        assert!(close(
            mcnemar_exact(5050, 4950),
            0.322_174_199_795_312,
            1e-9
        ));
        assert!(close(
            mcnemar_exact(4900, 5100),
            0.046_585_527_704_947_39,
            1e-9
        ));
        assert!(close(
            mcnemar_exact(4800, 5200),
            6.593_515_598_672_442e-5,
            1e-8
        ));
        // b = 40, c = 60 (n = 100), same reference: 0.05688793364098079 (normal: z =
        // (40.5 − 50)/5 = −1.9, 2Φ(−1.9) = 0.0574).
        assert!(close(
            mcnemar_exact(40, 60),
            0.056_887_933_640_980_79,
            1e-10
        ));
        // b = 0, c = 10 000: 2/2^10000 underflows to 0, not NaN.
        assert_eq!(mcnemar_exact(0, 10_000), 0.0);
        assert_eq!(mcnemar_exact(100, 9_900), 0.0);
        // Huge counts neither overflow n = b + c nor give NaN.
        let p = mcnemar_exact(0, u64::MAX);
        assert!(p == 0.0, "{p}");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [f64::NAN]), None);
        assert_eq!(median(&mut [3.0]), Some(3.0));
        // Sorted 1, 2, 3: middle 2.
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        // Sorted 1, 2, 4, 10: (2 + 4)/2 = 3.
        assert_eq!(median(&mut [10.0, 2.0, 1.0, 4.0]), Some(3.0));
        // NaNs are left out: median of 1, 5 = 3.
        assert_eq!(median(&mut [f64::NAN, 5.0, 1.0, f64::NAN]), Some(3.0));
        assert_eq!(median(&mut [f64::MAX, f64::MAX]), Some(f64::MAX));
        assert_eq!(median(&mut [-1.0, f64::NEG_INFINITY, 2.0]), Some(-1.0));
    }

    #[test]
    fn hazard_not_estimable() {
        assert_eq!(fit_exponential_hazard(&[]), None);
        // No usable age.
        assert_eq!(fit_exponential_hazard(&[(0.0, true), (-3.0, false)]), None);
        assert_eq!(
            fit_exponential_hazard(&[(f64::NAN, true), (f64::INFINITY, false)]),
            None
        );
        // No event / all events: the MLE is at the boundary.
        assert_eq!(
            fit_exponential_hazard(&[(10.0, false), (20.0, false)]),
            None
        );
        assert_eq!(fit_exponential_hazard(&[(10.0, true), (20.0, true)]), None);
        // Unusable ages are left out before that check: one usable event only.
        assert_eq!(fit_exponential_hazard(&[(10.0, true), (0.0, false)]), None);
    }

    #[test]
    fn hazard_equal_ages_by_hand() {
        // n = 10 at t = 100 days, 3 drifted: p̂ = 0.3 and 1 − e^{−λt} = p̂ gives
        // λ̂ = −ln(0.7)/100 = 0.35667494393873245/100 = 0.0035667494393873245,
        // half-life = ln 2/λ̂ = 100 · 0.6931471805599453/0.35667494393873245 = 194.33582098747314.
        // Information at the MLE (μ = λ̂t = −ln 0.7): I = n(1−p)μ²/p
        // = 10 · 0.7 · 0.127217...(= μ²)/0.3 = 2.9683970314529518, SE = 1/√I = 0.5804155052681998,
        // CI = ln2/exp(β̂ ± 1.96·SE) = [62.30204262480026, 606.1825540185699].
        let mut obs = vec![(100.0, false); 7];
        obs.extend([(100.0, true); 3]);
        let fit = fit_exponential_hazard(&obs);
        let Some(fit) = fit else {
            panic!("no fit");
        };
        assert!(
            close(fit.rate_per_day, 0.003_566_749_439_387_324_5, 1e-9),
            "{fit:?}"
        );
        assert!(
            close(fit.half_life_days, 194.335_820_987_473_14, 1e-9),
            "{fit:?}"
        );
        assert!(close(fit.ci_low, 62.302_042_624_800_26, 1e-7), "{fit:?}");
        assert!(close(fit.ci_high, 606.182_554_018_569_9, 1e-7), "{fit:?}");
        assert_eq!((fit.n, fit.events), (10, 3));
    }

    /// splitmix64, for reproducible synthetic data.
    struct SplitMix(u64);

    impl SplitMix {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        /// Uniform in [0, 1).
        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn hazard_recovers_synthetic_half_life() {
        let true_half_life = 300.0;
        let lambda = std::f64::consts::LN_2 / true_half_life;
        for seed in [1_u64, 2, 3, 42] {
            let mut rng = SplitMix(seed);
            let obs: Vec<(f64, bool)> = (0..2000)
                .map(|_| {
                    let age = 1.0 + (rng.next() % 1000) as f64; // 1..=1000 days
                    let drifted = rng.unit() < 1.0 - (-lambda * age).exp();
                    (age, drifted)
                })
                .collect();
            let Some(fit) = fit_exponential_hazard(&obs) else {
                panic!("seed {seed}: no fit");
            };
            assert!(
                fit.ci_low < true_half_life && true_half_life < fit.ci_high,
                "seed {seed}: {fit:?}"
            );
            assert!(
                (fit.half_life_days - true_half_life).abs() < 0.15 * true_half_life,
                "seed {seed}: {fit:?}"
            );
            assert!(fit.ci_low < fit.half_life_days && fit.half_life_days < fit.ci_high);
            assert_eq!(fit.n, 2000);
        }
    }

    #[test]
    fn hazard_extreme_ages_stay_finite() {
        // Very young events and very old non-events pull λ in both directions; the fit must
        // still converge to finite numbers.
        let obs = [
            (1e-6, true),
            (1e6, false),
            (5.0, true),
            (3.0, false),
            (1e5, true),
        ];
        let Some(fit) = fit_exponential_hazard(&obs) else {
            panic!("no fit");
        };
        assert!(
            fit.rate_per_day.is_finite() && fit.rate_per_day > 0.0,
            "{fit:?}"
        );
        assert!(fit.ci_low <= fit.half_life_days && fit.half_life_days <= fit.ci_high);
    }
}
