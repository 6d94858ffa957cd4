//! The real kubelet's own verdicts, beside the simulated ones of `tas-demo`: the same
//! two pods given to TAS and to the default scheduler on a real node, one the kubelet
//! can align and one it cannot (1 CPU + a device on the other NUMA node, under
//! `single-numa-node`). The pods run the node's sandbox image.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use tas_testcluster::real_node::guaranteed_pod;

use crate::stack::{StackError, wait_failed_scheduling};

/// One pod's fate on the real node.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The pod.
    pub pod: String,
    /// Who placed it.
    pub scheduler: String,
    /// What it asks for.
    pub asks: String,
    /// What happened: Running, Pending (TAS's reason) or Failed (the kubelet's reason).
    pub outcome: String,
}

/// Where the verdict pods go and what they use.
#[derive(Debug, Clone)]
pub struct VerdictSetup<'a> {
    /// Their namespace.
    pub namespace: &'a str,
    /// The real node (its hostname label selects it).
    pub node: &'a str,
    /// A taint key of the node, tolerated.
    pub taint: &'a str,
    /// TAS's scheduler name.
    pub tas_scheduler: &'a str,
    /// The device resource (on the NUMA node without a free CPU).
    pub device: &'a str,
    /// How long to wait for each pod's fate.
    pub timeout: Duration,
}

/// Places the four pods on the node one after another, each removed before the next,
/// and returns what happened to each.
pub async fn real_node_verdicts(
    client: &Client,
    setup: &VerdictSetup<'_>,
) -> Result<Vec<Verdict>, StackError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), setup.namespace);
    let mut verdicts = Vec::new();
    for (scheduler, with_device) in [
        (Some(setup.tas_scheduler), false),
        (Some(setup.tas_scheduler), true),
        (None, false),
        (None, true),
    ] {
        let name = format!(
            "{}-{}",
            if scheduler.is_some() {
                "tas"
            } else {
                "default"
            },
            if with_device { "cpu-and-device" } else { "cpu" }
        );
        let device = with_device.then_some(setup.device);
        let mut pod = guaranteed_pod(&name, scheduler, 1, device);
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_selector =
                Some([("kubernetes.io/hostname".to_owned(), setup.node.to_owned())].into());
            spec.tolerations = serde_json::from_value(
                json!([{"key": setup.taint, "operator": "Exists", "effect": "NoSchedule"}]),
            )
            .ok();
        }
        pods.create(&PostParams::default(), &pod)
            .await
            .map_err(StackError::ctx("creating a pod for the real node"))?;
        let outcome = outcome(client, &pods, setup, &name, scheduler.is_some()).await?;
        verdicts.push(Verdict {
            pod: name.clone(),
            scheduler: scheduler.unwrap_or("default-scheduler").to_owned(),
            asks: match device {
                Some(d) => format!("1 CPU + 1 {d}"),
                None => "1 CPU".to_owned(),
            },
            outcome,
        });
        let _ = pods.delete(&name, &DeleteParams::default()).await;
        tas_testcluster::wait_for(format!("pod {name} gone"), setup.timeout, || async {
            Ok::<_, kube::Error>(pods.get_opt(&name).await?.is_none().then_some(()))
        })
        .await
        .map_err(StackError::ctx("removing a pod from the real node"))?;
    }
    Ok(verdicts)
}

/// Running (the kubelet admitted it), Failed (the kubelet's reason) or, for TAS, its
/// FailedScheduling reason when it keeps the pod Pending.
async fn outcome(
    client: &Client,
    pods: &Api<Pod>,
    setup: &VerdictSetup<'_>,
    name: &str,
    tas: bool,
) -> Result<String, StackError> {
    let decided =
        tas_testcluster::wait_for(format!("pod {name} decided"), setup.timeout, || async {
            let status = pods.get(name).await?.status.unwrap_or_default();
            Ok::<_, kube::Error>(match status.phase.as_deref() {
                Some("Running") => Some("Running (the kubelet admitted it)".to_owned()),
                Some("Failed") => Some(format!(
                    "Failed: {} ({})",
                    status.reason.clone().unwrap_or_default(),
                    status.message.clone().unwrap_or_default()
                )),
                _ if tas && is_unschedulable(&status) => Some(String::new()),
                _ => None,
            })
        })
        .await
        .map_err(StackError::ctx("waiting for the pod's fate"))?;
    if !decided.is_empty() {
        return Ok(decided);
    }
    let reason = wait_failed_scheduling(client, setup.namespace, name, setup.timeout).await?;
    Ok(format!("Pending: {reason}"))
}

fn is_unschedulable(status: &PodStatus) -> bool {
    status.conditions.iter().flatten().any(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })
}

/// The verdicts as a table.
pub struct VerdictTable<'a>(pub &'a [Verdict]);

impl fmt::Display for VerdictTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  {:<22} {:<26} {:<22} OUTCOME",
            "POD", "SCHEDULER", "ASKS"
        )?;
        for v in self.0 {
            writeln!(
                f,
                "  {:<22} {:<26} {:<22} {}",
                v.pod, v.scheduler, v.asks, v.outcome
            )?;
        }
        Ok(())
    }
}
