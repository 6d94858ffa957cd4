//! TAS as a cluster admin runs it, on a real node: its own images (built without a
//! container engine by `images/build.sh`) imported into the node's containerd, the
//! chart installed by `helm install`, the operator, scheduler and node agent running as
//! real containers under their rendered securityContext, and the real kubelet deciding
//! admission ([`tas_testcluster::real_node`]: containerd + kubelet + kube-proxy in
//! namespaces of their own, two fake NUMA nodes — CPU 0 on node 0, reserved; CPU 1 on
//! node 1, the one exclusive CPU — and a device plugin advertising one `tas.dev/nic` on
//! node 0).
//!
//! Asserted: the NRT agrees with the kubelet's own `cpu_manager_state`; a Guaranteed pod
//! placed by TAS runs pinned to the CPUs of the zone TAS's view predicted; a pod the
//! kubelet cannot align (the CPU is on node 1, the device on node 0, under
//! `single-numa-node`) stays Pending under TAS with a NUMA reason, while the default
//! scheduler's copy is rejected by the kubelet with `TopologyAffinityError`; a kubelet
//! restart and a killed node agent cause no wrong placement; `helm upgrade` to a changed
//! value rolls the operands; `helm uninstall` leaves the CRDs and no container running.
//!
//! Without a prerequisite of real nodes (root, containerd, the kubelet, the sandbox
//! image) it says which and passes; `make test` provides them.

#[path = "real_node_stack/support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::DEFAULT_SCHEDULER_NAME;
use tas_e2e::chart::CHART_DIR;
use tas_e2e::stack::{AGENTS_NAMESPACE, SAMPLE_NODE_LABEL, wait_available, wait_failed_scheduling};
use tas_testcluster::real_node::{DeviceOptions, RealNode, RealNodeCluster, RealNodeOptions};
use tas_testcluster::{wait_for, wait_pod_running};

use support::{CpuState, container_processes, expected_cpus, helm, nrt_cpus, pod};

const NAMESPACE: &str = "tas-system";
const RELEASE: &str = "tas";
const NIC: &str = "tas.dev/nic";
const WORKLOADS: &str = "workloads";
const TIMEOUT: Duration = Duration::from_secs(180);

/// The fake layout of every real node: zone → CPUs; CPU 0 reserved (kubeReserved 100m).
fn zones() -> BTreeMap<String, BTreeSet<u32>> {
    [
        ("node-0".to_owned(), [0].into()),
        ("node-1".to_owned(), [1].into()),
    ]
    .into()
}

fn reserved() -> BTreeSet<u32> {
    [0].into()
}

struct Ctx {
    client: Client,
    node: RealNode,
    pods: Api<Pod>,
    nrts: Api<NodeResourceTopology>,
}

impl Ctx {
    /// Waits until the node's NRT says per zone what the kubelet's checkpoint says;
    /// returns both.
    async fn nrt_agrees(&self, what: &str) -> (BTreeMap<String, (i64, i64)>, CpuState) {
        let last = std::sync::Mutex::new(String::new());
        let result = wait_for(
            format!("the NRT to agree with cpu_manager_state ({what})"),
            TIMEOUT,
            || async {
                let state = CpuState::read(&self.node.kubelet_root())?;
                let Some(nrt) = self
                    .nrts
                    .get_opt(self.node.name())
                    .await
                    .map_err(|e| e.to_string())?
                else {
                    return Ok::<_, String>(None);
                };
                let got = nrt_cpus(&nrt);
                let want = expected_cpus(&zones(), &reserved(), &state);
                *last.lock().unwrap() =
                    format!("NRT {got:?}, from the checkpoint {want:?} ({})", state.raw);
                Ok((got == want).then_some((got, state)))
            },
        )
        .await;
        result.unwrap_or_else(|e| panic!("{e}; last: {}", last.lock().unwrap()))
    }

    async fn create(&self, pod: &Pod) -> Pod {
        self.pods
            .create(&PostParams::default(), pod)
            .await
            .expect("pod created")
    }

