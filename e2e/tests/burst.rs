//! A burst of NUMA-sensitive pods on nodes whose zones are tight, judged by the
//! kubelet's own managers (the referee, through the node simulator): the scheduler
//! in-process, one real updater agent per node publishing from the referee's
//! podresources socket. Every pod the scheduler binds must be admitted; the time to
//! fill the nodes is printed (never asserted), to compare the reserve cache's
//! unblocking before and after a change.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tas_e2e::in_process::InProcessStack;
use tas_nodesim::Scenario;
use tas_testcluster::{NODE_SIM_LABEL, TestCluster, apply_crds_from_dir, crd_dir, wait_for};

const NODES: usize = 4;
/// Four zones of 4 CPUs per node: two 2-CPU pods per zone.
const CAPACITY: usize = NODES * 4 * 2;
/// More than fits, so the last ones stay Pending.
const BURST: usize = CAPACITY + 8;
const TIMEOUT: Duration = Duration::from_secs(180);
const LABEL: &str = "e2e.tas.dev/burst";

fn scenario(group: &str) -> Scenario {
    scenario_with(group, NODES, "single-numa-node", "pod")
}

fn scenario_with(group: &str, nodes: usize, policy: &str, scope: &str) -> Scenario {
    Scenario::from_yaml(&format!(
        "nodes:
- name: {group}
  count: {nodes}
  topologyManagerPolicy: {policy}
  topologyManagerScope: {scope}
  labels: {{ {LABEL}: {group} }}
  zones:
  - {{ count: 4, cpus: 4, memory: 8Gi }}
"
    ))
    .expect("scenario")
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// One round's stack (see `tas_e2e::in_process`), its scheduler with default settings.
async fn start_stack(
    client: &Client,
    prefix: &str,
    scenario: impl Fn(&str) -> Scenario,
) -> InProcessStack {
    InProcessStack::start(client, prefix, scenario, json!({}))
        .await
        .expect("stack")
}

/// The pods the kubelet rejected, with their reasons.
fn rejected(list: &[Pod]) -> Vec<String> {
    list.iter()
        .filter(|p| phase(p) == "Failed")
        .map(|p| {
            let reason = p.status.as_ref().and_then(|s| s.reason.clone());
            format!("{} ({reason:?})", p.name_any())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_tight_zones_is_admitted_by_the_kubelet() {
    let cluster = TestCluster::shared().expect("cluster");
    let client = cluster.client().await.expect("client");
    apply_crds_from_dir(&client, &crd_dir())
        .await
        .expect("CRDs");
    let stack = start_stack(&client, "burst", scenario).await;
    let (scheduler, group) = (&stack.scheduler, &stack.group);

    let pods: Api<Pod> = Api::namespaced(client.clone(), &stack.ns);
    let started = Instant::now();
    for i in 0..BURST {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("p-{i:03}"), "labels": {NODE_SIM_LABEL: "true"}},
            "spec": {
                "schedulerName": scheduler,
                "nodeSelector": {LABEL: group},
                "containers": [{"name": "app", "image": "app", "resources": {
                    "requests": {"cpu": "2", "memory": "1Gi"},
                    "limits": {"cpu": "2", "memory": "1Gi"}}}]
            }
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod created");
    }

    // Filled: as many pods admitted as the zones hold. A rejection fails at once.
    let filled = wait_for("the zones to fill", TIMEOUT, || async {
        let list = pods.list(&ListParams::default()).await?.items;
        let rejected = rejected(&list);
        assert!(
            rejected.is_empty(),
            "the kubelet rejected pods the scheduler bound: {rejected:?}"
        );
        let running = list.iter().filter(|p| phase(p) == "Running").count();
        Ok::<_, kube::Error>((running >= CAPACITY).then(|| started.elapsed()))
    })
    .await
    .expect("filled");
    println!(
        "burst: {CAPACITY} pods admitted on {NODES} nodes × 4 zones of 4 CPUs in {:.2} s ({:.1} pods/s)",
        filled.as_secs_f64(),
        CAPACITY as f64 / filled.as_secs_f64()
    );

    // Nothing beyond capacity is ever bound, so nothing is ever rejected.
    let list = pods.list(&ListParams::default()).await.expect("pods").items;
    let bound = list
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .count();
    assert_eq!(
        bound, CAPACITY,
        "every bound pod is admitted, no more bound"
    );
    assert!(list.iter().all(|p| phase(p) != "Failed"));

    stack.stop().await;
}

/// Pods of one to two containers of 1, 2, 3 or 5 CPUs (5 CPUs and 9Gi need two zones),
/// drawn from `seed`: `(name, [(cpus, memory Gi)])`.
fn mixed_pods(seed: u64, count: usize) -> Vec<(String, Vec<(u32, u32)>)> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    (0..count)
        .map(|i| {
            let containers = 1 + next(2) as usize;
            let sizes = (0..containers)
                .map(|_| match next(4) {
                    0 => (1, 1),
                    1 => (2, 1),
                    2 => (3, 1),
                    _ => (5, 9),
                })
                .collect();
            (format!("m-{i:03}"), sizes)
        })
        .collect()
}

/// Mixed pods on `restricted` and `single-numa-node` nodes in `container` scope: the
/// reserve cache narrows reservations to the zones the kubelet could use, and the
/// referee (the kubelet's own managers) must admit every pod the scheduler binds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_bursts_in_container_scope_are_admitted_by_the_kubelet() {
    let cluster = TestCluster::shared().expect("cluster");
    let client = cluster.client().await.expect("client");
    apply_crds_from_dir(&client, &crd_dir())
        .await
        .expect("CRDs");
    for (round, policy) in ["restricted", "single-numa-node"].into_iter().enumerate() {
        let stack = start_stack(&client, "mixed", |group| {
            scenario_with(group, 2, policy, "container")
        })
        .await;
        let (scheduler, group) = (&stack.scheduler, &stack.group);
        let pods: Api<Pod> = Api::namespaced(client.clone(), &stack.ns);
        let started = Instant::now();
        let mixed = mixed_pods(round as u64 + 17, 20);
        for (name, sizes) in &mixed {
            let containers: Vec<serde_json::Value> = sizes
                .iter()
                .enumerate()
                .map(|(i, (cpu, mem))| {
                    let amounts = json!({"cpu": cpu.to_string(), "memory": format!("{mem}Gi")});
                    json!({"name": format!("c{i}"), "image": "app",
                        "resources": {"requests": amounts, "limits": amounts}})
                })
                .collect();
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {NODE_SIM_LABEL: "true"}},
                "spec": {
                    "schedulerName": scheduler,
                    "nodeSelector": {LABEL: group},
                    "containers": containers,
                }
            }))
            .expect("pod");
            pods.create(&PostParams::default(), &pod)
                .await
                .expect("pod created");
        }

        // Settled: every bound pod runs and every other one was found unschedulable,
        // with no change for `QUIET` (NRT updates after admissions retry the others).
        // A rejection fails at once.
        const QUIET: Duration = Duration::from_secs(3);
        let since: std::sync::Mutex<Option<(usize, Instant)>> = std::sync::Mutex::new(None);
        let running = wait_for("the burst to settle", TIMEOUT, || async {
            let list = pods.list(&ListParams::default()).await?.items;
            let rejected = rejected(&list);
            assert!(
                rejected.is_empty(),
                "{policy}: the kubelet rejected pods the scheduler bound: {rejected:?}"
            );
            let bound = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
            let unschedulable = tas_testcluster::is_marked_unschedulable;
            let settled = list.iter().all(|p| {
                if bound(p) {
                    phase(p) == "Running"
                } else {
                    unschedulable(p)
                }
            });
            let running = list.iter().filter(|p| phase(p) == "Running").count();
            let mut since = since.lock().expect("lock");
            if !settled || list.len() != mixed.len() {
                *since = None;
                return Ok::<_, kube::Error>(None);
            }
            let (count, at) = *since.get_or_insert((running, Instant::now()));
            if count != running {
                *since = Some((running, Instant::now()));
                return Ok(None);
            }
            Ok((at.elapsed() >= QUIET).then_some(running))
        })
        .await
        .expect("settled");
        println!(
            "mixed burst ({policy}, container scope): {running} of {} pods admitted on 2 nodes in {:.2} s",
            mixed.len(),
            started.elapsed().as_secs_f64()
        );
        assert!(running > 0, "{policy}: some pods fit");

        stack.stop().await;
    }
}

