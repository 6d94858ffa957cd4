//! The loop every watch runs, with the relist bookkeeping in one place.
//!
//! A `kube` watcher starts with a relist (`Init`, one `InitApply` per object,
//! `InitDone`) and relists again after any disconnection it cannot resume. A relist
//! replaces what the watch had delivered: objects deleted while the watch was away never
//! come as `Delete`, so at `InitDone` the loop hands the keys it saw to
//! [`Index::retain`], and each watch forgets everything else.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

use futures::{Stream, StreamExt, TryStreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// What one watch keeps of the objects it sees, updated by [`relisting_watch`].
pub(super) trait Index {
    /// The watched kind.
    type Object: Resource + Clone + DeserializeOwned + Debug + Send + 'static;
    /// How the watch tells objects apart (name, uid, namespace and name).
    type Key: Eq + Hash + Clone;
    /// What is watched, for log lines.
    const WHAT: &'static str;

    /// The key of `object`.
    fn key(object: &Self::Object) -> Self::Key;
    /// `object` was added or changed, or was listed by a relist.
    fn apply(&mut self, key: Self::Key, object: Self::Object);
    /// `object` was deleted.
    fn delete(&mut self, key: Self::Key, object: Self::Object);
    /// A relist ended: `seen` names every object that exists now; forget the others.
    fn retain(&mut self, seen: HashSet<Self::Key>);
    /// The watch has listed everything (after every relist, once [`Index::retain`] ran).
    fn synced(&mut self);
    /// The stream failed; the watcher retries with backoff.
    fn failed(&mut self, error: &watcher::Error) {
        tracing::warn!(error = %error, "watching {}", Self::WHAT);
    }
}

/// Watch `api` with `config` and keep `index` up to date until the process ends.
pub(super) async fn relisting_watch<I: Index>(
    api: Api<I::Object>,
    config: watcher::Config,
    index: I,
) {
    let events = watcher::watcher(api, config).default_backoff();
    drive(events, index).await;
}

/// Apply watch events to `index`, remembering what a relist delivers.
async fn drive<I: Index>(
    events: impl Stream<Item = Result<Event<I::Object>, watcher::Error>> + Send,
    mut index: I,
) {
    let mut events = events.boxed();
    let mut relist: Option<HashSet<I::Key>> = None;
    loop {
        match events.try_next().await {
            Ok(Some(Event::Init)) => relist = Some(HashSet::new()),
            Ok(Some(Event::Apply(object) | Event::InitApply(object))) => {
                let key = I::key(&object);
                if let Some(seen) = relist.as_mut() {
                    seen.insert(key.clone());
                }
                index.apply(key, object);
            }
            Ok(Some(Event::Delete(object))) => index.delete(I::key(&object), object),
            Ok(Some(Event::InitDone)) => {
                if let Some(seen) = relist.take() {
                    index.retain(seen);
                }
                index.synced();
            }
            Ok(None) => return,
            Err(e) => index.failed(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::ResourceExt;

    use super::*;

    /// Names present, and how often the watch synced.
    #[derive(Default)]
    struct Names {
        present: BTreeSet<String>,
        synced: usize,
    }

    impl Index for &mut Names {
        type Object = ConfigMap;
        type Key = String;
        const WHAT: &'static str = "test objects";

        fn key(object: &ConfigMap) -> String {
            object.name_any()
        }
        fn apply(&mut self, key: String, _: ConfigMap) {
            self.present.insert(key);
        }
        fn delete(&mut self, key: String, _: ConfigMap) {
            self.present.remove(&key);
        }
        fn retain(&mut self, seen: HashSet<String>) {
            self.present.retain(|n| seen.contains(n));
        }
        fn synced(&mut self) {
            self.synced += 1;
        }
    }

    fn object(name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.to_owned());
        cm
    }

    async fn run(events: Vec<Event<ConfigMap>>) -> Names {
        let mut names = Names::default();
        drive(
            futures::stream::iter(events.into_iter().map(Ok)),
            &mut names,
        )
        .await;
        names
    }

    #[tokio::test]
    async fn a_relist_forgets_what_vanished_meanwhile() {
        let names = run(vec![
            Event::Init,
            Event::InitApply(object("a")),
            Event::InitApply(object("b")),
            Event::InitDone,
            Event::Apply(object("c")),
            // Disconnected: b and c were deleted meanwhile, d was created.
            Event::Init,
            Event::InitApply(object("a")),
            Event::InitApply(object("d")),
            Event::InitDone,
        ])
        .await;
        assert_eq!(names.present, BTreeSet::from(["a".into(), "d".into()]));
        assert_eq!(names.synced, 2);
    }

    #[tokio::test]
    async fn events_between_relists_are_applied_as_they_come() {
        let names = run(vec![
            Event::Init,
            Event::InitApply(object("a")),
            Event::InitDone,
            Event::Apply(object("b")),
            Event::Delete(object("a")),
        ])
        .await;
        assert_eq!(names.present, BTreeSet::from(["b".into()]));
        assert_eq!(names.synced, 1);
    }
}
