//! The paper-level bootstrap of the headline rates: papers resampled with replacement,
//! each draw's rates averaged over repeats, percentile intervals.

use std::collections::BTreeMap;

use super::{over_repeats, repeat_fpr, repeat_rates, Options, Prepared, RepeatView};

/// One statistic of a draw, per repeat.
type Stat<'a> = Box<dyn Fn(&RepeatView) -> Option<f64> + 'a>;

/// The headline statistics' names, for `ci95`.
fn ci_names(k: u32) -> [String; 5] {
    [
        format!("issue_em_{k}"),
        format!("issue_sm_{k}"),
        format!("paper_any_sm_{k}"),
        "fpr_exact".into(),
        "fpr_exact_or_semantic".into(),
    ]
}

/// The i-th uniform index below `n` of the stream `seed` (splitmix64 of a counter: a
/// fixed, documented stream that no crate update can change, so a seed gives the same
/// intervals forever).
fn draw(seed: u64, i: u64, n: usize) -> usize {
    let x = reprorun_runtime::determinism::mix::splitmix64(
        seed.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
    );
    ((u128::from(x) * n as u128) >> 64) as usize
}

/// The `q` quantile of sorted values, linearly interpolated.
fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

/// Percentile 95% intervals of the headline rates: papers (with hidden issues) resampled
/// with replacement, each draw's rate the mean over repeats.
pub(super) fn bootstrap(p: &Prepared, k: u32, o: Options) -> BTreeMap<String, Option<[f64; 2]>> {
    let names = ci_names(k);
    let mut samples: [Vec<f64>; 5] = Default::default();
    let n = p.papers.len();
    // A post-fix paper's index among `post_fix_papers`, by paper index.
    let fix_of: Vec<Option<usize>> = p
        .papers
        .iter()
        .map(|(id, _)| p.post_fix_papers.iter().position(|(q, _)| q == id))
        .collect();
    if n > 0 && !p.views.is_empty() {
        for b in 0..u64::from(o.bootstrap) {
            let picks: Vec<usize> = (0..n as u64)
                .map(|j| draw(o.seed, b * n as u64 + j, n))
                .collect();
            let papers: Vec<&[usize]> = picks.iter().map(|&i| p.papers[i].1.as_slice()).collect();
            let fixed: Vec<usize> = picks.iter().filter_map(|&i| fix_of[i]).collect();
            let stats: [Stat; 5] = [
                Box::new(|v| repeat_rates(v, &papers, Some(k))[0]),
                Box::new(|v| repeat_rates(v, &papers, Some(k))[1]),
                Box::new(|v| repeat_rates(v, &papers, Some(k))[3]),
                Box::new(|v| repeat_fpr(v, &fixed).0),
                Box::new(|v| repeat_fpr(v, &fixed).1),
            ];
            for (s, f) in samples.iter_mut().zip(&stats) {
                if let Some(x) = over_repeats(p, f).0 {
                    s.push(x);
                }
            }
        }
    }
    names
        .into_iter()
        .zip(samples)
        .map(|(name, mut s)| {
            s.sort_by(f64::total_cmp);
            let ci = quantile(&s, 0.025)
                .zip(quantile(&s, 0.975))
                .map(|(a, b)| [a, b]);
            (name, ci)
        })
        .collect()
}
