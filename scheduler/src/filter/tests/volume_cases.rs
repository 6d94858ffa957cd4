//! The volume filters: a bound PersistentVolume's node affinity (`VolumeBinding`) and
//! zone labels (`VolumeZone`), `ReadWriteOncePod` claims in use (`VolumeRestrictions`),
//! and the claims that keep a pod Pending (missing, being deleted, unbound).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

use super::super::volume_catalog::{BindingMode, ClaimInfo, VolumeCatalog, VolumeInfo};
use super::super::volumes::{VolumeProblem, claim_names, prepare};
use super::super::{FilterReason, NodeInfo, Plugin, filter_node};
use super::{info, input, roomy};
use crate::state::ClusterState;

const NS: &str = "ns";

/// A pod `name` (uid `uid-<name>`) in [`NS`] with these volumes.
fn pod_with_volumes(name: &str, volumes: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": NS, "uid": format!("uid-{name}") },
        "spec": { "containers": [{ "name": "app", "image": "app" }], "volumes": volumes }
    }))
    .expect("pod")
}

/// A pod using the claims `claims` through `persistentVolumeClaim` volumes.
fn pod_with_claims(name: &str, claims: &[&str]) -> Pod {
    let volumes: Vec<Value> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| json!({ "name": format!("v{i}"), "persistentVolumeClaim": { "claimName": c } }))
        .collect();
    pod_with_volumes(name, json!(volumes))
}

/// A claim in [`NS`]: `spec` and `metadata` fields merged in.
fn claim(name: &str, metadata: Value, spec: Value) -> ClaimInfo {
    let mut m = json!({ "name": name, "namespace": NS });
    if let (Some(m), Some(extra)) = (m.as_object_mut(), metadata.as_object()) {
        m.extend(extra.clone());
    }
    let pvc: PersistentVolumeClaim =
        serde_json::from_value(json!({ "metadata": m, "spec": spec })).expect("pvc");
    ClaimInfo::new(&pvc)
}

/// A claim bound (and completed) to volume `pv`, with these access modes.
fn bound_claim(name: &str, pv: &str, modes: &[&str]) -> ClaimInfo {
    claim(
        name,
        json!({ "annotations": { "pv.kubernetes.io/bind-completed": "yes" } }),
        json!({ "volumeName": pv, "accessModes": modes }),
    )
}

fn volume(name: &str, labels: Value, node_affinity: Value) -> VolumeInfo {
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "spec": { "nodeAffinity": node_affinity }
    }))
    .expect("pv");
    VolumeInfo::new(&pv)
}

/// Node affinity to the nodes whose hostname label is one of `hosts`.
fn on_hosts(hosts: &[&str]) -> Value {
    json!({ "required": { "nodeSelectorTerms": [{ "matchExpressions": [
        { "key": "kubernetes.io/hostname", "operator": "In", "values": hosts }
    ] }] } })
}

fn host(name: &str, labels: Value) -> NodeInfo {
    let mut labels = labels;
    labels["kubernetes.io/hostname"] = json!(name);
    let mut n = roomy(name);
    n.metadata.labels = serde_json::from_value(labels).ok();
    info(&n)
}

/// The catalog with claim `data` bound to `pv`, which has these labels and affinity.
fn catalog_with(labels: Value, node_affinity: Value) -> VolumeCatalog {
    let mut c = VolumeCatalog::default();
    c.upsert_claim(NS, "data", bound_claim("data", "pv", &["ReadWriteOnce"]));
    c.upsert_volume("pv", volume("pv", labels, node_affinity));
    c
}

/// `filter_node` of the pod using claim `data`, resolved against `catalog`.
fn verdict(catalog: &VolumeCatalog, node: &NodeInfo) -> Result<(), String> {
    let pod = pod_with_claims("p", &["data"]);
    let mut i = input(&pod);
    i.set_volumes(prepare(catalog, &pod, std::iter::empty()).expect("resolved"));
    filter_node(&i, node).map_err(|r| r.to_string())
}

#[test]
fn a_local_volume_s_node_affinity_admits_only_its_node() {
    let catalog = catalog_with(json!({}), on_hosts(&["a"]));
    assert_eq!(verdict(&catalog, &host("a", json!({}))), Ok(()));
    assert_eq!(
        verdict(&catalog, &host("b", json!({}))),
        Err("node(s) had volume node affinity conflict".to_owned())
    );
    assert_eq!(
        FilterReason::VolumeNodeConflict.plugin(),
        Plugin::VolumeBinding
    );
    assert!(FilterReason::VolumeNodeConflict.is_unresolvable());
}

