//! The controller that plays the kubelet for the simulated nodes.
//!
//! It watches pods labelled [`NODE_SIM_LABEL`]`=true` and acts on those bound to one of
//! its nodes:
//!
//! - a new pod (not terminal, not being deleted) is admitted or rejected by its node;
//!   admitted → status `Running` (see [`status::running`]), rejected → status `Failed`
//!   with the kubelet's reason and message plus a Warning Event;
//! - a pod that finished (`Succeeded`/`Failed`), is being deleted, or is gone releases
//!   its resources.
//!
//! Pods are handled one at a time in watch order; after each (re)list, in creation
//! order, as the kubelet sorts the pods it is handed. A status patch that failed (the
//! API server restarting, say) is repeated every [`RESYNC`] until it lands or the pod is
//! gone, as the kubelet's status manager does, and when a later event still shows the
//! pod without it. Pods already
//! Running when the controller starts (a simulator restart) are admitted again without
//! a new patch unless they no longer fit.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use crate::node::SimNode;
use crate::request::{PodKey, PodRequest};
use crate::status;
use crate::verdict::{Admission, Rejection, UNEXPECTED_ADMISSION_ERROR};
use tas_testcluster::NODE_SIM_LABEL;

/// Name the simulator reports Events and field ownership as.
pub const CONTROLLER_NAME: &str = "tas-nodesim";

const PATCH_ATTEMPTS: u32 = 3;
const PATCH_RETRY: Duration = Duration::from_millis(200);
/// How often status patches that failed are tried again.
const RESYNC: Duration = Duration::from_secs(2);

/// The simulated nodes by name, shared by the simulator (which adds and removes nodes
/// at run time) and its controller.
pub type Nodes = Arc<RwLock<BTreeMap<String, Arc<SimNode>>>>;

/// Plays the kubelet for a set of simulated nodes.
pub struct Controller {
    client: Client,
    nodes: Nodes,
    /// Names of nodes added at run time, whose existing pods are to be handled.
    added: Option<mpsc::UnboundedReceiver<String>>,
    recorder: Recorder,
    /// Rejections of pods that still exist, by UID.
    rejected: HashMap<String, Rejection>,
    /// Start times of admitted pods.
    started: HashMap<PodKey, String>,
    /// Pods whose last status patch failed, by UID: handled again every [`RESYNC`].
    unwritten: HashMap<String, Pod>,
}

impl Controller {
    /// A controller for `nodes`.
    pub fn new(client: Client, nodes: impl IntoIterator<Item = Arc<SimNode>>) -> Self {
        let nodes = nodes
            .into_iter()
            .map(|n| (n.name().to_string(), n))
            .collect();
        Self::shared(client, Arc::new(RwLock::new(nodes)), None)
    }

