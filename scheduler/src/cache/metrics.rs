//! Metrics of the reserve cache, all low-cardinality (no node or pod labels).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tas_runtime::metrics::ResultLabel;

use super::confirm::Search;
use super::resync::ResyncOutcome;

fn evidence_label(result: Option<Search>) -> &'static str {
    result.map_or("miss", Search::as_label)
}

/// The cache's metrics. Clones share the same underlying values.
#[derive(Clone, Debug, Default)]
pub struct CacheMetrics {
    dirty_nodes: Gauge,
    /// By result: `match`, `mismatch`, `no_fingerprint`, `deferred`, `forced` or
    /// `writer_stopped`.
    resyncs: Family<ResultLabel, Counter>,
    foreign_pods: Counter,
    identity_reuses: Counter,
    /// Held NRT objects judged on arrival, by result: `exact`, `prefix`, `subset` or
    /// `miss`.
    evidence: Family<ResultLabel, Counter>,
}

impl CacheMetrics {
    /// Metrics registered in `registry` (which callers usually give a component
    /// prefix) under `nrt_cache_*`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        let registry = registry.sub_registry_with_prefix("nrt_cache");
        registry.register(
            "dirty_nodes",
            "Nodes whose NUMA view carries reservations not yet confirmed by their NodeResourceTopology",
            metrics.dirty_nodes.clone(),
        );
        registry.register(
            "resyncs",
            "Resyncs of dirty nodes by result (match, mismatch, no_fingerprint, deferred, forced, writer_stopped: the NRT's writer stopped, the pods bound since its last write stay reserved)",
            metrics.resyncs.clone(),
        );
        registry.register(
            "foreign_pods",
            "Pods not placed through the cache that made a node dirty when seen bound",
            metrics.foreign_pods.clone(),
        );
        registry.register(
            "pod_identity_reuses",
            "Pods bound with the namespace/name of a pod just deleted from the same node, which the pod fingerprint cannot tell apart",
            metrics.identity_reuses.clone(),
        );
        registry.register(
            "evidence",
            "NRT objects of dirty nodes judged on arrival by their pod fingerprint, by result (exact, prefix, subset: accepted; miss: held for the resync)",
            metrics.evidence.clone(),
        );
        // Every outcome at 0 from the start (see `Metrics::new`).
        for outcome in ResyncOutcome::ALL {
            let _ = metrics
                .resyncs
                .get_or_create(&ResultLabel::new(outcome.as_label()));
        }
        metrics
    }

    /// Held NRT objects judged on arrival with `result` (`None`: no candidate set
    /// matched).
    pub fn evidence_count(&self, result: Option<Search>) -> u64 {
        self.evidence
            .get_or_create(&ResultLabel::new(evidence_label(result)))
            .get()
    }

    pub(crate) fn evidence(&self, result: Option<Search>) {
        self.evidence
            .get_or_create(&ResultLabel::new(evidence_label(result)))
            .inc();
    }

    /// Current number of dirty nodes.
    pub fn dirty_nodes(&self) -> i64 {
        self.dirty_nodes.get()
    }

    /// Resyncs so far with `outcome`.
    pub fn resyncs(&self, outcome: ResyncOutcome) -> u64 {
        self.resyncs
            .get_or_create(&ResultLabel::new(outcome.as_label()))
            .get()
    }

    /// Foreign pods that made a node dirty so far.
    pub fn foreign_pods(&self) -> u64 {
        self.foreign_pods.get()
    }

    /// Pod identity reuses seen so far.
    pub fn identity_reuses(&self) -> u64 {
        self.identity_reuses.get()
    }

    pub(crate) fn dirty_changed(&self, was: bool, is: bool) {
        match (was, is) {
            (false, true) => {
                self.dirty_nodes.inc();
            }
            (true, false) => {
                self.dirty_nodes.dec();
            }
            _ => {}
        }
    }

    pub(crate) fn resynced(&self, outcome: ResyncOutcome) {
        self.resyncs
            .get_or_create(&ResultLabel::new(outcome.as_label()))
            .inc();
    }

    pub(crate) fn foreign_pod(&self) {
        self.foreign_pods.inc();
    }

    pub(crate) fn identity_reused(&self) {
        self.identity_reuses.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_names_and_labels() {
        let mut registry = tas_runtime::metrics::registry("tas_scheduler");
        let metrics = CacheMetrics::register(&mut registry);
        metrics.dirty_changed(false, true);
        metrics.resynced(ResyncOutcome::Forced);
        metrics.foreign_pod();
        let text = tas_runtime::metrics::encode(&registry).expect("encodes");
        for line in [
            "tas_scheduler_nrt_cache_dirty_nodes 1",
            "tas_scheduler_nrt_cache_resyncs_total{result=\"forced\"} 1",
            "tas_scheduler_nrt_cache_foreign_pods_total 1",
            "tas_scheduler_nrt_cache_pod_identity_reuses_total 0",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }
}