#[test]
fn node_affinity_terms_are_ored_and_match_fields_select_the_node_name() {
    let affinity = json!({ "required": { "nodeSelectorTerms": [
        { "matchExpressions": [{ "key": "disk", "operator": "In", "values": ["ssd"] }] },
        { "matchFields": [{ "key": "metadata.name", "operator": "In", "values": ["c"] }] }
    ] } });
    let catalog = catalog_with(json!({}), affinity);
    assert_eq!(
        verdict(&catalog, &host("a", json!({ "disk": "ssd" }))),
        Ok(())
    );
    assert_eq!(verdict(&catalog, &host("c", json!({}))), Ok(()));
    assert!(verdict(&catalog, &host("b", json!({ "disk": "hdd" }))).is_err());
}

#[test]
fn a_volume_without_constraints_fits_every_node_and_unusable_terms_fit_none() {
    let free = catalog_with(json!({}), Value::Null);
    assert_eq!(verdict(&free, &host("a", json!({}))), Ok(()));
    let no_required = catalog_with(json!({}), json!({}));
    assert_eq!(verdict(&no_required, &host("a", json!({}))), Ok(()));
    let unusable = catalog_with(
        json!({}),
        json!({ "required": { "nodeSelectorTerms": [
            {},
            { "matchExpressions": [{ "key": "k", "operator": "Bogus" }] }
        ] } }),
    );
    assert!(verdict(&unusable, &host("a", json!({ "k": "v" }))).is_err());
}

#[test]
fn zone_labels_must_match_the_node_multi_value_and_beta_keys_included() {
    const ZONE_CONFLICT: &str = "node(s) had no available volume zone";
    // (volume labels, node labels, fits)
    let cases = [
        (
            json!({ "topology.kubernetes.io/zone": "z1" }),
            json!({ "topology.kubernetes.io/zone": "z1" }),
            true,
        ),
        (
            json!({ "topology.kubernetes.io/zone": "z1" }),
            json!({ "topology.kubernetes.io/zone": "z2" }),
            false,
        ),
        // Several zones, `__` separated.
        (
            json!({ "topology.kubernetes.io/zone": "z1__z2" }),
            json!({ "topology.kubernetes.io/zone": "z2" }),
            true,
        ),
        // A node without any topology label has nothing to compare: it passes.
        (
            json!({ "topology.kubernetes.io/zone": "z1" }),
            json!({ "other": "x" }),
            true,
        ),
        // A node with a region label only lacks the zone: it fails.
        (
            json!({ "topology.kubernetes.io/zone": "z1" }),
            json!({ "topology.kubernetes.io/region": "r1" }),
            false,
        ),
        // Zone and region both checked.
        (
            json!({ "topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1" }),
            json!({ "topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r2" }),
            false,
        ),
        // A deprecated key on the volume is found under its GA name on the node.
        (
            json!({ "failure-domain.beta.kubernetes.io/zone": "z1" }),
            json!({ "topology.kubernetes.io/zone": "z1" }),
            true,
        ),
        (
            json!({ "failure-domain.beta.kubernetes.io/region": "r1" }),
            json!({ "topology.kubernetes.io/region": "r2" }),
            false,
        ),
        (
            json!({ "failure-domain.beta.kubernetes.io/zone": "z1" }),
            json!({ "failure-domain.beta.kubernetes.io/zone": "z1" }),
            true,
        ),
    ];
    for (pv_labels, node_labels, fits) in cases {
        let catalog = catalog_with(pv_labels.clone(), Value::Null);
        let got = verdict(&catalog, &host("n", node_labels.clone()));
        let want = if fits {
            Ok(())
        } else {
            Err(ZONE_CONFLICT.to_owned())
        };
        assert_eq!(got, want, "volume {pv_labels}, node {node_labels}");
    }
    assert_eq!(
        FilterReason::VolumeZoneConflict.plugin(),
        Plugin::VolumeZone
    );
}

#[test]
fn a_pod_without_claims_is_untouched() {
    let pod = pod_with_volumes("p", json!([{ "name": "scratch", "emptyDir": {} }]));
    assert!(claim_names(&pod).is_empty());
    let got = prepare(&VolumeCatalog::default(), &pod, std::iter::empty());
    assert_eq!(got.map(|v| v.is_empty()), Ok(true));
}

