//! The agent's loop: wait for a trigger, observe the node, publish if anything changed.
//!
//! One observation reads sysfs (cheap, so hot-added hugepages or CPUs show up without a
//! restart), the kubelet config file, and the kubelet's podresources API, then builds the
//! object and hands it to the [`Publisher`]. Every failure is logged, counted and turns
//! readiness off; the loop itself never exits on an observation error.

use crate::accounting::{self, AccountingOptions};
use crate::http::Readiness;
use crate::kubelet_config::{KubeletConfig, KubeletConfigError};
use crate::metrics::{CallLabel, Metrics};
use crate::nrt_object::{self, NodeRef, Observed};
use crate::podresources::PodResourcesClient;
use crate::pods_fingerprint::FingerprintPolicy;
use crate::publish::{Outcome, Publisher};
use crate::sysfs;
use crate::triggers::{self, Mode, Trigger};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, Client};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};
use tokio::sync::mpsc;

/// Everything the agent needs to know, from flags.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// This node.
    pub node_name: String,
    /// Where sysfs is mounted.
    pub sysfs_root: PathBuf,
    /// The kubelet config file.
    pub kubelet_config: PathBuf,
    /// Override of the kubelet's Topology Manager policy.
    pub policy_override: Option<TopologyManagerPolicy>,
    /// Override of the kubelet's Topology Manager scope.
    pub scope_override: Option<TopologyManagerScope>,
    /// What triggers a publish.
    pub mode: Mode,
    /// Periodic interval.
    pub period: Duration,
    /// Pod-event coalescing window.
    pub debounce: Duration,
    /// Safety-net re-apply interval of unchanged content.
    pub reapply_interval: Duration,
    /// Which pods the fingerprint covers.
    pub fingerprint: FingerprintPolicy,
}

