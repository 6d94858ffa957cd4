//! The persistent snapshot copies in only what changed, and always reads the same as a
//! snapshot taken from scratch.

use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use tas_api::nrt::v1alpha2::{AttributeInfo, NodeResourceTopology, ResourceInfo, Zone};

use super::*;
use crate::cache::PodRef;
use crate::filter::PodUsage;
use crate::numa::PodRequest;
use crate::preempt::Nomination;
use crate::test_support::{guaranteed_container, input, pod, shared};

fn node_object(name: &str, uid: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": uid},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}
    }))
    .expect("node")
}

/// Two zones of 8 CPUs and 32Gi each, all free.
fn nrt(node: &str) -> NodeResourceTopology {
    let mut nrt = NodeResourceTopology::new(node);
    nrt.attributes = vec![
        AttributeInfo::new("topologyManagerPolicy", "single-numa-node"),
        AttributeInfo::new("topologyManagerScope", "pod"),
    ];
    let resource = |name: &str, amount: &str| ResourceInfo {
        name: name.to_owned(),
        available: amount.into(),
        allocatable: amount.into(),
        capacity: amount.into(),
    };
    nrt.zones = (0..2)
        .map(|z| Zone {
            name: format!("node-{z}"),
            type_: "Node".to_owned(),
            resources: vec![resource("cpu", "8"), resource("memory", "32Gi")],
            ..Zone::default()
        })
        .collect();
    nrt
}

fn add_node(shared: &Shared, name: &str) {
    shared
        .state
        .write()
        .upsert_node(&node_object(name, &format!("uid-{name}")));
    shared.cache.update_nrt(nrt(name));
}

/// What a decision reads: every node (name, its pods' requests) and its view.
fn contents(snapshot: &mut Snapshot, shared: &Shared) -> Vec<(NodeInfo, String)> {
    let decided = input(&pod("decided", &[], json!({})));
    snapshot.with(shared, &decided, |cluster, lookup| {
        cluster
            .nodes
            .iter()
            .map(|n| ((*n).clone(), format!("{:?}", lookup(n.name()))))
            .collect()
    })
}

/// The persistent snapshot reads what a fresh one reads.
fn assert_current(snapshot: &mut Snapshot, shared: &Shared) {
    let fresh = contents(&mut Snapshot::new(), shared);
    assert_eq!(contents(snapshot, shared), fresh);
}

fn names(snapshot: &mut Snapshot, shared: &Shared) -> Vec<String> {
    contents(snapshot, shared)
        .into_iter()
        .map(|(n, _)| n.name().to_owned())
        .collect()
}

#[test]
fn an_update_copies_only_the_nodes_changed_since_the_last_one() {
    let shared = shared();
    for name in ["n1", "n2", "n3"] {
        add_node(&shared, name);
    }
    let mut snapshot = Snapshot::new();
    let first = snapshot.update(&shared);
    assert!(first.rebuilt);
    assert_eq!(first.nodes, 3);
    assert_eq!(
        snapshot.update(&shared),
        Update::default(),
        "nothing changed"
    );
    let n1_copied = snapshot.generation_of("n1");

    // The reserve phase of a decision: the pod assumed on n2 and reserved in its view.
    let placed = pod(
        "placed",
        &[],
        json!({"containers": guaranteed_container(4)}),
    );
    let usage = PodUsage::from_pod(&placed).expect("usage");
    shared.state.write().assume("uid-placed", "n2", usage);
    let request = PodRequest::from_pod(&placed).expect("request");
    let r = PodRef::from_pod(&placed).expect("pod ref");
    shared.cache.reserve("n2", &r, &request, Instant::now());
    assert_eq!(
        snapshot.update(&shared),
        Update {
            rebuilt: false,
            nodes: 1,
            views: 1
        }
    );
    assert_eq!(snapshot.generation_of("n1"), n1_copied, "n1 untouched");
    assert!(snapshot.generation_of("n2") > n1_copied);
    assert_current(&mut snapshot, &shared);

    // A cache change alone rereads only the view.
    shared.cache.unreserve("n2", "uid-placed");
    assert_eq!(
        snapshot.update(&shared),
        Update {
            rebuilt: false,
            nodes: 0,
            views: 1
        }
    );
    assert_current(&mut snapshot, &shared);

    // A pod status update that changes nothing the filters read copies nothing.
    let mut bound = placed.clone();
    bound.spec.get_or_insert_default().node_name = Some("n2".to_owned());
    shared.state.write().upsert_bound_pod(&bound);
    assert_eq!(snapshot.update(&shared).nodes, 0);
    assert_current(&mut snapshot, &shared);
}

