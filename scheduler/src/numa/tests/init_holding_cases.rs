//! What regular init containers keep after their pod is admitted
//! ([`super::super::init_holdings`]): the kubelet's reuse rules per resource, where it
//! stays, and how it is held back on the view.

use super::super::init_holdings::{self, InitHolding};
use super::*;

const GI: i64 = 1 << 30;

/// A holding as plain data: NUMA ids and `(resource, amount)` pairs.
type Held = (Vec<u32>, Vec<(String, i64)>);

/// Two zones of 8 CPUs, 16Gi and 2 GPUs each, all free.
fn two_zones(policy: &str, scope: &str) -> NodeTopology {
    let zone = |id| {
        free_zone(
            id,
            &[("cpu", "8"), ("memory", "16Gi"), ("example.com/gpu", "2")],
        )
    };
    node(policy, scope, &[zone(0), zone(1)])
}

fn holdings(node: &NodeTopology, pod: &Pod) -> Vec<Held> {
    init_holdings::predict(node, &request(pod))
        .into_iter()
        .map(|InitHolding { zones, amounts }| {
            (
                zones.iter().collect(),
                amounts.iter().map(|(n, a)| (n.to_owned(), a)).collect(),
            )
        })
        .collect()
}

fn held(zones: &[u32], amounts: &[(&str, i64)]) -> Held {
    (
        zones.to_vec(),
        amounts.iter().map(|&(n, a)| (n.to_owned(), a)).collect(),
    )
}

#[test]
fn pods_without_regular_init_containers_keep_nothing() {
    let node = two_zones("single-numa-node", "container");
    let app = guaranteed("app", &[("cpu", "2"), ("memory", "2Gi")]);
    assert!(holdings(&node, &pod(vec![app.clone()])).is_empty());
    // A sidecar is reported by podresources like an app container.
    let side = sidecar(guaranteed("side", &[("cpu", "2"), ("memory", "2Gi")]));
    assert!(holdings(&node, &pod_with(vec![side], vec![app], &[])).is_empty());
    // Shared CPUs and no device: nothing exclusive to keep (memory of a Burstable pod
    // is never pinned).
    let init = burstable("init", &[("cpu", "500m"), ("memory", "1Gi")]);
    let app = burstable("app", &[("cpu", "1"), ("memory", "1Gi")]);
    assert!(holdings(&node, &pod_with(vec![init], vec![app], &[])).is_empty());
}

#[test]
fn devices_are_reused_first_cpus_are_not_memory_on_the_same_zones() {
    let node = two_zones("single-numa-node", "pod");
    let init = guaranteed(
        "init",
        &[("cpu", "4"), ("memory", "8Gi"), ("example.com/gpu", "2")],
    );
    let app = guaranteed(
        "app",
        &[("cpu", "2"), ("memory", "2Gi"), ("example.com/gpu", "1")],
    );
    // Zone 0, the lowest that fits: one GPU, all 4 CPUs and 6Gi stay held.
    assert_eq!(
        holdings(&node, &pod_with(vec![init], vec![app], &[])),
        [held(
            &[0],
            &[("cpu", 4000), ("example.com/gpu", 1), ("memory", 6 * GI)]
        )]
    );
}

#[test]
fn init_containers_asking_for_other_counts_may_take_other_cpus() {
    let node = two_zones("single-numa-node", "container");
    let a = guaranteed("a", &[("cpu", "1"), ("memory", "1Gi")]);
    let b = guaranteed("b", &[("cpu", "4"), ("memory", "1Gi")]);
    let same = guaranteed("c", &[("cpu", "4"), ("memory", "1Gi")]);
    let app = guaranteed("app", &[("cpu", "1"), ("memory", "1Gi")]);
    let cpus = |h: &[Held]| -> i64 {
        h.iter()
            .flat_map(|(_, a)| a.iter())
            .filter(|(n, _)| n == "cpu")
            .map(|(_, a)| a)
            .sum()
    };
    let p = pod_with(vec![a, b.clone()], vec![app.clone()], &[]);
    assert_eq!(cpus(&holdings(&node, &p)), 5000);
    let p = pod_with(vec![b, same], vec![app], &[]);
    assert_eq!(cpus(&holdings(&node, &p)), 4000);
}

#[test]
fn held_back_whole_under_aligning_policies_split_under_the_others() {
    let init = guaranteed("init", &[("cpu", "10"), ("memory", "1Gi")]);
    let app = guaranteed("app", &[("cpu", "1"), ("memory", "1Gi")]);
    let p = pod_with(vec![init], vec![app], &[]);
    // `best-effort`: 10 CPUs fit no zone; the kubelet spreads them. Only the count
    // matters, so they are split in zone order (8 + 2), not 10 on each zone.
    let mut node = two_zones("best-effort", "pod");
    let predicted = init_holdings::predict(&node, &request(&p));
    init_holdings::hold(&mut node, &predicted);
    assert_eq!(node.available(0, "cpu"), Some(0));
    assert_eq!(node.available(1, "cpu"), Some(6000));
    init_holdings::release(&mut node, &predicted);
    assert_eq!(node.available(0, "cpu"), Some(8000));
    // `restricted`: held whole on both zones the pod spans, since where on them the
    // kubelet keeps them is not known (the memory, on the same zones, is all reused).
    let mut node = two_zones("restricted", "pod");
    let predicted = init_holdings::predict(&node, &request(&p));
    assert_eq!(
        holdings(&node, &p)
            .iter()
            .map(|(z, _)| z.clone())
            .collect::<Vec<_>>(),
        [vec![0, 1]]
    );
    init_holdings::hold(&mut node, &predicted);
    assert_eq!(node.available(0, "cpu"), Some(-2000));
    assert_eq!(node.available(1, "cpu"), Some(-2000));
}
