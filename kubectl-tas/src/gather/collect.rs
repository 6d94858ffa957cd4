//! The API reads of `kubectl tas gather`, one method per item of the bundle. Each
//! records its outcome in the manifest: a read the user may not do, or an endpoint that
//! does not answer, becomes a failed entry with the API server's words, and gathering
//! goes on.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod, Service};
use kube::api::{ListParams, LogParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tas_api::nrt::v1alpha2::NodeResourceTopology;

use super::manifest::{Entry, Manifest, Outcome};
use super::redact::{redact_line, redact_object};
use crate::bundle::Bundle;
use crate::proxy::SchedulerService;

/// Limits of what is gathered.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of each container log (the newest ones).
    pub log_bytes: i64,
    /// Events per list (the newest ones).
    pub events: usize,
}

/// Fills a bundle and its manifest.
pub struct Gatherer {
    client: Client,
    limits: Limits,
    /// The files.
    pub bundle: Bundle,
    /// What was collected.
    pub manifest: Manifest,
}

/// `{"kind": "List", "items": [...]}`, as `kubectl get -o yaml` writes lists.
fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// The objects as redacted JSON.
fn redacted<T: Serialize>(objects: &[T]) -> Vec<Value> {
    objects
        .iter()
        .map(|o| {
            let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
            redact_object(&mut v);
            v
        })
        .collect()
}

/// The API server's words for a failed request (kube's own text of a refusal repeats
/// the whole Status).
fn refusal(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} (HTTP {})", status.message, status.code),
        other => other.to_string(),
    }
}

/// Why a read through the scheduler's Service failed: the proxy path and the API
/// server's words.
fn proxy_refusal(e: crate::Error) -> String {
    match e {
        crate::Error::Api { what, source } => format!("{what}: {}", refusal(&source)),
        other => other.to_string(),
    }
}

/// The newest `max` Events, oldest first.
fn newest_events(mut events: Vec<Event>, max: usize) -> Vec<Event> {
    let when = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or(e.event_time.as_ref().map(|t| t.0))
            .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
    };
    events.sort_by_key(when);
    let skip = events.len().saturating_sub(max);
    events.split_off(skip)
}

impl Gatherer {
    /// An empty bundle.
    pub fn new(client: Client, limits: Limits, manifest: Manifest) -> Self {
        Self {
            client,
            limits,
            bundle: Bundle::default(),
            manifest,
        }
    }

    /// Records an entry.
    pub fn record(
        &mut self,
        what: impl Into<String>,
        path: Option<&str>,
        outcome: Result<(usize, usize), String>,
    ) {
        let (outcome, items, bytes, reason) = match outcome {
            Ok((items, bytes)) => (Outcome::Collected, Some(items), Some(bytes), None),
            Err(reason) => (Outcome::Failed, None, None, Some(reason)),
        };
        self.manifest.entries.push(Entry {
            what: what.into(),
            path: path.map(str::to_owned),
            outcome,
            items,
            bytes,
            reason,
        });
    }

    /// Records an item not collected on purpose.
    pub fn skip(&mut self, what: impl Into<String>, reason: impl Into<String>) {
        self.manifest.entries.push(Entry {
            what: what.into(),
            path: None,
            outcome: Outcome::Skipped,
            items: None,
            bytes: None,
            reason: Some(reason.into()),
        });
    }

    /// Writes redacted `items` as a List at `path` and records it.
    fn put_list(&mut self, what: &str, path: &str, items: Vec<Value>) {
        let n = items.len();
        let bytes = self.bundle.put_yaml(path, &list(items));
        self.record(what, Some(path), Ok((n, bytes)));
    }

