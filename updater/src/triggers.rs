//! When to publish: a periodic tick, pod events on this node (debounced), or a change to
//! the published object made by someone else.
//!
//! Every source sends a [`Trigger`] into one channel; the agent's loop drains it. Pod
//! events are coalesced: after the first event the debouncer waits `debounce` for more,
//! restarting the wait on each one but never past `8 × debounce` in total, so a steady
//! stream of events cannot postpone a publish forever.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use std::time::Duration;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

/// Why a publish was requested.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// The periodic tick.
    Tick,
    /// Pods on the node changed (after debouncing).
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
    /// On pod events only.
    Events,
    /// Both.
    PeriodicAndEvents,
}

impl Mode {
    /// Whether the periodic tick runs.
    pub fn periodic(self) -> bool {
        matches!(self, Self::Periodic | Self::PeriodicAndEvents)
    }

    /// Whether pod events trigger.
    pub fn events(self) -> bool {
        matches!(self, Self::Events | Self::PeriodicAndEvents)
    }
}

/// Send a [`Trigger::Tick`] every `period` (the first one immediately).
pub async fn ticker(period: Duration, tx: mpsc::Sender<Trigger>) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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

/// Watch the pods bound to `node` and signal every change into `raw`.
/// Watch errors are retried by the watcher with backoff; they are logged, never fatal.
pub async fn watch_pods(pods: Api<Pod>, node: String, raw: mpsc::Sender<()>) {
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let mut stream = watcher::watcher(pods, config).default_backoff().boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Apply(_) | Event::Delete(_) | Event::InitDone)) => {
                if raw.send(()).await.is_err() {
                    return;
                }
            }
            Ok(Some(Event::Init | Event::InitApply(_))) => {}
            Ok(None) => return,
            Err(e) => tracing::warn!(error = %e, "watching pods on this node"),
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
