//! Pure statistics a study's report uses, whatever the pipeline: the exact McNemar test,
//! medians, and an exponential hazard fitted to current-status data (the dependency-drift
//! half-life).
//!
//! Nothing here panics on data: empty inputs and NaN give `None` (or the documented neutral
//! value) rather than a panic or a NaN in the output.

use serde::{Deserialize, Serialize};

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

/// The 25th and 75th percentiles of the values that are not NaN (linear interpolation
/// between order statistics, as R's default and numpy's); `None` when there are none.
/// Reorders `values`.
pub fn quartiles(values: &mut [f64]) -> Option<[f64; 2]> {
    values.sort_by(|a, b| a.is_nan().cmp(&b.is_nan()).then(a.total_cmp(b)));
    let n = values.iter().take_while(|v| !v.is_nan()).count();
    if n == 0 {
        return None;
    }
    let at = |q: f64| {
        let h = q * (n - 1) as f64;
        let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
        values[lo] + (h - lo as f64) * (values[hi] - values[lo])
    };
    Some([at(0.25), at(0.75)])
}

/// An exponential hazard (dependency drift, in reproduce) fitted to current-status data.
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
mod tests;
