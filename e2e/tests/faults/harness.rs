//! What every fault scenario shares: the stack (one control plane with the binding
//! audit log, the simulated nodes, the pod runner with the operator and its operands),
//! the workload pods (Guaranteed, 4 or 3 CPUs, on nodes whose NUMA zones hold 6: a zone
//! takes one pod of 4 or two of 3, and once a node's zones hold a pod of 4 each, a pod
//! of 3 still fits the node but no zone — a zone counted twice, or freed too early, is
//! a kubelet rejection), and the verdict: every pod
//! bound and admitted by the referee or Pending with the scheduler's explanation, no
//! kubelet rejection, no pod whose binding the API server accepted twice.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};
use tas_e2e::stack::{self, WorkloadOutcome, wait_ready_pods, wait_settled};
use tas_nodesim::runner::Runner;
use tas_nodesim::{Scenario, Simulator};
use tas_testcluster::fault_proxy::FaultProxy;
use tas_testcluster::{audit, unique_namespace, wait_for};

pub const NAMESPACE: &str = "tas-system";
pub const SCHEDULER: &str = "topology-aware-scheduler";
pub const TIMEOUT: Duration = Duration::from_secs(120);
/// CPUs of the large workload pods (one per zone) and of the small ones (two per zone).
pub const LARGE: u32 = 4;
pub const SMALL: u32 = 3;

/// Three nodes of two 6-CPU zones each, single-numa-node at pod scope.
pub const NODES_YAML: &str = "\
nodes:
- name: fault
  count: 3
  topologyManagerPolicy: single-numa-node
  topologyManagerScope: pod
  zones:
  - { count: 2, cpus: 6, memory: 12Gi }
";

/// Pods of a burst: more than the zones hold (6 large, or 12 small, or a mix).
pub const BURST: usize = 10;

/// The running stack the scenarios share.
pub struct Stack {
    pub client: Client,
    /// kube-apiserver's audit log of binding creates.
    pub audit_log: PathBuf,
    pub scenario: Scenario,
    pub sim: Simulator,
    pub runner: Runner,
    /// The scheduler pods' way to kube-apiserver (every other client goes direct).
    pub proxy: FaultProxy,
}

impl Stack {
    pub fn nodes(&self) -> Vec<String> {
        self.scenario
            .nodes()
            .iter()
            .map(|n| n.name.clone())
            .collect()
    }

    /// Every scheduler pod Ready with a process, `count` of them.
    pub async fn schedulers(&self, count: usize) -> Vec<String> {
        wait_ready_pods(
            &self.client,
            &self.runner,
            NAMESPACE,
            "tas-scheduler",
            count,
            TIMEOUT,
        )
        .await
        .expect("scheduler pods run")
        .iter()
        .map(ResourceExt::name_any)
        .collect()
    }

    /// The scheduler pod holding the Lease, once one of `candidates` holds it.
    pub async fn leader(&self, candidates: &[String]) -> String {
        self.lease_holder("tas-scheduler", candidates).await
    }

    /// The pod holding Lease `lease`, once one of `candidates` holds it.
    pub async fn lease_holder(&self, lease: &str, candidates: &[String]) -> String {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), NAMESPACE);
        wait_for(
            format!("one of {candidates:?} to hold Lease {lease}"),
            TIMEOUT,
            || async {
                let holder = leases
                    .get_opt(lease)
                    .await?
                    .and_then(|l| l.spec?.holder_identity)
                    .unwrap_or_default();
                Ok::<_, kube::Error>(candidates.iter().find(|c| **c == holder).cloned())
            },
        )
        .await
        .expect("a leader")
    }

    /// Sets the CR's `spec.scheduler.replicas`.
    pub async fn set_replicas(&self, replicas: i32) {
        let api: Api<tas_api::tas::TopologyAwareScheduling> = Api::all(self.client.clone());
        api.patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"scheduler": {"replicas": replicas}}})),
        )
        .await
        .expect("replicas set");
    }

    /// Waits until the CR is Available with every node's NRT fresh again.
    pub async fn wait_available(&self) {
        stack::wait_available(&self.client, self.scenario.nodes().len(), TIMEOUT)
            .await
            .expect("Available with fresh NRTs");
    }
}

