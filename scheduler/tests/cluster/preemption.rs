//! NUMA-aware preemption on the real API server: a high-priority Guaranteed pod evicts
//! exactly the low-priority pods of the NUMA zone it needs, waits for the node agent to
//! report the zone free, and lands there.

use crate::{Env, TIMEOUT, env};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::{Value, json};
use tas_testcluster::wait_for;

/// A Guaranteed pod of `cpu` CPUs bound directly to `node` (as another scheduler
/// would), with `priority_class`.
async fn bound_pod(env: &Env, name: &str, node: &str, cpu: u32, priority_class: &str) {
    env.create_raw_pod(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "priorityClassName": priority_class,
            "containers": [{"name": "app", "image": "app", "resources": guaranteed(cpu)}]
        }
    }))
    .await;
}

fn guaranteed(cpu: u32) -> Value {
    json!({"requests": {"cpu": cpu.to_string(), "memory": "1Gi"},
           "limits": {"cpu": cpu.to_string(), "memory": "1Gi"}})
}

async fn wait_running(env: &Env, names: &[&str]) {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    for name in names {
        wait_for(format!("{name} running"), TIMEOUT, || async {
            let phase = api.get(name).await?.status.and_then(|s| s.phase);
            Ok::<_, kube::Error>((phase.as_deref() == Some("Running")).then_some(()))
        })
        .await
        .expect("running");
    }
}

fn fingerprint(env: &Env, pods: &[&str]) -> String {
    tas_api::fingerprint::compute(pods.iter().map(|p| (env.ns.as_str(), *p)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guaranteed_pod_preempts_the_low_priority_pods_of_one_zone_and_lands_there() {
    let mut env = env("preempt").await;
    let low = env.priority_class("low", 10).await;
    let urgent = env.priority_class("urgent", 100).await;
    let keep = env.priority_class("keep", 1000).await;
    let n1 = env.node(16).await;
    let n2 = env.node(16).await;

    // n1: zone 0 full with a + b (2 CPUs each, low priority); zone 1 holds d (3 CPUs,
    // not preemptable) and has 1 free. n2: zone 0 full with four 1-CPU low pods, zone
    // 1 full with j (4 CPUs, not preemptable): preempting there takes four victims.
    for (name, cpu, class) in [("a", 2, &low), ("b", 2, &low), ("d", 3, &keep)] {
        bound_pod(&env, name, &n1, cpu, class).await;
    }
    for (name, cpu, class) in [
        ("f", 1, &low),
        ("g", 1, &low),
        ("h", 1, &low),
        ("i", 1, &low),
        ("j", 4, &keep),
    ] {
        bound_pod(&env, name, &n2, cpu, class).await;
    }
    wait_running(&env, &["a", "b", "d", "f", "g", "h", "i", "j"]).await;
    let fp1 = fingerprint(&env, &["a", "b", "d"]);
    let fp2 = fingerprint(&env, &["f", "g", "h", "i", "j"]);
    env.nrt(&n1, "single-numa-node", &[(4, 0), (4, 1)], Some(&fp1))
        .await;
    env.nrt(&n2, "single-numa-node", &[(4, 0), (4, 0)], Some(&fp2))
        .await;
    env.start_scheduler(json!({"cache": {"resyncPeriod": "1s", "maxStaleness": "10m"}}));

    env.create_pod(
        "urgent",
        json!({}),
        json!({"priorityClassName": urgent,
               "containers": [{"name": "app", "image": "app", "resources": guaranteed(4)}]}),
    )
    .await;

    // The victims go, through the Eviction API, with an Event each.
    let api: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    for victim in ["a", "b"] {
        wait_for(format!("{victim} evicted"), TIMEOUT, || async {
            Ok::<_, kube::Error>(api.get_opt(victim).await?.is_none().then_some(()))
        })
        .await
        .expect("victim gone");
        let events = env.events(victim, "Preempted").await;
        assert!(
            events
                .iter()
                .any(|e| e.contains("urgent") && e.contains(&n1)),
            "{victim}: {events:?}"
        );
    }
    // Nominated, but not bound: the NRT still shows zone 0 full, and binding now could
    // meet a kubelet TopologyAffinityError had the guess been wrong.
    let nominated = wait_for("nominatedNodeName", TIMEOUT, || async {
        let pod = api.get("urgent").await?;
        Ok::<_, kube::Error>(pod.status.and_then(|s| s.nominated_node_name))
    })
    .await
    .expect("nominated");
    assert_eq!(nominated, n1);
    assert_eq!(
        env.node_of("urgent").await,
        None,
        "bound before the NRT showed room"
    );

    // The node agent reports zone 0 free, with the fingerprint of what is left.
    let fp1 = fingerprint(&env, &["d"]);
    env.nrt(&n1, "single-numa-node", &[(4, 4), (4, 1)], Some(&fp1))
        .await;
    assert_eq!(env.wait_bound("urgent").await, n1);
    let preempting = env.events("urgent", "Preempting").await;
    assert!(
        preempting
            .iter()
            .any(|e| e.contains("2 lower-priority pod(s)")),
        "{preempting:?}"
    );

    for m in env.events("urgent", "FailedScheduling").await {
        println!("urgent: {m}");
    }

    // Nothing else was touched.
    let pods = env.pods().await;
    for name in ["d", "f", "g", "h", "i", "j"] {
        assert!(
            pods.iter()
                .any(|(p, _, terminating)| p == name && !terminating),
            "{name} must survive: {pods:?}"
        );
    }
    assert!(!pods.iter().any(|(p, ..)| p == "a" || p == "b"));
}
