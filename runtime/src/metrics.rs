//! Prometheus metrics as every TAS binary sets them up: one prometheus-client
//! [`Registry`] per process whose metrics are all named `<component>_*`
//! ([`registry`]), a `result` label for "how did it end" counters ([`ResultLabel`]),
//! and the OpenMetrics text that `/metrics` serves ([`encode`]).

use std::fmt;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

/// The `result` label of a counter or histogram of attempts. Each component documents
/// its few values in the metric's help text, which keeps the label low-cardinality.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// How the attempt ended, e.g. `success` or `error`.
    pub result: &'static str,
}

impl ResultLabel {
    /// The label for `result`.
    pub const fn new(result: &'static str) -> Self {
        Self { result }
    }
}

/// An empty registry whose metrics are all named `<prefix>_*`, e.g. `tas_scheduler`.
pub fn registry(prefix: &str) -> Registry {
    Registry::with_prefix(prefix)
}

/// The OpenMetrics text exposition of `registry`.
pub fn encode(registry: &Registry) -> Result<String, fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;

    use super::*;

    #[test]
    fn metrics_carry_the_prefix_and_the_result_label() {
        let mut registry = registry("tas_test");
        let attempts = Family::<ResultLabel, Counter>::default();
        registry.register("attempts", "Attempts by result", attempts.clone());
        attempts.get_or_create(&ResultLabel::new("success")).inc();
        let text = encode(&registry).unwrap();
        assert!(
            text.contains("tas_test_attempts_total{result=\"success\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
