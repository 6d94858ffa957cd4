//! A decision records the zones its filter placed the pod in.

use std::time::SystemTime;

use serde_json::json;

use super::*;
use crate::cycle::TopologyView;
use crate::decisions;
use crate::telemetry::{AttemptOutcome, AttemptRecord};
use crate::test_support::{
    cycle_settings, guaranteed_container, input, node_object, pod, shared, two_zones_nrt,
};

#[test]
fn the_recorded_zones_are_the_placements_zones() {
    let shared = shared();
    // Single-numa-node: only zone 1 of a (3 CPUs free) holds the pod's 2 CPUs; b has
    // one free on each zone.
    for (name, free) in [("a", [0, 3]), ("b", [1, 1])] {
        shared.state.write().upsert_node(&node_object(name));
        shared.cache.update_nrt(two_zones_nrt(name, free));
    }
    let pod = pod("p", &[], json!({"containers": guaranteed_container(2)}));
    let input = input(&pod);
    let settings = cycle_settings(1);
    let (decision, trace) = decide_traced(&shared, &mut Snapshot::new(), &input, &settings);
    let Decision::Schedule(chosen) = decision else {
        panic!("{decision:?}");
    };
    assert_eq!(chosen.node, "a");

    // The placement of the NUMA fit on the chosen node's view, run on its own.
    let placement = Snapshot::new().with(&shared, &input, |cluster, lookup| {
        let TopologyView::Known(topology) = lookup("a") else {
            panic!("a has its topology");
        };
        let info = cluster.nodes.iter().find(|n| n.name() == "a").expect("a");
        cycle::numa_fit(&topology, &input.request, info).expect("the pod fits a")
    });
    let zones: Option<Vec<u32>> = placement.zones.map(|z| z.iter().collect());
    assert_eq!(zones, Some(vec![1]));
    assert_eq!(trace.zones, zones);

    // What the decision log keeps of the attempt.
    let attempt = AttemptRecord {
        pod: &pod,
        started: SystemTime::now(),
        phases: &trace.phases(),
        decision: None,
        nodes: trace.nodes,
        feasible: trace.cycle.feasible,
        outcome: AttemptOutcome::Scheduled {
            node: &chosen.node,
            zones: trace.zones.clone(),
            score: chosen.score,
            dra: None,
        },
    };
    assert_eq!(decisions::from_attempt(&attempt, None).zones, zones);
}
