//! Who writes a NodeResourceTopology object or its CRD, read from `managedFields`.
//!
//! Several tools publish NRT objects (node-feature-discovery's topology-updater,
//! resource-topology-exporter, numaresources-operator) and several install the CRD.
//! Two writers forcing over each other rewrite the object forever, so TAS first looks
//! at the object's field managers: a *foreign writer* is a manager other than TAS's
//! own that owns the content (`zones`, `attributes`, `topologyPolicies`) of an object,
//! or the `spec` of the CRD. Managers named `kubectl…` are edits by a person, not
//! writers, and are repaired like any drift.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The fields of an NRT object that make its content.
const NRT_CONTENT_FIELDS: [&str; 3] = ["f:zones", "f:attributes", "f:topologyPolicies"];

/// Field managers, other than `ours` and people's kubectl, that own any of the
/// top-level `fields` of the object with `meta` (sorted, without duplicates).
pub fn foreign_managers(meta: &ObjectMeta, ours: &[&str], fields: &[&str]) -> Vec<String> {
    let mut found: Vec<String> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            let manager = entry.manager.as_deref().unwrap_or_default();
            !manager.is_empty() && !ours.contains(&manager) && !manager.starts_with("kubectl")
        })
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .and_then(|f| f.0.as_object())
                .is_some_and(|owned| fields.iter().any(|f| owned.contains_key(*f)))
        })
        .filter_map(|entry| entry.manager.clone())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Foreign writers of an NRT object's content (see the module doc).
pub fn foreign_nrt_writers(meta: &ObjectMeta, ours: &str) -> Vec<String> {
    foreign_managers(meta, &[ours], &NRT_CONTENT_FIELDS)
}

/// Foreign managers of a CRD's `spec`.
pub fn foreign_crd_managers(meta: &ObjectMeta, ours: &str) -> Vec<String> {
    foreign_managers(meta, &[ours], &["f:spec"])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    fn entry(manager: &str, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            fields_v1: Some(FieldsV1(fields)),
            operation: Some("Update".to_owned()),
            ..ManagedFieldsEntry::default()
        }
    }

    #[test]
    fn writers_of_the_content_other_than_us_and_people() {
        let meta = ObjectMeta {
            managed_fields: Some(vec![
                entry("tas-updater", json!({"f:zones": {}, "f:attributes": {}})),
                entry("nfd-topology-updater", json!({"f:zones": {}})),
                entry("kubectl-edit", json!({"f:attributes": {}})),
                entry("labeller", json!({"f:metadata": {"f:labels": {}}})),
                entry(
                    "resource-topology-exporter",
                    json!({"f:topologyPolicies": {}}),
                ),
                entry("nfd-topology-updater", json!({"f:attributes": {}})),
            ]),
            ..ObjectMeta::default()
        };
        assert_eq!(
            foreign_nrt_writers(&meta, "tas-updater"),
            ["nfd-topology-updater", "resource-topology-exporter"]
        );
        assert!(foreign_nrt_writers(&ObjectMeta::default(), "tas-updater").is_empty());
    }

    #[test]
    fn crd_spec_managers() {
        let meta = ObjectMeta {
            managed_fields: Some(vec![
                entry("tas-operator", json!({"f:spec": {}})),
                entry("kube-apiserver", json!({"f:status": {}})),
                entry("helm", json!({"f:spec": {"f:versions": {}}})),
            ]),
            ..ObjectMeta::default()
        };
        assert_eq!(foreign_crd_managers(&meta, "tas-operator"), ["helm"]);
    }
}