    async fn delete_and_wait(&self, name: &str) {
        let _ = self.pods.delete(name, &DeleteParams::default()).await;
        wait_for(format!("pod {name} to be gone"), TIMEOUT, || async {
            Ok::<_, kube::Error>(self.pods.get_opt(name).await?.is_none().then_some(()))
        })
        .await
        .expect("pod deleted");
    }

    /// A pod TAS places: Running, and its container pinned (the checkpoint and the
    /// processes' affinity) to the CPUs of `zone`, the zone TAS's view had free.
    async fn runs_pinned_in(&self, name: &str, zone: &str) -> BTreeSet<u32> {
        wait_pod_running(&self.pods, name, TIMEOUT)
            .await
            .expect("the pod runs");
        let pod = self.pods.get(name).await.expect("the pod");
        let uid = pod.uid().expect("a uid");
        let state = CpuState::read(&self.node.kubelet_root()).expect("the checkpoint");
        let cpus = state.entries.get(&uid).cloned().unwrap_or_default();
        assert_eq!(
            cpus,
            zones()[zone],
            "{name}: the kubelet pinned it to {cpus:?}, zone {zone} has {:?} ({})",
            zones()[zone],
            state.raw
        );
        let container = pod
            .status
            .and_then(|s| s.container_statuses)
            .and_then(|c| c.into_iter().next())
            .and_then(|c| c.container_id)
            .expect("a container id");
        let procs = container_processes(&uid, &container);
        let list = cpus
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        assert!(
            !procs.is_empty() && procs.iter().all(|p| p["Cpus_allowed_list"] == list),
            "{name}: its processes may run on {list} only: {procs:?}"
        );
        cpus
    }

    /// The zone the NRT (what TAS schedules from) has a free exclusive CPU in; exactly one
    /// on this node.
    async fn free_zone(&self) -> String {
        let (nrt, _) = self.nrt_agrees("before placing").await;
        let free: Vec<_> = nrt
            .iter()
            .filter(|(_, (_, a))| *a >= 1)
            .map(|(z, _)| z.clone())
            .collect();
        assert_eq!(free.len(), 1, "one zone with a free CPU: {nrt:?}");
        free[0].clone()
    }

