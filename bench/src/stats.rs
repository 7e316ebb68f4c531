//! Percentiles of latency samples (nearest rank), in milliseconds.

use serde::{Deserialize, Serialize};

/// p50, p99 and max of a set of samples, with their count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The `p`-th percentile (0 < p <= 100) of `sorted` by the nearest-rank method: the smallest
/// sample such that at least p % of the samples are at most it. `None` when empty.
pub fn nearest_rank(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    sorted.get(index).copied()
}

impl Percentiles {
    /// Of `samples_ms` (any order); all zero when there are none.
    pub fn of(samples_ms: &[f64]) -> Self {
        let mut sorted: Vec<f64> = samples_ms
            .iter()
            .copied()
            .filter(|s| s.is_finite())
            .collect();
        sorted.sort_by(f64::total_cmp);
        Self {
            count: sorted.len(),
            p50_ms: nearest_rank(&sorted, 50.0).unwrap_or_default(),
            p99_ms: nearest_rank(&sorted, 99.0).unwrap_or_default(),
            max_ms: sorted.last().copied().unwrap_or_default(),
        }
    }
}

/// The median of `samples` (the mean of the two middle ones when their count is even), zero
/// when there is none; non-finite samples are left out.
pub fn median(samples: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    match sorted.len() {
        0 => 0.0,
        len if len % 2 == 1 => sorted[mid],
        _ => (sorted[mid - 1] + sorted[mid]) / 2.0,
    }
}

/// `measured / floor`, or infinity when the floor is zero (nothing to compare against).
pub fn ratio(measured: f64, floor: f64) -> f64 {
    if floor > 0.0 {
        measured / floor
    } else {
        f64::INFINITY
    }
}

/// `count / per`, zero when `per` is zero.
pub fn per(count: u64, per: u64) -> f64 {
    if per == 0 {
        0.0
    } else {
        count as f64 / per as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_picks_the_sample_at_the_rank() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&sorted, 50.0), Some(50.0));
        assert_eq!(nearest_rank(&sorted, 99.0), Some(99.0));
        assert_eq!(nearest_rank(&sorted, 100.0), Some(100.0));
        assert_eq!(nearest_rank(&[7.0], 99.0), Some(7.0));
        assert_eq!(nearest_rank(&[], 50.0), None);
        // Ten samples: p99 is the largest (rank ceil(9.9) = 10), p50 the fifth.
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(nearest_rank(&ten, 99.0), Some(10.0));
        assert_eq!(nearest_rank(&ten, 50.0), Some(5.0));
    }

    #[test]
    fn percentiles_sort_and_skip_non_finite() {
        let p = Percentiles::of(&[3.0, 1.0, f64::NAN, 2.0, 10.0]);
        assert_eq!(p.count, 4);
        assert_eq!(p.p50_ms, 2.0);
        assert_eq!(p.p99_ms, 10.0);
        assert_eq!(p.max_ms, 10.0);
        assert_eq!(Percentiles::of(&[]), Percentiles::default());
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[5.0, f64::NAN]), 5.0);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn ratios_and_rates() {
        assert_eq!(ratio(12.0, 10.0), 1.2);
        assert!(ratio(1.0, 0.0).is_infinite());
        assert_eq!(per(6, 3), 2.0);
        assert_eq!(per(6, 0), 0.0);
    }
}