#[test]
fn what_a_snapshot_read_stays_unchanged_until_it_is_updated() {
    let shared = shared();
    add_node(&shared, "n1");
    let mut snapshot = Snapshot::new();
    let before = contents(&mut snapshot, &shared);
    let placed = pod(
        "placed",
        &[],
        json!({"containers": guaranteed_container(4)}),
    );
    shared.state.write().assume(
        "uid-placed",
        "n1",
        PodUsage::from_pod(&placed).expect("usage"),
    );
    // Read without updating: the node was copied on write, not changed under it.
    let record = &snapshot.nodes[0];
    assert_eq!(*record.info, before[0].0);
    assert_eq!(record.info.requested().milli_cpu, 0);
    assert_eq!(
        contents(&mut snapshot, &shared)[0].0.requested().milli_cpu,
        4_000
    );
}

#[test]
fn nodes_added_and_removed_keep_the_name_order() {
    let shared = shared();
    add_node(&shared, "n1");
    add_node(&shared, "n3");
    let mut snapshot = Snapshot::new();
    assert_eq!(names(&mut snapshot, &shared), ["n1", "n3"]);
    add_node(&shared, "n2");
    assert_eq!(
        snapshot.update(&shared),
        Update {
            rebuilt: true,
            nodes: 1,
            views: 1
        },
        "only the new node is read"
    );
    assert_eq!(names(&mut snapshot, &shared), ["n1", "n2", "n3"]);
    shared.state.write().remove_node("n1");
    assert_eq!(names(&mut snapshot, &shared), ["n2", "n3"]);
    assert_current(&mut snapshot, &shared);
    // Created again under its name, as another Node object: the old NRT is not its
    // view until its own updater publishes.
    let mut state = shared.state.write();
    state.upsert_node(&node_object("n1", "uid-n1-again"));
    drop(state);
    assert_eq!(names(&mut snapshot, &shared), ["n1", "n2", "n3"]);
    assert_current(&mut snapshot, &shared);
}

#[test]
fn a_deleted_topology_leaves_the_node_without_a_view() {
    let shared = shared();
    add_node(&shared, "n1");
    add_node(&shared, "n2");
    let mut snapshot = Snapshot::new();
    snapshot.update(&shared);
    // No pods on n1 either: the cache forgets the node altogether.
    assert!(shared.cache.delete_nrt("n1"));
    assert!(shared.cache.status("n1").is_none());
    let read = contents(&mut snapshot, &shared);
    assert_eq!(read[0].1, "Missing");
    assert!(read[1].1.starts_with("Known"));
    assert_current(&mut snapshot, &shared);
}

#[test]
fn nominations_are_added_on_a_copy_for_one_decision_only() {
    let shared = shared();
    add_node(&shared, "n1");
    add_node(&shared, "n2");
    let nominated = pod(
        "nominated",
        &[],
        json!({"priority": 100, "containers": guaranteed_container(6)}),
    );
    shared.nominations.lock().insert(
        "uid-nominated",
        Nomination {
            node: "n2".to_owned(),
            usage: PodUsage::from_pod(&nominated).expect("usage"),
            victims: Vec::new(),
            since: Instant::now(),
            victims_gone_at: None,
        },
    );
    let mut snapshot = Snapshot::new();
    let read = contents(&mut snapshot, &shared);
    assert_eq!(read[0].0.requested().milli_cpu, 0);
    assert_eq!(read[1].0.requested().milli_cpu, 6_000);
    let TopologyView::Known(kept) = &snapshot.nodes[1].view else {
        panic!("n2 has a view");
    };
    assert_eq!(
        snapshot.nodes[1].info.requested().milli_cpu,
        0,
        "kept as is"
    );
    assert_eq!(kept.available(0, "cpu"), Some(8_000));
    shared.nominations.lock().remove("uid-nominated");
    assert_eq!(
        contents(&mut snapshot, &shared)[1].0.requested().milli_cpu,
        0
    );
}