    /// Still Pending and unbound (TAS placed it nowhere).
    async fn still_pending(&self, name: &str) {
        let pod = self.pods.get(name).await.expect("the pod");
        let status = pod.status.unwrap_or_default();
        assert_eq!(
            status.phase.as_deref(),
            Some("Pending"),
            "{name}: {status:?}"
        );
        assert_eq!(pod.spec.and_then(|s| s.node_name), None, "{name} was bound");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tas_installed_by_helm_runs_on_a_real_kubelet() {
    let options = RealNodeOptions {
        kube_proxy: true,
        device: Some(DeviceOptions {
            resource: NIC.into(),
            numa_node: 0,
            count: 1,
        }),
        ..RealNodeOptions::new("real-node-tas")
    };
    let Some(RealNodeCluster { node, cluster }) =
        RealNodeCluster::start_for_test("real_node_stack", options).await
    else {
        return;
    };
    let started = Instant::now();
    let client = cluster.client().await.expect("a client");
    let kubeconfig = cluster.kubeconfig_path().to_string_lossy().into_owned();
    let work = tempfile::tempdir().expect("a work dir");

    // The user's path: the daemonless image archives, imported into the node's runtime.
    let (archives, digests) = support::build_images(&work.path().join("images"));
    for archive in &archives {
        node.import_image(archive).expect("ctr images import");
    }
    eprintln!(
        "images built and imported in {:.1?}:\n{digests}",
        started.elapsed()
    );

    // The node the sample object selects; the release namespace as the guide says.
    Api::<Node>::all(client.clone())
        .patch(
            node.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {SAMPLE_NODE_LABEL: ""}}})),
        )
        .await
        .expect("node labelled");
    for (ns, level) in [(NAMESPACE, "restricted"), (WORKLOADS, "privileged")] {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.into()),
                labels: Some([("pod-security.kubernetes.io/enforce".into(), level.into())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace created");
    }
    let home = work.path().join("helm");
    let installed = Instant::now();
    helm(
        &home,
        &[
            "install",
            RELEASE,
            CHART_DIR,
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            NAMESPACE,
            "--set",
            "topologyAwareScheduling.create=true",
            "--set",
            "operator.replicas=1",
        ],
    );
    let took = wait_available(&client, 1, TIMEOUT)
        .await
        .expect("Available on the real node");
    eprintln!(
        "helm install → Available in {:.1?} ({took:.1?} after the object)",
        installed.elapsed()
    );

    let mut ctx = Ctx {
        client: client.clone(),
        pods: Api::namespaced(client.clone(), WORKLOADS),
        nrts: Api::all(client.clone()),
        node,
    };
    operands_are_real_containers(&ctx).await;
    let (nrt, state) = ctx.nrt_agrees("installed").await;
    eprintln!(
        "NRT zones (allocatable, available CPUs) {nrt:?} = cpu_manager_state {}",
        state.raw
    );

    // A Guaranteed pod TAS places: where the NRT had the free CPU, pinned there.
    let zone = ctx.free_zone().await;
    ctx.create(&pod("pinned", Some(DEFAULT_SCHEDULER_NAME), 1, None))
        .await;
    let cpus = ctx.runs_pinned_in("pinned", &zone).await;
    let (nrt, state) = ctx.nrt_agrees("one CPU given").await;
    eprintln!(
        "TAS's pod runs on CPUs {cpus:?} of {zone}; NRT {nrt:?} = cpu_manager_state {}",
        state.raw
    );
    ctx.delete_and_wait("pinned").await;

    // The pod no zone can hold whole: TAS keeps it Pending with a NUMA reason; the real
    // kubelet rejects the default scheduler's copy.
    ctx.nrt_agrees("CPU free again").await;
    ctx.create(&pod(
        "misaligned-tas",
        Some(DEFAULT_SCHEDULER_NAME),
        1,
        Some(NIC),
    ))
    .await;
    let reason = wait_failed_scheduling(&client, WORKLOADS, "misaligned-tas", TIMEOUT)
        .await
        .expect("TAS reports why");
    assert!(reason.contains("NUMA"), "a NUMA reason: {reason}");
    ctx.create(&pod("misaligned-default", None, 1, Some(NIC)))
        .await;
    let verdict = wait_for("the kubelet's verdict", TIMEOUT, || async {
        let status = ctx
            .pods
            .get("misaligned-default")
            .await?
            .status
            .unwrap_or_default();
        Ok::<_, kube::Error>((status.phase.as_deref() == Some("Failed")).then_some(status))
    })
    .await
    .expect("the kubelet rejects the default scheduler's pod");
    assert_eq!(
        verdict.reason.as_deref(),
        Some("TopologyAffinityError"),
        "{verdict:?}"
    );
    ctx.still_pending("misaligned-tas").await;
    eprintln!(
        "kubelet on the default scheduler's pod: {} ({}); TAS: Pending, \"{reason}\"",
        verdict.reason.unwrap_or_default(),
        verdict.message.unwrap_or_default()
    );
    ctx.delete_and_wait("misaligned-default").await;

    faults_cause_no_wrong_placement(&mut ctx).await;
    ctx.still_pending("misaligned-tas").await;
    ctx.delete_and_wait("misaligned-tas").await;

    helm_upgrade_rolls_the_operands(&ctx, &home, &kubeconfig).await;
    uninstall_leaves_the_crds_only(&ctx, &home, &kubeconfig).await;
    eprintln!("real-node stack test done in {:.1?}", started.elapsed());
    ctx.node.stop();
}

