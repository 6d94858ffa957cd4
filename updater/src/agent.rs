//! The agent's loop: wait for a trigger, observe the node, publish if anything changed.
//!
//! One observation reads the [`NodeFiles`] (sysfs and the kubelet config, off the async
//! thread) and the kubelet's podresources API, then builds the object and hands it to
//! the [`Publisher`]. Every failure is logged, counted and turns readiness off; the loop
//! itself never exits on an observation error. Each publish runs in a `publish` span
//! attached with `.instrument()`, so the agent's other tasks (watches, pod poll,
//! debouncer) never log inside it while it waits.

use crate::accounting::{self, AccountingOptions};
use crate::kubelet_source::{Discovery, SourceConfig, configz, stamp};
use crate::memory_cells::MemoryCells;
use crate::metrics::Metrics;
use crate::node_files::{NodeFiles, NodeFilesError};
use crate::nrt_object::{self, NodeRef, Observed};
use crate::numa_placement;
use crate::podresources::PodResourcesClient;
use crate::pods_fingerprint::FingerprintPolicy;
use crate::problem_report::ProblemReport;
use crate::publish::{Outcome, Publisher};
use crate::shared_pool;
use crate::triggers::{self, Mode, Trigger};
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tas_runtime::http::Readiness;
use tas_runtime::supervise::{Supervisor, TaskEnded};
use tokio::sync::mpsc;
use tracing::Instrument as _;

/// Everything the agent needs to know, from flags.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// This node.
    pub node_name: String,
    /// Where sysfs is mounted.
    pub sysfs_root: PathBuf,
    /// Where the kubelet's settings are, and the overrides.
    pub kubelet: SourceConfig,
    /// Write the node's object even when another NRT writer does.
    pub take_over_nrt: bool,
    /// What triggers a publish.
    pub mode: Mode,
    /// Periodic interval.
    pub period: Duration,
    /// How often the kubelet's podresources `List` is polled for pod changes (events
    /// modes only).
    pub pod_poll_interval: Duration,
    /// Pod-change coalescing window.
    pub debounce: Duration,
    /// Safety-net re-apply interval of unchanged content.
    pub reapply_interval: Duration,
    /// Which pods the fingerprint covers.
    pub fingerprint: FingerprintPolicy,
    /// Longest time between two writes of the object (its `tas.dev/heartbeat`).
    pub heartbeat_period: Duration,
    /// Publish the containers' NUMA placement ([`crate::numa_placement`]).
    pub numa_placement: bool,
    /// The status file of the agent's own process, whose cpuset is the CPU manager's
    /// shared pool ([`crate::shared_pool`]); `None`: not read.
    pub shared_cpus_from: Option<PathBuf>,
}

