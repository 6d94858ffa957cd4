//! Reading NRT objects into [`NodeTopology`].

use tas_api::nrt::v1alpha2::Zone;
use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use super::super::{NodeTopology, Resources, TopologyError};
use super::*;

#[test]
fn reads_policy_zones_amounts_and_distances() {
    let zones = [
        (
            5,
            vec![("cpu", "3", "4", "6"), ("memory", "1Gi", "2Gi", "4Gi")],
        ),
        (
            0,
            vec![
                ("cpu", "1500m", "4", "4"),
                ("example.com/nic", "2", "2", "2"),
            ],
        ),
        (2, vec![("cpu", "0", "4", "4")]),
    ];
    let nrt = nrt_with("restricted", "pod", &zones, |a, b| {
        if a == b { 10 } else { 10 + i64::from(a + b) }
    });
    let node = NodeTopology::from_nrt(&nrt).unwrap();
    assert_eq!(node.name(), "worker-1");
    assert_eq!(node.policy(), TopologyManagerPolicy::Restricted);
    assert_eq!(node.scope(), TopologyManagerScope::Pod);
    assert_eq!(node.config().max_numa_nodes, 8);
    assert_eq!(node.numa_ids(), [0, 2, 5]);
    assert_eq!(
        node.resource_names().collect::<Vec<_>>(),
        ["cpu", "example.com/nic", "memory"]
    );
    // NRT CPU amounts count CPUs; the node view holds millicores.
    assert_eq!(node.available(5, "cpu"), Some(3000));
    assert_eq!(node.available(0, "cpu"), Some(1500));
    assert_eq!(node.allocatable(5, "cpu"), Some(4000));
    assert_eq!(node.capacity(5, "cpu"), Some(6000));
    assert_eq!(node.available(5, "memory"), Some(1 << 30));
    assert_eq!(node.available(2, "memory"), None);
    assert_eq!(node.available(1, "cpu"), None);
    assert!(node.reports("example.com/nic") && !node.reports("example.com/gpu"));
    assert_eq!(node.distance(0, 5), Some(15));
    assert_eq!(node.distance(2, 2), Some(10));
    assert_eq!(node.distance(0, 1), None);
}

#[test]
fn missing_costs_default_to_local_and_remote() {
    let mut nrt = nrt_with(
        "none",
        "container",
        &[free_zone(0, &[]), free_zone(1, &[])],
        flat_distance,
    );
    for zone in &mut nrt.zones {
        zone.costs.clear();
    }
    nrt.attributes.clear();
    let node = NodeTopology::from_nrt(&nrt).unwrap();
    assert_eq!(
        (node.distance(0, 0), node.distance(0, 1)),
        (Some(10), Some(20))
    );
    assert_eq!(node.policy(), TopologyManagerPolicy::None);
    assert_eq!(node.scope(), TopologyManagerScope::Container);
}

#[test]
fn non_numa_zones_are_ignored() {
    let mut nrt = nrt_with(
        "single-numa-node",
        "container",
        &[free_zone(0, &[("cpu", "2")])],
        flat_distance,
    );
    nrt.zones.push(Zone {
        name: "socket-0".into(),
        type_: "Socket".into(),
        ..Zone::default()
    });
    assert_eq!(NodeTopology::from_nrt(&nrt).unwrap().numa_ids(), [0]);
}

