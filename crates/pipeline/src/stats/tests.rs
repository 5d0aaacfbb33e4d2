use super::*;

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(f64::MIN_POSITIVE)
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
fn quartiles_interpolate_between_order_statistics() {
    assert_eq!(quartiles(&mut []), None);
    assert_eq!(quartiles(&mut [f64::NAN]), None);
    assert_eq!(quartiles(&mut [2.0]), Some([2.0, 2.0]));
    // Sorted 1, 2, 3, 4: positions 0.75 and 2.25 → 1.75 and 3.25 (R's type 7).
    assert_eq!(quartiles(&mut [4.0, 1.0, 3.0, 2.0]), Some([1.75, 3.25]));
    // 1..=5: positions 1 and 3 exactly; NaNs left out.
    let mut v = [5.0, f64::NAN, 1.0, 4.0, 2.0, 3.0];
    assert_eq!(quartiles(&mut v), Some([2.0, 4.0]));
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
