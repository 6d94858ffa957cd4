//! The whole mission on a real control plane: install TAS with `kubectl apply -k
//! config/default`, let the pod runner start the operator from that Deployment, apply
//! one TopologyAwareScheduling object, let the operator bring up the stack (every
//! operand a process started from the pod spec it rendered, under its own
//! ServiceAccount token), place the default scenario's NUMA-sensitive workload, and
//! check that the simulated kubelets admit every pod TAS placed — while kube-scheduler,
//! on the same cluster and workload, produces TopologyAffinityErrors. Faults along the
//! way: the scheduler processes killed in the middle of the workload, an updater killed,
//! a deleted NRT, a corrupt NRT while its updater is frozen, a kube-apiserver restart;
//! then a pod with a GPU claim (DRA) and 4 exclusive CPUs on a `single-numa-node` node
//! runs with its GPU on its CPUs' zone; then an edit of the CR rolls the updaters onto
//! new processes with the new flags.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_e2e::dra;
use tas_e2e::stack::{
    self, AGENTS_NAMESPACE, Operands, Report, apply_cr, cmdline, process_identity, run_workload,
    start_nodes, wait_available, wait_operands, wait_operator_pods, wait_ready_pods, wait_settled,
};
use tas_nodesim::Scenario;
use tas_nodesim::request::PodKey;
use tas_nodesim::runner::Signal;
use tas_testcluster::{
    ClusterOptions, Component, TestCluster, Tools, unique_namespace, wait_event, wait_for,
    wait_no_pods,
};

const NAMESPACE: &str = "tas-system";
const SCHEDULER: &str = "topology-aware-scheduler";
const TIMEOUT: Duration = Duration::from_secs(120);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

async fn scheduled_events(client: &Client, ns: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    events
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Scheduled"))
        .filter_map(|e| e.regarding?.name)
        .collect()
}

async fn delete_namespace(client: &Client, ns: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let _ = api.delete(ns, &DeleteParams::default()).await;
    wait_no_pods(client, ns, TIMEOUT)
        .await
        .expect("workload deleted");
}

/// On the newest supported Kubernetes minor (the harness's default control plane).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stack_places_a_numa_workload_without_topology_affinity_errors() {
    println!(
        "control plane: Kubernetes {}",
        tas_testcluster::KUBERNETES_VERSION
    );
    full_stack(ClusterOptions::full()).await;
}

/// The same on the oldest supported minor (`build.sh --oldest`, `TAS_TOOLS_BIN_OLDEST`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stack_works_on_the_oldest_supported_control_plane() {
    let tools = match Tools::locate_oldest() {
        Ok(tools) => tools,
        Err(e) => {
            println!(
                "SKIPPED: the oldest supported control plane ({}) is not built: {e} \
                 (make test builds it: testcluster/tools/build.sh --oldest)",
                tas_testcluster::OLDEST_KUBERNETES_VERSION
            );
            return;
        }
    };
    println!(
        "control plane: Kubernetes {} ({})",
        tas_testcluster::OLDEST_KUBERNETES_VERSION,
        tools.dir().display()
    );
    full_stack(ClusterOptions {
        tools: Some(tools),
        ..ClusterOptions::full()
    })
    .await;
}

