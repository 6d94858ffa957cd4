//! PodDisruptionBudgets as preemption sees them: which victims a budget protects, and
//! how many of a victim set would push a budget below zero allowed disruptions.
//!
//! Counting follows kube-scheduler: a budget covers the pods of its namespace its
//! selector matches (an absent or empty selector covers none); a pod the budget already
//! lists under `status.disruptedPods` is already accounted for; each other covered
//! victim takes one of `status.disruptionsAllowed`, and a victim that takes one the
//! budget does not have *violates* it.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::pod_meta::PodMeta;
use tas_api::labels::Selector;

/// One budget, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    selector: Selector,
    disruptions_allowed: i32,
    /// `status.disruptedPods` names.
    disrupted: HashSet<String>,
}

impl Budget {
    /// Reads a PodDisruptionBudget.
    pub fn from_pdb(pdb: &PodDisruptionBudget) -> Self {
        let selector = pdb.spec.as_ref().map_or_else(Selector::nothing, |s| {
            Selector::parse_or_nothing(s.selector.as_ref())
        });
        let status = pdb.status.as_ref();
        Self {
            selector: if selector.is_everything() {
                Selector::nothing()
            } else {
                selector
            },
            disruptions_allowed: status.map_or(0, |s| s.disruptions_allowed),
            disrupted: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
        }
    }

    fn covers(&self, pod: &PodMeta) -> bool {
        !pod.labels.is_empty() && self.selector.matches(&pod.labels)
    }
}

/// Every budget, by namespace and name.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    by_namespace: HashMap<String, HashMap<String, Budget>>,
}

impl Budgets {
    /// Adds or replaces a budget.
    pub fn upsert(&mut self, namespace: &str, name: &str, budget: Budget) {
        self.by_namespace
            .entry(namespace.to_owned())
            .or_default()
            .insert(name.to_owned(), budget);
    }

    /// Removes a budget.
    pub fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(m) = self.by_namespace.get_mut(namespace) {
            m.remove(name);
            if m.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
    }

    /// Keeps only the budgets `keep` accepts (after a relist).
    pub fn retain(&mut self, keep: impl Fn(&str, &str) -> bool) {
        for (ns, m) in &mut self.by_namespace {
            m.retain(|name, _| keep(ns, name));
        }
        self.by_namespace.retain(|_, m| !m.is_empty());
    }

    /// Whether some budget covers `pod`.
    pub fn covers(&self, pod: &PodMeta) -> bool {
        self.by_namespace
            .get(&pod.namespace)
            .is_some_and(|m| m.values().any(|b| b.covers(pod)))
    }

    /// How many of `victims` (taken in order) would violate a budget.
    pub fn violations(&self, victims: &[&PodMeta]) -> usize {
        if self.by_namespace.is_empty() {
            return 0;
        }
        let mut left: HashMap<(&str, &str), i32> = HashMap::new();
        let mut violating = 0;
        for pod in victims {
            let Some(budgets) = self.by_namespace.get(&pod.namespace) else {
                continue;
            };
            let mut violates = false;
            for (name, b) in budgets {
                if !b.covers(pod) || b.disrupted.contains(&pod.name) {
                    continue;
                }
                let allowed = left
                    .entry((pod.namespace.as_str(), name.as_str()))
                    .or_insert(b.disruptions_allowed);
                *allowed -= 1;
                violates |= *allowed < 0;
            }
            violating += usize::from(violates);
        }
        violating
    }
}
