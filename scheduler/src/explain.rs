//! Explaining an unschedulable pod: per-node reasons aggregated into one message, in the
//! shape kube-scheduler uses ("0/12 nodes are available: 7 Insufficient memory (a, b, c,
//! +4 more), 5 ..."), naming a few nodes per reason so `kubectl tas explain POD` can be
//! pointed at one, and the pod features this scheduler does not act on (none at the
//! moment), so users are never misled.

use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeSet, HashMap};

/// How many nodes a reason names in the message; the rest are counted.
pub const NODES_NAMED: usize = 3;

/// One reason's tally: how many nodes gave it and the first few of them by name.
#[derive(Debug, Default)]
struct Tally {
    count: usize,
    /// The [`NODES_NAMED`] smallest names: the same whatever order nodes arrive in.
    named: BTreeSet<String>,
}

impl Tally {
    fn name(&mut self, node: &str) {
        if self.named.len() < NODES_NAMED {
            self.named.insert(node.to_owned());
        } else if self.named.last().is_some_and(|last| node < last.as_str()) {
            self.named.pop_last();
            self.named.insert(node.to_owned());
        }
    }
}

/// Counts reasons across nodes, naming a few nodes per reason.
#[derive(Debug, Default)]
pub struct Reasons {
    counts: HashMap<String, Tally>,
}

impl Reasons {
    /// Count one node's reason.
    pub fn add(&mut self, node: &str, reason: impl Into<String>) {
        let tally = self.counts.entry(reason.into()).or_default();
        tally.count += 1;
        tally.name(node);
    }

    /// Merge counts from another (e.g. a parallel worker's).
    pub fn merge(&mut self, other: Reasons) {
        for (r, t) in other.counts {
            let tally = self.counts.entry(r).or_default();
            tally.count += t.count;
            for node in &t.named {
                tally.name(node);
            }
        }
    }

    /// Whether no reason was recorded.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Each reason with its count and first nodes by name: most frequent first, then by
    /// text.
    pub fn counts(&self) -> Vec<crate::decisions::ReasonCount> {
        self.sorted()
            .into_iter()
            .map(|(r, t)| crate::decisions::ReasonCount {
                reason: r.clone(),
                nodes: t.count,
                named: t.named.iter().cloned().collect(),
            })
            .collect()
    }

    fn sorted(&self) -> Vec<(&String, &Tally)> {
        let mut items: Vec<(&String, &Tally)> = self.counts.iter().collect();
        items.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(b.0)));
        items
    }

    /// "0/N nodes are available: 3 a reason (node-a, node-b, node-c), 1 b reason (node-d)."
    /// — most frequent first, then by text; each reason names its first
    /// [`NODES_NAMED`] nodes by name and counts the others ("+2 more").
    pub fn message(&self, total_nodes: usize) -> String {
        let items = self.sorted();
        let parts: Vec<String> = items
            .iter()
            .map(|(r, t)| {
                let mut nodes = t
                    .named
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ");
                let more = t.count.saturating_sub(t.named.len());
                if more > 0 {
                    nodes.push_str(&format!(", +{more} more"));
                }
                format!("{} {r} ({nodes})", t.count)
            })
            .collect();
        if parts.is_empty() {
            format!("0/{total_nodes} nodes are available.")
        } else {
            format!("0/{total_nodes} nodes are available: {}.", parts.join(", "))
        }
    }
}

/// Pod features kube-scheduler honours but this scheduler does not act on yet: none
/// since resource claims are allocated (the list stays for the next one).
pub fn unsupported_features(_pod: &Pod) -> Vec<&'static str> {
    Vec::new()
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
        for i in (0..7).rev() {
            r.add(&format!("m{i}"), "Insufficient memory");
        }
        for i in 0..5 {
            r.add(
                &format!("n{i}"),
                "cannot align container app to one NUMA zone (cpu: need 8, largest zone 6)",
            );
        }
        r.add("z", "node(s) were unschedulable");
        assert_eq!(
            r.message(13),
            "0/13 nodes are available: 7 Insufficient memory (m0, m1, m2, +4 more), 5 cannot align container app to one NUMA zone (cpu: need 8, largest zone 6) (n0, n1, n2, +2 more), 1 node(s) were unschedulable (z)."
        );
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = Reasons::default();
        a.add("d", "x");
        a.add("c", "x");
        let mut b = Reasons::default();
        b.add("a", "x");
        b.add("e", "x");
        b.add("b", "y");
        a.merge(b);
        // The smallest names, whichever worker saw them.
        assert_eq!(
            a.message(5),
            "0/5 nodes are available: 4 x (a, c, d, +1 more), 1 y (b)."
        );
        assert_eq!(Reasons::default().message(0), "0/0 nodes are available.");
    }

    #[test]
    fn resource_claims_are_no_longer_named_unsupported() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {
                "containers": [{"name": "c"}],
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}],
                "affinity": {"podAntiAffinity": {}},
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
            }
        }))
        .unwrap();
        let u = unsupported_features(&pod);
        assert!(u.is_empty(), "{u:?}");
        let m = with_unsupported_note("0/1 nodes are available.".into(), &u);
        assert_eq!(m, "0/1 nodes are available.");
        assert!(
            with_unsupported_note("m".into(), &["x"]).contains("does not evaluate x"),
            "the note is still rendered for a feature named"
        );
    }
}