/// Every TAS pod runs as a real container (containerd's id) on the node, its processes
/// under the rendered securityContext: the operator and scheduler as uid 65532 with no
/// capabilities and no_new_privs.
async fn operands_are_real_containers(ctx: &Ctx) {
    for (ns, name, root) in [
        (NAMESPACE, "tas-operator", false),
        (NAMESPACE, "tas-scheduler", false),
        (AGENTS_NAMESPACE, "tas-updater", true),
    ] {
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
        let list = pods
            .list(&ListParams::default().labels(&format!("app.kubernetes.io/name={name}")))
            .await
            .expect("pods");
        assert!(!list.items.is_empty(), "{name} has pods");
        for p in list.items {
            let uid = p.uid().unwrap_or_default();
            let status = p.status.clone().unwrap_or_default();
            let container = status
                .container_statuses
                .unwrap_or_default()
                .into_iter()
                .next()
                .expect("a container");
            let id = container.container_id.unwrap_or_default();
            assert!(id.starts_with("containerd://"), "{name}: {id}");
            let procs = container_processes(&uid, &id);
            assert!(!procs.is_empty(), "{name}: no process of {id}");
            for proc in &procs {
                if !root {
                    assert!(
                        proc["Uid"].starts_with("65532"),
                        "{name} runs as {}",
                        proc["Uid"]
                    );
                    assert_eq!(proc["CapEff"], "0000000000000000", "{name}'s capabilities");
                }
                assert_eq!(proc["NoNewPrivs"], "1", "{name}: no_new_privs");
            }
            eprintln!(
                "{name}: {id} on {:?}: {procs:?}",
                p.spec.and_then(|s| s.node_name)
            );
        }
    }
}

/// A kubelet restart and a killed node agent: the NRT comes back to the checkpoint's
/// figures, a pod TAS places still lands pinned, and one that no longer fits is never
/// bound.
async fn faults_cause_no_wrong_placement(ctx: &mut Ctx) {
    let restarted = Instant::now();
    ctx.node
        .restart_kubelet()
        .await
        .expect("the kubelet restarts");
    ctx.nrt_agrees("after the kubelet restart").await;
    eprintln!(
        "NRT agrees again {:.1?} after the kubelet restart",
        restarted.elapsed()
    );
    let zone = ctx.free_zone().await;
    ctx.create(&pod("after-restart", Some(DEFAULT_SCHEDULER_NAME), 1, None))
        .await;
    ctx.runs_pinned_in("after-restart", &zone).await;

    let agents: Api<Pod> = Api::namespaced(ctx.client.clone(), AGENTS_NAMESPACE);
    let agent = agents
        .list(&ListParams::default())
        .await
        .expect("agents")
        .items
        .remove(0);
    let name = agent.name_any();
    let id = agent
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .and_then(|c| c.container_id)
        .expect("the agent's container");
    ctx.node
        .ctr(&[
            "tasks",
            "kill",
            "--signal",
            "SIGKILL",
            id.trim_start_matches("containerd://"),
        ])
        .expect("ctr tasks kill");
    // No CPU is free now: TAS must not place this one while the agent is down or after.
    ctx.create(&pod("no-room", Some(DEFAULT_SCHEDULER_NAME), 1, None))
        .await;
    wait_for("the agent restarted by the kubelet", TIMEOUT, || async {
        let p = agents.get(&name).await?;
        let restarted = p
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default()
            .iter()
            .any(|c| c.restart_count >= 1 && c.ready);
        Ok::<_, kube::Error>(restarted.then_some(()))
    })
    .await
    .expect("the agent runs again");
    ctx.nrt_agrees("after the agent restarted").await;
    wait_failed_scheduling(&ctx.client, WORKLOADS, "no-room", TIMEOUT)
        .await
        .expect("TAS says why");
    ctx.still_pending("no-room").await;
    // Room again: TAS places it, pinned where the CPU came free.
    ctx.delete_and_wait("after-restart").await;
    ctx.runs_pinned_in("no-room", &zone).await;
    ctx.delete_and_wait("no-room").await;
}