/// The two control planes run one after the other: each stack takes the machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn full_stack(options: ClusterOptions) {
    let _serial = SERIAL.lock().await;
    let mut cluster = TestCluster::start(options).expect("control plane");
    let client = cluster.client().await.expect("client");
    stack::install_default(&cluster).expect("installed from config/default");

    // The scenario's nodes carry the label the sample CR's node group selects.
    let scenario = Scenario::load(&repo().join("nodesim/scenarios/default.yaml"))
        .expect("scenario")
        .with_node_label(stack::SAMPLE_NODE_LABEL, stack::SAMPLE_NODE_LABEL_VALUE);
    let work = tempfile::tempdir().expect("work dir");
    let (sim, runner) = start_nodes(&cluster, &client, &scenario, work.path(), Vec::new())
        .await
        .expect("simulated nodes and the pod runner");
    let pod_logs = runner.log_guard();
    // The operator itself, from config/default's Deployment (two replicas).
    let operators = wait_operator_pods(&client, &runner, NAMESPACE, TIMEOUT)
        .await
        .expect("the operator's pods run");
    let applied = std::time::Instant::now();
    apply_cr(&client, &stack::sample_cr().expect("sample CR"))
        .await
        .expect("CR applied");
    let nodes = scenario.nodes().len();
    let Operands {
        updaters,
        schedulers,
    } = wait_operands(&client, &runner, NAMESPACE, nodes, TIMEOUT)
        .await
        .expect("an updater process per node, Available with fresh NRTs, the scheduler replicas");
    let available_after = applied.elapsed();
    // Each process runs exactly the rendered command line, under its own identity.
    for (pods, account) in [
        (&operators, "tas-operator"),
        (&updaters, "tas-updater"),
        (&schedulers, "tas-scheduler"),
    ] {
        for pod in pods.iter() {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let pid = runner.pid(&namespace, &name).expect("a process");
            let spec_args = pod.spec.as_ref().unwrap().containers[0]
                .args
                .clone()
                .unwrap_or_default();
            let argv = cmdline(pid);
            assert!(
                argv.ends_with(&spec_args),
                "{name}: {argv:?} runs the rendered args {spec_args:?}"
            );
            let user = process_identity(&client, pid)
                .await
                .expect("token reviewed");
            assert!(
                user.starts_with(&format!("system:serviceaccount:{namespace}:"))
                    && user.contains(account),
                "{name} runs as {user}"
            );
        }
    }
    assert!(!schedulers.is_empty(), "the scheduler runs");

    // The workload under TAS, with the scheduler restarted half-way.
    let ns = unique_namespace(&client, "tas-workload").await.unwrap();
    let pods = scenario.workload_pods(SCHEDULER, &ns);
    let half = pods.len() / 2;
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for (i, pod) in pods.iter().enumerate() {
        if i == half {
            // A crash of every scheduler replica: the runner restarts them (restartPolicy
            // Always) with no state but what they rebuild from the API server.
            for s in &schedulers {
                runner
                    .signal(
                        NAMESPACE,
                        &s.metadata.name.clone().unwrap_or_default(),
                        Signal::Kill,
                    )
                    .await
                    .expect("scheduler killed");
            }
        }
        api.create(&PostParams::default(), pod)
            .await
            .expect("pod created");
    }
    let tas = wait_settled(&client, &ns, &sim, TIMEOUT)
        .await
        .expect("TAS workload settles");
    assert!(
        tas.topology_affinity_errors.is_empty(),
        "pods TAS placed were rejected by the kubelet: {:?}",
        tas.topology_affinity_errors
    );
    assert!(tas.other_failures.is_empty(), "{:?}", tas.other_failures);
    for (pod, why) in &tas.pending {
        assert!(
            why.contains("nodes are available"),
            "{pod} pending without explanation: {why}"
        );
    }
    assert!(
        tas.placements.len() * 4 >= pods.len() * 3,
        "most of the workload runs: {tas:?}"
    );
    let scheduled = scheduled_events(&client, &ns).await;
    for p in &tas.placements {
        let n = scheduled.iter().filter(|s| **s == p.pod).count();
        assert!(n <= 1, "{} was bound {n} times", p.pod);
    }

    // `kubectl tas nodes`: the API server's service proxy reaches the scheduler process
    // the pod runner started (its pod IP in the runner's network namespace), and the
    // scheduler knows every node.
    let seen = wait_for(
        "kubectl tas nodes with the scheduler's view",
        TIMEOUT,
        || async {
            let out = stack::kubectl_tas(&cluster, &["nodes", "-o", "json"]).await?;
            let v: serde_json::Value =
                serde_json::from_str(&out).map_err(stack::StackError::ctx("kubectl tas nodes"))?;
            let known = |n: &serde_json::Value| n["fingerprint"] != "unknown";
            let all = v["schedulerError"].is_null()
                && v["nodes"].as_array().is_some_and(|ns| {
                    scenario
                        .nodes()
                        .iter()
                        .all(|s| ns.iter().any(|n| n["node"] == s.name.as_str() && known(n)))
                });
            Ok::<_, stack::StackError>(all.then_some(v))
        },
    )
    .await
    .expect("the scheduler's reservations through the service proxy");
    // Which replica answered depends on the Service; either says whether it leads.
    assert!(seen["schedulerLeader"].is_boolean(), "{seen:#}");

    // Faults: an updater restart, a deleted NRT, a corrupt NRT, a kube-apiserver restart.
    let nrts: Api<NodeResourceTopology> = Api::all(client.clone());
    let victim = scenario.nodes()[0].name.clone();
    let updater_on = |node: &str| {
        updaters
            .iter()
            .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .and_then(|p| p.metadata.name.clone())
            .expect("an updater pod per node")
    };
    runner
        .signal(AGENTS_NAMESPACE, &updater_on(&victim), Signal::Kill)
        .await
        .expect("updater killed");
    let before = nrts.get(&victim).await.unwrap();
    nrts.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the deleted NRT to be recreated", TIMEOUT, || async {
        Ok::<_, kube::Error>(
            nrts.get_opt(&victim)
                .await?
                .filter(|n| n.metadata.uid != before.metadata.uid),
        )
    })
    .await
    .expect("NRT recreated");

    let corrupt = scenario.nodes()[1].name.clone();
    runner
        .signal(AGENTS_NAMESPACE, &updater_on(&corrupt), Signal::Freeze)
        .await
        .expect("updater frozen");
    // Valid for the API server's schema, unusable for a scheduler: a zone name without
    // a NUMA id.
    let garbage = json!({"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
        "metadata": {"name": corrupt},
        "zones": [{"name": "zone-without-an-id", "type": "Node",
                   "resources": [{"name": "cpu", "capacity": "4", "allocatable": "4", "available": "4"}]}]});
    // Written as a person's kubectl edit: an edit is drift the agent repairs, whereas
    // another field manager is another NRT publisher, which the agent leaves alone
    // unless told to take over (tas_api::nrt::ownership).
    nrts.patch(
        &corrupt,
        &PatchParams::apply("kubectl-edit").force(),
        &Patch::Apply(&garbage),
    )
    .await
    .expect("corrupt NRT written");
    wait_event(
        &client,
        "default",
        &corrupt,
        "InvalidNodeResourceTopology",
        TIMEOUT,
    )
    .await
    .expect("the scheduler reports the corrupt object");
    runner
        .signal(AGENTS_NAMESPACE, &updater_on(&corrupt), Signal::Resume)
        .await
        .expect("updater resumed");
    wait_for("the corrupt NRT repaired", TIMEOUT, || async {
        Ok::<_, kube::Error>(
            nrts.get(&corrupt)
                .await?
                .zones
                .first()
                .filter(|z| z.name.starts_with("node-"))
                .map(|_| ()),
        )
    })
    .await
    .expect("NRT repaired by its updater");

    cluster
        .restart(Component::KubeApiserver)
        .await
        .expect("kube-apiserver restarted");
    let extra: Pod = serde_json::from_value(json!({
        "metadata": {"name": "after-restart", "labels": {tas_testcluster::NODE_SIM_LABEL: "true"}},
        "spec": {"schedulerName": SCHEDULER, "nodeSelector": {stack::NODE_LABEL: "default"},
                 "containers": [{"name": "c", "image": "c", "resources": {
                     "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}
    }))
    .unwrap();
    wait_for("creating a pod after the restart", TIMEOUT, || async {
        Ok::<_, kube::Error>(
            api.create(&PostParams::default(), &extra)
                .await
                .ok()
                .map(|_| ()),
        )
    })
    .await
    .unwrap();
    let settled = wait_settled(&client, &ns, &sim, TIMEOUT)
        .await
        .expect("settles after the restart");
    assert!(
        settled.topology_affinity_errors.is_empty(),
        "{:?}",
        settled.topology_affinity_errors
    );
    assert!(
        settled.placements.iter().any(|p| p.pod == "after-restart")
            || settled.pending.iter().any(|(p, _)| p == "after-restart"),
        "every component reconnected and the new pod got a decision"
    );
    wait_available(&client, scenario.nodes().len(), TIMEOUT)
        .await
        .expect("Available with fresh NRTs after the faults");

    // The same workload under kube-scheduler, on a clean slate.
    delete_namespace(&client, &ns).await;
    let ns2 = unique_namespace(&client, "default-workload").await.unwrap();
    run_workload(&client, &scenario, "default-scheduler", &ns2)
        .await
        .unwrap();
    let default = wait_settled(&client, &ns2, &sim, TIMEOUT)
        .await
        .expect("default workload settles");
    // A deterministic trap on top: a 6-CPU Guaranteed pod pinned to the node whose
    // zones hold 4 CPUs each. Node totals say it fits; no zone does.
    delete_namespace(&client, &ns2).await;
    let ns3 = unique_namespace(&client, "trap").await.unwrap();
    let traps: Api<Pod> = Api::namespaced(client.clone(), &ns3);
    for (name, scheduler) in [
        ("trap-tas", SCHEDULER),
        ("trap-default", "default-scheduler"),
    ] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {tas_testcluster::NODE_SIM_LABEL: "true"}},
            "spec": {"schedulerName": scheduler,
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                         "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["snn-p"]}]}]}}},
                     "containers": [{"name": "c", "image": "c", "resources": {
                         "requests": {"cpu": "6", "memory": "1Gi"}, "limits": {"cpu": "6", "memory": "1Gi"}}}]}
        }))
        .unwrap();
        traps
            .create(&PostParams::default(), &pod)
            .await
            .expect("trap created");
    }
    let trap = wait_settled(&client, &ns3, &sim, TIMEOUT)
        .await
        .expect("traps settle");
    assert!(
        trap.pending
            .iter()
            .any(|(p, why)| p == "trap-tas" && why.contains("NUMA")),
        "TAS leaves the trap Pending with a NUMA explanation: {trap:?}"
    );
    assert!(
        trap.topology_affinity_errors
            .iter()
            .any(|(p, _)| p == "trap-default"),
        "kube-scheduler sends the trap to a kubelet that rejects it: {trap:?}"
    );
    let mut default = default;
    default
        .topology_affinity_errors
        .extend(trap.topology_affinity_errors.clone());
    println!(
        "{}",
        Report::new(&scenario, available_after, &tas, Some(&default))
    );
    delete_namespace(&client, &ns3).await;
    gpu_on_the_cpus_zone(&client, &sim).await;
    // Editing the CR rolls the updaters: new pods, new processes, the new period.
    let tas: Api<tas_api::tas::TopologyAwareScheduling> = Api::all(client.clone());
    tas.patch(
        "default",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"updater": {"refresh": {"period": "7s"}}}})),
    )
    .await
    .expect("CR edited");
    wait_for(
        "every updater process to run with the new period",
        Duration::from_secs(300),
        || async {
            let pods = wait_ready_pods(
                &client,
                &runner,
                AGENTS_NAMESPACE,
                "tas-updater",
                nodes,
                Duration::from_secs(5),
            )
            .await
            .unwrap_or_default();
            let rolled = !pods.is_empty()
                && pods.iter().all(|p| {
                    runner
                        .pid(
                            AGENTS_NAMESPACE,
                            p.metadata.name.as_deref().unwrap_or_default(),
                        )
                        .is_some_and(|pid| cmdline(pid).iter().any(|a| a.ends_with("7s")))
                });
            Ok::<_, kube::Error>(rolled.then_some(()))
        },
    )
    .await
    .expect("updaters rolled onto the new flags");
    println!("operand processes:");
    for p in runner.processes() {
        println!("  {}/{} on {}: pid {}", p.namespace, p.pod, p.node, p.pid);
    }
    drop(pod_logs);
    runner.shutdown().await;
}

