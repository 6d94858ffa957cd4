//! Proof that the operator created an object: its uid, recorded in the status of the
//! TopologyAwareScheduling object right after the creation.
//!
//! Namespaces are the reason. The operator relabels (Pod Security `privileged`), binds
//! itself rights in, and on uninstall deletes — with everything in it — only a namespace
//! it created. An annotation on the namespace cannot prove that: whoever may annotate
//! namespaces could mark any of them, and the object's spec could then name it. The
//! status can only be written through the status subresource, which the object's
//! editors are not granted, and a uid names one object, never a later one of the same
//! name. The admission policy `tas-operator-namespaces` checks the same record.
//!
//! Written by JSON merge patch under the field manager [`FIELD_MANAGER`], not by the
//! status apply (`super::status`), which carries the records over unchanged.

use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tas_api::tas::{CreatedObject, TopologyAwareScheduling};

/// Field manager of the records.
pub const FIELD_MANAGER: &str = "tas-operator-created";

/// Kind of a recorded namespace.
pub const NAMESPACE: &str = "Namespace";

/// The records as stored now (not as cached: a record written in this reconcile counts).
pub async fn load(client: &Client, stack: &str) -> Result<Vec<CreatedObject>, kube::Error> {
    let cr = Api::<TopologyAwareScheduling>::all(client.clone())
        .get_status(stack)
        .await?;
    Ok(cr.status.map(|s| s.created_objects).unwrap_or_default())
}

/// Whether `records` prove that the operator created the `kind` object with this
/// metadata: same name and same uid.
pub fn proves(records: &[CreatedObject], kind: &str, meta: &kube::core::ObjectMeta) -> bool {
    let (Some(name), Some(uid)) = (meta.name.as_deref(), meta.uid.as_deref()) else {
        return false;
    };
    records
        .iter()
        .any(|r| r.kind == kind && r.name == name && r.uid == uid)
}

/// Adds a record for the `kind` object `name` with `uid`, replacing an older one of the
/// same kind and name (that object is gone: the name now belongs to this one).
pub async fn record(
    client: &Client,
    stack: &str,
    kind: &str,
    name: &str,
    uid: &str,
) -> Result<(), kube::Error> {
    let mut records = load(client, stack).await?;
    records.retain(|r| !(r.kind == kind && r.name == name));
    records.push(CreatedObject {
        kind: kind.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
    });
    records.sort();
    let patch = serde_json::json!({ "status": { "createdObjects": records } });
    Api::<TopologyAwareScheduling>::all(client.clone())
        .patch_status(
            stack,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ObjectMeta;

    fn meta(name: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_the_same_name_and_uid_prove_creation() {
        let records = [CreatedObject {
            kind: NAMESPACE.into(),
            name: "numa".into(),
            uid: "u1".into(),
        }];
        assert!(proves(&records, NAMESPACE, &meta("numa", "u1")));
        // Deleted and created again by someone else: same name, another uid.
        assert!(!proves(&records, NAMESPACE, &meta("numa", "u2")));
        assert!(!proves(&records, NAMESPACE, &meta("other", "u1")));
        assert!(!proves(&records, "ConfigMap", &meta("numa", "u1")));
        assert!(!proves(&[], NAMESPACE, &meta("numa", "u1")));
        assert!(!proves(&records, NAMESPACE, &ObjectMeta::default()));
    }
}
