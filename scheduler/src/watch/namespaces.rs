//! Namespace labels, for the namespace selectors of inter-pod affinity terms. Metadata
//! only: the scheduler needs nothing else from a namespace.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;

use super::relist::Index;
use crate::shared::Shared;

/// Labels by namespace name, in [`Shared::namespaces`].
pub(super) struct NamespaceWatch(pub(super) Arc<Shared>);

impl Index for NamespaceWatch {
    type Object = PartialObjectMeta<Namespace>;
    type Key = String;
    const WHAT: &'static str = "namespaces";

    fn key(ns: &PartialObjectMeta<Namespace>) -> String {
        ns.metadata.name.clone().unwrap_or_default()
    }

    fn apply(&mut self, name: String, ns: PartialObjectMeta<Namespace>) {
        let labels = ns.metadata.labels.unwrap_or_default();
        let old = self.0.namespaces.write().insert(name, labels.clone());
        let changed = old.as_ref() != Some(&labels);
        if changed {
            self.0.cluster_event();
        }
    }

    fn delete(&mut self, name: String, _: PartialObjectMeta<Namespace>) {
        self.0.namespaces.write().remove(&name);
    }

    fn retain(&mut self, seen: HashSet<String>) {
        self.0.namespaces.write().retain(|n, _| seen.contains(n));
    }

    fn synced(&mut self) {
        self.0.synced.namespaces.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }
}