#[test]
fn errors_name_the_node_and_the_field() {
    let bad_quantity = nrt_with(
        "restricted",
        "container",
        &[(0, vec![("cpu", "2", "lots", "4")])],
        flat_distance,
    );
    let negative = nrt_with(
        "restricted",
        "container",
        &[(1, vec![("memory", "-1", "1", "1")])],
        flat_distance,
    );
    let mut bad_name = nrt_with(
        "restricted",
        "container",
        &[free_zone(0, &[])],
        flat_distance,
    );
    bad_name.zones[0].name = "numa0".into();
    // Its costs would name the old zone, which the sanity check refuses first.
    bad_name.zones[0].costs.clear();
    let mut duplicate = nrt_with(
        "restricted",
        "container",
        &[free_zone(3, &[]), free_zone(3, &[])],
        flat_distance,
    );
    duplicate.metadata.name = Some("worker-9".into());
    let high_id = nrt_with(
        "restricted",
        "container",
        &[free_zone(64, &[])],
        flat_distance,
    );
    let bad_policy = nrt_with(
        "single-numa",
        "container",
        &[free_zone(0, &[])],
        flat_distance,
    );
    let cases = [
        (
            bad_quantity,
            r#"node "worker-1": zone "node-0": resource "cpu" allocatable: invalid quantity "lots""#,
        ),
        (
            negative,
            r#"node "worker-1": zone "node-1": resource "memory" available: negative quantity "-1""#,
        ),
        (bad_name, r#"node "worker-1": zone name "numa0""#),
        (
            duplicate,
            // Found by the sanity check, which looks at every zone by name.
            r#"node "worker-9": zone "node-3" is listed twice"#,
        ),
        (
            high_id,
            r#"node "worker-1": NUMA zone "node-64": ids above 63"#,
        ),
        (
            bad_policy,
            r#"node "worker-1": topologyManagerPolicy has unknown value "single-numa""#,
        ),
    ];
    for (nrt, text) in cases {
        let err: TopologyError = NodeTopology::from_nrt(&nrt).unwrap_err();
        assert!(err.to_string().contains(text), "{err} lacks {text}");
    }
}

#[test]
fn pessimistic_reserve_takes_from_every_zone_and_reverts() {
    let zones = [
        free_zone(0, &[("cpu", "30"), ("memory", "60Gi")]),
        free_zone(1, &[("cpu", "30"), ("memory", "60Gi")]),
    ];
    let mut node = node("single-numa-node", "container", &zones);
    let before = node.clone();
    let pod_request =
        Resources::from_amounts([("cpu", 8000), ("memory", 16 << 30), ("example.com/x", 1)]);
    node.reserve_on_every_zone(&pod_request);
    for id in [0, 1] {
        assert_eq!(node.available(id, "cpu"), Some(22_000));
        assert_eq!(node.available(id, "memory"), Some(44 << 30));
    }
    node.unreserve_on_every_zone(&pod_request);
    assert_eq!(node, before);
}

#[test]
fn release_on_one_zone_adds_back_up_to_the_allocatable() {
    // (name, available, allocatable, capacity): zone 0 has 2 of 8 CPUs free.
    let zones = [
        (
            0,
            vec![("cpu", "2", "8", "8"), ("memory", "1Gi", "8Gi", "8Gi")],
        ),
        (
            1,
            vec![("cpu", "5", "8", "8"), ("memory", "8Gi", "8Gi", "8Gi")],
        ),
    ];
    let mut node = node("single-numa-node", "container", &zones);
    let freed = Resources::from_amounts([("cpu", 4000), ("memory", 2 << 30), ("example.com/x", 1)]);
    assert!(node.release_on_zone(0, &freed));
    assert_eq!(node.available(0, "cpu"), Some(6000));
    assert_eq!(node.available(0, "memory"), Some(3 << 30));
    assert_eq!(
        node.available(1, "cpu"),
        Some(5000),
        "other zones untouched"
    );
    // Never more free than allocatable.
    assert!(node.release_on_zone(1, &freed));
    assert_eq!(node.available(1, "cpu"), Some(8000));
    assert_eq!(node.available(1, "memory"), Some(8 << 30));
    assert!(!node.release_on_zone(7, &freed), "no such zone");
}

#[test]
fn device_hints_cover_device_zones_only_from_kubelet_1_36() {
    let zones = [
        free_zone(0, &[("cpu", "4"), ("example.com/gpu", "2")]),
        free_zone(1, &[("cpu", "4")]),
        free_zone(2, &[("cpu", "4"), ("example.com/gpu", "1")]),
    ];
    let at = |version: Option<&str>| {
        let attributes: Vec<(&str, &str)> =
            version.map(|v| ("kubeletVersion", v)).into_iter().collect();
        managers_node("best-effort", "container", &zones, &attributes)
    };
    let gpu = |node: &NodeTopology| {
        let res = node
            .resource_names()
            .position(|r| r == "example.com/gpu")
            .expect("gpu");
        node.device_hint_zones(res)
    };
    // Unnamed or older kubelets: every zone; 1.36 on: the zones holding a GPU.
    assert_eq!(gpu(&at(None)), 0b111);
    assert_eq!(gpu(&at(Some("v1.35.4"))), 0b111);
    let newer = at(Some("v1.36.3"));
    assert_eq!(newer.kubelet_minor(), Some(36));
    assert_eq!(gpu(&newer), 0b101);
}
