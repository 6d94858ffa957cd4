//! The TAS scheduler's own decision-time histogram
//! (`tas_scheduler_decision_duration_seconds`, filter + score of one decision), read
//! from its `/metrics` at the end of a run: the in-cluster counterpart of the criterion
//! figure. The parser takes the exposition text, so it is tested on fixed strings.

use std::net::SocketAddr;

use tas_testcluster::TestCluster;

/// The histogram's name in the exposition (without `_bucket`/`_sum`/`_count`).
pub const DECISION_HISTOGRAM: &str = "tas_scheduler_decision_duration_seconds";

/// What the histogram says about a run's decisions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecisionTimes {
    /// Decisions counted.
    pub count: u64,
    /// Mean, seconds (`_sum / _count`).
    pub mean: f64,
    /// Median, seconds, interpolated within its bucket (as PromQL's
    /// `histogram_quantile` does).
    pub p50: f64,
    /// 99th percentile, seconds, interpolated the same way.
    pub p99: f64,
}

/// A histogram as exposed: buckets (upper bound, cumulative count), sum and count.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// (upper bound, cumulative count), ascending; the last bound is `+Inf`.
    pub buckets: Vec<(f64, u64)>,
    /// Sum of the observations.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

/// Histogram `name` in the Prometheus/OpenMetrics text `text`.
pub fn parse_histogram(text: &str, name: &str) -> Option<Histogram> {
    let mut buckets = Vec::new();
    let (mut sum, mut count) = (None, None);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        if let Some(labels) = key.strip_prefix(&format!("{name}_bucket")) {
            let le = labels.split("le=\"").nth(1)?.split('"').next()?;
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            buckets.push((bound, value.parse::<f64>().ok()? as u64));
        } else if key == format!("{name}_sum") {
            sum = value.parse().ok();
        } else if key == format!("{name}_count") {
            count = value.parse::<f64>().ok().map(|c| c as u64);
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    Some(Histogram {
        buckets,
        sum: sum?,
        count: count?,
    })
}

/// The `q`-quantile from cumulative `buckets`, interpolated linearly within the bucket
/// (the lowest bucket from 0; a quantile in the `+Inf` bucket is the highest finite
/// bound). `None` without observations.
pub fn bucket_quantile(buckets: &[(f64, u64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut lower = (0.0, 0u64);
    for &(bound, cumulative) in buckets {
        if cumulative as f64 >= rank {
            if bound.is_infinite() {
                return Some(lower.0);
            }
            let in_bucket = (cumulative - lower.1) as f64;
            let fraction = if in_bucket > 0.0 {
                (rank - lower.1 as f64) / in_bucket
            } else {
                1.0
            };
            return Some(lower.0 + (bound - lower.0) * fraction);
        }
        lower = (bound, cumulative);
    }
    Some(lower.0)
}

/// The decision times in the exposition `text`.
pub fn decision_times(text: &str) -> Option<DecisionTimes> {
    let Histogram {
        buckets,
        sum,
        count,
    } = parse_histogram(text, DECISION_HISTOGRAM)?;
    (count > 0).then(|| DecisionTimes {
        count,
        mean: sum / count as f64,
        p50: bucket_quantile(&buckets, 0.5).unwrap_or(f64::NAN),
        p99: bucket_quantile(&buckets, 0.99).unwrap_or(f64::NAN),
    })
}

/// Reads the TAS scheduler's `/metrics` on `127.0.0.1:port` (TLS, the cluster admin's
/// token) and returns its decision times; `None` if it cannot be read.
pub async fn scrape_tas_decisions(cluster: &TestCluster, port: u16) -> Option<DecisionTimes> {
    let token = cluster.admin_token().ok()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    match tas_testcluster::https_get(addr, "/metrics", Some(&token)).await {
        Ok((200, text)) => decision_times(&text),
        Ok((code, _)) => {
            eprintln!("tas-bench: the scheduler's /metrics answered {code}");
            None
        }
        Err(e) => {
            eprintln!("tas-bench: reading the scheduler's /metrics: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP tas_scheduler_decision_duration_seconds Filter + score\n\
# TYPE tas_scheduler_decision_duration_seconds histogram\n\
tas_scheduler_decision_duration_seconds_sum 0.5\n\
tas_scheduler_decision_duration_seconds_count 1000\n\
tas_scheduler_decision_duration_seconds_bucket{le=\"0.0001\"} 0\n\
tas_scheduler_decision_duration_seconds_bucket{le=\"0.00025\"} 200\n\
tas_scheduler_decision_duration_seconds_bucket{le=\"0.0005\"} 600\n\
tas_scheduler_decision_duration_seconds_bucket{le=\"0.001\"} 980\n\
tas_scheduler_decision_duration_seconds_bucket{le=\"+Inf\"} 1000\n\
tas_scheduler_queue_depth 0\n";

    #[test]
    fn histogram_is_parsed_and_interpolated() {
        let h = parse_histogram(TEXT, DECISION_HISTOGRAM).unwrap();
        assert_eq!(h.buckets.len(), 5);
        assert_eq!((h.sum, h.count), (0.5, 1000));
        let d = decision_times(TEXT).unwrap();
        assert_eq!(d.count, 1000);
        assert!((d.mean - 0.0005).abs() < 1e-12);
        // Rank 500 lies in (0.25 ms, 0.5 ms]: 300 of its 400 observations.
        assert!((d.p50 - 0.000_437_5).abs() < 1e-9, "{}", d.p50);
        // Rank 990 is in +Inf: the highest finite bound.
        assert_eq!(d.p99, 0.001);
    }

    #[test]
    fn no_histogram_or_no_observations() {
        assert_eq!(decision_times("tas_scheduler_queue_depth 0\n"), None);
        let empty = "tas_scheduler_decision_duration_seconds_sum 0\n\
tas_scheduler_decision_duration_seconds_count 0\n\
tas_scheduler_decision_duration_seconds_bucket{le=\"+Inf\"} 0\n";
        assert_eq!(decision_times(empty), None);
        assert_eq!(bucket_quantile(&[], 0.5), None);
    }
}
