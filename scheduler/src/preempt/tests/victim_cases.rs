//! Victim selection on one node and across nodes: priorities, the smallest set, the
//! NUMA zone rule, unresolvable filters, the greedy reprieve.

use super::*;

#[test]
fn numa_zone_rule_evicts_the_pods_of_one_zone_and_prefers_fewer_victims() {
    // n1: zone 0 full with a (2) + b (2), low priority; zone 1 has d (3, high) and 1
    // free. n2: zone 0 holds four 1-CPU low pods, zone 1 a 4-CPU high pod.
    let mut n1 = node("n1", &[]);
    for p in [gpod("a", 2, 10), gpod("b", 2, 10), gpod("d", 3, 1000)] {
        place(&mut n1, &p);
    }
    let mut n2 = node("n2", &[]);
    for p in [
        gpod("f", 1, 10),
        gpod("g", 1, 10),
        gpod("h", 1, 10),
        gpod("i", 1, 10),
        gpod("j", 4, 1000),
    ] {
        place(&mut n2, &p);
    }
    let views = [
        topology("single-numa-node", &[(4, 0), (4, 1)]),
        topology("single-numa-node", &[(4, 0), (4, 0)]),
    ];
    let preemptor = gpod("big", 4, 100);
    let plans = search_plain(&[n1, n2], &views, &preemptor);
    assert_eq!(
        plans,
        [
            ("n1".to_owned(), names(&["a", "b"])),
            ("n2".to_owned(), names(&["f", "g", "h", "i"])),
        ]
    );
}

#[test]
fn a_published_placement_puts_each_victim_back_on_its_own_zone() {
    // Zones of 4 CPUs, both full: a (low) + c (high) on one, b (low) + d (high) on the
    // other, though the NRT alone does not say which.
    let mut n1 = node("n1", &[]);
    for p in [
        gpod("a", 2, 1),
        gpod("c", 2, 1000),
        gpod("b", 2, 2),
        gpod("d", 2, 1000),
    ] {
        place(&mut n1, &p);
    }
    // Unknown placement: a and b back on one zone would make room for 4 CPUs, a guess.
    let unknown = [topology("single-numa-node", &[(4, 0), (4, 0)])];
    let plans = search_plain(std::slice::from_ref(&n1), &unknown, &gpod("big", 4, 100));
    assert_eq!(plans, [("n1".to_owned(), names(&["a", "b"]))]);
    // The object says where each container is: no zone can free 4 CPUs.
    let placed = [topology_placed(
        "single-numa-node",
        &[(4, 0), (4, 0)],
        &[("a", 0), ("c", 0), ("b", 1), ("d", 1)],
    )];
    let plans = search_plain(std::slice::from_ref(&n1), &placed, &gpod("big", 4, 100));
    assert!(plans.is_empty(), "{plans:?}");
    // 2 CPUs: a alone frees them on its zone.
    let plans = search_plain(std::slice::from_ref(&n1), &placed, &gpod("mid", 2, 100));
    assert_eq!(plans, [("n1".to_owned(), names(&["a"]))]);
    // A placement of another set of containers (a pod the scheduler does not know) is
    // not decoded: back to the guess.
    let foreign = [topology_placed(
        "single-numa-node",
        &[(4, 0), (4, 0)],
        &[("a", 0), ("c", 0), ("b", 1), ("d", 1), ("e", 1)],
    )];
    let plans = search_plain(&[n1], &foreign, &gpod("big", 4, 100));
    assert_eq!(plans, [("n1".to_owned(), names(&["a", "b"]))]);
}

#[test]
fn victims_without_numa_footprint_do_not_free_a_zone() {
    // Node-level room is plenty; the zones are full of pods we may not evict and the
    // low-priority pods are Burstable (shared pool, no NUMA footprint).
    let mut n1 = node("n1", &[]);
    place(&mut n1, &gpod("d", 4, 1000));
    for name in ["s1", "s2"] {
        place(&mut n1, &pod(name, &[], json!({"priority": 1})));
    }
    let views = [topology("single-numa-node", &[(4, 0), (4, 2)])];
    let plans = search_plain(&[n1], &views, &gpod("big", 4, 100));
    assert!(plans.is_empty(), "{plans:?}");
}

#[test]
fn one_victim_back_on_one_zone_can_be_enough() {
    // Zones of 4 CPUs with 1 free each; low pods of 3 and 3. One victim back on a zone
    // (1 + 3) makes room for 4; the lower priority goes.
    let mut n1 = node("n1", &[]);
    place(&mut n1, &gpod("a", 3, 1));
    place(&mut n1, &gpod("b", 3, 2));
    let views = [topology("single-numa-node", &[(4, 1), (4, 1)])];
    let plans = search_plain(&[n1], &views, &gpod("big", 4, 100));
    assert_eq!(plans, [("n1".to_owned(), names(&["a"]))]);
    // Both back on one zone would read 7 free on a 4-CPU zone: capped at 4. A pod of 5
    // never fits a 4-CPU zone under single-numa-node, whatever is evicted.
    let mut n1 = node("n1", &[]);
    place(&mut n1, &gpod("a", 3, 1));
    place(&mut n1, &gpod("b", 3, 2));
    let plans = search_plain(&[n1], &views, &gpod("huge", 5, 100));
    assert!(plans.is_empty());
}