/// Why an observation failed (the kind is the metrics label).
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// sysfs could not be read.
    #[error(transparent)]
    NodeFiles(#[from] NodeFilesError),
    /// No kubelet settings were ever read (the object was published without zones).
    #[error(transparent)]
    KubeletConfig(#[from] crate::kubelet_source::Problem),
    /// The kubelet's podresources API failed.
    #[error(transparent)]
    PodResources(#[from] crate::podresources::PodResourcesError),
    /// Writing the object failed.
    #[error(transparent)]
    Publish(#[from] crate::publish::PublishError),
}

impl ObserveError {
    /// A failure to observe the node (podresources, sysfs), which the object's
    /// agent-problem annotation reports; not a failure to reach the API server, nor a
    /// kubelet configuration problem (reported by its own annotations).
    fn is_about_the_node(&self) -> bool {
        matches!(self, Self::NodeFiles(_) | Self::PodResources(_))
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::KubeletConfig(_) => "kubelet_config",
            Self::NodeFiles(NodeFilesError::Sysfs(_) | NodeFilesError::Cancelled) => "sysfs",
            Self::PodResources(e) => e.kind().as_str(),
            Self::Publish(_) => "apply",
        }
    }
}

/// The running agent.
pub struct Agent {
    cfg: AgentConfig,
    client: Client,
    /// Shared with the pod poll, so both are paced and back off as one client.
    podresources: Arc<PodResourcesClient>,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    publisher: Publisher,
    node: NodeRef,
    discovery: Discovery,
    yielded_to: Vec<String>,
    problems: ProblemReport,
    /// Whether the shared pool reflects the pods `List` reports.
    freshness: shared_pool::Freshness,
    /// Triggers a publish once the shared pool can be trusted (kept weak so the
    /// publish loop still ends when every trigger source is gone).
    retrigger: Option<mpsc::WeakSender<Trigger>>,
    /// The last shared-pool read error logged, so a persistent one warns once.
    pool_error: Option<String>,
    /// The Node's `status.nodeInfo.kubeletVersion`, and when the Node was last read.
    kubelet_version: Option<String>,
    node_read_at: Option<Instant>,
    /// The warnings of the last PCIe roots read, so an odd sysfs warns once, not at
    /// every publish.
    pcie_warnings: Vec<String>,
    /// The CPU layout warnings last logged (logged again only when they change).
    cpu_layout_warnings: Vec<String>,
    /// The memory manager's groups, followed from one `List` to the next.
    memory_cells: MemoryCells,
}

/// How often the kubelet's configuration files are checked for changes.
const KUBELET_CONFIG_POLL: Duration = Duration::from_secs(1);

impl Agent {
    /// An agent for `cfg.node_name`, reporting through `metrics` and `readiness`
    /// (ready after a successful publish, not ready with the error after a failed one).
    pub fn new(
        cfg: AgentConfig,
        client: Client,
        podresources: PodResourcesClient,
        metrics: Arc<Metrics>,
        readiness: Readiness,
    ) -> Self {
        let publisher = Publisher::new(Api::all(client.clone()), cfg.reapply_interval)
            .heartbeat_period(cfg.heartbeat_period)
            .take_over(cfg.take_over_nrt);
        let node = NodeRef {
            name: cfg.node_name.clone(),
            uid: String::new(),
        };
        let problems = ProblemReport::new(Api::all(client.clone()), cfg.node_name.clone());
        Self {
            cfg,
            client,
            podresources: Arc::new(podresources),
            metrics,
            readiness,
            publisher,
            node,
            discovery: Discovery::default(),
            yielded_to: Vec::new(),
            problems,
            freshness: shared_pool::Freshness::default(),
            retrigger: None,
            pool_error: None,
            kubelet_version: None,
            node_read_at: None,
            pcie_warnings: Vec::new(),
            cpu_layout_warnings: Vec::new(),
            memory_cells: MemoryCells::default(),
        }
    }

    /// Run until the process is stopped, or until one of its background tasks (the
    /// ticker, the pod poll, the watches, the debouncer) ends or panics: the returned
    /// error names it, and the process should exit non-zero.
    pub async fn run(mut self) -> TaskEnded {
        let (tx, mut rx) = mpsc::channel::<Trigger>(16);
        self.retrigger = Some(tx.downgrade());
        let mut tasks = Supervisor::new();
        // The tick also carries the heartbeat: events only still publishes at start and
        // once per heartbeat period.
        let tick = if self.cfg.mode.periodic() {
            self.cfg.period.min(self.cfg.heartbeat_period)
        } else {
            self.cfg.heartbeat_period
        };
        self.metrics.set_publish_interval(tick);
        for why in self.cfg.fingerprint.ignored() {
            // Left out, not fatal: the stack object feeds every agent, so one bad entry
            // would otherwise stop them all. Fix it in spec.updater.excludePods.
            tracing::error!(error = %why, "pod fingerprint exclude entry ignored");
            self.metrics.pod_exclude_ignored();
        }
        tasks.spawn("ticker", triggers::ticker(tick, tx.clone()));
        if self.cfg.mode.events() {
            let (raw_tx, raw_rx) = mpsc::channel(256);
            tasks.spawn(
                "debounce pod changes",
                triggers::debounce(raw_rx, self.cfg.debounce, tx.clone()),
            );
            let podresources = Arc::clone(&self.podresources);
            let list = move || {
                let podresources = Arc::clone(&podresources);
                async move { podresources.list().await }
            };
            tasks.spawn(
                "poll pods",
                triggers::poll_pods(
                    list,
                    self.cfg.pod_poll_interval,
                    Arc::clone(&self.metrics),
                    raw_tx,
                ),
            );
        }
        if !self.cfg.kubelet.configz {
            tasks.spawn(
                "watch kubelet config files",
                stamp::watch(self.cfg.kubelet.clone(), KUBELET_CONFIG_POLL, tx.clone()),
            );
        }
        tasks.spawn(
            "watch own NodeResourceTopology",
            triggers::watch_own_object(
                Api::all(self.client.clone()),
                self.cfg.node_name.clone(),
                tx.clone(),
            ),
        );
        drop(tx);
        tokio::select! {
            ended = tasks.wait() => ended,
            () = self.publish_loop(&mut rx) => {
                tracing::error!(task = "publish loop", "every trigger source is gone; exiting");
                TaskEnded::Returned { task: "publish loop".into() }
            }
        }
    }

    /// Publishes on every trigger; returns only when every trigger source is gone.
    async fn publish_loop(&mut self, rx: &mut mpsc::Receiver<Trigger>) {
        while let Some(trigger) = rx.recv().await {
            if let Trigger::ObjectChanged(observed) = &trigger {
                self.publisher.observe(observed.as_deref());
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
        let span = tracing::info_span!(
            "publish",
            node = %self.node.name,
            trigger = trigger.kind(),
            result = tracing::field::Empty,
            changed = tracing::field::Empty,
            write_seconds = tracing::field::Empty,
        );
        self.publish_and_report(trigger.kind())
            .instrument(span)
            .await;
    }

    async fn publish_and_report(&mut self, trigger: &'static str) {
        let started = Instant::now();
        let result = self.observe_and_publish().await;
        let span = tracing::Span::current();
        let write = self.publisher.take_last_write();
        if let Some(write) = write {
            span.record("write_seconds", write.as_secs_f64());
        }
        let label = match &result {
            Ok(Outcome::Applied) => "applied",
            Ok(Outcome::Unchanged) => "unchanged",
            Ok(Outcome::Yielded(_)) => "yielded",
            Err(_) => "error",
        };
        span.record("result", label);
        if let Ok(outcome) = &result {
            span.record("changed", *outcome == Outcome::Applied);
        }
        self.metrics
            .publish_took(trigger, label, started.elapsed(), write);
        match result {
            Ok(Outcome::Yielded(managers)) => {
                self.metrics.yielded();
                self.readiness.set_ready();
                if managers != self.yielded_to {
                    tracing::warn!(
                        writers = %managers.join(", "),
                        "another writer publishes this node's NodeResourceTopology: leaving it alone (take it over with the node group's updater.takeOverNRT)"
                    );
                }
                self.yielded_to = managers;
            }
            Ok(outcome) => {
                self.problems.report(None).await;
                self.yielded_to.clear();
                self.metrics.published(outcome == Outcome::Applied);
                self.readiness.set_ready();
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
                if e.is_about_the_node() {
                    self.problems.report(Some(&e.to_string())).await;
                }
                self.readiness.set_not_ready(e.to_string());
            }
        }
    }

    async fn observe_and_publish(&mut self) -> Result<Outcome, ObserveError> {
        let node_due = self
            .node_read_at
            .is_none_or(|at| at.elapsed() >= self.cfg.heartbeat_period);
        if self.node.uid.is_empty() || node_due {
            // The Node owns the object; without its uid the object would not be garbage
            // collected with it. Its kubelet version (re-read once per heartbeat period:
            // kubelets are upgraded in place) says which kubelet minor's rules apply. A
            // failed read is retried on the next publish.
            match Api::<Node>::all(self.client.clone())
                .get(&self.node.name)
                .await
            {
                Ok(n) => {
                    self.node.uid = n.metadata.uid.unwrap_or_default();
                    self.kubelet_version = n
                        .status
                        .and_then(|s| s.node_info)
                        .map(|i| i.kubelet_version);
                    self.node_read_at = Some(Instant::now());
                }
                Err(e) => tracing::warn!(error = %e, "reading this Node for the owner reference"),
            }
        }
        let kubelet = &self.cfg.kubelet;
        let NodeFiles {
            topology,
            pcie_roots,
            cpu_layout,
            kubelet: read,
        } = NodeFiles::read(&self.cfg.sysfs_root, (!kubelet.configz).then_some(kubelet)).await?;
        if pcie_roots.warnings != self.pcie_warnings {
            for warning in &pcie_roots.warnings {
                tracing::warn!(%warning, "PCIe roots");
            }
            self.pcie_warnings = pcie_roots.warnings;
        }
        if cpu_layout.warnings != self.cpu_layout_warnings {
            for warning in &cpu_layout.warnings {
                tracing::warn!(%warning, "CPU layout");
            }
            self.cpu_layout_warnings = cpu_layout.warnings;
        }
        let read = match read {
            Some(read) => read,
            None => configz::fetch(&self.client, &self.node.name, &kubelet.overrides).await,
        };
        let reading = self.discovery.settle(read);
        if reading.problem.is_some() {
            self.metrics.kubelet_config_problem();
        }
        let annotations = reading.report.to_annotations();
        let Some(kubelet) = reading.config else {
            // Nothing true to say about the kubelet: publish the report without zones,
            // so no scheduler places pods by a guess, and stay unready.
            let mut nrt = nrt_object::skeleton(&self.node);
            nrt.metadata.annotations = Some(annotations);
            self.publisher.publish(&nrt).await?;
            return Err(reading
                .problem
                .expect("no settings without a problem")
                .into());
        };
        let tm = kubelet.topology_manager_config();
        let t = Instant::now();
        let allocatable = self.podresources.get_allocatable().await?;
        self.observe_latency("get_allocatable", t);
        let t = Instant::now();
        let list = self.podresources.list().await?;
        self.observe_latency("list", t);
        let shared_pool = self.shared_pool(&kubelet, &list.pod_resources);
        let mut resources = accounting::compute(
            &topology,
            &allocatable,
            &list.pod_resources,
            &AccountingOptions {
                reserved_cpus: kubelet.reserved_system_cpus.clone(),
                shared_pool,
            },
        );
        resources.memory_groups = self.memory_cells.observe(&topology, &list.pod_resources);
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
        let nrt =
            nrt_object::with_fingerprint_exclude(nrt, self.cfg.fingerprint.exclude_attribute());
        let nrt = nrt_object::with_kubelet_version(nrt, self.kubelet_version.as_deref());
        let nrt = nrt_object::with_pcie_roots(nrt, &pcie_roots.by_zone);
        let mut nrt = nrt_object::with_cpu_layout(nrt, &cpu_layout.layout);
        if self.cfg.numa_placement
            && let Some(placement) = numa_placement::payload(&topology, &list.pod_resources)
        {
            placement.write_into(&mut nrt);
        }
        nrt.metadata.annotations = Some(annotations);
        Ok(self.publisher.publish(&nrt).await?)
    }

    /// The shared pool, read after `pods` were listed, when it can be trusted for them
    /// (the CPU manager `static`, the pods unchanged for longer than the kubelet's
    /// reconcile period); otherwise `None`, with a publish scheduled for when it can.
    fn shared_pool(
        &mut self,
        kubelet: &crate::kubelet_config::KubeletConfig,
        pods: &[crate::podresources::v1::PodResources],
    ) -> Option<std::collections::BTreeSet<u32>> {
        let path = self.cfg.shared_cpus_from.as_ref()?;
        if kubelet.cpu_manager_policy != crate::kubelet_config::CpuManagerPolicy::Static {
            return None;
        }
        let now = Instant::now();
        let fresh_at = self
            .freshness
            .observe(pods, now, kubelet.cpu_manager_reconcile_period);
        if fresh_at > now {
            if let Some(tx) = self.retrigger.as_ref().and_then(mpsc::WeakSender::upgrade) {
                tokio::spawn(async move {
                    tokio::time::sleep_until(fresh_at.into()).await;
                    // A full channel already holds a trigger that publishes.
                    let _ = tx.try_send(Trigger::Tick);
                });
            }
            return None;
        }
        match shared_pool::read(path) {
            Ok(pool) => {
                self.pool_error = None;
                Some(pool)
            }
            Err(e) => {
                let message = e.to_string();
                if self.pool_error.as_deref() != Some(message.as_str()) {
                    tracing::warn!(error = %message, "cannot read the shared CPU pool: CPUs kept by init containers not published");
                }
                self.pool_error = Some(message);
                None
            }
        }
    }

    fn observe_latency(&self, call: &'static str, since: Instant) {
        self.metrics.podresources_call(call, since.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tracing::field::{Field, Visit};
    use tracing::{Event, Subscriber};
    use tracing_subscriber::layer::{Context, SubscriberExt as _};
    use tracing_subscriber::registry::LookupSpan;
    use tracing_subscriber::{Layer, Registry};

    use super::*;
    use crate::podresources::ClientConfig;

    /// Per event: whether it came from the other task, and whether it sat in `publish`.
    type Seen = Arc<Mutex<Vec<(bool, bool)>>>;

    struct Recorder(Seen);

    struct IsOther(bool);

    impl Visit for IsOther {
        fn record_debug(&mut self, field: &Field, _: &dyn std::fmt::Debug) {
            self.0 |= field.name() == "other";
        }
    }

    impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
        fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
            let mut other = IsOther(false);
            event.record(&mut other);
            let in_publish = ctx
                .event_scope(event)
                .is_some_and(|mut scope| scope.any(|span| span.name() == "publish"));
            if let Ok(mut seen) = self.0.lock() {
                seen.push((other.0, in_publish));
            }
        }
    }

    /// An agent whose every step fails: an API server that refuses connections, no
    /// sysfs, no kubelet.
    fn failing_agent(dir: &std::path::Path) -> Agent {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let cfg = AgentConfig {
            node_name: "node-a".into(),
            sysfs_root: dir.join("sys"),
            kubelet: SourceConfig {
                file: dir.join("config.yaml"),
                ..SourceConfig::default()
            },
            take_over_nrt: false,
            mode: Mode::Periodic,
            period: Duration::from_secs(3600),
            pod_poll_interval: Duration::from_millis(500),
            debounce: Duration::from_millis(100),
            reapply_interval: Duration::from_secs(600),
            fingerprint: FingerprintPolicy::new(None, &[]),
            heartbeat_period: Duration::from_secs(600),
            numa_placement: true,
            shared_cpus_from: None,
        };
        Agent::new(
            cfg,
            Client::try_from(config).unwrap(),
            PodResourcesClient::new(ClientConfig::new(dir.join("kubelet.sock"))),
            Arc::new(Metrics::new()),
            Readiness::not_ready("starting"),
        )
    }

    /// On the agent's single thread, another task logging while a publish waits must
    /// not land in the publish span; the publish's own lines must.
    #[tokio::test(flavor = "current_thread")]
    async fn other_tasks_do_not_log_inside_the_publish_span() {
        let seen = Seen::default();
        let subscriber = Registry::default().with(Recorder(seen.clone()));
        let _default = tracing::subscriber::set_default(subscriber);
        let dir = tempfile::tempdir().unwrap();
        let mut agent = failing_agent(dir.path());

        let other = tokio::spawn(async {
            loop {
                tracing::info!(other = true, "another task");
                tokio::task::yield_now().await;
            }
        });
        agent.publish_once(&Trigger::Tick).await;
        other.abort();

        let seen = seen.lock().unwrap().clone();
        let count = |want: (bool, bool)| seen.iter().filter(|&&line| line == want).count();
        let (others, leaked) = (
            count((true, false)) + count((true, true)),
            count((true, true)),
        );
        assert!(others > 1, "the other task ran during the publish");
        assert_eq!(
            leaked, 0,
            "of {others} lines of another task, {leaked} landed in the publish span"
        );
        assert!(count((false, true)) > 0, "the publish logs in its span");
        assert!(
            agent.readiness.check().is_err(),
            "a failed publish is not ready"
        );
    }
}