    /// A controller for the nodes in `nodes`, which may change while it runs: a pod
    /// bound to a node that is no longer there is left alone (its kubelet is gone), and
    /// for every name received on `added` the pods already bound to that node are
    /// handled in creation order, as a kubelet registering does.
    pub fn shared(
        client: Client,
        nodes: Nodes,
        added: Option<mpsc::UnboundedReceiver<String>>,
    ) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.into(),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            nodes,
            added,
            rejected: HashMap::new(),
            started: HashMap::new(),
            unwritten: HashMap::new(),
        }
    }

    /// Runs until `shutdown` completes. `synced` is told when the first list of pods has
    /// been handled.
    pub async fn run(mut self, synced: oneshot::Sender<()>, shutdown: impl Future<Output = ()>) {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let config = watcher::Config::default().labels(&format!("{NODE_SIM_LABEL}=true"));
        let events = watcher::watcher(pods, config).default_backoff();
        tokio::pin!(events);
        tokio::pin!(shutdown);
        let mut synced = Some(synced);
        let mut listing: Vec<Pod> = Vec::new();
        let mut added = self.added.take();
        let mut resync = tokio::time::interval(RESYNC);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let event = tokio::select! {
                () = &mut shutdown => break,
                _ = resync.tick(), if !self.unwritten.is_empty() => {
                    self.rewrite().await;
                    continue;
                }
                Some(node) = recv(&mut added) => {
                    self.registered(&node).await;
                    continue;
                }
                event = events.next() => event,
            };
            match event {
                None => break,
                Some(Err(error)) => warn!(%error, "pod watch failed; retrying"),
                Some(Ok(Event::Init)) => listing.clear(),
                Some(Ok(Event::InitApply(pod))) => listing.push(pod),
                Some(Ok(Event::InitDone)) => {
                    let mut pods = std::mem::take(&mut listing);
                    sort_by_creation(&mut pods);
                    self.forget_missing(&pods).await;
                    for pod in &pods {
                        self.apply(pod).await;
                    }
                    if let Some(synced) = synced.take() {
                        let _ = synced.send(());
                    }
                }
                Some(Ok(Event::Apply(pod))) => self.apply(&pod).await,
                Some(Ok(Event::Delete(pod))) => self.forget(&pod).await,
            }
        }
    }

    fn node_of(&self, pod: &Pod) -> Option<Arc<SimNode>> {
        let name = pod.spec.as_ref()?.node_name.as_ref()?;
        self.nodes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Node `name` was added: its pods that exist already (bound before it was
    /// there, or to an earlier node of that name) are handled now, in creation order.
    async fn registered(&mut self, name: &str) {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let params = kube::api::ListParams::default()
            .labels(&format!("{NODE_SIM_LABEL}=true"))
            .fields(&format!("spec.nodeName={name}"));
        match pods.list(&params).await {
            Ok(list) => {
                let mut pods = list.items;
                sort_by_creation(&mut pods);
                for pod in &pods {
                    self.apply(pod).await;
                }
            }
            Err(error) => warn!(node = name, %error, "listing the pods of an added node"),
        }
    }

    /// Releases pods admitted on our nodes that a relist no longer shows.
    async fn forget_missing(&mut self, present: &[Pod]) {
        let keys: BTreeSet<PodKey> = present.iter().map(PodKey::of).collect();
        let nodes: Vec<Arc<SimNode>> = self
            .nodes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for node in &nodes {
            for key in node.admitted() {
                if !keys.contains(&key) && node.release(&key).await {
                    info!(node = node.name(), pod = %key.name, namespace = %key.namespace, "released a pod that is gone");
                    self.started.remove(&key);
                }
            }
        }
        let uids: BTreeSet<String> = present.iter().filter_map(|p| p.uid()).collect();
        self.rejected.retain(|uid, _| uids.contains(uid));
        self.unwritten.retain(|uid, _| uids.contains(uid));
    }

    /// Handles again the pods whose status patch failed.
    async fn rewrite(&mut self) {
        let pods: Vec<Pod> = self.unwritten.drain().map(|(_, p)| p).collect();
        for pod in &pods {
            self.apply(pod).await;
        }
    }

    async fn forget(&mut self, pod: &Pod) {
        if let Some(node) = self.node_of(pod) {
            let key = PodKey::of(pod);
            if node.release(&key).await {
                info!(node = node.name(), pod = %key.name, namespace = %key.namespace, "released a deleted pod");
            }
            self.started.remove(&key);
        }
        if let Some(uid) = pod.uid() {
            self.rejected.remove(&uid);
            self.unwritten.remove(&uid);
        }
    }

    async fn apply(&mut self, pod: &Pod) {
        let Some(node) = self.node_of(pod) else {
            return;
        };
        let key = PodKey::of(pod);
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let terminal = matches!(phase.as_str(), "Succeeded" | "Failed");
        if terminal || pod.metadata.deletion_timestamp.is_some() {
            if node.release(&key).await {
                info!(node = node.name(), pod = %key.name, namespace = %key.namespace, phase, "released a finished pod");
            }
            self.started.remove(&key);
            return;
        }
        if let Some(rejection) = pod.uid().and_then(|uid| self.rejected.get(&uid)).cloned() {
            self.patch(pod, status::rejected(&rejection)).await;
            return;
        }
        if node.is_admitted(&key) {
            if phase != "Running" {
                let started = self.started.entry(key).or_insert_with(status::now).clone();
                self.patch(pod, status::running(pod, &started)).await;
            }
            return;
        }

        let admission = match PodRequest::from_pod(pod) {
            Ok(_) => node.admit(pod, &key).await,
            Err(error) => Admission::Rejected(Rejection {
                reason: UNEXPECTED_ADMISSION_ERROR.into(),
                message: format!("cannot read the pod's resources: {error}"),
            }),
        };
        match admission {
            Admission::Admitted => {
                info!(node = node.name(), pod = %key.name, namespace = %key.namespace, "admitted");
                if phase != "Running" {
                    let started = self.started.entry(key).or_insert_with(status::now).clone();
                    self.patch(pod, status::running(pod, &started)).await;
                }
            }
            Admission::Rejected(rejection) => {
                info!(
                    node = node.name(), pod = %key.name, namespace = %key.namespace,
                    reason = %rejection.reason, message = %rejection.message, "rejected"
                );
                if let Some(uid) = pod.uid() {
                    self.rejected.insert(uid, rejection.clone());
                }
                self.publish(pod, &rejection).await;
                self.patch(pod, status::rejected(&rejection)).await;
            }
        }
    }

    /// Writes `patch` to the pod's status; a pod whose write failed is kept in
    /// `unwritten` to be handled again.
    async fn patch(&mut self, pod: &Pod, patch: serde_json::Value) {
        let written = self.try_patch(pod, patch).await;
        if let Some(uid) = pod.uid() {
            if written {
                self.unwritten.remove(&uid);
            } else {
                self.unwritten.insert(uid, pod.clone());
            }
        }
    }

    /// Whether the patch landed (or the pod is gone).
    async fn try_patch(&self, pod: &Pod, patch: serde_json::Value) -> bool {
        let Some(namespace) = pod.namespace() else {
            return true;
        };
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let params = PatchParams::apply(CONTROLLER_NAME);
        let name = pod.name_any();
        for attempt in 1..=PATCH_ATTEMPTS {
            match pods
                .patch_status(&name, &params, &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return true,
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    debug!(pod = %name, %namespace, "pod gone before its status was written");
                    return true;
                }
                Err(error) if attempt < PATCH_ATTEMPTS => {
                    debug!(pod = %name, %namespace, %error, attempt, "status patch failed; retrying");
                    tokio::time::sleep(PATCH_RETRY * attempt).await;
                }
                Err(error) => {
                    warn!(pod = %name, %namespace, %error, "cannot write the pod's status; will retry")
                }
            }
        }
        false
    }

    async fn publish(&self, pod: &Pod, rejection: &Rejection) {
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: rejection.reason.clone(),
            note: Some(rejection.message.clone()),
            action: "Admit".into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &pod.object_ref(&())).await {
            warn!(pod = %pod.name_any(), %error, "cannot publish the rejection Event");
        }
    }
}

/// The next name on `added`, or never when there is no such channel (or it closed).
async fn recv(added: &mut Option<mpsc::UnboundedReceiver<String>>) -> Option<String> {
    match added {
        Some(rx) => match rx.recv().await {
            Some(name) => Some(name),
            None => {
                *added = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// Pods in the order the kubelet is handed them: by creation time, then name.
fn sort_by_creation(pods: &mut [Pod]) {
    pods.sort_by(|a, b| {
        let key = |p: &Pod| {
            (
                p.metadata.creation_timestamp.clone().map(|t| t.0),
                p.name_any(),
            )
        };
        key(a).cmp(&key(b))
    });
}
