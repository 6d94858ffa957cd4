//! The criterion micro-benchmark figures as a markdown table: every
//! `<dir>/**/new/estimates.json` (the latest `cargo bench` of each benchmark), named by
//! the `full_id` of the `benchmark.json` next to it.

use std::path::Path;

use serde::Deserialize;

/// One benchmark's latest estimates, in nanoseconds per iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// `group/function/parameter`.
    pub id: String,
    /// Median time.
    pub median_ns: f64,
    /// 95% confidence interval of the median.
    pub median_ci_ns: (f64, f64),
    /// Mean time.
    pub mean_ns: f64,
    /// Elements or bytes per iteration, when the benchmark declares a throughput.
    pub elements: Option<u64>,
}

#[derive(Deserialize)]
struct Estimates {
    mean: Statistic,
    median: Statistic,
}

#[derive(Deserialize)]
struct Statistic {
    point_estimate: f64,
    confidence_interval: Interval,
}

#[derive(Deserialize)]
struct Interval {
    lower_bound: f64,
    upper_bound: f64,
}

#[derive(Deserialize)]
struct BenchmarkId {
    full_id: String,
    #[serde(default)]
    throughput: Option<serde_json::Value>,
}

/// Parses one benchmark from its `new/estimates.json` and `new/benchmark.json` texts.
pub fn parse(estimates: &str, benchmark: &str) -> Result<Estimate, serde_json::Error> {
    let e: Estimates = serde_json::from_str(estimates)?;
    let b: BenchmarkId = serde_json::from_str(benchmark)?;
    let elements = b
        .throughput
        .as_ref()
        .and_then(|t| t.get("Elements").or_else(|| t.get("Bytes")))
        .and_then(serde_json::Value::as_u64);
    Ok(Estimate {
        id: b.full_id,
        median_ns: e.median.point_estimate,
        median_ci_ns: (
            e.median.confidence_interval.lower_bound,
            e.median.confidence_interval.upper_bound,
        ),
        mean_ns: e.mean.point_estimate,
        elements,
    })
}

/// Every benchmark under `dir`, sorted by id; unreadable ones are skipped.
pub fn collect(dir: &Path) -> Vec<Estimate> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|n| n == "new") {
                if let Some(estimate) = read(&path) {
                    found.push(estimate);
                }
            } else if !path
                .file_name()
                .is_some_and(|n| n == "base" || n == "change" || n == "report")
            {
                stack.push(path);
            }
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found
}

fn read(new_dir: &Path) -> Option<Estimate> {
    let estimates = std::fs::read_to_string(new_dir.join("estimates.json")).ok()?;
    let benchmark = std::fs::read_to_string(new_dir.join("benchmark.json")).ok()?;
    parse(&estimates, &benchmark).ok()
}

/// A duration in ns, in the unit that keeps 3 significant digits readable.
pub fn format_ns(ns: f64) -> String {
    let (value, unit) = match ns {
        n if n >= 1e9 => (n / 1e9, "s"),
        n if n >= 1e6 => (n / 1e6, "ms"),
        n if n >= 1e3 => (n / 1e3, "µs"),
        n => (n, "ns"),
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {unit}")
}

/// The markdown section for `estimates`.
pub fn render(estimates: &[Estimate]) -> String {
    let mut out = String::from("## Micro-benchmarks (criterion)\n\n");
    if estimates.is_empty() {
        out.push_str("No criterion results found (run `cargo bench` first).\n");
        return out;
    }
    out.push_str("Median time per iteration of the latest `cargo bench` run, with its 95% confidence interval.\n\n");
    out.push_str("| Benchmark | median | 95% CI | mean | per element |\n| --- | ---: | ---: | ---: | ---: |\n");
    for e in estimates {
        let per_element = e
            .elements
            .filter(|&n| n > 0)
            .map_or("–".into(), |n| format_ns(e.median_ns / n as f64));
        out.push_str(&format!(
            "| `{}` | {} | {} – {} | {} | {} |\n",
            e.id,
            format_ns(e.median_ns),
            format_ns(e.median_ci_ns.0),
            format_ns(e.median_ci_ns.1),
            format_ns(e.mean_ns),
            per_element,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ESTIMATES: &str = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":4381.8,"upper_bound":5012.6},"point_estimate":4689.9,"standard_error":161.0},
        "median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":4352.4,"upper_bound":4998.0},"point_estimate":4731.2,"standard_error":181.6}}"#;
    const BENCHMARK: &str = r#"{"group_id":"fingerprint","function_id":"sum/300pods","value_str":null,"throughput":{"Elements":300},"full_id":"fingerprint/sum/300pods","directory_name":"fingerprint/sum_300pods","title":"fingerprint/sum/300pods"}"#;

    #[test]
    fn reads_the_latest_estimates_below_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["new", "base"] {
            let d = dir.path().join("fingerprint/sum_300pods").join(sub);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("estimates.json"), ESTIMATES).unwrap();
            std::fs::write(d.join("benchmark.json"), BENCHMARK).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("report")).unwrap();
        let found = collect(dir.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "fingerprint/sum/300pods");
        assert_eq!(found[0].elements, Some(300));
        let table = render(&found);
        assert!(
            table.contains(
                "| `fingerprint/sum/300pods` | 4.73 µs | 4.35 µs – 5.00 µs | 4.69 µs | 15.8 ns |"
            ),
            "{table}"
        );
    }

    #[test]
    fn units() {
        assert_eq!(format_ns(12.345), "12.3 ns");
        assert_eq!(format_ns(1_500_000.0), "1.50 ms");
        assert_eq!(format_ns(2.5e9), "2.50 s");
        assert!(render(&[]).contains("No criterion results"));
    }
}
