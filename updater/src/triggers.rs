//! When to publish: a periodic tick, a change of the pods on this node (debounced), or a
//! change to the published object made by someone else.
//!
//! Every source sends a [`Trigger`] into one channel; the agent's loop drains it. Pod
//! changes are seen by polling the kubelet's podresources `List` ([`poll_pods`]): the
//! agent never reads pods from the API server, so its token needs no right on pods. Pod
//! changes are coalesced: after the first one the debouncer waits `debounce` for more,
//! restarting the wait on each one but never past `8 × debounce` in total, so a steady
//! stream of changes cannot postpone a publish forever.

use crate::metrics::Metrics;
use crate::podresources::v1::ListPodResourcesResponse;
use crate::podresources::{ListDigest, PodResourcesError};
use futures::{StreamExt, TryStreamExt};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior, sleep_until};

/// Why a publish was requested.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// The periodic tick.
    Tick,
    /// What the kubelet lists for the pods on the node changed (after debouncing).
    Pods,
    /// The kubelet's configuration files changed.
    KubeletConfig,
    /// The published object was deleted or edited by someone else.
    ObjectChanged(Option<Box<NodeResourceTopology>>),
}

impl Trigger {
    /// A word for logs and spans: `tick`, `pods`, `kubelet_config` or `object_changed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Tick => "tick",
            Self::Pods => "pods",
            Self::KubeletConfig => "kubelet_config",
            Self::ObjectChanged(_) => "object_changed",
        }
    }
}

/// How the agent is triggered (mirrors the CR's refresh mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Every period only.
    Periodic,
    /// On pod changes only.
    Events,
    /// Both.
    PeriodicAndEvents,
}

impl Mode {
    /// Whether the periodic tick runs.
    pub fn periodic(self) -> bool {
        matches!(self, Self::Periodic | Self::PeriodicAndEvents)
    }

    /// Whether pod changes trigger.
    pub fn events(self) -> bool {
        matches!(self, Self::Events | Self::PeriodicAndEvents)
    }
}

/// Send a [`Trigger::Tick`] every `period` (the first one immediately).
pub async fn ticker(period: Duration, tx: mpsc::Sender<Trigger>) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if tx.send(Trigger::Tick).await.is_err() {
            return;
        }
    }
}

/// Coalesce a stream of raw events into [`Trigger::Pods`] sends.
pub async fn debounce(mut raw: mpsc::Receiver<()>, wait: Duration, tx: mpsc::Sender<Trigger>) {
    let cap = wait * 8;
    while raw.recv().await.is_some() {
        let first = Instant::now();
        let mut deadline = first + wait;
        loop {
            tokio::select! {
                more = raw.recv() => {
                    if more.is_none() { break; }
                    deadline = (Instant::now() + wait).min(first + cap);
                }
                _ = sleep_until(deadline) => break,
            }
        }
        if tx.send(Trigger::Pods).await.is_err() {
            return;
        }
    }
}

