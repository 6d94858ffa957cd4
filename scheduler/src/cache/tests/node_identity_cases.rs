//! A node deleted and created again under its name: the NRT of the earlier Node object
//! (its owner) describes a machine that is gone.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::super::NrtUpdate;
use super::*;

/// `nrt` as the updater of the Node object `uid` writes it.
fn owned_by(mut nrt: NodeResourceTopology, uid: &str) -> NodeResourceTopology {
    nrt.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Node".to_owned(),
        name: NODE.to_owned(),
        uid: uid.to_owned(),
        ..OwnerReference::default()
    }]);
    nrt
}

fn cpus_free(view: &super::super::NodeView) -> Vec<i64> {
    let topology = view.as_ref().expect("usable view");
    (0..2)
        .map(|z| topology.available(z, "cpu").expect("cpu"))
        .collect()
}

#[test]
fn an_nrt_of_an_earlier_node_object_is_no_view_for_the_new_one() {
    let cache = cache();
    cache.update_nrt(owned_by(nrt("30", "60Gi"), "uid-old"));
    assert!(cache.snapshot_for(NODE, "uid-old").is_some());
    assert!(
        cache.snapshot_for(NODE, "uid-new").is_none(),
        "the node was created again: the old machine's NRT is not its topology"
    );
    assert!(
        cache.snapshot_for(NODE, "").is_some(),
        "a Node without a uid cannot be told apart"
    );
    // An object without an owner reference cannot be told apart either.
    let other = "worker-2";
    cache.update_nrt(nrt_of(other, &[(0, &[("cpu", "4")])], &[]));
    assert!(cache.snapshot_for(other, "uid-any").is_some());

    // The new node's updater publishes: its object is the view.
    cache.update_nrt(owned_by(nrt("10", "20Gi"), "uid-new"));
    let view = cache.snapshot_for(NODE, "uid-new").expect("a view");
    assert_eq!(cpus_free(&view), [10_000, 10_000]);
}

#[test]
fn the_new_node_objects_nrt_is_not_held_behind_the_old_machines_view() {
    let cache = cache();
    let t0 = Instant::now();
    cache.update_nrt(owned_by(nrt("30", "60Gi"), "uid-old"));
    let p = pod("p", &[("cpu", "8"), ("memory", "16Gi")]);
    reserve(&cache, NODE, &p, t0);
    // Same Node object: held behind the reservation until evidence or a resync.
    assert_eq!(
        cache.update_nrt(Arc::new(owned_by(nrt("29", "60Gi"), "uid-old"))),
        NrtUpdate::Held
    );
    // Another Node object of that name: its machine's zones at once, the reservation
    // (a pod still bound to the name) kept on them.
    let update = cache.update_nrt(owned_by(nrt("10", "20Gi"), "uid-new"));
    assert_eq!(update, NrtUpdate::Replaced);
    let view = cache.snapshot_for(NODE, "uid-new").expect("a view");
    assert_eq!(cpus_free(&view), [2_000, 2_000]);
}