/// A Guaranteed pod of `containers` `(name, cpus, init)`, 1Gi each, labelled for the
/// node simulator.
fn pod_of(name: &str, spec: serde_json::Value, containers: &[(&str, u32, bool)]) -> Pod {
    let render = |init: bool| -> Vec<serde_json::Value> {
        containers
            .iter()
            .filter(|c| c.2 == init)
            .map(|(n, cpu, _)| {
                let amounts = json!({"cpu": cpu.to_string(), "memory": "1Gi"});
                json!({"name": n, "image": "app",
                    "resources": {"requests": amounts, "limits": amounts}})
            })
            .collect()
    };
    let mut spec = spec;
    spec["initContainers"] = render(true).into();
    spec["containers"] = render(false).into();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {NODE_SIM_LABEL: "true"}},
        "spec": spec,
    }))
    .expect("pod")
}

/// A regular init container's CPUs stay with its pod until it ends, and podresources
/// never reports them: an NRT built from it shows them free. A pod another scheduler
/// placed takes a whole zone with its init container and keeps most of it; TAS must
/// not count those CPUs as free, or the kubelet rejects a pod it binds there (the
/// node-level count, which charges the init container's CPUs, leaves room for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_container_cpus_held_by_another_schedulers_pod_are_not_handed_out() {
    let cluster = TestCluster::shared().expect("cluster");
    let client = cluster.client().await.expect("client");
    apply_crds_from_dir(&client, &crd_dir())
        .await
        .expect("CRDs");
    // One node of three zones of 4 CPUs.
    let stack = start_stack(&client, "initcpu", |group| {
        Scenario::from_yaml(&format!(
            "nodes:
- name: {group}
  count: 1
  topologyManagerPolicy: single-numa-node
  topologyManagerScope: container
  labels: {{ {LABEL}: {group} }}
  zones:
  - {{ count: 3, cpus: 4, memory: 8Gi }}
"
        ))
        .expect("scenario")
    })
    .await;
    let (scheduler, group) = (&stack.scheduler, &stack.group);
    let node = stack.sim.nodes().keys().next().expect("a node").clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &stack.ns);
    let nrts: Api<tas_api::nrt::v1alpha2::NodeResourceTopology> = Api::all(client.clone());
    let free_cpus = || async {
        let nrt = nrts.get(&node).await?;
        Ok::<_, kube::Error>(
            nrt.zones
                .iter()
                .flat_map(|z| &z.resources)
                .filter(|r| r.name == "cpu")
                .map(|r| r.available.as_str().to_owned())
                .collect::<Vec<_>>(),
        )
    };
    let create = |pod: Pod| {
        let pods = pods.clone();
        async move {
            pods.create(&PostParams::default(), &pod)
                .await
                .expect("pod created")
        }
    };
    // Every poll: no rejection; how many of `names` run.
    let running = |names: &'static [&'static str]| {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default()).await?.items;
            let rejected = rejected(&list);
            assert!(
                rejected.is_empty(),
                "the kubelet rejected pods the scheduler bound: {rejected:?}"
            );
            Ok::<_, kube::Error>(
                list.iter()
                    .filter(|p| names.contains(&p.name_any().as_str()) && phase(p) == "Running")
                    .count(),
            )
        }
    };

    // Bound by "another scheduler" (spec.nodeName): its init container takes all 4 CPUs
    // of zone 0, its app container reuses one of them; 3 stay held. The agent reports
    // the app container's CPU only: zone 0 looks to have 3 free.
    create(pod_of(
        "other",
        json!({"nodeName": node}),
        &[("init", 4, true), ("app", 1, false)],
    ))
    .await;
    wait_for("the agent to report the other pod", TIMEOUT, || async {
        Ok::<_, kube::Error>(free_cpus().await?.contains(&"3".to_owned()).then_some(()))
    })
    .await
    .expect("reported");

    // Two 3-CPU pods through TAS fill zones 1 and 2 but one CPU each.
    let tas = |name: &str, cpus: u32| {
        pod_of(
            name,
            json!({"schedulerName": scheduler, "nodeSelector": {LABEL: group}}),
            &[("app", cpus, false)],
        )
    };
    create(tas("t-0", 3)).await;
    create(tas("t-1", 3)).await;
    wait_for("t-0 and t-1 running", TIMEOUT, || async {
        Ok::<_, kube::Error>((running(&["t-0", "t-1"]).await? == 2).then_some(()))
    })
    .await
    .expect("running");
    // Zone 0 shows 3 free from podresources alone, or none once the agent trusts the
    // node's shared CPU pool (it counts the init container's CPUs then).
    wait_for("the agent to report them", TIMEOUT, || async {
        let free = free_cpus().await?;
        Ok::<_, kube::Error>((free == ["3", "1", "1"] || free == ["0", "1", "1"]).then_some(()))
    })
    .await
    .expect("reported");

    // The agent publishes where each container sits (resource-topology-exporter's
    // format), and it decodes against the containers the scheduler counts: the other
    // pod's app container on zone 0, t-0 and t-1 on zones 1 and 2.
    let nrt = nrts.get(&node).await.expect("NRT");
    let topology = tas_scheduler::numa::NodeTopology::from_nrt(&nrt).expect("usable NRT");
    let listed = pods.list(&ListParams::default()).await.expect("pods").items;
    let metas: Vec<(String, String, Vec<tas_scheduler::numa::pins::ContainerPin>)> = listed
        .iter()
        .map(|p| {
            let request = tas_scheduler::numa::PodRequest::from_pod(p).expect("request");
            (
                p.namespace().unwrap_or_default(),
                p.name_any(),
                tas_scheduler::numa::pins::of(&request),
            )
        })
        .collect();
    let placed = tas_scheduler::numa::pins::zones_of(
        &topology,
        metas
            .iter()
            .map(|(ns, name, pins)| (ns.as_str(), name.as_str(), pins.as_slice())),
    )
    .expect("the published placement decodes");
    let zone =
        |pod: &str| placed[&tas_api::nrt::numa_placement::ContainerRef::new(&stack.ns, pod, "app")];
    assert_eq!(zone("other"), 0);
    let mut theirs = [zone("t-0"), zone("t-1")];
    theirs.sort_unstable();
    assert_eq!(theirs, [1, 2]);

    // A 2-CPU pod: the node has room by count (12 CPUs, 10 charged), and zone 0 looks
    // free to the NRT, but the kubelet holds it for the other pod's init container. It
    // must stay Pending, found unschedulable, never bound.
    create(tas("t-2", 2)).await;
    wait_for("t-2 found unschedulable", TIMEOUT, || async {
        running(&[]).await?;
        let pod = pods.get("t-2").await?;
        Ok::<_, kube::Error>(tas_testcluster::is_marked_unschedulable(&pod).then_some(()))
    })
    .await
    .expect("unschedulable");
    let bound = || async {
        let pod = pods.get("t-2").await.expect("t-2");
        pod.spec.and_then(|s| s.node_name)
    };
    assert_eq!(bound().await, None, "t-2 was bound");

    // Once the pods have not changed for the kubelet's reconcile period, the agent
    // trusts the shared pool its container sees: the 3 CPUs the init container keeps
    // are counted out of zone 0 and named on it, and t-2 still does not fit.
    wait_for(
        "the agent to count the init container's CPUs",
        TIMEOUT,
        || async {
            let nrt = nrts.get(&node).await?;
            let kept: Vec<u64> = nrt
                .zones
                .iter()
                .map(|z| tas_api::nrt::init_cpus::zone_cpus(z).unwrap_or(u64::MAX))
                .collect();
            let counted = tas_api::nrt::init_cpus::counted(&nrt);
            Ok::<_, kube::Error>((counted && kept == [3, 0, 0]).then_some(()))
        },
    )
    .await
    .expect("counted");
    assert_eq!(free_cpus().await.expect("NRT"), ["0", "1", "1"]);
    running(&[]).await.expect("pods");
    assert_eq!(
        bound().await,
        None,
        "t-2 was bound once the object counted the init container's CPUs"
    );
    stack.stop().await;
}