    /// Lists `K` (in `namespace`, or cluster-wide) and writes them redacted.
    pub async fn objects<K>(&mut self, what: &str, path: &str, namespace: Option<&str>) -> Vec<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let api: Api<K> = match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        match api.list(&ListParams::default()).await {
            Ok(found) => {
                let items = redacted(&found.items);
                self.put_list(what, path, items);
                found.items
            }
            Err(e) => {
                self.record(what, Some(path), Err(refusal(&e)));
                Vec::new()
            }
        }
    }

    /// The stack object and the Events about it.
    pub async fn stack(&mut self, stack: Result<Option<Value>, String>) {
        const PATH: &str = STACK;
        match stack {
            Ok(Some(mut object)) => {
                redact_object(&mut object);
                let bytes = self.bundle.put_yaml(PATH, &object);
                self.record(
                    "TopologyAwareScheduling default (spec and status)",
                    Some(PATH),
                    Ok((1, bytes)),
                );
            }
            Ok(None) => self.skip(
                "TopologyAwareScheduling default",
                "not found: no stack object (or its CRD) in the cluster",
            ),
            Err(e) => self.record("TopologyAwareScheduling default", Some(PATH), Err(e)),
        }
        let api: Api<Event> = Api::all(self.client.clone());
        let params = ListParams::default().fields("involvedObject.kind=TopologyAwareScheduling");
        let path = "events/topologyawarescheduling.yaml";
        let what = "Events of the TopologyAwareScheduling object";
        match api.list(&params).await {
            Ok(found) => {
                let events = newest_events(found.items, self.limits.events);
                self.put_list(what, path, redacted(&events));
            }
            Err(e) => self.record(what, Some(path), Err(refusal(&e))),
        }
    }

    /// Nodes with their labels, capacity and allocatable only.
    pub async fn nodes(&mut self) {
        let path = NODES;
        let what = "Nodes (labels, capacity, allocatable)";
        let api: Api<Node> = Api::all(self.client.clone());
        match api.list(&ListParams::default()).await {
            Ok(found) => {
                let items = found
                    .items
                    .iter()
                    .map(|n| {
                        let status = n.status.as_ref();
                        json!({
                            "apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": n.name_any(), "labels": n.labels()},
                            "status": {
                                "capacity": status.and_then(|s| s.capacity.clone()),
                                "allocatable": status.and_then(|s| s.allocatable.clone()),
                            }
                        })
                    })
                    .collect();
                self.put_list(what, path, items);
            }
            Err(e) => self.record(what, Some(path), Err(refusal(&e))),
        }
    }

    /// The NodeResourceTopology objects, and from them the kubelet settings each node
    /// agent read (the attributes it publishes and its report annotations).
    pub async fn topology(&mut self, kubelet_issues: Vec<Value>) {
        let path = NRTS;
        let what = "NodeResourceTopology objects";
        let api: Api<NodeResourceTopology> = Api::all(self.client.clone());
        let nrts = match api.list(&ListParams::default()).await {
            Ok(found) => found.items,
            Err(e) => {
                self.record(what, Some(path), Err(refusal(&e)));
                self.record(
                    "kubelet settings as the node agents read them",
                    Some(KUBELET_CONFIGS),
                    Err("needs the NodeResourceTopology objects, which could not be read".into()),
                );
                return;
            }
        };
        self.put_list(what, path, redacted(&nrts));
        let items = kubelet_configs(&nrts, &kubelet_issues);
        let n = items.len();
        let bytes = self.bundle.put_yaml(KUBELET_CONFIGS, &items);
        self.record(
            "kubelet settings as the node agents read them",
            Some(KUBELET_CONFIGS),
            Ok((n, bytes)),
        );
    }

    /// The scheduler's reserve cache, through the API server's service proxy.
    pub async fn reservations(&mut self, service: &SchedulerService) {
        let what = format!(
            "the scheduler's reservations ({} via services/{}:{}/proxy)",
            tas_scheduler::debug::RESERVATIONS_PATH,
            service.name,
            service.port
        );
        match service.reservations(&self.client).await {
            Ok(report) => {
                let text = serde_json::to_string_pretty(&report).unwrap_or_default();
                let n = report.nodes.len();
                let bytes = text.len();
                self.bundle.put(RESERVATIONS, text);
                self.record(what, Some(RESERVATIONS), Ok((n, bytes)));
            }
            Err(e) => self.record(what, Some(RESERVATIONS), Err(proxy_refusal(e))),
        }
    }

    /// The scheduler's Events (its decisions: Scheduled, FailedScheduling, ...),
    /// cluster-wide, the newest first kept.
    pub async fn decisions(&mut self) {
        let path = "scheduler/events.yaml";
        let what = "the scheduler's decisions (its Events in every namespace)";
        let api: Api<Event> = Api::all(self.client.clone());
        let params = ListParams::default().fields(&format!(
            "reportingComponent={}",
            tas_scheduler::run::COMPONENT
        ));
        match api.list(&params).await {
            Ok(found) => {
                let events = newest_events(found.items, self.limits.events);
                self.put_list(what, path, redacted(&events));
            }
            Err(e) => self.record(what, Some(path), Err(refusal(&e))),
        }
    }

    /// The scheduler's recent scheduling attempts (every one it keeps), through the API
    /// server's service proxy.
    pub async fn decision_traces(&mut self, service: &SchedulerService) {
        let path = crate::decisions::BUNDLE_PATH;
        let what = format!(
            "the scheduler's decision traces ({} via services/{}:{}/proxy)",
            tas_scheduler::debug::DECISIONS_PATH,
            service.name,
            service.port
        );
        let query = tas_scheduler::decisions::DecisionQuery::default();
        match service.decisions(&self.client, &query).await {
            Ok(report) => {
                let text = serde_json::to_string_pretty(&report).unwrap_or_default();
                let (n, bytes) = (report.decisions.len(), text.len());
                self.bundle.put(path, text);
                self.record(what, Some(path), Ok((n, bytes)));
                if !report.leader
                    && let Some(entry) = self.manifest.entries.last_mut()
                {
                    entry.reason = Some("answered by a replica that does not lead (it schedules nothing); gather again to reach the leader".into());
                }
            }
            Err(e) => self.record(what, Some(path), Err(proxy_refusal(e))),
        }
    }

    /// One namespace: the workloads, ConfigMaps and Services (never Secrets), the pods,
    /// the Events and every container's log.
    pub async fn namespace(&mut self, ns: &str) {
        let dir = format!("namespaces/{ns}");
        self.objects::<DaemonSet>(
            &format!("DaemonSets in {ns}"),
            &format!("{dir}/daemonsets.yaml"),
            Some(ns),
        )
        .await;
        self.objects::<Deployment>(
            &format!("Deployments in {ns}"),
            &format!("{dir}/deployments.yaml"),
            Some(ns),
        )
        .await;
        self.objects::<ConfigMap>(
            &format!("ConfigMaps in {ns}"),
            &format!("{dir}/configmaps.yaml"),
            Some(ns),
        )
        .await;
        self.objects::<Service>(
            &format!("Services in {ns}"),
            &format!("{dir}/services.yaml"),
            Some(ns),
        )
        .await;
        let pods = self
            .objects::<Pod>(
                &format!("Pods in {ns}"),
                &format!("{dir}/pods.yaml"),
                Some(ns),
            )
            .await;
        let events: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let path = format!("{dir}/events.yaml");
        let what = format!("Events in {ns}");
        match events.list(&ListParams::default()).await {
            Ok(found) => {
                let events = newest_events(found.items, self.limits.events);
                self.put_list(&what, &path, redacted(&events));
            }
            Err(e) => self.record(what, Some(&path), Err(refusal(&e))),
        }
        for pod in &pods {
            self.logs(ns, pod).await;
        }
    }

    /// Every container's log, current and previous (when it restarted).
    async fn logs(&mut self, ns: &str, pod: &Pod) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let name = pod.name_any();
        let spec = pod.spec.as_ref();
        let containers = spec
            .into_iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
            .map(|c| c.name.clone());
        let restarted: BTreeMap<String, i32> = pod
            .status
            .iter()
            .flat_map(|s| {
                s.init_container_statuses
                    .iter()
                    .flatten()
                    .chain(s.container_statuses.iter().flatten())
            })
            .map(|c| (c.name.clone(), c.restart_count))
            .collect();
        for container in containers.collect::<Vec<_>>() {
            for previous in [false, true] {
                if previous && restarted.get(&container).copied().unwrap_or(0) == 0 {
                    continue;
                }
                let suffix = if previous { ".previous" } else { "" };
                let path = format!("namespaces/{ns}/logs/{name}/{container}{suffix}.log");
                let what = format!(
                    "{}log of {ns}/{name} container {container}",
                    if previous { "previous " } else { "" }
                );
                let params = LogParams {
                    container: Some(container.clone()),
                    previous,
                    limit_bytes: Some(self.limits.log_bytes),
                    timestamps: true,
                    ..LogParams::default()
                };
                match api.logs(&name, &params).await {
                    Ok(text) => {
                        let redacted: Vec<String> = text.lines().map(redact_line).collect();
                        let lines = redacted.len();
                        let body = redacted.join("\n") + "\n";
                        let bytes = body.len();
                        let cut = text.len() as i64 >= self.limits.log_bytes;
                        self.bundle.put(path.clone(), body);
                        self.record(what, Some(&path), Ok((lines, bytes)));
                        if cut && let Some(entry) = self.manifest.entries.last_mut() {
                            entry.reason = Some(format!(
                                "cut at {} bytes (--log-bytes)",
                                self.limits.log_bytes
                            ));
                        }
                    }
                    Err(e) => self.record(what, Some(&path), Err(refusal(&e))),
                }
            }
        }
    }
}