/// Ask `list` (the kubelet's podresources `List`) what runs on the node every `every`,
/// and signal into `raw` whenever the answer's [`ListDigest`] differs from the last one
/// (the first answer counts as a change, so nothing that changed before it is missed).
/// A failed call is logged (a warning when a streak of failures starts) and counted, never
/// fatal: the client backs off, and the next poll asks again. Returns when `raw` closes.
pub async fn poll_pods<F, Fut>(
    mut list: F,
    every: Duration,
    metrics: Arc<Metrics>,
    raw: mpsc::Sender<()>,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<ListPodResourcesResponse, PodResourcesError>>,
{
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last = None;
    let mut failing = false;
    loop {
        interval.tick().await;
        let started = Instant::now();
        let answer = match list().await {
            Ok(answer) => answer,
            Err(e) => {
                metrics.pod_poll_failed();
                if failing {
                    tracing::debug!(error = %e, "polling the pods on this node");
                } else {
                    tracing::warn!(error = %e, "polling the pods on this node: pod changes are not seen until it works again");
                }
                failing = true;
                continue;
            }
        };
        metrics.podresources_call("list", started.elapsed());
        if std::mem::take(&mut failing) {
            tracing::info!("polling the pods on this node works again");
        }
        let digest = ListDigest::of(&answer);
        let changed = last.replace(digest) != Some(digest);
        metrics.pod_polled(changed);
        if changed && raw.send(()).await.is_err() {
            return;
        }
    }
}

/// Watch the node's own NodeResourceTopology and report deletes and edits, so an object
/// removed or changed by someone else is restored without waiting for the safety re-apply.
pub async fn watch_own_object(
    api: Api<NodeResourceTopology>,
    node: String,
    tx: mpsc::Sender<Trigger>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    // After every (re)list, report the state found: a delete missed while the watch was
    // not established yet (or disconnected) is then noticed too.
    let mut listed: Option<Option<NodeResourceTopology>> = None;
    loop {
        let trigger = match stream.try_next().await {
            Ok(Some(Event::Apply(o))) => Trigger::ObjectChanged(Some(Box::new(o))),
            Ok(Some(Event::Delete(_))) => Trigger::ObjectChanged(None),
            Ok(Some(Event::Init)) => {
                listed = Some(None);
                continue;
            }
            Ok(Some(Event::InitApply(o))) => {
                listed = Some(Some(o));
                continue;
            }
            Ok(Some(Event::InitDone)) => match listed.take() {
                Some(found) => Trigger::ObjectChanged(found.map(Box::new)),
                None => continue,
            },
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "watching this node's NodeResourceTopology");
                continue;
            }
        };
        if tx.send(trigger).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podresources::v1::{ContainerResources, PodResources};
    use std::collections::VecDeque;
    use std::sync::Mutex;

    type Answer = Result<ListPodResourcesResponse, PodResourcesError>;

    fn pods(entries: &[(&str, &[i64])]) -> Answer {
        Ok(ListPodResourcesResponse {
            pod_resources: entries
                .iter()
                .map(|&(name, cpus)| PodResources {
                    name: name.into(),
                    namespace: "default".into(),
                    containers: vec![ContainerResources {
                        name: "app".into(),
                        cpu_ids: cpus.to_vec(),
                        ..Default::default()
                    }],
                })
                .collect(),
        })
    }

    fn socket_missing() -> Answer {
        Err(PodResourcesError::SocketMissing {
            path: "/var/lib/kubelet/pod-resources/kubelet.sock".into(),
        })
    }

    /// Polls the scripted `answers` in order, then nothing more (the next call waits
    /// forever); returns the number of signals sent and the metrics.
    async fn signals_for(answers: Vec<Answer>) -> (usize, Arc<Metrics>) {
        let script = Arc::new(Mutex::new(VecDeque::from(answers)));
        let list = move || {
            let next = script.lock().unwrap().pop_front();
            async move {
                match next {
                    Some(answer) => answer,
                    None => std::future::pending().await,
                }
            }
        };
        let metrics = Arc::new(Metrics::new());
        let (raw_tx, mut raw_rx) = mpsc::channel(64);
        let poller = tokio::spawn(poll_pods(
            list,
            Duration::from_millis(500),
            metrics.clone(),
            raw_tx,
        ));
        let mut signals = 0;
        // Time is paused: it jumps ahead whenever the poller waits, so the timeout
        // fires only once the script is exhausted and the poller waits forever.
        while tokio::time::timeout(Duration::from_secs(3600), raw_rx.recv())
            .await
            .is_ok()
        {
            signals += 1;
        }
        poller.abort();
        (signals, metrics)
    }

    fn polls(metrics: &Metrics, result: &'static str) -> u64 {
        metrics
            .pod_polls
            .get_or_create(&tas_runtime::metrics::ResultLabel::new(result))
            .get()
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_changed_list_signals() {
        let (signals, metrics) = signals_for(vec![
            pods(&[("a", &[1, 2])]),
            pods(&[("a", &[1, 2])]),
            pods(&[("a", &[2, 1])]),
            pods(&[("a", &[1, 2]), ("b", &[3])]),
            pods(&[("b", &[3]), ("a", &[1, 2])]),
            pods(&[("a", &[1, 2]), ("b", &[4])]),
            pods(&[("a", &[1, 2])]),
            pods(&[("a", &[1, 2])]),
        ])
        .await;
        // The first answer, b added, b reassigned, b removed.
        assert_eq!(signals, 4);
        assert_eq!(polls(&metrics, "changed"), 4);
        assert_eq!(polls(&metrics, "unchanged"), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn errors_are_counted_and_polling_goes_on() {
        let (signals, metrics) = signals_for(vec![
            socket_missing(),
            pods(&[("a", &[1])]),
            socket_missing(),
            socket_missing(),
            pods(&[("a", &[1])]),
            socket_missing(),
            pods(&[("a", &[1]), ("b", &[2])]),
        ])
        .await;
        // The first answer, then b; the failures in between change nothing.
        assert_eq!(signals, 2);
        assert_eq!(polls(&metrics, "error"), 4);
        let text = metrics.render().unwrap();
        assert!(
            text.contains("tas_updater_errors_total{kind=\"pod_poll\"} 4"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn polls_keep_their_interval() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = calls.clone();
        let start = Instant::now();
        let list = move || {
            seen.lock().unwrap().push(start.elapsed());
            async { pods(&[]) }
        };
        let (raw_tx, _raw_rx) = mpsc::channel(64);
        let poller = tokio::spawn(poll_pods(
            list,
            Duration::from_millis(500),
            Arc::new(Metrics::new()),
            raw_tx,
        ));
        tokio::time::sleep(Duration::from_millis(2100)).await;
        poller.abort();
        let calls = calls.lock().unwrap().clone();
        let ms: Vec<u128> = calls.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [0, 500, 1000, 1500, 2000]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_becomes_one_trigger() {
        let (raw_tx, raw_rx) = mpsc::channel(64);
        let (tx, mut rx) = mpsc::channel(8);
        tokio::spawn(debounce(raw_rx, Duration::from_millis(100), tx));
        for _ in 0..20 {
            raw_tx.send(()).await.unwrap();
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        assert_eq!(rx.recv().await, Some(Trigger::Pods));
        // Nothing more is pending after the burst.
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_still_publishes_within_the_cap() {
        let (raw_tx, raw_rx) = mpsc::channel(1024);
        let (tx, mut rx) = mpsc::channel(8);
        tokio::spawn(debounce(raw_rx, Duration::from_millis(100), tx));
        let start = Instant::now();
        let feeder = tokio::spawn(async move {
            loop {
                if raw_tx.send(()).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        assert_eq!(rx.recv().await, Some(Trigger::Pods));
        assert!(
            start.elapsed() <= Duration::from_millis(850),
            "{:?}",
            start.elapsed()
        );
        feeder.abort();
    }
}