/// One scenario's workload namespace and the pods created in it.
pub struct Run {
    pub fault: &'static str,
    started: std::time::Instant,
    pub ns: String,
    pub pods: Api<Pod>,
    created: usize,
}

impl Run {
    pub async fn start(stack: &Stack, fault: &'static str) -> Self {
        let prefix = fault.split_whitespace().next().unwrap_or("fault");
        let ns = unique_namespace(&stack.client, &format!("fault-{prefix}"))
            .await
            .expect("namespace");
        let pods = Api::namespaced(stack.client.clone(), &ns);
        Self {
            fault,
            started: std::time::Instant::now(),
            ns,
            pods,
            created: 0,
        }
    }

    /// Creates `count` workload pods, large and small in turn, on `node` only if
    /// given.
    pub async fn create(&mut self, count: usize, node: Option<&str>) {
        for _ in 0..count {
            let cpus = if self.created.is_multiple_of(2) {
                LARGE
            } else {
                SMALL
            };
            self.create_sized(1, node, cpus).await;
        }
    }

    /// Creates `count` workload pods of `cpus` CPUs, on `node` only if given. Retries
    /// each create until the API server takes it (it may be restarting).
    pub async fn create_sized(&mut self, count: usize, node: Option<&str>, cpus: u32) {
        for _ in 0..count {
            self.create_pod(workload_pod("", node, cpus)).await;
        }
    }

    /// Creates `pod` (named `p-<n>` like the others), counted in the verdict like them.
    pub async fn create_pod(&mut self, mut pod: Pod) {
        pod.metadata.name = Some(format!("p-{}", self.created));
        wait_for("creating a workload pod", TIMEOUT, || async {
            match self.pods.create(&PostParams::default(), &pod).await {
                Ok(_) => Ok(Some(())),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(Some(())),
                Err(e) => Err(e),
            }
        })
        .await
        .expect("pod created");
        self.created += 1;
    }

    /// Waits until `n` pods of the run are bound.
    pub async fn wait_bound(&self, n: usize) {
        wait_for(
            format!("{n} pods of {} bound", self.ns),
            TIMEOUT,
            || async {
                let bound = self
                    .pods
                    .list(&ListParams::default())
                    .await?
                    .items
                    .iter()
                    .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                    .count();
                Ok::<_, kube::Error>((bound >= n).then_some(()))
            },
        )
        .await
        .expect("pods bound");
    }

    /// Settles the workload, prints the scenario's line, checks the verdict, and
    /// deletes the namespace (freeing the zones for the next scenario).
    pub async fn finish(self, stack: &Stack) -> Verdict {
        let outcome = wait_settled(&stack.client, &self.ns, &stack.sim, TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", self.fault));
        let bindings = audit::bindings(&stack.audit_log).expect("audit log read");
        let ours: Vec<audit::Binding> = bindings
            .into_iter()
            .filter(|b| b.namespace == self.ns)
            .collect();
        let verdict = Verdict {
            took: self.started.elapsed(),
            fault: self.fault,
            ns: self.ns.clone(),
            pods: self.created,
            outcome,
            bindings: ours,
        };
        println!("{}", verdict.line());
        verdict.check();
        delete_namespace(&stack.client, &self.ns).await;
        verdict
    }
}

/// What a scenario ended with.
pub struct Verdict {
    pub fault: &'static str,
    /// From the scenario's start to its settled outcome.
    pub took: Duration,
    pub ns: String,
    pub pods: usize,
    pub outcome: WorkloadOutcome,
    /// Every binding create of the scenario's namespace the API server answered.
    pub bindings: Vec<audit::Binding>,
}

impl Verdict {
    /// Pods whose binding the API server accepted more than once.
    pub fn bound_twice(&self) -> Vec<(String, usize)> {
        audit::accepted_per_pod(&self.bindings, &self.ns)
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .collect()
    }