/// Where the stack object goes.
pub const STACK: &str = "topologyawarescheduling.yaml";
/// Where the Nodes go.
pub const NODES: &str = "cluster/nodes.yaml";
/// Where the NodeResourceTopology objects go.
pub const NRTS: &str = "cluster/noderesourcetopologies.yaml";
/// Where the kubelet settings go.
pub const KUBELET_CONFIGS: &str = "cluster/kubelet-configs.yaml";
/// Where the scheduler's reservations go (its JSON, as served).
pub const RESERVATIONS: &str = "scheduler/reservations.json";

/// Per node: the kubelet settings its agent published (the NRT's attributes but the
/// pod fingerprint and heartbeat), the agent's report on the kubelet configuration
/// (`tas.dev/kubelet-config*` annotations), and the operator's issues for the node.
pub fn kubelet_configs(nrts: &[NodeResourceTopology], issues: &[Value]) -> Vec<Value> {
    use tas_api::nrt::attributes as attr;
    nrts.iter()
        .map(|nrt| {
            let node = nrt.name_any();
            let attributes: BTreeMap<&str, &str> = nrt
                .attributes
                .iter()
                .filter(|a| {
                    !a.name.starts_with(attr::NODE_TOPOLOGY_PODS_FINGERPRINT)
                        && !a.name.to_ascii_lowercase().contains("heartbeat")
                })
                .map(|a| (a.name.as_str(), a.value.as_str()))
                .collect();
            let report: BTreeMap<&String, &String> = nrt
                .annotations()
                .iter()
                .filter(|(k, _)| k.starts_with("tas.dev/kubelet-config"))
                .collect();
            let node_issues: Vec<&Value> = issues.iter().filter(|i| i["node"] == node).collect();
            json!({
                "node": node,
                "topologyPolicies": nrt.topology_policies,
                "attributes": attributes,
                "agentReport": report,
                "operatorIssues": node_issues,
            })
        })
        .collect()
}