/// The operands' pods of `name`: uid → Ready.
async fn operand_pods(client: &Client, ns: &str, name: &str) -> BTreeMap<String, bool> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("app.kubernetes.io/name={name}")))
        .await
        .expect("pods");
    list.items
        .into_iter()
        .map(|p| {
            let ready = tas_e2e::stack::is_ready(&p);
            (p.uid().unwrap_or_default(), ready)
        })
        .collect()
}

/// `helm upgrade` changing the object's log level: the node agent and the scheduler are
/// replaced by pods running with it, and the object is Available again.
async fn helm_upgrade_rolls_the_operands(ctx: &Ctx, home: &std::path::Path, kubeconfig: &str) {
    let before: Vec<BTreeMap<String, bool>> = vec![
        operand_pods(&ctx.client, AGENTS_NAMESPACE, "tas-updater").await,
        operand_pods(&ctx.client, NAMESPACE, "tas-scheduler").await,
    ];
    let upgraded = Instant::now();
    helm(
        home,
        &[
            "upgrade",
            RELEASE,
            CHART_DIR,
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NAMESPACE,
            "--reuse-values",
            "--set",
            "topologyAwareScheduling.spec.observability.logLevel=debug",
        ],
    );
    wait_for(
        "the operands replaced by pods with the new value",
        TIMEOUT,
        || async {
            let now = [
                operand_pods(&ctx.client, AGENTS_NAMESPACE, "tas-updater").await,
                operand_pods(&ctx.client, NAMESPACE, "tas-scheduler").await,
            ];
            let rolled = now.iter().zip(&before).all(|(now, before)| {
                !now.is_empty()
                    && now
                        .iter()
                        .all(|(uid, ready)| *ready && !before.contains_key(uid))
            });
            Ok::<_, String>(rolled.then_some(()))
        },
    )
    .await
    .expect("helm upgrade rolls the operands");
    let ds: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), AGENTS_NAMESPACE);
    let template = ds
        .list(&ListParams::default())
        .await
        .expect("DaemonSets")
        .items;
    assert!(
        serde_json::to_string(&template)
            .unwrap_or_default()
            .contains("debug"),
        "the agents' template carries the new log level"
    );
    wait_available(&ctx.client, 1, TIMEOUT)
        .await
        .expect("Available after the upgrade");
    ctx.nrt_agrees("after helm upgrade").await;
    eprintln!(
        "helm upgrade → operands rolled and Available in {:.1?}",
        upgraded.elapsed()
    );
}

/// The documented uninstall (the object, then the release): the CRDs stay, no TAS
/// object or pod does, and the node's containerd runs no container.
async fn uninstall_leaves_the_crds_only(ctx: &Ctx, home: &std::path::Path, kubeconfig: &str) {
    let objects: Api<tas_api::tas::TopologyAwareScheduling> = Api::all(ctx.client.clone());
    let _ = objects.delete("default", &DeleteParams::default()).await;
    wait_for("the object deleted", TIMEOUT, || async {
        Ok::<_, kube::Error>(objects.get_opt("default").await?.is_none().then_some(()))
    })
    .await
    .expect("the object goes");
    helm(
        home,
        &[
            "uninstall",
            RELEASE,
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NAMESPACE,
            "--wait",
        ],
    );
    wait_for("no TAS pod and no running container", TIMEOUT, || async {
        let mut left = Vec::new();
        for ns in [NAMESPACE, AGENTS_NAMESPACE, WORKLOADS] {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
            left.extend(
                pods.list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .iter()
                    .map(|p| p.name_any()),
            );
        }
        let tasks = ctx.node.ctr(&["tasks", "ls"]).map_err(|e| e.to_string())?;
        let running = tasks.lines().filter(|l| l.contains("RUNNING")).count();
        Ok::<_, String>((left.is_empty() && running == 0).then_some(()))
    })
    .await
    .expect("nothing of TAS runs");
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    assert!(
        deployments
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(ctx.client.clone());
    for crd in [
        "topologyawareschedulings.tas.dev",
        "noderesourcetopologies.topology.node.k8s.io",
    ] {
        assert!(
            crds.get_opt(crd).await.expect("CRD").is_some(),
            "{crd} stays"
        );
    }
}
