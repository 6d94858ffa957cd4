//! Percentiles of one run's latencies, binds per second, and medians with min–max
//! across runs.

use std::time::Duration;

use tokio::time::Instant;

/// The `q`-quantile (0 < q ≤ 1) of `sorted` by the nearest-rank method: the smallest
/// sample with at least `q` of all samples at or below it. `None` when empty.
pub fn percentile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The median of `values` (the mean of the two middle ones for an even count); `None`
/// when empty or when a value is NaN.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// `a / b`, if both are finite and `b` is not zero.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && b != 0.0).then(|| a / b)
}

/// The `q`-quantile of unsorted `values` by the nearest-rank method (as
/// [`percentile`]); `None` when empty or when a value is NaN.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Binds in each whole second after the first bind (`offsets` from it, any order),
/// as scheduler_perf samples its throughput: second `k` counts the offsets in
/// `[k, k+1)` s. The last, partial second is left out unless it is the only one.
pub fn second_buckets(offsets: &[Duration]) -> Vec<f64> {
    let Some(last) = offsets.iter().max() else {
        return Vec::new();
    };
    let whole = last.as_secs() as usize;
    let mut counts = vec![0.0; whole + 1];
    for offset in offsets {
        counts[offset.as_secs() as usize] += 1.0;
    }
    if whole > 0 {
        counts.truncate(whole);
    }
    counts
}

/// [`second_buckets`] of bind instants, counted from the earliest.
pub fn per_second_counts(binds: &[Instant]) -> Vec<f64> {
    let Some(first) = binds.iter().min() else {
        return Vec::new();
    };
    let offsets: Vec<Duration> = binds.iter().map(|b| b.duration_since(*first)).collect();
    second_buckets(&offsets)
}

/// The median of several runs with the lowest and highest value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median.
    pub median: f64,
    /// Lowest.
    pub min: f64,
    /// Highest.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when empty or when a value is NaN.
    pub fn of(values: &[f64]) -> Option<Self> {
        let median = median(values)?;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Self { median, min, max })
    }

    /// `median (min–max)` with `format` for each number; only the median for one run
    /// or when all runs agree.
    pub fn render(&self, format: fn(f64) -> String) -> String {
        let (median, min, max) = (format(self.median), format(self.min), format(self.max));
        if min == max {
            median
        } else {
            format!("{median} ({min}–{max})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn nearest_rank_percentiles() {
        let samples = ms(&(1..=100).collect::<Vec<_>>());
        assert_eq!(percentile(&samples, 0.5), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&samples, 0.99), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&samples, 1.0), Some(Duration::from_millis(100)));
        let three = ms(&[10, 20, 30]);
        assert_eq!(percentile(&three, 0.5), Some(Duration::from_millis(20)));
        assert_eq!(percentile(&three, 0.99), Some(Duration::from_millis(30)));
        assert_eq!(percentile(&ms(&[7]), 0.01), Some(Duration::from_millis(7)));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn quantiles_of_unsorted_values() {
        let v = [5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(quantile(&v, 0.5), Some(5.0));
        assert_eq!(quantile(&v, 0.9), Some(9.0));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[1.0, f64::NAN], 0.5), None);
    }

    #[test]
    fn binds_are_counted_per_whole_second() {
        // 3 binds in second 0, 1 in second 1, 0 in second 2, the partial second 3 dropped.
        let offsets = ms(&[0, 100, 999, 1500, 3200]);
        assert_eq!(second_buckets(&offsets), vec![3.0, 1.0, 0.0]);
        // All within the first second: that second counts.
        assert_eq!(second_buckets(&ms(&[0, 10, 20])), vec![3.0]);
        assert!(second_buckets(&[]).is_empty());
        let start = Instant::now();
        let binds = [
            start + Duration::from_millis(1200),
            start,
            start + Duration::from_millis(2500),
        ];
        assert_eq!(per_second_counts(&binds), vec![1.0, 1.0]);
    }

    #[test]
    fn spreads_show_median_and_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 5.0, 4.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert_eq!(s.render(|v| format!("{v:.1}")), "3.0 (1.0–5.0)");
        assert_eq!(
            Spread::of(&[2.0]).unwrap().render(|v| format!("{v:.0}")),
            "2"
        );
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
    }
}