    /// Binding creates the API server refused (409: the pod was bound already; 5xx: the
    /// control plane failed).
    pub fn refused(&self) -> usize {
        self.bindings.iter().filter(|b| !b.accepted()).count()
    }

    /// Accepted binding creates sent by scheduler pod `pod` that reached the API
    /// server at or after `since`.
    pub fn accepted_from_after(&self, pod: &str, since: SystemTime) -> Vec<&audit::Binding> {
        self.bindings
            .iter()
            .filter(|b| b.sender_pod.as_deref() == Some(pod) && b.received >= since)
            .collect()
    }

    pub fn line(&self) -> String {
        let o = &self.outcome;
        let refused: Vec<String> = self
            .bindings
            .iter()
            .filter(|b| !b.accepted())
            .map(|b| {
                let by = b.sender_pod.as_deref().unwrap_or(&b.user);
                format!("{} answered {} (sent by {by})", b.pod, b.code)
            })
            .collect();
        let refused = if refused.is_empty() {
            String::new()
        } else {
            format!("\n    refused bindings: {}", refused.join(", "))
        };
        format!(
            "fault: {:<44} pods {:>2}  bound {:>2}  pending-with-reason {:>2}  kubelet-rejections {}  bound-twice {}  bindings-refused {}  ({:.0} s){refused}",
            self.fault,
            self.pods,
            o.placements.len(),
            o.pending.len(),
            o.topology_affinity_errors.len() + o.other_failures.len(),
            self.bound_twice().len(),
            self.refused(),
            self.took.as_secs_f64(),
        )
    }

    fn check(&self) {
        let o = &self.outcome;
        assert!(
            o.topology_affinity_errors.is_empty() && o.other_failures.is_empty(),
            "{}: the kubelet referee rejected pods: {o:?}",
            self.fault
        );
        for (pod, why) in &o.pending {
            assert!(
                why.contains("nodes are available"),
                "{}: {pod} Pending without an explanation: {why}",
                self.fault
            );
        }
        assert_eq!(
            o.placements.len() + o.pending.len(),
            self.pods,
            "{}: every pod has an outcome",
            self.fault
        );
        // A binding answered 5xx may still have been written (seen: a killed leader's
        // bind answered 504 "context canceled" after the write): such a pod runs with
        // no accepted binding, and no other binding of it can be accepted (409).
        let accepted = self.bindings.iter().filter(|b| b.accepted()).count();
        let undecided = self.bindings.iter().filter(|b| b.undecided()).count();
        let running = o.placements.len();
        assert!(
            accepted <= running && running <= accepted + undecided,
            "{}: one accepted (or 5xx-answered) binding per running pod, {running} running: {:?}",
            self.fault,
            self.bindings
        );
        assert!(
            self.bound_twice().is_empty(),
            "{}: pods bound twice: {:?}",
            self.fault,
            self.bound_twice()
        );
    }
}

/// A Guaranteed pod of `cpus` CPUs for TAS, on the scenario's nodes (on `node` only,
/// if given).
pub fn workload_pod(name: &str, node: Option<&str>, cpus: u32) -> Pod {
    let affinity = node.map(|n| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [n]}]}]}}})
    });
    let cpu = cpus.to_string();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {tas_testcluster::NODE_SIM_LABEL: "true"}},
        "spec": {
            "schedulerName": SCHEDULER,
            "nodeSelector": {stack::SAMPLE_NODE_LABEL: stack::SAMPLE_NODE_LABEL_VALUE},
            "affinity": affinity,
            "containers": [{"name": "c", "image": "c", "resources": {
                "requests": {"cpu": cpu, "memory": "1Gi"},
                "limits": {"cpu": cpu, "memory": "1Gi"}}}]
        }
    }))
    .expect("a valid pod")
}

async fn delete_namespace(client: &Client, ns: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let _ = pods
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let _ = api.delete(ns, &DeleteParams::default()).await;
    wait_for(format!("the pods of {ns} to be gone"), TIMEOUT, || async {
        Ok::<_, kube::Error>(
            pods.list(&ListParams::default())
                .await?
                .items
                .is_empty()
                .then_some(()),
        )
    })
    .await
    .expect("workload deleted");
}