#[test]
fn reserved_victims_come_back_on_every_zone() {
    // restricted: 6 CPUs and 12Gi need both zones (4 CPUs, 8Gi each). The NRT says 3 +
    // 3 CPUs free, but the cache still reserves victim a's 2 CPUs on every zone: the
    // view reads 1 + 1.
    let mut n1 = node("n1", &[]);
    place(&mut n1, &gpod("a", 2, 1));
    let reserved_view = |node: &str, uid: &str| {
        (node == "n1" && uid == "uid-a").then(|| Resources::from_amounts([("cpu", 2000)]))
    };
    let views = [topology("restricted", &[(4, 1), (4, 1)])];
    let preemptor = pod(
        "big",
        &[],
        json!({"priority": 100, "containers": [{"name": "app", "resources": {
        "requests": {"cpu": "6", "memory": "12Gi"}, "limits": {"cpu": "6", "memory": "12Gi"}}}]}),
    );
    // Exactly released (2 back on each zone): 3 + 3 holds 6.
    let plans = search(
        &[n1.clone()],
        &views,
        &preemptor,
        &Budgets::default(),
        &reserved_view,
    );
    assert_eq!(plans, [("n1".to_owned(), names(&["a"]))]);
    // Were a's CPUs in the NRT on an unknown zone, one zone would get them: 3 + 1.
    let plans = search_plain(&[n1], &views, &preemptor);
    assert!(plans.is_empty(), "{plans:?}");
}

#[test]
fn only_lower_priorities_and_the_smallest_set() {
    let no_numa = [TopologyView::Missing];
    // 16 CPUs used: two 3-CPU pods (priority 1), one 6-CPU pod (priority 2), one
    // 4-CPU pod of the preemptor's own priority.
    let mut n1 = node("n1", &[]);
    for p in [
        gpod("s1", 3, 1),
        gpod("s2", 3, 1),
        gpod("m", 6, 2),
        gpod("peer", 4, 100),
    ] {
        place(&mut n1, &p);
    }
    let plans = search_plain(&[n1.clone()], &no_numa, &gpod("new", 6, 100));
    assert_eq!(
        plans,
        [("n1".to_owned(), names(&["m"]))],
        "one victim beats two"
    );
    // Needing 5, two 3-CPU pods (highest priority 1) beat {m} only on priority when the
    // size is equal: {m} alone works and is smaller.
    let plans = search_plain(&[n1.clone()], &no_numa, &gpod("new", 5, 100));
    assert_eq!(plans, [("n1".to_owned(), names(&["m"]))]);
    // Needing 10: m + one 3-CPU pod is not enough (9), so three victims.
    let plans = search_plain(&[n1.clone()], &no_numa, &gpod("new", 10, 100));
    assert_eq!(plans, [("n1".to_owned(), names(&["m", "s1", "s2"]))]);
    // Needing 13: only with peer, which has the same priority: no plan.
    let plans = search_plain(&[n1.clone()], &no_numa, &gpod("new", 13, 100));
    assert!(plans.is_empty());
    // A preemptor of priority 2 may only take the priority-1 pods.
    let plans = search_plain(&[n1], &no_numa, &gpod("new", 6, 2));
    assert_eq!(plans, [("n1".to_owned(), names(&["s1", "s2"]))]);
}

#[test]
fn eviction_cannot_fix_a_taint_but_can_fix_anti_affinity() {
    let no_numa = [TopologyView::Missing];
    let tainted = {
        let mut n = node_with(
            "n1",
            &[],
            json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}),
        );
        place(&mut n, &gpod("low", 16, 1));
        n
    };
    let plans = search_plain(&[tainted], &no_numa, &gpod("new", 4, 100));
    assert!(plans.is_empty());

    let mut n1 = node("n1", &[]);
    place(
        &mut n1,
        &pod("w-low", &[("app", "web")], json!({"priority": 1})),
    );
    place(
        &mut n1,
        &pod("other", &[("app", "db")], json!({"priority": 1})),
    );
    let lonely = pod(
        "new",
        &[("app", "web")],
        json!({"priority": 100, "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}),
    );
    let plans = search_plain(&[n1], &no_numa, &lonely);
    assert_eq!(plans, [("n1".to_owned(), names(&["w-low"]))]);
}

#[test]
fn many_candidates_use_the_greedy_reprieve() {
    let no_numa = [TopologyView::Missing];
    let mut n1 = node("n1", &[]);
    for i in 0..12 {
        place(&mut n1, &gpod(&format!("low{i:02}"), 1, i));
    }
    place(&mut n1, &gpod("high", 4, 1000));
    let plans = search_plain(&[n1], &no_numa, &gpod("new", 3, 100));
    // Highest priorities are given back first: the three lowest stay victims.
    assert_eq!(
        plans,
        [("n1".to_owned(), names(&["low00", "low01", "low02"]))]
    );
}
