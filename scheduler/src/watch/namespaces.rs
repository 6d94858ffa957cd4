//! Namespace labels, for the namespace selectors of inter-pod affinity terms. Metadata
//! only: the scheduler needs nothing else from a namespace.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::shared::Shared;

pub(super) async fn watch_namespaces(api: Api<PartialObjectMeta<Namespace>>, shared: Arc<Shared>) {
    let mut relist: Option<HashSet<String>> = None;
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => relist = Some(HashSet::new()),
            Ok(Some(Event::Apply(ns) | Event::InitApply(ns))) => {
                let name = ns.metadata.name.clone().unwrap_or_default();
                if let Some(seen) = relist.as_mut() {
                    seen.insert(name.clone());
                }
                let labels = ns.metadata.labels.unwrap_or_default();
                let changed = shared.namespaces.write().is_ok_and(|mut m| {
                    let old = m.insert(name, labels.clone());
                    old.as_ref() != Some(&labels)
                });
                if changed {
                    shared.cluster_event();
                }
            }
            Ok(Some(Event::Delete(ns))) => {
                let name = ns.metadata.name.unwrap_or_default();
                if let Ok(mut m) = shared.namespaces.write() {
                    m.remove(&name);
                }
            }
            Ok(Some(Event::InitDone)) => {
                if let Some(seen) = relist.take()
                    && let Ok(mut m) = shared.namespaces.write()
                {
                    m.retain(|n, _| seen.contains(n));
                }
                shared.synced.namespaces.store(true, Ordering::Release);
                shared.wake.notify_one();
            }
            Ok(None) => return,
            Err(e) => tracing::warn!(error = %e, "watching namespaces"),
        }
    }
}
