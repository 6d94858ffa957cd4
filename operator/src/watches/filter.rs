//! Filtering a watch down to the changes that matter to a reconcile.
//!
//! Most updates the operator could see are noise for it: kubelet (or kwok) heartbeats in
//! Node status every few seconds, DaemonSet status refreshes, its own status writes. Each
//! kind gets a hash of the fields the reconcile actually reads ([`super::relevance`]);
//! an update passes only when that hash changed. Unlike kube's `predicate_filter`, a
//! deletion always passes: a DaemonSet deleted by someone must be restored, and its
//! final state usually hashes like the one before.
//!
//! Watch errors (e.g. the NRT CRD not installed yet) are logged here and dropped; the
//! watcher retries with backoff on its own, and a reconcile has nothing to do with them.

use futures::{Stream, StreamExt, future};
use kube::Resource;
use kube::runtime::watcher::{self, Event};
use std::collections::{HashMap, HashSet};

/// Identity of an object in the filter's memory; the uid tells a recreated object apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

impl Key {
    fn of<K: Resource>(obj: &K) -> Self {
        let meta = obj.meta();
        Self {
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            uid: meta.uid.clone(),
        }
    }
}

/// What the filter decides for one watch event.
#[derive(Debug, Default)]
struct Filter {
    hashes: HashMap<Key, u64>,
    /// Keys listed since the last `Init`, while a (re-)list is in progress.
    listing: Option<HashSet<Key>>,
}

impl Filter {
    /// The object to pass on, if the event is a relevant change or a deletion.
    fn admit<K: Resource>(&mut self, event: Event<K>, relevant: &impl Fn(&K) -> u64) -> Option<K> {
        match event {
            Event::Apply(obj) => self.changed(obj, relevant),
            Event::InitApply(obj) => {
                if let Some(listing) = &mut self.listing {
                    listing.insert(Key::of(&obj));
                }
                self.changed(obj, relevant)
            }
            Event::Delete(obj) => {
                self.hashes.remove(&Key::of(&obj));
                Some(obj)
            }
            Event::Init => {
                self.listing = Some(HashSet::new());
                None
            }
            Event::InitDone => {
                // Objects deleted while the watch was down: forget them. There is no
                // object left to pass on; the reconcile after the re-list, or the
                // periodic resync, sees the difference.
                if let Some(listed) = self.listing.take() {
                    self.hashes.retain(|k, _| listed.contains(k));
                }
                None
            }
        }
    }

    fn changed<K: Resource>(&mut self, obj: K, relevant: &impl Fn(&K) -> u64) -> Option<K> {
        let hash = relevant(&obj);
        let previous = self.hashes.insert(Key::of(&obj), hash);
        (previous != Some(hash)).then_some(obj)
    }
}

/// Passes on an object only when `relevant(obj)` changed since its last event, or when
/// it was deleted. `kind` names the resource in logs.
pub fn relevant_changes<K, S>(
    events: S,
    kind: impl Into<String>,
    relevant: impl Fn(&K) -> u64 + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Send + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    let kind = kind.into();
    let mut filter = Filter::default();
    events.filter_map(move |event| {
        let out = match event {
            Ok(event) => filter.admit(event, &relevant).map(|obj| {
                tracing::debug!(%kind, name = obj.meta().name.as_deref().unwrap_or_default(), "relevant change");
                Ok(obj)
            }),
            Err(e) => {
                if is_not_found(&e) {
                    tracing::debug!(%kind, error = %e, "watch: resource not served (yet)");
                } else if is_expired(&e) {
                    // A normal desync: the watcher lists again.
                    tracing::debug!(%kind, error = %e, "watch expired; re-listing");
                } else {
                    tracing::warn!(%kind, error = %e, "watch failed; retrying with backoff");
                }
                None
            }
        };
        future::ready(out)
    })
}

fn is_expired(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchError(s) if s.code == 410)
}

fn is_not_found(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 404
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watches::relevance;
    use futures::stream;
    use k8s_openapi::api::core::v1::{Node, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn node(name: &str, uid: &str, label: &str, heartbeat: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(uid.into()),
                labels: Some(BTreeMap::from([("pool".into(), label.into())])),
                resource_version: Some(heartbeat.into()),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                phase: Some(heartbeat.into()),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    async fn passed(events: Vec<Event<Node>>) -> Vec<String> {
        let input = stream::iter(events.into_iter().map(Ok));
        relevant_changes(input, "Node", relevance::labels)
            .map(|r| {
                let n = r.unwrap();
                format!(
                    "{}/{}",
                    n.metadata.name.unwrap(),
                    n.metadata.resource_version.unwrap()
                )
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn heartbeats_are_dropped_label_changes_and_deletes_pass() {
        let got = passed(vec![
            Event::Init,
            Event::InitApply(node("n1", "u1", "a", "1")),
            Event::InitDone,
            Event::Apply(node("n1", "u1", "a", "2")), // heartbeat
            Event::Apply(node("n1", "u1", "b", "3")), // relabel
            Event::Apply(node("n1", "u1", "b", "4")), // heartbeat
            Event::Delete(node("n1", "u1", "b", "5")),
            Event::Apply(node("n1", "u2", "b", "6")), // recreated
        ])
        .await;
        assert_eq!(got, ["n1/1", "n1/3", "n1/5", "n1/6"]);
    }

    #[tokio::test]
    async fn a_relist_of_unchanged_objects_passes_nothing() {
        let got = passed(vec![
            Event::Init,
            Event::InitApply(node("n1", "u1", "a", "1")),
            Event::InitApply(node("n2", "u2", "a", "1")),
            Event::InitDone,
            Event::Init,
            Event::InitApply(node("n1", "u1", "a", "7")),
            Event::InitDone,
            // n2 vanished during the outage; if it comes back it counts as new.
            Event::Apply(node("n2", "u2", "a", "8")),
        ])
        .await;
        assert_eq!(got, ["n1/1", "n2/1", "n2/8"]);
    }

    #[tokio::test]
    async fn errors_are_dropped() {
        let input = stream::iter(vec![
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::Apply(node("n1", "u1", "a", "1"))),
        ]);
        let got: Vec<_> = relevant_changes(input, "Node", relevance::labels)
            .collect()
            .await;
        assert_eq!(got.len(), 1);
        assert!(got[0].is_ok());
    }
}
