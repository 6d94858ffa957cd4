//! Label selectors (`metav1.LabelSelector`) parsed once and matched against label maps:
//! the pod selectors of inter-pod affinity terms, topology spread constraints and
//! PodDisruptionBudgets, and the namespace selectors of affinity terms.
//!
//! Semantics follow the API: `matchLabels` and every `matchExpressions` entry must all
//! hold; `In` / `NotIn` need values (a missing label satisfies `NotIn`), `Exists` /
//! `DoesNotExist` take none. An empty selector (`{}`) selects everything; an absent one
//! (`None`) selects nothing. A selector the API server's parser would reject (unknown
//! operator, `In` without values, ...) selects nothing, which is what kube-scheduler
//! ends up doing with it (it fails the pod's pre-filter; we refuse every node).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// One parsed requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Self::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Self::Exists(key) => labels.contains_key(key),
            Self::DoesNotExist(key) => !labels.contains_key(key),
        }
    }
}

/// A parsed label selector; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// Every requirement must hold (an empty list selects everything); `None` selects
    /// nothing (absent or unusable selector).
    requirements: Option<Vec<Requirement>>,
}

impl Selector {
    /// Selects every label set.
    pub fn everything() -> Self {
        Self {
            requirements: Some(Vec::new()),
        }
    }

    /// Selects no label set.
    pub fn nothing() -> Self {
        Self { requirements: None }
    }

    /// Parses an optional API selector.
    pub fn parse(selector: Option<&LabelSelector>) -> Self {
        let Some(s) = selector else {
            return Self::nothing();
        };
        let mut out: Vec<Requirement> = s
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement::In(k.clone(), vec![v.clone()]))
            .collect();
        for e in s.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let key = e.key.clone();
            let r = match (e.operator.as_str(), values.is_empty()) {
                ("In", false) => Requirement::In(key, values),
                ("NotIn", false) => Requirement::NotIn(key, values),
                ("Exists", true) => Requirement::Exists(key),
                ("DoesNotExist", true) => Requirement::DoesNotExist(key),
                _ => return Self::nothing(),
            };
            out.push(r);
        }
        Self {
            requirements: Some(out),
        }
    }

    /// Whether `labels` satisfies the selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements
            .as_ref()
            .is_some_and(|reqs| reqs.iter().all(|r| r.matches(labels)))
    }

    /// Whether the selector has no requirement (selects everything).
    pub fn is_everything(&self) -> bool {
        self.requirements.as_ref().is_some_and(Vec::is_empty)
    }

    /// Adds `key In (value)` for every key of `keys` the pod carries (`matchLabelKeys`):
    /// the API server does the same merge when it admits the pod, so adding it again
    /// changes nothing; keys the pod lacks are ignored.
    pub fn require_equal(&mut self, keys: &[String], pod_labels: &BTreeMap<String, String>) {
        self.merge(keys, pod_labels, |k, v| Requirement::In(k, vec![v]));
    }

    /// Adds `key NotIn (value)` for every key of `keys` the pod carries
    /// (`mismatchLabelKeys`).
    pub fn require_different(&mut self, keys: &[String], pod_labels: &BTreeMap<String, String>) {
        self.merge(keys, pod_labels, |k, v| Requirement::NotIn(k, vec![v]));
    }

    fn merge(
        &mut self,
        keys: &[String],
        pod_labels: &BTreeMap<String, String>,
        make: impl Fn(String, String) -> Requirement,
    ) {
        let Some(reqs) = self.requirements.as_mut() else {
            return;
        };
        for key in keys {
            if let Some(value) = pod_labels.get(key) {
                let r = make(key.clone(), value.clone());
                if !reqs.contains(&r) {
                    reqs.push(r);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(v: serde_json::Value) -> Selector {
        let s: LabelSelector = serde_json::from_value(v).unwrap();
        Selector::parse(Some(&s))
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn table() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let db = labels(&[("app", "db")]);
        let cases = [
            (json!({}), true, true),
            (json!({"matchLabels": {"app": "web"}}), true, false),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]}),
                true,
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
                false,
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
                true,
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
                false,
                true,
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}]}),
                false,
                false,
            ),
            // Unusable: selects nothing.
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
                false,
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
                false,
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
                false,
                false,
            ),
        ];
        for (s, on_web, on_db) in cases {
            let parsed = sel(s.clone());
            assert_eq!(parsed.matches(&web), on_web, "{s} on web");
            assert_eq!(parsed.matches(&db), on_db, "{s} on db");
        }
        assert!(!Selector::parse(None).matches(&web));
        assert!(Selector::everything().matches(&BTreeMap::new()));
    }

    #[test]
    fn match_label_keys_merge_is_idempotent_and_skips_missing_keys() {
        let pod = labels(&[("app", "web"), ("rev", "2")]);
        let mut s = sel(json!({"matchLabels": {"app": "web"}}));
        s.require_equal(&["rev".into(), "absent".into()], &pod);
        s.require_equal(&["rev".into()], &pod);
        assert!(s.matches(&labels(&[("app", "web"), ("rev", "2")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("rev", "1")])));
        assert_eq!(s.requirements.as_ref().map(Vec::len), Some(2));

        let mut m = sel(json!({}));
        m.require_different(&["rev".into()], &pod);
        assert!(m.matches(&labels(&[("rev", "1")])));
        assert!(m.matches(&labels(&[])));
        assert!(!m.matches(&labels(&[("rev", "2")])));
    }
}
