//! Scoring strategies.

use super::super::{ScoreConfig, ScoringStrategy as S, score};
use super::*;

fn four_zones(cpu: [&'static str; 4], policy: &str) -> NodeTopology {
    let zones: Vec<_> = (0..4)
        .map(|id| free_zone(id, &[("cpu", cpu[id as usize]), ("memory", "16Gi")]))
        .collect();
    // Zones 0-1 and 2-3 are close pairs.
    let distance = |a: u32, b: u32| match (a, b) {
        _ if a == b => 10,
        _ if a / 2 == b / 2 => 11,
        _ => 21,
    };
    NodeTopology::from_nrt(&nrt_with(policy, "pod", &zones, distance)).unwrap()
}

fn g_pod(cpu: &str) -> PodRequest {
    request(&pod(vec![guaranteed(
        "a",
        &[("cpu", cpu), ("memory", "1Gi")],
    )]))
}

#[test]
fn least_numa_nodes_counts_zones_and_distance() {
    let config = ScoreConfig::new(S::LeastNumaNodes);
    let cases = [
        ("one zone", ["4", "4", "4", "4"], "4", 94),
        ("a close pair", ["4", "4", "0", "0"], "6", 82),
        ("only a distant pair", ["4", "0", "4", "0"], "6", 76),
        ("three zones", ["4", "4", "4", "0"], "10", 100 - 3 * 12 + 6),
        ("nothing fits", ["1", "1", "1", "1"], "6", 0),
    ];
    for (case, cpu, request, expected) in cases {
        assert_eq!(
            score(&four_zones(cpu, "restricted"), &g_pod(request), &config),
            expected,
            "{case}"
        );
    }
}

#[test]
fn strategies_score_the_best_zone() {
    // Zone 0 half full after the pod, zone 1 exactly full.
    let zones = [
        free_zone(0, &[("cpu", "4"), ("memory", "4Gi")]),
        free_zone(1, &[("cpu", "2"), ("memory", "1Gi")]),
    ];
    let node = node("single-numa-node", "container", &zones);
    let pod = g_pod("2");
    let cases = [
        // zone 0: cpu 50, memory 25; zone 1: cpu 100, memory 100.
        (S::MostAllocated, 100),
        // zone 0: cpu 50, memory 75; zone 1: 0.
        (S::LeastAllocated, 62),
        // zone 1: fractions 1 and 1, no variance.
        (S::BalancedAllocation, 100),
    ];
    for (strategy, expected) in cases {
        assert_eq!(
            score(&node, &pod, &ScoreConfig::new(strategy)),
            expected,
            "{strategy:?}"
        );
    }
    let cpu_only = ScoreConfig {
        strategy: S::LeastAllocated,
        weights: vec![("cpu".into(), 3), ("memory".into(), 1)],
    };
    // zone 0: (3·50 + 1·75) / 4.
    assert_eq!(score(&node, &pod, &cpu_only), 56);
}

#[test]
fn spanning_pods_score_their_smallest_zone_set() {
    let node = four_zones(["4", "4", "0", "0"], "restricted");
    // 6 CPUs fit only on {0,1}: cap 8 CPUs and 32Gi.
    let least = score(&node, &g_pod("6"), &ScoreConfig::new(S::LeastAllocated));
    assert_eq!(least, (25 + 96) / 2);
}

#[test]
fn only_guaranteed_pods_are_steered() {
    let node = four_zones(["4", "4", "4", "4"], "single-numa-node");
    let burst = request(&pod(vec![burstable(
        "a",
        &[("cpu", "1"), ("example.com/nic", "1")],
    )]));
    let none = request(&pod(vec![burstable("a", &[])]));
    for strategy in [
        S::LeastAllocated,
        S::MostAllocated,
        S::BalancedAllocation,
        S::LeastNumaNodes,
    ] {
        let config = ScoreConfig::new(strategy);
        assert_eq!(
            score(&node, &burst, &config),
            super::super::score::NON_GUARANTEED_SCORE
        );
        assert_eq!(
            score(&node, &none, &config),
            super::super::score::NON_GUARANTEED_SCORE
        );
    }
}

fn two_zones(cpu: [&str; 2]) -> NodeTopology {
    let zones = [
        free_zone(0, &[("cpu", cpu[0]), ("memory", "64Gi")]),
        free_zone(1, &[("cpu", cpu[1]), ("memory", "64Gi")]),
    ];
    node("single-numa-node", "container", &zones)
}

#[test]
fn fragmentation_aware_prefers_the_tightest_fit() {
    let config = ScoreConfig::new(S::FragmentationAware);
    let pod = g_pod("2");
    let exact = score(&two_zones(["2", "8"]), &pod, &config);
    let loose = score(&two_zones(["4", "8"]), &pod, &config);
    assert!(exact > loose, "exact fit {exact} vs loose {loose}");
    // The kubelet takes the lowest zone that fits: zone 0 with 8 free, not the tight
    // zone 1, so this node is no tighter than the loose one.
    let lowest_is_loose = score(&two_zones(["8", "2"]), &pod, &config);
    assert!(exact > lowest_is_loose && loose > lowest_is_loose);
}

#[test]
fn fragmentation_aware_keeps_a_large_zone_whole() {
    let config = ScoreConfig::new(S::FragmentationAware);
    let pod = g_pod("2");
    // Same tightness in zone 0; only one node keeps a 16-CPU zone afterwards.
    let keeps = score(&two_zones(["16", "16"]), &pod, &config);
    let breaks = score(&two_zones(["16", "0"]), &pod, &config);
    assert!(keeps > breaks, "keeps {keeps} vs breaks {breaks}");
}
