//! What every watch drops from an object before the index sees it: the parts of the
//! metadata no filter, score or cache reads, which at 15,000 nodes and tens of
//! thousands of pods were most of the scheduler's memory.
//!
//! - `metadata.managedFields`: the server-side-apply field sets of every writer. A
//!   NodeResourceTopology written by apply lists every field of every zone in it, and
//!   each entry lives on as a tree of JSON values: many times the object's own data.
//! - the `kubectl.kubernetes.io/last-applied-configuration` annotation: a second copy
//!   of an object applied by `kubectl apply`.
//!
//! Every watch, so a kind added later is trimmed too; the scheduler never writes an
//! object back from a watched copy (binds, Events, conditions and claim writes are
//! built fresh), so nothing is lost on the way out.

use kube::Resource;

/// The annotation `kubectl apply` keeps its last input in.
pub(super) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops from `object` what the scheduler never reads (see the module documentation).
pub(super) fn trim<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn managed_fields_and_the_last_applied_copy_go_other_annotations_stay() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl".into()),
            ..ManagedFieldsEntry::default()
        }]);
        pod.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_owned(), "{\"kind\":\"Pod\"}".to_owned()),
                ("keep".to_owned(), "me".to_owned()),
            ]
            .into(),
        );
        trim(&mut pod);
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(
            pod.metadata.annotations,
            Some([("keep".to_owned(), "me".to_owned())].into())
        );
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));

        let mut only_last_applied = Pod::default();
        only_last_applied.metadata.annotations =
            Some([(LAST_APPLIED.to_owned(), "{}".to_owned())].into());
        trim(&mut only_last_applied);
        assert_eq!(only_last_applied.metadata.annotations, None);
    }
}
