//! The test's view of its node: the NRT against the kubelet's checkpoint, pods placed and
//! pinned, pods left Pending.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, ResourceExt};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_testcluster::real_node::RealNode;
use tas_testcluster::{wait_for, wait_pod_running};

use super::TIMEOUT;
use super::support::{CpuState, container_processes, expected_cpus, nrt_cpus};

/// The fake layout of every real node: zone → CPUs; CPU 0 reserved (kubeReserved 100m).
pub fn zones() -> BTreeMap<String, BTreeSet<u32>> {
    [
        ("node-0".to_owned(), [0].into()),
        ("node-1".to_owned(), [1].into()),
    ]
    .into()
}

pub fn reserved() -> BTreeSet<u32> {
    [0].into()
}

pub struct Ctx {
    pub client: Client,
    pub node: RealNode,
    pub pods: Api<Pod>,
    pub nrts: Api<NodeResourceTopology>,
}

impl Ctx {
    /// Waits until the node's NRT says per zone what the kubelet's checkpoint says;
    /// returns both.
    pub async fn nrt_agrees(&self, what: &str) -> (BTreeMap<String, (i64, i64)>, CpuState) {
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

    pub async fn create(&self, pod: &Pod) -> Pod {
        self.pods
            .create(&PostParams::default(), pod)
            .await
            .expect("pod created")
    }

    pub async fn delete_and_wait(&self, name: &str) {
        let _ = self.pods.delete(name, &DeleteParams::default()).await;
        wait_for(format!("pod {name} to be gone"), TIMEOUT, || async {
            Ok::<_, kube::Error>(self.pods.get_opt(name).await?.is_none().then_some(()))
        })
        .await
        .expect("pod deleted");
    }

    /// A pod TAS places: Running, and its container pinned (the checkpoint and the
    /// processes' affinity) to the CPUs of `zone`, the zone TAS's view had free.
    pub async fn runs_pinned_in(&self, name: &str, zone: &str) -> BTreeSet<u32> {
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
    pub async fn free_zone(&self) -> String {
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
    pub async fn still_pending(&self, name: &str) {
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
