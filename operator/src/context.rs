//! What every reconcile shares: the client, the operator's settings, the watch caches,
//! the event recorder, metrics, the OTLP exporters and per-object backoff.

use crate::backoff::Backoffs;
use crate::desired::BuildContext;
use crate::metrics::Metrics;
use crate::telemetry::Otlp;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::core::PartialObjectMeta;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::WriterDropped;
use std::sync::Arc;
use std::time::Duration;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::TopologyAwareScheduling;

/// The operator's settings (from its flags).
#[derive(Debug, Clone)]
pub struct Config {
    /// Default images for operands whose CR names none.
    pub build: BuildContext,
    /// Events for the object within this window are folded into one reconcile.
    pub debounce: Duration,
    /// How long to wait for the NRT CRD to become Established after applying it.
    pub crd_established_timeout: Duration,
    /// Reconcile again after this long even without a change: a safety net for watch
    /// events lost while a watch was down. Long, so an idle cluster sees no reconciles.
    pub resync: Duration,
    /// `reportingInstance` of the operator's Events (e.g. its pod name).
    pub instance: Option<String>,
    /// The operator's own ServiceAccount when it runs as one: in a namespace it creates
    /// for `spec.namespace` it binds this account the rights to work there (see
    /// `reconcile::namespace`). `None` (in-process tests with other credentials): it binds
    /// nothing.
    pub identity: Option<OperatorIdentity>,
}

/// The ServiceAccount the operator runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorIdentity {
    /// Its namespace: the install namespace, where config/rbac already grants it the
    /// operands' rights.
    pub namespace: String,
    /// Its name.
    pub service_account: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            build: BuildContext::default(),
            debounce: Duration::from_millis(500),
            crd_established_timeout: Duration::from_secs(30),
            resync: Duration::from_secs(3600),
            instance: None,
            identity: None,
        }
    }
}

/// The watch caches a reconcile reads instead of listing from the API server.
#[derive(Clone)]
pub struct Stores {
    /// TopologyAwareScheduling objects.
    pub stacks: Store<TopologyAwareScheduling>,
    /// Nodes (metadata only: membership needs labels).
    pub nodes: Store<PartialObjectMeta<Node>>,
    /// NodeResourceTopology objects (empty while the CRD is not installed).
    pub nrts: Store<NodeResourceTopology>,
    /// Node agent pods of every stack.
    pub updater_pods: Store<Pod>,
    /// Node agent DaemonSets.
    pub daemon_sets: Store<DaemonSet>,
    /// Scheduler Deployments.
    pub deployments: Store<Deployment>,
    /// The NRT CRD (a watch on that one name).
    pub nrt_crd: Store<CustomResourceDefinition>,
}

impl Stores {
    /// Waits until every cache has its initial list, except the NRT objects' (their CRD
    /// may not exist yet: the operator installs it).
    pub async fn synced(&self) -> Result<(), WriterDropped> {
        futures::try_join!(
            self.stacks.wait_until_ready(),
            self.nodes.wait_until_ready(),
            self.updater_pods.wait_until_ready(),
            self.daemon_sets.wait_until_ready(),
            self.deployments.wait_until_ready(),
            self.nrt_crd.wait_until_ready(),
        )
        .map(|_| ())
    }

    /// The NRT CRD, if it exists.
    pub fn nrt_crd(&self) -> Option<Arc<CustomResourceDefinition>> {
        self.nrt_crd.state().into_iter().next()
    }
}

/// Shared by every reconcile.
pub struct Context {
    /// API client.
    pub client: Client,
    /// The operator's settings.
    pub config: Config,
    /// Watch caches.
    pub stores: Stores,
    /// Kubernetes Events on the CR.
    pub recorder: Recorder,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// OpenTelemetry export, pointed at the endpoint the object names.
    pub otlp: Otlp,
    /// Retry delays per object.
    pub backoffs: Backoffs,
}
