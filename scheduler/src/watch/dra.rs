//! ResourceSlices, DeviceClasses and ResourceClaims (`resource.k8s.io/v1`), into
//! [`Shared::dra`]. A change that could help a waiting pod (a slice, a class, a claim
//! created, freeing devices or consumers) retries the pods that wait.
//!
//! A cluster that does not serve `resource.k8s.io/v1` answers the lists with 404: the
//! watch then counts as listed and empty (pods with claims wait, every other pod is
//! scheduled), says so once in the log, and keeps retrying quietly with the watcher's
//! back-off, so the API being enabled later is picked up.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::relist::Index;
use crate::dra_state::{ClaimKey, DraStore};
use crate::shared::{Shared, Synced};

/// Whether a watch error says the API server does not serve the kind.
fn not_served(error: &watcher::Error) -> bool {
    let api = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(status) => return status.code == 404,
        watcher::Error::NoResourceVersion => return false,
    };
    matches!(api, kube::Error::Api(status) if status.code == 404)
}

/// What a DRA kind does to the store; the watch ([`DraWatch`]) is the same for all.
pub(super) trait DraKind {
    /// The watched kind.
    type Object: Resource + Clone + DeserializeOwned + Debug + Send + 'static;
    /// How objects are told apart.
    type Key: Eq + Hash + Clone;
    /// What is watched, for log lines.
    const WHAT: &'static str;
    /// The key of `object`.
    fn key(object: &Self::Object) -> Self::Key;
    /// The flag readiness waits for.
    fn listed(synced: &Synced) -> &AtomicBool;
    /// Adds or replaces `object`; returns whether it could help a waiting pod.
    fn apply(store: &mut DraStore, object: Self::Object) -> bool;
    /// Forgets `key`; returns whether it could help a waiting pod.
    fn delete(store: &mut DraStore, key: &Self::Key) -> bool;
    /// Keeps the objects `keep` says; returns whether it could help a waiting pod.
    fn retain(store: &mut DraStore, keep: &dyn Fn(&Self::Key) -> bool) -> bool;
}

/// One DRA kind's watch: the state, and whether the API was found missing (so that it
/// is said once, not at every retry).
pub(super) struct DraWatch<K> {
    shared: Arc<Shared>,
    unserved: bool,
    kind: PhantomData<K>,
}

impl<K> DraWatch<K> {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            unserved: false,
            kind: PhantomData,
        }
    }
}

impl<K: DraKind> Index for DraWatch<K> {
    type Object = K::Object;
    type Key = K::Key;
    const WHAT: &'static str = K::WHAT;

    fn key(object: &K::Object) -> K::Key {
        K::key(object)
    }

    fn apply(&mut self, _: K::Key, object: K::Object) {
        if K::apply(&mut self.shared.dra.write(), object) {
            self.shared.cluster_event();
        }
    }

    fn delete(&mut self, key: K::Key, _: K::Object) {
        if K::delete(&mut self.shared.dra.write(), &key) {
            self.shared.cluster_event();
        }
    }

    fn retain(&mut self, seen: HashSet<K::Key>) {
        if K::retain(&mut self.shared.dra.write(), &|key| seen.contains(key)) {
            self.shared.cluster_event();
        }
    }

    fn synced(&mut self) {
        self.unserved = false;
        K::listed(&self.shared.synced).store(true, Ordering::Release);
        self.shared.cluster_event();
        self.shared.wake.notify_one();
    }

    /// On 404 the kind counts as listed and empty, said once.
    fn failed(&mut self, error: &watcher::Error) {
        if !not_served(error) {
            tracing::warn!(error = %error, "watching {}", K::WHAT);
            return;
        }
        if self.unserved {
            return;
        }
        self.unserved = true;
        tracing::info!(
            "{} are not served by the API server (resource.k8s.io/v1 missing): \
             pods with resource claims wait until they are",
            K::WHAT
        );
        K::retain(&mut self.shared.dra.write(), &|_| false);
        K::listed(&self.shared.synced).store(true, Ordering::Release);
        self.shared.wake.notify_one();
    }
}

/// ResourceSlices by name.
pub(super) struct Slices;

impl DraKind for Slices {
    type Object = ResourceSlice;
    type Key = String;
    const WHAT: &'static str = "ResourceSlices";

    fn key(slice: &ResourceSlice) -> String {
        slice.name_any()
    }
    fn listed(synced: &Synced) -> &AtomicBool {
        &synced.resource_slices
    }
    fn apply(store: &mut DraStore, slice: ResourceSlice) -> bool {
        store.upsert_slice(slice)
    }
    fn delete(store: &mut DraStore, name: &String) -> bool {
        store.remove_slice(name);
        false
    }
    fn retain(store: &mut DraStore, keep: &dyn Fn(&String) -> bool) -> bool {
        store.retain_slices(|name| keep(&name.to_owned()));
        false
    }
}

/// DeviceClasses by name.
pub(super) struct Classes;

impl DraKind for Classes {
    type Object = DeviceClass;
    type Key = String;
    const WHAT: &'static str = "DeviceClasses";

    fn key(class: &DeviceClass) -> String {
        class.name_any()
    }
    fn listed(synced: &Synced) -> &AtomicBool {
        &synced.device_classes
    }
    fn apply(store: &mut DraStore, class: DeviceClass) -> bool {
        store.upsert_class(class)
    }
    fn delete(store: &mut DraStore, name: &String) -> bool {
        store.remove_class(name);
        false
    }
    fn retain(store: &mut DraStore, keep: &dyn Fn(&String) -> bool) -> bool {
        store.retain_classes(|name| keep(&name.to_owned()));
        false
    }
}

/// ResourceClaims by namespace and name.
pub(super) struct Claims;

impl DraKind for Claims {
    type Object = ResourceClaim;
    type Key = ClaimKey;
    const WHAT: &'static str = "ResourceClaims";

    fn key(claim: &ResourceClaim) -> ClaimKey {
        (claim.namespace().unwrap_or_default(), claim.name_any())
    }
    fn listed(synced: &Synced) -> &AtomicBool {
        &synced.resource_claims
    }
    fn apply(store: &mut DraStore, claim: ResourceClaim) -> bool {
        store.upsert_claim(claim)
    }
    fn delete(store: &mut DraStore, (ns, name): &ClaimKey) -> bool {
        store.remove_claim(ns, name)
    }
    fn retain(store: &mut DraStore, keep: &dyn Fn(&ClaimKey) -> bool) -> bool {
        store.retain_claims(|ns, name| keep(&(ns.to_owned(), name.to_owned())))
    }
}

/// The watch of ResourceSlices.
pub(super) type SliceWatch = DraWatch<Slices>;
/// The watch of DeviceClasses.
pub(super) type DeviceClassWatch = DraWatch<Classes>;
/// The watch of ResourceClaims.
pub(super) type ResourceClaimWatch = DraWatch<Claims>;

#[cfg(test)]
mod tests;