#[test]
fn missing_deleted_and_unbound_claims_keep_the_pod_pending_naming_the_claim() {
    let mut c = VolumeCatalog::default();
    c.upsert_class("wffc", BindingMode::WaitForFirstConsumer);
    c.upsert_class("fast", BindingMode::Immediate);
    c.upsert_claim(
        NS,
        "deleting",
        claim(
            "deleting",
            json!({ "deletionTimestamp": "2026-01-01T00:00:00Z" }),
            json!({}),
        ),
    );
    c.upsert_claim(
        NS,
        "late",
        claim("late", json!({}), json!({ "storageClassName": "wffc" })),
    );
    c.upsert_claim(
        NS,
        "soon",
        claim("soon", json!({}), json!({ "storageClassName": "fast" })),
    );
    c.upsert_claim(NS, "classless", claim("classless", json!({}), json!({})));
    c.upsert_claim(
        NS,
        "ghost-class",
        claim(
            "ghost-class",
            json!({}),
            json!({ "storageClassName": "gone" }),
        ),
    );
    // Volume named but the binding not completed yet: still unbound.
    c.upsert_claim(
        NS,
        "half",
        claim(
            "half",
            json!({}),
            json!({ "volumeName": "pv", "storageClassName": "fast" }),
        ),
    );
    c.upsert_claim(NS, "orphan", bound_claim("orphan", "no-such-pv", &[]));
    let problem = |claim: &str| {
        prepare(&c, &pod_with_claims("p", &[claim]), std::iter::empty())
            .expect_err(claim)
            .to_string()
    };
    assert_eq!(
        problem("absent"),
        "persistentvolumeclaim \"absent\" not found"
    );
    assert_eq!(
        problem("deleting"),
        "persistentvolumeclaim \"deleting\" is being deleted"
    );
    let late = problem("late");
    assert!(
        late.starts_with(
            "persistentvolumeclaim \"late\" is unbound and uses WaitForFirstConsumer storage class \"wffc\"; TAS does not bind volumes: "
        ),
        "{late}"
    );
    assert_eq!(
        problem("soon"),
        "persistentvolumeclaim \"soon\" is not bound yet (storage class \"fast\" binds immediately): waiting for the claim to be bound"
    );
    assert_eq!(
        problem("half"),
        "persistentvolumeclaim \"half\" is not bound yet (storage class \"fast\" binds immediately): waiting for the claim to be bound"
    );
    assert_eq!(
        problem("classless"),
        "persistentvolumeclaim \"classless\" is not bound yet (no storage class): waiting for the claim to be bound"
    );
    assert_eq!(
        problem("ghost-class"),
        "persistentvolumeclaim \"ghost-class\" is unbound and its storageclass \"gone\" was not found"
    );
    assert_eq!(
        problem("orphan"),
        "persistentvolumeclaim \"orphan\" is bound to persistentvolume \"no-such-pv\", which was not found"
    );
}

#[test]
fn a_generic_ephemeral_volume_uses_the_claim_its_pod_owns() {
    let pod = pod_with_volumes(
        "p",
        json!([{ "name": "scratch", "ephemeral": { "volumeClaimTemplate": { "spec": {} } } }]),
    );
    assert_eq!(claim_names(&pod), ["p-scratch"]);
    let owned_by = |uid: &str| {
        let mut c = VolumeCatalog::default();
        let mut info = bound_claim("p-scratch", "pv", &[]);
        info.controller_uid = Some(uid.to_owned());
        c.upsert_claim(NS, "p-scratch", info);
        c.upsert_volume("pv", volume("pv", json!({}), on_hosts(&["a"])));
        prepare(&c, &pod, std::iter::empty())
    };
    let owned = owned_by("uid-p").expect("its own claim");
    assert_eq!(owned.volumes.len(), 1);
    assert_eq!(
        owned_by("uid-other").map_err(|e| e.to_string()),
        Err(
            "persistentvolumeclaim \"p-scratch\" was not created for pod \"p\" (pod is not owner)"
                .to_owned()
        )
    );
}

/// A catalog where `data` is a bound ReadWriteOncePod claim.
fn exclusive_catalog() -> VolumeCatalog {
    let mut c = VolumeCatalog::default();
    c.upsert_claim(NS, "data", bound_claim("data", "pv", &["ReadWriteOncePod"]));
    c.upsert_volume("pv", volume("pv", json!({}), Value::Null));
    c
}

