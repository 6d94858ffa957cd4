//! Inter-pod anti-affinity on the real API server: replicas spread one per node.

use crate::env;
use serde_json::json;
use std::collections::HashSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_anti_affinity_puts_one_replica_per_node_and_explains_the_fourth() {
    let mut env = env("anti").await;
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(env.node(16).await);
    }
    env.start_scheduler(json!({}));
    let anti = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}});
    // Created at once: each decision must see the replicas assumed before it.
    let replicas: Vec<String> = (0..3).map(|i| format!("web-{i}")).collect();
    for name in &replicas {
        env.create_pod(name, json!({"app": "web"}), anti.clone())
            .await;
    }
    let placed = env.wait_all_bound(&replicas).await;
    let distinct: HashSet<&String> = placed.iter().collect();
    assert_eq!(distinct.len(), 3, "one replica per node: {placed:?}");
    assert!(placed.iter().all(|n| nodes.contains(n)));

    env.create_pod("web-3", json!({"app": "web"}), anti).await;
    let msg = env.failed_scheduling("web-3").await;
    println!("fourth replica: {msg}");
    assert!(msg.contains("anti-affinity rules"), "{msg}");
    assert!(!msg.contains("does not evaluate"), "{msg}");
    assert_eq!(env.node_of("web-3").await, None);
}