/// The DRA driver of [`gpu_on_the_cpus_zone`] and its devices with their NUMA zones,
/// in slice order: the GPU of zone 1 first, so an allocator blind to zones takes it.
const GPU_DRIVER: &str = "gpu.fullstack.example.com";
const GPUS: [(&str, u32); 2] = [("gpu-0", 1), ("gpu-1", 0)];
/// `single-numa-node`, pod scope, static CPU manager, two zones of 12 CPUs.
const GPU_NODE: &str = "snn-big";

/// A pod with a GPU claim (from a template, through the control plane's ResourceClaim
/// controller) and 4 exclusive CPUs on a `single-numa-node` node: the scheduler the
/// operator rendered allocates the GPU on the zone where the kubelet puts the CPUs,
/// and the pod runs.
async fn gpu_on_the_cpus_zone(client: &Client, sim: &tas_nodesim::Simulator) {
    let classes: Api<DeviceClass> = Api::all(client.clone());
    dra::create(&classes, dra::device_class(GPU_DRIVER)).await;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    dra::create(&slices, dra::gpu_slice(GPU_DRIVER, GPU_NODE, &GPUS)).await;
    let ns = unique_namespace(client, "dra").await.unwrap();
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &ns);
    dra::create(&templates, dra::gpu_claim_template("one-gpu", GPU_DRIVER)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let on_node = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [GPU_NODE]}]}]}}}});
    let claim = json!({"name": "gpu", "resourceClaimTemplateName": "one-gpu"});
    pods.create(
        &PostParams::default(),
        &dra::gpu_pod("gpu-and-4-cpus", SCHEDULER, on_node, claim),
    )
    .await
    .expect("pod created");
    let claim = dra::generated_claim(&pods, "gpu-and-4-cpus").await;
    let pod = dra::wait_running(&pods, "gpu-and-4-cpus").await;
    assert_eq!(dra::node_of(&pod).as_deref(), Some(GPU_NODE));
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    let device = dra::allocated_device(&claims, &claim, &pod, GPU_DRIVER).await;
    let gpu_zone = GPUS
        .iter()
        .find(|(d, _)| *d == device)
        .map(|(_, z)| *z)
        .unwrap_or_else(|| panic!("unknown device {device}"));
    let cpu_zones: Vec<u32> = sim
        .node(GPU_NODE)
        .expect("the node")
        .pod_zones(&PodKey::of(&pod))
        .into_iter()
        .collect();
    assert_eq!(
        cpu_zones,
        [gpu_zone],
        "the kubelet put the CPUs on {cpu_zones:?}, TAS allocated {device}"
    );
    println!("DRA: {GPU_NODE} runs the pod with {device} on zone {gpu_zone}, its CPUs' zone");
    delete_namespace(client, &ns).await;
    slices
        .delete(
            &format!("{GPU_NODE}-{GPU_DRIVER}"),
            &DeleteParams::default(),
        )
        .await
        .expect("slice deleted");
}
