//! Topology spread constraints on the real API server.

use crate::env;
use serde_json::json;

const ZONE: &str = "topology.kubernetes.io/zone";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn do_not_schedule_spread_over_zones_holds_for_a_burst() {
    let mut env = env("spread").await;
    let mut zone_of = std::collections::HashMap::new();
    for zone in ["zone-a", "zone-a", "zone-b", "zone-b"] {
        let n = env.node_with_labels(16, &[(ZONE, zone)]).await;
        zone_of.insert(n, zone);
    }
    env.start_scheduler(json!({}));
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "spread"}}}]});
    let pods: Vec<String> = (0..6).map(|i| format!("s-{i}")).collect();
    for name in &pods {
        env.create_pod(name, json!({"app": "spread"}), spread.clone())
            .await;
    }
    let placed = env.wait_all_bound(&pods).await;
    let in_a = placed.iter().filter(|n| zone_of[*n] == "zone-a").count();
    let in_b = placed.iter().filter(|n| zone_of[*n] == "zone-b").count();
    assert_eq!((in_a, in_b), (3, 3), "{placed:?}");
}