#[test]
fn a_read_write_once_pod_claim_in_use_by_another_pod_keeps_the_pod_pending() {
    let c = exclusive_catalog();
    let first = pod_with_claims("first", &["data"]);
    let mut bound = first.clone();
    bound.spec.as_mut().unwrap().node_name = Some("a".into());
    let mut state = ClusterState::default();
    state.upsert_node(&roomy("a"));
    state.upsert_node(&roomy("b"));
    state.upsert_bound_pod(&bound);

    let second = pod_with_claims("second", &["data"]);
    assert_eq!(
        prepare(&c, &second, state.nodes()),
        Err(VolumeProblem::ReadWriteOncePodInUse {
            claim: "data".into(),
            user: "ns/first".into()
        })
    );
    assert_eq!(
        prepare(&c, &second, state.nodes()).unwrap_err().to_string(),
        "persistentvolumeclaim \"data\" has the ReadWriteOncePod access mode and is already used by pod ns/first"
    );
    // The user itself (re-scheduled after a failed bind, say) is no conflict.
    assert!(prepare(&c, &first, state.nodes()).is_ok());

    // Once the user finishes, the claim is free.
    let mut done = bound.clone();
    done.status = serde_json::from_value(json!({ "phase": "Succeeded" })).ok();
    state.upsert_bound_pod(&done);
    assert!(prepare(&c, &second, state.nodes()).is_ok());
}

#[test]
fn a_read_write_once_pod_claim_of_a_pod_whose_binding_is_in_flight_counts() {
    let c = exclusive_catalog();
    let first = pod_with_claims("first", &["data"]);
    let mut state = ClusterState::default();
    state.upsert_node(&roomy("a"));
    // Assumed (decided, bind in flight), not yet observed bound.
    state.assume("uid-first", "a", input(&first).usage().clone());
    let second = pod_with_claims("second", &["data"]);
    assert!(matches!(
        prepare(&c, &second, state.nodes()),
        Err(VolumeProblem::ReadWriteOncePodInUse { .. })
    ));
    // The bind failed: the assumption is undone and the claim free again.
    state.forget("uid-first");
    assert!(prepare(&c, &second, state.nodes()).is_ok());
}

#[test]
fn read_write_once_pod_is_per_namespace_and_other_access_modes_share() {
    let c = exclusive_catalog();
    let mut other_ns = pod_with_claims("first", &["data"]);
    other_ns.metadata.namespace = Some("elsewhere".into());
    other_ns.spec.as_mut().unwrap().node_name = Some("a".into());
    let mut state = ClusterState::default();
    state.upsert_node(&roomy("a"));
    state.upsert_bound_pod(&other_ns);
    let second = pod_with_claims("second", &["data"]);
    assert!(prepare(&c, &second, state.nodes()).is_ok());

    let mut shared = VolumeCatalog::default();
    shared.upsert_claim(NS, "data", bound_claim("data", "pv", &["ReadWriteOnce"]));
    shared.upsert_volume("pv", volume("pv", json!({}), Value::Null));
    let mut same_ns = pod_with_claims("first", &["data"]);
    same_ns.spec.as_mut().unwrap().node_name = Some("a".into());
    state.upsert_bound_pod(&same_ns);
    assert!(prepare(&shared, &second, state.nodes()).is_ok());
}

#[test]
fn the_catalog_reads_classes_claims_and_volumes_compactly() {
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": { "name": "local" }, "provisioner": "x",
        "volumeBindingMode": "WaitForFirstConsumer"
    }))
    .unwrap();
    assert_eq!(BindingMode::new(&class), BindingMode::WaitForFirstConsumer);
    let class: StorageClass =
        serde_json::from_value(json!({ "metadata": { "name": "d" }, "provisioner": "x" })).unwrap();
    assert_eq!(BindingMode::new(&class), BindingMode::Immediate);
    // The beta annotation wins over spec.storageClassName, as in Kubernetes.
    let c = claim(
        "c",
        json!({ "annotations": { "volume.beta.kubernetes.io/storage-class": "old" } }),
        json!({ "storageClassName": "new" }),
    );
    assert_eq!(c.storage_class.as_deref(), Some("old"));
    let mut cat = VolumeCatalog::default();
    assert!(cat.upsert_volume("pv", volume("pv", json!({}), on_hosts(&["a"]))));
    assert!(
        !cat.upsert_volume("pv", volume("pv", json!({}), on_hosts(&["a"]))),
        "unchanged"
    );
    cat.retain_volumes(|_| false);
    assert!(cat.volume("pv").is_none());
}
