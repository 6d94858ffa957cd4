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
//! scheduler's copy is rejected by the kubelet with `TopologyAffinityError`; the CPU a
//! regular init container keeps (podresources never reports it) is counted by the
//! agent from its own cpuset (`initContainerCpus`), so the NRT still agrees; a kubelet
//! restart and a killed node agent cause no wrong placement; `helm upgrade` to a changed
//! value rolls the operands; `helm uninstall` leaves the CRDs and no container running.
//!
//! Without a prerequisite of real nodes (root, containerd, the kubelet, the sandbox
//! image) it says which and passes; `make test` provides them.

#[path = "real_node_stack/ctx.rs"]
mod ctx;
#[path = "real_node_stack/lifecycle.rs"]
mod lifecycle;
#[path = "real_node_stack/support.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use tas_api::tas::DEFAULT_SCHEDULER_NAME;
use tas_e2e::real_node::{NAMESPACE, RealNodeTest, WORKLOADS};
use tas_e2e::stack::{AGENTS_NAMESPACE, wait_failed_scheduling};
use tas_testcluster::real_node::{DeviceOptions, RealNodeOptions};
use tas_testcluster::wait_for;

use ctx::Ctx;
use support::container_processes;
use tas_testcluster::real_node::guaranteed_pod as pod;

const NIC: &str = "tas.dev/nic";
const TIMEOUT: Duration = Duration::from_secs(180);

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
    let Some(test) = RealNodeTest::start("real_node_stack", options).await else {
        return;
    };
    let started = Instant::now();
    // The user's path: the daemonless image archives imported into the node's runtime,
    // the node the sample object selects, the namespaces as the guide says, the chart.
    test.install_tas(TIMEOUT).await;
    let home = test.helm_home();
    // The cluster and the work directory live to the end; `ctx`, declared after them,
    // drops the node first.
    let RealNodeTest {
        node,
        cluster: _cluster,
        client,
        kubeconfig,
        work: _work,
    } = test;

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

    init_container_cpus_are_counted(&ctx).await;

    lifecycle::faults_cause_no_wrong_placement(&mut ctx).await;
    ctx.still_pending("misaligned-tas").await;
    ctx.delete_and_wait("misaligned-tas").await;

    lifecycle::helm_upgrade_rolls_the_operands(&ctx, &home, &kubeconfig).await;
    lifecycle::uninstall_leaves_the_crds_only(&ctx, &home, &kubeconfig).await;
    eprintln!("real-node stack test done in {:.1?}", started.elapsed());
    ctx.node.stop();
}

/// A Guaranteed pod whose regular init container takes the free CPU (zone node-1's),
/// its app container running on the shared pool: the kubelet keeps the init
/// container's CPU until the pod ends, and podresources never reports it. The node
/// agent reads the shared pool from its own container's cpuset and counts the CPU
/// out: the NRT agrees with the kubelet's checkpoint and names the CPU on its zone.
async fn init_container_cpus_are_counted(ctx: &Ctx) {
    ctx.nrt_agrees("before the init-container pod").await;
    let agents: Api<Pod> = Api::namespaced(ctx.client.clone(), AGENTS_NAMESPACE);
    let image = agents
        .list(&ListParams::default().labels("app.kubernetes.io/name=tas-updater"))
        .await
        .expect("agent pods")
        .items
        .into_iter()
        .find_map(|p| p.spec?.containers.into_iter().next()?.image)
        .expect("the agent's image");
    let mut held =
        tas_testcluster::real_node::guaranteed_pause_pod("init-held", ctx.node.name(), 1);
    let spec = held.spec.as_mut().expect("spec");
    // The agent's image, run to completion: its binary prints its version and exits.
    let mut init = spec.containers[0].clone();
    init.name = "init".to_owned();
    init.image = Some(image);
    init.command = Some(vec![
        "/usr/local/bin/tas-updater".to_owned(),
        "--version".to_owned(),
    ]);
    spec.init_containers = Some(vec![init]);
    let shared = serde_json::from_value(serde_json::json!({
        "requests": {"cpu": "500m", "memory": "32Mi"},
        "limits": {"cpu": "500m", "memory": "32Mi"},
    }))
    .expect("resources");
    spec.containers[0].resources = Some(shared);
    ctx.create(&held).await;
    tas_testcluster::wait_pod_running(&ctx.pods, "init-held", TIMEOUT)
        .await
        .expect("the init-container pod runs");
    let (nrt, state) = ctx.nrt_agrees("an init container keeps CPU 1").await;
    assert!(
        !state.default_set.contains(&1),
        "the kubelet keeps CPU 1 for the init container: {}",
        state.raw
    );
    let object = ctx.nrts.get(ctx.node.name()).await.expect("NRT");
    assert!(
        tas_api::nrt::init_cpus::counted(&object),
        "{:?}",
        object.attributes
    );
    let kept: Vec<(String, u64)> = object
        .zones
        .iter()
        .map(|z| {
            (
                z.name.clone(),
                tas_api::nrt::init_cpus::zone_cpus(z).unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        kept,
        [("node-0".into(), 0), ("node-1".into(), 1)],
        "{nrt:?}"
    );
    eprintln!(
        "init container's CPU counted by the agent: NRT {nrt:?} = cpu_manager_state {}",
        state.raw
    );
    ctx.delete_and_wait("init-held").await;
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
