//! Explaining an unschedulable pod: per-node reasons aggregated into one message, in the
//! shape kube-scheduler uses ("0/12 nodes are available: 5 ..., 7 Insufficient memory."),
//! and the pod features this scheduler does not act on, so users are never misled.

use k8s_openapi::api::core::v1::Pod;
use std::collections::HashMap;

/// Counts reasons across nodes.
#[derive(Debug, Default)]
pub struct Reasons {
    counts: HashMap<String, usize>,
}

impl Reasons {
    /// Count one node's reason.
    pub fn add(&mut self, reason: impl Into<String>) {
        *self.counts.entry(reason.into()).or_default() += 1;
    }

    /// Merge counts from another (e.g. a parallel worker's).
    pub fn merge(&mut self, other: Reasons) {
        for (r, n) in other.counts {
            *self.counts.entry(r).or_default() += n;
        }
    }

    /// Whether no reason was recorded.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// "0/N nodes are available: a reason, b reason." — most frequent first, then by text.
    pub fn message(&self, total_nodes: usize) -> String {
        let mut items: Vec<(&String, &usize)> = self.counts.iter().collect();
        items.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let parts: Vec<String> = items.iter().map(|(r, n)| format!("{n} {r}")).collect();
        if parts.is_empty() {
            format!("0/{total_nodes} nodes are available.")
        } else {
            format!("0/{total_nodes} nodes are available: {}.", parts.join(", "))
        }
    }
}

/// Pod features kube-scheduler honours but this scheduler does not act on yet.
pub fn unsupported_features(pod: &Pod) -> Vec<&'static str> {
    let mut out = Vec::new();
    let Some(spec) = &pod.spec else {
        return out;
    };
    let has_pvc = spec
        .volumes
        .iter()
        .flatten()
        .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some());
    if has_pvc {
        out.push("volume topology (PersistentVolumeClaims)");
    }
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        out.push("dynamic resource claims");
    }
    out
}

/// The message with a note on unsupported features, if any.
pub fn with_unsupported_note(message: String, unsupported: &[&str]) -> String {
    if unsupported.is_empty() {
        message
    } else {
        format!(
            "{message} Note: tas-scheduler does not evaluate {} for this pod.",
            unsupported.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn aggregates_most_frequent_first() {
        let mut r = Reasons::default();
        for _ in 0..7 {
            r.add("Insufficient memory");
        }
        for _ in 0..5 {
            r.add("cannot align container app to one NUMA zone (cpu: need 8, largest zone 6)");
        }
        assert_eq!(
            r.message(12),
            "0/12 nodes are available: 7 Insufficient memory, 5 cannot align container app to one NUMA zone (cpu: need 8, largest zone 6)."
        );
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = Reasons::default();
        a.add("x");
        let mut b = Reasons::default();
        b.add("x");
        b.add("y");
        a.merge(b);
        assert_eq!(a.message(3), "0/3 nodes are available: 2 x, 1 y.");
        assert_eq!(Reasons::default().message(0), "0/0 nodes are available.");
    }

    #[test]
    fn names_unsupported_features() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {
                "containers": [{"name": "c"}],
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}],
                "affinity": {"podAntiAffinity": {}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
            }
        }))
        .unwrap();
        let u = unsupported_features(&pod);
        // Inter-pod affinity and topology spread are evaluated: not named.
        assert_eq!(
            u,
            [
                "volume topology (PersistentVolumeClaims)",
                "dynamic resource claims"
            ]
        );
        let m = with_unsupported_note("0/1 nodes are available.".into(), &u);
        assert!(m.contains("does not evaluate volume topology"), "{m}");
    }
}