/// Why an observation failed (the kind is the metrics label).
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// sysfs could not be read.
    #[error(transparent)]
    Sysfs(#[from] sysfs::SysfsError),
    /// The kubelet config file is unreadable or malformed.
    #[error(transparent)]
    KubeletConfig(#[from] KubeletConfigError),
    /// The kubelet's podresources API failed.
    #[error(transparent)]
    PodResources(#[from] crate::podresources::PodResourcesError),
    /// Writing the object failed.
    #[error(transparent)]
    Publish(#[from] crate::publish::PublishError),
}

impl ObserveError {
    fn kind(&self) -> &'static str {
        match self {
            Self::Sysfs(_) => "sysfs",
            Self::KubeletConfig(_) => "kubelet_config",
            Self::PodResources(e) => e.kind().as_str(),
            Self::Publish(_) => "apply",
        }
    }
}

/// The running agent.
pub struct Agent {
    cfg: AgentConfig,
    client: Client,
    podresources: PodResourcesClient,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    publisher: Publisher,
    node: NodeRef,
}

impl Agent {
    /// An agent for `cfg.node_name`.
    pub fn new(
        cfg: AgentConfig,
        client: Client,
        podresources: PodResourcesClient,
        metrics: Arc<Metrics>,
        readiness: Arc<Readiness>,
    ) -> Self {
        let publisher = Publisher::new(Api::all(client.clone()), cfg.reapply_interval);
        let node = NodeRef {
            name: cfg.node_name.clone(),
            uid: String::new(),
        };
        Self {
            cfg,
            client,
            podresources,
            metrics,
            readiness,
            publisher,
            node,
        }
    }

    /// Run until the process is stopped.
    pub async fn run(mut self) {
        let (tx, mut rx) = mpsc::channel::<Trigger>(16);
        if self.cfg.mode.periodic() {
            tokio::spawn(triggers::ticker(self.cfg.period, tx.clone()));
        } else {
            // Events only: still publish once at start.
            let _ = tx.send(Trigger::Tick).await;
        }
        if self.cfg.mode.events() {
            let (raw_tx, raw_rx) = mpsc::channel(256);
            tokio::spawn(triggers::debounce(raw_rx, self.cfg.debounce, tx.clone()));
            let pods: Api<Pod> = Api::all(self.client.clone());
            tokio::spawn(triggers::watch_pods(
                pods,
                self.cfg.node_name.clone(),
                raw_tx,
            ));
        }
        tokio::spawn(triggers::watch_own_object(
            Api::all(self.client.clone()),
            self.cfg.node_name.clone(),
            tx.clone(),
        ));
        while let Some(trigger) = rx.recv().await {
            if let Trigger::ObjectChanged(observed) = &trigger {
                if self.publisher.is_current(observed.as_deref()) {
                    continue;
                }
                tracing::info!(node = %self.node.name, "NodeResourceTopology deleted or edited by someone else: restoring it");
                self.publisher.reset();
            }
            self.publish_once(&trigger).await;
        }
    }

    /// Observe the node and publish; failures are logged, counted and reported through
    /// readiness.
    pub async fn publish_once(&mut self, trigger: &Trigger) {
        let span = tracing::info_span!("publish", node = %self.node.name, ?trigger);
        let _enter = span.enter();
        let started = Instant::now();
        match self.observe_and_publish().await {
            Ok(outcome) => {
                self.metrics.published(outcome == Outcome::Applied);
                self.readiness.ready();
                if outcome == Outcome::Applied {
                    tracing::info!(
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "published NodeResourceTopology"
                    );
                } else {
                    tracing::debug!("NodeResourceTopology unchanged");
                }
            }
            Err(e) => {
                self.metrics.failed(e.kind());
                tracing::warn!(error = %e, kind = e.kind(), "could not publish NodeResourceTopology");
                self.readiness.not_ready(e.to_string());
            }
        }
    }

    async fn observe_and_publish(&mut self) -> Result<Outcome, ObserveError> {
        if self.node.uid.is_empty() {
            // The Node owns the object; without its uid the object would not be garbage
            // collected with it. A failed read is retried on the next publish.
            match Api::<Node>::all(self.client.clone())
                .get(&self.node.name)
                .await
            {
                Ok(n) => self.node.uid = n.metadata.uid.unwrap_or_default(),
                Err(e) => tracing::warn!(error = %e, "reading this Node for the owner reference"),
            }
        }
        let topology = sysfs::discover(&self.cfg.sysfs_root)?;
        let kubelet = match KubeletConfig::load(&self.cfg.kubelet_config) {
            Ok(c) => c,
            Err(KubeletConfigError::NotFound { path }) => {
                tracing::debug!(path = %path.display(), "no kubelet config file: kubelet defaults");
                KubeletConfig::default()
            }
            Err(e) => return Err(e.into()),
        };
        let mut tm = kubelet.topology_manager_config();
        if let Some(p) = self.cfg.policy_override {
            tm.policy = p;
        }
        if let Some(s) = self.cfg.scope_override {
            tm.scope = s;
        }
        let t = Instant::now();
        let allocatable = self.podresources.get_allocatable().await?;
        self.observe_latency("get_allocatable", t);
        let t = Instant::now();
        let list = self.podresources.list().await?;
        self.observe_latency("list", t);
        let resources = accounting::compute(
            &topology,
            &allocatable,
            &list.pod_resources,
            &AccountingOptions {
                reserved_cpus: kubelet.reserved_system_cpus.clone(),
            },
        );
        for w in &resources.warnings {
            tracing::debug!(warning = %w, "accounting");
        }
        let fingerprint = self
            .cfg
            .fingerprint
            .compute(&list.pod_resources)
            .zip(self.cfg.fingerprint.method());
        let nrt = nrt_object::build(&Observed {
            node: &self.node,
            topology: &topology,
            resources: &resources,
            topology_manager: tm,
            resource_managers: &kubelet.resource_managers_config(),
            fingerprint,
        });
        Ok(self.publisher.publish(&nrt).await?)
    }

    fn observe_latency(&self, call: &'static str, since: Instant) {
        self.metrics
            .podresources_latency
            .get_or_create(&CallLabel { call })
            .observe(since.elapsed().as_secs_f64());
    }
}
