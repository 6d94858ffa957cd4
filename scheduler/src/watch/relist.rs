//! What each watch keeps ([`Index`]), and the relist bookkeeping in one place
//! ([`Relisting`]).
//!
//! A `kube` watcher starts with a relist (`Init`, one `InitApply` per object,
//! `InitDone`) and relists again after any disconnection it cannot resume. A relist
//! replaces what the watch had delivered: objects deleted while the watch was away never
//! come as `Delete`, so at `InitDone` [`Relisting`] hands the keys it saw to
//! [`Index::retain`], and each watch forgets everything else.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

use kube::Resource;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

/// What one watch keeps of the objects it sees, updated through [`Relisting`] by the
/// index task (`super::index`).
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

/// A watch's [`Index`] with the bookkeeping of its relists: the keys a relist has
/// delivered so far, handed to [`Index::retain`] at its end.
pub(super) struct Relisting<I: Index> {
    index: I,
    relist: Option<HashSet<I::Key>>,
}

impl<I: Index> Relisting<I> {
    /// `index`, before its watch has listed anything.
    pub(super) fn new(index: I) -> Self {
        Self {
            index,
            relist: None,
        }
    }

    /// Apply one item of the watch's stream: an event, or the error it retries after.
    pub(super) fn handle(&mut self, item: Result<Event<I::Object>, watcher::Error>) {
        match item {
            Ok(Event::Init) => self.relist = Some(HashSet::new()),
            Ok(Event::Apply(object) | Event::InitApply(object)) => {
                let key = I::key(&object);
                if let Some(seen) = self.relist.as_mut() {
                    seen.insert(key.clone());
                }
                self.index.apply(key, object);
            }
            Ok(Event::Delete(object)) => self.index.delete(I::key(&object), object),
            Ok(Event::InitDone) => {
                if let Some(seen) = self.relist.take() {
                    self.index.retain(seen);
                }
                self.index.synced();
            }
            Err(e) => self.index.failed(&e),
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

    fn run(events: Vec<Event<ConfigMap>>) -> Names {
        let mut names = Names::default();
        let mut relisting = Relisting::new(&mut names);
        for event in events {
            relisting.handle(Ok(event));
        }
        names
    }

    #[test]
    fn a_relist_forgets_what_vanished_meanwhile() {
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
        ]);
        assert_eq!(names.present, BTreeSet::from(["a".into(), "d".into()]));
        assert_eq!(names.synced, 2);
    }

    #[test]
    fn events_between_relists_are_applied_as_they_come() {
        let names = run(vec![
            Event::Init,
            Event::InitApply(object("a")),
            Event::InitDone,
            Event::Apply(object("b")),
            Event::Delete(object("a")),
        ]);
        assert_eq!(names.present, BTreeSet::from(["b".into()]));
        assert_eq!(names.synced, 1);
    }
}
