//! A node's own NUMA allocation strategy, from a node label.
//!
//! A node labelled [`NUMA_ALLOCATION_STRATEGY_LABEL`]` = MostAllocated` (or
//! `LeastAllocated`) is scored with that strategy at zone level, whatever the
//! cluster-wide strategy is, with the cluster-wide resource weights — the way
//! Koordinator lets a node pick its NUMA allocation strategy. `FragmentationAware`,
//! `BalancedAllocation` and `LeastNUMANodes` are accepted too. Any other value is
//! ignored: the node keeps the cluster-wide strategy and a warning is logged once per
//! node and value.

use parking_lot::Mutex;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

use super::score::{ScoreConfig, ScoringStrategy};

/// The node label that sets a node's NUMA allocation strategy.
pub const NUMA_ALLOCATION_STRATEGY_LABEL: &str = "tas.dev/numa-allocation-strategy";

/// A label value that names no strategy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown NUMA allocation strategy {0:?} (expected MostAllocated, LeastAllocated, \
     FragmentationAware, BalancedAllocation or LeastNUMANodes)"
)]
pub struct UnknownStrategy(pub String);

/// The strategy a label value names (exact spelling, as in the CR).
pub fn parse_strategy(value: &str) -> Result<ScoringStrategy, UnknownStrategy> {
    match value {
        "MostAllocated" => Ok(ScoringStrategy::MostAllocated),
        "LeastAllocated" => Ok(ScoringStrategy::LeastAllocated),
        "FragmentationAware" => Ok(ScoringStrategy::FragmentationAware),
        "BalancedAllocation" => Ok(ScoringStrategy::BalancedAllocation),
        "LeastNUMANodes" => Ok(ScoringStrategy::LeastNumaNodes),
        other => Err(UnknownStrategy(other.to_owned())),
    }
}

/// The strategy the node's label asks for: `None` without the label, or an error for
/// a value that names no strategy.
pub fn label_strategy(
    labels: &BTreeMap<String, String>,
) -> Option<Result<ScoringStrategy, UnknownStrategy>> {
    labels
        .get(NUMA_ALLOCATION_STRATEGY_LABEL)
        .map(|v| parse_strategy(v))
}

/// The score configuration for one node: `cluster` with the strategy of the node's
/// label when it names one. An unknown value is logged once per node and value.
pub fn node_config<'a>(
    node: &str,
    labels: &BTreeMap<String, String>,
    cluster: &'a ScoreConfig,
) -> Cow<'a, ScoreConfig> {
    config_for(node, label_strategy(labels).as_ref(), cluster)
}

/// [`node_config`] with the label already read ([`label_strategy`], kept per node so a
/// decision does not look the label up on every node).
pub fn config_for<'a>(
    node: &str,
    strategy: Option<&Result<ScoringStrategy, UnknownStrategy>>,
    cluster: &'a ScoreConfig,
) -> Cow<'a, ScoreConfig> {
    match strategy {
        None => Cow::Borrowed(cluster),
        Some(&Ok(strategy)) if strategy == cluster.strategy => Cow::Borrowed(cluster),
        Some(&Ok(strategy)) => Cow::Owned(ScoreConfig {
            strategy,
            weights: cluster.weights.clone(),
        }),
        Some(Err(e)) => {
            warn_once(node, e);
            Cow::Borrowed(cluster)
        }
    }
}

fn warn_once(node: &str, e: &UnknownStrategy) {
    static SEEN: OnceLock<Mutex<HashSet<(String, String)>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Mutex::default);
    let mut seen = seen.lock();
    if seen.insert((node.to_owned(), e.0.clone())) {
        tracing::warn!(
            node,
            label = NUMA_ALLOCATION_STRATEGY_LABEL,
            "{e}; the node keeps the cluster-wide strategy"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(NUMA_ALLOCATION_STRATEGY_LABEL.to_owned(), value.to_owned())])
    }

    #[test]
    fn parses_the_documented_values() {
        assert_eq!(
            parse_strategy("MostAllocated"),
            Ok(ScoringStrategy::MostAllocated)
        );
        assert_eq!(
            parse_strategy("LeastAllocated"),
            Ok(ScoringStrategy::LeastAllocated)
        );
        assert_eq!(
            parse_strategy("LeastNUMANodes"),
            Ok(ScoringStrategy::LeastNumaNodes)
        );
        assert_eq!(
            parse_strategy("mostallocated"),
            Err(UnknownStrategy("mostallocated".to_owned()))
        );
        assert!(parse_strategy("").is_err());
    }

    #[test]
    fn a_node_label_overrides_only_the_strategy() {
        let mut cluster = ScoreConfig::new(ScoringStrategy::FragmentationAware);
        cluster.weights.push(("hugepages-1Gi".to_owned(), 3));
        let c = node_config("n1", &labels("MostAllocated"), &cluster);
        assert_eq!(c.strategy, ScoringStrategy::MostAllocated);
        assert_eq!(c.weights, cluster.weights);
        let c = node_config("n1", &BTreeMap::new(), &cluster);
        assert!(matches!(c, Cow::Borrowed(_)));
        assert_eq!(c.strategy, ScoringStrategy::FragmentationAware);
    }

    #[test]
    fn an_unknown_value_keeps_the_cluster_strategy() {
        let cluster = ScoreConfig::new(ScoringStrategy::LeastAllocated);
        let c = node_config("n2", &labels("Packed"), &cluster);
        assert_eq!(c.strategy, ScoringStrategy::LeastAllocated);
        assert!(label_strategy(&labels("Packed")).is_some_and(|r| r.is_err()));
    }
}
