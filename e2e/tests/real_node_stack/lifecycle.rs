//! What the stack must survive and how it leaves: a kubelet restart and a killed node
//! agent, `helm upgrade`, `helm uninstall`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client, ResourceExt};
use tas_api::tas::DEFAULT_SCHEDULER_NAME;
use tas_e2e::chart::CHART_DIR;
use tas_e2e::real_node::{RELEASE, helm};
use tas_e2e::stack::{AGENTS_NAMESPACE, wait_available, wait_failed_scheduling};
use tas_testcluster::wait_for;

use super::ctx::Ctx;
use super::{NAMESPACE, TIMEOUT, WORKLOADS};
use tas_testcluster::real_node::guaranteed_pod as pod;

/// A kubelet restart and a killed node agent: the NRT comes back to the checkpoint's
/// figures, a pod TAS places still lands pinned, and one that no longer fits is never
/// bound.
pub async fn faults_cause_no_wrong_placement(ctx: &mut Ctx) {
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
pub async fn helm_upgrade_rolls_the_operands(ctx: &Ctx, home: &Path, kubeconfig: &str) {
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
pub async fn uninstall_leaves_the_crds_only(ctx: &Ctx, home: &Path, kubeconfig: &str) {
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
