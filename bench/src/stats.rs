//! Percentiles of one run's latencies and medians across runs.

use std::time::Duration;

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
    fn ratios() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
    }
}
